//! Session I/O: one tokio task per neighbor, listeners that hand accepted connections to
//! them, and the bounded channel that carries received UPDATEs to the pipeline.
//!
//! The task's work is split by what it handles: [`task`] runs the loop, the state machine
//! and the connections (collisions included), [`receive`] reads messages, [`routing`] hands
//! routes and peer events to the pipeline, [`deliver`] waits for room there.

pub mod adj_index;
mod conn;
mod deliver;
mod receive;
mod routing;
mod stale;
mod status;
mod task;

pub use status::{
    Counts, InputCounts, OutputQueue, SessionCounters, SessionError, SessionStatus, StaleRoutes,
    Stamped, MESSAGE_TYPES,
};

use crate::negotiate::{Negotiated, PeerSettings};
use crate::pipeline::Pipeline;
use crate::socket;
use bytes::Bytes;
use conn::{Conn, Progress};
use ribshard_fsm::State;
use ribshard_wire::notification::{cease, code, Notification};
use ribshard_wire::{Family, SessionParams};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use task::{Session, Shared};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

/// What sessions hand to the pipeline.
#[derive(Debug)]
pub enum Inbound {
    /// The session reached Established.
    Up {
        peer: usize,
        negotiated: Negotiated,
        opened: Box<Opened>,
    },
    /// A received UPDATE, validated (its RFC 7606 outcome is recomputed cheaply by the
    /// receiver, which owns the routes): the whole message and how to decode it.
    Update {
        peer: usize,
        message: Bytes,
        params: SessionParams,
    },
    /// An UPDATE in error, as received (for BMP's Route Mirroring, RFC 7854 section 4.7):
    /// one RFC 7606 handled (treat-as-withdraw or attribute discard; it also comes as an
    /// [`Inbound::Update`], after this), or one that resets the session (before its Down).
    Errored { peer: usize, message: Bytes },
    /// A ROUTE-REFRESH request (RFC 2918) for a family.
    RouteRefresh { peer: usize, afi: u16, safi: u8 },
    /// The session left Established. Without `stale`, every route learned from the peer
    /// goes now; with it (RFC 4724 section 4.2, the peer is restarting gracefully), routes of
    /// those families are kept as stale for the restart time, until the peer's End-of-RIB.
    Down {
        peer: usize,
        stale: Option<crate::negotiate::GracefulRestart>,
        reason: DownReason,
    },
    /// End-of-RIB from the peer (RFC 4724 section 2): stale routes of the family left now go.
    EndOfRib { peer: usize, family: Family },
}

/// How a session came up, as a monitoring station is told (BMP Peer Up, RFC 7854 section
/// 4.10): both OPENs as they went over the wire, and the connection's ends.
#[derive(Clone, Debug)]
pub struct Opened {
    pub sent: Bytes,
    pub received: Bytes,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    /// The session's status from now on (its Adj-RIB-In counts, for statistics).
    pub status: watch::Receiver<SessionStatus>,
    /// Which of the neighbor's sessions this is, as its update-group membership names it
    /// (`MemberId::epoch`): what the pipeline's [`crate::pipeline::SentTap`] is told.
    pub epoch: u32,
}

/// Why a session left Established, in the terms of BMP's Peer Down (RFC 7854 section 4.9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DownReason {
    /// We sent this NOTIFICATION (an error, an administrative stop, the hold timer).
    LocalNotification(Notification),
    /// We closed the connection without a NOTIFICATION.
    LocalClosed,
    /// The neighbor sent this NOTIFICATION.
    RemoteNotification(Notification),
    /// The connection broke or the neighbor closed it without a NOTIFICATION.
    RemoteClosed,
}

/// Where the listener sends a connection: a session, and the local address it expects.
type Route = (mpsc::Sender<Control>, Option<IpAddr>);

enum Control {
    Start,
    Stop(Stop),
    Incoming(TcpStream),
    Clear(Clear, oneshot::Sender<Result<(), ClearError>>),
    Settings(Box<PeerSettings>, oneshot::Sender<SettingsApplied>),
}

/// What a change of settings did to a session that is up (nothing to one that is not: it
/// uses the new settings when it comes up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SettingsApplied {
    /// The new import policy is being applied to the routes the neighbor sent, kept as
    /// received (no route refresh asked of it).
    pub reimported: bool,
    /// The neighbor moved to the update group of its new export (policy or next hop); it
    /// is sent what that changes.
    pub regrouped: bool,
}

