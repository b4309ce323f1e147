//! What the running pipeline measures of itself, for operators (`show thread cpu`, `show
//! work-queues`, `show bgp convergence`, metrics): every thread's work items, every queue's
//! traffic and blocked time, and the convergence latencies of routes and neighbors.
//!
//! Everything here is written by the thread doing the work with relaxed atomics (a few per
//! batch of routes, never per route) and read by whoever asks, without stopping anyone.

use ribshard_adjout::GroupId;
use ribshard_rib::PeerIndex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

/// Upper bounds of the latency histograms' buckets, in seconds.
pub const BUCKETS: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// A latency histogram with the buckets of [`BUCKETS`] (and one above them).
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

/// A histogram as read at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations per bucket of [`BUCKETS`], not cumulative; the last is above them all.
    pub counts: Vec<u64>,
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The upper bound of the bucket holding the `q` quantile (0 to 1); `None` when empty,
    /// infinity past the last bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(BUCKETS.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        Some(f64::INFINITY)
    }
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(BUCKETS.len());
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_ns.fetch_add(
            d.as_nanos().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum_seconds: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// What kind of work a thread does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadKind {
    /// A tokio worker: session I/O (framing, FSM, parsing).
    Session,
    /// A RIB shard.
    Shard,
    /// An update thread (update groups).
    Update,
    /// The pipeline's periodic wake-ups.
    Ticker,
    /// The daemon's main thread: signals, reloads, commands.
    Main,
    /// The management API and its sampler (`rs-mgmt`, at nice +10).
    Management,
    /// The kernel watcher (`rs-kernel`): next-hop resolution's view of the kernel's tables.
    Kernel,
    /// The FIB writer (`rs-fib`).
    Fib,
    /// A source of routes that is not a session (`rs-originate`).
    Local,
    /// The BMP monitor (`rs-bmp`, at nice +10).
    Bmp,
}

impl ThreadKind {
    pub fn name(self) -> &'static str {
        match self {
            ThreadKind::Session => "session",
            ThreadKind::Shard => "shard",
            ThreadKind::Update => "update",
            ThreadKind::Ticker => "ticker",
            ThreadKind::Main => "main",
            ThreadKind::Management => "mgmt",
            ThreadKind::Kernel => "kernel",
            ThreadKind::Fib => "fib",
            ThreadKind::Local => "local",
            ThreadKind::Bmp => "bmp",
        }
    }
}

/// Lowers the calling thread's scheduling priority to nice `niceness` (Linux applies
/// PRIO_PROCESS with a thread id to that thread alone): for work that should yield the
/// CPUs to routing (the management API, monitoring) and catch up after.
pub fn lower_priority(niceness: i32) {
    // SAFETY: setpriority with this thread's own id; lowering one's own priority needs no
    // privilege, and a failure leaves the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, niceness);
    }
}

/// A thread's work: items done (messages for pipeline threads, wake-ups for session tasks)
/// and the longest one.
#[derive(Debug)]
pub struct WorkCounters {
    pub kind: ThreadKind,
    pub index: usize,
    /// The OS thread id (`gettid`), to find the thread's CPU time in /proc.
    pub tid: i32,
    items: AtomicU64,
    longest_ns: AtomicU64,
}

impl WorkCounters {
    /// One item of work that took `d`.
    #[inline]
    pub fn item(&self, d: Duration) {
        self.items.fetch_add(1, Ordering::Relaxed);
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        if ns > self.longest_ns.load(Ordering::Relaxed) {
            self.longest_ns.fetch_max(ns, Ordering::Relaxed);
        }
    }
}

/// A thread's work as read at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadWork {
    pub kind: ThreadKind,
    pub index: usize,
    pub tid: i32,
    pub items: u64,
    pub longest: Duration,
}

fn registry() -> &'static Mutex<Vec<Weak<WorkCounters>>> {
    static R: Mutex<Vec<Weak<WorkCounters>>> = Mutex::new(Vec::new());
    &R
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Registers the calling thread; it stays listed while the returned counters live.
pub fn register(kind: ThreadKind, index: usize) -> Arc<WorkCounters> {
    let w = Arc::new(WorkCounters {
        kind,
        index,
        tid: gettid(),
        items: AtomicU64::new(0),
        longest_ns: AtomicU64::new(0),
    });
    let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
    r.retain(|x| x.strong_count() > 0);
    r.push(Arc::downgrade(&w));
    w
}

/// Every registered thread that is still running.
pub fn threads() -> Vec<ThreadWork> {
    let r = registry().lock().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<ThreadWork> = r
        .iter()
        .filter_map(Weak::upgrade)
        .map(|w| ThreadWork {
            kind: w.kind,
            index: w.index,
            tid: w.tid,
            items: w.items.load(Ordering::Relaxed),
            longest: Duration::from_nanos(w.longest_ns.load(Ordering::Relaxed)),
        })
        .collect();
    out.sort_by_key(|t| (t.kind, t.index, t.tid));
    out
}

