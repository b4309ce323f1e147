//! `ribshard config check` as an operator runs it: one run names every problem of a file,
//! errors and warnings alike, each with file, line and key, in the file's order.

use std::process::Command;

fn check(name: &str, text: &str) -> (String, bool) {
    // A directory per call: the tests run at once, and each removes its own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "ribshard-config-check-{}-{call}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .current_dir(&dir)
        .args(["config", "check", name])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    (text, out.status.success())
}

/// Every problem the operator's-first-hour issue lists, in one file.
const BAD: &str = r#"[bgp]
local-as = 65000
router-id = "10.0.0.1"
listen = ["127.0.0.1:1790"]
write-queue-high-water = 1000000
hold-time = "ninety"

[bgp.rib-sharding]
number-of-shards = 1024

[[bgp.group]]
name = "upstreams"
type = "external"
peer-as = 65001
import = ["accept"]
export = ["accept"]
passive = yes

[[bgp.group.neighbor]]
address = "198.51.100.7"
port = 0

[[bgp.group.neighbor]]
address = "0.0.0.0"

[[bgp.group.neighbor]]
address = "224.0.0.5"

[[bgp.group.neighbor]]
address = "127.0.0.1"
port = 1790

[[bgp.group.neighbor]]
address = "198.51.100.9"
local-address = "203.0.113.77"

[management]
read-only = true
[management]
"#;

#[test]
fn one_run_reports_every_error_and_warning_with_its_line() {
    let (out, ok) = check("bad.toml", BAD);
    assert!(!ok, "{out}");
    let expected = [
        "bad.toml:5: bgp.write-queue-high-water: is not a key here: it belongs under [bgp.update-threading]",
        "bad.toml:6: bgp.hold-time: \"ninety\" is a string: expected a whole number from 0 to 65535",
        "bad.toml:9: bgp.rib-sharding.number-of-shards: warning: 1024 threads for ",
        "bad.toml:17: invalid string",
        "bad.toml:21: bgp.group[0].neighbor[0].port: 0 is not a port a neighbor can listen on",
        "bad.toml:24: bgp.group[0].neighbor[1].address: 0.0.0.0 is the unspecified address",
        "bad.toml:27: bgp.group[0].neighbor[2].address: 224.0.0.5 is a multicast or broadcast address",
        "bad.toml:30: bgp.group[0].neighbor[3].address: 127.0.0.1 port 1790 is our own listen address",
        "bad.toml:35: bgp.group[0].neighbor[4].local-address: warning: 203.0.113.77 is not an address of this host",
        "bad.toml:39: `management` is defined twice",
        "bad.toml: 8 error(s): not loaded",
    ];
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), expected.len(), "{out}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(line.starts_with(want), "want {want}\n got {line}\n{out}");
    }
}

#[test]
fn an_empty_file_gets_its_line() {
    let (out, ok) = check("empty.toml", "\n");
    assert!(!ok);
    assert!(out.starts_with("empty.toml:1: the file is empty"), "{out}");
}

#[test]
fn warnings_alone_load() {
    let (out, ok) = check(
        "warn.toml",
        "[bgp]\nlocal-as = 65000\nrouter-id = \"10.0.0.1\"\n\
         [[bgp.group]]\nname = \"g\"\ntype = \"internal\"\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\nlocal-address = \"203.0.113.77\"\n",
    );
    assert!(ok, "{out}");
    assert!(
        out.starts_with("warn.toml:9: bgp.group[0].neighbor[0].local-address: warning: "),
        "{out}"
    );
    assert!(out.contains("warn.toml: OK: AS 65000"), "{out}");
}
