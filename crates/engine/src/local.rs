//! Routes that come from no session: networks we originate, a RIB injected from an MRT
//! file. A [`LocalSource`] enters the pipeline as a neighbor does (its peer index reserved
//! among the sessions' with [`crate::Sessions::reserve`], a `PeerUp`, batches of routes by
//! shard, a `PeerDown`), from a plain thread: nothing in the shards knows it is not a
//! session.

use crate::pipeline::{Batcher, Pipeline, Routed, Target};
use ribshard_rib::{PeerIndex, PeerInfo, RouteAttrs};
use ribshard_wire::Nlri;
use std::sync::Arc;

pub struct LocalSource {
    peer: PeerIndex,
    pipeline: Arc<Pipeline>,
    batcher: Batcher,
    up: bool,
}

impl LocalSource {
    /// A source under peer index `peer` (reserved), up at once: `info` is what the shards
    /// know of it (a local source exports as an eBGP-learned path does: `ebgp` true, our
    /// AS as `local_as` and `peer_as`).
    pub fn up(pipeline: Arc<Pipeline>, peer: PeerIndex, info: PeerInfo) -> LocalSource {
        pipeline.deliver_blocking(pipeline.peer_up(peer, info, None).0);
        LocalSource {
            peer,
            batcher: pipeline.batcher(peer),
            pipeline,
            up: true,
        }
    }

    pub fn peer(&self) -> PeerIndex {
        self.peer
    }

    pub fn announce(&mut self, attrs: &Arc<RouteAttrs>, n: Nlri) {
        self.batcher.announce(attrs, n);
        if self.batcher.is_full() {
            self.flush();
        }
    }

    pub fn withdraw(&mut self, n: Nlri) {
        self.batcher.withdraw(n);
        if self.batcher.is_full() {
            self.flush();
        }
    }

    /// Hands on what is batched (waiting for room).
    pub fn flush(&mut self) {
        if self.batcher.is_empty() {
            return;
        }
        let epoch = self.batcher.epoch();
        let msgs: Vec<Routed> = self
            .batcher
            .take()
            .into_iter()
            .map(|(i, m)| Routed {
                target: Target::Shard(i, m),
                epoch,
                more: false,
            })
            .collect();
        self.pipeline.deliver_blocking(msgs);
        // After a re-shard, split for the shards in force.
        if self.batcher.epoch() != self.pipeline.lanes().epoch {
            self.batcher = self.pipeline.batcher(self.peer);
        }
    }

    /// Everything it announced goes (its `PeerDown`).
    pub fn down(&mut self) {
        if !self.up {
            return;
        }
        self.flush();
        self.up = false;
        self.pipeline
            .deliver_blocking(self.pipeline.peer_down(self.peer, None, None));
    }
}

impl Drop for LocalSource {
    fn drop(&mut self) {
        self.down();
    }
}
