//! The API's replies laid out as Junos prints them (aligned columns, its words), for people;
//! `--json` gives the replies themselves, for programs.

use ribshard_mgmt::api::*;
use std::fmt::Write;

/// A duration as Junos prints uptimes: `m:ss`, `h:mm:ss`, `Nd h:mm:ss`.
pub fn uptime(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h}:{m:02}:{sec:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{sec:02}")
    } else {
        format!("{m}:{sec:02}")
    }
}

/// UNIX seconds as a UTC date and time.
pub fn date(unix: f64) -> String {
    let (year, month, day, h, m, s) = civil(unix.max(0.0) as i64);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02} UTC")
}

pub use ribshard_mgmt::time::civil;

fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

/// Junos' short names of states in `show bgp summary`.
fn short_state(s: &str) -> &str {
    match s {
        "Established" => "Establ",
        other => other,
    }
}

fn counts(f: &FamilyPrefixes) -> String {
    let adv = f.advertised.map_or_else(|| "-".into(), |a| a.to_string());
    format!("{}/{}/{}/{}", f.active, f.received, f.accepted, adv)
}

fn threading(t: &Threading) -> String {
    match t.mode.as_str() {
        "rib-sharding" => format!(
            "RIB sharding ({} shards) + update threading ({} threads)",
            t.shards, t.update_threads
        ),
        "update-threading" => format!(
            "update threading ({} threads), one RIB thread",
            t.update_threads
        ),
        _ => "none (the single-threaded mode: one thread routes and sends)".into(),
    }
}

/// `show bgp summary`.
pub fn summary(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Threading mode: {}", threading(&s.threading));
    if let Some(d) = &s.update_delay {
        let _ = writeln!(
            o,
            "Advertising deferred (update-delay, {}) for {:.0} s: waiting for End-of-RIB from {} neighbor(s), {} not up (waited for until {} s), {} loaded; advertising starts at {} s at the latest",
            if d.reason == "all-neighbors-down" {
                "every neighbor went down"
            } else {
                "since start"
            },
            d.elapsed_seconds,
            d.neighbors_loading,
            d.neighbors_not_up,
            d.establish_wait_seconds,
            d.neighbors_loaded,
            d.max_delay_seconds
        );
    }
    let _ = writeln!(
        o,
        "Groups: {} Peers: {} Down peers: {}",
        s.groups, s.peers, s.down_peers
    );
    let _ = writeln!(o, "{:<14} {:>10} {:>10}", "Table", "Tot Paths", "Act Paths");
    for t in &s.tables {
        let _ = writeln!(
            o,
            "{:<14} {:>10} {:>10}",
            t.table, t.total_paths, t.active_paths
        );
    }
    let _ = writeln!(
        o,
        "{:<24} {:>10} {:>9} {:>9} {:>6} {:>6} {:>11} State|#Active/Received/Accepted/Advertised",
        "Peer", "AS", "InPkt", "OutPkt", "OutQ", "Flaps", "Last Up/Dwn"
    );
    for n in &s.neighbors {
        let established = n.state == "Established";
        let _ = write!(
            o,
            "{:<24} {:>10} {:>9} {:>9} {:>6} {:>6} {:>11} {}",
            n.address,
            n.peer_as,
            n.messages_received,
            n.messages_sent,
            n.output_queue,
            n.flaps,
            uptime(n.state_seconds),
            short_state(&n.state)
        );
        if established {
            o.push('\n');
            for f in &n.families {
                let _ = writeln!(o, "  {}: {}", f.table, counts(f));
            }
        } else {
            o.push('\n');
        }
    }
    o
}

fn notification(n: &NotificationInfo) -> String {
    let mut s = n.code_name.clone();
    match &n.subcode_name {
        Some(sub) => {
            let _ = write!(s, " / {sub}");
        }
        None => {
            let _ = write!(s, " / subcode {}", n.subcode);
        }
    }
    if let Some(m) = &n.message {
        let _ = write!(s, ": \"{m}\"");
    }
    let _ = write!(s, " ({})", date(n.at));
    s
}

