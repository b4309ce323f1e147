//! RPKI in a shard: the snapshot its import policies validate against, and the index that
//! finds the prefixes inside a changed ROA prefix without walking the table.
//!
//! The index is a sorted list of the shard's prefixes (as [`Key`]s: a ROA prefix's routes
//! are one range of it) and an unsorted list of those added since it was sorted; adding a
//! prefix is a push, the hot path's only cost, and the two are merged when a snapshot is
//! applied. Prefixes that went away are dropped from it as they are found missing.

use super::{PeerIndex, Reimport, Shard};
use ribshard_rpki::{Key, Snapshot, Validity};
use ribshard_wire::Prefix;
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct RpkiIndex {
    sorted: Vec<Key>,
    added: Vec<Key>,
}

impl RpkiIndex {
    #[inline]
    pub(crate) fn add(&mut self, p: &Prefix) {
        self.added.push(Key::of(p));
        // A prefix that flaps is pushed again each time it comes back: merged once the
        // pushes are twice the list (and a million), so churn between snapshots cannot grow
        // it without end, while loading tables never waits for a merge.
        if self.added.len() >= (1 << 20).max(2 * self.sorted.len()) {
            self.settle();
        }
    }

    fn settle(&mut self) {
        if self.added.is_empty() {
            return;
        }
        self.added.sort_unstable();
        self.added.dedup();
        let old = std::mem::take(&mut self.sorted);
        let mut out = Vec::with_capacity(old.len() + self.added.len());
        let (mut a, mut b) = (old.into_iter().peekable(), self.added.drain(..).peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x < y => a.next(),
                (Some(x), Some(y)) if x > y => b.next(),
                (Some(_), Some(_)) => {
                    b.next();
                    a.next()
                }
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            out.extend(next);
        }
        self.sorted = out;
    }

    /// The indexed prefixes inside each of `roas` (sorted), in order.
    fn inside(&mut self, roas: &[Key]) -> Vec<Key> {
        self.settle();
        let mut out = Vec::new();
        let mut from = 0usize;
        for r in roas {
            let tail = self.sorted.get(from..).unwrap_or(&[]);
            let start = from + tail.partition_point(|k| k < r);
            let last = r.last();
            let rest = self.sorted.get(start..).unwrap_or(&[]);
            let end = start + rest.partition_point(|k| *k <= last);
            out.extend(
                self.sorted
                    .get(start..end)
                    .unwrap_or(&[])
                    .iter()
                    .filter(|k| r.covers(k)),
            );
            // Nested ROA prefixes come in order too, but may reach back: only skip what
            // lies before this one's start.
            from = start;
        }
        out.dedup();
        out
    }

    fn forget(&mut self, gone: &[Key]) {
        if !gone.is_empty() {
            self.sorted.retain(|k| gone.binary_search(k).is_err());
        }
    }
}

impl Shard {
    /// The RPKI snapshot import policies validate against now.
    pub fn rpki(&self) -> Option<&Arc<Snapshot>> {
        self.rpki.as_ref()
    }

    /// Takes a new RPKI snapshot: the paths, inside a changed ROA prefix, of peers whose
    /// import policy reads the validation state are imported again (found through the
    /// index, not a table walk), and their prefixes decided again where that changed them.
    /// Returns how many prefixes were looked at, and the peers whose import policy reads
    /// the ASPA state when the ASPA records changed (their paths need a re-import walk:
    /// any path may be affected).
    pub fn set_rpki(&mut self, snapshot: Arc<Snapshot>) -> (usize, Vec<PeerIndex>) {
        if self.rpki.is_none() {
            self.index_all();
        }
        let aspa_peers: Vec<PeerIndex> = match snapshot.aspa_changed {
            true => self.peers_reading(|r| r.aspa),
            false => Vec::new(),
        };
        // The peers whose import reads validation-state, with their policy.
        let rov_peers: Vec<(PeerIndex, Arc<crate::import::Import>)> = self
            .peers_reading(|r| r.validity)
            .into_iter()
            .filter_map(|p| Some((p, self.imports.get(p as usize).cloned().flatten()?)))
            .collect();
        self.rpki = Some(snapshot.clone());
        if rov_peers.is_empty() {
            return (0, aspa_peers);
        }
        let inside = self.rpki_index.inside(&snapshot.changed);
        let mut gone = Vec::new();
        for k in &inside {
            let prefix = k.prefix();
            let Some((at, d)) = self.dests.get_mut(&prefix) else {
                gone.push(*k);
                continue;
            };
            let mut n = 0;
            for (peer, imp) in &rov_peers {
                n += Reimport {
                    imp: Some(imp),
                    peer: *peer,
                    cache: &mut self.import_cache,
                    rpki: self.rpki.as_deref(),
                    arrival: &mut self.arrival,
                    books: (&mut self.tally, &mut self.next_hops, &mut self.post_policy),
                }
                .paths(&prefix, d, at, prefix.family().index());
            }
            if n > 0 {
                Self::touch(&mut self.journal, at, d);
            }
        }
        self.rpki_index.forget(&gone);
        (inside.len() - gone.len(), aspa_peers)
    }

    /// Indexes every prefix here now; from then on each new one is indexed as it comes
    /// (while `rpki` is set).
    pub(super) fn index_all(&mut self) {
        self.rpki_index.sorted = self.dests.keys().map(|p| Key::of(&p)).collect();
        self.rpki_index.sorted.sort_unstable();
        self.rpki_index.added.clear();
    }

    /// A path's origin validation state against the shard's RPKI data, if it has some.
    pub(crate) fn validity_of(&self, prefix: &Prefix, p: &super::Path) -> Option<Validity> {
        let rpki = self.rpki.as_ref()?;
        let raw = p.attrs.as_received().raw();
        let (_, _, origin) = crate::import::as_path(raw, self.peer(p.peer).local_as);
        Some(rpki.vrps.validate(prefix, origin))
    }

    fn peers_reading(&self, f: impl Fn(ribshard_policy::ReadsRpki) -> bool) -> Vec<PeerIndex> {
        self.imports
            .iter()
            .enumerate()
            .filter(|(_, i)| i.as_ref().is_some_and(|i| f(i.chain.reads_rpki())))
            .map(|(p, _)| p as PeerIndex)
            .collect()
    }
}
