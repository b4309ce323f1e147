//! The looking glass: ribshard as a route server between real BIRD 2 clients, its
//! birdwatcher API read over HTTP, and read again the way Alice-LG's birdwatcher source
//! reads it (crates/daemon/tests/alice/main.go, run with the Go toolchain): the neighbors
//! with their counts, each one's imported, filtered and not-exported routes with their
//! attributes, pages of a long list.

mod common;

use common::operator::bird_table;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

fn bird(addr: &str, asn: u32, port: u16, port_r: u16, statics: &str) -> String {
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export filter {{
    if proto != "s4" then reject;
    if net = 10.1.0.0/24 then bgp_med = 50;
    accept;
  }}; }};
}}
"#
    )
}

/// GET on the API's TCP listener: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = Vec::new();
    s.read_to_end(&mut r).unwrap();
    let r = String::from_utf8_lossy(&r).to_string();
    let status = r
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = r.split_once("\r\n\r\n").unwrap_or_default();
    // Streamed replies come chunked.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

fn json(addr: &str, path: &str) -> Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}\n{body}"))
}

fn networks(v: &Value) -> BTreeSet<String> {
    v["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["network"].as_str().unwrap().to_string())
        .collect()
}

fn set(l: &[&str]) -> BTreeSet<String> {
    l.iter().map(|s| s.to_string()).collect()
}

#[test]
fn birdwatcher_api_for_alice_lg() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("looking-glass");
    let port_r = free_port("127.0.0.40");
    let (port_a, port_b) = (free_port("127.0.0.41"), free_port("127.0.0.42"));
    let api = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let client = |name: &str, asn: u32, addr: &str, port: u16, export: &str| {
        format!(
            "[[bgp.group]]\nname = \"{name}\"\ntype = \"external\"\npeer-as = {asn}\n\
             route-server-client = true\nimport = [\"no-10-9\", \"accept\"]\n\
             export = [{export}\"accept\"]\n\
             [[bgp.group.neighbor]]\naddress = \"{addr}\"\nport = {port}\n\
             description = \"member {asn}\"\n\
             local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n"
        )
    };
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         {}{}\
         [management]\nsocket = \"{}\"\nlisten = [\"{api}\"]\nread-only = true\n\
         [[policy-options.policy-statement.no-10-9.term]]\n\
         from = {{ route-filter = [\"10.9.0.0/16 orlonger\"] }}\nthen = {{ action = \"reject\" }}\n\
         [[policy-options.policy-statement.not-10-1-1.term]]\n\
         from = {{ route-filter = [\"10.1.1.0/24 exact\"] }}\nthen = {{ action = \"reject\" }}\n",
        client("a", 65041, "127.0.0.41", port_a, ""),
        client("b", 65042, "127.0.0.42", port_b, "\"not-10-1-1\", "),
        socket(&dir).display(),
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    // A: two members' routes with communities of each kind, one the RS filters. B: one.
    let a_routes = "route 10.1.0.0/24 blackhole { bgp_community.add((65041,100)); \
                    bgp_large_community.add((65041,1,2)); bgp_ext_community.add((rt,65041,7)); }; route 10.1.1.0/24 blackhole; route 10.9.0.0/24 blackhole;";
    let a = Bird::start(
        &sub("a"),
        &bird("127.0.0.41", 65041, port_a, port_r, a_routes),
    );
    let b = Bird::start(
        &sub("b"),
        &bird(
            "127.0.0.42",
            65042,
            port_b,
            port_r,
            "route 10.2.0.0/24 blackhole;",
        ),
    );
    assert!(
        wait(30, || bird_table(&b) == set(&["10.1.0.0/24"])
            && bird_table(&a) == set(&["10.2.0.0/24"])),
        "a: {:?} b: {:?}\n{}",
        bird_table(&a),
        bird_table(&b),
        log_of(&dir)
    );
    let base = "/birdwatcher";

    let status = json(&api, &format!("{base}/status"));
    assert_eq!(status["api"]["result_from_cache"], Value::Bool(false));
    assert!(status["api"]["Version"]
        .as_str()
        .unwrap()
        .starts_with("ribshard"));
    assert_eq!(status["status"]["router_id"], "127.0.0.40");
    assert!(status["ttl"].as_str().unwrap().ends_with('Z'));

    // B holding A's first route does not mean A's other UPDATEs (a route of other attributes,
    // the one import filters) have been taken in yet: wait for the route server's counts.
    let protocols_now = || json(&api, &format!("{base}/protocols/bgp"));
    assert!(
        wait(30, || {
            let p = protocols_now();
            let pa = &p["protocols"]["R127_0_0_41"];
            pa["routes"]["imported"] == 2 && pa["routes"]["filtered"] == 1
        }),
        "{}",
        protocols_now()
    );
    let protocols = protocols_now();
    let pa = &protocols["protocols"]["R127_0_0_41"];
    assert_eq!(pa["neighbor_address"], "127.0.0.41");
    assert_eq!(pa["neighbor_as"], 65041);
    assert_eq!(pa["state"], "up");
    assert_eq!(pa["description"], "member 65041");
    assert_eq!(pa["routes"]["imported"], 2, "{pa}");
    assert_eq!(pa["routes"]["filtered"], 1, "{pa}");
    assert_eq!(pa["routes"]["exported"], 1, "{pa}");
    let pb = &protocols["protocols"]["R127_0_0_42"];
    assert_eq!(pb["routes"]["imported"], 1, "{pb}");
    assert_eq!(pb["routes"]["exported"], 1, "{pb}");

    let received = json(&api, &format!("{base}/routes/protocol/R127_0_0_41"));
    assert_eq!(networks(&received), set(&["10.1.0.0/24", "10.1.1.0/24"]));
    let r = received["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["network"] == "10.1.0.0/24")
        .unwrap()
        .clone();
    assert_eq!(r["from_protocol"], "R127_0_0_41");
    assert_eq!(r["gateway"], "127.0.0.41");
    assert_eq!(r["primary"], Value::Bool(true));
    assert_eq!(r["bgp"]["as_path"], serde_json::json!(["65041"]));
    assert_eq!(r["bgp"]["med"], "50");
    assert_eq!(r["bgp"]["origin"], "IGP");
    assert_eq!(r["bgp"]["communities"], serde_json::json!([[65041, 100]]));
    assert_eq!(
        r["bgp"]["large_communities"],
        serde_json::json!([[65041, 1, 2]])
    );
    assert_eq!(
        r["bgp"]["ext_communities"],
        serde_json::json!([["rt", "65041", "7"]])
    );
    // The address names the protocol too.
    let by_address = json(&api, &format!("{base}/routes/peer/127.0.0.41"));
    assert_eq!(networks(&by_address), networks(&received));

    let filtered = json(&api, &format!("{base}/routes/filtered/R127_0_0_41"));
    assert_eq!(networks(&filtered), set(&["10.9.0.0/24"]));
    let exported = json(&api, &format!("{base}/routes/export/R127_0_0_42"));
    assert_eq!(networks(&exported), set(&["10.1.0.0/24"]));
    // Transparent towards route server clients: A's AS path, no AS of ours.
    assert_eq!(
        exported["routes"][0]["bgp"]["as_path"],
        serde_json::json!(["65041"])
    );
    let noexport = json(&api, &format!("{base}/routes/noexport/R127_0_0_42"));
    assert_eq!(networks(&noexport), set(&["10.1.1.0/24"]));
    // A's own routes are never sent back to it, and that is not "not exported".
    let noexport_a = json(&api, &format!("{base}/routes/noexport/R127_0_0_41"));
    assert_eq!(networks(&noexport_a), BTreeSet::new());

    let table = json(&api, &format!("{base}/routes/table/master4"));
    assert_eq!(
        networks(&table),
        set(&["10.1.0.0/24", "10.1.1.0/24", "10.2.0.0/24"])
    );
    let table_filtered = json(&api, &format!("{base}/routes/table/master/filtered"));
    assert_eq!(networks(&table_filtered), set(&["10.9.0.0/24"]));
    let lookup = json(&api, &format!("{base}/routes/prefix?prefix=10.2.0.0/24"));
    assert_eq!(networks(&lookup), set(&["10.2.0.0/24"]));
    let count = json(&api, &format!("{base}/routes/count/table/master"));
    assert_eq!(count["routes"], 3);

    // Pages: two routes, one at a time, in the table's order.
    let first = json(&api, &format!("{base}/routes/protocol/R127_0_0_41?limit=1"));
    let second = json(
        &api,
        &format!("{base}/routes/protocol/R127_0_0_41?offset=1&limit=1"),
    );
    assert_eq!(networks(&first), set(&["10.1.0.0/24"]));
    assert_eq!(first["pagination"]["more"], Value::Bool(true));
    assert_eq!(networks(&second), set(&["10.1.1.0/24"]));
    assert_eq!(second["pagination"]["more"], Value::Bool(false));

    let (code, body) = get(&api, &format!("{base}/routes/protocol/R192_0_2_1"));
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("\"error\""), "{body}");

    alice_reads(&api, &dir);
}

