//! `ribshard monitor route`, `monitor log` and `set log level` against a running daemon
//! between two real BIRD 2 peers: what the watch streams is what a downstream receives.

mod common;

use common::operator::{bird_conf, bird_table, cli, Follow};
use common::*;
use ribshard_mgmt::api::{LogLevels, RouteChange};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};

/// Routes upstream A announces once its static protocol is enabled.
const ROUTES: usize = 300;

fn route(i: usize) -> String {
    format!("198.18.{}.{}/30", i / 64, i % 64 * 4)
}

#[test]
fn monitor_route_streams_what_a_bird_downstream_receives() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("monitor-route");
    let port_r = free_port("127.0.0.40");
    let (port_a, port_b) = (free_port("127.0.0.41"), free_port("127.0.0.42"));
    let sock = socket(&dir);
    let routes: Vec<String> = (0..ROUTES).map(route).collect();
    let downstream = format!(
        "[[bgp.group]]\nname = \"down\"\ntype = \"external\"\npeer-as = 65042\n\
         import = [\"reject\"]\nexport = [\"accept\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.42\"\nport = {port_b}\n\
         local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n"
    );
    // A's prefix limit, never reached: `show bgp neighbor` counts against it.
    let limit = "[bgp.group.prefix-limit.inet-unicast]\nmaximum = 1000\nteardown = false\n";
    let config = ribshard_config(port_r, "127.0.0.41", 65041, port_a, &downstream, true).replacen(
        "[[bgp.group.neighbor]]",
        &format!("{limit}[[bgp.group.neighbor]]"),
        1,
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let a = Bird::start(
        &sub("a"),
        &bird_conf("127.0.0.41", 65041, port_a, port_r, &routes),
    );
    let b = Bird::start(
        &sub("b"),
        &bird_conf("127.0.0.42", 65042, port_b, port_r, &[]),
    );
    assert!(
        wait(30, || a.established("ribsh") && b.established("ribsh")),
        "{}",
        log_of(&dir)
    );
    // Three watchers: every change (JSON lines), one prefix from one neighbor (text), and
    // one that never reads (it must hold nothing up).
    let all = Follow::start(&sock, &["--json", "monitor", "route"]);
    let one = Follow::start(
        &sock,
        &[
            "monitor",
            "route",
            "198.18.0.0/30",
            "neighbor",
            "127.0.0.41",
        ],
    );
    let mut idle = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .args(["--socket", sock.to_str().unwrap(), "monitor", "route"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait(10, || log_of(&dir)
        .matches("route watch started")
        .count()
        == 3));

    // A table load: each prefix once, as B receives it.
    a.cmd("enable s4");
    assert!(
        wait(30, || bird_table(&b).len() == ROUTES),
        "B holds {}",
        bird_table(&b).len()
    );
    assert!(
        wait(10, || all.lines().len() == ROUTES),
        "{}",
        all.lines().len()
    );
    let changes: Vec<RouteChange> = all
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let added: BTreeSet<String> = changes.iter().map(|c| c.prefix.clone()).collect();
    assert_eq!(added, bird_table(&b));
    for c in &changes {
        assert_eq!((c.change.as_str(), c.table.as_str()), ("added", "inet.0"));
        let best = c.best.as_ref().unwrap();
        assert_eq!(
            (
                best.from.as_str(),
                best.as_path.as_str(),
                best.next_hop.as_str()
            ),
            ("127.0.0.41", "65041", "198.51.100.41")
        );
    }

    // show bgp neighbor: the chains, our router ID, the limit with what it counts.
    let (text, ok) = cli(&sock, &["--json", "show", "bgp", "neighbor", "127.0.0.41"]);
    assert!(ok, "{text}");
    let n: Vec<ribshard_mgmt::api::Neighbor> = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (n[0].import.as_slice(), n[0].export.as_slice()),
        (&["accept".to_string()][..], &["reject".to_string()][..])
    );
    assert_eq!(n[0].local_router_id, "127.0.0.40");
    let l = &n[0].prefix_limits;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(
        (
            l[0].table.as_str(),
            l[0].maximum,
            l[0].teardown,
            l[0].received
        ),
        ("inet.0", 1000, false, ROUTES as u64)
    );
    let (text, _) = cli(&sock, &["show", "bgp", "neighbor", "127.0.0.41"]);
    assert!(text.contains("Local ID: 127.0.0.40"), "{text}");
    assert!(
        text.contains("Import: [ accept ]   Export: [ reject ]"),
        "{text}"
    );
    assert!(
        text.contains("Prefix limit inet.0: maximum 1000, 300 received (before import policy), over it: logged, routes kept"),
        "{text}"
    );

    // A withdrawal: each prefix once more, gone, as B loses it.
    a.cmd("disable s4");
    assert!(wait(30, || bird_table(&b).is_empty()));
    assert!(
        wait(10, || all.lines().len() == 2 * ROUTES),
        "{}",
        all.lines().len()
    );
    let withdrawn: Vec<RouteChange> = all.lines()[ROUTES..]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(withdrawn
        .iter()
        .all(|c| c.change == "withdrawn" && c.best.is_none() && c.old.is_some()));
    assert_eq!(
        withdrawn
            .iter()
            .map(|c| c.prefix.clone())
            .collect::<BTreeSet<_>>(),
        added
    );
    // The filtered watcher saw its prefix come and go, in words.
    assert!(wait(5, || one.lines().len() == 2), "{:?}", one.lines());
    let l = one.lines();
    assert!(
        l[0].contains(
            "inet.0 198.18.0.0/30 added from 127.0.0.41 next hop 198.51.100.41 AS path 65041 I"
        ),
        "{l:?}"
    );
    assert!(
        l[1].contains("198.18.0.0/30 withdrawn (was from 127.0.0.41"),
        "{l:?}"
    );
    assert!(idle.try_wait().unwrap().is_none());
    let _ = idle.kill();
    let _ = idle.wait();

    // Bad filters are refused with the reason.
    let (text, ok) = cli(&sock, &["monitor", "route", "neighbor", "127.0.0.99"]);
    assert!(!ok && text.contains("no such neighbor"), "{text}");
    let (text, ok) = cli(&sock, &["monitor", "route", "community", "x:y"]);
    assert!(!ok && text.contains("community"), "{text}");
}

