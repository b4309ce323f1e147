//! Scenarios: the topology around the device under test, what each upstream announces, what
//! each downstream must end up holding, and the timed phase.
//!
//! Every run: start the DUT, bring up every session (receivers first), then time one phase.
//! A phase has converged when every sender has written everything, every receiver holds as
//! many prefixes as expected with none unexpected, and no receiver has had an UPDATE for the
//! quiet period; the convergence time runs from the start of the phase to the last UPDATE
//! any receiver got. Correct means every receiver then holds exactly its expected prefixes.

use crate::dut::{Dut, DutError, DutKind, Role, Threads};
use crate::relay::Relay;
use crate::speaker::{now_ns, Holding, PeerSpec, Session, SessionError};
use ribshard_wire::{Family, UpdateBuilder};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

mod phase;
mod plan;
use phase::{
    change_policy, check, latencies, percentile, perf_control, received_by, replay, timed_phase,
    wait_converged, Clock,
};
use plan::{plan, Plan};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// One real full table from one upstream to one downstream.
    FullTable,
    /// Both real full tables from two upstreams to one downstream.
    TwoFullTables,
    /// Route reflector: K sources x N prefixes to D clients in G groups, from scratch.
    Rr,
    /// Transparent route server: P peers each announcing its share, receiving the rest.
    RouteServer,
    /// The rr setup converged, then every session reset at once.
    ClearAll,
    /// The rr setup converged, then 75% of the clients flapped.
    Flap,
    /// One full table converged, then a real RIS update trace replayed.
    Churn,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::FullTable => "full-table",
            Scenario::TwoFullTables => "two-full-tables",
            Scenario::Rr => "rr",
            Scenario::RouteServer => "route-server",
            Scenario::ClearAll => "clear-all",
            Scenario::Flap => "flap",
            Scenario::Churn => "churn",
        }
    }
    pub const ALL: [Scenario; 7] = [
        Scenario::FullTable,
        Scenario::TwoFullTables,
        Scenario::Rr,
        Scenario::RouteServer,
        Scenario::ClearAll,
        Scenario::Flap,
        Scenario::Churn,
    ];
}

/// A count flag: zero prefixes, peers or groups would make a run that measures nothing.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn positive_speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        Ok(_) => Err("must be a positive number (1 = as recorded)".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Sizes; `None` takes the scenario's default (real size, or quick size with `--quick`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Sizes {
    /// Prefixes (real tables: the first N of the RIB).
    #[arg(long, value_parser = at_least_one)]
    pub prefixes: Option<usize>,
    /// Sources of the rr scenarios (K).
    #[arg(long, value_parser = at_least_one)]
    pub sources: Option<usize>,
    /// Receivers of the rr scenarios (D).
    #[arg(long, value_parser = at_least_one)]
    pub clients: Option<usize>,
    /// Groups the rr receivers are configured in (G).
    #[arg(long, value_parser = at_least_one)]
    pub groups: Option<usize>,
    /// Peers of the route-server scenario (P).
    #[arg(long, value_parser = at_least_one)]
    pub peers: Option<usize>,
    /// route-server: destinations the `--prefixes` routes are spread over (fewer than the
    /// routes: peers share destinations, each with one winner by AS-path length, as in the
    /// BIRD seed's 2M routes for 800K destinations); default, every route its own prefix.
    #[arg(long, value_parser = at_least_one)]
    pub destinations: Option<usize>,
    /// Replay speed of the churn scenario (1 = as recorded).
    #[arg(long, value_parser = positive_speed)]
    pub speed: Option<f64>,
    /// Seconds the timed phase may take before the run counts as not finished (a DNF is a
    /// result: the JSON says how far the receivers got); default 1,800 (120 quick).
    #[arg(long, value_parser = at_least_one)]
    pub timeout: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub scenario: Scenario,
    pub dut: DutKind,
    pub threads: Threads,
    pub quick: bool,
    pub sizes: Sizes,
    pub data_dir: PathBuf,
    pub work_dir: PathBuf,
    pub port: u16,
    pub seed: u64,
    /// A client loops `show route` and `show bgp summary` during the timed phase.
    pub show_load: bool,
    /// Once converged, the whole table through the daemon's CLI is timed.
    pub time_show: bool,
    /// A route-change watch (ribshard `monitor route`) whose client never reads runs
    /// through the timed phase: it must not slow routing.
    pub idle_watch: bool,
    /// Print the daemon's configuration once it has started.
    pub print_config: bool,
    /// Each downstream neighbor is a real BIRD 2 re-advertising to the bench's receiver
    /// (transit scenarios: full-table, two-full-tables).
    pub through_bird: bool,
    /// Once converged, print what an operator's first show commands say (ribshard:
    /// `show bgp summary`, `show route summary`, `show thread cpu`).
    pub operator_view: bool,
    /// The transit filter on import and a tagging export policy (transit scenarios,
    /// ribshard and BIRD 2): [`crate::policy`].
    pub policy: bool,
    /// With `policy`: once converged, reload with [`crate::policy::Filter::CHANGED`] and time
    /// the downstream's re-convergence, sessions kept.
    pub policy_change: bool,
    /// The DUT writes the kernel's main table; the clock runs until it is complete.
    pub fib: bool,
    /// Overload beside the timed routes ([`crate::overload`]).
    pub overload: bool,
    /// Route origin validation (and ASPA, ribshard) on import ([`crate::rpki`]).
    pub rpki: bool,
    /// A BMP station fed the pre-policy Adj-RIB-In, the Loc-RIB or both ([`crate::bmp`]).
    pub bmp: Option<crate::bmp::Feeds>,
    /// The upstreams advertise graceful restart and end their tables with End-of-RIB (as
    /// BIRD 2, FRR and OpenBGPD do by default); off, neither.
    pub graceful_restart: bool,
}

