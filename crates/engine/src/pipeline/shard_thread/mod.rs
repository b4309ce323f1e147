//! A shard thread: owns one [`Shard`], applies batches, decides best paths once per batch of
//! work, runs export per update group, and walks its table in bounded steps (peer down,
//! graceful-restart stale marking, table dumps, counting what each group advertises)
//! between messages. Questions ([`super::Query`], module `query`) are answered between the
//! same messages, from the table as decided; what is sent to every shard is applied in
//! module `broadcast`.

use super::give_back;
use super::lanes::blocking;
use super::stream::{Passed, Tap};
use super::update_thread::UpdateWorker;
use super::{ArrivalFlag, Arrivals};
use super::{
    Handover, Membership, PipelineConfig, RouteChunk, RouteQuery, ShardStats, ToShard, ToUpdate,
    BATCH, WALK_BUDGET, WITHDRAW,
};
use crate::telemetry::{register, QueueStats, Telemetry, ThreadKind};
mod broadcast;
mod dump;
mod query;

use query::Selected;

use dump::DumpWalk;
use ribshard_adjout::{Entry, GroupId, MemberId, Previous};
use ribshard_rib::{
    Change, ExportCache, ExportKinds, Exported, GroupSpec, PeerIndex, Position, Shard, Walk,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;
use tokio::sync::mpsc;

struct GroupState {
    spec: Arc<GroupSpec>,
    update_thread: usize,
    /// Shared by the groups whose specs differ only in name ([`ExportCaches`]).
    cache: Arc<Mutex<ExportCache>>,
    members: usize,
    advertised: Advertised,
    /// Members moved in from another spec whose dump from this shard has not ended: they
    /// may hold what an earlier spec exported, so a change that leaves a prefix exported
    /// by neither old nor new path withdraws it anyway (harmless to the others).
    moving_in: usize,
}

impl GroupState {
    /// A group new to the shard: what it advertises is counted by a walk.
    fn new(m: &Membership, caches: &mut ExportCaches) -> GroupState {
        GroupState {
            spec: m.spec.clone(),
            update_thread: m.update_thread,
            cache: caches.for_spec(&m.spec),
            members: 0,
            advertised: Advertised::counting(),
            moving_in: 0,
        }
    }
}

/// The export caches of a shard's groups, one per way of exporting: groups whose specs differ
/// only in their configured name (a reflector's clients in several groups) export every set
/// alike, and a cache each cost hundreds of MB on rr (ten client groups, a million sets).
/// Each is of the pipeline's [`ribshard_rib::ExportKind`] for the spec, so the shards share
/// the results they keep on the sets.
struct ExportCaches {
    by_spec: HashMap<GroupSpec, Weak<Mutex<ExportCache>>>,
    kinds: Arc<ExportKinds>,
}

impl ExportCaches {
    fn new(kinds: Arc<ExportKinds>) -> ExportCaches {
        ExportCaches {
            by_spec: HashMap::new(),
            kinds,
        }
    }

    fn for_spec(&mut self, spec: &GroupSpec) -> Arc<Mutex<ExportCache>> {
        let key = spec.without_name();
        if let Some(c) = self.by_spec.get(&key).and_then(Weak::upgrade) {
            return c;
        }
        // Those of groups gone are dropped with them; their entries go here.
        self.by_spec.retain(|_, c| c.strong_count() > 0);
        let kind = self.kinds.for_spec(spec);
        let c = Arc::new(Mutex::new(ExportCache::of_kind(kind)));
        self.by_spec.insert(key, Arc::downgrade(&c));
        c
    }
}

/// One lock a batch, never contended: the shard thread alone uses its caches.
fn locked(c: &Mutex<ExportCache>) -> std::sync::MutexGuard<'_, ExportCache> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a group advertises from this shard, kept as best paths change. A group new to the
/// shard (or every group after a re-shard) is counted by a walk in bounded steps; until it
/// ends, a change counts only where the walk has been (the walk counts the rest as it finds
/// it).
#[derive(Default)]
struct Advertised {
    /// Where the counting walk goes on; `None` once done.
    walk: Option<Position>,
    prefixes: [u64; 2],
    by_source: HashMap<PeerIndex, [u64; 2]>,
}

impl Advertised {
    fn counting() -> Advertised {
        Advertised {
            walk: Some(Position::START),
            ..Advertised::default()
        }
    }
    /// Whether a change at `at` is already counted (the walk has been there).
    fn covers(&self, at: Position) -> bool {
        self.walk.is_none_or(|w| at < w)
    }
    /// `n` more prefixes from `source` advertised.
    fn add_many(&mut self, source: PeerIndex, family: usize, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(c) = self.prefixes.get_mut(family) {
            *c += n;
        }
        if let Some(c) = self.by_source.entry(source).or_default().get_mut(family) {
            *c += n;
        }
    }
    fn add(&mut self, source: PeerIndex, family: usize, on: bool) {
        let step = |n: &mut u64| *n = if on { *n + 1 } else { n.saturating_sub(1) };
        if let Some(n) = self.prefixes.get_mut(family) {
            step(n);
        }
        if let Some(n) = self.by_source.entry(source).or_default().get_mut(family) {
            step(n);
        }
    }
}

/// How often a tick may sweep the export caches.
const CACHE_SWEEP: std::time::Duration = std::time::Duration::from_secs(10);

enum Out {
    /// The update threads, with their queues' accounting.
    Threads(Vec<mpsc::Sender<ToUpdate>>, Vec<Arc<QueueStats>>),
    /// Update threading off: this shard runs the groups.
    Inline(Box<UpdateWorker>),
}

pub(super) struct ShardWorker {
    index: usize,
    shard: Shard,
    groups: BTreeMap<GroupId, GroupState>,
    caches: ExportCaches,
    walks: VecDeque<Walk>,
    dumps: VecDeque<DumpWalk>,
    out: Out,
    /// Messages handled since changes were last drained.
    since_drain: usize,
    /// When the export caches were last swept on a tick.
    last_sweep: std::time::Instant,
    stats: ShardStats,
    telemetry: Arc<Telemetry>,
    /// When the batches applied since the last drain were received.
    received: Vec<Instant>,
    /// Prefixes a walk's last scan selected beyond the chunk it answered.
    selected: Option<Selected>,
    /// Walk questions (`show route`), answered when the shard has nothing to route, or one
    /// every [`QUERY_WAIT`] while routing keeps it busy: show commands never slow routing
    /// by more than a chunk now and then, and still make progress under sustained churn.
    deferred: VecDeque<(RouteQuery, tokio::sync::oneshot::Sender<RouteChunk>)>,
    last_answer: Instant,
    /// When a walk question last cost a scan of the table ([`query::SCAN_WAIT`]).
    last_scan: Instant,
    /// How busy routing kept the shard: wall time spent on messages in the window since
    /// `load_window`, and whether the last window was mostly routing ([`LOADED_SHARE`]).
    /// A shard waiting for its next batch while converging leaves its core to the update
    /// threads and sessions, which need it more than a show command does.
    load_window: Instant,
    load_routing: std::time::Duration,
    loaded: bool,
    /// The size of the last chunk rendered, and a little more: the next one's buffer.
    rendered_hint: usize,
    /// Set while the pipeline defers advertising ([`super::UpdateDelay`]: at start, and once
    /// every neighbor has gone down); read as each member comes up.
    deferring: Arc<AtomicBool>,
    /// The members that came up while advertising was deferred, held back until
    /// [`Broadcast::AdvertiseNow`]: the shard decides meanwhile but exports to none of them.
    held_members: Vec<Held>,
    /// Convergence markers (peer, token) that came while advertising was deferred: the
    /// groups get that neighbor's routes in the table dumps that follow the deferral, so the
    /// markers go on only once those dumps are done (`show bgp convergence` would otherwise
    /// count the neighbor's routes sent the moment its End-of-RIB came).
    held_markers: Vec<(PeerIndex, u64)>,
    /// The oldest receipt among the routes decided while no one was told (the start-up
    /// deferral): the dumps after it measure "receipt to UPDATE written" from there.
    unreported_since: Option<Instant>,
    /// Members moving to another group ([`Broadcast::Regroup`]), each move as (from, to)
    /// in order: the group they come from goes on getting their changes until their dump
    /// in the new group starts.
    moving: HashMap<MemberId, Vec<(GroupId, GroupId)>>,
    /// The Adj-RIB-In's paths when the first of the peer-down walks under way began.
    paths_before_downs: Option<usize>,
    /// The subscribers of the change stream besides update-group export
    /// ([`super::stream`]), each one's part in this shard.
    taps: Vec<Box<dyn Tap>>,
    /// Raised while messages wait in this shard's queue: routes still arriving
    /// ([`super::Arrivals`]).
    queued: ArrivalFlag,
}

/// A member held back by the start-up deferral, and the dump it will get (token 0, the
/// first, unless it moved groups meanwhile).
type Held = (Membership, u64, Option<Previous>);

/// How long a walk question waits at most while routing keeps the shard busy.
const QUERY_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// The window over which a shard measures how much of its time routing takes.
const LOAD_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

/// Above this share of a window spent routing, a shard is converging: walk questions get
/// one chunk every [`QUERY_WAIT`] rather than every moment the queue is empty. A trickle of
/// churn stays far below it, so steady-state show commands run at full speed.
const LOADED_SHARE: f64 = 0.25;

impl ShardWorker {
    /// A shard worker; without update threads it runs the update groups itself, in
    /// `inline` (or a new worker).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        index: usize,
        config: PipelineConfig,
        updates: (Vec<mpsc::Sender<ToUpdate>>, Vec<Arc<QueueStats>>),
        inline: Option<UpdateWorker>,
        telemetry: Arc<Telemetry>,
        arrivals: &Arc<Arrivals>,
        deferring: Arc<AtomicBool>,
        kinds: Arc<ExportKinds>,
        mut taps: Vec<Box<dyn Tap>>,
    ) -> ShardWorker {
        if !deferring.load(Ordering::Acquire) {
            // No deferral to wait for: the stream's subscribers may act on what comes.
            for t in taps.iter_mut() {
                t.advertising();
            }
        }
        let out = if updates.0.is_empty() {
            Out::Inline(Box::new(inline.unwrap_or_else(|| {
                UpdateWorker::new(
                    0,
                    1,
                    config.write_queue,
                    None,
                    telemetry.clone(),
                    arrivals.clone(),
                )
            })))
        } else {
            Out::Threads(updates.0, updates.1)
        };
        ShardWorker {
            index,
            shard: Shard::new(config.options),
            groups: BTreeMap::new(),
            caches: ExportCaches::new(kinds),
            walks: VecDeque::new(),
            dumps: VecDeque::new(),
            out,
            since_drain: 0,
            last_sweep: std::time::Instant::now(),
            stats: ShardStats {
                shard: index,
                ..ShardStats::default()
            },
            telemetry,
            received: Vec::new(),
            selected: None,
            deferred: VecDeque::new(),
            last_answer: Instant::now(),
            last_scan: Instant::now(),
            load_window: Instant::now(),
            load_routing: std::time::Duration::ZERO,
            loaded: false,
            rendered_hint: 0,
            deferring,
            held_members: Vec::new(),
            held_markers: Vec::new(),
            unreported_since: None,
            paths_before_downs: None,
            moving: HashMap::new(),
            taps,
            queued: arrivals.flag(),
        }
    }

    /// Takes over a table and the update groups it exports to (a re-shard, or a new
    /// pipeline with an empty table), each group on the update thread `place` gives. What
    /// each group advertises from the table is counted again.
    pub(super) fn resume(
        &mut self,
        table: Shard,
        groups: &[(GroupId, Arc<GroupSpec>, usize)],
        place: &dyn Fn(GroupId) -> usize,
    ) {
        self.shard = table;
        let post_policy = self.taps.iter().any(|t| t.wants_post_policy());
        self.shard.record_post_policy(post_policy);
        for (id, spec, members) in groups {
            self.groups.insert(
                *id,
                GroupState {
                    spec: spec.clone(),
                    update_thread: place(*id),
                    cache: self.caches.for_spec(spec),
                    members: *members,
                    advertised: Advertised::counting(),
                    moving_in: 0,
                },
            );
        }
    }

    /// Hands the table over (a re-shard). Walks over one peer's paths are finished first:
    /// they change the table, and the prefixes they touched move with their mark to be
    /// decided. Table dumps are dropped: their members get new ones from the new shards.
    fn surrender(mut self) -> Handover {
        while let Some(mut w) = self.walks.pop_front() {
            while !self.shard.walk_step(&mut w, usize::MAX) {}
        }
        // What the walks changed goes to these taps: the new shards' start from the table.
        self.hand_post_policy();
        Handover {
            table: Some(self.shard),
            groups: self
                .groups
                .iter()
                .map(|(id, g)| (*id, g.spec.clone(), g.members))
                .collect(),
            worker: match self.out {
                Out::Inline(w) => Some(*w),
                Out::Threads(..) => None,
            },
        }
    }

    fn send_update(&mut self, t: usize, msg: ToUpdate) {
        match &mut self.out {
            Out::Threads(senders, queues) => {
                if let Some((s, q)) = senders.get(t).zip(queues.get(t)) {
                    // Blocks while the update thread is behind: backpressure to the sessions.
                    blocking(s, q, msg);
                }
            }
            Out::Inline(w) => {
                for (group, req) in w.handle(msg) {
                    self.start_dump(group, req.member, req.token, req.previous);
                }
            }
        }
    }

    /// Without update threads: encodes the changes held for groups whose receivers can take
    /// them (`all`: for every group).
    fn pack_inline(&mut self, all: bool) {
        if let Out::Inline(w) = &mut self.out {
            w.pack_held(all);
        }
    }

    /// Without update threads: changes are held for a busy receiver.
    fn holding(&self) -> bool {
        matches!(&self.out, Out::Inline(w) if w.holding())
    }

    /// Walks that routing waits for: a peer's paths, table dumps.
    fn busy(&self) -> bool {
        !self.walks.is_empty() || !self.dumps.is_empty()
    }

    /// Work to do while the queue is empty: the walks, questions waiting (unless routing
    /// has kept the shard loaded: then they wait for [`QUERY_WAIT`]), and counting what
    /// groups advertise.
    fn has_work(&self) -> bool {
        self.busy()
            || (!self.deferred.is_empty() && !self.loaded)
            || self.groups.values().any(|g| g.advertised.walk.is_some())
    }

    /// Adds routing time to the load window, closing the window when it has run its length.
    /// A shard that waits with questions pending is woken by the pipeline's tick
    /// (200 ms), which closes a quiet window and so lets the questions through.
    /// A window already a tenth gone and mostly routing counts at once, so a burst is
    /// protected from its start rather than from the end of the first window.
    fn note_load(&mut self, routing: std::time::Duration) {
        self.load_routing += routing;
        let elapsed = self.load_window.elapsed();
        let busy = self.load_routing.as_secs_f64() > LOADED_SHARE * elapsed.as_secs_f64();
        if elapsed >= LOAD_WINDOW {
            self.loaded = busy;
            self.load_window = Instant::now();
            self.load_routing = std::time::Duration::ZERO;
        } else if busy && elapsed >= LOAD_WINDOW / 10 {
            self.loaded = true;
        }
    }

    /// Handles a message; false to stop.
    fn handle(&mut self, msg: ToShard) -> bool {
        match msg {
            ToShard::All(b) => self.broadcast(b),
            ToShard::Routes(batch) => {
                self.finish_walks_of(batch.peer);
                self.stats.batches += 1;
                self.received.extend(batch.received);
                let peer = batch.peer;
                for (i, n) in batch.ops {
                    if i == WITHDRAW {
                        self.shard.withdraw_one(peer, n);
                    } else if let Some(a) = batch.attrs.get(i as usize) {
                        self.shard.announce_one(peer, a, n);
                    }
                }
            }
            ToShard::Dump {
                group,
                member,
                token,
                previous,
            } => self.start_dump(group, member, token, previous),
            ToShard::Update(m) => {
                if let Out::Inline(w) = &mut self.out {
                    for (group, req) in w.handle(*m) {
                        self.start_dump(group, req.member, req.token, req.previous);
                    }
                }
            }
            ToShard::Query(q) => self.answer(q),
            ToShard::Barrier(ack) => {
                while self.busy() {
                    self.step();
                }
                self.drain();
                self.pack_inline(true);
                for t in self.taps.iter_mut() {
                    t.barrier(Passed::new(ack.clone()));
                }
                match &mut self.out {
                    Out::Threads(senders, _) => {
                        for s in senders.iter() {
                            let _ = s.blocking_send(ToUpdate::Barrier(ack.clone()));
                        }
                    }
                    Out::Inline(_) => {
                        let _ = ack.send(());
                    }
                }
            }
            ToShard::Tick => {
                if let Out::Inline(w) = &mut self.out {
                    for (group, req) in w.handle(ToUpdate::Tick) {
                        self.start_dump(group, req.member, req.token, req.previous);
                    }
                }
                // Growth sweeps the caches as it goes; this is for memory after a table
                // shrinks, so it need not run often: a sweep walks a whole cache (a million
                // entries with a million attribute sets), and every tick cost 5% of the CPU.
                if self.last_sweep.elapsed() >= CACHE_SWEEP {
                    self.last_sweep = std::time::Instant::now();
                    for c in self.caches.by_spec.values().filter_map(Weak::upgrade) {
                        let mut cache = locked(&c);
                        if cache.len() > 4096 {
                            cache.sweep();
                        }
                    }
                }
            }
            // Taken by `run` before it gets here.
            ToShard::Surrender(_) | ToShard::Stop => return false,
        }
        true
    }

    fn add_member(&mut self, m: Membership, token: u64, previous: Option<Previous>) {
        let caches = &mut self.caches;
        self.groups
            .entry(m.group)
            .or_insert_with(|| GroupState::new(&m, caches))
            .members += 1;
        self.start_dump(m.group, m.member, token, previous);
    }

    fn remove_member(&mut self, group: GroupId) {
        if let Some(g) = self.groups.get_mut(&group) {
            g.members = g.members.saturating_sub(1);
            if g.members == 0 {
                self.groups.remove(&group);
            }
        }
    }

    /// The last walk is done: if peers that went down took many paths with them, their
    /// memory goes back to the system.
    fn walks_done(&mut self) {
        let Some(before) = self.paths_before_downs.take() else {
            return;
        };
        if before.saturating_sub(self.shard.paths()) >= give_back::AFTER_PATHS {
            give_back::give_back();
        }
    }

    /// One bounded step of walking: peer walks first, then dumps, then counting.
    fn step(&mut self) {
        if let Some(mut w) = self.walks.pop_front() {
            if !self.shard.walk_step(&mut w, WALK_BUDGET) {
                self.walks.push_front(w);
            } else if self.walks.is_empty() {
                self.walks_done();
            }
            return;
        }
        if self.dump_step() {
            self.release_markers();
        } else {
            self.count_step();
        }
    }

    /// One step of counting what a group advertises (the first group still counting).
    fn count_step(&mut self) {
        let Some(g) = self
            .groups
            .values_mut()
            .find(|g| g.advertised.walk.is_some())
        else {
            return;
        };
        let Some(from) = g.advertised.walk else {
            return;
        };
        let shard = &self.shard;
        let GroupState {
            spec,
            cache,
            advertised,
            ..
        } = g;
        let mut cache = locked(cache);
        advertised.walk = shard.count_step(from, WALK_BUDGET, |prefix, best| {
            let src = shard.peer(best.peer);
            if cache
                .get(spec, &src, best.peer, &best.attrs, &prefix)
                .is_some()
            {
                advertised.add(best.peer, prefix.family().index(), true);
            }
        });
    }

    /// Hands the taps that monitor it the post-policy Adj-RIB-In's changes recorded.
    fn hand_post_policy(&mut self) {
        let changes = self.shard.drain_post_policy();
        if !changes.is_empty() {
            for t in self.taps.iter_mut().filter(|t| t.wants_post_policy()) {
                t.post_policy(&changes);
            }
        }
    }

    /// Decides every touched prefix once and sends each group what changed for it.
    fn drain(&mut self) {
        self.since_drain = 0;
        if self.shard.pending() == 0 {
            self.observe_decided();
            return;
        }
        if self.groups.is_empty() && self.dumps.is_empty() && self.taps.is_empty() {
            // No one to tell (the start-up deferral): decided, not reported.
            self.stats.changes += self.shard.decide_unreported() as u64;
            let received = self.observe_decided();
            self.unreported(received);
            return;
        }
        self.hand_post_policy();
        let changes = self.shard.drain_changes();
        self.stats.changes += changes.iter().filter(|c| c.best_changed).count() as u64;
        for t in self.taps.iter_mut() {
            t.decided(&self.shard, &changes);
        }
        for d in self.dumps.iter_mut() {
            d.changed(changes.iter().filter(|c| c.best_changed).map(|c| c.prefix));
        }
        let received = self.observe_decided();
        if self.groups.is_empty() {
            self.unreported(received);
            return;
        }
        let mut out: Vec<(usize, GroupId, Vec<Entry>)> = Vec::new();
        for (id, g) in self.groups.iter_mut() {
            let entries = group_entries(&self.shard, g, &changes);
            // With Add-Path a live change is one path's, not the prefix's: the walk still
            // sends the prefix.
            for d in self.dumps.iter_mut().filter(|d| d.group() == *id) {
                d.sent_live(entries.iter().filter(|e| e.path_id == 0).map(|e| e.prefix));
            }
            if entries.len() <= BATCH {
                if !entries.is_empty() {
                    out.push((g.update_thread, *id, entries));
                }
                continue;
            }
            // At most BATCH entries a message, so the update thread's bounded queue also
            // bounds the memory in flight: a drain after a burst holds up to 16 batches of
            // changes, and a queue of such messages could hold hundreds of MiB while the
            // update thread was behind.
            let mut rest = entries.into_iter();
            loop {
                let chunk: Vec<Entry> = rest.by_ref().take(BATCH).collect();
                if chunk.is_empty() {
                    break;
                }
                out.push((g.update_thread, *id, chunk));
            }
        }
        let shard = self.index;
        for (t, group, entries) in out {
            self.send_update(
                t,
                ToUpdate::Live {
                    shard,
                    group,
                    entries,
                    received,
                },
            );
        }
    }

    /// Routes received at `received` were decided while advertising is held: the dumps
    /// that follow the deferral carry them first.
    fn unreported(&mut self, received: Option<Instant>) {
        if let (Some(t), true) = (received, self.advertising_held()) {
            self.unreported_since = Some(self.unreported_since.map_or(t, |u| u.min(t)));
        }
    }

    /// The batches applied since the last drain are decided: their latencies go into the
    /// histogram; returns the oldest receipt, which the update threads measure from.
    fn observe_decided(&mut self) -> Option<Instant> {
        let oldest = self.received.iter().min().copied();
        for t in self.received.drain(..) {
            self.telemetry.decided.observe(t.elapsed());
        }
        oldest
    }
}

