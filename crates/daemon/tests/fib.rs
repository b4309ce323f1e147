//! Forwarding with real BIRD 2 peers, each test in a network namespace of its own (`ip netns
//! add`; the daemons run in it with `ip netns exec`, so every port and address there is the
//! test's own): best paths installed into the kernel, replaced and deleted at full-table
//! scale; ECMP; `no-install`; next hops resolved through the kernel's tables (IGP cost, an
//! unreachable next hop); a restart that writes only the differences.

mod common;

use common::lab::*;
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};

fn v4(i: u32) -> String {
    let a = 0x1400_0000 + (i << 8);
    format!("{}.{}.{}.0/24", a >> 24, (a >> 16) & 255, (a >> 8) & 255)
}

fn v6(i: u32) -> String {
    format!("2a00:{:x}:{:x}::/48", i >> 16, i & 0xffff)
}

/// A BIRD speaker at 10.`link`.0.2 in AS `asn` (65001: internal), announcing `routes`
/// (prefixes) to ribshard at 10.`link`.0.1 with these next hops (`nh6` empty: IPv4 only).
fn bird_config(link: u8, asn: u32, routes: &[String], nh4: &str, nh6: &str) -> String {
    let (r4, r6): (Vec<&String>, Vec<&String>) = routes.iter().partition(|r| !r.contains(':'));
    let lines = |rs: &[&String]| -> String {
        rs.iter()
            .map(|r| format!("  route {r} blackhole;\n"))
            .collect()
    };
    format!(
        "router id 10.255.1.{link};\nprotocol device {{}}\n\
         protocol static s4 {{ ipv4;\n{}}}\nprotocol static s6 {{ ipv6;\n{}}}\n\
         protocol bgp peer {{\n  local 10.{link}.0.2 as {asn};\n  neighbor 10.{link}.0.1 as 65001;\n  \
         strict bind on;\n  connect retry time 1;\n  \
         ipv4 {{ import none; export all; next hop address {nh4}; }};\n{}}}\n",
        lines(&r4),
        lines(&r6),
        if nh6.is_empty() {
            String::new()
        } else {
            format!("  ipv6 {{ import none; export all; next hop address {nh6}; }};\n")
        }
    )
}

/// ribshard (AS 65001) with `[fib]`; `groups`: the group tables.
fn ribshard_in(ns: &Netns, dir: &Path, extra: &str, groups: &str) -> Proc {
    ns.ribshard(
        dir,
        &format!(
            "[bgp]\nlocal-as = 65001\nrouter-id = \"10.255.0.1\"\nlisten = [\"0.0.0.0:179\"]\n\
             {extra}\n[fib]\ntable = 254\n{groups}\n"
        ),
    )
}

/// A group with one neighbor, at 10.`link`.0.2, whose routes are accepted; it is sent
/// nothing (an upstream) unless `extra` says `export`.
fn neighbor(group: &str, kind: &str, link: u8, asn: u32, extra: &str) -> String {
    let export = if extra.contains("export") {
        ""
    } else {
        "export = [\"reject\"]\n"
    };
    format!(
        "[[bgp.group]]\nname = \"{group}\"\ntype = \"{kind}\"\nimport = [\"accept\"]\n{export}{extra}\n{}",
        member(link, asn)
    )
}

/// A neighbor at 10.`link`.0.2 in the last group.
fn member(link: u8, asn: u32) -> String {
    format!(
        "[[bgp.group.neighbor]]\naddress = \"10.{link}.0.2\"\npeer-as = {asn}\n\
         local-address = \"10.{link}.0.1\"\nconnect-retry-time = 1\n"
    )
}

