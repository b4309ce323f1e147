//! Add-Path send (RFC 7911): the paths each prefix offers the update groups that send
//! several per prefix, kept per prefix as last reported. A change then tells a group which
//! of its path identifiers went and which came (it needs nothing of the paths gone), and a
//! table dump reads the same list, so the live stream and dumps agree.
//!
//! The list is the shard's, not a group's: the union of every group's selection (the best N
//! for the largest N configured, the best path's equal-cost set, or every eligible path), in
//! decision order, each path marked whether it is in the equal-cost set. A group takes its
//! part: the first N, the marked ones, or all. So one list serves every group, and it moves
//! with its prefix when the shards are re-sharded.
//!
//! Path identifiers are ours, per prefix (RFC 7911 section 3: unique per prefix and
//! session, meaningless elsewhere): a path received without one (identifier 0) is sent as
//! its peer index + 1; a path received with one (from an Add-Path peer) gets the smallest
//! identifier from 2^31 that the prefix's list does not use. A path keeps its identifier
//! while it stays in the list, also when it is replaced (the receiver replaces it too).

use super::{Path, PeerIndex};
use crate::decision::{best_path, multipath_equal, Candidate};
use crate::prefix_map::Handle;
use smallvec::SmallVec;

/// Identifiers handed to paths received with one of their own start here; below are peer
/// indexes + 1.
const ALLOCATED: u32 = 1 << 31;

/// What the shard keeps ready for the groups that send several paths per prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AddPathKeep {
    /// The best N paths, for the largest N any group sends (0: none sends best N).
    pub ranked: usize,
    /// Some group sends every eligible path.
    pub all: bool,
    /// Some group sends the best path's equal-cost set.
    pub equal_cost: bool,
}

impl AddPathKeep {
    pub fn any(&self) -> bool {
        self.ranked > 1 || self.all || self.equal_cost
    }
}

/// Which of a prefix's offered paths a group sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddPathSelect {
    /// The best N (Junos `path-count N`).
    Best(usize),
    /// Every eligible path (`send all`).
    All,
    /// The best path and those equal to it (Junos `path-selection-mode equal-cost-paths`),
    /// at most N.
    EqualCost(usize),
}

impl AddPathSelect {
    /// This group's part of a prefix's list.
    pub fn pick<'a, T>(
        &self,
        list: &'a [T],
        equal_cost: impl Fn(&T) -> bool + 'a,
    ) -> impl Iterator<Item = &'a T> + 'a {
        let (n, only_equal) = match *self {
            AddPathSelect::Best(n) => (n, false),
            AddPathSelect::All => (usize::MAX, false),
            AddPathSelect::EqualCost(n) => (n, true),
        };
        list.iter()
            .filter(move |x| !only_equal || equal_cost(x))
            .take(n)
    }
}

/// One path a prefix offers, in decision order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offered {
    pub peer: PeerIndex,
    /// The identifier it was received with (0: none).
    pub received_id: u32,
    /// Its version ([`Path::arrival`]): a replaced path is sent again.
    pub arrival: u32,
    /// The identifier it is sent with.
    pub path_id: u32,
    /// In the best path's equal-cost set (the best path itself included).
    pub equal_cost: bool,
}

/// A prefix's list before and after a decision, for the groups that send several paths.
#[derive(Clone, Debug, Default)]
pub struct AddPathChange {
    pub old: Vec<Offered>,
    pub new: Vec<(Offered, Path)>,
}

/// What one group is told of a prefix's change: identifiers to withdraw, and paths to send
/// (each with whether the group's part held its identifier before: if export now refuses
/// the path, that identifier is withdrawn instead).
#[derive(Debug, Default)]
pub struct GroupDiff<'a> {
    pub withdrawn: SmallVec<[u32; 2]>,
    pub sent: SmallVec<[(&'a Offered, &'a Path, bool); 2]>,
}

impl AddPathChange {
    /// The group's part of the old and new lists, compared by identifier: a path that went
    /// is withdrawn, one that came or changed (a new version) is sent.
    pub fn for_group(&self, select: AddPathSelect) -> GroupDiff<'_> {
        // Each change is one of hundreds of thousands: nothing allocated for a few paths.
        let old: SmallVec<[&Offered; 4]> = select.pick(&self.old, |o| o.equal_cost).collect();
        let new: SmallVec<[&(Offered, Path); 4]> =
            select.pick(&self.new, |(o, _)| o.equal_cost).collect();
        let mut d = GroupDiff::default();
        for o in &old {
            if !new.iter().any(|(n, _)| n.path_id == o.path_id) {
                d.withdrawn.push(o.path_id);
            }
        }
        for (n, path) in new {
            let before = old.iter().find(|o| o.path_id == n.path_id);
            if before.is_some_and(|o| o.arrival == n.arrival) {
                continue;
            }
            d.sent.push((n, path, before.is_some()));
        }
        d
    }
}

pub(super) type OfferedList = SmallVec<[Offered; 2]>;

/// Each prefix's list, by where the prefix lies in the shard's table (its handle), so a
/// decision reaches it without hashing and a prefix costs 56 octets: an empty list is none.
/// The table removes a prefix only once it has no path, when its list is empty too, so a
/// position given to another prefix never finds an old list.
#[derive(Debug, Default)]
pub(super) struct OfferedLists {
    /// Per family (the handle's top bit), by arena position.
    by_at: [Vec<OfferedList>; 2],
}

