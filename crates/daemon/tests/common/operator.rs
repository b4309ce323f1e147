//! What the operator tests share: a BIRD that announces on demand, client commands left
//! running, the CLI.

use super::{wait, Bird};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// A BIRD in `asn` at `addr` with a session to ribshard (127.0.0.40:`port_r`), exporting the
/// routes of its static protocol `s4` (disabled until the test enables it).
pub fn bird_conf(addr: &str, asn: u32, port: u16, port_r: u16, routes: &[String]) -> String {
    let statics: String = routes
        .iter()
        .map(|r| format!("route {r} blackhole; "))
        .collect();
    let last = addr.rsplit('.').next().unwrap_or_default();
    format!(
        r#"router id {addr};
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ disabled; ipv4; {statics} }}
protocol bgp ribsh {{
  local {addr} port {port} as {asn};
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 30; connect retry time 2;
  ipv4 {{ import all; export where proto = "s4"; next hop address 198.51.100.{last}; }};
}}
"#
    )
}

/// A client command left running (a watch), its stdout read into lines as they come.
pub struct Follow {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Follow {
    pub fn start(sock: &Path, args: &[&str]) -> Follow {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ribshard"))
            .arg("--socket")
            .arg(sock)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run the ribshard client");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().expect("stdout");
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
        Follow { child, lines }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn cli(sock: &Path, args: &[&str]) -> (String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .expect("run the ribshard client");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text += &String::from_utf8_lossy(&out.stderr);
    (text, out.status.success())
}

/// The prefixes BIRD holds from its session with ribshard.
pub fn bird_table(b: &Bird) -> BTreeSet<String> {
    b.cmd("show route protocol ribsh")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.contains('/'))
        .map(String::from)
        .collect()
}

/// Waits for BIRD's session with ribshard to be Established (or not).
pub fn bird_up(b: &Bird, up: bool, secs: u64) -> bool {
    wait(secs, || b.established("ribsh") == up)
}

/// Prefix -> (from, AS path, next hop) of each active path, as `show route --json` gives.
pub fn active_routes(sock: &Path) -> BTreeMap<String, (String, String, String)> {
    let (out, ok) = cli(sock, &["--json", "show", "route"]);
    assert!(ok, "{out}");
    let mut m = BTreeMap::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        for p in v["paths"].as_array().into_iter().flatten() {
            if p["state"] == "active" {
                m.insert(
                    v["prefix"].as_str().unwrap_or_default().to_string(),
                    (
                        p["from"].as_str().unwrap_or_default().to_string(),
                        p["as_path"].as_str().unwrap_or_default().to_string(),
                        p["next_hop"].as_str().unwrap_or_default().to_string(),
                    ),
                );
            }
        }
    }
    m
}
