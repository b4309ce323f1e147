//! The generator's BGP speakers: plain blocking sockets, one reader thread and one keepalive
//! thread per session, writes of pre-encoded UPDATEs in 256 KiB runs of whole messages.
//!
//! A downstream speaker counts what it holds without building routes: each received prefix
//! is looked up in one shared index of the expected prefixes and set or cleared in the
//! speaker's own bitmap, so a hundred receivers of a million prefixes cost a few megabytes
//! and a hash lookup per prefix.

use hashbrown::{HashMap, HashSet};
use ribshard_wire::notification::{cease, code};
use ribshard_wire::open::Capability;
use ribshard_wire::{frame, keepalive, Message, Notification, Open};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The largest message without the extended message capability (RFC 4271 section 4.1).
const MAX_MESSAGE: usize = 4096;
/// Bytes handed to one `write`: whole messages, so keepalives can go between two runs.
const WRITE_RUN: usize = 256 * 1024;

/// Nanoseconds since the bench started: one clock for every thread's timestamps.
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{peer}: {source}")]
    Io { peer: Ipv4Addr, source: io::Error },
    #[error("{peer}: the device under test sent NOTIFICATION {notification}")]
    Notified {
        peer: Ipv4Addr,
        notification: Notification,
    },
    #[error("{peer}: unexpected {what} while opening the session")]
    Unexpected { peer: Ipv4Addr, what: String },
    #[error("{peer}: no session within {seconds} s")]
    Timeout { peer: Ipv4Addr, seconds: u64 },
}

/// The expected prefixes of a run, numbered: shared read-only by every downstream speaker.
pub struct Index {
    map: HashMap<u64, u32>,
}

impl Index {
    pub fn new(keys: impl IntoIterator<Item = u64>) -> Index {
        let mut map = HashMap::new();
        for k in keys {
            let n = map.len() as u32;
            map.entry(k).or_insert(n);
        }
        Index { map }
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, key: u64) -> Option<u32> {
        self.map.get(&key).copied()
    }
}

/// A set of prefixes of an [`Index`], one bit each.
#[derive(Clone, PartialEq, Eq)]
pub struct Bits(Vec<u64>);

impl Bits {
    pub fn new(len: usize) -> Bits {
        Bits(vec![0; len.div_ceil(64)])
    }
    /// Sets bit `i`; true if it was clear.
    pub fn set(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, 1u64 << (i % 64));
        match self.0.get_mut(w) {
            Some(x) if *x & b == 0 => {
                *x |= b;
                true
            }
            _ => false,
        }
    }
    /// Clears bit `i`; true if it was set.
    pub fn clear(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, 1u64 << (i % 64));
        match self.0.get_mut(w) {
            Some(x) if *x & b != 0 => {
                *x &= !b;
                true
            }
            _ => false,
        }
    }
    pub fn count(&self) -> u64 {
        self.0.iter().map(|w| u64::from(w.count_ones())).sum()
    }
    /// Bits set in one and not the other, both ways.
    pub fn differences(&self, other: &Bits) -> u64 {
        self.0
            .iter()
            .zip(&other.0)
            .map(|(a, b)| u64::from((a ^ b).count_ones()))
            .sum()
    }
}

/// What a downstream speaker holds.
pub struct Holding {
    index: Arc<Index>,
    /// The receiving speaker's AS, for AS_PATH loop detection.
    asn: u32,
    pub bits: Bits,
    /// Per prefix of the index, a hash of the path attributes it is held with (0: none):
    /// an announcement with the same ones again changes nothing at the receiver.
    attrs: Vec<u64>,
    /// Prefixes held that are not in the index at all.
    pub extras: HashSet<u64>,
    /// Prefixes announced (NLRI), withdrawn, and announced again with the attributes they
    /// were already held with.
    pub announced: u64,
    pub withdrawn: u64,
    pub redundant: u64,
    /// When set, every received prefix with its receipt time (for latency percentiles).
    pub record: Option<Vec<(u64, u64)>>,
    /// Communities every held route must carry (a policy's tags, `--policy`), and the held
    /// prefixes of the index last announced without one of them.
    require: Vec<u32>,
    pub untagged: Bits,
}

