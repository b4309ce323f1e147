//! What operators see of a session: its state, what it negotiated, why it last went down,
//! the NOTIFICATIONs it last sent and received, and its message counters.

use crate::negotiate::Negotiated;
use crate::pipeline::Joined;
use ribshard_fsm::State;
use ribshard_wire::message::MessageType;
use ribshard_wire::notification::Notification;
use ribshard_wire::{DecodeError, Family, UpdateError};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// Why a session last left Established or failed to get there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("NOTIFICATION received: {0}")]
    NotificationReceived(Notification),
    #[error("connection closed by the neighbor")]
    ConnectionClosed,
    #[error("connection lost: {}", std::io::Error::from(*.0))]
    ConnectionLost(std::io::ErrorKind),
    #[error("cannot connect: {}", std::io::Error::from(*.0))]
    ConnectFailed(std::io::ErrorKind),
    #[error("hold timer expired")]
    HoldTimerExpired,
    /// RFC 9687: the neighbor did not take our data for the send hold time.
    #[error("send hold timer expired")]
    SendHoldTimerExpired,
    #[error("sent a bad message header: {0}")]
    BadHeader(DecodeError),
    #[error("sent a bad message: {0}")]
    BadMessage(DecodeError),
    #[error("OPEN refused: {0}")]
    OpenRefused(Notification),
    /// RFC 4271 section 6.2: the AS in the neighbor's OPEN (its 4-octet AS capability's,
    /// RFC 6793) is not the one configured.
    #[error("OPEN refused: Bad Peer AS: the neighbor's OPEN says AS{received}, peer-as is AS{configured}")]
    BadPeerAs { received: u32, configured: u32 },
    /// An UPDATE that RFC 7606 answers with a session reset.
    #[error("sent a malformed UPDATE: {0}")]
    MalformedUpdate(UpdateError),
    #[error("prefix limit {maximum} exceeded for {family}")]
    PrefixLimit { family: Family, maximum: u32 },
    /// It sent new prefixes while the process was over `[bgp] memory-limit`.
    #[error("sent new prefixes while ribshard was over its memory-limit of {limit_mib} MiB")]
    MemoryLimit { limit_mib: u64 },
    /// Ended by an operator or a configuration change (the Cease we sent says which).
    #[error("stopped: {0}")]
    Stopped(Notification),
}

/// A value and when it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamped<T> {
    pub at: SystemTime,
    pub value: T,
}

impl<T> Stamped<T> {
    pub fn now(value: T) -> Stamped<T> {
        Stamped {
            at: SystemTime::now(),
            value,
        }
    }
}

/// What a session's watchers see; changes wake [`super::SessionHandle::wait_for`].
#[derive(Clone, Debug)]
pub struct SessionStatus {
    pub state: State,
    /// When `state` last changed.
    pub since: SystemTime,
    pub negotiated: Option<Negotiated>,
    /// Prefixes (with path ids) in the Adj-RIB-In, per [`Family::index`].
    pub prefixes: [usize; 2],
    pub updates_received: u64,
    /// What the neighbor's UPDATEs did that a monitoring station counts (BMP).
    pub input: InputCounts,
    pub established_transitions: u64,
    /// Times the session left Established (Junos "Flaps").
    pub flaps: u64,
    /// The connection's addresses, while there is one.
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    /// Why the session last went down (or could not come up).
    pub last_error: Option<Stamped<SessionError>>,
    pub last_sent: Option<Stamped<Notification>>,
    pub last_received: Option<Stamped<Notification>>,
    /// Torn down by its prefix limit without an idle timeout: down until cleared.
    pub held_down: bool,
    /// Disabled by an operator (`disable bgp neighbor`, or `disable = true`): no session.
    pub disabled: bool,
    /// Messages dropped because the connection's queue was full (Junos "write queue
    /// blocks" of the session's own messages; update groups count theirs per member).
    pub write_queue_blocks: u64,
    /// The session's update group, while Established.
    pub group: Option<Joined>,
    /// Routes of a restarting neighbor kept stale (RFC 4724, RFC 9494), per family.
    pub stale: Vec<StaleRoutes>,
}

