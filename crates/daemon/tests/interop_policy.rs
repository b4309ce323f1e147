//! Routing policy between real BIRDs: a BIRD upstream sends routes with communities and
//! prepends, ribshard filters and rewrites them on import and export, a BIRD downstream
//! gets exactly what the policies say. Then a reload changes both policies: the downstream
//! table follows with both BIRD sessions kept up, and no route refresh is asked of the
//! upstream (its routes were kept as received). Skips (saying so) without BIRD.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const PORT_R: u16 = 28131;
const PORT_UP: u16 = 28132;
const PORT_DOWN: u16 = 28133;

/// The upstream: AS65041 on 127.0.0.41, every route with MED 50, (65041,100) and
/// (65041,7,8); 198.51.100.0/24 also tagged (65041,666) as a blackhole, 100.64.0.0/24 with
/// its AS three times.
fn upstream() -> String {
    format!(
        r#"router id 127.0.0.41;
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; route 203.0.113.0/24 blackhole; route 198.51.100.0/24 blackhole;
  route 100.64.0.0/24 blackhole; route 192.0.2.0/25 blackhole; route 10.10.0.0/16 blackhole; }}
filter attrs {{
  if proto != "s4" then accept;
  bgp_med = 50;
  bgp_community.add((65041, 100));
  bgp_large_community.add((65041, 7, 8));
  if net = 198.51.100.0/24 then bgp_community.add((65041, 666));
  if net = 100.64.0.0/24 then {{ bgp_path.prepend(65041); bgp_path.prepend(65041); }}
  accept;
}}
protocol bgp ribsh {{
  local 127.0.0.41 port {PORT_UP} as 65041;
  neighbor 127.0.0.40 port {PORT_R} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import none; export filter attrs; next hop address 198.51.100.41; }};
}}
"#
    )
}

/// The downstream: AS65045 on 127.0.0.45, taking everything.
fn downstream() -> String {
    format!(
        r#"router id 127.0.0.45;
log "DIR/bird.log" all;
protocol device {{}}
protocol bgp ribsh {{
  local 127.0.0.45 port {PORT_DOWN} as 65045;
  neighbor 127.0.0.40 port {PORT_R} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export none; }};
}}
"#
    )
}

/// ribshard between them, with `policies` ([policy-options]) and the chains named.
fn config(policies: &str) -> String {
    format!(
        r#"[bgp]
local-as = 65040
router-id = "127.0.0.40"
listen = ["127.0.0.40:{PORT_R}"]
[bgp.rib-sharding]
number-of-shards = 2
[bgp.update-threading]
number-of-threads = 2
[[bgp.group]]
name = "up"
type = "external"
peer-as = 65041
import = ["up-in"]
export = ["reject"]
[[bgp.group.neighbor]]
address = "127.0.0.41"
port = {PORT_UP}
local-address = "127.0.0.40"
multihop = true
passive = true
[[bgp.group]]
name = "down"
type = "external"
peer-as = 65045
import = ["reject"]
export = ["down-out"]
[[bgp.group.neighbor]]
address = "127.0.0.45"
port = {PORT_DOWN}
local-address = "127.0.0.40"
multihop = true
passive = true

{policies}
"#
    )
}

/// The import and export policies; `blackhole`: refuse routes tagged (65041,666);
/// `med`: what export sets.
fn policies(blackhole: bool, med: u32) -> String {
    let blackhole_term = if blackhole {
        "[[policy-options.policy-statement.up-in.term]]\nname = \"blackhole\"\n\
         from = { community = \"blackholed\" }\nthen = { action = \"reject\" }\n"
    } else {
        ""
    };
    format!(
        r#"[policy-options.prefix-list.shared]
prefixes = ["100.64.0.0/10"]
[policy-options.community.blackholed]
members = ["65041:666"]
[policy-options.community.ours]
members = ["65040:1"]
[policy-options.community.from-65041]
members = ["65041:*"]
[policy-options.as-path]
prepended = ".{{3,}}"

[[policy-options.policy-statement.up-in.term]]
name = "prepended-shared-space"
from = {{ prefix-list-filter = {{ list = "shared", match = "orlonger" }}, as-path = "prepended" }}
then = {{ local-preference = 50, action = "next-term" }}
[[policy-options.policy-statement.up-in.term]]
name = "too-specific"
from = {{ route-filter = ["0.0.0.0/0 prefix-length-range /25-/32"] }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.up-in.term]]
name = "rfc1918"
from = {{ route-filter = ["10.0.0.0/8 orlonger"] }}
then = {{ action = "reject" }}
{blackhole_term}
[[policy-options.policy-statement.up-in.term]]
name = "tag"
then = {{ community-add = "ours", action = "accept" }}

[[policy-options.policy-statement.down-out.term]]
name = "ours"
from = {{ community = "ours" }}
then = {{ metric = {med}, as-path-prepend = [65040], community-delete = "from-65041", action = "accept" }}
[[policy-options.policy-statement.down-out.term]]
name = "rest"
then = {{ action = "reject" }}
"#
    )
}

fn show(b: &Bird, p: &str) -> String {
    b.cmd(&format!("show route all {p}"))
}

