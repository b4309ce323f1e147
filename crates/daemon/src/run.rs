//! `ribshard run`: the daemon in the foreground: the sessions of every configured neighbor
//! feeding the sharded pipeline (shard threads, update threads), the management API and its
//! sampler, until SIGTERM.

use crate::backend::Api;
use crate::config::{pipeline_config, settings, Config};
use crate::forwarding::Forwarding;
use crate::restart::Exit;
use crate::state::{Daemon, Live};
use crate::updates_log::UpdatesLog;
use crate::watch::{RouteWatch, WatchSubscriber};
use ribshard_engine::pipeline::Pipeline;
use ribshard_engine::telemetry::{register, ThreadKind};
use ribshard_engine::{Inbound, PeerSettings, Sessions};
use ribshard_mgmt::api::ReloadRequest;
use ribshard_mgmt::ServerConfig;
use ribshard_mrt::Bgp4mpSession;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// Room for received UPDATEs between sessions and their consumer; a full queue stops
/// reading from the sender's socket.
const INBOUND_QUEUE: usize = 4096;

pub struct Options {
    /// Write every received UPDATE to this MRT file (BGP4MP MESSAGE_AS4).
    pub dump_updates: Option<PathBuf>,
    /// The configuration file, read again on SIGHUP and `configure reload`.
    pub config_file: Option<PathBuf>,
}

/// The management API's listeners as configured.
fn server_config(c: &Config) -> ServerConfig {
    ServerConfig {
        socket: Some(c.management.socket.clone()),
        listen: c.management.listen.clone(),
        read_only: c.management.read_only,
        metrics: c.management.metrics,
    }
}

/// How the main loop asks the daemon to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stopping {
    /// Cease / Administrative Shutdown to every neighbor.
    Cease,
    /// A graceful restart of ours (RFC 4724): the kernel's routes and the neighbors' copies
    /// of ours are kept.
    Graceful,
}

