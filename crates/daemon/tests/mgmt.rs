//! The management API and the show / clear / configure commands against a running ribshard
//! with real BIRD 2 peers: what the commands say is checked against what the BIRDs sent and
//! hold; clears of each kind are seen at the BIRD; the read-only listener, the socket's mode,
//! `/metrics` under promtool; `show route` of the two real full tables streams in bounded
//! memory. Skips (saying so) where bird or the data is missing; `scripts/test` installs
//! what it needs.

mod common;

use common::*;
use ribshard_mgmt::api::{Group, Neighbor, Route, RouteSummary, Summary, Threads, WorkQueues};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A BIRD on `addr` in AS `asn`, peering with ribshard (AS65040, 127.0.0.40:`port_r`) and
/// announcing `routes` with AS 64999 prepended, the community (asn, 100) and MED 50.
fn bird(addr: &str, asn: u32, port: u16, port_r: u16, routes: &[&str]) -> String {
    let (v4, v6): (Vec<&str>, Vec<&str>) = routes.iter().partition(|r| !r.contains(':'));
    let statics =
        |v: &[&str]| -> String { v.iter().map(|r| format!("route {r} blackhole; ")).collect() };
    let last = addr.rsplit('.').next().unwrap();
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {s4} }}
protocol static s6 {{ ipv6; {s6} }}
filter attrs {{
  if proto != "s4" && proto != "s6" then reject;
  bgp_community.add(({asn}, 100));
  bgp_med = 50;
  bgp_path.prepend(64999);
  accept;
}}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export filter attrs; next hop address 198.51.100.{last}; }};
  ipv6 {{ import all; export filter attrs; next hop address 2001:db8::{last}; }};
}}
"#,
        s4 = statics(&v4),
        s6 = statics(&v6),
    )
}

fn start_bird(dir: &Path, name: &str, conf: &str) -> Bird {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    Bird::start(&d, conf)
}

/// `ribshard --socket SOCK ARGS...`: stdout, and whether it succeeded.
fn cli(sock: &Path, args: &[&str]) -> (String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .expect("run the ribshard client");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        text += &String::from_utf8_lossy(&out.stderr);
    }
    (text, out.status.success())
}

