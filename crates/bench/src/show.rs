//! The operator's side of a run: show commands asked of the daemon while routes flow (do they
//! stall routing?), and how fast a whole table comes out of its CLI (ribshard's `show route`
//! against `birdc show route all`).

use crate::dut::{Dut, DutKind};
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// The command lines that show the whole table (`detail`: every attribute, as `birdc show
/// route all` does) and the session summary, for the daemons that have both.
pub fn commands(dut: &Dut, detail: bool) -> Option<(Vec<String>, Vec<String>)> {
    let d = dut.dir.display();
    match dut.kind {
        DutKind::Ribshard => {
            let bin = crate::dut::ribshard_binary().display().to_string();
            let base = vec![bin, "--socket".into(), format!("{d}/ribshard.sock")];
            let mut route = base.clone();
            route.extend(["show", "route"].map(String::from));
            if detail {
                route.push("detail".into());
            }
            let mut summary = base;
            summary.extend(["show", "bgp", "summary"].map(String::from));
            Some((route, summary))
        }
        DutKind::Bird2 => {
            let base = vec!["birdc".to_string(), "-s".into(), format!("{d}/bird.ctl")];
            let mut route = base.clone();
            route.extend(["show", "route"].map(String::from));
            if detail {
                route.push("all".into());
            }
            let mut summary = base;
            summary.extend(["show", "protocols"].map(String::from));
            Some((route, summary))
        }
        _ => None,
    }
}

/// Runs a command to the end, its output read and counted: (seconds, octets, lines).
fn run(argv: &[String]) -> Option<(f64, u64, u64)> {
    let (prog, args) = argv.split_first()?;
    let t = Instant::now();
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = child.stdout.take()?;
    let (mut octets, mut lines) = (0u64, 0u64);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                octets += n as u64;
                lines += buf
                    .get(..n)
                    .unwrap_or(&[])
                    .iter()
                    .filter(|b| **b == b'\n')
                    .count() as u64;
            }
        }
    }
    let ok = child.wait().ok()?.success();
    ok.then(|| (t.elapsed().as_secs_f64(), octets, lines))
}

/// Times the whole-table command `runs` times: (median seconds, octets, lines of one run).
pub fn time(argv: &[String], runs: usize) -> Option<(f64, u64, u64)> {
    let mut v: Vec<(f64, u64, u64)> = (0..runs).filter_map(|_| run(argv)).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.get(v.len() / 2).copied()
}

/// A client asking `show route` then `show bgp summary` over and over, as fast as it can.
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<u64>,
}

impl Load {
    pub fn start(route: Vec<String>, summary: Vec<String>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut loops = 0;
            while !s.load(Ordering::Relaxed) {
                let _ = run(&route);
                let _ = run(&summary);
                loops += 1;
            }
            loops
        });
        Load { stop, thread }
    }

    /// Stops after the command under way; how many loops ran.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}