fn protocol_line(b: &Bird) -> String {
    let out = b.cmd("show protocols ribsh");
    out.lines()
        .find(|l| l.starts_with("ribsh"))
        .unwrap_or("")
        .to_string()
}

/// ROUTE-REFRESH messages ribshard sent a neighbor, from its API.
fn refreshes_sent(sock: &Path, neighbor: &str) -> u64 {
    neighbor_json(sock, neighbor)["counters"]["sent"]["route_refresh"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

#[test]
fn policies_filter_and_rewrite_and_change_with_sessions_kept() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("policy");
    let (d_up, d_down) = (dir.join("up"), dir.join("down"));
    std::fs::create_dir_all(&d_up).unwrap();
    std::fs::create_dir_all(&d_down).unwrap();
    let (rs, _) = ribshard(&dir, &config(&policies(true, 77)));
    let up = Bird::start(&d_up, &upstream());
    let down = Bird::start(&d_down, &downstream());
    assert!(
        wait(40, || show(&down, "203.0.113.0/24").contains("BGP.as_path")
            && show(&down, "100.64.0.0/24").contains("BGP.as_path")),
        "{}\n{}",
        down.cmd("show route all"),
        log_of(&dir)
    );
    // Exactly what the policies say: our AS twice (prepend after ours), MED set, the
    // upstream's communities deleted and ours added, the large community kept.
    let r = show(&down, "203.0.113.0/24");
    assert!(r.contains("BGP.as_path: 65040 65040 65041\n"), "{r}");
    assert!(r.contains("BGP.med: 77"), "{r}");
    assert!(r.contains("BGP.community: (65040,1)\n"), "{r}");
    assert!(r.contains("BGP.large_community: (65041, 7, 8)"), "{r}");
    let r = show(&down, "100.64.0.0/24");
    assert!(
        r.contains("BGP.as_path: 65040 65040 65041 65041 65041\n"),
        "{r}"
    );
    // Refused on import: the blackholed, the too specific, RFC 1918.
    for p in ["198.51.100.0/24", "192.0.2.0/25", "10.10.0.0/16"] {
        assert!(
            !show(&down, p).contains("BGP.as_path"),
            "{p}: {}",
            show(&down, p)
        );
    }
    // Kept in ribshard's Adj-RIB-In as received, marked rejected; local preference set
    // on import where the term matched.
    let sock = socket(&dir);
    let routes = |p: &str, hidden: bool| -> Vec<serde_json::Value> {
        let mut args = vec![
            "--socket",
            sock.to_str().unwrap(),
            "--json",
            "show",
            "route",
            p,
        ];
        if hidden {
            args.push("hidden");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_ribshard"))
            .args(&args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let hidden = routes("198.51.100.0/24", true);
    assert_eq!(hidden.len(), 1, "{hidden:?}");
    assert_eq!(
        hidden[0]["paths"][0]["reason"]["step"], "rejected",
        "{hidden:?}"
    );
    let prepended = routes("100.64.0.0/24", false);
    assert_eq!(prepended[0]["paths"][0]["local_pref"], 50, "{prepended:?}");
    assert_eq!(
        prepended[0]["paths"][0]["import_policy"], "policy up-in term tag",
        "{prepended:?}"
    );
    // `show route ... rejected` in the CLI's layout names the term that rejected it.
    let text = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .args([
            "--socket",
            sock.to_str().unwrap(),
            "show",
            "route",
            "198.51.100.0/24",
        ])
        .args(["rejected", "detail"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Hidden reason: Rejected by import policy")
            && text.contains("Import: policy up-in term blackhole"),
        "{text}"
    );

    // Reload: the blackhole term goes, the MED becomes 88.
    let before = (protocol_line(&up), protocol_line(&down));
    assert!(before.0.contains("Established") && before.1.contains("Established"));
    let history = [
        session_history(&sock, "127.0.0.41"),
        session_history(&sock, "127.0.0.45"),
    ];
    assert!(history.iter().all(|h| h.0 >= 1), "{history:?}");
    let refreshes = refreshes_sent(&sock, "127.0.0.41");
    std::fs::write(
        dir.join("ribshard.toml"),
        with_socket(&dir, &config(&policies(false, 88))),
    )
    .unwrap();
    let ok = Command::new("kill")
        .args(["-HUP", &rs.0.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(
        wait(30, || show(&down, "198.51.100.0/24")
            .contains("BGP.as_path")
            && show(&down, "203.0.113.0/24").contains("BGP.med: 88")
            && show(&down, "100.64.0.0/24").contains("BGP.med: 88")),
        "{}\n{}",
        down.cmd("show route all"),
        log_of(&dir)
    );
    let log = log_of(&dir);
    assert!(
        log.contains("import policy changed: applied again to the routes kept as received"),
        "{log}"
    );
    assert!(log.contains("export policy changed"), "{log}");
    let after = (protocol_line(&up), protocol_line(&down));
    assert!(
        after.0.contains("Established") && after.1.contains("Established"),
        "{after:?}"
    );
    assert_eq!(
        [
            session_history(&sock, "127.0.0.41"),
            session_history(&sock, "127.0.0.45"),
        ],
        history,
        "both sessions kept up: {before:?} then {after:?}"
    );
    assert_eq!(
        refreshes_sent(&sock, "127.0.0.41"),
        refreshes,
        "no route refresh asked of the upstream"
    );
    assert!(!log.contains("Cease"), "no session reset: {log}");
}

/// A route server client BIRD: AS `asn` on `addr`:`port`, peering with ribshard on
/// 127.0.0.40:`port_r`; it announces `routes`, each with the communities given.
fn rs_client(addr: &str, asn: u32, port: u16, port_r: u16, routes: &[(&str, &str)]) -> String {
    let statics: String = routes
        .iter()
        .map(|(p, _)| format!("route {p} blackhole; "))
        .collect();
    let tags: String = routes
        .iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(p, c)| format!("  if net = {p} then {{ {c} }}\n"))
        .collect();
    let last = addr.rsplit('.').next().unwrap();
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
filter tags {{
  if proto != "s4" then accept;
{tags}  accept;
}}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; enforce first as off; hold time 30; connect retry time 2;
  ipv4 {{ import all; export filter tags; next hop address 198.51.100.{last}; }};
}}
"#
    )
}

/// ribshard as a route server reading the IXP control communities on export, each client
/// in its own group with chains of its own: client C's export also refuses 192.0.2.0/24.
#[test]
fn route_server_control_communities_between_birds() {
    if !have_bird() {
        return;
    }
    let (port_r, pa, pb, pc) = (
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
        free_port("0.0.0.0"),
    );
    let dir = tempdir("rs-control");
    let group = |name: &str, asn: u32, addr: &str, port: u16, export: &str| {
        format!(
            "[[bgp.group]]\nname = \"{name}\"\ntype = \"external\"\npeer-as = {asn}\n\
             route-server-client = true\nimport = [\"accept\"]\n\
             export = [\"route-server-control\", {export}\"accept\"]\n\
             [[bgp.group.neighbor]]\naddress = \"{addr}\"\nport = {port}\n\
             local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n"
        )
    };
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         {}{}{}\n\
         [[policy-options.policy-statement.no-192-0-2.term]]\n\
         from = {{ route-filter = [\"192.0.2.0/24 exact\"] }}\nthen = {{ action = \"reject\" }}\n",
        group("ixp-a", 65041, "127.0.0.41", pa, ""),
        group("ixp-b", 65045, "127.0.0.45", pb, ""),
        group("ixp-c", 65046, "127.0.0.46", pc, "\"no-192-0-2\", "),
    );
    let (_rs, _) = ribshard(&dir, &config);
    let mk = |name: &str, conf: String| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        Bird::start(&d, &conf)
    };
    let _a = mk(
        "a",
        rs_client(
            "127.0.0.41",
            65041,
            pa,
            port_r,
            &[
                ("203.0.113.0/24", "bgp_community.add((0, 65045));"),
                ("198.51.100.0/24", "bgp_community.add((65502, 65046));"),
                (
                    "192.0.2.0/24",
                    "bgp_community.add((0, 65040)); bgp_community.add((65040, 65046));",
                ),
                (
                    "100.64.0.0/24",
                    "bgp_large_community.add((65040, 0, 65046));",
                ),
            ],
        ),
    );
    let b = mk("b", rs_client("127.0.0.45", 65045, pb, port_r, &[]));
    let c = mk("c", rs_client("127.0.0.46", 65046, pc, port_r, &[]));
    let show = |bird: &Bird, p: &str| bird.cmd(&format!("show route all {p}"));
    assert!(
        wait(40, || show(&c, "203.0.113.0/24").contains("BGP.as_path")
            && show(&b, "198.51.100.0/24").contains("BGP.as_path")
            && show(&b, "100.64.0.0/24").contains("BGP.as_path")),
        "{}\n{}\n{}",
        b.cmd("show route all"),
        c.cmd("show route all"),
        log_of(&dir)
    );
    // 0:65045: not to B.
    assert!(!show(&b, "203.0.113.0/24").contains("BGP.as_path"));
    // 65502:65046: prepended twice towards C, not towards B; the community stripped.
    let to_c = show(&c, "198.51.100.0/24");
    assert!(to_c.contains("BGP.as_path: 65041 65041 65041\n"), "{to_c}");
    assert!(!to_c.contains("BGP.community"), "{to_c}");
    let to_b = show(&b, "198.51.100.0/24");
    assert!(to_b.contains("BGP.as_path: 65041\n"), "{to_b}");
    // 0:65040 with 65040:65046: only to C, and C's own export policy refuses it: no one
    // holds it.
    assert!(!show(&b, "192.0.2.0/24").contains("BGP.as_path"));
    assert!(!show(&c, "192.0.2.0/24").contains("BGP.as_path"));
    // Large form: 65040:0:65046, not to C.
    assert!(!show(&c, "100.64.0.0/24").contains("BGP.as_path"));
    let to_b = show(&b, "100.64.0.0/24");
    assert!(!to_b.contains("BGP.large_community"), "stripped: {to_b}");
}
