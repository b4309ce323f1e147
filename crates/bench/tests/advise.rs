//! `ribshard advise` on this machine, and against a running ribshard that the bench has fed a
//! synthesized table (rr at quick size, held converged): the recommendations' reasons must
//! name ribshard's measured figures and, with a daemon, its workload. (The bench holds its
//! daemon five seconds: long enough to ask it.)

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PORT: &str = "27891";

fn ribshard_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join("ribshard");
    assert!(bin.exists(), "{} is missing", bin.display());
    bin
}

fn advise(socket: &Path) -> String {
    let out = Command::new(ribshard_bin())
        .arg("--socket")
        .arg(socket)
        .arg("advise")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn advise_names_the_machine_and_the_measured_figures() {
    let text = advise(Path::new("/nonexistent/ribshard.sock"));
    assert!(text.starts_with("Machine\n  CPUs: "), "{text}");
    assert!(text.contains("number-of-shards = "), "{text}");
    assert!(
        text.contains("because no running daemon answered"),
        "{text}"
    );
    // The figures of BENCHMARKS.md, by scenario and with their times.
    assert!(text.contains("BENCHMARKS.md ("), "{text}");
    assert!(
        text.contains("two-full-tables 641942 paths")
            || text.contains("two-full-tables (641942 paths"),
        "{text}"
    );
}

#[test]
fn advise_weighs_a_running_daemons_workload() {
    let work = std::env::temp_dir().join(format!("ribshard-advise-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut bench = Command::new(env!("CARGO_BIN_EXE_ribshard-bench"))
        .env("RIBSHARD_BIN", ribshard_bin())
        .env("RIBSHARD_BENCH_HOLD", "5")
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .args(["run", "rr", "--dut", "ribshard", "--quick", "--port", PORT])
        .arg("--work")
        .arg(&work)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The bench says when it holds the converged daemon, and where.
    let stderr = BufReader::new(bench.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let end = Instant::now() + Duration::from_secs(120);
    let mut said = String::new();
    let dir = loop {
        let line = rx
            .recv_timeout(end.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("the bench never held its daemon:\n{said}"));
        said.push_str(&line);
        said.push('\n');
        if line.contains("holding the converged daemon") {
            let at = line.find("dir=").expect("dir=") + 4;
            break PathBuf::from(line[at..].split_whitespace().next().unwrap());
        }
    };
    let text = advise(&dir.join("ribshard.sock"));
    // The bench stops its daemon once the hold is over (killing it would leave the daemon).
    let status = bench.wait().unwrap();
    assert!(status.success(), "{said}");
    let _ = std::fs::remove_dir_all(&work);
    assert!(text.contains("Running daemon\n"), "{text}");
    // rr at quick size: 3 sources each sending all 20,000 prefixes.
    assert!(
        text.contains("Paths: 60000, prefixes: 20000, RIB:FIB 3.00"),
        "{text}"
    );
    assert!(
        text.contains("because the running daemon holds 60000 paths"),
        "{text}"
    );
    assert!(text.contains("CPU since start by thread kind: "), "{text}");
    assert!(
        text.contains("measured the most similar workload, "),
        "{text}"
    );
    assert!(text.contains("s single-threaded against "), "{text}");
}
