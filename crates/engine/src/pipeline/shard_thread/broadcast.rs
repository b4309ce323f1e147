//! How a shard thread applies what is sent to every shard ([`Broadcast`]): peers coming up
//! and going down, the walks over one peer's paths they start (stale marking, flushing,
//! re-import), markers and End-of-RIB, the start-up deferral's end, RPKI data and next-hop
//! resolution changes. A peer's walks always finish before its next message is applied.

use super::{Out, ShardWorker};
use crate::pipeline::{give_back, Broadcast, ToUpdate};
use ribshard_rib::{PeerIndex, WalkOp};
use std::sync::atomic::Ordering;

impl ShardWorker {
    pub(super) fn broadcast(&mut self, b: Broadcast) {
        // Whatever the peer did before: a new session's routes must not be removed (or
        // marked stale) by the old session's walk.
        if let Some(peer) = b.peer() {
            self.finish_walks_of(peer);
        }
        match b {
            Broadcast::PeerUp { peer, info, member } => {
                self.shard.set_peer(peer, info);
                match member {
                    Some(m) if self.deferring.load(Ordering::Acquire) => {
                        self.held_members.push((m, 0, None));
                    }
                    Some(m) => self.add_member(m, 0, None),
                    None => {}
                }
            }
            Broadcast::AdvertiseNow => {
                // What is decided so far goes into the table dumps, not out as changes
                // ahead of them (the held members are in no group yet).
                self.drain();
                // The tables have arrived: what their arrival freed goes back before the
                // dumps build theirs.
                if self.index == 0 {
                    give_back::give_back();
                }
                for (m, token, previous) in std::mem::take(&mut self.held_members) {
                    self.add_member(m, token, previous);
                }
                if let Some(at) = self.unreported_since.take() {
                    for d in self.dumps.iter_mut() {
                        d.received_since(at);
                    }
                }
                for t in self.taps.iter_mut() {
                    t.advertising();
                }
                self.release_markers();
            }
            Broadcast::Resolution => {
                let n = self.shard.resolution_changed();
                if n > 0 {
                    tracing::debug!(
                        shard = self.index,
                        prefixes = n,
                        "next-hop resolution changed: deciding again"
                    );
                }
            }
            Broadcast::Rpki(snapshot) => {
                let version = snapshot.version;
                let (looked, aspa_peers) = self.shard.set_rpki(snapshot);
                for peer in aspa_peers {
                    let w = self.shard.walk(peer, WalkOp::Reimport);
                    self.walks.push_back(w);
                }
                tracing::debug!(
                    shard = self.index,
                    version,
                    prefixes = looked,
                    "RPKI data changed: imported the affected paths again"
                );
            }
            Broadcast::PeerDown {
                peer,
                stale,
                member,
            } => {
                let op = match stale {
                    Some(f) => WalkOp::MarkStale(f),
                    None => WalkOp::Remove,
                };
                if matches!(op, WalkOp::Remove) {
                    self.paths_before_downs.get_or_insert(self.shard.paths());
                }
                let w = self.shard.walk(peer, op);
                self.walks.push_back(w);
                if let Some((group, id)) = member {
                    if self.held_members.iter().any(|h| h.0.member == id) {
                        self.held_members.retain(|h| h.0.member != id);
                    } else {
                        self.remove_member(group);
                    }
                    // Gone while moving: its old groups have it no more either.
                    for (from, _) in self.moving.remove(&id).unwrap_or_default() {
                        self.remove_member(from);
                    }
                }
            }
            Broadcast::Regroup { member, from, to } => self.regroup(member, from, to),
            Broadcast::FlushStale { peer, families } => {
                let w = self.shard.walk(peer, WalkOp::FlushStale(families));
                self.walks.push_back(w);
            }
            Broadcast::LongLivedStale { peer, families } => {
                let w = self.shard.walk(peer, WalkOp::LongLivedStale(families));
                self.walks.push_back(w);
            }
            Broadcast::RefreshBegin { peer, families } => {
                let w = self.shard.walk(peer, WalkOp::RefreshBegin(families));
                self.walks.push_back(w);
            }
            Broadcast::Import {
                peer,
                import,
                reimport,
            } => {
                self.shard.set_import(peer, import);
                if reimport {
                    let w = self.shard.walk(peer, WalkOp::Reimport);
                    self.walks.push_back(w);
                }
            }
            Broadcast::EndOfRib {
                peer,
                family,
                epoch,
            } => {
                // The peer's walks are done (`finish_walks_of`); what they and its routes
                // changed goes first.
                self.hand_post_policy();
                for t in self.taps.iter_mut().filter(|t| t.wants_post_policy()) {
                    t.end_of_rib(peer, family, epoch);
                }
            }
            Broadcast::Marker { peer, token } => {
                // Advertising held (members waiting for the deferral's end), or markers
                // held already: after the dumps, in order.
                if self.advertising_held() || !self.held_markers.is_empty() {
                    self.held_markers.push((peer, token));
                } else {
                    self.send_marker(peer, token);
                }
            }
        }
    }

    /// Whether this shard's exports wait for the start-up deferral's end: the deferral is
    /// on, or members it held are not yet in their groups (the flag clears before this
    /// shard has taken [`Broadcast::AdvertiseNow`]).
    pub(super) fn advertising_held(&self) -> bool {
        self.deferring.load(Ordering::Acquire) || !self.held_members.is_empty()
    }

    fn send_marker(&mut self, peer: PeerIndex, token: u64) {
        // Everything before it goes out first: decided, exported, handed on.
        self.drain();
        let shard = self.index;
        let threads = match &self.out {
            Out::Threads(s, _) => s.len(),
            Out::Inline(_) => 1,
        };
        for t in 0..threads {
            self.send_update(t, ToUpdate::Marker { shard, peer, token });
        }
    }

    /// Sends the markers held through a deferral once its table dumps are done.
    pub(super) fn release_markers(&mut self) {
        if self.held_markers.is_empty() || self.advertising_held() || !self.dumps.is_empty() {
            return;
        }
        for (peer, token) in std::mem::take(&mut self.held_markers) {
            self.send_marker(peer, token);
        }
    }

    /// Completes the walks of a peer before its next message is applied: a new session's
    /// routes must not be removed (or marked stale) by the old session's walk.
    pub(super) fn finish_walks_of(&mut self, peer: PeerIndex) {
        while let Some(i) = self.walks.iter().position(|w| w.peer == peer) {
            if let Some(mut w) = self.walks.remove(i) {
                while !self.shard.walk_step(&mut w, usize::MAX) {}
            }
        }
    }
}
