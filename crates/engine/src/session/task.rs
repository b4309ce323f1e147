//! A session's task: its loop over what can wake it (control, the socket, timers, room in
//! the pipeline), the RFC 4271 state machine's actions, connections and their collisions
//! (RFC 4271 section 6.8), and `clear`.

use super::adj_index::AdjIndex;
use super::conn::{Conn, Progress, ReadError};
use super::deliver::{deliver_tapped, tap_ready, Tapped};
use super::{
    reject, reject_conn, Clear, ClearError, Control, DownReason, Inbound, InputCounts, Opened,
    SessionCounters, SessionError, SessionStatus, Stamped, Stop,
};
use crate::negotiate::{build_open, Negotiated, PeerSettings};
use crate::pipeline::{ArrivalFlag, Batcher, Inlet, Joined, Pipeline, Routed};
use crate::socket::{self, ConnectOptions};
use bytes::Bytes;
use ribshard_fsm::{Action, Config as FsmConfig, Event, Fsm, State};
use ribshard_rib::Interner;
use ribshard_wire::message::MAX_MESSAGE_LEN;
use ribshard_wire::notification::{cease, code, Notification};
use ribshard_wire::{decode, keepalive, Message, Open, RouteRefresh, SessionParams};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// Why a session is going down; a restarting neighbor keeps its routes only for some.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// The connection broke or the hold timer expired: the neighbor may be restarting.
    Lost,
    /// The neighbor sent a NOTIFICATION (graceful under RFC 8538, but not Hard Reset).
    Notified { hard_reset: bool },
    /// We ended it (errors, administrative stop, prefix limit).
    Other,
    /// We are stopping to restart gracefully: the pipeline is left as it is.
    Restarting,
}

/// The most messages taken in per wake of the session task: the buffer holds what one read
/// brought (up to 64 KiB and more: thousands of KEEPALIVEs), and control requests and timers
/// wait while they are taken in.
const BUFFERED_AT_ONCE: usize = 64;

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

/// What a session shares with its handle.
pub(super) struct Shared {
    pub(super) status: watch::Sender<SessionStatus>,
    pub(super) counters: Arc<SessionCounters>,
    pub(super) output: Arc<std::sync::Mutex<Option<Arc<Progress>>>>,
}

/// The FSM's settings (RFC 4271 section 8.1.1) from the neighbor's.
pub(super) fn fsm_config(s: &PeerSettings) -> FsmConfig {
    FsmConfig {
        hold_time: s.hold_time,
        connect_retry_time: s.connect_retry_time,
        delay_open: None,
        passive: s.passive,
        idle_hold_time: Some(s.connect_retry_time.min(10)),
    }
}

/// A prefix limit crossed with `teardown = false`.
#[derive(Clone, Copy, Debug)]
pub(super) struct OverLimit {
    /// UPDATE batches found over the limit since the crossing was logged.
    pub(super) batches: u64,
    /// The most routes held meanwhile.
    pub(super) peak: usize,
}

