//! The matrix of runs and its report: the convergence section of BENCHMARKS.md (between
//! two marker lines, so the rest of the file stays as `scripts/bench` writes it) and two
//! PNG charts (convergence by scenario and daemon; convergence against routes).

use crate::dut::{DutKind, Threads};
use crate::scenario::{self, Options, RunResult, Scenario, Sizes};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub const BEGIN: &str = "<!-- ribshard-bench report: begin -->";
pub const END: &str = "<!-- ribshard-bench report: end -->";
/// Where the charts go, relative to the report file.
const CHARTS: &str = "docs/bench";

pub struct Matrix {
    pub quick: bool,
    pub duts: Vec<DutKind>,
    pub scenarios: Vec<Scenario>,
    pub data_dir: PathBuf,
    pub work_dir: PathBuf,
    pub port: u16,
    pub seed: u64,
    pub cpus: u32,
    /// Sizes for every scenario of this matrix (unset: each scenario's default).
    pub sizes: Sizes,
}

/// One line for a terminal.
pub fn one_line(r: &RunResult) -> String {
    let mut s = format!(
        "{:<16} {:<14} {:>9} routes {:>4} up {:>4} down  converge {:>8.3} s  dut cpu {:>8.2} s  peak rss {:>7.1} MiB ({:.0} B/path)  generator cpu {:.2} s rss {:.0} MiB  {}",
        r.scenario,
        label(r),
        r.routes,
        r.upstream_peers,
        r.downstream_peers,
        r.converge_s,
        r.dut_cpu_s,
        r.dut_peak_rss_bytes as f64 / (1024.0 * 1024.0),
        r.bytes_per_path,
        r.generator_cpu_s,
        r.generator_peak_rss_bytes as f64 / (1024.0 * 1024.0),
        if r.correct { "correct" } else { "WRONG" },
    );
    if let (Some(p50), Some(p99), Some(gap)) =
        (r.latency_p50_ms, r.latency_p99_ms, r.max_keepalive_gap_s)
    {
        let _ = write!(
            s,
            "  speed {}x latency p50 {p50:.1} ms p99 {p99:.1} ms, keepalive gap {gap:.2} s",
            r.speed.unwrap_or(1.0)
        );
    }
    if let Some(t) = &r.through {
        let _ = write!(s, "  through {t}");
        if let Some(c) = r.relay_cpu_s {
            let _ = write!(s, " (relay cpu {c:.2} s)");
        }
    }
    if r.policy {
        s.push_str("  with policy");
    }
    if r.no_graceful_restart {
        s.push_str("  upstreams without graceful restart");
    }
    if let Some(f) = r.fib_s {
        let _ = write!(
            s,
            "  kernel table complete {f:.3} s ({} routes{})",
            r.fib_routes.unwrap_or(0),
            if r.fib_lost {
                ", notifications lost"
            } else {
                ""
            }
        );
    }
    if let Some(c) = &r.policy_change {
        let _ = write!(
            s,
            "  policy change re-converged in {:.3} s, DUT CPU {:.2} s ({} UPDATEs, {} announced, {} withdrawn)",
            c.converge_s, c.dut_cpu_s, c.received.updates, c.received.announced, c.received.withdrawn
        );
    }
    let got = &r.received;
    if got.updates > 0 {
        let _ = write!(
            s,
            "  received {} UPDATEs, {:.1} MB ({:.0} UPDATEs, {:.1} kB per 1,000 prefixes; {} redundant)",
            got.updates,
            got.octets as f64 / 1e6,
            got.updates_per_1k(),
            got.octets_per_1k() / 1e3,
            got.redundant
        );
    }
    if let Some(p) = &r.problem {
        let _ = write!(s, "  ({p})");
    }
    s
}

/// The daemon as the report names it: ribshard with its thread setting.
pub fn label(r: &RunResult) -> String {
    match (r.shards, r.update_threads) {
        (Some(s), Some(u)) => format!("{} {s}x{u}", r.dut),
        _ => r.dut.clone(),
    }
}