impl Holding {
    pub fn new(index: Arc<Index>, asn: u32) -> Holding {
        let bits = Bits::new(index.len());
        Holding {
            untagged: Bits::new(index.len()),
            attrs: vec![0; index.len()],
            index,
            asn,
            bits,
            extras: HashSet::new(),
            announced: 0,
            withdrawn: 0,
            redundant: 0,
            record: None,
            require: Vec::new(),
        }
    }
    /// From now on every held route must carry `tags`: what is held so far counts as
    /// untagged until announced again with them.
    pub fn require(&mut self, tags: &[u32]) {
        self.require = tags.to_vec();
        self.untagged = self.bits.clone();
    }

    /// A prefix announced with attributes hashing to `attrs` (`tagged`: carrying what
    /// [`Holding::require`] asks), or withdrawn (`attrs` 0: also an announcement the receiver
    /// must ignore, RFC 4271 section 9.1.2).
    fn apply(&mut self, key: u64, announce: bool, attrs: u64, tagged: bool, now: u64) {
        if attrs != 0 || announce {
            self.announced += 1;
        } else {
            self.withdrawn += 1;
        }
        match (self.index.get(key), announce) {
            (Some(i), true) => {
                let held = self.attrs.get_mut(i as usize);
                if let Some(h) = held {
                    if *h == attrs {
                        self.redundant += 1;
                    }
                    *h = attrs;
                }
                self.bits.set(i);
                if tagged {
                    self.untagged.clear(i);
                } else {
                    self.untagged.set(i);
                }
            }
            (Some(i), false) => {
                if let Some(h) = self.attrs.get_mut(i as usize) {
                    *h = 0;
                }
                self.bits.clear(i);
                self.untagged.clear(i);
            }
            (None, true) => {
                self.extras.insert(key);
            }
            (None, false) => {
                self.extras.remove(&key);
            }
        }
        if let Some(r) = self.record.as_mut() {
            r.push((key, now));
        }
    }
}

/// Counters a session's threads publish for the coordinator.
#[derive(Default)]
pub struct Stats {
    pub updates: AtomicU64,
    /// Octets of those UPDATEs, headers included.
    pub update_octets: AtomicU64,
    /// Prefixes announced, withdrawn, and announced again unchanged (downstream speakers).
    pub announced: AtomicU64,
    pub withdrawn: AtomicU64,
    pub redundant: AtomicU64,
    /// Prefixes of the held set (downstream speakers only).
    pub held: AtomicU64,
    pub extras: AtomicU64,
    /// Held prefixes without the communities required ([`Holding::require`]).
    pub untagged: AtomicU64,
    /// Receipt time of the last UPDATE, [`now_ns`]; 0 before the first.
    pub last_update_ns: AtomicU64,
    /// Receipt time of the last message of any type: what the peer's hold timer sees.
    pub last_message_ns: AtomicU64,
    /// Longest silence between two messages (the report's "keepalive gap").
    pub max_keepalive_gap_ns: AtomicU64,
    pub down: AtomicBool,
    pub malformed: AtomicBool,
}

/// One generator speaker's identity.
#[derive(Clone, Copy, Debug)]
pub struct PeerSpec {
    pub local: Ipv4Addr,
    pub asn: u32,
}

