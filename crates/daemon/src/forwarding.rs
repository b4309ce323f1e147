//! Forwarding in the running daemon: the kernel watcher (next hops resolved through the
//! kernel's tables, `[bgp.resolution]`) and the FIB writer (`[fib]`), and where they plug
//! into the pipeline: the watcher's snapshot is the shards' resolver and tells them when
//! resolution changes; the writer subscribes to the shards' change stream.

use crate::config::Config;
use ribshard_engine::pipeline::{Inputs, Pipeline};
use ribshard_fib::watch::Listener;
use ribshard_fib::{Fib, KernelEvent, KernelView, KernelWatch, Published, ResolveConfig};
use std::sync::{Arc, Mutex, OnceLock};

/// Told when the kernel watcher publishes a new snapshot.
pub type KernelListener = Box<dyn Fn() + Send + Sync>;

pub struct Forwarding {
    /// The kernel's tables as last read (empty without a watcher).
    pub published: Arc<Published>,
    /// Others told of each new snapshot (originated networks).
    listeners: Arc<Mutex<Vec<KernelListener>>>,
    /// Peer indexes of local sources whose routes are never installed (originated
    /// networks, injected RIBs), besides the `no-install` neighbors.
    local: Mutex<hashbrown::HashSet<u32>>,
    /// The last `no-install` neighbors set.
    neighbors: Mutex<hashbrown::HashSet<u32>>,
    pub fib: Option<Fib>,
    watch: Option<KernelWatch>,
    /// Whether the shards resolve next hops through `published`.
    resolving: bool,
    pipeline: Arc<OnceLock<Arc<Pipeline>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ForwardingError {
    #[error(
        "fib: cannot open the kernel's routing tables for writing: {0} (CAP_NET_ADMIN is needed)"
    )]
    Fib(std::io::Error),
    #[error(
        "fib: writing routes to the kernel needs CAP_NET_ADMIN, which this process lacks \
         (run as root, or grant it to the service: docs/OPERATIONS.md, Forwarding)"
    )]
    NoNetAdmin,
    #[error("fib: {0}")]
    Watch(ribshard_fib::watch::WatchError),
}

/// Whether the process may change the kernel's routing tables: CAP_NET_ADMIN (bit 12) in
/// its effective set. Checked at start with `[fib]`, so that a missing capability is one
/// clear error rather than every route refused later. `None` if it cannot tell.
fn has_net_admin() -> Option<bool> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    let eff = u64::from_str_radix(hex, 16).ok()?;
    Some(eff & (1 << 12) != 0)
}

