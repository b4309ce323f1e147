//! The management API's answers, from the running daemon: sessions' status and counters,
//! the shards' counts (asked between their routing work), the update threads' groups,
//! the threads and queues, and the convergence telemetry.

mod birdwatcher;
mod fib;
mod mrt;
pub(crate) mod route_filter;
mod routes;
pub use routes::check_request as check_route_request;
pub(crate) mod stats;
mod text;
mod validation;
mod watch;

use crate::state::{unix, Daemon, Live};
use ribshard_engine::pipeline::{DeferralStart, ShardStats, UpdateThreadStats};
use ribshard_engine::session::{Clear, SessionError, SessionStatus, Stamped};
use ribshard_engine::telemetry::{self, HistogramSnapshot, BUCKETS};
use ribshard_engine::PeerSettings;
use ribshard_mgmt::api::*;
use ribshard_mgmt::{ApiError, Backend};
use ribshard_wire::notification::Notification;
use ribshard_wire::Family;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use tokio::sync::mpsc;

/// The daemon as the API server sees it. Reloads go to the daemon's main loop (`reloads`),
/// which runs them on the sessions' runtime, where the sessions they start must live.
#[derive(Clone)]
pub struct Api {
    pub daemon: Arc<Daemon>,
    pub reloads: mpsc::Sender<(ReloadRequest, tokio::sync::oneshot::Sender<ReloadReply>)>,
    /// `ribshard restart`, to the main loop, which stops the daemon once it has answered.
    pub restarts: mpsc::Sender<(
        RestartRequest,
        tokio::sync::oneshot::Sender<Result<RestartReply, crate::restart::RestartError>>,
    )>,
}

const FAMILIES: [Family; 2] = [Family::Ipv4Unicast, Family::Ipv6Unicast];

/// What the pipeline's threads report, asked once for the requests that come together
/// ([`stats::SharedReads`]).
pub struct Pipeline {
    shards: Vec<ShardStats>,
    updates: Vec<UpdateThreadStats>,
}

impl Pipeline {
    /// A reading shared with the requests that come with this one ([`stats::SharedReads`]).
    async fn read(d: &Daemon) -> Arc<Pipeline> {
        d.stats
            .read(|| async {
                Pipeline {
                    shards: d.pipeline.shard_stats().await,
                    updates: d.pipeline.update_stats().await,
                }
            })
            .await
    }

    /// A neighbor's prefix counts per table.
    fn families(&self, peer: usize, s: &PeerSettings, st: &SessionStatus) -> Vec<FamilyPrefixes> {
        FAMILIES
            .iter()
            .filter(|f| s.families.contains(f))
            .map(|f| {
                let i = f.index();
                let c = |pick: fn(&ribshard_rib::PeerCounts) -> u32| -> u64 {
                    ShardStats::peer_total(&self.shards, peer, pick)[i]
                };
                FamilyPrefixes {
                    table: routes::table_name(*f).into(),
                    received: c(|c| c.received),
                    accepted: c(|c| c.accepted),
                    active: c(|c| c.active),
                    // Nothing is advertised to a session that is not up.
                    advertised: st.group.as_ref().map_or(Some(0), |g| {
                        ShardStats::advertised_to(&self.shards, g.group, peer as u32).map(|a| a[i])
                    }),
                }
            })
            .collect()
    }

    /// The update thread serving a group, by its thread name.
    fn thread_of(&self, group: u32) -> String {
        self.updates
            .iter()
            .find(|u| u.groups.iter().any(|g| g.group == group))
            .map_or_else(|| "rs-update-?".into(), |u| thread_name(u.thread))
    }

    fn member_stats(&self, peer: usize) -> Option<&ribshard_adjout::MemberStats> {
        self.updates
            .iter()
            .flat_map(|u| &u.groups)
            .flat_map(|g| &g.members)
            .find(|(m, _)| m.peer as usize == peer)
            .map(|(_, s)| s)
    }
}

/// The thread of an update group: an update thread, or the single shard without them.
fn thread_name(update_thread: Option<usize>) -> String {
    match update_thread {
        Some(t) => format!("rs-update-{t}"),
        None => "rs-shard-0".into(),
    }
}