/// An established session with the device under test.
pub struct Session {
    pub spec: PeerSpec,
    writer: Arc<Mutex<TcpStream>>,
    pub stats: Arc<Stats>,
    pub holding: Option<Arc<Mutex<Holding>>>,
    closed: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

fn io_err(peer: Ipv4Addr) -> impl Fn(io::Error) -> SessionError {
    move |source| SessionError::Io { peer, source }
}

/// Reads whole messages into `buf[..*hi]`, returning the length of the first when complete.
fn next_message(s: &mut TcpStream, buf: &mut [u8], hi: &mut usize) -> io::Result<usize> {
    loop {
        match frame(buf.get(..*hi).unwrap_or_default(), MAX_MESSAGE) {
            Ok(Some(n)) => return Ok(n),
            Ok(None) => {}
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
        }
        let n = s.read(buf.get_mut(*hi..).unwrap_or_default())?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        *hi += n;
    }
}

impl Session {
    /// Connects from `spec.local` to the device under test and exchanges OPEN and
    /// KEEPALIVE, retrying refused or reset attempts until `within`.
    pub fn establish(
        spec: PeerSpec,
        dut: SocketAddrV4,
        hold: u16,
        holding: Option<Holding>,
        within: Duration,
    ) -> Result<Session, SessionError> {
        let deadline = Instant::now() + within;
        let mut holding = holding;
        loop {
            match Session::try_establish(spec, dut, hold, &mut holding) {
                Ok(s) => return Ok(s),
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("{e}; retrying");
                    // Short, so a reset session's return is timed by the DUT, not by us.
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(SessionError::Io { .. }) => {
                    return Err(SessionError::Timeout {
                        peer: spec.local,
                        seconds: within.as_secs(),
                    })
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn try_establish(
        spec: PeerSpec,
        dut: SocketAddrV4,
        hold: u16,
        holding: &mut Option<Holding>,
    ) -> Result<Session, SessionError> {
        let peer = spec.local;
        let err = io_err(peer);
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .map_err(&err)?;
        sock.set_reuse_address(true).map_err(&err)?;
        sock.bind(&SocketAddr::V4(SocketAddrV4::new(spec.local, 0)).into())
            .map_err(&err)?;
        sock.connect_timeout(&SocketAddr::V4(dut).into(), Duration::from_secs(2))
            .map_err(&err)?;
        let mut stream: TcpStream = sock.into();
        stream.set_nodelay(true).map_err(&err)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(&err)?;
        // As BIRD 2, FRR and OpenBGPD do by default: graceful restart (helper, nothing kept
        // across a restart), so the DUT may count on our End-of-RIB (RFC 4724).
        let caps = vec![
            Capability::Multiprotocol { afi: 1, safi: 1 },
            Capability::RouteRefresh,
            Capability::FourOctetAs(spec.asn),
            Capability::GracefulRestart {
                flags: 0,
                restart_time: 120,
                families: Vec::new(),
            },
        ];
        stream
            .write_all(&Open::new(spec.asn, hold, spec.local, caps).encode())
            .map_err(&err)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut hi = 0;
        let mut negotiated = None;
        // OpenSent, then OpenConfirm (RFC 4271 section 8.2.2): their OPEN, then KEEPALIVE.
        loop {
            let n = next_message(&mut stream, &mut buf, &mut hi).map_err(&err)?;
            let msg = buf.get(..n).unwrap_or_default();
            match ribshard_wire::decode(msg, &Default::default()) {
                Ok(Message::Open(o)) if negotiated.is_none() => {
                    negotiated = Some(hold.min(o.hold_time));
                    stream.write_all(&keepalive()).map_err(&err)?;
                }
                Ok(Message::Keepalive) if negotiated.is_some() => {
                    buf.copy_within(n..hi, 0);
                    hi -= n;
                    break;
                }
                Ok(Message::Notification(notification)) => {
                    return Err(SessionError::Notified { peer, notification })
                }
                other => {
                    return Err(SessionError::Unexpected {
                        peer,
                        what: format!("{other:?}"),
                    })
                }
            }
            buf.copy_within(n..hi, 0);
            hi -= n;
        }
        stream.set_read_timeout(None).map_err(&err)?;
        let hold = negotiated.unwrap_or(hold);
        let writer = Arc::new(Mutex::new(stream.try_clone().map_err(&err)?));
        let stats = Arc::new(Stats::default());
        stats.last_message_ns.store(now_ns(), Ordering::Relaxed);
        let closed = Arc::new(AtomicBool::new(false));
        let holding = holding.take().map(|h| Arc::new(Mutex::new(h)));
        let reader = {
            let (stats, holding) = (stats.clone(), holding.clone());
            std::thread::Builder::new()
                .name(format!("read {peer}"))
                .spawn(move || read_loop(stream, buf, hi, &stats, holding.as_deref()))
                .map_err(&err)?
        };
        let keeper = {
            let (writer, closed) = (writer.clone(), closed.clone());
            std::thread::Builder::new()
                .name(format!("keepalive {peer}"))
                .spawn(move || keepalive_loop(&writer, &closed, hold))
                .map_err(&err)?
        };
        Ok(Session {
            spec,
            writer,
            stats,
            holding,
            closed,
            threads: vec![reader, keeper],
        })
    }

    /// Sends pre-encoded messages (whole messages back to back).
    pub fn send(&self, bytes: &[u8]) -> Result<(), SessionError> {
        let err = io_err(self.spec.local);
        let mut rest = bytes;
        while !rest.is_empty() {
            // Cut after the last whole message within the run.
            let mut cut = 0;
            while cut < rest.len() && cut < WRITE_RUN {
                let len = rest
                    .get(cut + 16..cut + 18)
                    .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])))
                    .unwrap_or(rest.len() - cut);
                if cut > 0 && cut + len > WRITE_RUN {
                    break;
                }
                cut += len.max(19);
            }
            let cut = cut.min(rest.len());
            let (now, later) = rest.split_at(cut);
            self.writer
                .lock()
                .map_err(|_| err(io::Error::other("writer poisoned")))?
                .write_all(now)
                .map_err(&err)?;
            rest = later;
        }
        Ok(())
    }