fn endpoint(addr: &Option<String>, port: Option<u16>) -> String {
    match (addr, port) {
        (Some(a), Some(p)) => format!("{a}+{p}"),
        _ => "-".into(),
    }
}

/// `show bgp neighbor`.
pub fn neighbors(v: &[Neighbor]) -> String {
    let mut o = String::new();
    for n in v {
        let _ = writeln!(
            o,
            "Peer: {}+{} AS {}   Local: {} AS {}",
            n.address,
            n.port,
            n.peer_as,
            endpoint(&n.local_address, n.local_port),
            n.local_as
        );
        if !n.description.is_empty() {
            let _ = writeln!(o, "  Description: {}", n.description);
        }
        let _ = writeln!(o, "  Group: {}", n.group);
        let _ = writeln!(
            o,
            "  Type: {:<10} State: {} for {}{}",
            if n.peer_type == "internal" {
                "Internal"
            } else {
                "External"
            },
            n.state,
            uptime(n.state_seconds),
            if n.held_down {
                " (held down by its prefix limit until cleared)"
            } else if n.disabled {
                " (disabled by an operator)"
            } else {
                ""
            }
        );
        if let Some(e) = &n.last_error {
            let _ = writeln!(o, "  Last error: {} ({})", e.message, date(e.at));
        }
        if let Some(x) = &n.last_notification_sent {
            let _ = writeln!(o, "  Last NOTIFICATION sent: {}", notification(x));
        }
        if let Some(x) = &n.last_notification_received {
            let _ = writeln!(o, "  Last NOTIFICATION received: {}", notification(x));
        }
        let _ = writeln!(
            o,
            "  Remote: {}   Peer ID: {}   Local ID: {}",
            endpoint(&n.remote_address, n.remote_port),
            n.router_id.as_deref().unwrap_or("-"),
            n.local_router_id
        );
        let _ = writeln!(
            o,
            "  Import: [ {} ]   Export: [ {} ]",
            n.import.join(" "),
            n.export.join(" ")
        );
        for l in &n.prefix_limits {
            let _ = writeln!(
                o,
                "  Prefix limit {}: maximum {}, {} received (before import policy){}",
                l.table,
                l.maximum,
                l.received,
                match (l.teardown, l.idle_timeout) {
                    (false, _) => ", over it: logged, routes kept".to_string(),
                    (true, None) => ", over it: teardown, held down until cleared".to_string(),
                    (true, Some(t)) => format!(", over it: teardown, up again after {t} s"),
                }
            );
        }
        let t = &n.timers;
        let _ = writeln!(
            o,
            "  Holdtime: {} Active holdtime: {} Keepalive interval: {} Connect retry: {} Send hold time: {}",
            t.hold_time_configured,
            t.hold_time.map_or_else(|| "-".into(), |h| h.to_string()),
            t.keepalive.map_or_else(|| "-".into(), |h| h.to_string()),
            t.connect_retry,
            t.send_hold_time
        );
        let _ = writeln!(
            o,
            "  Number of flaps: {}   Established {} time(s)",
            n.flaps, n.established_transitions
        );
        if let Some(c) = &n.capabilities {
            let _ = writeln!(o, "  NLRI for this session: {}", c.tables.join(" "));
            let mut caps = Vec::new();
            if c.four_octet_as {
                caps.push("4-octet AS".to_string());
            }
            if c.route_refresh {
                caps.push("route refresh".into());
            }
            if c.enhanced_route_refresh {
                caps.push("enhanced route refresh".into());
            }
            if c.extended_message {
                caps.push("extended message".into());
            }
            if !c.add_path_receive.is_empty() {
                caps.push(format!("add-path receive {}", c.add_path_receive.join(" ")));
            }
            if !c.add_path_send.is_empty() {
                caps.push(format!("add-path send {}", c.add_path_send.join(" ")));
            }
            if let Some(g) = &c.graceful_restart {
                let kept = if g.tables.is_empty() {
                    "no routes kept".to_string()
                } else {
                    format!("keeps {}", g.tables.join(" "))
                };
                caps.push(format!(
                    "graceful restart (restart time {} s, {kept}{})",
                    g.restart_time,
                    if g.notification { ", N bit" } else { "" }
                ));
                for l in &g.long_lived {
                    caps.push(format!(
                        "long-lived graceful restart ({} kept {} s more)",
                        l.table, l.stale_time
                    ));
                }
            }
            if let Some(r) = &c.role {
                caps.push(format!("role {r}"));
            }
            let _ = writeln!(o, "  Capabilities: {}", caps.join(", "));
        }
        for k in &n.stale {
            let _ = writeln!(
                o,
                "  Stale routes kept: {} for {:.0} s more, {}",
                k.table,
                k.seconds_left,
                if k.long_lived {
                    "long-lived (LLGR_STALE, least preferred)"
                } else {
                    "within its restart time"
                }
            );
        }
        if let Some(g) = &n.update_group {
            let _ = writeln!(
                o,
                "  Update group: {} (index {}), update thread {}",
                g.name, g.id, g.update_thread
            );
        }
        for f in &n.families {
            let _ = writeln!(o, "  Table {}", f.table);
            let _ = writeln!(o, "    Active prefixes:              {}", f.active);
            let _ = writeln!(o, "    Received prefixes:            {}", f.received);
            let _ = writeln!(o, "    Accepted prefixes:            {}", f.accepted);
            let _ = writeln!(
                o,
                "    Advertised prefixes:          {}",
                f.advertised
                    .map_or_else(|| "(counting)".into(), |a| a.to_string())
            );
        }
        let c = &n.counters;
        let _ = writeln!(
            o,
            "  Input messages:  Total {:<10} Updates {:<10} Refreshes {:<6} Octets {}",
            c.received.total(),
            c.received.update,
            c.received.route_refresh,
            c.octets_received
        );
        let _ = writeln!(
            o,
            "  Output messages: Total {:<10} Updates {:<10} Refreshes {:<6} Octets {}",
            c.sent.total(),
            c.sent.update,
            c.sent.route_refresh,
            c.octets_sent
        );
        let _ = writeln!(
            o,
            "  Output Queue: {} messages, {} octets",
            n.statistics.messages_queued, n.statistics.octets_queued
        );
        o.push('\n');
    }
    o
}

