//! The routing pipeline's threads: N shard threads (RIB sharding) and M update threads
//! (update threading), the bounded channels between them, and the handle sessions feed.
//!
//! ```text
//! sessions ──Batch──► shard k = hash(prefix) % N ──Live/Dump──► update thread of the group ──► members
//!          ──Broadcast (PeerUp, PeerDown, ..., to every shard, in order with the batches)
//!          ──Join/Leave/Refresh──► update thread of the group
//! management ──Query (stats, routes a chunk at a time)──► shard
//! ```
//!
//! Ordering rules that make this correct without locks on routing state:
//! - a session's messages to one shard arrive in the order sent (one channel per shard), so a
//!   shard sees PeerUp before the peer's routes and PeerDown after them;
//! - a member's Join reaches its update thread before any shard can start a table dump for
//!   it (the session queues Join before PeerUp), and each shard's DumpBegin marks the point
//!   from which the member follows that shard's live changes, so every change to a prefix
//!   reaches the member either in the dump or after it, in the shard's order;
//! - shards block on full update-thread queues (backpressure up to the sockets); update threads
//!   never block on shards (their rare dump requests are retried), so there is no cycle.
//!
//! With update threading off (`update_threads == 0`) the single shard runs its update groups
//! itself: the single-threaded baseline.
//!
//! Re-sharding ([`Pipeline::reconfigure`]) changes the number of shard and update threads with
//! every session kept up: sessions pass a gate to hand anything on, the re-shard closes it,
//! lets everything in flight through (a barrier), takes every shard's table and every update
//! group from the old threads, moves each prefix whole to its new shard, starts the new threads
//! and opens the gate. Messages a session built for the old threads are addressed again
//! ([`Pipeline::retarget`]) as they are delivered; a message for every shard (PeerUp,
//! PeerDown, ...) is delivered whole inside one pass of the gate, so no re-shard falls between
//! its parts.

mod arrivals;
mod batcher;
mod deferral;
mod give_back;
mod inlet;
mod lanes;
mod messages;
mod query;
mod registry;
mod sent;
mod shard_thread;
pub mod stream;
mod update_thread;

pub use arrivals::{ArrivalFlag, Arrivals, MAX_HOLD, STREAM_GRACE};
pub use batcher::Batcher;
pub use deferral::{DeferralEnd, DeferralStart, DeferralStatus, UpdateDelay};
pub use inlet::Inlet;
pub use lanes::{reserve, Lanes};
pub use messages::{
    AdvertisedPath, Batch, Broadcast, GroupCounts, GroupReport, Handover, Joined, MatchPath,
    Membership, Query, RenderRoute, RouteChunk, RouteQuery, Routed, Selection, ShardStats,
    ShownRoute, Target, ToShard, ToUpdate, UpdateThreadStats, WITHDRAW,
};
pub use query::{QueueReport, QueueState, RouteWalk};
pub use sent::SentTap;
pub use stream::{Passed, Subscriber, Tap};

use crate::telemetry::{register, QueueStats, Telemetry, ThreadKind};
use registry::Registry;
use ribshard_adjout::{GroupId, MemberId, Sink, UpdateGroup, WriteQueueLimits};
use ribshard_rib::{ExportKinds, GroupSpec, Options, PeerIndex, PeerInfo, Resolver, Shard};
use ribshard_wire::Family;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{mpsc as std_mpsc, Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, OwnedRwLockReadGuard};

/// Messages a shard's queue holds; room for this many.
pub const SHARD_QUEUE: usize = 64;
/// Messages an update thread's queue holds.
pub const UPDATE_QUEUE: usize = 256;
/// Prefixes per session batch before it is handed on.
pub const BATCH: usize = 4096;
/// Live changes an update thread holds for packing before it encodes them regardless
/// (bounds the memory and the delay a steady stream could add), and the most a group
/// encodes at once from what it holds: a part goes to a member whole or not at all, so
/// that is how far past its high-water mark a member's write queue can go before it is
/// split off. (Held changes that must go before a membership change, a marker or a
/// barrier go at once, whole.)
pub const HELD_ENTRIES: usize = 65_536;
/// Live changes an update thread holds while routes are still arriving ([`Arrivals`]),
/// up to [`MAX_HOLD`], as long as no member of its groups is behind: enough for the changes
/// two full tables make together (about 500,000 for 330,000 prefixes), so none of their
/// prefixes goes out before its last path came. About 40 octets each, freed as they are
/// packed; they leave in parts of [`HELD_ENTRIES`], each once a member can take it.
pub const HELD_WHILE_ARRIVING: usize = 1 << 20;
/// Prefixes a shard walks (peer down, table dump) between two looks at its queue.
pub const WALK_BUDGET: usize = 4096;
/// How often every thread is woken for its periodic work (slow-peer catch-up).
pub const TICK: std::time::Duration = std::time::Duration::from_millis(200);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineConfig {
    /// Shard threads; at least 1.
    pub shards: usize,
    /// Update threads; 0 runs update groups on the single shard thread (then `shards` must
    /// be 1).
    pub update_threads: usize,
    pub options: Options,
    /// When a member is split from its update group as a slow writer, and when it catches up.
    pub write_queue: WriteQueueLimits,
}