fn state_name(s: ribshard_fsm::State) -> String {
    s.to_string()
}

fn seconds_since(t: SystemTime) -> f64 {
    SystemTime::now()
        .duration_since(t)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn notification(n: &Stamped<Notification>) -> NotificationInfo {
    let (code, sub) = n.value.names();
    NotificationInfo {
        at: unix(n.at),
        code: n.value.code,
        subcode: n.value.subcode,
        code_name: code.into(),
        subcode_name: sub.map(Into::into),
        message: n
            .value
            .shutdown_message()
            .and_then(Result::ok)
            .map(Into::into),
        data: n.value.data.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

fn last_error(e: &Stamped<SessionError>) -> LastError {
    let kind = match &e.value {
        SessionError::NotificationReceived(_) => "notification-received",
        SessionError::ConnectionClosed => "connection-closed",
        SessionError::ConnectionLost(_) => "connection-lost",
        SessionError::ConnectFailed(_) => "connect-failed",
        SessionError::HoldTimerExpired => "hold-timer-expired",
        SessionError::SendHoldTimerExpired => "send-hold-timer-expired",
        SessionError::BadHeader(_) => "bad-header",
        SessionError::BadMessage(_) => "bad-message",
        SessionError::OpenRefused(_) => "open-refused",
        SessionError::BadPeerAs { .. } => "bad-peer-as",
        SessionError::MalformedUpdate(_) => "malformed-update",
        SessionError::PrefixLimit { .. } => "prefix-limit",
        SessionError::MemoryLimit { .. } => "memory-limit",
        SessionError::Stopped(_) => "stopped",
    };
    LastError {
        at: unix(e.at),
        kind: kind.into(),
        message: e.value.to_string(),
    }
}

fn types(c: &[u64; 5]) -> MessageTypes {
    let [open, update, notification, keepalive, route_refresh] = *c;
    MessageTypes {
        open,
        update,
        notification,
        keepalive,
        route_refresh,
    }
}

/// An RFC 9234 role as the configuration writes it.
pub(crate) fn role_name(r: u8) -> String {
    use ribshard_wire::open::role;
    match r {
        role::PROVIDER => "provider",
        role::RS => "rs",
        role::RS_CLIENT => "rs-client",
        role::CUSTOMER => "customer",
        role::PEER => "peer",
        _ => "unknown",
    }
    .into()
}

fn tables(fs: &[Family]) -> Vec<String> {
    fs.iter().map(|f| routes::table_name(*f).into()).collect()
}

fn per_family(v: [bool; 2]) -> Vec<String> {
    FAMILIES
        .iter()
        .filter(|f| v.get(f.index()) == Some(&true))
        .map(|f| routes::table_name(*f).into())
        .collect()
}

/// The neighbor configured at `address` (its first port if several): its peer index.
fn log_not_set_up() -> ApiError {
    ApiError::Internal(crate::logging::LevelError::NotSetUp.to_string())
}

fn peer_index(live: &Live, address: &str) -> Result<usize, ApiError> {
    let a: std::net::IpAddr = address
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("{address}: not an address")))?;
    live.active
        .iter()
        .find(|(_, s)| s.address == a)
        .map(|(i, _)| *i)
        .ok_or_else(|| ApiError::NotFound(format!("{address}: no such neighbor")))
}

fn histogram(h: &HistogramSnapshot) -> Histogram {
    let mut cum = 0;
    let buckets = h
        .counts
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cum += c;
            Bucket {
                le: BUCKETS.get(i).copied().unwrap_or(f64::MAX),
                count: cum,
            }
        })
        .collect();
    let finite = |q: Option<f64>| q.map(|v| if v.is_finite() { v } else { f64::MAX });
    Histogram {
        buckets,
        count: h.count(),
        sum_seconds: h.sum_seconds,
        p50_seconds: finite(h.quantile(0.5)),
        p90_seconds: finite(h.quantile(0.9)),
        p99_seconds: finite(h.quantile(0.99)),
    }
}