fn json<T: serde::de::DeserializeOwned>(sock: &Path, args: &[&str]) -> T {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let (text, ok) = cli(sock, &a);
    assert!(ok, "{args:?}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// The same, `None` while the daemon is not answering yet.
fn try_json<T: serde::de::DeserializeOwned>(sock: &Path, args: &[&str]) -> Option<T> {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let (text, ok) = cli(sock, &a);
    ok.then(|| serde_json::from_str(&text).ok()).flatten()
}

fn routes(sock: &Path, args: &[&str]) -> Vec<Route> {
    let mut a = vec!["--json", "show", "route"];
    a.extend_from_slice(args);
    let (text, ok) = cli(sock, &a);
    assert!(ok, "{text}");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One HTTP/1.1 request to a TCP listener: (status, body).
fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let status = r
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = r
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// BIRD's per-channel "Routes: N imported, M exported" of its session with ribshard.
fn bird_routes(b: &Bird) -> Vec<(u64, u64)> {
    b.cmd("show protocols all ribsh")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Routes:"))
        .map(|l| {
            let n: Vec<u64> = l
                .split(',')
                .filter_map(|p| p.split_whitespace().next()?.parse().ok())
                .collect();
            (
                n.first().copied().unwrap_or(0),
                n.get(1).copied().unwrap_or(0),
            )
        })
        .collect()
}

/// BIRD's "Import updates" and "Export updates" received, per channel.
fn bird_updates(b: &Bird) -> Vec<(u64, u64)> {
    let out = b.cmd("show protocols all ribsh");
    let first = |what: &str| -> Vec<u64> {
        out.lines()
            .filter_map(|l| l.trim().strip_prefix(what))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    };
    first("Import updates:")
        .into_iter()
        .zip(first("Export updates:"))
        .collect()
}

/// BIRD's protocol line for ribshard: state and the time it entered it.
fn bird_since(b: &Bird) -> String {
    let out = b.cmd("show protocols ribsh");
    out.lines()
        .find(|l| l.starts_with("ribsh"))
        .unwrap_or_default()
        .to_string()
}

/// Whether BIRD's session with ribshard is the one it was: still Established, since the same
/// moment. BIRD prints that moment by converting its monotonic clock to wall time at each
/// command, so two readings of one moment can differ by a millisecond; a reset session
/// comes back seconds later.
fn same_session(before: &str, after: &str) -> bool {
    let since = |l: &str| -> Option<f64> {
        let t = l.split_whitespace().find(|w| w.matches(':').count() == 2)?;
        let mut parts = t.split(':').map(|p| p.parse::<f64>().ok());
        Some(parts.next()?? * 3600.0 + parts.next()?? * 60.0 + parts.next()??)
    };
    after.contains("Established")
        && matches!((since(before), since(after)), (Some(a), Some(b)) if (a - b).abs() < 0.1)
}

fn families(n: &Neighbor) -> Vec<(String, u64, u64, u64, Option<u64>)> {
    n.families
        .iter()
        .map(|f| {
            (
                f.table.clone(),
                f.received,
                f.accepted,
                f.active,
                f.advertised,
            )
        })
        .collect()
}

fn fam(t: &str, r: u64, acc: u64, act: u64, adv: u64) -> (String, u64, u64, u64, Option<u64>) {
    (t.into(), r, acc, act, Some(adv))
}

#[test]
fn show_and_clear_commands_with_bird_peers() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("mgmt-show");
    let (port_r, port_a, port_b) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let api_tcp = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let metrics = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let (api_tcp, metrics) = (api_tcp.as_str(), metrics.as_str());
    let sock = socket(&dir);
    // A (upstream) sends four routes; B (downstream) sends two, one of them also from A
    // with a shorter path, and gets what A sent.
    let a = start_bird(
        &dir,
        "a",
        &bird(
            "127.0.0.41",
            65041,
            port_a,
            port_r,
            &[
                "203.0.113.0/24",
                "198.18.0.0/15",
                "198.18.1.0/24",
                "2001:db8:1::/48",
            ],
        ),
    );
    let b = start_bird(
        &dir,
        "b",
        &bird(
            "127.0.0.42",
            65042,
            port_b,
            port_r,
            &["192.0.2.0/24", "203.0.113.0/24"],
        )
        .replace("bgp_path.prepend(64999);", ""),
    );
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [bgp.rib-sharding]\nnumber-of-shards = 2\n[bgp.update-threading]\nnumber-of-threads = 2\n\
         [[bgp.group]]\nname = \"upstream\"\ntype = \"external\"\npeer-as = 65041\n\
         import = [\"accept\"]\nexport = [\"reject\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.41\"\nport = {port_a}\nlocal-address = \"127.0.0.40\"\n\
         multihop = true\npassive = true\n\
         [[bgp.group]]\nname = \"downstream\"\ntype = \"external\"\npeer-as = 65042\n\
         import = [\"accept\"]\nexport = [\"accept\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.42\"\nport = {port_b}\nlocal-address = \"127.0.0.40\"\n\
         multihop = true\npassive = true\n\
         [management]\nsocket = \"{}\"\nlisten = [\"{api_tcp}\"]\nmetrics = \"{metrics}\"\n",
        sock.display()
    );
    let (mut rs, _) = ribshard(&dir, &config);
    // B takes the IPv4 routes; the IPv6 one arrives but BIRD refuses its next hop (an
    // IPv4-mapped address: the session is IPv4 and has no IPv6 address of ours to give).
    let b_log = || std::fs::read_to_string(dir.join("b/bird.log")).unwrap_or_default();
    assert!(
        wait(30, || bird_routes(&b).first().is_some_and(|r| r.0 == 2)
            && b_log()
                .contains("Invalid route 2001:db8:1::/48 withdrawn")),
        "B: {:?}\n{}",
        bird_routes(&b),
        log_of(&dir)
    );
    // Settle: every count in, every group counted.
    assert!(wait(10, || {
        try_json::<Summary>(&sock, &["show", "bgp", "summary"]).is_some_and(|s| {
            s.neighbors
                .iter()
                .all(|n| n.families.iter().all(|f| f.advertised.is_some()))
                && s.tables.first().is_some_and(|t| t.total_paths == 5)
        })
    }));

    // Signals an operator may send by habit are logged, never fatal: every session stays.
    for sig in ["-USR1", "-USR2"] {
        let ok = Command::new("kill")
            .args([sig, &rs.0.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }
    assert!(
        wait(10, || log_of(&dir).contains("SIGUSR2 received")),
        "{}",
        log_of(&dir)
    );
    assert!(rs.0.try_wait().unwrap().is_none(), "{}", log_of(&dir));
    let s: Summary = json(&sock, &["show", "bgp", "summary"]);
    assert!(
        s.down_peers == 0
            && s.neighbors
                .iter()
                .all(|n| n.flaps == 0 && n.state == "Established"),
        "{s:?}"
    );
    assert!(log_of(&dir).contains("SIGUSR1 received"));

    // show bgp summary: what the BIRDs sent and hold.
    let s: Summary = json(&sock, &["show", "bgp", "summary"]);
    assert_eq!(s.threading.mode, "rib-sharding");
    assert_eq!((s.threading.shards, s.threading.update_threads), (2, 2));
    assert_eq!((s.groups, s.peers, s.down_peers), (2, 2, 0));
    let t: Vec<(String, u64, u64)> = s
        .tables
        .iter()
        .map(|t| (t.table.clone(), t.total_paths, t.active_paths))
        .collect();
    assert_eq!(t, [("inet.0".into(), 5, 4), ("inet6.0".into(), 1, 1)]);
    let neighbors: Vec<Neighbor> = json(&sock, &["show", "bgp", "neighbor"]);
    let (na, nb) = (&neighbors[0], &neighbors[1]);
    assert_eq!(
        (na.address.as_str(), na.state.as_str()),
        ("127.0.0.41", "Established")
    );
    // A: 3 + 1 paths, the shorter path from B wins 203.0.113.0/24; nothing is sent to A.
    assert_eq!(
        families(na),
        [fam("inet.0", 3, 3, 2, 0), fam("inet6.0", 1, 1, 1, 0)]
    );
    // B: gets A's routes but not 203.0.113.0/24, whose best path is its own.
    assert_eq!(
        families(nb),
        [fam("inet.0", 2, 2, 2, 2), fam("inet6.0", 0, 0, 0, 1)]
    );
    // The same as the BIRDs count: A exported 3 + 1, B imported 2 (and got the IPv6 one).
    assert_eq!(
        bird_routes(&a).iter().map(|r| r.1).collect::<Vec<_>>(),
        [3, 1]
    );
    assert_eq!(bird_routes(&b)[0].0, 2);
    let caps = na.capabilities.as_ref().expect("negotiated");
    assert_eq!(caps.tables, ["inet.0", "inet6.0"]);
    assert!(caps.four_octet_as && caps.route_refresh);
    assert_eq!(na.local_address.as_deref(), Some("127.0.0.40"));
    assert_eq!(na.local_port, Some(port_r));
    assert_eq!(na.remote_address.as_deref(), Some("127.0.0.41"));
    assert_eq!(na.router_id.as_deref(), Some("127.0.0.41"));
    assert_eq!(na.timers.hold_time, Some(30));
    assert!(na.counters.received.update >= 3, "{:?}", na.counters);
    let ga = na.update_group.as_ref().expect("an update group");
    assert!(ga.update_thread.starts_with("rs-update-"), "{ga:?}");
    let one: Vec<Neighbor> = json(&sock, &["show", "bgp", "neighbor", "127.0.0.42"]);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].address, "127.0.0.42");
    let (text, ok) = cli(&sock, &["show", "bgp", "neighbor", "127.0.0.99"]);
    assert!(!ok && text.contains("no such neighbor"), "{text}");

    // show route: each path, the active one, AS paths as sent, the shard that owns it.
    let all = routes(&sock, &[]);
    let prefixes: Vec<&str> = all.iter().map(|r| r.prefix.as_str()).collect();
    assert_eq!(
        prefixes,
        [
            "192.0.2.0/24",
            "198.18.0.0/15",
            "198.18.1.0/24",
            "203.0.113.0/24",
            "2001:db8:1::/48"
        ]
    );
    for r in &all {
        assert_eq!(
            r.shard,
            ribshard_rib::shard_of(&prefix(&r.prefix), 2),
            "{}",
            r.prefix
        );
        assert_eq!(r.paths.iter().filter(|p| p.state == "active").count(), 1);
    }
    let contested = &all[3];
    assert_eq!(contested.paths.len(), 2);
    let (best, other) = (&contested.paths[0], &contested.paths[1]);
    assert_eq!(
        (best.from.as_str(), best.as_path.as_str()),
        ("127.0.0.42", "65042")
    );
    assert_eq!(
        (other.from.as_str(), other.as_path.as_str()),
        ("127.0.0.41", "65041 64999")
    );
    assert_eq!(other.state, "inactive");
    assert_eq!(other.reason.as_ref().unwrap().step, "as-path-length");
    assert_eq!(best.reason.as_ref().unwrap().step, "as-path-length");
    assert!(other.communities.contains(&"65041:100".to_string()));
    assert_eq!(other.med, Some(50));
    assert_eq!(other.next_hop, "198.51.100.41");
    let detail = routes(&sock, &["203.0.113.0/24", "detail"]);
    assert_eq!(detail.len(), 1);
    assert!(detail[0].paths[0].attributes.is_some());
    // Longest match of an address, longer and orlonger, a table, a shard.
    let lm = routes(&sock, &["198.18.1.77"]);
    assert_eq!(lm[0].prefix, "198.18.1.0/24");
    assert_eq!(routes(&sock, &["198.18.0.0/15", "orlonger"]).len(), 2);
    assert_eq!(routes(&sock, &["198.18.0.0/15", "longer"]).len(), 1);
    assert_eq!(routes(&sock, &["table", "inet6.0"]).len(), 1);
    let s1 = routes(&sock, &["rib-sharding", "1"]);
    assert!(s1.iter().all(|r| r.shard == 1));
    let s0 = routes(&sock, &["rib-sharding", "0"]);
    assert_eq!(s0.len() + s1.len(), all.len());
    // receive-protocol: B's paths only; advertising-protocol: what B is sent, as sent.
    let from_b = routes(&sock, &["receive-protocol", "bgp", "127.0.0.42"]);
    assert_eq!(
        from_b.iter().map(|r| r.prefix.as_str()).collect::<Vec<_>>(),
        ["192.0.2.0/24", "203.0.113.0/24"]
    );
    assert!(from_b
        .iter()
        .all(|r| r.paths.iter().all(|p| p.from == "127.0.0.42")));
    let to_b = routes(&sock, &["advertising-protocol", "bgp", "127.0.0.42"]);
    assert_eq!(
        to_b.iter().map(|r| r.prefix.as_str()).collect::<Vec<_>>(),
        ["198.18.0.0/15", "198.18.1.0/24", "2001:db8:1::/48"]
    );
    for r in &to_b {
        assert_eq!(r.paths[0].as_path, "65040 65041 64999", "{}", r.prefix);
    }
    assert_eq!(to_b[0].paths[0].next_hop, "127.0.0.40");
    // ... which is what B holds, with that AS path.
    let at_b = b.cmd("show route all 198.18.1.0/24");
    assert!(at_b.contains("BGP.as_path: 65040 65041 64999"), "{at_b}");

    // Filters on the paths' attributes: only matching paths, routes left with any.
    let names = |rs: &[Route]| -> Vec<(String, Vec<String>)> {
        rs.iter()
            .map(|r| {
                (
                    r.prefix.clone(),
                    r.paths.iter().map(|p| p.from.clone()).collect(),
                )
            })
            .collect()
    };
    let from = |p: &str, who: &[&str]| {
        (
            p.to_string(),
            who.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        names(&routes(&sock, &["community", "65042:*"])),
        [
            from("192.0.2.0/24", &["127.0.0.42"]),
            from("203.0.113.0/24", &["127.0.0.42"])
        ]
    );
    assert_eq!(
        names(&routes(
            &sock,
            &["community", "65041:100", "table", "inet.0"]
        )),
        [
            from("198.18.0.0/15", &["127.0.0.41"]),
            from("198.18.1.0/24", &["127.0.0.41"]),
            from("203.0.113.0/24", &["127.0.0.41"])
        ]
    );
    // Every member must be there (Junos).
    assert!(routes(&sock, &["community", "65041:100 65042:100"]).is_empty());
    assert!(routes(&sock, &["large-community", "65041:*:*"]).is_empty());
    assert_eq!(
        names(&routes(
            &sock,
            &["aspath-regex", ".* 64999", "198.18.0.0/15", "orlonger"]
        )),
        [
            from("198.18.0.0/15", &["127.0.0.41"]),
            from("198.18.1.0/24", &["127.0.0.41"])
        ]
    );
    assert_eq!(
        names(&routes(&sock, &["next-hop", "198.51.100.42"])),
        [
            from("192.0.2.0/24", &["127.0.0.42"]),
            from("203.0.113.0/24", &["127.0.0.42"])
        ]
    );
    let active = routes(&sock, &["active-path", "protocol", "bgp"]);
    assert_eq!(active.len(), 5);
    assert!(active
        .iter()
        .all(|r| r.paths.len() == 1 && r.paths[0].state == "active"));
    let count: ribshard_mgmt::api::RouteCount = json(&sock, &["show", "route", "count"]);
    let counted: Vec<(&str, u64, u64, u64)> = count
        .tables
        .iter()
        .map(|t| (t.table.as_str(), t.destinations, t.routes, t.active))
        .collect();
    assert_eq!(counted, [("inet.0", 4, 5, 4), ("inet6.0", 1, 1, 1)]);
    let (text, ok) = cli(
        &sock,
        &["show", "route", "community", "65041:100", "|", "count"],
    );
    assert!(ok && text.ends_with("Count: 4 lines\n"), "{text}");
    for bad in [
        vec!["show", "route", "community", "65041:x"],
        vec!["show", "route", "aspath-regex", "(65041"],
        vec!["show", "route", "protocol", "ospf"],
    ] {
        let (text, ok) = cli(&sock, &bad);
        assert!(!ok && !text.is_empty(), "{bad:?}: {text}");
    }
    // terse, and the received / advertised table, in Junos's columns.
    let (text, _) = cli(&sock, &["show", "route", "203.0.113.0/24", "terse"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[4].starts_with("A V Destination"), "{text}");
    assert_eq!(
        lines[5].split_whitespace().collect::<Vec<_>>(),
        [
            "*",
            "?",
            "203.0.113.0/24",
            "B",
            "170",
            "50",
            ">198.51.100.42",
            "65042",
            "I"
        ],
        "{text}"
    );
    assert_eq!(
        lines[6].split_whitespace().collect::<Vec<_>>(),
        ["B", "170", "50", "198.51.100.41", "65041", "64999", "I"],
        "{text}"
    );
    let (text, _) = cli(
        &sock,
        &[
            "show",
            "route",
            "receive-protocol",
            "bgp",
            "127.0.0.41",
            "table",
            "inet.0",
        ],
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["Prefix", "Nexthop", "MED", "Lclpref", "AS", "path"],
        "{text}"
    );
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        [
            "*",
            "198.18.0.0/15",
            "198.51.100.41",
            "50",
            "65041",
            "64999",
            "I"
        ],
        "{text}"
    );
    assert_eq!(
        lines[5].split_whitespace().collect::<Vec<_>>(),
        [
            "203.0.113.0/24",
            "198.51.100.41",
            "50",
            "65041",
            "64999",
            "I"
        ],
        "{text}"
    );

    // show route summary: shards add up to the tables, which agree with the summary.
    let rsum: RouteSummary = json(&sock, &["show", "route", "summary"]);
    for (t, st) in rsum.tables.iter().zip(&s.tables) {
        assert_eq!((t.hidden, t.unresolved), (0, 0));
        assert_eq!(t.routes, st.total_paths);
        assert_eq!(t.active, st.active_paths);
        assert_eq!(t.shards.iter().map(|x| x.routes).sum::<u64>(), t.routes);
        assert_eq!(
            t.shards.iter().map(|x| x.destinations).sum::<u64>(),
            t.destinations
        );
        let in_shards: Vec<u64> = (0..2)
            .map(|i| {
                all.iter()
                    .filter(|r| r.table == t.table && r.shard == i)
                    .count() as u64
            })
            .collect();
        assert_eq!(
            t.shards.iter().map(|x| x.destinations).collect::<Vec<_>>(),
            in_shards
        );
    }
    // Sampled every second.
    assert!(wait(5, || try_json::<RouteSummary>(
        &sock,
        &["show", "route", "summary"]
    )
    .is_some_and(|r| r.high_water.routes.value == 6)));

    // show bgp group, threads, queues, convergence.
    let groups: Vec<Group> = json(&sock, &["show", "bgp", "group"]);
    let down = groups.iter().find(|g| g.name == "downstream").unwrap();
    assert_eq!((down.total_peers, down.established), (1, 1));
    assert_eq!(down.peer_as, Some(65042));
    assert_eq!(down.update_groups.len(), 1);
    assert_eq!(down.update_groups[0].members, ["127.0.0.42"]);
    assert!(down.update_groups[0].updates_built >= 2);
    let th: Threads = json(&sock, &["show", "thread", "cpu"]);
    for want in [
        "rs-shard-0",
        "rs-shard-1",
        "rs-update-0",
        "rs-update-1",
        "rs-tick",
    ] {
        assert!(th.threads.iter().any(|t| t.name == want), "{want}: {th:?}");
    }
    assert!(th.threads.iter().any(|t| t.kind == "session"));
    assert!(th.threads.iter().all(|t| t.name.len() <= 15));
    assert!(th
        .threads
        .iter()
        .filter(|t| t.kind == "shard")
        .all(|t| t.items > 0));
    let wq: WorkQueues = json(&sock, &["show", "work-queues"]);
    assert_eq!(wq.queues.len(), 4);
    assert_eq!(wq.write_queues.sessions, 2);
    let conv: ribshard_mgmt::api::Convergence = json(&sock, &["show", "bgp", "convergence"]);
    assert!(conv.decided.count > 0);
    let ca = conv
        .neighbors
        .iter()
        .find(|n| n.address == "127.0.0.41")
        .unwrap();
    assert!(ca.end_of_rib_received_seconds.is_some(), "{conv:?}");

    // The human layouts.
    let (text, ok) = cli(&sock, &["show", "bgp", "summary"]);
    assert!(ok);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "Threading mode: RIB sharding (2 shards) + update threading (2 threads)"
    );
    assert_eq!(lines[1], "Groups: 2 Peers: 2 Down peers: 0");
    assert!(lines[5].starts_with("Peer "), "{text}");
    assert!(
        lines[6].starts_with("127.0.0.41") && lines[6].ends_with("Establ"),
        "{text}"
    );
    assert_eq!(lines[7], "  inet.0: 2/3/3/0");
    let (text, _) = cli(&sock, &["show", "route", "203.0.113.0/24"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "inet.0:");
    assert!(
        lines[4].starts_with("203.0.113.0/24     *[BGP/170] "),
        "{text}"
    );
    assert!(lines[4].ends_with("from 127.0.0.42"), "{text}");
    assert_eq!(lines[5].trim(), "AS path: 65042 I");
    assert_eq!(lines[6].trim(), "> to 198.51.100.42");
    assert!(
        lines[7].starts_with("                    [BGP/170] "),
        "{text}"
    );
    let (text, _) = cli(&sock, &["show", "route", "203.0.113.0/24", "detail"]);
    assert!(text.contains("Inactive reason: AS path"), "{text}");
    // Route ages in the text layout follow the clock across requests, as the JSON's do
    // (they froze: a shard thread read the clock once per 1,024 routes it rendered).
    std::thread::sleep(Duration::from_millis(2100));
    let (text, _) = cli(&sock, &["show", "route", "203.0.113.0/24"]);
    let json_ages: Vec<u64> = routes(&sock, &["203.0.113.0/24"])[0]
        .paths
        .iter()
        .map(|p| p.age_seconds)
        .collect();
    let text_ages: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split("[BGP/170] ").nth(1))
        .map(|rest| {
            let hms = rest.split(',').next().unwrap_or_default();
            hms.split(':')
                .map(|f| f.trim().parse::<u64>().unwrap_or(0))
                .fold(0, |acc, f| acc * 60 + f)
        })
        .collect();
    assert_eq!(text_ages.len(), json_ages.len(), "{text}");
    for (t, j) in text_ages.iter().zip(&json_ages) {
        assert!(
            t.abs_diff(*j) <= 1,
            "text ages {text_ages:?}, JSON {json_ages:?}\n{text}"
        );
    }
    for cmd in [
        vec!["show", "bgp", "neighbor"],
        vec!["show", "bgp", "neighbor", "127.0.0.41", "statistics"],
        vec!["show", "bgp", "group"],
        vec!["show", "route", "summary"],
        vec!["show", "thread", "cpu"],
        vec!["show", "work-queues"],
        vec!["show", "bgp", "convergence"],
    ] {
        let (text, ok) = cli(&sock, &cmd);
        assert!(ok && !text.is_empty(), "{cmd:?}: {text}");
    }

    // The read-only TCP listener answers questions and refuses changes; the socket is 0660.
    let (code, body) = http(api_tcp, "GET", "/v1/bgp/summary");
    assert_eq!(code, 200, "{body}");
    for path in ["/v1/bgp/clear", "/v1/configure/reload"] {
        let (code, body) = http(api_tcp, "POST", path);
        assert_eq!(code, 403, "{path}: {body}");
        assert!(body.contains("read-only"), "{body}");
    }
    let (text, ok) = cli(Path::new(api_tcp), &["clear", "bgp", "neighbor", "all"]);
    assert!(!ok && text.contains("read-only"), "{text}");
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);

    // /metrics: promtool accepts it, and its prefix counts are what show says.
    let (code, body) = http(metrics, "GET", "/metrics");
    assert_eq!(code, 200);
    if have("promtool", "--version") {
        let mut p = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
        let out = p.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for n in &neighbors {
        for f in &n.families {
            for (metric, v) in [
                ("received", f.received),
                ("accepted", f.accepted),
                ("active", f.active),
                ("advertised", f.advertised.unwrap()),
            ] {
                let line = format!(
                    "ribshard_bgp_prefixes_{metric}{{neighbor=\"{}\",group=\"{}\",family=\"{}\"}} {v}",
                    n.address, n.group, f.table
                );
                assert!(
                    body.lines().any(|l| l.starts_with(&line)),
                    "{line} in\n{body}"
                );
            }
        }
    }

    // clear soft: B gets our routes again, its session stays up.
    let since_b = bird_since(&b);
    let before = bird_updates(&b);
    let (text, ok) = cli(&sock, &["clear", "bgp", "neighbor", "127.0.0.42", "soft"]);
    assert!(ok && text.contains("cleared"), "{text}");
    assert!(
        wait(10, || bird_updates(&b)[0].0 >= before[0].0 + 2),
        "{before:?} {:?}",
        bird_updates(&b)
    );
    assert!(
        same_session(&since_b, &bird_since(&b)),
        "a soft clear keeps the session: {since_b} then {}",
        bird_since(&b)
    );
    // clear soft-inbound: A is asked for its routes (ROUTE-REFRESH) and sends them again.
    let since_a = bird_since(&a);
    let before = bird_updates(&a);
    let (_, ok) = cli(
        &sock,
        &["clear", "bgp", "neighbor", "127.0.0.41", "soft-inbound"],
    );
    assert!(ok);
    assert!(
        wait(10, || bird_updates(&a)[0].1 >= before[0].1 + 3),
        "{before:?} {:?}",
        bird_updates(&a)
    );
    assert!(
        same_session(&since_a, &bird_since(&a)),
        "a soft inbound clear keeps the session: {since_a} then {}",
        bird_since(&a)
    );
    // clear (hard): B's session goes down with Administrative Reset and comes back.
    let (_, ok) = cli(&sock, &["clear", "bgp", "neighbor", "127.0.0.42"]);
    assert!(ok);
    assert!(
        wait(20, || b
            .cmd("show protocols all ribsh")
            .contains("Administrative reset")),
        "{}",
        b.cmd("show protocols all ribsh")
    );
    assert!(
        wait(30, || b.established("ribsh")
            && bird_routes(&b).first().is_some_and(|r| r.0 == 2)),
        "{}",
        b.cmd("show protocols all ribsh")
    );
    assert!(!same_session(&since_b, &bird_since(&b)));
    let nb: Vec<Neighbor> = json(&sock, &["show", "bgp", "neighbor", "127.0.0.42"]);
    assert_eq!(nb[0].flaps, 1);
    let sent = nb[0].last_notification_sent.as_ref().unwrap();
    assert_eq!((sent.code, sent.subcode), (6, 4));
    assert_eq!(sent.message.as_deref(), Some("cleared by an operator"));
    // clear all (hard): with every session down, advertising waits again, as at start, for
    // both BIRDs' End-of-RIB; then B gets the table again, once.
    let (_, ok) = cli(&sock, &["clear", "bgp", "neighbor", "all"]);
    assert!(ok);
    assert!(
        wait(30, || log_of(&dir).contains("every neighbor went down")),
        "{}",
        log_of(&dir)
    );
    assert!(
        wait(30, || a.established("ribsh")
            && b.established("ribsh")
            && bird_routes(&b).first().is_some_and(|r| r.0 == 2)
            && log_of(&dir).matches("update-delay over").count() == 2),
        "{}\n{}",
        b.cmd("show protocols all ribsh"),
        log_of(&dir)
    );
    assert!(
        wait(10, || try_json::<Summary>(
            &sock,
            &["show", "bgp", "summary"]
        )
        .is_some_and(
            |s| s.update_delay.is_none() && s.tables.first().is_some_and(|t| t.total_paths == 5)
        )),
        "{}",
        log_of(&dir)
    );
    // configure reload of the unchanged file changes nothing.
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(ok && text.starts_with("configuration unchanged"), "{text}");
    // A file with an error: rejected, the error named by file, line and key, nothing changed.
    let conf = dir.join("ribshard.toml");
    let good = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, good.replace("peer-as = 65042", "peer-as = \"x\"")).unwrap();
    let (text, ok) = cli(&sock, &["--json", "configure", "reload"]);
    assert!(!ok, "a rejected file must exit non-zero: {text}");
    let r: ribshard_mgmt::api::ReloadReply = serde_json::from_str(&text).unwrap();
    assert_eq!(r.outcome, ribshard_mgmt::api::ReloadOutcome::Rejected);
    assert_eq!(r.errors.len(), 1, "{r:?}");
    let e = &r.errors[0];
    assert!(
        e.starts_with(&format!("{}:", conf.display())) && e.contains(":24: bgp.group[1].peer-as: "),
        "{e}"
    );
    // Thread counts applied live, the sessions kept.
    std::fs::write(
        &conf,
        good.replace("number-of-shards = 2", "number-of-shards = 1"),
    )
    .unwrap();
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(ok && text.starts_with("configuration applied"), "{text}");
    assert!(text.contains("re-sharded"), "{text}");
    let s: Summary = json(&sock, &["show", "bgp", "summary"]);
    assert_eq!((s.threading.shards, s.down_peers), (1, 0));
    assert_eq!(s.threading.mode, "update-threading");
    assert_eq!(s.tables[0].total_paths, 5);
}

