//! `--overload`: what a router faces beside the routes it is timed on, all through the timed
//! phase. A downstream neighbor (in the timed downstream's group) that never reads; a
//! neighbor with a 3 s hold time; a configured neighbor that connects and sends nothing,
//! and one that stops half-way through its OPEN; 100 management clients, each asking again
//! as soon as it is answered. The upstreams themselves already send faster than any DUT
//! takes. The others' convergence is compared with runs without (`scripts/bench-overload`).

use crate::dut::{Dut, DutKind, Neighbor, DUT_ADDR};
use crate::speaker::{connect, handshake, open_message, PeerSpec, Session, SessionError};
use ribshard_wire::{Family, UpdateBuilder};
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Management clients.
pub const CLIENTS: usize = 100;

/// The neighbors `--overload` adds to a transit topology, in this order: the one that never
/// reads, the 3 s one, the silent one, the half-OPEN one.
pub fn neighbors() -> Vec<Neighbor> {
    let n = |i: u8, group: &str, receives: bool| Neighbor {
        addr: crate::address::of(crate::address::Kind::Overload, usize::from(i - 1)),
        asn: 64_910 + u32::from(i),
        group: group.into(),
        receives,
        sends: false,
    };
    vec![
        n(1, "downstreams", true),
        n(2, "others", false),
        n(3, "others", false),
        n(4, "others", false),
    ]
}

/// What the overload came to, as `--json` records it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OverloadResult {
    /// Management requests answered, and failed (refused, cut off, an error status).
    pub answers: u64,
    pub failures: u64,
    /// The 3 s hold time neighbor was still up at the end, and the longest silence it saw.
    pub hold3_up: bool,
    pub hold3_max_gap_s: f64,
}

/// The overload under way; ended by [`Overload::stop`].
pub struct Overload {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<()>>,
    answers: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    hold3: Session,
    /// Held open, never read or written again.
    _stuck: Vec<TcpStream>,
}

#[derive(Debug, thiserror::Error)]
pub enum OverloadError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("--overload: {what} from {from}: {source}")]
    Io {
        what: &'static str,
        from: Ipv4Addr,
        source: std::io::Error,
    },
    #[error("--overload runs on full-table and two-full-tables, not {0}")]
    Scenario(&'static str),
}

/// The neighbor that never reads: OPEN and KEEPALIVE both ways, its End-of-RIB, then
/// nothing read again, through a small receive buffer so the DUT's side fills up.
fn never_reader(n: &Neighbor, to: SocketAddrV4) -> Result<TcpStream, OverloadError> {
    let mut s = connect(n.addr, to, Some(4096)).map_err(io("connect", n.addr))?;
    handshake(&mut s, spec(n), 0)?;
    s.write_all(&UpdateBuilder::end_of_rib(Family::Ipv4Unicast))
        .map_err(io("End-of-RIB", n.addr))?;
    Ok(s)
}

fn spec(n: &Neighbor) -> PeerSpec {
    PeerSpec {
        local: n.addr,
        asn: n.asn,
        graceful_restart: true,
    }
}

fn io(what: &'static str, from: Ipv4Addr) -> impl Fn(std::io::Error) -> OverloadError {
    move |source| OverloadError::Io { what, from, source }
}

/// One management request, answered in full: whether it succeeded.
type Ask = Box<dyn FnMut(usize) -> bool + Send>;

/// A client of ribshard's API: HTTP/1.1 over its socket, a connection per request (as the
/// CLI does), rotating through summary, neighbors, the whole table, route summary and
/// metrics.
fn ribshard_client(socket: PathBuf) -> Ask {
    const PATHS: [&str; 5] = [
        "/v1/bgp/summary",
        "/v1/bgp/neighbors",
        "/v1/routes?format=text",
        "/v1/routes/summary",
        "/metrics",
    ];
    Box::new(move |i| {
        let Ok(mut s) = UnixStream::connect(&socket) else {
            return false;
        };
        let path = PATHS[i % PATHS.len()];
        if write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: ribshard\r\nConnection: close\r\n\r\n"
        )
        .is_err()
        {
            return false;
        }
        let mut r = BufReader::new(s);
        let mut status = String::new();
        let ok = r.read_line(&mut status).is_ok() && status.contains(" 200 ");
        ok && std::io::copy(&mut r, &mut std::io::sink()).is_ok()
    })
}