/// `show bgp neighbor ADDRESS statistics`.
pub fn neighbor_statistics(v: &[Neighbor]) -> String {
    let mut o = String::new();
    for n in v {
        let s = &n.statistics;
        let _ = writeln!(o, "Peer: {}+{} AS {}", n.address, n.port, n.peer_as);
        if let Some(g) = &n.update_group {
            let _ = writeln!(o, "  Update thread: {}", g.update_thread);
        }
        let _ = writeln!(
            o,
            "  Write Queue Blocks:            {}",
            s.write_queue_blocks
        );
        let _ = writeln!(
            o,
            "  Peer designated a slow writer: {} time(s){}",
            s.slow_writer,
            s.last_slow_writer_at
                .map_or_else(String::new, |t| format!(", last at {}", date(t)))
        );
        let _ = writeln!(o, "  Catch-ups after a slow write:  {}", s.catch_ups);
        let _ = writeln!(
            o,
            "  Queued: {} messages, {} octets",
            s.messages_queued, s.octets_queued
        );
        let _ = writeln!(
            o,
            "  High-water mark: {} octets (catches up below {})",
            s.high_water, s.low_water
        );
        o.push('\n');
    }
    o
}

/// `show bgp group`.
pub fn groups(v: &[Group]) -> String {
    let mut o = String::new();
    let (mut peers, mut external, mut internal, mut down) = (0, 0, 0, 0);
    for g in v {
        let internal_group = g.group_type == "internal";
        let _ = writeln!(
            o,
            "Group Type: {:<13} AS: {:<10} Local AS: {}",
            if internal_group {
                "Internal"
            } else {
                "External"
            },
            g.peer_as
                .map_or_else(|| "(various)".into(), |a| a.to_string()),
            g.local_as
        );
        let _ = writeln!(o, "Name: {}", g.name);
        for u in &g.update_groups {
            let _ = writeln!(
                o,
                "Update thread: {}   (update group {}: {} member(s), {} UPDATEs built, {} octets built, {} octets sent)",
                u.update_thread,
                u.id,
                u.members.len(),
                u.updates_built,
                u.octets_built,
                u.octets_sent
            );
        }
        if !g.options.is_empty() {
            let _ = writeln!(o, "Options: <{}>", g.options.join(" "));
        }
        let _ = writeln!(
            o,
            "Total peers: {:<9} Established: {}",
            g.total_peers, g.established
        );
        for m in &g.members {
            let _ = writeln!(o, "{}+{} {}", m.address, m.port, m.state);
        }
        for t in &g.tables {
            let _ = writeln!(o, "{}: {}", t.table, counts(t));
        }
        o.push('\n');
        peers += g.total_peers;
        down += g.total_peers - g.established;
        if internal_group {
            internal += g.total_peers;
        } else {
            external += g.total_peers;
        }
    }
    let _ = writeln!(
        o,
        "Groups: {}  Peers: {}  External: {}  Internal: {}  Down peers: {}",
        v.len(),
        peers,
        external,
        internal,
        down
    );
    o
}

