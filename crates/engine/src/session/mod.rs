//! Session I/O: one tokio task per neighbor, listeners that hand accepted connections to
//! them, and the bounded channel that carries received UPDATEs to the pipeline.

mod conn;

use crate::negotiate::{build_open, negotiate, Negotiated, PeerSettings};
use crate::pipeline::{Batcher, Joined, Pipeline, Routed, Target};
use crate::socket::{self, ConnectOptions};
use bytes::Bytes;
use conn::{Conn, ReadError};
use ribshard_adjout::MemberId;
use ribshard_fsm::{Action, Config as FsmConfig, Event, Fsm, State};
use ribshard_rib::attrs::next_hop_of;
use ribshard_rib::shard::families;
use ribshard_rib::{GroupKind, GroupSpec, Ingress, Interner, LoopChecks, PeerInfo};
use ribshard_wire::message::{MessageType, HEADER_LEN, MAX_MESSAGE_LEN};
use ribshard_wire::notification::{cease, code, open as open_sub, Notification};
use ribshard_wire::{
    decode, keepalive, parse_update, Family, Message, Nlri, Open, RouteRefresh, SessionParams,
};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedRwLockReadGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// What sessions hand to the pipeline.
#[derive(Debug)]
pub enum Inbound {
    /// The session reached Established.
    Up { peer: usize, negotiated: Negotiated },
    /// A received UPDATE, validated (its RFC 7606 outcome is recomputed cheaply by the
    /// receiver, which owns the routes): the whole message and how to decode it.
    Update {
        peer: usize,
        message: Bytes,
        params: SessionParams,
    },
    /// A ROUTE-REFRESH request (RFC 2918) for a family.
    RouteRefresh { peer: usize, afi: u16, safi: u8 },
    /// The session left Established. Without `stale`, every route learned from the peer
    /// goes now; with it (RFC 4724 section 4.2, the peer is restarting gracefully), routes of
    /// those families are kept as stale for the restart time, until the peer's End-of-RIB.
    Down {
        peer: usize,
        stale: Option<crate::negotiate::GracefulRestart>,
    },
    /// End-of-RIB from the peer (RFC 4724 section 2): stale routes of the family left now go.
    EndOfRib { peer: usize, family: Family },
}

/// What operators see of a session.
#[derive(Clone, Debug)]
pub struct SessionStatus {
    pub state: State,
    pub negotiated: Option<Negotiated>,
    /// Prefixes (with path ids) in the Adj-RIB-In, per [`Family::index`].
    pub prefixes: [usize; 2],
    pub updates_received: u64,
    pub established_transitions: u64,
    /// The last NOTIFICATION received, or the reason the session last went down.
    pub last_error: Option<String>,
    pub write_queue_blocks: u64,
}

impl Default for SessionStatus {
    fn default() -> Self {
        SessionStatus {
            state: State::Idle,
            negotiated: None,
            prefixes: [0; 2],
            updates_received: 0,
            established_transitions: 0,
            last_error: None,
            write_queue_blocks: 0,
        }
    }
}

/// Where the listener sends a connection: a session, and the local address it expects.
type Route = (mpsc::Sender<Control>, Option<IpAddr>);

enum Control {
    Start,
    Stop(Stop),
    Incoming(TcpStream),
}

/// How a session is stopped.
enum Stop {
    /// Cease / Administrative Shutdown, with an RFC 9003 message.
    Shutdown(String),
    /// Cease with this subcode (RFC 4486), no data.
    Cease(u8),
}

pub struct SessionHandle {
    pub settings: PeerSettings,
    tx: mpsc::Sender<Control>,
    status: watch::Receiver<SessionStatus>,
    task: JoinHandle<()>,
}

