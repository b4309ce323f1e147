//! Quick-size `two-full-tables` and `rr` runs of the real bench binary against a real ribshard
//! and a real BIRD 2, checking correctness only: every downstream peer must hold exactly the
//! expected prefixes. Timings are the report's business, not a test's.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Ports of their own, so the bench's DUT never meets another test's daemon (the tests of
/// this file run in parallel).
const PORT: &str = "27890";
const RELAY_TEST_PORT: &str = "27892";
const POLICY_TEST_PORT: &str = "27894";
const ROUTE_SERVER_TEST_PORT: &str = "27896";
const SHARED_DESTINATIONS_TEST_PORT: &str = "27898";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The daemon built beside this test (target/<profile>/ribshard).
fn ribshard_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let bin = dir.join("ribshard");
    assert!(
        bin.exists(),
        "{} is missing: build the workspace (cargo test --workspace builds it)",
        bin.display()
    );
    bin
}

fn bird_installed() -> bool {
    Command::new("bird").arg("--version").output().is_ok()
}

/// The daemons a test runs: ribshard, and BIRD 2 where it is installed (else the skip is
/// counted).
fn ribshard_and_bird() -> Vec<&'static str> {
    let mut duts = vec!["ribshard"];
    if bird_installed() {
        duts.push("bird2");
    } else {
        ribshard_mrt::skipped("BIRD 2 is not installed (apt-get install bird2); ribshard only");
    }
    duts
}

/// Runs one scenario and returns its JSON result object.
fn run(scenario: &str, dut: &str, work: &Path) -> serde_json::Value {
    run_with(scenario, dut, work, PORT, &[])
}