impl Api {
    fn neighbor(&self, p: &Pipeline, live: &Live, i: usize, s: &PeerSettings) -> Neighbor {
        let Some(h) = live.sessions.peers.get(i) else {
            return Neighbor::default();
        };
        let st = h.status();
        let counts = h.counts();
        let queue = h.output_queue();
        let member = p.member_stats(i).cloned().unwrap_or_default();
        let limits = live.config.threading.write_queue_high_water;
        let n = st.negotiated.as_ref();
        Neighbor {
            address: s.address.to_string(),
            port: s.port,
            peer_as: s.peer_as,
            local_as: s.local_as,
            group: s.routing.group.clone(),
            description: s.description.clone(),
            peer_type: if s.internal { "internal" } else { "external" }.into(),
            state: state_name(st.state),
            state_seconds: seconds_since(st.since),
            router_id: n.map(|n| n.peer_id.to_string()),
            local_address: st.local.map(|a| a.ip().to_string()),
            local_port: st.local.map(|a| a.port()),
            remote_address: st.remote.map(|a| a.ip().to_string()),
            remote_port: st.remote.map(|a| a.port()),
            timers: Timers {
                hold_time_configured: s.hold_time,
                hold_time: n.map(|n| n.hold_time),
                keepalive: n.map(|n| n.hold_time / 3),
                connect_retry: s.connect_retry_time,
                send_hold_time: s.send_hold_time,
            },
            capabilities: n.map(|n| Capabilities {
                tables: tables(&n.families),
                four_octet_as: n.four_octet_as,
                route_refresh: n.route_refresh,
                enhanced_route_refresh: n.enhanced_route_refresh,
                extended_message: n.extended_message,
                add_path_receive: per_family(n.add_path_receive),
                add_path_send: per_family(n.add_path_send),
                graceful_restart: n.graceful_restart.as_ref().map(|g| GracefulRestart {
                    restart_time: g.restart_time,
                    tables: tables(&g.families),
                    notification: g.notification,
                    long_lived: g
                        .long_lived
                        .iter()
                        .map(|(f, secs)| LongLivedTable {
                            table: routes::table_name(*f).into(),
                            stale_time: *secs,
                        })
                        .collect(),
                }),
                role: n.peer_role.map(role_name),
            }),
            last_error: st.last_error.as_ref().map(last_error),
            last_notification_sent: st.last_sent.as_ref().map(notification),
            last_notification_received: st.last_received.as_ref().map(notification),
            counters: MessageCounters {
                received: types(&counts.received),
                sent: types(&counts.sent),
                octets_received: counts.octets_received,
                octets_sent: counts.octets_sent,
            },
            flaps: st.flaps,
            established_transitions: st.established_transitions,
            families: p.families(i, s, &st),
            update_group: st.group.as_ref().map(|g| UpdateGroupRef {
                id: g.group,
                name: g.spec.name.clone(),
                update_thread: p.thread_of(g.group),
            }),
            stale: st
                .stale
                .iter()
                .map(|k| StaleTable {
                    table: routes::table_name(k.family).into(),
                    seconds_left: k
                        .until
                        .duration_since(SystemTime::now())
                        .map_or(0.0, |d| d.as_secs_f64()),
                    long_lived: k.long_lived,
                })
                .collect(),
            held_down: st.held_down,
            disabled: st.disabled,
            local_router_id: s.router_id.to_string(),
            import: s.routing.import.names().to_vec(),
            export: s.routing.export.names().to_vec(),
            prefix_limits: FAMILIES
                .iter()
                .filter_map(|f| {
                    let (maximum, teardown, idle_timeout) = (*s.prefix_limits.get(f.index())?)?;
                    Some(PrefixLimitInfo {
                        table: routes::table_name(*f).into(),
                        maximum,
                        teardown,
                        idle_timeout,
                        received: st.prefixes.get(f.index()).copied().unwrap_or(0) as u64,
                    })
                })
                .collect(),
            statistics: NeighborStatistics {
                write_queue_blocks: st.write_queue_blocks + member.write_queue_blocks,
                slow_writer: member.slow_writer,
                last_slow_writer_at: member.last_slow_writer.map(unix),
                catch_ups: member.catch_ups,
                octets_queued: queue.octets,
                messages_queued: queue.messages,
                high_water: limits,
                low_water: limits / 16,
            },
        }
    }
}