impl SessionHandle {
    pub fn status(&self) -> SessionStatus {
        self.status.borrow().clone()
    }
    /// Waits until the session's status satisfies `f`, or the timeout passes.
    pub async fn wait_for(&self, timeout: Duration, f: impl Fn(&SessionStatus) -> bool) -> bool {
        let mut rx = self.status.clone();
        tokio::time::timeout(timeout, async move {
            loop {
                if f(&rx.borrow_and_update()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .is_ok()
    }
}

/// All sessions of a running daemon, and their listeners.
pub struct Sessions {
    /// Every session started, by peer index (the pipeline's too); a removed neighbor's
    /// session stays here, ended, so indexes never move or get reused.
    pub peers: Vec<SessionHandle>,
    listeners: Vec<JoinHandle<()>>,
    /// The listening sockets, for the MD5 keys and GTSM of neighbors added later.
    sockets: Vec<(SocketAddr, Arc<tokio::net::TcpListener>)>,
    /// Where the listeners send a connection: neighbor address -> sessions.
    routes: Routes,
    inbound: Option<mpsc::Sender<Inbound>>,
    pipeline: Option<Arc<Pipeline>>,
}

/// Neighbor address -> (peer index, session, the local address it expects, if configured).
type Routes = Arc<std::sync::RwLock<HashMap<IpAddr, Vec<(usize, Route)>>>>;

impl Sessions {
    /// Binds the listeners and starts every session; what they receive goes to `inbound`.
    pub async fn start(
        peers: Vec<PeerSettings>,
        listen: &[SocketAddr],
        inbound: mpsc::Sender<Inbound>,
    ) -> io::Result<Sessions> {
        Sessions::start_with(peers, listen, Some(inbound), None).await
    }

    /// Binds the listeners and starts every session, feeding the pipeline (routes, peers up
    /// and down) and, if given, the tap (every event, for dumps and tests).
    pub async fn start_with(
        peers: Vec<PeerSettings>,
        listen: &[SocketAddr],
        inbound: Option<mpsc::Sender<Inbound>>,
        pipeline: Option<Arc<Pipeline>>,
    ) -> io::Result<Sessions> {
        let mut sessions = Sessions {
            peers: Vec::with_capacity(peers.len()),
            listeners: Vec::new(),
            sockets: Vec::new(),
            routes: Arc::default(),
            inbound,
            pipeline,
        };
        for addr in listen {
            let l = socket::listen(*addr)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
            info!(%addr, "listening");
            let l = Arc::new(l);
            sessions.sockets.push((*addr, l.clone()));
            let routes = sessions.routes.clone();
            sessions.listeners.push(tokio::spawn(async move {
                loop {
                    let Ok((stream, from)) = l.accept().await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    let local = stream.local_addr().ok().map(|a| a.ip());
                    let target = routes
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&from.ip())
                        .and_then(|v| {
                            v.iter()
                                .find(|(_, (_, want))| want.is_none() || *want == local)
                                .map(|(_, (tx, _))| tx.clone())
                        });
                    match target {
                        Some(tx) => {
                            let _ = tx.send(Control::Incoming(stream)).await;
                        }
                        None => {
                            info!(%from, "connection from an unconfigured address refused");
                            tokio::spawn(reject(
                                stream,
                                Notification::new(code::CEASE, cease::CONNECTION_REJECTED, vec![]),
                            ));
                        }
                    }
                }
            }));
        }
        for s in peers {
            sessions.add(s).await?;
        }
        Ok(sessions)
    }

    /// Starts a session for a neighbor (at start, or added by a configuration reload): its
    /// MD5 key and GTSM go on the listeners of its family, and incoming connections from its
    /// address reach it. Returns its peer index.
    pub async fn add(&mut self, s: PeerSettings) -> io::Result<usize> {
        for (addr, l) in &self.sockets {
            if addr.is_ipv4() != s.address.is_ipv4() {
                continue;
            }
            // GTSM: the SYN-ACK leaves with the listener's TTL, and a GTSM neighbor drops
            // anything below 255 (RFC 5082 section 3).
            if s.ttl_security.is_some() {
                socket::set_ttl_value(&**l, addr.is_ipv6(), 255)?;
            }
            // TCP MD5: the key of each neighbor goes on every listener of its family.
            if let Some(k) = &s.authentication_key {
                socket::set_md5(&**l, s.address, Some(k.as_bytes()))?;
            }
        }
        let i = self.peers.len();
        let (tx, rx) = mpsc::channel(16);
        let (status_tx, status_rx) = watch::channel(SessionStatus::default());
        let session = Session::new(
            i,
            s.clone(),
            status_tx,
            self.inbound.clone(),
            self.pipeline.clone(),
        );
        let task = tokio::spawn(session.run(rx));
        let _ = tx.send(Control::Start).await;
        self.routes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(s.address)
            .or_default()
            .push((i, (tx.clone(), s.local_address)));
        self.peers.push(SessionHandle {
            settings: s,
            tx,
            status: status_rx,
            task,
        });
        Ok(i)
    }

    /// Ends the session of a neighbor that a configuration reload removed or changed: Cease
    /// with `subcode` (RFC 4486: Peer De-configured, or Other Configuration Change), its
    /// routes leave the pipeline, connections from its address are no longer taken for it,
    /// and its MD5 key leaves the listeners unless another session of that address uses one.
    /// Waits up to `grace` for the session to be down.
    pub async fn remove(&mut self, i: usize, subcode: u8, grace: Duration) {
        let Some(h) = self.peers.get(i) else { return };
        let address = h.settings.address;
        let others_keyed = {
            let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
            if let Some(v) = routes.get_mut(&address) {
                v.retain(|(j, _)| *j != i);
                if v.is_empty() {
                    routes.remove(&address);
                }
            }
            routes.get(&address).is_some_and(|v| {
                v.iter().any(|(j, _)| {
                    self.peers
                        .get(*j)
                        .is_some_and(|p| p.settings.authentication_key.is_some())
                })
            })
        };
        if h.settings.authentication_key.is_some() && !others_keyed {
            for (addr, l) in &self.sockets {
                if addr.is_ipv4() == address.is_ipv4() {
                    if let Err(e) = socket::set_md5(&**l, address, None) {
                        warn!(%address, "cannot remove the MD5 key from a listener: {e}");
                    }
                }
            }
        }
        let _ = h.tx.send(Control::Stop(Stop::Cease(subcode))).await;
        // Its task stays, idle: what it still has queued for the pipeline (its PeerDown,
        // the withdrawal of its routes) must get there.
        if !h.wait_for(grace, |s| s.state == State::Idle).await {
            warn!(peer = %address, "session did not end within the grace time");
        }
    }

    /// Stops every session with Cease / Administrative Shutdown and the message (RFC 9003),
    /// and waits up to `grace` for the NOTIFICATIONs to be written.
    pub async fn shutdown(self, message: &str, grace: Duration) {
        for l in &self.listeners {
            l.abort();
        }
        for p in &self.peers {
            let _ =
                p.tx.send(Control::Stop(Stop::Shutdown(message.to_string())))
                    .await;
        }
        let deadline = Instant::now() + grace;
        for p in &self.peers {
            p.wait_for(deadline.saturating_duration_since(Instant::now()), |s| {
                s.state == State::Idle
            })
            .await;
        }
        // Writers flush on their own once closed; give them the rest of the grace time.
        tokio::time::sleep(
            deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200)),
        )
        .await;
        for p in self.peers {
            p.task.abort();
        }
    }
}

/// Something a session hands on, in order.
enum Out {
    Tap(Inbound),
    Pipe(Routed),
}

/// Delivers the oldest pending item once its queue has room. Cancel-safe: the item leaves
/// `pending` only with a reserved slot.
///
/// A pipeline message is handed on inside the pipeline's gate (`gate`, kept across the
/// parts of a message to every shard), so a re-shard never falls between them; one
/// addressed for threads a re-shard replaced is addressed again first.
async fn deliver(
    pending: &mut VecDeque<Out>,
    tap: &Option<mpsc::Sender<Inbound>>,
    pipeline: &Option<Arc<Pipeline>>,
    gate: &mut Option<OwnedRwLockReadGuard<()>>,
) {
    match pending.front() {
        None => std::future::pending().await,
        Some(Out::Tap(_)) => {
            let permit = match tap {
                Some(t) => t.reserve().await.ok(),
                None => None,
            };
            // Without a permit the receiver is gone: the item is dropped, never retried.
            if let (Some(p), Some(Out::Tap(m))) = (permit, pending.pop_front()) {
                p.send(m);
            }
        }
        Some(Out::Pipe(r)) => {
            let Some(p) = pipeline else {
                pending.pop_front();
                return;
            };
            let epoch = r.epoch;
            if gate.is_none() {
                *gate = Some(p.enter().await);
            }
            let lanes = p.lanes();
            if epoch != lanes.epoch {
                // Addressed before a re-shard; never one part of a message to every shard
                // (the gate is kept across those), so the gate can go.
                *gate = None;
                if let Some(Out::Pipe(r)) = pending.pop_front() {
                    for r in p.retarget(r, &lanes).into_iter().rev() {
                        pending.push_front(Out::Pipe(r));
                    }
                }
                return;
            }
            let sent = match pending.front() {
                Some(Out::Pipe(Routed {
                    target: Target::Shard(i, _),
                    ..
                })) => match lanes.shard(*i) {
                    Some(s) => {
                        send_front(pending, s, |t| match t {
                            Target::Shard(_, m) => Some(m),
                            Target::Update(..) => None,
                        })
                        .await
                    }
                    None => None,
                },
                Some(Out::Pipe(Routed {
                    target: Target::Update(i, _),
                    ..
                })) => match lanes.update(*i) {
                    Some(s) => {
                        send_front(pending, s, |t| match t {
                            Target::Update(_, m) => Some(m),
                            Target::Shard(..) => None,
                        })
                        .await
                    }
                    None => None,
                },
                _ => None,
            };
            match sent {
                Some(true) => {}
                Some(false) => *gate = None,
                // The pipeline is stopped: the item is dropped, never retried.
                None => {
                    pending.pop_front();
                    *gate = None;
                }
            }
        }
    }
}

/// Sends the pipeline message at the front of `pending` on `to` once it has room: `Some`
/// with whether more parts of it follow, `None` if the channel is closed. Cancel-safe.
async fn send_front<M>(
    pending: &mut VecDeque<Out>,
    to: &mpsc::Sender<M>,
    take: impl FnOnce(Target) -> Option<M>,
) -> Option<bool> {
    let permit = to.reserve().await.ok()?;
    let Some(Out::Pipe(r)) = pending.pop_front() else {
        return Some(false);
    };
    if let Some(m) = take(r.target) {
        permit.send(m);
    }
    Some(r.more)
}

/// Answers a connection we will not take with a NOTIFICATION, then closes it.
async fn reject(stream: TcpStream, n: Notification) {
    let mut c = Conn::new(stream, false);
    c.send(Bytes::from(n.encode()));
    c.close();
}

/// Closes a connection after a Cease with this subcode.
fn reject_conn(mut c: Conn, subcode: u8) {
    c.send(Bytes::from(
        Notification::new(code::CEASE, subcode, vec![]).encode(),
    ));
    c.close();
}

/// Why a session is going down; a restarting neighbor keeps its routes only for some.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// The connection broke or the hold timer expired: the neighbor may be restarting.
    Lost,
    /// The neighbor sent a NOTIFICATION (graceful under RFC 8538, but not Hard Reset).
    Notified { hard_reset: bool },
    /// We ended it (errors, administrative stop, prefix limit).
    Other,
}