/// `show route summary`.
pub fn route_summary(s: &RouteSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Autonomous system number: {}", s.local_as);
    let _ = writeln!(o, "Router ID: {}\n", s.router_id);
    let _ = writeln!(o, "Highwater Mark (All time)");
    let hw = &s.high_water;
    let _ = writeln!(
        o,
        "    RIB unique destination routes: {} at {}",
        hw.destinations.value,
        date(hw.destinations.at)
    );
    let _ = writeln!(
        o,
        "    RIB routes                   : {} at {}\n",
        hw.routes.value,
        date(hw.routes.at)
    );
    for t in &s.tables {
        let _ = writeln!(
            o,
            "{}: {} destinations, {} routes ({} active, 0 holddown, {} hidden), RIB:FIB {:.2}",
            t.table,
            t.destinations,
            t.routes,
            t.active,
            t.hidden + t.unresolved,
            t.rib_fib_ratio
        );
        if t.unresolved > 0 {
            let _ = writeln!(
                o,
                "    of them hidden: {} by import policy or loops, {} with next hops unresolved",
                t.hidden, t.unresolved
            );
        }
        for sh in &t.shards {
            let _ = writeln!(
                o,
                "    {}::{}: {} destinations, {} routes ({} active, {} hidden)",
                sh.thread,
                t.table,
                sh.destinations,
                sh.routes,
                sh.active,
                sh.hidden + sh.unresolved
            );
        }
        o.push('\n');
    }
    o
}

/// One change of `monitor route`: when, what, and the best path now (or before, when
/// withdrawn).
pub fn route_change(c: &RouteChange) -> String {
    let secs = c.time.max(0.0);
    let (_, _, _, h, m, s) = civil(secs as i64);
    let ms = ((secs.fract()) * 1000.0) as u32;
    let mut o = format!(
        "{h:02}:{m:02}:{s:02}.{ms:03} {} {} {}",
        c.table, c.prefix, c.change
    );
    let shown = match (&c.best, &c.old) {
        (Some(b), _) => Some(b),
        (None, Some(old)) => {
            o.push_str(" (was");
            Some(old)
        }
        (None, None) => None,
    };
    if let Some(p) = shown {
        let _ = write!(
            o,
            " from {} next hop {} AS path {}{}{}",
            p.from,
            p.next_hop,
            p.as_path,
            if p.as_path.is_empty() { "" } else { " " },
            match p.origin.as_str() {
                "IGP" => "I",
                "EGP" => "E",
                _ => "?",
            }
        );
        if c.best.is_none() {
            o.push(')');
        }
    }
    o.push('\n');
    o
}

