//! The RTR client (RFC 8210): keeps the RPKI tables from the most preferred cache that
//! answers, and publishes a [`Snapshot`] after every End of Data that changed something.
//!
//! Caches are tried in order of preference (lower first, RFC 8210 section 10); the client
//! stays with the one it reached until that one fails, then starts again from the most
//! preferred. It speaks version 2 (ASPA) and steps down to what a cache supports (RFC 8210
//! section 7). While no cache answers, the data last received is kept until its expire
//! interval ends, then dropped (RFC 8210 section 6): every route becomes not-found.
//! Runs on a thread of its own, so publishing (which hands the snapshot to the pipeline)
//! may block.

use crate::aspa::AspaTable;
use crate::pdu::{self, ErrorCode, FromCache, RtrError, Timing};
use crate::vrp::{Vrp, VrpTable};
use crate::Snapshot;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// A cache to ask, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    pub address: SocketAddr,
    /// Lower is preferred (RFC 8210 section 10).
    pub preference: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    pub caches: Vec<CacheConfig>,
    /// The highest protocol version to offer (2: with ASPA).
    pub max_version: u8,
    /// How long to wait between rounds of connection attempts when no cache answers,
    /// until a cache gives its own retry interval.
    pub retry: Duration,
}

/// Where a cache's session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// Not tried yet, or a more preferred cache is in use.
    Idle,
    Connecting,
    /// Connected, waiting for the first End of Data.
    Syncing,
    /// Connected and its data in use.
    Up,
    /// Its last attempt failed.
    Down,
}

impl CacheState {
    pub fn name(self) -> &'static str {
        match self {
            CacheState::Idle => "idle",
            CacheState::Connecting => "connecting",
            CacheState::Syncing => "syncing",
            CacheState::Up => "up",
            CacheState::Down => "down",
        }
    }
}

/// Why a cache session ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("connect: {0}")]
    Connect(String),
    #[error("connection: {0}")]
    Io(String),
    #[error("the cache closed the connection")]
    Closed,
    #[error("no answer within {0} s")]
    Timeout(u64),
    #[error("the cache reported {code}: {text}")]
    Reported { code: ErrorCode, text: String },
    #[error("{0}")]
    Protocol(#[from] RtrError),
    #[error("the cache changed its session id from {was} to {now} without a Cache Reset")]
    SessionChanged { was: u16, now: u16 },
}

/// What `show validation session` shows of one cache.
#[derive(Clone, Debug)]
pub struct CacheStatus {
    pub config: CacheConfig,
    pub state: CacheState,
    pub version: Option<u8>,
    pub session_id: Option<u16>,
    pub serial: Option<u32>,
    pub timing: Timing,
    /// Records in its last complete data: IPv4 and IPv6 VRPs, ASPA records.
    pub records: (usize, usize, usize),
    pub last_update: Option<SystemTime>,
    pub since: Option<SystemTime>,
    /// Why its last session ended, and when.
    pub last_error: Option<(SystemTime, SessionError)>,
    pub flaps: u32,
}

/// The client's state, read by the management API.
#[derive(Debug, Default)]
pub struct Status {
    pub caches: Vec<CacheStatus>,
    /// The snapshot published last.
    pub current: Snapshot,
    /// The data was dropped because every cache stayed away past its expire interval.
    pub expired: bool,
}

/// Receives each snapshot (called on the client's thread; may block).
pub type Publish = Box<dyn FnMut(Snapshot) + Send>;

