//! The monitor: one thread that turns what the sessions received and what the shards
//! decided into BMP messages for every station, and brings each station up to date when it
//! connects (`dump`).
//!
//! Inputs, in one order per source:
//! - **the sessions' tap** ([`Monitor::received`]): Up (Peer Up), each UPDATE as received
//!   (pre-policy Route Monitoring, forwarded whole), End-of-RIB, Down (Peer Down). An item
//!   comes only once the routes it brought are in the shards' queues
//!   (`engine::session::deliver`), which is what makes a dump and the live feed agree;
//! - **the shards' change stream** ([`ShardFeed`]): best-path changes, sent as Loc-RIB
//!   Route Monitoring (RFC 9069), and, when a station asks for it, every path's change as
//!   import policy left it, sent as post-policy Route Monitoring (the L flag); no copy of
//!   either table is kept here;
//! - **the stations' connections** and the **dumps' walks**.
//!
//! Statistics Reports go on a timer (`stats`). Nothing here waits for a station.

use crate::adj_rib_out::{Early, SentFeed};
use crate::dump::{walk, Dump, DumpPart};
use crate::message::{self, info, initiation, peer_down, peer_up, PeerHeader};
use crate::routes::{end_of_rib, params, Packer};
use crate::station::{self, Link, Outbox, StationConfig, StationError};
use bytes::Bytes;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::{Passed, Pipeline, SentTap, ShardStats, Subscriber, Tap};
use ribshard_engine::{DownReason, Inbound, Negotiated, Opened, SessionStatus};
use ribshard_rib::{AdjRibInChange, Change, PeerIndex, RouteAttrs, Shard};
use ribshard_wire::{Capability, Family, Open, Prefix};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

/// What the monitor is told at start.
#[derive(Clone, Debug)]
pub struct BmpConfig {
    pub stations: Vec<StationConfig>,
    /// Initiation's sysName and sysDescr (RFC 7854 section 4.4).
    pub sys_name: String,
    pub sys_descr: String,
    pub local_as: u32,
    pub router_id: Ipv4Addr,
}

/// Inputs queued for the monitor at most: shards and sessions wait when it is full. It runs
/// at a lower priority than routing, so while the CPUs are busy converging it falls behind
/// by design. Each input is a batch (a shard's decided changes, 32 octets each, or the
/// UPDATEs the sessions' tap held), so what waits is about what a convergence brings in (20
/// MiB more at the peak for the two full tables); stations never make it wait.
const INPUT_QUEUE: usize = 4096;

/// A station as the operator would see it ([`Monitor::stations`]; no show command reads it
/// yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StationStatus {
    pub name: String,
    pub address: std::net::SocketAddr,
    pub state: StationState,
    pub ribs: station::Ribs,
    /// Connections made, and how the last one ended.
    pub connections: u64,
    pub last_error: Option<StationError>,
    /// Octets written to the station, and octets waiting now.
    pub written: u64,
    pub waiting: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StationState {
    Connecting,
    /// Connected, being sent its dump.
    Dumping,
    Up,
}

impl std::fmt::Display for StationState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StationState::Connecting => "Connecting",
            StationState::Dumping => "Dumping",
            StationState::Up => "Up",
        })
    }
}

pub(crate) enum Input {
    Session(Vec<Inbound>),
    /// Best-path changes, and what they add to the Loc-RIB's count per family.
    LocRib(Vec<(Prefix, Option<Arc<RouteAttrs>>)>, [i64; 2]),
    /// Paths as import policy left them, in the order they changed.
    PostPolicy(Vec<AdjRibInChange>),
    /// A neighbor's End-of-RIB on its session `epoch` reached one of `shards` shards,
    /// after the paths before it.
    PostPolicyEndOfRib {
        peer: usize,
        family: Family,
        epoch: u32,
        shards: usize,
    },
    /// UPDATEs queued for a member's connection.
    Sent(MemberId, Bytes),
    Barrier(Passed),
    Pipeline(Arc<Pipeline>),
    Stop(std::sync::mpsc::Sender<()>),
}

