//! # ribshard-fib: forwarding
//!
//! Owns what ribshard does with the kernel's routing tables: it reads them to resolve next
//! hops (connected routes and other protocols' routes, never ours), and writes the Loc-RIB's
//! best paths into one table, in bulk, through nexthop objects.
//!
//! It must never touch a route or nexthop object of another protocol, never resolve a next
//! hop through a route of its own, and never block a shard: the shards hand it changes and
//! read its answers from a published snapshot.

pub mod kernel;
pub mod netlink;
pub mod objects;
pub mod stats;
pub mod tap;
pub mod verify;
pub mod watch;
pub mod writer;

pub use kernel::{KernelView, Published, ResolveConfig, Resolved, Via};
pub use objects::{Target, Want};
pub use stats::FibStats;
pub use tap::NoInstall;
pub use watch::{KernelEvent, KernelWatch};
pub use writer::{FibChange, FibConfig, FibEntry, FibInput};

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Messages the writer's queue holds (each a shard's batch of changes).
const QUEUE: usize = 1024;

/// A running FIB writer.
pub struct Fib {
    tx: SyncSender<FibInput>,
    stats: Arc<FibStats>,
    no_install: NoInstall,
    portid: u32,
    config: FibConfig,
    thread: Option<JoinHandle<()>>,
}

impl Fib {
    /// Opens the writer's socket, reads what of ours the kernel holds, and starts the
    /// writer's thread. With routes of ours found in the kernel, it writes nothing until
    /// every shard's start-up deferral is over (then it reconciles); with none, at once.
    pub fn start(config: FibConfig, view: Arc<Published>) -> std::io::Result<Fib> {
        let stats = Arc::new(FibStats::default());
        let w = writer::Writer::new(config.clone(), view, stats.clone())?;
        let portid = w.portid();
        let (tx, rx) = sync_channel(QUEUE);
        let thread = std::thread::Builder::new()
            .name("rs-fib".into())
            .spawn(move || w.run(rx))?;
        Ok(Fib {
            tx,
            stats,
            no_install: NoInstall::default(),
            portid,
            config,
            thread: Some(thread),
        })
    }

    /// The change-stream subscriber that feeds the writer; register it when the pipeline
    /// starts.
    pub fn subscriber(&self) -> Arc<dyn ribshard_engine::pipeline::Subscriber> {
        Arc::new(tap::FibSubscriber {
            tx: self.tx.clone(),
            no_install: self.no_install.clone(),
        })
    }

    /// The port of the writer's socket (the watcher has the kernel drop its echoes).
    pub fn portid(&self) -> u32 {
        self.portid
    }

    pub fn config(&self) -> &FibConfig {
        &self.config
    }

    pub fn stats(&self) -> &Arc<FibStats> {
        &self.stats
    }

    /// The neighbors (peer indexes) whose routes are not installed now.
    pub fn no_install(&self) -> Arc<hashbrown::HashSet<ribshard_rib::PeerIndex>> {
        self.no_install.load_full()
    }

    /// The neighbors (peer indexes) whose routes are not installed, from now on.
    pub fn set_no_install(&self, peers: hashbrown::HashSet<ribshard_rib::PeerIndex>) {
        self.no_install.store(Arc::new(peers));
    }

    /// The kernel watcher's listener for the writer: a new snapshot may move next hops
    /// (`Resolution`); a route of ours changed by someone else is drift to repair.
    pub fn listener(&self) -> watch::Listener {
        let tx = std::sync::Mutex::new(self.tx.clone());
        Box::new(move |e: &KernelEvent| {
            let m = match e {
                KernelEvent::Published { .. } => FibInput::Resolution,
                KernelEvent::OwnRoute { route, gone } => FibInput::Drift {
                    route: route.clone(),
                    gone: *gone,
                },
            };
            let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(m);
        })
    }

    /// A sender to the writer (for the kernel watcher's listener).
    pub fn sender(&self) -> SyncSender<FibInput> {
        self.tx.clone()
    }

    /// Waits until everything the writer has taken in is written (after the start-up
    /// deferral); false if that took longer than `within`.
    pub fn sync(&self, within: Duration) -> bool {
        let (tx, rx) = sync_channel(1);
        if self.tx.send(FibInput::Sync(tx)).is_err() {
            return false;
        }
        rx.recv_timeout(within).is_ok()
    }

    /// Every prefix the writer holds, what it wants and whether it is written.
    pub fn snapshot(&self, within: Duration) -> Option<Vec<FibEntry>> {
        let (tx, rx) = sync_channel(1);
        self.tx.send(FibInput::Snapshot(tx)).ok()?;
        rx.recv_timeout(within).ok()
    }

    pub fn stop(&mut self) {
        self.stop_with(false);
    }

    /// Stops the writer leaving every route of ours in the kernel, whatever `retain` says:
    /// before a graceful restart, so that no withdrawal while the sessions close reaches
    /// the kernel either.
    pub fn stop_keeping_routes(&mut self) {
        self.stop_with(true);
    }

    fn stop_with(&mut self, keep: bool) {
        let _ = self.tx.send(FibInput::Stop { keep });
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Fib {
    fn drop(&mut self) {
        self.stop();
    }
}
