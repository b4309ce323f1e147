//! `ribshard run`: the daemon in the foreground: the sessions of every configured neighbor
//! feeding the sharded pipeline (shard threads, update threads), until SIGTERM.

use crate::config::{Config, GroupType, Peer};
use crate::reload::NeighborChange;
use ribshard_engine::negotiate::Routing;
use ribshard_engine::pipeline::{Pipeline, PipelineConfig};
use ribshard_engine::{Inbound, PeerSettings, Sessions};
use ribshard_mrt::MrtWriter;
use ribshard_wire::notification::cease;
use std::io::BufWriter;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

/// Room for received UPDATEs between sessions and their consumer; a full queue stops
/// reading from the sender's socket.
const INBOUND_QUEUE: usize = 4096;

pub fn settings(c: &Config, p: &Peer) -> PeerSettings {
    PeerSettings {
        address: p.address,
        port: p.port,
        local_address: p.local_address,
        local_as: p.local_as,
        peer_as: p.peer_as,
        router_id: c.router_id,
        internal: p.group_type == GroupType::Internal,
        hold_time: p.hold_time,
        connect_retry_time: p.connect_retry_time,
        send_hold_time: p.send_hold_time,
        passive: p.passive,
        authentication_key: p.authentication_key.clone(),
        ttl_security: p.ttl_security,
        multihop: p.multihop,
        families: p.families.clone(),
        prefix_limits: p
            .prefix_limits
            .map(|l| l.map(|l| (l.maximum, l.teardown, l.idle_timeout))),
        role: p.role,
        add_path_receive: p.add_path_receive,
        add_path_send: p.add_path_send,
        description: p
            .description
            .clone()
            .unwrap_or_else(|| format!("{} in group {}", p.address, p.group)),
        routing: Routing {
            group: p.group.clone(),
            import_accept: accepts(&p.import),
            export_accept: accepts(&p.export),
            cluster: p.cluster,
            cluster_ids: c
                .peers
                .iter()
                .filter_map(|q| q.cluster)
                .map(u32::from)
                .collect(),
            route_server_client: p.route_server_client,
            next_hop_self: p.next_hop_self,
            loops: p.loops,
            global_as: c.local_as,
            local_as_private: p.local_as_private,
            no_prepend_global_as: p.no_prepend_global_as,
        },
    }
}

