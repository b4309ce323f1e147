//! ribshard against real GoBGP, FRR bgpd, ExaBGP and OpenBGPD on loopback: the session comes up whichever side
//! connects, and routes with their attributes arrive intact. Skips (saying so) where a
//! daemon is not installed; `scripts/test` installs them.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};

fn gobgp_routes(passive_ribshard: bool, port_r: u16, port_g: u16, name: &str) {
    if !have("gobgpd", "--version") {
        return;
    }
    let dir = tempdir(name);
    let (_rs, dump) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.42", 65042, port_g, "", passive_ribshard),
    );
    let g = GoBgp::start(&dir, port_g, port_r, !passive_ribshard);
    assert!(
        wait(30, || g.cli(&["neighbor"]).contains("Establ")),
        "{}",
        g.cli(&["neighbor"])
    );
    g.cli(&[
        "global",
        "rib",
        "add",
        "-a",
        "ipv4",
        "203.0.113.0/24",
        "nexthop",
        "198.51.100.42",
        "community",
        "65042:100",
        "large-community",
        "65042:7:8",
        "med",
        "50",
    ]);
    g.cli(&[
        "global",
        "rib",
        "add",
        "-a",
        "ipv6",
        "2001:db8:42::/48",
        "nexthop",
        "2001:db8::42",
        "community",
        "65042:100",
        "med",
        "50",
    ]);
    let want = [prefix("203.0.113.0/24"), prefix("2001:db8:42::/48")];
    assert!(
        wait(20, || want
            .iter()
            .all(|p| read_dump(&dump).0.contains_key(p))),
        "{:?}",
        read_dump(&dump)
    );
    let (ann, _) = read_dump(&dump);
    for p in &want {
        let a = &ann[p];
        assert_tagged(a, 65042, &p.to_string());
    }
    assert_eq!(ann[&want[0]].large_communities(), &[[65042, 7, 8]]);
    g.cli(&["global", "rib", "del", "-a", "ipv4", "203.0.113.0/24"]);
    assert!(wait(20, || read_dump(&dump).1.contains(&want[0])));
    // An administrative shutdown with an RFC 9003 message reaches ribshard.
    g.cli(&[
        "neighbor",
        "127.0.0.40",
        "shutdown",
        "--reason",
        "planned maintenance",
    ]);
    let log = dir.join("ribshard.log");
    assert!(
        wait(20, || std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("Administrative Shutdown: \"planned maintenance\"")),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[test]
fn gobgp_connects_and_sends_routes() {
    gobgp_routes(
        true,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "gobgp-passive",
    );
}

#[test]
fn ribshard_connects_to_gobgp_and_receives_routes() {
    gobgp_routes(
        false,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "gobgp-active",
    );
}

// ---- FRR bgpd (without zebra), with TCP MD5 or GTSM ----

/// TCP MD5 (RFC 2385) on both sides: ribshard's neighbor key and FRR's neighbor line.
const MD5: (&str, &str) = (
    "authentication-key = \"frr-key\"",
    " neighbor 127.0.0.40 password frr-key\n",
);

/// GTSM (RFC 5082) on both sides, one hop: both send TTL 255 and accept only 255.
const GTSM: (&str, &str) = (
    "ttl-security = 1",
    " neighbor 127.0.0.40 ttl-security hops 1\n",
);

fn frr_routes(
    passive_ribshard: bool,
    port_r: u16,
    port_f: u16,
    name: &str,
    security: (&str, &str),
) {
    if !Path::new("/usr/lib/frr/bgpd").exists() {
        ribshard_mrt::skipped("FRR bgpd is not installed");
        return;
    }
    let dir = tempdir(name);
    let (_rs, dump) = ribshard(
        &dir,
        &ribshard_config(
            port_r,
            "127.0.0.43",
            65043,
            port_f,
            security.0,
            passive_ribshard,
        ),
    );
    let conf = dir.join("bgpd.conf");
    std::fs::write(
        &conf,
        format!(
            "frr defaults traditional\nhostname frr\n!\nrouter bgp 65043\n bgp router-id 127.0.0.43\n\
             no bgp ebgp-requires-policy\n no bgp network import-check\n\
             neighbor 127.0.0.40 remote-as 65040\n neighbor 127.0.0.40 port {port_r}\n\
             neighbor 127.0.0.40 update-source 127.0.0.43\n neighbor 127.0.0.40 disable-connected-check\n\
             neighbor 127.0.0.40 timers connect 2\n{}{}\
             !\n address-family ipv4 unicast\n  network 203.0.113.0/24 route-map SET\n exit-address-family\n!\n\
             route-map SET permit 10\n set community 65043:100\n set large-community 65043:7:8\n set metric 50\n!\n",
            security.1,
            if passive_ribshard { "" } else { " neighbor 127.0.0.40 passive\n" }
        ),
    )
    .unwrap();
    let p = Command::new("/usr/lib/frr/bgpd")
        .args(["-Z", "-S", "-f"])
        .arg(&conf)
        .args([
            "-p",
            &port_f.to_string(),
            "-l",
            "127.0.0.43",
            "-P",
            "0",
            "-i",
        ])
        .arg(dir.join("bgpd.pid"))
        .arg("--vty_socket")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("bgpd.log")).unwrap())
        .spawn()
        .expect("start FRR bgpd");
    let _frr = Proc(p);
    let vtysh = |c: &str| {
        output(
            Command::new("vtysh")
                .arg("--vty_socket")
                .arg(&dir)
                .args(["-c", c]),
        )
    };
    let want = prefix("203.0.113.0/24");
    assert!(
        wait(30, || read_dump(&dump).0.contains_key(&want)),
        "{}\n{:?}",
        vtysh("show bgp summary"),
        read_dump(&dump)
    );
    let (ann, _) = read_dump(&dump);
    let a = &ann[&want];
    assert_tagged(a, 65043, "65043");
    assert_eq!(a.large_communities(), &[[65043, 7, 8]]);
    // FRR advertises itself as next hop on eBGP (its update-source).
    assert_eq!(a.next_hop().unwrap().to_string(), "127.0.0.43");
}

