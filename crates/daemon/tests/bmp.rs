//! BMP (RFC 7854, RFC 8671, RFC 9069) to a real collector: pmacct's `pmbmpd` decodes every
//! message ribshard sends and logs it as JSON. Two BIRD 2 upstreams feed ribshard; the
//! collector sees Initiation, Peer Up, each UPDATE as received (pre-policy), the routes as
//! import policy left them (post-policy), the Loc-RIB, statistics, Peer Down and
//! Termination; a collector that connects later gets a dump equal to what `show route` and
//! the neighbors sent; what a BIRD downstream is sent (Adj-RIB-Out) equals what it holds,
//! live and dumped; a collector that stops reading is dropped without slowing routing, and
//! dumped again when it is back.

mod common;

use common::operator::active_routes;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn have_pmbmpd() -> bool {
    have("pmbmpd", "-V")
}

/// A pmbmpd listening on 127.0.0.1:`port`, logging every message as a JSON line.
struct Pmbmpd {
    _p: Proc,
    log: PathBuf,
}

impl Pmbmpd {
    fn start(dir: &Path, name: &str, port: u16) -> Pmbmpd {
        let log = dir.join(format!("{name}.json"));
        let conf = dir.join(format!("{name}.conf"));
        std::fs::write(
            &conf,
            format!(
                "daemonize: false\nbmp_daemon_ip: 127.0.0.1\nbmp_daemon_port: {port}\n\
                 bmp_daemon_msglog_file: {}\nbmp_daemon_msglog_output: json\nlogfile: {}\n",
                log.display(),
                dir.join(format!("{name}.log")).display()
            ),
        )
        .unwrap();
        let p = Command::new("pmbmpd")
            .arg("-f")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pmbmpd");
        assert!(
            wait(10, || std::net::TcpStream::connect(("127.0.0.1", port))
                .is_ok()
                || std::fs::read_to_string(dir.join(format!("{name}.log")))
                    .is_ok_and(|l| l.contains("waiting for BMP data"))),
            "pmbmpd did not start"
        );
        Pmbmpd { _p: Proc(p), log }
    }

    /// Every message logged so far (pmbmpd writes its log buffered: poll).
    fn messages(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn kind(m: &serde_json::Value) -> &str {
    m["bmp_msg_type"].as_str().unwrap_or_default()
}

/// The routes a collector holds for one table: Loc-RIB (`peer` None) or one neighbor's
/// pre-policy Adj-RIB-In: prefix -> (AS path, next hop), announcements and withdrawals
/// applied in order.
fn table(msgs: &[serde_json::Value], peer: Option<&str>) -> BTreeMap<String, (String, String)> {
    rib(msgs, peer, false)
}

/// One neighbor's post-policy Adj-RIB-In (the L flag), as [`table`] reads the others.
fn post_policy(msgs: &[serde_json::Value], peer: &str) -> BTreeMap<String, (String, String)> {
    rib(msgs, Some(peer), true)
}

fn rib(
    msgs: &[serde_json::Value],
    peer: Option<&str>,
    post: bool,
) -> BTreeMap<String, (String, String)> {
    routes_where(msgs, |m| {
        let loc = m["is_loc"] == 1;
        match peer {
            None => loc,
            Some(p) => {
                !loc && m["is_out"] != 1 && m["is_post"] == u8::from(post) && m["peer_ip"] == p
            }
        }
    })
}

/// The routes of the Route Monitoring messages `wanted` picks: prefix -> (AS path, next
/// hop), announcements and withdrawals applied in order.
fn routes_where(
    msgs: &[serde_json::Value],
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> BTreeMap<String, (String, String)> {
    let mut t = BTreeMap::new();
    for m in msgs
        .iter()
        .filter(|m| kind(m) == "route_monitor" && wanted(m))
    {
        let prefix = m["ip_prefix"].as_str().unwrap_or_default().to_string();
        if m["log_type"] == "withdraw" {
            t.remove(&prefix);
        } else {
            t.insert(
                prefix,
                (
                    m["as_path"].as_str().unwrap_or_default().to_string(),
                    m["bgp_nexthop"].as_str().unwrap_or_default().to_string(),
                ),
            );
        }
    }
    t
}

/// Prefix -> (AS path, next hop) of every active path, as `show route --json` gives.
fn loc_rib(sock: &Path) -> BTreeMap<String, (String, String)> {
    active_routes(sock)
        .into_iter()
        .map(|(prefix, (_, as_path, next_hop))| (prefix, (as_path, next_hop)))
        .collect()
}

fn bird(addr: &str, asn: u32, port: u16, port_r: u16, statics: &str, export: &str) -> String {
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
filter towards_rs {{ {export} accept; }}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.50 port {port_r} as 65050;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import none; export filter towards_rs; next hop address 198.51.100.{last}; }};
}}
"#,
        last = asn - 65000
    )
}

