//! Routes through ribshard between real daemons on loopback: route reflection between BIRD
//! and FRR clients (iBGP), eBGP transit between GoBGP and OpenBGPD (IPv4 and IPv6), between
//! GoBGP and BIRD and between two ExaBGPs (ExaBGP as the receiver), a transparent route
//! server between two BIRDs and GoBGP, and BGP roles (RFC 9234) between a BIRD provider and a
//! BIRD customer. Attributes are checked at the far side. Skips (saying
//! so) where a daemon is not installed; `scripts/test` installs them.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};

/// A BIRD speaker on `addr` (port `port`) in AS `asn`, peering with ribshard in AS
/// `rs_as` on 127.0.0.40:`port_r`, announcing `routes` (IPv4 and IPv6 prefixes) with the
/// community (asn-low, 100), a large community, MED 50 and, over iBGP, LOCAL_PREF 200.
fn bird_peer(addr: &str, asn: u32, port: u16, rs_as: u32, port_r: u16, routes: &[&str]) -> String {
    let (v4, v6): (Vec<&str>, Vec<&str>) = routes.iter().partition(|r| !r.contains(':'));
    let static4: String = v4
        .iter()
        .map(|r| format!("route {r} blackhole; "))
        .collect();
    let static6: String = v6
        .iter()
        .map(|r| format!("route {r} blackhole; "))
        .collect();
    let ibgp = asn == rs_as;
    let low = asn & 0xffff;
    let last = addr.rsplit('.').next().unwrap();
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {static4} }}
protocol static s6 {{ ipv6; {static6} }}
filter attrs {{
  if proto != "s4" && proto != "s6" then accept;
  bgp_community.add(({low}, 100));
  bgp_large_community.add(({asn}, 7, 8));
  bgp_med = 50;
  {lp}
  accept;
}}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as {rs_as};
  {multihop} strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export filter attrs; next hop address 198.51.100.{last}; }};
  ipv6 {{ import all; export filter attrs; next hop address 2001:db8::{last}; }};
}}
"#,
        lp = if ibgp { "bgp_local_pref = 200;" } else { "" },
        multihop = if ibgp { "" } else { "multihop;" },
    )
}

/// ribshard's groups for [`rs_client_birds`]: each client in a route server group of its own.
fn rs_client_groups(port_a: u16, port_b: u16) -> String {
    [
        ("ixp-a", 65041, "127.0.0.41", port_a),
        ("ixp-b", 65045, "127.0.0.45", port_b),
    ]
    .map(|(name, asn, addr, port)| {
        ribshard_group(
            name,
            "external",
            Some(asn),
            "route-server-client = true\n",
            &[(addr, port)],
        )
    })
    .concat()
}

/// A BIRD as a client of ribshard as a route server (AS65040 on 127.0.0.40:`port_r`): paths
/// from a route server do not start with its AS.
fn rs_client_bird_conf(addr: &str, asn: u32, port: u16, port_r: u16, routes: &[&str]) -> String {
    bird_peer(addr, asn, port, 65040, port_r, routes)
        .replace("strict bind on;", "strict bind on; enforce first as off;")
}

/// Two route server clients: AS65041 on 127.0.0.41:`port_a` announcing 203.0.113.0/24 and
/// AS65045 on 127.0.0.45:`port_b` announcing 198.18.0.0/15, each in `dir`/bird<AS>.
fn rs_client_birds(dir: &Path, port_r: u16, port_a: u16, port_b: u16) -> Vec<Bird> {
    [
        ("127.0.0.41", 65041, port_a, "203.0.113.0/24"),
        ("127.0.0.45", 65045, port_b, "198.18.0.0/15"),
    ]
    .into_iter()
    .map(|(addr, asn, port, route)| {
        let d = dir.join(format!("bird{asn}"));
        std::fs::create_dir_all(&d).unwrap();
        Bird::start(&d, &rs_client_bird_conf(addr, asn, port, port_r, &[route]))
    })
    .collect()
}

fn ribshard_group(
    name: &str,
    kind: &str,
    peer_as: Option<u32>,
    extra: &str,
    neighbors: &[(&str, u16)],
) -> String {
    let mut s = format!(
        "[[bgp.group]]\nname = \"{name}\"\ntype = \"{kind}\"\nimport = [\"accept\"]\nexport = [\"accept\"]\n{}{extra}\n",
        peer_as.map(|a| format!("peer-as = {a}\n")).unwrap_or_default()
    );
    for (addr, port) in neighbors {
        s += &format!(
            "[[bgp.group.neighbor]]\naddress = \"{addr}\"\nport = {port}\nlocal-address = \"127.0.0.40\"\npassive = true\n"
        );
    }
    s
}

