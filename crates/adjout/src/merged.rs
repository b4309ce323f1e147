//! Live changes an update thread holds for a group, merged per path as they come.

use crate::{Entry, PathKey};
use hashbrown::HashMap;
use ribshard_rib::Exported;
use std::sync::Arc;

/// Live changes merged as they come: the last change of each path, in order of its first
/// appearance. An update thread holding a group's changes keeps them so, and what a path
/// was before its last change is freed at once. They may leave in parts
/// ([`Merged::take_part`]); a path changed again after its part left comes again, last.
///
/// One table entry per path (about 41 octets, in a table at most half empty): a whole
/// table's changes held while it arrives cost less than its Adj-RIB-In.
#[derive(Default)]
pub struct Merged {
    paths: HashMap<PathKey, Change>,
    /// The next path's place in the order.
    next: u32,
}

/// A path's last change, and its place in the order of first appearance.
struct Change {
    exported: Option<Arc<Exported>>,
    source: u32,
    seq: u32,
}

impl Merged {
    /// Adds changes; returns how many paths are new here.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = Entry>) -> usize {
        let before = self.paths.len();
        for e in entries {
            match self.paths.entry(e.key()) {
                hashbrown::hash_map::Entry::Occupied(mut o) => {
                    let c = o.get_mut();
                    c.exported = e.exported;
                    c.source = e.source;
                }
                hashbrown::hash_map::Entry::Vacant(v) => {
                    v.insert(Change {
                        exported: e.exported,
                        source: e.source,
                        seq: self.next,
                    });
                    self.next += 1;
                    if self.next == u32::MAX {
                        self.renumber();
                    }
                }
            }
        }
        self.paths.len() - before
    }

    /// Places from 0 again, in the same order (after four billion paths held at once or
    /// one after another without the group ever emptying).
    fn renumber(&mut self) {
        let mut seqs: Vec<u32> = self.paths.values().map(|c| c.seq).collect();
        seqs.sort_unstable();
        for c in self.paths.values_mut() {
            c.seq = seqs.binary_search(&c.seq).unwrap_or(0) as u32;
        }
        self.next = seqs.len() as u32;
    }

    /// About `n` changes taken out (all if fewer are held): whole attribute sets (the
    /// withdrawals one more), in order of first appearance, and of the last one only its
    /// first paths to fit. Parts cut by arrival order would split a set over several
    /// parts, and an UPDATE more for each; cut so, a table in parts takes one more UPDATE
    /// per part than the table at once.
    pub fn take_part(&mut self, n: usize) -> Vec<Entry> {
        if n >= self.paths.len() {
            return std::mem::take(self).into_entries();
        }
        // Each set's size and first place: by pointer first (cheap), then by content
        // (shards intern attribute sets apart).
        struct Set {
            size: usize,
            first: u32,
            /// Paths placed before this go with the part.
            below: u32,
        }
        let mut sets: Vec<Set> = Vec::new();
        let mut by_ptr: HashMap<*const Exported, usize> = HashMap::new();
        {
            let mut by_content: HashMap<&Exported, usize> = HashMap::new();
            for c in self.paths.values() {
                // Withdrawals are one set (the null pointer).
                let ptr = c.exported.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
                let i = *by_ptr.entry(ptr).or_insert_with(|| {
                    let mut new = || {
                        sets.push(Set {
                            size: 0,
                            first: u32::MAX,
                            below: 0,
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
                    s.first = s.first.min(c.seq);
                }
            }
        }
        // Whole sets while they fit; the last one cut at the budget, its first paths.
        let mut order: Vec<usize> = (0..sets.len()).collect();
        order.sort_unstable_by_key(|i| sets.get(*i).map_or(u32::MAX, |s| s.first));
        let mut left = n;
        let mut cut = None;
        for i in order {
            let Some(s) = sets.get_mut(i) else { continue };
            if s.size <= left {
                s.below = u32::MAX;
                left -= s.size;
            } else {
                cut = Some((i, left));
                break;
            }
            if left == 0 {
                break;
            }
        }
        let set_of = |c: &Change| {
            let ptr = c.exported.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
            by_ptr.get(&ptr).copied().unwrap_or(usize::MAX)
        };
        if let Some((i, k)) = cut.filter(|(_, k)| *k > 0) {
            let mut seqs: Vec<u32> = self
                .paths
                .values()
                .filter(|c| set_of(c) == i)
                .map(|c| c.seq)
                .collect();
            seqs.sort_unstable();
            if let (Some(s), Some(q)) = (sets.get_mut(i), seqs.get(k)) {
                s.below = *q;
            }
        }
        let mut part: Vec<(u32, Entry)> = self
            .paths
            .extract_if(|_, c| sets.get(set_of(c)).is_some_and(|s| c.seq < s.below))
            .map(|(key, c)| (c.seq, entry(key, c)))
            .collect();
        part.sort_unstable_by_key(|(seq, _)| *seq);
        part.into_iter().map(|(_, e)| e).collect()
    }

    /// All the changes, in order.
    pub fn into_entries(self) -> Vec<Entry> {
        let mut all: Vec<(u32, Entry)> = self
            .paths
            .into_iter()
            .map(|(key, c)| (c.seq, entry(key, c)))
            .collect();
        all.sort_unstable_by_key(|(seq, _)| *seq);
        all.into_iter().map(|(_, e)| e).collect()
    }

    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

fn entry((prefix, path_id): PathKey, c: Change) -> Entry {
    Entry {
        prefix,
        exported: c.exported,
        source: c.source,
        path_id,
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

    fn announce(i: u8, attrs: u8) -> Entry {
        // A new pointer each time: sets are told apart by content.
        Entry {
            prefix: p(i),
            exported: Some(Arc::new(Exported {
                family: ribshard_wire::Family::Ipv4Unicast,
                attrs: vec![attrs].into_boxed_slice(),
                mp_next_hop: Box::new([]),
            })),
            source: 1,
            path_id: 0,
        }
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
        // 6: all of a, both withdrawals, and the first of b.
        assert_eq!(
            prefixes(&m.take_part(6)),
            vec![p(1), p(2), p(3), p(4), p(5), p(6)]
        );
        assert_eq!(m.len(), 2);
        // p(1) left with the first part: new again; p(8) is still held: replaced in place.
        assert_eq!(m.extend([announce(8, b'c'), announce(1, b'b')]), 1);
        // b = {7, 1} now, c = {8} first: 7 came first, so b leads.
        assert_eq!(prefixes(&m.take_part(2)), vec![p(7), p(1)]);
        assert_eq!(prefixes(&m.take_part(2)), vec![p(8)]);
        assert!(m.is_empty());
        assert!(m.take_part(1).is_empty());
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
