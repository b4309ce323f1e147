//! The generator's BGP speakers: plain blocking sockets, one reader thread and one keepalive
//! thread per session, writes of pre-encoded UPDATEs in 256 KiB runs of whole messages.
//!
//! A downstream speaker counts what it holds without building routes: each received prefix
//! is looked up in one shared index of the expected prefixes and set or cleared in the
//! speaker's own bitmap, so a hundred receivers of a million prefixes cost a few megabytes
//! and a hash lookup per prefix.

use crate::verdict::{as_path, first_as, From, Verdict, Winners};
use hashbrown::HashSet;
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
/// A session's read buffer: 256 KiB reads keep the calls few, and a thousand receivers hold
/// 256 MB at most (1 MiB each made the bench's RSS 1 GB at 1,000 route-server clients).
const READ_BUFFER: usize = 256 << 10;
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
///
/// Open addressing, at most half full, one word a slot holding the prefix's key above its
/// number: a lookup reads one cache line, and a receiver reads a whole batch's lines before
/// it looks any up ([`Holding::settle`]), so their cache misses overlap. Those misses were most
/// of the generator's CPU with many receivers (route-server: 20 of 500,000 prefixes), CPU
/// taken from the daemon under test on a machine with few cores.
pub struct Index {
    slots: Vec<u64>,
    /// 64 less the number of bits of a slot's position.
    shift: u32,
    len: usize,
}

/// Bits of a slot that hold the prefix's number; the key (IPv4 address and length, 40 bits)
/// is above them.
const NUMBER_BITS: u32 = 24;
const NUMBER_MASK: u64 = (1 << NUMBER_BITS) - 1;
const KEY_BITS: u32 = 64 - NUMBER_BITS;
/// No key has all 40 bits set (a length is at most 32).
const EMPTY: u64 = u64::MAX;

#[derive(Debug, thiserror::Error)]
#[error(
    "the bench's receivers tell apart at most {} distinct prefixes; this run has more",
    NUMBER_MASK
)]
pub struct IndexFull;

impl Index {
    pub fn new(keys: impl IntoIterator<Item = u64>) -> Result<Index, IndexFull> {
        let keys: Vec<u64> = keys.into_iter().collect();
        // Twice the keys given (duplicates included) keeps the table at most half full.
        let bits = (keys.len() * 2).next_power_of_two().trailing_zeros().max(4);
        let mut index = Index {
            slots: vec![EMPTY; 1 << bits],
            shift: 64 - bits,
            len: 0,
        };
        // Keys too wide (`table::key` gives IPv6 prefixes one) are never received: the
        // receivers read IPv4 NLRI only.
        for k in keys.into_iter().filter(|k| k >> KEY_BITS == 0) {
            let at = index.place(k);
            if let Some(slot) = index.slots.get_mut(at).filter(|s| **s == EMPTY) {
                if index.len as u64 >= NUMBER_MASK {
                    return Err(IndexFull);
                }
                *slot = (k << NUMBER_BITS) | index.len as u64;
                index.len += 1;
            }
        }
        Ok(index)
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn get(&self, key: u64) -> Option<u32> {
        if key >> KEY_BITS != 0 {
            return None;
        }
        self.slots
            .get(self.place(key))
            .filter(|s| **s != EMPTY)
            .map(|s| (s & NUMBER_MASK) as u32)
    }
    /// Where `key`'s probe starts (Fibonacci hashing: the top bits of a multiple).
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }
    /// The slot holding `key`, or the empty one where it would go.
    fn place(&self, key: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        while let Some(&s) = self.slots.get(at) {
            if s == EMPTY || s >> NUMBER_BITS == key {
                break;
            }
            at = (at + 1) & mask;
        }
        at
    }
    /// Every key, at its number.
    pub fn keys(&self) -> Vec<u64> {
        let mut out = vec![0; self.len];
        for s in self.slots.iter().filter(|s| **s != EMPTY) {
            if let Some(k) = out.get_mut((s & NUMBER_MASK) as usize) {
                *k = s >> NUMBER_BITS;
            }
        }
        out
    }
    /// Reads the slot `key`'s lookup starts at, so that the lookup finds it in cache.
    fn touch(&self, key: u64) -> u64 {
        self.slots.get(self.home(key)).copied().unwrap_or(0)
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
    /// The numbers set, in order.
    pub fn ones(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &word)| {
            (0..64u32)
                .filter(move |b| word & (1 << b) != 0)
                .map(move |b| w as u32 * 64 + b)
        })
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

/// One prefix of a received UPDATE, waiting for [`Holding::settle`].
#[derive(Clone, Copy)]
struct Receipt {
    key: u64,
    /// False for a withdrawal, and for an announcement the receiver must ignore.
    announce: bool,
    /// The hash of the attributes it came with (0: a withdrawal).
    attrs: u64,
    /// Whether it carries what [`Holding::require`] asks.
    tagged: bool,
}

/// Receipts settled together: their index slots and held words are read first, all of them,
/// so their cache misses overlap (64 of each fit the first-level cache).
const BATCH: usize = 64;

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
    /// Received and not yet applied, in order of receipt.
    pending: Vec<Receipt>,
    /// Lean: no table, only a count and a sum of what is held ([`Holding::lean`]).
    pub lean: Option<Lean>,
    /// Judging: no table, what is held judged against each prefix's winner
    /// ([`Holding::judging`]).
    pub verdict: Option<Verdict>,
}