    /// Ends the session with a NOTIFICATION (see [`Session::cease`]) and waits for its threads.
    pub fn close(mut self, reset: bool) {
        self.cease(reset);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Sends Cease (RFC 4486: Administrative Reset when `reset`, else Administrative Shutdown)
    /// and shuts the connection down without waiting for the session's threads, so many
    /// sessions can be reset at one instant.
    pub fn cease(&self, reset: bool) {
        self.closed.store(true, Ordering::Relaxed);
        let sub = if reset {
            cease::ADMINISTRATIVE_RESET
        } else {
            cease::ADMINISTRATIVE_SHUTDOWN
        };
        if let Ok(mut w) = self.writer.lock() {
            let _ = w.write_all(&Notification::new(code::CEASE, sub, vec![]).encode());
            let _ = w.shutdown(Shutdown::Both);
        }
    }
}

fn keepalive_loop(writer: &Mutex<TcpStream>, closed: &AtomicBool, hold: u16) {
    if hold == 0 {
        return;
    }
    let every = Duration::from_secs(u64::from(hold)) / 3;
    let mut last = Instant::now();
    while !closed.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if last.elapsed() >= every {
            last = Instant::now();
            let Ok(mut w) = writer.lock() else { return };
            if w.write_all(&keepalive()).is_err() {
                return;
            }
        }
    }
}

/// Reads until the session ends, counting UPDATEs into `holding` when given.
fn read_loop(
    mut s: TcpStream,
    mut buf: Vec<u8>,
    mut hi: usize,
    stats: &Stats,
    holding: Option<&Mutex<Holding>>,
) {
    loop {
        let now = now_ns();
        let mut lo = 0;
        let (mut updates, mut messages, mut octets) = (0u64, 0u64, 0u64);
        let mut guard = holding.and_then(|h| h.lock().ok());
        while let Some(len) = buf
            .get(lo + 16..lo + 18)
            .filter(|_| lo + 19 <= hi)
            .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])))
        {
            if !(19..=MAX_MESSAGE).contains(&len) {
                stats.malformed.store(true, Ordering::Relaxed);
                stats.down.store(true, Ordering::Relaxed);
                return;
            }
            if lo + len > hi {
                break;
            }
            let msg = buf.get(lo..lo + len).unwrap_or_default();
            match msg.get(18) {
                Some(2) => {
                    updates += 1;
                    octets += len as u64;
                    if let Some(h) = guard.as_deref_mut() {
                        if !count_update(msg, h, now) {
                            stats.malformed.store(true, Ordering::Relaxed);
                        }
                    }
                }
                Some(3) => {
                    let n = ribshard_wire::decode(msg, &Default::default());
                    tracing::warn!("session of {:?} ended by the device: {n:?}", s.local_addr());
                    stats.down.store(true, Ordering::Relaxed);
                    return;
                }
                _ => {}
            }
            messages += 1;
            lo += len;
        }
        // The gap the peer's hold timer sees: any message restarts it, and a speaker busy
        // sending UPDATEs rightly sends no KEEPALIVE (RFC 4271 sections 4.4 and 10).
        if messages > 0 {
            let last = stats.last_message_ns.swap(now, Ordering::Relaxed);
            stats
                .max_keepalive_gap_ns
                .fetch_max(now.saturating_sub(last), Ordering::Relaxed);
        }
        if let Some(h) = guard {
            stats.held.store(h.bits.count(), Ordering::Relaxed);
            stats.extras.store(h.extras.len() as u64, Ordering::Relaxed);
            stats.untagged.store(h.untagged.count(), Ordering::Relaxed);
            stats.announced.store(h.announced, Ordering::Relaxed);
            stats.withdrawn.store(h.withdrawn, Ordering::Relaxed);
            stats.redundant.store(h.redundant, Ordering::Relaxed);
        }
        if updates > 0 {
            stats.updates.fetch_add(updates, Ordering::Relaxed);
            stats.update_octets.fetch_add(octets, Ordering::Relaxed);
            stats.last_update_ns.store(now, Ordering::Relaxed);
        }
        buf.copy_within(lo..hi, 0);
        hi -= lo;
        match s.read(buf.get_mut(hi..).unwrap_or_default()) {
            Ok(0) | Err(_) => {
                stats.down.store(true, Ordering::Relaxed);
                return;
            }
            Ok(n) => hi += n,
        }
    }
}

