//! The Adj-RIB-Out feed (RFC 8671): what each neighbor is sent, after export policy (the O
//! and L flags), from the pipeline's [`SentTap`] on the members' sinks. The UPDATEs are
//! wrapped as they were queued for the neighbor's connection, not encoded again.
//!
//! A member's first UPDATEs can reach the monitor before its Peer Up (they come from an
//! update thread, the Peer Up from the session's tap): those are held, bounded, until the
//! Peer Up of the same session (the membership's epoch) and dropped if a later session's
//! comes first. What reaches the monitor for a session that went down is dropped.

use crate::message::peer_flags;
use crate::monitor::{Feed, Input, State};
use crate::routes::wrap_updates;
use bytes::Bytes;
use hashbrown::HashMap;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::SentTap;
use tokio::sync::mpsc;
use tracing::warn;

/// Octets of UPDATEs held for sessions whose Peer Up has not come yet, at most: a
/// member's first table dump is sent in pieces, and the Peer Up follows within moments.
const EARLY_BOUND: usize = 64 << 20;

/// The pipeline's side: each member's UPDATEs, handed to the monitor's thread.
pub(crate) struct SentFeed {
    pub(crate) tx: mpsc::Sender<Input>,
}

impl SentTap for SentFeed {
    fn sent(&self, member: MemberId, updates: Bytes, _messages: u32) {
        let m = Input::Sent(member, updates);
        // Update threads are plain threads: they wait for room, as shards do for the
        // Loc-RIB. Anywhere else (never, today) the UPDATEs would be lost: say so.
        if tokio::runtime::Handle::try_current().is_ok() {
            if self.tx.try_send(m).is_err() {
                warn!(
                    peer = member.peer,
                    "BMP: Adj-RIB-Out UPDATEs lost (the monitor is behind)"
                );
            }
        } else {
            let _ = self.tx.blocking_send(m);
        }
    }
}

/// UPDATEs that came before their session's Peer Up.
#[derive(Default)]
pub(crate) struct Early {
    held: Vec<(MemberId, Bytes)>,
    octets: usize,
    /// Per neighbor, the epoch of its last session that went down: what comes for it or an
    /// earlier one is late, not early.
    down: HashMap<u32, u32>,
}

impl State {
    /// A member's UPDATEs as queued for its connection.
    pub(crate) fn sent(&mut self, member: MemberId, updates: Bytes) {
        if !self.connected(Feed::AdjRibOut) {
            return;
        }
        if self
            .early
            .down
            .get(&member.peer)
            .is_some_and(|e| member.epoch <= *e)
        {
            return;
        }
        let known = self.peers.get(&(member.peer as usize)).map(|p| p.epoch);
        match known {
            Some(e) if e == member.epoch => {
                let msg = self.adj_rib_out(member.peer as usize, &updates);
                self.send(Feed::AdjRibOut, msg.into_iter().collect());
            }
            // An earlier session's, after its Peer Down: the stations were told it is gone.
            Some(e) if e > member.epoch => {}
            _ => {
                if self.early.octets + updates.len() > EARLY_BOUND {
                    warn!(
                        peer = member.peer,
                        "BMP: Adj-RIB-Out UPDATEs before the Peer Up past the bound: dropped"
                    );
                    return;
                }
                self.early.octets += updates.len();
                self.early.held.push((member, updates));
            }
        }
    }

    /// A session came up: what it was sent before is sent now; an earlier session's goes.
    pub(crate) fn sent_before_up(&mut self, peer: usize, epoch: u32) {
        if self.early.held.is_empty() {
            return;
        }
        let held = std::mem::take(&mut self.early.held);
        let mut msgs = Vec::new();
        for (member, updates) in held {
            if member.peer as usize != peer || member.epoch > epoch {
                self.early.held.push((member, updates));
            } else if member.epoch == epoch {
                msgs.extend(self.adj_rib_out(peer, &updates));
            }
        }
        self.early.octets = self.early.held.iter().map(|(_, b)| b.len()).sum();
        self.send(Feed::AdjRibOut, msgs);
    }

    /// A session went down: what it was sent from now on is late, and dropped.
    pub(crate) fn sent_session_down(&mut self, peer: usize, epoch: u32) {
        self.early.down.insert(peer as u32, epoch);
        if self.early.held.iter().any(|(m, _)| m.peer as usize == peer) {
            self.early
                .held
                .retain(|(m, _)| m.peer as usize != peer || m.epoch > epoch);
            self.early.octets = self.early.held.iter().map(|(_, b)| b.len()).sum();
        }
    }

    /// Route Monitoring for UPDATEs sent to `peer`: Adj-RIB-Out, post-policy; the A flag
    /// when its session has 2-octet AS numbers (the UPDATEs were encoded so).
    fn adj_rib_out(&self, peer: usize, updates: &[u8]) -> Option<Bytes> {
        let p = self.peers.get(&peer)?;
        let mut flags = peer_flags::O | peer_flags::L;
        if !p.four_octet_as {
            flags |= peer_flags::A;
        }
        Some(wrap_updates(&p.header.with_flags(flags).now(), updates))
    }
}