/// The BMP monitor: started once with the daemon when `[bmp]` names a station.
pub struct Monitor {
    tx: mpsc::Sender<Input>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// What the stations want of the shards' stream: (Loc-RIB, post-policy Adj-RIB-In).
    from_shards: (bool, bool),
    /// Whether a station wants the Adj-RIB-Out.
    adj_rib_out: bool,
    status: Arc<Mutex<Vec<StationStatus>>>,
}

impl Monitor {
    pub fn start(config: BmpConfig) -> std::io::Result<Arc<Monitor>> {
        let (tx, rx) = mpsc::channel(INPUT_QUEUE);
        let from_shards = (
            config.stations.iter().any(|s| s.ribs.loc_rib),
            config.stations.iter().any(|s| s.ribs.post_policy),
        );
        let adj_rib_out = config.stations.iter().any(|s| s.ribs.adj_rib_out);
        let status = Arc::new(Mutex::new(
            config
                .stations
                .iter()
                .map(|s| StationStatus {
                    name: s.name.clone(),
                    address: s.address,
                    state: StationState::Connecting,
                    ribs: s.ribs,
                    connections: 0,
                    last_error: None,
                    written: 0,
                    waiting: 0,
                })
                .collect(),
        ));
        let shown = status.clone();
        let thread = std::thread::Builder::new()
            .name("rs-bmp".into())
            .spawn(move || {
                let _work = ribshard_engine::telemetry::register(
                    ribshard_engine::telemetry::ThreadKind::Bmp,
                    0,
                );
                // Monitoring yields the CPUs to routing, and catches up after.
                ribshard_engine::telemetry::lower_priority(10);
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        warn!("BMP: cannot start its runtime: {e}");
                        return;
                    }
                };
                rt.block_on(run(config, rx, shown));
            })?;
        Ok(Arc::new(Monitor {
            tx,
            thread: Mutex::new(Some(thread)),
            from_shards,
            adj_rib_out,
            status,
        }))
    }

    /// The Loc-RIB and post-policy feeds, to register with the pipeline; `None` when no
    /// station wants either.
    pub fn subscriber(&self) -> Option<Arc<dyn Subscriber>> {
        let (loc_rib, post_policy) = self.from_shards;
        (loc_rib || post_policy).then(|| {
            Arc::new(ShardFeed {
                tx: self.tx.clone(),
                loc_rib,
                post_policy,
            }) as Arc<dyn Subscriber>
        })
    }

    /// The Adj-RIB-Out feed, to give the pipeline; `None` when no station wants it.
    pub fn sent_tap(&self) -> Option<Arc<dyn SentTap>> {
        self.adj_rib_out.then(|| {
            Arc::new(SentFeed {
                tx: self.tx.clone(),
            }) as Arc<dyn SentTap>
        })
    }

    /// The pipeline, for the dumps.
    pub fn attach(&self, pipeline: Arc<Pipeline>) {
        let _ = self.tx.try_send(Input::Pipeline(pipeline));
    }

    /// What the sessions handed the tap, in order; waits for room (backpressure on the
    /// sessions, as the tap has).
    pub async fn received(&self, m: Vec<Inbound>) {
        if !m.is_empty() {
            let _ = self.tx.send(Input::Session(m)).await;
        }
    }

    /// Every station as it stands.
    pub fn stations(&self) -> Vec<StationStatus> {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Tells every connected station the monitoring ends (Termination, administratively
    /// closed), writes what waits for about two seconds at most, and ends the thread.
    pub fn stop(&self) {
        let (done, wait) = std::sync::mpsc::channel();
        if self.tx.blocking_send(Input::Stop(done)).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(3));
        }
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// The feeds from the shards: a part in each shard thread copies each best-path change
/// (Loc-RIB) and each path's post-policy change, as the stations want.
struct ShardFeed {
    tx: mpsc::Sender<Input>,
    loc_rib: bool,
    post_policy: bool,
}

impl Subscriber for ShardFeed {
    fn name(&self) -> &'static str {
        "bmp"
    }

    fn tap(&self, _shard: usize, shards: usize) -> Box<dyn Tap> {
        Box::new(ShardFeedTap {
            tx: self.tx.clone(),
            loc_rib: self.loc_rib,
            post_policy: self.post_policy,
            shards,
        })
    }
}

