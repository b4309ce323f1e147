//! The kernel watcher (thread `rs-kernel`): mirrors the kernel's routing tables for next-hop
//! resolution, from a dump at start and the kernel's notifications after, and publishes a
//! new [`KernelView`] after each burst of changes, then tells its listeners (the pipeline,
//! which decides again only prefixes whose next hop's answer changed, and the FIB writer,
//! which moves its nexthop objects).
//!
//! It dumps everything again when the kernel may have changed routes without saying so (an
//! interface going down flushes its IPv4 routes silently; an address removed) and when its
//! socket overflowed. Notifications of our own FIB writes are dropped in the kernel (a
//! socket filter on the writer's port): a table load would echo a million routes here.
//! Routes of our protocol changed by anyone else reach the FIB writer as drift.

use crate::kernel::{KernelView, Published, ResolveConfig};
use crate::netlink::route::{self, RouteMsg};
use crate::netlink::{
    nexthop, Builder, Messages, NexthopMsg, NlSocket, AF_INET, AF_INET6, RTM_DELADDR, RTM_DELLINK,
    RTM_DELNEXTHOP, RTM_DELROUTE, RTM_NEWADDR, RTM_NEWLINK, RTM_NEWNEXTHOP, RTM_NEWROUTE,
    RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV6_ROUTE, RTNLGRP_LINK,
    RTNLGRP_NEXTHOP,
};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the watcher tells its listeners.
#[derive(Clone, Debug)]
pub enum KernelEvent {
    /// A new snapshot is published: resolution may have changed.
    Published { version: u64 },
    /// A route of our protocol changed by someone other than our FIB writer.
    OwnRoute { route: RouteMsg, gone: bool },
}

pub type Listener = Box<dyn Fn(&KernelEvent) + Send>;

/// A snapshot larger than this many routes is published at most every
/// [`LARGE_PUBLISH_EVERY`]: each publication copies the mirror.
const LARGE: usize = 50_000;
const LARGE_PUBLISH_EVERY: Duration = Duration::from_millis(200);

/// Waits this long after a change that calls for a full dump, for others to come with it.
const RESYNC_AFTER: Duration = Duration::from_millis(50);

pub struct KernelWatch {
    published: Arc<Published>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot open a netlink socket: {0}")]
    Socket(io::Error),
    #[error("cannot read the kernel's routing tables: {0}")]
    Dump(crate::netlink::NlError),
}

/// Reads every route, nexthop object and interface name into a new view.
fn dump_all(
    sock: &mut NlSocket,
    config: &ResolveConfig,
    seq: &mut u32,
) -> Result<KernelView, crate::netlink::NlError> {
    let mut view = KernelView::new(config.clone());
    let mut b = Builder::default();
    *seq = seq.wrapping_add(1);
    link_dump(&mut b, *seq);
    for (k, payload) in sock.dump(b.finish(), *seq)? {
        if k == RTM_NEWLINK {
            if let Some((index, name)) = link_of(&payload) {
                view.links.insert(index, name);
            }
        }
    }
    b.clear();
    *seq = seq.wrapping_add(1);
    nexthop::put_dump(&mut b, *seq);
    // A kernel without nexthop objects refuses the dump: there are none to know.
    if let Ok(all) = sock.dump(b.finish(), *seq) {
        for (k, payload) in all {
            if k != RTM_NEWNEXTHOP {
                continue;
            }
            if let Some(n) = NexthopMsg::decode(&payload) {
                if n.protocol != config.own_protocol {
                    view.nexthops.insert(n.id, n.spec);
                }
            }
        }
    }
    for family in [AF_INET, AF_INET6] {
        b.clear();
        *seq = seq.wrapping_add(1);
        route::put_dump(&mut b, *seq, family);
        for (k, payload) in sock.dump(b.finish(), *seq)? {
            if k != RTM_NEWROUTE {
                continue;
            }
            if let Some(r) = RouteMsg::decode(&payload) {
                view.apply_route(&r, false);
            }
        }
    }
    Ok(view)
}

