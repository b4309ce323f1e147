//! `ribshard mrt dump` against the reference, `bgpdump -m`, line for line, whole files.

use std::path::Path;
use std::process::Command;

fn ribshard() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ribshard"))
}

fn have_bgpdump() -> bool {
    let ok = Command::new("bgpdump").arg("-T").output().is_ok();
    if !ok {
        ribshard_mrt::skipped("bgpdump is not installed (apt-get install bgpdump)");
    }
    ok
}

fn stdout_of(mut cmd: Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn compare(file: &Path) -> usize {
    let mut ours = ribshard();
    ours.args(["mrt", "dump"]).arg(file);
    let mut reference = Command::new("bgpdump");
    reference.arg("-m").arg(file);
    let (ours, reference) = (stdout_of(ours), stdout_of(reference));
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), reference.lines().collect());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "{}: line {} differs", file.display(), i + 1);
    }
    assert_eq!(a.len(), b.len(), "{}: line counts differ", file.display());
    a.len()
}

#[test]
fn matches_bgpdump_on_routeviews_2010_rib() {
    if let (true, Some(f)) = (
        have_bgpdump(),
        ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz"),
    ) {
        assert_eq!(compare(&f), 641_957);
    }
}

#[test]
fn matches_bgpdump_on_ris_2002_table_dump_v1() {
    if let (true, Some(f)) = (
        have_bgpdump(),
        ribshard_mrt::shared_data_file("ris-rrc00-bview-20020722.mrt.gz"),
    ) {
        assert_eq!(compare(&f), 115_521);
    }
}

#[test]
fn matches_bgpdump_on_ris_2016_updates() {
    if let (true, Some(f)) = (
        have_bgpdump(),
        ribshard_mrt::shared_data_file("ris-updates-20160811.mrt.gz"),
    ) {
        assert!(compare(&f) > 40_000);
    }
}

#[test]
fn matches_bgpdump_on_ris_2007_updates() {
    if let (true, Some(f)) = (
        have_bgpdump(),
        ribshard_mrt::shared_data_file("ris-updates-20070211.mrt.gz"),
    ) {
        assert!(compare(&f) > 50_000);
    }
}

#[test]
fn generated_table_dumps_like_bgpdump() {
    let dir = std::env::temp_dir().join(format!("ribshard-dump-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("synth.mrt");
    let mut gen = ribshard();
    gen.args([
        "mrt",
        "generate",
        "--prefixes",
        "3000",
        "--peers",
        "3",
        "--out",
    ])
    .arg(&file);
    stdout_of(gen);
    let mut dump = ribshard();
    dump.args(["mrt", "dump"]).arg(&file);
    assert_eq!(stdout_of(dump).lines().count(), 9_000);
    if have_bgpdump() {
        assert_eq!(compare(&file), 9_000);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn missing_file_is_a_clear_error() {
    let out = ribshard()
        .args(["mrt", "dump", "/nonexistent/rib.mrt"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/rib.mrt"), "{err}");
}
