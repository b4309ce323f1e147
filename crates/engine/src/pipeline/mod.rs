//! The routing pipeline's threads: N shard threads (RIB sharding) and M update threads
//! (update threading), the bounded channels between them, and the handle sessions feed.
//!
//! ```text
//! sessions ──Batch──► shard k = hash(prefix) % N ──Live/Dump──► update thread of the group ──► members
//!          ──PeerUp/PeerDown/EndOfRib (to every shard, in order with the session's batches)
//!          ──Join/Leave/Refresh──► update thread of the group
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

mod shard;
mod update;

use ribshard_adjout::{Entry, GroupId, MemberId, Sink, WriteQueueLimits};
use ribshard_rib::{shard_of, GroupSpec, Options, Path, PeerIndex, PeerInfo, RouteAttrs};
use ribshard_wire::{Family, Nlri, Prefix};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::mpsc;

/// Messages a shard's queue holds; room for this many.
pub const SHARD_QUEUE: usize = 64;
/// Messages an update thread's queue holds.
pub const UPDATE_QUEUE: usize = 256;
/// Prefixes per session batch before it is handed on.
pub const BATCH: usize = 4096;
/// Prefixes a shard walks (peer down, table dump) between two looks at its queue.
pub const WALK_BUDGET: usize = 4096;
/// How often every thread is woken for its periodic work (slow-peer catch-up).
pub const TICK: std::time::Duration = std::time::Duration::from_millis(200);

/// Routes from one peer for one shard: announcements and withdrawals in received order.
#[derive(Debug, Default)]
pub struct Batch {
    pub peer: PeerIndex,
    pub attrs: Vec<Arc<RouteAttrs>>,
    /// (index into `attrs`, or [`WITHDRAW`], NLRI).
    pub ops: Vec<(u32, Nlri)>,
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
    /// A session reached Established. With a membership, the shard also starts dumping its
    /// table to the new member (token 0).
    PeerUp {
        peer: PeerIndex,
        info: PeerInfo,
        member: Option<Membership>,
    },
    Routes(Batch),
    /// A session left Established. `stale`: families whose paths stay as stale (graceful
    /// restart, RFC 4724 section 4.2); the others go now.
    PeerDown {
        peer: PeerIndex,
        stale: Option<[bool; 2]>,
        member: Option<(GroupId, MemberId)>,
    },
    /// BoRR (RFC 7313): the peer re-advertises these families; its paths there are stale
    /// until the EoRR ([`ToShard::FlushStale`]) and fresh again when sent again.
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
    /// Dump the table to a member (route refresh, slow-peer catch-up).
    Dump {
        group: GroupId,
        member: MemberId,
        token: u64,
    },
    /// Update-thread work, when update threading is off and the shard does it.
    Update(Box<ToUpdate>),
    /// Finish all walks and send all changes, then pass the barrier to the update threads.
    Barrier(std_mpsc::Sender<()>),
    /// The Loc-RIB as last reported: (prefix, best path).
    LocRib(std_mpsc::Sender<Vec<(Prefix, Path)>>),
    Stats(std_mpsc::Sender<ShardStats>),
    Tick,
    Stop,
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
    },
    DumpBegin {
        shard: usize,
        group: GroupId,
        member: MemberId,
        token: u64,
    },
    /// Part of a table dump, for these members (with their tokens) of the group.
    Dump {
        group: GroupId,
        members: Vec<(MemberId, u64)>,
        entries: Vec<Entry>,
    },
    DumpEnd {
        group: GroupId,
        member: MemberId,
        token: u64,
    },
    Barrier(std_mpsc::Sender<()>),
    Stats(std_mpsc::Sender<UpdateThreadStats>),
    Tick,
    Stop,
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
    /// Prefixes whose equal-cost set (`multipath`) holds more than one path.
    pub multipath_prefixes: usize,
    pub queue_high_water: usize,
    pub batches: u64,
    pub changes: u64,
    pub cpu_seconds: f64,
}

/// What an update thread reports of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupReport {
    pub thread: usize,
    pub group: GroupId,
    pub name: String,
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

