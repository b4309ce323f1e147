//! ribshard against a real BIRD 2 on loopback: sessions both ways, routes with their
//! attributes, withdrawals, TCP MD5, prefix limits and the shutdown NOTIFICATION.
//! Skips (saying so) where bird is not installed; `scripts/test` installs it.

mod common;

use common::*;
use ribshard_wire::Prefix;
use std::collections::BTreeSet;
use std::process::Command;

fn bird_config(port_r: u16, port_b: u16, extra: &str, passive: bool) -> String {
    format!(
        r#"router id 127.0.0.41;
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; route 203.0.113.0/24 blackhole; route 198.18.0.0/15 blackhole; }}
protocol static s6 {{ ipv6; route 2001:db8:1::/48 blackhole; }}
filter attrs {{
  bgp_community.add((65041, 100));
  bgp_large_community.add((65041, 7, 8));
  bgp_med = 50;
  bgp_path.prepend(64999);
  accept;
}}
protocol bgp ribsh {{
  local 127.0.0.41 port {port_b} as 65041;
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  passive {};
  {extra}
  ipv4 {{ import all; export filter attrs; next hop address 198.51.100.41; }};
  ipv6 {{ import all; export filter attrs; next hop address 2001:db8::41; }};
}}
"#,
        if passive { "on" } else { "off" }
    )
}

#[test]
fn routes_and_attributes_from_bird_then_withdrawals_and_shutdown() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("bird-routes");
    let (port_r, port_p) = (free_port("0.0.0.0"), free_port("0.0.0.0"));
    let bird = Bird::start(&dir, &bird_config(port_r, port_p, "", true));
    let (mut rs, dump) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.41", 65041, port_p, "", false),
    );
    assert!(
        wait(20, || bird.established("ribsh")),
        "{}",
        bird.cmd("show protocols all ribsh")
    );
    let want: BTreeSet<Prefix> = ["203.0.113.0/24", "198.18.0.0/15", "2001:db8:1::/48"]
        .into_iter()
        .map(prefix)
        .collect();
    assert!(
        wait(20, || read_dump(&dump)
            .0
            .keys()
            .copied()
            .collect::<BTreeSet<_>>()
            == want),
        "got {:?}",
        read_dump(&dump).0.keys().collect::<Vec<_>>()
    );
    let (ann, _) = read_dump(&dump);
    for (p, a) in &ann {
        let path: Vec<u32> = a
            .as_path()
            .unwrap()
            .segments
            .iter()
            .flat_map(|s| s.asns.clone())
            .collect();
        assert_eq!(path, [65041, 64999], "{p}");
        assert_eq!(a.med(), Some(50), "{p}");
        assert!(a.communities().contains(&((65041 << 16) | 100)), "{p}");
        assert_eq!(a.large_communities(), &[[65041, 7, 8]], "{p}");
        match p {
            Prefix::V4 { .. } => assert_eq!(a.next_hop().unwrap().to_string(), "198.51.100.41"),
            Prefix::V6 { .. } => {
                let nh = a.mp_reach().unwrap().next_hop.clone();
                assert_eq!(
                    &nh[..16],
                    "2001:db8::41"
                        .parse::<std::net::Ipv6Addr>()
                        .unwrap()
                        .octets()
                );
            }
        }
    }
    // Withdrawals arrive.
    bird.cmd("disable s4");
    assert!(
        wait(20, || read_dump(&dump).1.len() == 2),
        "{:?}",
        read_dump(&dump)
    );
    // SIGTERM: ribshard sends Cease / Administrative Shutdown with its message.
    let _ = Command::new("kill")
        .args(["-TERM", &rs.0.id().to_string()])
        .status();
    let _ = rs.0.wait();
    assert!(
        wait(10, || bird
            .cmd("show protocols all ribsh")
            .contains("shutting down")),
        "{}",
        bird.cmd("show protocols all ribsh")
    );
}

/// ribshard (passive, `ribshard_side` on the neighbor) and a BIRD connecting to it with
/// `bird_side` in its protocol: the scratch directory, ribshard, BIRD.
fn secured_pair(name: &str, ribshard_side: &str, bird_side: &str) -> (TempDir, Proc, Bird) {
    let dir = tempdir(name);
    let (port_r, port_p) = (free_port("0.0.0.0"), free_port("0.0.0.0"));
    let (rs, _dump) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.41", 65041, port_p, ribshard_side, true),
    );
    let bird = Bird::start(&dir, &bird_config(port_r, port_p, bird_side, false));
    (dir, rs, bird)
}

#[test]
fn bird_connects_to_ribshard_with_md5() {
    if !have_bird() {
        return;
    }
    let (_dir, _rs, bird) = secured_pair(
        "bird-md5",
        "authentication-key = \"s3cret\"",
        "password \"s3cret\";",
    );
    assert!(
        wait(20, || bird.established("ribsh")),
        "{}",
        bird.cmd("show protocols all ribsh")
    );
}

#[test]
fn md5_mismatch_gives_no_session_with_bird() {
    if !have_bird() {
        return;
    }
    let (_dir, _rs, bird) = secured_pair(
        "bird-md5-bad",
        "authentication-key = \"s3cret\"",
        "password \"wrong\";",
    );
    assert!(
        !wait(8, || bird.established("ribsh")),
        "a session came up with different keys"
    );
}

/// GTSM (RFC 5082) with BIRD: both ends `ttl security`, the session comes up; BIRD
/// without it sends TTL 64 (multihop), which ribshard's minimum TTL of 255 drops.
#[test]
fn gtsm_with_bird() {
    if !have_bird() {
        return;
    }
    let (_dir, _rs, bird) = secured_pair("bird-gtsm", "ttl-security = 1", "ttl security on;");
    assert!(
        wait(20, || bird.established("ribsh")),
        "{}",
        bird.cmd("show protocols all ribsh")
    );
    let (dir, _rs, bird) = secured_pair("bird-gtsm-off", "ttl-security = 1", "");
    assert!(
        !wait(8, || bird.established("ribsh")),
        "a session came up without GTSM at BIRD"
    );
    // Judged by its SYN, before its OPEN could be read.
    assert!(
        log_of(&dir).contains("GTSM: its SYN arrived with TTL 64"),
        "{}",
        log_of(&dir)
    );
}

#[test]
fn prefix_limit_tears_bird_down() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("bird-limit");
    let (port_r, port_p) = (free_port("0.0.0.0"), free_port("0.0.0.0"));
    let extra = "[bgp.group.neighbor.prefix-limit.inet-unicast]\nmaximum = 1\n";
    let (_rs, _dump) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.41", 65041, port_p, extra, false),
    );
    let bird = Bird::start(&dir, &bird_config(port_r, port_p, "", true));
    assert!(
        wait(20, || bird
            .cmd("show protocols all ribsh")
            .contains("Maximum number of prefixes reached")),
        "{}",
        bird.cmd("show protocols all ribsh")
    );
}