impl PipelineConfig {
    /// As it runs: without update threads, one shard.
    fn normalized(self) -> PipelineConfig {
        PipelineConfig {
            shards: if self.update_threads == 0 {
                1
            } else {
                self.shards.max(1)
            },
            ..self
        }
    }
}

/// What a re-shard did.
#[derive(Clone, Debug, PartialEq)]
pub struct Reshard {
    pub from: (usize, usize),
    pub to: (usize, usize),
    pub prefixes: usize,
    pub paths: usize,
    pub groups: usize,
    /// Members whose table dump was under way and started again.
    pub dumps_restarted: usize,
    /// How long routing was held (sessions stay up and keep their timers meanwhile).
    pub paused: Duration,
}

/// What a pipeline is started with besides its thread settings.
#[derive(Default)]
pub struct Inputs {
    /// Advertise to no one until these neighbors have sent their tables (see
    /// [`UpdateDelay`]; sessions report through [`Pipeline::deferral_up`] and the two after
    /// it).
    pub update_delay: Option<(UpdateDelay, Vec<PeerIndex>)>,
    /// Where next hops resolve ([`ribshard_rib::next_hop`]); none: every next hop is
    /// reachable at IGP cost 0. Tell the shards of a change with
    /// [`Pipeline::resolution_changed`].
    pub resolver: Option<Arc<dyn Resolver>>,
    /// The change stream's subscribers besides update-group export ([`stream`]).
    pub subscribers: Vec<Arc<dyn Subscriber>>,
    /// Told what every member is sent ([`sent`]).
    pub sent: Option<Arc<dyn SentTap>>,
}

/// A running pipeline.
pub struct Pipeline {
    lanes: Arc<RwLock<Arc<Lanes>>>,
    /// Sessions hold it (read) to hand anything on; a re-shard holds it (write).
    gate: Arc<tokio::sync::RwLock<()>>,
    registry: Mutex<Registry>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    ticker: Mutex<Option<JoinHandle<()>>>,
    /// Dropping it ends the ticker thread at once, not after its current sleep: a stop (a
    /// daemon shutting down, every pipeline benchmark) would otherwise wait up to a tick.
    stop_ticker: Mutex<Option<std_mpsc::Sender<()>>>,
    telemetry: Arc<Telemetry>,
    /// The advertisement deferral while it lasts ([`Pipeline::start_deferred`]).
    deferral: Arc<Mutex<Option<deferral::Deferral>>>,
    /// Whether the shards hold new members back: set with a deferral, cleared as it ends,
    /// read by a shard as a member comes up. A flag rather than a message, so a deferral
    /// started as the last neighbor goes down can never reach shards that a re-shard
    /// started after it ended (they would hold members with no end to come).
    deferring: Arc<AtomicBool>,
    /// The neighbors up, with update-delay on: when the last goes down, the deferral
    /// starts again.
    neighbors: Mutex<Option<deferral::Neighbors>>,
    /// The ways of exporting in use, shared by every generation of shards (export results
    /// are kept on the attribute sets under a kind's id: `ribshard_rib::ExportKinds`).
    kinds: Arc<ExportKinds>,
    resolver: Option<Arc<dyn Resolver>>,
    subscribers: Vec<Arc<dyn Subscriber>>,
    sent: Option<Arc<dyn SentTap>>,
    /// `[bgp] memory-limit`: sessions read it before taking new prefixes.
    memory: Arc<crate::memory::MemoryGuard>,
    /// Whether routes are still arriving ([`Arrivals`]): sessions and shards raise it,
    /// update groups hold their live changes meanwhile.
    arrivals: Arc<Arrivals>,
}

