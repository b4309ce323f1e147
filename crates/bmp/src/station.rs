//! One monitoring station: its connection, kept up with backoff, and what waits to be
//! written to it. The monitor's thread never waits for a station: it appends to the
//! station's outbox, and when a station falls more than the outbox's bound behind, the
//! outbox is dropped, the station told why (Termination, out of resources) and the
//! connection closed; the next connection starts with a fresh dump.

use crate::message::{term, termination};
use bytes::Bytes;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tracing::{info, warn};

/// Octets taken from the outbox per write: the rest stays counted against the bound.
const WRITE_BATCH: usize = 256 * 1024;

/// Which tables a station is sent (RFC 7854 section 5, RFC 8671, RFC 9069).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ribs {
    /// Adj-RIB-In before import policy: every UPDATE as received.
    pub pre_policy: bool,
    /// Adj-RIB-In after import policy: each path as policy left it (the L flag).
    pub post_policy: bool,
    /// The Loc-RIB: every best-path change.
    pub loc_rib: bool,
    /// Adj-RIB-Out after export policy (RFC 8671): every UPDATE each neighbor is sent.
    pub adj_rib_out: bool,
    /// Not a RIB: Route Mirroring (RFC 7854 section 4.7) of every UPDATE received in error,
    /// whether RFC 7606 handled it or it reset the session.
    pub mirroring: bool,
}

impl Ribs {
    /// Whether the station is told of each neighbor (Peer Up and Down, statistics).
    pub fn per_neighbor(self) -> bool {
        self.pre_policy || self.post_policy || self.adj_rib_out || self.mirroring
    }
}

/// One `[[bmp.station]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StationConfig {
    pub name: String,
    pub address: SocketAddr,
    pub ribs: Ribs,
    /// Statistics Reports this often; none when `None`.
    pub statistics_interval: Option<Duration>,
    /// The most octets waiting for the station before it is dropped and dumped again.
    pub buffer: usize,
    /// The first wait before connecting again, doubled after each failure up to `retry_max`.
    pub retry: Duration,
    pub retry_max: Duration,
}

/// Why a connection to a station ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StationError {
    #[error("cannot connect: {0}")]
    Connect(std::io::ErrorKind),
    #[error("connecting timed out")]
    ConnectTimeout,
    #[error("write failed: {0}")]
    Write(std::io::ErrorKind),
    #[error("the station closed the connection")]
    Closed,
    #[error("the station fell {0} octets behind (the bound): dropped, to be dumped again")]
    Overflow(usize),
}

/// What waits to be written, shared by the monitor (which appends) and the connection
/// task (which writes).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    state: Mutex<Queue>,
    ready: Notify,
    /// A batch was written: a dump waiting for room may go on.
    drained: Notify,
}

#[derive(Debug, Default)]
struct Queue {
    messages: VecDeque<Bytes>,
    octets: usize,
    /// Set when the bound was passed: the connection task ends the connection.
    overflow: Option<usize>,
    /// Appending is refused after [`Outbox::close`] until the next [`Outbox::open`].
    open: bool,
    /// Asked to write what waits, then end ([`Outbox::stop`]).
    stopping: bool,
    /// Octets written over every connection.
    written: u64,
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends messages; false (and nothing appended) if the bound is passed or the
    /// connection is down.
    pub(crate) fn push(&self, msgs: impl IntoIterator<Item = Bytes>, bound: usize) -> bool {
        let mut q = self.lock();
        if !q.open || q.overflow.is_some() {
            return false;
        }
        for m in msgs {
            q.octets += m.len();
            q.messages.push_back(m);
        }
        if q.octets > bound {
            q.overflow = Some(q.octets);
            q.messages.clear();
            q.octets = 0;
            drop(q);
            self.ready.notify_one();
            return false;
        }
        drop(q);
        self.ready.notify_one();
        true
    }

    /// The station is too far behind for another reason (what waits for its dump): the
    /// connection ends as if the outbox had overflowed.
    pub(crate) fn overflow(&self, octets: usize) {
        let mut q = self.lock();
        if q.open {
            q.overflow = Some(octets);
            q.messages.clear();
            q.octets = 0;
        }
        drop(q);
        self.ready.notify_one();
    }

