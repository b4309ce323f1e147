//! What a shard shows of its table to operators, read without changing it: a prefix with
//! every path and why the active one won, sorted selections of prefixes a chunk at a time
//! (so a walk of a whole table holds one chunk, never the table), the longest match of an
//! address, and the walk that counts what an update group advertises.

use super::{Dest, Path, PeerIndex, PeerInfo, Position, Shard, REPORTED};
use crate::decision::{best_path, compare, deciding_step, Candidate, Step};
use crate::prefix_map::{v4_key, v4_prefix};
use ribshard_wire::{Family, Prefix};
use std::collections::BinaryHeap;
use std::net::IpAddr;

/// A prefix as operators see it: every path, the active one first.
#[derive(Clone, Debug)]
pub struct RouteView {
    pub prefix: Prefix,
    pub paths: Vec<PathView>,
}

#[derive(Clone, Debug)]
pub struct PathView {
    pub path: Path,
    /// The peer it came from, as the shard knows it.
    pub peer: PeerInfo,
    pub state: PathState,
    /// In the active path's equal-cost set (`multipath`), besides the active path itself.
    pub multipath: bool,
}

/// Where a path stands in the decision process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    /// The best path, as the update groups were told. `over`: the step that separated it
    /// from the runner-up (none without one).
    Active { over: Option<Step> },
    /// Eligible, and beaten at `step`; `in_group`: by the best path of its own neighbor AS
    /// (deterministic MED compares MED only there; Junos "Not Best in its group").
    Inactive { step: Step, in_group: bool },
    /// Never chosen (Junos "hidden").
    Ineligible(Ineligible),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ineligible {
    /// Our AS in its AS_PATH, our router id as ORIGINATOR_ID or our cluster id in its
    /// CLUSTER_LIST.
    Loop,
    /// The import policy of its peer rejects it.
    Rejected,
}

/// Which prefixes a walk selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Within {
    /// Every prefix of the family.
    All,
    /// Prefixes inside this one; `or_equal`: the prefix itself too (Junos `orlonger`, else
    /// `longer`).
    Under { prefix: Prefix, or_equal: bool },
}

impl Within {
    pub fn contains(&self, p: &Prefix) -> bool {
        match *self {
            Within::All => true,
            Within::Under { prefix, or_equal } => {
                let inside = p.family() == prefix.family()
                    && p.len() >= prefix.len()
                    && truncate(p, prefix.len()) == prefix.masked();
                inside && (or_equal || p.len() > prefix.len())
            }
        }
    }
}

/// `p` cut to `len` bits.
fn truncate(p: &Prefix, len: u8) -> Prefix {
    match *p {
        Prefix::V4 { addr, .. } => Prefix::V4 { addr, len }.masked(),
        Prefix::V6 { addr, .. } => Prefix::V6 { addr, len }.masked(),
    }
}

/// Which paths of a prefix a view shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathFilter {
    /// Only the paths from this peer (Junos `receive-protocol bgp`).
    pub peer: Option<PeerIndex>,
    /// Ineligible paths too (Junos `hidden`).
    pub hidden: bool,
}

impl Shard {
    /// A prefix with its paths, the active one first, then the others by preference, then
    /// the ineligible ones (with `filter.hidden`). `None` when no path is left to show.
    pub fn route(&self, prefix: &Prefix, filter: PathFilter) -> Option<RouteView> {
        let d = self.dests.get(&prefix.masked())?;
        let view = self.view(prefix.masked(), d, filter);
        (!view.paths.is_empty()).then_some(view)
    }

    fn view(&self, prefix: Prefix, d: &Dest, filter: PathFilter) -> RouteView {
        let dec = self.decider();
        let live: Vec<&Path> = d.paths.iter().filter(|p| !p.gone()).collect();
        let eligible: Vec<(&Path, Candidate)> = live
            .iter()
            .filter(|p| dec.eligible(p))
            .map(|p| (*p, dec.candidate(p)))
            .collect();
        let cands: Vec<Candidate> = eligible.iter().map(|(_, c)| *c).collect();
        let best = best_path(&cands, &self.options);
        let active = best
            .and_then(|i| eligible.get(i))
            .map(|(p, c)| (p.arrival, *c));
        let multipath: Vec<u32> = match self.options.multipath {
            Some(_) => self
                .multipath(&prefix)
                .iter()
                .skip(1)
                .map(|p| p.arrival)
                .collect(),
            None => Vec::new(),
        };
        let mut paths: Vec<(PathView, Option<Candidate>)> = Vec::new();
        for p in live {
            if filter.peer.is_some_and(|peer| peer != p.peer) {
                continue;
            }
            let cand = eligible
                .iter()
                .find(|(q, _)| q.arrival == p.arrival)
                .map(|(_, c)| *c);
            let state = match (cand, active) {
                (None, _) => PathState::Ineligible(if p.attrs.loop_free {
                    Ineligible::Rejected
                } else {
                    Ineligible::Loop
                }),
                (Some(_), Some((a, _))) if a == p.arrival => PathState::Active {
                    over: self.runner_up_step(&cands, best),
                },
                (Some(c), Some((_, a))) => self.inactive(&cands, &a, &c),
                // Eligible but nothing is active: cannot happen (best_path picks one).
                (Some(_), None) => continue,
            };
            if !filter.hidden && matches!(state, PathState::Ineligible(_)) {
                continue;
            }
            paths.push((
                PathView {
                    path: p.clone(),
                    peer: self.peer(p.peer),
                    state,
                    multipath: multipath.contains(&p.arrival),
                },
                cand,
            ));
        }
        let rank = |v: &PathView| match v.state {
            PathState::Active { .. } => 0,
            PathState::Inactive { .. } => 1,
            PathState::Ineligible(_) => 2,
        };
        paths.sort_by(|(a, ca), (b, cb)| {
            rank(a).cmp(&rank(b)).then_with(|| match (ca, cb) {
                (Some(x), Some(y)) => compare(x, y, false, &self.options),
                _ => a.path.arrival.cmp(&b.path.arrival),
            })
        });
        RouteView {
            prefix,
            paths: paths.into_iter().map(|(v, _)| v).collect(),
        }
    }