#[test]
fn monitor_log_and_a_neighbors_own_log_level() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("monitor-log");
    let port_r = free_port("127.0.0.40");
    let port_a = free_port("127.0.0.41");
    let sock = socket(&dir);
    let (_rs, _) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.41", 65041, port_a, "", true),
    );
    let d = dir.join("a");
    std::fs::create_dir_all(&d).unwrap();
    let a = Bird::start(&d, &bird_conf("127.0.0.41", 65041, port_a, port_r, &[]));
    assert!(wait(30, || a.established("ribsh")), "{}", log_of(&dir));
    let tail = Follow::start(&sock, &["monitor", "log"]);
    assert!(wait(10, || tail
        .lines()
        .iter()
        .any(|l| l.contains("a client follows the log"))));
    // Debug for one neighbor: its OPEN (a debug event) is logged when it comes back; the
    // daemon stays at info.
    let (text, ok) = cli(
        &sock,
        &[
            "--json",
            "set",
            "log",
            "level",
            "debug",
            "neighbor",
            "127.0.0.41",
        ],
    );
    assert!(ok, "{text}");
    let levels: LogLevels = serde_json::from_str(&text).unwrap();
    assert_eq!(levels.daemon, "info");
    assert_eq!(levels.neighbors.len(), 1);
    assert_eq!(levels.neighbors[0].neighbor, "127.0.0.41");
    let (text, ok) = cli(&sock, &["clear", "bgp", "neighbor", "127.0.0.41"]);
    assert!(ok, "{text}");
    assert!(
        wait(30, || tail.lines().iter().any(|l| l.contains("DEBUG")
            && l.contains("OPEN accepted")
            && l.contains("127.0.0.41"))),
        "{:?}",
        tail.lines()
    );
    assert!(log_of(&dir).contains("OPEN accepted"));
    // The tail has the info lines too, as the log does.
    assert!(tail.lines().iter().any(|l| l.contains("log level set")));
    let (text, _) = cli(&sock, &["show", "log", "level"]);
    assert!(text.contains("neighbor 127.0.0.41: debug"), "{text}");
    // Back to the daemon's level: its debug ends.
    let (text, ok) = cli(
        &sock,
        &["set", "log", "level", "info", "neighbor", "127.0.0.41"],
    );
    assert!(ok && !text.contains("neighbor 127.0.0.41"), "{text}");
    for (args, want) in [
        (vec!["set", "log", "level", "loud"], "not a level"),
        (
            vec!["set", "log", "level", "debug", "neighbor", "127.0.0.99"],
            "no such neighbor",
        ),
    ] {
        let (text, ok) = cli(&sock, &args);
        assert!(!ok && text.contains(want), "{args:?}: {text}");
    }
}
