//! What a shard shows of its table to operators, read without changing it: a prefix with
//! every path and why the active one won, sorted selections of prefixes a chunk at a time
//! (so a walk of a whole table holds one chunk, never the table), the longest match of an
//! address, and the walk that counts what an update group advertises.

use super::{Dest, Path, PeerIndex, PeerInfo, Position, Shard};
use crate::decision::{best_path, compare, deciding_step, Candidate, Step};
use crate::prefix_map::{v4_key, v4_prefix};
use ribshard_wire::{Family, Prefix};
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
    /// The import policy and term that accepted or rejected it (when the view explains).
    pub import: Option<String>,
    /// Its origin validation state (RFC 6811), when the shard has RPKI data.
    pub validity: Option<ribshard_rpki::Validity>,
}

/// Where a path stands in the decision process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    /// The best path, as the update groups were told. `over`: the step that separated it
    /// from the runner-up (none without one).
    Active { over: Option<Step> },
    /// Eligible, and beaten at `step` (when the view was asked to explain); `in_group`: by
    /// the best path of its own neighbor AS (deterministic MED compares MED only there;
    /// Junos "Not Best in its group").
    Inactive { step: Option<Step>, in_group: bool },
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
    /// No route (of another protocol: never one of ours) covers its next hop (RFC 4271
    /// section 9.1.2.1).
    Unresolved,
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

/// Which paths of a prefix a view shows, and what it says of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathFilter {
    /// Only the paths from this peer (Junos `receive-protocol bgp`).
    pub peer: Option<PeerIndex>,
    /// Ineligible paths too (Junos `hidden`).
    pub hidden: bool,
    /// Why each path won or lost (its decision step), and the import term that decided
    /// it: a few more comparisons per prefix.
    pub explain: bool,
    /// Only the paths import policy rejected (kept in the Adj-RIB-In as received).
    pub rejected: bool,
}