/// The running client: its status, and a handle that stops it when dropped.
pub struct Client {
    pub status: Arc<Mutex<Status>>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Client {
    /// Starts the client on its own thread (`rs-rtr`). `last`: the snapshot the shards
    /// hold now (a client started again by a reload), which the first data is compared
    /// with, so the routes a changed cache set no longer covers are judged again too, and
    /// whose version the next one follows.
    pub fn start(
        config: ClientConfig,
        publish: Publish,
        last: Snapshot,
    ) -> std::io::Result<Client> {
        let status = Arc::new(Mutex::new(Status {
            caches: config
                .caches
                .iter()
                .map(|c| CacheStatus {
                    config: c.clone(),
                    state: CacheState::Idle,
                    version: None,
                    session_id: None,
                    serial: None,
                    timing: Timing::default(),
                    records: (0, 0, 0),
                    last_update: None,
                    since: None,
                    last_error: None,
                    flaps: 0,
                })
                .collect(),
            ..Status::default()
        }));
        let (stop, stopped) = watch::channel(false);
        let st = status.clone();
        let thread = std::thread::Builder::new()
            .name("rs-rtr".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "rpki: cannot start the RTR client");
                        return;
                    }
                };
                let mut run = Run {
                    config,
                    status: st,
                    publish,
                    vrps: last.vrps,
                    aspas: last.aspas,
                    version: last.version,
                    published: false,
                    kept_until: None,
                };
                rt.block_on(async move {
                    let mut stopped = stopped;
                    tokio::select! {
                        _ = run.run() => {}
                        _ = stopped.wait_for(|s| *s) => {}
                    }
                });
            })?;
        Ok(Client {
            status,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Run {
    config: ClientConfig,
    status: Arc<Mutex<Status>>,
    publish: Publish,
    vrps: Arc<VrpTable>,
    aspas: Arc<AspaTable>,
    version: u64,
    /// Some data of this client's was published.
    published: bool,
    /// The data in use came from a cache no longer connected: dropped at this time.
    kept_until: Option<Instant>,
}

/// A connection's protocol state.
struct Session {
    version: u8,
    id: Option<u16>,
    serial: Option<u32>,
    timing: Timing,
}

const ANSWER_WITHIN: Duration = Duration::from_secs(60);

impl Run {
    fn set(&self, i: usize, f: impl FnOnce(&mut CacheStatus)) {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = s.caches.get_mut(i) {
            f(c);
        }
    }

    fn order(&self) -> Vec<usize> {
        let mut o: Vec<usize> = (0..self.config.caches.len()).collect();
        o.sort_by_key(|&i| self.config.caches[i].preference);
        o
    }

    async fn run(&mut self) {
        loop {
            let mut retry = self.config.retry;
            for i in self.order() {
                let cache = self.config.caches[i].clone();
                let mut version = self.config.max_version.min(2);
                loop {
                    let r = self.session(i, &cache, version).await;
                    let err = match r {
                        Ok(()) => SessionError::Closed,
                        Err(e) => e,
                    };
                    // RFC 8210 section 7: a cache refusing our version names its own.
                    if let SessionError::Reported {
                        code: ErrorCode::UnsupportedProtocolVersion,
                        ..
                    } = err
                    {
                        if let Some(v) = self
                            .get(i, |c| c.version)
                            .flatten()
                            .filter(|v| *v < version)
                        {
                            version = v;
                            continue;
                        }
                        if version > 0 {
                            version -= 1;
                            continue;
                        }
                    }
                    tracing::warn!(cache = %cache.address, error = %err, "rpki: cache session ended");
                    let was_up = self.get(i, |c| c.state) == Some(CacheState::Up);
                    self.set(i, |c| {
                        c.state = CacheState::Down;
                        c.last_error = Some((SystemTime::now(), err));
                        c.flaps += u32::from(was_up);
                    });
                    break;
                }
                // The cache's own retry interval, once it gave one.
                let timing = self.get(i, |c| c.session_id.map(|_| c.timing)).flatten();
                if let Some(t) = timing {
                    retry = retry.min(Duration::from_secs(u64::from(t.retry.max(1))));
                }
                self.expire_if_due();
            }
            let wait = match self.kept_until {
                Some(t) => retry.min(t.saturating_duration_since(Instant::now())),
                None => retry,
            };
            tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
            self.expire_if_due();
        }
    }

    /// Reads cache `i`'s status.
    fn get<T>(&self, i: usize, f: impl FnOnce(&CacheStatus) -> T) -> Option<T> {
        let s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.caches.get(i).map(f)
    }

    /// No cache has answered since the data's expire interval began: drop it.
    fn expire_if_due(&mut self) {
        if self.kept_until.is_some_and(|t| Instant::now() >= t) {
            self.kept_until = None;
            tracing::warn!(
                "rpki: no cache answered within the expire interval: dropping the RPKI data"
            );
            let changed = self.vrps.diff(&VrpTable::default());
            self.publish_tables(Arc::default(), Arc::default(), changed);
            self.status
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .expired = true;
        }
    }

    /// Publishes new tables in place of the current ones.
    fn publish_tables(
        &mut self,
        vrps: Arc<VrpTable>,
        aspas: Arc<AspaTable>,
        changed: Vec<crate::Key>,
    ) {
        let aspa_changed = *aspas != *self.aspas;
        // The first data is published even when it changes nothing (a client started
        // again on the same data): the status shows it as this client's.
        if changed.is_empty() && !aspa_changed && self.published {
            return;
        }
        self.published = true;
        self.version += 1;
        self.vrps = vrps.clone();
        self.aspas = aspas.clone();
        let snap = Snapshot {
            version: self.version,
            vrps,
            aspas,
            changed: Arc::new(changed),
            aspa_changed,
        };
        {
            let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
            s.current = snap.clone();
            s.expired = false;
        }
        (self.publish)(snap);
    }

    /// One connection to a cache: a Reset Query, then Serial Queries on its refresh timer
    /// or its Serial Notify, until it fails.
    async fn session(
        &mut self,
        i: usize,
        cache: &CacheConfig,
        version: u8,
    ) -> Result<(), SessionError> {
        self.set(i, |c| c.state = CacheState::Connecting);
        let mut sock =
            tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(cache.address))
                .await
                .map_err(|_| SessionError::Connect("no answer within 10 s".into()))?
                .map_err(|e| SessionError::Connect(e.to_string()))?;
        let _ = sock.set_nodelay(true);
        self.set(i, |c| {
            c.state = CacheState::Syncing;
            c.version = Some(version);
            c.session_id = None;
            c.serial = None;
        });
        let mut s = Session {
            version,
            id: None,
            serial: None,
            timing: Timing::default(),
        };
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut reset = true;
        loop {
            let q = if reset {
                pdu::reset_query(s.version)
            } else {
                pdu::serial_query(s.version, s.id.unwrap_or(0), s.serial.unwrap_or(0))
            };
            write(&mut sock, &q).await?;
            match self.response(i, &mut sock, &mut buf, &mut s, reset).await? {
                Answer::Done => reset = false,
                Answer::Reset => {
                    reset = true;
                    continue;
                }
            }
            let next_query =
                Instant::now() + Duration::from_secs(u64::from(s.timing.refresh.max(1)));
            // Wait for the refresh timer or a Serial Notify. Readiness, not a read, is
            // what the timer may cut short, so no PDU is ever half read.
            let due = tokio::time::Instant::from_std(next_query);
            match tokio::time::timeout_at(due, sock.readable()).await {
                Err(_) => {}
                Ok(r) => {
                    r.map_err(|e| SessionError::Io(e.to_string()))?;
                    match read_pdu(&mut sock, &mut buf, s.version).await? {
                        FromCache::SerialNotify { .. } => {}
                        FromCache::CacheReset => reset = true,
                        FromCache::ErrorReport { code, text } => {
                            return Err(SessionError::Reported { code, text })
                        }
                        _ => {
                            let report = pdu::error_report(
                                s.version,
                                ErrorCode::InvalidRequest,
                                &buf,
                                "PDU outside a response",
                            );
                            let _ = write(&mut sock, &report).await;
                            return Err(RtrError::Corrupt {
                                pdu: buf.get(1).copied().unwrap_or(0),
                                len: buf.len(),
                                why: "sent outside a response",
                            }
                            .into());
                        }
                    }
                }
            }
        }
    }

    /// Reads a response to a query up to its End of Data and applies it.
    async fn response(
        &mut self,
        i: usize,
        sock: &mut TcpStream,
        buf: &mut Vec<u8>,
        s: &mut Session,
        reset: bool,
    ) -> Result<Answer, SessionError> {
        let (mut announced, mut withdrawn): (Vec<Vrp>, Vec<Vrp>) = (Vec::new(), Vec::new());
        let mut aspas = if reset {
            AspaTable::default()
        } else {
            (*self.aspas).clone()
        };
        let mut began = false;
        loop {
            let m = match tokio::time::timeout(ANSWER_WITHIN, read_pdu(sock, buf, s.version)).await
            {
                Err(_) => return Err(SessionError::Timeout(ANSWER_WITHIN.as_secs())),
                Ok(Err(SessionError::Protocol(e))) => {
                    let _ = write(
                        sock,
                        &pdu::error_report(s.version, e.code(), buf, &e.to_string()),
                    )
                    .await;
                    return Err(e.into());
                }
                Ok(r) => r?,
            };
            match m {
                FromCache::CacheResponse { session } => {
                    if let Some(was) = s.id.filter(|was| *was != session && !reset) {
                        return Err(SessionError::SessionChanged { was, now: session });
                    }
                    s.id = Some(session);
                    began = true;
                }
                FromCache::Prefix { announce, vrp } if began => match announce {
                    true => announced.push(vrp),
                    false => withdrawn.push(vrp),
                },
                FromCache::Aspa { announce, aspa } if began => match announce {
                    true => aspas.set(aspa.customer, aspa.providers),
                    false => {
                        aspas.remove(aspa.customer);
                    }
                },
                FromCache::RouterKey if began => {}
                FromCache::EndOfData {
                    session,
                    serial,
                    timing,
                } if began => {
                    if s.id != Some(session) {
                        return Err(SessionError::SessionChanged {
                            was: s.id.unwrap_or(0),
                            now: session,
                        });
                    }
                    s.serial = Some(serial);
                    if let Some(t) = timing {
                        s.timing = t;
                    }
                    self.apply(reset, announced, withdrawn, aspas);
                    self.kept_until =
                        Some(Instant::now() + Duration::from_secs(u64::from(s.timing.expire)));
                    let (v4, v6) = self.vrps.counts();
                    let n_aspa = self.aspas.len();
                    let now = SystemTime::now();
                    self.set(i, |c| {
                        if c.state != CacheState::Up {
                            c.since = Some(now);
                        }
                        c.state = CacheState::Up;
                        c.session_id = Some(session);
                        c.serial = Some(serial);
                        c.timing = s.timing;
                        c.records = (v4, v6, n_aspa);
                        c.last_update = Some(now);
                    });
                    return Ok(Answer::Done);
                }
                FromCache::CacheReset => return Ok(Answer::Reset),
                FromCache::SerialNotify { .. } => {}
                FromCache::ErrorReport {
                    code: ErrorCode::NoDataAvailable,
                    text,
                } => {
                    // RFC 8210 section 8.4: try again later (or another cache).
                    return Err(SessionError::Reported {
                        code: ErrorCode::NoDataAvailable,
                        text,
                    });
                }
                FromCache::ErrorReport { code, text } => {
                    if code == ErrorCode::UnsupportedProtocolVersion {
                        let v = buf.first().copied().unwrap_or(0);
                        self.set(i, |c| c.version = Some(v));
                    }
                    return Err(SessionError::Reported { code, text });
                }
                _ => {
                    let _ = write(
                        sock,
                        &pdu::error_report(
                            s.version,
                            ErrorCode::InvalidRequest,
                            buf,
                            "PDU before a Cache Response",
                        ),
                    )
                    .await;
                    return Err(RtrError::Corrupt {
                        pdu: buf.get(1).copied().unwrap_or(0),
                        len: buf.len(),
                        why: "sent before a Cache Response",
                    }
                    .into());
                }
            }
        }
    }

    fn apply(&mut self, reset: bool, announced: Vec<Vrp>, withdrawn: Vec<Vrp>, aspas: AspaTable) {
        let (vrps, changed) = if reset {
            let t = VrpTable::new(announced);
            let changed = self.vrps.diff(&t);
            (t, changed)
        } else {
            self.vrps.with_changes(announced, withdrawn)
        };
        self.publish_tables(Arc::new(vrps), Arc::new(aspas), changed);
    }
}

enum Answer {
    Done,
    Reset,
}

async fn write(sock: &mut TcpStream, b: &[u8]) -> Result<(), SessionError> {
    sock.write_all(b)
        .await
        .map_err(|e| SessionError::Io(e.to_string()))
}

/// Reads the next whole PDU into `buf` (replacing what it held) and decodes it.
async fn read_pdu(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
    version: u8,
) -> Result<FromCache, SessionError> {
    buf.clear();
    buf.resize(8, 0);
    read_exact(sock, &mut buf[..]).await?;
    let Some((_, kind, len)) = pdu::header(buf) else {
        return Err(SessionError::Closed);
    };
    if !(8..=pdu::MAX_PDU).contains(&len) {
        return Err(RtrError::Corrupt {
            pdu: kind,
            len,
            why: "length out of range",
        }
        .into());
    }
    buf.resize(len, 0);
    read_exact(sock, &mut buf[8..]).await?;
    Ok(pdu::decode(buf, version)?)
}

async fn read_exact(sock: &mut TcpStream, b: &mut [u8]) -> Result<(), SessionError> {
    match sock.read_exact(b).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(SessionError::Closed),
        Err(e) => Err(SessionError::Io(e.to_string())),
    }
}
