//! Configuration reload (SIGHUP): what differs between the running configuration and the
//! file, what is applied with sessions kept up, and what waits for a restart.
//!
//! Applied live: `rib-sharding.number-of-shards` and `update-threading.number-of-threads`
//! (the pipeline re-shards; Junos restarts its routing daemon for this), policies and the
//! neighbors. A neighbor whose import or export policy changed (its chain, or a policy,
//! prefix list or community the chain uses) keeps its session: the new import policy is
//! applied to its routes kept as received, and its new export policy sends it what
//! changes. A neighbor no longer configured is sent Cease / Peer De-configured and its
//! routes go; a new one gets a session; one whose other session settings differ (anything
//! of its own, or inherited: `local-as`, `router-id`, timers, ...) is sent Cease / Other
//! Configuration Change (RFC 4486) and comes back with the new settings. `listen`, `path-selection` / `multipath`,
//! `write-queue-high-water`, `update-delay`, `[management]` and `[bmp]` wait for a restart,
//! and are named.
//!
//! [`reload`] does it, for SIGHUP and `ribshard configure reload` alike.

use crate::config::{settings, threads_of, Config};
use crate::state::Daemon;
use ribshard_engine::session::Clear;
use ribshard_engine::{needs_new_session, PeerSettings};
use ribshard_mgmt::api::{ReloadOutcome, ReloadReply, ReloadRequest};
use ribshard_wire::notification::cease;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;
use tracing::{error, info, warn};

/// What a reload does to one neighbor; sessions are named by peer index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NeighborChange {
    Removed(usize),
    /// Its session restarts with these settings, for these reasons (what the OPEN or the
    /// connection carries: [`needs_new_session`]).
    Changed(usize, PeerSettings, Vec<&'static str>),
    /// Applied with the session kept (policies, limits, timers, description, ...).
    Settings(usize, PeerSettings),
    Added(PeerSettings),
}

/// What a reload does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// New (shards, update threads) as the pipeline runs them, when they change.
    pub threading: Option<(usize, usize)>,
    /// Removals first, then changes, then additions (an address given up is free before it
    /// is taken again).
    pub neighbors: Vec<NeighborChange>,
    /// Changes that take effect only at the next start, in words an operator can act on.
    pub needs_restart: Vec<String>,
}

/// Compares the running configuration, whose neighbors run as `active` (peer index and
/// session settings), with a newly loaded one.
pub fn plan(running: &Config, active: &[(usize, PeerSettings)], new: &Config) -> Plan {
    let mut p = Plan::default();
    if threads_of(running) != threads_of(new) {
        p.threading = Some(threads_of(new));
    }
    let mut restart = |changed: bool, what: &str| {
        if changed {
            p.needs_restart.push(what.to_string());
        }
    };
    restart(running.listen != new.listen, "bgp.listen");
    let decision = |o: &ribshard_rib::Options| ribshard_rib::Options {
        add_path: None,
        ..*o
    };
    restart(
        decision(&running.path_selection) != decision(&new.path_selection),
        "bgp.path-selection / bgp.multipath",
    );
    restart(
        running.path_selection.add_path != new.path_selection.add_path,
        "add-path-send (the paths per prefix the shards keep: the largest path-count, all, equal-cost)",
    );
    restart(
        running.threading.write_queue_high_water != new.threading.write_queue_high_water,
        "bgp.update-threading.write-queue-high-water",
    );
    restart(running.management != new.management, "management");
    // Read at start only: it is about the first tables.
    restart(running.update_delay != new.update_delay, "bgp.update-delay");
    restart(running.fib != new.fib, "fib");
    restart(running.mrt != new.mrt, "mrt");
    restart(running.resolution != new.resolution, "bgp.resolution");
    restart(
        running.bmp != new.bmp || running.bmp_sys_name != new.bmp_sys_name,
        "bmp",
    );
    let key = |s: &PeerSettings| -> (IpAddr, u16) { (s.address, s.port) };
    let old: BTreeMap<(IpAddr, u16), &(usize, PeerSettings)> =
        active.iter().map(|a| (key(&a.1), a)).collect();
    let now: BTreeMap<(IpAddr, u16), PeerSettings> = new
        .peers
        .iter()
        .map(|n| settings(new, n))
        .map(|s| (key(&s), s))
        .collect();
    for (k, (i, _)) in &old {
        if !now.contains_key(k) {
            p.neighbors.push(NeighborChange::Removed(*i));
        }
    }
    for (k, s) in &now {
        if let Some((i, was)) = old.get(k) {
            if was == s {
                continue;
            }
            let why = needs_new_session(was, s);
            p.neighbors.push(if why.is_empty() {
                NeighborChange::Settings(*i, s.clone())
            } else {
                NeighborChange::Changed(*i, s.clone(), why)
            });
        }
    }
    for (k, s) in now {
        if !old.contains_key(&k) {
            p.neighbors.push(NeighborChange::Added(s));
        }
    }
    p
}