/// What woke the session task.
enum Wake {
    Control(Option<Control>),
    Read(Result<Bytes, ReadError>),
    Secondary(Result<Bytes, ReadError>),
    Delivered,
    Connected(Result<io::Result<TcpStream>, tokio::task::JoinError>),
    Timer,
    Tick,
}

#[derive(Default)]
struct Timers {
    connect_retry: Option<Instant>,
    hold: Option<Instant>,
    keepalive: Option<Instant>,
    delay_open: Option<Instant>,
    idle_hold: Option<Instant>,
}

impl Timers {
    fn next(&self) -> Option<Instant> {
        [
            self.connect_retry,
            self.hold,
            self.keepalive,
            self.delay_open,
            self.idle_hold,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

struct Session {
    index: usize,
    s: PeerSettings,
    fsm: Fsm,
    our_open: Open,
    conn: Option<Conn>,
    connecting: Option<JoinHandle<io::Result<TcpStream>>>,
    /// A second, incoming connection waiting for its OPEN to resolve a collision.
    secondary: Option<Conn>,
    timers: Timers,
    negotiated: Option<Negotiated>,
    adj_rib_in: [HashSet<Nlri>; 2],
    /// Per family, during an enhanced route refresh by the peer (BoRR to EoRR, RFC 7313):
    /// the Adj-RIB-In entries it has not sent again yet; they go at the EoRR.
    refreshing: [Option<HashSet<Nlri>>; 2],
    status: watch::Sender<SessionStatus>,
    tap: Option<mpsc::Sender<Inbound>>,
    pipeline: Option<Arc<Pipeline>>,
    /// What waits for room in the pipeline or the tap, in order; the socket is not read
    /// meanwhile, and nothing (Up and Down included) is ever dropped.
    pending: VecDeque<Out>,
    /// The pipeline's gate, held while the parts of a message to every shard go out.
    gate: Option<OwnedRwLockReadGuard<()>>,
    /// This session's attribute sets (a new table per Established session: export results
    /// are cached per set, and the neighbor's identity may change between sessions).
    interner: Option<Interner>,
    batcher: Option<Batcher>,
    joined: Option<Joined>,
    /// Junos `local-as` without `private`: this AS goes in front of received AS_PATHs.
    ingress_prepend: Option<u32>,
    epoch: u32,
    /// Families whose routes are kept stale for a restarting neighbor, and until when.
    stale: Option<([bool; 2], Instant)>,
    admin_down: bool,
    /// How the session is ending, for graceful restart (RFC 4724 section 4.2, RFC 8538).
    ending: Ending,
    /// Torn down by a prefix limit with no idle timeout: stays down until cleared.
    held_down: bool,
    send_hold: Duration,
}

impl Session {
    fn new(
        index: usize,
        s: PeerSettings,
        status: watch::Sender<SessionStatus>,
        tap: Option<mpsc::Sender<Inbound>>,
        pipeline: Option<Arc<Pipeline>>,
    ) -> Session {
        let fsm = Fsm::new(FsmConfig {
            hold_time: s.hold_time,
            connect_retry_time: s.connect_retry_time,
            delay_open: None,
            passive: s.passive,
            idle_hold_time: Some(s.connect_retry_time.min(10)),
        });
        Session {
            index,
            our_open: build_open(&s),
            send_hold: Duration::from_secs(u64::from(s.send_hold_time)),
            s,
            fsm,
            conn: None,
            connecting: None,
            secondary: None,
            timers: Timers::default(),
            negotiated: None,
            adj_rib_in: [HashSet::new(), HashSet::new()],
            refreshing: [None, None],
            status,
            tap,
            pipeline,
            pending: VecDeque::new(),
            gate: None,
            interner: None,
            batcher: None,
            joined: None,
            ingress_prepend: None,
            epoch: 0,
            stale: None,
            admin_down: false,
            ending: Ending::Other,
            held_down: false,
        }
    }

    fn name(&self) -> String {
        format!("{} (AS{})", self.s.address, self.s.peer_as)
    }

    fn max_len(&self) -> usize {
        self.negotiated
            .as_ref()
            .map_or(MAX_MESSAGE_LEN, |n| n.params.max_message_len())
    }

    async fn run(mut self, mut ctl: mpsc::Receiver<Control>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            let deadline = match (self.timers.next(), self.stale.map(|s| s.1)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Backpressure: an Established session reads no more UPDATEs while what it
            // received waits to be handed on. A session being set up reads on: OPEN and
            // KEEPALIVE add nothing to hand on, and a neighbor reconnecting while its old
            // session's routes are still being removed must not wait for that to come up.
            let reading = self.conn.is_some()
                && (self.pending.is_empty() || self.fsm.state() != State::Established);
            let has_pending = !self.pending.is_empty();
            let has_connecting = self.connecting.is_some();
            let max_len = self.max_len();
            let has_secondary = self.secondary.is_some();
            let wake = {
                let conn = self.conn.as_mut();
                let secondary = self.secondary.as_mut();
                let connecting = self.connecting.as_mut();
                let tap = &self.tap;
                let pipeline = &self.pipeline;
                let pending = &mut self.pending;
                let gate = &mut self.gate;
                tokio::select! {
                    c = ctl.recv() => Wake::Control(c),
                    r = async move {
                        match conn {
                            Some(c) => c.next_message(max_len).await,
                            None => std::future::pending().await,
                        }
                    }, if reading => Wake::Read(r),
                    r = async move {
                        match secondary {
                            Some(c) => c.next_message(MAX_MESSAGE_LEN).await,
                            None => std::future::pending().await,
                        }
                    }, if has_secondary => Wake::Secondary(r),
                    _ = deliver(pending, tap, pipeline, gate), if has_pending => Wake::Delivered,
                    r = async move {
                        match connecting {
                            Some(h) => h.await,
                            None => std::future::pending().await,
                        }
                    }, if has_connecting => Wake::Connected(r),
                    _ = async {
                        match deadline {
                            Some(d) => tokio::time::sleep_until(d).await,
                            None => std::future::pending().await,
                        }
                    }, if deadline.is_some() => Wake::Timer,
                    _ = tick.tick() => Wake::Tick,
                }
            };
            match wake {
                Wake::Control(Some(c)) => self.control(c),
                Wake::Control(None) => return,
                Wake::Read(r) => {
                    self.received(r);
                    // Hand routes on when the batch is full or nothing more is buffered.
                    let more = self.conn.as_ref().is_some_and(|c| c.has_message(max_len));
                    if !more || self.batcher.as_ref().is_some_and(Batcher::is_full) {
                        self.flush_routes();
                    }
                }
                Wake::Secondary(r) => self.secondary_message(r),
                Wake::Delivered => {}
                Wake::Connected(r) => {
                    self.connecting = None;
                    match r {
                        Ok(Ok(stream)) => {
                            debug!(peer = %self.name(), "connected");
                            self.conn = Some(Conn::new(stream, true));
                            self.event(Event::TcpCrAcked);
                        }
                        Ok(Err(e)) => {
                            debug!(peer = %self.name(), "connect failed: {e}");
                            self.event(Event::TcpConnectionFails);
                        }
                        Err(_) => {}
                    }
                }
                Wake::Timer => {
                    self.timers_expired();
                    self.stale_expired();
                }
                Wake::Tick => {
                    self.check_send_hold();
                    self.check_closed_while_paused();
                }
            }
        }
    }

    fn control(&mut self, c: Control) {
        match c {
            Control::Start => {
                self.admin_down = false;
                self.held_down = false;
                self.event(Event::ManualStart);
            }
            Control::Stop(how) => {
                self.admin_down = true;
                if self.conn.is_some() && self.fsm.state() != State::Idle {
                    let n = match how {
                        // RFC 9003: tell the neighbor why.
                        Stop::Shutdown(message) => Notification::cease_with_message(
                            cease::ADMINISTRATIVE_SHUTDOWN,
                            &message,
                        ),
                        Stop::Cease(subcode) => Notification::new(code::CEASE, subcode, vec![]),
                    };
                    self.send(Bytes::from(n.encode()));
                }
                // ManualStop sends a bare Cease in OpenSent and later; ours went first.
                self.event_with(Event::ManualStop, |a| match a {
                    Action::SendNotification(_) => None,
                    other => Some(other),
                });
            }
            Control::Incoming(stream) => self.incoming(stream),
        }
    }

    fn incoming(&mut self, stream: TcpStream) {
        let external_single_hop = !self.s.internal && !self.s.multihop;
        if let Err(e) = socket::prepare_accepted(&stream, self.s.ttl_security, external_single_hop)
        {
            warn!(peer = %self.name(), "cannot set socket options: {e}");
        }
        if self.admin_down || self.held_down {
            tokio::spawn(reject(
                stream,
                Notification::new(code::CEASE, cease::CONNECTION_REJECTED, vec![]),
            ));
            return;
        }
        match self.fsm.state() {
            State::Idle | State::Connect | State::Active => {
                if let Some(h) = self.connecting.take() {
                    h.abort();
                }
                if let Some(old) = self.conn.take() {
                    old.close();
                }
                if self.fsm.state() == State::Idle {
                    self.event(Event::AutomaticStart);
                    if let Some(h) = self.connecting.take() {
                        h.abort();
                    }
                }
                debug!(peer = %self.name(), "accepted connection");
                self.conn = Some(Conn::new(stream, false));
                self.event(Event::TcpConnectionConfirmed);
            }
            State::OpenSent | State::OpenConfirm => {
                // Collision (RFC 4271 section 6.8): the connection initiated by the speaker
                // with the higher BGP Identifier survives. The neighbor's identifier comes
                // with its OPEN: decide now if we have it, else when the new connection
                // brings one.
                let conn = Conn::new(stream, false);
                match self.negotiated.as_ref().map(|n| n.peer_id) {
                    Some(peer_id) => self.resolve_collision(conn, peer_id, None),
                    None if self.secondary.is_none() => self.secondary = Some(conn),
                    None => reject_conn(conn, cease::CONNECTION_COLLISION_RESOLUTION),
                }
            }
            State::Established => {
                // RFC 4271 section 6.8: an Established session wins over a new connection.
                tokio::spawn(reject(
                    stream,
                    Notification::new(code::CEASE, cease::CONNECTION_COLLISION_RESOLUTION, vec![]),
                ));
            }
        }
    }

    /// The first message on a colliding connection: its OPEN decides which one stays.
    fn secondary_message(&mut self, r: Result<Bytes, ReadError>) {
        let Some(conn) = self.secondary.take() else {
            return;
        };
        let open = match r {
            Ok(msg) => match decode(&msg, &SessionParams::default()) {
                Ok(Message::Open(o)) => Some((o.bgp_identifier, msg)),
                _ => None,
            },
            Err(_) => None,
        };
        match open {
            Some((peer_id, msg)) => self.resolve_collision(conn, peer_id, Some(msg)),
            None => conn.close(),
        }
    }

    /// Keeps the connection initiated by the higher BGP Identifier (RFC 4271 section 6.8).
    /// `new` is incoming; `open` is its OPEN if it was already read.
    fn resolve_collision(&mut self, new: Conn, peer_id: std::net::Ipv4Addr, open: Option<Bytes>) {
        let local_wins = u32::from(self.s.router_id) > u32::from(peer_id);
        let existing_is_local = self.conn.as_ref().is_some_and(|c| c.outgoing);
        if local_wins == existing_is_local {
            reject_conn(new, cease::CONNECTION_COLLISION_RESOLUTION);
            return;
        }
        info!(peer = %self.name(), "connection collision: continuing on the neighbor's connection");
        if let Some(old) = self.conn.take() {
            reject_conn(old, cease::CONNECTION_COLLISION_RESOLUTION);
        }
        if let Some(h) = self.connecting.take() {
            h.abort();
        }
        // Start over on the new connection: our OPEN, then the neighbor's.
        self.negotiated = None;
        self.fsm = Fsm::new(*self.fsm.config());
        self.timers = Timers::default();
        self.event(Event::AutomaticStart);
        if let Some(h) = self.connecting.take() {
            h.abort();
        }
        self.conn = Some(new);
        self.event(Event::TcpConnectionConfirmed);
        if let Some(msg) = open {
            self.received(Ok(msg));
        }
    }

    fn received(&mut self, r: Result<Bytes, ReadError>) {
        let msg = match r {
            Ok(m) => m,
            Err(ReadError::Closed(e)) => {
                debug!(peer = %self.name(), "connection closed: {e:?}");
                self.ending = Ending::Lost;
                self.set_error(match e {
                    Some(e) => format!("connection lost: {e}"),
                    None => "connection closed by the neighbor".into(),
                });
                self.event(Event::TcpConnectionFails);
                return;
            }
            Err(ReadError::Header(e)) => {
                warn!(peer = %self.name(), "bad message header: {e}");
                self.set_error(format!("sent a bad message: {e}"));
                self.event(Event::BgpHeaderErr(e.notification()));
                return;
            }
        };
        let ty = msg.get(18).copied().unwrap_or(0);
        if ty == MessageType::Update as u8 {
            self.update(msg);
            return;
        }
        let params = self
            .negotiated
            .as_ref()
            .map(|n| n.params)
            .unwrap_or_default();
        match decode(&msg, &params) {
            Ok(Message::Open(open)) => match negotiate(&self.our_open, &open, &self.s) {
                Ok(n) => {
                    debug!(peer = %self.name(), ?n, "OPEN accepted");
                    let hold_time = open.hold_time;
                    self.negotiated = Some(n);
                    self.event(Event::BgpOpen { hold_time });
                }
                Err(notification) => {
                    warn!(peer = %self.name(), "OPEN refused: {notification}");
                    self.set_error(format!("OPEN refused: {notification}"));
                    self.event(Event::BgpOpenMsgErr(notification));
                }
            },
            Ok(Message::Keepalive) => self.event(Event::KeepAliveMsg),
            Ok(Message::Notification(n)) => {
                warn!(peer = %self.name(), "NOTIFICATION received: {n}");
                self.ending = Ending::Notified {
                    hard_reset: n.code == code::CEASE && n.subcode == cease::HARD_RESET,
                };
                self.set_error(format!("NOTIFICATION received: {n}"));
                if n.code == code::OPEN_MESSAGE && n.subcode == open_sub::UNSUPPORTED_VERSION {
                    self.event(Event::NotifMsgVerErr);
                } else {
                    self.event(Event::NotifMsg);
                }
            }
            Ok(Message::RouteRefresh(rr)) => {
                if self.fsm.state() == State::Established {
                    self.route_refresh(rr);
                }
            }
            Ok(Message::Update(_)) => {}
            Err(e) => {
                warn!(peer = %self.name(), "bad message: {e}");
                self.set_error(format!("sent a bad message: {e}"));
                let n = e.notification();
                let event = if n.code == code::OPEN_MESSAGE {
                    Event::BgpOpenMsgErr(n)
                } else {
                    Event::BgpHeaderErr(n)
                };
                self.event(event);
            }
        }
    }

    /// RFC 9234 section 5, ingress, on an eBGP session with a configured role: (whether the
    /// UPDATE's routes are a leak and ineligible, the OTC to add to them). A route with OTC
    /// from a customer or route server client is a leak, so is one from a peer whose OTC is
    /// not the peer's AS; a route without OTC from a provider, peer or route server gets the
    /// neighbor's AS as OTC.
    fn only_to_customer(&self, otc: Option<u32>) -> (bool, Option<u32>) {
        use ribshard_wire::open::role;
        let peer_as = self.s.peer_as;
        let ours = if self.s.internal { None } else { self.s.role };
        match (ours, otc) {
            // We are their provider or their route server: they are a customer or a client.
            (Some(role::PROVIDER | role::RS), Some(_)) => (true, None),
            (Some(role::PEER), Some(v)) => (v != peer_as, None),
            // They are our provider, our peer or our route server.
            (Some(role::CUSTOMER | role::PEER | role::RS_CLIENT), None) => (false, Some(peer_as)),
            _ => (false, None),
        }
    }

    /// ROUTE-REFRESH (RFC 2918) and the markers of enhanced route refresh (RFC 7313).
    fn route_refresh(&mut self, rr: RouteRefresh) {
        let enhanced = self
            .negotiated
            .as_ref()
            .is_some_and(|n| n.enhanced_route_refresh);
        let family = Family::from_afi_safi(rr.afi, rr.safi).filter(|f| {
            self.negotiated
                .as_ref()
                .is_some_and(|n| n.families.contains(f))
        });
        let Some(family) = family else {
            // RFC 2918 section 4: a family that was not negotiated is ignored.
            debug!(peer = %self.name(), afi = rr.afi, safi = rr.safi, "ROUTE-REFRESH for a family not negotiated: ignored");
            return;
        };
        match rr.subtype {
            RouteRefresh::REQUEST => {
                // The table again; framed by BoRR and EoRR when enhanced (RFC 7313 section 4).
                if let (Some(p), Some(j)) = (&self.pipeline, &self.joined) {
                    let t = p.refresh(j, enhanced.then_some(family));
                    self.pending.push_back(Out::Pipe(t));
                }
                self.tap(Inbound::RouteRefresh {
                    peer: self.index,
                    afi: rr.afi,
                    safi: rr.safi,
                });
            }
            RouteRefresh::BORR if enhanced => {
                debug!(peer = %self.name(), %family, "BoRR: the neighbor re-advertises");
                self.flush_routes();
                let f = family.index();
                if let (Some(slot), Some(adj)) =
                    (self.refreshing.get_mut(f), self.adj_rib_in.get(f))
                {
                    *slot = Some(adj.clone());
                }
                if let Some(p) = &self.pipeline {
                    for t in p.refresh_begin(self.index as u32, families(&[family])) {
                        self.pending.push_back(Out::Pipe(t));
                    }
                }
            }
            RouteRefresh::EORR if enhanced => {
                // What was not sent again since the BoRR goes (RFC 7313 section 4). An EoRR
                // without a BoRR purges nothing (stale paths of a graceful restart wait for
                // the End-of-RIB).
                let f = family.index();
                let Some(left) = self.refreshing.get_mut(f).and_then(Option::take) else {
                    debug!(peer = %self.name(), %family, "EoRR without BoRR: ignored");
                    return;
                };
                debug!(peer = %self.name(), %family, purged = left.len(), "EoRR");
                if let Some(adj) = self.adj_rib_in.get_mut(f) {
                    for n in left {
                        adj.remove(&n);
                    }
                }
                self.flush_routes();
                self.push_flush_stale(families(&[family]));
                let counts = [self.adj_rib_in[0].len(), self.adj_rib_in[1].len()];
                self.status.send_modify(|st| st.prefixes = counts);
            }
            // RFC 7313 section 5: other subtypes, and markers without the capability, are
            // ignored.
            other => {
                debug!(peer = %self.name(), subtype = other, "ROUTE-REFRESH subtype ignored");
            }
        }
    }

    fn update(&mut self, msg: Bytes) {
        if self.fsm.state() != State::Established {
            // The FSM answers an UPDATE outside Established with an FSM error.
            self.event(Event::UpdateMsg);
            return;
        }
        let Some(params) = self.negotiated.as_ref().map(|n| n.params) else {
            return;
        };
        let body = msg.get(HEADER_LEN..).unwrap_or(&[]);
        let parsed = match parse_update(body, &params) {
            Ok(u) => u,
            Err(e) => {
                warn!(peer = %self.name(), "UPDATE needs a session reset: {e}");
                self.set_error(format!("sent a malformed UPDATE: {e}"));
                self.event(Event::UpdateMsgErr(e.notification()));
                return;
            }
        };
        if let Some(e) = parsed.treat_as_withdraw {
            warn!(peer = %self.name(), "UPDATE treated as withdraw (RFC 7606): {e}");
        }
        for e in &parsed.discarded {
            debug!(peer = %self.name(), "attribute discarded (RFC 7606): {e}");
        }
        let end_of_rib = parsed.end_of_rib();
        if let Some(f) = end_of_rib {
            info!(peer = %self.name(), family = %f, "End-of-RIB received");
        }
        let (leak, add_otc) = self.only_to_customer(parsed.attrs.otc);
        let ingress = Ingress {
            otc: add_otc,
            prepend: self.ingress_prepend,
        };
        if leak && (!parsed.nlri.is_empty() || parsed.attrs.mp_reach.is_some()) {
            debug!(peer = %self.name(), otc = ?parsed.attrs.otc, "route leak (RFC 9234 section 5): the UPDATE's routes are ineligible");
        }
        // One pass over the prefixes: the Adj-RIB-In index (prefix limits, counts) and, with
        // a pipeline, the per-shard batches.
        let adj = &mut self.adj_rib_in;
        let refreshing = &mut self.refreshing;
        let mut pipe = self.batcher.as_mut().zip(self.interner.as_mut());
        let index_key = |n: Nlri| Nlri {
            prefix: n.prefix.masked(),
            ..n
        };
        // A withdrawal (or an announcement that is a route leak): out of the Adj-RIB-In
        // index, no longer awaited by a refresh, and withdrawn in the pipeline.
        let unlearn = |n: Nlri,
                       adj: &mut [HashSet<Nlri>; 2],
                       refreshing: &mut [Option<HashSet<Nlri>>; 2],
                       b: Option<&mut Batcher>| {
            let f = n.prefix.family().index();
            if let Some(set) = adj.get_mut(f) {
                set.remove(&index_key(n));
            }
            if let Some(Some(set)) = refreshing.get_mut(f) {
                set.remove(&index_key(n));
            }
            if let Some(b) = b {
                b.withdraw(n);
            }
        };
        for n in parsed.withdrawn_all() {
            unlearn(n, adj, refreshing, pipe.as_mut().map(|(b, _)| &mut **b));
        }
        if parsed.treat_as_withdraw.is_none() {
            // The NLRI field (next hop in NEXT_HOP), then MP_REACH_NLRI (its own next hop).
            let mp = parsed.attrs.mp_reach.and_then(|m| m.nlri);
            for (run, in_mp) in [(Some(parsed.nlri), false), (mp, true)] {
                let Some(run) = run.filter(|r| !r.is_empty()) else {
                    continue;
                };
                let attrs = pipe.as_mut().filter(|_| !leak).map(|(_, interner)| {
                    let nh = next_hop_of(&parsed.attrs, in_mp);
                    if ingress == Ingress::default() {
                        interner.intern(&parsed.attrs, &params, nh)
                    } else {
                        interner.intern_with(&parsed.attrs, &params, nh, ingress)
                    }
                });
                for n in run.iter() {
                    let f = n.prefix.family().index();
                    if leak {
                        // Ineligible: as if withdrawn, replacing what the peer sent before.
                        unlearn(n, adj, refreshing, pipe.as_mut().map(|(b, _)| &mut **b));
                        continue;
                    }
                    if let Some(set) = adj.get_mut(f) {
                        set.insert(index_key(n));
                    }
                    if let Some(Some(set)) = refreshing.get_mut(f) {
                        set.remove(&index_key(n));
                    }
                    if let (Some((b, _)), Some(a)) = (pipe.as_mut(), attrs.as_ref()) {
                        b.announce(a, n);
                    }
                }
            }
        }
        drop(parsed);
        self.status.send_modify(|st| {
            st.updates_received += 1;
            st.prefixes = [self.adj_rib_in[0].len(), self.adj_rib_in[1].len()];
        });
        self.event(Event::UpdateMsg);
        if self.check_prefix_limits() {
            return;
        }
        if let Some(family) = end_of_rib {
            // RFC 4724 section 4.2: stale routes of the family that were not sent again go.
            if let Some((f, until)) = self.stale {
                let only = families(&[family]);
                if f[0] && only[0] || f[1] && only[1] {
                    let left = [f[0] && !only[0], f[1] && !only[1]];
                    self.stale = (left != [false; 2]).then_some((left, until));
                    self.flush_routes();
                    self.push_flush_stale(only);
                }
            }
        }
        if self.tap.is_some() {
            self.tap(match end_of_rib {
                Some(family) => Inbound::EndOfRib {
                    peer: self.index,
                    family,
                },
                None => Inbound::Update {
                    peer: self.index,
                    message: msg,
                    params,
                },
            });
        }
    }

    fn tap(&mut self, m: Inbound) {
        if self.tap.is_some() {
            self.pending.push_back(Out::Tap(m));
        }
    }

    /// Queues the routes batched so far for their shards.
    fn flush_routes(&mut self) {
        if let Some(b) = self.batcher.as_mut() {
            if !b.is_empty() {
                let epoch = b.epoch();
                for (i, m) in b.take() {
                    self.pending.push_back(Out::Pipe(Routed {
                        target: Target::Shard(i, m),
                        epoch,
                        more: false,
                    }));
                }
            }
            // After a re-shard, split for the shards in force (what was split for the old
            // ones is addressed again as it is delivered).
            if let Some(p) = &self.pipeline {
                if b.epoch() != p.lanes().epoch {
                    *b = p.batcher(self.index as u32);
                }
            }
        }
    }

    fn push_flush_stale(&mut self, families: [bool; 2]) {
        if let Some(p) = &self.pipeline {
            for t in p.flush_stale(self.index as u32, families) {
                self.pending.push_back(Out::Pipe(t));
            }
        }
    }

    /// The restart time of a neighbor that did not come back (or send End-of-RIB) is over.
    fn stale_expired(&mut self) {
        if let Some((f, until)) = self.stale {
            if until <= Instant::now() {
                info!(peer = %self.name(), "graceful restart: restart time over, stale routes removed");
                self.stale = None;
                self.push_flush_stale(f);
            }
        }
    }

    /// The session reached Established: join the pipeline.
    fn pipeline_up(&mut self, n: &Negotiated) {
        let Some(p) = self.pipeline.clone() else {
            return;
        };
        let r = &self.s.routing;
        let peer = self.index as u32;
        let info = PeerInfo {
            ebgp: !self.s.internal,
            router_id: u32::from(n.peer_id),
            address: match self.s.address {
                IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
                IpAddr::V6(a) => u128::from(a),
            },
            local_as: self.s.local_as,
            peer_as: self.s.peer_as,
            import_accept: r.import_accept,
            rr_cluster: if self.s.internal {
                r.cluster.map(u32::from)
            } else {
                None
            },
            rs_client: r.route_server_client,
        };
        // Junos `local-as` towards an external neighbor (not a route server client, whose
        // paths pass unchanged): the neighbor sees the local AS and, unless
        // no-prepend-global-as, the global one; its routes get the local AS in front unless
        // private. Both ASes are ours for loop detection.
        let masquerade = !self.s.internal
            && !r.route_server_client
            && r.global_as != 0
            && r.global_as != self.s.local_as;
        self.ingress_prepend = (masquerade && !r.local_as_private).then_some(self.s.local_as);
        self.interner = Some(Interner::new(LoopChecks {
            local_as: self.s.local_as,
            loops: r.loops,
            router_id: u32::from(self.s.router_id),
            cluster_ids: r.cluster_ids.clone(),
            global_as: masquerade.then_some(r.global_as),
            prepended: self.ingress_prepend.is_some(),
        }));
        self.batcher = Some(p.batcher(peer));
        let kind = if r.route_server_client {
            GroupKind::RouteServer
        } else if self.s.internal {
            GroupKind::Internal {
                client_cluster: r.cluster.map(u32::from),
            }
        } else {
            GroupKind::External
        };
        let next_hop_self = r.next_hop_self.unwrap_or(kind == GroupKind::External);
        let needs_local = next_hop_self;
        let local = self
            .conn
            .as_ref()
            .and_then(|c| c.local_addr())
            .map(|a| a.ip())
            .filter(|_| needs_local);
        let spec = GroupSpec {
            name: r.group.clone(),
            kind,
            local_as: self.s.local_as,
            global_as: (masquerade && !r.no_prepend_global_as).then_some(r.global_as),
            peer_as: if kind == GroupKind::External {
                self.s.peer_as
            } else {
                0
            },
            router_id: self.s.router_id,
            next_hop_self,
            local_v4: match local {
                Some(IpAddr::V4(a)) => Some(a),
                _ => None,
            },
            local_v6: match local {
                Some(IpAddr::V6(a)) => Some(a),
                _ => None,
            },
            export_accept: r.export_accept,
            params: ribshard_wire::SessionParams {
                four_octet_as: n.four_octet_as,
                extended_message: n.extended_message,
                add_path: n.add_path_send,
                external: false,
                mrt_rib: false,
            },
            families: families(&n.families),
            role: if self.s.internal { None } else { self.s.role },
        };
        self.epoch += 1;
        let member = self.conn.as_ref().map(|c| {
            let sink: Box<dyn ribshard_adjout::Sink> = Box::new(c.route_sink());
            (
                spec,
                MemberId {
                    peer,
                    epoch: self.epoch,
                },
                sink,
            )
        });
        let (msgs, joined) = p.peer_up(peer, info, member);
        self.joined = joined;
        self.pending.extend(msgs.into_iter().map(Out::Pipe));
        // RFC 4724 section 4.2: a neighbor that comes back without graceful restart (or
        // without a family in it) keeps no stale routes.
        if let Some((f, until)) = self.stale {
            let kept = n
                .graceful_restart
                .as_ref()
                .map(|g| families(&g.families))
                .unwrap_or_default();
            let flush = [f[0] && !kept[0], f[1] && !kept[1]];
            if flush != [false; 2] {
                self.push_flush_stale(flush);
                let left = [f[0] && kept[0], f[1] && kept[1]];
                self.stale = (left != [false; 2]).then_some((left, until));
            }
        }
    }

    /// The session left Established: its routes leave the pipeline (or stay stale).
    fn pipeline_down(&mut self, stale: Option<&crate::negotiate::GracefulRestart>) {
        let Some(p) = self.pipeline.clone() else {
            return;
        };
        // Routes received before the session ended are applied before it goes.
        self.flush_routes();
        self.batcher = None;
        self.interner = None;
        let kept = stale.map(|g| families(&g.families));
        let msgs = p.peer_down(self.index as u32, kept, self.joined.take());
        self.pending.extend(msgs.into_iter().map(Out::Pipe));
        self.stale = match (kept, stale) {
            (Some(f), Some(g)) => Some((
                f,
                Instant::now() + Duration::from_secs(u64::from(g.restart_time)),
            )),
            _ => None,
        };
    }

    /// Tears the session down past a family's maximum (RFC 4486 section 4, Cease subcode 1).
    fn check_prefix_limits(&mut self) -> bool {
        for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
            let Some(Some((max, teardown, idle))) = self.s.prefix_limits.get(f.index()).copied()
            else {
                continue;
            };
            let count = self.adj_rib_in[f.index()].len();
            if count as u64 <= u64::from(max) {
                continue;
            }
            if !teardown {
                warn!(peer = %self.name(), family = %f, count, max, "prefix limit exceeded");
                continue;
            }
            warn!(peer = %self.name(), family = %f, count, max, "prefix limit exceeded: tearing down");
            self.set_error(format!("prefix limit {max} exceeded for {f}"));
            // Data: AFI, SAFI and the upper bound (RFC 4486 section 4).
            let mut data = f.afi().to_be_bytes().to_vec();
            data.push(f.safi());
            data.extend_from_slice(&max.to_be_bytes());
            self.send(Bytes::from(
                Notification::new(code::CEASE, cease::MAXIMUM_PREFIXES_REACHED, data).encode(),
            ));
            self.held_down = idle.is_none();
            // Our NOTIFICATION (with data) went first; restart after idle-timeout, if any.
            self.event_with(
                Event::AutomaticStop(cease::MAXIMUM_PREFIXES_REACHED),
                |a| match a {
                    Action::SendNotification(_) => None,
                    Action::StartIdleHoldTimer(_) => {
                        idle.map(|t| Action::StartIdleHoldTimer(t.min(u32::from(u16::MAX)) as u16))
                    }
                    other => Some(other),
                },
            );
            return true;
        }
        false
    }

    fn set_error(&self, e: String) {
        self.status.send_modify(|st| st.last_error = Some(e));
    }

    fn send(&mut self, msg: Bytes) {
        if let Some(c) = self.conn.as_mut() {
            c.send(msg);
        }
    }

    fn event(&mut self, e: Event) {
        self.event_with(e, Some);
    }

    /// Feeds an event, carrying out its actions as `adjust` changes them.
    fn event_with(&mut self, e: Event, adjust: impl FnMut(Action) -> Option<Action>) {
        let before = self.fsm.state();
        let actions = self.fsm.handle(e).into_iter().filter_map(adjust).collect();
        self.execute(actions);
        let after = self.fsm.state();
        if before != after {
            debug!(peer = %self.name(), "{before} -> {after}");
            self.status.send_modify(|st| st.state = after);
        }
    }

    fn execute(&mut self, actions: Vec<Action>) {
        let now = Instant::now();
        let secs = |s: u16| now + Duration::from_secs(u64::from(s));
        for a in actions {
            match a {
                Action::InitiateTcpConnection => self.connect(),
                Action::ListenForConnection => {}
                Action::DropTcpConnection => {
                    if let Some(h) = self.connecting.take() {
                        h.abort();
                    }
                    if let Some(c) = self.conn.take() {
                        self.status
                            .send_modify(|st| st.write_queue_blocks += c.write_queue_blocks);
                        c.close();
                    }
                }
                Action::SendOpen => self.send(Bytes::from(self.our_open.encode())),
                Action::SendKeepalive => self.send(Bytes::copy_from_slice(&keepalive())),
                Action::SendNotification(n) => self.send(Bytes::from(n.encode())),
                Action::StartConnectRetryTimer(s) => self.timers.connect_retry = Some(secs(s)),
                Action::StopConnectRetryTimer => self.timers.connect_retry = None,
                Action::StartHoldTimer(s) => self.timers.hold = Some(secs(s)),
                Action::StopHoldTimer => self.timers.hold = None,
                Action::StartKeepaliveTimer(s) => self.timers.keepalive = Some(secs(s)),
                Action::StopKeepaliveTimer => self.timers.keepalive = None,
                Action::StartDelayOpenTimer(s) => self.timers.delay_open = Some(secs(s)),
                Action::StopDelayOpenTimer => self.timers.delay_open = None,
                Action::StartIdleHoldTimer(s) => {
                    if !self.admin_down && !self.held_down {
                        self.timers.idle_hold = Some(secs(s));
                    }
                }
                Action::SessionEstablished {
                    hold_time,
                    keepalive_time,
                } => {
                    let n = self.negotiated.clone();
                    info!(peer = %self.name(), hold_time, keepalive_time, "session Established");
                    self.status.send_modify(|st| {
                        st.negotiated = n.clone();
                        st.established_transitions += 1;
                        st.last_error = None;
                    });
                    if let Some(negotiated) = n {
                        // Ordered before any UPDATE of this session.
                        self.pipeline_up(&negotiated);
                        self.tap(Inbound::Up {
                            peer: self.index,
                            negotiated,
                        });
                    }
                }
                Action::ReleaseResources => {
                    let was_up = self.status.borrow().negotiated.is_some();
                    let ending = std::mem::replace(&mut self.ending, Ending::Other);
                    // RFC 4724 section 4.2 and RFC 8538 section 3: keep the routes of a
                    // neighbor that may be restarting.
                    let stale = self
                        .negotiated
                        .as_ref()
                        .and_then(|n| n.graceful_restart.clone())
                        .filter(|gr| match ending {
                            Ending::Lost => true,
                            Ending::Notified { hard_reset } => gr.notification && !hard_reset,
                            Ending::Other => false,
                        })
                        .filter(|gr| gr.restart_time > 0 && !gr.families.is_empty());
                    self.adj_rib_in = [HashSet::new(), HashSet::new()];
                    self.refreshing = [None, None];
                    self.negotiated = None;
                    self.status.send_modify(|st| {
                        st.negotiated = None;
                        st.prefixes = [0; 2];
                    });
                    if was_up {
                        info!(peer = %self.name(), graceful_restart = stale.is_some(), "session down");
                        self.pipeline_down(stale.as_ref());
                        self.tap(Inbound::Down {
                            peer: self.index,
                            stale,
                        });
                    }
                }
            }
        }
    }

    fn connect(&mut self) {
        if let Some(h) = self.connecting.take() {
            h.abort();
        }
        let peer = SocketAddr::new(self.s.address, self.s.port);
        let local = self.s.local_address;
        let key = self.s.authentication_key.clone();
        let ttl_security = self.s.ttl_security;
        let external_single_hop = !self.s.internal && !self.s.multihop;
        let timeout = Duration::from_secs(u64::from(self.s.connect_retry_time.max(1)));
        self.connecting = Some(tokio::spawn(async move {
            let o = ConnectOptions {
                local,
                md5_key: key.as_deref().map(str::as_bytes),
                ttl_security,
                external_single_hop,
            };
            match tokio::time::timeout(timeout, socket::connect(peer, &o)).await {
                Ok(r) => r,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            }
        }));
    }

    fn timers_expired(&mut self) {
        let now = Instant::now();
        let due = |t: &mut Option<Instant>| {
            if t.is_some_and(|d| d <= now) {
                *t = None;
                true
            } else {
                false
            }
        };
        let hold_due = due(&mut self.timers.hold);
        if hold_due && self.input_waiting() {
            // We stopped reading (the pipeline or the tap is full: backpressure) and the
            // neighbor's messages wait in our buffers: it is alive, we are the slow one.
            // Expiring now would drop a healthy session exactly when we are busiest.
            let hold = self.negotiated.as_ref().map_or(3, |n| n.hold_time.max(3));
            debug!(peer = %self.name(), "hold timer restarted: the neighbor's messages wait unread while routing work drains");
            self.timers.hold = Some(now + Duration::from_secs(u64::from(hold)));
        } else if hold_due {
            warn!(peer = %self.name(), "hold timer expired");
            self.ending = Ending::Lost;
            self.set_error("hold timer expired".into());
            self.event(Event::HoldTimerExpires);
        }
        if due(&mut self.timers.keepalive) {
            self.event(Event::KeepaliveTimerExpires);
        }
        if due(&mut self.timers.connect_retry) {
            self.event(Event::ConnectRetryTimerExpires);
        }
        if due(&mut self.timers.delay_open) {
            self.event(Event::DelayOpenTimerExpires);
        }
        if due(&mut self.timers.idle_hold) {
            self.event(Event::IdleHoldTimerExpires);
        }
    }

    /// Whether we are not reading (backpressure: work waits to be handed on) while the
    /// neighbor's data waits for us, in our buffer or the socket's.
    fn input_waiting(&self) -> bool {
        !self.pending.is_empty()
            && self
                .conn
                .as_ref()
                .is_some_and(|c| c.has_message(self.max_len()) || c.unread_bytes() > 0)
    }

    /// A session that does not read (backpressure) would see the neighbor close only after
    /// working through everything it sent before: routes of a session that is over. The
    /// socket's TCP state tells it sooner; what was not read yet is dropped with the session.
    fn check_closed_while_paused(&mut self) {
        if self.pending.is_empty() || self.fsm.state() != State::Established {
            return;
        }
        if self.conn.as_ref().is_some_and(|c| c.peer_closed()) {
            info!(peer = %self.name(), "the neighbor closed the connection while its UPDATEs waited to be read");
            self.received(Err(ReadError::Closed(None)));
        }
    }

    /// RFC 9687: a neighbor that has not taken our data for the send hold time is gone.
    fn check_send_hold(&mut self) {
        let stalled = self
            .conn
            .as_ref()
            .map_or(Duration::ZERO, |c| c.progress.stalled_for());
        if stalled > self.send_hold && self.fsm.state() != State::Idle {
            warn!(peer = %self.name(), ?stalled, "send hold timer expired: the neighbor is not reading");
            self.set_error("send hold timer expired".into());
            self.event(Event::SendHoldTimerExpires);
        }
    }
}