fn cli(dir: &Path, args: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .arg("--socket")
        .arg(socket(dir))
        .args(args.split_whitespace())
        .output()
        .expect("ribshard client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The neighbor the active path of `prefix` came from (`show route --json`).
fn active_from(dir: &Path, prefix: &str) -> String {
    let (_, out) = cli(dir, &format!("--json show route {prefix}"));
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        for p in v["paths"].as_array().into_iter().flatten() {
            if p["state"] == "active" {
                return p["from"].as_str().unwrap_or_default().to_string();
            }
        }
    }
    panic!("no active path for {prefix}: {out}")
}

/// `/metrics` from the API's socket, checked by promtool.
fn metrics(dir: &Path) -> String {
    use std::io::{Read, Write};
    let mut c = std::os::unix::net::UnixStream::connect(socket(dir)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.0\r\nHost: ribshard\r\n\r\n")
        .unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    let body = r.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
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
    body
}

fn fib_summary(dir: &Path) -> serde_json::Value {
    let (_, out) = cli(dir, "--json show fib summary");
    serde_json::from_str(&out).unwrap_or(serde_json::Value::Null)
}

/// Waits until `installed` routes are in the kernel with nothing pending.
fn wait_installed(dir: &Path, installed: u64, secs: u64) {
    let ok = wait(secs, || {
        let s = fib_summary(dir);
        s["routes"]["installed"] == installed
            && s["routes"]["wanted"] == installed
            && s["routes"]["pending"] == 0
            && s["holding"] == false
    });
    assert!(
        ok,
        "not {installed} routes installed: {}\n{}",
        fib_summary(dir),
        log_of(dir)
    );
}

fn verify_clean(dir: &Path) {
    let (ok, out) = cli(dir, "fib verify");
    assert!(ok, "fib verify found differences:\n{out}");
    assert!(out.contains("0 differences"), "{out}");
}

/// Our routes in the kernel's main table, counted (`ip` prints one line a route, and one
/// more per next hop of a multipath route, indented).
fn kernel_count(ns: &Netns, family: &str) -> usize {
    ns.ip(&format!("{family} route show table main proto 186"))
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .count()
}

/// Our routes' destinations in the kernel's main table, as `ip -json` reads them.
fn kernel_prefixes(ns: &Netns, family: &str) -> std::collections::BTreeSet<ribshard_wire::Prefix> {
    let out = ns.ip(&format!("{family} -json route show table main proto 186"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["dst"].as_str())
        .map(|d| {
            if d.contains('/') {
                prefix(d)
            } else {
                prefix(&format!("{d}/{}", if d.contains(':') { 128 } else { 32 }))
            }
        })
        .collect()
}

#[test]
fn best_paths_from_bird_are_installed_replaced_and_deleted() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("fib-scale");
    let lab = Lab::new("fs");
    for i in 1..=3 {
        lab.link(i);
    }
    // A: the full table (500,000 IPv4, 100,000 IPv6); B: the first 1,000 and 100 too (an
    // equal-cost second path); C: 100 prefixes of its own, from a `no-install` group.
    let mut a_routes: Vec<String> = (0..500_000).map(v4).collect();
    a_routes.extend((0..100_000).map(v6));
    let b_routes: Vec<String> = (0..1000).map(v4).chain((0..100).map(v6)).collect();
    let c_routes: Vec<String> = (0..100).map(|i| format!("30.0.{i}.0/24")).collect();
    let a_conf = |routes: &[String]| bird_config(1, 65002, routes, "10.1.0.2", "2001:db8:1::2");
    let b_conf = |routes: &[String]| bird_config(2, 65003, routes, "10.2.0.2", "2001:db8:2::2");
    let groups = neighbor("a", "external", 1, 65002, "")
        + &neighbor("b", "external", 2, 65003, "")
        + &neighbor("c", "external", 3, 65004, "no-install = true");
    let _rs = ribshard_in(
        &lab.dut,
        &dir,
        "[bgp.multipath]\nmultiple-as = true",
        &groups,
    );
    let a = BirdNs::start(&lab.peers, &dir, "a", &a_conf(&a_routes));
    let b = BirdNs::start(&lab.peers, &dir, "b", &b_conf(&b_routes));
    let _c = BirdNs::start(
        &lab.peers,
        &dir,
        "c",
        &bird_config(3, 65004, &c_routes, "10.3.0.2", "2001:db8:3::2"),
    );
    wait_installed(&dir, 600_000, 180);
    verify_clean(&dir);
    let ns = &lab.dut;
    assert_eq!(kernel_count(ns, "-4"), 500_000);
    // The kernel's IPv6 table as `ip -json` reads it: exactly the prefixes sent.
    let want: std::collections::BTreeSet<_> = (0..100_000).map(|i| prefix(&v6(i))).collect();
    assert!(
        kernel_prefixes(ns, "-6") == want,
        "the kernel's IPv6 routes"
    );
    // ECMP: both next hops, as `ip` shows them.
    let ecmp = ns.ip("route show 20.0.0.0/24 table main proto 186");
    assert!(
        ecmp.contains("via 10.1.0.2 dev v1") && ecmp.contains("via 10.2.0.2 dev v2"),
        "{ecmp}"
    );
    let one = ns.ip(&format!("route show {} table main proto 186", v4(5000)));
    assert!(
        one.contains("via 10.1.0.2 dev v1") && !one.contains("10.2.0.2"),
        "{one}"
    );
    // no-install: in the Loc-RIB, not in the kernel.
    assert!(ns
        .ip("route show 30.0.0.0/16 table main proto 186")
        .trim()
        .is_empty());
    let (_, shown) = cli(&dir, "show route 30.0.5.0/24");
    assert!(shown.contains("30.0.5.0/24"), "{shown}");

    // Replaced: A stops sending 0..100 (now B's alone), B adds 1,000..2,000 (ECMP now).
    a.reconfigure(&dir, "a", &a_conf(&a_routes[100..]));
    let b_more: Vec<String> = (0..2000).map(v4).chain((0..100).map(v6)).collect();
    b.reconfigure(&dir, "b", &b_conf(&b_more));
    assert!(
        wait(60, || {
            let r = ns.ip("route show 20.0.5.0/24 table main proto 186");
            let e = ns.ip("route show 20.5.220.0/24 table main proto 186");
            r.contains("via 10.2.0.2") && !r.contains("10.1.0.2") && e.contains("10.2.0.2")
        }),
        "routes not replaced: {}",
        fib_summary(&dir)
    );
    wait_installed(&dir, 600_000, 60);
    verify_clean(&dir);

    // Deleted: A drops its last 100,000 IPv4 prefixes.
    let mut fewer: Vec<String> = (100..400_000).map(v4).collect();
    fewer.extend((0..100_000).map(v6));
    a.reconfigure(&dir, "a", &a_conf(&fewer));
    wait_installed(&dir, 500_000, 120);
    verify_clean(&dir);
    let want: std::collections::BTreeSet<_> = (0..400_000).map(|i| prefix(&v4(i))).collect();
    assert!(
        kernel_prefixes(ns, "-4") == want,
        "the kernel's IPv4 routes"
    );
    assert!(ns
        .ip("route show 27.161.0.0/16 table main proto 186")
        .trim()
        .is_empty());
    let s = fib_summary(&dir);
    assert_eq!(s["netlink"]["errors"], 0, "{s}");
    assert!(
        s["netlink"]["batches"].as_u64().unwrap_or(u64::MAX) < 2_000,
        "bulk: {s}"
    );
}

#[test]
fn next_hops_resolve_through_the_kernel_tables() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("fib-resolve");
    let lab = Lab::new("fr");
    for i in 1..=3 {
        lab.link(i);
    }
    let ns = &lab.dut;
    // The next hops are two hops away, through the IGP's routes (metric = IGP cost).
    ns.ip("route add 10.9.0.0/24 via 10.1.0.2 metric 10");
    ns.ip("route add 10.8.0.0/24 via 10.2.0.2 metric 20");
    let p = ["20.0.0.0/24".to_string()];
    let groups = neighbor("ibgp", "internal", 1, 65001, "")
        + &member(2, 65001)
        + &neighbor("down", "external", 3, 65009, "export = [\"accept\"]");
    let _rs = ribshard_in(ns, &dir, "", &groups);
    let _a = BirdNs::start(
        &lab.peers,
        &dir,
        "a",
        &bird_config(1, 65001, &p, "10.9.0.2", ""),
    );
    let _b = BirdNs::start(
        &lab.peers,
        &dir,
        "b",
        &bird_config(2, 65001, &p, "10.8.0.2", ""),
    );
    // A downstream that receives what ribshard advertises.
    let down = BirdNs::start(
        &lab.peers,
        &dir,
        "down",
        "router id 10.255.1.3;\nprotocol device {}\n\
         protocol bgp peer {\n  local 10.3.0.2 as 65009;\n  neighbor 10.3.0.1 as 65001;\n  \
         strict bind on;\n  connect retry time 1;\n  ipv4 { import all; export none; };\n}\n",
    );
    let route = || ns.ip("route show 20.0.0.0/24 table main proto 186");
    let downstream_has = || down.cmd("show route 20.0.0.0/24").contains("20.0.0.0/24");
    // The lower IGP cost wins: A's next hop, through 10.1.0.2.
    assert!(
        wait(30, || route().contains("via 10.1.0.2 dev v1")),
        "not installed through A: {}\n{}",
        route(),
        cli(&dir, "--json show route 20.0.0.0/24 detail").1
    );
    assert!(wait(30, downstream_has), "not advertised downstream");
    // The IGP cost changes (the metric is part of a route's key: a new route, the old one
    // removed): B wins.
    ns.ip("route add 10.9.0.0/24 via 10.1.0.2 metric 30");
    ns.ip("route del 10.9.0.0/24 via 10.1.0.2 metric 10");
    assert!(
        wait(10, || route().contains("via 10.2.0.2 dev v2")),
        "IGP cost did not decide: {}",
        route()
    );
    assert_eq!(active_from(&dir, "20.0.0.0/24"), "10.2.0.2");
    // Neither next hop resolves: hidden, out of the kernel, withdrawn downstream.
    ns.ip("route del 10.9.0.0/24 metric 30");
    ns.ip("route del 10.8.0.0/24 metric 20");
    assert!(
        wait(10, || route().trim().is_empty()),
        "still installed: {}",
        route()
    );
    assert!(
        wait(10, || !downstream_has()),
        "still advertised downstream"
    );
    let (_, hidden) = cli(&dir, "--json show route 20.0.0.0/24 hidden");
    assert!(hidden.contains("next-hop-unresolved"), "{hidden}");
    // One resolves again.
    ns.ip("route add 10.8.0.0/24 via 10.2.0.2 metric 20");
    assert!(wait(10, || route().contains("via 10.2.0.2 dev v2")));
    assert!(wait(10, downstream_has));
    verify_clean(&dir);
}

#[test]
fn a_restart_writes_only_the_differences() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("fib-restart");
    let lab = Lab::new("fx");
    lab.link(1);
    lab.link(2);
    let all: Vec<String> = (0..20_000).map(v4).collect();
    let a_conf = |routes: &[String]| bird_config(1, 65002, routes, "10.1.0.2", "");
    let b_conf = |routes: &[String]| bird_config(2, 65003, routes, "10.2.0.2", "");
    let groups = neighbor("a", "external", 1, 65002, "") + &neighbor("b", "external", 2, 65003, "");
    let a = BirdNs::start(&lab.peers, &dir, "a", &a_conf(&all));
    let b = BirdNs::start(&lab.peers, &dir, "b", &b_conf(&[]));
    {
        let _rs = ribshard_in(&lab.dut, &dir, "", &groups);
        wait_installed(&dir, 20_000, 60);
    }
    // Stopped (SIGKILL here, as a crash; SIGTERM keeps them too): the routes stay.
    assert_eq!(kernel_count(&lab.dut, "-4"), 20_000);
    // Meanwhile: A drops 0..1,000 and 1,000..2,000, B takes 1,000..2,000 over (another next
    // hop), A adds 20,000..21,000.
    let now: Vec<String> = (2000..21_000).map(v4).collect();
    a.reconfigure(&dir, "a", &a_conf(&now));
    b.reconfigure(
        &dir,
        "b",
        &b_conf(&(1000..2000).map(v4).collect::<Vec<_>>()),
    );
    let _rs = ribshard_in(&lab.dut, &dir, "", &groups);
    wait_installed(&dir, 20_000, 60);
    verify_clean(&dir);
    let s = fib_summary(&dir);
    assert_eq!(s["kept_at_start"], 18_000, "{s}");
    assert_eq!(
        s["netlink"]["route_writes"], 2_000,
        "only the differences: {s}"
    );
    assert_eq!(s["netlink"]["route_deletes"], 1_000, "{s}");
    let m = metrics(&dir);
    for line in [
        "ribshard_fib_routes{state=\"installed\"} 20000",
        "ribshard_fib_netlink_messages_total{operation=\"route-write\"} 2000",
        "ribshard_fib_netlink_messages_total{operation=\"route-delete\"} 1000",
    ] {
        assert!(m.contains(line), "no {line} in:\n{m}");
    }
    assert!(lab
        .dut
        .ip("route show 20.0.5.0/24 table main proto 186")
        .trim()
        .is_empty());
    assert!(lab
        .dut
        .ip(&format!("route show {} table main proto 186", v4(1500)))
        .contains("via 10.2.0.2"));
}