/// Counts of a neighbor's UPDATEs that BMP's Statistics Reports carry (RFC 7854 section
/// 4.8), over every session with it, as `updates_received`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputCounts {
    /// Withdrawals of prefixes not in the Adj-RIB-In: never announced, withdrawn already,
    /// or ignored when announced (stat type 2, "known duplicate withdraws").
    pub duplicate_withdraws: u64,
    /// UPDATEs treated as withdraw (RFC 7606 section 2), and the prefixes they announced
    /// that were withdrawn instead (stat types 11 and 12).
    pub treat_as_withdraw_updates: u64,
    pub treat_as_withdraw_prefixes: u64,
    /// UPDATEs whose routes loop back to us, by why (stat types 4, 5 and 3; an UPDATE
    /// looping for two reasons counts under both).
    pub as_path_loops: u64,
    pub originator_id_loops: u64,
    pub cluster_list_loops: u64,
}

impl InputCounts {
    /// An UPDATE whose routes loop as `loops` says (nothing if they do not).
    pub fn count_loops(&mut self, loops: ribshard_rib::Loops) {
        self.as_path_loops += u64::from(loops.as_path());
        self.originator_id_loops += u64::from(loops.originator_id());
        self.cluster_list_loops += u64::from(loops.cluster_list());
    }
}

/// A family of a restarting neighbor's routes kept stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaleRoutes {
    pub family: ribshard_wire::Family,
    /// Kept until then, unless the neighbor's End-of-RIB comes first.
    pub until: SystemTime,
    /// Long-lived stale now (LLGR_STALE, least preferred); else within the restart time.
    pub long_lived: bool,
}

impl Default for SessionStatus {
    fn default() -> Self {
        SessionStatus {
            state: State::Idle,
            since: SystemTime::now(),
            negotiated: None,
            prefixes: [0; 2],
            updates_received: 0,
            input: InputCounts::default(),
            established_transitions: 0,
            flaps: 0,
            local: None,
            remote: None,
            last_error: None,
            last_sent: None,
            last_received: None,
            held_down: false,
            disabled: false,
            write_queue_blocks: 0,
            group: None,
            stale: Vec::new(),
        }
    }
}

/// The message types counted per session.
pub const MESSAGE_TYPES: [MessageType; 5] = [
    MessageType::Open,
    MessageType::Update,
    MessageType::Notification,
    MessageType::Keepalive,
    MessageType::RouteRefresh,
];

fn slot(t: MessageType) -> usize {
    MESSAGE_TYPES.iter().position(|x| *x == t).unwrap_or(0)
}

/// Messages and octets in and out, over the session's whole life (every connection),
/// counted by the session task, its writer and the update groups without locking.
#[derive(Debug, Default)]
pub struct SessionCounters {
    received: [AtomicU64; 5],
    sent: [AtomicU64; 5],
    octets_received: AtomicU64,
    octets_sent: AtomicU64,
}

/// The counters as read at one moment, per [`MESSAGE_TYPES`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub received: [u64; 5],
    pub sent: [u64; 5],
    pub octets_received: u64,
    pub octets_sent: u64,
}

impl Counts {
    pub fn received_total(&self) -> u64 {
        self.received.iter().sum()
    }
    pub fn sent_total(&self) -> u64 {
        self.sent.iter().sum()
    }
}

impl SessionCounters {
    pub(crate) fn received(&self, t: MessageType, octets: usize) {
        if let Some(c) = self.received.get(slot(t)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.octets_received
            .fetch_add(octets as u64, Ordering::Relaxed);
    }

    pub(crate) fn sent(&self, t: MessageType, messages: u64, octets: usize) {
        if let Some(c) = self.sent.get(slot(t)) {
            c.fetch_add(messages, Ordering::Relaxed);
        }
        self.octets_sent.fetch_add(octets as u64, Ordering::Relaxed);
    }

    pub fn read(&self) -> Counts {
        let load = |a: &[AtomicU64; 5]| {
            let mut v = [0u64; 5];
            for (x, c) in v.iter_mut().zip(a) {
                *x = c.load(Ordering::Relaxed);
            }
            v
        };
        Counts {
            received: load(&self.received),
            sent: load(&self.sent),
            octets_received: self.octets_received.load(Ordering::Relaxed),
            octets_sent: self.octets_sent.load(Ordering::Relaxed),
        }
    }
}

/// A connection's write queue as read now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputQueue {
    /// Messages and octets queued and not yet written to the socket.
    pub messages: u64,
    pub octets: u64,
}