fn statics(second: u8, extra: &[&str]) -> (String, BTreeSet<String>) {
    let mut all: BTreeSet<String> = (0..10).map(|i| format!("10.{second}.{i}.0/24")).collect();
    all.extend(extra.iter().map(|s| s.to_string()));
    let text = all
        .iter()
        .map(|r| format!("route {r} blackhole; "))
        .collect();
    (text, all)
}

#[test]
fn pmbmpd_decodes_the_feeds_and_a_late_collector_gets_the_tables() {
    if !have_bird() || !have_pmbmpd() {
        return;
    }
    let dir = tempdir("bmp");
    let port_r = free_port("127.0.0.50");
    let (port_a, port_b) = (free_port("127.0.0.51"), free_port("127.0.0.52"));
    let station = free_port("127.0.0.1");
    let collector = Pmbmpd::start(&dir, "first", station);
    let config = format!(
        r#"[bgp]
local-as = 65050
router-id = "127.0.0.50"
listen = ["127.0.0.50:{port_r}"]
[[bgp.group]]
name = "up"
type = "external"
import = ["no-66"]
export = ["reject"]
[[bgp.group.neighbor]]
address = "127.0.0.51"
peer-as = 65051
port = {port_a}
local-address = "127.0.0.50"
multihop = true
passive = true
[[bgp.group.neighbor]]
address = "127.0.0.52"
peer-as = 65052
port = {port_b}
local-address = "127.0.0.50"
multihop = true
passive = true
[[policy-options.policy-statement.no-66.term]]
name = "66"
from = {{ route-filter = ["10.66.0.0/16 orlonger"] }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.no-66.term]]
name = "next-hop"
from = {{ route-filter = ["10.51.0.0/24 exact"] }}
then = {{ next-hop = "198.51.100.99", action = "accept" }}
[[policy-options.policy-statement.no-66.term]]
name = "rest"
then = {{ action = "accept" }}
[bmp]
sys-name = "rs-under-test"
[[bmp.station]]
name = "pmacct"
address = "127.0.0.1"
port = {station}
route-monitoring = ["pre-policy", "post-policy", "loc-rib"]
statistics-timeout = 1
retry = 1
retry-max = 2
"#
    );
    let (mut rs, _) = ribshard(&dir, &config);
    let sock = socket(&dir);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    // 10.99.0.0/24 from both: A's path is shorter, so it is the Loc-RIB's. 10.66.0.0/24
    // from B: received (pre-policy) and rejected by import policy (not in the Loc-RIB).
    let (sa, routes_a) = statics(51, &["10.99.0.0/24"]);
    let (sb, routes_b) = statics(52, &["10.99.0.0/24", "10.66.0.0/24"]);
    let _a = Bird::start(
        &sub("a"),
        &bird("127.0.0.51", 65051, port_a, port_r, &sa, ""),
    );
    let b = Bird::start(
        &sub("b"),
        &bird(
            "127.0.0.52",
            65052,
            port_b,
            port_r,
            &sb,
            "bgp_path.prepend(65052);",
        ),
    );
    let shown = || loc_rib(&sock);
    assert!(
        wait(30, || shown().len() == 21),
        "{:?}\n{}",
        shown(),
        log_of(&dir)
    );
    let want = shown();
    assert_eq!(
        want.get("10.99.0.0/24").map(|r| r.0.as_str()),
        Some("65051")
    );
    assert!(!want.contains_key("10.66.0.0/24"));

    // Live: what each neighbor sent, as received, and the Loc-RIB, as decided.
    let live = |c: &Pmbmpd| {
        let m = c.messages();
        (
            table(&m, Some("127.0.0.51")),
            table(&m, Some("127.0.0.52")),
            table(&m, None),
            m,
        )
    };
    // What import policy made of it: B's route rejected, A's next hop set.
    let post = |c: &Pmbmpd| {
        let m = c.messages();
        (post_policy(&m, "127.0.0.51"), post_policy(&m, "127.0.0.52"))
    };
    let post_complete = |c: &Pmbmpd| {
        let (a, b) = post(c);
        a.len() == routes_a.len() && b.len() == routes_b.len() - 1
    };
    assert!(
        wait(30, || {
            let (a, b, l, _) = live(&collector);
            a.len() == routes_a.len()
                && b.len() == routes_b.len()
                && l == want
                && post_complete(&collector)
        }),
        "collector: {:?}\nshow route: {want:?}\n{}",
        live(&collector).2,
        log_of(&dir)
    );
    let (a, bt, _, msgs) = live(&collector);
    assert_eq!(a.keys().cloned().collect::<BTreeSet<_>>(), routes_a);
    assert_eq!(bt.keys().cloned().collect::<BTreeSet<_>>(), routes_b);
    // As received: B's own prepend, its next hop, the route policy rejected.
    assert_eq!(
        bt.get("10.66.0.0/24"),
        Some(&("65052 65052".to_string(), "198.51.100.52".to_string()))
    );
    let (post_a, post_b) = post(&collector);
    let mut want_b = bt.clone();
    want_b.remove("10.66.0.0/24");
    assert_eq!(
        post_b, want_b,
        "post-policy: B's accepted routes as received"
    );
    let mut want_a = a.clone();
    want_a.insert(
        "10.51.0.0/24".into(),
        ("65051".into(), "198.51.100.99".into()),
    );
    assert_eq!(post_a, want_a, "post-policy: A's routes, one next hop set");
    assert_eq!(
        a.get("10.51.0.0/24").map(|r| r.1.as_str()),
        Some("198.51.100.51"),
        "pre-policy: as received"
    );
    let init = msgs.iter().find(|m| kind(m) == "init").expect("Initiation");
    assert_eq!(init["bmp_init_info_sysname"], "rs-under-test");
    assert!(init["bmp_init_info_sysdescr"]
        .as_str()
        .unwrap()
        .contains("ribshard"));
    for (ip, asn) in [("127.0.0.51", 65051), ("127.0.0.52", 65052)] {
        let up = msgs
            .iter()
            .find(|m| kind(m) == "peer_up" && m["peer_ip"] == ip)
            .unwrap_or_else(|| panic!("no Peer Up for {ip}"));
        assert_eq!(up["peer_asn"], asn);
        assert_eq!(up["local_ip"], "127.0.0.50");
        assert_eq!(up["bgp_id"], ip);
    }
    assert!(
        msgs.iter()
            .any(|m| kind(m) == "peer_up" && m["peer_type"] == 3),
        "no Loc-RIB Peer Up"
    );
    // Statistics: each neighbor's Adj-RIB-In and the Loc-RIB.
    assert!(
        wait(10, || collector.messages().iter().any(|m| kind(m)
            == "stats"
            && m["peer_ip"] == "127.0.0.52"
            && m["counter_type"] == 7
            && m["counter_value"] == routes_b.len())),
        "no Adj-RIB-In statistics"
    );
    // Its post-policy Adj-RIB-In, as the shards count it (type 20, and per AFI/SAFI 21):
    // all but the route import policy rejected. pmbmpd (pmacct 1.7) predates these types
    // and shows their values as octets.
    let octets = |b: &[u8]| {
        b.iter()
            .map(|x| format!("{x:02X}"))
            .collect::<Vec<_>>()
            .join("-")
    };
    let accepted = (routes_b.len() as u64 - 1).to_be_bytes();
    let per_family = [&[0, 1, 1][..], &accepted[..]].concat();
    for (ty, value) in [(20, octets(&accepted)), (21, octets(&per_family))] {
        assert!(
            wait(10, || collector.messages().iter().any(|m| kind(m)
                == "stats"
                && m["peer_ip"] == "127.0.0.52"
                && m["counter_type"] == ty
                && m["counter_value"] == value.as_str())),
            "no post-policy Adj-RIB-In statistics of type {ty} ({value})"
        );
    }
    // And the counters of what its UPDATEs did, as pmbmpd decodes them: the one route
    // import policy rejected (type 0, counted by the shards); no duplicate announcements
    // (1) or withdraws (2), looping paths (3 to 5) or treat-as-withdraw UPDATEs and
    // prefixes (11, 12) from BIRD.
    let counters = [
        (0, 1),
        (1, 0),
        (2, 0),
        (3, 0),
        (4, 0),
        (5, 0),
        (11, 0),
        (12, 0),
    ];
    for (ty, want) in counters {
        assert!(
            wait(10, || collector.messages().iter().any(|m| kind(m)
                == "stats"
                && m["peer_ip"] == "127.0.0.52"
                && m["counter_type"] == ty
                && m["counter_value"] == want)),
            "no statistics of type {ty} ({want}): {:?}",
            collector
                .messages()
                .iter()
                .filter(|m| kind(m) == "stats")
                .take(8)
                .collect::<Vec<_>>()
        );
    }
    assert!(
        wait(10, || collector.messages().iter().any(|m| kind(m)
            == "stats"
            && m["peer_type"] == 3
            && m["counter_type"] == 8
            && m["counter_value"] == 21)),
        "no Loc-RIB statistics"
    );

    // A collector that comes later (this one goes, another starts on the port): a dump of
    // both tables, equal to what the neighbors sent and to `show route`.
    drop(collector);
    let later = Pmbmpd::start(&dir, "later", station);
    assert!(
        wait(30, || {
            let (a, b, l, _) = live(&later);
            a.len() == routes_a.len()
                && b.len() == routes_b.len()
                && l == want
                && post_complete(&later)
        }),
        "dump: {:?} {:?} {:?}\n{}",
        live(&later).0,
        live(&later).1,
        live(&later).2,
        log_of(&dir)
    );
    let (_, dumped_b, _, _) = live(&later);
    assert_eq!(
        dumped_b, bt,
        "the dump of B's routes differs from the live feed"
    );
    assert_eq!(
        post(&later),
        (want_a, want_b),
        "the post-policy dump differs from the live feed"
    );
    // `show bmp`: the station is up, sent both RIBs, and has been written to.
    let (out, ok) = operator::cli(&sock, &["--json", "show", "bmp"]);
    assert!(ok, "{out}");
    let st: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(st.len(), 1, "{out}");
    assert_eq!(st[0]["name"], "pmacct");
    assert_eq!(st[0]["state"], "Up", "{out}");
    assert_eq!(
        st[0]["ribs"],
        serde_json::json!(["pre-policy", "post-policy", "loc-rib"])
    );
    // Two connections: the first collector's and this one's.
    assert_eq!(st[0]["connections"], 2, "{out}");
    assert!(st[0]["written"].as_u64().unwrap_or(0) > 1_000, "{out}");
    let (out, _) = operator::cli(&sock, &["show", "bmp"]);
    assert!(out.contains("pmacct") && out.contains(" Up "), "{out}");

    // B goes (BIRD sends Cease): Peer Down with its NOTIFICATION, and the Loc-RIB loses
    // B's routes (10.99 stays, it is A's).
    b.cmd("disable ribsh");
    assert!(
        wait(30, || {
            let m = later.messages();
            m.iter()
                .any(|m| kind(m) == "peer_down" && m["peer_ip"] == "127.0.0.52")
                && table(&m, None).len() == 11
        }),
        "{:?}\n{}",
        later
            .messages()
            .iter()
            .filter(|m| kind(m) == "peer_down")
            .collect::<Vec<_>>(),
        log_of(&dir)
    );
    let down = later
        .messages()
        .into_iter()
        .find(|m| kind(m) == "peer_down")
        .unwrap();
    assert_eq!(down["reason_type"], 3, "{down}");
    assert_eq!(table(&later.messages(), None), shown());

    // Stopping: A's Peer Down (our Cease, reason 1: local NOTIFICATION), then
    // Termination, administratively closed.
    Command::new("kill")
        .arg("-TERM")
        .arg(rs.0.id().to_string())
        .status()
        .unwrap();
    let _ = rs.0.wait();
    assert!(
        wait(10, || later.messages().iter().any(|m| kind(m) == "term")),
        "no Termination"
    );
    let msgs = later.messages();
    let at = |f: &dyn Fn(&serde_json::Value) -> bool| msgs.iter().position(f);
    let a_down = at(&|m| kind(m) == "peer_down" && m["peer_ip"] == "127.0.0.51");
    let term = at(&|m| kind(m) == "term");
    assert!(a_down.is_some() && a_down < term, "{a_down:?} {term:?}");
    assert_eq!(msgs[a_down.unwrap_or(0)]["reason_type"], 1);
}