/// `show log level`, `set log level`.
pub fn log_levels(l: &LogLevels) -> String {
    let mut o = format!("Log level: {}\n", l.daemon);
    for n in &l.neighbors {
        let _ = writeln!(o, "  neighbor {}: {}", n.neighbor, n.level);
    }
    o
}

/// `show route ... count`: what the request selects, counted.
pub fn route_count(c: &RouteCount) -> String {
    let mut o = String::new();
    for t in &c.tables {
        let _ = writeln!(
            o,
            "{}: {} destinations, {} routes ({} active)",
            t.table, t.destinations, t.routes, t.active
        );
    }
    let _ = writeln!(
        o,
        "Count: {} lines",
        c.tables.iter().map(|t| t.routes).sum::<u64>()
    );
    o
}

/// The lines `show route` prints before a table's routes.
pub fn table_header(table: &str) -> String {
    format!("\n{table}:\n+ = Active Route, * = Both\n\n")
}

/// `show thread cpu`.
pub fn threads(t: &Threads) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:<8} {:>8} {:>10} {:>6} {:>6} {:>6} {:>12} {:>11}",
        "Thread", "Kind", "TID", "CPU (s)", "1 s", "10 s", "60 s", "Items", "Longest"
    );
    for x in &t.threads {
        let _ = writeln!(
            o,
            "{:<16} {:<8} {:>8} {:>10.2} {:>5.0}% {:>5.0}% {:>5.0}% {:>12} {:>11}",
            x.name,
            x.kind,
            x.tid,
            x.cpu_seconds,
            x.share_1s * 100.0,
            x.share_10s * 100.0,
            x.share_60s * 100.0,
            x.items,
            seconds(x.longest_item_seconds)
        );
    }
    o
}

/// `show work-queues`.
pub fn work_queues(w: &WorkQueues) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<18} {:<13} {:>6} {:>9} {:>11} {:>12} {:>12}",
        "Queue", "Thread", "Depth", "Capacity", "High-water", "Items", "Blocked"
    );
    for q in &w.queues {
        let _ = writeln!(
            o,
            "{:<18} {:<13} {:>6} {:>9} {:>11} {:>12} {:>12}",
            q.kind,
            q.thread,
            q.depth,
            q.capacity,
            q.high_water,
            q.items,
            seconds(q.blocked_seconds)
        );
    }
    let wq = &w.write_queues;
    let _ = writeln!(
        o,
        "\nWrite queues: {} sessions, {} messages / {} octets queued, largest {} octets{}; high-water mark {} octets; {} slow writer(s)",
        wq.sessions,
        wq.messages_queued,
        wq.octets_queued,
        wq.largest_octets,
        wq.largest_neighbor
            .as_ref()
            .map_or_else(String::new, |n| format!(" ({n})")),
        wq.high_water,
        wq.slow_writers
    );
    o
}

fn hist_line(h: &Histogram) -> String {
    if h.count == 0 {
        return "none yet".into();
    }
    let q = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("<= {}", seconds(v)));
    format!(
        "{} batches, p50 {}, p90 {}, p99 {}, mean {}",
        h.count,
        q(h.p50_seconds),
        q(h.p90_seconds),
        q(h.p99_seconds),
        seconds(h.sum_seconds / h.count as f64)
    )
}

