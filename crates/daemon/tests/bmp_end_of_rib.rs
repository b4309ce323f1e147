//! The post-policy feed's live End-of-RIB: when a neighbor's End-of-RIB has come and every
//! shard has handed on the routes before it (as import policy left them), the station is
//! sent an End-of-RIB with the L flag, after those routes. pmbmpd 1.7 does not log
//! End-of-RIB, so this station is a plain socket read with ribshard's own BMP decoder.

mod common;

use common::*;
use ribshard_bmp::message::{frame, peer_flags, MessageType};
use ribshard_wire::{decode, Family, Message, SessionParams, UpdateBuilder};
use std::io::Read;
use std::sync::{Arc, Mutex};

/// A post-policy Route Monitoring message: its neighbor and its UPDATE.
type Monitored = (std::net::IpAddr, Vec<u8>);

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
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let station = listener.local_addr().unwrap().port();
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
                let post = f.ty == MessageType::RouteMonitoring as u8
                    && f.peer.is_some_and(|p| p.flags & peer_flags::L != 0);
                if let (true, Some(p)) = (post, f.peer) {
                    into.lock().unwrap().push((p.address, f.body.to_vec()));
                }
                buf.drain(..len);
            }
        }
    });
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
port = {station}
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
    let at_eor = |m: &[Monitored]| m.iter().position(|(_, u)| u[..] == eor[..]);
    assert!(
        wait(30, || at_eor(&seen.lock().unwrap()).is_some()),
        "{shards} shards: no post-policy End-of-RIB: {} messages\n{}",
        seen.lock().unwrap().len(),
        log_of(&dir)
    );
    let m = seen.lock().unwrap().clone();
    let end = at_eor(&m).unwrap();
    let params = SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    };
    let mut before = 0;
    for (peer, u) in &m[..end] {
        assert_eq!(peer.to_string(), "127.0.0.55");
        if let Ok(Message::Update(u)) = decode(u, &params) {
            before += u.announced().count();
        }
    }
    assert_eq!(
        before, 99,
        "{shards} shards: every accepted route before the End-of-RIB"
    );
    assert_eq!(m[end].0.to_string(), "127.0.0.55");
    // Once: no second End-of-RIB for the family in the live feed.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let again = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, u)| u[..] == eor[..])
        .count();
    assert_eq!(again, 1);
}
