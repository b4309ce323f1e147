//! What the update groups send each member, for a monitor of the Adj-RIB-Out (BMP, RFC
//! 8671): a [`SentTap`] given when the pipeline starts sees every UPDATE queued for each
//! member's connection, in order, as the bytes that go on the wire.
//!
//! Taken at the member's sink rather than from the shards: a group encodes once for all its
//! members, and what a member is sent (its own paths left out, a slow receiver's changes
//! merged) is only known there. The tap runs on the update threads; like a shard's tap it
//! copies what it needs and hands it to its own thread, and blocking there holds the group.

use bytes::Bytes;
use ribshard_adjout::{MemberId, Outgoing, Sink};
use std::sync::Arc;

/// A monitor of what members are sent.
pub trait SentTap: Send + Sync {
    /// UPDATEs (`messages` whole messages) queued for `member`'s connection, in order.
    fn sent(&self, member: MemberId, updates: Bytes, messages: u32);
}

/// A member's sink that also tells the tap what it queued.
pub(super) struct TappedSink {
    pub(super) inner: Box<dyn Sink>,
    pub(super) tap: Arc<dyn SentTap>,
    pub(super) member: MemberId,
}

impl Sink for TappedSink {
    fn send(&self, out: Outgoing) -> bool {
        // A Route Refresh marker (RFC 7313) is not a route: only UPDATEs are monitored.
        let tapped = (!out.route_refresh).then(|| (out.bytes.clone(), out.messages));
        let ok = self.inner.send(out);
        if let Some((bytes, messages)) = tapped.filter(|_| ok) {
            self.tap.sent(self.member, bytes, messages);
        }
        ok
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn unsent(&self) -> usize {
        self.inner.unsent()
    }
    fn neighbor(&self) -> &str {
        self.inner.neighbor()
    }
    fn duplicate(&self) -> Box<dyn Sink> {
        Box::new(TappedSink {
            inner: self.inner.duplicate(),
            tap: self.tap.clone(),
            member: self.member,
        })
    }
}
