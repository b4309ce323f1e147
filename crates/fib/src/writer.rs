//! The FIB writer (thread `rs-fib`): the Loc-RIB's best paths into one kernel table, in
//! bulk.
//!
//! Changes come from every shard's tap ([`crate::tap`]) and only update what each prefix
//! wants (a queue holds each prefix once, so a prefix changed five times while queued is
//! written once, as it ended). A batch is written when changes stop coming for
//! `flush-delay` (a lone change waits that long at most) or once many are queued: many
//! requests a `sendmsg` (the kernel applies them in order before it returns), objects
//! ahead of the routes naming them, deletions of objects no route names after. No
//! acknowledgement is asked: the kernel answers errors anyway, and they are read after
//! each `sendmsg`, matched to the prefix by sequence number, counted, logged and retried.
//!
//! At start, routes of our protocol already in the table and objects we left are read
//! first and, once the start-up deferral ends (every shard's [`crate::tap`] says so), each
//! route is kept when it already forwards as wanted, replaced otherwise, and removed when
//! nothing wants it: a restart writes only the differences and never empties the table.
//! With none of ours found there is nothing to reconcile, and routes are written as they
//! come.

use crate::kernel::{KernelView, Published};
use crate::netlink::nexthop::{self, NexthopSpec};
use crate::netlink::route::{
    self, Forward, RouteKey, RouteMsg, RouteNext, RTN_BLACKHOLE, RTN_UNICAST, RTN_UNREACHABLE,
};
use crate::netlink::{
    Builder, Messages, NexthopMsg, NlSocket, AF_INET, AF_INET6, RTM_NEWNEXTHOP, RTM_NEWROUTE,
};
use crate::objects::{Objects, Target, Want, Written};
use crate::stats::FibStats;
use hashbrown::{HashMap, HashSet};
use ribshard_engine::pipeline::Passed;
use ribshard_engine::telemetry::{register, ThreadKind};
use ribshard_wire::Prefix;
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `[fib]`: where and how routes are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FibConfig {
    /// The kernel table (254: main).
    pub table: u32,
    /// The routes' protocol number (186: `proto bgp` in `ip route`).
    pub protocol: u8,
    /// The routes' metric: a route of another protocol with a lower one wins forwarding.
    pub metric: u32,
    /// Use nexthop objects where the kernel has them (Linux 5.3); else every route
    /// carries its next hops (`RTA_MULTIPATH`).
    pub nexthop_objects: bool,
    /// The range of nexthop object ids ours are taken from.
    pub id_base: u32,
    pub id_span: u32,
    /// How long a change waits for others before a batch is written.
    pub flush_delay: Duration,
    /// Octets of requests per `sendmsg`.
    pub batch_octets: usize,
    /// Leave the routes in the kernel when ribshard stops (the next start reconciles them
    /// without a gap in forwarding); false removes them (BIRD's default, without
    /// `persist`).
    pub retain: bool,
}

impl Default for FibConfig {
    fn default() -> Self {
        FibConfig {
            table: route::RT_TABLE_MAIN,
            protocol: 186,
            metric: 20,
            nexthop_objects: true,
            id_base: 0x1ba0_0000,
            id_span: 1 << 22,
            flush_delay: Duration::from_millis(2),
            batch_octets: 256 << 10,
            retain: true,
        }
    }
}

/// A prefix's best path, as the kernel should have it (`None`: no route of ours).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FibChange {
    pub prefix: Prefix,
    pub want: Option<Want>,
}

/// What the writer's thread is told.
pub enum FibInput {
    Changes(Vec<FibChange>),
    /// A pipeline barrier: everything before is taken in.
    Barrier(Passed),
    /// A shard's start-up deferral is over.
    Advertising {
        shard: usize,
        shards: usize,
    },
    /// A new snapshot of the kernel's tables: next hops may have moved.
    Resolution,
    /// A route of our protocol changed by someone else.
    Drift {
        route: RouteMsg,
        gone: bool,
    },
    /// Answer once everything taken in so far is written (not while holding).
    Sync(SyncSender<()>),
    /// What each prefix wants and whether it is installed, for `fib verify`.
    Snapshot(SyncSender<Vec<FibEntry>>),
    /// Stop; `keep`: leave every route of ours in the kernel whatever `retain` says (a
    /// graceful restart: neighbors go on forwarding through them meanwhile).
    Stop {
        keep: bool,
    },
}