#[test]
fn a_prefix_limit_hold_down_comes_back_when_cleared() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("mgmt-limit");
    let (port_r, port_a) = (free_port("0.0.0.0"), free_port("0.0.0.0"));
    let sock = socket(&dir);
    let a = start_bird(
        &dir,
        "a",
        &bird(
            "127.0.0.41",
            65041,
            port_a,
            port_r,
            &["203.0.113.0/24", "198.18.0.0/15", "198.18.1.0/24"],
        ),
    );
    let extra = "[bgp.group.prefix-limit.inet-unicast]\nmaximum = 2\n";
    let config = ribshard_config(port_r, "127.0.0.41", 65041, port_a, "", true).replace(
        "[[bgp.group.neighbor]]",
        &format!("{extra}[[bgp.group.neighbor]]"),
    );
    let (_rs, _) = ribshard(&dir, &config);
    let status = || -> Neighbor {
        try_json::<Vec<Neighbor>>(&sock, &["show", "bgp", "neighbor", "127.0.0.41"])
            .and_then(|v| v.into_iter().next())
            .unwrap_or_default()
    };
    assert!(wait(30, || status().held_down), "{:?}", status());
    let n = status();
    assert_eq!(n.established_transitions, 1);
    assert_eq!(n.last_error.as_ref().unwrap().kind, "prefix-limit");
    let sent = n.last_notification_sent.as_ref().unwrap();
    assert_eq!((sent.code, sent.subcode), (6, 1));
    // Held down: longer than BIRD's connect retry and our idle hold, it stays down.
    std::thread::sleep(Duration::from_secs(6));
    let n = status();
    assert!(n.held_down && n.state != "Established", "{n:?}");
    assert_eq!(n.established_transitions, 1);
    let (text, _) = cli(&sock, &["show", "bgp", "neighbor", "127.0.0.41"]);
    assert!(text.contains("held down by its prefix limit"), "{text}");
    // Cleared: the session comes back (and the limit, still exceeded, ends it again).
    let (_, ok) = cli(&sock, &["clear", "bgp", "neighbor", "127.0.0.41"]);
    assert!(ok);
    assert!(
        wait(30, || status().established_transitions == 2),
        "{:?}\n{}",
        status(),
        a.cmd("show protocols all ribsh")
    );
}