pub fn run(config: Config, opts: Options) -> Result<Exit, Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Names fit Linux's 15 characters, so `top -H` tells the threads apart.
        .thread_name_fn(|| {
            static N: AtomicUsize = AtomicUsize::new(0);
            format!("rs-session-{}", N.fetch_add(1, Ordering::Relaxed))
        })
        .build()?;
    let main_work = register(ThreadKind::Main, 0);
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        // Installed first: a signal during start-up waits for the loop below.
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        // Signals an operator may send by habit (BIRD dumps its state on SIGUSR1): each
        // gets a line in the log and nothing else, never the default action, which ends
        // the process without a NOTIFICATION to any neighbor.
        let mut usr1 = signal(SignalKind::user_defined1())?;
        let mut usr2 = signal(SignalKind::user_defined2())?;
        // RFC 4724: whether this start follows a graceful stop, before any OPEN is sent.
        let restarted = config
            .graceful_restart
            .as_ref()
            .and_then(crate::restart::take_mark);
        ribshard_engine::negotiate::process_started(restarted.is_some());
        if let Some(ago) = restarted {
            info!(
                stopped_ms_ago = ago.as_millis() as u64,
                "graceful restart: restarting speaker (Restart State and Forwarding State in \
                 every OPEN); advertising and the kernel's routes wait for every neighbor's \
                 End-of-RIB"
            );
            if config.update_delay.is_none() {
                warn!(
                    "graceful restart with bgp.update-delay.max-delay = 0: advertising does not \
                     wait for the neighbors' End-of-RIB (RFC 4724 section 4.1)"
                );
            }
        }
        let (tx, mut rx) = mpsc::channel(INBOUND_QUEUE);
        let peers: Vec<PeerSettings> = config.peers.iter().map(|p| settings(&config, p)).collect();
        let pc = pipeline_config(&config);
        // The FIB writer and the kernel watcher before the pipeline: resolution is right
        // from the first route.
        let forwarding = Forwarding::start(&config)?;
        // Every configured neighbor is waited for at start (within update-delay's bounds).
        let mut inputs = forwarding.inputs(
            config
                .update_delay
                .map(|d| (d, (0..peers.len() as u32).collect())),
        );
        let watch = Arc::new(RouteWatch::default());
        inputs
            .subscribers
            .push(Arc::new(WatchSubscriber(watch.clone())));
        // BMP's Loc-RIB and post-policy feeds are a subscriber of the shards, its
        // pre-policy feed the sessions' tap, its Adj-RIB-Out the members' sinks.
        let bmp = start_bmp(&config)?;
        if let Some(s) = bmp.as_ref().and_then(|b| b.subscriber()) {
            inputs.subscribers.push(s);
        }
        inputs.sent = bmp.as_ref().and_then(|b| b.sent_tap());
        let pipeline = Pipeline::start_with(pc, inputs);
        pipeline.memory().set_limit(config.memory_limit);
        forwarding.attach(pipeline.clone());
        if let Some(b) = &bmp {
            b.attach(pipeline.clone());
        }
        // The tap carries every received UPDATE; only the BGP4MP log and BMP need it.
        let mut log = match (&opts.dump_updates, &config.mrt.updates) {
            (Some(path), _) => Some(UpdatesLog::file(path)),
            (None, Some(pattern)) => Some(UpdatesLog::new(
                pattern.clone(),
                config.mrt.rotate_size,
                config.mrt.rotate_interval,
            )),
            (None, None) => None,
        };
        let logging = log.is_some();
        let tapping = logging || bmp.is_some();
        let tap = tapping.then_some(tx);
        let sessions =
            Sessions::start_with(peers.clone(), &config.listen, tap, Some(pipeline.clone()))
                .await?;
        let server = server_config(&config);
        info!(
            local_as = config.local_as,
            router_id = %config.router_id,
            neighbors = peers.len(),
            shards = pipeline.config().shards,
            update_threads = pc.update_threads,
            "ribshard running"
        );
        let daemon = Daemon::new(
            pipeline.clone(),
            forwarding,
            Live {
                config,
                active: peers.iter().cloned().enumerate().collect(),
                peers,
                sessions,
                reconfigured: None,
            },
            opts.config_file.clone(),
            watch,
        );
        if let Some(b) = &bmp {
            let _ = daemon.bmp.set(b.clone());
        }
        {
            let mut live = daemon.live.write().await;
            daemon.set_rpki(live.config.rpki.as_ref());
            live.sort_active();
            let networks = live.config.originate.clone();
            daemon.originate(&mut live, networks);
        }
        let (reloads, mut reload_rx) = mpsc::channel(4);
        let (restarts, mut restart_rx) = mpsc::channel(1);
        let api = Api {
            daemon: daemon.clone(),
            reloads,
            restarts,
        };
        let management = Management::start(api, server)
            .map_err(|e| format!("management.socket / management.listen: {e}"))?;
        let files: Vec<PathBuf> = daemon.live.read().await.config.mrt.inject.clone();
        for file in files {
            if let Err(e) = daemon.inject_mrt(file.clone()).await {
                tracing::error!("mrt.inject: {}: {e}", file.display());
            }
        }
        let mut stopping = Stopping::Cease;
        let mut exit = Exit::Stopped;
        loop {
            tokio::select! {
                m = rx.recv(), if tapping => {
                    let Some(m) = m else { break };
                    let began = Instant::now();
                    hand_on_tapped(Some(m), &mut rx, &daemon, &mut log, bmp.as_ref()).await;
                    main_work.item(began.elapsed());
                }
                _ = hup.recv() => {
                    let began = Instant::now();
                    info!("SIGHUP: reloading the configuration");
                    crate::reload::reload(&daemon, &ReloadRequest::default()).await;
                    main_work.item(began.elapsed());
                }
                Some((request, reply)) = reload_rx.recv() => {
                    let began = Instant::now();
                    if request.dry_run {
                        info!("configure reload --dry-run: what a reload would do");
                    } else {
                        info!("configure reload: reloading the configuration");
                    }
                    let _ = reply.send(crate::reload::reload(&daemon, &request).await);
                    main_work.item(began.elapsed());
                }
                Some((request, reply)) = restart_rx.recv() => {
                    let prepared = {
                        let live = daemon.live.read().await;
                        crate::restart::prepare(&live, opts.config_file.as_deref(), &request)
                    };
                    match prepared {
                        Ok(r) => {
                            info!(
                                graceful = request.graceful,
                                neighbors_keeping_our_routes = r.kept_by.len(),
                                neighbors_losing_them = r.lost_by.len(),
                                "ribshard restart: stopping, to start again"
                            );
                            let _ = reply.send(Ok(r));
                            if request.graceful {
                                stopping = Stopping::Graceful;
                            }
                            exit = Exit::Restart;
                            break;
                        }
                        Err(e) => {
                            warn!("ribshard restart refused: {e}");
                            let _ = reply.send(Err(e));
                        }
                    }
                }
                _ = usr1.recv() => log_signal("SIGUSR1", &daemon).await,
                _ = usr2.recv() => log_signal("SIGUSR2", &daemon).await,
                _ = term.recv() => {
                    let gr = daemon.live.read().await.config.graceful_restart.clone();
                    if let Some(g) = gr.filter(|g| g.sigterm_restarts) {
                        // Without the mark the next start is cold: neighbors keep our
                        // routes until it comes up, then drop them (Forwarding State 0).
                        if let Err(e) = crate::restart::mark(&g) {
                            warn!("SIGTERM: {e}");
                        }
                        stopping = Stopping::Graceful;
                    }
                    break;
                }
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        if exit == Exit::Restart {
            // The API's answer to `ribshard restart` is on its way out.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        match stopping {
            Stopping::Cease => {
                info!("shutting down: Cease / Administrative Shutdown to every neighbor")
            }
            Stopping::Graceful => info!(
                "graceful restart: stopping with the kernel's routes kept; neighbors that keep \
                 our routes see the sessions close without NOTIFICATION"
            ),
        }
        management.stop();
        let socket = daemon.live.read().await.config.management.socket.clone();
        let _ = std::fs::remove_file(socket);
        // Sessions end before the pipeline: what they queued goes through first.
        let sessions = {
            let mut live = daemon.live.write().await;
            std::mem::replace(&mut live.sessions, Sessions::none())
        };
        match stopping {
            Stopping::Cease => {
                sessions
                    .shutdown("ribshard is shutting down", Duration::from_secs(2))
                    .await
            }
            Stopping::Graceful => {
                // The writer first: nothing the sessions' ending brings reaches the kernel.
                daemon.forwarding().stop_keeping_routes();
                sessions
                    .shutdown_for_restart("ribshard is restarting", Duration::from_secs(2))
                    .await
            }
        }
        // What the sessions' ending tapped (BMP Peer Down, the log's state changes) before
        // the stations get Termination.
        if tapping {
            hand_on_tapped(None, &mut rx, &daemon, &mut log, bmp.as_ref()).await;
        }
        let originator = daemon
            .originator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(o) = originator {
            crate::state::off_runtime(move || o.stop()).await;
        }
        let p = pipeline.clone();
        crate::state::off_runtime(move || p.stop()).await;
        daemon.forwarding().stop();
        if let Some(b) = bmp {
            crate::state::off_runtime(move || b.stop()).await;
        }
        if let Some(mut d) = log {
            d.flush()?;
        }
        Ok(exit)
    })
}