/// The running configuration after a reload: the new one, except what waits for a restart.
pub fn applied_config(running: &Config, new: Config) -> Config {
    let mut c = new;
    c.listen = running.listen.clone();
    c.path_selection = running.path_selection;
    c.threading.write_queue_high_water = running.threading.write_queue_high_water;
    c.management = running.management.clone();
    c.update_delay = running.update_delay;
    c.fib = running.fib.clone();
    c.mrt = running.mrt.clone();
    c.resolution = running.resolution.clone();
    c.bmp = running.bmp.clone();
    c.bmp_sys_name = running.bmp_sys_name.clone();
    c
}

/// What changed of a neighbor's settings that its session takes as it runs, in words.
fn live_changes(was: &PeerSettings, now: &PeerSettings) -> Vec<String> {
    let mut v = Vec::new();
    let mut said = |changed: bool, what: String| {
        if changed {
            v.push(what);
        }
    };
    said(
        was.description != now.description,
        format!("description \"{}\"", now.description),
    );
    said(
        was.prefix_limits != now.prefix_limits,
        "prefix-limit: applied now".into(),
    );
    said(
        was.hold_time != now.hold_time,
        format!(
            "hold-time {} s: proposed in the next OPEN (RFC 4271 fixes it per session)",
            now.hold_time
        ),
    );
    said(
        was.connect_retry_time != now.connect_retry_time || was.passive != now.passive,
        "connect-retry / passive: from the next connection attempt".into(),
    );
    said(
        was.graceful_restart != now.graceful_restart,
        match now.graceful_restart {
            Some(g) => format!(
                "graceful-restart (restart-time {} s): offered in the next OPEN; until then the \
                 neighbor keeps our routes across a restart only if this session's OPEN offered it",
                g.restart_time
            ),
            None => "graceful-restart removed: helper only from the next OPEN".into(),
        },
    );
    said(
        was.max_long_lived_stale_time != now.max_long_lived_stale_time,
        "max-long-lived-stale-time: from its next session".into(),
    );
    said(
        was.send_hold_time != now.send_hold_time,
        format!("send-hold-time {} s: applied now", now.send_hold_time),
    );
    said(
        was.routing.next_hop_self != now.routing.next_hop_self,
        "next-hop-self: what it is sent changes now".into(),
    );
    said(
        was.routing.no_install != now.routing.no_install,
        "no-install: its routes' place in the kernel follows".into(),
    );
    said(
        was.routing.group != now.routing.group,
        format!(
            "group {}: moved to its update groups, sent what changes",
            now.routing.group
        ),
    );
    said(
        was.routing.no_prepend_global_as != now.routing.no_prepend_global_as,
        "no-prepend-global-as: what it is sent changes now".into(),
    );
    said(
        was.disabled != now.disabled,
        if now.disabled {
            "disable: session ended (Cease / Administrative Shutdown), connections refused".into()
        } else {
            "disable removed: session starting".into()
        },
    );
    v
}

/// A neighbor's new settings, applied with its session kept.
async fn settings_changed(
    live: &mut crate::state::Live,
    i: usize,
    s: &PeerSettings,
    reply: &mut ReloadReply,
) {
    let Some(h) = live.sessions.peers.get_mut(i) else {
        return;
    };
    let name = h.settings.name();
    let was = h.settings.clone();
    let done = h.apply_settings(s.clone()).await;
    for (what, old, new, live_now) in [
        (
            "import",
            &was.routing.import,
            &s.routing.import,
            done.reimported,
        ),
        (
            "export",
            &was.routing.export,
            &s.routing.export,
            done.regrouped,
        ),
    ] {
        if old == new {
            continue;
        }
        let how = match (what, live_now) {
            ("import", true) => "applied to the routes kept as received, session kept",
            ("export", true) => "what it changes is being sent, session kept",
            _ => "in use from the next session (not up now)",
        };
        info!(neighbor = %name, policy = what, chain = ?new.names(), "{how}");
        reply.changes.push(format!(
            "neighbor {name}: {what} policy [{}]: {how}",
            new.names().join(" ")
        ));
    }
    for c in live_changes(&was, s) {
        info!(neighbor = %name, "{c}, session kept");
        reply
            .changes
            .push(format!("neighbor {name}: {c}, session kept"));
    }
    for a in live.active.iter_mut().filter(|(j, _)| *j == i) {
        a.1 = s.clone();
    }
    if let Some(p) = live.peers.get_mut(i) {
        *p = s.clone();
    }
}