/// `show bgp convergence`.
pub fn convergence(c: &Convergence) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Receipt to best path decided: {}", hist_line(&c.decided));
    let _ = writeln!(o, "Receipt to UPDATE written, per update group:");
    for g in &c.written {
        let _ = writeln!(
            o,
            "  {:<20} {}",
            format!("{} ({})", g.group, g.id),
            hist_line(&g.histogram)
        );
    }
    let _ = writeln!(
        o,
        "\n{:<24} {:<24} {:>20} {:>18}",
        "Neighbor", "Established at", "End-of-RIB received", "Sent to all groups"
    );
    for n in &c.neighbors {
        let _ = writeln!(
            o,
            "{:<24} {:<24} {:>20} {:>18}",
            n.address,
            date(n.established_at),
            n.end_of_rib_received_seconds
                .map_or_else(|| "-".into(), seconds),
            n.all_groups_seconds
                .map_or_else(|| "-".into(), |s| format!("+{}", seconds(s)))
        );
    }
    o
}

/// `clear`, `disable` and `enable bgp neighbor` (`mode` as the request gave it).
pub fn clear(r: &ClearReply, mode: Option<&str>) -> String {
    let done = match mode {
        Some("disable") => "disabled",
        Some("enable") => "enabled",
        _ => "cleared",
    };
    let mut o = String::new();
    for n in &r.neighbors {
        match &n.error {
            None => {
                let _ = writeln!(o, "{}: {done}", n.address);
            }
            Some(e) => {
                let _ = writeln!(o, "{}: not {done}: {e}", n.address);
            }
        }
    }
    o
}

/// `show bmp`: each monitoring station, as `show validation session` lays out caches.
pub fn bmp(stations: &[ribshard_mgmt::api::BmpStation]) -> String {
    if stations.is_empty() {
        return "No BMP stations configured ([bmp])\n".into();
    }
    let mut o = format!(
        "{:<20} {:<24} {:<11} {:>5} {:>14} {:>10}  {}\n",
        "Station", "Address", "State", "Conns", "Octets sent", "Waiting", "RIBs"
    );
    for s in stations {
        let _ = writeln!(
            o,
            "{:<20} {:<24} {:<11} {:>5} {:>14} {:>10}  {}",
            s.name,
            s.address,
            s.state,
            s.connections,
            s.written,
            s.waiting,
            s.ribs.join(" ")
        );
        if let Some(e) = &s.last_error {
            let _ = writeln!(o, "  last error: {e}");
        }
    }
    o
}

pub fn restart(r: &ribshard_mgmt::api::RestartReply) -> String {
    let mut o = if r.graceful {
        "restarting gracefully (RFC 4724): kernel routes kept\n".to_string()
    } else {
        "restarting: Cease / Administrative Shutdown to every neighbor\n".to_string()
    };
    for n in &r.kept_by {
        let _ = writeln!(o, "  {n}: keeps our routes meanwhile");
    }
    for n in &r.lost_by {
        let why = if r.graceful {
            "drops our routes until its session is back (no graceful restart in this session)"
        } else {
            "drops our routes until its session is back"
        };
        let _ = writeln!(o, "  {n}: {why}");
    }
    o
}

pub fn reload(r: &ReloadReply) -> String {
    let mut o = format!("configuration {}\n", r.outcome);
    for c in &r.changes {
        let _ = writeln!(o, "  {c}");
    }
    if r.outcome == ribshard_mgmt::api::ReloadOutcome::Planned
        && r.changes.is_empty()
        && r.needs_restart.is_empty()
    {
        o.push_str("  nothing would change\n");
    }
    for e in &r.errors {
        let _ = writeln!(o, "{e}");
    }
    for n in &r.needs_restart {
        let _ = writeln!(o, "  not applied until a restart: {n}");
    }
    for w in &r.warnings {
        let _ = writeln!(o, "{w}");
    }
    o
}