struct ShardFeedTap {
    tx: mpsc::Sender<Input>,
    loc_rib: bool,
    post_policy: bool,
    /// How many shards have a part of the feed: each reports an End-of-RIB.
    shards: usize,
}

impl Tap for ShardFeedTap {
    fn wants_post_policy(&self) -> bool {
        self.post_policy
    }

    fn post_policy(&mut self, changes: &[AdjRibInChange]) {
        let _ = self.tx.blocking_send(Input::PostPolicy(changes.to_vec()));
    }

    fn end_of_rib(&mut self, peer: PeerIndex, family: Family, epoch: u32) {
        let _ = self.tx.blocking_send(Input::PostPolicyEndOfRib {
            peer: peer as usize,
            family,
            epoch,
            shards: self.shards,
        });
    }

    fn decided(&mut self, _table: &Shard, changes: &[Change]) {
        if !self.loc_rib {
            return;
        }
        let mut delta = [0i64; 2];
        let batch: Vec<_> = changes
            .iter()
            .filter(|c| c.best_changed && !c.paths_only)
            .map(|c| {
                delta[c.prefix.family().index()] +=
                    i64::from(c.best.is_some()) - i64::from(c.old.is_some());
                (c.prefix, c.best.as_ref().map(|p| p.attrs.clone()))
            })
            .collect();
        if !batch.is_empty() {
            let _ = self.tx.blocking_send(Input::LocRib(batch, delta));
        }
    }

    fn barrier(&mut self, done: Passed) {
        // The monitor takes inputs in order: at the barrier it has everything before.
        if let Err(mpsc::error::SendError(Input::Barrier(done))) =
            self.tx.blocking_send(Input::Barrier(done))
        {
            done.pass();
        }
    }
}

/// A neighbor up now, as the stations are told.
pub(crate) struct Peer {
    pub(crate) header: PeerHeader,
    /// Its Peer Up message, kept for stations that connect later.
    up: Bytes,
    pub(crate) families: Vec<Family>,
    pub(crate) add_path: [bool; 2],
    pub(crate) four_octet_as: bool,
    /// Which of the neighbor's sessions (its membership's epoch).
    pub(crate) epoch: u32,
    pub(crate) status: watch::Receiver<SessionStatus>,
}

pub(crate) struct Station {
    pub(crate) config: StationConfig,
    pub(crate) outbox: Arc<Outbox>,
    pub(crate) link: LinkState,
    /// Counts connections: a walk's parts for an older one are dropped.
    pub(crate) generation: u64,
    pub(crate) next_stats: Option<Instant>,
}

pub(crate) enum LinkState {
    Down,
    Dumping(Box<Dump>),
    Up,
}

/// Which feed a message belongs to: a station gets the feeds it asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    /// Peer Up and Down: for a station monitoring a neighbor's table.
    Peers,
    PrePolicy,
    PostPolicy,
    LocRib,
    AdjRibOut,
    /// Route Mirroring of errored UPDATEs.
    Mirroring,
}

impl Feed {
    fn wanted_by(self, ribs: station::Ribs) -> bool {
        match self {
            Feed::Peers => ribs.per_neighbor(),
            Feed::PrePolicy => ribs.pre_policy,
            Feed::PostPolicy => ribs.post_policy,
            Feed::LocRib => ribs.loc_rib,
            Feed::AdjRibOut => ribs.adj_rib_out,
            Feed::Mirroring => ribs.mirroring,
        }
    }
}