/// Applies the IPv4 Withdrawn Routes and NLRI fields of one UPDATE (RFC 4271 section 4.3).
/// False when the fields do not parse.
fn count_update(msg: &[u8], h: &mut Holding, now: u64) -> bool {
    let field = |at: usize| {
        msg.get(at..at + 2)
            .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])))
    };
    let Some(wlen) = field(19) else { return false };
    let Some(withdrawn) = msg.get(21..21 + wlen) else {
        return false;
    };
    let Some(alen) = field(21 + wlen) else {
        return false;
    };
    let Some(nlri) = msg.get(23 + wlen + alen..) else {
        return false;
    };
    // RFC 4271 section 9.1.2: a speaker ignores a route whose AS_PATH holds its own AS, so the
    // new route replaces (withdraws) whatever was held for its prefixes. Route servers may send a
    // peer its own routes back; a real peer drops them this way, and so do we.
    let attrs = msg.get(23 + wlen..23 + wlen + alen).unwrap_or_default();
    let announce = !as_path_contains(attrs, h.asn);
    // The attributes as the receiver would compare them: their bytes (never 0 for an
    // announcement, so that 0 can mean "not held").
    let hash = if nlri.is_empty() { 0 } else { fnv1a(attrs) | 1 };
    let tagged = h.require.is_empty() || carries(attrs, &h.require);
    prefixes(withdrawn, |k| h.apply(k, false, 0, true, now))
        && prefixes(nlri, |k| h.apply(k, announce, hash, tagged, now))
}

