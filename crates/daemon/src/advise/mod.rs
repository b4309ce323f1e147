//! `ribshard advise`: whether RIB sharding and update threading will pay here, and with how
//! many threads. It weighs this machine ([`machine`]), the running daemon's workload when
//! there is one (paths, RIB:FIB ratio, groups and their members, CPU per thread kind), and
//! ribshard's own measurements ([`measured`]), following the Junos Day One book's deployment
//! considerations (chapter 2): cores rather than SMT siblings, shards + update threads + one
//! or two more CPUs, a RIB:FIB ratio of about 4 or more, no more update threads than update
//! groups, a light steady load, the performance governor, one NUMA node with its NIC. It only
//! reads: it never changes the configuration.

pub mod machine;
pub mod measured;

use machine::Machine;
use measured::{Measured, Row};
use ribshard_mgmt::api::{Group, RouteSummary, Summary, Threads};
use ribshard_mgmt::client::{Client, ClientError, Endpoint};
use serde::Serialize;

/// The RIB:FIB ratio from which the Day One book saw sharding pay well.
pub const DAY_ONE_RIB_FIB: f64 = 4.0;

/// A measured speedup below this is within this machine's noise: the threads did not pay.
const PAYS: f64 = 1.10;

/// A time saved below this is within this machine's noise however large the ratio: medians
/// of one setting under a second move by about this much from run to run here.
const NOISE_S: f64 = 0.10;

/// Whether a measurement separates the threaded setting from the single-threaded mode:
/// faster by [`PAYS`] and by [`NOISE_S`].
fn separates(r: &Row) -> bool {
    r.speedup() >= PAYS && r.single_s - r.threaded_s >= NOISE_S
}

/// What the running daemon reports of its workload.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Workload {
    /// The threading it runs with: (shards, update threads).
    pub shards: usize,
    pub update_threads: usize,
    pub paths: u64,
    pub prefixes: u64,
    /// Members (neighbors) of each update group with at least one.
    pub group_members: Vec<(String, usize)>,
    /// CPU seconds since start, by thread kind (`shard`, `update`, `session`, ...).
    pub cpu_by_kind: Vec<(String, f64)>,
}

impl Workload {
    pub fn rib_fib(&self) -> f64 {
        if self.prefixes == 0 {
            0.0
        } else {
            self.paths as f64 / self.prefixes as f64
        }
    }
}

/// Asks the running daemon what it holds and how its threads spent their CPU.
pub async fn workload(endpoint: Endpoint) -> Result<Workload, ClientError> {
    let c = Client::new(endpoint);
    let s: Summary = c.get("/v1/bgp/summary").await?;
    let r: RouteSummary = c.get("/v1/routes/summary").await?;
    let groups: Vec<Group> = c.get("/v1/bgp/groups").await?;
    let t: Threads = c.get("/v1/threads").await?;
    let mut cpu_by_kind: Vec<(String, f64)> = Vec::new();
    for th in &t.threads {
        match cpu_by_kind.iter_mut().find(|(k, _)| *k == th.kind) {
            Some((_, s)) => *s += th.cpu_seconds,
            None => cpu_by_kind.push((th.kind.clone(), th.cpu_seconds)),
        }
    }
    Ok(Workload {
        shards: s.threading.shards,
        update_threads: s.threading.update_threads,
        paths: r.tables.iter().map(|t| t.routes).sum(),
        prefixes: r.tables.iter().map(|t| t.destinations).sum(),
        group_members: groups
            .iter()
            .flat_map(|g| {
                g.update_groups
                    .iter()
                    .filter(|u| !u.members.is_empty())
                    .map(|u| (format!("{} #{}", g.name, u.id), u.members.len()))
            })
            .collect(),
        cpu_by_kind,
    })
}

/// One recommendation: the settings and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Advice {
    pub number_of_shards: u32,
    pub number_of_threads: u32,
    pub reasons: Vec<String>,
    /// What else to change on the machine, each with its reason.
    pub machine_notes: Vec<String>,
}

