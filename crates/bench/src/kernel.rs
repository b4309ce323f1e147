//! `--fib`: when the daemon under test has its best paths in the kernel. A netlink socket
//! listening to IPv4 route notifications keeps the set of routes the DUT's protocol holds in
//! the main table, and when the last one came: the time from the first UPDATE sent to the
//! table complete is the daemon's forwarding convergence, as a packet would see it. Read
//! here from the kernel, never from the daemon.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const RTMGRP_IPV4_ROUTE: u32 = 0x40;
const RTA_DST: u16 = 1;
const RTA_TABLE: u16 = 15;
const MAIN: u32 = 254;

/// The routes a protocol holds in the main table, as the kernel reports them.
pub struct KernelRoutes {
    held: Arc<Mutex<HashSet<(u32, u8)>>>,
    last_ns: Arc<AtomicU64>,
    lost: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The routing protocol numbers daemons write with (`/etc/iproute2/rt_protos`).
pub fn protocol_of(dut: crate::dut::DutKind) -> Option<u8> {
    match dut {
        crate::dut::DutKind::Ribshard => Some(186),
        crate::dut::DutKind::Bird2 => Some(12),
        _ => None,
    }
}

/// Removes every IPv4 route of `protocol` from the main table. Not `ip route flush`: it sends
/// each route back as dumped, and the kernel refuses a delete naming both a nexthop object and
/// the next hop it resolves to (EINVAL); here each goes by destination and metric alone.
pub fn flush(protocol: u8) -> std::io::Result<()> {
    use std::io::Write;
    let proto = protocol.to_string();
    let out = std::process::Command::new("ip")
        .args([
            "-j", "-4", "route", "show", "table", "main", "proto", &proto,
        ])
        .output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "ip route show proto {protocol}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let routes: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    if routes.is_empty() {
        return Ok(());
    }
    let mut batch = String::new();
    for r in &routes {
        let Some(dst) = r["dst"].as_str() else {
            continue;
        };
        let dst = if dst == "default" { "0.0.0.0/0" } else { dst };
        let metric = r["metric"].as_u64().unwrap_or(0);
        batch += &format!("route del {dst} table main proto {proto} metric {metric}\n");
    }
    let mut child = std::process::Command::new("ip")
        .args(["-force", "-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("ip -batch: no stdin"))?
        .write_all(batch.as_bytes())?;
    let done = child.wait_with_output()?;
    if done.status.success() {
        tracing::info!(
            protocol,
            routes = routes.len(),
            "routes of the DUT's protocol left by an earlier run removed"
        );
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "ip -batch route del: {}",
            String::from_utf8_lossy(&done.stderr).trim()
        )))
    }
}

impl KernelRoutes {
    /// Starts listening (in the calling thread's network namespace).
    pub fn watch(protocol: u8) -> std::io::Result<KernelRoutes> {
        // SAFETY: plain socket calls on a descriptor we own and close in the thread.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        addr.nl_groups = RTMGRP_IPV4_ROUTE;
        let size = 256i32 << 20;
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: options and an address of the sizes given, owned here.
        let ok = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const i32 as *const libc::c_void,
                4,
            );
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &timeout as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            );
            libc::bind(
                fd,
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if ok != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: ours.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let held: Arc<Mutex<HashSet<(u32, u8)>>> = Arc::default();
        let last_ns: Arc<AtomicU64> = Arc::default();
        let lost: Arc<AtomicBool> = Arc::default();
        let stop: Arc<AtomicBool> = Arc::default();
        let thread = {
            let (held, last_ns, lost, stop) =
                (held.clone(), last_ns.clone(), lost.clone(), stop.clone());
            std::thread::Builder::new()
                .name("kernel-routes".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 1 << 20];
                    while !stop.load(Ordering::Relaxed) {
                        // SAFETY: into our buffer, within its length.
                        let n = unsafe {
                            libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0)
                        };
                        if n < 0 {
                            let e = std::io::Error::last_os_error();
                            if e.raw_os_error() == Some(libc::ENOBUFS) {
                                lost.store(true, Ordering::Relaxed);
                            }
                            continue;
                        }
                        let now = crate::speaker::now_ns();
                        let mut h = held.lock().unwrap_or_else(|e| e.into_inner());
                        // Any write of the DUT's counts as work towards the final table (a
                        // route replaced by a better path included), not only a new prefix.
                        let mut seen = false;
                        for (kind, key) in routes(buf.get(..n as usize).unwrap_or(&[]), protocol) {
                            seen = true;
                            match kind {
                                RTM_NEWROUTE => h.insert(key),
                                _ => h.remove(&key),
                            };
                        }
                        if seen {
                            last_ns.store(now, Ordering::Relaxed);
                        }
                    }
                    // SAFETY: ours, closed once.
                    unsafe { libc::close(fd) };
                })?
        };
        Ok(KernelRoutes {
            held,
            last_ns,
            lost,
            stop,
            thread: Some(thread),
        })
    }

    /// Routes held now.
    pub fn count(&self) -> usize {
        self.held.lock().map_or(0, |h| h.len())
    }

    /// When the DUT last wrote a route of the table ([`crate::speaker::now_ns`]).
    pub fn last_ns(&self) -> u64 {
        self.last_ns.load(Ordering::Relaxed)
    }

    /// Notifications were lost (the socket overflowed): the count may be short.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

impl Drop for KernelRoutes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The IPv4 route notifications of `protocol` in the main table in a buffer: (type, (address,
/// length)).
fn routes(mut buf: &[u8], protocol: u8) -> Vec<(u16, (u32, u8))> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            break;
        }
        let msg = &buf[16..len];
        if (kind == RTM_NEWROUTE || kind == RTM_DELROUTE) && msg.len() >= 12 && msg[5] == protocol {
            let dst_len = msg[1];
            let mut table = u32::from(msg[4]);
            let mut dst = 0u32;
            let mut a = &msg[12..];
            while a.len() >= 4 {
                let alen = usize::from(u16::from_ne_bytes([a[0], a[1]]));
                let atype = u16::from_ne_bytes([a[2], a[3]]) & 0x3fff;
                if alen < 4 || alen > a.len() {
                    break;
                }
                let v = &a[4..alen];
                match (atype, v.len()) {
                    (RTA_DST, 4) => dst = u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                    (RTA_TABLE, 4) => table = u32::from_ne_bytes([v[0], v[1], v[2], v[3]]),
                    _ => {}
                }
                a = &a[((alen + 3) & !3).min(a.len())..];
            }
            if table == MAIN {
                out.push((kind, (dst, dst_len)));
            }
        }
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}