/// The settings a neighbor's OPEN, or its connection, carries: a change of any of these
/// needs a new session (RFC 4271 fixes them when the OPENs are exchanged), as do the
/// routing roles the shards take when it comes up. Empty when the change can be applied
/// to the running one; else each reason, in words an operator can act on.
pub fn needs_new_session(was: &PeerSettings, now: &PeerSettings) -> Vec<&'static str> {
    let mut why = Vec::new();
    let mut differ = |changed: bool, what: &'static str| {
        if changed {
            why.push(what);
        }
    };
    differ(
        was.address != now.address || was.port != now.port,
        "address or port",
    );
    differ(was.local_address != now.local_address, "local-address");
    differ(was.local_as != now.local_as, "local-as (in the OPEN)");
    differ(
        was.peer_as != now.peer_as,
        "peer-as (checked against its OPEN)",
    );
    differ(was.router_id != now.router_id, "router-id (in the OPEN)");
    differ(was.internal != now.internal, "type (internal or external)");
    differ(
        was.families != now.families,
        "families (capabilities in the OPEN)",
    );
    differ(
        was.add_path_receive != now.add_path_receive || was.add_path_send != now.add_path_send,
        "add-path (a capability in the OPEN)",
    );
    // The paths already sent carry identifiers of the old selection: a new session sends
    // the new one from the start.
    differ(
        was.add_path_select != now.add_path_select,
        "add-path-send (the paths sent per prefix)",
    );
    differ(was.role != now.role, "role (a capability in the OPEN)");
    differ(
        was.authentication_key != now.authentication_key,
        "authentication-key (TCP MD5 on the connection)",
    );
    differ(
        was.tcp_ao != now.tcp_ao,
        "tcp-ao (TCP-AO on the connection)",
    );
    differ(
        was.ttl_security != now.ttl_security || was.multihop != now.multihop,
        "ttl-security or multihop (the connection's TTL)",
    );
    let (a, b) = (&was.routing, &now.routing);
    // Routing roles the shards and loop checks read when the session comes up (its
    // routes are interned with these checks, and the shards hold its role). A new
    // configured group, or `no-prepend-global-as` (what it is sent only), moves it to
    // another update group instead: no new session.
    differ(
        a.cluster != b.cluster || a.cluster_ids != b.cluster_ids,
        "cluster (route reflection: how its routes are reflected and checked for loops)",
    );
    differ(
        a.route_server_client != b.route_server_client,
        "route-server-client (how its routes are decided and sent)",
    );
    differ(
        a.loops != b.loops
            || a.global_as != b.global_as
            || a.local_as_private != b.local_as_private,
        "loops or local-as options (checks on the routes as received)",
    );
    why
}

/// How a session is stopped.
#[derive(Clone)]
enum Stop {
    /// Cease / Administrative Shutdown, with an RFC 9003 message.
    Shutdown(String),
    /// Cease with this subcode (RFC 4486), no data.
    Cease(u8),
    /// We are stopping to restart gracefully (RFC 4724): a neighbor that keeps our routes
    /// sees the connection close without a NOTIFICATION (any NOTIFICATION would end its
    /// help, RFC 8538 aside), the others get Cease / Administrative Shutdown with the
    /// message; the pipeline is told nothing, so no withdrawal reaches any neighbor.
    Restarting(String),
}

/// What `clear bgp neighbor` does (Junos words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clear {
    /// Cease / Administrative Reset (RFC 4486), then the session comes up again; a neighbor
    /// held down by its prefix limit comes back.
    Hard,
    /// Our routes sent again (between BoRR and EoRR when enhanced route refresh was
    /// negotiated, RFC 7313).
    Soft,
    /// A ROUTE-REFRESH asks the neighbor for its routes (RFC 2918), every negotiated family.
    SoftInbound,
    /// Junos `deactivate` / `disable`: Cease / Administrative Shutdown (RFC 4486, with an
    /// RFC 9003 message), and no session until [`Clear::Enable`] (connections refused).
    Disable,
    /// Ends a [`Clear::Disable`]: the session starts again.
    Enable,
}

/// Why a clear could not be done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClearError {
    #[error("the session is not Established")]
    NotEstablished,
    #[error("the neighbor did not negotiate route refresh (RFC 2918)")]
    NoRouteRefresh,
    #[error("the session has ended (neighbor removed by a reload)")]
    Gone,
    #[error("the neighbor is disabled (ribshard enable bgp neighbor)")]
    Disabled,
}

pub struct SessionHandle {
    pub settings: PeerSettings,
    tx: mpsc::Sender<Control>,
    status: watch::Receiver<SessionStatus>,
    counters: Arc<SessionCounters>,
    /// The write progress of the current connection, if any.
    output: Arc<std::sync::Mutex<Option<Arc<Progress>>>>,
    task: JoinHandle<()>,
}