/// The same API read as Alice-LG reads it.
fn alice_reads(api: &str, dir: &Path) {
    if Command::new("go").arg("version").output().is_err() {
        ribshard_mrt::skipped("go is not installed: Alice-LG's decoding not checked");
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/alice/main.go");
    let out = Command::new("go")
        .arg("run")
        .arg(&src)
        .arg(format!("http://{api}/birdwatcher"))
        .env("GOTOOLCHAIN", "local")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "alice: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &v["neighbors"];
    assert_eq!(n.as_array().unwrap().len(), 2, "{v}");
    assert_eq!(n[0]["id"], "R127_0_0_41");
    assert_eq!(n[0]["asn"], 65041);
    assert_eq!(n[0]["state"], "up");
    assert_eq!(
        (&n[0]["received"], &n[0]["accepted"], &n[0]["filtered"]),
        (&Value::from(3), &Value::from(2), &Value::from(1)),
        "{v}"
    );
    assert_eq!(n[0]["channels"], 1);
    // Up for less than the test has run: the times were read as times.
    assert!(n[0]["uptime_seconds"].as_i64().unwrap() < 120, "{v}");
    assert_eq!(v["short"]["R127_0_0_42"], "up");
    let a = &v["routes"]["R127_0_0_41"];
    let nets = |l: &Value| -> BTreeSet<String> {
        l.as_array()
            .unwrap()
            .iter()
            .map(|r| r["network"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(nets(&a["imported"]), set(&["10.1.0.0/24", "10.1.1.0/24"]));
    assert_eq!(nets(&a["filtered"]), set(&["10.9.0.0/24"]));
    let r = &a["imported"][0];
    assert_eq!(r["as_path"], serde_json::json!([65041]));
    assert_eq!(r["med"], 50);
    assert_eq!(r["communities"], serde_json::json!([[65041, 100]]));
    assert_eq!(r["large_communities"], serde_json::json!([[65041, 1, 2]]));
    assert_eq!(
        r["ext_communities"],
        serde_json::json!([["rt", "65041", "7"]])
    );
    assert!(r["age_seconds"].as_i64().unwrap() < 120, "{r}");
    assert_eq!(
        nets(&v["routes"]["R127_0_0_42"]["not_exported"]),
        set(&["10.1.1.0/24"])
    );
    assert_eq!(v["status"]["router_id"], "127.0.0.40");
}