fn ribshard_routing(port_r: u16, groups: &[String]) -> String {
    format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [bgp.rib-sharding]\nnumber-of-shards = 2\n[bgp.update-threading]\nnumber-of-threads = 2\n{}",
        groups.concat()
    )
}

/// Has GoBGP originate a route (IPv4 or IPv6, with a non-loopback next hop) once its
/// session with ribshard is up (its API can lose a request made while it starts, so the
/// route is added until its RIB shows it).
fn gobgp_originate(g: &GoBgp, dir: &Path, p: &str, attrs: &[&str]) {
    assert!(
        wait(30, || g.cli(&["neighbor"]).contains("Establ")),
        "{}\n{}",
        g.cli(&["neighbor"]),
        log_of(dir)
    );
    let (afi, nh) = if p.contains(':') {
        ("ipv6", "2001:db8::42")
    } else {
        ("ipv4", "198.51.100.42")
    };
    let mut add = vec!["global", "rib", "add", "-a", afi, p, "nexthop", nh];
    add.extend_from_slice(attrs);
    assert!(
        wait(10, || {
            g.cli(&add);
            g.cli(&["global", "rib", "-a", afi, p]).contains(nh)
        }),
        "{}",
        g.cli(&["global", "rib", "-a", afi])
    );
}

#[test]
fn route_reflector_between_bird_and_frr_clients() {
    if !have_bird() || !Path::new("/usr/lib/frr/bgpd").exists() {
        ribshard_mrt::skipped("needs bird and FRR bgpd");
        return;
    }
    let dir = tempdir("rr");
    let (port_r, port_b, port_f) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let (_rs, _) = ribshard(
        &dir,
        &ribshard_routing(
            port_r,
            &[ribshard_group(
                "clients",
                "internal",
                Some(65040),
                "cluster = \"10.0.0.1\"\n",
                &[("127.0.0.41", port_b), ("127.0.0.43", port_f)],
            )],
        ),
    );
    let bird_dir = dir.join("bird");
    std::fs::create_dir_all(&bird_dir).unwrap();
    let bird = Bird::start(
        &bird_dir,
        &bird_peer(
            "127.0.0.41",
            65040,
            port_b,
            65040,
            port_r,
            &["203.0.113.0/24", "2001:db8:41::/48"],
        ),
    );
    let (_frr, vtysh) = frr(
        &dir,
        &format!(
            "frr defaults traditional\nhostname frr\n!\nrouter bgp 65040\n bgp router-id 127.0.0.43\n\
             no bgp ebgp-requires-policy\n no bgp network import-check\n\
             neighbor 127.0.0.40 remote-as 65040\n neighbor 127.0.0.40 port {port_r}\n\
             neighbor 127.0.0.40 update-source 127.0.0.43\n neighbor 127.0.0.40 timers connect 2\n!\n\
             address-family ipv4 unicast\n  network 198.18.0.0/15 route-map SET\n exit-address-family\n\
             address-family ipv6 unicast\n  neighbor 127.0.0.40 activate\n exit-address-family\n!\n\
             route-map SET permit 10\n set community 65040:43\n set metric 70\n set local-preference 150\n!\n"
        ),
        port_f,
    );
    // BIRD's route reaches FRR reflected: ORIGINATOR_ID, CLUSTER_LIST, the rest intact.
    let show = || vtysh("show bgp ipv4 unicast 203.0.113.0/24");
    assert!(
        wait(40, || show().contains("Originator: 127.0.0.41")),
        "{}\n{}\n{}",
        show(),
        vtysh("show bgp summary"),
        log_of(&dir)
    );
    let s = show();
    assert!(s.contains("Cluster list: 10.0.0.1"), "{s}");
    assert!(
        s.contains("metric 50") && s.contains("localpref 200"),
        "{s}"
    );
    assert!(s.contains("Community: 65040:100"), "{s}");
    assert!(s.contains("Large Community: 65040:7:8"), "{s}");
    assert!(
        s.contains("198.51.100.41"),
        "the reflector keeps the next hop: {s}"
    );
    // IPv6 too.
    assert!(
        wait(20, || vtysh("show bgp ipv6 unicast 2001:db8:41::/48")
            .contains("Originator: 127.0.0.41")),
        "{}",
        vtysh("show bgp ipv6 unicast 2001:db8:41::/48")
    );
    // FRR's route reaches BIRD the same way.
    let at_bird = || bird.cmd("show route all 198.18.0.0/15");
    assert!(
        wait(20, || at_bird().contains("BGP.originator_id: 127.0.0.43")),
        "{}",
        at_bird()
    );
    let b = at_bird();
    assert!(b.contains("BGP.cluster_list: 10.0.0.1"), "{b}");
    assert!(
        b.contains("BGP.med: 70") && b.contains("BGP.local_pref: 150"),
        "{b}"
    );
    assert!(b.contains("(65040,43)"), "{b}");
    // A withdrawal travels too.
    bird.cmd("disable s4");
    assert!(wait(20, || !show().contains("203.0.113.0")), "{}", show());
}