impl SessionHandle {
    pub fn status(&self) -> SessionStatus {
        self.status.borrow().clone()
    }

    /// Messages and octets in and out over the session's life.
    pub fn counts(&self) -> Counts {
        self.counters.read()
    }

    /// What waits in the connection's write queue now.
    pub fn output_queue(&self) -> OutputQueue {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| p.queue())
            .unwrap_or_default()
    }

    /// `clear bgp neighbor`: see [`Clear`].
    pub async fn clear(&self, how: Clear) -> Result<(), ClearError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Control::Clear(how, tx))
            .await
            .map_err(|_| ClearError::Gone)?;
        rx.await.unwrap_or(Err(ClearError::Gone))
    }
    /// New settings, applied with the session kept up: only those
    /// [`needs_new_session`] finds no reason in (the caller checks). Policies apply to
    /// the routes kept as received and to what the neighbor is sent; prefix limits at
    /// once; the hold time from the next OPEN; timers from their next start.
    pub async fn apply_settings(&mut self, s: PeerSettings) -> SettingsApplied {
        self.settings = s.clone();
        let (tx, rx) = oneshot::channel();
        if self
            .tx
            .send(Control::Settings(Box::new(s), tx))
            .await
            .is_err()
        {
            return SettingsApplied::default();
        }
        rx.await.unwrap_or_default()
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
                .map_err(|e| {
                    // Ports under 1024 need root or CAP_NET_BIND_SERVICE: say so.
                    let hint = if e.kind() == io::ErrorKind::PermissionDenied && addr.port() < 1024 {
                        " (ports under 1024 need root or CAP_NET_BIND_SERVICE: see docs/OPERATIONS.md, \"Without root\")"
                    } else {
                        ""
                    };
                    io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}{hint}"))
                })?;
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

    /// No sessions and no listeners (what a daemon holds once it has shut its sessions down).
    pub fn none() -> Sessions {
        Sessions {
            peers: Vec::new(),
            listeners: Vec::new(),
            sockets: Vec::new(),
            routes: Arc::default(),
            inbound: None,
            pipeline: None,
        }
    }

    /// Starts a session for a neighbor (at start, or added by a configuration reload): its
    /// MD5 key and GTSM go on the listeners of its family, and incoming connections from its
    /// address reach it. Returns its peer index.
    pub async fn add(&mut self, s: PeerSettings) -> io::Result<usize> {
        self.add_after(s, None).await
    }

    /// [`Sessions::add`] for a neighbor whose earlier session (peer index `previous`) a
    /// configuration change ended: the operator's history of the neighbor goes on (flaps,
    /// transitions, the last error and NOTIFICATIONs, the Cease we sent among them).
    pub async fn add_after(
        &mut self,
        s: PeerSettings,
        previous: Option<usize>,
    ) -> io::Result<usize> {
        // Where the kernel has no TCP-AO the session would run unauthenticated, or not
        // at all if it has no listener: refuse it here, whatever it listens on.
        if s.tcp_ao.is_some() && !socket::tcp_ao_supported() {
            let e = socket::tcp_ao_unsupported();
            return Err(io::Error::new(
                e.kind(),
                format!("neighbor {}: tcp-ao: {e}", s.name()),
            ));
        }
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
            // TCP-AO likewise: a Master Key Tuple belongs to the neighbor's connections
            // (RFC 5925 section 3.1).
            if let Some(k) = &s.tcp_ao {
                socket::set_ao(&**l, s.address, k, false)?;
            }
        }
        let i = self.peers.len();
        let (tx, rx) = mpsc::channel(16);
        let mut initial = SessionStatus::default();
        if let Some(old) = previous.and_then(|j| self.peers.get(j)) {
            let o = old.status();
            initial.flaps = o.flaps;
            initial.established_transitions = o.established_transitions;
            initial.last_error = o.last_error;
            initial.last_sent = o.last_sent;
            initial.last_received = o.last_received;
        }
        let (status_tx, status_rx) = watch::channel(initial);
        let counters = Arc::new(SessionCounters::default());
        let output = Arc::new(std::sync::Mutex::new(None));
        let session = Session::new(
            i,
            s.clone(),
            Shared {
                status: status_tx,
                counters: counters.clone(),
                output: output.clone(),
            },
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
            counters,
            output,
            task,
        });
        Ok(i)
    }

    /// Reserves a peer index for a source of routes that is not a session (originated
    /// networks, an injected RIB: [`crate::local::LocalSource`]): no session runs under it
    /// and none is given it. Its handle stays Idle, with `settings` (a description and the
    /// source's AS) for logs.
    pub fn reserve(&mut self, settings: PeerSettings) -> usize {
        let i = self.peers.len();
        // A handle with nothing behind it: its control channel's other end is gone, its
        // status never changes, its task is done.
        let (tx, _) = mpsc::channel(1);
        let (_, status) = watch::channel(SessionStatus::default());
        self.peers.push(SessionHandle {
            settings,
            tx,
            status,
            counters: Arc::default(),
            output: Arc::default(),
            task: tokio::spawn(async {}),
        });
        i
    }

    /// Ends the session of a neighbor that a configuration reload removed or changed: Cease
    /// with `subcode` (RFC 4486: Peer De-configured, or Other Configuration Change), its
    /// routes leave the pipeline, connections from its address are no longer taken for it,
    /// and its MD5 or TCP-AO key leaves the listeners unless another session of that address
    /// uses one.
    /// Waits up to `grace` for the session to be down.
    pub async fn remove(&mut self, i: usize, subcode: u8, grace: Duration) {
        let Some(h) = self.peers.get(i) else { return };
        let address = h.settings.address;
        // Whether another session of the address still uses an MD5 key, or this TCP-AO key.
        let (others_md5, others_ao) = {
            let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
            if let Some(v) = routes.get_mut(&address) {
                v.retain(|(j, _)| *j != i);
                if v.is_empty() {
                    routes.remove(&address);
                }
            }
            let others: Vec<&PeerSettings> = routes
                .get(&address)
                .into_iter()
                .flatten()
                .filter_map(|(j, _)| self.peers.get(*j).map(|p| &p.settings))
                .collect();
            (
                others.iter().any(|o| o.authentication_key.is_some()),
                others.iter().any(|o| o.tcp_ao == h.settings.tcp_ao),
            )
        };
        for (addr, l) in &self.sockets {
            if addr.is_ipv4() != address.is_ipv4() {
                continue;
            }
            if h.settings.authentication_key.is_some() && !others_md5 {
                if let Err(e) = socket::set_md5(&**l, address, None) {
                    warn!(neighbor = %h.settings.name(), "cannot remove the MD5 key from a listener: {e}");
                }
            }
            if let Some(k) = h.settings.tcp_ao.as_ref().filter(|_| !others_ao) {
                if let Err(e) = socket::remove_ao(&**l, address, k) {
                    warn!(neighbor = %h.settings.name(), "cannot remove the TCP-AO key from a listener: {e}");
                }
            }
        }
        // A deferral of advertising no longer waits for it.
        if let Some(p) = &self.pipeline {
            p.deferral_forget(i as u32);
        }
        let _ = h.tx.send(Control::Stop(Stop::Cease(subcode))).await;
        // Its task stays, idle: what it still has queued for the pipeline (its PeerDown,
        // the withdrawal of its routes) must get there.
        if !h.wait_for(grace, |s| s.state == State::Idle).await {
            warn!(neighbor = %h.settings.name(), "session did not end within the grace time");
        }
    }

    /// Stops every session with Cease / Administrative Shutdown and the message (RFC 9003),
    /// and waits up to `grace` for the NOTIFICATIONs to be written.
    pub async fn shutdown(self, message: &str, grace: Duration) {
        self.stop_all(Stop::Shutdown(message.to_string()), grace)
            .await
    }

    /// Stops every session for a graceful restart of ours (RFC 4724): the neighbors that
    /// help (see [`crate::Negotiated::restart_helped`]) keep our routes and go on
    /// forwarding on them; the others are sent Cease / Administrative Shutdown with the
    /// message. Nothing reaches the pipeline: it is left as it is for the process to end.
    pub async fn shutdown_for_restart(self, message: &str, grace: Duration) {
        self.stop_all(Stop::Restarting(message.to_string()), grace)
            .await
    }

    async fn stop_all(self, how: Stop, grace: Duration) {
        for l in &self.listeners {
            l.abort();
        }
        for p in &self.peers {
            let _ = p.tx.send(Control::Stop(how.clone())).await;
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

/// Answers a connection we will not take with a NOTIFICATION, then closes it.
pub(super) async fn reject(stream: TcpStream, n: Notification) {
    let mut c = Conn::new(stream, false, Arc::default());
    c.send(Bytes::from(n.encode()));
    c.close();
}

/// Closes a connection after a Cease with this subcode.
pub(super) fn reject_conn(mut c: Conn, subcode: u8) {
    c.send(Bytes::from(
        Notification::new(code::CEASE, subcode, vec![]).encode(),
    ));
    c.close();
}
