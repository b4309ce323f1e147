//! The threads of one epoch and the channels to them ([`Lanes`]), how messages are
//! addressed and sent on them, and how a message addressed for the threads a re-shard
//! replaced is addressed again ([`Pipeline::retarget`]).

use super::{Batcher, Broadcast, Pipeline, Routed, Target, ToShard, ToUpdate, WITHDRAW};
use crate::telemetry::QueueStats;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// The threads of one epoch and the channels to them; a re-shard replaces them whole.
pub struct Lanes {
    pub epoch: u64,
    pub config: super::PipelineConfig,
    pub(super) shards: Vec<mpsc::Sender<ToShard>>,
    pub(super) updates: Vec<mpsc::Sender<ToUpdate>>,
    /// Per shard queue, then per update-thread queue: traffic and blocked time.
    pub(super) shard_queues: Vec<Arc<QueueStats>>,
    pub(super) update_queues: Vec<Arc<QueueStats>>,
    /// The change stream's subscribers (each shard passes a barrier to each).
    pub(super) subscribers: usize,
}

impl Lanes {
    pub fn shard(&self, i: usize) -> Option<&mpsc::Sender<ToShard>> {
        self.shards.get(i)
    }

    pub fn update(&self, i: usize) -> Option<&mpsc::Sender<ToUpdate>> {
        self.updates.get(i)
    }

    /// The queue of shard `i` (sessions to shard), for its accounting.
    pub fn shard_queue(&self, i: usize) -> Option<&Arc<QueueStats>> {
        self.shard_queues.get(i)
    }

    /// The queue of update thread `i` (shards to update thread).
    pub fn update_queue(&self, i: usize) -> Option<&Arc<QueueStats>> {
        self.update_queues.get(i)
    }

    /// A message for the update thread of a group (for the shard when update threading is
    /// off).
    pub(super) fn to_update(&self, t: usize, msg: ToUpdate) -> Target {
        if self.updates.is_empty() {
            Target::Shard(0, ToShard::Update(Box::new(msg)))
        } else {
            Target::Update(t.min(self.updates.len() - 1), msg)
        }
    }

    /// A message for every shard, as parts that must be delivered together.
    pub(super) fn broadcast(&self, b: Broadcast) -> Vec<Routed> {
        let n = self.shards.len();
        (0..n)
            .map(|i| Routed {
                target: Target::Shard(i, ToShard::All(b.clone())),
                epoch: self.epoch,
                more: i + 1 < n,
            })
            .collect()
    }

    pub(super) fn routed(&self, target: Target) -> Routed {
        Routed {
            target,
            epoch: self.epoch,
            more: false,
        }
    }

    /// Sends from a plain thread, waiting for room.
    pub(super) fn send_blocking(&self, t: Target) {
        match t {
            Target::Shard(i, m) => {
                if let Some((s, q)) = self.shards.get(i).zip(self.shard_queues.get(i)) {
                    blocking(s, q, m);
                }
            }
            Target::Update(i, m) => {
                if let Some((s, q)) = self.updates.get(i).zip(self.update_queues.get(i)) {
                    blocking(s, q, m);
                }
            }
        }
    }

    /// Sends from a task, waiting for room.
    pub(super) async fn send(&self, t: Target) {
        match t {
            Target::Shard(i, m) => {
                if let Some((s, q)) = self.shards.get(i).zip(self.shard_queues.get(i)) {
                    let _ = reserve(s, q).await.map(|p| p.send(m));
                }
            }
            Target::Update(i, m) => {
                if let Some((s, q)) = self.updates.get(i).zip(self.update_queues.get(i)) {
                    let _ = reserve(s, q).await.map(|p| p.send(m));
                }
            }
        }
    }
}

/// Sends on a bounded channel from a plain thread, counting the time spent waiting.
pub(super) fn blocking<M>(to: &mpsc::Sender<M>, q: &QueueStats, m: M) {
    q.sent();
    match to.try_send(m) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(m)) => {
            let t = Instant::now();
            let _ = to.blocking_send(m);
            q.blocked(t);
        }
        Err(mpsc::error::TrySendError::Closed(_)) => {}
    }
}