/// `show route` of both real full tables (641,942 paths) streams: the daemon's memory grows
/// by a chunk, never by the table.
#[test]
fn show_route_of_the_real_full_tables_streams_in_bounded_memory() {
    let Some(rib) = ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz") else {
        return;
    };
    let data = rib.parent().unwrap();
    let Some(feeds) = ribshard_bench::table::real(data, &[2497, 4777], None) else {
        ribshard_mrt::skipped("the RouteViews RIB is not in ../shared/data");
        return;
    };
    let dir = tempdir("mgmt-stream");
    let sock = socket(&dir);
    let port = free_port("127.0.0.1");
    let config = format!(
        "[bgp]\nlocal-as = 4200000001\nrouter-id = \"127.0.0.1\"\nlisten = [\"127.0.0.1:{port}\"]\nhold-time = 240\n\
         [bgp.rib-sharding]\nnumber-of-shards = 2\n[bgp.update-threading]\nnumber-of-threads = 2\n\
         [[bgp.group]]\nname = \"up\"\ntype = \"external\"\nimport = [\"accept\"]\nexport = [\"reject\"]\n\
         multihop = true\npassive = true\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.20\"\npeer-as = 2497\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.21\"\npeer-as = 4777\n"
    );
    let (rs, _) = ribshard(&dir, &config);
    let dut = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
    let mut sessions = Vec::new();
    let mut paths = 0;
    let mut prefixes = std::collections::HashSet::new();
    for (feed, local) in feeds.iter().zip(["127.0.0.20", "127.0.0.21"]) {
        let spec = ribshard_bench::speaker::PeerSpec {
            local: local.parse().unwrap(),
            asn: feed.asn,
            graceful_restart: true,
        };
        let s = ribshard_bench::speaker::Session::establish(
            spec,
            dut,
            240,
            None,
            Duration::from_secs(20),
        )
        .expect("session with ribshard");
        s.send(&feed.bytes).unwrap();
        paths += feed.prefixes.len() as u64;
        prefixes.extend(feed.prefixes.iter().copied());
        sessions.push(s);
    }
    assert_eq!(paths, 641_942);
    assert!(
        wait(120, || {
            try_json::<Summary>(&sock, &["show", "bgp", "summary"])
                .is_some_and(|s| s.tables.first().is_some_and(|t| t.total_paths == paths))
        }),
        "{}",
        log_of(&dir)
    );
    let rss = |pid: u32| -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    let pid = rs.0.id();
    // Settled: give freed input buffers a moment, then take the baseline.
    std::thread::sleep(Duration::from_secs(1));
    let before = rss(pid);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peak = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss(pid));
                std::thread::sleep(Duration::from_millis(10));
            }
            peak
        })
    };
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .arg("--socket")
        .arg(&sock)
        .args(["--json", "show", "route"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = 0u64;
    let mut shown_paths = 0u64;
    let reader = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in std::io::BufRead::lines(reader) {
        let line = line.unwrap();
        lines += 1;
        shown_paths += line.matches("\"state\":").count() as u64;
    }
    assert!(child.wait().unwrap().success());
    let took = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = peak.join().unwrap();
    eprintln!(
        "show route --json: {lines} routes, {shown_paths} paths in {took:?}; daemon RSS {} MiB before, peak {} MiB",
        before >> 20,
        peak >> 20
    );
    assert_eq!(lines, prefixes.len() as u64);
    assert_eq!(shown_paths, paths);
    assert!(
        peak < before + (16 << 20),
        "RSS grew by {} MiB while streaming",
        (peak - before) >> 20
    );
    drop(sessions);
}

/// After start, with a configured neighbor that never comes up, `show bgp summary` says that
/// advertising waits (`[bgp.update-delay]`) and for whom: the BIRD that sent its table and
/// End-of-RIB is loaded, the other neighbor is not up.
#[test]
fn show_bgp_summary_says_while_advertising_waits() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("mgmt-update-delay");
    let (port_r, port_a) = (free_port("0.0.0.0"), free_port("0.0.0.0"));
    let sock = socket(&dir);
    let _a = start_bird(
        &dir,
        "a",
        &bird("127.0.0.41", 65041, port_a, port_r, &["203.0.113.0/24"]),
    );
    let never = "[[bgp.group.neighbor]]\naddress = \"127.0.0.49\"\npassive = true\n";
    let config = format!(
        "{}[bgp.update-delay]\nmax-delay = 60\nestablish-wait = 60\n",
        ribshard_config(port_r, "127.0.0.41", 65041, port_a, never, true)
    );
    let (_rs, _) = ribshard(&dir, &config);
    let summary = || try_json::<Summary>(&sock, &["show", "bgp", "summary"]).unwrap_or_default();
    assert!(
        wait(30, || summary()
            .update_delay
            .is_some_and(|d| d.neighbors_loaded == 1)),
        "{:?}\n{}",
        summary(),
        log_of(&dir)
    );
    let d = summary().update_delay.unwrap_or_default();
    assert_eq!(
        (
            d.neighbors_not_up,
            d.neighbors_loading,
            d.max_delay_seconds,
            d.reason.as_str()
        ),
        (1, 0, 60, "start")
    );
    let (text, _) = cli(&sock, &["show", "bgp", "summary"]);
    assert!(
        text.contains("Advertising deferred (update-delay, since start)"),
        "{text}"
    );
    assert!(log_of(&dir).contains("update-delay: advertising waits"));
}

