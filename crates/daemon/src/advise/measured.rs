//! ribshard's own measurements of when its threads pay: the convergence table of
//! BENCHMARKS.md (built into the binary, so the advice quotes the figures of the commit it
//! was built from), each real-size row as single-threaded time against threaded time.

use serde::Serialize;

const BENCHMARKS: &str = include_str!("../../../../BENCHMARKS.md");

/// Rows where both settings took less than this say nothing about threads.
const MIN_EVIDENCE_S: f64 = 0.1;

/// One scenario at real size, measured single-threaded and threaded in the same run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub scenario: String,
    /// Paths the daemon learned.
    pub routes: u64,
    pub upstreams: u32,
    pub downstreams: u32,
    /// Paths per prefix of the scenario's tables.
    pub rib_fib: f64,
    /// Convergence with `number-of-shards = 1`, `number-of-threads = 0`.
    pub single_s: f64,
    /// The threaded setting measured (`2x2`: shards x update threads) and its time.
    pub threaded: String,
    pub threaded_s: f64,
}

impl Row {
    /// Single-threaded time over threaded time: above 1, the threads paid.
    pub fn speedup(&self) -> f64 {
        self.single_s / self.threaded_s
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// The machine line of BENCHMARKS.md.
    pub machine: String,
    /// Its cores, when the line says.
    pub cores: Option<usize>,
    pub date: String,
    pub rows: Vec<Row>,
}

/// The scenario's paths per prefix, from how ribshard-bench builds it (README: the
/// scenarios): each rr source sends every prefix; route-server peers each send a share.
fn rib_fib(scenario: &str, upstreams: u32) -> f64 {
    match scenario {
        "two-full-tables" => 1.98,
        "rr" | "clear-all" | "flap" => f64::from(upstreams),
        _ => 1.0,
    }
}

/// `**0.54 s** · 0.8 s CPU · ...` → 0.54.
fn seconds(cell: &str) -> Option<f64> {
    let rest = cell.trim().strip_prefix("**")?;
    rest.split_once(" s**")?.0.trim().parse().ok()
}

pub fn measured() -> Measured {
    parse(BENCHMARKS)
}

pub fn parse(text: &str) -> Measured {
    let machine = text
        .lines()
        .find_map(|l| l.strip_prefix("Machine: "))
        .map(|m| m.split(". ").next().unwrap_or(m).to_string())
        .unwrap_or_default();
    let cores = machine
        .split(", ")
        .find_map(|p| p.strip_suffix(" cores")?.parse().ok());
    let section = text
        .split("## Convergence against other daemons")
        .nth(1)
        .unwrap_or("");
    let date = section
        .split(" on ")
        .nth(1)
        .map(|s| s.chars().take(10).collect())
        .unwrap_or_default();
    let mut lines = section
        .lines()
        .skip_while(|l| !l.starts_with("| scenario |"));
    let header: Vec<String> = lines
        .next()
        .map(|h| h.split('|').map(|c| c.trim().to_string()).collect())
        .unwrap_or_default();
    let column = |pred: &dyn Fn(&str) -> bool| header.iter().position(|c| pred(c));
    let single = column(&|c| c == "ribshard 1x0");
    let threaded = column(&|c| c.starts_with("ribshard ") && c != "ribshard 1x0");
    let mut rows = Vec::new();
    if let (Some(si), Some(ti)) = (single, threaded) {
        let setting = header[ti].trim_start_matches("ribshard ").to_string();
        for l in lines.skip(1).take_while(|l| l.starts_with('|')) {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let (Some(&name), Some(&routes), Some(&updown)) =
                (cells.get(1), cells.get(2), cells.get(3))
            else {
                continue;
            };
            if name.contains("(quick)") || name.starts_with("churn") {
                continue;
            }
            let (Some(s), Some(t)) = (
                cells.get(si).and_then(|c| seconds(c)),
                cells.get(ti).and_then(|c| seconds(c)),
            ) else {
                continue;
            };
            // Under a tenth of a second, scheduling noise is the difference.
            if s.max(t) < MIN_EVIDENCE_S {
                continue;
            }
            let (up, down) = updown.split_once('/').unwrap_or(("0", "0"));
            let upstreams = up.trim().parse().unwrap_or(0);
            rows.push(Row {
                scenario: name.to_string(),
                routes: routes.parse().unwrap_or(0),
                upstreams,
                downstreams: down.trim().parse().unwrap_or(0),
                rib_fib: rib_fib(name, upstreams),
                single_s: s,
                threaded: setting.clone(),
                threaded_s: t,
            });
        }
    }
    Measured {
        machine,
        cores,
        date,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_benchmarks_have_real_size_rows() {
        let m = measured();
        assert!(m.cores.is_some(), "{m:?}");
        assert_eq!(m.date.len(), 10, "{m:?}");
        let two = m
            .rows
            .iter()
            .find(|r| r.scenario == "two-full-tables")
            .expect("two-full-tables");
        assert_eq!(two.routes, 641_942);
        assert!(two.single_s > 0.0 && two.threaded_s > 0.0);
        assert!(m
            .rows
            .iter()
            .any(|r| r.scenario == "rr" && r.rib_fib >= 4.0));
        assert!(m.rows.iter().all(|r| !r.scenario.contains("quick")));
    }

    #[test]
    fn a_row_reads_as_written() {
        let text = "Machine: Test CPU, 8 cores, 1 GiB. Noisy.\n\
            ## Convergence against other daemons (ribshard-bench)\n\nGenerated on 2026-01-02 here.\n\n\
            | scenario | routes | up / down | ribshard 1x0 | ribshard 4x4 | bird2 |\n\
            | --- | ---: | ---: | --- | --- | --- |\n\
            | rr (quick) | 6 | 3 / 6 | **0.05 s** · x | **0.05 s** · x | **0.1 s** |\n\
            | rr | 1000000 | 10 / 20 | **0.85 s** · 1.1 s CPU | **0.40 s** · 1.4 s CPU | **5.20 s** |\n\
            | route-server | 500000 | 20 / 20 | **1.08 s** · x | not run | **5.6 s** |\n\n";
        let m = parse(text);
        assert_eq!(m.cores, Some(8));
        assert_eq!(m.date, "2026-01-02");
        assert_eq!(m.rows.len(), 1);
        let r = &m.rows[0];
        assert_eq!((r.routes, r.upstreams, r.rib_fib), (1_000_000, 10, 10.0));
        assert_eq!(r.threaded, "4x4");
        assert!((r.speedup() - 2.125).abs() < 1e-9);
    }
}