#[test]
fn ebgp_transit_between_gobgp_and_bird() {
    if !have_bird() || !have("gobgpd", "--version") {
        return;
    }
    let dir = tempdir("transit");
    let (port_r, port_b, port_g) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let (_rs, _) = ribshard(
        &dir,
        &ribshard_routing(
            port_r,
            &[
                // GoBGP refuses loopback next hops: pass BIRD's next hop through (a
                // third-party next hop) instead of ribshard's loopback address.
                ribshard_group(
                    "gobgp",
                    "external",
                    Some(65042),
                    "next-hop-self = false\n",
                    &[("127.0.0.42", port_g)],
                ),
                ribshard_group(
                    "bird",
                    "external",
                    Some(65041),
                    "",
                    &[("127.0.0.41", port_b)],
                ),
            ],
        ),
    );
    let bird_dir = dir.join("bird");
    std::fs::create_dir_all(&bird_dir).unwrap();
    let bird = Bird::start(
        &bird_dir,
        &bird_peer(
            "127.0.0.41",
            65041,
            port_b,
            65040,
            port_r,
            &["203.0.113.0/24", "2001:db8:41::/48"],
        ),
    );
    let g = GoBgp::start(&dir, port_g, port_r, false);
    gobgp_originate(
        &g,
        &dir,
        "192.0.2.0/24",
        &[
            "community",
            "65042:100",
            "large-community",
            "65042:7:8",
            "med",
            "50",
        ],
    );
    // GoBGP's route at BIRD: our AS prepended, next hop ribshard, MED not passed on
    // (RFC 4271 section 5.1.4), communities intact.
    let at_bird = || bird.cmd("show route all 192.0.2.0/24");
    assert!(
        wait(30, || at_bird().contains("BGP.as_path: 65040 65042")),
        "{}\n{}",
        at_bird(),
        log_of(&dir)
    );
    let b = at_bird();
    assert!(b.contains("BGP.next_hop: 127.0.0.40"), "{b}");
    assert!(!b.contains("BGP.med"), "{b}");
    assert!(
        b.contains("(65042,100)") && b.contains("(65042, 7, 8)"),
        "{b}"
    );
    // BIRD's routes at GoBGP, both families.
    let rib4 = || g.cli(&["global", "rib", "-a", "ipv4"]);
    assert!(wait(30, || rib4().contains("203.0.113.0/24")), "{}", rib4());
    assert!(rib4().contains("65040 65041"), "{}", rib4());
    assert!(
        rib4().contains("198.51.100.41"),
        "next hop passed through: {}",
        rib4()
    );
    let rib6 = || g.cli(&["global", "rib", "-a", "ipv6"]);
    assert!(
        wait(20, || rib6().contains("2001:db8:41::/48")),
        "{}",
        rib6()
    );
    // GoBGP's route does not go back to GoBGP's AS.
    assert!(!rib4().contains("65040 65042"), "{}", rib4());
    // Withdrawn at the source, gone at the far side.
    g.cli(&["global", "rib", "del", "-a", "ipv4", "192.0.2.0/24"]);
    assert!(
        wait(20, || !at_bird().contains("192.0.2.0")),
        "{}",
        at_bird()
    );
}

#[test]
fn transparent_route_server_between_three_peers() {
    if !have_bird() || !have("gobgpd", "--version") {
        return;
    }
    let dir = tempdir("rs");
    let (port_r, port_a, port_b, port_g) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let (_rs, _) = ribshard(
        &dir,
        &ribshard_routing(
            port_r,
            &[
                rs_client_groups(port_a, port_b),
                ribshard_group(
                    "ixp-g",
                    "external",
                    Some(65042),
                    "route-server-client = true\n",
                    &[("127.0.0.42", port_g)],
                ),
            ],
        ),
    );
    let birds = rs_client_birds(&dir, port_r, port_a, port_b);
    let g = GoBgp::start(&dir, port_g, port_r, false);
    gobgp_originate(
        &g,
        &dir,
        "192.0.2.0/24",
        &["community", "65042:100", "med", "50"],
    );
    // Each client gets the others' routes untouched: no AS 65040, the original next hop
    // and MED.
    let at = |b: &Bird, p: &str| b.cmd(&format!("show route all {p}"));
    assert!(
        wait(40, || at(&birds[0], "198.18.0.0/15")
            .contains("BGP.as_path: 65045")),
        "{}\n{}",
        at(&birds[0], "198.18.0.0/15"),
        log_of(&dir)
    );
    let a = at(&birds[0], "198.18.0.0/15");
    assert!(a.contains("BGP.next_hop: 198.51.100.45"), "{a}");
    assert!(a.contains("BGP.med: 50"), "{a}");
    assert!(!a.contains("65040"), "{a}");
    assert!(
        wait(20, || at(&birds[1], "192.0.2.0/24")
            .contains("BGP.as_path: 65042")),
        "{}",
        at(&birds[1], "192.0.2.0/24")
    );
    let b = at(&birds[1], "192.0.2.0/24");
    assert!(
        b.contains("BGP.next_hop: 198.51.100.42") && b.contains("BGP.med: 50"),
        "{b}"
    );
    let rib = || g.cli(&["global", "rib", "-a", "ipv4"]);
    assert!(
        wait(20, || rib().contains("203.0.113.0/24")
            && rib().contains("198.18.0.0/15")),
        "{}",
        rib()
    );
    assert!(!rib().contains("65040"), "{}", rib());
}

