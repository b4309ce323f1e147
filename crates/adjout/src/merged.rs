//! Live changes an update thread holds for a group, merged per path as they come.

use crate::{Entry, PathKey};
use hashbrown::{DefaultHashBuilder, HashMap, HashTable};
use ribshard_rib::Exported;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Live changes merged as they come: the last change of each path, in order of its first
/// appearance. An update thread holding a group's changes keeps them so, and what a path
/// was before its last change is freed at once. They may leave in parts
/// ([`Merged::take_part`]); a path changed again after its part left comes again, last.
///
/// The changes sit in chunks that never move, found through a table of their positions (4
/// octets a bucket): about 55 octets a path, and growing copies nothing. A hash map of the
/// changes themselves (49 octets a bucket, at most seven eighths full) held the changes of
/// two full tables in 25 MB, and in 38 MB while it doubled: the largest part of what
/// ribshard needed beyond BIRD's memory when two upstreams without graceful restart sent
/// their tables together.
#[derive(Default)]
pub struct Merged {
    /// Changes by position; `None` where a path left in a part. Each chunk holds
    /// [`CHUNK`] positions and never grows past them.
    chunks: Vec<Vec<Option<Change>>>,
    /// The position of every change held, hashed by its path (and of some that left).
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    /// Changes held (positions used, less those left).
    held: usize,
    /// The next path's place in the order.
    next: u32,
    /// Places below this were cut into parts by [`Merged::plan`]...
    planned: u32,
    /// ...and those below this have gone.
    taken: u32,
}

/// Positions a chunk of [`Merged`] holds.
const CHUNK: usize = 4096;

/// A path's last change, what the group advertised before its first ([`Entry::before`]),
/// and its place in the order (of first appearance, or as [`Merged::plan`] placed it).
struct Change {
    key: PathKey,
    exported: Option<Arc<Exported>>,
    source: u32,
    before: u32,
    place: u32,
}

/// The change at `pos`.
fn at(chunks: &[Vec<Option<Change>>], pos: u32) -> Option<&Change> {
    let pos = pos as usize;
    chunks.get(pos / CHUNK)?.get(pos % CHUNK)?.as_ref()
}

fn at_mut(chunks: &mut [Vec<Option<Change>>], pos: u32) -> Option<&mut Change> {
    let pos = pos as usize;
    chunks.get_mut(pos / CHUNK)?.get_mut(pos % CHUNK)?.as_mut()
}