/// `ribshard restart --graceful` with `[fib] retain = false`: the kernel's routes stay the
/// whole time (the writer stops first and leaves them, whatever `retain` says), and the new
/// process keeps every one of them once its deferral ends: nothing deleted, nothing
/// written again.
#[test]
fn a_graceful_restart_keeps_the_kernel_routes() {
    if !have_bird() {
        return;
    }
    const N: usize = 5_000;
    let dir = tempdir("fib-graceful");
    let lab = Lab::new("fg");
    lab.link(1);
    let all: Vec<String> = (0..N as u32).map(v4).collect();
    let _a = BirdNs::start(
        &lab.peers,
        &dir,
        "a",
        &bird_config(1, 65002, &all, "10.1.0.2", ""),
    );
    let extra = format!(
        "[bgp.graceful-restart]\nstate-file = \"{}\"\n",
        dir.join("gr-mark").display()
    );
    // `retain` lands in [fib], before the groups.
    let groups = "retain = false\n".to_string() + &neighbor("a", "external", 1, 65002, "");
    let _rs = ribshard_in(&lab.dut, &dir, &extra, &groups);
    wait_installed(&dir, N as u64, 60);
    let (ok, out) = cli(&dir, "restart --graceful");
    assert!(ok, "{out}");
    assert!(out.contains("keeps our routes"), "{out}");
    let mut polls = 0;
    let back = wait(60, || {
        let n = kernel_count(&lab.dut, "-4");
        assert_eq!(
            n,
            N,
            "poll {polls}: routes left the kernel\n{}",
            log_of(&dir)
        );
        polls += 1;
        let log = log_of(&dir);
        log.matches("ribshard running").count() == 2
            && log.contains("graceful restart: restarting speaker")
            && fib_summary(&dir)["holding"] == false
    });
    assert!(back, "not back in 60 s:\n{}", log_of(&dir));
    wait_installed(&dir, N as u64, 30);
    let s = fib_summary(&dir);
    assert_eq!(s["kept_at_start"], N, "{s}");
    assert_eq!(s["netlink"]["route_writes"], 0, "{s}");
    assert_eq!(s["netlink"]["route_deletes"], 0, "{s}");
    assert_eq!(kernel_count(&lab.dut, "-4"), N);
    verify_clean(&dir);
}