impl OfferedLists {
    fn slot(h: Handle) -> (usize, usize) {
        let raw = h.raw();
        (usize::from(raw >> 31 != 0), (raw & !(1 << 31)) as usize)
    }

    pub(super) fn get(&self, h: Handle) -> &[Offered] {
        let (f, i) = Self::slot(h);
        self.by_at
            .get(f)
            .and_then(|v| v.get(i))
            .map_or(&[][..], |l| &l[..])
    }

    pub(super) fn set(&mut self, h: Handle, list: OfferedList) {
        let (f, i) = Self::slot(h);
        let Some(v) = self.by_at.get_mut(f) else {
            return;
        };
        if i >= v.len() {
            if list.is_empty() {
                return;
            }
            v.resize(i + 1, OfferedList::new());
        }
        if let Some(x) = v.get_mut(i) {
            *x = list;
        }
    }

    /// Takes a prefix's list out (a re-shard moves it).
    pub(super) fn take(&mut self, h: Handle) -> OfferedList {
        let (f, i) = Self::slot(h);
        self.by_at
            .get_mut(f)
            .and_then(|v| v.get_mut(i))
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

/// The list a prefix offers now: its eligible paths in decision order as far as `keep`
/// needs, identifiers carried over from `old`. `eligible` says which of `paths` may be
/// chosen and `candidate` gives the decision process its view of one.
pub(super) fn offer(
    keep: AddPathKeep,
    paths: &[Path],
    old: &[Offered],
    eligible: impl Fn(&Path) -> bool,
    candidate: impl Fn(&Path) -> Candidate,
    options: &crate::decision::Options,
) -> OfferedList {
    // One path (most prefixes as a table arrives): no ranking, nothing allocated.
    if let [only] = paths {
        let mut out = OfferedList::new();
        if eligible(only) {
            out.push(Offered {
                peer: only.peer,
                received_id: only.path_id,
                arrival: only.arrival,
                path_id: 0,
                equal_cost: true,
            });
            assign_ids(&mut out, old);
        }
        return out;
    }
    let mut index: SmallVec<[usize; 4]> = (0..paths.len())
        .filter(|i| paths.get(*i).is_some_and(&eligible))
        .collect();
    let mut cands: SmallVec<[Candidate; 4]> = index
        .iter()
        .filter_map(|i| paths.get(*i).map(&candidate))
        .collect();
    // Decision order, as far as a group reads it: the best of what is left, N times (the
    // decision process is not a sort: deterministic MED compares within neighbor ASes).
    let ranked = if keep.all {
        index.len()
    } else {
        keep.ranked.max(1)
    };
    let mut order: SmallVec<[(usize, Candidate); 4]> = SmallVec::new();
    while order.len() < ranked {
        let Some(b) = best_path(&cands, options) else {
            break;
        };
        order.push((index.remove(b), cands.remove(b)));
    }
    // The equal-cost set of the best path, wherever it ranks (all of them are ranked when
    // some group sends it: `ranked` covers at most as many as it holds).
    let m = options.multipath.unwrap_or_default();
    if keep.equal_cost {
        if let Some((_, best)) = order.first().copied() {
            while let Some(j) = cands
                .iter()
                .position(|c| multipath_equal(&best, c, m, options))
            {
                order.push((index.remove(j), cands.remove(j)));
            }
        }
    }
    let best = order.first().map(|(_, c)| *c);
    let mut out = OfferedList::new();
    for (i, c) in order {
        let Some(p) = paths.get(i) else { continue };
        out.push(Offered {
            peer: p.peer,
            received_id: p.path_id,
            arrival: p.arrival,
            path_id: 0,
            equal_cost: best.is_some_and(|b| b == c || multipath_equal(&b, &c, m, options)),
        });
    }
    assign_ids(&mut out, old);
    out
}

/// Identifiers: kept from the old list, else the peer's, else the least one free.
fn assign_ids(out: &mut OfferedList, old: &[Offered]) {
    for k in 0..out.len() {
        let Some(o) = out.get(k).copied() else {
            continue;
        };
        let id = match old
            .iter()
            .find(|x| x.peer == o.peer && x.received_id == o.received_id)
        {
            Some(x) => x.path_id,
            None if o.received_id == 0 => o.peer.wrapping_add(1),
            None => {
                let used = |id: u32| {
                    old.iter().any(|x| x.path_id == id) || out.iter().any(|x| x.path_id == id)
                };
                (ALLOCATED..).find(|id| !used(*id)).unwrap_or(ALLOCATED)
            }
        };
        if let Some(x) = out.get_mut(k) {
            x.path_id = id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_take_their_part() {
        let l = [1, 2, 3, 4];
        let even = |x: &i32| x % 2 == 0;
        let take = |s: AddPathSelect| s.pick(&l, even).copied().collect::<Vec<_>>();
        assert_eq!(take(AddPathSelect::Best(2)), [1, 2]);
        assert_eq!(take(AddPathSelect::All), [1, 2, 3, 4]);
        assert_eq!(take(AddPathSelect::EqualCost(1)), [2]);
        assert_eq!(take(AddPathSelect::EqualCost(8)), [2, 4]);
    }
}
