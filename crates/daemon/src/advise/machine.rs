//! What this machine offers the pipeline's threads, read from /sys and /proc: logical CPUs
//! against cores (SMT siblings share a core), NUMA nodes and the node of each NIC, the CPU
//! frequency governor, and the load. Reads only.

use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Machine {
    /// CPUs this process may run on (its affinity and cgroup limits included).
    pub logical_cpus: usize,
    /// Cores: CPUs that are SMT siblings of one another count once.
    pub cores: usize,
    pub numa_nodes: Vec<NumaNode>,
    /// Network interfaces backed by a device (virtual ones are left out).
    pub nics: Vec<Nic>,
    /// `performance`, `powersave`, `schedutil`, ...; `None` where the kernel does not
    /// expose it (most virtual machines).
    pub governor: Option<String>,
    /// Load average over 1, 5 and 15 minutes.
    pub load: [f64; 3],
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NumaNode {
    pub node: u32,
    /// Its CPUs, as the kernel lists them (`0-15,32-47`).
    pub cpus: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Nic {
    pub name: String,
    /// The NUMA node its device sits on; `None` when the platform does not say.
    pub numa_node: Option<u32>,
}

fn read(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| (e.file_name().to_string_lossy().to_string(), e.path()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `0-3,8,10-11` → the numbers.
pub fn cpu_list(s: &str) -> Vec<usize> {
    s.split(',')
        .filter_map(|part| {
            let part = part.trim();
            match part.split_once('-') {
                Some((a, b)) => Some((a.parse().ok()?..=b.parse().ok()?).collect::<Vec<_>>()),
                None => part.parse().ok().map(|n| vec![n]),
            }
        })
        .flatten()
        .collect()
}

/// Online CPUs, and cores among them: one per distinct (package, core id); 0 if the
/// kernel does not say.
fn topology(sys: &Path) -> (usize, usize) {
    let cpu = sys.join("devices/system/cpu");
    let online = read(cpu.join("online"))
        .map(|s| cpu_list(&s))
        .unwrap_or_default();
    let cores: BTreeSet<(String, String)> = online
        .iter()
        .filter_map(|n| {
            let t = cpu.join(format!("cpu{n}/topology"));
            Some((
                read(t.join("physical_package_id"))?,
                read(t.join("core_id"))?,
            ))
        })
        .collect();
    (online.len(), cores.len())
}

/// The cores this process may use (SMT siblings counted once), as `/sys` says; the logical
/// CPUs if it does not.
pub fn cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    match topology(Path::new("/sys")).1 {
        0 => logical,
        c => c.min(logical),
    }
}

impl Machine {
    /// This machine, as the kernel describes it under `sys` and `proc` (normally `/sys`
    /// and `/proc`).
    pub fn read(sys: &Path, proc: &Path) -> Machine {
        let cpu = sys.join("devices/system/cpu");
        let (online, cores) = topology(sys);
        let logical_cpus = std::thread::available_parallelism().map_or(online.max(1), |n| n.get());
        let numa_nodes = entries(&sys.join("devices/system/node"))
            .into_iter()
            .filter_map(|(name, path)| {
                let node = name.strip_prefix("node")?.parse().ok()?;
                Some(NumaNode {
                    node,
                    cpus: read(path.join("cpulist")).unwrap_or_default(),
                })
            })
            .collect();
        let nics = entries(&sys.join("class/net"))
            .into_iter()
            .filter(|(_, path)| path.join("device").exists())
            .map(|(name, path)| Nic {
                name,
                // -1: the platform does not say.
                numa_node: read(path.join("device/numa_node")).and_then(|s| s.parse().ok()),
            })
            .collect();
        let governor = read(cpu.join("cpu0/cpufreq/scaling_governor"));
        let mut load = [0.0; 3];
        if let Some(l) = read(proc.join("loadavg")) {
            for (slot, v) in load.iter_mut().zip(l.split_whitespace()) {
                *slot = v.parse().unwrap_or(0.0);
            }
        }
        Machine {
            logical_cpus,
            cores: if cores == 0 {
                logical_cpus
            } else {
                cores.min(logical_cpus)
            },
            numa_nodes,
            nics,
            governor,
            load,
        }
    }

    /// Whether some CPUs are SMT siblings (hyper-threads) of others.
    pub fn smt(&self) -> bool {
        self.logical_cpus > self.cores
    }
}
