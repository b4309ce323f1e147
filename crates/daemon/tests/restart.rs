//! Restarts of ribshard against real BIRD 2 and FRR. Without `[bgp.graceful-restart]` ribshard
//! is a helper only (RFC 4724 section 4.2): its peers drop its routes while it is down, and
//! what is checked is that it comes back whole, waiting for its peers' End-of-RIB before it
//! advertises. With it, ribshard restarts as a graceful restart speaker (section 4.1): its
//! peers keep its routes before, during and after the restart (SIGTERM, and `ribshard
//! restart --graceful`).

mod common;

use common::*;
use std::process::Command;

/// Prefixes the upstream BIRD announces.
const ROUTES: usize = 1000;

fn bird(addr: &str, asn: u32, port: u16, port_r: u16, statics: &str, export: &str) -> String {
    bird_with(addr, asn, port, port_r, statics, export, "")
}

/// [`bird`] with more options of its session with ribshard.
fn bird_with(
    addr: &str,
    asn: u32,
    port: u16,
    port_r: u16,
    statics: &str,
    export: &str,
    options: &str,
) -> String {
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  graceful restart on; {options}
  ipv4 {{ import all; export {export}; next hop address 198.51.100.1; }};
}}
"#
    )
}

/// The upstream BIRD (in `dir`/a, announcing the prefixes) and the downstream one (`dir`/b).
fn birds(dir: &std::path::Path, port_a: u16, port_b: u16, port_r: u16) -> (Bird, Bird) {
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let statics: String = (0..ROUTES)
        .map(|i| format!("route 10.{}.{}.0/24 blackhole; ", i / 256, i % 256))
        .collect();
    let a = Bird::start(
        &sub("a"),
        &bird("127.0.0.41", 65041, port_a, port_r, &statics, "all"),
    );
    let b = Bird::start(
        &sub("b"),
        &bird("127.0.0.42", 65042, port_b, port_r, "", "none"),
    );
    (a, b)
}

/// The routes BIRD learned from ribshard, as `show route count` words it.
fn learned(b: &Bird) -> Option<usize> {
    let out = b.cmd("show route count protocol ribsh");
    out.lines()
        .find_map(|l| l.split(" of ").next()?.trim().parse().ok())
}

/// An upstream BIRD (graceful restart on) announces a thousand prefixes through ribshard
/// to a downstream BIRD (graceful restart on). ribshard is stopped (SIGTERM) and started
/// again: both sessions come back, ribshard's start-up deferral ends because every
/// neighbor sent End-of-RIB (not by a timer), and the downstream ends with every prefix.
#[test]
fn graceful_restart_peers_across_a_ribshard_restart() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("gr-restart");
    let port_r = free_port("127.0.0.40");
    let (port_a, port_b) = (free_port("127.0.0.41"), free_port("127.0.0.42"));
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [[bgp.group]]\nname = \"up\"\ntype = \"external\"\npeer-as = 65041\n\
         import = [\"accept\"]\nexport = [\"reject\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.41\"\nport = {port_a}\n\
         local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n\
         [[bgp.group]]\nname = \"down\"\ntype = \"external\"\npeer-as = 65042\n\
         import = [\"reject\"]\nexport = [\"accept\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.42\"\nport = {port_b}\n\
         local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n"
    );
    let (rs, _) = ribshard(&dir, &config);
    let (a, b) = birds(&dir, port_a, port_b, port_r);
    assert!(
        wait(30, || learned(&b) == Some(ROUTES)),
        "before: {}\n{}",
        b.cmd("show route count protocol ribsh"),
        log_of(&dir)
    );

    // Stopped: each BIRD is sent Cease / Administrative Shutdown, and drops ribshard's
    // routes (a NOTIFICATION ends graceful restart, RFC 8538 section 3).
    let _ = Command::new("kill")
        .args(["-TERM", &rs.0.id().to_string()])
        .status();
    let mut rs = rs;
    let _ = rs.0.wait();
    drop(rs);
    assert!(wait(10, || !b.established("ribsh")));
    assert_eq!(learned(&b).unwrap_or(0), 0);

    // Started again, on the same configuration.
    let (_rs, _) = ribshard(&dir, &config);
    for x in [&a, &b] {
        assert!(
            wait(30, || x.established("ribsh")),
            "{}\n{}",
            x.cmd("show protocols all ribsh"),
            log_of(&dir)
        );
    }
    assert!(
        wait(30, || learned(&b) == Some(ROUTES)),
        "after: {}\n{}",
        b.cmd("show route count protocol ribsh"),
        log_of(&dir)
    );
    let log = log_of(&dir);
    assert!(
        log.contains("update-delay over (every neighbor sent End-of-RIB)"),
        "the deferral did not end on End-of-RIB:\n{log}"
    );
    assert!(!log.contains("max-delay passed"), "{log}");
    // Each BIRD saw ribshard's graceful restart capability in the new session.
    for x in [&a, &b] {
        let all = x.cmd("show protocols all ribsh");
        let theirs = all
            .split("Neighbor capabilities")
            .nth(1)
            .unwrap_or_default();
        let theirs = theirs.split("Session:").next().unwrap_or_default();
        assert!(theirs.contains("Graceful restart"), "{all}");
    }
    // The downstream was sent each prefix once since the restart: nothing before the
    // upstream's table was in, nothing twice (BIRD counts per session).
    let all = b.cmd("show protocols all ribsh");
    assert_eq!(import_updates(&all), Some(ROUTES), "{all}");
}

