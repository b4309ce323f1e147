//! The one way inputs hand messages to the pipeline: an [`Inlet`] per input (a session, the
//! resolver, an injected RIB) keeps what waits to be handed on, in order, and its pass
//! through the re-shard gate; [`Pipeline::deliver`] hands the oldest on as room appears.
//! Inputs never see the gate, the epochs or the re-addressing a re-shard needs.

use super::{reserve, Pipeline, Routed, Target};
use crate::telemetry::QueueStats;
use std::collections::VecDeque;
use tokio::sync::{mpsc, OwnedRwLockReadGuard};

/// What one input has for the pipeline, in the order to hand it on.
#[derive(Default)]
pub struct Inlet {
    pending: VecDeque<Routed>,
    /// Held across the parts of a message to every shard (and while more is queued), so
    /// that no re-shard comes between them.
    gate: Option<OwnedRwLockReadGuard<()>>,
    /// Messages put in and handed on (or dropped) so far: an input that must know when
    /// something it queued is in the threads' queues (the session's tap) notes
    /// [`Inlet::pushed`] and waits until [`Inlet::handed_on`] reaches it.
    pushed: u64,
    handed: u64,
}

impl Inlet {
    pub fn new() -> Inlet {
        Inlet::default()
    }

    pub fn push(&mut self, r: Routed) {
        self.pending.push_back(r);
        self.pushed += 1;
    }

    /// Messages put in so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Whether every message put in before [`Inlet::pushed`] returned `mark` is in its
    /// thread's queue (or was dropped with [`Inlet::clear`]).
    pub fn handed_on(&self, mark: u64) -> bool {
        self.handed.wrapping_sub(mark) as i64 >= 0
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Drops everything waiting (nothing will take it).
    pub fn clear(&mut self) {
        self.handed = self.handed.wrapping_add(self.pending.len() as u64);
        self.pending.clear();
        self.gate = None;
    }
}

impl Extend<Routed> for Inlet {
    fn extend<T: IntoIterator<Item = Routed>>(&mut self, iter: T) {
        for r in iter {
            self.push(r);
        }
    }
}

impl Pipeline {
    /// Hands the oldest message of `inlet` on once its thread's queue has room; never
    /// returns while the inlet is empty. Cancel-safe: a message leaves the inlet only with
    /// a reserved slot.
    ///
    /// It is handed on inside the pipeline's gate, kept across the parts of a message to
    /// every shard, so a re-shard never falls between them; one addressed for threads a
    /// re-shard replaced is addressed again first ([`Pipeline::retarget`]).
    pub async fn deliver(&self, inlet: &mut Inlet) {
        let Some(epoch) = inlet.pending.front().map(|r| r.epoch) else {
            return std::future::pending().await;
        };
        if inlet.gate.is_none() {
            inlet.gate = Some(self.enter().await);
        }
        let lanes = self.lanes();
        if epoch != lanes.epoch && epoch != Routed::CURRENT {
            // Addressed before a re-shard; never one part of a message to every shard (the
            // gate is kept across those), so the gate can go.
            inlet.gate = None;
            if let Some(r) = inlet.pending.pop_front() {
                let parts = self.retarget(r, &lanes);
                // One message became `parts`: each must be handed on before what followed
                // it counts as handed on.
                inlet.handed = inlet
                    .handed
                    .wrapping_sub((parts.len() as u64).wrapping_sub(1));
                for r in parts.into_iter().rev() {
                    inlet.pending.push_front(r);
                }
            }
            return;
        }
        let sent = match inlet.pending.front().map(|r| &r.target) {
            Some(Target::Shard(i, _)) => match lanes.shard(*i).zip(lanes.shard_queue(*i)) {
                Some((s, q)) => {
                    send_front(&mut inlet.pending, s, q, |t| match t {
                        Target::Shard(_, m) => Some(m),
                        Target::Update(..) => None,
                    })
                    .await
                }
                None => None,
            },
            Some(Target::Update(i, _)) => match lanes.update(*i).zip(lanes.update_queue(*i)) {
                Some((s, q)) => {
                    send_front(&mut inlet.pending, s, q, |t| match t {
                        Target::Update(_, m) => Some(m),
                        Target::Shard(..) => None,
                    })
                    .await
                }
                None => None,
            },
            None => None,
        };
        inlet.handed = inlet.handed.wrapping_add(1);
        match sent {
            Some(true) => {}
            Some(false) => inlet.gate = None,
            // The pipeline is stopped: the message is dropped, never retried.
            None => {
                inlet.pending.pop_front();
                inlet.gate = None;
            }
        }
    }

    /// Hands every message of `msgs` on from a plain thread (the resolver, an injected
    /// RIB), in order, waiting for room, all inside one pass of the gate.
    pub fn deliver_blocking(&self, msgs: Vec<Routed>) {
        if msgs.is_empty() {
            return;
        }
        let _gate = self.gate.blocking_read();
        let lanes = self.lanes();
        for mut r in msgs {
            if r.epoch == Routed::CURRENT {
                r.epoch = lanes.epoch;
            }
            for r in self.retarget(r, &lanes) {
                lanes.send_blocking(r.target);
            }
        }
    }
}

/// Sends the message at the front of `pending` on `to` once it has room: `Some` with
/// whether more parts of it follow, `None` if the channel is closed. Cancel-safe.
async fn send_front<M>(
    pending: &mut VecDeque<Routed>,
    to: &mpsc::Sender<M>,
    queue: &QueueStats,
    take: impl FnOnce(Target) -> Option<M>,
) -> Option<bool> {
    let permit = reserve(to, queue).await?;
    let r = pending.pop_front()?;
    if let Some(m) = take(r.target) {
        permit.send(m);
    }
    Some(r.more)
}