#[test]
fn ebgp_transit_between_gobgp_and_openbgpd() {
    if !have("gobgpd", "--version")
        || !have("bgpctl", "-V")
        || !Path::new("/usr/sbin/bgpd").exists()
    {
        return;
    }
    if output(Command::new("id").arg("-u")).trim() != "0" {
        ribshard_mrt::skipped("OpenBGPD needs root");
        return;
    }
    let dir = tempdir("transit-openbgpd");
    let (port_r, port_o, port_g) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let (_rs, _) = ribshard(
        &dir,
        &ribshard_routing(
            port_r,
            &[
                ribshard_group(
                    "gobgp",
                    "external",
                    Some(65042),
                    "next-hop-self = false\n",
                    &[("127.0.0.42", port_g)],
                ),
                ribshard_group(
                    "openbgpd",
                    "external",
                    Some(65046),
                    "",
                    &[("127.0.0.46", port_o)],
                ),
            ],
        ),
    );
    let sock = dir.join("bgpd.sock");
    let conf = dir.join("bgpd.conf");
    // OpenBGPD announces with a non-loopback next hop, which GoBGP requires: on eBGP it would
    // replace it with its own address without `set nexthop no-modify`.
    std::fs::write(
        &conf,
        format!(
            "AS 65046\nrouter-id 127.0.0.46\nlisten on 127.0.0.46 port {port_o}\nfib-update no\n\
             socket \"{}\"\nnexthop qualify via default\n\
             network 203.0.113.0/24 set {{ community 65046:100 large-community 65046:7:8 nexthop 198.51.100.46 }}\n\
             network 2001:db8:46::/48 set {{ community 65046:600 nexthop 2001:db8::46 }}\n\
             neighbor 127.0.0.40 {{\n\tremote-as 65040\n\tport {port_r}\n\tlocal-address 127.0.0.46\n\
             \tmultihop 2\n\tannounce IPv4 unicast\n\tannounce IPv6 unicast\n}}\nallow from any\nallow to any set nexthop no-modify\n",
            sock.display()
        ),
    )
    .unwrap();
    let _bgpd = openbgpd(&dir, &conf);
    let bgpctl = |args: &[&str]| output(Command::new("bgpctl").arg("-s").arg(&sock).args(args));
    let g = GoBgp::start(&dir, port_g, port_r, false);
    gobgp_originate(
        &g,
        &dir,
        "192.0.2.0/24",
        &[
            "community",
            "65042:100",
            "large-community",
            "65042:7:8",
            "med",
            "50",
        ],
    );
    // GoBGP's route at OpenBGPD: our AS prepended, communities intact.
    let at_openbgpd = || bgpctl(&["show", "rib", "detail", "192.0.2.0/24"]);
    assert!(
        wait(30, || at_openbgpd().contains("65040 65042")),
        "{}\n{}\n{}",
        at_openbgpd(),
        bgpctl(&["show", "summary"]),
        log_of(&dir)
    );
    let o = at_openbgpd();
    assert!(o.contains("65042:100") && o.contains("65042:7:8"), "{o}");
    assert!(
        o.contains("127.0.0.40"),
        "next hop self towards OpenBGPD: {o}"
    );
    // OpenBGPD's route at GoBGP.
    let rib4 = || g.cli(&["global", "rib", "-a", "ipv4"]);
    assert!(
        wait(30, || rib4().contains("203.0.113.0/24")),
        "{}\n{}",
        rib4(),
        log_of(&dir)
    );
    let r = rib4();
    assert!(
        r.contains("65040 65046") && r.contains("198.51.100.46"),
        "{r}"
    );
    assert!(r.contains("65046:100"), "{r}");

    // IPv6 unicast over the same IPv4 sessions, both ways.
    let v6 = "2001:db8:42::/48";
    gobgp_originate(&g, &dir, v6, &["community", "65042:600"]);
    let at_openbgpd6 = || bgpctl(&["show", "rib", "detail", v6]);
    assert!(
        wait(30, || at_openbgpd6().contains("65040 65042")),
        "{}\n{}\n{}",
        at_openbgpd6(),
        bgpctl(&["show", "neighbor"]),
        log_of(&dir)
    );
    let o = at_openbgpd6();
    assert!(o.contains("65042:600"), "{o}");
    // Next hop self on an IPv4 session without an IPv6 address: ours, IPv4-mapped.
    assert!(o.contains("Nexthop ::ffff:127.0.0.40"), "{o}");
    let rib6 = || g.cli(&["global", "rib", "-a", "ipv6"]);
    assert!(
        wait(30, || rib6().contains("2001:db8:46::/48")),
        "{}\n{}",
        rib6(),
        log_of(&dir)
    );
    let r = rib6();
    assert!(r.contains("65040 65046") && r.contains("65046:600"), "{r}");
}