/// What a lean receiver keeps instead of a table: the prefixes held, counted, and the
/// wrapping sum of a mix of their keys, plus each announcement, less each withdrawal. Its
/// memory is two words at any table size and it looks nothing up, so a thousand receivers
/// of two million routes fit beside the DUT and take little of its CPU. Exact where each
/// prefix is announced once and withdrawn only if held (a route server's clients with
/// disjoint tables and no churn): a prefix announced twice counts twice, and the check
/// after the run says so rather than pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lean {
    pub held: i64,
    pub sum: u64,
}

impl Lean {
    /// The mix of a key: sums of mixed keys collide as rarely as random 64-bit values.
    pub fn mix(key: u64) -> u64 {
        let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn add(&mut self, key: u64) {
        self.held += 1;
        self.sum = self.sum.wrapping_add(Lean::mix(key));
    }
    fn remove(&mut self, key: u64) {
        self.held -= 1;
        self.sum = self.sum.wrapping_sub(Lean::mix(key));
    }
    /// What a table of these keys gives.
    pub fn of(keys: impl IntoIterator<Item = u64>) -> Lean {
        let mut l = Lean::default();
        for k in keys {
            l.add(k);
        }
        l
    }
}

impl Holding {
    pub fn new(index: Arc<Index>, asn: u32) -> Holding {
        let n = index.len();
        Holding::sized(index, asn, n, None)
    }

    /// A lean receiver ([`Lean`]): no table, no index lookups.
    pub fn lean(index: Arc<Index>, asn: u32) -> Holding {
        Holding::sized(index, asn, 0, Some(Lean::default()))
    }

    /// A judging receiver ([`Verdict`]): route-server client `me` of a run whose clients
    /// share destinations.
    pub fn judging(index: Arc<Index>, asn: u32, winners: Arc<Winners>, me: u32) -> Holding {
        let mut h = Holding::sized(index, asn, 0, None);
        h.verdict = Some(Verdict::new(winners, me));
        h
    }

    /// A receiver whose table has room for `n` prefixes of the index.
    fn sized(index: Arc<Index>, asn: u32, n: usize, lean: Option<Lean>) -> Holding {
        Holding {
            untagged: Bits::new(n),
            attrs: vec![0; n],
            bits: Bits::new(n),
            index,
            asn,
            extras: HashSet::new(),
            announced: 0,
            withdrawn: 0,
            redundant: 0,
            record: None,
            require: Vec::new(),
            pending: Vec::new(),
            lean,
            verdict: None,
        }
    }