/// How long a neighbor removed or changed by a reload gets to send its NOTIFICATION.
const NEIGHBOR_GRACE: Duration = Duration::from_secs(2);

/// What a plan would do, in the words a reload's answer uses (`configure reload
/// --dry-run`, `config diff`).
fn describe(live: &crate::state::Live, plan: &Plan) -> Vec<String> {
    let mut v = Vec::new();
    if let Some((shards, threads)) = plan.threading {
        v.push(format!(
            "would re-shard to {shards} shard(s) and {threads} update thread(s), sessions kept up"
        ));
    }
    let name = |i: usize| {
        live.sessions
            .peers
            .get(i)
            .map(|h| h.settings.name())
            .unwrap_or_default()
    };
    for change in &plan.neighbors {
        match change {
            NeighborChange::Removed(i) => v.push(format!(
                "neighbor {}: would be removed (Cease / Peer De-configured)",
                name(*i)
            )),
            NeighborChange::Changed(i, _, why) => v.push(format!(
                "neighbor {}: session would restart (Cease / Other Configuration Change): {} changed",
                name(*i),
                why.join(", ")
            )),
            NeighborChange::Settings(i, s) => {
                let Some(was) = live.sessions.peers.get(*i).map(|h| &h.settings) else {
                    continue;
                };
                for (what, old, new) in [
                    ("import", &was.routing.import, &s.routing.import),
                    ("export", &was.routing.export, &s.routing.export),
                ] {
                    if old != new {
                        v.push(format!(
                            "neighbor {}: {what} policy [{}] would apply, session kept",
                            name(*i),
                            new.names().join(" ")
                        ));
                    }
                }
                for c in live_changes(was, s) {
                    v.push(format!("neighbor {}: {c}, session kept", name(*i)));
                }
            }
            NeighborChange::Added(s) => {
                v.push(format!("neighbor {}: would be added", s.name()));
            }
        }
    }
    v
}