fn table_name(t: u32) -> String {
    match t {
        254 => "254 (main)".into(),
        255 => "255 (local)".into(),
        253 => "253 (default)".into(),
        t => t.to_string(),
    }
}

/// `show fib summary`.
pub fn fib_summary(f: &FibSummary) -> String {
    let mut o = String::new();
    let r = &f.resolution;
    let res = if r.enabled {
        format!(
            "Next-hop resolution: through tables {}{}; {} kernel routes of other protocols known\n",
            r.tables
                .iter()
                .map(|t| table_name(*t))
                .collect::<Vec<_>>()
                .join(", "),
            if r.resolve_via_default {
                ", a default route counts"
            } else {
                ", a default route does not count"
            },
            r.kernel_routes
        )
    } else {
        "Next-hop resolution: off (every next hop reachable at IGP cost 0)\n".into()
    };
    if !f.enabled {
        o.push_str("FIB: off (no [fib] in the configuration): nothing is written to the kernel\n");
        o.push_str(&res);
        return o;
    }
    let _ = writeln!(
        o,
        "FIB: table {}, protocol {}, metric {}, {}{}",
        table_name(f.table),
        f.protocol,
        f.metric,
        if f.nexthop_objects {
            "through nexthop objects"
        } else {
            "next hops in each route"
        },
        if f.holding {
            " (waiting for the start-up deferral to end)"
        } else {
            ""
        }
    );
    let rt = &f.routes;
    let _ = writeln!(
        o,
        "Routes: {} wanted, {} installed, {} pending, {} failed, {} unresolved, {} conflicts",
        rt.wanted, rt.installed, rt.pending, rt.failed, rt.unresolved, rt.conflicts
    );
    let _ = writeln!(
        o,
        "Nexthop objects: {} leaves, {} groups",
        f.leaves, f.groups
    );
    let n = &f.netlink;
    let _ = writeln!(
        o,
        "Netlink: {} messages in {} batches, {} errors; routes written {}, deleted {}; objects written {}, deleted {}",
        n.messages, n.batches, n.errors, n.route_writes, n.route_deletes, n.object_writes, n.object_deletes
    );
    let _ = writeln!(
        o,
        "Kept at start: {}; drift repaired: {}; last written: {}",
        f.kept_at_start,
        f.drift_repaired,
        f.last_flush_at.map_or_else(|| "never".into(), date)
    );
    o.push_str(&res);
    o
}

/// `show route forwarding-table`: our routes as the kernel holds them.
pub fn forwarding_table(routes: &[ForwardingRoute]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<43} {:<8} {:<40} {:<12} Object",
        "Destination", "Type", "Next hop", "Netif"
    );
    for r in routes {
        let object = r.object.map_or_else(String::new, |id| format!("nhid {id}"));
        let hops: Vec<(String, String)> = if r.next_hops.is_empty() {
            vec![(String::new(), String::new())]
        } else {
            r.next_hops
                .iter()
                .map(|h| (h.gateway.clone().unwrap_or_default(), h.interface.clone()))
                .collect()
        };
        for (i, (gw, dev)) in hops.iter().enumerate() {
            if i == 0 {
                let _ = writeln!(
                    o,
                    "{:<43} {:<8} {:<40} {:<12} {}",
                    r.destination, r.kind, gw, dev, object
                );
            } else {
                let _ = writeln!(o, "{:<43} {:<8} {:<40} {}", "", "", gw, dev);
            }
        }
    }
    o
}

/// `fib verify`: every difference, then a line that says whether there were any.
pub fn fib_verify(v: &FibVerify) -> String {
    let mut o = String::new();
    for d in &v.differences {
        let _ = writeln!(
            o,
            "{:<43} {:<9} wanted: {:<40} kernel: {}",
            d.prefix,
            d.kind,
            d.want.as_deref().unwrap_or("-"),
            d.kernel.as_deref().unwrap_or("-")
        );
    }
    let _ = writeln!(
        o,
        "{} differences between the Loc-RIB ({} routes to install) and the kernel ({} routes of ours)",
        v.differences.len(),
        v.loc_rib_routes,
        v.kernel_routes
    );
    o
}