fn failed(opts: &Options, e: &scenario::BenchError) -> RunResult {
    RunResult {
        scenario: opts.scenario.name().to_string(),
        dut: opts.dut.name().to_string(),
        dut_version: String::new(),
        shards: (opts.dut == DutKind::Ribshard).then_some(opts.threads.shards),
        update_threads: (opts.dut == DutKind::Ribshard).then_some(opts.threads.update_threads),
        routes: 0,
        prefixes: 0,
        upstream_peers: 0,
        downstream_peers: 0,
        converge_s: 0.0,
        full_s: 0.0,
        dut_cpu_s: 0.0,
        dut_peak_rss_bytes: 0,
        bytes_per_path: 0.0,
        generator_cpu_s: 0.0,
        generator_peak_rss_bytes: 0,
        correct: false,
        problem: Some(e.to_string()),
        quick: opts.quick,
        data: String::new(),
        speed: opts.sizes.speed,
        latency_p50_ms: None,
        latency_p99_ms: None,
        latency_max_ms: None,
        latency_samples: None,
        max_keepalive_gap_s: None,
        hold_time_s: 0,
        date: String::new(),
        show_loops: None,
        idle_watch_dropped: None,
        show_route_s: None,
        show_route_octets: None,
        show_route_lines: None,
        show_route_detail_s: None,
        show_route_detail_octets: None,
        received: Default::default(),
        receivers: Vec::new(),
        through: opts.through_bird.then(|| "bird2".to_string()),
        relay_cpu_s: None,
        policy: opts.policy,
        policy_change: None,
        fib_s: None,
        fib_routes: None,
        fib_lost: false,
        overload: None,
        rpki: opts.rpki,
        bmp: None,
        bmp_feeds: opts.bmp,
        no_graceful_restart: !opts.graceful_restart,
    }
}