/// Starts ExaBGP with `conf` (logging to `dir/exabgp-NAME.log`).
fn exabgp(dir: &Path, name: &str, conf: &str) -> Proc {
    let path = dir.join(format!("exabgp-{name}.conf"));
    std::fs::write(&path, conf).unwrap();
    let p = Command::new("exabgp")
        .arg(&path)
        .env("exabgp_daemon_user", "root")
        .env(
            "exabgp_log_destination",
            dir.join(format!("exabgp-{name}.log")),
        )
        .env("exabgp_daemon_daemonize", "false")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start exabgp");
    Proc(p)
}

/// What an ExaBGP receiver's API process wrote: its JSON UPDATE messages, in order.
fn exabgp_updates(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["neighbor"]["message"]["update"].as_object().cloned())
        .map(serde_json::Value::Object)
        .collect()
}

/// The announcement of `prefix` in `family` ("ipv4 unicast") among the UPDATEs, with its
/// next hop: (attributes, next hop).
fn exabgp_announced(
    updates: &[serde_json::Value],
    family: &str,
    prefix: &str,
) -> Option<(serde_json::Value, String)> {
    updates.iter().rev().find_map(|u| {
        let by_nh = u["announce"][family].as_object()?;
        by_nh.iter().find_map(|(nh, nlri)| {
            nlri.as_array()?
                .iter()
                .any(|n| n["nlri"] == prefix)
                .then(|| (u["attribute"].clone(), nh.clone()))
        })
    })
}

fn exabgp_withdrawn(updates: &[serde_json::Value], family: &str, prefix: &str) -> bool {
    updates.iter().any(|u| {
        u["withdraw"][family]
            .as_array()
            .is_some_and(|w| w.iter().any(|n| n["nlri"] == prefix))
    })
}

