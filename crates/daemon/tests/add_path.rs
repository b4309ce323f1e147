//! Add-Path send (RFC 7911) to real receivers: three BIRD 2 upstreams announce the same
//! prefixes with paths of different lengths; a BIRD 2 downstream taking two paths per prefix
//! (`add-path-send = { path-count = 2 }`) and a GoBGP downstream taking them all
//! (`mode = "all"`) hold exactly those, under distinct identifiers, as upstreams come and go;
//! a BIRD downstream without Add-Path holds the best path alone.

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

const PREFIXES: usize = 20;

fn prefixes() -> Vec<String> {
    (0..PREFIXES).map(|i| format!("10.7.{i}.0/24")).collect()
}

/// An upstream in `asn` at 127.0.0.`last`, announcing every prefix with its AS `prepend`
/// extra times and next hop 198.51.100.`last` (an attribute only).
fn upstream(last: u8, asn: u32, port: u16, port_r: u16, prepend: usize) -> String {
    announcer(last, asn, port, port_r, prepend, true, false)
}

/// A BIRD at 127.0.0.`last` in `asn` announcing every prefix (when `announce`, its AS
/// `prepend` extra times, next hop 198.51.100.`last`); as a route server client, it also
/// takes several paths per prefix.
fn announcer(
    last: u8,
    asn: u32,
    port: u16,
    port_r: u16,
    prepend: usize,
    announce: bool,
    rs_client: bool,
) -> String {
    let statics: String = prefixes()
        .iter()
        .filter(|_| announce)
        .map(|r| format!("route {r} blackhole; "))
        .collect();
    let prepends: String = (0..prepend)
        .map(|_| format!("bgp_path.prepend({asn}); "))
        .collect();
    let (first_as, import) = if rs_client {
        ("enforce first as off;", "import all; add paths rx;")
    } else {
        ("", "import none;")
    };
    format!(
        r#"router id 127.0.0.{last};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; {statics} }}
protocol bgp ribsh {{
  local 127.0.0.{last} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; {first_as} hold time 30; connect retry time 2;
  ipv4 {{ {import} export filter {{ if proto != "s4" then reject; {prepends} accept; }};
          next hop address 198.51.100.{last}; }};
}}
"#
    )
}

/// A downstream BIRD at 127.0.0.`last`, taking several paths per prefix with `add_path`.
fn downstream(last: u8, port: u16, port_r: u16, add_path: bool) -> String {
    let rx = if add_path { "add paths rx;" } else { "" };
    format!(
        r#"router id 127.0.0.{last};
log "DIR/bird.log" all;
protocol device {{}}
protocol bgp ribsh {{
  local 127.0.0.{last} port {port} as 650{last};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export none; {rx} }};
}}
"#
    )
}

/// Per prefix, the next hops of the paths BIRD holds from ribshard.
fn bird_paths(b: &Bird) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut at = String::new();
    for l in b.cmd("show route protocol ribsh all").lines() {
        if let Some(first) = l.split_whitespace().next().filter(|w| w.contains('/')) {
            at = first.to_string();
        }
        if let Some(nh) = l.trim().strip_prefix("BGP.next_hop:") {
            out.entry(at.clone())
                .or_default()
                .insert(nh.trim().to_string());
        }
    }
    out
}

/// Every prefix with these next hops (by the upstream's last octet).
fn each(lasts: &[u8]) -> BTreeMap<String, BTreeSet<String>> {
    prefixes()
        .into_iter()
        .map(|p| (p, lasts.iter().map(|l| format!("198.51.100.{l}")).collect()))
        .collect()
}

struct GoBgpRx {
    _p: Proc,
    api: u16,
}

