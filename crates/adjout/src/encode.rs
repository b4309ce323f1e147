//! Packing a group's entries into UPDATEs once for all its members.
//!
//! Withdrawals go first, then announcements grouped by attribute set. A member is never sent
//! the paths it is the source of, so when some members are sources (route-server and
//! route-reflector clients), each one's paths are packed into one span of the encoding: it
//! gets the bytes around its span, the others all of them, and nothing is encoded per member.

use crate::{Entry, Outgoing, UpdateGroup, PACK_BELOW};
use bytes::Bytes;
use hashbrown::{HashMap, HashSet};
use ribshard_rib::Exported;
use ribshard_wire::{Family, Nlri};
use std::ops::Range;
use std::sync::Arc;

/// No member is the source of these paths.
const SHARED: u32 = u32::MAX;

/// UPDATEs for a group's members; each span holds the announcements of paths whose source
/// is that member.
pub(crate) struct Encoded {
    out: Outgoing,
    spans: Vec<Span>,
}

struct Span {
    peer: u32,
    bytes: Range<usize>,
    messages: Range<u32>,
}

impl Encoded {
    /// Octets of the whole encoding.
    pub(crate) fn len(&self) -> usize {
        self.out.bytes.len()
    }

    /// What member `peer` is sent: everything but its own paths' span, in at most two
    /// pieces of the same buffer (no copy).
    pub(crate) fn for_member(&self, peer: u32) -> Vec<Outgoing> {
        let Some(s) = self.spans.iter().find(|s| s.peer == peer) else {
            return vec![self.out.clone()];
        };
        let (len, total) = (self.out.bytes.len(), self.out.messages);
        [
            (0..s.bytes.start, s.messages.start),
            (s.bytes.end..len, total - s.messages.end),
        ]
        .into_iter()
        .filter(|(r, _)| !r.is_empty())
        .map(|(r, n)| Outgoing::updates(self.out.bytes.slice(r), n))
        .collect()
    }
}

impl UpdateGroup {
    /// Packs entries into UPDATEs for every member alike. `None` if there is nothing to send.
    pub(crate) fn encode(&mut self, entries: &[Entry]) -> Option<Outgoing> {
        self.encode_apart(entries, &HashSet::new()).map(|e| e.out)
    }

    /// Packs entries into UPDATEs: withdrawals first, then announcements grouped by
    /// attribute set in order of first appearance, except that the paths whose source is
    /// one of `apart` come last, each source's together (a set two such sources share is
    /// sent once for each).
    pub(crate) fn encode_apart(
        &mut self,
        entries: &[Entry],
        apart: &HashSet<u32>,
    ) -> Option<Encoded> {
        if entries.is_empty() {
            return None;
        }
        self.buf.clear();
        let mut withdrawn: [Vec<Nlri>; 2] = [Vec::new(), Vec::new()];
        let mut sets: Vec<(Arc<Exported>, u32, Vec<Nlri>)> = Vec::new();
        // By pointer first (cheap), then by content: shards intern attribute sets apart, so
        // one set reaches a group as several pointers when changes of several shards merge.
        let mut index: HashMap<(*const Exported, u32), usize> = HashMap::new();
        let mut by_content: HashMap<(Arc<Exported>, u32), usize> = HashMap::new();
        let add_path = self.spec.params.add_path;
        for Entry {
            prefix,
            exported: e,
            source,
            path_id,
            ..
        } in entries
        {
            let f = prefix.family();
            let nlri = Nlri {
                // Add-Path send (RFC 7911): each path under its identifier; a group that
                // sends one path per prefix sends it as 1.
                path_id: add_path
                    .get(f.index())
                    .copied()
                    .unwrap_or(false)
                    .then_some(if *path_id == 0 { 1 } else { *path_id }),
                prefix: *prefix,
            };
            match e {
                None => {
                    if let Some(w) = withdrawn.get_mut(f.index()) {
                        w.push(nlri);
                    }
                }
                Some(e) => {
                    let by = if apart.contains(source) {
                        *source
                    } else {
                        SHARED
                    };
                    let i = *index.entry((Arc::as_ptr(e), by)).or_insert_with(|| {
                        *by_content.entry((e.clone(), by)).or_insert_with(|| {
                            sets.push((e.clone(), by, Vec::new()));
                            sets.len() - 1
                        })
                    });
                    if let Some((_, _, v)) = sets.get_mut(i) {
                        v.push(nlri);
                    }
                }
            }
        }
        // Stable: the shared sets first, then each source's, in order of first appearance.
        if !apart.is_empty() {
            sets.sort_by_key(|(_, by, _)| if *by == SHARED { None } else { Some(*by) });
        }
        let mut messages = 0;
        for (f, w) in [Family::Ipv4Unicast, Family::Ipv6Unicast]
            .into_iter()
            .zip(&withdrawn)
        {
            messages += self.builder.withdraw(f, w, &mut self.buf);
            self.stats.prefixes_withdrawn += w.len() as u64;
        }
        let mut spans: Vec<Span> = Vec::new();
        for (e, by, nlri) in &sets {
            if *by != SHARED && spans.last().is_none_or(|s| s.peer != *by) {
                spans.push(Span {
                    peer: *by,
                    bytes: self.buf.len()..self.buf.len(),
                    messages: messages as u32..messages as u32,
                });
            }
            match self
                .builder
                .announce(&e.attrs, e.family, &e.mp_next_hop, nlri, &mut self.buf)
            {
                Ok(n) => {
                    messages += n;
                    self.stats.prefixes_advertised += nlri.len() as u64;
                }
                Err(err) => {
                    // Only an attribute set too large for any UPDATE to these members gets
                    // here (a path received with extended messages, RFC 8654): the prefixes
                    // cannot be advertised, and an older, smaller path the members may hold
                    // is withdrawn rather than left standing (RFC 8654 section 4).
                    tracing::warn!(group = %self.spec.name, prefixes = nlri.len(), "withdrawn, not advertised: {err}");
                    messages += self.builder.withdraw(e.family, nlri, &mut self.buf);
                    self.stats.prefixes_withdrawn += nlri.len() as u64;
                }
            }
            if let Some(s) = spans.last_mut().filter(|_| *by != SHARED) {
                s.bytes.end = self.buf.len();
                s.messages.end = messages as u32;
            }
        }
        self.stats.updates_built += messages as u64;
        self.stats.bytes_built += self.buf.len() as u64;
        if self.buf.is_empty() {
            return None;
        }
        // A large encoding (a whole table dump) is handed over rather than copied, and not
        // kept as the group's buffer for good.
        let bytes = if self.buf.len() > PACK_BELOW {
            Bytes::from(std::mem::take(&mut self.buf))
        } else {
            Bytes::copy_from_slice(&self.buf)
        };
        Some(Encoded {
            out: Outgoing::updates(bytes, messages as u32),
            spans,
        })
    }
}
