//! BMP read with ribshard's own decoder, for what pmbmpd 1.7 does not log: the post-policy
//! feed's live End-of-RIB (when a neighbor's End-of-RIB has come and every shard has handed
//! on the routes before it, an End-of-RIB with the L flag, after those routes), and the
//! path identifiers of an Add-Path member's Adj-RIB-Out in a station's dump (every path its
//! group sends).

mod common;

use common::*;
use ribshard_bmp::message::{frame, peer_flags, MessageType};
use ribshard_wire::{decode, Family, Message, SessionParams, UpdateBuilder};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::{IpAddr, TcpListener};
use std::sync::{Arc, Mutex};

/// A Route Monitoring message: its neighbor, its per-peer flags and its UPDATE.
#[derive(Clone)]
struct Monitored {
    peer: IpAddr,
    flags: u8,
    update: Vec<u8>,
}

/// A station: accepts one connection on `listener` and keeps every Route Monitoring message.
fn station(listener: TcpListener) -> Arc<Mutex<Vec<Monitored>>> {
    let seen: Arc<Mutex<Vec<Monitored>>> = Arc::default();
    let into = seen.clone();
    std::thread::spawn(move || {
        let Ok((mut c, _)) = listener.accept() else {
            return;
        };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        while let Ok(n) = c.read(&mut chunk) {
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Ok(Some((f, len))) = frame(&buf) {
                if let (true, Some(p)) = (f.ty == MessageType::RouteMonitoring as u8, f.peer) {
                    into.lock().unwrap().push(Monitored {
                        peer: p.address,
                        flags: p.flags,
                        update: f.body.to_vec(),
                    });
                }
                buf.drain(..len);
            }
        }
    });
    seen
}

/// With one shard, and with three (each reports the End-of-RIB; the station is sent one, after
/// the last has handed on its routes).
#[test]
fn post_policy_end_of_rib_follows_the_routes_before_it() {
    if !have_bird() {
        return;
    }
    for shards in [1, 3] {
        end_of_rib_after_the_routes(shards);
    }
}

fn end_of_rib_after_the_routes(shards: u32) {
    let dir = tempdir(&format!("bmp-eor-{shards}"));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let station_port = listener.local_addr().unwrap().port();
    let all = station(listener);
    let seen = || -> Vec<Monitored> {
        let m = all.lock().unwrap();
        m.iter()
            .filter(|m| m.flags & peer_flags::L != 0)
            .cloned()
            .collect()
    };
    let port_r = free_port("127.0.0.54");
    let port_a = free_port("127.0.0.55");
    let config = format!(
        r#"[bgp]
local-as = 65054
router-id = "127.0.0.54"
listen = ["127.0.0.54:{port_r}"]
[bgp.rib-sharding]
number-of-shards = {shards}
[bgp.update-threading]
number-of-threads = {threads}
[[bgp.group]]
name = "up"
type = "external"
import = ["no-66"]
export = ["reject"]
[[bgp.group.neighbor]]
address = "127.0.0.55"
peer-as = 65055
port = {port_a}
local-address = "127.0.0.54"
multihop = true
passive = true
[[policy-options.policy-statement.no-66.term]]
name = "66"
from = {{ route-filter = ["10.66.0.0/16 orlonger"] }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.no-66.term]]
name = "rest"
then = {{ action = "accept" }}
[[bmp.station]]
address = "127.0.0.1"
port = {station_port}
route-monitoring = ["post-policy"]
statistics-timeout = 0
retry = 1
retry-max = 1
"#,
        threads = if shards > 1 { 2 } else { 0 }
    );
    let (_rs, _) = ribshard(&dir, &config);
    // 100 routes, one of them rejected by import policy.
    let mut statics: String = (0..99)
        .map(|i| format!("route 10.55.{i}.0/24 blackhole; "))
        .collect();
    statics.push_str("route 10.66.0.0/24 blackhole; ");
    let _a = Bird::start(
        &dir,
        &format!(
            r#"router id 127.0.0.55;
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
protocol bgp ribsh {{
  local 127.0.0.55 port {port_a} as 65055;
  neighbor 127.0.0.54 port {port_r} as 65054;
  multihop; strict bind on; hold time 30; connect retry time 2;
  graceful restart on;
  ipv4 {{ import none; export all; next hop address 198.51.100.55; }};
}}
"#
        ),
    );
    let eor = UpdateBuilder::end_of_rib(Family::Ipv4Unicast);
    let at_eor = |m: &[Monitored]| m.iter().position(|m| m.update[..] == eor[..]);
    assert!(
        wait(30, || at_eor(&seen()).is_some()),
        "{shards} shards: no post-policy End-of-RIB: {} messages\n{}",
        seen().len(),
        log_of(&dir)
    );
    let m = seen();
    let end = at_eor(&m).unwrap();
    let params = SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    };
    let mut before = 0;
    for m in &m[..end] {
        assert_eq!(m.peer.to_string(), "127.0.0.55");
        if let Ok(Message::Update(u)) = decode(&m.update, &params) {
            before += u.announced().count();
        }
    }
    assert_eq!(
        before, 99,
        "{shards} shards: every accepted route before the End-of-RIB"
    );
    assert_eq!(m[end].peer.to_string(), "127.0.0.55");
    // Once: no second End-of-RIB for the family in the live feed.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let again = seen().iter().filter(|m| m.update[..] == eor[..]).count();
    assert_eq!(again, 1);
}

