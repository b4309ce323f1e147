//! The messages between the pipeline's threads, and how one is addressed.
//!
//! Adding a message is a change in one place per kind:
//! - for every shard, in order with the sessions' routes (a peer coming up or down, a
//!   marker): a [`Broadcast`] variant. Broadcasts are delivered as one part per shard inside
//!   one pass of the gate and re-addressed whole after a re-shard ([`super::Pipeline::
//!   retarget`]), so a new one cannot be lost between the parts;
//! - a question to a shard, answered between its routing work: a [`Query`] variant;
//! - work for an update group: a [`ToUpdate`] variant that names its group (it then follows
//!   the group to whichever update thread runs it).

use super::update_thread::UpdateWorker;
use ribshard_adjout::{Entry, GroupId, MemberId, Sink};
use ribshard_rib::{
    Exported, FamilyCounts, GroupSpec, PathFilter, PeerCounters, PeerCounts, PeerIndex, PeerInfo,
    RouteAttrs, RouteView, Shard, Within,
};
use ribshard_wire::{Family, Nlri, Prefix, SessionParams};
use std::net::IpAddr;
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Routes from one peer for one shard: announcements and withdrawals in received order.
#[derive(Debug, Default)]
pub struct Batch {
    pub peer: PeerIndex,
    pub attrs: Vec<Arc<RouteAttrs>>,
    /// (index into `attrs`, or [`WITHDRAW`], NLRI).
    pub ops: Vec<(u32, Nlri)>,
    /// When the first UPDATE of the batch was read (convergence telemetry).
    pub received: Option<Instant>,
}

pub const WITHDRAW: u32 = u32::MAX;

/// A peer's membership in an update group, as the shards need it.
#[derive(Clone, Debug)]
pub struct Membership {
    pub group: GroupId,
    pub spec: Arc<GroupSpec>,
    pub update_thread: usize,
    pub member: MemberId,
}

pub enum ToShard {
    Routes(Batch),
    /// One part of a message to every shard.
    All(Broadcast),
    /// Dump the table to a member (route refresh, slow-peer catch-up, a member moved in
    /// from another group: then what the previous spec exported and this one does not is
    /// withdrawn too).
    Dump {
        group: GroupId,
        member: MemberId,
        token: u64,
        previous: Option<ribshard_adjout::Previous>,
    },
    /// Update-thread work, when update threading is off and the shard does it.
    Update(Box<ToUpdate>),
    /// A question, answered between routing work.
    Query(Query),
    /// Finish all walks and send all changes, then pass the barrier to the update threads.
    Barrier(std_mpsc::Sender<()>),
    Tick,
    /// Hand the table over and end (a re-shard; see [`super::Pipeline::reconfigure`]).
    Surrender(std_mpsc::Sender<Handover>),
    Stop,
}

/// A message for every shard, in order with each session's routes.
#[derive(Clone, Debug)]
pub enum Broadcast {
    /// A session reached Established. With a membership, the shard also starts dumping its
    /// table to the new member (token 0).
    PeerUp {
        peer: PeerIndex,
        info: PeerInfo,
        member: Option<Membership>,
    },
    /// A session left Established. `stale`: families whose paths stay as stale (graceful
    /// restart, RFC 4724 section 4.2); the others go now.
    PeerDown {
        peer: PeerIndex,
        stale: Option<[bool; 2]>,
        member: Option<(GroupId, MemberId)>,
    },
    /// BoRR (RFC 7313): the peer re-advertises these families; its paths there are stale
    /// until the EoRR ([`Broadcast::FlushStale`]) and fresh again when sent again.
    RefreshBegin {
        peer: PeerIndex,
        families: [bool; 2],
    },
    /// End-of-RIB, EoRR, restart time over, or no graceful restart on the new session: stale
    /// paths of these families go.
    FlushStale {
        peer: PeerIndex,
        families: [bool; 2],
    },
    /// The restart time of a peer with long-lived graceful restart is over (RFC 9494
    /// section 4.2): its stale paths of these families become long-lived stale.
    LongLivedStale {
        peer: PeerIndex,
        families: [bool; 2],
    },
    /// Everything the peer sent before this: once decided and exported, each update group
    /// reports when it has encoded it ([`crate::telemetry::Telemetry::marker_reached`]).
    Marker { peer: PeerIndex, token: u64 },
    /// The peer's End-of-RIB for a family (RFC 4724 section 2), after its routes and any
    /// stale ones it flushed: taps monitoring the post-policy Adj-RIB-In are handed what
    /// came before, then told ([`super::Tap::end_of_rib`]). `epoch`: which of the peer's
    /// sessions ([`crate::Opened::epoch`]).
    EndOfRib {
        peer: PeerIndex,
        family: Family,
        epoch: u32,
    },
    /// The start-up deferral is over ([`super::UpdateDelay`]): the members held back join
    /// their groups and get the table.
    AdvertiseNow,
    /// A member moves from one update group to another (its export policy changed, and with
    /// it its group): the shards learn the new group, and go on sending the old one this
    /// member's changes until it asks them for the new group's dump.
    Regroup {
        member: MemberId,
        from: GroupId,
        to: Membership,
    },
    /// The peer's import policy, for the paths it sends from now on; with `reimport`, also
    /// applied again to those it sent before (kept as received: no route refresh needed).
    Import {
        peer: PeerIndex,
        import: Arc<ribshard_rib::Import>,
        reimport: bool,
    },
    /// Next-hop resolution may have changed (the resolver published new answers): each
    /// shard asks again for its next hops and decides again the prefixes using one whose
    /// answer changed.
    Resolution,
    /// New RPKI data (the RTR client published a snapshot): each shard validates against
    /// it from now on, and imports again the paths inside the ROA prefixes it changed
    /// (and, when the ASPA records changed, every path whose import reads the ASPA state).
    Rpki(Arc<ribshard_rpki::Snapshot>),
}

