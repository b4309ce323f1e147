//! Route origin validation against a real RTR cache (NLnet Labs' rtrtr serving a JSON file
//! of ROAs and ASPAs), between real BIRD 2 peers: an upstream announces valid, invalid and
//! not-found routes, ribshard's import policy rejects the invalid and tags the rest, a
//! downstream sees the outcome; then the cache's data changes and only then do the routes
//! it makes valid reach the downstream.

mod common;

use common::operator::{bird_table, cli};
use common::*;
use std::time::Instant;

/// A /24 of each of these /16s: 10.1 has a ROA for the upstream's AS (valid), 10.2 one
/// for another AS (invalid), 10.3 none (not found); 10.4 has none either but comes with
/// AS 65010 behind the upstream, whose ASPA record names another provider (a leak: ASPA
/// invalid).
const PER_BLOCK: usize = 10;

fn roas(ten_two_as: u32) -> String {
    format!(
        r#"{{"roas": [
  {{"asn": "AS65041", "prefix": "10.1.0.0/16", "maxLength": 24}},
  {{"asn": "AS{ten_two_as}", "prefix": "10.2.0.0/16", "maxLength": 24}},
  {{"asn": "AS65099", "prefix": "2001:db8::/32", "maxLength": 48}}
], "aspas": [{{"customer": 65041, "providers": [65040]}},
  {{"customer": 65010, "providers": [65020]}}]}}"#
    )
}

fn bird(addr: &str, asn: u32, port: u16, port_r: u16, statics: &str, export: &str) -> String {
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
filter leak {{
  if net ~ [ 10.4.0.0/16+ ] then bgp_path.prepend(65010);
  accept;
}}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export {export}; next hop address 198.51.100.1; }};
}}
"#
    )
}

fn block(b: u8) -> Vec<String> {
    (0..PER_BLOCK).map(|i| format!("10.{b}.{i}.0/24")).collect()
}

