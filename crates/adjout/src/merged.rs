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
    /// Places below this were cut into parts by [`Merged::plan`]...
    planned: u32,
    /// ...and those below this have gone.
    taken: u32,
}

/// A path's last change, what the group advertised before its first ([`Entry::before`]),
/// and its place in the order of first appearance.
struct Change {
    exported: Option<Arc<Exported>>,
    source: u32,
    seq: u32,
    before: u32,
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
                        before: e.before,
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
        (self.planned, self.taken) = (0, 0);
    }

    /// About `n` changes taken out (all if fewer are held): whole attribute sets (the
    /// withdrawals one more), in order of first appearance, the last one cut at the
    /// budget. Parts cut by arrival order would split a set over several parts, and an
    /// UPDATE more for each; cut so, a table in parts takes one more UPDATE per part than
    /// the table at once. Paths that come while planned parts are still held wait for the
    /// next plan (a path changed again keeps its part).
    pub fn take_part(&mut self, n: usize) -> Vec<Entry> {
        if n >= self.paths.len() {
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
        let mut part: Vec<(u32, Entry)> = self
            .paths
            .extract_if(|_, c| c.seq < end)
            .map(|(key, c)| (c.seq, entry(key, c)))
            .collect();
        part.sort_unstable_by_key(|(seq, _)| *seq);
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
            for c in self.paths.values() {
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
                    s.first = s.first.min(c.seq);
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
        for c in self.paths.values_mut() {
            let ptr = c.exported.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
            if let Some(s) = by_ptr.get(&ptr).and_then(|i| sets.get_mut(*i)) {
                c.seq = s.at;
                s.at += 1;
            }
        }
        (self.planned, self.taken, self.next) = (at, 0, at);
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