/// Evaluates a policy chain of the built-in policies: the first of "accept" and "reject"
/// decides; an empty chain rejects.
fn accepts(chain: &[String]) -> bool {
    chain
        .iter()
        .find_map(|p| match p.as_str() {
            "accept" => Some(true),
            "reject" => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}

/// The pipeline's threads as configured: 0 shards is one RIB thread.
pub fn pipeline_config(c: &Config) -> PipelineConfig {
    PipelineConfig {
        shards: (c.threading.shards as usize).max(1),
        update_threads: c.threading.update_threads as usize,
        options: c.path_selection,
        write_queue: ribshard_adjout::WriteQueueLimits::new(
            usize::try_from(c.threading.write_queue_high_water).unwrap_or(usize::MAX),
        ),
    }
}

pub struct Options {
    /// Write every received UPDATE to this MRT file (BGP4MP MESSAGE_AS4).
    pub dump_updates: Option<PathBuf>,
    /// The configuration file, read again on SIGHUP.
    pub config_file: Option<PathBuf>,
}

pub fn run(config: Config, opts: Options) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ribshard-session")
        .build()?;
    rt.block_on(async move {
        let (tx, mut rx) = mpsc::channel(INBOUND_QUEUE);
        let peers: Vec<PeerSettings> = config.peers.iter().map(|p| settings(&config, p)).collect();
        let pc = pipeline_config(&config);
        let pipeline = Pipeline::start(pc);
        // The tap carries every received UPDATE; only the update dump needs it.
        let tap = opts.dump_updates.is_some().then_some(tx);
        let sessions =
            Sessions::start_with(peers.clone(), &config.listen, tap, Some(pipeline.clone()))
                .await?;
        info!(
            local_as = config.local_as,
            router_id = %config.router_id,
            neighbors = peers.len(),
            shards = pipeline.config().shards,
            update_threads = pc.update_threads,
            "ribshard running"
        );
        let mut dump = match &opts.dump_updates {
            Some(path) => Some(MrtWriter::new(BufWriter::new(
                std::fs::File::create(path)
                    .map_err(|e| format!("cannot create {}: {e}", path.display()))?,
            ))),
            None => None,
        };
        let mut live = Live {
            config,
            active: peers.iter().cloned().enumerate().collect(),
            peers,
            sessions,
        };
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        loop {
            tokio::select! {
                m = rx.recv(), if opts.dump_updates.is_some() => {
                    let Some(m) = m else { break };
                    consume(m, &live.peers, &live.config, dump.as_mut());
                    // Drain what is queued, then flush the dump once.
                    while let Ok(m) = rx.try_recv() {
                        consume(m, &live.peers, &live.config, dump.as_mut());
                    }
                    if let Some(d) = dump.as_mut() {
                        d.flush()?;
                    }
                }
                _ = hup.recv() => {
                    if let Some(path) = &opts.config_file {
                        reload(path, &mut live, &pipeline).await;
                    }
                }
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        info!("shutting down: Cease / Administrative Shutdown to every neighbor");
        live.sessions
            .shutdown("ribshard is shutting down", Duration::from_secs(2))
            .await;
        let _ = tokio::task::spawn_blocking(move || pipeline.stop()).await;
        if let Some(mut d) = dump {
            d.flush()?;
        }
        Ok(())
    })
}

/// SIGHUP: reads the configuration again. A file with errors changes nothing (each error is
/// logged with its file, line and key); thread counts and neighbors are applied with the
/// other sessions kept up; what needs a restart is logged by name ([`crate::reload`]).
async fn reload(path: &std::path::Path, live: &mut Live, pipeline: &Arc<Pipeline>) {
    info!(file = %path.display(), "SIGHUP: reading the configuration again");
    let new = match crate::config::load(path) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors.0 {
                error!("configuration not reloaded: {e}");
            }
            return;
        }
    };
    let plan = crate::reload::plan(&live.config, &live.active, &new);
    for what in &plan.needs_restart {
        warn!(change = %what, "configuration change not applied: it needs a restart");
    }
    let mut applied = true;
    if let Some((shards, update_threads)) = plan.threading {
        let p = pipeline.clone();
        match tokio::task::spawn_blocking(move || p.reconfigure(shards, update_threads)).await {
            Ok(r) => info!(
                shards = r.to.0,
                update_threads = r.to.1,
                prefixes = r.prefixes,
                paths = r.paths,
                paused_ms = r.paused.as_millis() as u64,
                "threads changed with sessions kept up"
            ),
            Err(e) => {
                error!("re-sharding failed: {e}");
                applied = false;
            }
        }
    }
    for change in &plan.neighbors {
        let (gone, subcode, start) = match change {
            NeighborChange::Removed(i) => (Some(*i), cease::PEER_DECONFIGURED, None),
            NeighborChange::Changed(i, s) => (Some(*i), cease::OTHER_CONFIGURATION_CHANGE, Some(s)),
            NeighborChange::Added(s) => (None, 0, Some(s)),
        };
        if let Some(i) = gone {
            if let Some(s) = live.sessions.peers.get(i).map(|h| h.settings.address) {
                info!(neighbor = %s, changed = start.is_some(), "neighbor no longer configured as it runs: session ended");
            }
            live.sessions.remove(i, subcode, NEIGHBOR_GRACE).await;
            live.active.retain(|(j, _)| *j != i);
        }
        if let Some(s) = start {
            match live.sessions.add(s.clone()).await {
                Ok(i) => {
                    info!(neighbor = %s.address, "neighbor configured: session started");
                    live.peers.push(s.clone());
                    live.active.push((i, s.clone()));
                }
                Err(e) => {
                    error!(neighbor = %s.address, "cannot start the session: {e}");
                    applied = false;
                }
            }
        }
    }
    if applied {
        live.config = crate::reload::applied(&live.config, new);
        info!(
            neighbors = live.active.len(),
            "configuration reloaded{}",
            if plan.needs_restart.is_empty() {
                ""
            } else {
                " (except what needs a restart)"
            }
        );
    }
}

/// What a reload changes while the daemon runs: the configuration as applied, the neighbors
/// configured now (peer index and settings) and the settings of every session ever started,
/// by peer index (the update dump names peers by it).
struct Live {
    config: Config,
    active: Vec<(usize, PeerSettings)>,
    peers: Vec<PeerSettings>,
    sessions: Sessions,
}

/// How long a neighbor removed or changed by a reload gets to send its NOTIFICATION.
const NEIGHBOR_GRACE: Duration = Duration::from_secs(2);

fn consume(
    m: Inbound,
    peers: &[PeerSettings],
    config: &Config,
    dump: Option<&mut MrtWriter<BufWriter<std::fs::File>>>,
) {
    match m {
        Inbound::Up { peer, negotiated } => {
            if let Some(p) = peers.get(peer) {
                info!(neighbor = %p.address, families = ?negotiated.families, hold_time = negotiated.hold_time, "neighbor up");
            }
        }
        Inbound::Down { peer, stale } => {
            if let Some(p) = peers.get(peer) {
                info!(neighbor = %p.address, graceful_restart = stale.is_some(), "neighbor down");
            }
        }
        Inbound::RouteRefresh { .. } | Inbound::EndOfRib { .. } => {}
        Inbound::Update {
            peer,
            message,
            params,
        } => {
            let (Some(d), Some(p)) = (dump, peers.get(peer)) else {
                return;
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as u32)
                .unwrap_or(0);
            let local = p.local_address.unwrap_or(match p.address {
                IpAddr::V4(_) => IpAddr::from([0, 0, 0, 0]),
                IpAddr::V6(_) => IpAddr::from([0u16; 8]),
            });
            // RFC 8050: messages with path identifiers get the ADDPATH subtype (it marks a
            // whole message, so a session with Add-Path in one family only is marked too).
            let add_path = params.add_path.iter().any(|&a| a);
            if let Err(e) = d.write_bgp4mp_message(
                now,
                p.peer_as,
                config.local_as,
                p.address,
                local,
                add_path,
                &message,
            ) {
                warn!("cannot write the update dump: {e}");
            }
        }
    }
}