fn link_dump(b: &mut Builder, seq: u32) {
    // RTM_GETLINK with an empty ifinfomsg.
    b.begin(
        18,
        crate::netlink::NLM_F_REQUEST | crate::netlink::NLM_F_DUMP,
        seq,
        &[0u8; 16],
    );
    b.end();
}

/// An interface's index and name from an `RTM_NEWLINK` payload (`ifinfomsg` then
/// `IFLA_IFNAME`).
fn link_of(payload: &[u8]) -> Option<(u32, String)> {
    let index = u32::from_ne_bytes(payload.get(4..8)?.try_into().ok()?);
    for (t, v) in crate::netlink::Attrs::new(payload.get(16..)?) {
        if t == 3 {
            let name = v.split(|b| *b == 0).next().unwrap_or(&[]);
            return Some((index, String::from_utf8_lossy(name).into_owned()));
        }
    }
    None
}

impl KernelWatch {
    /// Reads the kernel's tables into `published` (blocking: resolution is right from the
    /// first route), then watches them on a thread. Notifications caused by the socket
    /// with port `ignore_pid` (our FIB writer) are dropped in the kernel.
    pub fn start(
        published: Arc<Published>,
        config: ResolveConfig,
        ignore_pid: Option<u32>,
        listeners: Vec<Listener>,
    ) -> Result<KernelWatch, WatchError> {
        let monitor = NlSocket::open(&[
            RTNLGRP_LINK,
            RTNLGRP_IPV4_IFADDR,
            RTNLGRP_IPV4_ROUTE,
            RTNLGRP_IPV6_IFADDR,
            RTNLGRP_IPV6_ROUTE,
            RTNLGRP_NEXTHOP,
        ])
        .map_err(WatchError::Socket)?;
        if let Some(pid) = ignore_pid {
            monitor.drop_from(pid).map_err(WatchError::Socket)?;
        }
        let mut requests = NlSocket::open(&[]).map_err(WatchError::Socket)?;
        let mut seq = 0;
        // Subscribed before the dump: a change during it is in the monitor's queue.
        let mut view = dump_all(&mut requests, &config, &mut seq).map_err(WatchError::Dump)?;
        view.version = published.load().version + 1;
        published.publish(view.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (published, stop) = (published.clone(), stop.clone());
            std::thread::Builder::new()
                .name("rs-kernel".into())
                .spawn(move || {
                    let mut w = Watcher {
                        config,
                        monitor,
                        requests,
                        seq,
                        master: view,
                        published,
                        listeners,
                        dirty: false,
                        resync_at: None,
                        last_publish: Instant::now(),
                    };
                    // What changed during the first dump is in the monitor's queue.
                    w.run(&stop);
                })
                .map_err(WatchError::Socket)?
        };
        Ok(KernelWatch {
            published,
            stop,
            thread: Some(thread),
        })
    }