    /// Returns once the bound is passed, with the octets that were waiting.
    async fn overflowed(&self) -> usize {
        loop {
            if let Some(octets) = self.lock().overflow {
                return octets;
            }
            self.ready.notified().await;
        }
    }

    fn open(&self) {
        let mut q = self.lock();
        *q = Queue {
            open: true,
            written: q.written,
            ..Queue::default()
        };
    }

    fn close(&self) {
        let mut q = self.lock();
        q.open = false;
        q.messages.clear();
        q.octets = 0;
    }

    /// Write what is queued, then end the connection.
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.ready.notify_one();
    }

    /// Octets waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.lock().octets
    }

    /// Waits until under half the bound waits, or returns false if the connection ended
    /// meanwhile: a dump goes at the station's pace; the bound is for what cannot wait
    /// (the live feeds).
    pub(crate) async fn room(&self, bound: usize) -> bool {
        loop {
            {
                let q = self.lock();
                if !q.open || q.overflow.is_some() {
                    return false;
                }
                if q.octets < bound / 2 {
                    return true;
                }
            }
            tokio::select! {
                _ = self.drained.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    /// Octets written to the station so far.
    pub(crate) fn written(&self) -> u64 {
        self.lock().written
    }
}

/// The station's connection task tells the monitor.
#[derive(Debug)]
pub(crate) enum Link {
    Connected,
    Down(StationError),
}

/// Keeps a connection to the station: connects, writes what the outbox gets, and after
/// a failure waits (backoff) and connects again. Ends after [`Outbox::stop`].
pub(crate) async fn run(
    id: usize,
    config: StationConfig,
    outbox: Arc<Outbox>,
    events: mpsc::Sender<(usize, Link)>,
) {
    let mut wait = config.retry;
    loop {
        if outbox.lock().stopping {
            return;
        }
        let connected =
            tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(config.address)).await;
        let error = match connected {
            Ok(Ok(stream)) => {
                info!(station = %config.name, address = %config.address, "BMP station connected");
                let _ = stream.set_nodelay(true);
                let since = tokio::time::Instant::now();
                outbox.open();
                if events.send((id, Link::Connected)).await.is_err() {
                    return;
                }
                let e = serve(stream, &outbox).await;
                outbox.close();
                // Backoff starts again after a connection that lasted; one that keeps
                // failing (a station too slow for the feed) is retried less and less often.
                if since.elapsed() >= config.retry_max {
                    wait = config.retry;
                }
                match e {
                    None => return,
                    Some(e) => e,
                }
            }
            Ok(Err(e)) => StationError::Connect(e.kind()),
            Err(_) => StationError::ConnectTimeout,
        };
        warn!(station = %config.name, address = %config.address, retry_in = ?wait, "BMP station: {error}");
        if events.send((id, Link::Down(error))).await.is_err() {
            return;
        }
        let retry = tokio::time::sleep(wait);
        tokio::pin!(retry);
        loop {
            tokio::select! {
                _ = &mut retry => break,
                // Only a stop cuts the wait short.
                _ = outbox.ready.notified() => if outbox.lock().stopping {
                    return;
                },
            }
        }
        wait = (wait * 2).min(config.retry_max);
    }
}

/// Writes the outbox to the station until the connection fails, the station closes it,
/// the outbox overflows, or a stop (`None`) has been written.
async fn serve(stream: TcpStream, outbox: &Outbox) -> Option<StationError> {
    let (mut rd, mut wr) = stream.into_split();
    let mut sink = [0u8; 512];
    loop {
        // What is being written still counts against the bound until it is written.
        let (batch, octets, overflow, stopping) = {
            let mut q = outbox.lock();
            let mut octets = 0;
            let mut batch = Vec::new();
            while octets < WRITE_BATCH {
                let Some(m) = q.messages.pop_front() else {
                    break;
                };
                octets += m.len();
                batch.push(m);
            }
            (batch, octets, q.overflow, q.stopping)
        };
        // One write for the batch: a system call per message cost more than the copy.
        let mut buf = Vec::with_capacity(octets);
        for m in &batch {
            buf.extend_from_slice(m);
        }
        if !buf.is_empty() {
            tokio::select! {
                r = wr.write_all(&buf) => if let Err(e) = r {
                    return Some(StationError::Write(e.kind()));
                },
                // A station that stopped reading blocks the write: the bound passed
                // meanwhile ends the connection (mid-message: nothing more can follow).
                octets = outbox.overflowed() => return Some(StationError::Overflow(octets)),
            }
        }
        {
            let mut q = outbox.lock();
            q.octets = q.octets.saturating_sub(octets);
            q.written += octets as u64;
        }
        if !batch.is_empty() {
            outbox.drained.notify_waiters();
        }
        if let Some(octets) = overflow {
            // Whole messages only were written: the Termination frames correctly.
            let why = termination(
                term::OUT_OF_RESOURCES,
                "ribshard: this station fell too far behind; it gets a fresh dump on the next connection",
            );
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                let _ = wr.write_all(&why).await;
                let _ = wr.shutdown().await;
            })
            .await;
            return Some(StationError::Overflow(octets));
        }
        if stopping && batch.is_empty() {
            let _ = wr.shutdown().await;
            return None;
        }
        if !batch.is_empty() {
            continue;
        }
        tokio::select! {
            _ = outbox.ready.notified() => {}
            // A station sends nothing (RFC 7854 section 3.3); reading finds it gone.
            r = rd.read(&mut sink) => match r {
                Ok(0) => return Some(StationError::Closed),
                Ok(_) => {}
                Err(e) => return Some(StationError::Write(e.kind())),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{frame, initiation, MessageType};
    use std::net::Ipv4Addr;

    fn config(port: u16, buffer: usize) -> StationConfig {
        StationConfig {
            name: "test".into(),
            address: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            ribs: Ribs::default(),
            statistics_interval: None,
            buffer,
            retry: Duration::from_millis(50),
            retry_max: Duration::from_millis(100),
        }
    }

    #[test]
    fn an_outbox_refuses_past_its_bound_and_until_opened() {
        let o = Outbox::default();
        // Closed: nothing is taken.
        assert!(!o.push([Bytes::from_static(b"abc")], 10));
        o.open();
        assert!(o.push([Bytes::from_static(b"abcdef")], 10));
        assert_eq!(o.waiting(), 6);
        // Past the bound: dropped, and nothing more is taken until the next connection.
        assert!(!o.push([Bytes::from_static(b"ghijk")], 10));
        assert_eq!(o.waiting(), 0);
        assert!(!o.push([Bytes::from_static(b"x")], 10));
        o.open();
        assert!(o.push([Bytes::from_static(b"x")], 10));
    }

    #[tokio::test]
    async fn a_station_gets_what_is_pushed_in_order_and_is_connected_to_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let outbox = Arc::new(Outbox::default());
        let (tx, mut rx) = mpsc::channel(4);
        let task = tokio::spawn(run(0, config(port, 1 << 20), outbox.clone(), tx));
        let (mut conn, _) = listener.accept().await.unwrap();
        assert!(matches!(rx.recv().await, Some((0, Link::Connected))));
        let msgs: Vec<Bytes> = (0..3).map(|i| initiation(&format!("r{i}"), "d")).collect();
        assert!(outbox.push(msgs.clone(), 1 << 20));
        let want: usize = msgs.iter().map(Bytes::len).sum();
        let mut got = vec![0u8; want];
        conn.read_exact(&mut got).await.unwrap();
        let mut at = 0;
        for m in &msgs {
            let (f, len) = frame(&got[at..]).unwrap().unwrap();
            assert_eq!(f.ty, MessageType::Initiation as u8);
            assert_eq!(&got[at..at + len], &m[..]);
            at += len;
        }
        // The station goes: the task says so, and connects again.
        drop(conn);
        assert!(matches!(
            rx.recv().await,
            Some((0, Link::Down(StationError::Closed)))
        ));
        let (_again, _) = listener.accept().await.unwrap();
        assert!(matches!(rx.recv().await, Some((0, Link::Connected))));
        outbox.stop();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }
}