pub(super) struct Session {
    pub(super) index: usize,
    pub(super) s: PeerSettings,
    pub(super) fsm: Fsm,
    pub(super) our_open: Open,
    /// Our OPEN for the next connection, when a reload changed what it proposes.
    pub(super) next_open: Option<Open>,
    pub(super) conn: Option<Conn>,
    pub(super) connecting: Option<JoinHandle<io::Result<TcpStream>>>,
    /// A second, incoming connection waiting for its OPEN to resolve a collision.
    pub(super) secondary: Option<Conn>,
    timers: Timers,
    pub(super) negotiated: Option<Negotiated>,
    pub(super) adj_rib_in: [AdjIndex; 2],
    /// Per family, during an enhanced route refresh by the peer (BoRR to EoRR, RFC 7313):
    /// the Adj-RIB-In entries it has not sent again yet; they go at the EoRR.
    pub(super) refreshing: [Option<AdjIndex>; 2],
    pub(super) status: watch::Sender<SessionStatus>,
    pub(super) counters: Arc<SessionCounters>,
    /// Where the handle reads the connection's write queue; `output_of` is what it holds.
    pub(super) output: Arc<std::sync::Mutex<Option<Arc<Progress>>>>,
    pub(super) output_of: usize,
    /// End-of-RIB received since Established, per family (convergence telemetry).
    pub(super) end_of_rib: [bool; 2],
    pub(super) tap: Option<mpsc::Sender<Inbound>>,
    pub(super) pipeline: Option<Arc<Pipeline>>,
    /// What waits for room in the pipeline, in order; the socket is not read meanwhile,
    /// and nothing (Up and Down included) is ever dropped.
    pub(super) inlet: Inlet,
    /// What waits for room in the tap, likewise.
    pub(super) tapped: VecDeque<Tapped>,
    /// This session's attribute sets (a new table per Established session: export results
    /// are cached per set, and the neighbor's identity may change between sessions).
    pub(super) interner: Option<Interner>,
    pub(super) batcher: Option<Batcher>,
    pub(super) joined: Option<Joined>,
    /// Junos `local-as` without `private`: this AS goes in front of received AS_PATHs.
    pub(super) ingress_prepend: Option<u32>,
    pub(super) epoch: u32,
    /// Families whose routes are kept stale for a restarting neighbor, and until when.
    pub(super) stale: super::stale::Stale,
    pub(super) admin_down: bool,
    /// An unusable next hop was logged this session (RFC 4271 section 6.3): once is enough.
    pub(super) next_hop_warned: bool,
    /// How the session is ending, for graceful restart (RFC 4724 section 4.2, RFC 8538).
    pub(super) ending: Ending,
    /// Torn down by a prefix limit with no idle timeout: stays down until cleared.
    pub(super) held_down: bool,
    /// Per family, over a prefix limit that does not tear down: since when it is logged,
    /// and how often it was found over since (logged once per crossing, then counted).
    pub(super) over_limit: [Option<OverLimit>; 2],
    /// Connections refused since the last log line about them, and when that was.
    rejected: (u64, Option<Instant>),
    pub(super) send_hold: Duration,
    /// This connection's OPENs as sent and received (BMP Peer Up).
    pub(super) open_sent: Option<Bytes>,
    pub(super) open_received: Option<Bytes>,
    /// The NOTIFICATION we sent since Established, if any (BMP Peer Down's reason).
    notified: Option<Notification>,
    /// UPDATEs handled and not yet counted in the status ([`Session::publish_received`]).
    pub(super) unpublished_updates: u64,
    /// Published with the UPDATEs ([`Session::publish_received`]).
    pub(super) input: InputCounts,
    /// Raised while this neighbor has routes still to come: more to read from the socket
    /// (`unread`, as of the last read), or routes not yet handed on
    /// ([`crate::pipeline::Arrivals`]: update groups hold their changes meanwhile).
    arriving: Option<ArrivalFlag>,
    unread: bool,
    /// Since when, and how many octets the reads took ([`Session::note_stream`]).
    stream_window: (std::time::Instant, usize),
}

/// A neighbor whose reads take [`STREAM_BYTES`] within this long is streaming.
const STREAM_WINDOW: Duration = Duration::from_millis(10);
/// 128 KiB in 10 ms: 13 MB/s, a full table's pace, never churn's.
const STREAM_BYTES: usize = 128 << 10;

impl Session {
    pub(super) fn new(
        index: usize,
        s: PeerSettings,
        shared: Shared,
        tap: Option<mpsc::Sender<Inbound>>,
        pipeline: Option<Arc<Pipeline>>,
    ) -> Session {
        let fsm = Fsm::new(fsm_config(&s));
        Session {
            index,
            our_open: build_open(&s),
            next_open: None,
            send_hold: Duration::from_secs(u64::from(s.send_hold_time)),
            unpublished_updates: 0,
            input: InputCounts::default(),
            open_sent: None,
            open_received: None,
            notified: None,
            s,
            fsm,
            conn: None,
            connecting: None,
            secondary: None,
            timers: Timers::default(),
            negotiated: None,
            adj_rib_in: Default::default(),
            refreshing: [None, None],
            over_limit: [None, None],
            rejected: (0, None),
            status: shared.status,
            counters: shared.counters,
            output: shared.output,
            output_of: 0,
            end_of_rib: [false; 2],
            tap,
            arriving: pipeline.as_ref().map(|p| p.arrivals().flag()),
            unread: false,
            stream_window: (std::time::Instant::now(), 0),
            pipeline,
            inlet: Inlet::new(),
            tapped: VecDeque::new(),
            interner: None,
            batcher: None,
            joined: None,
            ingress_prepend: None,
            epoch: 0,
            stale: Default::default(),
            admin_down: false,
            next_hop_warned: false,
            ending: Ending::Other,
            held_down: false,
        }
    }