/// Started with no neighbors (a route server brought up empty), the daemon runs and takes
/// its first neighbor from a reload.
#[test]
fn a_daemon_started_without_neighbors_takes_them_from_a_reload() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("mgmt-empty");
    let (port_r, port_a) = (free_port("127.0.0.40"), free_port("127.0.0.41"));
    let sock = socket(&dir);
    let head = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\n\
         listen = [\"127.0.0.40:{port_r}\"]\n"
    );
    let (_rs, _) = ribshard(&dir, &head);
    assert!(
        log_of(&dir).contains("no neighbors are configured"),
        "{}",
        log_of(&dir)
    );
    let s: Summary = json(&sock, &["show", "bgp", "summary"]);
    assert_eq!(s.peers, 0);
    let conf = dir.join("ribshard.toml");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        format!(
            "{text}\n[[bgp.group]]\nname = \"up\"\ntype = \"external\"\nmultihop = true\n\
             import = [\"accept\"]\n[[bgp.group.neighbor]]\naddress = \"127.0.0.41\"\n\
             peer-as = 65041\nport = {port_a}\nlocal-address = \"127.0.0.40\"\npassive = true\n"
        ),
    )
    .unwrap();
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(ok && text.starts_with("configuration applied"), "{text}");
    // Started after the reload: a connection refused before it would hold BIRD back for
    // its error wait time.
    let a = start_bird(
        &dir,
        "a",
        &bird("127.0.0.41", 65041, port_a, port_r, &["203.0.113.0/24"]),
    );
    assert!(
        wait(30, || routes(&sock, &["203.0.113.0/24"]).len() == 1),
        "{}\n{}",
        a.cmd("show protocols all ribsh"),
        log_of(&dir)
    );
    // Changes RFC 4271 does not fix at OPEN keep the session (BIRD's is the same one): a
    // description, a prefix limit, the hold time (from the next OPEN), an import policy.
    let since = bird_since(&a);
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        text.replace(
            "passive = true\n",
            "passive = true\ndescription = \"first upstream\"\nhold-time = 60\n\
             [bgp.group.neighbor.prefix-limit.inet-unicast]\nmaximum = 100\nteardown = false\n",
        )
        .replace("import = [\"accept\"]", "import = [\"reject\"]"),
    )
    .unwrap();
    // Asked first: what it would do, nothing done.
    let (text, ok) = cli(&sock, &["configure", "reload", "--dry-run"]);
    assert!(
        ok && text.starts_with("configuration planned")
            && text.contains("description \"first upstream\", session kept"),
        "{text}"
    );
    let n = &json::<Vec<Neighbor>>(&sock, &["show", "bgp", "neighbor", "127.0.0.41"])[0];
    assert_ne!(
        n.description, "first upstream",
        "a dry run changed it: {n:?}"
    );
    // Another file, compared only: a capability would restart the session, and says so.
    let candidate = dir.join("candidate.toml");
    std::fs::write(
        &candidate,
        std::fs::read_to_string(&conf).unwrap().replace(
            "passive = true\n",
            "passive = true\nadd-path = [\"receive\"]\n",
        ),
    )
    .unwrap();
    let (text, ok) = cli(&sock, &["config", "diff", candidate.to_str().unwrap()]);
    assert!(
        ok && text.contains("session would restart")
            && text.contains("add-path (a capability in the OPEN) changed"),
        "{text}"
    );
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(
        ok && text.contains("session kept") && !text.contains("session restarted"),
        "{text}"
    );
    assert!(text.contains("description \"first upstream\""), "{text}");
    assert!(
        text.contains("hold-time 60 s: proposed in the next OPEN"),
        "{text}"
    );
    assert!(
        wait(10, || routes(&sock, &["203.0.113.0/24"]).is_empty()),
        "the new import policy rejects the route"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        same_session(&since, &bird_since(&a)),
        "{since} then {}",
        bird_since(&a)
    );
    let n = &json::<Vec<Neighbor>>(&sock, &["show", "bgp", "neighbor", "127.0.0.41"])[0];
    assert_eq!(
        (n.description.as_str(), n.flaps),
        ("first upstream", 0),
        "{n:?}"
    );
    // Another configured group (update groups never span them): it moves to that group's
    // update group, session kept.
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, text.replace("name = \"up\"", "name = \"transit\"")).unwrap();
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(
        ok && text.contains("group transit: moved to its update groups")
            && !text.contains("session restarted"),
        "{text}"
    );
    let n = &json::<Vec<Neighbor>>(&sock, &["show", "bgp", "neighbor", "127.0.0.41"])[0];
    assert_eq!(n.group, "transit");
    assert_eq!(
        n.update_group.as_ref().map(|g| g.name.as_str()),
        Some("transit"),
        "{n:?}"
    );
    assert!(
        same_session(&since, &bird_since(&a)),
        "{since} then {}",
        bird_since(&a)
    );
    // A change carried in the OPEN (a capability) restarts the session: the neighbor's
    // history goes on, flap counted, the Cease we sent shown as its last error.
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        text.replace(
            "passive = true\n",
            "passive = true\nadd-path = [\"receive\"]\n",
        ),
    )
    .unwrap();
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(ok && text.contains("session restarted"), "{text}");
    let neighbor = || json::<Vec<Neighbor>>(&sock, &["show", "bgp", "neighbor", "127.0.0.41"]);
    assert!(
        wait(30, || neighbor()[0].state == "Established"),
        "{:?}",
        neighbor()
    );
    let n = &neighbor()[0];
    assert_eq!((n.flaps, n.established_transitions), (1, 2), "{n:?}");
    let sent = n
        .last_notification_sent
        .as_ref()
        .expect("the Cease we sent");
    assert_eq!((sent.code, sent.subcode), (6, 6), "{sent:?}");
    let e = n.last_error.as_ref().expect("a last error");
    assert_eq!(e.kind, "stopped", "{e:?}");
}

