//! Lowering: the configuration as the engine takes it (a session's settings, the pipeline's
//! threads).

use super::{Config, GroupType, Peer};
use ribshard_engine::negotiate::Routing;
use ribshard_engine::pipeline::PipelineConfig;
use ribshard_engine::PeerSettings;
use ribshard_policy::Chain;
use std::sync::Arc;

/// The settings a peer index reserved for a source of routes that is not a session is shown
/// with (originated networks, an injected MRT peer): its address, AS and a description.
pub fn local_settings(
    c: &Config,
    address: std::net::IpAddr,
    asn: u32,
    description: String,
) -> PeerSettings {
    PeerSettings {
        address,
        port: 0,
        local_address: None,
        local_as: c.local_as,
        peer_as: asn,
        router_id: c.router_id,
        internal: asn == c.local_as,
        hold_time: 0,
        connect_retry_time: 0,
        send_hold_time: 0,
        passive: true,
        disabled: false,
        authentication_key: None,
        tcp_ao: None,
        ttl_security: None,
        multihop: false,
        families: Vec::new(),
        prefix_limits: [None, None],
        role: None,
        add_path_receive: false,
        add_path_send: false,
        add_path_select: None,
        graceful_restart: None,
        max_long_lived_stale_time: None,
        description,
        routing: Routing::default(),
    }
}

/// The session settings of a neighbor.
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
        disabled: p.disable,
        authentication_key: p.authentication_key.clone(),
        tcp_ao: p.tcp_ao.clone(),
        ttl_security: p.ttl_security,
        multihop: p.multihop,
        families: p.families.clone(),
        prefix_limits: p
            .prefix_limits
            .map(|l| l.map(|l| (l.maximum, l.teardown, l.idle_timeout))),
        role: p.role,
        add_path_receive: p.add_path_receive,
        add_path_send: p.add_path_send,
        add_path_select: p.add_path_select,
        graceful_restart: c.graceful_restart.as_ref().map(|g| {
            ribshard_engine::negotiate::LocalRestart {
                restart_time: g.restart_time,
                long_lived_stale_time: g.long_lived_stale_time,
            }
        }),
        max_long_lived_stale_time: p.max_long_lived_stale_time,
        description: p
            .description
            .clone()
            .unwrap_or_else(|| format!("{} in group {}", p.address, p.group)),
        routing: Routing {
            group: p.group.clone(),
            import: Arc::new(chain(c, p, &p.import)),
            export: Arc::new(chain(c, p, &p.export)),
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
            no_install: p.no_install,
        },
    }
}

/// A neighbor's chain of policies. Falling off its end does what BGP does without policy:
/// internal sessions accept (Junos's default), external ones refuse (RFC 8212 section 2).
fn chain(c: &Config, p: &Peer, names: &[String]) -> Chain {
    let default_accept = p.group_type == GroupType::Internal;
    c.policies
        .0
        .chain(names, default_accept, p.local_as)
        // Names are checked when the file is read; this is never reached.
        .unwrap_or_else(|_| Chain::reject_all())
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

/// (shards, update threads) as the pipeline runs them: 0 shards is one RIB thread, and
/// without update threads there is one shard.
pub fn threads_of(c: &Config) -> (usize, usize) {
    let u = c.threading.update_threads as usize;
    let s = if u == 0 {
        1
    } else {
        (c.threading.shards as usize).max(1)
    };
    (s, u)
}