/// One prefix as the writer holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FibEntry {
    pub prefix: Prefix,
    pub want: Want,
    /// Written as wanted (and not refused).
    pub installed: bool,
    /// How it was written: the object it names, or its next hops.
    pub target: Option<Target>,
}

/// No route of ours in the kernel.
const NONE: u32 = 0;
/// Something of ours may be in the kernel, not known to be what we want (found at start,
/// a refused write, someone else's change): written again.
const UNKNOWN: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, Default)]
struct Route {
    /// Set ids ([`Sets`]): what the best path wants, what the kernel has.
    want: u32,
    have: u32,
    queued: bool,
    /// A write was refused: retried later, not at once.
    failed: bool,
}

/// The next-hop sets routes want, each once, by id (ids from 1; freed when unused).
#[derive(Default)]
struct Sets {
    list: Vec<Option<(Want, u32)>>,
    by: HashMap<Want, u32>,
    free: Vec<u32>,
}

impl Sets {
    fn intern(&mut self, w: Want) -> u32 {
        if let Some(id) = self.by.get(&w) {
            if let Some(Some((_, n))) = self.list.get_mut(*id as usize) {
                *n += 1;
            }
            return *id;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                if self.list.is_empty() {
                    self.list.push(None);
                }
                self.list.push(None);
                (self.list.len() - 1) as u32
            }
        };
        if let Some(slot) = self.list.get_mut(id as usize) {
            *slot = Some((w.clone(), 1));
        }
        self.by.insert(w, id);
        id
    }

    fn incref(&mut self, id: u32) {
        if let Some(Some((_, n))) = self.list.get_mut(id as usize) {
            *n += 1;
        }
    }

    fn decref(&mut self, id: u32) {
        if id == NONE || id == UNKNOWN {
            return;
        }
        let Some(Some((w, n))) = self.list.get_mut(id as usize) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            let w = w.clone();
            self.by.remove(&w);
            if let Some(slot) = self.list.get_mut(id as usize) {
                *slot = None;
            }
            self.free.push(id);
        }
    }

    fn get(&self, id: u32) -> Option<&Want> {
        self.list.get(id as usize)?.as_ref().map(|(w, _)| w)
    }
}

/// What was written in the batch being sent, by sequence number, to match errors.
enum Sent {
    Route(Prefix, bool),
    Object(Written),
}

/// How long a refused write waits before it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Changes queued past this many are written without waiting for the flush delay.
const FLUSH_AT: usize = 4096;
/// Prefixes written per pass, between two looks at the input.
const PASS: usize = 65_536;

pub struct Writer {
    cfg: FibConfig,
    key: RouteKey,
    sock: NlSocket,
    view: Arc<Published>,
    stats: Arc<FibStats>,
    routes: HashMap<Prefix, Route>,
    sets: Sets,
    objects: Objects,
    queue: VecDeque<Prefix>,
    /// When the oldest change not yet written came.
    since: Option<Instant>,
    retry: VecDeque<(Instant, Prefix)>,
    holding: bool,
    /// Shards (of a given count) whose deferral has ended.
    advertising: HashMap<usize, HashSet<usize>>,
    /// Our routes in the table when we started, until reconciled.
    at_start: Option<HashMap<Prefix, RouteMsg>>,
    resolution_dirty: bool,
    seq: u32,
    b: Builder,
    sent: Vec<(u32, Sent)>,
    syncs: Vec<SyncSender<()>>,
    /// Routes the kernel holds under our key from another protocol, not to be replaced.
    conflicts: HashSet<Prefix>,
    /// Prefixes wanting a route that nothing forwards to yet (no next hop of their set
    /// resolves to a way out): tried again when resolution changes.
    unresolved: HashSet<Prefix>,
}

/// What the kernel held at the writer's start: our routes, our objects, and the object ids
/// other protocols use.
struct FoundAtStart {
    routes: HashMap<Prefix, RouteMsg>,
    objects: HashMap<u32, NexthopSpec>,
    foreign: HashSet<u32>,
}