/// A BIRD at 127.0.0.`last` in `asn`; it announces `routes` (its AS `prepend` extra times,
/// next hop 198.51.100.`last`), and takes several paths per prefix when `add_path`.
fn bird_peer(
    (last, asn): (u8, u32),
    (port, port_r): (u16, u16),
    routes: &[String],
    prepend: usize,
    add_path: bool,
) -> String {
    let statics: String = routes
        .iter()
        .map(|r| format!("route {r} blackhole; "))
        .collect();
    let prepends: String = (0..prepend)
        .map(|_| format!("bgp_path.prepend({asn}); "))
        .collect();
    let rx = if add_path { "add paths rx;" } else { "" };
    format!(
        r#"router id 127.0.0.{last};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
protocol bgp ribsh {{
  local 127.0.0.{last} port {port} as {asn};
  neighbor 127.0.0.70 port {port_r} as 65070;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; {rx} export filter {{ if proto != "s4" then reject; {prepends} accept; }};
          next hop address 198.51.100.{last}; }};
}}
"#
    )
}

/// A station that connects once an Add-Path member (two paths per prefix) holds its routes
/// is dumped both paths of each prefix for it, as its group sends them: under distinct
/// identifiers, one path through each upstream.
#[test]
fn an_add_path_members_dump_has_every_path_it_is_sent() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("bmp-add-path");
    let port_r = free_port("127.0.0.70");
    let ports: Vec<u16> = (71..=73)
        .map(|l| free_port(&format!("127.0.0.{l}")))
        .collect();
    // Listened on only once the member holds its routes: the routes come in the dump.
    let station_port = free_port("127.0.0.1");
    let neighbor = |last: u8, asn: u32, port: u16| {
        format!(
            "[[bgp.group.neighbor]]\naddress = \"127.0.0.{last}\"\npeer-as = {asn}\n\
             port = {port}\nlocal-address = \"127.0.0.70\"\nmultihop = true\npassive = true\n"
        )
    };
    let config = format!(
        "[bgp]\nlocal-as = 65070\nrouter-id = \"127.0.0.70\"\nlisten = [\"127.0.0.70:{port_r}\"]\n\
         [bgp.update-delay]\nestablish-wait = 0\n\
         [[bgp.group]]\nname = \"up\"\ntype = \"external\"\nimport = [\"accept\"]\n\
         export = [\"reject\"]\n{}{}\
         [[bgp.group]]\nname = \"down\"\ntype = \"external\"\nimport = [\"reject\"]\n\
         export = [\"accept\"]\nnext-hop-self = false\nadd-path-send = {{ path-count = 2 }}\n{}\
         [[bmp.station]]\naddress = \"127.0.0.1\"\nport = {station_port}\n\
         route-monitoring = [\"adj-rib-out\"]\nstatistics-timeout = 0\nretry = 1\nretry-max = 1\n",
        neighbor(71, 65071, ports[0]),
        neighbor(72, 65072, ports[1]),
        neighbor(73, 65073, ports[2]),
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let routes: Vec<String> = (0..10).map(|i| format!("10.71.{i}.0/24")).collect();
    let down = Bird::start(
        &sub("d"),
        &bird_peer((73, 65073), (ports[2], port_r), &[], 0, true),
    );
    let _a = Bird::start(
        &sub("a"),
        &bird_peer((71, 65071), (ports[0], port_r), &routes, 0, false),
    );
    let _b = Bird::start(
        &sub("b"),
        &bird_peer((72, 65072), (ports[1], port_r), &routes, 1, false),
    );
    // BIRD holds two routes per prefix, one through each upstream.
    let held = || down.cmd("show route protocol ribsh").matches("[AS").count();
    assert!(
        wait(30, || held() == 2 * routes.len()),
        "{}\n{}",
        down.cmd("show route protocol ribsh"),
        log_of(&dir)
    );
    let all = station(TcpListener::bind(("127.0.0.1", station_port)).unwrap());
    let eor = UpdateBuilder::end_of_rib(Family::Ipv4Unicast);
    let out = || -> Vec<Monitored> {
        let m = all.lock().unwrap();
        m.iter()
            .filter(|m| m.flags & peer_flags::O != 0 && m.peer.to_string() == "127.0.0.73")
            .cloned()
            .collect()
    };
    assert!(
        wait(30, || out().iter().any(|m| m.update[..] == eor[..])),
        "no Adj-RIB-Out dump for the member: {} messages\n{}",
        out().len(),
        log_of(&dir)
    );
    // Its session's encoding: Add-Path in IPv4.
    let params = SessionParams {
        four_octet_as: true,
        add_path: [true, false],
        ..SessionParams::default()
    };
    let mut paths: BTreeMap<String, BTreeSet<(u32, String)>> = BTreeMap::new();
    for m in out() {
        let Ok(Message::Update(u)) = decode(&m.update, &params) else {
            panic!("an UPDATE the member's session decodes");
        };
        let a = ribshard_wire::attributes::PathAttributes::from_view(&u.attrs, &params);
        let nh = a
            .list
            .iter()
            .find_map(|v| match v.value {
                ribshard_wire::attributes::AttrValue::NextHop(n) => Some(n.to_string()),
                _ => None,
            })
            .unwrap_or_default();
        for n in u.announced() {
            let id = n.path_id.expect("a path identifier");
            paths
                .entry(n.prefix.to_string())
                .or_default()
                .insert((id, nh.clone()));
        }
    }
    assert_eq!(paths.len(), routes.len(), "{paths:?}");
    for (prefix, p) in &paths {
        let ids: BTreeSet<u32> = p.iter().map(|(id, _)| *id).collect();
        let hops: BTreeSet<&str> = p.iter().map(|(_, nh)| nh.as_str()).collect();
        assert_eq!(ids.len(), 2, "{prefix}: {p:?}");
        assert_eq!(
            hops,
            BTreeSet::from(["198.51.100.71", "198.51.100.72"]),
            "{prefix}: {p:?}"
        );
    }
}