/// What one group must be told of a set of best-path changes: exported old and new compared,
/// so a change that does not alter what the group advertises sends nothing. What the group
/// advertises is counted as it changes.
fn group_entries(shard: &Shard, g: &mut GroupState, changes: &[Change]) -> Vec<Entry> {
    let mut entries = Vec::new();
    let GroupState {
        spec,
        cache,
        advertised,
        moving_in,
        ..
    } = g;
    let mut cache = locked(cache);
    let mut export = |p: Option<&ribshard_rib::Path>, prefix| -> Option<Arc<Exported>> {
        let p = p?;
        let src = shard.peer(p.peer);
        cache.get(spec, &src, p.peer, &p.attrs, prefix)
    };
    // An equal-cost set alone (`multipath`) is not advertised: only the best path is.
    for c in changes.iter() {
        let f = c.prefix.family();
        let several = sends_several(shard, spec, f);
        if let (Some(select), Some(a)) = (several, &c.add_paths) {
            add_path_entries(select, a, c.prefix, &mut entries, |p| {
                export(Some(p), &c.prefix)
            });
        }
        if !c.best_changed {
            continue;
        }
        let old = export(c.old.as_ref(), &c.prefix);
        let new = export(c.best.as_ref(), &c.prefix);
        if advertised.covers(c.position) {
            if let (Some(_), Some(p)) = (&old, &c.old) {
                advertised.add(p.peer, f.index(), false);
            }
            if let (Some(_), Some(p)) = (&new, &c.best) {
                advertised.add(p.peer, f.index(), true);
            }
        }
        // The source matters too: a path is never sent back to the peer it came from.
        let same_source = c.old.as_ref().map(|p| p.peer) == c.best.as_ref().map(|p| p.peer);
        let same = match (&old, &new) {
            (None, None) => *moving_in == 0 || c.old.is_none(),
            (Some(a), Some(b)) => same_source && (Arc::ptr_eq(a, b) || a == b),
            _ => false,
        };
        if !same && several.is_none() {
            entries.push(Entry {
                prefix: c.prefix,
                source: c.best.as_ref().map_or(u32::MAX, |b| b.peer),
                exported: new,
                path_id: 0,
                before: match (&old, &c.old) {
                    (Some(_), Some(p)) => p.peer,
                    _ => ribshard_adjout::NOTHING_BEFORE,
                },
            });
        }
    }
    entries
}

