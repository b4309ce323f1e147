//! Questions to the running pipeline: accounting from every thread, the queues between them,
//! and walks of the routes, each answered by a shard between its routing work, one chunk at
//! a time, so that no answer ever holds a whole table.

use super::{
    Lanes, Pipeline, Query, RouteChunk, RouteQuery, Selection, ShardStats, ShownRoute, ToShard,
    ToUpdate, UpdateThreadStats,
};
use ribshard_rib::{shard_of, Path, PathState};
use ribshard_wire::{Family, Prefix};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// One queue between pipeline threads, as read now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueState {
    pub index: usize,
    /// Messages waiting now, and room for how many.
    pub depth: usize,
    pub capacity: usize,
    pub high_water: usize,
    /// Messages put in since the threads of this epoch started.
    pub sends: u64,
    /// Time senders waited for room.
    pub blocked: Duration,
}

/// The queues between the pipeline's threads: sessions to each shard, shards to each update
/// thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueReport {
    pub shards: Vec<QueueState>,
    pub updates: Vec<QueueState>,
}

fn queue_state<M>(
    index: usize,
    tx: &mpsc::Sender<M>,
    q: &crate::telemetry::QueueStats,
) -> QueueState {
    QueueState {
        index,
        depth: tx.max_capacity() - tx.capacity(),
        capacity: tx.max_capacity(),
        high_water: q.high_water.load(Ordering::Relaxed),
        sends: q.sends.load(Ordering::Relaxed),
        blocked: Duration::from_nanos(q.blocked_ns.load(Ordering::Relaxed)),
    }
}

impl Pipeline {
    /// Every shard's accounting. Waits for each shard to answer between its routing work.
    pub async fn shard_stats(&self) -> Vec<ShardStats> {
        let lanes = self.lanes();
        let mut out = Vec::new();
        for s in &lanes.shards {
            let (tx, rx) = oneshot::channel();
            if s.send(ToShard::Query(Query::Stats(tx))).await.is_ok() {
                out.extend(rx.await.ok());
            }
        }
        out
    }

    /// Every update thread's accounting and its groups' (the single shard's when update
    /// threading is off).
    pub async fn update_stats(&self) -> Vec<UpdateThreadStats> {
        let lanes = self.lanes();
        let mut out = Vec::new();
        for u in &lanes.updates {
            let (tx, rx) = oneshot::channel();
            if u.send(ToUpdate::Stats(tx)).await.is_ok() {
                out.extend(rx.await.ok());
            }
        }
        if lanes.updates.is_empty() {
            if let Some(s) = lanes.shards.first() {
                let (tx, rx) = oneshot::channel();
                let m = ToShard::Update(Box::new(ToUpdate::Stats(tx)));
                if s.send(m).await.is_ok() {
                    out.extend(rx.await.ok());
                }
            }
        }
        out
    }

    /// Per-shard, per-update-thread and per-group accounting, from a plain thread (tests,
    /// tools; never from a task).
    pub fn stats(&self) -> (Vec<ShardStats>, Vec<UpdateThreadStats>) {
        let handle = tokio::runtime::Builder::new_current_thread().build();
        match handle {
            Ok(rt) => rt.block_on(async { (self.shard_stats().await, self.update_stats().await) }),
            Err(_) => (Vec::new(), Vec::new()),
        }
    }

    /// The queues between the threads, read without asking any thread.
    pub fn queues(&self) -> QueueReport {
        let l = self.lanes();
        QueueReport {
            shards: l
                .shards
                .iter()
                .zip(&l.shard_queues)
                .enumerate()
                .map(|(i, (tx, q))| queue_state(i, tx, q))
                .collect(),
            updates: l
                .updates
                .iter()
                .zip(&l.update_queues)
                .enumerate()
                .map(|(i, (tx, q))| queue_state(i, tx, q))
                .collect(),
        }
    }

    /// A walk of routes: see [`RouteWalk`]. `shard`: only that shard's (Junos `show route
    /// rib-sharding`).
    pub fn walk_routes(self: &Arc<Self>, query: RouteQuery, shard: Option<usize>) -> RouteWalk {
        RouteWalk {
            pipeline: self.clone(),
            query,
            only: shard,
            epoch: None,
            heads: Vec::new(),
            last: None,
            done: false,
        }
    }

    /// The Loc-RIB as last reported, sorted by prefix, from a plain thread (tests, tools),
    /// fetched a chunk at a time like any walk.
    pub fn loc_rib(self: &Arc<Self>) -> Vec<(Prefix, Path)> {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
            return Vec::new();
        };
        rt.block_on(async {
            let mut out = Vec::new();
            for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
                let mut walk = self.walk_routes(RouteQuery::whole_table(f), None);
                while let Some(routes) = walk.next().await {
                    for r in routes {
                        let active = r
                            .view
                            .paths
                            .into_iter()
                            .find(|p| matches!(p.state, PathState::Active { .. }));
                        if let Some(a) = active {
                            out.push((r.view.prefix, a.path));
                        }
                    }
                }
            }
            out
        })
    }

    /// One chunk of a walk from one shard; `None` if the shard is gone (a re-shard, a stop).
    async fn chunk(lanes: &Lanes, shard: usize, q: RouteQuery) -> Option<RouteChunk> {
        let s = lanes.shard(shard)?;
        let (tx, rx) = oneshot::channel();
        s.send(ToShard::Query(Query::Routes(q, tx))).await.ok()?;
        rx.await.ok()
    }
}