impl Broadcast {
    /// The peer it concerns, if one.
    pub fn peer(&self) -> Option<PeerIndex> {
        match self {
            Broadcast::PeerUp { peer, .. }
            | Broadcast::PeerDown { peer, .. }
            | Broadcast::RefreshBegin { peer, .. }
            | Broadcast::FlushStale { peer, .. }
            | Broadcast::LongLivedStale { peer, .. }
            | Broadcast::Marker { peer, .. }
            | Broadcast::EndOfRib { peer, .. }
            | Broadcast::Import { peer, .. } => Some(*peer),
            Broadcast::AdvertiseNow
            | Broadcast::Regroup { .. }
            | Broadcast::Resolution
            | Broadcast::Rpki(_) => None,
        }
    }
}

/// A question to a shard.
pub enum Query {
    Stats(oneshot::Sender<ShardStats>),
    Routes(RouteQuery, oneshot::Sender<RouteChunk>),
}

/// Which routes a walk shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Prefixes of a table, in order (all, or those under a prefix).
    Table(Family, Within),
    /// One prefix.
    Exact(Prefix),
    /// The longest prefix that covers an address.
    Longest(IpAddr),
}

/// Renders a route as the asker shows it. It runs in the shard that holds the route, so a
/// walk's formatting is done by every shard at once, between their routing work.
pub trait RenderRoute: Send + Sync + std::fmt::Debug {
    fn render(&self, route: &ShownRoute, out: &mut Vec<u8>);
}

/// Which paths a walk shows beyond its selection (`show route community C`, `aspath-regex`,
/// `next-hop`, `active-path`), judged in the shard: a route none of whose paths match is
/// neither rendered nor sent.
pub trait MatchPath: Send + Sync + std::fmt::Debug {
    fn matches(&self, path: &ribshard_rib::PathView) -> bool;
}

/// One chunk of a walk of routes, from one shard.
#[derive(Clone, Debug)]
pub struct RouteQuery {
    pub select: Selection,
    /// The walk's place: prefixes after this one.
    pub after: Option<Prefix>,
    /// About how many paths a chunk holds.
    pub max_paths: usize,
    pub filter: PathFilter,
    /// Junos `advertising-protocol bgp`: only what this update group advertises, as it
    /// sends it, to this member (whose own paths it never gets back).
    pub advertised: Option<(GroupId, PeerIndex)>,
    /// BIRD's `show route noexport`: only the routes whose active path this update group
    /// does not send this member (its export policy or the export rules reject it; the
    /// member's own paths are not counted), with that path alone.
    pub withheld: Option<(GroupId, PeerIndex)>,
    /// Each route rendered in the shard ([`ShownRoute::rendered`]; its view is then left
    /// without paths).
    pub render: Option<Arc<dyn RenderRoute>>,
    /// Only the paths it matches (and the routes left with any).
    pub matcher: Option<Arc<dyn MatchPath>>,
}

impl RouteQuery {
    /// Every route of a family's table, every path, in chunks of about 16,384 paths.
    pub fn whole_table(family: Family) -> RouteQuery {
        RouteQuery {
            select: Selection::Table(family, Within::All),
            after: None,
            max_paths: 16384,
            filter: PathFilter::default(),
            advertised: None,
            withheld: None,
            render: None,
            matcher: None,
        }
    }
}

