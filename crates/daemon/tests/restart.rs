//! Graceful-restart peers across a restart of ribshard, against real BIRD 2. ribshard is the
//! helper here (RFC 4724 section 4.2): it does not yet keep forwarding as a restarting
//! speaker, so its peers drop its routes while it is down; what is checked is that it comes
//! back whole, waiting for its peers' End-of-RIB before it advertises.

mod common;

use common::*;
use std::process::Command;

/// Prefixes the upstream BIRD announces.
const ROUTES: usize = 1000;

fn bird(addr: &str, asn: u32, port: u16, port_r: u16, statics: &str, export: &str) -> String {
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  graceful restart on;
  ipv4 {{ import all; export {export}; next hop address 198.51.100.1; }};
}}
"#
    )
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
