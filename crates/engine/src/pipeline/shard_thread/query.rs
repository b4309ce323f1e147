//! Questions a shard answers between its routing work: its statistics, and chunks of a
//! walk of its routes (`show route`), each selected by one scan of the table and rendered
//! in the shard.

use super::{locked, thread_cpu_seconds, ShardWorker, QUERY_WAIT};
use crate::pipeline::{
    AdvertisedPath, GroupCounts, Query, RouteChunk, RouteQuery, Selection, ShownRoute,
};
use ribshard_rib::{PathState, Position};
use ribshard_wire::Prefix;
use std::collections::VecDeque;
use std::time::Instant;

/// How many chunks one scan of a family selects for a walk.
const SELECT_AHEAD: usize = 32;

/// While routing keeps the shard loaded, a walk question that needs a new scan of the table
/// (it does not continue the kept selection: many walks at once take turns with it) is
/// answered at most once this long. A scan costs as much as routing thousands of prefixes;
/// a chunk of the kept selection costs a chunk's rendering, and waits [`QUERY_WAIT`].
pub(super) const SCAN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The rest of a walk's last selection: prefixes after `after`, in order, with where they
/// were. Kept between questions, and used only by the walk that continues from `after`; a
/// prefix added meanwhile may be missed, as by any walk of a live table.
pub(super) struct Selected {
    family: ribshard_wire::Family,
    within: ribshard_rib::Within,
    after: Option<Prefix>,
    list: VecDeque<(Prefix, Position)>,
    /// The scan may have left prefixes beyond the list.
    more: bool,
}

impl ShardWorker {
    pub(super) fn answer(&mut self, q: Query) {
        match q {
            Query::Stats(reply) => {
                let mut s = self.stats.clone();
                s.prefixes = self.shard.prefixes();
                s.paths = self.shard.paths();
                s.families = [
                    self.shard.family_counts(ribshard_wire::Family::Ipv4Unicast),
                    self.shard.family_counts(ribshard_wire::Family::Ipv6Unicast),
                ];
                s.peers = self.shard.peer_counts().to_vec();
                s.counters = self.shard.peer_counters().to_vec();
                s.groups = self
                    .groups
                    .iter()
                    .map(|(id, g)| GroupCounts {
                        group: *id,
                        advertised: g.advertised.walk.is_none().then_some(g.advertised.prefixes),
                        by_source: g
                            .advertised
                            .by_source
                            .iter()
                            .filter(|(_, c)| **c != [0, 0])
                            .map(|(p, c)| (*p, *c))
                            .collect(),
                    })
                    .collect();
                s.cpu_seconds = thread_cpu_seconds();
                let _ = reply.send(s);
            }
            // Walks wait for the shard to have nothing to route ([`ShardWorker::deferred`]).
            Query::Routes(q, reply) => self.deferred.push_back((q, reply)),
        }
    }

    /// Answers a walk question waiting: the first that continues the kept selection (it
    /// costs no scan), else the oldest.
    pub(super) fn answer_deferred(&mut self) {
        let i = self
            .deferred
            .iter()
            .position(|(q, _)| self.continues(q))
            .unwrap_or(0);
        let Some((q, reply)) = self.deferred.remove(i) else {
            return;
        };
        // Shown as decided: what the update groups were told.
        self.drain();
        let _ = reply.send(self.routes(&q));
        self.last_answer = Instant::now();
    }

    /// A walk question waits no longer than [`QUERY_WAIT`] while routing keeps the shard
    /// busy, or [`SCAN_WAIT`] if it needs a scan of the table.
    pub(super) fn overdue(&self) -> bool {
        !self.deferred.is_empty()
            && self.last_answer.elapsed() >= QUERY_WAIT
            && (self.last_scan.elapsed() >= SCAN_WAIT
                || self.deferred.iter().any(|(q, _)| self.continues(q)))
    }

    /// The question continues the kept selection: answering it costs no scan.
    fn continues(&self, q: &RouteQuery) -> bool {
        match q.select {
            Selection::Table(family, within) => self
                .selected
                .as_ref()
                .is_some_and(|c| c.family == family && c.within == within && c.after == q.after),
            Selection::Exact(_) | Selection::Longest(_) => true,
        }
    }

