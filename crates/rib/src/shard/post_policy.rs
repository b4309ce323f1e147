//! The post-policy Adj-RIB-In's changes (RFC 7854 section 4.2's L flag), recorded for the
//! subscribers that monitor it (BMP) and only while one does.
//!
//! The Loc-RIB's stream says which best path changed; a station monitoring the post-policy
//! Adj-RIB-In wants every path as import policy left it, each time it changes: received again
//! with new attributes, re-imported under a new policy or a new RPKI state, made long-lived
//! stale, withdrawn, rejected, or gone with its session. The shard records those changes where
//! they happen, in order; the owner drains them with the decided changes.

use super::{Path, PeerIndex};
use crate::attrs::RouteAttrs;
use ribshard_wire::Prefix;
use std::sync::Arc;

/// One path's new state in the post-policy Adj-RIB-In.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdjRibInChange {
    pub prefix: Prefix,
    pub peer: PeerIndex,
    pub path_id: u32,
    /// The attributes import policy gave it; `None` when it left the post-policy table
    /// (withdrawn, rejected, looping, or its session went down).
    pub attrs: Option<Arc<RouteAttrs>>,
}

/// The changes recorded since the last drain; empty and untouched while off.
#[derive(Debug, Default)]
pub(super) struct PostPolicyLog {
    on: bool,
    changes: Vec<AdjRibInChange>,
}

impl PostPolicyLog {
    pub(super) fn set(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.changes = Vec::new();
        }
    }

    /// A new version of a path is in place.
    #[inline]
    pub(super) fn put(&mut self, prefix: &Prefix, p: &Path) {
        if self.on {
            self.push(prefix, p, p.accepted().then(|| p.attrs.clone()));
        }
    }

    /// A path left the Adj-RIB-In.
    #[inline]
    pub(super) fn removed(&mut self, prefix: &Prefix, p: &Path) {
        if self.on {
            self.push(prefix, p, None);
        }
    }

    fn push(&mut self, prefix: &Prefix, p: &Path, attrs: Option<Arc<RouteAttrs>>) {
        self.changes.push(AdjRibInChange {
            prefix: *prefix,
            peer: p.peer,
            path_id: p.path_id,
            attrs,
        });
    }

    pub(super) fn drain(&mut self) -> Vec<AdjRibInChange> {
        std::mem::take(&mut self.changes)
    }
}