pub(crate) struct State {
    config: BmpConfig,
    pub(crate) peers: BTreeMap<usize, Peer>,
    /// Prefixes in the Loc-RIB per family, from the changes (for statistics).
    pub(crate) loc_rib_counts: [i64; 2],
    pub(crate) loc_header: PeerHeader,
    loc_up: Bytes,
    pub(crate) stations: Vec<Station>,
    pub(crate) pipeline: Option<Arc<Pipeline>>,
    dumps: mpsc::Sender<(usize, u64, DumpPart)>,
    /// The shards' counts asked for the statistics ([`State::statistics_due`]), and whether
    /// an answer is awaited.
    pub(crate) counts: mpsc::Sender<Vec<ShardStats>>,
    pub(crate) counting: bool,
    shown: Arc<Mutex<Vec<StationStatus>>>,
    pub(crate) early: Early,
    /// Loc-RIB and post-policy changes not yet packed.
    loc_rib_pending: Pending<(Prefix, Option<Arc<RouteAttrs>>)>,
    post_policy_pending: Pending<AdjRibInChange>,
    /// Per neighbor, family and session, the shards that have reported its End-of-RIB so
    /// far.
    post_policy_ends: HashMap<(usize, Family, u32), usize>,
}

/// Changes from the shards waiting to be packed. A shard reports its decisions every few
/// thousand prefixes, and with several shards each batch holds a fraction of a set's
/// prefixes: packed batch by batch, a full table went out in twice the messages of one
/// shard. Waiting up to [`PACK_WINDOW`] packs every set the shards reported meanwhile in one
/// UPDATE and sends a prefix that changed twice once, as a speaker's update queue does.
struct Pending<T> {
    changes: Vec<T>,
    /// More than one batch taken: a prefix may appear more than once.
    merged: bool,
    since: Option<tokio::time::Instant>,
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Pending {
            changes: Vec::new(),
            merged: false,
            since: None,
        }
    }
}

impl<T> Pending<T> {
    /// Takes a shard's batch; true when it is time to pack without waiting longer.
    fn take_in(&mut self, changes: Vec<T>) -> bool {
        if self.changes.is_empty() {
            self.changes = changes;
            self.since = Some(tokio::time::Instant::now());
        } else {
            self.changes.extend(changes);
            self.merged = true;
        }
        self.changes.len() >= PACK_BATCH
    }

    fn due(&self) -> Option<tokio::time::Instant> {
        self.since.map(|t| t + PACK_WINDOW)
    }
}

/// How long a change may wait for others to be packed with it: short beside a station's
/// view of a convergence, long beside a shard's reporting interval.
const PACK_WINDOW: Duration = Duration::from_millis(50);

/// Changes packed in one round at most, waited for or not.
const PACK_BATCH: usize = 1 << 16;

/// Keeps each prefix's last change only: a prefix decided again in a later batch is sent as
/// it ended up, since a packer's withdrawals and announcements are not ordered.
fn keep_last<T>(changes: &mut Vec<(Prefix, T)>) {
    let mut seen = hashbrown::HashSet::with_capacity(changes.len());
    let mut last: Vec<bool> = changes.iter().rev().map(|(p, _)| seen.insert(*p)).collect();
    changes.retain(|_| last.pop().unwrap_or(true));
}