fn run_with(
    scenario: &str,
    dut: &str,
    work: &Path,
    port: &str,
    extra: &[&str],
) -> serde_json::Value {
    let json = work.join(format!("{scenario}-{dut}{}.jsonl", extra.join("")));
    let out = Command::new(env!("CARGO_BIN_EXE_ribshard-bench"))
        .current_dir(repo_root())
        .env("RIBSHARD_BIN", ribshard_bin())
        .args(["run", scenario, "--dut", dut, "--quick", "--port", port])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .arg("--work")
        .arg(work)
        .output()
        .expect("run ribshard-bench");
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let line = text.lines().last().unwrap_or_else(|| {
        panic!(
            "{scenario} on {dut} wrote no result; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(line).expect("one JSON object per line")
}

fn check(r: &serde_json::Value, scenario: &str, dut: &str) {
    for key in [
        "scenario",
        "dut",
        "dut_version",
        "shards",
        "update_threads",
        "routes",
        "prefixes",
        "upstream_peers",
        "downstream_peers",
        "converge_s",
        "dut_cpu_s",
        "dut_peak_rss_bytes",
        "generator_cpu_s",
        "correct",
    ] {
        assert!(r.get(key).is_some(), "{scenario} on {dut}: no {key} in {r}");
    }
    assert_eq!(r["scenario"], scenario);
    assert_eq!(r["dut"], dut);
    assert_eq!(
        r["correct"], true,
        "{scenario} on {dut} was not correct: {}",
        r["problem"]
    );
    assert!(r["routes"].as_u64().unwrap_or(0) > 0, "{r}");
    assert!(r["dut_peak_rss_bytes"].as_u64().unwrap_or(0) > 0, "{r}");
}

#[test]
fn quick_two_full_tables_and_rr_are_correct_on_ribshard_and_bird() {
    let work = std::env::temp_dir().join(format!("ribshard-bench-test-{}", std::process::id()));
    let duts = ribshard_and_bird();
    // One after another: each run owns the port and, for its timing, the CPUs.
    for dut in duts {
        for scenario in ["two-full-tables", "rr"] {
            let r = run(scenario, dut, &work);
            check(&r, scenario, dut);
            if dut == "ribshard" {
                assert!(r["shards"].as_u64().is_some(), "{r}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// The real-receiver variant: each downstream is a real BIRD 2 re-advertising to the bench's
/// receiver, which must hold exactly the expected prefixes through it; what the receiver got
/// is counted.
#[test]
fn quick_two_full_tables_through_a_real_bird_are_correct() {
    if !bird_installed() {
        ribshard_mrt::skipped("BIRD 2 is not installed (apt-get install bird2)");
        return;
    }
    let work = std::env::temp_dir().join(format!("ribshard-bench-relay-{}", std::process::id()));
    for dut in ["ribshard", "bird2"] {
        let r = run_with(
            "two-full-tables",
            dut,
            &work,
            RELAY_TEST_PORT,
            &["--through-bird"],
        );
        check(&r, "two-full-tables", dut);
        assert_eq!(r["through"], "bird2", "{r}");
        let got = &r["received"];
        assert!(got["updates"].as_u64().unwrap_or(0) > 0, "{r}");
        assert!(
            got["octets"].as_u64().unwrap_or(0) > got["updates"].as_u64().unwrap_or(0) * 23,
            "{r}"
        );
        assert_eq!(got["held"], r["prefixes"], "{r}");
        assert!(
            got["announced"].as_u64().unwrap_or(0) >= got["held"].as_u64().unwrap_or(0),
            "{r}"
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// `--policy`: the transit filter on import and a tagging export policy, in ribshard's
/// `[policy-options]` and in BIRD's filters. Each downstream must hold exactly what the bench's
/// own reading of the filter accepts (fewer prefixes than without it), every route tagged by
/// both policies.
#[test]
fn quick_two_full_tables_with_policy_are_correct_on_ribshard_and_bird() {
    let work = std::env::temp_dir().join(format!("ribshard-bench-policy-{}", std::process::id()));
    let duts = ribshard_and_bird();
    let plain = run_with("two-full-tables", "ribshard", &work, POLICY_TEST_PORT, &[]);
    check(&plain, "two-full-tables", "ribshard");
    for dut in duts {
        let r = run_with(
            "two-full-tables",
            dut,
            &work,
            POLICY_TEST_PORT,
            &["--policy"],
        );
        check(&r, "two-full-tables", dut);
        assert_eq!(r["policy"], true, "{r}");
        let (with, without) = (
            r["received"]["held"].as_u64().unwrap_or(0),
            plain["received"]["held"].as_u64().unwrap_or(0),
        );
        assert!(
            with > 0 && with < without,
            "{with} with policy, {without} without"
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// The BIRD seed's route-server test at 100 clients (issue 35): each announces its share and
/// must end up holding every other client's routes, and only those. All but the first are
/// the bench's lean receivers (a count and a sum of what they hold), checked after the run;
/// the first holds an exact table.
#[test]
fn quick_route_server_at_100_clients_is_correct_on_ribshard_and_bird() {
    let work = std::env::temp_dir().join(format!("ribshard-bench-rs-{}", std::process::id()));
    let duts = ribshard_and_bird();
    for dut in duts {
        let r = run_with(
            "route-server",
            dut,
            &work,
            ROUTE_SERVER_TEST_PORT,
            &["--peers", "100"],
        );
        check(&r, "route-server", dut);
        let receivers = r["receivers"].as_array().cloned().unwrap_or_default();
        assert_eq!(receivers.len(), 100, "{r}");
        let routes = r["routes"].as_u64().unwrap_or(0);
        for got in &receivers {
            let held = got["held"].as_u64().unwrap_or(0);
            // Every route but its own share (about a hundredth of them).
            assert!(held < routes && held > routes * 9 / 10, "{got} of {routes}");
            assert_eq!(got["withdrawn"], 0, "{got}");
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// The seed's larger route-server cases, small: clients announce the same destinations
/// (40,000 routes for 16,000), each with one winner by AS-path length. Every client is a
/// judging receiver: it must hold every destination it does not win itself, from its
/// winner, and nothing from a source it should not, so a replacement that never came (or
/// came from the wrong client) fails the run.
#[test]
fn quick_route_server_with_shared_destinations_is_correct_on_ribshard_and_bird() {
    let work =
        std::env::temp_dir().join(format!("ribshard-bench-rs-shared-{}", std::process::id()));
    for dut in ribshard_and_bird() {
        let r = run_with(
            "route-server",
            dut,
            &work,
            SHARED_DESTINATIONS_TEST_PORT,
            &[
                "--peers",
                "40",
                "--prefixes",
                "40000",
                "--destinations",
                "16000",
            ],
        );
        check(&r, "route-server", dut);
        assert_eq!(r["routes"], 40_000, "{r}");
        assert_eq!(r["prefixes"], 16_000, "{r}");
        let receivers = r["receivers"].as_array().cloned().unwrap_or_default();
        assert_eq!(receivers.len(), 40, "{r}");
        for got in &receivers {
            let held = got["held"].as_u64().unwrap_or(0);
            // Every destination but those it wins (about a fortieth of them).
            assert!(held < 16_000 && held > 15_000, "{got}");
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}
