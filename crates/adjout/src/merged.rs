//! Live changes an update thread holds for a group, merged per path as they come.

use crate::{Entry, PathKey};
use hashbrown::HashMap;
use std::collections::VecDeque;

/// Live changes merged as they come: the last change of each path, in order of its first
/// appearance. An update thread holding a group's changes keeps them so, and what a path
/// was before its last change is freed at once. They may leave in parts, oldest first
/// ([`Merged::take_front`]); a path changed again after its part left comes again, last.
#[derive(Default)]
pub struct Merged {
    entries: VecDeque<Entry>,
    /// Each path's place: its index in `entries` plus `taken`.
    at: HashMap<PathKey, usize>,
    /// Entries taken from the front so far.
    taken: usize,
}

impl Merged {
    /// Adds changes; returns how many paths are new here.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = Entry>) -> usize {
        let before = self.entries.len();
        for e in entries {
            match self.at.entry(e.key()) {
                hashbrown::hash_map::Entry::Occupied(o) => {
                    if let Some(slot) = self.entries.get_mut(*o.get() - self.taken) {
                        *slot = e;
                    }
                }
                hashbrown::hash_map::Entry::Vacant(v) => {
                    v.insert(self.taken + self.entries.len());
                    self.entries.push_back(e);
                }
            }
        }
        self.entries.len() - before
    }

    /// The oldest `n` changes (or all), taken out.
    pub fn take_front(&mut self, n: usize) -> Vec<Entry> {
        let n = n.min(self.entries.len());
        let part: Vec<Entry> = self.entries.drain(..n).collect();
        for e in &part {
            self.at.remove(&e.key());
        }
        self.taken += n;
        part
    }

    /// All the changes, in order.
    pub fn into_entries(self) -> Vec<Entry> {
        Vec::from(self.entries)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
    fn parts_leave_oldest_first_and_a_path_changed_after_its_part_comes_again_last() {
        let mut m = Merged::default();
        m.extend((1..=5).map(|i| Entry::withdraw(p(i))));
        assert_eq!(prefixes(&m.take_front(2)), vec![p(1), p(2)]);
        assert_eq!(m.len(), 3);
        // p(1) left with the first part: it is new again; p(4) is still held: replaced.
        let mut later = Entry::withdraw(p(4));
        later.source = 9;
        assert_eq!(m.extend([Entry::withdraw(p(1)), later]), 1);
        assert_eq!(prefixes(&m.take_front(2)), vec![p(3), p(4)]);
        let rest = m.take_front(10);
        assert_eq!(prefixes(&rest), vec![p(5), p(1)]);
        assert!(m.is_empty());
        assert!(m.take_front(1).is_empty());
    }
}