    /// Prefixes held now.
    pub fn held(&self) -> u64 {
        match (&self.lean, &self.verdict) {
            (Some(l), _) => l.held.max(0) as u64,
            (None, Some(v)) => v.good_held,
            (None, None) => self.bits.count(),
        }
    }
    /// Prefixes held that must not be: outside the index, or (judging) from the wrong source.
    pub fn unexpected(&self) -> u64 {
        self.extras.len() as u64 + self.verdict.as_ref().map_or(0, |v| v.bad_held)
    }
    /// From now on every held route must carry `tags`: what is held so far counts as
    /// untagged until announced again with them.
    pub fn require(&mut self, tags: &[u32]) {
        self.require = tags.to_vec();
        self.untagged = self.bits.clone();
    }

    /// Applies what was received since the last call, in order, as received at `now`.
    fn settle(&mut self, now: u64) {
        let pending = std::mem::take(&mut self.pending);
        for batch in pending.chunks(BATCH) {
            // Independent reads the processor can have in flight together; the sum only
            // keeps them from being optimised away.
            let mut sum = 0u64;
            for r in batch {
                sum = sum.wrapping_add(self.index.touch(r.key));
            }
            let mut numbers = [None; BATCH];
            for (n, r) in numbers.iter_mut().zip(batch) {
                *n = self.index.get(r.key);
            }
            for n in numbers.iter().flatten() {
                sum = sum.wrapping_add(self.attrs.get(*n as usize).copied().unwrap_or(0));
            }
            std::hint::black_box(sum);
            for (r, n) in batch.iter().zip(numbers) {
                self.apply(r, n, now);
            }
        }
        self.pending = pending;
        self.pending.clear();
    }