/// A route as shown: the shard's view of it and, for `advertising-protocol`, what the group
/// sends for it.
#[derive(Clone, Debug)]
pub struct ShownRoute {
    pub shard: usize,
    pub view: RouteView,
    /// The attributes as the group encodes them, and how to decode them.
    pub advertised: Option<(Arc<Exported>, SessionParams)>,
    /// A group that sends several paths per prefix (Add-Path, RFC 7911): each path it
    /// sends, under the identifier it sends it with, with the peer it came from (the best
    /// path's too, which `advertised` holds alone); empty for a group that sends one.
    pub advertised_paths: Vec<AdvertisedPath>,
    /// The route as the query's renderer wrote it (a slice of its chunk's buffer).
    pub rendered: bytes::Bytes,
}

/// One path an Add-Path group sends for a prefix ([`ShownRoute::advertised_paths`]).
#[derive(Clone, Debug)]
pub struct AdvertisedPath {
    pub path_id: u32,
    pub source: PeerIndex,
    pub exported: Arc<Exported>,
}

#[derive(Clone, Debug, Default)]
pub struct RouteChunk {
    pub routes: Vec<ShownRoute>,
    /// The last prefix the chunk covered (shown or not: a filter may show none of them),
    /// where the next chunk starts.
    pub last: Option<Prefix>,
    /// Whether the shard may hold more after `last`.
    pub more: bool,
}

pub enum ToUpdate {
    Join {
        group: GroupId,
        spec: Arc<GroupSpec>,
        member: MemberId,
        sink: Box<dyn Sink>,
    },
    Leave {
        group: GroupId,
        member: MemberId,
    },
    /// A member moves to group `to` of the same update thread (made with `spec` if new):
    /// see [`Broadcast::Regroup`].
    Move {
        group: GroupId,
        to: GroupId,
        spec: Arc<GroupSpec>,
        member: MemberId,
    },
    /// A ROUTE-REFRESH; `enhanced`: the family of the request when the member negotiated
    /// enhanced route refresh (RFC 7313), which frames the dump with BoRR and EoRR.
    Refresh {
        group: GroupId,
        member: MemberId,
        enhanced: Option<Family>,
    },
    Live {
        shard: usize,
        group: GroupId,
        entries: Vec<Entry>,
        /// When the oldest UPDATE behind these changes was read (convergence telemetry).
        received: Option<Instant>,
    },
    DumpBegin {
        shard: usize,
        group: GroupId,
        member: MemberId,
        token: u64,
    },
    /// Part of a shard's table dump for these members (with their tokens) of the group, in
    /// dump order, with each entry's place in it ([`ribshard_rib::Shard::reported_by_set`]).
    Dump {
        shard: usize,
        group: GroupId,
        members: Vec<(MemberId, u64)>,
        keys: Vec<ribshard_rib::DumpKey>,
        entries: Vec<Entry>,
    },
    DumpEnd {
        shard: usize,
        group: GroupId,
        member: MemberId,
        token: u64,
        /// The oldest receipt of routes first sent by this dump (the start-up deferral's).
        received: Option<Instant>,
    },
    /// A shard has handed on everything before a [`Broadcast::Marker`].
    Marker {
        shard: usize,
        peer: PeerIndex,
        token: u64,
    },
    Barrier(std_mpsc::Sender<()>),
    Stats(oneshot::Sender<UpdateThreadStats>),
    Tick,
    /// Hand the update groups over and end (a re-shard).
    Surrender(std_mpsc::Sender<Handover>),
    Stop,
}

impl ToUpdate {
    /// The update group a message is for: it goes to whichever thread runs the group.
    pub fn group(&self) -> Option<GroupId> {
        match self {
            ToUpdate::Join { group, .. }
            | ToUpdate::Leave { group, .. }
            | ToUpdate::Move { group, .. }
            | ToUpdate::Refresh { group, .. }
            | ToUpdate::Live { group, .. }
            | ToUpdate::DumpBegin { group, .. }
            | ToUpdate::Dump { group, .. }
            | ToUpdate::DumpEnd { group, .. } => Some(*group),
            _ => None,
        }
    }
}

/// What a thread hands over when a re-shard replaces it.
pub struct Handover {
    pub(super) table: Option<Shard>,
    /// The shard's update groups: id, spec and members.
    pub(super) groups: Vec<(GroupId, Arc<GroupSpec>, usize)>,
    /// The update groups of an update thread, or of a shard running them itself.
    pub(super) worker: Option<UpdateWorker>,
}

