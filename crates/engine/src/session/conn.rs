//! One TCP connection of a session: framed reads into a reused buffer, and a writer task fed
//! through a bounded queue, so a neighbor that stops reading never blocks the session task
//! (its keepalives and hold timer) — the send hold timer (RFC 9687) notices it instead.

use super::status::{OutputQueue, SessionCounters};
use bytes::{Bytes, BytesMut};
use ribshard_adjout::Outgoing;
use ribshard_wire::message::MessageType;
use ribshard_wire::{frame, DecodeError};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Messages that may wait for the socket; past this the queue counts as blocked.
const WRITE_QUEUE: usize = 4096;

/// Write progress, shared with the writer task.
#[derive(Debug)]
pub(crate) struct Progress {
    base: Instant,
    queued: AtomicU64,
    written: AtomicU64,
    /// Messages queued and written, for the output queue operators see (Junos "OutQ").
    queued_messages: AtomicU64,
    written_messages: AtomicU64,
    /// Milliseconds since `base` of the last completed write (or of the connection).
    last_write_ms: AtomicU64,
    /// The socket, while the writer holds it (-1 after): asked what the kernel has not sent.
    fd: AtomicI32,
}

impl Progress {
    /// Counts bytes handed to the writer.
    fn enqueued(&self, len: u64, messages: u64) {
        self.queued_messages.fetch_add(messages, Ordering::Relaxed);
        if self.queued.load(Ordering::Relaxed) == self.written.load(Ordering::Relaxed) {
            // Nothing was waiting: the stall clock starts now.
            self.last_write_ms
                .store(self.base.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        self.queued.fetch_add(len, Ordering::Relaxed);
    }

    /// What is queued and not yet written.
    pub(crate) fn queue(&self) -> OutputQueue {
        OutputQueue {
            messages: self
                .queued_messages
                .load(Ordering::Relaxed)
                .saturating_sub(self.written_messages.load(Ordering::Relaxed)),
            octets: self.backlog() as u64,
        }
    }

    /// Octets queued and not yet written.
    pub(crate) fn backlog(&self) -> usize {
        self.queued
            .load(Ordering::Relaxed)
            .saturating_sub(self.written.load(Ordering::Relaxed)) as usize
    }

    /// Octets the kernel holds in the socket's send queue (SIOCOUTQ: not yet acknowledged
    /// by the peer), 0 once the writer is gone. The descriptor is read without a lock: if
    /// the writer closes it meanwhile and the number is reused, the answer is a wrong count
    /// for one packing decision, nothing worse (the ioctl only reads a size).
    fn kernel_unsent(&self) -> usize {
        let fd = self.fd.load(Ordering::Relaxed);
        if fd < 0 {
            return 0;
        }
        let mut n: libc::c_int = 0;
        // SAFETY: TIOCOUTQ writes one c_int, which we own.
        let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
        if r == 0 {
            usize::try_from(n).unwrap_or(0)
        } else {
            0
        }
    }

    /// How long queued data has waited without any write completing; zero if nothing waits.
    pub(crate) fn stalled_for(&self) -> std::time::Duration {
        if self.queued.load(Ordering::Relaxed) == self.written.load(Ordering::Relaxed) {
            return std::time::Duration::ZERO;
        }
        let last = self.last_write_ms.load(Ordering::Relaxed);
        self.base
            .elapsed()
            .saturating_sub(std::time::Duration::from_millis(last))
    }
}

/// A connection's UPDATE stream, as an update group sees it.
#[derive(Clone)]
pub(crate) struct RouteSink {
    tx: mpsc::UnboundedSender<(Bytes, u32)>,
    progress: Arc<Progress>,
    counters: Arc<SessionCounters>,
    neighbor: String,
}

impl ribshard_adjout::Sink for RouteSink {
    fn send(&self, out: Outgoing) -> bool {
        let len = out.bytes.len();
        let ok = self.tx.send((out.bytes, out.messages)).is_ok();
        if ok {
            self.progress.enqueued(len as u64, u64::from(out.messages));
            let t = if out.route_refresh {
                MessageType::RouteRefresh
            } else {
                MessageType::Update
            };
            self.counters.sent(t, u64::from(out.messages), len);
        }
        ok
    }
    fn queued(&self) -> usize {
        self.progress.backlog()
    }
    fn unsent(&self) -> usize {
        self.progress.backlog() + self.progress.kernel_unsent()
    }
    fn neighbor(&self) -> &str {
        &self.neighbor
    }
    fn duplicate(&self) -> Box<dyn ribshard_adjout::Sink> {
        Box::new(self.clone())
    }
}

pub(crate) enum ReadError {
    /// The peer closed the connection, or the socket failed.
    Closed(Option<std::io::Error>),
    /// The header is invalid: the NOTIFICATION to send comes with it.
    Header(DecodeError),
}

pub(crate) struct Conn {
    read: OwnedReadHalf,
    buf: BytesMut,
    write: Option<mpsc::Sender<(Bytes, u32)>>,
    /// UPDATEs from the update groups (with their message counts): unbounded here, bounded
    /// by the group's high-water mark on [`Progress::backlog`].
    routes: mpsc::UnboundedSender<(Bytes, u32)>,
    counters: Arc<SessionCounters>,
    pub(crate) progress: Arc<Progress>,
    /// We initiated this connection (collision resolution needs to know, RFC 4271 6.8).
    pub(crate) outgoing: bool,
    pub(crate) write_queue_blocks: u64,
    writer: tokio::task::JoinHandle<()>,
    /// Octets read since [`Conn::take_read`] last asked.
    read_since: usize,
}

/// How long a closed connection may take to write what was queued (a final NOTIFICATION)
/// before the socket is dropped anyway: a neighbor that does not read must not keep it open.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Conn {
    pub(crate) fn new(stream: TcpStream, outgoing: bool, counters: Arc<SessionCounters>) -> Conn {
        use std::os::fd::AsRawFd;
        let fd = stream.as_raw_fd();
        let (read, mut write) = stream.into_split();
        let (tx, mut rx) = mpsc::channel::<(Bytes, u32)>(WRITE_QUEUE);
        let (routes, mut routes_rx) = mpsc::unbounded_channel::<(Bytes, u32)>();
        let progress = Arc::new(Progress {
            base: Instant::now(),
            queued: AtomicU64::new(0),
            written: AtomicU64::new(0),
            queued_messages: AtomicU64::new(0),
            written_messages: AtomicU64::new(0),
            last_write_ms: AtomicU64::new(0),
            fd: AtomicI32::new(fd),
        });
        let p = progress.clone();
        let writer = tokio::spawn(async move {
            let mut routes_open = true;
            loop {
                // Keepalives and NOTIFICATIONs go before queued UPDATEs.
                let (b, n) = tokio::select! {
                    biased;
                    m = rx.recv() => match m {
                        Some(b) => b,
                        None => break,
                    },
                    m = routes_rx.recv(), if routes_open => match m {
                        Some(b) => b,
                        None => {
                            routes_open = false;
                            continue;
                        }
                    },
                };
                if write.write_all(&b).await.is_err() {
                    p.fd.store(-1, Ordering::Relaxed);
                    return;
                }
                p.written.fetch_add(b.len() as u64, Ordering::Relaxed);
                p.written_messages
                    .fetch_add(u64::from(n), Ordering::Relaxed);
                p.last_write_ms
                    .store(p.base.elapsed().as_millis() as u64, Ordering::Relaxed);
            }
            // The session dropped its sender: everything queued (a final NOTIFICATION
            // included) is written; now close our side.
            let _ = write.shutdown().await;
            p.fd.store(-1, Ordering::Relaxed);
        });
        Conn {
            read,
            buf: BytesMut::with_capacity(1 << 16),
            write: Some(tx),
            routes,
            counters,
            progress,
            outgoing,
            write_queue_blocks: 0,
            writer,
            read_since: 0,
        }
    }

    /// Queues a message. A full queue is counted (Junos "write queue blocks") and the message
    /// dropped: the neighbor is not reading, and the send hold timer will end the session.
    pub(crate) fn send(&mut self, msg: Bytes) {
        let Some(tx) = &self.write else { return };
        let len = msg.len();
        let t = msg.get(18).copied().and_then(MessageType::from_u8);
        match tx.try_send((msg, 1)) {
            Ok(()) => {
                self.progress.enqueued(len as u64, 1);
                if let Some(t) = t {
                    self.counters.sent(t, 1, len);
                }
            }
            Err(_) => self.write_queue_blocks += 1,
        }
    }

    /// Where the update groups write this connection's UPDATEs.
    pub(crate) fn route_sink(&self, neighbor: String) -> RouteSink {
        RouteSink {
            neighbor,
            tx: self.routes.clone(),
            progress: self.progress.clone(),
            counters: self.counters.clone(),
        }
    }

    pub(crate) fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.read.peer_addr().ok()
    }