/// Reads our routes and objects from the kernel (the writer's start).
fn read_ours(
    sock: &mut NlSocket,
    cfg: &FibConfig,
) -> Result<FoundAtStart, crate::netlink::NlError> {
    let mut routes = HashMap::new();
    let mut b = Builder::default();
    for (i, family) in [AF_INET, AF_INET6].into_iter().enumerate() {
        b.clear();
        route::put_dump(&mut b, 1 + i as u32, family);
        for (k, payload) in sock.dump(b.finish(), 1 + i as u32)? {
            if k != RTM_NEWROUTE {
                continue;
            }
            if let Some(r) = RouteMsg::decode(&payload) {
                if r.protocol == cfg.protocol && r.table == cfg.table && r.priority == cfg.metric {
                    routes.insert(r.dst, r);
                }
            }
        }
    }
    let mut ours = HashMap::new();
    let mut foreign = HashSet::new();
    b.clear();
    nexthop::put_dump(&mut b, 3);
    if let Ok(all) = sock.dump(b.finish(), 3) {
        for (k, payload) in all {
            if k != RTM_NEWNEXTHOP {
                continue;
            }
            if let Some(n) = NexthopMsg::decode(&payload) {
                if n.protocol == cfg.protocol {
                    ours.insert(n.id, n.spec);
                } else {
                    foreign.insert(n.id);
                }
            }
        }
    }
    Ok(FoundAtStart {
        routes,
        objects: ours,
        foreign,
    })
}

/// Whether this kernel has nexthop objects: a dump of them is answered.
fn kernel_has_objects(sock: &mut NlSocket) -> bool {
    let mut b = Builder::default();
    nexthop::put_dump(&mut b, 9);
    sock.dump(b.finish(), 9).is_ok()
}

impl Writer {
    /// Opens the writer's socket and reads what of ours the kernel holds.
    pub fn new(
        cfg: FibConfig,
        view: Arc<Published>,
        stats: Arc<FibStats>,
    ) -> std::io::Result<Writer> {
        let mut sock = NlSocket::open(&[])?;
        let objects_on = cfg.nexthop_objects && kernel_has_objects(&mut sock);
        let found = read_ours(&mut sock, &cfg).map_err(std::io::Error::other)?;
        let mut objects = Objects::new(cfg.protocol, cfg.id_base, cfg.id_span, objects_on);
        objects.found_at_start(found.objects, found.foreign);
        let at_start = found.routes;
        // Holding until the start-up deferral ends is for reconciling with routes the last
        // run left (kept, not flushed and added again). With none of ours in the table (a
        // first start, or after a clean stop) there is nothing to reconcile: routes are
        // written as the shards decide them, while the tables arrive, as a daemon without
        // the deferral would (objects left without routes go first).
        let holding = !at_start.is_empty();
        if !holding {
            let unclaimed = objects.unclaimed();
            objects.delete(unclaimed);
        }
        stats
            .objects
            .store(objects_on, std::sync::atomic::Ordering::Relaxed);
        stats
            .holding
            .store(holding, std::sync::atomic::Ordering::Relaxed);
        Ok(Writer {
            key: RouteKey {
                table: cfg.table,
                protocol: cfg.protocol,
                priority: cfg.metric,
            },
            cfg,
            sock,
            view,
            stats,
            routes: HashMap::new(),
            sets: Sets::default(),
            objects,
            queue: VecDeque::new(),
            since: None,
            retry: VecDeque::new(),
            holding,
            advertising: HashMap::new(),
            at_start: holding.then_some(at_start),
            resolution_dirty: false,
            seq: 1000,
            b: Builder::with_capacity(512 << 10),
            sent: Vec::new(),
            syncs: Vec::new(),
            conflicts: HashSet::new(),
            unresolved: HashSet::new(),
        })
    }

    /// The port of the writer's socket: the watcher has the kernel drop its echoes.
    pub fn portid(&self) -> u32 {
        self.sock.portid()
    }

    /// Runs until told to stop (or every sender is gone).
    pub fn run(mut self, rx: Receiver<FibInput>) {
        let work = register(ThreadKind::Fib, 0);
        loop {
            let wait = self.wait();
            let msg = rx.recv_timeout(wait);
            let began = Instant::now();
            match msg {
                Ok(FibInput::Stop { keep }) => return self.stop(keep),
                Ok(m) => self.handle(m),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return self.stop(false),
            }
            // Everything queued now, before writing once.
            for _ in 0..4096 {
                match rx.try_recv() {
                    Ok(FibInput::Stop { keep }) => return self.stop(keep),
                    Ok(m) => self.handle(m),
                    Err(_) => break,
                }
            }
            self.due_retries();
            if self.holding {
                continue;
            }
            let due = self
                .since
                .is_some_and(|t| t.elapsed() >= self.cfg.flush_delay)
                || self.queue.len() >= FLUSH_AT;
            if due || self.resolution_dirty || !self.syncs.is_empty() {
                self.flush(PASS);
            }
            if self.queue.is_empty() {
                for s in self.syncs.drain(..) {
                    let _ = s.send(());
                }
            }
            work.item(began.elapsed());
        }
    }