/// Which paths per prefix a group sends in a family, when it sends several (Add-Path send
/// negotiated and configured, and the shard keeping the lists: a selection configured by a
/// reload that the running shards do not keep sends the best path alone until a restart).
pub(super) fn sends_several(
    shard: &Shard,
    spec: &GroupSpec,
    f: ribshard_wire::Family,
) -> Option<ribshard_rib::AddPathSelect> {
    spec.add_path
        .filter(|_| shard.keeps_add_paths() && spec.params.add_path.get(f.index()) == Some(&true))
}

/// What a group that sends several paths per prefix (Add-Path) is told of one prefix's
/// change ([`ribshard_rib::AddPathChange::for_group`]), exported: a path export refuses is
/// withdrawn if the group held it.
fn add_path_entries(
    select: ribshard_rib::AddPathSelect,
    change: &ribshard_rib::AddPathChange,
    prefix: ribshard_wire::Prefix,
    entries: &mut Vec<Entry>,
    mut export: impl FnMut(&ribshard_rib::Path) -> Option<Arc<Exported>>,
) {
    let diff = change.for_group(select);
    for id in diff.withdrawn {
        entries.push(Entry::withdraw_path((prefix, id)));
    }
    for (o, path, held) in diff.sent {
        match export(path) {
            Some(e) => entries.push(Entry::announce(prefix, e, path.peer, o.path_id)),
            None if held => entries.push(Entry::withdraw_path((prefix, o.path_id))),
            None => {}
        }
    }
}