/// What an update thread reports of itself and its groups.
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateThreadStats {
    /// `None` when update threading is off (the shard runs the groups).
    pub thread: Option<usize>,
    pub cpu_seconds: f64,
    pub queue_high_water: usize,
    pub groups: Vec<GroupReport>,
}

/// What a shard reports of itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardStats {
    pub shard: usize,
    pub prefixes: usize,
    pub paths: usize,
    /// Per [`Family::index`].
    pub families: [FamilyCounts; 2],
    /// Per peer index, per [`Family::index`].
    pub peers: Vec<[PeerCounts; 2]>,
    /// Per peer index: what its announcements met.
    pub counters: Vec<PeerCounters>,
    /// What each update group advertises from this shard.
    pub groups: Vec<GroupCounts>,
    pub queue_high_water: usize,
    pub batches: u64,
    pub changes: u64,
    pub cpu_seconds: f64,
    /// Messages handled, and the longest.
    pub messages: u64,
    pub longest: Duration,
}

impl ShardStats {
    /// A peer's paths over every shard, per [`Family::index`], as `pick` counts them (what
    /// `show bgp neighbor` and BMP's Statistics Reports give).
    pub fn peer_total(
        shards: &[ShardStats],
        peer: usize,
        pick: fn(&PeerCounts) -> u32,
    ) -> [u64; 2] {
        let mut total = [0; 2];
        for c in shards.iter().filter_map(|s| s.peers.get(peer)) {
            for (t, c) in total.iter_mut().zip(c) {
                *t += u64::from(pick(c));
            }
        }
        total
    }

    /// A peer's counters over every shard.
    pub fn peer_counters(shards: &[ShardStats], peer: usize) -> PeerCounters {
        let mut total = PeerCounters::default();
        for c in shards.iter().filter_map(|s| s.counters.get(peer)) {
            total.add(c);
        }
        total
    }

    /// Prefixes advertised to `peer` as a member of `group` over every shard, per family;
    /// `None` while a shard is still counting.
    pub fn advertised_to(
        shards: &[ShardStats],
        group: GroupId,
        peer: PeerIndex,
    ) -> Option<[u64; 2]> {
        let mut total = [0; 2];
        for s in shards {
            let counts = s
                .groups
                .iter()
                .find(|c| c.group == group)?
                .to_member(peer)?;
            for (t, c) in total.iter_mut().zip(counts) {
                *t += c;
            }
        }
        Some(total)
    }
}

/// What an update group advertises from one shard: prefixes per family, and how many of
/// them came from each peer (a member is never sent its own paths back).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub group: GroupId,
    /// `None` while the shard is still counting (a group new to it, or after a re-shard).
    pub advertised: Option<[u64; 2]>,
    pub by_source: Vec<(PeerIndex, [u64; 2])>,
}

impl GroupCounts {
    /// Prefixes advertised to a member of the group, per family.
    pub fn to_member(&self, peer: PeerIndex) -> Option<[u64; 2]> {
        let a = self.advertised?;
        let own = self
            .by_source
            .iter()
            .find(|(p, _)| *p == peer)
            .map_or([0, 0], |(_, c)| *c);
        Some([a[0].saturating_sub(own[0]), a[1].saturating_sub(own[1])])
    }
}

/// What an update thread reports of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupReport {
    pub thread: usize,
    pub group: GroupId,
    pub name: String,
    pub spec: Arc<GroupSpec>,
    pub stats: ribshard_adjout::GroupStats,
    pub members: Vec<(MemberId, ribshard_adjout::MemberStats)>,
}

/// A session's place in an update group, kept by the session until it goes down.
#[derive(Clone, Debug)]
pub struct Joined {
    pub group: GroupId,
    pub spec: Arc<GroupSpec>,
    pub update_thread: usize,
    pub member: MemberId,
}

/// Where a message goes, under the threads of one epoch.
pub enum Target {
    Shard(usize, ToShard),
    Update(usize, ToUpdate),
}

/// A message and the epoch of the threads it was addressed for.
pub struct Routed {
    pub target: Target,
    pub epoch: u64,
    /// More parts of the same message to every shard follow: the sender keeps the gate
    /// until the last, so no re-shard comes between them.
    pub more: bool,
}

impl Routed {
    /// The epoch of a message addressed for whatever threads run when it is sent (tests and
    /// tools that address and send at once).
    pub const CURRENT: u64 = u64::MAX;
}

impl From<Target> for Routed {
    fn from(target: Target) -> Routed {
        Routed {
            target,
            epoch: Routed::CURRENT,
            more: false,
        }
    }
}