/// While advertising is deferred (`[bgp.update-delay]`), `show bgp convergence` counts a
/// neighbor's routes sent when the groups have them, after the deferral, not at its
/// End-of-RIB; and the tables sent at the deferral's end count in "receipt to UPDATE
/// written" (it said +0.03 ms, and nothing written, while the peers waited seconds).
#[test]
fn convergence_counts_the_deferral() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("mgmt-convergence");
    let (port_r, port_a, port_b) = (
        free_port("127.0.0.40"),
        free_port("127.0.0.41"),
        free_port("127.0.0.42"),
    );
    let sock = socket(&dir);
    let a = start_bird(
        &dir,
        "a",
        &bird("127.0.0.41", 65041, port_a, port_r, &["203.0.113.0/24"]),
    );
    let b = start_bird(
        &dir,
        "b",
        &bird("127.0.0.42", 65042, port_b, port_r, &["192.0.2.0/24"]),
    );
    // A third neighbor never comes: the deferral lasts its establish-wait, 12 s, well past
    // both End-of-RIBs (BIRD connects a few seconds after start).
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [bgp.update-delay]\nestablish-wait = 12\nmax-delay = 60\n\
         [[bgp.group]]\nname = \"upstream\"\ntype = \"external\"\npeer-as = 65041\n\
         import = [\"accept\"]\nexport = [\"accept\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.41\"\nport = {port_a}\nlocal-address = \"127.0.0.40\"\n\
         multihop = true\npassive = true\n\
         [[bgp.group]]\nname = \"downstream\"\ntype = \"external\"\n\
         import = [\"accept\"]\nexport = [\"accept\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.42\"\npeer-as = 65042\nport = {port_b}\n\
         local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.49\"\npeer-as = 65049\npassive = true\n"
    );
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let (_rs, _) = ribshard(&dir, &config);
    assert!(
        // Each imports the other's route.
        wait(30, || bird_routes(&a).first().is_some_and(|r| r.0 == 1)
            && bird_routes(&b).first().is_some_and(|r| r.0 == 1)),
        "A {:?}, B {:?}\n{}",
        bird_routes(&a),
        bird_routes(&b),
        log_of(&dir)
    );
    let c: ribshard_mgmt::api::Convergence = json(&sock, &["show", "bgp", "convergence"]);
    let log = log_of(&dir);
    assert_eq!(c.neighbors.len(), 2, "{c:?}");
    for n in &c.neighbors {
        let eor = n.end_of_rib_received_seconds.expect("End-of-RIB");
        let sent = n.all_groups_seconds.expect("sent to every group");
        // Sent when the deferral ended, 12 s after the start, whenever its End-of-RIB came.
        let at = n.established_at + eor + sent;
        assert!(
            at >= started + 11.5,
            "sent {:.1} s after the start: {n:?}\n{log}",
            at - started
        );
    }
    assert_eq!(c.written.len(), 2, "{:?}", c.written);
    for g in &c.written {
        assert!(
            g.histogram.count >= 1 && g.histogram.sum_seconds > 1.0,
            "{g:?}"
        );
    }
}