/// Room on a bounded channel, counting the time spent waiting for it. Cancel-safe.
pub async fn reserve<'a, M>(
    to: &'a mpsc::Sender<M>,
    q: &QueueStats,
) -> Option<mpsc::Permit<'a, M>> {
    let p = match to.try_reserve() {
        Ok(p) => p,
        Err(mpsc::error::TrySendError::Full(())) => {
            let t = Instant::now();
            let p = to.reserve().await.ok();
            q.blocked(t);
            p?
        }
        Err(mpsc::error::TrySendError::Closed(())) => return None,
    };
    q.sent();
    Some(p)
}

impl Pipeline {
    /// Addresses again, for the threads of `lanes`, a message addressed for earlier ones:
    /// routes are split again by the shard that owns each prefix now; of a message to every
    /// shard, the first part becomes the message to every new shard and the others nothing;
    /// update-thread messages go where their group is now.
    pub fn retarget(&self, r: Routed, lanes: &Lanes) -> Vec<Routed> {
        if r.epoch == lanes.epoch {
            return vec![r];
        }
        let n = lanes.shards.len();
        match r.target {
            Target::Shard(_, ToShard::Routes(batch)) => {
                let mut b = Batcher::new(batch.peer, n);
                b.epoch = lanes.epoch;
                if let Some(at) = batch.received {
                    b.stamp(|| at);
                }
                for (i, nlri) in batch.ops {
                    match batch.attrs.get(i as usize) {
                        Some(a) if i != WITHDRAW => b.announce(a, nlri),
                        _ => b.withdraw(nlri),
                    }
                }
                b.take()
                    .into_iter()
                    .map(|(i, m)| lanes.routed(Target::Shard(i, m)))
                    .collect()
            }
            // Of a message to every shard, part 0 becomes the message to every new shard...
            Target::Shard(0, ToShard::All(b)) => lanes.broadcast(self.replaced(b)),
            // ... and the other parts nothing.
            Target::Shard(_, ToShard::All(_)) => Vec::new(),
            Target::Shard(_, ToShard::Update(m)) => vec![self.update_routed(*m, lanes)],
            Target::Update(_, m) => vec![self.update_routed(m, lanes)],
            Target::Shard(i, m) => vec![lanes.routed(Target::Shard(i.min(n.max(1) - 1), m))],
        }
    }

    /// A broadcast as the new threads need it: a membership names its group's update
    /// thread now.
    fn replaced(&self, b: Broadcast) -> Broadcast {
        match b {
            Broadcast::PeerUp {
                peer,
                info,
                member: Some(m),
            } => Broadcast::PeerUp {
                peer,
                info,
                member: Some(super::Membership {
                    update_thread: self.placement(m.group, m.update_thread),
                    ..m
                }),
            },
            other => other,
        }
    }

    fn update_routed(&self, m: ToUpdate, lanes: &Lanes) -> Routed {
        let t = m.group().map_or(0, |g| self.placement(g, 0));
        lanes.routed(lanes.to_update(t, m))
    }

    /// Sends from a plain thread (tests, tools), waiting for room.
    pub fn blocking_send(&self, r: impl Into<Routed>) {
        let _gate = self.gate.blocking_read();
        let lanes = self.lanes();
        let mut r: Routed = r.into();
        if r.epoch == Routed::CURRENT {
            r.epoch = lanes.epoch;
        }
        for r in self.retarget(r, &lanes) {
            lanes.send_blocking(r.target);
        }
    }

    /// Sends from a task, waiting for room.
    pub async fn send(&self, r: impl Into<Routed>) {
        let _gate = self.enter().await;
        let lanes = self.lanes();
        let mut r: Routed = r.into();
        if r.epoch == Routed::CURRENT {
            r.epoch = lanes.epoch;
        }
        for r in self.retarget(r, &lanes) {
            lanes.send(r.target).await;
        }
    }
}
