//! `ribshard-bench`: run one scenario against one daemon, or the whole matrix into
//! BENCHMARKS.md.

use clap::{Parser, Subcommand};
use ribshard_bench::dut::{DutKind, Threads};
use ribshard_bench::report;
use ribshard_bench::scenario::{self, Options, Scenario, Sizes};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ribshard-bench",
    version,
    about = "BGP convergence benchmarks: ribshard beside BIRD 2, FRR, GoBGP and OpenBGPD"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs one scenario against one device under test.
    Run {
        #[arg(value_enum)]
        scenario: Scenario,
        #[arg(long, value_enum)]
        dut: DutKind,
        /// ribshard's number-of-shards (default: the number of CPUs).
        #[arg(long)]
        shards: Option<u32>,
        /// ribshard's update-threading number-of-threads (default: the number of CPUs; 0
        /// with 1 shard is the single-threaded mode).
        #[arg(long)]
        update_threads: Option<u32>,
        /// Small sizes (the whole quick matrix runs in about two minutes).
        #[arg(long)]
        quick: bool,
        /// Appends the result as one JSON object per line.
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        sizes: Sizes,
        /// A client loops `show route` and `show bgp summary` while routes flow (ribshard,
        /// BIRD: `birdc show route` and `show protocols`).
        #[arg(long)]
        show_load: bool,
        /// Once converged, time the whole table through the daemon's CLI with every
        /// attribute (ribshard `show route detail`, `birdc show route all`).
        #[arg(long)]
        time_show: bool,
        /// A route-change watch whose client never reads (ribshard `monitor route`) runs
        /// while routes flow: it must be dropped, never slow convergence.
        #[arg(long)]
        idle_watch: bool,
        /// Print the daemon's configuration once it has started.
        #[arg(long)]
        print_config: bool,
        /// Put a real BIRD 2 in each downstream neighbor's place, re-advertising to the
        /// bench's receiver: the clock stops when the receiver holds everything through BIRD
        /// (full-table, two-full-tables, churn).
        #[arg(long)]
        through_bird: bool,
        /// Once converged, print ribshard's `show bgp summary`, `show route summary` and
        /// `show thread cpu` (what `scripts/run` shows a newcomer).
        #[arg(long)]
        show: bool,
        /// A transit filter on import (bogon prefixes and AS numbers, lengths, long paths,
        /// our own prefixes; local preference and a community set) and an export policy
        /// adding a community (full-table, two-full-tables, churn; ribshard and bird2).
        #[arg(long)]
        policy: bool,
        /// With --policy: once converged, reload with an import policy that also refuses the
        /// /24s and tags differently, sessions kept, and time the downstream's re-convergence
        /// (BIRD keeps an import table for it, as ribshard keeps its Adj-RIB-In).
        #[arg(long, requires = "policy")]
        policy_change: bool,
        /// The DUT writes its best paths to the kernel's main table (ribshard `[fib]`, BIRD's
        /// kernel protocol), and the clock runs until the table is complete: run inside a
        /// network namespace with a link on 198.51.100.0/24 and a default route via
        /// 198.51.100.1, through which the upstreams' next hops resolve (`scripts/bench-fib`
        /// makes one). ribshard and bird2.
        #[arg(long)]
        fib: bool,
        /// Beside the timed routes: a downstream that never reads, a neighbor with a 3 s
        /// hold time, one that connects and sends nothing, one that stops half-way through
        /// its OPEN, and 100 management clients asking without pause (ribshard's API, BIRD's
        /// control socket). full-table and two-full-tables.
        #[arg(long)]
        overload: bool,
        /// Route origin validation on import against 600,000 VRPs served by rtrtr: ROV-invalid
        /// routes rejected (ribshard `validation-state`, BIRD `roa_check`), and with ribshard
        /// ASPA verification too. full-table and two-full-tables; ribshard and bird2.
        #[arg(long)]
        rpki: bool,
        /// A BMP station beside the run: ribshard sends it the pre-policy Adj-RIB-In and the
        /// Loc-RIB (or the one feed named: pre-policy, loc-rib, post-policy, adj-rib-out);
        /// the run also waits until the station holds what it should. ribshard.
        #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "both")]
        bmp: Option<ribshard_bench::bmp::Feeds>,
        /// The upstreams do not do graceful restart: no capability in their OPEN and no
        /// End-of-RIB after their tables, as a router without RFC 4724 sends, so the DUT's
        /// start-up deferral cannot wait for them and what it sends is its live packing.
        #[arg(long)]
        no_graceful_restart: bool,
    },
    /// Runs the matrix (every scenario, every daemon) and writes the convergence section of
    /// BENCHMARKS.md and its charts.
    Report {
        #[arg(long)]
        quick: bool,
        /// Only these daemons (default: all five, ribshard twice: 1x0 and the CPU count).
        #[arg(long, value_enum, value_delimiter = ',')]
        duts: Vec<DutKind>,
        /// Only these scenarios (default: all).
        #[arg(long, value_enum, value_delimiter = ',')]
        scenarios: Vec<Scenario>,
        /// Results file (JSON lines), appended to, then read back for the report.
        #[arg(long, default_value = "target/bench/results.jsonl")]
        json: PathBuf,
        /// Write the report from the results file only, running nothing.
        #[arg(long)]
        from_json: bool,
        /// The file whose convergence section is rewritten.
        #[arg(long, default_value = "BENCHMARKS.md")]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
        /// Sizes for every scenario run (unset: each scenario's default).
        #[command(flatten)]
        sizes: Sizes,
    },
    /// Draws the route-server scale section's charts (convergence time and peak RSS against
    /// clients, per daemon) from `run route-server --json` rows; `scripts/scale` runs it.
    ScaleChart {
        /// The rows (JSON lines).
        #[arg(long, default_value = "target/bench/scale.jsonl")]
        json: PathBuf,
        /// Where the charts go (scale-time.png, scale-rss.png).
        #[arg(long, default_value = "docs/bench")]
        out: PathBuf,
    },
}