/// Every scenario against every daemon (ribshard twice: single-threaded and with the CPU
/// count for both), plus a size sweep of `full-table` for the routes chart.
/// `each` gets every result as soon as its run ends, so an interrupted matrix keeps what it
/// measured.
pub fn run_matrix<E>(
    m: &Matrix,
    mut each: impl FnMut(&RunResult) -> Result<(), E>,
) -> Result<(), E> {
    let duts = if m.duts.is_empty() {
        vec![
            DutKind::Ribshard,
            DutKind::Bird2,
            DutKind::Frr,
            DutKind::Gobgpd,
            DutKind::Openbgpd,
        ]
    } else {
        m.duts.clone()
    };
    let scenarios = if m.scenarios.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        m.scenarios.clone()
    };
    let mut configs: Vec<(DutKind, Threads)> = Vec::new();
    for d in duts {
        if d == DutKind::Ribshard {
            configs.push((
                d,
                Threads {
                    shards: 1,
                    update_threads: 0,
                },
            ));
            configs.push((
                d,
                Threads {
                    shards: m.cpus,
                    update_threads: m.cpus,
                },
            ));
        } else {
            configs.push((
                d,
                Threads {
                    shards: 1,
                    update_threads: 0,
                },
            ));
        }
    }
    let mut runs: Vec<(Scenario, Sizes)> = Vec::new();
    for sc in scenarios {
        match sc {
            Scenario::Churn => {
                let speeds = match (m.sizes.speed, m.quick) {
                    (Some(x), _) => vec![x],
                    (None, true) => vec![10.0],
                    (None, false) => vec![1.0, 10.0],
                };
                for speed in speeds {
                    runs.push((
                        sc,
                        Sizes {
                            speed: Some(speed),
                            ..m.sizes.clone()
                        },
                    ));
                }
            }
            Scenario::FullTable if m.sizes.prefixes.is_none() => {
                let sweep: &[usize] = if m.quick {
                    &[10_000, 25_000]
                } else {
                    &[40_000, 80_000, 160_000]
                };
                for &n in sweep {
                    runs.push((
                        sc,
                        Sizes {
                            prefixes: Some(n),
                            ..m.sizes.clone()
                        },
                    ));
                }
                runs.push((sc, m.sizes.clone()));
            }
            _ => runs.push((sc, m.sizes.clone())),
        }
    }
    for (sc, sizes) in &runs {
        for (dut, threads) in &configs {
            let opts = Options {
                scenario: *sc,
                dut: *dut,
                threads: *threads,
                quick: m.quick,
                sizes: sizes.clone(),
                data_dir: m.data_dir.clone(),
                work_dir: m.work_dir.clone(),
                port: m.port,
                seed: m.seed,
                show_load: false,
                time_show: false,
                idle_watch: false,
                print_config: false,
                operator_view: false,
                through_bird: false,
                policy: false,
                policy_change: false,
                fib: false,
                overload: false,
                rpki: false,
                bmp: None,
                graceful_restart: true,
            };
            let r = scenario::run(&opts).unwrap_or_else(|e| {
                tracing::warn!("{} on {}: {e}", sc.name(), dut.name());
                failed(&opts, &e)
            });
            tracing::info!("{}", one_line(&r));
            each(&r)?;
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {source}")]
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("chart {path}: {reason}")]
    Chart { path: PathBuf, reason: String },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub fn read_results(path: &Path) -> Result<Vec<RunResult>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| ReportError::Json {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// The median of `v`; `None` when empty.
pub(crate) fn median_of(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => v.get(n / 2).copied(),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// [`median_of`], NaN when empty (the report prints it as "-").
fn median(v: Vec<f64>) -> f64 {
    median_of(v).unwrap_or(f64::NAN)
}

/// Results of one cell (scenario, size, daemon) by their medians.
struct Cell<'a> {
    runs: Vec<&'a RunResult>,
}

impl Cell<'_> {
    fn correct(&self) -> bool {
        !self.runs.is_empty() && self.runs.iter().all(|r| r.correct)
    }
    fn converge(&self) -> f64 {
        median(self.runs.iter().map(|r| r.converge_s).collect())
    }
    fn cpu(&self) -> f64 {
        median(self.runs.iter().map(|r| r.dut_cpu_s).collect())
    }
    fn p99_ms(&self) -> f64 {
        median(self.runs.iter().filter_map(|r| r.latency_p99_ms).collect())
    }
    fn rss_mib(&self) -> f64 {
        median(
            self.runs
                .iter()
                .map(|r| r.dut_peak_rss_bytes as f64 / (1024.0 * 1024.0))
                .collect(),
        )
    }
    fn text(&self) -> String {
        let Some(first) = self.runs.first() else {
            return "not run".into();
        };
        if !self.correct() {
            let why = self
                .runs
                .iter()
                .find_map(|r| r.problem.clone())
                .unwrap_or_default();
            return format!("**failed**: {}", why.replace('|', "/"));
        }
        let mut s = format!(
            "**{:.2} s** · {:.1} s CPU · {:.0} MiB",
            self.converge(),
            self.cpu(),
            self.rss_mib()
        );
        // What the receivers got, per 1,000 prefixes they hold (runs that counted it).
        let counted: Vec<&RunResult> = self
            .runs
            .iter()
            .copied()
            .filter(|r| r.received.updates > 0)
            .collect();
        if !counted.is_empty() {
            let upd = median(
                counted
                    .iter()
                    .map(|r| r.received.updates_per_1k())
                    .collect(),
            );
            let kb = median(
                counted
                    .iter()
                    .map(|r| r.received.octets_per_1k() / 1e3)
                    .collect(),
            );
            let _ = write!(s, " · {upd:.0} UPDATEs, {kb:.1} kB /1k prefixes");
        }
        if self.runs.len() > 1 {
            let _ = write!(s, " · median of {}", self.runs.len());
        }
        if first.latency_p99_ms.is_some() {
            let p50 = median(self.runs.iter().filter_map(|r| r.latency_p50_ms).collect());
            let p99 = self.p99_ms();
            let gap = self
                .runs
                .iter()
                .filter_map(|r| r.max_keepalive_gap_s)
                .fold(0.0, f64::max);
            let _ = write!(
                s,
                " · p50 {p50:.1} ms, p99 {p99:.1} ms, keepalive gap {gap:.2} s"
            );
        }
        s
    }
}

/// A row of the table: scenario with its size (and speed for churn).
#[derive(Clone, PartialEq)]
struct RowKey {
    scenario: String,
    routes: usize,
    speed: Option<f64>,
}

fn row_key(r: &RunResult) -> RowKey {
    RowKey {
        // Runs through a real downstream router, or with policy, are rows of their own.
        scenario: format!(
            "{}{}{}",
            r.scenario,
            if r.policy { " with policy" } else { "" },
            r.through
                .as_ref()
                .map(|t| format!(" through {t}"))
                .unwrap_or_default()
        ),
        routes: r.routes,
        speed: r.speed,
    }
}

/// Rewrites the report section of `out` from the results in `json`, and the charts.
pub fn write(json: &Path, out: &Path) -> Result<(), ReportError> {
    let results = read_results(json)?;
    let mut labels: Vec<String> = Vec::new();
    for r in &results {
        let l = label(r);
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    let mut rows: Vec<RowKey> = Vec::new();
    for r in results.iter().filter(|r| r.routes > 0) {
        let k = row_key(r);
        if !rows.contains(&k) {
            rows.push(k);
        }
    }
    let order = |s: &str| {
        Scenario::ALL
            .iter()
            .position(|x| x.name() == s)
            .unwrap_or(99)
    };
    rows.sort_by(|a, b| {
        (order(&a.scenario), a.routes)
            .cmp(&(order(&b.scenario), b.routes))
            .then(a.speed.unwrap_or(0.0).total_cmp(&b.speed.unwrap_or(0.0)))
    });
    let cell = |k: &RowKey, l: &str| Cell {
        runs: results
            .iter()
            .filter(|r| &row_key(r) == k && label(r) == l)
            .collect(),
    };
    // Runs that failed before knowing their size belong to every row of their scenario.
    let failed_early = |k: &RowKey, l: &str| {
        results
            .iter()
            .find(|r| r.routes == 0 && r.scenario == k.scenario && label(r) == l)
    };

    let mut s = String::new();
    let _ = writeln!(s, "{BEGIN}");
    let _ = writeln!(s, "## Convergence against other daemons (ribshard-bench)\n");
    let dates: Vec<&str> = results
        .iter()
        .map(|r| r.date.as_str())
        .filter(|d| !d.is_empty())
        .collect();
    let quick = results.iter().any(|r| r.quick);
    let _ = writeln!(
        s,
        "Generated by `scripts/convergence` (`ribshard-bench report`; the script lists the runs) \
         on {} on this machine, every daemon in the same run{}. Each cell: convergence time \
         (start of the timed phase to the last UPDATE any receiver got, with every receiver \
         holding exactly the expected prefixes), the daemon's CPU time (user + system, all its \
         processes) in that phase, and its peak RSS.\n",
        dates.first().copied().unwrap_or("?"),
        if quick {
            "; rows marked (quick) ran at the quick sizes, not the real ones"
        } else {
            ""
        }
    );
    let _ = write!(s, "| scenario | routes | up / down |");
    for l in &labels {
        let _ = write!(s, " {l} |");
    }
    let _ = write!(s, "\n| --- | ---: | ---: |");
    for _ in &labels {
        let _ = write!(s, " --- |");
    }
    s.push('\n');
    for k in &rows {
        let any = results.iter().find(|r| row_key(r) == *k);
        let mut name = match k.speed {
            Some(x) => format!("{} at {x}x", k.scenario),
            None => k.scenario.clone(),
        };
        if any.is_some_and(|r| r.quick) {
            name.push_str(" (quick)");
        }
        let _ = write!(
            s,
            "| {name} | {} | {} / {} |",
            k.routes,
            any.map_or(0, |r| r.upstream_peers),
            any.map_or(0, |r| r.downstream_peers)
        );
        for l in &labels {
            let c = cell(k, l);
            let text = match (c.runs.is_empty(), failed_early(k, l)) {
                (true, Some(f)) => format!(
                    "**failed**: {}",
                    f.problem.clone().unwrap_or_default().replace('|', "/")
                ),
                _ => c.text(),
            };
            let _ = write!(s, " {text} |");
        }
        s.push('\n');
    }

    // The targets, as ratios measured in this run.
    let _ = writeln!(s, "\n### Against the targets\n");
    let best_ribshard = labels
        .iter()
        .rfind(|l| l.starts_with("ribshard") && !l.ends_with(" 1x0"))
        .cloned();
    let single = labels
        .iter()
        .find(|l| l.as_str() == "ribshard 1x0")
        .cloned();
    let _ = writeln!(
        s,
        "| scenario | routes | ribshard | / bird2 | target | / frr | / gobgpd | / openbgpd | multi / single-threaded | peak RSS / bird2 |"
    );
    let _ = writeln!(
        s,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for k in &rows {
        let Some(rb) = &best_ribshard else { break };
        let ours = cell(k, rb);
        if !ours.correct() {
            continue;
        }
        // Churn lasts as long as the trace whatever the daemon: compare p99 latencies there.
        let churn = k.speed.is_some();
        let measure = |c: &Cell| if churn { c.p99_ms() } else { c.converge() };
        let t = measure(&ours);
        let ratio = |l: &str| {
            let c = cell(k, l);
            match measure(&c) {
                m if c.correct() && m > 0.0 => format!("{:.2}", t / m),
                _ => "–".into(),
            }
        };
        let target = match k.scenario.as_str() {
            "rr" | "clear-all" | "flap" => "≤ 0.25",
            "full-table" | "two-full-tables" => "≤ 0.5",
            _ if churn => "p99 < 100 ms",
            _ => "",
        };
        let speedup = single
            .as_ref()
            .map(|l| {
                let c = cell(k, l);
                if c.correct() && t > 0.0 {
                    format!("{:.2}x", measure(&c) / t)
                } else {
                    "–".into()
                }
            })
            .unwrap_or_else(|| "–".into());
        let mut name = match k.speed {
            Some(x) => format!("{} at {x}x", k.scenario),
            None => k.scenario.clone(),
        };
        if ours.runs.iter().any(|r| r.quick) {
            name.push_str(" (quick)");
        }
        let bird = cell(k, "bird2");
        let rss = if bird.correct() {
            format!("{:.2}", ours.rss_mib() / bird.rss_mib())
        } else {
            "–".into()
        };
        let _ = writeln!(
            s,
            "| {name} | {} | {} ({rb}) | {} | {target} | {} | {} | {} | {speedup} | {rss} |",
            k.routes,
            if churn {
                format!("p99 {t:.1} ms")
            } else {
                format!("{t:.3} s")
            },
            ratio("bird2"),
            ratio("frr"),
            ratio("gobgpd"),
            ratio("openbgpd")
        );
    }
    let _ = writeln!(
        s,
        "\nTargets (issue 5): at most 0.25 of BIRD 2's time on rr, clear-all and flap, 0.5 on the \
         full-table scenarios, 0.1 of FRR's, GoBGP's and OpenBGPD's on rr; peak RSS at most BIRD 2's \
         on rr; 2 shards + 2 update threads 1.6x the single-threaded mode on rr; churn at 10x with \
         no keepalive gap over a third of the hold time and p99 under 100 ms. The keepalive gap is \
         the longest silence any peer saw from the daemon during the replay: KEEPALIVE and \
         UPDATE both restart the peer's hold timer (RFC 4271 section 4.4), so that is the gap \
         that matters; the churn hold time is 9 s, so 3 s is the daemon's keepalive interval. \
         Latency samples pair each sent prefix with its first receipt before the same prefix is \
         sent again; a send that changes nothing the daemon advertises gives no sample. On \
         churn rows the ratios compare p99 latencies, since every daemon takes the trace's \
         length.\n"
    );

    let versions: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for r in &results {
            let x = format!("{}: {}", r.dut, r.dut_version);
            if !r.dut_version.is_empty() && !v.contains(&x) {
                v.push(x);
            }
        }
        v
    };
    let _ = writeln!(s, "Versions: {}.\n", versions.join("; "));
    let _ = writeln!(
        s,
        "How to read it: `rr`, `route-server`, `clear-all` and `flap` use synthesized tables \
         (prefix lengths and AS-path lengths of the real ones); `full-table`, `two-full-tables` \
         and `churn` the 2010 RouteViews tables and the 2016 RIS update trace of `../shared/data`. \
         The generator runs on the same two cores as the daemon: its CPU time is in the JSON \
         results (`generator_cpu_s`). One run per cell unless the cell says \
         \"median of N\". Run one cell with `ribshard-bench run SCENARIO --dut DAEMON [--quick] \
         [--json FILE]`.\n"
    );
    let chart_dir = out.parent().unwrap_or(Path::new(".")).join(CHARTS);
    std::fs::create_dir_all(&chart_dir).map_err(io(&chart_dir))?;
    let bars = chart_dir.join("convergence.png");
    let lines = chart_dir.join("convergence-by-routes.png");
    match crate::chart::font() {
        Some(font) => {
            let groups: Vec<crate::chart::BarGroup> = rows
                .iter()
                .filter(|k| {
                    !rows.iter().any(|o| {
                        o.scenario == k.scenario && o.speed == k.speed && o.routes > k.routes
                    })
                })
                .map(|k| {
                    let name = match k.speed {
                        Some(x) => format!("{} {x}x", k.scenario),
                        None => k.scenario.clone(),
                    };
                    let v = labels
                        .iter()
                        .map(|l| {
                            let c = cell(k, l);
                            (l.clone(), c.correct().then(|| c.converge()))
                        })
                        .collect();
                    (name, v)
                })
                .collect();
            crate::chart::bars(&bars, font, &groups).map_err(|reason| ReportError::Chart {
                path: bars.clone(),
                reason,
            })?;
            let series: Vec<(String, Vec<(f64, f64)>)> = labels
                .iter()
                .map(|l| {
                    let mut pts: Vec<(f64, f64)> = rows
                        .iter()
                        .filter(|k| k.scenario == "full-table" || k.scenario == "two-full-tables")
                        .filter_map(|k| {
                            let c = cell(k, l);
                            c.correct().then(|| (k.routes as f64, c.converge()))
                        })
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    (l.clone(), pts)
                })
                .collect();
            crate::chart::lines(&lines, font, &crate::chart::CONVERGENCE_BY_ROUTES, &series)
                .map_err(|reason| ReportError::Chart {
                    path: lines.clone(),
                    reason,
                })?;
            let _ = writeln!(
                s,
                "![Convergence time by scenario and daemon]({CHARTS}/convergence.png)\n\n\
                 ![Convergence time against routes: full-table sizes and two-full-tables]({CHARTS}/convergence-by-routes.png)\n"
            );
        }
        None => {
            let _ = writeln!(
                s,
                "(No charts: no TrueType font found; install fonts-dejavu-core.)\n"
            );
        }
    }
    let _ = writeln!(s, "{END}");

    let old = std::fs::read_to_string(out).unwrap_or_default();
    let new = match (old.find(BEGIN), old.find(END)) {
        (Some(a), Some(b)) if a < b => {
            format!(
                "{}{}{}",
                &old[..a],
                s,
                &old[b + END.len()..].trim_start_matches('\n')
            )
        }
        _ => format!("{}\n{s}", old.trim_end()),
    };
    std::fs::write(out, new).map_err(io(out))?;
    Ok(())
}