    pub(crate) fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.read.local_addr().ok()
    }

    /// Octets read from the socket since the last call.
    pub(crate) fn take_read(&mut self) -> usize {
        std::mem::take(&mut self.read_since)
    }

    /// Octets the kernel holds for us, not read yet (FIONREAD).
    pub(crate) fn unread_bytes(&self) -> usize {
        use std::os::fd::AsRawFd;
        let fd = self.read.as_ref().as_raw_fd();
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int, which we own, for a socket we own.
        let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
        if r == 0 {
            usize::try_from(n).unwrap_or(0)
        } else {
            0
        }
    }

    /// Whether the neighbor has closed its side (FIN or RST), whatever is still unread:
    /// the socket's TCP state is CLOSE_WAIT or CLOSE.
    pub(crate) fn peer_closed(&self) -> bool {
        use std::os::fd::AsRawFd;
        const TCP_CLOSE: u8 = 7;
        const TCP_CLOSE_WAIT: u8 = 8;
        let fd = self.read.as_ref().as_raw_fd();
        // SAFETY: tcp_info is plain data; getsockopt writes at most `len` octets of it.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: a socket we own, and a buffer of `len` octets we own.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut info as *mut libc::tcp_info).cast(),
                &mut len,
            )
        };
        r == 0 && matches!(info.tcpi_state, TCP_CLOSE | TCP_CLOSE_WAIT)
    }

    /// Whether a whole message is already buffered (reading it will not wait).
    pub(crate) fn has_message(&self, max_len: usize) -> bool {
        matches!(frame(&self.buf, max_len), Ok(Some(_)))
    }

    /// The next whole message if it is already buffered (taking it will not wait).
    pub(crate) fn buffered_message(&mut self, max_len: usize) -> Option<Result<Bytes, ReadError>> {
        match frame(&self.buf, max_len) {
            Ok(Some(len)) => Some(Ok(self.buf.split_to(len).freeze())),
            Ok(None) => None,
            Err(e) => Some(Err(ReadError::Header(e))),
        }
    }

    /// Closes after everything queued is written, or after [`CLOSE_GRACE`]. The read side is
    /// drained until the neighbor closes too: closing a socket with unread data makes Linux
    /// send a RST, which can destroy a NOTIFICATION still in flight (RFC 4271 section 6 wants
    /// it delivered before the connection goes).
    pub(crate) fn close(self) {
        let Conn {
            write,
            writer,
            mut read,
            ..
        } = self;
        drop(write);
        tokio::spawn(async move {
            let drain = async {
                let mut sink = [0u8; 4096];
                loop {
                    match read.read(&mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
            };
            let _ = tokio::time::timeout(CLOSE_GRACE, drain).await;
            writer.abort();
        });
    }

    /// The next whole message (header included). Cancel-safe: partial data stays buffered.
    pub(crate) async fn next_message(&mut self, max_len: usize) -> Result<Bytes, ReadError> {
        loop {
            match frame(&self.buf, max_len) {
                Ok(Some(len)) => return Ok(self.buf.split_to(len).freeze()),
                Ok(None) => {}
                Err(e) => return Err(ReadError::Header(e)),
            }
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(1 << 16);
            }
            match self.read.read_buf(&mut self.buf).await {
                Ok(0) => return Err(ReadError::Closed(None)),
                Ok(n) => self.read_since += n,
                Err(e) => return Err(ReadError::Closed(Some(e))),
            }
        }
    }
}