/// The measured row most like a workload: nearest RIB:FIB ratio (on a log scale), then
/// nearest size.
fn nearest(m: &Measured, rib_fib: f64, paths: u64) -> Option<&Row> {
    let d = |r: &Row| {
        let ratio = (r.rib_fib.max(0.5) / rib_fib.max(0.5)).ln().abs();
        let size = (r.routes.max(1) as f64 / paths.max(1) as f64).ln().abs();
        ratio * 10.0 + size
    };
    m.rows.iter().min_by(|a, b| d(a).total_cmp(&d(b)))
}

fn describe(r: &Row) -> String {
    format!(
        "{} ({} paths, RIB:FIB {:.1}): {:.2} s single-threaded against {:.2} s with {} ({:.2}x)",
        r.scenario,
        r.routes,
        r.rib_fib,
        r.single_s,
        r.threaded_s,
        r.threaded,
        r.speedup()
    )
}

/// The measured rows where the threads paid, described.
fn paid(measured: &Measured) -> Vec<String> {
    measured
        .rows
        .iter()
        .filter(|r| separates(r))
        .map(describe)
        .collect()
}

/// A row in a few words: `rr 1000000 paths 0.96x`.
fn short(r: &Row) -> String {
    format!("{} {} paths {:.2}x", r.scenario, r.routes, r.speedup())
}

