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
    pub active: Vec<(usize, PeerSettings)>,
    pub peers: Vec<PeerSettings>,
    pub sessions: Sessions,
}

pub struct Daemon {
    pub pipeline: Arc<Pipeline>,
    /// Next-hop resolution and the FIB writer.
    pub forwarding: Mutex<crate::forwarding::Forwarding>,
    /// Written by reloads only, which hold it across their whole change.
    pub live: tokio::sync::RwLock<Live>,
    /// The file `configure reload` and SIGHUP read again.
    pub config_file: Option<PathBuf>,
    pub started: SystemTime,
    pub samples: Mutex<Samples>,
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
    ) -> Arc<Daemon> {
        Arc::new(Daemon {
            pipeline,
            forwarding: Mutex::new(forwarding),
            live: tokio::sync::RwLock::new(live),
            config_file,
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