impl Pipeline {
    /// Starts the shard and update threads.
    pub fn start(config: PipelineConfig) -> Arc<Pipeline> {
        Pipeline::start_deferred(config, None)
    }

    /// Starts the shard and update threads; with `update_delay`, advertising to anyone waits
    /// until these neighbors have sent their tables (see [`UpdateDelay`]; sessions report
    /// through [`Pipeline::deferral_up`] and the two after it).
    pub fn start_deferred(
        config: PipelineConfig,
        update_delay: Option<(UpdateDelay, Vec<PeerIndex>)>,
    ) -> Arc<Pipeline> {
        Pipeline::start_with(
            config,
            Inputs {
                update_delay,
                ..Inputs::default()
            },
        )
    }

    /// Starts the shard and update threads with a deferral, a resolver and subscribers
    /// ([`Inputs`]).
    pub fn start_with(config: PipelineConfig, inputs: Inputs) -> Arc<Pipeline> {
        let Inputs {
            update_delay,
            resolver,
            subscribers,
            sent,
        } = inputs;
        let config = config.normalized();
        let neighbors = update_delay
            .as_ref()
            .map(|(bounds, _)| deferral::Neighbors::new(*bounds));
        let deferral = Arc::new(Mutex::new(update_delay.map(|(bounds, peers)| {
            deferral::Deferral::new(bounds, peers, DeferralStart::Start)
        })));
        let deferring = Arc::new(AtomicBool::new(lock(&deferral).is_some()));
        let tables = (0..config.shards)
            .map(|_| Shard::resolving(config.options, resolver.clone()))
            .collect();
        let telemetry = Arc::new(Telemetry::default());
        let kinds = Arc::new(ExportKinds::default());
        let arrivals = Arc::new(Arrivals::default());
        let generation = Generation {
            epoch: 0,
            arrivals: arrivals.clone(),
            deferring: deferring.clone(),
            kinds: kinds.clone(),
            subscribers: subscribers.clone(),
        };
        let (lanes, threads) = spawn_threads(
            config,
            generation,
            tables,
            &[],
            Vec::new(),
            &HashMap::new(),
            &telemetry,
        );
        let lanes = Arc::new(RwLock::new(Arc::new(lanes)));
        // The pipeline wakes its own threads for periodic work, so that whoever embeds it
        // (the daemon, a test) cannot forget to and leave slow members split forever.
        let (stop_ticker, stopped) = std_mpsc::channel::<()>();
        let ticker = {
            let lanes = lanes.clone();
            let (deferral, deferring) = (deferral.clone(), deferring.clone());
            spawn("rs-tick".into(), move || {
                let work = register(ThreadKind::Ticker, 0);
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                    let began = Instant::now();
                    let l = read_lanes(&lanes);
                    tick(&l.shards, &l.updates);
                    // The deferral's time bounds (its other ends come with sessions' news).
                    if end_deferral(&deferral, &deferring, |_| {}) {
                        for r in l.broadcast(Broadcast::AdvertiseNow) {
                            l.send_blocking(r.target);
                        }
                    }
                    work.item(began.elapsed());
                }
            })
        };
        Arc::new(Pipeline {
            lanes,
            gate: Arc::new(tokio::sync::RwLock::new(())),
            registry: Mutex::new(Registry::default()),
            threads: Mutex::new(threads),
            ticker: Mutex::new(Some(ticker)),
            stop_ticker: Mutex::new(Some(stop_ticker)),
            telemetry,
            deferral,
            deferring,
            neighbors: Mutex::new(neighbors),
            kinds,
            resolver,
            subscribers,
            sent,
            memory: Arc::default(),
            arrivals,
        })
    }

    /// The memory limit the sessions keep to ([`crate::memory::MemoryGuard`]).
    pub fn memory(&self) -> &Arc<crate::memory::MemoryGuard> {
        &self.memory
    }

    /// Whether routes are still arriving; an input raises its own flag ([`Arrivals::flag`]).
    pub fn arrivals(&self) -> &Arc<Arrivals> {
        &self.arrivals
    }

    /// The start-up deferral under way, if any (advertising still waits for neighbors'
    /// tables).
    pub fn deferral_status(&self) -> Option<DeferralStatus> {
        lock(&self.deferral)
            .as_ref()
            .map(deferral::Deferral::status)
    }

    /// A neighbor reached Established during the start-up deferral; `graceful_restart`: it
    /// advertised the capability, so its End-of-RIB is waited for (RFC 4724 section 4.1).
    /// Returns the messages that end the deferral, if this ends it.
    pub fn deferral_up(&self, peer: PeerIndex, graceful_restart: bool) -> Vec<Routed> {
        if let Some(n) = lock(&self.neighbors).as_mut() {
            n.up(peer, graceful_restart);
        }
        self.deferral_news(|d| d.up(peer, graceful_restart))
    }

    /// A neighbor's End-of-RIB is in for every family (see [`Pipeline::deferral_up`]).
    pub fn deferral_end_of_rib(&self, peer: PeerIndex) -> Vec<Routed> {
        if let Some(n) = lock(&self.neighbors).as_mut() {
            n.end_of_rib(peer);
        }
        self.deferral_news(|d| d.end_of_rib(peer))
    }

    /// A neighbor left Established (see [`Pipeline::deferral_up`]). Every neighbor gone
    /// down together starts the deferral again ([`deferral::Neighbors`]).
    pub fn deferral_down(&self, peer: PeerIndex) -> Vec<Routed> {
        let out = self.deferral_news(|d| d.down(peer));
        let mut current = lock(&self.deferral);
        let idle = current.is_none();
        let again = lock(&self.neighbors)
            .as_mut()
            .and_then(|n| n.down(peer, Instant::now(), idle));
        if let Some(d) = again {
            *current = Some(d);
            self.deferring.store(true, Ordering::Release);
        }
        out
    }

    /// A neighbor removed from the configuration: a deferral no longer waits for it.
    pub fn deferral_forget(&self, peer: PeerIndex) {
        if let Some(n) = lock(&self.neighbors).as_mut() {
            n.forget(peer);
        }
        if let Some(d) = lock(&self.deferral).as_mut() {
            d.forget(peer);
        }
    }

    fn deferral_news(&self, news: impl FnOnce(&mut deferral::Deferral)) -> Vec<Routed> {
        if end_deferral(&self.deferral, &self.deferring, news) {
            self.lanes().broadcast(Broadcast::AdvertiseNow)
        } else {
            Vec::new()
        }
    }

    /// What the pipeline measures of its convergence.
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// The threads in force now.
    pub fn lanes(&self) -> Arc<Lanes> {
        read_lanes(&self.lanes)
    }

    /// The thread settings in force now.
    pub fn config(&self) -> PipelineConfig {
        self.lanes().config
    }

    /// Shard threads now.
    pub fn shards(&self) -> usize {
        self.lanes().shards.len()
    }

    /// A batcher for a peer's routes, addressed for the shards in force now.
    pub fn batcher(&self, peer: PeerIndex) -> Batcher {
        let l = self.lanes();
        let mut b = Batcher::new(peer, l.shards.len());
        b.epoch = l.epoch;
        b
    }

    /// Waits until no re-shard runs and holds one off until the guard is dropped. Sessions
    /// hold it while they hand a message on.
    pub async fn enter(&self) -> OwnedRwLockReadGuard<()> {
        self.gate.clone().read_owned().await
    }

    /// The update group for a member with this spec; creates it (on the next update thread,
    /// round-robin) if it is the first.
    pub fn join_group(&self, spec: GroupSpec) -> (GroupId, Arc<GroupSpec>, usize) {
        let threads = self.lanes().updates.len().max(1);
        lock(&self.registry).join(spec, threads)
    }

    /// Update groups with members now.
    pub fn groups(&self) -> usize {
        lock(&self.registry).len()
    }

    pub fn leave_group(&self, group: GroupId) {
        lock(&self.registry).leave(group);
    }

    /// The messages that move a member to the update group of a new spec (its export
    /// policy changed) with its session kept: the shards learn the group, then its update
    /// thread moves the member and asks each shard for the new group's dump, which sends
    /// what the old spec's export and the new one's differ in. Returns them in the order to
    /// send, and the member's place now.
    pub fn regroup(&self, joined: &Joined, spec: GroupSpec) -> (Vec<Routed>, Joined) {
        let (group, spec, t) = lock(&self.registry).regroup(joined.group, spec);
        let to = Membership {
            group,
            spec: spec.clone(),
            update_thread: t,
            member: joined.member,
        };
        let l = self.lanes();
        let mut out = l.broadcast(Broadcast::Regroup {
            member: joined.member,
            from: joined.group,
            to,
        });
        out.push(l.routed(l.to_update(
            t,
            ToUpdate::Move {
                group: joined.group,
                to: group,
                spec: spec.clone(),
                member: joined.member,
            },
        )));
        (
            out,
            Joined {
                group,
                spec,
                update_thread: t,
                member: joined.member,
            },
        )
    }

    /// The update thread of a group now (`hint` for a group no longer registered).
    pub(super) fn placement(&self, group: GroupId, hint: usize) -> usize {
        let r = lock(&self.registry);
        r.placement.get(&group).copied().unwrap_or(hint)
    }

    /// Routes a message for update thread `t` (to the shard when update threading is off).
    pub fn to_update(&self, t: usize, msg: ToUpdate) -> Routed {
        let l = self.lanes();
        l.routed(l.to_update(t, msg))
    }

    /// The messages for a session that reached Established, in the order to send them:
    /// the member's Join first (if it advertises to anyone), then PeerUp to every shard.
    pub fn peer_up(
        &self,
        peer: PeerIndex,
        info: PeerInfo,
        member: Option<(GroupSpec, MemberId, Box<dyn Sink>)>,
    ) -> (Vec<Routed>, Option<Joined>) {
        let l = self.lanes();
        let mut out = Vec::new();
        let mut joined = None;
        let membership = member.map(|(spec, id, sink)| {
            let sink: Box<dyn Sink> = match &self.sent {
                Some(tap) => Box::new(sent::TappedSink {
                    inner: sink,
                    tap: tap.clone(),
                    member: id,
                }),
                None => sink,
            };
            let (group, spec, t) = self.join_group(spec);
            out.push(l.routed(l.to_update(
                t,
                ToUpdate::Join {
                    group,
                    spec: spec.clone(),
                    member: id,
                    sink,
                },
            )));
            joined = Some(Joined {
                group,
                spec: spec.clone(),
                update_thread: t,
                member: id,
            });
            Membership {
                group,
                spec,
                update_thread: t,
                member: id,
            }
        });
        out.extend(l.broadcast(Broadcast::PeerUp {
            peer,
            info,
            member: membership,
        }));
        (out, joined)
    }

    /// The messages for a session that left Established.
    pub fn peer_down(
        &self,
        peer: PeerIndex,
        stale: Option<[bool; 2]>,
        joined: Option<Joined>,
    ) -> Vec<Routed> {
        let l = self.lanes();
        let mut out = Vec::new();
        if let Some(j) = &joined {
            // Where the group is now: a re-shard since the member joined may have moved it.
            let t = self.placement(j.group, j.update_thread);
            self.leave_group(j.group);
            out.push(l.routed(l.to_update(
                t,
                ToUpdate::Leave {
                    group: j.group,
                    member: j.member,
                },
            )));
        }
        let member = joined.as_ref().map(|j| (j.group, j.member));
        out.extend(l.broadcast(Broadcast::PeerDown {
            peer,
            stale,
            member,
        }));
        out
    }

    /// The peer's import policy for every shard (`reimport`: applied again to what it sent
    /// before, a reload's change).
    pub fn import_policy(
        &self,
        peer: PeerIndex,
        import: Arc<ribshard_rib::Import>,
        reimport: bool,
    ) -> Vec<Routed> {
        self.lanes().broadcast(Broadcast::Import {
            peer,
            import,
            reimport,
        })
    }

    /// The messages that tell every shard next-hop resolution may have changed (the
    /// resolver published new answers): each decides again only the prefixes whose next
    /// hop's answer changed. Hand them on with [`Pipeline::deliver_blocking`].
    pub fn resolution_changed(&self) -> Vec<Routed> {
        self.lanes().broadcast(Broadcast::Resolution)
    }

    /// The messages that hand every shard a new RPKI snapshot; each imports again only the
    /// paths the change can affect. Hand them on with [`Pipeline::deliver_blocking`].
    pub fn rpki_changed(&self, snapshot: Arc<ribshard_rpki::Snapshot>) -> Vec<Routed> {
        self.lanes().broadcast(Broadcast::Rpki(snapshot))
    }

    /// The messages that drop a peer's stale paths (End-of-RIB, restart time over).
    pub fn flush_stale(&self, peer: PeerIndex, families: [bool; 2]) -> Vec<Routed> {
        self.lanes()
            .broadcast(Broadcast::FlushStale { peer, families })
    }

    /// The messages that make a peer's stale paths long-lived stale (RFC 9494 section 4.2).
    pub fn long_lived_stale(&self, peer: PeerIndex, families: [bool; 2]) -> Vec<Routed> {
        self.lanes()
            .broadcast(Broadcast::LongLivedStale { peer, families })
    }

    /// BoRR from a peer (RFC 7313): its paths of these families become stale in every shard.
    pub fn refresh_begin(&self, peer: PeerIndex, families: [bool; 2]) -> Vec<Routed> {
        self.lanes()
            .broadcast(Broadcast::RefreshBegin { peer, families })
    }

    /// A marker behind everything the peer sent so far: each update group reports when it
    /// has sent all of it ([`Telemetry::marker_reached`]).
    pub fn marker(&self, peer: PeerIndex, token: u64) -> Vec<Routed> {
        self.lanes().broadcast(Broadcast::Marker { peer, token })
    }

    /// A neighbor's End-of-RIB for a family, after its routes (for the taps that monitor
    /// the post-policy Adj-RIB-In).
    pub fn end_of_rib(
        &self,
        peer: PeerIndex,
        family: ribshard_wire::Family,
        epoch: u32,
    ) -> Vec<Routed> {
        self.lanes().broadcast(Broadcast::EndOfRib {
            peer,
            family,
            epoch,
        })
    }

    /// A ROUTE-REFRESH from a member: its group sends it the table again (between BoRR and
    /// EoRR for `enhanced`, RFC 7313).
    pub fn refresh(&self, joined: &Joined, enhanced: Option<Family>) -> Routed {
        self.to_update(
            self.placement(joined.group, joined.update_thread),
            ToUpdate::Refresh {
                group: joined.group,
                member: joined.member,
                enhanced,
            },
        )
    }

    /// Waits (blocking) until everything sent before has gone through every thread.
    pub fn barrier(&self) {
        barrier(&self.lanes());
    }

    /// Wakes every thread for its periodic work (slow-peer catch-up) now, besides the
    /// pipeline's own tick every [`TICK`]; never waits.
    pub fn tick(&self) {
        let l = self.lanes();
        tick(&l.shards, &l.updates);
    }

    /// Changes the number of shard threads and update threads with every session kept up
    /// (Junos restarts its routing daemon for this). Blocking; call it off the sessions'
    /// runtime. Routing is held meanwhile: sessions keep their timers and stop reading
    /// when their queue fills, as under any backpressure.
    ///
    /// Every message sent before goes through the old threads first (a barrier); then the
    /// update threads hand over their groups and the shards their tables; each prefix moves
    /// whole to the shard that owns it now, with its paths and the best path last reported,
    /// so members in step are sent nothing; members whose table dump was under way get it
    /// again from the new shards; the groups are spread round-robin over the new update
    /// threads.
    pub fn reconfigure(&self, shards: usize, update_threads: usize) -> Reshard {
        let _gate = self.gate.blocking_write();
        let began = Instant::now();
        let old = self.lanes();
        let config = PipelineConfig {
            shards,
            update_threads,
            ..old.config
        }
        .normalized();
        let from = (old.config.shards, old.config.update_threads);
        let to = (config.shards, config.update_threads);
        if from == to {
            return Reshard {
                from,
                to,
                prefixes: 0,
                paths: 0,
                groups: 0,
                dumps_restarted: 0,
                paused: began.elapsed(),
            };
        }
        // A re-shard starts advertising: the old shards let their held members in, and the
        // new ones start without a deferral.
        if let Some(d) = lock(&self.deferral).take() {
            self.deferring.store(false, Ordering::Release);
            d.log_end(DeferralEnd::Reshard);
            for r in old.broadcast(Broadcast::AdvertiseNow) {
                old.send_blocking(r.target);
            }
        }
        barrier(&old);
        // Update threads first: after them nothing asks the shards for dumps.
        let mut groups: Vec<UpdateGroup> = Vec::new();
        for u in &old.updates {
            groups.extend(
                surrender(u, ToUpdate::Surrender)
                    .and_then(|h| h.worker)
                    .map_or(Vec::new(), update_thread::UpdateWorker::into_groups),
            );
        }
        let mut tables = Vec::new();
        let mut shard_groups = Vec::new();
        for s in &old.shards {
            let Some(h) = surrender(s, ToShard::Surrender) else {
                continue;
            };
            tables.extend(h.table);
            if shard_groups.is_empty() {
                shard_groups = h.groups;
            }
            if let Some(w) = h.worker {
                groups.extend(w.into_groups());
            }
        }
        let old_threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in old_threads {
            let _ = t.join();
        }
        let mut new_tables: Vec<Shard> = (0..config.shards)
            .map(|_| Shard::resolving(config.options, self.resolver.clone()))
            .collect();
        for t in tables {
            t.move_into(&mut new_tables);
        }
        let prefixes = new_tables.iter().map(Shard::prefixes).sum();
        let paths = new_tables.iter().map(Shard::paths).sum();
        let mut requests = Vec::new();
        for g in &mut groups {
            requests.extend(g.reshard(config.shards).into_iter().map(|r| (g.id, r)));
        }
        let dumps_restarted = requests.len();
        let mut r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let ids: BTreeSet<GroupId> = groups
            .iter()
            .map(|g| g.id)
            .chain(r.ids())
            .chain(shard_groups.iter().map(|g| g.0))
            .collect();
        let threads = config.update_threads.max(1);
        r.placement = ids
            .iter()
            .enumerate()
            .map(|(k, id)| (*id, k % threads))
            .collect();
        r.next_thread = ids.len();
        // The deferral ended above: the new shards hold no one back.
        let generation = Generation {
            epoch: old.epoch + 1,
            arrivals: self.arrivals.clone(),
            deferring: self.deferring.clone(),
            kinds: self.kinds.clone(),
            subscribers: self.subscribers.clone(),
        };
        let (lanes, handles) = spawn_threads(
            config,
            generation,
            new_tables,
            &shard_groups,
            groups,
            &r.placement,
            &self.telemetry,
        );
        let lanes = Arc::new(lanes);
        *self.lanes.write().unwrap_or_else(|e| e.into_inner()) = lanes.clone();
        drop(r);
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(handles);
        for (group, req) in requests {
            for i in 0..lanes.shards.len() {
                lanes.send_blocking(Target::Shard(
                    i,
                    ToShard::Dump {
                        group,
                        member: req.member,
                        token: req.token,
                        previous: req.previous.clone(),
                    },
                ));
            }
        }
        let done = Reshard {
            from,
            to,
            prefixes,
            paths,
            groups: ids.len(),
            dumps_restarted,
            paused: began.elapsed(),
        };
        tracing::info!(
            from = ?done.from, to = ?done.to, prefixes, paths, groups = done.groups,
            dumps_restarted, paused_ms = done.paused.as_millis() as u64,
            "re-sharded: (shards, update threads) changed with sessions kept up"
        );
        done
    }

    /// Stops every thread and waits for them.
    pub fn stop(&self) {
        self.end_ticker();
        let lanes = self.lanes();
        for s in &lanes.shards {
            let _ = s.blocking_send(ToShard::Stop);
        }
        for u in &lanes.updates {
            let _ = u.blocking_send(ToUpdate::Stop);
        }
        let mut threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        threads.extend(self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take());
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Pipeline {
    fn end_ticker(&self) {
        drop(
            self.stop_ticker
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }
}

impl Drop for Pipeline {
    /// Without [`Pipeline::stop`], the threads end as they did before the ticker: when the
    /// last sender goes. The ticker holds senders, so it must end first.
    fn drop(&mut self) {
        self.end_ticker();
    }
}

fn read_lanes(l: &RwLock<Arc<Lanes>>) -> Arc<Lanes> {
    l.read().unwrap_or_else(|e| e.into_inner()).clone()
}

fn barrier(lanes: &Lanes) {
    let (tx, rx) = std_mpsc::channel();
    for s in &lanes.shards {
        let _ = s.blocking_send(ToShard::Barrier(tx.clone()));
    }
    drop(tx);
    // Each shard's barrier passes its update threads (or itself) and its subscribers' taps.
    let want = lanes.shards.len() * (lanes.updates.len().max(1) + lanes.subscribers);
    for _ in 0..want {
        if rx.recv().is_err() {
            break;
        }
    }
}

/// Asks a thread to hand its state over and end.
fn surrender<M>(
    to: &mpsc::Sender<M>,
    msg: impl FnOnce(std_mpsc::Sender<Handover>) -> M,
) -> Option<Handover> {
    let (tx, rx) = std_mpsc::channel();
    to.blocking_send(msg(tx)).ok()?;
    rx.recv().ok()
}

/// Starts shard threads over these tables (update groups known to the shards as
/// `shard_groups`) and update threads with these groups, placed by `placement`.
/// A new set of threads: its epoch, and the flag that tells its shards to hold new members
/// back ([`Pipeline::deferring`]).
struct Generation {
    epoch: u64,
    arrivals: Arc<Arrivals>,
    deferring: Arc<AtomicBool>,
    kinds: Arc<ExportKinds>,
    subscribers: Vec<Arc<dyn Subscriber>>,
}

fn spawn_threads(
    config: PipelineConfig,
    generation: Generation,
    tables: Vec<Shard>,
    shard_groups: &[(GroupId, Arc<GroupSpec>, usize)],
    groups: Vec<UpdateGroup>,
    placement: &HashMap<GroupId, usize>,
    telemetry: &Arc<Telemetry>,
) -> (Lanes, Vec<JoinHandle<()>>) {
    let Generation {
        epoch,
        arrivals,
        deferring,
        kinds,
        subscribers,
    } = generation;
    let mut threads = Vec::new();
    let (shard_tx, shard_rx): (Vec<_>, Vec<_>) = (0..config.shards)
        .map(|_| mpsc::channel::<ToShard>(SHARD_QUEUE))
        .unzip();
    let (update_tx, update_rx): (Vec<_>, Vec<_>) = (0..config.update_threads)
        .map(|_| mpsc::channel::<ToUpdate>(UPDATE_QUEUE))
        .unzip();
    let shard_queues: Vec<Arc<QueueStats>> = (0..config.shards).map(|_| Arc::default()).collect();
    let update_queues: Vec<Arc<QueueStats>> =
        (0..config.update_threads).map(|_| Arc::default()).collect();
    let place = |g: GroupId| placement.get(&g).copied().unwrap_or(0);
    let mut workers: Vec<update_thread::UpdateWorker> = (0..config.update_threads.max(1))
        .map(|i| {
            update_thread::UpdateWorker::new(
                i,
                config.shards,
                config.write_queue,
                (config.update_threads > 0).then(|| (shard_tx.clone(), shard_queues.clone())),
                telemetry.clone(),
                arrivals.clone(),
            )
        })
        .collect();
    for g in groups {
        let t = place(g.id).min(workers.len() - 1);
        if let Some(w) = workers.get_mut(t) {
            w.adopt(g);
        }
    }
    let mut inline = None;
    if config.update_threads == 0 {
        inline = workers.pop();
    } else {
        for ((w, rx), q) in workers.into_iter().zip(update_rx).zip(&update_queues) {
            // Thread names fit Linux's 15 characters, so `top -H` tells them apart.
            let name = format!("rs-update-{}", w.index());
            let q = q.clone();
            threads.push(spawn(name, move || update_thread::run(w, rx, q)));
        }
    }
    for (i, (rx, table)) in shard_rx.into_iter().zip(tables).enumerate() {
        let mut w = shard_thread::ShardWorker::new(
            i,
            config,
            (update_tx.clone(), update_queues.clone()),
            inline.take(),
            telemetry.clone(),
            &arrivals,
            deferring.clone(),
            kinds.clone(),
            subscribers
                .iter()
                .map(|s| s.tap(i, config.shards))
                .collect(),
        );
        w.resume(table, shard_groups, &place);
        let q = shard_queues.get(i).cloned().unwrap_or_default();
        threads.push(spawn(format!("rs-shard-{i}"), move || {
            shard_thread::run(w, rx, q)
        }));
    }
    let lanes = Lanes {
        epoch,
        config,
        shards: shard_tx,
        updates: update_tx,
        shard_queues,
        update_queues,
        subscribers: subscribers.len(),
    };
    (lanes, threads)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Applies a session's news to the start-up deferral, if one is under way, and ends it if it
/// is over now; true if it ended here (the caller tells the shards).
fn end_deferral(
    deferral: &Mutex<Option<deferral::Deferral>>,
    deferring: &AtomicBool,
    news: impl FnOnce(&mut deferral::Deferral),
) -> bool {
    let mut guard = lock(deferral);
    let Some(d) = guard.as_mut() else {
        return false;
    };
    news(d);
    let Some(why) = d.over(Instant::now()) else {
        return false;
    };
    d.log_end(why);
    *guard = None;
    deferring.store(false, Ordering::Release);
    true
}

fn tick(shards: &[mpsc::Sender<ToShard>], updates: &[mpsc::Sender<ToUpdate>]) {
    // A full queue means the thread is busy and will look at its members soon anyway.
    for s in shards {
        let _ = s.try_send(ToShard::Tick);
    }
    for u in updates {
        let _ = u.try_send(ToUpdate::Tick);
    }
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    match std::thread::Builder::new().name(name).spawn(f) {
        Ok(h) => h,
        Err(e) => {
            // Without its threads the daemon cannot route at all.
            tracing::error!("cannot start a pipeline thread: {e}");
            std::process::exit(1)
        }
    }
}