impl Merged {
    /// Adds changes; returns how many paths are new here.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = Entry>) -> usize {
        let before = self.held;
        for e in entries {
            let key = e.key();
            let hash = self.hasher.hash_one(key);
            let chunks = &mut self.chunks;
            let found = self
                .index
                .find(hash, |&p| at(chunks, p).is_some_and(|c| c.key == key))
                .copied();
            if let Some(c) = found.and_then(|p| at_mut(chunks, p)) {
                c.exported = e.exported;
                c.source = e.source;
                continue;
            }
            let place = self.next;
            self.push(
                hash,
                Change {
                    key,
                    exported: e.exported,
                    source: e.source,
                    before: e.before,
                    place,
                },
            );
            self.next += 1;
            if self.next == u32::MAX {
                self.renumber();
            }
        }
        self.held - before
    }

    /// Puts `c` at the next position.
    fn push(&mut self, hash: u64, c: Change) {
        if self.chunks.last().is_none_or(|k| k.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let pos = self.positions();
        if let Some(k) = self.chunks.last_mut() {
            k.push(Some(c));
        }
        let (chunks, hasher) = (&self.chunks, &self.hasher);
        self.index.insert_unique(hash, pos as u32, |&p| {
            at(chunks, p).map_or(0, |c| hasher.hash_one(c.key))
        });
        self.held += 1;
    }

    /// Positions used: every chunk but the last is full.
    fn positions(&self) -> usize {
        self.chunks.len().saturating_sub(1) * CHUNK + self.chunks.last().map_or(0, Vec::len)
    }

    /// Every change held, with its place; what is held is then empty.
    fn drain(&mut self) -> impl Iterator<Item = Change> {
        let chunks = std::mem::take(&mut self.chunks);
        self.index.clear();
        self.held = 0;
        chunks.into_iter().flatten().flatten()
    }

    /// Places from 0 again, in the same order (after four billion paths held at once or
    /// one after another without the group ever emptying).
    fn renumber(&mut self) {
        let mut places: Vec<u32> = self
            .chunks
            .iter()
            .flatten()
            .flatten()
            .map(|c| c.place)
            .collect();
        places.sort_unstable();
        for c in self.chunks.iter_mut().flatten().flatten() {
            c.place = places.binary_search(&c.place).unwrap_or(0) as u32;
        }
        self.next = places.len() as u32;
        (self.planned, self.taken) = (0, 0);
    }

    /// About `n` changes taken out (all if fewer are held): whole attribute sets (the
    /// withdrawals one more), in order of first appearance, the last one cut at the
    /// budget. Parts cut by arrival order would split a set over several parts, and an
    /// UPDATE more for each; cut so, a table in parts takes one more UPDATE per part than
    /// the table at once. Paths that come while planned parts are still held wait for the
    /// next plan (a path changed again keeps its part).
    pub fn take_part(&mut self, n: usize) -> Vec<Entry> {
        if n >= self.held {
            return std::mem::take(self).into_entries();
        }
        if self.taken >= self.planned {
            self.plan();
        }
        let end = self
            .taken
            .saturating_add(u32::try_from(n).unwrap_or(u32::MAX))
            .min(self.planned);
        self.taken = end;
        let mut part: Vec<(u32, Entry)> = Vec::new();
        for chunk in &mut self.chunks {
            for slot in chunk {
                if slot.as_ref().is_none_or(|c| c.place >= end) {
                    continue;
                }
                // Its position stays in the index, naming nothing, until what is held
                // moves up (below) or empties: a lookup never matches an empty position.
                let Some(c) = slot.take() else { continue };
                part.push((c.place, entry(c)));
            }
        }
        self.held -= part.len();
        // Positions left behind are reused only by a new start: once they outnumber the
        // changes held, what is held moves up, so a group that never empties does not
        // keep every path it ever held.
        if self.positions() - self.held > self.held.max(CHUNK) {
            let kept: Vec<Change> = self.drain().collect();
            for c in kept {
                let hash = self.hasher.hash_one(c.key);
                self.push(hash, c);
            }
        }
        part.sort_unstable_by_key(|(place, _)| *place);
        part.into_iter().map(|(_, e)| e).collect()
    }

    /// Places every path held again, from 0, each attribute set's together, the sets in
    /// order of first appearance (by pointer first, cheap, then by content: shards intern
    /// attribute sets apart); parts are then runs of places. Once for all the parts of
    /// what is held, not once a part.
    fn plan(&mut self) {
        struct Set {
            size: u32,
            first: u32,
            /// Its first place in the new order, then the next free one.
            at: u32,
        }
        let mut sets: Vec<Set> = Vec::new();
        let mut by_ptr: HashMap<*const Exported, usize> = HashMap::new();
        {
            let mut by_content: HashMap<&Exported, usize> = HashMap::new();
            for c in self.chunks.iter().flatten().flatten() {
                // Withdrawals are one set (the null pointer).
                let ptr = c.exported.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
                let i = *by_ptr.entry(ptr).or_insert_with(|| {
                    let mut new = || {
                        sets.push(Set {
                            size: 0,
                            first: u32::MAX,
                            at: 0,
                        });
                        sets.len() - 1
                    };
                    match &c.exported {
                        Some(x) => *by_content.entry(x).or_insert_with(new),
                        None => new(),
                    }
                });
                if let Some(s) = sets.get_mut(i) {
                    s.size += 1;
                    s.first = s.first.min(c.place);
                }
            }
        }
        let mut order: Vec<usize> = (0..sets.len()).collect();
        order.sort_unstable_by_key(|i| sets.get(*i).map_or(u32::MAX, |s| s.first));
        let mut at = 0;
        for i in order {
            if let Some(s) = sets.get_mut(i) {
                s.at = at;
                at += s.size;
            }
        }
        // Within a set the order does not matter (its paths share UPDATEs).
        for c in self.chunks.iter_mut().flatten().flatten() {
            let ptr = c.exported.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
            if let Some(s) = by_ptr.get(&ptr).and_then(|i| sets.get_mut(*i)) {
                c.place = s.at;
                s.at += 1;
            }
        }
        (self.planned, self.taken, self.next) = (at, 0, at);
    }

    /// All the changes, in order.
    pub fn into_entries(mut self) -> Vec<Entry> {
        let mut all: Vec<(u32, Entry)> = self.drain().map(|c| (c.place, entry(c))).collect();
        all.sort_unstable_by_key(|(place, _)| *place);
        all.into_iter().map(|(_, e)| e).collect()
    }

    pub fn len(&self) -> usize {
        self.held
    }

    pub fn is_empty(&self) -> bool {
        self.held == 0
    }
}

