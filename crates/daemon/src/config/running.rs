//! `show configuration`: the configuration the daemon runs with, as an operator reads it
//! (every neighbor's settings resolved, secrets hidden).

use super::resolve::{Config, GroupType};
use ribshard_mgmt::api::{RunningBgp, RunningConfig, RunningNeighbor};

/// The running configuration of `c`, read from `file`.
pub fn running(c: &Config, file: Option<&std::path::Path>) -> RunningConfig {
    let bgp = RunningBgp {
        local_as: c.local_as,
        router_id: c.router_id.to_string(),
        listen: c.listen.iter().map(ToString::to_string).collect(),
        number_of_shards: c.threading.shards,
        update_threads: c.threading.update_threads,
        memory_limit: c.memory_limit.map(|l| format!("{}MiB", l >> 20)),
        update_delay: c
            .update_delay
            .map(|d| [d.max_delay.as_secs(), d.establish_wait.as_secs()]),
        always_compare_med: c.path_selection.always_compare_med,
        external_router_id: c.path_selection.external_router_id,
        multipath: match c.path_selection.multipath {
            None => "off".into(),
            Some(m) if m.multiple_as => "multiple-as".into(),
            Some(_) => "on".into(),
        },
        graceful_restart: c.graceful_restart.as_ref().map(|g| {
            ribshard_mgmt::api::RunningGracefulRestart {
                restart_time: g.restart_time,
                long_lived_stale_time: g.long_lived_stale_time,
                on_sigterm: if g.sigterm_restarts {
                    "restart"
                } else {
                    "shutdown"
                }
                .into(),
                state_file: g.state_file.display().to_string(),
            }
        }),
    };
    let neighbor = c
        .peers
        .iter()
        .map(|p| RunningNeighbor {
            address: p.address.to_string(),
            group: p.group.clone(),
            group_type: match p.group_type {
                GroupType::Internal => "internal",
                GroupType::External => "external",
            }
            .into(),
            peer_as: p.peer_as,
            local_as: p.local_as,
            port: p.port,
            local_address: p.local_address.map(|a| a.to_string()),
            description: p.description.clone(),
            hold_time: p.hold_time,
            connect_retry_time: p.connect_retry_time,
            send_hold_time: p.send_hold_time,
            passive: p.passive,
            disable: p.disable,
            authentication_key: p.authentication_key.as_ref().map(|_| "(hidden)".into()),
            tcp_ao: p.tcp_ao.as_ref().map(|k| {
                format!(
                    "key-id {} receive-id {} {}",
                    k.send_id,
                    k.receive_id,
                    k.algorithm.name()
                )
            }),
            ttl_security: p.ttl_security,
            multihop: p.multihop,
            import: p.import.clone(),
            export: p.export.clone(),
            family: p
                .families
                .iter()
                .map(|f| match f {
                    ribshard_wire::Family::Ipv4Unicast => "inet-unicast".into(),
                    ribshard_wire::Family::Ipv6Unicast => "inet6-unicast".into(),
                })
                .collect(),
            prefix_limit: p
                .prefix_limits
                .iter()
                .zip(["inet-unicast", "inet6-unicast"])
                .filter_map(|(l, f)| {
                    let l = l.as_ref()?;
                    let mut s = format!("{f} maximum {}", l.maximum);
                    if l.teardown {
                        s.push_str(" teardown");
                    }
                    if let Some(t) = l.idle_timeout {
                        s.push_str(&format!(" idle-timeout {t}"));
                    }
                    Some(s)
                })
                .collect(),
            cluster: p.cluster.map(|c| c.to_string()),
            route_server_client: p.route_server_client,
            next_hop_self: p.next_hop_self,
            role: p.role.map(crate::backend::role_name),
            add_path: [("receive", p.add_path_receive), ("send", p.add_path_send)]
                .into_iter()
                .filter(|(_, on)| *on)
                .map(|(w, _)| w.to_string())
                .collect(),
            add_path_send: p.add_path_select.map(|s| match s {
                ribshard_rib::AddPathSelect::Best(n) => format!("path-count {n}"),
                ribshard_rib::AddPathSelect::All => "all".into(),
                ribshard_rib::AddPathSelect::EqualCost(n) => format!("equal-cost {n}"),
            }),
            loops: p.loops,
            local_as_private: p.local_as_private,
            no_prepend_global_as: p.no_prepend_global_as,
            no_install: p.no_install,
            max_long_lived_stale_time: p.max_long_lived_stale_time,
        })
        .collect();
    let mut policy_statements: Vec<String> = c
        .policies
        .0
        .fingerprints()
        .0
        .into_iter()
        .map(|(n, _)| n.to_string())
        .collect();
    policy_statements.sort();
    let mut other = vec![format!(
        "management: socket {}{}{}{}",
        c.management.socket.display(),
        c.management
            .listen
            .iter()
            .map(|a| format!(", listen {a}"))
            .collect::<String>(),
        if c.management.read_only {
            " (read-only)"
        } else {
            ""
        },
        c.management
            .metrics
            .map(|m| format!(", metrics {m}"))
            .unwrap_or_default()
    )];
    if let Some(f) = &c.fib {
        other.push(format!(
            "fib: table {}, protocol {}, metric {}",
            f.table, f.protocol, f.metric
        ));
    }
    if let Some(r) = &c.resolution {
        other.push(format!(
            "bgp.resolution: tables {:?}, via default {}",
            r.tables, r.via_default
        ));
    }
    for o in &c.originate {
        other.push(format!("bgp.originate: {} ({:?})", o.prefix, o.when));
    }
    for f in &c.mrt.inject {
        other.push(format!("mrt.inject: {}", f.display()));
    }
    if let Some(u) = &c.mrt.updates {
        other.push(format!("mrt.updates: {u}"));
    }
    RunningConfig {
        file: file.map(|f| f.display().to_string()),
        bgp,
        neighbor,
        policy_statements,
        other,
    }
}