impl GoBgpRx {
    /// GoBGP at 127.0.0.46 (AS 65046), receiving several paths per prefix.
    fn start(dir: &Path, port: u16, port_r: u16) -> GoBgpRx {
        let conf = dir.join("gobgpd.toml");
        std::fs::write(
            &conf,
            format!(
                r#"[global.config]
  as = 65046
  router-id = "127.0.0.46"
  port = {port}
  local-address-list = ["127.0.0.46"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "127.0.0.40"
    peer-as = 65040
  [neighbors.transport.config]
    local-address = "127.0.0.46"
    remote-port = {port_r}
  [neighbors.timers.config]
    connect-retry = 2
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
    [neighbors.afi-safis.add-paths.config]
      receive = true
"#
            ),
        )
        .unwrap();
        let api = free_port("127.0.0.46");
        let p = Command::new("gobgpd")
            .arg("-f")
            .arg(&conf)
            .arg("-p")
            .arg("--api-hosts")
            .arg(format!("127.0.0.46:{api}"))
            .arg("--pprof-disable")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("gobgpd.log")).unwrap())
            .spawn()
            .expect("start gobgpd");
        GoBgpRx { _p: Proc(p), api }
    }

    /// Per prefix, the next hops of the paths it holds.
    fn paths(&self) -> BTreeMap<String, BTreeSet<String>> {
        let out = output(
            Command::new("gobgp")
                .args(["-u", "127.0.0.46", "-p", &self.api.to_string()])
                .args(["-j", "global", "rib", "-a", "ipv4"]),
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        let mut t: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (prefix, paths) in v.as_object().into_iter().flatten() {
            for p in paths.as_array().into_iter().flatten() {
                for a in p["attrs"].as_array().into_iter().flatten() {
                    if let Some(nh) = a["nexthop"].as_str() {
                        t.entry(prefix.clone()).or_default().insert(nh.to_string());
                    }
                }
            }
        }
        t
    }
}

#[test]
fn several_paths_per_prefix_to_bird_and_gobgp() {
    if !have_bird() || !have("gobgpd", "--version") {
        if !have("gobgpd", "--version") {
            ribshard_mrt::skipped("gobgpd is not installed (apt-get install gobgpd)");
        }
        return;
    }
    let dir = tempdir("add-path");
    let port_r = free_port("127.0.0.40");
    let ports: Vec<u16> = (41..=46)
        .map(|l| free_port(&format!("127.0.0.{l}")))
        .collect();
    let neighbor = |last: u8, port: u16| {
        format!(
            "[[bgp.group.neighbor]]\naddress = \"127.0.0.{last}\"\nport = {port}\n\
             local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n"
        )
    };
    let group = |name: &str, asn: u32, extra: &str, n: String| {
        format!(
            "[[bgp.group]]\nname = \"{name}\"\ntype = \"external\"\npeer-as = {asn}\n\
             import = [\"accept\"]\nexport = [\"accept\"]\nnext-hop-self = false\n{extra}{n}"
        )
    };
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [bgp.update-delay]\nestablish-wait = 0\n{}{}{}{}{}{}",
        group("a", 65041, "", neighbor(41, ports[0])),
        group("b", 65042, "", neighbor(42, ports[1])),
        group("c", 65043, "", neighbor(43, ports[2])),
        group(
            "two",
            65044,
            "add-path-send = { path-count = 2 }\n",
            neighbor(44, ports[3])
        ),
        group("one", 65045, "", neighbor(45, ports[4])),
        group(
            "all",
            65046,
            "add-path-send = { mode = \"all\" }\n",
            neighbor(46, ports[5])
        ),
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let two = Bird::start(&sub("two"), &downstream(44, ports[3], port_r, true));
    let one = Bird::start(&sub("one"), &downstream(45, ports[4], port_r, false));
    let all = GoBgpRx::start(&sub("all"), ports[5], port_r);
    let a = Bird::start(&sub("a"), &upstream(41, 65041, ports[0], port_r, 0));
    let _b = Bird::start(&sub("b"), &upstream(42, 65042, ports[1], port_r, 1));
    let _c = Bird::start(&sub("c"), &upstream(43, 65043, ports[2], port_r, 2));

    // The two best (A's, then B's one prepend) at BIRD, all three at GoBGP, A's alone
    // without Add-Path.
    let settled = |want2: &[u8], want1: &[u8], want_all: &[u8]| {
        wait(30, || {
            bird_paths(&two) == each(want2)
                && bird_paths(&one) == each(want1)
                && all.paths() == each(want_all)
        })
    };
    assert!(
        settled(&[41, 42], &[41], &[41, 42, 43]),
        "two: {:?}\none: {:?}\nall: {:?}\n{}",
        bird_paths(&two),
        bird_paths(&one),
        all.paths(),
        log_of(&dir)
    );
    // BIRD tells the paths apart by their identifiers: two routes per prefix.
    let shown = two.cmd("show route 10.7.0.0/24 protocol ribsh");
    assert_eq!(shown.matches("[AS").count(), 2, "{shown}");

    // A withdraws: B's becomes best and C's takes the second place.
    a.cmd("disable s4");
    assert!(
        settled(&[42, 43], &[42], &[42, 43]),
        "two: {:?}\none: {:?}\nall: {:?}\n{}",
        bird_paths(&two),
        bird_paths(&one),
        all.paths(),
        log_of(&dir)
    );
    // And back.
    a.cmd("enable s4");
    assert!(
        settled(&[41, 42], &[41], &[41, 42, 43]),
        "two: {:?}\none: {:?}\nall: {:?}\n{}",
        bird_paths(&two),
        bird_paths(&one),
        all.paths(),
        log_of(&dir)
    );

    // A downstream that comes up now gets the same from its table dump.
    two.cmd("disable ribsh");
    two.cmd("enable ribsh");
    assert!(
        wait(30, || bird_paths(&two) == each(&[41, 42])),
        "after its dump: {:?}",
        bird_paths(&two)
    );
}