#[derive(clap::Args)]
struct Common {
    /// Where the real MRT files are (default: ../shared/data beside the repository).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Scratch directory for the daemons' configurations and logs.
    #[arg(long, default_value = "/tmp/ribshard-bench")]
    work: PathBuf,
    /// The port the device under test listens on (127.0.0.1).
    #[arg(long, default_value_t = 1790)]
    port: u16,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

fn append_json(path: &PathBuf, r: &scenario::RunResult) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(
        f,
        "{}",
        serde_json::to_string(r).map_err(std::io::Error::other)?
    )
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            scenario,
            dut,
            shards,
            update_threads,
            quick,
            json,
            common,
            sizes,
            show_load,
            time_show,
            idle_watch,
            print_config,
            through_bird,
            show,
            policy,
            policy_change,
            fib,
            overload,
            rpki,
            bmp,
            no_graceful_restart,
        } => {
            let opts = Options {
                scenario,
                dut,
                threads: Threads {
                    shards: shards.unwrap_or(cpus()),
                    update_threads: update_threads.unwrap_or(cpus()),
                },
                quick,
                sizes,
                data_dir: common.data.unwrap_or_else(scenario::default_data_dir),
                work_dir: common.work,
                port: common.port,
                seed: common.seed,
                show_load,
                time_show,
                idle_watch,
                print_config,
                through_bird,
                operator_view: show,
                policy,
                policy_change,
                fib,
                overload,
                rpki,
                bmp,
                graceful_restart: !no_graceful_restart,
            };
            match scenario::run(&opts) {
                Ok(r) => {
                    println!("{}", report::one_line(&r));
                    if let Some(j) = json {
                        if let Err(e) = append_json(&j, &r) {
                            eprintln!("error: {}: {e}", j.display());
                            return ExitCode::FAILURE;
                        }
                    }
                    if r.correct {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(2)
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Report {
            quick,
            duts,
            scenarios,
            json,
            from_json,
            out,
            common,
            sizes,
        } => {
            let plan = report::Matrix {
                sizes,
                quick,
                duts,
                scenarios,
                data_dir: common.data.unwrap_or_else(scenario::default_data_dir),
                work_dir: common.work,
                port: common.port,
                seed: common.seed,
                cpus: cpus(),
            };
            if !from_json {
                let ran = report::run_matrix(&plan, |r| {
                    println!("{}", report::one_line(r));
                    append_json(&json, r)
                });
                if let Err(e) = ran {
                    eprintln!("error: {}: {e}", json.display());
                    return ExitCode::FAILURE;
                }
            }
            match report::write(&json, &out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::ScaleChart { json, out } => match ribshard_bench::scale::write(&json, &out) {
            Ok(paths) => {
                for p in paths {
                    println!("{}", p.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