    /// One chunk of a walk of routes.
    fn routes(&mut self, q: &RouteQuery) -> RouteChunk {
        let (prefixes, more): (Vec<(Prefix, Option<Position>)>, bool) = match q.select {
            Selection::Exact(p) => (vec![(p.masked(), None)], false),
            Selection::Longest(a) => (
                self.shard
                    .longest_match(a)
                    .map(|p| (p, None))
                    .into_iter()
                    .collect(),
                false,
            ),
            Selection::Table(family, within) => {
                let c = self.shard.family_counts(family);
                let per_prefix = c.paths.div_ceil(c.prefixes.max(1)).max(1);
                let limit = (q.max_paths / per_prefix).clamp(16, 1 << 16);
                let (p, more) = self.select(family, within, q.after, limit);
                (p.into_iter().map(|(p, at)| (p, Some(at))).collect(), more)
            }
        };
        let mut routes: Vec<ShownRoute> = prefixes
            .iter()
            .filter_map(|(p, at)| self.shown(p, *at, q))
            .collect();
        if let Some(render) = &q.render {
            // The whole chunk into one buffer, each route a slice of it: one allocation a
            // chunk, and its paths dropped (the walk's merge needs only the prefix).
            // About what the last chunk took, so the buffer rarely grows (a copy each time).
            let mut out = Vec::with_capacity(self.rendered_hint.max(4096));
            let mut ends = Vec::with_capacity(routes.len());
            for r in &routes {
                render.render(r, &mut out);
                ends.push(out.len());
            }
            self.rendered_hint = out.len() + out.len() / 8;
            let text = bytes::Bytes::from(out);
            let mut start = 0;
            for (r, end) in routes.iter_mut().zip(ends) {
                r.rendered = text.slice(start..end);
                start = end;
                r.view.paths = Vec::new();
                r.advertised = None;
            }
        }
        RouteChunk {
            routes,
            last: prefixes.last().map(|(p, _)| *p),
            more,
        }
    }

    /// The next `limit` prefixes of a walk. A selection scans the whole family, so each
    /// scan selects several chunks and keeps the rest for the walk's next questions
    /// ([`Selected`]): a walk of a whole table scans it a 32nd as often.
    fn select(
        &mut self,
        family: ribshard_wire::Family,
        within: ribshard_rib::Within,
        after: Option<Prefix>,
        limit: usize,
    ) -> (Vec<(Prefix, Position)>, bool) {
        let cached = self
            .selected
            .take()
            .filter(|c| c.family == family && c.within == within && c.after == after);
        let mut c = match cached {
            Some(c) => c,
            None => {
                self.last_scan = Instant::now();
                let ahead = limit.saturating_mul(SELECT_AHEAD);
                let list = self.shard.select(family, after.as_ref(), within, ahead);
                Selected {
                    family,
                    within,
                    after,
                    more: list.len() == ahead,
                    list: list.into(),
                }
            }
        };
        let n = limit.min(c.list.len());
        let chunk: Vec<(Prefix, Position)> = c.list.drain(..n).collect();
        let more = !c.list.is_empty() || c.more;
        if let Some(last) = chunk.last() {
            c.after = Some(last.0);
        }
        if !c.list.is_empty() {
            self.selected = Some(c);
        }
        (chunk, more)
    }

    /// A route as the query shows it; `at`: where [`Shard::select`] found it.
    fn shown(&mut self, p: &Prefix, at: Option<Position>, q: &RouteQuery) -> Option<ShownRoute> {
        // A position kept from an earlier scan names another prefix once the table changed:
        // then the prefix is looked up (gone, it is not shown).
        let mut view = match at.and_then(|at| self.shard.route_at(at, q.filter)) {
            Some(v) if v.prefix == *p => v,
            _ => self.shard.route(p, q.filter)?,
        };
        if let Some(m) = &q.matcher {
            view.paths.retain(|v| m.matches(v));
            if view.paths.is_empty() {
                return None;
            }
        }
        let mut advertised_paths = Vec::new();
        let advertised = match q.advertised {
            None => None,
            Some((group, member)) => {
                let g = self.groups.get_mut(&group)?;
                let best = self.shard.reported(p)?;
                if best.peer == member {
                    return None;
                }
                let src = self.shard.peer(best.peer);
                let mut cache = locked(&g.cache);
                let e = cache.get(&g.spec, &src, best.peer, &best.attrs, p)?;
                // Add-Path: the group's part of the prefix's offered paths, as its dump
                // to a new member sends them.
                if let Some(select) = super::sends_several(&self.shard, &g.spec, p.family()) {
                    let offered = self.shard.offered(p);
                    for (o, path) in select.pick(&offered, |(o, _)| o.equal_cost) {
                        let psrc = self.shard.peer(path.peer);
                        if let Some(exported) = cache.get(&g.spec, &psrc, path.peer, &path.attrs, p)
                        {
                            advertised_paths.push(AdvertisedPath {
                                path_id: o.path_id,
                                source: path.peer,
                                exported,
                            });
                        }
                    }
                }
                drop(cache);
                view.paths
                    .retain(|v| matches!(v.state, PathState::Active { .. }));
                Some((e, g.spec.params))
            }
        };
        if let Some((group, member)) = q.withheld {
            let g = self.groups.get_mut(&group)?;
            let best = self.shard.reported(p)?;
            let src = self.shard.peer(best.peer);
            let sent = locked(&g.cache).get(&g.spec, &src, best.peer, &best.attrs, p);
            if best.peer == member || sent.is_some() {
                return None;
            }
            view.paths
                .retain(|v| matches!(v.state, PathState::Active { .. }));
        }
        Some(ShownRoute {
            shard: self.index,
            view,
            advertised,
            advertised_paths,
            rendered: bytes::Bytes::new(),
        })
    }
}