/// `mrt injections` (and the answer to `mrt inject` / `mrt remove`).
pub fn injected(v: &[Injected]) -> String {
    let mut o = String::new();
    if v.is_empty() {
        o.push_str("No MRT file injected\n");
    }
    for i in v {
        let _ = writeln!(
            o,
            "{}: {} routes from {} peers{}",
            i.file,
            i.routes,
            i.peers.len(),
            if i.skipped > 0 {
                format!(
                    ", {} entries skipped (attributes that do not parse)",
                    i.skipped
                )
            } else {
                String::new()
            }
        );
        for p in &i.peers {
            let _ = writeln!(
                o,
                "  {:<40} AS{:<10} peer index {}",
                p.address, p.peer_as, p.peer_index
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_in_junos() {
        assert_eq!(uptime(62.0), "1:02");
        assert_eq!(uptime(3723.0), "1:02:03");
        assert_eq!(uptime(90061.0), "1d 1:01:01");
        assert_eq!(date(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(date(1_795_467_600.0), "2026-11-23 21:00:00 UTC");
    }

    /// The layout of `show bgp summary`, to the column.
    #[test]
    fn summary_layout() {
        let s = Summary {
            local_as: 65000,
            router_id: "192.0.2.1".into(),
            threading: Threading {
                mode: "rib-sharding".into(),
                shards: 2,
                update_threads: 2,
            },
            groups: 1,
            peers: 2,
            down_peers: 1,
            tables: vec![TablePaths {
                table: "inet.0".into(),
                total_paths: 641942,
                active_paths: 323486,
            }],
            neighbors: vec![
                NeighborSummary {
                    address: "127.0.0.20".into(),
                    port: 179,
                    peer_as: 2497,
                    group: "up".into(),
                    state: "Established".into(),
                    state_seconds: 62.0,
                    messages_received: 40000,
                    messages_sent: 3,
                    output_queue: 0,
                    flaps: 0,
                    families: vec![FamilyPrefixes {
                        table: "inet.0".into(),
                        received: 321000,
                        accepted: 321000,
                        active: 160000,
                        advertised: Some(2),
                    }],
                },
                NeighborSummary {
                    address: "127.0.0.21".into(),
                    port: 179,
                    peer_as: 4777,
                    group: "up".into(),
                    state: "Active".into(),
                    state_seconds: 5.0,
                    ..NeighborSummary::default()
                },
            ],
            update_delay: None,
            ..Summary::default()
        };
        let mut deferred = s.clone();
        deferred.update_delay = Some(ribshard_mgmt::api::UpdateDelayStatus {
            reason: "start".into(),
            elapsed_seconds: 3.2,
            max_delay_seconds: 120,
            establish_wait_seconds: 5,
            neighbors_loading: 1,
            neighbors_not_up: 1,
            neighbors_loaded: 0,
        });
        assert!(summary(&deferred).contains(
            "\nAdvertising deferred (update-delay, since start) for 3 s: waiting for End-of-RIB from 1 neighbor(s), 1 not up (waited for until 5 s), 0 loaded; advertising starts at 120 s at the latest\n"
        ));
        let want = "\
Threading mode: RIB sharding (2 shards) + update threading (2 threads)
Groups: 1 Peers: 2 Down peers: 1
Table           Tot Paths  Act Paths
inet.0             641942     323486
Peer                             AS     InPkt    OutPkt   OutQ  Flaps Last Up/Dwn State|#Active/Received/Accepted/Advertised
127.0.0.20                     2497     40000         3      0      0        1:02 Establ
  inet.0: 160000/321000/321000/2
127.0.0.21                     4777         0         0      0      0        0:05 Active
";
        assert_eq!(summary(&s), want);
    }
}