/// eBGP transit from one ExaBGP to another: ExaBGP as a receiver (its API process writes
/// the JSON of every UPDATE), IPv4 and IPv6, attributes and withdrawals checked there.
#[test]
fn ebgp_transit_between_two_exabgps() {
    if !have("exabgp", "--version") {
        return;
    }
    let dir = tempdir("transit-exabgp");
    let (port_r, port_a, port_b) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let (_rs, _) = ribshard(
        &dir,
        &ribshard_routing(
            port_r,
            &[
                ribshard_group(
                    "sender",
                    "external",
                    Some(65044),
                    "",
                    &[("127.0.0.44", port_a)],
                ),
                ribshard_group(
                    "receiver",
                    "external",
                    Some(65047),
                    "",
                    &[("127.0.0.47", port_b)],
                ),
            ],
        ),
    );
    // The API process copies each line ExaBGP writes to it into a file; it must read until
    // its input ends (a process that exits is restarted, and ExaBGP gives up after a few).
    let received = dir.join("received.json");
    let script = dir.join("receiver.py");
    std::fs::write(
        &script,
        format!(
            "import sys\nwith open('{}', 'a') as f:\n    while True:\n        line = sys.stdin.readline()\n\
             \x20       if not line:\n            break\n        f.write(line)\n        f.flush()\n",
            received.display()
        ),
    )
    .unwrap();
    let _b = exabgp(
        &dir,
        "receiver",
        &format!(
            "process receiver {{\n  run /usr/bin/python3 {};\n  encoder json;\n}}\n\
             neighbor 127.0.0.40 {{\n  router-id 127.0.0.47;\n  local-address 127.0.0.47;\n  local-as 65047;\n\
             peer-as 65040;\n  connect {port_r};\n  listen {port_b};\n\
             family {{ ipv4 unicast; ipv6 unicast; }}\n\
             api {{ processes [ receiver ]; receive {{ parsed; update; }} }}\n}}\n",
            script.display()
        ),
    );
    let a = exabgp(
        &dir,
        "sender",
        &format!(
            "neighbor 127.0.0.40 {{\n  router-id 127.0.0.44;\n  local-address 127.0.0.44;\n  local-as 65044;\n\
             peer-as 65040;\n  connect {port_r};\n  listen {port_a};\n\
             family {{ ipv4 unicast; ipv6 unicast; }}\n  static {{\n\
             route 203.0.113.0/24 next-hop 198.51.100.44 community [65044:100] large-community [65044:7:8] med 50;\n\
             route 2001:db8:44::/48 next-hop 2001:db8::44 community [65044:100] med 50;\n  }}\n}}\n"
        ),
    );
    let v4 = || exabgp_announced(&exabgp_updates(&received), "ipv4 unicast", "203.0.113.0/24");
    let v6 = || {
        exabgp_announced(
            &exabgp_updates(&received),
            "ipv6 unicast",
            "2001:db8:44::/48",
        )
    };
    assert!(
        wait(30, || v4().is_some() && v6().is_some()),
        "{}\n{}",
        std::fs::read_to_string(&received).unwrap_or_default(),
        log_of(&dir)
    );
    let (attrs, nh) = v4().unwrap();
    assert_eq!(nh, "127.0.0.40", "next hop self");
    assert_eq!(attrs["as-path"], serde_json::json!([65040, 65044]));
    assert_eq!(attrs["community"], serde_json::json!([[65044, 100]]));
    assert_eq!(attrs["large-community"], serde_json::json!([[65044, 7, 8]]));
    assert!(
        attrs.get("med").is_none(),
        "MED not passed to another AS: {attrs}"
    );
    let (attrs, nh) = v6().unwrap();
    assert_eq!(nh, "::ffff:127.0.0.40", "next hop self, IPv4-mapped");
    assert_eq!(attrs["as-path"], serde_json::json!([65040, 65044]));
    assert_eq!(attrs["community"], serde_json::json!([[65044, 100]]));
    // The sender goes: both routes are withdrawn at the receiver.
    drop(a);
    assert!(
        wait(30, || {
            let u = exabgp_updates(&received);
            exabgp_withdrawn(&u, "ipv4 unicast", "203.0.113.0/24")
                && exabgp_withdrawn(&u, "ipv6 unicast", "2001:db8:44::/48")
        }),
        "{}\n{}",
        std::fs::read_to_string(&received).unwrap_or_default(),
        log_of(&dir)
    );
}

/// BGP roles (RFC 9234) with BIRD on both sides: ribshard is the customer of one BIRD and the
/// provider of another, the roles are checked at OPEN by all three, and the Only to Customer
/// attribute is as section 5 says: the provider's route reaches the customer with the
/// provider's AS as OTC, and the customer's route reaches the provider without OTC.
#[test]
fn bgp_roles_between_bird_provider_and_customer() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("roles");
    let (port_r, port_p, port_c) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let (_rs, _) = ribshard(
        &dir,
        &ribshard_routing(
            port_r,
            &[
                ribshard_group(
                    "provider",
                    "external",
                    Some(65041),
                    "role = \"customer\"\n",
                    &[("127.0.0.41", port_p)],
                ),
                ribshard_group(
                    "customer",
                    "external",
                    Some(65045),
                    "role = \"provider\"\n",
                    &[("127.0.0.45", port_c)],
                ),
            ],
        ),
    );
    let mut birds = Vec::new();
    for (addr, asn, port, route, role) in [
        ("127.0.0.41", 65041, port_p, "203.0.113.0/24", "provider"),
        ("127.0.0.45", 65045, port_c, "198.18.0.0/15", "customer"),
    ] {
        let d = dir.join(format!("bird{asn}"));
        std::fs::create_dir_all(&d).unwrap();
        let conf = bird_peer(addr, asn, port, 65040, port_r, &[route]).replace(
            "strict bind on;",
            &format!("strict bind on; local role {role}; require roles;"),
        );
        birds.push(Bird::start(&d, &conf));
    }
    let at = |b: &Bird, p: &str| b.cmd(&format!("show route all {p}"));
    // The provider's route at the customer: OTC = the provider's AS (added by the provider,
    // or by ribshard on ingress if it were missing), kept towards a customer.
    assert!(
        wait(40, || at(&birds[1], "203.0.113.0/24")
            .contains("BGP.as_path: 65040 65041")),
        "{}\n{}\n{}",
        at(&birds[1], "203.0.113.0/24"),
        birds[1].cmd("show protocols all ribsh"),
        log_of(&dir)
    );
    let c = at(&birds[1], "203.0.113.0/24");
    assert!(c.contains("BGP.otc: 65041"), "{c}");
    // The customer's route at the provider, without OTC.
    assert!(
        wait(40, || at(&birds[0], "198.18.0.0/15")
            .contains("BGP.as_path: 65040 65045")),
        "{}\n{}",
        at(&birds[0], "198.18.0.0/15"),
        log_of(&dir)
    );
    let p = at(&birds[0], "198.18.0.0/15");
    assert!(!p.contains("BGP.otc"), "{p}");
}