/// The BMP monitor, when `[bmp]` names stations.
fn start_bmp(
    config: &Config,
) -> Result<Option<Arc<ribshard_bmp::Monitor>>, Box<dyn std::error::Error>> {
    if config.bmp.is_empty() {
        return Ok(None);
    }
    let sys_name = config.bmp_sys_name.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| config.router_id.to_string())
    });
    let monitor = ribshard_bmp::Monitor::start(ribshard_bmp::BmpConfig {
        stations: config.bmp.clone(),
        sys_name,
        sys_descr: format!("ribshard {} (BGP daemon)", env!("CARGO_PKG_VERSION")),
        local_as: config.local_as,
        router_id: config.router_id,
    })
    .map_err(|e| format!("bmp: cannot start its thread: {e}"))?;
    Ok(Some(monitor))
}

/// Hands what the sessions tapped to the BGP4MP log and BMP: `first`, then everything
/// queued; the log is flushed once and BMP is handed the lot.
async fn hand_on_tapped(
    first: Option<Inbound>,
    rx: &mut mpsc::Receiver<Inbound>,
    daemon: &Daemon,
    log: &mut Option<UpdatesLog>,
    bmp: Option<&Arc<ribshard_bmp::Monitor>>,
) {
    let live = daemon.live.read().await;
    let mut monitored = Vec::new();
    for m in first
        .into_iter()
        .chain(std::iter::from_fn(|| rx.try_recv().ok()))
    {
        consume(&m, &live.peers, &live.config, log.as_mut());
        if bmp.is_some() {
            monitored.push(m);
        }
    }
    // Not holding the configuration while BMP's queue may make this wait.
    drop(live);
    if let Some(b) = bmp {
        b.received(monitored).await;
    }
    if let Some(d) = log.as_mut() {
        if let Err(e) = d.flush() {
            warn!("cannot write the BGP4MP log: {e}");
        }
    }
}