/// A client of BIRD's control socket (what birdc speaks), one connection, the same five
/// questions: protocols, one protocol in full, the whole table, route count, memory.
fn bird_client(socket: PathBuf) -> Ask {
    const COMMANDS: [&str; 5] = [
        "show protocols",
        "show protocols all n0",
        "show route",
        "show route count",
        "show memory",
    ];
    let mut conn: Option<(UnixStream, BufReader<UnixStream>)> = None;
    Box::new(move |i| {
        if conn.is_none() {
            let Ok(s) = UnixStream::connect(&socket) else {
                return false;
            };
            let Ok(r) = s.try_clone() else { return false };
            let mut r = BufReader::new(r);
            let mut hello = String::new();
            if r.read_line(&mut hello).is_err() {
                return false;
            }
            conn = Some((s, r));
        }
        let Some((w, r)) = conn.as_mut() else {
            return false;
        };
        if writeln!(w, "{}", COMMANDS[i % COMMANDS.len()]).is_err() {
            conn = None;
            return false;
        }
        // Replies end with a line of four digits and a space (0000 for success; 8xxx and
        // 9xxx are errors).
        let mut line = String::new();
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    conn = None;
                    return false;
                }
                Ok(_) => {
                    let b = line.as_bytes();
                    if b.len() > 4 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b' ' {
                        return !matches!(b[0], b'8' | b'9');
                    }
                }
            }
        }
    })
}

impl Overload {
    /// Brings up the extra neighbors of [`neighbors`] (indices `at` in the topology) and
    /// starts the management clients, for the DUTs the bench has a management client for.
    pub fn start(dut: &Dut, port: u16, extra: &[Neighbor]) -> Result<Overload, OverloadError> {
        let [reader, hold3, silent, half] = extra else {
            unreachable!("the four neighbors of overload::neighbors")
        };
        let to = SocketAddrV4::new(DUT_ADDR, port);
        let mut stuck = vec![never_reader(reader, to)?];
        let hold3 = Session::establish(spec(hold3), to, 3, None, Duration::from_secs(30))?;
        hold3.send(&UpdateBuilder::end_of_rib(Family::Ipv4Unicast))?;
        stuck.push(connect(silent.addr, to, None).map_err(io("connect", silent.addr))?);
        let mut h = connect(half.addr, to, None).map_err(io("connect", half.addr))?;
        h.write_all(open_message(spec(half), 90).get(..20).unwrap_or_default())
            .map_err(io("half an OPEN", half.addr))?;
        stuck.push(h);

        let stop = Arc::new(AtomicBool::new(false));
        let (answers, failures) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let make: Option<Box<dyn Fn() -> Ask>> = match dut.kind {
            DutKind::Ribshard => {
                let s = dut.dir.join("ribshard.sock");
                Some(Box::new(move || ribshard_client(s.clone())))
            }
            DutKind::Bird2 => {
                let s = dut.dir.join("bird.ctl");
                Some(Box::new(move || bird_client(s.clone())))
            }
            _ => None,
        };
        let clients = make
            .map(|make| {
                (0..CLIENTS)
                    .map(|c| {
                        let mut ask = make();
                        let (stop, answers, failures) =
                            (stop.clone(), answers.clone(), failures.clone());
                        std::thread::spawn(move || {
                            // The clients stand for operators' tools on other machines.
                            crate::as_another_machine();
                            let mut i = c;
                            while !stop.load(Ordering::Relaxed) {
                                if ask(i) {
                                    answers.fetch_add(1, Ordering::Relaxed);
                                } else {
                                    failures.fetch_add(1, Ordering::Relaxed);
                                    // Refused or cut off: not a busy loop.
                                    std::thread::sleep(Duration::from_millis(10));
                                }
                                i += 1;
                            }
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Overload {
            stop,
            clients,
            answers,
            failures,
            hold3,
            _stuck: stuck,
        })
    }

    /// Ends the management load (each client after the request under way, not waited
    /// for: a whole table can take a while to come out) and reports; the neighbors'
    /// connections close.
    pub fn stop(self) -> OverloadResult {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.clients);
        let s = &self.hold3.stats;
        let r = OverloadResult {
            answers: self.answers.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            hold3_up: !s.down.load(Ordering::Relaxed),
            hold3_max_gap_s: s.max_keepalive_gap_ns.load(Ordering::Relaxed) as f64 / 1e9,
        };
        self.hold3.close(false);
        r
    }
}