/// Whether the COMMUNITIES attribute (RFC 1997) holds every one of `wanted`.
fn carries(attrs: &[u8], wanted: &[u32]) -> bool {
    let values = ribshard_wire::update::RawAttrIter::new(attrs)
        .find(|a| a.type_code == ribshard_wire::attr::COMMUNITIES)
        .map_or(&[][..], |a| a.value);
    wanted.iter().all(|w| {
        values
            .chunks_exact(4)
            .any(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) == *w)
    })
}

/// FNV-1a, 64 bits: the same bytes hash the same in every session and run.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether the AS_PATH attribute (4-octet AS numbers, RFC 6793) contains `asn`.
fn as_path_contains(mut attrs: &[u8], asn: u32) -> bool {
    while let [flags, code, rest @ ..] = attrs {
        let (len, head) = if flags & 0x10 != 0 {
            match rest {
                [a, b, ..] => (usize::from(u16::from_be_bytes([*a, *b])), 2),
                _ => return false,
            }
        } else {
            match rest {
                [a, ..] => (usize::from(*a), 1),
                _ => return false,
            }
        };
        let Some(value) = rest.get(head..head + len) else {
            return false;
        };
        if *code == 2 {
            let mut segs = value;
            while let [_, count, body @ ..] = segs {
                let n = usize::from(*count) * 4;
                let Some(asns) = body.get(..n) else {
                    return false;
                };
                if asns
                    .chunks_exact(4)
                    .any(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) == asn)
                {
                    return true;
                }
                segs = body.get(n..).unwrap_or_default();
            }
            return false;
        }
        attrs = rest.get(head + len..).unwrap_or_default();
    }
    false
}