/// Where a message for an update thread goes.
pub enum Target {
    Shard(usize, ToShard),
    Update(usize, ToUpdate),
}

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

/// Update groups by what makes them one: members with identical specs share one group.
#[derive(Default)]
struct Registry {
    groups: HashMap<Arc<GroupSpec>, (GroupId, usize, usize)>,
    next_id: GroupId,
    next_thread: usize,
}

/// A running pipeline.
pub struct Pipeline {
    pub config: PipelineConfig,
    shards: Vec<mpsc::Sender<ToShard>>,
    updates: Vec<mpsc::Sender<ToUpdate>>,
    registry: Mutex<Registry>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Tells the ticker thread to end.
    stopping: Arc<AtomicBool>,
}

impl Pipeline {
    /// Starts the shard and update threads.
    pub fn start(config: PipelineConfig) -> Arc<Pipeline> {
        let config = PipelineConfig {
            shards: if config.update_threads == 0 {
                1
            } else {
                config.shards.max(1)
            },
            ..config
        };
        let mut threads = Vec::new();
        let (shard_tx, shard_rx): (Vec<_>, Vec<_>) = (0..config.shards)
            .map(|_| mpsc::channel::<ToShard>(SHARD_QUEUE))
            .unzip();
        let (update_tx, update_rx): (Vec<_>, Vec<_>) = (0..config.update_threads)
            .map(|_| mpsc::channel::<ToUpdate>(UPDATE_QUEUE))
            .unzip();
        for (i, rx) in update_rx.into_iter().enumerate() {
            let w = update::UpdateWorker::new(
                i,
                config.shards,
                config.write_queue,
                Some(shard_tx.clone()),
            );
            threads.push(spawn(format!("ribshard-update-{i}"), move || {
                update::run(w, rx)
            }));
        }
        for (i, rx) in shard_rx.into_iter().enumerate() {
            let w = shard::ShardWorker::new(i, config, update_tx.clone());
            threads.push(spawn(format!("ribshard-shard-{i}"), move || {
                shard::run(w, rx)
            }));
        }
        // The pipeline wakes its own threads for periodic work, so that whoever embeds it
        // (the daemon, a test) cannot forget to and leave slow members split forever.
        let stopping = Arc::new(AtomicBool::new(false));
        {
            let (shards, updates, stopping) =
                (shard_tx.clone(), update_tx.clone(), stopping.clone());
            threads.push(spawn("ribshard-tick".into(), move || {
                while !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    tick(&shards, &updates);
                }
            }));
        }
        Arc::new(Pipeline {
            config,
            shards: shard_tx,
            updates: update_tx,
            registry: Mutex::new(Registry::default()),
            threads: Mutex::new(threads),
            stopping,
        })
    }

    pub fn shard_senders(&self) -> &[mpsc::Sender<ToShard>] {
        &self.shards
    }

    pub fn update_senders(&self) -> &[mpsc::Sender<ToUpdate>] {
        &self.updates
    }

    /// The update group for a member with this spec; creates it (on the next update thread,
    /// round-robin) if it is the first.
    pub fn join_group(&self, spec: GroupSpec) -> (GroupId, Arc<GroupSpec>, usize) {
        let mut r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, v)) = r.groups.get_key_value(&spec) {
            let (id, t, _) = *v;
            let k = k.clone();
            if let Some(v) = r.groups.get_mut(&spec) {
                v.2 += 1;
            }
            return (id, k, t);
        }
        let id = r.next_id;
        r.next_id += 1;
        let threads = self.updates.len().max(1);
        let t = r.next_thread % threads;
        r.next_thread += 1;
        let spec = Arc::new(spec);
        r.groups.insert(spec.clone(), (id, t, 1));
        (id, spec, t)
    }

    pub fn leave_group(&self, spec: &GroupSpec) {
        let mut r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let gone = match r.groups.get_mut(spec) {
            Some(v) => {
                v.2 = v.2.saturating_sub(1);
                v.2 == 0
            }
            None => false,
        };
        if gone {
            r.groups.remove(spec);
        }
    }

    /// Routes a message for update thread `t` (to the shard when update threading is off).
    pub fn to_update(&self, t: usize, msg: ToUpdate) -> Target {
        if self.updates.is_empty() {
            Target::Shard(0, ToShard::Update(Box::new(msg)))
        } else {
            Target::Update(t.min(self.updates.len() - 1), msg)
        }
    }

    /// The messages for a session that reached Established, in the order to send them:
    /// the member's Join first (if it advertises to anyone), then PeerUp to every shard.
    pub fn peer_up(
        &self,
        peer: PeerIndex,
        info: PeerInfo,
        member: Option<(GroupSpec, MemberId, Box<dyn Sink>)>,
    ) -> (Vec<Target>, Option<Joined>) {
        let mut out = Vec::new();
        let mut joined = None;
        let membership = member.map(|(spec, id, sink)| {
            let (group, spec, t) = self.join_group(spec);
            out.push(self.to_update(
                t,
                ToUpdate::Join {
                    group,
                    spec: spec.clone(),
                    member: id,
                    sink,
                },
            ));
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
        for i in 0..self.shards.len() {
            out.push(Target::Shard(
                i,
                ToShard::PeerUp {
                    peer,
                    info,
                    member: membership.clone(),
                },
            ));
        }
        (out, joined)
    }

    /// The messages for a session that left Established.
    pub fn peer_down(
        &self,
        peer: PeerIndex,
        stale: Option<[bool; 2]>,
        joined: Option<Joined>,
    ) -> Vec<Target> {
        let mut out = Vec::new();
        if let Some(j) = &joined {
            self.leave_group(&j.spec);
            out.push(self.to_update(
                j.update_thread,
                ToUpdate::Leave {
                    group: j.group,
                    member: j.member,
                },
            ));
        }
        for i in 0..self.shards.len() {
            out.push(Target::Shard(
                i,
                ToShard::PeerDown {
                    peer,
                    stale,
                    member: joined.as_ref().map(|j| (j.group, j.member)),
                },
            ));
        }
        out
    }

    /// The messages that drop a peer's stale paths (End-of-RIB, restart time over).
    pub fn flush_stale(&self, peer: PeerIndex, families: [bool; 2]) -> Vec<Target> {
        (0..self.shards.len())
            .map(|i| Target::Shard(i, ToShard::FlushStale { peer, families }))
            .collect()
    }

    /// BoRR from a peer (RFC 7313): its paths of these families become stale in every shard.
    pub fn refresh_begin(&self, peer: PeerIndex, families: [bool; 2]) -> Vec<Target> {
        (0..self.shards.len())
            .map(|i| Target::Shard(i, ToShard::RefreshBegin { peer, families }))
            .collect()
    }

    /// A ROUTE-REFRESH from a member: its group sends it the table again (between BoRR and
    /// EoRR for `enhanced`, RFC 7313).
    pub fn refresh(&self, joined: &Joined, enhanced: Option<Family>) -> Target {
        self.to_update(
            joined.update_thread,
            ToUpdate::Refresh {
                group: joined.group,
                member: joined.member,
                enhanced,
            },
        )
    }

    /// Sends from a plain thread (tests, tools), waiting for room.
    pub fn blocking_send(&self, t: Target) {
        match t {
            Target::Shard(i, m) => {
                if let Some(s) = self.shards.get(i) {
                    let _ = s.blocking_send(m);
                }
            }
            Target::Update(i, m) => {
                if let Some(s) = self.updates.get(i) {
                    let _ = s.blocking_send(m);
                }
            }
        }
    }

    /// Sends from a task, waiting for room.
    pub async fn send(&self, t: Target) {
        match t {
            Target::Shard(i, m) => {
                if let Some(s) = self.shards.get(i) {
                    let _ = s.send(m).await;
                }
            }
            Target::Update(i, m) => {
                if let Some(s) = self.updates.get(i) {
                    let _ = s.send(m).await;
                }
            }
        }
    }

    /// Waits (blocking) until everything sent before has gone through every thread.
    pub fn barrier(&self) {
        let (tx, rx) = std_mpsc::channel();
        for s in &self.shards {
            let _ = s.blocking_send(ToShard::Barrier(tx.clone()));
        }
        drop(tx);
        let want = self.shards.len() * self.updates.len().max(1);
        for _ in 0..want {
            if rx.recv().is_err() {
                break;
            }
        }
    }

    /// The Loc-RIB of every shard (blocking), sorted by prefix.
    pub fn loc_rib(&self) -> Vec<(Prefix, Path)> {
        let mut all = Vec::new();
        for s in &self.shards {
            let (tx, rx) = std_mpsc::channel();
            let _ = s.blocking_send(ToShard::LocRib(tx));
            all.extend(rx.recv().unwrap_or_default());
        }
        all.sort_by_key(|(p, _)| *p);
        all
    }

    /// Per-shard, per-update-thread and per-group accounting (blocking).
    pub fn stats(&self) -> (Vec<ShardStats>, Vec<UpdateThreadStats>) {
        let mut shards = Vec::new();
        for s in &self.shards {
            let (tx, rx) = std_mpsc::channel();
            let _ = s.blocking_send(ToShard::Stats(tx));
            shards.extend(rx.recv().ok());
        }
        let mut groups = Vec::new();
        for u in &self.updates {
            let (tx, rx) = std_mpsc::channel();
            let _ = u.blocking_send(ToUpdate::Stats(tx));
            groups.extend(rx.recv().ok());
        }
        if self.updates.is_empty() {
            if let Some(s) = self.shards.first() {
                let (tx, rx) = std_mpsc::channel();
                let _ = s.blocking_send(ToShard::Update(Box::new(ToUpdate::Stats(tx))));
                groups.extend(rx.recv().ok());
            }
        }
        (shards, groups)
    }

    /// Wakes every thread for its periodic work (slow-peer catch-up) now, besides the
    /// pipeline's own tick every [`TICK`]; never waits.
    pub fn tick(&self) {
        tick(&self.shards, &self.updates);
    }

    /// Stops every thread and waits for them.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        for s in &self.shards {
            let _ = s.blocking_send(ToShard::Stop);
        }
        for u in &self.updates {
            let _ = u.blocking_send(ToUpdate::Stop);
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Pipeline {
    /// Without [`Pipeline::stop`], the threads end as they did before the ticker: when the
    /// last sender goes. The ticker holds senders, so it must end first.
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
    }
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

/// Splits one peer's routes into per-shard batches.
pub struct Batcher {
    peer: PeerIndex,
    batches: Vec<Batch>,
    ops: usize,
}

impl Batcher {
    pub fn new(peer: PeerIndex, shards: usize) -> Batcher {
        Batcher {
            peer,
            batches: (0..shards.max(1))
                .map(|_| Batch {
                    peer,
                    ..Batch::default()
                })
                .collect(),
            ops: 0,
        }
    }

    /// Operations held.
    pub fn len(&self) -> usize {
        self.ops
    }

    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    #[inline]
    pub fn announce(&mut self, attrs: &Arc<RouteAttrs>, n: Nlri) {
        let i = shard_of(&n.prefix, self.batches.len());
        if let Some(b) = self.batches.get_mut(i) {
            let last = b.attrs.len();
            let idx = match b.attrs.last() {
                Some(a) if Arc::ptr_eq(a, attrs) => last - 1,
                _ => {
                    b.attrs.push(attrs.clone());
                    last
                }
            };
            b.ops.push((idx as u32, n));
            self.ops += 1;
        }
    }

    #[inline]
    pub fn withdraw(&mut self, n: Nlri) {
        let i = shard_of(&n.prefix, self.batches.len());
        if let Some(b) = self.batches.get_mut(i) {
            b.ops.push((WITHDRAW, n));
            self.ops += 1;
        }
    }

    /// The non-empty batches, as messages for their shards.
    pub fn take(&mut self) -> Vec<(usize, ToShard)> {
        self.ops = 0;
        let peer = self.peer;
        self.batches
            .iter_mut()
            .enumerate()
            .filter(|(_, b)| !b.ops.is_empty())
            .map(|(i, b)| {
                let full = std::mem::replace(
                    b,
                    Batch {
                        peer,
                        ..Batch::default()
                    },
                );
                (i, ToShard::Routes(full))
            })
            .collect()
    }
}
