//! The running daemon's state, shared by its main loop (signals, reloads), the management
//! API and the sampler: the pipeline, the sessions and the configuration they run.

use crate::config::Config;
use ribshard_engine::pipeline::Pipeline;
use ribshard_engine::{PeerSettings, Sessions};
use ribshard_mgmt::procfs::{CpuHistory, ThreadCpu};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What a reload changes while the daemon runs: the configuration as applied, the neighbors
/// configured now (peer index and settings) and the settings of every session ever started,
/// by peer index (indexes are never reused).
pub struct Live {
    pub config: Config,
    /// In address order (then port), as `show bgp summary` and `show bgp neighbor` list
    /// them: [`Live::sort_active`] after every change.
    pub active: Vec<(usize, PeerSettings)>,
    pub peers: Vec<PeerSettings>,
    pub sessions: Sessions,
    /// When a reload last changed something (the looking glass's `last_reconfig`).
    pub reconfigured: Option<SystemTime>,
}

impl Live {
    /// Puts the neighbors configured now in address order: a session restarted by a
    /// reload must not move in the lists operators read.
    pub fn sort_active(&mut self) {
        self.active.sort_by_key(|(_, s)| (s.address, s.port));
    }

    /// A peer index for a source of routes that is not a session (originated networks,
    /// an injected MRT peer), shown with `settings`.
    pub fn reserve(&mut self, settings: PeerSettings) -> u32 {
        let i = self.sessions.reserve(settings.clone());
        self.peers.push(settings);
        i as u32
    }
}

pub struct Daemon {
    pub pipeline: Arc<Pipeline>,
    /// Next-hop resolution and the FIB writer.
    pub forwarding: Mutex<crate::forwarding::Forwarding>,
    /// `[[bgp.originate]]`, once any network is configured.
    pub originator: Mutex<Option<Arc<crate::originate::Originator>>>,
    /// MRT files injected, in order.
    pub injections: Mutex<Vec<crate::inject::Injection>>,
    /// Written by reloads only, which hold it across their whole change.
    pub live: tokio::sync::RwLock<Live>,
    /// The file `configure reload` and SIGHUP read again.
    pub config_file: Option<PathBuf>,
    pub started: SystemTime,
    pub samples: Mutex<Samples>,
    /// Route-change watchers (`monitor route`), fed by the change stream.
    pub watch: Arc<crate::watch::RouteWatch>,
    /// The pipeline's accounting, read once for the management requests that come together.
    pub stats: crate::backend::stats::SharedReads<crate::backend::Pipeline>,
    /// The RTR client, when `[rpki]` names caches.
    pub rpki: Mutex<Option<ribshard_rpki::client::Client>>,
    /// Where every RTR client's snapshots go to be handed to the pipeline, in order.
    pub rpki_inlet: std::sync::OnceLock<Option<std::sync::mpsc::Sender<ribshard_rpki::Snapshot>>>,
    /// The BMP monitor, when `[bmp]` names stations (`show bmp`).
    pub bmp: std::sync::OnceLock<Arc<ribshard_bmp::Monitor>>,
}

/// What the sampler gathers every second.
pub struct Samples {
    pub cpu: CpuHistory,
    /// The most destinations and routes the RIB has held, and when.
    pub destinations: (u64, SystemTime),
    pub routes: (u64, SystemTime),
}

impl Daemon {
    pub fn new(
        pipeline: Arc<Pipeline>,
        forwarding: crate::forwarding::Forwarding,
        live: Live,
        config_file: Option<PathBuf>,
        watch: Arc<crate::watch::RouteWatch>,
    ) -> Arc<Daemon> {
        Arc::new(Daemon {
            pipeline,
            forwarding: Mutex::new(forwarding),
            originator: Mutex::new(None),
            injections: Mutex::new(Vec::new()),
            live: tokio::sync::RwLock::new(live),
            config_file,
            watch,
            stats: Default::default(),
            rpki: Mutex::new(None),
            rpki_inlet: std::sync::OnceLock::new(),
            bmp: std::sync::OnceLock::new(),
            started: SystemTime::now(),
            samples: Mutex::new(Samples {
                cpu: CpuHistory::default(),
                destinations: (0, SystemTime::now()),
                routes: (0, SystemTime::now()),
            }),
        })
    }

    /// One second's sample: CPU time per thread, and the RIB's high-water marks.
    pub async fn sample(&self) {
        let threads: Vec<ThreadCpu> = ribshard_mgmt::procfs::threads();
        let stats = self.pipeline.shard_stats().await;
        let destinations = stats.iter().map(|s| s.prefixes as u64).sum::<u64>();
        let routes = stats.iter().map(|s| s.paths as u64).sum::<u64>();
        let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        s.cpu.record(Instant::now(), &threads);
        if destinations > s.destinations.0 {
            s.destinations = (destinations, SystemTime::now());
        }
        if routes > s.routes.0 {
            s.routes = (routes, SystemTime::now());
        }
    }
}

impl Daemon {
    /// The forwarding state, locked (briefly: reading counters, sending to the writer).
    pub fn forwarding(&self) -> std::sync::MutexGuard<'_, crate::forwarding::Forwarding> {
        self.forwarding.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies `[[bgp.originate]]`: the networks are announced from now on (the first
    /// time, under a peer index reserved among the sessions').
    pub fn originate(&self, live: &mut Live, networks: Vec<crate::config::Originate>) {
        let mut slot = self.originator.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = slot.as_ref() {
            o.set(networks);
            return;
        }
        if networks.is_empty() {
            return;
        }
        let peer = live.reserve(crate::config::local_settings(
            &live.config,
            std::net::IpAddr::from([0, 0, 0, 0]),
            live.config.local_as,
            "networks we originate ([[bgp.originate]])".into(),
        ));
        let c = &live.config;
        let f = self.forwarding();
        f.local_source(peer, false);
        let o = Arc::new(crate::originate::Originator::start(
            self.pipeline.clone(),
            peer,
            c.local_as,
            c.router_id,
            networks,
            f.published.clone(),
        ));
        let weak = Arc::downgrade(&o);
        f.on_kernel_change(Box::new(move || {
            if let Some(o) = weak.upgrade() {
                o.kernel_changed();
            }
        }));
        *slot = Some(o);
    }

    /// Tells the FIB writer which neighbors of `config` are `no-install`, by the peer
    /// index of their session in `active`.
    pub fn sync_no_install(&self, config: &Config, active: &[(usize, PeerSettings)]) {
        let index: Vec<usize> = config
            .peers
            .iter()
            .map(|p| {
                active
                    .iter()
                    .find(|(_, s)| s.address == p.address && s.port == p.port)
                    .map_or(usize::MAX, |(i, _)| *i)
            })
            .collect();
        self.forwarding().set_no_install(config, &index);
    }
}

/// Runs blocking work (a re-shard) on a thread of its own, off the sessions' runtime, and
/// waits for it without blocking a worker; `None` if it panicked.
pub async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("rs-control".into())
        .spawn(move || {
            let _ = tx.send(f());
        });
    spawned.ok()?;
    rx.await.ok()
}

/// Seconds since the UNIX epoch, for the API.
pub fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}