impl Backend for Api {
    async fn summary(&self) -> Summary {
        let p = Pipeline::read(&self.daemon).await;
        let live = self.daemon.live.read().await;
        let c = self.daemon.pipeline.config();
        let mode = match (c.shards, c.update_threads) {
            (_, 0) => "none",
            (1, _) => "update-threading",
            _ => "rib-sharding",
        };
        let mut neighbors = Vec::new();
        for (i, s) in &live.active {
            let Some(h) = live.sessions.peers.get(*i) else {
                continue;
            };
            let st = h.status();
            let counts = h.counts();
            neighbors.push(NeighborSummary {
                address: s.address.to_string(),
                port: s.port,
                peer_as: s.peer_as,
                group: s.routing.group.clone(),
                state: state_name(st.state),
                state_seconds: seconds_since(st.since),
                messages_received: counts.received_total(),
                messages_sent: counts.sent_total(),
                output_queue: h.output_queue().messages,
                flaps: st.flaps,
                families: p.families(*i, s, &st),
            });
        }
        let groups: std::collections::BTreeSet<&str> = live
            .active
            .iter()
            .map(|(_, s)| s.routing.group.as_str())
            .collect();
        Summary {
            local_as: live.config.local_as,
            router_id: live.config.router_id.to_string(),
            threading: Threading {
                mode: mode.into(),
                shards: c.shards,
                update_threads: c.update_threads,
            },
            groups: groups.len(),
            peers: neighbors.len(),
            down_peers: neighbors
                .iter()
                .filter(|n| n.state != "Established")
                .count(),
            tables: FAMILIES
                .iter()
                .map(|f| TablePaths {
                    table: routes::table_name(*f).into(),
                    total_paths: p
                        .shards
                        .iter()
                        .map(|s| s.families[f.index()].paths as u64)
                        .sum(),
                    active_paths: p
                        .shards
                        .iter()
                        .map(|s| s.families[f.index()].active as u64)
                        .sum(),
                })
                .collect(),
            neighbors,
            update_delay: self.daemon.pipeline.deferral_status().map(|d| {
                ribshard_mgmt::api::UpdateDelayStatus {
                    reason: match d.began {
                        DeferralStart::Start => "start",
                        DeferralStart::AllDown => "all-neighbors-down",
                    }
                    .into(),
                    elapsed_seconds: d.seconds,
                    max_delay_seconds: d.max_delay.as_secs(),
                    establish_wait_seconds: d.establish_wait.as_secs(),
                    neighbors_loading: d.neighbors_loading,
                    neighbors_not_up: d.neighbors_not_up,
                    neighbors_loaded: d.neighbors_loaded,
                }
            }),
            version: env!("CARGO_PKG_VERSION").into(),
            started_at: unix(self.daemon.started),
            reconfigured_at: live.reconfigured.map(unix),
        }
    }

    async fn neighbors(&self, address: Option<String>) -> Result<Vec<Neighbor>, ApiError> {
        let p = Pipeline::read(&self.daemon).await;
        let live = self.daemon.live.read().await;
        let wanted = match &address {
            Some(a) => Some(peer_index(&live, a)?),
            None => None,
        };
        Ok(live
            .active
            .iter()
            .filter(|(i, _)| wanted.is_none_or(|w| w == *i))
            .map(|(i, s)| self.neighbor(&p, &live, *i, s))
            .collect())
    }