    /// Why the best of `cands` (at `best`) beat the best of the others.
    fn runner_up_step(&self, cands: &[Candidate], best: Option<usize>) -> Option<Step> {
        let b = *cands.get(best?)?;
        let rest: Vec<Candidate> = cands
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != best)
            .map(|(_, c)| *c)
            .collect();
        let r = rest.get(best_path(&rest, &self.options)?)?;
        let with_med = self.options.always_compare_med || r.neighbor_as == b.neighbor_as;
        deciding_step(&b, r, with_med, &self.options)
    }

    /// Why `c` is not the active path `a` (deterministic MED: it may have lost within its
    /// neighbor AS first).
    fn inactive(&self, cands: &[Candidate], a: &Candidate, c: &Candidate) -> PathState {
        let o = &self.options;
        if !o.always_compare_med && c.neighbor_as != a.neighbor_as {
            let group: Vec<Candidate> = cands
                .iter()
                .filter(|x| x.neighbor_as == c.neighbor_as)
                .copied()
                .collect();
            let winner = best_path(&group, o).and_then(|i| group.get(i));
            if let Some(w) = winner.filter(|w| *w != c) {
                if let Some(step) = deciding_step(w, c, true, o) {
                    return PathState::Inactive {
                        step,
                        in_group: true,
                    };
                }
            }
            return PathState::Inactive {
                step: deciding_step(a, c, false, o).unwrap_or(Step::Arrival),
                in_group: false,
            };
        }
        PathState::Inactive {
            step: deciding_step(a, c, true, o).unwrap_or(Step::Arrival),
            in_group: c.neighbor_as == a.neighbor_as && !o.always_compare_med,
        }
    }

    /// The next `limit` prefixes of `family` after `after` (all from the start without
    /// one) that `within` contains and that hold a path, in ascending order. One pass over
    /// the family keeping the `limit` smallest, so a walk of the whole table in chunks
    /// needs no copy of it.
    pub fn select(
        &self,
        family: Family,
        after: Option<&Prefix>,
        within: Within,
        limit: usize,
    ) -> Vec<Prefix> {
        let limit = limit.max(1);
        let shown = |d: &Dest| d.paths.iter().any(|p| !p.gone());
        match family {
            Family::Ipv4Unicast => {
                let floor = match after {
                    Some(Prefix::V4 { addr, len }) => Some(v4_key(*addr, *len)),
                    Some(Prefix::V6 { .. }) => return Vec::new(),
                    None => None,
                };
                let keys = self
                    .dests
                    .v4_entries()
                    .filter(|(k, _)| floor.is_none_or(|f| *k > f))
                    .filter(|(k, d)| within.contains(&v4_prefix(*k)) && shown(d))
                    .map(|(k, _)| k);
                smallest(keys, limit).into_iter().map(v4_prefix).collect()
            }
            Family::Ipv6Unicast => {
                let keys = self
                    .dests
                    .v6_entries()
                    .filter(|(p, _)| after.is_none_or(|a| p > a))
                    .filter(|(p, d)| within.contains(p) && shown(d))
                    .map(|(p, _)| p);
                smallest(keys, limit)
            }
        }
    }

    /// The longest prefix here that holds a path and covers `addr`.
    pub fn longest_match(&self, addr: IpAddr) -> Option<Prefix> {
        let (max, make): (u8, Box<dyn Fn(u8) -> Option<Prefix>>) = match addr {
            IpAddr::V4(a) => (32, Box::new(move |l| Prefix::v4(a, l))),
            IpAddr::V6(a) => (128, Box::new(move |l| Prefix::v6(a, l))),
        };
        (0..=max).rev().find_map(|len| {
            let p = make(len)?.masked();
            let d = self.dests.get(&p)?;
            d.paths.iter().any(|x| !x.gone()).then_some(p)
        })
    }

    /// Calls `f` with the reported best path of up to `budget` prefixes from position
    /// `from` on, in position order; returns where to go on, or `None` when the walk is
    /// done. Prefixes created behind the walk are not visited: a caller counting what the
    /// table holds takes their changes live instead (see [`crate::Change::position`]).
    pub fn count_step(
        &self,
        from: Position,
        budget: usize,
        mut f: impl FnMut(Prefix, &Path),
    ) -> Option<Position> {
        let mut it = self.dests.iter_from(from.0);
        for (_, prefix, d) in it.by_ref().take(budget.max(1)) {
            if d.flags & REPORTED != 0 {
                if let Some(p) = d.reported_path() {
                    f(prefix, p);
                }
            }
        }
        it.next().map(|(h, _, _)| Position(h))
    }
}

/// The `limit` smallest items, ascending.
fn smallest<T: Ord + Copy>(items: impl Iterator<Item = T>, limit: usize) -> Vec<T> {
    let mut heap: BinaryHeap<T> = BinaryHeap::with_capacity(limit + 1);
    for x in items {
        if heap.len() < limit {
            heap.push(x);
        } else if heap.peek().is_some_and(|top| x < *top) {
            heap.pop();
            heap.push(x);
        }
    }
    heap.into_sorted_vec()
}