    pub(super) fn name(&self) -> String {
        self.s.name()
    }

    pub(super) fn max_len(&self) -> usize {
        self.negotiated
            .as_ref()
            .map_or(MAX_MESSAGE_LEN, |n| n.params.max_message_len())
    }

    pub(super) async fn run(mut self, mut ctl: mpsc::Receiver<Control>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            let deadline = match (self.timers.next(), self.stale.next()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Backpressure: an Established session reads no more UPDATEs while what it
            // received waits to be handed on. A session being set up reads on: OPEN and
            // KEEPALIVE add nothing to hand on, and a neighbor reconnecting while its old
            // session's routes are still being removed must not wait for that to come up.
            let reading = self.conn.is_some() && self.may_read();
            let for_pipeline = !self.inlet.is_empty();
            let tap_ready = tap_ready(&self.tapped, &self.inlet, self.pipeline.is_some());
            let for_tap = tap_ready > 0;
            let has_connecting = self.connecting.is_some();
            let max_len = self.max_len();
            let has_secondary = self.secondary.is_some();
            let wake = {
                let conn = self.conn.as_mut();
                let secondary = self.secondary.as_mut();
                let connecting = self.connecting.as_mut();
                let tap = &self.tap;
                let pipeline = &self.pipeline;
                let inlet = &mut self.inlet;
                let tapped = &mut self.tapped;
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
                    _ = async move {
                        match pipeline {
                            Some(p) => p.deliver(inlet).await,
                            // No pipeline (a session tested alone): nothing to hand on.
                            None => inlet.clear(),
                        }
                    }, if for_pipeline => Wake::Delivered,
                    _ = deliver_tapped(tapped, tap, tap_ready), if for_tap => Wake::Delivered,
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
            let began = std::time::Instant::now();
            match wake {
                Wake::Control(Some(c)) => self.control(c),
                Wake::Control(None) => return,
                Wake::Read(r) => {
                    self.received(r);
                    self.received_buffered();
                    // Hand routes on when the batch is full or nothing more is buffered.
                    let max_len = self.max_len();
                    let more = self.conn.as_ref().is_some_and(|c| c.has_message(max_len));
                    let (waiting, took) = self
                        .conn
                        .as_mut()
                        .map_or((0, 0), |c| (c.unread_bytes(), c.take_read()));
                    self.unread = more || waiting > 0;
                    self.note_stream(began, took);
                    if !more || self.batcher.as_ref().is_some_and(Batcher::is_full) {
                        self.flush_routes();
                        self.publish_received();
                    }
                }
                Wake::Secondary(r) => self.secondary_message(r),
                Wake::Delivered => {}
                Wake::Connected(r) => {
                    self.connecting = None;
                    match r {
                        Ok(Ok(stream)) => {
                            debug!(neighbor = %self.name(), "connected");
                            self.conn = Some(Conn::new(stream, true, self.counters.clone()));
                            self.event(Event::TcpCrAcked);
                        }
                        Ok(Err(e)) => {
                            info!(neighbor = %self.name(), "connect failed: {e}");
                            self.set_error(SessionError::ConnectFailed(e.kind()));
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
            self.sync_output();
            self.note_arriving();
            crate::telemetry::session_item(began.elapsed());
        }
    }

    /// Backpressure: an Established session reads no more UPDATEs while what it received
    /// waits to be handed on (see the loop in [`Session::run`]).
    /// Nothing waits to be handed on, to the pipeline or the tap. Tapped items not yet
    /// marked wait for their batch, not for anyone else: they are marked (in order) when
    /// it is handed on, which needs more reading first.
    pub(super) fn nothing_pending(&self) -> bool {
        self.inlet.is_empty() && self.tapped.front().is_none_or(|t| t.mark.is_none())
    }

    /// Raises or lowers this session's part of [`crate::pipeline::Arrivals`]: routes are
    /// still coming while an Established neighbor has more unread or ours wait to be handed
    /// on.
    fn note_arriving(&mut self) {
        let more = self.conn.is_some()
            && self.fsm.state() == State::Established
            && (self.unread || !self.inlet.is_empty());
        if let Some(f) = self.arriving.as_mut() {
            f.set(more);
        }
    }

    /// Counts what the reads took within [`STREAM_WINDOW`]: past [`STREAM_BYTES`], the
    /// neighbor is streaming ([`crate::pipeline::Arrivals::streaming`]). A burst of churn
    /// (a second of a trace, replayed ten times as fast) stays far below it.
    fn note_stream(&mut self, now: std::time::Instant, took: usize) {
        let (since, bytes) = &mut self.stream_window;
        if now.duration_since(*since) > STREAM_WINDOW {
            *since = now;
            *bytes = 0;
        }
        *bytes += took;
        if *bytes >= STREAM_BYTES {
            if let Some(p) = &self.pipeline {
                p.arrivals().streaming();
            }
        }
    }

    fn may_read(&self) -> bool {
        self.nothing_pending() || self.fsm.state() != State::Established
    }

    /// Takes in the messages already buffered, up to [`BUFFERED_AT_ONCE`], while reading
    /// is allowed (no backpressure) and the batch has room: one wake of the loop above per
    /// read from the socket rather than per message (its timers, clock reads and select
    /// cost as much as a small UPDATE's decoding).
    fn received_buffered(&mut self) {
        for _ in 1..BUFFERED_AT_ONCE {
            if !self.may_read() || self.batcher.as_ref().is_some_and(Batcher::is_full) {
                return;
            }
            let max_len = self.max_len();
            let Some(r) = self.conn.as_mut().and_then(|c| c.buffered_message(max_len)) else {
                return;
            };
            self.received(r);
        }
    }

    /// Points the handle at the current connection's write queue, and the status at its
    /// addresses, when the connection changed.
    fn sync_output(&mut self) {
        let now = self
            .conn
            .as_ref()
            .map_or(0, |c| Arc::as_ptr(&c.progress) as usize);
        if now == self.output_of {
            return;
        }
        self.output_of = now;
        *self.output.lock().unwrap_or_else(|e| e.into_inner()) =
            self.conn.as_ref().map(|c| c.progress.clone());
        let (local, remote) = match &self.conn {
            Some(c) => (c.local_addr(), c.peer_addr()),
            None => (None, None),
        };
        self.status.send_modify(|st| {
            st.local = local;
            st.remote = remote;
        });
    }

    fn control(&mut self, c: Control) {
        match c {
            // A neighbor configured `disable` waits for `enable`.
            Control::Start if self.s.disabled => self.set_disabled(true),
            Control::Start => self.start(),
            Control::Stop(Stop::Restarting(message)) => self.stop_for_restart(message),
            Control::Stop(how) => {
                let n = match how {
                    // RFC 9003: tell the neighbor why.
                    Stop::Shutdown(message) => {
                        Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, &message)
                    }
                    Stop::Cease(subcode) => Notification::new(code::CEASE, subcode, vec![]),
                    Stop::Restarting(_) => return,
                };
                self.stop(n);
            }
            Control::Incoming(stream) => self.incoming(stream),
            Control::Clear(how, reply) => {
                let _ = reply.send(self.clear(how));
            }
            Control::Settings(s, reply) => {
                let _ = reply.send(self.apply_settings(*s));
            }
        }
    }

    fn start(&mut self) {
        self.admin_down = false;
        self.set_held_down(false);
        self.event(Event::ManualStart);
    }

    /// Ends the session with this NOTIFICATION (if there is a connection to send it on).
    fn stop(&mut self, n: Notification) {
        self.admin_down = true;
        if self.conn.is_some() && self.fsm.state() != State::Idle {
            self.set_error(SessionError::Stopped(n.clone()));
            self.notify(n);
        }
        // ManualStop sends a bare Cease in OpenSent and later; ours went first.
        self.event_with(Event::ManualStop, |a| match a {
            Action::SendNotification(_) => None,
            other => Some(other),
        });
    }

    /// Ends the session for a graceful restart of ours (RFC 4724 section 4.1): a neighbor
    /// that helps gets no NOTIFICATION, the connection just closes; another gets Cease /
    /// Administrative Shutdown. Either way the pipeline keeps the neighbor's routes.
    fn stop_for_restart(&mut self, message: String) {
        self.ending = Ending::Restarting;
        let helped = self.fsm.state() == State::Established
            && self.negotiated.as_ref().is_some_and(|n| n.restart_helped);
        if !helped {
            self.stop(Notification::cease_with_message(
                cease::ADMINISTRATIVE_SHUTDOWN,
                &message,
            ));
            return;
        }
        info!(
            neighbor = %self.name(),
            restart_time_s = self.s.graceful_restart.map_or(0, |g| g.restart_time),
            "graceful restart: connection closed without NOTIFICATION; the neighbor keeps our routes meanwhile"
        );
        self.admin_down = true;
        self.event_with(Event::ManualStop, |a| match a {
            Action::SendNotification(_) => None,
            other => Some(other),
        });
    }

    /// `clear bgp neighbor` (Junos): see [`Clear`].
    fn clear(&mut self, how: Clear) -> Result<(), ClearError> {
        let established = self.fsm.state() == State::Established;
        match how {
            Clear::Disable => {
                info!(neighbor = %self.name(), "disabled by an operator: Cease / Administrative Shutdown; no session until enabled");
                self.set_disabled(true);
                Ok(())
            }
            Clear::Enable => {
                if self.status.borrow().disabled {
                    info!(neighbor = %self.name(), "enabled by an operator");
                    self.set_disabled(false);
                }
                Ok(())
            }
            Clear::Hard if self.status.borrow().disabled => Err(ClearError::Disabled),
            Clear::Hard => {
                info!(neighbor = %self.name(), "cleared by an operator: Cease / Administrative Reset, then up again");
                if self.conn.is_some() && self.fsm.state() != State::Idle {
                    self.stop(Notification::cease_with_message(
                        cease::ADMINISTRATIVE_RESET,
                        "cleared by an operator",
                    ));
                }
                self.start();
                Ok(())
            }
            Clear::Soft => {
                let (Some(p), Some(j), true) = (&self.pipeline, &self.joined, established) else {
                    return Err(ClearError::NotEstablished);
                };
                let enhanced = self
                    .negotiated
                    .as_ref()
                    .filter(|n| n.enhanced_route_refresh)
                    .map(|n| n.families.clone())
                    .unwrap_or_default();
                info!(neighbor = %self.name(), "soft clear: our routes sent again");
                // One dump per family with enhanced route refresh (each framed by its BoRR
                // and EoRR), one for all of them without.
                let msgs: Vec<Routed> = if enhanced.is_empty() {
                    vec![p.refresh(j, None)]
                } else {
                    enhanced.iter().map(|f| p.refresh(j, Some(*f))).collect()
                };
                self.inlet.extend(msgs);
                Ok(())
            }
            Clear::SoftInbound => {
                let Some(n) = self.negotiated.clone().filter(|_| established) else {
                    return Err(ClearError::NotEstablished);
                };
                if !n.route_refresh {
                    return Err(ClearError::NoRouteRefresh);
                }
                info!(neighbor = %self.name(), "soft inbound clear: ROUTE-REFRESH sent for every negotiated family");
                for f in &n.families {
                    let rr = RouteRefresh {
                        afi: f.afi(),
                        subtype: RouteRefresh::REQUEST,
                        safi: f.safi(),
                    };
                    self.send(Bytes::from(rr.encode()));
                }
                Ok(())
            }
        }
    }

    fn incoming(&mut self, stream: TcpStream) {
        let external_single_hop = !self.s.internal && !self.s.multihop;
        match socket::prepare_accepted(&stream, self.s.ttl_security, external_single_hop) {
            Ok(()) => {}
            Err(e @ socket::AcceptError::TtlTooLow { .. }) => {
                // RFC 5082 section 3: dropped, nothing sent back.
                warn!(neighbor = %self.name(), from = ?stream.peer_addr().ok(), "connection dropped: {e}");
                return;
            }
            Err(e) => warn!(neighbor = %self.name(), "{e}"),
        }
        if self.admin_down || self.held_down {
            self.log_rejected(stream.peer_addr().ok());
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
                    // Started by the neighbor: the restart we were waiting for is moot.
                    self.timers.idle_hold = None;
                    self.event(Event::AutomaticStart);
                    if let Some(h) = self.connecting.take() {
                        h.abort();
                    }
                }
                debug!(neighbor = %self.name(), "accepted connection");
                self.conn = Some(Conn::new(stream, false, self.counters.clone()));
                self.event(Event::TcpConnectionConfirmed);
            }
            State::OpenSent | State::OpenConfirm => {
                // Collision (RFC 4271 section 6.8): the connection initiated by the speaker
                // with the higher BGP Identifier survives. The neighbor's identifier comes
                // with its OPEN: decide now if we have it, else when the new connection
                // brings one.
                let conn = Conn::new(stream, false, self.counters.clone());
                let existing_incoming = self.conn.as_ref().is_some_and(|c| !c.outgoing);
                match self.negotiated.as_ref().map(|n| n.peer_id) {
                    Some(peer_id) => self.resolve_collision(conn, peer_id, None),
                    // The neighbor connected again before its OPEN came on its older
                    // connection: it gave that one up, or that one never was its speaker
                    // (a connection that stalls before its OPEN). Two connections from one
                    // side are no collision (RFC 4271 section 6.8 is between the two
                    // directions): the newer one takes over.
                    None if existing_incoming => {
                        debug!(neighbor = %self.name(), "a newer connection replaces one that sent no OPEN");
                        self.take_over(conn, None);
                    }
                    // Waits for its OPEN to resolve the collision with ours; a newer one
                    // replaces an older that is still waiting, for the same reason.
                    None => {
                        if let Some(stale) = self.secondary.replace(conn) {
                            stale.close();
                        }
                    }
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
        info!(neighbor = %self.name(), "connection collision: continuing on the neighbor's connection");
        if let Some(old) = self.conn.take() {
            reject_conn(old, cease::CONNECTION_COLLISION_RESOLUTION);
        }
        self.take_over(new, open);
    }

    /// Starts the session over on `new`, an incoming connection, closing the one it had;
    /// `open` is the neighbor's OPEN on it if it was already read.
    fn take_over(&mut self, new: Conn, open: Option<Bytes>) {
        if let Some(old) = self.conn.take() {
            old.close();
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

    pub(super) fn set_error(&self, e: SessionError) {
        self.status
            .send_modify(|st| st.last_error = Some(Stamped::now(e)));
    }

    /// A connection refused while the session is held or shut down, logged as BIRD does
    /// ("Connection rejected"), at most once a minute with how many came meanwhile: a
    /// neighbor retrying every few seconds would fill the log.
    fn log_rejected(&mut self, from: Option<std::net::SocketAddr>) {
        self.rejected.0 += 1;
        let due = self
            .rejected
            .1
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(60));
        if !due {
            return;
        }
        let why = if self.held_down {
            "held down by its prefix limit until cleared (ribshard clear bgp neighbor)"
        } else if self.status.borrow().disabled {
            "disabled by an operator (ribshard enable bgp neighbor)"
        } else {
            "administratively down"
        };
        info!(
            neighbor = %self.name(),
            from = ?from,
            count = self.rejected.0,
            "connection rejected (Cease / Connection Rejected): {why}"
        );
        self.rejected = (0, Some(Instant::now()));
    }

    /// Disables the neighbor (a Cease / Administrative Shutdown ends a session that is up
    /// or coming up) or enables it again (the session starts).
    pub(super) fn set_disabled(&mut self, on: bool) {
        self.status.send_modify(|st| st.disabled = on);
        if on {
            self.stop(Notification::cease_with_message(
                cease::ADMINISTRATIVE_SHUTDOWN,
                "disabled by an operator",
            ));
            self.timers.idle_hold = None;
            self.timers.connect_retry = None;
        } else {
            self.start();
        }
    }

    pub(super) fn set_held_down(&mut self, on: bool) {
        self.held_down = on;
        if on {
            // A timer armed earlier (say, by a connect that failed before the neighbor
            // connected to us) must not bring the session back: only `clear` does.
            self.timers.idle_hold = None;
            self.timers.connect_retry = None;
        }
        self.status.send_modify(|st| st.held_down = on);
    }

    pub(super) fn send(&mut self, msg: Bytes) {
        if let Some(c) = self.conn.as_mut() {
            c.send(msg);
        }
    }

    /// Sends a NOTIFICATION, remembered as the last one sent.
    pub(super) fn notify(&mut self, n: Notification) {
        info!(neighbor = %self.name(), "NOTIFICATION sent: {n}");
        self.send(Bytes::from(n.encode()));
        self.notified = Some(n.clone());
        self.status
            .send_modify(|st| st.last_sent = Some(Stamped::now(n)));
    }

    pub(super) fn event(&mut self, e: Event) {
        self.event_with(e, Some);
    }

    /// Feeds an event, carrying out its actions as `adjust` changes them.
    pub(super) fn event_with(&mut self, e: Event, adjust: impl FnMut(Action) -> Option<Action>) {
        let before = self.fsm.state();
        let actions = self.fsm.handle(e).into_iter().filter_map(adjust).collect();
        self.execute(actions);
        let after = self.fsm.state();
        if before != after {
            info!(neighbor = %self.name(), "state {before} -> {after}");
            self.status.send_modify(|st| {
                st.state = after;
                st.since = std::time::SystemTime::now();
            });
        }
    }

    pub(super) fn execute(&mut self, actions: Vec<Action>) {
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
                Action::SendOpen => {
                    // A hold time changed by a reload: proposed from this OPEN on, and the
                    // FSM negotiates with what this OPEN says.
                    if let Some(open) = self.next_open.take() {
                        self.our_open = open;
                        let mut c = *self.fsm.config();
                        c.hold_time = self.s.hold_time;
                        self.fsm.set_config(c);
                    }
                    let open = Bytes::from(self.our_open.encode());
                    self.open_sent = Some(open.clone());
                    self.send(open)
                }
                Action::SendKeepalive => self.send(Bytes::copy_from_slice(&keepalive())),
                Action::SendNotification(n) => self.notify(n),
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
                    info!(neighbor = %self.name(), hold_time, keepalive_time, families = ?n.as_ref().map(|n| &n.families), "session Established");
                    self.status.send_modify(|st| {
                        st.negotiated = n.clone();
                        st.established_transitions += 1;
                    });
                    self.notified = None;
                    if let Some(negotiated) = n {
                        // Ordered before any UPDATE of this session.
                        self.pipeline_up(&negotiated);
                        if self.tap.is_some() {
                            let (local, remote) = {
                                let st = self.status.borrow();
                                (st.local, st.remote)
                            };
                            let opened = Box::new(Opened {
                                sent: self.open_sent.clone().unwrap_or_default(),
                                received: self.open_received.clone().unwrap_or_default(),
                                local,
                                remote,
                                status: self.status.subscribe(),
                                epoch: self.epoch,
                            });
                            self.tap(Inbound::Up {
                                peer: self.index,
                                negotiated,
                                opened,
                            });
                        }
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
                            Ending::Other | Ending::Restarting => false,
                        })
                        .filter(|gr| gr.keeps_routes());
                    self.publish_received();
                    self.adj_rib_in = Default::default();
                    self.refreshing = [None, None];
                    self.negotiated = None;
                    self.next_hop_warned = false;
                    self.status.send_modify(|st| {
                        st.negotiated = None;
                        st.prefixes = [0; 2];
                    });
                    if was_up {
                        self.status.send_modify(|st| st.flaps += 1);
                        info!(neighbor = %self.name(), graceful_restart = stale.is_some(), "session down");
                        // Restarting: the process ends with the pipeline as it is; a
                        // withdrawal now would reach neighbors not yet closed.
                        if ending != Ending::Restarting {
                            self.pipeline_down(stale.as_ref());
                        }
                        let reason = match (self.notified.take(), &ending) {
                            (Some(n), _) => DownReason::LocalNotification(n),
                            (None, Ending::Notified { .. }) => {
                                match self.status.borrow().last_received.clone() {
                                    Some(n) => DownReason::RemoteNotification(n.value),
                                    None => DownReason::RemoteClosed,
                                }
                            }
                            (None, Ending::Lost) => DownReason::RemoteClosed,
                            (None, Ending::Other | Ending::Restarting) => DownReason::LocalClosed,
                        };
                        self.tap(Inbound::Down {
                            peer: self.index,
                            stale,
                            reason,
                        });
                    }
                }
            }
        }
    }

    pub(super) fn connect(&mut self) {
        if let Some(h) = self.connecting.take() {
            h.abort();
        }
        let peer = SocketAddr::new(self.s.address, self.s.port);
        let local = self.s.local_address;
        let key = self.s.authentication_key.clone();
        let tcp_ao = self.s.tcp_ao.clone();
        let ttl_security = self.s.ttl_security;
        let external_single_hop = !self.s.internal && !self.s.multihop;
        let timeout = Duration::from_secs(u64::from(self.s.connect_retry_time.max(1)));
        self.connecting = Some(tokio::spawn(async move {
            let o = ConnectOptions {
                local,
                md5_key: key.as_deref().map(str::as_bytes),
                tcp_ao: tcp_ao.as_ref(),
                ttl_security,
                external_single_hop,
            };
            match tokio::time::timeout(timeout, socket::connect(peer, &o)).await {
                Ok(r) => r,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            }
        }));
    }

    pub(super) fn timers_expired(&mut self) {
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
            debug!(neighbor = %self.name(), "hold timer restarted: the neighbor's messages wait unread while routing work drains");
            self.timers.hold = Some(now + Duration::from_secs(u64::from(hold)));
        } else if hold_due {
            warn!(neighbor = %self.name(), "hold timer expired");
            self.ending = Ending::Lost;
            self.set_error(SessionError::HoldTimerExpired);
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
        if due(&mut self.timers.idle_hold) && !self.admin_down && !self.held_down {
            self.event(Event::IdleHoldTimerExpires);
        }
    }

    /// Whether we are not reading (backpressure: work waits to be handed on) while the
    /// neighbor's data waits for us, in our buffer or the socket's.
    pub(super) fn input_waiting(&self) -> bool {
        !self.nothing_pending()
            && self
                .conn
                .as_ref()
                .is_some_and(|c| c.has_message(self.max_len()) || c.unread_bytes() > 0)
    }

    /// A session that does not read (backpressure) would see the neighbor close only after
    /// working through everything it sent before: routes of a session that is over. The
    /// socket's TCP state tells it sooner; what was not read yet is dropped with the session.
    pub(super) fn check_closed_while_paused(&mut self) {
        if self.nothing_pending() || self.fsm.state() != State::Established {
            return;
        }
        if self.conn.as_ref().is_some_and(|c| c.peer_closed()) {
            info!(neighbor = %self.name(), "the neighbor closed the connection while its UPDATEs waited to be read");
            self.received(Err(ReadError::Closed(None)));
        }
    }

    /// RFC 9687: a neighbor that has not taken our data for the send hold time is gone.
    pub(super) fn check_send_hold(&mut self) {
        let stalled = self
            .conn
            .as_ref()
            .map_or(Duration::ZERO, |c| c.progress.stalled_for());
        if stalled > self.send_hold && self.fsm.state() != State::Idle {
            warn!(neighbor = %self.name(), ?stalled, "send hold timer expired: the neighbor is not reading");
            self.set_error(SessionError::SendHoldTimerExpired);
            self.event(Event::SendHoldTimerExpires);
        }
    }
}