#[test]
fn frr_connects_and_sends_routes() {
    frr_routes(
        true,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "frr-passive",
        MD5,
    );
}

#[test]
fn ribshard_connects_to_frr_and_receives_routes() {
    frr_routes(
        false,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "frr-active",
        MD5,
    );
}

#[test]
fn frr_with_gtsm() {
    frr_routes(
        true,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "frr-gtsm",
        GTSM,
    );
}

// ---- ExaBGP ----

fn exabgp_routes(passive_ribshard: bool, port_r: u16, port_e: u16, name: &str) {
    if !have("exabgp", "--version") {
        return;
    }
    let dir = tempdir(name);
    let (_rs, dump) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.44", 65044, port_e, "", passive_ribshard),
    );
    let conf = dir.join("exabgp.conf");
    // ExaBGP connects when ribshard waits, and only listens when ribshard connects.
    let (connect, passive) = if passive_ribshard {
        (format!("connect {port_r};"), "")
    } else {
        (String::new(), "passive true;")
    };
    std::fs::write(
        &conf,
        format!(
            "neighbor 127.0.0.40 {{\n  router-id 127.0.0.44;\n  local-address 127.0.0.44;\n\
             local-as 65044;\n  peer-as 65040;\n  {connect}\n  listen {port_e};\n  {passive}\n\
             family {{ ipv4 unicast; ipv6 unicast; }}\n  static {{\n\
             route 203.0.113.0/24 next-hop 198.51.100.44 community [65044:100] large-community [65044:7:8] med 50;\n\
             route 2001:db8:44::/48 next-hop 2001:db8::44 community [65044:100] med 50;\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let p = Command::new("exabgp")
        .arg(&conf)
        .env("exabgp_daemon_user", "root")
        .env("exabgp_log_destination", dir.join("exabgp.log"))
        .env("exabgp_daemon_daemonize", "false")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start exabgp");
    let _exa = Proc(p);
    let want = [prefix("203.0.113.0/24"), prefix("2001:db8:44::/48")];
    assert!(
        wait(30, || want
            .iter()
            .all(|p| read_dump(&dump).0.contains_key(p))),
        "{:?}\n{}",
        read_dump(&dump),
        std::fs::read_to_string(dir.join("ribshard.log")).unwrap_or_default()
    );
    let (ann, _) = read_dump(&dump);
    for p in &want {
        let a = &ann[p];
        assert_tagged(a, 65044, &p.to_string());
    }
    assert_eq!(ann[&want[0]].large_communities(), &[[65044, 7, 8]]);
    assert_eq!(
        ann[&want[0]].next_hop().unwrap().to_string(),
        "198.51.100.44"
    );
}

#[test]
fn exabgp_connects_and_sends_routes() {
    exabgp_routes(
        true,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "exabgp-passive",
    );
}

#[test]
fn ribshard_connects_to_exabgp_and_receives_routes() {
    exabgp_routes(
        false,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "exabgp-active",
    );
}

// ---- OpenBGPD (needs root for its chroot, made in a private mount namespace) ----

fn openbgpd_routes(passive_ribshard: bool, port_r: u16, port_o: u16, name: &str) {
    if !have("bgpctl", "-V") || !Path::new("/usr/sbin/bgpd").exists() {
        return;
    }
    if output(Command::new("id").arg("-u")).trim() != "0" {
        ribshard_mrt::skipped("OpenBGPD needs root");
        return;
    }
    let dir = tempdir(name);
    let (_rs, dump) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.45", 65045, port_o, "", passive_ribshard),
    );
    let sock = dir.join("bgpd.sock");
    let conf = dir.join("bgpd.conf");
    std::fs::write(
        &conf,
        format!(
            "AS 65045\nrouter-id 127.0.0.45\nlisten on 127.0.0.45 port {port_o}\nfib-update no\n\
             socket \"{}\"\nnexthop qualify via default\n\
             network 203.0.113.0/24 set {{ community 65045:100 large-community 65045:7:8 metric 50 }}\n\
             neighbor 127.0.0.40 {{\n\tremote-as 65040\n\tport {port_r}\n\tlocal-address 127.0.0.45\n\
             \tmultihop 2\n{}}}\nallow from any\nallow to any\n",
            sock.display(),
            if passive_ribshard { "" } else { "\tpassive\n" }
        ),
    )
    .unwrap();
    let _bgpd = openbgpd(&dir, &conf);
    let want = prefix("203.0.113.0/24");
    assert!(
        wait(30, || read_dump(&dump).0.contains_key(&want)),
        "{}\n{}",
        output(
            Command::new("bgpctl")
                .arg("-s")
                .arg(&sock)
                .args(["show", "summary"])
        ),
        std::fs::read_to_string(dir.join("bgpd.log")).unwrap_or_default()
    );
    let (ann, _) = read_dump(&dump);
    let a = &ann[&want];
    assert_tagged(a, 65045, "65045");
    assert_eq!(a.large_communities(), &[[65045, 7, 8]]);
}

#[test]
fn openbgpd_connects_and_sends_routes() {
    openbgpd_routes(
        true,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "openbgpd-passive",
    );
}

#[test]
fn ribshard_connects_to_openbgpd_and_receives_routes() {
    openbgpd_routes(
        false,
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        "openbgpd-active",
    );
}