#[test]
fn origin_validation_with_rtrtr_and_bird() {
    let Some(bin) = rtrtr() else { return };
    if !have_bird() {
        return;
    }
    let dir = tempdir("rpki");
    let cache = Rtrtr::start(&bin, &dir, &roas(65099));
    // A cache preferred to rtrtr that is not there: the client fails over.
    let absent = free_port("127.0.0.1");
    let port_r = free_port("127.0.0.40");
    let (port_a, port_b) = (free_port("127.0.0.41"), free_port("127.0.0.42"));
    let config = format!(
        r#"[bgp]
local-as = 65040
router-id = "127.0.0.40"
listen = ["127.0.0.40:{port_r}"]
[[bgp.group]]
name = "up"
type = "external"
peer-as = 65041
import = ["rov"]
export = ["reject"]
[[bgp.group.neighbor]]
address = "127.0.0.41"
port = {port_a}
local-address = "127.0.0.40"
multihop = true
passive = true
[[bgp.group]]
name = "down"
type = "external"
peer-as = 65042
import = ["reject"]
export = ["accept"]
[[bgp.group.neighbor]]
address = "127.0.0.42"
port = {port_b}
local-address = "127.0.0.40"
multihop = true
passive = true
[rpki]
retry = 1
[[rpki.cache]]
address = "127.0.0.1"
port = {absent}
preference = 1
[[rpki.cache]]
address = "127.0.0.1"
port = {}
preference = 2
[policy-options.community.valid]
members = ["65040:1"]
[policy-options.community.unknown]
members = ["65040:2"]
[policy-options.community.ovs-valid]
members = ["origin-validation-state:valid"]
[[policy-options.policy-statement.rov.term]]
name = "aspa-invalid"
from = {{ aspa-state = "invalid" }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.rov.term]]
name = "invalid"
from = {{ validation-state = "invalid" }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.rov.term]]
name = "valid"
from = {{ validation-state = "valid" }}
then = {{ community-add = ["valid"], action = "accept" }}
[[policy-options.policy-statement.rov.term]]
name = "unknown"
from = {{ validation-state = "unknown" }}
then = {{ community-add = ["unknown"], action = "accept" }}
"#,
        cache.port
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sock = socket(&dir);
    // The data first, so the routes are judged on it as they come (they would be judged
    // again anyway: that is the second half).
    assert!(
        wait(30, || cli(&sock, &["show", "validation", "session"])
            .0
            .contains(" up ")),
        "{}\n{}",
        cli(&sock, &["show", "validation", "session"]).0,
        log_of(&dir)
    );
    let session = cli(&sock, &["show", "validation", "session"]).0;
    assert!(
        session.contains("3 IPv4") || session.contains("2 IPv4"),
        "{session}"
    );
    assert!(
        session.contains("connect-failed"),
        "failover not shown:\n{session}"
    );
    let (db, ok) = cli(
        &sock,
        &["show", "validation", "database", "origin-as", "65041"],
    );
    assert!(
        ok && db.contains("10.1.0.0/16") && !db.contains("10.2.0.0/16"),
        "{db}"
    );
    assert!(
        db.contains("65041") && db.contains("65040"),
        "the ASPA record:\n{db}"
    );

    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let statics: String = [1, 2, 3, 4]
        .iter()
        .flat_map(|b| block(*b))
        .map(|r| format!("route {r} blackhole; "))
        .collect();
    let _a = Bird::start(
        &sub("a"),
        &bird("127.0.0.41", 65041, port_a, port_r, &statics, "filter leak"),
    );
    let b = Bird::start(
        &sub("b"),
        &bird("127.0.0.42", 65042, port_b, port_r, "", "none"),
    );
    let want: std::collections::BTreeSet<String> = block(1).into_iter().chain(block(3)).collect();
    assert!(
        wait(30, || bird_table(&b) == want),
        "downstream: {:?}\n{}",
        bird_table(&b),
        log_of(&dir)
    );
    // Tagged by state.
    let valid = b.cmd("show route 10.1.0.0/24 all");
    assert!(valid.contains("(65040,1)"), "{valid}");
    let unknown = b.cmd("show route 10.3.0.0/24 all");
    assert!(unknown.contains("(65040,2)"), "{unknown}");
    // ribshard shows each path's state and filters on it.
    let (invalid, _) = cli(
        &sock,
        &["show", "route", "validation-state", "invalid", "rejected"],
    );
    for p in block(2) {
        assert!(invalid.contains(&p), "{p} not shown as invalid:\n{invalid}");
    }
    assert!(!invalid.contains("10.1.0.0/24"), "{invalid}");
    let (detail, _) = cli(&sock, &["show", "route", "10.1.0.0/24", "detail"]);
    assert!(detail.contains("Validation State: valid"), "{detail}");
    // The leak was refused by its ASPA state, not its origin validation (not found).
    let (leak, _) = cli(
        &sock,
        &["show", "route", "10.4.0.0/24", "detail", "rejected"],
    );
    assert!(
        leak.contains("65041 65010") && leak.contains("Validation State: not-found"),
        "{leak}"
    );

    // The cache now has 10.2.0.0/16 for the upstream's AS: the invalid routes become
    // valid and reach the downstream, with no session reset and no route refresh.
    let changed = Instant::now();
    cache.set(&roas(65041));
    let all: std::collections::BTreeSet<String> =
        [1, 2, 3].iter().flat_map(|b| block(*b)).collect();
    assert!(
        wait(30, || bird_table(&b) == all),
        "after the cache's change: {:?}\n{}",
        bird_table(&b),
        log_of(&dir)
    );
    eprintln!(
        "cache change to routes at the downstream: {:.1} s (rtrtr reads its file every second)",
        changed.elapsed().as_secs_f64()
    );
    let now_valid = b.cmd("show route 10.2.0.0/24 all");
    assert!(now_valid.contains("(65040,1)"), "{now_valid}");
    let log = log_of(&dir);
    assert!(log.contains("rpki: new data from the cache"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