/// Routes, in prefix order, from every shard (or one), fetched a chunk at a time: each shard
/// walks its part of the table sorted (it keeps no state between chunks: the walk's place
/// is the last prefix it returned), and the walk merges them. Survives a re-shard: it goes on
/// after the last route it returned, from the new shards.
pub struct RouteWalk {
    pipeline: Arc<Pipeline>,
    query: RouteQuery,
    only: Option<usize>,
    epoch: Option<u64>,
    /// Per shard: routes fetched and not yet returned, where its walk stands, and whether
    /// it may hold more.
    heads: Vec<Head>,
    /// The last route returned.
    last: Option<Prefix>,
    done: bool,
}

struct Head {
    shard: usize,
    buffered: VecDeque<ShownRoute>,
    /// Where the next chunk starts: after this prefix.
    after: Option<Prefix>,
    /// The shard may hold more after `after`.
    more: bool,
    /// The next chunk, asked for already: each shard works on it while the walk merges and
    /// its reader takes what came before.
    pending: Option<oneshot::Receiver<RouteChunk>>,
}

/// Asks a shard for the chunk after `h.after`; `None` if the shard is gone.
async fn ask(lanes: &Lanes, h: &Head, q: &RouteQuery) -> Option<oneshot::Receiver<RouteChunk>> {
    let s = lanes.shard(h.shard)?;
    let (tx, rx) = oneshot::channel();
    let q = RouteQuery {
        after: h.after,
        ..q.clone()
    };
    s.send(ToShard::Query(Query::Routes(q, tx))).await.ok()?;
    Some(rx)
}

/// Routes a call of [`RouteWalk::next`] returns at most.
const RETURN: usize = 256;

impl RouteWalk {
    /// The next routes in order; `None` when the walk is over.
    pub async fn next(&mut self) -> Option<Vec<ShownRoute>> {
        while !self.done {
            let lanes = self.pipeline.lanes();
            if self.epoch != Some(lanes.epoch) {
                self.restart(&lanes);
            }
            match self.query.select {
                Selection::Exact(p) => {
                    self.done = true;
                    let owner = shard_of(&p, lanes.shards.len());
                    if self.only.is_some_and(|s| s != owner) {
                        return None;
                    }
                    let c = Pipeline::chunk(&lanes, owner, self.query.clone()).await?;
                    return Some(c.routes);
                }
                Selection::Longest(_) => {
                    let mut best: Option<ShownRoute> = None;
                    for h in &self.heads {
                        let Some(c) = Pipeline::chunk(&lanes, h.shard, self.query.clone()).await
                        else {
                            continue;
                        };
                        for r in c.routes {
                            if best
                                .as_ref()
                                .is_none_or(|b| r.view.prefix.len() > b.view.prefix.len())
                            {
                                best = Some(r);
                            }
                        }
                    }
                    self.done = true;
                    return Some(best.into_iter().collect());
                }
                Selection::Table(..) => {}
            }
            // Every shard that may hold more has its next chunk asked for; those that have
            // run dry are waited for.
            let mut gone = false;
            for h in self.heads.iter_mut() {
                if h.more && h.pending.is_none() {
                    h.pending = ask(&lanes, h, &self.query).await;
                    gone |= h.pending.is_none();
                }
            }
            for h in self.heads.iter_mut() {
                if !h.buffered.is_empty() {
                    continue;
                }
                let Some(rx) = h.pending.take() else {
                    continue;
                };
                match rx.await {
                    Ok(c) => {
                        h.more = c.more;
                        h.after = c.last.or(h.after);
                        h.buffered.extend(c.routes);
                        if h.more {
                            h.pending = ask(&lanes, h, &self.query).await;
                            gone |= h.pending.is_none();
                        }
                    }
                    Err(_) => gone = true,
                }
            }
            if gone {
                // The shard is gone: a re-shard (start again from the new shards after the
                // last route returned) or a stop (nothing more).
                if self.pipeline.lanes().epoch == lanes.epoch {
                    self.done = true;
                }
                self.epoch = None;
                continue;
            }
            let mut out = Vec::new();
            // Merge while every shard that may hold more has something buffered: a smaller
            // prefix could still come from one that has not.
            while out.len() < RETURN {
                if self
                    .heads
                    .iter()
                    .any(|h| h.buffered.is_empty() && (h.more || h.pending.is_some()))
                {
                    break;
                }
                let next = self
                    .heads
                    .iter_mut()
                    .filter(|h| !h.buffered.is_empty())
                    .min_by_key(|h| h.buffered.front().map(|r| r.view.prefix));
                let Some(r) = next.and_then(|h| h.buffered.pop_front()) else {
                    self.done = true;
                    break;
                };
                self.last = Some(r.view.prefix);
                out.push(r);
            }
            if !out.is_empty() {
                return Some(out);
            }
        }
        None
    }

    /// Starts (again) on the shards of `lanes`, after the last route returned.
    fn restart(&mut self, lanes: &Lanes) {
        self.epoch = Some(lanes.epoch);
        let n = lanes.shards.len();
        let shards: Vec<usize> = match self.only {
            Some(s) if s < n => vec![s],
            Some(_) => Vec::new(),
            None => (0..n).collect(),
        };
        if shards.is_empty() {
            self.done = true;
        }
        self.heads = shards
            .into_iter()
            .map(|shard| Head {
                shard,
                buffered: VecDeque::new(),
                after: self.last,
                more: true,
                pending: None,
            })
            .collect();
    }
}
