//! Handing what a session received on to the pipeline (or the tap), in order, as room
//! appears: the session stops reading its socket meanwhile (backpressure).

use super::Inbound;
use crate::pipeline::{reserve, Pipeline, Routed, Target};
use crate::telemetry::QueueStats;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::{mpsc, OwnedRwLockReadGuard};

/// Something a session hands on, in order.
pub(super) enum Out {
    Tap(Inbound),
    Pipe(Routed),
}

/// Delivers the oldest pending item once its queue has room. Cancel-safe: the item leaves
/// `pending` only with a reserved slot.
///
/// A pipeline message is handed on inside the pipeline's gate (`gate`, kept across the
/// parts of a message to every shard), so a re-shard never falls between them; one
/// addressed for threads a re-shard replaced is addressed again first.
pub(super) async fn deliver(
    pending: &mut VecDeque<Out>,
    tap: &Option<mpsc::Sender<Inbound>>,
    pipeline: &Option<Arc<Pipeline>>,
    gate: &mut Option<OwnedRwLockReadGuard<()>>,
) {
    match pending.front() {
        None => std::future::pending().await,
        Some(Out::Tap(_)) => {
            let permit = match tap {
                Some(t) => t.reserve().await.ok(),
                None => None,
            };
            // Without a permit the receiver is gone: the item is dropped, never retried.
            if let (Some(p), Some(Out::Tap(m))) = (permit, pending.pop_front()) {
                p.send(m);
            }
        }
        Some(Out::Pipe(r)) => {
            let Some(p) = pipeline else {
                pending.pop_front();
                return;
            };
            let epoch = r.epoch;
            if gate.is_none() {
                *gate = Some(p.enter().await);
            }
            let lanes = p.lanes();
            if epoch != lanes.epoch {
                // Addressed before a re-shard; never one part of a message to every shard
                // (the gate is kept across those), so the gate can go.
                *gate = None;
                if let Some(Out::Pipe(r)) = pending.pop_front() {
                    for r in p.retarget(r, &lanes).into_iter().rev() {
                        pending.push_front(Out::Pipe(r));
                    }
                }
                return;
            }
            let sent = match pending.front() {
                Some(Out::Pipe(Routed {
                    target: Target::Shard(i, _),
                    ..
                })) => match lanes.shard(*i).zip(lanes.shard_queue(*i)) {
                    Some((s, q)) => {
                        send_front(pending, s, q, |t| match t {
                            Target::Shard(_, m) => Some(m),
                            Target::Update(..) => None,
                        })
                        .await
                    }
                    None => None,
                },
                Some(Out::Pipe(Routed {
                    target: Target::Update(i, _),
                    ..
                })) => match lanes.update(*i).zip(lanes.update_queue(*i)) {
                    Some((s, q)) => {
                        send_front(pending, s, q, |t| match t {
                            Target::Update(_, m) => Some(m),
                            Target::Shard(..) => None,
                        })
                        .await
                    }
                    None => None,
                },
                _ => None,
            };
            match sent {
                Some(true) => {}
                Some(false) => *gate = None,
                // The pipeline is stopped: the item is dropped, never retried.
                None => {
                    pending.pop_front();
                    *gate = None;
                }
            }
        }
    }
}

/// Sends the pipeline message at the front of `pending` on `to` once it has room: `Some`
/// with whether more parts of it follow, `None` if the channel is closed. Cancel-safe.
async fn send_front<M>(
    pending: &mut VecDeque<Out>,
    to: &mpsc::Sender<M>,
    queue: &QueueStats,
    take: impl FnOnce(Target) -> Option<M>,
) -> Option<bool> {
    let permit = reserve(to, queue).await?;
    let Some(Out::Pipe(r)) = pending.pop_front() else {
        return Some(false);
    };
    if let Some(m) = take(r.target) {
        permit.send(m);
    }
    Some(r.more)
}