/// SIGHUP on the running daemon, a route server between BIRDs: other thread counts re-shard
/// it while the BIRD sessions stay up (BIRD's "since" time does not move), a file with an
/// error changes nothing and is reported with its line, a neighbor added gets a session and
/// the routes, a neighbor removed is sent Cease / Peer De-configured and its routes leave the
/// others; routes announced and withdrawn after the re-shards still go through.
#[test]
fn sighup_reshards_and_changes_neighbors_with_sessions_up() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("reload");
    let (port_r, port_a, port_b, port_c) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let client_c = || {
        ribshard_group(
            "ixp-c",
            "external",
            Some(65046),
            "route-server-client = true\n",
            &[("127.0.0.46", port_c)],
        )
    };
    let config = |shards: u32, threads: u32, groups: &str| {
        ribshard_routing(port_r, &[groups.to_string()]).replace(
            "number-of-shards = 2\n[bgp.update-threading]\nnumber-of-threads = 2\n",
            &format!(
                "number-of-shards = {shards}\n[bgp.update-threading]\nnumber-of-threads = {threads}\n"
            ),
        )
    };
    let a_and_b = rs_client_groups(port_a, port_b);
    let (rs, _) = ribshard(&dir, &config(2, 2, &a_and_b));
    let conf = dir.join("ribshard.toml");
    let hup = |text: &str, expect: &str| {
        let before = log_of(&dir).matches(expect).count();
        std::fs::write(&conf, with_socket(&dir, text)).unwrap();
        let ok = Command::new("kill")
            .args(["-HUP", &rs.0.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        assert!(
            wait(20, || log_of(&dir).matches(expect).count() > before),
            "no \"{expect}\" after SIGHUP:\n{}",
            log_of(&dir)
        );
    };
    let mut birds: Vec<(std::path::PathBuf, Bird)> = ["bird65041", "bird65045"]
        .into_iter()
        .map(|d| dir.join(d))
        .zip(rs_client_birds(&dir, port_r, port_a, port_b))
        .collect();
    // A third client, not configured in ribshard yet: refused until a reload adds it.
    let d = dir.join("bird65046");
    std::fs::create_dir_all(&d).unwrap();
    let conf_c = rs_client_bird_conf("127.0.0.46", 65046, port_c, port_r, &["100.64.0.0/10"]);
    birds.push((d.clone(), Bird::start(&d, &conf_c)));
    let at = |b: &Bird, p: &str| b.cmd(&format!("show route all {p}"));
    let has =
        |i: usize, p: &str, asn: &str| at(&birds[i].1, p).contains(&format!("BGP.as_path: {asn}"));
    assert!(
        wait(40, || has(0, "198.18.0.0/15", "65045")
            && has(1, "203.0.113.0/24", "65041")),
        "{}",
        log_of(&dir)
    );
    let established = |b: &Bird| {
        let out = b.cmd("show protocols ribsh");
        let line = out.lines().find(|l| l.starts_with("ribsh")).unwrap_or("");
        assert!(line.contains("Established"), "{out}");
    };
    let sock = socket(&dir);
    let history = || ["127.0.0.41", "127.0.0.45"].map(|n| session_history(&sock, n));
    birds[..2].iter().for_each(|(_, b)| established(b));
    let before = history();
    assert!(before.iter().all(|h| h.0 >= 1), "{before:?}");
    hup(
        &config(1, 0, &a_and_b),
        "threads changed with sessions kept up",
    );
    hup(
        &config(1, 0, &a_and_b).replace("local-as = 65040", "local-as = \"x\""),
        "configuration not reloaded",
    );
    let log = log_of(&dir);
    assert!(
        log.contains("ribshard.toml:2: bgp.local-as"),
        "the error names file, line and key:\n{log}"
    );
    // Re-shard and add the third client in one reload.
    hup(
        &config(3, 2, &(a_and_b.clone() + &client_c())),
        "neighbor configured: session started",
    );
    assert!(
        wait(40, || has(2, "203.0.113.0/24", "65041")
            && has(2, "198.18.0.0/15", "65045")
            && has(0, "100.64.0.0/10", "65046")),
        "the added client's routes: {}\n{}",
        at(&birds[2].1, "0.0.0.0/0 all"),
        log_of(&dir)
    );
    // After the re-shards: a new route from one BIRD, and a withdrawal, reach the others.
    let (d, b) = &birds[0];
    let text = rs_client_bird_conf("127.0.0.41", 65041, port_a, port_r, &["192.0.2.0/24"]);
    std::fs::write(
        d.join("bird.conf"),
        text.replace("DIR", d.to_str().unwrap()),
    )
    .unwrap();
    b.cmd("configure");
    assert!(
        wait(20, || has(1, "192.0.2.0/24", "65041")
            && has(2, "192.0.2.0/24", "65041")
            && !at(&birds[1].1, "203.0.113.0/24").contains("65041")),
        "{}\n{}",
        at(&birds[1].1, "0.0.0.0/0 all"),
        log_of(&dir)
    );
    birds[..2].iter().for_each(|(_, b)| established(b));
    assert_eq!(history(), before, "the BIRD sessions never went down");
    assert!(!log_of(&dir).contains("neighbor down"), "{}", log_of(&dir));
    // Remove the second client: it is told so, and its routes leave the others.
    let a_only = ribshard_group(
        "ixp-a",
        "external",
        Some(65041),
        "route-server-client = true\n",
        &[("127.0.0.41", port_a)],
    );
    hup(
        &config(3, 2, &(a_only + &client_c())),
        "neighbor no longer configured",
    );
    assert!(
        wait(20, || !has(0, "198.18.0.0/15", "65045")
            && !has(2, "198.18.0.0/15", "65045")
            && birds[1]
                .1
                .cmd("show protocols all ribsh")
                .to_lowercase()
                .contains("de-configured")),
        "{}\n{}",
        birds[1].1.cmd("show protocols all ribsh"),
        log_of(&dir)
    );
    established(&birds[0].1);
    assert_eq!(
        session_history(&sock, "127.0.0.41"),
        before[0],
        "the first client stayed up"
    );
}

/// Junos `local-as` towards one BIRD (ribshard is AS65040, and AS65100 to that BIRD), eBGP
/// transit to another: by default the BIRD behind the local AS sees paths with the local AS
/// then the global one, and its routes reach the other BIRD with the local AS in front; with
/// `no-prepend-global-as` and `local-as-private`, neither.
#[test]
fn local_as_towards_bird() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("local-as");
    let (port_r, port_a, port_b) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let mut birds = Vec::new();
    for (addr, asn, as_seen, port, route) in [
        ("127.0.0.41", 65041, 65100, port_a, "203.0.113.0/24"),
        ("127.0.0.45", 65045, 65040, port_b, "198.18.0.0/15"),
    ] {
        let d = dir.join(format!("bird{asn}"));
        std::fs::create_dir_all(&d).unwrap();
        birds.push(Bird::start(
            &d,
            &bird_peer(addr, asn, port, as_seen, port_r, &[route]),
        ));
    }
    let path_at = |b: &Bird, p: &str| -> String {
        b.cmd(&format!("show route all {p}"))
            .lines()
            .find_map(|l| l.trim().strip_prefix("BGP.as_path: ").map(str::to_string))
            .unwrap_or_default()
    };
    for (options, to_a, to_b) in [
        ("", "65100 65040 65045", "65040 65100 65041"),
        (
            "local-as-private = true\nno-prepend-global-as = true\n",
            "65100 65045",
            "65040 65041",
        ),
    ] {
        let config = ribshard_routing(
            port_r,
            &[
                ribshard_group(
                    "old-as",
                    "external",
                    Some(65041),
                    &format!("local-as = 65100\n{options}"),
                    &[("127.0.0.41", port_a)],
                ),
                ribshard_group("b", "external", Some(65045), "", &[("127.0.0.45", port_b)]),
            ],
        );
        let (rs, _) = ribshard(&dir, &config);
        assert!(
            wait(40, || path_at(&birds[0], "198.18.0.0/15") == to_a
                && path_at(&birds[1], "203.0.113.0/24") == to_b),
            "options {options:?}: A sees {:?} (want {to_a}), B sees {:?} (want {to_b})\n{}",
            path_at(&birds[0], "198.18.0.0/15"),
            path_at(&birds[1], "203.0.113.0/24"),
            log_of(&dir)
        );
        drop(rs);
        // Both BIRDs notice the session is gone before the next run.
        assert!(wait(20, || !birds[0].established("ribsh")
            && !birds[1].established("ribsh")));
    }
}