/// A route server client at 127.0.0.`last` (AS 650`last`) taking several paths per prefix.
fn rs_client(last: u8, port: u16, port_r: u16, announce: bool, prepend: usize) -> String {
    announcer(
        last,
        65000 + u32::from(last),
        port,
        port_r,
        prepend,
        announce,
        true,
    )
}

/// RFC 7947 section 2.3.2.1: a route server that offers its clients every path hides none
/// behind its own best path; and a client is never sent its own path, whichever path is
/// best.
#[test]
fn route_server_clients_get_every_path_but_their_own() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("add-path-rs");
    let port_r = free_port("127.0.0.40");
    let ports: Vec<u16> = (41..=43)
        .map(|l| free_port(&format!("127.0.0.{l}")))
        .collect();
    let neighbors: String = (41..=43)
        .zip(&ports)
        .map(|(last, port)| {
            format!(
                "[[bgp.group.neighbor]]\naddress = \"127.0.0.{last}\"\npeer-as = {}\nport = {port}\n\
                 local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\n",
                65000 + last
            )
        })
        .collect();
    let config = format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [bgp.rib-sharding]\nnumber-of-shards = 2\n[bgp.update-threading]\nnumber-of-threads = 2\n\
         [[bgp.group]]\nname = \"ixp\"\ntype = \"external\"\nroute-server-client = true\n\
         import = [\"accept\"]\nexport = [\"accept\"]\nadd-path-send = {{ mode = \"all\" }}\n{neighbors}"
    );
    let (_rs, _) = ribshard(&dir, &config);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let a = Bird::start(&sub("a"), &rs_client(41, ports[0], port_r, true, 0));
    let b = Bird::start(&sub("b"), &rs_client(42, ports[1], port_r, true, 1));
    let c = Bird::start(&sub("c"), &rs_client(43, ports[2], port_r, false, 0));
    assert!(
        wait(30, || bird_paths(&c) == each(&[41, 42])
            && bird_paths(&a) == each(&[42])
            && bird_paths(&b) == each(&[41])),
        "a: {:?}\nb: {:?}\nc: {:?}\n{}",
        bird_paths(&a),
        bird_paths(&b),
        bird_paths(&c),
        log_of(&dir)
    );
    // B's path goes: C keeps A's alone, A holds nothing, B (whose own was never sent back)
    // still holds A's.
    b.cmd("disable s4");
    assert!(
        wait(30, || bird_paths(&c) == each(&[41])
            && bird_paths(&a).is_empty()
            && bird_paths(&b) == each(&[41])),
        "a: {:?}\nb: {:?}\nc: {:?}\n{}",
        bird_paths(&a),
        bird_paths(&b),
        bird_paths(&c),
        log_of(&dir)
    );
}
