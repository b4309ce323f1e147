//! The counts a shard keeps as paths come and go (per peer and family: received,
//! accepted, active; per peer: what its announcements met), so that `show` commands and
//! BMP's statistics read them without walking the table. Nothing here decides anything.

use super::{Path, PeerIndex};

/// One peer's paths in one family, as operators count them (Junos "Received", "Accepted",
/// "Active").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerCounts {
    /// Paths in the Adj-RIB-In, stale ones included.
    pub received: u32,
    /// Of those, the paths import policy accepted that do not loop.
    pub accepted: u32,
    /// Best paths (the Loc-RIB entries last reported) learned from the peer.
    pub active: u32,
}

/// What one peer's announcements met here, counted as they came over its sessions
/// (wrapping counters, BMP's RFC 7854 section 4.8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerCounters {
    /// Rejected by import policy (stat type 0); a policy changed later is not counted.
    pub import_rejections: u32,
    /// A path held already, unchanged (type 1); not one refreshing a stale path.
    pub duplicate_announcements: u32,
}

impl PeerCounters {
    /// Adds `other`'s counts (a peer's over several shards).
    pub fn add(&mut self, other: &PeerCounters) {
        self.import_rejections = self.import_rejections.wrapping_add(other.import_rejections);
        self.duplicate_announcements = self
            .duplicate_announcements
            .wrapping_add(other.duplicate_announcements);
    }
}

/// What a shard holds in one family (Junos `show route summary`: destinations, routes,
/// active).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FamilyCounts {
    pub prefixes: usize,
    pub paths: usize,
    pub active: usize,
    /// Paths never chosen because import policy rejected them or they loop (Junos
    /// `hidden`); counted in `paths`.
    pub hidden: usize,
    /// Paths whose next hop does not resolve, by the next hop's address family; counted
    /// in `paths`.
    pub unresolved: usize,
}

/// Counts kept as paths come and go, so that reading them never walks the table.
#[derive(Clone, Debug, Default)]
pub(super) struct Tally {
    /// Per peer index, per [`Family::index`].
    pub(super) peers: Vec<[PeerCounts; 2]>,
    /// Per peer index.
    pub(super) counters: Vec<PeerCounters>,
    pub(super) paths: [usize; 2],
    pub(super) active: [usize; 2],
}

impl Tally {
    pub(super) fn peer(&mut self, peer: PeerIndex, family: usize) -> Option<&mut PeerCounts> {
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize(i + 1, [PeerCounts::default(); 2]);
        }
        self.peers.get_mut(i)?.get_mut(family)
    }
    pub(super) fn counters(&mut self, peer: PeerIndex) -> Option<&mut PeerCounters> {
        let i = peer as usize;
        if self.counters.len() <= i {
            self.counters.resize(i + 1, PeerCounters::default());
        }
        self.counters.get_mut(i)
    }
    #[inline]
    pub(super) fn add_path(&mut self, p: &Path, family: usize) {
        if let Some(n) = self.paths.get_mut(family) {
            *n += 1;
        }
        if let Some(c) = self.peer(p.peer, family) {
            c.received += 1;
            c.accepted += u32::from(p.accepted());
        }
    }
    #[inline]
    pub(super) fn remove_path(&mut self, p: &Path, family: usize) {
        if let Some(n) = self.paths.get_mut(family) {
            *n = n.saturating_sub(1);
        }
        if let Some(c) = self.peer(p.peer, family) {
            c.received = c.received.saturating_sub(1);
            c.accepted = c.accepted.saturating_sub(u32::from(p.accepted()));
        }
    }
    /// `peer`'s path became (`true`) or stopped being the reported best path of a prefix.
    #[inline]
    pub(super) fn set_active(&mut self, peer: PeerIndex, family: usize, on: bool) {
        if let Some(n) = self.active.get_mut(family) {
            *n = if on { *n + 1 } else { n.saturating_sub(1) };
        }
        if let Some(c) = self.peer(peer, family) {
            c.active = if on {
                c.active + 1
            } else {
                c.active.saturating_sub(1)
            };
        }
    }
}