pub(super) fn run(mut w: ShardWorker, mut rx: mpsc::Receiver<ToShard>, queue: Arc<QueueStats>) {
    let work = register(ThreadKind::Shard, w.index);
    loop {
        let msg = if w.has_work() || w.holding() {
            match rx.try_recv() {
                Ok(m) => Some(m),
                Err(mpsc::error::TryRecvError::Empty) => None,
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
        } else {
            match rx.blocking_recv() {
                Some(m) => Some(m),
                None => return,
            }
        };
        let began = Instant::now();
        match msg {
            Some(ToShard::Surrender(reply)) => {
                let _ = reply.send(w.surrender());
                return;
            }
            Some(m) => {
                // Routes in hand count as arriving until decided and handed on: an update
                // thread that saw no input busy in between would send what it holds while
                // this shard's last decisions are still on their way to it.
                w.queued.set(true);
                w.shard.set_clock(ribshard_rib::clock::now());
                if !w.handle(m) {
                    w.drain();
                    return;
                }
                w.since_drain += 1;
                let depth = rx.len();
                w.stats.queue_high_water = w.stats.queue_high_water.max(depth);
                queue.depth_seen(depth + 1);
                // Decide once per burst: changes to a prefix queued twice are decided once.
                if depth == 0 || w.since_drain >= 16 {
                    w.drain();
                }
                w.queued.set(depth > 0);
                if depth == 0 {
                    w.pack_inline(false);
                }
                w.note_load(began.elapsed());
                if w.overdue() {
                    w.answer_deferred();
                }
                let took = began.elapsed();
                w.stats.messages += 1;
                w.stats.longest = w.stats.longest.max(took);
                work.item(took);
            }
            None => {
                w.queued.set(false);
                // Nothing to route: walks routing waits for, then questions, then counting.
                let routing = w.busy();
                if !routing && !w.deferred.is_empty() && !w.loaded {
                    w.answer_deferred();
                } else {
                    w.step();
                }
                w.drain();
                w.pack_inline(false);
                let took = began.elapsed();
                // Dumps to new members are routing; answering and counting are not.
                w.note_load(if routing {
                    took
                } else {
                    std::time::Duration::ZERO
                });
                work.item(took);
                if !w.has_work() && w.holding() {
                    // Only changes waiting for a busy receiver: look at its socket soon.
                    std::thread::sleep(super::update_thread::HOLD_POLL);
                }
            }
        }
    }
}

/// CPU time this thread has used, from the OS.
pub(super) fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use ribshard_rib::GroupKind;

    fn spec(name: &str, next_hop_self: bool) -> GroupSpec {
        GroupSpec {
            long_lived: false,
            name: name.into(),
            kind: GroupKind::Internal {
                client_cluster: Some(1),
            },
            local_as: 65000,
            global_as: None,
            peer_as: 65000,
            router_id: std::net::Ipv4Addr::new(192, 0, 2, 1),
            next_hop_self,
            local_v4: None,
            local_v6: None,
            export: Arc::new(ribshard_policy::Chain::accept_all()),
            params: Default::default(),
            families: [true, true],
            role: None,
            add_path: None,
        }
    }

    /// Groups that differ only in name share an export cache; any other difference, or a
    /// cache whose groups are all gone, gives a new one.
    #[test]
    fn groups_alike_but_for_name_share_an_export_cache() {
        let kinds = Arc::new(ExportKinds::default());
        let mut caches = ExportCaches::new(kinds.clone());
        let a = caches.for_spec(&spec("clients-a", false));
        let b = caches.for_spec(&spec("clients-b", false));
        assert!(Arc::ptr_eq(&a, &b));
        let c = caches.for_spec(&spec("clients-a", true));
        assert!(!Arc::ptr_eq(&a, &c));
        drop((a, b));
        let d = caches.for_spec(&spec("clients-a", false));
        assert_eq!(Arc::strong_count(&d), 1, "a new cache");
        assert_eq!(caches.by_spec.len(), 2, "the dropped one's entry removed");
        // Another shard's caches are of the same kinds.
        let mut other = ExportCaches::new(kinds.clone());
        let _e = other.for_spec(&spec("clients-b", true));
        assert_eq!(
            kinds.len(),
            2,
            "a kind per spec but for name, across shards"
        );
    }
}
