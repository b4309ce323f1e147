//! The FIB writer's part in each shard thread ([`ribshard_engine::pipeline::Tap`]): turns
//! each best-path change into what the kernel should hold for the prefix, drops those that
//! change nothing there, and hands the rest to the writer's thread in one message a batch.

use crate::objects::Want;
use crate::writer::{FibChange, FibInput};
use arc_swap::ArcSwap;
use hashbrown::HashSet;
use ribshard_engine::pipeline::{Passed, Subscriber, Tap};
use ribshard_rib::attrs::NextHopAction;
use ribshard_rib::{next_hop_addr, Change, Path, PeerIndex, Shard};
use smallvec::SmallVec;
use std::sync::mpsc::{SendError, SyncSender};
use std::sync::Arc;

/// The neighbors whose routes are not installed (`no-install`: a route reflector's clients,
/// a route server's members).
pub type NoInstall = Arc<ArcSwap<HashSet<PeerIndex>>>;

pub struct FibSubscriber {
    pub(crate) tx: SyncSender<FibInput>,
    pub(crate) no_install: NoInstall,
}

impl Subscriber for FibSubscriber {
    fn name(&self) -> &'static str {
        "fib"
    }

    fn tap(&self, shard: usize, shards: usize) -> Box<dyn Tap> {
        Box::new(FibTap {
            shard,
            shards,
            tx: self.tx.clone(),
            no_install: self.no_install.clone(),
        })
    }
}

struct FibTap {
    shard: usize,
    shards: usize,
    tx: SyncSender<FibInput>,
    no_install: NoInstall,
}

/// What the kernel should hold for a best path and the rest of its equal-cost set: its
/// next hops (sorted, each once), or import policy's reject or discard; `None` for no
/// route (no best path, a `no-install` neighbor's, or no next hop at all).
pub fn want_of(
    no_install: &HashSet<PeerIndex>,
    best: Option<&Path>,
    multipath: &[Path],
) -> Option<Want> {
    let best = best?;
    if no_install.contains(&best.peer) {
        return None;
    }
    match best.attrs.next_hop_action() {
        Some(NextHopAction::Reject) => return Some(Want::Reject),
        Some(NextHopAction::Discard) => return Some(Want::Discard),
        None => {}
    }
    let mut nhs: SmallVec<[std::net::IpAddr; 2]> = std::iter::once(best)
        .chain(multipath.iter())
        .filter(|p| !no_install.contains(&p.peer))
        .filter_map(|p| next_hop_addr(p.attrs.next_hop()))
        .collect();
    nhs.sort_unstable();
    nhs.dedup();
    (!nhs.is_empty()).then_some(Want::Forward(nhs))
}

impl Tap for FibTap {
    fn decided(&mut self, _table: &Shard, changes: &[Change]) {
        let ni = self.no_install.load();
        let mut out = Vec::new();
        for c in changes.iter().filter(|c| !c.paths_only) {
            let want = want_of(&ni, c.best.as_ref(), &c.multipath);
            // Without an equal-cost set, the old best path says what the kernel holds:
            // a change that keeps the next hop writes nothing.
            if c.best_changed && c.multipath.is_empty() && want == want_of(&ni, c.old.as_ref(), &[])
            {
                continue;
            }
            out.push(FibChange {
                prefix: c.prefix,
                want,
            });
        }
        if !out.is_empty() {
            // Blocks only while the writer's queue is full: backpressure on routing.
            let _ = self.tx.send(FibInput::Changes(out));
        }
    }

    fn barrier(&mut self, done: Passed) {
        // A writer that is gone must not hold the barrier forever.
        if let Err(SendError(FibInput::Barrier(p))) = self.tx.send(FibInput::Barrier(done)) {
            p.pass();
        }
    }

    fn advertising(&mut self) {
        let _ = self.tx.send(FibInput::Advertising {
            shard: self.shard,
            shards: self.shards,
        });
    }
}