/// Answers a signal that has no action with the sessions' states, in one line.
async fn log_signal(name: &str, daemon: &Daemon) {
    let live = daemon.live.read().await;
    // The neighbors configured now, not every session slot ever used (a reload's removed
    // neighbors, originated networks and injected MRT peers hold slots too).
    let up = live
        .active
        .iter()
        .filter_map(|(i, _)| live.sessions.peers.get(*i))
        .filter(|h| h.status().state == ribshard_fsm::State::Established)
        .count();
    info!(
        established = up,
        neighbors = live.active.len(),
        "{name} received: nothing to do (`ribshard show bgp summary` shows the sessions)"
    );
}

/// Writes what a session handed the tap into the BGP4MP log: received UPDATEs, and each
/// session reaching or leaving Established (RFC 4271 FSM states: 5 OpenConfirm, 6
/// Established, 1 Idle).
fn consume(m: &Inbound, peers: &[PeerSettings], config: &Config, log: Option<&mut UpdatesLog>) {
    let Some(log) = log else { return };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0);
    let session = |p: &PeerSettings| Bgp4mpSession {
        peer_as: p.peer_as,
        local_as: config.local_as,
        peer: p.address,
        local: p.local_address.unwrap_or(match p.address {
            IpAddr::V4(_) => IpAddr::from([0, 0, 0, 0]),
            IpAddr::V6(_) => IpAddr::from([0u16; 8]),
        }),
    };
    let written = match m {
        // An errored UPDATE RFC 7606 handled is logged as the Update that follows; one
        // that reset the session is not an UPDATE received in Established.
        Inbound::RouteRefresh { .. } | Inbound::EndOfRib { .. } | Inbound::Errored { .. } => Ok(()),
        Inbound::Up { peer, .. } | Inbound::Down { peer, .. } => {
            let Some(p) = peers.get(*peer) else { return };
            let (old, new) = if matches!(m, Inbound::Up { .. }) {
                (5, 6)
            } else {
                (6, 1)
            };
            log.state(now, &session(p), old, new)
        }
        Inbound::Update {
            peer,
            message,
            params,
        } => {
            let Some(p) = peers.get(*peer) else { return };
            // RFC 8050: messages with path identifiers get the ADDPATH subtype (it marks a
            // whole message, so a session with Add-Path in one family only is marked too).
            let add_path = params.add_path.iter().any(|&a| a);
            log.message(now, &session(p), add_path, message)
        }
    };
    if let Err(e) = written {
        warn!("cannot write the BGP4MP log: {e}");
    }
}

/// The management API and the sampler, on a thread of their own at a lower scheduling
/// priority (nice +10): answering show commands (merging walks, writing replies) yields the
/// CPU to sessions and shards, so a client looping `show route` does not slow routing down.
struct Management {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Management {
    fn start(api: Api, server: ServerConfig) -> Result<Management, std::io::Error> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rs-mgmt".into())
            .spawn(move || {
                let _work = register(ThreadKind::Management, 0);
                ribshard_engine::telemetry::lower_priority(10);
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    let daemon = api.daemon.clone();
                    let tasks = match ribshard_mgmt::server::serve(Arc::new(api), &server).await {
                        Ok(t) => t,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    let sampler = tokio::spawn(async move {
                        let mut every = tokio::time::interval(Duration::from_secs(1));
                        loop {
                            every.tick().await;
                            daemon.sample().await;
                        }
                    });
                    let _ = stopped.await;
                    sampler.abort();
                    for t in tasks {
                        t.abort();
                    }
                });
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Management {
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(std::io::Error::other("the management thread ended")),
        }
    }

    fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