/// BIRD's count of UPDATEs received for prefixes (`Import updates`, first column).
fn import_updates(protocol: &str) -> Option<usize> {
    protocol
        .lines()
        .find(|l| l.trim_start().starts_with("Import updates:"))?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// The prefixes FRR holds from ribshard (stale ones included), from its JSON table.
fn frr_count(vtysh: &impl Fn(&str) -> String) -> Option<usize> {
    let out = vtysh("show bgp ipv4 unicast json");
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    Some(v["routes"].as_object()?.len())
}

/// Polls both downstreams until `done` says so (or `secs` pass), asserting at every poll
/// that each still holds every prefix: a route lost for a moment at a peer is a failure.
fn never_lost(
    what: &str,
    secs: u64,
    b: &Bird,
    f: &impl Fn(&str) -> String,
    dir: &std::path::Path,
    mut done: impl FnMut() -> bool,
) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut polls = 0;
    loop {
        let (at_b, at_f) = (learned(b), frr_count(f));
        assert_eq!(
            at_b,
            Some(ROUTES),
            "{what}: BIRD lost routes (poll {polls}):\n{}\n{}",
            b.cmd("show protocols all ribsh"),
            log_of(dir)
        );
        assert_eq!(
            at_f,
            Some(ROUTES),
            "{what}: FRR lost routes (poll {polls}):\n{}\n{}",
            f("show bgp neighbors 127.0.0.40"),
            log_of(dir)
        );
        polls += 1;
        if done() {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "{what}: not done in {secs} s\n{}\n{}\n{}",
            b.cmd("show protocols all ribsh"),
            f("show bgp neighbors 127.0.0.40"),
            log_of(dir)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Whether the restart is over at both downstreams: sessions up, BIRD no longer holding
/// ribshard's routes as stale (our End-of-RIB came), FRR Established.
fn recovered(b: &Bird, f: &impl Fn(&str) -> String) -> bool {
    let p = b.cmd("show protocols all ribsh");
    p.contains("Established")
        && !p.contains("Neighbor graceful restart active")
        && f("show bgp neighbors 127.0.0.40").contains("BGP state = Established")
}

/// ribshard with `[bgp.graceful-restart]` between an upstream BIRD (a thousand prefixes)
/// and two downstreams, BIRD 2 and FRR, both graceful restart helpers. Restarted by SIGTERM
/// and then by `ribshard restart --graceful`, it loses no route at either downstream:
/// before, while it is down (the sessions closed without NOTIFICATION, the peers hold its
/// routes as stale), and after (its new OPEN says Restart State and Forwarding State, it
/// waits for every neighbor's End-of-RIB, then sends its own, and the peers' stale routes
/// are refreshed, not dropped).
#[test]
fn a_graceful_restart_loses_no_route_at_bird_and_frr() {
    if !have_bird() || !std::path::Path::new("/usr/lib/frr/bgpd").exists() {
        ribshard_mrt::skipped("needs bird and FRR bgpd");
        return;
    }
    let dir = tempdir("gr-speaker");
    let port_r = free_port("127.0.0.40");
    let (port_a, port_b, port_f) = (
        free_port("127.0.0.41"),
        free_port("127.0.0.42"),
        free_port("127.0.0.43"),
    );
    let mark = dir.join("state").join("graceful-restart");
    // ribshard connects to FRR (whose own retries after a refused connection are slow),
    // and takes BIRD's connections. FRR is sent BIRD's next hop (it refuses 127/8 ones).
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [bgp.graceful-restart]\nrestart-time = 90\nstate-file = \"{}\"\n{}\
         [[bgp.group]]\nname = \"up\"\ntype = \"external\"\npeer-as = 65041\n\
         import = [\"accept\"]\nexport = [\"reject\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.41\"\nport = {port_a}\n\
         local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n\
         [[bgp.group]]\nname = \"down\"\ntype = \"external\"\n\
         import = [\"reject\"]\nexport = [\"accept\"]\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.42\"\npeer-as = 65042\nport = {port_b}\n\
         local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.43\"\npeer-as = 65043\nport = {port_f}\n\
         local-address = \"127.0.0.40\"\nmultihop = true\nconnect-retry-time = 2\n\
         next-hop-self = false\n",
        mark.display(),
        // Set to check that this test fails when SIGTERM does not restart gracefully.
        if std::env::var_os("RIBSHARD_TEST_SIGTERM_SHUTDOWN").is_some() {
            "on-sigterm = \"shutdown\"\n"
        } else {
            ""
        }
    );
    let (rs, _) = ribshard(&dir, &config);
    let sock = dir.join("ribshard.sock");
    let (_a, b) = birds(&dir, port_a, port_b, port_r);
    let frr_dir = dir.join("f");
    std::fs::create_dir_all(&frr_dir).unwrap();
    let (_frr, f) = frr(
        &frr_dir,
        &format!(
            "frr defaults traditional\nhostname f\nlog file {}/frr.log debugging\n\
             debug bgp neighbor-events\ndebug bgp graceful-restart\n!\nrouter bgp 65043\n\
             bgp router-id 127.0.0.43\n no bgp ebgp-requires-policy\n bgp graceful-restart\n\
             neighbor 127.0.0.40 remote-as 65040\n neighbor 127.0.0.40 port {port_r}\n\
             neighbor 127.0.0.40 update-source 127.0.0.43\n neighbor 127.0.0.40 ebgp-multihop 2\n\
             neighbor 127.0.0.40 timers connect 2\n!\n",
            dir.join("f").display()
        ),
        port_f,
    );
    assert!(
        wait(40, || learned(&b) == Some(ROUTES)
            && frr_count(&f) == Some(ROUTES)),
        "before: {}\n{}\n{}",
        b.cmd("show route count protocol ribsh"),
        f("show bgp summary"),
        log_of(&dir)
    );
    let (out, ok) = operator::cli(&sock, &["show", "configuration"]);
    assert!(
        ok && out.contains("[bgp.graceful-restart]") && out.contains("restart-time = 90"),
        "{out}"
    );
    // The helpers saw our families in the capability (BIRD: "AF supported").
    let caps = b.cmd("show protocols all ribsh");
    assert!(caps.contains("AF supported: ipv4"), "{caps}");
    never_lost("before", 5, &b, &f, &dir, || true);

    // SIGTERM: sessions closed without NOTIFICATION, the mark left for the next start.
    let _ = Command::new("kill")
        .args(["-TERM", &rs.0.id().to_string()])
        .status();
    let mut rs = rs;
    let _ = rs.0.wait();
    drop(rs);
    let log = log_of(&dir);
    assert!(
        log.contains("connection closed without NOTIFICATION"),
        "{log}"
    );
    assert!(mark.exists(), "no mark at {}", mark.display());
    // Down for a few seconds: both peers hold every route (stale).
    let t = std::time::Instant::now();
    never_lost("while down", 30, &b, &f, &dir, || {
        !b.established("ribsh") && t.elapsed() > std::time::Duration::from_secs(3)
    });

    // Started again: Restart State, every route kept while the tables come back, then the
    // peers' stale routes refreshed by our End-of-RIB.
    let (_rs, _) = ribshard(&dir, &config);
    never_lost("after SIGTERM", 60, &b, &f, &dir, || {
        log_of(&dir).contains("update-delay over") && recovered(&b, &f)
    });
    let log = log_of(&dir);
    assert!(
        log.contains("graceful restart: restarting speaker"),
        "{log}"
    );
    assert!(
        log.contains("update-delay over (every neighbor sent End-of-RIB)"),
        "{log}"
    );
    assert!(!mark.exists(), "the mark speaks for one start only");
    let t = std::time::Instant::now();
    never_lost("settled after SIGTERM", 10, &b, &f, &dir, || {
        t.elapsed() > std::time::Duration::from_secs(3)
    });

    // `ribshard restart --graceful`: the same process starts itself again.
    let (out, ok) = operator::cli(&sock, &["restart", "--graceful"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("127.0.0.42 (AS65042): keeps our routes"),
        "{out}"
    );
    assert!(
        out.contains("127.0.0.43 (AS65043): keeps our routes"),
        "{out}"
    );
    never_lost("after restart --graceful", 60, &b, &f, &dir, || {
        let log = log_of(&dir);
        log.matches("ribshard running").count() == 2
            && log.matches("update-delay over").count() == 2
            && recovered(&b, &f)
    });
    let log = log_of(&dir);
    assert_eq!(
        log.matches("graceful restart: restarting speaker").count(),
        2,
        "{log}"
    );
}

/// A BIRD speaker with long-lived graceful restart options `llgr`: announces `statics` to
/// ribshard with a restart time of 2 s.
fn bird_llgr(addr: &str, asn: u32, port: u16, port_r: u16, statics: &str, llgr: &str) -> String {
    bird_with(
        addr,
        asn,
        port,
        port_r,
        statics,
        "all",
        &format!("graceful restart time 2; {llgr}"),
    )
}

/// `prefix` as BIRD holds it from ribshard, with its attributes.
fn bird_route(b: &Bird, prefix: &str) -> String {
    b.cmd(&format!("show route {prefix} protocol ribsh all"))
}

/// BIRD holds no route for `prefix` from ribshard.
fn bird_lacks(b: &Bird, prefix: &str) -> bool {
    !bird_route(b, prefix).contains("BGP.as_path")
}

/// RFC 9494 as the helper. Upstream A (long-lived graceful restart, restart time 2 s) is
/// killed: after the restart time its routes stay as long-lived stale (LLGR_STALE added,
/// least preferred), so upstream C's worse path for the shared prefix wins; its route with
/// NO_LLGR goes; its own prefix stays at the downstream that does LLGR (B, which is sent
/// the LLGR_STALE community) and is withdrawn from the one that does not (D). A back: its
/// routes are fresh again everywhere. Then ribshard restarts with a long-lived stale time of
/// its own: past its restart time B keeps its routes (long-lived stale), D does not.
#[test]
fn long_lived_graceful_restart_keeps_a_neighbors_routes_least_preferred() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("llgr");
    let port_r = free_port("127.0.0.40");
    let ports: Vec<u16> = ["127.0.0.41", "127.0.0.42", "127.0.0.44", "127.0.0.45"]
        .iter()
        .map(|a| free_port(a))
        .collect();
    let neighbor = |addr: &str, asn: u32, port: u16| {
        format!(
            "[[bgp.group.neighbor]]\naddress = \"{addr}\"\npeer-as = {asn}\nport = {port}\n\
             local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n"
        )
    };
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [bgp.graceful-restart]\nrestart-time = 2\nlong-lived-stale-time = 600\n\
         state-file = \"{}\"\n\
         [[bgp.group]]\nname = \"up\"\ntype = \"external\"\n\
         import = [\"accept\"]\nexport = [\"reject\"]\n{}{}\
         [[bgp.group]]\nname = \"down\"\ntype = \"external\"\n\
         import = [\"reject\"]\nexport = [\"accept\"]\n{}{}",
        dir.join("gr-mark").display(),
        neighbor("127.0.0.41", 65041, ports[0]),
        neighbor("127.0.0.44", 65044, ports[2]),
        neighbor("127.0.0.42", 65042, ports[1]),
        neighbor("127.0.0.45", 65045, ports[3]),
    );
    let (rs, _) = ribshard(&dir, &config);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let llgr_on = "long lived graceful restart on; long lived stale time 3600;";
    let a_conf = bird_llgr(
        "127.0.0.41",
        65041,
        ports[0],
        port_r,
        "route 10.1.0.0/24 blackhole; \
         route 10.2.0.0/24 blackhole { bgp_community.add((65535,7)); }; \
         route 10.3.0.0/24 blackhole;",
        llgr_on,
    );
    let a = Bird::start(&sub("a"), &a_conf);
    let _c = Bird::start(
        &sub("c"),
        &bird_llgr(
            "127.0.0.44",
            65044,
            ports[2],
            port_r,
            "route 10.1.0.0/24 blackhole { bgp_path.prepend(65044); bgp_path.prepend(65044); };",
            llgr_on,
        ),
    );
    let b = Bird::start(
        &sub("b"),
        &bird_llgr("127.0.0.42", 65042, ports[1], port_r, "", llgr_on),
    );
    let d = Bird::start(
        &sub("d"),
        &bird_llgr(
            "127.0.0.45",
            65045,
            ports[3],
            port_r,
            "",
            "long lived graceful restart off;",
        ),
    );
    let all_from_a = |x: &Bird| {
        bird_route(x, "10.1.0.0/24").contains("65040 65041")
            && bird_route(x, "10.2.0.0/24").contains("65041")
            && bird_route(x, "10.3.0.0/24").contains("65041")
    };
    assert!(
        wait(40, || all_from_a(&b) && all_from_a(&d)),
        "before:\n{}\n{}\n{}",
        b.cmd("show route protocol ribsh all"),
        d.cmd("show route protocol ribsh all"),
        log_of(&dir)
    );
    // Our capability offers long-lived graceful restart (and B's session shows it).
    let caps = b.cmd("show protocols all ribsh");
    assert!(caps.contains("Long-lived graceful restart"), "{caps}");

    // A is killed: no NOTIFICATION, the connection just closes.
    drop(a);
    let llgr_at_b = || {
        bird_route(&b, "10.1.0.0/24").contains("65040 65044 65044 65044")
            && bird_lacks(&b, "10.2.0.0/24")
            && bird_route(&b, "10.3.0.0/24").contains("(65535,6)")
    };
    let llgr_at_d = || {
        bird_route(&d, "10.1.0.0/24").contains("65040 65044 65044 65044")
            && bird_lacks(&d, "10.2.0.0/24")
            && bird_lacks(&d, "10.3.0.0/24")
    };
    assert!(
        wait(30, || llgr_at_b() && llgr_at_d()),
        "long-lived stale:\nB:\n{}\nD:\n{}\n{}",
        b.cmd("show route protocol ribsh all"),
        d.cmd("show route protocol ribsh all"),
        log_of(&dir)
    );
    let log = log_of(&dir);
    assert!(
        log.contains("long-lived graceful restart: restart time over"),
        "{log}"
    );
    // ribshard says why: the stale path of A loses at the long-lived stale step; and what
    // it keeps of A, and for how long.
    let sock = dir.join("ribshard.sock");
    let (out, _) = operator::cli(&sock, &["show", "bgp", "neighbor", "127.0.0.41"]);
    assert!(
        out.contains("Stale routes kept: inet.0 for 3")
            && out.contains("long-lived (LLGR_STALE, least preferred)"),
        "{out}"
    );
    let (out, _) = operator::cli(&sock, &["show", "route", "10.1.0.0/24", "detail"]);
    assert!(out.contains("Long-lived stale"), "{out}");
    // Still so a while later: kept for the long-lived stale time, not the restart time.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(llgr_at_b() && llgr_at_d());

    // A back: its routes are fresh again at both.
    let _a = Bird::start(&dir.join("a"), &a_conf);
    assert!(
        wait(40, || all_from_a(&b)
            && all_from_a(&d)
            && !bird_route(&b, "10.3.0.0/24").contains("(65535,6)")),
        "after:\n{}\n{}\n{}",
        b.cmd("show route protocol ribsh all"),
        d.cmd("show route protocol ribsh all"),
        log_of(&dir)
    );

    // Now ribshard restarts (SIGTERM, restart time 2 s, long-lived stale time 600 s): past
    // the restart time B still holds our routes, long-lived stale; D, without LLGR, not.
    let mut rs = rs;
    let _ = Command::new("kill")
        .args(["-TERM", &rs.0.id().to_string()])
        .status();
    let _ = rs.0.wait();
    drop(rs);
    let t = std::time::Instant::now();
    assert!(
        wait(20, || t.elapsed() > std::time::Duration::from_secs(4)
            && bird_lacks(&d, "10.3.0.0/24")),
        "D kept our routes:\n{}",
        d.cmd("show route protocol ribsh all")
    );
    for p in ["10.1.0.0/24", "10.3.0.0/24"] {
        let r = bird_route(&b, p);
        assert!(
            r.contains("65040 65041") && r.contains("(65535,6)"),
            "{p}: {r}"
        );
    }
}

/// `ribshard restart` refuses, and nothing stops, when the configuration file would not
/// start or when `--graceful` is asked without `[bgp.graceful-restart]`; a plain restart
/// then starts the same process again on the file as it reads now.
#[test]
fn restart_refuses_what_would_not_come_back() {
    let dir = tempdir("restart-refused");
    let port_r = free_port("127.0.0.40");
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [[bgp.group]]\nname = \"up\"\ntype = \"external\"\npeer-as = 65041\n\
         [[bgp.group.neighbor]]\naddress = \"127.0.0.41\"\npassive = true\n"
    );
    let (mut rs, _) = ribshard(&dir, &config);
    let sock = dir.join("ribshard.sock");
    let (out, ok) = operator::cli(&sock, &["restart", "--graceful"]);
    assert!(
        !ok && out.contains("graceful restart is not configured"),
        "{out}"
    );
    let file = dir.join("ribshard.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, good.replace("local-as = 65040", "local-as = \"x\"")).unwrap();
    let (out, ok) = operator::cli(&sock, &["restart"]);
    assert!(!ok && out.contains("nothing restarted"), "{out}");
    assert!(out.contains("local-as"), "{out}");
    assert!(matches!(rs.0.try_wait(), Ok(None)), "the daemon stopped");
    // Fixed: the same process starts again.
    std::fs::write(&file, &good).unwrap();
    let pid = rs.0.id();
    let (out, ok) = operator::cli(&sock, &["restart"]);
    assert!(ok && out.contains("restarting: Cease"), "{out}");
    assert!(
        wait(20, || log_of(&dir).matches("ribshard running").count() == 2),
        "{}",
        log_of(&dir)
    );
    assert!(matches!(rs.0.try_wait(), Ok(None)));
    assert_eq!(rs.0.id(), pid);
    let (out, ok) = operator::cli(&sock, &["show", "bgp", "summary"]);
    assert!(ok, "{out}");
}