/// Reads the configuration file again and applies it (or, `dry_run`, says what that would
/// do, changing nothing; `file`: another file, compared only). A file with errors changes
/// nothing; thread counts and neighbors are applied with the other sessions kept up; what
/// needs a restart is named. The reply says which, for the log and for `configure reload`.
pub async fn reload(daemon: &Daemon, request: &ReloadRequest) -> ReloadReply {
    let rejected = |why: String| ReloadReply {
        outcome: ReloadOutcome::Rejected,
        errors: vec![why],
        ..ReloadReply::default()
    };
    let path = match (&request.file, request.dry_run) {
        (Some(f), true) => std::path::PathBuf::from(f),
        (Some(_), false) => {
            return rejected(
                "a file other than the daemon's own is only compared (dry_run, `config diff`)"
                    .into(),
            )
        }
        (None, _) => match daemon.config_file.clone() {
            Some(p) => p,
            None => return rejected("the daemon was started without a configuration file".into()),
        },
    };
    info!(file = %path.display(), dry_run = request.dry_run, "reading the configuration again");
    let checked = crate::config::load(&path);
    for w in &checked.warnings {
        warn!("{w}");
    }
    let warnings: Vec<String> = checked.warnings.iter().map(ToString::to_string).collect();
    let new = match checked.config {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors.0 {
                error!("configuration not reloaded: {e}");
            }
            return ReloadReply {
                outcome: ReloadOutcome::Rejected,
                errors: errors.0.iter().map(ToString::to_string).collect(),
                warnings,
                ..ReloadReply::default()
            };
        }
    };
    if request.dry_run {
        let live = daemon.live.read().await;
        let plan = plan(&live.config, &live.active, &new);
        let mut changes = describe(&live, &plan);
        if live.config.originate != new.originate {
            changes.push("bgp.originate: the networks would change, sessions kept".into());
        }
        if live.config.rpki != new.rpki {
            changes.push("rpki: the RTR client would start again with the new caches".into());
        }
        return ReloadReply {
            outcome: ReloadOutcome::Planned,
            changes,
            needs_restart: plan.needs_restart,
            warnings,
            ..ReloadReply::default()
        };
    }
    // One reload at a time, and no show command sees it half done.
    let mut live = daemon.live.write().await;
    let plan = plan(&live.config, &live.active, &new);
    for what in &plan.needs_restart {
        warn!(change = %what, "configuration change not applied: it needs a restart");
    }
    let mut reply = ReloadReply {
        needs_restart: plan.needs_restart.clone(),
        warnings,
        ..ReloadReply::default()
    };
    let mut applied = true;
    if let Some((shards, update_threads)) = plan.threading {
        let p = daemon.pipeline.clone();
        match crate::state::off_runtime(move || p.reconfigure(shards, update_threads)).await {
            Some(r) => {
                info!(
                    shards = r.to.0,
                    update_threads = r.to.1,
                    prefixes = r.prefixes,
                    paths = r.paths,
                    paused_ms = r.paused.as_millis() as u64,
                    "threads changed with sessions kept up"
                );
                reply.changes.push(format!(
                    "re-sharded from {} shard(s) and {} update thread(s) to {} and {}, sessions kept up ({} ms pause)",
                    r.from.0,
                    r.from.1,
                    r.to.0,
                    r.to.1,
                    r.paused.as_millis()
                ));
            }
            None => {
                error!("re-sharding failed");
                reply.errors.push("re-sharding failed".into());
                applied = false;
            }
        }
    }
    for change in &plan.neighbors {
        if let NeighborChange::Settings(i, s) = change {
            settings_changed(&mut live, *i, s, &mut reply).await;
            continue;
        }
        let (gone, subcode, start, why) = match change {
            NeighborChange::Removed(i) => (Some(*i), cease::PEER_DECONFIGURED, None, None),
            NeighborChange::Changed(i, s, why) => (
                Some(*i),
                cease::OTHER_CONFIGURATION_CHANGE,
                Some(s),
                Some(why),
            ),
            NeighborChange::Added(s) => (None, 0, Some(s), None),
            NeighborChange::Settings(..) => continue,
        };
        if let Some(i) = gone {
            if let Some(s) = live.sessions.peers.get(i).map(|h| h.settings.name()) {
                info!(neighbor = %s, changed = start.is_some(), "neighbor no longer configured as it runs: session ended");
                reply.changes.push(match why {
                    Some(why) => format!("neighbor {s}: session restarted (Cease / Other Configuration Change): {} changed", why.join(", ")),
                    None => format!("neighbor {s}: removed (Cease / Peer De-configured)"),
                });
            }
            live.sessions.remove(i, subcode, NEIGHBOR_GRACE).await;
            live.active.retain(|(j, _)| *j != i);
        }
        if let Some(s) = start {
            match live.sessions.add_after(s.clone(), gone).await {
                Ok(i) => {
                    info!(neighbor = %s.name(), "neighbor configured: session started");
                    if gone.is_none() {
                        reply.changes.push(format!("neighbor {}: added", s.address));
                    }
                    live.peers.push(s.clone());
                    live.active.push((i, s.clone()));
                    // Before its routes can come: whether the FIB installs them.
                    daemon.sync_no_install(&new, &live.active);
                }
                Err(e) => {
                    error!(neighbor = %s.name(), "cannot start the session: {e}");
                    reply.errors.push(format!(
                        "neighbor {}: cannot start the session: {e}",
                        s.address
                    ));
                    applied = false;
                }
            }
        }
    }
    live.sort_active();
    if applied {
        // `disable bgp neighbor` lasts until the next reload: the file says again.
        for (i, st) in &live.active {
            let Some(h) = live.sessions.peers.get(*i) else {
                continue;
            };
            if h.status().disabled && !st.disabled {
                let _ = h.clear(Clear::Enable).await;
                reply.changes.push(format!(
                    "neighbor {}: enabled again (not disabled in the file)",
                    st.address
                ));
            }
        }
        let networks_changed = live.config.originate != new.originate;
        if live.config.memory_limit != new.memory_limit {
            daemon.pipeline.memory().set_limit(new.memory_limit);
            let limit = new
                .memory_limit
                .map_or("none".to_string(), |l| format!("{} MiB", l >> 20));
            info!(%limit, "memory-limit changed");
            reply.changes.push(format!("memory-limit: {limit}"));
        }
        if live.config.rpki != new.rpki {
            daemon.set_rpki(new.rpki.as_ref());
            reply.changes.push(match &new.rpki {
                Some(r) => format!(
                    "rpki: the RTR client started again ({} caches)",
                    r.caches.len()
                ),
                None => "rpki: the RTR client stopped (routes keep their last validation)".into(),
            });
        }
        live.config = applied_config(&live.config, new);
        daemon.sync_no_install(&live.config, &live.active);
        if networks_changed {
            let networks = live.config.originate.clone();
            reply.changes.push(format!(
                "originated networks: {} configured",
                networks.len()
            ));
            daemon.originate(&mut live, networks);
        }
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
    if applied && !reply.changes.is_empty() {
        live.reconfigured = Some(std::time::SystemTime::now());
    }
    reply.outcome = match (applied, reply.changes.is_empty()) {
        (false, _) => ReloadOutcome::Rejected,
        (true, true) => ReloadOutcome::Unchanged,
        (true, false) => ReloadOutcome::Applied,
    };
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    fn config(shards: u32, threads: u32, extra: &str, neighbors: &[&str]) -> Config {
        config_with(shards, threads, extra, "", neighbors)
    }

    fn config_with(
        shards: u32,
        threads: u32,
        extra: &str,
        group: &str,
        neighbors: &[&str],
    ) -> Config {
        let mut text = format!(
            "[bgp]\nlocal-as = 65000\nrouter-id = \"192.0.2.1\"\n\
             [bgp.rib-sharding]\nnumber-of-shards = {shards}\n\
             [bgp.update-threading]\nnumber-of-threads = {threads}\n{extra}\n\
             [[bgp.group]]\nname = \"peers\"\ntype = \"external\"\npeer-as = 65001\n\
             import = [\"accept\"]\nexport = [\"accept\"]\n{group}"
        );
        for n in neighbors {
            text += &format!("[[bgp.group.neighbor]]\naddress = \"{n}\"\n");
        }
        parse(&text, Path::new("test.toml")).unwrap()
    }

    fn active(c: &Config) -> Vec<(usize, PeerSettings)> {
        c.peers.iter().map(|n| settings(c, n)).enumerate().collect()
    }

    #[test]
    fn threads_and_neighbors_are_applied_live_and_the_rest_named() {
        let a = config(2, 2, "", &["198.51.100.2", "198.51.100.3"]);
        assert_eq!(plan(&a, &active(&a), &a), Plan::default());
        let b = config(4, 3, "", &["198.51.100.2", "198.51.100.3"]);
        assert_eq!(
            plan(&a, &active(&a), &b),
            Plan {
                threading: Some((4, 3)),
                ..Plan::default()
            }
        );
        // No update threads: one shard, whatever number-of-shards says.
        let single = config(0, 0, "", &["198.51.100.2", "198.51.100.3"]);
        let one = config(1, 0, "", &["198.51.100.2", "198.51.100.3"]);
        assert_eq!(plan(&a, &active(&a), &single).threading, Some((1, 0)));
        assert_eq!(plan(&single, &active(&single), &one), Plan::default());
        // .2 removed, .3 moved in the file but the same, .4 added; and a restart-only change.
        let c = config(
            2,
            2,
            "[bgp.path-selection]\nalways-compare-med = true\n",
            &["198.51.100.4", "198.51.100.3"],
        );
        let p = plan(&a, &active(&a), &c);
        assert_eq!(p.needs_restart, ["bgp.path-selection / bgp.multipath"]);
        assert_eq!(p.neighbors.len(), 2);
        assert_eq!(p.neighbors[0], NeighborChange::Removed(0));
        assert!(
            matches!(&p.neighbors[1], NeighborChange::Added(s) if s.address.to_string() == "198.51.100.4")
        );
        // A new hold time for the group: both sessions keep running (the next OPEN
        // proposes it); a description too.
        let d = config(2, 2, "", &["198.51.100.2", "198.51.100.3"]);
        let hold = config_with(
            2,
            2,
            "",
            "hold-time = 30\ndescription = \"transit\"\n",
            &["198.51.100.2", "198.51.100.3"],
        );
        let p = plan(&d, &active(&d), &hold);
        assert_eq!(p.neighbors.len(), 2);
        assert!(p
            .neighbors
            .iter()
            .all(|n| matches!(n, NeighborChange::Settings(_, s) if s.hold_time == 30)));
        // A family (a capability in the OPEN): both restart, saying why.
        let families = config_with(
            2,
            2,
            "",
            "family = [\"inet-unicast\"]\n",
            &["198.51.100.2", "198.51.100.3"],
        );
        let p = plan(&d, &active(&d), &families);
        assert!(
            p.neighbors
                .iter()
                .all(|n| matches!(n, NeighborChange::Changed(_, _, why)
                if why == &["families (capabilities in the OPEN)"])),
            "{:?}",
            p.neighbors
        );
        // What waits for a restart stays as it runs.
        let kept = applied_config(&a, c);
        assert_eq!(kept.path_selection, a.path_selection);
        assert_eq!(kept.peers.len(), 2);
    }
}
