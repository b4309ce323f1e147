//! An rtnetlink socket (netlink-sys underneath): requests sent many to a `sendmsg`, dumps,
//! notifications, and a kernel-side filter that drops the echoes of our own writes.

use super::{Message, Messages, NLMSG_DONE, NLMSG_ERROR, NLM_F_DUMP_INTR};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum NlError {
    #[error("netlink: {0}")]
    Io(#[from] io::Error),
    #[error("the kernel refused the request: {}", io::Error::from_raw_os_error(*errno))]
    Refused { errno: i32 },
    #[error("a dump was interrupted {0} times by changes")]
    Interrupted(u32),
}

pub struct NlSocket {
    sock: Socket,
    portid: u32,
    buf: Vec<u8>,
}

/// Receive room: a burst of notifications (another daemon loading a table) or of error
/// answers must not overflow it, which would cost a full dump to recover.
const RECEIVE_BUFFER: usize = 32 << 20;
const SEND_BUFFER: usize = 4 << 20;

impl NlSocket {
    /// A socket listening to these multicast groups (`RTNLGRP_*`; none for one that only
    /// sends requests).
    pub fn open(groups: &[u32]) -> io::Result<NlSocket> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        let addr = sock.bind_auto()?;
        // Errors carry only the failed request's header, not all of it, and a reason.
        let _ = sock.set_cap_ack(true);
        let _ = sock.set_ext_ack(true);
        set_buffer(&sock, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, RECEIVE_BUFFER);
        set_buffer(&sock, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, SEND_BUFFER);
        for g in groups {
            sock.add_membership(*g)?;
        }
        Ok(NlSocket {
            sock,
            portid: addr.port_number(),
            buf: vec![0; 1 << 20],
        })
    }

    /// The port the kernel gave this socket: notifications of its own requests carry it.
    pub fn portid(&self) -> u32 {
        self.portid
    }

    /// Sends a buffer of messages; the kernel runs them all before returning (rtnetlink
    /// requests are handled in the sender's context), so answers are queued once it does.
    pub fn send(&self, buf: &[u8]) -> io::Result<()> {
        let kernel = SocketAddr::new(0, 0);
        let mut at = 0;
        while at < buf.len() {
            let n = self
                .sock
                .send_to(buf.get(at..).unwrap_or(&[]), &kernel, 0)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "netlink send"));
            }
            at += n;
        }
        Ok(())
    }

    /// Reads what is queued into the socket's buffer: `Ok(None)` when nothing is (with
    /// `wait` none) or the wait passed.
    pub fn recv(&mut self, wait: Option<Duration>) -> io::Result<Option<&[u8]>> {
        if let Some(w) = wait {
            if !self.readable(w)? {
                return Ok(None);
            }
        }
        let flags = if wait.is_some() {
            0
        } else {
            libc::MSG_DONTWAIT
        };
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.sock.recv(&mut &mut buf[..], flags);
        self.buf = buf;
        match r {
            Ok(n) => Ok(self.buf.get(..n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether something can be read within `wait`.
    pub fn readable(&self, wait: Duration) -> io::Result<bool> {
        let mut fds = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one pollfd we own, for the duration of the call.
        let r = unsafe { libc::poll(&mut fds, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(r > 0)
    }

    pub fn raw_fd(&self) -> i32 {
        self.sock.as_raw_fd()
    }

    /// Sends a dump request and returns every message of the answer as (type, payload).
    /// A dump the kernel marks interrupted (the table changed under it) is asked again.
    pub fn dump(&mut self, request: &[u8], seq: u32) -> Result<Vec<(u16, Vec<u8>)>, NlError> {
        let mut tries = 0;
        loop {
            self.send(request)?;
            let mut out = Vec::new();
            let mut interrupted = false;
            'read: loop {
                let Some(buf) = self.recv(Some(Duration::from_secs(10)))? else {
                    return Err(NlError::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no answer to a dump",
                    )));
                };
                for m in Messages::new(buf) {
                    if m.seq != seq {
                        continue;
                    }
                    interrupted |= m.flags & NLM_F_DUMP_INTR != 0;
                    match m.kind {
                        NLMSG_DONE => break 'read,
                        NLMSG_ERROR => match m.error() {
                            Some((0, _)) => {}
                            Some((e, _)) => return Err(NlError::Refused { errno: -e }),
                            None => {}
                        },
                        k => out.push((k, m.payload.to_vec())),
                    }
                }
            }
            if !interrupted {
                return Ok(out);
            }
            tries += 1;
            if tries >= 5 {
                return Err(NlError::Interrupted(tries));
            }
        }
    }

    /// Has the kernel drop, before they reach this socket, notifications caused by the
    /// socket with port `pid` (our own FIB writes: a table load would echo a million
    /// routes back). A classic BPF program on the `nlmsg_pid` field, as FRR's zebra does.
    pub fn drop_from(&self, pid: u32) -> io::Result<()> {
        // Absolute loads read in network order: compare with the port in that order.
        let prog = [
            // A = nlmsg_pid
            sock_filter(0x20, 0, 0, 12),
            // if A == pid: drop, else keep
            sock_filter(0x15, 0, 1, pid.to_be()),
            sock_filter(0x06, 0, 0, 0),
            sock_filter(0x06, 0, 0, 0xffff_ffff),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: the program outlives the call; the kernel copies it.
        let r = unsafe {
            libc::setsockopt(
                self.sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                &fprog as *const libc::sock_fprog as *const libc::c_void,
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

fn sock_filter(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Sets a socket buffer size, past the system maximum when we may (root), else as allowed.
fn set_buffer(sock: &Socket, force: libc::c_int, plain: libc::c_int, size: usize) {
    let v = size as libc::c_int;
    for opt in [force, plain] {
        // SAFETY: an int option on a socket we own.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

/// The messages of a buffer that answer errors: (errno, sequence number).
pub fn errors(buf: &[u8]) -> impl Iterator<Item = (i32, u32)> + '_ {
    Messages::new(buf).filter_map(|m: Message| m.error().filter(|(e, _)| *e != 0))
}