async fn run(
    config: BmpConfig,
    mut rx: mpsc::Receiver<Input>,
    shown: Arc<Mutex<Vec<StationStatus>>>,
) {
    let (links_tx, mut links) = mpsc::channel(16);
    let (dumps, mut dump_rx) = mpsc::channel(4);
    let (counts, mut counts_rx) = mpsc::channel(1);
    let mut tasks = Vec::new();
    let mut stations = Vec::new();
    for (id, s) in config.stations.iter().enumerate() {
        let outbox = Arc::new(Outbox::default());
        tasks.push(tokio::spawn(station::run(
            id,
            s.clone(),
            outbox.clone(),
            links_tx.clone(),
        )));
        stations.push(Station {
            config: s.clone(),
            outbox,
            link: LinkState::Down,
            generation: 0,
            next_stats: None,
        });
    }
    drop(links_tx);
    let loc_header = PeerHeader::loc_rib(config.local_as, config.router_id);
    let loc_up = loc_rib_peer_up(&loc_header, config.local_as, config.router_id);
    let mut st = State {
        config,
        peers: BTreeMap::new(),
        loc_rib_counts: [0; 2],
        loc_header,
        loc_up,
        stations,
        pipeline: None,
        dumps,
        counts,
        counting: false,
        shown,
        early: Early::default(),
        loc_rib_pending: Pending::default(),
        post_policy_pending: Pending::default(),
        post_policy_ends: HashMap::new(),
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let pack_at = match (st.loc_rib_pending.due(), st.post_policy_pending.due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tokio::select! {
            biased;
            Some((id, link)) = links.recv() => {
                // What was decided before a station's dump starts goes out before it.
                st.pack_all();
                st.link(id, link)
            }
            Some((id, generation, part)) = dump_rx.recv() => {
                st.pack_all();
                st.dump_part(id, generation, part)
            }
            _ = tokio::time::sleep_until(pack_at.unwrap_or_else(tokio::time::Instant::now)),
                if pack_at.is_some() => st.pack_due(),
            m = rx.recv() => match m {
                None => break,
                Some(Input::Stop(done)) => {
                    st.pack_all();
                    st.stop().await;
                    let _ = done.send(());
                    break;
                }
                Some(m) => st.input(m),
            },
            Some(shards) = counts_rx.recv() => st.statistics(&shards),
            _ = tick.tick() => st.statistics_due(),
        }
    }
    for t in tasks {
        t.abort();
    }
}

impl State {
    fn input(&mut self, m: Input) {
        match m {
            Input::Session(v) => {
                // A neighbor's post-policy paths go out under the session they were
                // learned in: before its Peer Down, and before a new session's Peer Up.
                // Checked only when paths wait: the batch is mostly UPDATEs.
                if !self.post_policy_pending.changes.is_empty()
                    && v.iter()
                        .any(|s| matches!(s, Inbound::Up { .. } | Inbound::Down { .. }))
                {
                    self.pack_post_policy();
                }
                for s in v {
                    self.session(s);
                }
            }
            Input::LocRib(changes, delta) => self.loc_rib_changes(changes, delta),
            Input::PostPolicy(changes) => self.post_policy_changes(changes),
            Input::PostPolicyEndOfRib {
                peer,
                family,
                epoch,
                shards,
            } => self.post_policy_end_of_rib((peer, family, epoch), shards),
            Input::Sent(member, updates) => self.sent(member, updates),
            Input::Barrier(done) => {
                // Everything before the barrier on its way to the stations.
                self.pack_all();
                done.pass()
            }
            Input::Pipeline(p) => self.pipeline = Some(p),
            Input::Stop(done) => {
                let _ = done.send(());
            }
        }
    }

    fn session(&mut self, m: Inbound) {
        match m {
            Inbound::Up {
                peer,
                negotiated,
                opened,
            } => {
                let p = new_peer(&negotiated, *opened);
                let (up, epoch) = (p.up.clone(), p.epoch);
                self.peers.insert(peer, p);
                self.send(Feed::Peers, vec![up]);
                self.sent_before_up(peer, epoch);
            }
            Inbound::Update {
                peer,
                message,
                params,
            } => {
                let Some(p) = self.peers.get(&peer) else {
                    return;
                };
                let mut header = p.header.now();
                if !params.four_octet_as {
                    header = header.with_flags(message::peer_flags::A);
                }
                // The UPDATE as received, not copied: the header goes before it.
                let before = message::route_monitoring_header(&header, message.len());
                self.send(Feed::PrePolicy, vec![before, message]);
            }
            Inbound::EndOfRib { peer, family } => {
                let Some(p) = self.peers.get(&peer) else {
                    return;
                };
                let eor = end_of_rib(&p.header.now(), family);
                self.send(Feed::PrePolicy, vec![eor]);
            }
            Inbound::Down { peer, reason, .. } => {
                let Some(p) = self.peers.remove(&peer) else {
                    return;
                };
                self.sent_session_down(peer, p.epoch);
                let header = p.header.now();
                let msg = match reason {
                    DownReason::LocalNotification(n) => {
                        peer_down(&header, message::down::LOCAL_NOTIFICATION, &n.encode())
                    }
                    // No FSM event is kept for it: 0 (RFC 7854 section 4.9).
                    DownReason::LocalClosed => {
                        peer_down(&header, message::down::LOCAL_NO_NOTIFICATION, &[0, 0])
                    }
                    DownReason::RemoteNotification(n) => {
                        peer_down(&header, message::down::REMOTE_NOTIFICATION, &n.encode())
                    }
                    DownReason::RemoteClosed => {
                        peer_down(&header, message::down::REMOTE_NO_NOTIFICATION, &[])
                    }
                };
                self.send(Feed::Peers, vec![msg]);
            }
            Inbound::Errored { peer, message } => {
                let Some(p) = self.peers.get(&peer) else {
                    return;
                };
                // As received: the A flag for a 2-octet session, as in Route Monitoring.
                let mut header = p.header.now();
                if !p.four_octet_as {
                    header = header.with_flags(message::peer_flags::A);
                }
                let m = message::route_mirroring_errored(&header, &message);
                self.send(Feed::Mirroring, vec![m]);
            }
            Inbound::RouteRefresh { .. } => {}
        }
    }

    /// Whether a station that takes `feed` is connected (a station that connects later gets
    /// the table in its dump).
    pub(crate) fn connected(&self, feed: Feed) -> bool {
        self.stations
            .iter()
            .any(|s| feed.wanted_by(s.config.ribs) && !matches!(s.link, LinkState::Down))
    }

    /// Sends a feed's messages to every station that takes it: now, or after its dump.
    pub(crate) fn send(&mut self, feed: Feed, msgs: Vec<Bytes>) {
        if msgs.is_empty() {
            return;
        }
        for s in &mut self.stations {
            if !feed.wanted_by(s.config.ribs) {
                continue;
            }
            match &mut s.link {
                LinkState::Down => {}
                LinkState::Up => {
                    if !s.outbox.push(msgs.iter().cloned(), s.config.buffer) {
                        s.link = LinkState::Down;
                    }
                }
                LinkState::Dumping(d) => {
                    if !d.hold(&msgs, s.config.buffer) {
                        // The same bound as the outbox: the station cannot take it in time.
                        s.outbox.overflow(d.held_octets);
                        s.link = LinkState::Down;
                    }
                }
            }
        }
    }

    /// Counts a shard's batch of best-path changes and keeps it to be packed with the
    /// others of [`PACK_WINDOW`].
    fn loc_rib_changes(
        &mut self,
        changes: Vec<(Prefix, Option<Arc<RouteAttrs>>)>,
        delta: [i64; 2],
    ) {
        self.loc_rib_counts[0] += delta[0];
        self.loc_rib_counts[1] += delta[1];
        if !self.connected(Feed::LocRib) {
            return;
        }
        if self.loc_rib_pending.take_in(changes) {
            self.pack_loc_rib();
        }
    }

    /// Everything waiting, packed now.
    fn pack_all(&mut self) {
        self.pack_loc_rib();
        self.pack_post_policy();
    }

    /// What has waited its [`PACK_WINDOW`], packed.
    fn pack_due(&mut self) {
        let now = tokio::time::Instant::now();
        if self.loc_rib_pending.due().is_some_and(|t| t <= now) {
            self.pack_loc_rib();
        }
        if self.post_policy_pending.due().is_some_and(|t| t <= now) {
            self.pack_post_policy();
        }
    }

    /// Route Monitoring for the Loc-RIB changes waiting, each prefix as it ended up.
    fn pack_loc_rib(&mut self) {
        let Pending {
            mut changes,
            merged,
            ..
        } = std::mem::take(&mut self.loc_rib_pending);
        if changes.is_empty() || !self.connected(Feed::LocRib) {
            return;
        }
        if merged {
            keep_last(&mut changes);
        }
        let mut packer = Packer::default();
        for (prefix, best) in &changes {
            match best {
                Some(attrs) => packer.announce(*prefix, None, attrs),
                None => packer.withdraw(*prefix, None),
            }
        }
        let (msgs, failed) = packer.finish(&self.loc_header.now(), params([false; 2]));
        if failed > 0 {
            warn!(
                sets = failed,
                "BMP: Loc-RIB routes with attributes too large for any UPDATE left out"
            );
        }
        self.send(Feed::LocRib, msgs);
    }

    /// Keeps a shard's batch of post-policy changes to be packed with the others of
    /// [`PACK_WINDOW`] (flushed before any Peer Up or Down, [`State::input`]).
    fn post_policy_changes(&mut self, changes: Vec<AdjRibInChange>) {
        if !self.connected(Feed::PostPolicy) {
            return;
        }
        if self.post_policy_pending.take_in(changes) {
            self.pack_post_policy();
        }
    }

    /// A neighbor's End-of-RIB in the post-policy Adj-RIB-In, once every shard handed on
    /// the paths before it: after them (packed now), with the L flag; not for a session
    /// that has ended.
    fn post_policy_end_of_rib(
        &mut self,
        (peer, family, epoch): (usize, Family, u32),
        shards: usize,
    ) {
        let seen = self
            .post_policy_ends
            .entry((peer, family, epoch))
            .or_insert(0);
        *seen += 1;
        if *seen < shards {
            return;
        }
        self.post_policy_ends.remove(&(peer, family, epoch));
        self.pack_post_policy();
        let Some(p) = self.peers.get(&peer).filter(|p| p.epoch == epoch) else {
            return;
        };
        let header = p.header.with_flags(message::peer_flags::L).now();
        self.send(Feed::PostPolicy, vec![end_of_rib(&header, family)]);
    }

    /// Post-policy Route Monitoring (RFC 7854 section 4.2, the L flag): each path's last
    /// state among the changes waiting, per neighbor. A path of a neighbor that is down now
    /// is left out: its Peer Down told the stations it is gone, and a later session's Peer
    /// Up comes with no routes (its paths' changes come after those of the one before).
    fn pack_post_policy(&mut self) {
        let changes = std::mem::take(&mut self.post_policy_pending).changes;
        if changes.is_empty() || !self.connected(Feed::PostPolicy) {
            return;
        }
        // A path changed twice is sent as it ended up: the first change is kept out of the
        // UPDATEs, whose withdrawals and announcements are not ordered.
        let mut seen = hashbrown::HashSet::with_capacity(changes.len());
        let last: Vec<bool> = changes
            .iter()
            .rev()
            .map(|c| seen.insert((c.peer, c.prefix, c.path_id)))
            .collect();
        let mut packers: BTreeMap<usize, Packer> = BTreeMap::new();
        for (c, last) in changes.iter().zip(last.into_iter().rev()) {
            let peer = c.peer as usize;
            let Some(p) = self.peers.get(&peer).filter(|_| last) else {
                continue;
            };
            let id = p.add_path[c.prefix.family().index()].then_some(c.path_id);
            let packer = packers.entry(peer).or_default();
            match &c.attrs {
                Some(attrs) => packer.announce(c.prefix, id, attrs),
                None => packer.withdraw(c.prefix, id),
            }
        }
        let mut msgs = Vec::new();
        let mut failed = 0;
        for (peer, mut packer) in packers {
            if let Some(p) = self.peers.get(&peer) {
                let header = p.header.with_flags(message::peer_flags::L).now();
                let (m, f) = packer.finish(&header, params(p.add_path));
                msgs.extend(m);
                failed += f;
            }
        }
        if failed > 0 {
            warn!(
                sets = failed,
                "BMP: post-policy routes with attributes too large for any UPDATE left out"
            );
        }
        self.send(Feed::PostPolicy, msgs);
    }

    fn link(&mut self, id: usize, link: Link) {
        let Some(s) = self.stations.get_mut(id) else {
            return;
        };
        match link {
            Link::Connected => {
                s.generation += 1;
                let ribs = s.config.ribs;
                let mut msgs = vec![initiation(&self.config.sys_name, &self.config.sys_descr)];
                if ribs.per_neighbor() {
                    msgs.extend(self.peers.values().map(|p| p.up.clone()));
                }
                if ribs.loc_rib {
                    msgs.push(self.loc_up.clone());
                }
                s.outbox.push(msgs, usize::MAX);
                let dump = Dump::new(ribs, &self.peers);
                let pace = (s.outbox.clone(), s.config.buffer);
                walk(
                    &self.pipeline,
                    &self.dumps,
                    (id, s.generation),
                    (ribs, dump.groups()),
                    pace,
                );
                s.link = LinkState::Dumping(Box::new(dump));
                s.next_stats = s.config.statistics_interval.map(|i| Instant::now() + i);
                info!(station = %s.config.name, "BMP station: sending the dump");
            }
            Link::Down(e) => {
                s.link = LinkState::Down;
                let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(v) = shown.get_mut(id) {
                    v.last_error = Some(e);
                }
            }
        }
        self.show();
    }

    /// Publishes the stations' states for `show bmp`.
    pub(crate) fn show(&self) {
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        for (s, v) in self.stations.iter().zip(shown.iter_mut()) {
            let state = match s.link {
                LinkState::Down => StationState::Connecting,
                LinkState::Dumping(_) => StationState::Dumping,
                LinkState::Up => StationState::Up,
            };
            v.state = state;
            v.connections = s.generation;
            v.written = s.outbox.written();
            v.waiting = s.outbox.waiting();
        }
    }

    /// Termination to every connected station, then its connection ends once written.
    async fn stop(&mut self) {
        let bye = message::termination(
            message::term::ADMINISTRATIVELY_CLOSED,
            "ribshard is shutting down",
        );
        for s in &mut self.stations {
            if !matches!(s.link, LinkState::Down) {
                s.outbox.push([bye.clone()], usize::MAX);
            }
            s.outbox.stop();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && self.stations.iter().any(|s| s.outbox.waiting() > 0) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Give the connection tasks a moment to write the last batch and close.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A neighbor that came up, with its Peer Up message.
fn new_peer(n: &Negotiated, o: Opened) -> Peer {
    let canonical = |a: IpAddr| a.to_canonical();
    let address = o
        .remote
        .map(|a| canonical(a.ip()))
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let header = PeerHeader::global(address, n.peer_as, n.peer_id);
    let local = o
        .local
        .map(|a| (canonical(a.ip()), a.port()))
        .unwrap_or((IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    let remote_port = o.remote.map_or(0, |a| a.port());
    let up = peer_up(&header.now(), local, remote_port, &o.sent, &o.received, &[]);
    Peer {
        header,
        up,
        families: n.families.clone(),
        add_path: n.add_path_receive,
        four_octet_as: n.four_octet_as,
        epoch: o.epoch,
        status: o.status,
    }
}

/// The Loc-RIB's Peer Up (RFC 9069 section 5.3): a made-up OPEN with 4-octet AS numbers
/// and both families, sent as both OPENs, and the table's name.
fn loc_rib_peer_up(header: &PeerHeader, local_as: u32, router_id: Ipv4Addr) -> Bytes {
    let open = Open::new(
        local_as,
        0,
        router_id,
        vec![
            Capability::Multiprotocol {
                afi: Family::Ipv4Unicast.afi(),
                safi: Family::Ipv4Unicast.safi(),
            },
            Capability::Multiprotocol {
                afi: Family::Ipv6Unicast.afi(),
                safi: Family::Ipv6Unicast.safi(),
            },
            Capability::FourOctetAs(local_as),
        ],
    )
    .encode();
    peer_up(
        header,
        (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        0,
        &open,
        &open,
        &[(info::TABLE_NAME, b"loc-rib")],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_changed_in_two_batches_keeps_its_last_change() {
        let p = |s: &str| -> Prefix {
            let (a, l) = s.split_once('/').unwrap();
            Prefix::v4(a.parse().unwrap(), l.parse().unwrap()).unwrap()
        };
        let mut v = vec![
            (p("10.0.0.0/8"), 1),
            (p("192.0.2.0/24"), 2),
            (p("10.0.0.0/8"), 3),
            (p("198.51.100.0/24"), 4),
            (p("192.0.2.0/24"), 5),
        ];
        keep_last(&mut v);
        assert_eq!(
            v,
            vec![
                (p("10.0.0.0/8"), 3),
                (p("198.51.100.0/24"), 4),
                (p("192.0.2.0/24"), 5)
            ]
        );
    }
}