impl Forwarding {
    /// Starts the FIB writer (with `[fib]`) and the kernel watcher (with either). Without
    /// `[fib]`, a watcher that cannot start (no netlink here) is logged and next hops count
    /// as reachable, as with `bgp.resolution.enabled = false`.
    pub fn start(config: &Config) -> Result<Forwarding, ForwardingError> {
        let rcfg = config.resolution.clone().unwrap_or_else(|| ResolveConfig {
            own_protocol: config.fib.as_ref().map_or(186, |f| f.protocol),
            ..ResolveConfig::default()
        });
        let published = Arc::new(Published::new(KernelView::new(rcfg.clone())));
        if config.fib.is_some() && has_net_admin() == Some(false) {
            return Err(ForwardingError::NoNetAdmin);
        }
        let fib = match &config.fib {
            Some(c) => {
                Some(Fib::start(c.clone(), published.clone()).map_err(ForwardingError::Fib)?)
            }
            None => None,
        };
        let pipeline: Arc<OnceLock<Arc<Pipeline>>> = Arc::default();
        let mut resolving = config.resolution.is_some();
        let others: Arc<Mutex<Vec<KernelListener>>> = Arc::default();
        let covering = config
            .originate
            .iter()
            .any(|o| o.when == crate::config::When::CoveringRoute);
        let watch = if resolving || fib.is_some() || covering {
            let mut listeners: Vec<Listener> = Vec::new();
            let o = others.clone();
            listeners.push(Box::new(move |e: &KernelEvent| {
                if matches!(e, KernelEvent::Published { .. }) {
                    for l in o.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                        l();
                    }
                }
            }));
            if resolving {
                let p = pipeline.clone();
                listeners.push(Box::new(move |e: &KernelEvent| {
                    if let (KernelEvent::Published { .. }, Some(p)) = (e, p.get()) {
                        p.deliver_blocking(p.resolution_changed());
                    }
                }));
            }
            if let Some(f) = &fib {
                listeners.push(f.listener());
            }
            match KernelWatch::start(
                published.clone(),
                rcfg,
                fib.as_ref().map(Fib::portid),
                listeners,
            ) {
                Ok(w) => Some(w),
                Err(e) if fib.is_none() => {
                    tracing::warn!("bgp.resolution: {e}; every next hop counts as reachable");
                    resolving = false;
                    None
                }
                Err(e) => return Err(ForwardingError::Watch(e)),
            }
        } else {
            None
        };
        let f = Forwarding {
            published,
            listeners: others,
            local: Mutex::default(),
            neighbors: Mutex::default(),
            fib,
            watch,
            resolving,
            pipeline,
        };
        f.set_no_install(config, &(0..config.peers.len()).collect::<Vec<_>>());
        Ok(f)
    }

    /// What the pipeline is started with: the shards' resolver and the change stream's
    /// subscribers, besides the start-up deferral.
    pub fn inputs(
        &self,
        update_delay: Option<(ribshard_engine::pipeline::UpdateDelay, Vec<u32>)>,
    ) -> Inputs {
        Inputs {
            update_delay,
            resolver: self
                .resolving
                .then(|| self.published.clone() as Arc<dyn ribshard_rib::Resolver>),
            subscribers: self.fib.iter().map(Fib::subscriber).collect(),
            sent: None,
        }
    }

    /// The pipeline the watcher tells of resolution changes from now on.
    pub fn attach(&self, pipeline: Arc<Pipeline>) {
        let _ = self.pipeline.set(pipeline);
    }

    /// The neighbors whose routes are not installed: `peer_index[i]` is the peer index of
    /// `config.peers[i]`.
    pub fn set_no_install(&self, config: &Config, peer_index: &[usize]) {
        *self.neighbors.lock().unwrap_or_else(|e| e.into_inner()) = config
            .peers
            .iter()
            .zip(peer_index)
            .filter(|(p, _)| p.no_install)
            .map(|(_, i)| *i as u32)
            .collect();
        self.push_no_install();
    }

    /// A local source (originated networks, an injected RIB): its routes are never
    /// installed (`gone`: the source ended).
    pub fn local_source(&self, peer: u32, gone: bool) {
        {
            let mut l = self.local.lock().unwrap_or_else(|e| e.into_inner());
            if gone {
                l.remove(&peer);
            } else {
                l.insert(peer);
            }
        }
        self.push_no_install();
    }

    fn push_no_install(&self) {
        if let Some(f) = &self.fib {
            let mut all = self
                .neighbors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            all.extend(self.local.lock().unwrap_or_else(|e| e.into_inner()).iter());
            f.set_no_install(all);
        }
    }

    /// Tells `f` of each snapshot of the kernel's tables from now on.
    pub fn on_kernel_change(&self, f: KernelListener) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(f);
    }

    /// Whether next hops resolve through the kernel's tables.
    pub fn resolving(&self) -> bool {
        self.resolving
    }

    /// Before a graceful restart: the writer stops first, leaving our routes in the kernel
    /// (neighbors go on forwarding on them while ribshard restarts).
    pub fn stop_keeping_routes(&mut self) {
        if let Some(f) = self.fib.as_mut() {
            f.stop_keeping_routes();
        }
    }

    pub fn stop(&mut self) {
        if let Some(w) = self.watch.as_mut() {
            w.stop();
        }
        if let Some(f) = self.fib.as_mut() {
            f.stop();
        }
    }
}