    async fn groups(&self, name: Option<String>) -> Result<Vec<Group>, ApiError> {
        let p = Pipeline::read(&self.daemon).await;
        let live = self.daemon.live.read().await;
        let mut by_name: BTreeMap<&str, Vec<&(usize, PeerSettings)>> = BTreeMap::new();
        for a in &live.active {
            by_name
                .entry(a.1.routing.group.as_str())
                .or_default()
                .push(a);
        }
        if let Some(n) = &name {
            if !by_name.contains_key(n.as_str()) {
                return Err(ApiError::NotFound(format!("{n}: no such group")));
            }
        }
        let address_of = |peer: u32| {
            live.peers
                .get(peer as usize)
                .map_or_else(|| format!("peer {peer}"), |s| s.address.to_string())
        };
        let mut out = Vec::new();
        for (gname, members) in by_name {
            if name.as_deref().is_some_and(|n| n != gname) {
                continue;
            }
            let Some((_, first)) = members.first().copied() else {
                continue;
            };
            let statuses: Vec<SessionStatus> = members
                .iter()
                .map(|(i, _)| {
                    live.sessions
                        .peers
                        .get(*i)
                        .map(|h| h.status())
                        .unwrap_or_default()
                })
                .collect();
            let peer_as = members
                .iter()
                .all(|(_, s)| s.peer_as == first.peer_as)
                .then_some(first.peer_as);
            let mut options = Vec::new();
            let r = &first.routing;
            if r.route_server_client {
                options.push("route-server-client".to_string());
            }
            if let Some(c) = r.cluster {
                options.push(format!("cluster {c}"));
            }
            if r.next_hop_self == Some(true) {
                options.push("next-hop-self".into());
            }
            if members.iter().any(|(_, s)| s.passive) {
                options.push("passive".into());
            }
            if members.iter().any(|(_, s)| s.multihop) {
                options.push("multihop".into());
            }
            if members
                .iter()
                .any(|(_, s)| s.authentication_key.is_some() || s.tcp_ao.is_some())
            {
                options.push("authentication".into());
            }
            if members
                .iter()
                .any(|(_, s)| s.add_path_receive || s.add_path_send)
            {
                options.push("add-path".into());
            }
            if let Some(role) = first.role {
                options.push(format!("role {}", role_name(role)));
            }
            let update_groups = p
                .updates
                .iter()
                .flat_map(|u| u.groups.iter().map(move |g| (u.thread, g)))
                .filter(|(_, g)| g.name == gname)
                .map(|(t, g)| UpdateGroupInfo {
                    id: g.group,
                    update_thread: thread_name(t),
                    members: g.members.iter().map(|(m, _)| address_of(m.peer)).collect(),
                    updates_built: g.stats.updates_built,
                    octets_built: g.stats.bytes_built,
                    prefixes_advertised: g.stats.prefixes_advertised,
                    prefixes_withdrawn: g.stats.prefixes_withdrawn,
                    octets_sent: g.members.iter().map(|(_, s)| s.bytes_sent).sum(),
                })
                .collect();
            let mut tables: BTreeMap<String, FamilyPrefixes> = BTreeMap::new();
            for ((i, s), st) in members.iter().zip(&statuses) {
                for f in p.families(*i, s, st) {
                    let t = tables
                        .entry(f.table.clone())
                        .or_insert_with(|| FamilyPrefixes {
                            table: f.table.clone(),
                            advertised: Some(0),
                            ..FamilyPrefixes::default()
                        });
                    t.received += f.received;
                    t.accepted += f.accepted;
                    t.active += f.active;
                    t.advertised = match (t.advertised, f.advertised) {
                        (Some(a), Some(b)) => Some(a + b),
                        (Some(a), None) if st.group.is_none() => Some(a),
                        _ => None,
                    };
                }
            }
            out.push(Group {
                name: gname.to_string(),
                group_type: if first.internal {
                    "internal"
                } else {
                    "external"
                }
                .into(),
                local_as: first.local_as,
                peer_as,
                options,
                total_peers: members.len(),
                established: statuses
                    .iter()
                    .filter(|s| s.state == ribshard_fsm::State::Established)
                    .count(),
                members: members
                    .iter()
                    .zip(&statuses)
                    .map(|((_, s), st)| GroupMember {
                        address: s.address.to_string(),
                        port: s.port,
                        state: state_name(st.state),
                    })
                    .collect(),
                update_groups,
                tables: tables.into_values().collect(),
            });
        }
        Ok(out)
    }