#[test]
fn a_collector_that_stops_reading_is_dropped_then_dumped_again() {
    if !have_pmbmpd() {
        return;
    }
    let dir = tempdir("bmp-stall");
    let file = dir.join("synth.mrt");
    let st = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .args([
            "mrt",
            "generate",
            "--prefixes",
            "150000",
            "--peers",
            "2",
            "--out",
        ])
        .arg(&file)
        .status()
        .unwrap();
    assert!(st.success());
    // A collector that accepts and never reads, until told to go.
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let station = stalled.local_addr().unwrap().port();
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let held = std::thread::spawn(move || {
        let c = stalled.accept();
        let _ = gone.recv_timeout(std::time::Duration::from_secs(300));
        drop(c);
        drop(stalled);
    });
    let port_r = free_port("127.0.0.60");
    let config = format!(
        r#"[bgp]
local-as = 65060
router-id = "127.0.0.60"
listen = ["127.0.0.60:{port_r}"]
[bgp.resolution]
enabled = false
[[bgp.group]]
name = "g"
type = "external"
import = ["accept"]
[[bgp.group.neighbor]]
address = "127.0.0.61"
peer-as = 65061
passive = true
[mrt]
inject = ["{}"]
[[bmp.station]]
address = "127.0.0.1"
port = {station}
route-monitoring = ["loc-rib"]
buffer-size = 1
retry = 1
retry-max = 1
"#,
        file.display()
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sock = socket(&dir);
    // Routing goes on while the collector reads nothing: the whole table is decided, and
    // the collector is dropped for falling behind.
    assert!(
        wait(120, || log_of(&dir).contains("fell")),
        "the stalled collector was not dropped\n{}",
        log_of(&dir)
    );
    // `show bmp` says why the station was dropped.
    let (out, _) = operator::cli(&sock, &["show", "bmp"]);
    assert!(out.contains("last error: the station fell"), "{out}");
    let want = loc_rib(&sock);
    // (The synthesized table has one prefix twice.)
    assert!(
        want.len() >= 149_000,
        "routing did not finish: {}",
        want.len()
    );
    let _ = go.send(());
    held.join().unwrap();
    // The collector comes back on the port: the Loc-RIB is dumped to it again, whole.
    let collector = Pmbmpd::start(&dir, "back", station);
    assert!(
        wait(120, || table(&collector.messages(), None).len()
            == want.len()),
        "dumped {} of {}\n{}",
        table(&collector.messages(), None).len(),
        want.len(),
        log_of(&dir)
    );
    assert_eq!(table(&collector.messages(), None), want);
}

/// The Adj-RIB-Out as the collector holds it for one neighbor (the O flag, post-policy):
/// prefix -> (AS path, next hop).
fn adj_rib_out(msgs: &[serde_json::Value], peer: &str) -> BTreeMap<String, (String, String)> {
    routes_where(msgs, |m| {
        m["is_out"] == 1 && m["is_post"] == 1 && m["peer_ip"] == peer
    })
}

/// The prefixes a BIRD holds from its session with ribshard (`ribsh`).
fn bird_prefixes(b: &Bird) -> BTreeSet<String> {
    b.cmd("show route protocol ribsh")
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn a_collector_sees_what_each_neighbor_is_sent() {
    if !have_bird() || !have_pmbmpd() {
        return;
    }
    let dir = tempdir("bmp-out");
    let port_r = free_port("127.0.0.50");
    let (port_a, port_c) = (free_port("127.0.0.51"), free_port("127.0.0.53"));
    let station = free_port("127.0.0.1");
    let collector = Pmbmpd::start(&dir, "first", station);
    // A sends routes and is sent none (export reject); C is sent A's routes but one, which
    // its export policy keeps back.
    let config = format!(
        r#"[bgp]
local-as = 65050
router-id = "127.0.0.50"
listen = ["127.0.0.50:{port_r}"]
[bgp.resolution]
enabled = false
[[bgp.group]]
name = "up"
type = "external"
import = ["accept"]
export = ["reject"]
[[bgp.group.neighbor]]
address = "127.0.0.51"
peer-as = 65051
port = {port_a}
local-address = "127.0.0.50"
multihop = true
passive = true
[[bgp.group]]
name = "down"
type = "external"
import = ["reject"]
export = ["not-9"]
[[bgp.group.neighbor]]
address = "127.0.0.53"
peer-as = 65053
port = {port_c}
local-address = "127.0.0.50"
multihop = true
passive = true
[[policy-options.policy-statement.not-9.term]]
name = "9"
from = {{ route-filter = ["10.51.9.0/24 exact"] }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.not-9.term]]
name = "rest"
then = {{ action = "accept" }}
[[bmp.station]]
name = "pmacct"
address = "127.0.0.1"
port = {station}
route-monitoring = ["adj-rib-out"]
statistics-timeout = 1
retry = 1
retry-max = 2
"#
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sock = socket(&dir);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (sa, routes_a) = statics(51, &[]);
    let a = Bird::start(
        &sub("a"),
        &bird("127.0.0.51", 65051, port_a, port_r, &sa, ""),
    );
    let c = Bird::start(
        &sub("c"),
        &format!(
            r#"router id 127.0.0.53;
log "DIR/bird.log" all;
protocol device {{}}
protocol bgp ribsh {{
  local 127.0.0.53 port {port_c} as 65053;
  neighbor 127.0.0.50 port {port_r} as 65050;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export none; }};
}}
"#
        ),
    );
    let mut want: BTreeSet<String> = routes_a.clone();
    want.remove("10.51.9.0/24");
    assert!(
        wait(30, || bird_prefixes(&c) == want),
        "C holds {:?}\n{}",
        bird_prefixes(&c),
        log_of(&dir)
    );
    // What the collector was told C is sent: what C holds, with our AS in front and our
    // address as next hop; A is sent nothing.
    let sent = |p: &Pmbmpd, peer: &str| adj_rib_out(&p.messages(), peer);
    let as_sent = |t: &BTreeMap<String, (String, String)>| {
        t.keys().cloned().collect::<BTreeSet<_>>() == want
            && t.values()
                .all(|(path, nh)| path == "65050 65051" && nh == "127.0.0.50")
    };
    assert!(
        wait(30, || as_sent(&sent(&collector, "127.0.0.53"))),
        "collector: {:?}\n{}",
        sent(&collector, "127.0.0.53"),
        log_of(&dir)
    );
    assert!(sent(&collector, "127.0.0.51").is_empty());
    // Statistics: the post-policy Adj-RIB-Out of C, as the shards count it (RFC 8671
    // section 5, type 15), and per AFI/SAFI (type 17); none for A, which is sent nothing.
    let stat = |peer: &str, ty: u64| {
        collector
            .messages()
            .iter()
            .filter(|m| kind(m) == "stats" && m["peer_ip"] == peer && m["counter_type"] == ty)
            .filter_map(|m| m["counter_value"].as_u64())
            .next_back()
    };
    assert!(
        wait(10, || stat("127.0.0.53", 15) == Some(want.len() as u64)
            && stat("127.0.0.53", 17) == Some(want.len() as u64)
            && stat("127.0.0.51", 15) == Some(0)),
        "types 15 and 17: C {:?} {:?}, A {:?}",
        stat("127.0.0.53", 15),
        stat("127.0.0.53", 17),
        stat("127.0.0.51", 15)
    );
    let msgs = collector.messages();
    assert!(
        msgs.iter()
            .any(|m| kind(m) == "peer_up" && m["peer_ip"] == "127.0.0.53"),
        "no Peer Up for C"
    );
    // Only the Adj-RIB-Out: no Adj-RIB-In and no Loc-RIB monitoring.
    assert!(
        msgs.iter()
            .filter(|m| kind(m) == "route_monitor")
            .all(|m| m["is_out"] == 1),
        "a route that is not the Adj-RIB-Out"
    );

    // A later collector: a dump equal to what C holds.
    drop(collector);
    let later = Pmbmpd::start(&dir, "later", station);
    assert!(
        wait(30, || as_sent(&sent(&later, "127.0.0.53"))),
        "dump: {:?}\n{}",
        sent(&later, "127.0.0.53"),
        log_of(&dir)
    );
    let (out, ok) = operator::cli(&sock, &["--json", "show", "bmp"]);
    assert!(ok, "{out}");
    let st: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(st[0]["ribs"], serde_json::json!(["adj-rib-out"]), "{out}");

    // A goes: C is sent the withdrawals, and the collector sees them.
    a.cmd("disable ribsh");
    assert!(
        wait(30, || bird_prefixes(&c).is_empty()
            && sent(&later, "127.0.0.53").is_empty()),
        "C: {:?}, collector: {:?}\n{}",
        bird_prefixes(&c),
        sent(&later, "127.0.0.53"),
        log_of(&dir)
    );
}