/// `--bmp`: what the station got in the run.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BmpResult {
    /// From the clock's start to the last Route Monitoring of the table watched (the
    /// Loc-RIB, else the post-policy Adj-RIB-In or the Adj-RIB-Out) the station got.
    pub station_s: f64,
    /// The station held every prefix the downstream was sent.
    pub complete: bool,
    pub loc_rib_prefixes: u64,
    pub messages: u64,
    pub octets: u64,
    pub adj_rib_in_messages: u64,
    pub loc_rib_messages: u64,
    #[serde(default)]
    pub post_policy_messages: u64,
    #[serde(default)]
    pub adj_rib_out_messages: u64,
    pub connections: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Dut(#[from] DutError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("cannot create {path}: {source}")]
    WorkDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    IndexFull(#[from] crate::speaker::IndexFull),
    #[error("the churn scenario needs {0}")]
    NoTrace(PathBuf),
    #[error("--through-bird needs eBGP downstreams: full-table or two-full-tables, not {0}")]
    NoRelay(&'static str),
    #[error("--policy and --policy-change run with ribshard and bird2 on full-table or two-full-tables, not {0}")]
    NoPolicy(String),
    #[error("--rpki: {0}")]
    Rpki(String),
    #[error("--bmp runs with ribshard, not {0}")]
    NoBmp(&'static str),
    #[error("--bmp: the station: {0}")]
    BmpStation(std::io::Error),
    #[error("--fib runs with ribshard and bird2, not {0}")]
    NoFib(&'static str),
    #[error(transparent)]
    Overload(#[from] crate::overload::OverloadError),
    #[error("--fib: cannot listen to the kernel's route notifications: {0}")]
    Kernel(std::io::Error),
    #[error("--fib: cannot remove the routes an earlier run left in the table: {0}")]
    KernelFlush(std::io::Error),
}

/// One run, as `--json` writes it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunResult {
    pub scenario: String,
    pub dut: String,
    pub dut_version: String,
    pub shards: Option<u32>,
    pub update_threads: Option<u32>,
    /// Paths announced by all upstreams together.
    pub routes: usize,
    /// Distinct prefixes.
    pub prefixes: usize,
    pub upstream_peers: usize,
    pub downstream_peers: usize,
    /// Start of the timed phase to the last UPDATE any receiver got.
    pub converge_s: f64,
    /// Start of the timed phase to the moment the last receiver held every expected prefix.
    pub full_s: f64,
    /// User + system CPU of the DUT's processes during the timed phase.
    pub dut_cpu_s: f64,
    pub dut_peak_rss_bytes: u64,
    /// Peak RSS less the RSS with all sessions up and no routes, per path announced.
    pub bytes_per_path: f64,
    /// CPU of this program (generator and receivers) during the timed phase.
    pub generator_cpu_s: f64,
    /// Peak RSS of this program (the speakers' tables and the receivers'), apart from the
    /// DUT's.
    #[serde(default)]
    pub generator_peak_rss_bytes: u64,
    pub correct: bool,
    /// Why the run is not correct, when it is not.
    pub problem: Option<String>,
    pub quick: bool,
    /// "real" (../shared/data) or "synthesized".
    pub data: String,
    /// churn: replay speed, per-update latency percentiles (ms), largest keepalive gap (s).
    pub speed: Option<f64>,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub latency_max_ms: Option<f64>,
    pub latency_samples: Option<usize>,
    pub max_keepalive_gap_s: Option<f64>,
    pub hold_time_s: u16,
    pub date: String,
    /// `--show-load`: loops of `show route` and `show bgp summary` done during the timed
    /// phase.
    pub show_loops: Option<u64>,
    /// `--idle-watch`: a never-reading route watch ran; whether the daemon dropped it.
    pub idle_watch_dropped: Option<bool>,
    /// `--time-show`: the whole table through the CLI (ribshard `show route`, BIRD `birdc
    /// show route`), median of three: seconds, octets, lines.
    pub show_route_s: Option<f64>,
    pub show_route_octets: Option<u64>,
    pub show_route_lines: Option<u64>,
    /// The same with every attribute (ribshard `show route detail`, `birdc show route all`).
    pub show_route_detail_s: Option<f64>,
    pub show_route_detail_octets: Option<u64>,
    /// What the downstream peers were sent in the run (since their sessions came up),
    /// summed over them; each one's in `receivers`. Rows of older runs have none.
    #[serde(default)]
    pub received: Received,
    /// `bird2` when each downstream was a real BIRD 2 relaying to the bench's receiver.
    #[serde(default)]
    pub through: Option<String>,
    /// With relays: their CPU (user + system, all of them) during the timed phase, which
    /// shares this machine's cores with the DUT and the generator.
    #[serde(default)]
    pub relay_cpu_s: Option<f64>,
    /// With the transit filter on import and a tagging export policy ([`crate::policy`]).
    #[serde(default)]
    pub policy: bool,
    /// `--rpki`: ROV (and ASPA, ribshard) on import against 600,000 VRPs.
    #[serde(default)]
    pub rpki: bool,
    /// `--policy-change`: the reload that followed convergence.
    #[serde(default)]
    pub policy_change: Option<PolicyChange>,
    /// `--fib`: from the first UPDATE sent to the DUT's last route written in the kernel's
    /// main table (read from the kernel), and the routes it holds then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fib_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fib_routes: Option<u64>,
    /// Kernel notifications were lost while counting: `fib_routes` may be short.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fib_lost: bool,
    /// `--bmp`: what the station got, and when it held the whole Loc-RIB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmp: Option<BmpResult>,
    /// `--bmp`: the feeds the station asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmp_feeds: Option<crate::bmp::Feeds>,
    /// `--no-graceful-restart`: the upstreams did not advertise graceful restart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_graceful_restart: bool,
    #[serde(default)]
    pub receivers: Vec<Received>,
    /// `--overload`: what the overload came to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<crate::overload::OverloadResult>,
}

/// A reload changing the import policy of every upstream ([`crate::policy::Filter::CHANGED`]),
/// measured from the reload command until every downstream holds what the new policy accepts,
/// with the new tags, sessions kept.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PolicyChange {
    /// The reload command to the last UPDATE any receiver got.
    pub converge_s: f64,
    /// User + system CPU of the DUT's processes over that time.
    pub dut_cpu_s: f64,
    /// What the downstreams were sent in that time.
    pub received: Received,
}

/// What one downstream peer (or all of them) received: the work a real router pays for.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Received {
    /// The receiving speaker's address (empty for the sum).
    pub peer: String,
    pub updates: u64,
    /// Octets of those UPDATEs, headers included.
    pub octets: u64,
    /// Prefixes announced (NLRI) and withdrawn.
    pub announced: u64,
    pub withdrawn: u64,
    /// Announcements of a prefix with the attributes it already held there: work for nothing.
    pub redundant: u64,
    /// Prefixes it holds at the end: what the other counts are per.
    pub held: u64,
}

impl Received {
    /// UPDATEs per 1,000 prefixes held at the end.
    pub fn updates_per_1k(&self) -> f64 {
        self.updates as f64 * 1000.0 / self.held.max(1) as f64
    }
    /// Octets per 1,000 prefixes held at the end.
    pub fn octets_per_1k(&self) -> f64 {
        self.octets as f64 * 1000.0 / self.held.max(1) as f64
    }
    fn add(&mut self, o: &Received) {
        self.updates += o.updates;
        self.octets += o.octets;
        self.announced += o.announced;
        self.withdrawn += o.withdrawn;
        self.redundant += o.redundant;
        self.held += o.held;
    }
}

/// Sessions of every neighbor (index = neighbor), established in parallel.
fn establish_all(
    plan: &Plan,
    which: &[usize],
    sessions: &mut [Option<Session>],
    record: Option<usize>,
    relays: &[Option<Relay>],
) -> Result<(), BenchError> {
    let dut = SocketAddrV4::new(crate::dut::DUT_ADDR, plan.topo.port);
    // Receivers first, so they are up before the first route arrives.
    let (receivers, senders): (Vec<usize>, Vec<usize>) = which
        .iter()
        .partition(|i| plan.expected.get(**i).is_some_and(|e| e.is_some()));
    for batch in [receivers, senders] {
        let results: Vec<(usize, Result<Session, SessionError>)> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .iter()
                .map(|&i| {
                    s.spawn(move || {
                        let n = &plan.topo.neighbors[i];
                        // Behind a relay, the receiver is its neighbor, not the DUT's.
                        let (spec, to) = match relays.get(i).and_then(Option::as_ref) {
                            Some(r) => (r.receiver, r.listen),
                            None => (
                                PeerSpec {
                                    local: n.addr,
                                    asn: n.asn,
                                    // Receivers keep it: End-of-RIB is theirs to send.
                                    graceful_restart: plan.graceful_restart
                                        || plan.feeds.get(i).is_none_or(Option::is_none),
                                },
                                dut,
                            ),
                        };
                        let holding = plan.expected[i].as_ref().map(|_| {
                            // A route server's clients: lean receivers, the first one
                            // excepted (an exact table to check, and a latency sample).
                            let lean = plan.topo.role == Role::RouteServer
                                && receivers_before(plan, i) > 0
                                && record != Some(i);
                            // Clients sharing destinations: every one of them judging.
                            let mut h = if let Some(w) = &plan.winners {
                                Holding::judging(plan.index.clone(), spec.asn, w.clone(), i as u32)
                            } else if lean {
                                Holding::lean(plan.index.clone(), spec.asn)
                            } else {
                                Holding::new(plan.index.clone(), spec.asn)
                            };
                            if let Some(f) = plan.topo.policy.filter(|_| false) {
                                h.require(&f.tags());
                            }
                            if record == Some(i) {
                                h.record = Some(Vec::new());
                            }
                            h
                        });
                        let r = Session::establish(
                            spec,
                            to,
                            plan.topo.hold,
                            holding,
                            Duration::from_secs(90),
                        );
                        (i, r)
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        for (i, r) in results {
            if let Some(slot) = sessions.get_mut(i) {
                let s = r?;
                // A neighbor with no routes to send says so at once (End-of-RIB, RFC 4724
                // section 2), as a real router does; a sender's feed ends with its own.
                if plan.feeds.get(i).is_none_or(Option::is_none) {
                    s.send(&UpdateBuilder::end_of_rib(Family::Ipv4Unicast))?;
                }
                *slot = Some(s);
            }
        }
    }
    Ok(())
}

/// How many receivers come before neighbor `i`.
fn receivers_before(plan: &Plan, i: usize) -> usize {
    plan.expected.iter().take(i).filter(|e| e.is_some()).count()
}

fn today() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Runs one scenario against one DUT.
pub fn run(opts: &Options) -> Result<RunResult, BenchError> {
    let sc = opts.scenario;
    tracing::info!("{} on {}: preparing the tables", sc.name(), opts.dut.name());
    let plan = plan(opts)?;
    let dir = opts.work_dir.join(format!(
        "{}-{}-{}",
        sc.name(),
        opts.dut.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::WorkDir {
        path: dir.clone(),
        source,
    })?;
    if (opts.policy && opts.rpki)
        || (opts.policy || opts.policy_change || opts.rpki)
            && (!matches!(opts.scenario, Scenario::FullTable | Scenario::TwoFullTables)
                || !matches!(opts.dut, DutKind::Ribshard | DutKind::Bird2))
    {
        return Err(BenchError::NoPolicy(format!(
            "{} on {}",
            opts.dut.name(),
            opts.scenario.name()
        )));
    }
    if opts.fib {
        let Some(p) = crate::kernel::protocol_of(opts.dut) else {
            return Err(BenchError::NoFib(opts.dut.name()));
        };
        // Each run starts with no route of the DUT's in the table: a daemon started over
        // the routes a previous run left would keep them unwritten (as ribshard does at a
        // restart) and the table would never be seen completed.
        crate::kernel::flush(p).map_err(BenchError::KernelFlush)?;
    }
    let mut plan = plan;
    let cache = match &plan.rpki {
        Some(s) => {
            let c = crate::rpki::Cache::start(&dir, s).map_err(BenchError::Rpki)?;
            plan.topo.rpki = Some(c.port);
            tracing::info!("rtrtr serves {} VRPs and {} ASPA records", s.total, s.aspas);
            Some(c)
        }
        None => None,
    };
    let station = if let Some(feeds) = opts.bmp {
        if opts.dut != DutKind::Ribshard {
            return Err(BenchError::NoBmp(opts.dut.name()));
        }
        let s = crate::bmp::Station::start().map_err(BenchError::BmpStation)?;
        plan.topo.bmp = Some(s.ribshard_config(feeds));
        Some(s)
    } else {
        None
    };
    let mut dut = Dut::start(opts.dut, &plan.topo, opts.threads, &dir)?;
    if let Some(s) = &plan.rpki {
        // The clock starts with the RPKI data in place, as on a router running for a while.
        let cmd = crate::show::commands(&dut)
            .map(|c| c.summary)
            .unwrap_or_default();
        let base: Vec<String> = cmd.iter().take(3).cloned().collect();
        let bird = opts.dut == DutKind::Bird2;
        let end = std::time::Instant::now() + Duration::from_secs(180);
        while !crate::rpki::ready(&base, bird, s.v4) {
            if std::time::Instant::now() > end {
                return Err(BenchError::Rpki(format!(
                    "{} did not load the {} IPv4 VRPs within 180 s",
                    opts.dut.name(),
                    s.v4
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        tracing::info!("{} holds the RPKI data", opts.dut.name());
    }
    if opts.print_config {
        let text = std::fs::read_to_string(&dut.config).unwrap_or_default();
        println!(
            "== {} started with {}:\n{text}",
            opts.dut.name(),
            dut.config.display()
        );
    }
    let result = measure(opts, &plan, &mut dut, station.as_ref());
    let version = dut.version.clone();
    let peak = dut.memory().1;
    dut.stop();
    drop(cache);
    let (mut r, base_rss) = result?;
    r.dut_version = version;
    r.dut_peak_rss_bytes = peak;
    r.bytes_per_path = peak.saturating_sub(base_rss) as f64 / plan.routes.max(1) as f64;
    if r.correct && std::env::var_os("RIBSHARD_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        tracing::warn!("kept {} for a look", dir.display());
    }
    Ok(r)
}

fn measure(
    opts: &Options,
    plan: &Plan,
    dut: &mut Dut,
    station: Option<&crate::bmp::Station>,
) -> Result<(RunResult, u64), BenchError> {
    let sc = opts.scenario;
    let n = plan.topo.neighbors.len();
    // The overload's neighbors are brought up apart, in their own ways.
    let all: Vec<usize> = (0..n).filter(|i| !plan.overload.contains(i)).collect();
    let senders: Vec<usize> = all
        .iter()
        .copied()
        .filter(|i| plan.feeds[*i].is_some())
        .collect();
    let receivers: Vec<usize> = all
        .iter()
        .copied()
        .filter(|i| plan.expected[*i].is_some())
        .collect();
    let mut sessions: Vec<Option<Session>> = (0..n).map(|_| None).collect();
    let record = (sc == Scenario::Churn)
        .then(|| receivers.first().copied())
        .flatten();
    // A real BIRD in each downstream's place, when asked: up with the DUT before the clock.
    let relays: Vec<Option<Relay>> = if opts.through_bird {
        if plan.topo.role != Role::Transit {
            return Err(BenchError::NoRelay(sc.name()));
        }
        let mut v = Vec::new();
        for (i, n) in plan.topo.neighbors.iter().enumerate() {
            v.push(match plan.expected[i] {
                Some(_) => Some(Relay::start(n, &plan.topo, i, &dut.dir)?),
                None => None,
            });
        }
        tracing::info!("{} BIRD relays up", v.iter().flatten().count());
        v
    } else {
        Vec::new()
    };
    establish_all(plan, &all, &mut sessions, record, &relays)?;
    tracing::info!("{} sessions up", all.len());
    let overload = if plan.overload.is_empty() {
        None
    } else {
        let extra = plan
            .topo
            .neighbors
            .get(plan.overload.clone())
            .unwrap_or_default();
        let o = crate::overload::Overload::start(dut, plan.topo.port, extra)?;
        // ribshard waits up to its update-delay's establish-wait (5 s after start) for
        // neighbors that are not up yet, such as the stalled two: a wait by design, which
        // the timed phase starts after, so that the overload alone is measured.
        let wait = Duration::from_secs(6).saturating_sub(dut.started.elapsed());
        tracing::info!(
            "overload under way; the clock starts in {:.1} s",
            wait.as_secs_f64()
        );
        std::thread::sleep(wait);
        Some(o)
    };
    std::thread::sleep(Duration::from_millis(500));
    let base_rss = dut.memory().0;
    let quiet = Duration::from_millis(if opts.quick { 1500 } else { 3000 });
    let timeout = Duration::from_secs(
        opts.sizes
            .timeout
            .map_or(if opts.quick { 120 } else { 1800 }, |t| t as u64),
    );

    let load = if opts.show_load {
        crate::show::commands(dut).map(|c| crate::show::Load::start(c.route, c.summary))
    } else {
        None
    };
    let idle = if opts.idle_watch {
        crate::show::commands(dut)
            .and_then(|c| c.watch)
            .and_then(|w| crate::show::IdleWatch::start(&w))
    } else {
        None
    };
    let relay_cpu = || -> f64 {
        relays
            .iter()
            .flatten()
            .map(|r| crate::dut::cpu_seconds(r.pid()))
            .sum()
    };
    // Listening before the clock: every route the DUT writes from here on is counted.
    let kernel = match opts
        .fib
        .then(|| crate::kernel::protocol_of(opts.dut))
        .flatten()
    {
        Some(p) => Some(crate::kernel::KernelRoutes::watch(p).map_err(BenchError::Kernel)?),
        None => None,
    };
    perf_control("enable");
    let (cpu0, gen0, t0) = (dut.cpu_seconds(), crate::dut::own_cpu_seconds(), now_ns());
    let relay0 = relay_cpu();
    let clock = Clock { t0, quiet, timeout };
    let mut phase = timed_phase(plan, &sessions, &senders, &receivers, clock, dut)?;
    // --fib: the kernel's table is complete when it holds every prefix the downstream was
    // sent and the DUT has written nothing for the quiet period.
    let fib = match (&kernel, phase.converged) {
        (Some(k), true) => {
            let want = receivers
                .first()
                .and_then(|i| plan.expected.get(*i)?.as_ref())
                .map_or(0, crate::speaker::Bits::count) as usize;
            let deadline = now_ns() + timeout.as_nanos() as u64;
            loop {
                std::thread::sleep(Duration::from_millis(5));
                let (n, last, now) = (k.count(), k.last_ns(), now_ns());
                if n == want && now.saturating_sub(last) >= quiet.as_nanos() as u64 {
                    break Some(((last.max(t0) - t0) as f64 / 1e9, n as u64, true));
                }
                if now > deadline {
                    break Some(((now - t0) as f64 / 1e9, n as u64, false));
                }
            }
        }
        _ => None,
    };
    // --bmp: the station holds the whole Loc-RIB (what the downstream was sent) and has
    // had nothing for the quiet period.
    let bmp = match (station, phase.converged) {
        (Some(s), true) => {
            let want = receivers
                .first()
                .and_then(|i| plan.expected.get(*i)?.as_ref())
                .map_or(0, crate::speaker::Bits::count);
            let deadline = now_ns() + timeout.as_nanos() as u64;
            let c = &s.counts;
            loop {
                std::thread::sleep(Duration::from_millis(5));
                let (n, mut last, now) = (
                    c.loc_rib_prefixes.load(Ordering::Relaxed),
                    c.last_loc_rib_ns.load(Ordering::Relaxed),
                    now_ns(),
                );
                // Without the Loc-RIB feed: the neighbors' UPDATEs, all of them; every path
                // accepted (import accepts all); the downstream's table.
                let complete = match opts.bmp {
                    Some(crate::bmp::Feeds::PrePolicy) => {
                        // (End-of-RIB included: the monitor sends its own.)
                        c.adj_rib_in.load(Ordering::Relaxed)
                            >= plan.feeds.iter().flatten().map(|f| f.messages as u64).sum()
                    }
                    Some(crate::bmp::Feeds::PostPolicy) => {
                        last = c.last_table_ns.load(Ordering::Relaxed);
                        c.post_policy_paths.load(Ordering::Relaxed) >= plan.routes as u64
                    }
                    Some(crate::bmp::Feeds::AdjRibOut) => {
                        last = c.last_table_ns.load(Ordering::Relaxed);
                        c.adj_rib_out_prefixes.load(Ordering::Relaxed) == want
                    }
                    _ => n == want,
                };
                if (complete && now.saturating_sub(last) >= quiet.as_nanos() as u64)
                    || now > deadline
                {
                    break Some(BmpResult {
                        station_s: (last.max(t0) - t0) as f64 / 1e9,
                        complete,
                        loc_rib_prefixes: n,
                        messages: c.messages.load(Ordering::Relaxed),
                        octets: c.octets.load(Ordering::Relaxed),
                        adj_rib_in_messages: c.adj_rib_in.load(Ordering::Relaxed),
                        loc_rib_messages: c.loc_rib.load(Ordering::Relaxed),
                        post_policy_messages: c.post_policy.load(Ordering::Relaxed),
                        adj_rib_out_messages: c.adj_rib_out.load(Ordering::Relaxed),
                        connections: c.connections.load(Ordering::Relaxed),
                    });
                }
            }
        }
        _ => None,
    };
    perf_control("disable");
    // The phase's CPU, before the loads are stopped (a request under way finishes first).
    let (mut cpu, mut gen) = (
        dut.cpu_seconds() - cpu0,
        crate::dut::own_cpu_seconds() - gen0,
    );
    let overload = overload.map(crate::overload::Overload::stop);
    let show_loops = load.map(crate::show::Load::stop);
    let idle_watch_dropped = idle.map(|w| {
        drop(w);
        std::fs::read_to_string(dut.dir.join("dut.log"))
            .is_ok_and(|l| l.contains("route watch dropped"))
    });
    let relay_cpu_s = opts.through_bird.then(|| relay_cpu() - relay0);
    tracing::info!(
        "learned in {:.2} s (converged: {})",
        phase.converge_s,
        phase.converged
    );
    let mut watch = receivers.clone();
    let mut churn = None;
    if phase.converged {
        match sc {
            Scenario::ClearAll | Scenario::Flap => {
                let which: Vec<usize> = if sc == Scenario::ClearAll {
                    all.clone()
                } else {
                    // 75% of the clients, at random (seeded).
                    let mut rng = ribshard_mrt::synth::Rng::new(opts.seed ^ 0x5eed);
                    let mut c = receivers.clone();
                    for i in (1..c.len()).rev() {
                        c.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    c.truncate((c.len() * 3).div_ceil(4));
                    c
                };
                // All at one instant: the clock starts when the last Cease is sent.
                let (cpu0, gen0) = (dut.cpu_seconds(), crate::dut::own_cpu_seconds());
                let old: Vec<Session> = which
                    .iter()
                    .filter_map(|&i| sessions.get_mut(i).and_then(Option::take))
                    .collect();
                for s in &old {
                    s.cease(true);
                }
                let t0 = now_ns();
                establish_all(plan, &which, &mut sessions, None, &relays)?;
                tracing::info!(
                    "{} sessions reset and re-established in {:.3} s",
                    which.len(),
                    (now_ns() - t0) as f64 / 1e9
                );
                let again: Vec<usize> = senders
                    .iter()
                    .copied()
                    .filter(|i| which.contains(i))
                    .collect();
                let clock = Clock { t0, quiet, timeout };
                phase = timed_phase(plan, &sessions, &again, &receivers, clock, dut)?;
                cpu = dut.cpu_seconds() - cpu0;
                gen = crate::dut::own_cpu_seconds() - gen0;
                watch = receivers.clone();
                for s in old {
                    s.close(true);
                }
            }
            Scenario::Churn => {
                let speed = opts.sizes.speed.unwrap_or(10.0);
                let (Some(trace), Some(&up)) = (&plan.trace, senders.first()) else {
                    unreachable!("churn has a trace and an upstream")
                };
                let Some(Some(up_session)) = sessions.get(up) else {
                    unreachable!("the upstream is established")
                };
                // Keepalive gaps are measured from here on.
                for s in sessions.iter().flatten() {
                    s.stats.max_keepalive_gap_ns.store(0, Ordering::Relaxed);
                }
                let (cpu0, gen0, t0) = (dut.cpu_seconds(), crate::dut::own_cpu_seconds(), now_ns());
                let sent = replay(up_session, trace, speed)?;
                let done = AtomicUsize::new(1);
                phase = wait_converged(
                    &plan.after_trace,
                    &sessions,
                    &receivers,
                    &done,
                    1,
                    Clock { t0, quiet, timeout },
                    dut,
                )?;
                cpu = dut.cpu_seconds() - cpu0;
                gen = crate::dut::own_cpu_seconds() - gen0;
                let received = record
                    .and_then(|i| sessions.get(i)?.as_ref()?.holding.clone())
                    .and_then(|h| h.lock().ok()?.record.take())
                    .unwrap_or_default();
                let lat = latencies(trace, &sent, &received);
                let gap = sessions
                    .iter()
                    .flatten()
                    .map(|s| s.stats.max_keepalive_gap_ns.load(Ordering::Relaxed))
                    .max()
                    .unwrap_or(0);
                churn = Some((speed, lat, gap as f64 / 1e9));
            }
            _ => {}
        }
    }
    let mut expected = if churn.is_some() {
        &plan.after_trace
    } else {
        &plan.expected
    };
    // --policy-change: only from a correct table, else its time would mean nothing.
    let mut policy_change = None;
    let mut converged = phase.converged;
    let mut learned_problem = None;
    if phase.converged && opts.policy_change {
        learned_problem = check(plan, expected, &sessions, &watch)
            .map(|p| format!("before the policy change: {p}"));
        if learned_problem.is_none() {
            let clock = Clock {
                t0: 0,
                quiet,
                timeout,
            };
            let (done, change) = change_policy(plan, &sessions, &receivers, clock, dut)?;
            converged = done;
            policy_change = Some(change);
            expected = &plan.after_change;
        }
    }
    let problem = if learned_problem.is_some() {
        learned_problem
    } else if let Some((_, n, false)) = fib {
        Some(format!(
            "the kernel's table did not complete: {n} routes of the DUT's after {} s",
            timeout.as_secs()
        ))
    } else if converged {
        check(plan, expected, &sessions, &watch)
    } else {
        let lagging = receivers.iter().find_map(|&i| {
            let s = sessions.get(i)?.as_ref()?;
            let e = expected.get(i)?.as_ref()?;
            let held = s.stats.held.load(Ordering::Relaxed);
            (held != e.count() || s.stats.extras.load(Ordering::Relaxed) > 0).then(|| {
                // A lean receiver counts rather than holds: a withdrawal of a prefix it
                // never had (harmless to a real peer) counts as one it lost.
                let lean = s
                    .holding
                    .as_ref()
                    .and_then(|h| h.lock().ok())
                    .is_some_and(|h| h.lean.is_some());
                format!(
                    "{} holds {held} of {} prefixes ({} unexpected) after {} UPDATEs{}",
                    s.spec.local,
                    e.count(),
                    s.stats.extras.load(Ordering::Relaxed),
                    s.stats.updates.load(Ordering::Relaxed),
                    if lean {
                        format!(
                            " (by a lean receiver's count, {} withdrawals counted: one of a \
                             prefix never sent counts as lost)",
                            s.stats.withdrawn.load(Ordering::Relaxed)
                        )
                    } else {
                        String::new()
                    }
                )
            })
        });
        Some(format!(
            "{}not converged (no UPDATE for a minute with every sender done, or {} s passed): {}",
            if policy_change.is_some() {
                "after the policy change: "
            } else {
                ""
            },
            timeout.as_secs(),
            lagging.unwrap_or_else(|| "every receiver is whole; the senders did not finish".into())
        ))
    };
    let (shown, shown_detail) = match crate::show::commands(dut) {
        Some(c) if opts.time_show && phase.converged => (
            crate::show::time(&c.route, 3),
            crate::show::time(&c.detail, 3),
        ),
        _ => (None, None),
    };
    if opts.operator_view && phase.converged {
        println!(
            "== converged in {:.3} s: {} routes from {} upstream peers, whole at {} downstream",
            phase.converge_s,
            plan.routes,
            senders.len(),
            receivers.len()
        );
        for (words, out) in crate::show::operator_view(dut) {
            println!("== {words}\n{out}");
        }
    }
    // For a look at the converged daemon by hand (profiling, show commands).
    if let Some(secs) = std::env::var("RIBSHARD_BENCH_HOLD")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        tracing::warn!(dir = %dut.dir.display(), secs, "holding the converged daemon");
        std::thread::sleep(Duration::from_secs(secs));
    }
    let receivers = received_by(&sessions, &watch);
    let mut received = Received::default();
    receivers.iter().for_each(|r| received.add(r));
    for s in sessions.into_iter().flatten() {
        s.close(false);
    }
    let (shards, update_threads) = match opts.dut {
        DutKind::Ribshard => (Some(opts.threads.shards), Some(opts.threads.update_threads)),
        _ => (None, None),
    };
    let r = RunResult {
        scenario: sc.name().to_string(),
        dut: opts.dut.name().to_string(),
        dut_version: String::new(),
        shards,
        update_threads,
        routes: plan.routes,
        prefixes: plan.index.len(),
        upstream_peers: senders.len(),
        downstream_peers: receivers.len(),
        converge_s: phase.converge_s,
        full_s: phase.full_s,
        dut_cpu_s: cpu,
        dut_peak_rss_bytes: 0,
        bytes_per_path: 0.0,
        generator_cpu_s: gen,
        generator_peak_rss_bytes: crate::dut::memory(std::process::id()).1,
        correct: problem.is_none(),
        problem,
        quick: opts.quick,
        data: plan.data.to_string(),
        speed: churn.as_ref().map(|c| c.0),
        latency_p50_ms: churn.as_ref().and_then(|c| percentile(&c.1, 0.5)),
        latency_p99_ms: churn.as_ref().and_then(|c| percentile(&c.1, 0.99)),
        latency_max_ms: churn.as_ref().and_then(|c| c.1.last().copied()),
        latency_samples: churn.as_ref().map(|c| c.1.len()),
        max_keepalive_gap_s: churn.as_ref().map(|c| c.2),
        hold_time_s: plan.topo.hold,
        date: today(),
        show_loops,
        idle_watch_dropped,
        show_route_s: shown.map(|s| s.0),
        show_route_octets: shown.map(|s| s.1),
        show_route_lines: shown.map(|s| s.2),
        show_route_detail_s: shown_detail.map(|s| s.0),
        show_route_detail_octets: shown_detail.map(|s| s.1),
        received,
        receivers,
        through: opts.through_bird.then(|| "bird2".to_string()),
        relay_cpu_s,
        policy: opts.policy,
        rpki: opts.rpki,
        bmp,
        bmp_feeds: opts.bmp,
        no_graceful_restart: !opts.graceful_restart,
        policy_change,
        fib_s: fib.map(|f| f.0),
        fib_routes: fib.map(|f| f.1),
        fib_lost: kernel.as_ref().is_some_and(|k| k.lost()),
        overload,
    };
    Ok((r, base_rss))
}

/// The real data directory beside the repository this binary was built from, or `dir`.
pub fn default_data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}