    async fn route_summary(&self) -> RouteSummary {
        let p = Pipeline::read(&self.daemon).await;
        let stats = &p.shards;
        let live = self.daemon.live.read().await;
        let tables = FAMILIES
            .iter()
            .map(|f| {
                let shards: Vec<ShardTable> = stats
                    .iter()
                    .map(|s| {
                        let c = s.families[f.index()];
                        ShardTable {
                            shard: s.shard,
                            thread: format!("rs-shard-{}", s.shard),
                            destinations: c.prefixes as u64,
                            routes: c.paths as u64,
                            active: c.active as u64,
                            hidden: c.hidden as u64,
                            unresolved: c.unresolved as u64,
                        }
                    })
                    .collect();
                let destinations: u64 = shards.iter().map(|s| s.destinations).sum();
                let routes: u64 = shards.iter().map(|s| s.routes).sum();
                TableSummary {
                    table: routes::table_name(*f).into(),
                    destinations,
                    routes,
                    active: shards.iter().map(|s| s.active).sum(),
                    hidden: shards.iter().map(|s| s.hidden).sum(),
                    unresolved: shards.iter().map(|s| s.unresolved).sum(),
                    rib_fib_ratio: if destinations == 0 {
                        0.0
                    } else {
                        routes as f64 / destinations as f64
                    },
                    shards,
                }
            })
            .collect();
        let s = self
            .daemon
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        RouteSummary {
            local_as: live.config.local_as,
            router_id: live.config.router_id.to_string(),
            tables,
            high_water: HighWater {
                destinations: Mark {
                    value: s.destinations.0,
                    at: unix(s.destinations.1),
                },
                routes: Mark {
                    value: s.routes.0,
                    at: unix(s.routes.1),
                },
            },
        }
    }

    async fn routes(&self, q: RouteRequest) -> Result<mpsc::Receiver<bytes::Bytes>, ApiError> {
        routes::routes(&self.daemon, q).await
    }

    async fn watch_routes(
        &self,
        q: WatchRequest,
    ) -> Result<mpsc::Receiver<bytes::Bytes>, ApiError> {
        watch::watch(&self.daemon, q).await
    }

    async fn running_config(&self) -> RunningConfig {
        let live = self.daemon.live.read().await;
        crate::config::running(&live.config, self.daemon.config_file.as_deref())
    }

    async fn log_tail(&self) -> Result<mpsc::Receiver<bytes::Bytes>, ApiError> {
        let control = crate::logging::control().ok_or_else(log_not_set_up)?;
        let mut lines = control.tail();
        // Its first line: the client knows it follows from here.
        tracing::info!("monitor log: a client follows the log");
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let mut text = match lines.recv().await {
                    Ok(l) => format!("{l}\n"),
                    Err(RecvError::Lagged(n)) => {
                        format!(
                            "-- {n} lines lost: this client reads slower than the daemon logs\n"
                        )
                    }
                    Err(RecvError::Closed) => return,
                };
                // What else is waiting, in one write.
                while let Ok(l) = lines.try_recv() {
                    text.push_str(&l);
                    text.push('\n');
                }
                if tx.send(bytes::Bytes::from(text)).await.is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }

    async fn log_level(&self, r: Option<LogLevelRequest>) -> Result<LogLevels, ApiError> {
        let control = crate::logging::control().ok_or_else(log_not_set_up)?;
        let Some(r) = r else {
            return Ok(control.levels());
        };
        if let Some(n) = &r.neighbor {
            let live = self.daemon.live.read().await;
            peer_index(&live, n)?;
        }
        let levels = control
            .set(&r.level, r.neighbor.as_deref())
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        tracing::info!(level = %r.level, neighbor = ?r.neighbor, "log level set");
        Ok(levels)
    }

    async fn threads(&self) -> Threads {
        let now = Instant::now();
        let cpu = ribshard_mgmt::procfs::threads();
        let work = telemetry::threads();
        let samples = self
            .daemon
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let threads = cpu
            .iter()
            .map(|t| {
                let w = work.iter().find(|w| w.tid == t.tid);
                ThreadInfo {
                    name: t.name.clone(),
                    tid: t.tid,
                    kind: w.map_or("other", |w| w.kind.name()).into(),
                    cpu_seconds: t.cpu_seconds,
                    share_1s: samples.cpu.share(t.tid, now, t.cpu_seconds, 1.0),
                    share_10s: samples.cpu.share(t.tid, now, t.cpu_seconds, 10.0),
                    share_60s: samples.cpu.share(t.tid, now, t.cpu_seconds, 60.0),
                    items: w.map_or(0, |w| w.items),
                    longest_item_seconds: w.map_or(0.0, |w| w.longest.as_secs_f64()),
                }
            })
            .collect();
        Threads { threads }
    }