    /// A prefix announced with attributes hashing to `r.attrs`, or withdrawn (`attrs` 0 and
    /// not `announce`: also an announcement the receiver must ignore, RFC 4271 section
    /// 9.1.2); `number` is its number in the index.
    fn apply(&mut self, r: &Receipt, number: Option<u32>, now: u64) {
        if r.attrs != 0 || r.announce {
            self.announced += 1;
        } else {
            self.withdrawn += 1;
        }
        if let (Some(v), Some(n)) = (self.verdict.as_mut(), number) {
            // Judging: `attrs` is the sender's number plus one (0: not a source).
            let from = match r.attrs {
                0 => From::Unknown,
                s => From::Source((s - 1) as u32),
            };
            if v.judge(n, r.announce.then_some(from)) {
                self.redundant += 1;
            }
            return;
        }
        match (number, r.announce) {
            (Some(i), true) => {
                if let Some(h) = self.attrs.get_mut(i as usize) {
                    if *h == r.attrs {
                        self.redundant += 1;
                    }
                    *h = r.attrs;
                }
                self.bits.set(i);
                if r.tagged {
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
                self.extras.insert(r.key);
            }
            (None, false) => {
                self.extras.remove(&r.key);
            }
        }
        if let Some(rec) = self.record.as_mut() {
            rec.push((r.key, now));
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
    /// Its OPEN carries the graceful restart capability (helper, RFC 4724).
    pub graceful_restart: bool,
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

/// A TCP connection from `local` to the device under test; `rcvbuf`: a receive buffer of
/// that size, set before the handshake so the window the DUT sees is small from the start.
pub(crate) fn connect(
    local: Ipv4Addr,
    dut: SocketAddrV4,
    rcvbuf: Option<usize>,
) -> io::Result<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    if let Some(b) = rcvbuf {
        sock.set_recv_buffer_size(b)?;
    }
    sock.bind(&SocketAddr::V4(SocketAddrV4::new(local, 0)).into())?;
    sock.connect_timeout(&SocketAddr::V4(dut).into(), Duration::from_secs(2))?;
    Ok(sock.into())
}

/// The OPEN a generator speaker sends. As BIRD 2, FRR and OpenBGPD do by default: graceful
/// restart (helper, nothing kept across a restart), so the DUT may count on our End-of-RIB
/// (RFC 4724); without it where `spec` says so.
pub(crate) fn open_message(spec: PeerSpec, hold: u16) -> Vec<u8> {
    let mut caps = vec![
        Capability::Multiprotocol { afi: 1, safi: 1 },
        Capability::RouteRefresh,
        Capability::FourOctetAs(spec.asn),
    ];
    if spec.graceful_restart {
        caps.push(Capability::GracefulRestart {
            flags: 0,
            restart_time: 120,
            families: Vec::new(),
        });
    }
    Open::new(spec.asn, hold, spec.local, caps).encode()
}

/// Our OPEN, then OpenSent and OpenConfirm (RFC 4271 section 8.2.2): their OPEN, then
/// KEEPALIVE. What was read beyond them (`buf[..hi]`), and the negotiated hold time.
pub(crate) fn handshake(
    stream: &mut TcpStream,
    spec: PeerSpec,
    hold: u16,
) -> Result<(Vec<u8>, usize, u16), SessionError> {
    let peer = spec.local;
    let err = io_err(peer);
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(&err)?;
    stream.write_all(&open_message(spec, hold)).map_err(&err)?;
    let mut buf = vec![0u8; READ_BUFFER];
    let mut hi = 0;
    let mut negotiated = None;
    loop {
        let n = next_message(stream, &mut buf, &mut hi).map_err(&err)?;
        let msg = buf.get(..n).unwrap_or_default();
        match ribshard_wire::decode(msg, &Default::default()) {
            Ok(Message::Open(o)) if negotiated.is_none() => {
                negotiated = Some(hold.min(o.hold_time));
                stream.write_all(&keepalive()).map_err(&err)?;
            }
            Ok(Message::Keepalive) if negotiated.is_some() => {
                buf.copy_within(n..hi, 0);
                hi -= n;
                return Ok((buf, hi, negotiated.unwrap_or(hold)));
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
        let mut stream = connect(peer, dut, None).map_err(&err)?;
        stream.set_nodelay(true).map_err(&err)?;
        let (buf, hi, hold) = handshake(&mut stream, spec, hold)?;
        stream.set_read_timeout(None).map_err(&err)?;
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
                        if !count_update(msg, h) {
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
        if let Some(mut h) = guard {
            h.settle(now);
            stats.held.store(h.held(), Ordering::Relaxed);
            stats.extras.store(h.unexpected(), Ordering::Relaxed);
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

/// Takes the IPv4 Withdrawn Routes and NLRI fields of one UPDATE (RFC 4271 section 4.3) for
/// the next [`Holding::settle`]. False when the fields do not parse.
fn count_update(msg: &[u8], h: &mut Holding) -> bool {
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
    if let Some(lean) = h.lean.as_mut() {
        let (mut ann, mut wd) = (0, 0);
        let ok = prefixes(withdrawn, |key| {
            wd += 1;
            lean.remove(key);
        }) && prefixes(nlri, |key| {
            ann += 1;
            // Its own routes back: a real peer drops them (and holds no other path).
            if announce {
                lean.add(key);
            }
        });
        h.announced += ann;
        h.withdrawn += wd;
        return ok;
    }
    // The attributes as the receiver would compare them: their bytes (never 0 for an
    // announcement, so that 0 can mean "not held"); judging, who sent them.
    let hash = if nlri.is_empty() {
        0
    } else if h.verdict.is_some() {
        first_as(attrs)
            .and_then(crate::address::route_server_client)
            .map_or(0, |s| s as u64 + 1)
    } else {
        fnv1a(attrs) | 1
    };
    let tagged = h.require.is_empty() || carries(attrs, &h.require);
    let pending = &mut h.pending;
    prefixes(withdrawn, |key| {
        pending.push(Receipt {
            key,
            announce: false,
            attrs: 0,
            tagged: true,
        })
    }) && prefixes(nlri, |key| {
        pending.push(Receipt {
            key,
            announce,
            attrs: hash,
            tagged,
        })
    })
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
fn as_path_contains(attrs: &[u8], asn: u32) -> bool {
    let mut segs = as_path(attrs).unwrap_or_default();
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
    false
}

fn prefixes(mut b: &[u8], mut f: impl FnMut(u64)) -> bool {
    while let Some((&len, rest)) = b.split_first() {
        let n = usize::from(len).div_ceil(8);
        if len > 32 || rest.len() < n {
            return false;
        }
        // Four octets read at once and the ones past the prefix masked off: a copy of n
        // octets was a call to memcpy per prefix (perf showed it among a receiver's hottest).
        let addr = match rest {
            [a, b, c, d, ..] => {
                u32::from_be_bytes([*a, *b, *c, *d])
                    & u32::MAX.checked_shl(32 - 8 * n as u32).unwrap_or(0)
            }
            _ => rest
                .iter()
                .take(n)
                .enumerate()
                .fold(0, |w, (i, x)| w | u32::from(*x) << (24 - 8 * i)),
        };
        f((u64::from(addr) << 8) | u64::from(len));
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

    /// NLRI of every length decode to the same keys whether four octets follow them or the
    /// field ends (the fast path reads four at once and masks).
    #[test]
    fn prefixes_of_every_length_decode_alike() {
        let cases: [(&[u8], u64); 6] = [
            (&[0], 0),
            (&[8, 10], key([10, 0, 0, 0], 8)),
            (&[12, 172, 16], key([172, 16, 0, 0], 12)),
            (&[24, 192, 0, 2], key([192, 0, 2, 0], 24)),
            (&[25, 198, 51, 100, 128], key([198, 51, 100, 128], 25)),
            (&[32, 203, 0, 113, 7], key([203, 0, 113, 7], 32)),
        ];
        for (nlri, want) in cases {
            let mut alone = Vec::new();
            assert!(prefixes(nlri, |k| alone.push(k)));
            assert_eq!(alone, [want], "{nlri:?} at the end of the field");
            // Followed by another prefix: four octets (or more) after it.
            let mut field = nlri.to_vec();
            field.extend([32, 255, 255, 255, 255]);
            let mut both = Vec::new();
            assert!(prefixes(&field, |k| both.push(k)));
            assert_eq!(
                both,
                [want, key([255; 4], 32)],
                "{nlri:?} followed by another"
            );
        }
        assert!(!prefixes(&[24, 10, 0], |_| {}), "cut short");
        assert!(!prefixes(&[33, 1, 2, 3, 4, 5], |_| {}), "longer than 32");
    }

    /// One UPDATE received and applied.
    fn receive(msg: &[u8], h: &mut Holding) -> bool {
        let parsed = count_update(msg, h);
        h.settle(0);
        parsed
    }

    fn key(a: [u8; 4], len: u8) -> u64 {
        (u64::from(u32::from_be_bytes(a)) << 8) | u64::from(len)
    }

    #[test]
    fn counts_announcements_and_withdrawals() {
        let index = Arc::new(
            Index::new([key([10, 0, 0, 0], 8), key([198, 51, 100, 0], 24)]).expect("index"),
        );
        let mut h = Holding::new(index, 65_010);
        let i = h.index.get(key([198, 51, 100, 0], 24)).expect("indexed");
        h.bits.set(i);
        assert!(receive(&update(&[65_001, 65_002]), &mut h));
        assert_eq!(h.bits.count(), 1, "10/8 held, 198.51.100/24 withdrawn");
        assert_eq!(h.extras.len(), 1, "192.0.2.0/24 is not in the index");
    }

    /// A lean receiver ends with the count and sum of the table an exact one holds, and
    /// drops its own routes sent back as a real peer does.
    #[test]
    fn a_lean_receiver_sums_what_it_holds() {
        let (ten, doc, nw) = (
            key([10, 0, 0, 0], 8),
            key([192, 0, 2, 0], 24),
            key([198, 51, 100, 0], 24),
        );
        let index = Arc::new(Index::new([ten, doc, nw]).expect("index"));
        let mut h = Holding::lean(index.clone(), 65_010);
        // 198.51.100.0/24 held first, then withdrawn by the UPDATE that announces the others.
        h.lean.as_mut().expect("lean").add(nw);
        assert!(receive(&update(&[65_001, 65_002]), &mut h));
        assert_eq!(h.lean, Some(Lean::of([ten, doc])));
        assert_eq!((h.held(), h.announced, h.withdrawn), (2, 2, 1));
        assert_ne!(
            Lean::of([ten, doc]),
            Lean::of([ten, nw]),
            "same count, other prefixes"
        );
        // Its own AS in the path: dropped, the rest as before.
        let mut own = Holding::lean(index, 65_002);
        assert!(receive(&update(&[65_001, 65_002]), &mut own));
        assert_eq!(
            own.lean.map(|l| l.held),
            Some(-1),
            "only the withdrawal counted"
        );
        let keys = Index::new([ten, doc]).expect("index").keys();
        assert_eq!(Lean::of(keys), Lean::of([doc, ten]));
    }

    /// What a receiver is sent is counted: prefixes announced and withdrawn, and an
    /// announcement of what it already holds, with the same attributes, as redundant.
    #[test]
    fn counts_what_the_receiver_gets_and_what_it_did_not_need() {
        let index = Arc::new(
            Index::new([key([10, 0, 0, 0], 8), key([198, 51, 100, 0], 24)]).expect("index"),
        );
        let mut h = Holding::new(index, 65_010);
        assert!(receive(&update(&[65_001]), &mut h));
        assert_eq!((h.announced, h.withdrawn, h.redundant), (2, 1, 0));
        // The same again: 10/8 is held with these attributes (192.0.2/24 is not indexed).
        assert!(receive(&update(&[65_001]), &mut h));
        assert_eq!((h.announced, h.withdrawn, h.redundant), (4, 2, 1));
        // Other attributes: a real change.
        assert!(receive(&update(&[65_001, 65_003]), &mut h));
        assert_eq!(h.redundant, 1);
    }

    #[test]
    fn own_as_in_path_is_a_loop_and_replaces_the_held_route() {
        let index = Arc::new(Index::new([key([10, 0, 0, 0], 8)]).expect("index"));
        let mut h = Holding::new(index, 65_002);
        assert!(receive(&update(&[65_001]), &mut h));
        assert_eq!(h.bits.count(), 1);
        assert!(receive(&update(&[65_001, 65_002]), &mut h));
        assert_eq!(h.bits.count(), 0, "looped route withdraws 10/8");
        assert!(h.extras.is_empty());
    }

    /// `--policy`: held routes without the required communities are known per prefix.
    #[test]
    fn knows_which_held_routes_lack_the_required_communities() {
        let index = Arc::new(
            Index::new([key([10, 0, 0, 0], 8), key([198, 51, 100, 0], 24)]).expect("index"),
        );
        let mut h = Holding::new(index, 65_010);
        h.require(&[64_500 << 16 | 100]);
        assert!(receive(&update(&[65_001]), &mut h));
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
        assert!(receive(&m, &mut h));
        assert_eq!(h.untagged.count(), 0, "announced again, tagged");
        // A new requirement: everything held is untagged until announced with it.
        h.require(&[64_500 << 16 | 100, 64_500 << 16 | 200]);
        assert_eq!(h.untagged.count(), 1);
        assert!(receive(&m, &mut h));
        assert_eq!(h.untagged.count(), 1, "one of the two is missing");
        assert!(receive(&update(&[65_001, 65_010]), &mut h));
        assert_eq!(h.untagged.count(), 0, "a looped route: 10/8 no longer held");
    }

    /// Every key given gets one number, in order of first appearance; keys not given and
    /// keys too wide for a slot (IPv6 prefixes, `table::key`) have none.
    #[test]
    fn index_numbers_each_key_once() {
        let keys: Vec<u64> = (0..50_000u64)
            .map(|i| {
                key(
                    (i.wrapping_mul(2_654_435_761) as u32).to_be_bytes(),
                    (i % 33) as u8,
                )
            })
            .collect();
        let given = keys.iter().chain(&keys[..1000]).copied().chain([u64::MAX]);
        let index = Index::new(given).expect("index");
        let distinct: HashSet<u64> = keys.iter().copied().collect();
        assert_eq!(index.len(), distinct.len());
        let mut seen = HashSet::new();
        for k in &keys {
            let n = index.get(*k).expect("numbered");
            assert!(u64::from(n) < distinct.len() as u64);
            seen.insert(n);
        }
        assert_eq!(seen.len(), distinct.len(), "one number per key");
        assert_eq!(index.get(keys[0]), Some(0));
        assert_eq!(index.get(u64::MAX), None);
        assert_eq!(index.get(key([192, 0, 2, 0], 25)), None);
    }

    #[test]
    fn truncated_update_is_refused() {
        let index = Arc::new(Index::new([]).expect("index"));
        let mut h = Holding::new(index, 1);
        let m = update(&[1]);
        assert!(!receive(&m[..22], &mut h));
    }
}