fn prefixes(mut b: &[u8], mut f: impl FnMut(u64)) -> bool {
    while let Some((&len, rest)) = b.split_first() {
        let n = usize::from(len).div_ceil(8);
        if len > 32 || rest.len() < n {
            return false;
        }
        let mut a = [0u8; 4];
        a.get_mut(..n)
            .unwrap_or_default()
            .copy_from_slice(rest.get(..n).unwrap_or_default());
        f((u64::from(u32::from_be_bytes(a)) << 8) | u64::from(len));
        b = rest.get(n..).unwrap_or_default();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An UPDATE announcing 10.0.0.0/8 and 192.0.2.0/24 with the given AS_PATH (one
    /// AS_SEQUENCE) and withdrawing 198.51.100.0/24.
    fn update(path: &[u32]) -> Vec<u8> {
        let mut attrs = vec![0x40, 1, 1, 0]; // ORIGIN IGP
        let seg_len = 2 + 4 * path.len();
        attrs.extend([0x40, 2, seg_len as u8, 2, path.len() as u8]);
        for a in path {
            attrs.extend(a.to_be_bytes());
        }
        attrs.extend([0x40, 3, 4, 192, 0, 2, 1]); // NEXT_HOP
        let withdrawn = [24u8, 198, 51, 100];
        let nlri = [8u8, 10, 24, 192, 0, 2];
        let mut m = vec![0xff; 16];
        let len = 19 + 2 + withdrawn.len() + 2 + attrs.len() + nlri.len();
        m.extend((len as u16).to_be_bytes());
        m.push(2);
        m.extend((withdrawn.len() as u16).to_be_bytes());
        m.extend(withdrawn);
        m.extend((attrs.len() as u16).to_be_bytes());
        m.extend(attrs);
        m.extend(nlri);
        m
    }

    fn key(a: [u8; 4], len: u8) -> u64 {
        (u64::from(u32::from_be_bytes(a)) << 8) | u64::from(len)
    }

    #[test]
    fn counts_announcements_and_withdrawals() {
        let index = Arc::new(Index::new([
            key([10, 0, 0, 0], 8),
            key([198, 51, 100, 0], 24),
        ]));
        let mut h = Holding::new(index, 65_010);
        let i = h.index.get(key([198, 51, 100, 0], 24)).expect("indexed");
        h.bits.set(i);
        assert!(count_update(&update(&[65_001, 65_002]), &mut h, 0));
        assert_eq!(h.bits.count(), 1, "10/8 held, 198.51.100/24 withdrawn");
        assert_eq!(h.extras.len(), 1, "192.0.2.0/24 is not in the index");
    }

    /// What a receiver is sent is counted: prefixes announced and withdrawn, and an
    /// announcement of what it already holds, with the same attributes, as redundant.
    #[test]
    fn counts_what_the_receiver_gets_and_what_it_did_not_need() {
        let index = Arc::new(Index::new([
            key([10, 0, 0, 0], 8),
            key([198, 51, 100, 0], 24),
        ]));
        let mut h = Holding::new(index, 65_010);
        assert!(count_update(&update(&[65_001]), &mut h, 0));
        assert_eq!((h.announced, h.withdrawn, h.redundant), (2, 1, 0));
        // The same again: 10/8 is held with these attributes (192.0.2/24 is not indexed).
        assert!(count_update(&update(&[65_001]), &mut h, 0));
        assert_eq!((h.announced, h.withdrawn, h.redundant), (4, 2, 1));
        // Other attributes: a real change.
        assert!(count_update(&update(&[65_001, 65_003]), &mut h, 0));
        assert_eq!(h.redundant, 1);
    }

    #[test]
    fn own_as_in_path_is_a_loop_and_replaces_the_held_route() {
        let index = Arc::new(Index::new([key([10, 0, 0, 0], 8)]));
        let mut h = Holding::new(index, 65_002);
        assert!(count_update(&update(&[65_001]), &mut h, 0));
        assert_eq!(h.bits.count(), 1);
        assert!(count_update(&update(&[65_001, 65_002]), &mut h, 0));
        assert_eq!(h.bits.count(), 0, "looped route withdraws 10/8");
        assert!(h.extras.is_empty());
    }

    /// `--policy`: held routes without the required communities are known per prefix.
    #[test]
    fn knows_which_held_routes_lack_the_required_communities() {
        let index = Arc::new(Index::new([
            key([10, 0, 0, 0], 8),
            key([198, 51, 100, 0], 24),
        ]));
        let mut h = Holding::new(index, 65_010);
        h.require(&[64_500 << 16 | 100]);
        assert!(count_update(&update(&[65_001]), &mut h, 0));
        assert_eq!(h.untagged.count(), 1, "10/8 held without COMMUNITIES");
        // The same UPDATE with COMMUNITIES 64500:100 inserted before its NLRI.
        let mut m = update(&[65_001]);
        let alen_at = 19 + 2 + 4;
        let alen = usize::from(u16::from_be_bytes([m[alen_at], m[alen_at + 1]]));
        let at = alen_at + 2 + alen;
        m.splice(at..at, [0xc0, 8, 4, 0xfb, 0xf4, 0, 100]);
        m[alen_at..alen_at + 2].copy_from_slice(&((alen + 7) as u16).to_be_bytes());
        let len = m.len() as u16;
        m[16..18].copy_from_slice(&len.to_be_bytes());
        assert!(count_update(&m, &mut h, 0));
        assert_eq!(h.untagged.count(), 0, "announced again, tagged");
        // A new requirement: everything held is untagged until announced with it.
        h.require(&[64_500 << 16 | 100, 64_500 << 16 | 200]);
        assert_eq!(h.untagged.count(), 1);
        assert!(count_update(&m, &mut h, 0));
        assert_eq!(h.untagged.count(), 1, "one of the two is missing");
        assert!(count_update(&update(&[65_001, 65_010]), &mut h, 0));
        assert_eq!(h.untagged.count(), 0, "a looped route: 10/8 no longer held");
    }

    #[test]
    fn truncated_update_is_refused() {
        let index = Arc::new(Index::new([]));
        let mut h = Holding::new(index, 1);
        let m = update(&[1]);
        assert!(!count_update(&m[..22], &mut h, 0));
    }
}