    /// The snapshot in force, for shards (as a resolver) and the FIB writer.
    pub fn published(&self) -> &Arc<Published> {
        &self.published
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for KernelWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Watcher {
    config: ResolveConfig,
    monitor: NlSocket,
    requests: NlSocket,
    seq: u32,
    master: KernelView,
    published: Arc<Published>,
    listeners: Vec<Listener>,
    /// Changed since last published.
    dirty: bool,
    /// A full dump is due at this time.
    resync_at: Option<Instant>,
    last_publish: Instant,
}

impl Watcher {
    fn run(&mut self, stop: &AtomicBool) {
        let work =
            ribshard_engine::telemetry::register(ribshard_engine::telemetry::ThreadKind::Kernel, 0);
        while !stop.load(Ordering::Acquire) {
            let wait = match (self.dirty, self.resync_at) {
                (_, Some(at)) => at.saturating_duration_since(Instant::now()),
                (true, None) => LARGE_PUBLISH_EVERY.saturating_sub(self.last_publish.elapsed()),
                (false, None) => Duration::from_millis(500),
            };
            match self.monitor.recv(Some(wait.max(Duration::from_millis(1)))) {
                Ok(Some(buf)) => {
                    let buf = buf.to_vec();
                    self.take(&buf);
                    // Whatever else is queued, before publishing once.
                    loop {
                        match self.monitor.recv(None) {
                            Ok(Some(more)) => {
                                let more = more.to_vec();
                                self.take(&more);
                            }
                            Ok(None) => break,
                            Err(e) => {
                                self.overflowed(e);
                                break;
                            }
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => self.overflowed(e),
            }
            if self.resync_at.is_some_and(|at| at <= Instant::now()) {
                self.resync();
            }
            let large = self.master.routes() > LARGE;
            if self.dirty && (!large || self.last_publish.elapsed() >= LARGE_PUBLISH_EVERY) {
                let began = Instant::now();
                self.publish();
                work.item(began.elapsed());
            }
        }
    }

    fn overflowed(&mut self, e: io::Error) {
        // ENOBUFS: notifications were lost; only a dump tells what is there now.
        tracing::warn!("kernel route notifications lost ({e}): reading the tables again");
        self.resync_at = Some(Instant::now());
    }

    /// Applies the notifications of one read.
    fn take(&mut self, buf: &[u8]) {
        for m in Messages::new(buf) {
            match m.kind {
                RTM_NEWROUTE | RTM_DELROUTE => {
                    let Some(r) = RouteMsg::decode(m.payload) else {
                        continue;
                    };
                    let gone = m.kind == RTM_DELROUTE;
                    if r.protocol == self.config.own_protocol {
                        let e = KernelEvent::OwnRoute { route: r, gone };
                        for l in &self.listeners {
                            l(&e);
                        }
                        continue;
                    }
                    self.master.apply_route(&r, gone);
                    self.dirty = true;
                }
                RTM_NEWNEXTHOP | RTM_DELNEXTHOP => {
                    let Some(n) = NexthopMsg::decode(m.payload) else {
                        continue;
                    };
                    if n.protocol == self.config.own_protocol {
                        continue;
                    }
                    if m.kind == RTM_DELNEXTHOP {
                        self.master.nexthops.remove(&n.id);
                        // Routes naming it are gone too, without a word from the kernel.
                        self.resync_soon();
                    } else {
                        self.master.nexthops.insert(n.id, n.spec);
                    }
                    self.dirty = true;
                }
                RTM_NEWLINK | RTM_DELLINK => {
                    if let Some((index, name)) = link_of(m.payload) {
                        if m.kind == RTM_DELLINK {
                            self.master.links.remove(&index);
                        } else {
                            self.master.links.insert(index, name);
                        }
                    }
                    // A link going down flushes its IPv4 routes without notifications.
                    self.resync_soon();
                }
                RTM_NEWADDR | RTM_DELADDR => self.resync_soon(),
                _ => {}
            }
        }
    }

    fn resync_soon(&mut self) {
        if self.resync_at.is_none() {
            self.resync_at = Some(Instant::now() + RESYNC_AFTER);
        }
    }

    fn resync(&mut self) {
        self.resync_at = None;
        match dump_all(&mut self.requests, &self.config, &mut self.seq) {
            Ok(mut v) => {
                v.version = self.master.version;
                self.master = v;
                self.dirty = true;
            }
            Err(e) => {
                tracing::warn!(
                    "cannot read the kernel's routing tables again: {e}; trying in a second"
                );
                self.resync_at = Some(Instant::now() + Duration::from_secs(1));
            }
        }
    }

    fn publish(&mut self) {
        self.master.version += 1;
        self.published.publish(self.master.clone());
        self.dirty = false;
        self.last_publish = Instant::now();
        let e = KernelEvent::Published {
            version: self.master.version,
        };
        for l in &self.listeners {
            l(&e);
        }
    }
}
