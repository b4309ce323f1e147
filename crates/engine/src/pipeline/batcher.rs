//! Splitting one peer's routes into per-shard batches (`hash(prefix) % N`).

use super::{Batch, Routed, ToShard, BATCH, WITHDRAW};
use ribshard_rib::{shard_of, PeerIndex, RouteAttrs};
use ribshard_wire::Nlri;
use std::sync::Arc;
use std::time::Instant;

/// Splits one peer's routes into per-shard batches.
pub struct Batcher {
    peer: PeerIndex,
    batches: Vec<Batch>,
    ops: usize,
    /// The batches carry the time of the first UPDATE since the last hand-off.
    stamped: bool,
    /// The epoch of the shards it splits for ([`super::Pipeline::batcher`]).
    pub(super) epoch: u64,
}

impl Batcher {
    pub fn new(peer: PeerIndex, shards: usize) -> Batcher {
        Batcher {
            peer,
            batches: (0..shards.max(1))
                .map(|_| Batch {
                    peer,
                    ..Batch::default()
                })
                .collect(),
            ops: 0,
            stamped: false,
            epoch: Routed::CURRENT,
        }
    }

    /// The epoch of the shards its batches are addressed for.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether it holds enough to hand on: thousands of prefixes per shard per hand-off,
    /// however many shards.
    pub fn is_full(&self) -> bool {
        self.ops >= BATCH * self.batches.len()
    }

    /// Operations held.
    pub fn len(&self) -> usize {
        self.ops
    }

    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    /// An UPDATE was read: the batches are stamped with the time, if they were not since
    /// they were last handed on (convergence telemetry measures each batch from its first
    /// UPDATE). The clock is read once a hand-off, not once an UPDATE.
    #[inline]
    pub fn stamp(&mut self, now: impl FnOnce() -> Instant) {
        if self.stamped {
            return;
        }
        let at = now();
        for b in &mut self.batches {
            b.received = Some(at);
        }
        self.stamped = true;
    }

    #[inline]
    pub fn announce(&mut self, attrs: &Arc<RouteAttrs>, n: Nlri) {
        let i = shard_of(&n.prefix, self.batches.len());
        if let Some(b) = self.batches.get_mut(i) {
            let last = b.attrs.len();
            let idx = match b.attrs.last() {
                Some(a) if Arc::ptr_eq(a, attrs) => last - 1,
                _ => {
                    b.attrs.push(attrs.clone());
                    last
                }
            };
            b.ops.push((idx as u32, n));
            self.ops += 1;
        }
    }

    #[inline]
    pub fn withdraw(&mut self, n: Nlri) {
        let i = shard_of(&n.prefix, self.batches.len());
        if let Some(b) = self.batches.get_mut(i) {
            b.ops.push((WITHDRAW, n));
            self.ops += 1;
        }
    }

    /// The non-empty batches, as messages for their shards.
    pub fn take(&mut self) -> Vec<(usize, ToShard)> {
        self.ops = 0;
        self.stamped = false;
        let peer = self.peer;
        self.batches
            .iter_mut()
            .enumerate()
            .filter(|(_, b)| !b.ops.is_empty())
            .map(|(i, b)| {
                let full = std::mem::replace(
                    b,
                    Batch {
                        peer,
                        ..Batch::default()
                    },
                );
                (i, ToShard::Routes(full))
            })
            .collect()
    }
}