std::thread_local! {
    /// Candidates of the prefix being viewed, reused: a walk views every prefix.
    static SCRATCH: std::cell::RefCell<(Vec<Candidate>, Vec<usize>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

impl Shard {
    /// A prefix with its paths, the active one first, then the others by preference, then
    /// the ineligible ones (with `filter.hidden`). `None` when no path is left to show.
    pub fn route(&self, prefix: &Prefix, filter: PathFilter) -> Option<RouteView> {
        let d = self.dests.get(&prefix.masked())?;
        let view = self.view(prefix.masked(), d, filter);
        (!view.paths.is_empty()).then_some(view)
    }

    /// The same for a prefix [`Shard::select`] returned with its position, found without a
    /// lookup; valid until the table next changes.
    pub fn route_at(&self, at: Position, filter: PathFilter) -> Option<RouteView> {
        let (prefix, d) = self.dests.at_with_key(at.0)?;
        let view = self.view(prefix, d, filter);
        (!view.paths.is_empty()).then_some(view)
    }

    fn view(&self, prefix: Prefix, d: &Dest, filter: PathFilter) -> RouteView {
        let dec = self.decider();
        if !filter.explain && self.options.multipath.is_none() && !d.dirty {
            return self.brief_view(prefix, d, filter);
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (cands, index) = &mut *scratch;
            // The eligible paths' decision inputs, and each one's place in `d.paths`.
            cands.clear();
            index.clear();
            for (i, p) in d.paths.iter().enumerate() {
                if dec.eligible(p) {
                    cands.push(dec.candidate(p));
                    index.push(i);
                }
            }
            let best = best_path(cands, &self.options);
            let active = best.and_then(|b| Some((*index.get(b)?, *cands.get(b)?)));
            let multipath: Vec<u32> = match self.options.multipath {
                Some(_) => self
                    .multipath(&prefix)
                    .iter()
                    .skip(1)
                    .map(|p| p.arrival)
                    .collect(),
                None => Vec::new(),
            };
            let mut paths: Vec<PathView> = Vec::with_capacity(d.paths.len());
            for (i, p) in d.paths.iter().enumerate() {
                if p.gone()
                    || filter.peer.is_some_and(|peer| peer != p.peer)
                    || (filter.rejected && !p.rejected())
                {
                    continue;
                }
                let cand = index
                    .iter()
                    .position(|x| *x == i)
                    .and_then(|k| cands.get(k));
                let state = match (cand, active) {
                    (None, _) => {
                        PathState::Ineligible(dec.ineligible(p).unwrap_or(Ineligible::Rejected))
                    }
                    (Some(_), Some((a, _))) if a == i => PathState::Active {
                        over: if filter.explain {
                            self.runner_up_step(cands, best)
                        } else {
                            None
                        },
                    },
                    (Some(c), Some((_, a))) => {
                        if filter.explain {
                            self.inactive(cands, &a, c)
                        } else {
                            PathState::Inactive {
                                step: None,
                                in_group: false,
                            }
                        }
                    }
                    // Eligible but nothing is active: cannot happen (best_path picks one).
                    (Some(_), None) => continue,
                };
                if !filter.hidden && !filter.rejected && matches!(state, PathState::Ineligible(_)) {
                    continue;
                }
                paths.push(PathView {
                    path: p.clone(),
                    peer: self.peer(p.peer),
                    state,
                    multipath: multipath.contains(&p.arrival),
                    import: filter
                        .explain
                        .then(|| self.import_decision(&prefix, p))
                        .flatten(),
                    validity: self.validity_of(&prefix, p),
                });
            }
            // The active path first, then the others by preference, then the ineligible.
            if paths.len() > 1 {
                let rank = |v: &PathView| match v.state {
                    PathState::Active { .. } => 0,
                    PathState::Inactive { .. } => 1,
                    PathState::Ineligible(_) => 2,
                };
                paths.sort_by(|a, b| {
                    rank(a).cmp(&rank(b)).then_with(|| {
                        if rank(a) == 1 {
                            let (x, y) = (dec.candidate(&a.path), dec.candidate(&b.path));
                            compare(&x, &y, false, &self.options)
                        } else {
                            a.path.arrival.cmp(&b.path.arrival)
                        }
                    })
                });
            }
            RouteView { prefix, paths }
        })
    }

    /// The import policy and term that decided a path, said as an operator reads it:
    /// evaluated again on what was received (it allocates nothing).
    fn import_decision(&self, prefix: &Prefix, p: &Path) -> Option<String> {
        let imp = self.import_of(p.peer)?;
        let received = p.attrs.as_received();
        let v = imp.chain.evaluate(&ribshard_policy::Subject {
            prefix: *prefix,
            attrs: received.raw(),
            next_hop: received.next_hop(),
            source: &imp.source,
            receiver_as: None,
            rpki: Default::default(),
        });
        Some(imp.chain.describe(&v.by))
    }

    /// A decided prefix without explanations (`show route`, a whole table of them): the
    /// active path is the one last reported, so the decision process need not run again.
    fn brief_view(&self, prefix: Prefix, d: &Dest, filter: PathFilter) -> RouteView {
        let dec = self.decider();
        let reported = d.reported();
        let mut paths: Vec<PathView> = Vec::with_capacity(d.paths.len());
        for p in &d.paths {
            if p.gone()
                || filter.peer.is_some_and(|peer| peer != p.peer)
                || (filter.rejected && !p.rejected())
            {
                continue;
            }
            let state = if Some(p.arrival) == reported {
                PathState::Active { over: None }
            } else if dec.eligible(p) {
                PathState::Inactive {
                    step: None,
                    in_group: false,
                }
            } else if !filter.hidden && !filter.rejected {
                continue;
            } else {
                PathState::Ineligible(dec.ineligible(p).unwrap_or(Ineligible::Rejected))
            };
            paths.push(PathView {
                path: p.clone(),
                peer: self.peer(p.peer),
                state,
                multipath: false,
                import: None,
                validity: self.validity_of(&prefix, p),
            });
        }
        // Active first, then by preference (two paths need no comparison), then ineligible.
        let rank = |v: &PathView| match v.state {
            PathState::Active { .. } => 0,
            PathState::Inactive { .. } => 1,
            PathState::Ineligible(_) => 2,
        };
        if let [a, b] = paths.as_slice() {
            if rank(b) < rank(a) {
                paths.swap(0, 1);
            }
        } else if paths.len() > 2 {
            paths.sort_by(|a, b| {
                rank(a).cmp(&rank(b)).then_with(|| {
                    if rank(a) == 1 {
                        let (x, y) = (dec.candidate(&a.path), dec.candidate(&b.path));
                        compare(&x, &y, false, &self.options)
                    } else {
                        a.path.arrival.cmp(&b.path.arrival)
                    }
                })
            });
        }
        RouteView { prefix, paths }
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
                        step: Some(step),
                        in_group: true,
                    };
                }
            }
            return PathState::Inactive {
                step: deciding_step(a, c, false, o),
                in_group: false,
            };
        }
        PathState::Inactive {
            step: deciding_step(a, c, true, o),
            in_group: c.neighbor_as == a.neighbor_as && !o.always_compare_med,
        }
    }

    /// The next `limit` prefixes of `family` after `after` (all from the start without
    /// one) that `within` contains and that hold a path, in ascending order, with their
    /// positions ([`Shard::route_at`]). One pass over the family keeping the `limit`
    /// smallest, so a walk of the whole table in chunks needs no copy of it.
    pub fn select(
        &self,
        family: Family,
        after: Option<&Prefix>,
        within: Within,
        limit: usize,
    ) -> Vec<(Prefix, Position)> {
        let limit = limit.max(1);
        // Whether a prefix has a path to show reads its path list, a cache miss per prefix:
        // asked only of the few that would enter the selection, not of every prefix scanned.
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
                    .filter(|(_, k, _)| floor.is_none_or(|f| *k > f))
                    .filter(|(_, k, _)| within == Within::All || within.contains(&v4_prefix(*k)));
                smallest(
                    keys,
                    limit,
                    |(h, k, _)| (*k, Position(*h)),
                    |(_, _, d)| shown(d),
                )
                .into_iter()
                .map(|(k, at)| (v4_prefix(k), at))
                .collect()
            }
            Family::Ipv6Unicast => {
                let keys = self
                    .dests
                    .v6_entries()
                    .filter(|(_, p, _)| after.is_none_or(|a| p > a))
                    .filter(|(_, p, _)| within.contains(p));
                smallest(
                    keys,
                    limit,
                    |(h, p, _)| (*p, Position(*h)),
                    |(_, _, d)| shown(d),
                )
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
            if d.has_reported {
                if let Some(p) = d.reported_path() {
                    f(prefix, p);
                }
            }
        }
        it.next().map(|(h, _, _)| Position(h))
    }
}

/// The keys of the `limit` smallest items that pass `keep`, ascending; `keep` is asked only
/// of items whose key could enter the selection. Keys are gathered, the smallest `limit`
/// partitioned out (linear) and sorted, and whenever twice `limit` are held the larger half
/// is dropped, so memory stays at twice the selection whatever the table's size.
fn smallest<I, T: Ord + Copy>(
    items: impl Iterator<Item = I>,
    limit: usize,
    key: impl Fn(&I) -> T,
    keep: impl Fn(&I) -> bool,
) -> Vec<T> {
    let mut held: Vec<T> = Vec::with_capacity(limit.saturating_mul(2).min(1 << 20));
    // Everything at or above this is out of the selection already.
    let mut ceiling: Option<T> = None;
    for x in items {
        let k = key(&x);
        if ceiling.is_some_and(|c| k >= c) || !keep(&x) {
            continue;
        }
        held.push(k);
        if held.len() >= limit.saturating_mul(2) {
            held.select_nth_unstable(limit);
            ceiling = held.get(limit).copied();
            held.truncate(limit);
        }
    }
    if held.len() > limit {
        held.select_nth_unstable(limit);
        held.truncate(limit);
    }
    held.sort_unstable();
    held
}