/// Counts one item of session work on the calling tokio worker (registering it on first
/// use, numbered in order of first use).
pub fn session_item(d: Duration) {
    thread_local! {
        static WORKER: Arc<WorkCounters> = {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            register(ThreadKind::Session, NEXT.fetch_add(1, Ordering::Relaxed))
        };
    }
    WORKER.with(|w| w.item(d));
}

/// One bounded queue between pipeline threads.
#[derive(Debug, Default)]
pub struct QueueStats {
    /// Messages put in.
    pub sends: AtomicU64,
    /// Time senders waited for room.
    pub blocked_ns: AtomicU64,
    /// The deepest it has been, in messages (kept by the receiver).
    pub high_water: AtomicUsize,
}

impl QueueStats {
    pub fn sent(&self) {
        self.sends.fetch_add(1, Ordering::Relaxed);
    }
    pub fn blocked(&self, since: Instant) {
        let ns = since.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        self.blocked_ns.fetch_add(ns, Ordering::Relaxed);
    }
    pub fn depth_seen(&self, depth: usize) {
        if depth > self.high_water.load(Ordering::Relaxed) {
            self.high_water.fetch_max(depth, Ordering::Relaxed);
        }
    }
}

/// How a neighbor's table got through the pipeline when its session came up.
#[derive(Clone, Debug, PartialEq)]
pub struct NeighborConvergence {
    pub established: SystemTime,
    /// From Established to the End-of-RIB of every negotiated family received.
    pub end_of_rib_received: Option<Duration>,
    /// Per update group: from that End-of-RIB to the group having encoded and queued for
    /// its members everything the neighbor sent before it.
    pub groups: BTreeMap<GroupId, Duration>,
    /// The groups that existed when the End-of-RIB went into the pipeline.
    pub groups_expected: usize,
    token: u64,
    eor_at: Option<Instant>,
}

/// The pipeline's convergence telemetry.
#[derive(Debug, Default)]
pub struct Telemetry {
    /// From an UPDATE's receipt (the first of a batch) to its best paths decided.
    pub decided: Histogram,
    /// Per update group: from an UPDATE's receipt to what it changed being encoded and
    /// queued for the group's members (the time that group's peers wait).
    written: Mutex<BTreeMap<GroupId, (String, Arc<Histogram>)>>,
    neighbors: Mutex<HashMap<PeerIndex, NeighborConvergence>>,
    next_token: AtomicU64,
}

impl Telemetry {
    /// The histogram of an update group, created on first use.
    pub fn written(&self, group: GroupId, name: &str) -> Arc<Histogram> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        w.entry(group)
            .or_insert_with(|| (name.to_string(), Arc::new(Histogram::default())))
            .1
            .clone()
    }

    /// Every update group's histogram, by group id: (group name, histogram).
    pub fn written_snapshot(&self) -> Vec<(GroupId, String, HistogramSnapshot)> {
        let w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        w.iter()
            .map(|(id, (name, h))| (*id, name.clone(), h.snapshot()))
            .collect()
    }

    /// A neighbor's session reached Established.
    pub fn established(&self, peer: PeerIndex) {
        let mut n = self.neighbors.lock().unwrap_or_else(|e| e.into_inner());
        n.insert(
            peer,
            NeighborConvergence {
                established: SystemTime::now(),
                end_of_rib_received: None,
                groups: BTreeMap::new(),
                groups_expected: 0,
                token: 0,
                eor_at: Some(Instant::now()),
            },
        );
    }

    /// The neighbor's End-of-RIB arrived for every family; returns the token of the marker
    /// to send through the pipeline behind its routes, or `None` if it was counted already.
    pub fn end_of_rib(&self, peer: PeerIndex, groups: usize) -> Option<u64> {
        let mut n = self.neighbors.lock().unwrap_or_else(|e| e.into_inner());
        let c = n.get_mut(&peer)?;
        if c.end_of_rib_received.is_some() {
            return None;
        }
        let now = Instant::now();
        c.end_of_rib_received = c.eor_at.map(|t| now - t);
        c.eor_at = Some(now);
        c.groups_expected = groups;
        let token = self.next_token.fetch_add(1, Ordering::Relaxed) + 1;
        c.token = token;
        Some(token)
    }

    /// An update group has sent everything the marker `token` of `peer` followed.
    pub fn marker_reached(&self, peer: PeerIndex, token: u64, group: GroupId) {
        let mut n = self.neighbors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = n.get_mut(&peer).filter(|c| c.token == token) {
            if let Some(t) = c.eor_at {
                c.groups.entry(group).or_insert_with(|| t.elapsed());
            }
        }
    }

    pub fn neighbors(&self) -> Vec<(PeerIndex, NeighborConvergence)> {
        let n = self.neighbors.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = n.iter().map(|(p, c)| (*p, c.clone())).collect();
        v.sort_by_key(|(p, _)| *p);
        v
    }
}