    async fn work_queues(&self) -> WorkQueues {
        let p = Pipeline::read(&self.daemon).await;
        let q = self.daemon.pipeline.queues();
        let live = self.daemon.live.read().await;
        let info =
            |kind: &str, thread: String, s: &ribshard_engine::pipeline::QueueState| QueueInfo {
                kind: kind.into(),
                thread,
                depth: s.depth as u64,
                capacity: s.capacity as u64,
                high_water: s.high_water as u64,
                items: s.sends,
                blocked_seconds: s.blocked.as_secs_f64(),
            };
        let mut queues: Vec<QueueInfo> = q
            .shards
            .iter()
            .map(|s| info("session-to-shard", format!("rs-shard-{}", s.index), s))
            .collect();
        queues.extend(
            q.updates
                .iter()
                .map(|s| info("shard-to-update", format!("rs-update-{}", s.index), s)),
        );
        let mut w = WriteQueues {
            high_water: live.config.threading.write_queue_high_water,
            ..WriteQueues::default()
        };
        for (i, s) in &live.active {
            let Some(h) = live.sessions.peers.get(*i) else {
                continue;
            };
            if h.status().state != ribshard_fsm::State::Established {
                continue;
            }
            let o = h.output_queue();
            w.sessions += 1;
            w.messages_queued += o.messages;
            w.octets_queued += o.octets;
            if o.octets > w.largest_octets || w.largest_neighbor.is_none() {
                w.largest_octets = o.octets;
                w.largest_neighbor = Some(s.address.to_string());
            }
            if p.member_stats(*i)
                .is_some_and(|m| m.slow_writer > m.catch_ups)
            {
                w.slow_writers += 1;
            }
        }
        WorkQueues {
            queues,
            write_queues: w,
        }
    }

    async fn convergence(&self) -> Convergence {
        let updates = self.daemon.pipeline.update_stats().await;
        let t = self.daemon.pipeline.telemetry();
        let live = self.daemon.live.read().await;
        let written = t.written_snapshot();
        let group_name = |id: u32| {
            let running = updates
                .iter()
                .flat_map(|u| &u.groups)
                .find(|g| g.group == id);
            match (running, written.iter().find(|(g, _, _)| *g == id)) {
                (Some(g), _) => g.name.clone(),
                (None, Some((_, n, _))) => n.clone(),
                (None, None) => format!("update group {id}"),
            }
        };
        let groups_now = self.daemon.pipeline.groups();
        let neighbors = t
            .neighbors()
            .into_iter()
            .filter(|(peer, _)| live.active.iter().any(|(i, _)| *i == *peer as usize))
            .map(|(peer, c)| {
                let groups: Vec<GroupTime> = c
                    .groups
                    .iter()
                    .map(|(id, d)| GroupTime {
                        group: group_name(*id),
                        id: *id,
                        seconds: d.as_secs_f64(),
                    })
                    .collect();
                let expected = c.groups_expected.min(groups_now).max(1);
                NeighborConvergence {
                    address: live
                        .peers
                        .get(peer as usize)
                        .map(|s| s.address.to_string())
                        .unwrap_or_default(),
                    established_at: unix(c.established),
                    end_of_rib_received_seconds: c.end_of_rib_received.map(|d| d.as_secs_f64()),
                    all_groups_seconds: (groups.len() >= expected)
                        .then(|| groups.iter().map(|g| g.seconds).fold(0.0, f64::max)),
                    groups,
                }
            })
            .collect();
        Convergence {
            decided: histogram(&t.decided.snapshot()),
            written: written
                .iter()
                .map(|(id, name, h)| GroupHistogram {
                    group: name.clone(),
                    id: *id,
                    histogram: histogram(h),
                })
                .collect(),
            neighbors,
        }
    }

