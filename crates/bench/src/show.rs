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

/// The command lines of a daemon's CLI, for the daemons that have one here.
pub struct Commands {
    /// The whole table, briefly (ribshard `show route`, `birdc show route`).
    pub route: Vec<String>,
    /// The whole table with every attribute (ribshard `show route detail`, `birdc show
    /// route all`).
    pub detail: Vec<String>,
    /// The sessions (ribshard `show bgp summary`, `birdc show protocols`).
    pub summary: Vec<String>,
    /// Every best-path change as decided (ribshard `monitor route`; BIRD has none).
    pub watch: Option<Vec<String>>,
}

pub fn commands(dut: &Dut) -> Option<Commands> {
    let d = dut.dir.display();
    let (base, route, detail, summary): (Vec<String>, &[&str], &[&str], &[&str]) = match dut.kind {
        DutKind::Ribshard => (
            vec![
                crate::dut::ribshard_binary().display().to_string(),
                "--socket".into(),
                format!("{d}/ribshard.sock"),
            ],
            &["show", "route"],
            &["show", "route", "detail"],
            &["show", "bgp", "summary"],
        ),
        DutKind::Bird2 => (
            vec!["birdc".into(), "-s".into(), format!("{d}/bird.ctl")],
            &["show", "route"],
            &["show", "route", "all"],
            &["show", "protocols"],
        ),
        _ => return None,
    };
    let with = |words: &[&str]| -> Vec<String> {
        base.iter()
            .cloned()
            .chain(words.iter().map(|w| w.to_string()))
            .collect()
    };
    Some(Commands {
        route: with(route),
        detail: with(detail),
        summary: with(summary),
        watch: (dut.kind == DutKind::Ribshard).then(|| with(&["monitor", "route"])),
    })
}

/// What an operator's first look shows of a converged daemon: each command and its
/// output (ribshard only: the others' CLIs differ).
pub fn operator_view(dut: &Dut) -> Vec<(String, String)> {
    if dut.kind != DutKind::Ribshard {
        return Vec::new();
    }
    let socket = dut.dir.join("ribshard.sock");
    [
        &["show", "bgp", "summary"][..],
        &["show", "route", "summary"],
        &["show", "thread", "cpu"],
    ]
    .iter()
    .map(|words| {
        let out = Command::new(crate::dut::ribshard_binary())
            .arg("--socket")
            .arg(&socket)
            .args(*words)
            .stdin(Stdio::null())
            .output();
        let text = match out {
            Ok(o) => {
                String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
            }
            Err(e) => format!("cannot run ribshard: {e}\n"),
        };
        (format!("ribshard {}", words.join(" ")), text)
    })
    .collect()
}

/// Runs a command to the end, its output into /dev/null as an operator's `> /dev/null`
/// would: the seconds it took.
fn run(argv: &[String]) -> Option<f64> {
    let (prog, args) = argv.split_first()?;
    let null = std::fs::File::create("/dev/null").ok()?;
    let t = Instant::now();
    let ok = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(null)
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    ok.then(|| t.elapsed().as_secs_f64())
}

/// What a command writes: (octets, lines). Read untimed: counting costs the reader time.
fn count(argv: &[String]) -> Option<(u64, u64)> {
    let (prog, args) = argv.split_first()?;
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
                let b = buf.get(..n).unwrap_or(&[]);
                octets += n as u64;
                lines += b.iter().filter(|c| **c == b'\n').count() as u64;
            }
        }
    }
    child.wait().ok()?.success().then_some((octets, lines))
}

/// A route-change watch whose client never reads (`--idle-watch`): its output goes to a
/// pipe nobody drains, so the daemon's side fills up. Killed on drop.
pub struct IdleWatch(std::process::Child);

impl IdleWatch {
    pub fn start(argv: &[String]) -> Option<IdleWatch> {
        let (prog, args) = argv.split_first()?;
        let child = Command::new(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        Some(IdleWatch(child))
    }
}

impl Drop for IdleWatch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Times the whole-table command `runs` times into /dev/null: (median seconds, octets,
/// lines of one more run, read and counted).
pub fn time(argv: &[String], runs: usize) -> Option<(f64, u64, u64)> {
    let mut v: Vec<f64> = (0..runs).filter_map(|_| run(argv)).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let t = *v.get(v.len() / 2)?;
    let (octets, lines) = count(argv)?;
    Some((t, octets, lines))
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