    /// Stopping: the routes stay for the next start to reconcile, unless told otherwise.
    fn stop(mut self, keep: bool) {
        if keep {
            tracing::info!(
                routes = self.routes.len(),
                "FIB: our routes left in the kernel for the graceful restart"
            );
            return;
        }
        if self.cfg.retain || self.holding {
            return;
        }
        for r in self.routes.values_mut() {
            r.failed = false;
        }
        let ours: Vec<Prefix> = self.routes.keys().copied().collect();
        for p in ours {
            self.change(p, None);
        }
        self.flush(usize::MAX);
        tracing::info!("FIB: our routes removed from the kernel (fib.retain = false)");
    }

    fn wait(&self) -> Duration {
        if !self.holding {
            if let Some(t) = self.since {
                return self.cfg.flush_delay.saturating_sub(t.elapsed());
            }
        }
        match self.retry.front() {
            Some((at, _)) => at.saturating_duration_since(Instant::now()),
            None => Duration::from_secs(1),
        }
    }

    fn handle(&mut self, m: FibInput) {
        match m {
            FibInput::Changes(cs) => {
                for c in cs {
                    self.change(c.prefix, c.want);
                }
            }
            FibInput::Barrier(p) => p.pass(),
            FibInput::Advertising { shard, shards } => {
                let seen = self.advertising.entry(shards).or_default();
                seen.insert(shard);
                if self.holding && seen.len() >= shards {
                    self.release();
                }
            }
            FibInput::Resolution => self.resolution_dirty = true,
            FibInput::Drift { route, gone } => self.drift(route, gone),
            FibInput::Sync(s) => self.syncs.push(s),
            FibInput::Snapshot(reply) => {
                let _ = reply.send(self.snapshot());
            }
            FibInput::Stop { .. } => {}
        }
    }

