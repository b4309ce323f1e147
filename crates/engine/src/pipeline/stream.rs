//! The shards' one stream of best-path changes, and who subscribes to it.
//!
//! A shard decides every prefix touched since its last drain once
//! ([`ribshard_rib::Shard::drain_changes`]) and hands that batch of changes (prefix, old best
//! path, new best path and, with `multipath`, the rest of its equal-cost set) to each of its
//! subscribers, in its own thread, in decision order:
//!
//! - **update-group export**, built into the shard thread: each group is sent what changes
//!   in what it advertises. It alone is held back by the start-up deferral (no member joins
//!   a group until it ends), and it alone has table dumps, since members join late.
//! - **every [`Subscriber`] registered when the pipeline starts**
//!   ([`super::Inputs::subscribers`]): the FIB writer, and the like (BMP, a route-change
//!   watch). Adding one is a type implementing [`Subscriber`] and one line where the
//!   pipeline is started.
//!
//! What a subscriber can rely on (and must do):
//!
//! - **Every change, once, in order per prefix, from the first.** Each shard calls its
//!   subscriber's [`Tap`] with every batch it decides, the start-up deferral included (it
//!   holds update groups, not the stream). A prefix belongs to one shard, so its changes
//!   come from one tap, in order. A change with `best_changed` false only reports an
//!   equal-cost set (with `multipath`, every decided prefix is reported).
//! - **Its own lane.** [`Tap::decided`] runs in the shard thread: it should copy what it
//!   needs and hand it to the subscriber's own thread over a bounded channel. Blocking there
//!   is backpressure on routing (the shard stops, then the sessions stop reading), so a
//!   subscriber that can fall behind (the kernel is slower than BGP) coalesces in its own
//!   thread rather than leaving work queued in the lane.
//! - **Barriers.** [`super::Pipeline::barrier`] passes through every tap after everything the
//!   shard decided before ([`Tap::barrier`]); the subscriber passes the [`Passed`] token on
//!   once it has taken all of that in. A barrier returns when every shard's update threads
//!   and subscribers have passed it.
//! - **The post-policy Adj-RIB-In, on request.** A tap that [`Tap::wants_post_policy`] is
//!   also handed every path's change as import policy left it ([`Tap::post_policy`]), a
//!   session's paths leaving with it included; the shard records them only then.
//! - **The deferral's end.** [`Tap::advertising`] is called after the changes the shard
//!   decided before the start-up deferral ended (at once, with no deferral), once per shard;
//!   a subscriber that waits for a complete table (the FIB's reconciliation with the kernel
//!   at start) waits for every shard's.
//! - **Re-sharding.** The old shards' taps are dropped after a barrier, and the new shards
//!   get new ones from [`Subscriber::tap`]. Each prefix moves with the best path last
//!   reported, so nothing is decided or sent again: a subscriber keys its state by prefix,
//!   never by shard.

use ribshard_rib::{AdjRibInChange, Change, PeerIndex, Shard};
use ribshard_wire::Family;
use std::sync::mpsc as std_mpsc;

/// A consumer of the shards' best-path changes; registered when the pipeline starts and kept
/// for its life (re-shards included).
pub trait Subscriber: Send + Sync {
    /// A short name for logs and metrics.
    fn name(&self) -> &'static str;
    /// The part of the subscriber that runs in shard `shard` of `shards` (at start, and for
    /// each new shard after a re-shard).
    fn tap(&self, shard: usize, shards: usize) -> Box<dyn Tap>;
}

/// A subscriber's part in one shard thread.
pub trait Tap: Send {
    /// A batch of decided changes. `table` is the shard as decided (peers, next hops), for
    /// what the changes do not carry; read it here, it is not kept.
    fn decided(&mut self, table: &Shard, changes: &[Change]);
    /// Everything this shard decided before has been handed to [`Tap::decided`]; pass
    /// `done` once the subscriber has taken it in.
    fn barrier(&mut self, done: Passed);
    /// The start-up deferral is over in this shard (at once without one); every change
    /// decided before was handed on.
    fn advertising(&mut self) {}
    /// Whether it monitors the post-policy Adj-RIB-In: the shard records every path's
    /// changes only while one of its taps does (asked when the tap takes over a table).
    fn wants_post_policy(&self) -> bool {
        false
    }
    /// The post-policy Adj-RIB-In's changes since the last batch, in the order they
    /// happened, before the decided changes they led to.
    fn post_policy(&mut self, _changes: &[AdjRibInChange]) {}
    /// `peer`'s End-of-RIB for `family` on its session `epoch` reached this shard: its
    /// post-policy changes before it were handed to [`Tap::post_policy`] (only for taps that
    /// want them).
    fn end_of_rib(&mut self, _peer: PeerIndex, _family: Family, _epoch: u32) {}
}

/// A barrier's token: passing it tells the pipeline this subscriber has everything before.
#[must_use = "a barrier waits until every token is passed"]
pub struct Passed(std_mpsc::Sender<()>);

impl Passed {
    pub(super) fn new(ack: std_mpsc::Sender<()>) -> Passed {
        Passed(ack)
    }

    pub fn pass(self) {
        let _ = self.0.send(());
    }
}

impl std::fmt::Debug for Passed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passed")
    }
}