/// The recommendation for this machine, and for the workload when a daemon is running.
pub fn advise(m: &Machine, w: Option<&Workload>, measured: &Measured) -> Advice {
    let mut reasons = Vec::new();
    let mut notes = Vec::new();
    let cores = m.cores.max(1);
    let bench = format!(
        "BENCHMARKS.md ({}, {})",
        measured
            .machine
            .split(", ")
            .take(2)
            .collect::<Vec<_>>()
            .join(", "),
        measured.date
    );
    if m.smt() {
        notes.push(format!(
            "{} logical CPUs are {} cores with SMT siblings: count cores, not siblings (the Day One book saw hyper-threading not help BGP and advises turning it off)",
            m.logical_cpus, m.cores
        ));
    }
    if let Some(g) = m.governor.as_deref().filter(|g| *g != "performance") {
        notes.push(format!(
            "the CPU frequency governor is `{g}`: set `performance` (cpupower frequency-set -g performance) so that bursts of routing work run at full clock"
        ));
    }
    let busy = m.load[1] / m.logical_cpus.max(1) as f64;
    if busy > 0.5 {
        notes.push(format!(
            "the 5-minute load is {:.2} over {} CPUs ({:.0}% busy at steady state): threads find fewer free cycles, so expect less from them",
            m.load[1],
            m.logical_cpus,
            busy * 100.0
        ));
    }
    if m.numa_nodes.len() > 1 {
        let nic_nodes: Vec<String> = m
            .nics
            .iter()
            .map(|n| match n.numa_node {
                Some(node) => format!("{} on node {node}", n.name),
                None => format!("{} (node not reported)", n.name),
            })
            .collect();
        notes.push(format!(
            "{} NUMA nodes: keep ribshard on the node of the NIC its sessions use ({}): systemd CPUAffinity= and NUMAPolicy=, or numactl --cpunodebind",
            m.numa_nodes.len(),
            nic_nodes.join(", ")
        ));
    }
    // Day One: shards + update threads + 1 or 2 CPUs for everything else.
    let room = cores.saturating_sub(1) as u32;
    let single = |reasons: &mut Vec<String>| {
        reasons.push(
            "the single-threaded mode (number-of-shards = 1, number-of-threads = 0) has no hand-offs between threads".into(),
        );
        (1, 0)
    };
    let (shards, threads) = if cores < 2 {
        reasons.push(format!(
            "{cores} core: threads could only take turns on it, adding hand-offs and gaining nothing"
        ));
        single(&mut reasons)
    } else if let Some(w) = w {
        let ratio = w.rib_fib();
        let groups = w.group_members.len().max(1) as u32;
        reasons.push(format!(
            "the running daemon holds {} paths for {} prefixes: RIB:FIB {:.2}, in {} update group(s) ({})",
            w.paths,
            w.prefixes,
            ratio,
            w.group_members.len(),
            w.group_members
                .iter()
                .map(|(g, n)| format!("{g}: {n} member(s)"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if !w.cpu_by_kind.is_empty() {
            reasons.push(format!(
                "CPU since start by thread kind: {}",
                w.cpu_by_kind
                    .iter()
                    .map(|(k, s)| format!("{k} {s:.2} s"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let like = nearest(measured, ratio, w.paths);
        if let Some(r) = like {
            reasons.push(format!(
                "{bench} measured the most similar workload, {}",
                describe(r)
            ));
        }
        let same_machine = measured.cores == Some(cores);
        let measured_pays = like.is_some_and(separates);
        if let Some(r) = like.filter(|r| !separates(r) && r.speedup() > 1.0) {
            reasons.push(format!(
                "{:.2} s against {:.2} s is within run-to-run noise (a gain counts from {:.0}% and {NOISE_S:.2} s): the measurements do not separate the two modes for this workload",
                r.single_s,
                r.threaded_s,
                (PAYS - 1.0) * 100.0
            ));
        }
        let ratio_pays = ratio >= DAY_ONE_RIB_FIB;
        if cores < THREADS_FROM_CORES {
            // docs/OPERATIONS.md: shards + update threads + 1 or 2 CPUs for the rest.
            reasons.push(format!(
                "{cores} cores: below {THREADS_FROM_CORES}, shards and update threads would take the CPUs the sessions and the kernel need (docs/OPERATIONS.md){}",
                if measured_pays {
                    ", although the workload measured most like this one gained: compare both settings on this machine with `ribshard show bgp convergence` before choosing threads"
                } else {
                    ""
                }
            ));
            single(&mut reasons)
        } else if measured_pays && same_machine {
            reasons.push(format!(
                "on a machine of this size that is a gain of {:.0}% or more: threads pay",
                (PAYS - 1.0) * 100.0
            ));
            split(room, groups, &mut reasons)
        } else if same_machine {
            let paid = paid(measured);
            reasons.push(format!(
                "on a machine of this size ({cores} cores) threads did not pay for workloads like this one (under {:.0}% gain); where they did: {}",
                (PAYS - 1.0) * 100.0,
                if paid.is_empty() { "nowhere".to_string() } else { paid.join("; ") }
            ));
            single(&mut reasons)
        } else if ratio_pays && cores >= THREADS_FROM_CORES {
            reasons.push(format!(
                "RIB:FIB {ratio:.2} is at least {DAY_ONE_RIB_FIB}, where the Day One book saw sharding pay, and {cores} cores leave room for shards and update threads beside the sessions (the measurements above are from a {}-core machine, so they say less here)",
                measured.cores.map_or("different".to_string(), |c| c.to_string())
            ));
            split(room, groups, &mut reasons)
        } else if ratio_pays {
            reasons.push(format!(
                "RIB:FIB {ratio:.2} is at least {DAY_ONE_RIB_FIB}, where the Day One book saw sharding pay, but {cores} cores leave little room for shards and update threads beside the sessions (shards + update threads + 1 or 2 CPUs)"
            ));
            single(&mut reasons)
        } else {
            reasons.push(format!(
                "RIB:FIB {ratio:.2} is below {DAY_ONE_RIB_FIB}: with about one path per prefix the Day One book saw threads bring nothing or slow things down"
            ));
            single(&mut reasons)
        }
    } else {
        reasons.push(
            "no running daemon answered: this advice weighs the machine alone (start ribshard with its neighbors and run `ribshard advise` again once it has converged)".into(),
        );
        let paid = paid(measured);
        let lost: Vec<String> = measured
            .rows
            .iter()
            .filter(|r| !separates(r))
            .map(short)
            .collect();
        reasons.push(format!(
            "{bench}: threads paid for {}; not for {}",
            if paid.is_empty() {
                "none of the scenarios".to_string()
            } else {
                paid.join("; ")
            },
            if lost.is_empty() {
                "any".to_string()
            } else {
                lost.join("; ")
            }
        ));
        if cores >= THREADS_FROM_CORES {
            reasons.push(format!(
                "{cores} cores leave room for shards and update threads beside the sessions: worth it once the RIB:FIB ratio is {DAY_ONE_RIB_FIB} or more (route reflectors, peering routers with many full feeds)"
            ));
            split(room, 2, &mut reasons)
        } else {
            reasons.push(format!(
                "{cores} cores leave little room beside the sessions (the Day One book: shards + update threads + 1 or 2 CPUs)"
            ));
            single(&mut reasons)
        }
    };
    Advice {
        number_of_shards: shards,
        number_of_threads: threads,
        reasons,
        machine_notes: notes,
    }
}

/// Shards and update threads for `room` CPUs: no more update threads than update groups
/// (an extra one has nothing to do), the rest to shards.
fn split_counts(room: u32, groups: u32) -> (u32, u32) {
    let threads = groups.min(room / 2).max(1);
    (room.saturating_sub(threads).max(2), threads)
}

/// The cores below which the default, chosen without knowing the workload, is the
/// single-threaded mode: on the two-core machine of BENCHMARKS.md two shards and two update
/// threads were 0.9-1.0x as fast on one or two full tables and 1.1-1.5x on the route
/// reflector, route server, clear-all and flap at real size, for 4-40% more CPU and 20-35%
/// more peak memory; the Day One book counts shards + update threads + one or two cores for everything
/// else. `ribshard advise` recommends threads where the running workload is one they paid
/// for here.
pub const THREADS_FROM_CORES: usize = 4;

/// `number-of-shards` and `number-of-threads` when the configuration sets neither: the
/// single-threaded mode below [`THREADS_FROM_CORES`] cores; from there, one core left to the
/// sessions and the rest split as for two update groups (2 update threads, the rest shards),
/// as `ribshard advise` says without a running daemon.
pub fn default_threads(cores: usize) -> (u32, u32) {
    if cores < THREADS_FROM_CORES {
        (1, 0)
    } else {
        split_counts(cores.saturating_sub(1) as u32, 2)
    }
}

fn split(room: u32, groups: u32, reasons: &mut Vec<String>) -> (u32, u32) {
    let (shards, threads) = split_counts(room, groups);
    reasons.push(format!(
        "{shards} shards and {threads} update thread(s) fill {room} CPUs and leave one for the sessions and the rest; more update threads than the {groups} update group(s) would have nothing to do"
    ));
    (shards, threads)
}

/// The advice as an operator reads it.
pub fn render(m: &Machine, w: Option<&Workload>, a: &Advice) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "Machine");
    let _ = writeln!(
        o,
        "  CPUs: {} logical, {} cores{}",
        m.logical_cpus,
        m.cores,
        if m.smt() { " (SMT siblings)" } else { "" }
    );
    let _ = writeln!(
        o,
        "  NUMA nodes: {}; NICs: {}",
        m.numa_nodes.len().max(1),
        if m.nics.is_empty() {
            "none with a device".to_string()
        } else {
            m.nics
                .iter()
                .map(|n| match n.numa_node {
                    Some(node) => format!("{} (node {node})", n.name),
                    None => format!("{} (node not reported)", n.name),
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let _ = writeln!(
        o,
        "  CPU frequency governor: {}",
        m.governor
            .as_deref()
            .unwrap_or("not exposed (a virtual machine?)")
    );
    let _ = writeln!(
        o,
        "  Load: {:.2} {:.2} {:.2}",
        m.load[0], m.load[1], m.load[2]
    );
    if let Some(w) = w {
        let _ = writeln!(o, "Running daemon");
        let _ = writeln!(
            o,
            "  Threads: {} shard(s), {} update thread(s)",
            w.shards, w.update_threads
        );
        let _ = writeln!(
            o,
            "  Paths: {}, prefixes: {}, RIB:FIB {:.2}",
            w.paths,
            w.prefixes,
            w.rib_fib()
        );
    }
    let _ = writeln!(o, "Recommendation");
    let _ = writeln!(
        o,
        "  [bgp.rib-sharding] number-of-shards = {}\n  [bgp.update-threading] number-of-threads = {}",
        a.number_of_shards, a.number_of_threads
    );
    for r in &a.reasons {
        let _ = writeln!(o, "  because {r}");
    }
    for n in &a.machine_notes {
        let _ = writeln!(o, "  and: {n}");
    }
    o
}

#[cfg(test)]
mod tests;
