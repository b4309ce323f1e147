//! Routes that come from no session, and the MRT files ribshard writes: networks we
//! originate (with and without a covering route in the kernel), seen at a real BIRD 2
//! downstream; an MRT RIB injected, dumped back as TABLE_DUMP_V2 and read by `bgpdump -m`,
//! which must give the routes `show route` gives; the BGP4MP log of received messages and
//! state changes, rotated by time.

mod common;

use common::lab::*;
use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn cli(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .arg("--socket")
        .arg(socket(dir))
        .args(args)
        .output()
        .expect("ribshard client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// ribshard in `ns` (AS 65001) with this configuration after `[bgp]`'s first lines.
fn ribshard_ns(ns: &Netns, dir: &Path, rest: &str) -> Proc {
    ns.ribshard(
        dir,
        &format!(
            "[bgp]\nlocal-as = 65001\nrouter-id = \"10.255.0.1\"\nlisten = [\"0.0.0.0:179\"]\n{rest}\n"
        ),
    )
}

const DOWNSTREAM: &str =
    "[[bgp.group]]\nname = \"down\"\ntype = \"external\"\nimport = [\"accept\"]\n\
    export = [\"accept\"]\n[[bgp.group.neighbor]]\naddress = \"10.1.0.2\"\npeer-as = 65009\n\
    local-address = \"10.1.0.1\"\nconnect-retry-time = 1\n";

fn downstream(lab: &Lab, dir: &Path) -> BirdNs {
    BirdNs::start(
        &lab.peers,
        dir,
        "down",
        "router id 10.255.1.1;\nprotocol device {}\n\
         protocol bgp peer {\n  local 10.1.0.2 as 65009;\n  neighbor 10.1.0.1 as 65001;\n  \
         strict bind on;\n  connect retry time 1;\n  ipv4 { import all; export none; };\n  \
         ipv6 { import all; export none; };\n}\n",
    )
}

#[test]
fn originated_networks_follow_their_covering_routes() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("originate");
    let lab = Lab::new("or");
    lab.link(1);
    let originate = "[[bgp.originate]]\nprefix = \"198.18.0.0/16\"\ncommunities = [\"65001:7\"]\n\
                     [[bgp.originate]]\nprefix = \"198.19.0.0/16\"\nwhen = \"always\"\n";
    let log = dir.join("updates.%Y%m%d.%H%M");
    let mrt = format!(
        "[mrt]\nupdates = \"{}\"\nrotate-interval = 900\n",
        log.display()
    );
    let rs = ribshard_ns(&lab.dut, &dir, &format!("{originate}{DOWNSTREAM}{mrt}"));
    let down = downstream(&lab, &dir);
    let has = |p: &str| down.cmd(&format!("show route {p} all"));
    // Always: advertised with our AS as its whole path.
    assert!(
        wait(30, || has("198.19.0.0/16").contains("BGP.as_path: 65001")),
        "{}\n{}",
        has("198.19.0.0/16"),
        log_of(&dir)
    );
    // Covering route: none yet (the namespace has no default route).
    assert!(!has("198.18.0.0/16").contains("198.18.0.0/16"));
    lab.dut.ip("route add 198.18.0.0/15 dev v1");
    assert!(
        wait(10, || has("198.18.0.0/16").contains("(65001,7)")),
        "not advertised with its covering route: {}",
        has("198.18.0.0/16")
    );
    lab.dut.ip("route del 198.18.0.0/15 dev v1");
    assert!(
        wait(10, || !has("198.18.0.0/16").contains("198.18.0.0/16")),
        "not withdrawn without its covering route"
    );
    // A reload that drops one: withdrawn, the session kept.
    let conf = std::fs::read_to_string(dir.join("ribshard.toml")).unwrap();
    std::fs::write(
        dir.join("ribshard.toml"),
        conf.replace(
            "[[bgp.originate]]\nprefix = \"198.19.0.0/16\"\nwhen = \"always\"\n",
            "",
        ),
    )
    .unwrap();
    let (ok, out) = cli(&dir, &["configure", "reload"]);
    assert!(ok, "{out}");
    assert!(
        wait(10, || !has("198.19.0.0/16").contains("198.19.0.0/16")),
        "not withdrawn by the reload"
    );
    assert!(down.established("peer"), "the session was kept");
    // SIGUSR1's log line counts the neighbors configured, not the slots that originated
    // networks hold beside them.
    let ok = Command::new("kill")
        .args(["-USR1", &rs.0.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(wait(10, || log_of(&dir).contains("SIGUSR1 received")));
    let log = log_of(&dir);
    let line = log
        .lines()
        .find(|l| l.contains("SIGUSR1 received"))
        .unwrap();
    assert!(
        line.contains("established=1") && line.contains("neighbors=1"),
        "{line}"
    );
    // The BGP4MP log holds the session's state change (bgpdump reads it).
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("updates."))
        .collect();
    assert!(!files.is_empty(), "no BGP4MP log in {}", dir.display());
    if have("bgpdump", "-T") {
        let text = output(Command::new("bgpdump").arg("-m").arg(files[0].path()));
        assert!(
            text.lines()
                .any(|l| l.contains("|STATE|10.1.0.2|65009|5|6")),
            "{text}"
        );
    }
}

#[test]
fn an_injected_rib_dumps_back_as_bgpdump_reads_it() {
    if !have("bgpdump", "-T") {
        return;
    }
    let dir = tempdir("inject");
    let ns = Netns::new("inj");
    // The real 2010 table when it is here (AS_SETs, communities, two full tables), else a
    // synthesized one.
    let file = match ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz") {
        Some(f) => f,
        None => {
            eprintln!("real data missing: a synthesized RIB instead");
            let f = dir.join("synth.mrt");
            let st = Command::new(env!("CARGO_BIN_EXE_ribshard"))
                .args([
                    "mrt",
                    "generate",
                    "--prefixes",
                    "20000",
                    "--peers",
                    "3",
                    "--out",
                ])
                .arg(&f)
                .status()
                .unwrap();
            assert!(st.success());
            f
        }
    };
    // A neighbor that never comes (a configuration needs one); resolution off: the
    // injected next hops are RouteViews' peers, not ours to reach.
    let _rs = ribshard_ns(
        &ns,
        &dir,
        "[bgp.resolution]\nenabled = false\n[[bgp.group]]\nname = \"g\"\ntype = \"external\"\n\
         import = [\"accept\"]\n[[bgp.group.neighbor]]\naddress = \"192.0.2.9\"\npeer-as = 65009\npassive = true\n",
    );
    let (ok, out) = cli(&dir, &["--json", "mrt", "inject", file.to_str().unwrap()]);
    assert!(ok, "{out}");
    let injected: serde_json::Value = serde_json::from_str(&out).unwrap();
    let routes = injected["routes"].as_u64().unwrap();
    assert!(routes > 0, "{out}");
    let (_, listed) = cli(&dir, &["mrt", "injections"]);
    assert!(listed.contains(&format!("{routes} routes")), "{listed}");
    let shown = common::operator::active_routes(&socket(&dir));
    assert!(!shown.is_empty());
    // The Loc-RIB written as TABLE_DUMP_V2 and read back by bgpdump: the same routes.
    let dump = dir.join("loc-rib.mrt");
    let (ok, out) = cli(&dir, &["mrt", "dump-rib", dump.to_str().unwrap()]);
    assert!(ok, "{out}");
    let text = output(Command::new("bgpdump").arg("-m").arg(&dump));
    let mut read: BTreeMap<String, (String, String, String)> = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split('|').collect();
        assert_eq!(f.first(), Some(&"TABLE_DUMP2"), "{l}");
        let (peer, prefix, as_path, next_hop) = (f[3], f[5], f[6], f[8]);
        assert!(
            read.insert(
                prefix.into(),
                (peer.into(), as_path.into(), next_hop.into())
            )
            .is_none(),
            "{prefix} twice in a Loc-RIB dump"
        );
    }
    assert_eq!(read.len(), shown.len(), "one entry a prefix");
    for (p, (from, path, nh)) in &shown {
        let Some((peer, as_path, next_hop)) = read.get(p) else {
            panic!("{p} is not in the dump");
        };
        assert_eq!((peer, next_hop), (from, nh), "{p}");
        // bgpdump writes an AS_SET as {a,b}, show route as {a b}.
        assert_eq!(as_path.replace(',', " "), path.replace(',', " "), "{p}");
    }
    // Removed: the routes go.
    let (ok, out) = cli(&dir, &["mrt", "remove", file.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(
        wait(30, || common::operator::active_routes(&socket(&dir))
            .is_empty()),
        "routes left after remove"
    );
}