    async fn clear(&self, r: ClearRequest) -> Result<ClearReply, ApiError> {
        let how = match r.mode.as_deref() {
            None | Some("hard") => Clear::Hard,
            Some("soft") => Clear::Soft,
            Some("soft-inbound") => Clear::SoftInbound,
            Some("disable") => Clear::Disable,
            Some("enable") => Clear::Enable,
            Some(m) => {
                return Err(ApiError::BadRequest(format!(
                    "{m}: one of hard, soft, soft-inbound, disable, enable"
                )))
            }
        };
        let live = self.daemon.live.read().await;
        let targets: Vec<usize> = if r.neighbor == "all" {
            live.active.iter().map(|(i, _)| *i).collect()
        } else {
            let a: std::net::IpAddr = r.neighbor.parse().map_err(|_| {
                ApiError::BadRequest(format!("{}: not an address or all", r.neighbor))
            })?;
            let v: Vec<usize> = live
                .active
                .iter()
                .filter(|(_, s)| s.address == a)
                .map(|(i, _)| *i)
                .collect();
            if v.is_empty() {
                return Err(ApiError::NotFound(format!(
                    "{}: no such neighbor",
                    r.neighbor
                )));
            }
            v
        };
        let mut neighbors = Vec::new();
        for i in targets {
            let Some(h) = live.sessions.peers.get(i) else {
                continue;
            };
            let result = h.clear(how).await;
            neighbors.push(Cleared {
                address: h.settings.address.to_string(),
                error: result.err().map(|e| e.to_string()),
            });
        }
        Ok(ClearReply { neighbors })
    }

    async fn reload(&self, r: ReloadRequest) -> ReloadReply {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let gone = || ReloadReply {
            outcome: ReloadOutcome::Rejected,
            errors: vec!["the daemon is shutting down".into()],
            ..ReloadReply::default()
        };
        if self.reloads.send((r, tx)).await.is_err() {
            return gone();
        }
        rx.await.unwrap_or_else(|_| gone())
    }

    async fn restart(&self, r: RestartRequest) -> Result<RestartReply, ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let gone = || ApiError::Internal("the daemon is shutting down".into());
        self.restarts.send((r, tx)).await.map_err(|_| gone())?;
        rx.await
            .map_err(|_| gone())?
            .map_err(|e| ApiError::BadRequest(e.to_string()))
    }

    async fn fib_summary(&self) -> FibSummary {
        self.fib()
    }

    async fn bmp_stations(&self) -> Vec<BmpStation> {
        let Some(m) = self.daemon.bmp.get() else {
            return Vec::new();
        };
        m.stations()
            .into_iter()
            .map(|s| BmpStation {
                name: s.name,
                address: s.address.to_string(),
                state: s.state.to_string(),
                ribs: [
                    (s.ribs.pre_policy, "pre-policy"),
                    (s.ribs.post_policy, "post-policy"),
                    (s.ribs.loc_rib, "loc-rib"),
                    (s.ribs.adj_rib_out, "adj-rib-out"),
                    (s.ribs.mirroring, "route-mirroring"),
                ]
                .into_iter()
                .filter(|(on, _)| *on)
                .map(|(_, n)| n.to_string())
                .collect(),
                connections: s.connections,
                last_error: s.last_error.map(|e| e.to_string()),
                written: s.written,
                waiting: s.waiting as u64,
            })
            .collect()
    }

    async fn validation_sessions(&self) -> ribshard_mgmt::validation::ValidationSessions {
        validation::sessions(&self.daemon)
    }

    async fn validation_database(
        &self,
        q: ribshard_mgmt::validation::DatabaseQuery,
    ) -> Result<ribshard_mgmt::validation::ValidationDatabase, ApiError> {
        validation::database(&self.daemon, q)
    }

    async fn forwarding_table(
        &self,
        destination: Option<String>,
    ) -> Result<Vec<ForwardingRoute>, ApiError> {
        self.forwarding(destination).await
    }

    async fn fib_verify(&self) -> Result<FibVerify, ApiError> {
        self.verify().await
    }

    async fn mrt_inject(&self, f: MrtFile) -> Result<Injected, ApiError> {
        self.inject(f.file).await
    }

    async fn mrt_remove(&self, f: MrtFile) -> Result<Injected, ApiError> {
        self.uninject(f.file).await
    }

    async fn mrt_injections(&self) -> Vec<Injected> {
        self.daemon
            .injected()
            .into_iter()
            .map(mrt::injected)
            .collect()
    }

    async fn mrt_rib(
        &self,
        neighbor: Option<String>,
    ) -> Result<mpsc::Receiver<bytes::Bytes>, ApiError> {
        self.rib(neighbor).await
    }
}