fn entry(c: Change) -> Entry {
    let (prefix, path_id) = c.key;
    Entry {
        prefix,
        exported: c.exported,
        source: c.source,
        path_id,
        before: c.before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ribshard_wire::Prefix;

    fn p(i: u8) -> Prefix {
        Prefix::v4(std::net::Ipv4Addr::new(10, i, 0, 0), 16).unwrap()
    }

    fn prefixes(v: &[Entry]) -> Vec<Prefix> {
        v.iter().map(|e| e.prefix).collect()
    }

    #[test]
    fn a_path_changed_again_keeps_its_place_and_its_last_change() {
        let mut m = Merged::default();
        assert_eq!(m.extend([Entry::withdraw(p(1)), Entry::withdraw(p(2))]), 2);
        let mut again = Entry::withdraw(p(1));
        again.source = 7;
        assert_eq!(m.extend([again, Entry::withdraw(p(3))]), 1);
        let all = m.into_entries();
        assert_eq!(prefixes(&all), vec![p(1), p(2), p(3)]);
        assert_eq!(all[0].source, 7);
    }

    #[test]
    fn a_path_changed_again_keeps_what_was_advertised_before_its_first_change() {
        let mut m = Merged::default();
        let mut first = announce(1, b'a');
        first.before = 7;
        let mut again = announce(1, b'b');
        again.before = first.source;
        m.extend([first, again]);
        let all = m.into_entries();
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[0].before, 7,
            "what the members held before the changes held"
        );
        assert_eq!(all[0].exported.as_ref().map(|e| &*e.attrs), Some(&b"b"[..]));
    }

    fn announce(i: u8, attrs: u8) -> Entry {
        // A new pointer each time: sets are told apart by content.
        let exported = Arc::new(Exported {
            family: ribshard_wire::Family::Ipv4Unicast,
            attrs: vec![attrs].into_boxed_slice(),
            mp_next_hop: Box::new([]),
        });
        Entry::announce(p(i), exported, 1, 0)
    }

    #[test]
    fn parts_take_whole_attribute_sets_in_order_of_first_appearance() {
        let mut m = Merged::default();
        // Sets: a = {1, 3, 6}, withdrawals = {2, 5}, b = {4, 7, 8}.
        m.extend([
            announce(1, b'a'),
            Entry::withdraw(p(2)),
            announce(3, b'a'),
            announce(4, b'b'),
            Entry::withdraw(p(5)),
            announce(6, b'a'),
            announce(7, b'b'),
            announce(8, b'b'),
        ]);
        // 6: all of a, both withdrawals, and one of b.
        let first = sorted(m.take_part(6));
        let b: Vec<Prefix> = [4, 7, 8].map(p).to_vec();
        let (of_b, rest): (Vec<Prefix>, Vec<Prefix>) = first.iter().partition(|x| b.contains(x));
        assert_eq!(rest, vec![p(1), p(2), p(3), p(5), p(6)]);
        assert_eq!(of_b.len(), 1);
        assert_eq!(m.len(), 2);
        // p(1) left with the first part: new again, and waits for the planned rest of b.
        assert_eq!(m.extend([announce(1, b'b')]), 1);
        let second = sorted(m.take_part(2));
        assert_eq!(second.len(), 2);
        assert!(second.iter().all(|x| b.contains(x) && !of_b.contains(x)));
        assert_eq!(prefixes(&m.take_part(2)), vec![p(1)]);
        assert!(m.is_empty());
        assert!(m.take_part(1).is_empty());
    }

    fn sorted(v: Vec<Entry>) -> Vec<Prefix> {
        let mut v = prefixes(&v);
        v.sort();
        v
    }

    /// Past a few chunks of positions left behind, what is held moves up: it must still be
    /// found (a change again replaces it, not adds it) and leave once, in its place.
    #[test]
    fn what_is_held_moves_up_and_is_still_found() {
        let n = 3 * CHUNK as u32;
        let q = |i: u32| Prefix::v4(std::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap();
        let with = |i: u32, source: u32| {
            let mut e = Entry::withdraw(q(i));
            e.source = source;
            e
        };
        let mut m = Merged::default();
        assert_eq!(m.extend((0..n).map(|i| with(i, 1))), n as usize);
        let mut seen = Vec::new();
        // Two thirds out: the positions left outnumber the paths held, which move up.
        while m.len() > CHUNK {
            seen.extend(m.take_part(CHUNK / 2));
        }
        assert_eq!(m.chunks.iter().map(Vec::len).sum::<usize>(), m.len());
        // Changed again: found where they moved, not added.
        let held: Vec<u32> = (0..n)
            .filter(|i| !seen.iter().any(|e| e.prefix == q(*i)))
            .collect();
        assert_eq!(m.extend(held.iter().map(|i| with(*i, 2))), 0);
        let rest = m.take_part(usize::MAX);
        assert_eq!(rest.len(), held.len());
        assert!(rest.iter().all(|e| e.source == 2));
        assert!(m.is_empty());
        seen.extend(rest);
        let mut got: Vec<Prefix> = prefixes(&seen);
        got.sort();
        let mut want: Vec<Prefix> = (0..n).map(q).collect();
        want.sort();
        assert_eq!(got, want, "every path once");
    }

    #[test]
    fn many_parts_lose_nothing_and_take_nothing_twice() {
        let mut m = Merged::default();
        m.extend((0..200u8).map(|i| announce(i, i % 7)));
        let mut seen = Vec::new();
        while !m.is_empty() {
            let part = m.take_part(13);
            assert!(!part.is_empty() && part.len() <= 13);
            seen.extend(prefixes(&part));
        }
        seen.sort();
        let mut want: Vec<Prefix> = (0..200u8).map(p).collect();
        want.sort();
        assert_eq!(seen, want);
    }
}