    /// A prefix's best path changed.
    fn change(&mut self, prefix: Prefix, want: Option<Want>) {
        let id = want.map_or(NONE, |w| self.sets.intern(w));
        let r = self.routes.entry(prefix).or_default();
        let old = std::mem::replace(&mut r.want, id);
        if old == id {
            // The same set: interned twice, counted once.
            self.sets.decref(id);
            return;
        }
        self.sets.decref(old);
        if old == NONE {
            FibStats::add(&self.stats.wanted, 1);
        } else if id == NONE {
            self.stats
                .wanted
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.enqueue(prefix);
    }

    fn enqueue(&mut self, prefix: Prefix) {
        let Some(r) = self.routes.get_mut(&prefix) else {
            return;
        };
        if r.queued || r.failed {
            return;
        }
        r.queued = true;
        self.queue.push_back(prefix);
        self.since.get_or_insert_with(Instant::now);
    }

    /// The start-up deferral is over: reconcile with what the kernel held at start.
    fn release(&mut self) {
        self.holding = false;
        self.stats
            .holding
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let Some(at_start) = self.at_start.take() else {
            return;
        };
        let view = self.view.load();
        let mut kept = 0u64;
        let mut sent = Vec::new();
        for (p, k) in &at_start {
            let r = self.routes.entry(*p).or_default();
            r.have = UNKNOWN;
            let Some(want) = self.sets.get(r.want).cloned() else {
                continue;
            };
            let target = self
                .objects
                .target(&mut self.b, &mut self.seq, &mut sent, &view, &want);
            if target.as_ref().is_some_and(|t| same(t, k)) {
                let r = self.routes.entry(*p).or_default();
                r.have = r.want;
                self.sets.incref(r.want);
                self.objects.acquire(&want);
                kept += 1;
            }
        }
        self.sent
            .extend(sent.into_iter().map(|(s, w)| (s, Sent::Object(w))));
        // Everything not kept right is written (or deleted) in the first batches, in
        // address order (see `flush`).
        let mut todo: Vec<Prefix> = self
            .routes
            .iter()
            .filter(|(_, r)| r.want != r.have)
            .map(|(p, _)| *p)
            .collect();
        todo.sort_unstable();
        for p in todo {
            self.enqueue(p);
        }
        let unclaimed = self.objects.unclaimed();
        self.objects.delete(unclaimed);
        FibStats::set(&self.stats.kept_at_start, kept);
        let installed = self
            .routes
            .values()
            .filter(|r| r.have != NONE && r.have == r.want)
            .count();
        FibStats::set(&self.stats.installed, installed as u64);
        tracing::info!(
            found = at_start.len(),
            kept,
            to_write = self.queue.len(),
            "FIB: start-up deferral over; routes left by the last run reconciled"
        );
        self.resolution_dirty = true;
    }

    fn due_retries(&mut self) {
        let now = Instant::now();
        while self.retry.front().is_some_and(|(at, _)| *at <= now) {
            let Some((_, p)) = self.retry.pop_front() else {
                break;
            };
            if let Some(r) = self.routes.get_mut(&p) {
                r.failed = false;
            }
            self.enqueue(p);
        }
    }

    /// Someone else changed or removed a route under our protocol in our table.
    fn drift(&mut self, route: RouteMsg, gone: bool) {
        if route.table != self.cfg.table || route.priority != self.cfg.metric || self.holding {
            return;
        }
        let Some(r) = self.routes.get_mut(&route.dst) else {
            if !gone {
                // Not ours to have: removed.
                self.routes.insert(
                    route.dst,
                    Route {
                        have: UNKNOWN,
                        ..Route::default()
                    },
                );
                self.enqueue(route.dst);
            }
            return;
        };
        let had = std::mem::replace(&mut r.have, if gone { NONE } else { UNKNOWN });
        if had != NONE && had != UNKNOWN {
            if let Some(w) = self.sets.get(had).cloned() {
                self.objects.release(&w);
            }
            self.sets.decref(had);
        }
        FibStats::add(&self.stats.drift_repaired, 1);
        tracing::warn!(prefix = ?route.dst, gone, "FIB: a route of ours was changed by someone else; writing it again");
        self.enqueue(route.dst);
    }

    /// Writes up to `budget` queued prefixes, and what resolution changes ask.
    fn flush(&mut self, budget: usize) {
        let view = self.view.load();
        let mut sent = Vec::new();
        if self.resolution_dirty {
            self.resolution_dirty = false;
            let moved = self
                .objects
                .moved(&mut self.b, &mut self.seq, &mut sent, &view);
            // Those that had nothing to forward to may have now.
            let mut again: Vec<Prefix> = self.unresolved.drain().collect();
            if !moved.sets.is_empty() || !moved.through.is_empty() {
                // Rare (a next hop's number of ways out changed, or no nexthop objects):
                // a walk of the writer's table finds the routes concerned.
                let sets: HashSet<u32> = moved
                    .sets
                    .iter()
                    .filter_map(|w| self.sets.by.get(w).copied())
                    .collect();
                again.extend(
                    self.routes
                        .iter()
                        .filter(|(_, r)| {
                            r.want != NONE
                                && (sets.contains(&r.have)
                                    || self.sets.get(r.want).is_some_and(|w| match w {
                                        Want::Forward(n) => {
                                            n.iter().any(|x| moved.through.contains(x))
                                        }
                                        _ => false,
                                    }))
                        })
                        .map(|(p, _)| *p),
                );
            }
            for p in again {
                if let Some(r) = self.routes.get_mut(&p) {
                    // Written again whatever it has.
                    if r.have != NONE && r.have != UNKNOWN {
                        let had = std::mem::replace(&mut r.have, UNKNOWN);
                        if let Some(w) = self.sets.get(had).cloned() {
                            self.objects.release(&w);
                        }
                        self.sets.decref(had);
                    }
                }
                self.enqueue(p);
            }
        }
        self.sent
            .extend(sent.into_iter().map(|(s, w)| (s, Sent::Object(w))));
        // In address order: the kernel's trie grows at its edge instead of being split and
        // rebalanced all over (each rebalance waits for an RCU grace period: a table
        // written in hash order took minutes instead of a second).
        let n = budget.min(self.queue.len());
        let mut pass: Vec<Prefix> = self.queue.drain(..n).collect();
        pass.sort_unstable();
        for p in pass {
            self.write(&p, &view);
            if self.b.len() >= self.cfg.batch_octets {
                self.send();
            }
        }
        let mut sent = Vec::new();
        self.objects.collect(&mut self.b, &mut self.seq, &mut sent);
        self.sent
            .extend(sent.into_iter().map(|(s, w)| (s, Sent::Object(w))));
        self.send();
        if self.queue.is_empty() {
            self.since = None;
        } else {
            self.since = Some(Instant::now() - self.cfg.flush_delay);
        }
        FibStats::set(&self.stats.pending, self.queue.len() as u64);
        FibStats::set(&self.stats.leaves, self.objects.leaves() as u64);
        FibStats::set(&self.stats.groups, self.objects.groups() as u64);
        FibStats::set(&self.stats.object_writes, self.objects.written);
        FibStats::set(&self.stats.object_deletes, self.objects.deleted);
    }

    /// Writes one prefix as it wants now.
    fn write(&mut self, p: &Prefix, view: &KernelView) {
        let Some(r) = self.routes.get_mut(p) else {
            return;
        };
        r.queued = false;
        let (want_id, have) = (r.want, r.have);
        self.unresolved.remove(p);
        if want_id == have {
            return;
        }
        let installed_before = have != NONE && have != UNKNOWN;
        let target = match self.sets.get(want_id).cloned() {
            Some(w) => {
                let mut sent = Vec::new();
                let t = self
                    .objects
                    .target(&mut self.b, &mut self.seq, &mut sent, view, &w);
                self.sent
                    .extend(sent.into_iter().map(|(s, w)| (s, Sent::Object(w))));
                t.map(|t| (w, t))
            }
            None => None,
        };
        if installed_before {
            if let Some(w) = self.sets.get(have).cloned() {
                self.objects.release(&w);
            }
            self.sets.decref(have);
            self.stats
                .installed
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some((w, t)) = target {
            if self.conflicting(p, view) {
                self.set_have(p, NONE);
                return;
            }
            self.seq = self.seq.wrapping_add(1);
            let f = match &t {
                Target::Object(id) => Forward::Object(*id),
                Target::Hops(h) => Forward::Hops(h),
                Target::Blackhole => Forward::Blackhole,
                Target::Unreachable => Forward::Unreachable,
            };
            route::put_replace(&mut self.b, self.seq, 0, p, &self.key, &f);
            self.sent.push((self.seq, Sent::Route(*p, true)));
            self.objects.acquire(&w);
            self.sets.incref(want_id);
            self.set_have(p, want_id);
            FibStats::add(&self.stats.route_writes, 1);
            FibStats::add(&self.stats.installed, 1);
        } else {
            if have != NONE {
                self.seq = self.seq.wrapping_add(1);
                route::put_delete(&mut self.b, self.seq, 0, p, &self.key);
                self.sent.push((self.seq, Sent::Route(*p, false)));
                FibStats::add(&self.stats.route_deletes, 1);
            }
            self.set_have(p, NONE);
            if want_id == NONE {
                self.routes.remove(p);
            } else {
                self.unresolved.insert(*p);
            }
        }
        FibStats::set(&self.stats.unresolved, self.unresolved.len() as u64);
    }

    fn set_have(&mut self, p: &Prefix, have: u32) {
        if let Some(r) = self.routes.get_mut(p) {
            r.have = have;
        }
    }

    /// Whether another protocol holds the route we would replace (same table, prefix and
    /// metric): it is never touched.
    fn conflicting(&mut self, p: &Prefix, view: &KernelView) -> bool {
        let taken = view
            .tables
            .get(&self.cfg.table)
            .is_some_and(|t| t.has(p, self.cfg.metric));
        if taken {
            if self.conflicts.insert(*p) {
                tracing::warn!(prefix = ?p, table = self.cfg.table, metric = self.cfg.metric, "FIB: another protocol's route has our metric for this prefix; not replacing it");
            }
        } else {
            self.conflicts.remove(p);
        }
        FibStats::set(&self.stats.conflicts, self.conflicts.len() as u64);
        taken
    }

    /// Sends the batch and reads the kernel's answers to it.
    fn send(&mut self) {
        if self.b.is_empty() {
            return;
        }
        let messages = self.b.messages() as u64;
        let buf = self.b.finish().to_vec();
        self.b.clear();
        let result = self.sock.send(&buf);
        FibStats::add(&self.stats.messages, messages);
        FibStats::add(&self.stats.batches, 1);
        FibStats::set(
            &self.stats.last_flush_ms,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        );
        let sent: HashMap<u32, Sent> = std::mem::take(&mut self.sent).into_iter().collect();
        if let Err(e) = result {
            tracing::warn!("FIB: netlink send failed: {e}; the batch is written again");
            for (_, s) in sent {
                if let Sent::Route(p, _) = s {
                    self.refused(&p);
                }
            }
            return;
        }
        // The kernel ran every request before `send` returned: its answers are queued.
        // Refusals are logged once per batch and error, with a count: a cause that
        // refuses every route would otherwise log each of them on every retry.
        let mut refusals: Vec<(i32, u64, Prefix)> = Vec::new();
        loop {
            let errs: Vec<(i32, u32)> = match self.sock.recv(None) {
                Ok(Some(buf)) => Messages::new(buf)
                    .filter_map(|m| m.error())
                    .filter(|(e, _)| *e != 0)
                    .collect(),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("FIB: reading the kernel's answers: {e}");
                    break;
                }
            };
            for (errno, seq) in errs {
                let errno = -errno;
                match sent.get(&seq) {
                    // Deleting what is not there any more is done.
                    Some(Sent::Route(_, false)) if errno == libc::ESRCH => {}
                    Some(Sent::Object(Written::ObjectDeleted(_))) if errno == libc::ENOENT => {}
                    Some(Sent::Route(p, _)) => {
                        FibStats::add(&self.stats.errors, 1);
                        match refusals.iter_mut().find(|(e, _, _)| *e == errno) {
                            Some((_, n, _)) => *n += 1,
                            None => refusals.push((errno, 1, *p)),
                        }
                        self.refused(p);
                    }
                    Some(Sent::Object(w)) => {
                        FibStats::add(&self.stats.errors, 1);
                        tracing::warn!(object = ?w, error = %std::io::Error::from_raw_os_error(errno), "FIB: the kernel refused a nexthop object");
                        if let Written::Object(id) = w {
                            self.objects.failed(*id);
                        }
                    }
                    None => {}
                }
            }
        }
        for (errno, n, first) in refusals {
            tracing::warn!(
                routes = n,
                first = %first,
                error = %std::io::Error::from_raw_os_error(errno),
                "FIB: the kernel refused routes; retrying in {} s",
                RETRY_AFTER.as_secs()
            );
        }
    }

    /// A write the kernel refused: what it holds is unknown; tried again later.
    fn refused(&mut self, p: &Prefix) {
        let Some(r) = self.routes.get_mut(p) else {
            return;
        };
        let had = std::mem::replace(&mut r.have, UNKNOWN);
        r.failed = true;
        if had != NONE && had != UNKNOWN {
            if let Some(w) = self.sets.get(had).cloned() {
                self.objects.release(&w);
            }
            self.sets.decref(had);
            self.stats
                .installed
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        FibStats::add(&self.stats.failed, 1);
        self.retry.push_back((Instant::now() + RETRY_AFTER, *p));
    }

    fn snapshot(&self) -> Vec<FibEntry> {
        self.routes
            .iter()
            .filter_map(|(p, r)| {
                let want = self.sets.get(r.want)?.clone();
                let installed = r.have == r.want;
                Some(FibEntry {
                    prefix: *p,
                    target: match &want {
                        Want::Reject => Some(Target::Unreachable),
                        Want::Discard => Some(Target::Blackhole),
                        Want::Forward(_) => self.objects.group_of(&want).map(Target::Object),
                    },
                    want,
                    installed,
                })
            })
            .collect()
    }
}

/// Whether a route found in the kernel already forwards as `t` says.
fn same(t: &Target, k: &RouteMsg) -> bool {
    match t {
        Target::Object(id) => k.kind == RTN_UNICAST && k.next == RouteNext::Object(*id),
        Target::Hops(h) => {
            k.kind == RTN_UNICAST
                && match &k.next {
                    RouteNext::Via(one) => h.len() == 1 && h.first() == Some(one),
                    RouteNext::Multipath(m) => m.as_slice() == h.as_slice(),
                    _ => false,
                }
        }
        Target::Blackhole => k.kind == RTN_BLACKHOLE,
        Target::Unreachable => k.kind == RTN_UNREACHABLE,
    }
}
