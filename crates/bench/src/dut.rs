//! The device under test: a configuration generated for the scenario's topology, the daemon
//! started in its own process group, and its CPU time and memory read from /proc over its
//! whole process tree (OpenBGPD runs as three processes).

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The DUT's AS: absent from the real paths (64999 is in them and would make them loops).
pub const LOCAL_AS: u32 = 4_200_000_001;
/// The DUT's address and router id.
pub const DUT_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DutKind {
    Ribshard,
    Bird2,
    Frr,
    Gobgpd,
    Openbgpd,
}

impl DutKind {
    pub fn name(self) -> &'static str {
        match self {
            DutKind::Ribshard => "ribshard",
            DutKind::Bird2 => "bird2",
            DutKind::Frr => "frr",
            DutKind::Gobgpd => "gobgpd",
            DutKind::Openbgpd => "openbgpd",
        }
    }
    /// The program that must be installed (ribshard: found beside this binary).
    pub fn program(self) -> &'static str {
        match self {
            DutKind::Ribshard => "ribshard",
            DutKind::Bird2 => "bird",
            DutKind::Frr => "/usr/lib/frr/bgpd",
            DutKind::Gobgpd => "gobgpd",
            DutKind::Openbgpd => "bgpd",
        }
    }
}

/// What the DUT is in the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// eBGP: upstreams send, downstreams receive everything.
    Transit,
    /// iBGP route reflector (RFC 4456); every neighbor is a client.
    Reflector,
    /// Transparent route server (RFC 7947); every neighbor sends and receives.
    RouteServer,
}

/// A neighbor of the DUT, in a named group.
#[derive(Clone, Debug)]
pub struct Neighbor {
    pub addr: Ipv4Addr,
    pub asn: u32,
    pub group: String,
    /// Receives routes from the DUT (else the DUT exports nothing to it).
    pub receives: bool,
    /// Sends routes to the DUT (else the DUT accepts nothing from it).
    pub sends: bool,
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub role: Role,
    pub port: u16,
    pub hold: u16,
    pub neighbors: Vec<Neighbor>,
    /// Transit only: the transit filter on import and a tagging export policy
    /// ([`crate::policy`]; ribshard and BIRD 2).
    pub policy: Option<crate::policy::Filter>,
    /// BIRD keeps an import table (its Adj-RIB-In), so that a changed import filter is
    /// applied again without a route refresh, as ribshard does (`--policy-change`).
    pub import_table: bool,
    /// The DUT writes its best paths to the kernel's main table (`--fib`).
    pub fib: bool,
    /// `--rpki`: the RTR cache's port on 127.0.0.1 ([`crate::rpki`]); import validates.
    pub rpki: Option<u16>,
    /// `--bmp`: the station's part of ribshard's configuration ([`crate::bmp`]).
    pub bmp: Option<String>,
}

impl Topology {
    fn groups(&self) -> Vec<&str> {
        let mut g: Vec<&str> = Vec::new();
        for n in &self.neighbors {
            if !g.contains(&n.group.as_str()) {
                g.push(&n.group);
            }
        }
        g
    }
    fn members<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a Neighbor> + 'a {
        self.neighbors.iter().filter(move |n| n.group == group)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DutError {
    #[error("{program} is not installed (run scripts/bench-install)")]
    Missing { program: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start {program}: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("{dut} exited during the run ({status}); its log: {log}")]
    Exited {
        dut: &'static str,
        status: String,
        log: PathBuf,
    },
    #[error("{dut} did not take the new configuration: {what}")]
    Reload { dut: &'static str, what: String },
    #[error("the BIRD relay at {relay} did not establish its session with the DUT: {what}")]
    Relay {
        relay: std::net::Ipv4Addr,
        what: String,
    },
}

/// Threads of ribshard's pipeline.
#[derive(Clone, Copy, Debug)]
pub struct Threads {
    pub shards: u32,
    pub update_threads: u32,
}

pub struct Dut {
    pub kind: DutKind,
    pub version: String,
    child: Child,
    pub dir: PathBuf,
    /// The configuration it was started with.
    pub config: PathBuf,
    threads: Threads,
    /// When it was started.
    pub started: std::time::Instant,
}

fn write(path: &Path, text: &str) -> Result<(), DutError> {
    std::fs::write(path, text).map_err(|source| DutError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The `ribshard` binary: `RIBSHARD_BIN`, else beside this executable, else on PATH.
pub fn ribshard_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("RIBSHARD_BIN") {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|e| {
            let dir = e.parent()?;
            // Test binaries live one level down, in deps/.
            [dir.join("ribshard"), dir.parent()?.join("ribshard")]
                .into_iter()
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("ribshard"))
}

fn installed(program: &Path) -> bool {
    if program.is_absolute() || program.components().count() > 1 {
        return program.is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

fn version(kind: DutKind, program: &Path) -> String {
    let arg = match kind {
        DutKind::Openbgpd => "-V",
        _ => "--version",
    };
    let out = Command::new(program).arg(arg).output();
    let text = out
        .map(|o| {
            let mut s = String::from_utf8_lossy(&o.stdout).to_string();
            s.push_str(&String::from_utf8_lossy(&o.stderr));
            s
        })
        .unwrap_or_default();
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

impl Dut {
    /// Writes the configuration for `topo` into `dir` and starts the daemon.
    pub fn start(
        kind: DutKind,
        topo: &Topology,
        threads: Threads,
        dir: &Path,
    ) -> Result<Dut, DutError> {
        let program = match kind {
            DutKind::Ribshard => ribshard_binary(),
            k => PathBuf::from(k.program()),
        };
        if !installed(&program) {
            return Err(DutError::Missing {
                program: program.display().to_string(),
            });
        }
        let version = version(kind, &program);
        let log = std::fs::File::create(dir.join("dut.log")).map_err(|source| DutError::Write {
            path: dir.join("dut.log"),
            source,
        })?;
        let log2 = log.try_clone().map_err(|source| DutError::Write {
            path: dir.join("dut.log"),
            source,
        })?;
        let d = dir.display();
        let config;
        let mut cmd = match kind {
            DutKind::Ribshard => {
                let conf = dir.join("ribshard.toml");
                config = conf.clone();
                write(&conf, &ribshard_config(topo, threads, dir))?;
                let mut c = Command::new(&program);
                c.arg("run").arg("--config").arg(&conf);
                c.env(
                    "RUST_LOG",
                    std::env::var("RIBSHARD_BENCH_DUT_LOG").unwrap_or_else(|_| "warn".into()),
                );
                c
            }
            DutKind::Bird2 => {
                let conf = dir.join("bird.conf");
                config = conf.clone();
                write(&conf, &bird_config(topo, dir))?;
                let mut c = Command::new(&program);
                c.arg("-f").arg("-c").arg(&conf);
                c.arg("-s").arg(dir.join("bird.ctl"));
                c.arg("-P").arg(dir.join("bird.pid"));
                c
            }
            DutKind::Frr => {
                let conf = dir.join("frr.conf");
                config = conf.clone();
                write(&conf, &frr_config(topo, dir))?;
                let mut c = Command::new(&program);
                c.args(["-Z", "-S", "-f"]).arg(&conf);
                c.args(["-p", &topo.port.to_string(), "-l", "127.0.0.1", "-P", "0"]);
                c.arg("-i").arg(dir.join("frr.pid"));
                c.arg("--vty_socket").arg(dir);
                c
            }
            DutKind::Gobgpd => {
                let conf = dir.join("gobgpd.toml");
                config = conf.clone();
                write(&conf, &gobgp_config(topo))?;
                let mut c = Command::new(&program);
                c.arg("-f").arg(&conf).arg("-p");
                // Its gRPC API is never used here, but it always listens: on a port the OS
                // had free, so that two runs side by side do not collide.
                let api = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .map_err(|source| DutError::Start {
                        program: program.display().to_string(),
                        source,
                    })?;
                c.args(["--api-hosts", &api.to_string(), "--pprof-disable"]);
                c.args(["-l", "warn"]);
                c
            }
            DutKind::Openbgpd => {
                let conf = dir.join("bgpd.conf");
                config = conf.clone();
                write(&conf, &openbgpd_config(topo, dir))?;
                // Its chroot directory /run/openbgpd, in a private mount namespace.
                let mut c = Command::new("unshare");
                c.args(["-m", "--propagation", "private", "sh", "-c"]);
                c.arg(format!(
                    "mkdir -p {d}/run/openbgpd && mount --bind {d}/run /run && exec bgpd -d -f {conf}",
                    conf = conf.display()
                ));
                c
            }
        };
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0);
        // Killed with the bench, however it ends: a DUT left running holds the port and,
        // with --fib, writes the same table as the next run's.
        // SAFETY: prctl(2) between fork and exec, touching nothing of the parent's.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| DutError::Start {
            program: program.display().to_string(),
            source,
        })?;
        Ok(Dut {
            kind,
            version,
            child,
            dir: dir.to_path_buf(),
            config,
            threads,
            started: std::time::Instant::now(),
        })
    }

    /// Writes the configuration for `topo` in place of the running one and has the daemon
    /// read it as an operator would (ribshard: `ribshard configure reload`; BIRD: `birdc
    /// configure`), returning once the daemon has accepted it.
    pub fn reload(&mut self, topo: &Topology) -> Result<(), DutError> {
        let (text, mut cmd) = match self.kind {
            DutKind::Ribshard => {
                let mut c = Command::new(ribshard_binary());
                c.arg("--socket")
                    .arg(self.dir.join("ribshard.sock"))
                    .args(["configure", "reload"]);
                (ribshard_config(topo, self.threads, &self.dir), c)
            }
            DutKind::Bird2 => {
                let mut c = Command::new("birdc");
                c.arg("-s").arg(self.dir.join("bird.ctl")).arg("configure");
                (bird_config(topo, &self.dir), c)
            }
            k => {
                return Err(DutError::Reload {
                    dut: k.name(),
                    what: "the bench reloads only ribshard and BIRD 2".into(),
                })
            }
        };
        write(&self.config, &text)?;
        let out = cmd.output().map_err(|e| DutError::Reload {
            dut: self.kind.name(),
            what: e.to_string(),
        })?;
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        // birdc exits 0 whatever the answer; "Reconfigured" is BIRD's word for done.
        let taken =
            out.status.success() && (self.kind != DutKind::Bird2 || said.contains("Reconfigur"));
        if taken {
            Ok(())
        } else {
            Err(DutError::Reload {
                dut: self.kind.name(),
                what: said.trim().to_string(),
            })
        }
    }

    /// An error when the daemon has exited.
    pub fn check(&mut self) -> Result<(), DutError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(DutError::Exited {
                dut: self.kind.name(),
                status: status.to_string(),
                log: self.dir.join("dut.log"),
            }),
            _ => Ok(()),
        }
    }

    /// The daemon's processes: the started one and all its descendants.
    pub fn pids(&self) -> Vec<u32> {
        process_tree(self.child.id())
    }

    /// User plus system CPU seconds of the whole tree.
    pub fn cpu_seconds(&self) -> f64 {
        self.pids().iter().map(|p| cpu_seconds(*p)).sum()
    }

    /// (resident now, peak resident) in bytes, summed over the tree.
    pub fn memory(&self) -> (u64, u64) {
        self.pids()
            .iter()
            .map(|p| memory(*p))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// SIGTERM to the process group, SIGKILL after five seconds.
    pub fn stop(mut self) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals our own child's process group.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above; the group may already be gone.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: split after the last ')'.
    let rest = s.get(s.rfind(')')? + 2..)?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// `pid` and its descendants.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            // Field 4 of stat is the parent (index 1 after the command name).
            if let Some(pp) = stat_fields(p).and_then(|f| f.get(1)?.parse::<u32>().ok()) {
                parent.push((p, pp));
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while let Some(&p) = tree.get(i) {
        tree.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime + stime of one process, seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    stat_fields(pid)
        .map(|f| {
            // Fields 14 and 15 of stat (indexes 11 and 12 after the command name).
            let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            (t(11) + t(12)) / clock_ticks()
        })
        .unwrap_or(0.0)
}

/// The bench's own CPU seconds (every thread).
pub fn own_cpu_seconds() -> f64 {
    cpu_seconds(std::process::id())
}

/// (VmRSS, VmHWM) of one process, bytes.
pub fn memory(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// Whether a kernel route (of any protocol) covers `addr` here (`ip route get`).
fn kernel_resolves(addr: &str) -> bool {
    Command::new("ip")
        .args(["route", "get", addr])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn ribshard_config(t: &Topology, threads: Threads, dir: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Generated by ribshard-bench.\n[bgp]\nlocal-as = {LOCAL_AS}\nrouter-id = \"{DUT_ADDR}\"\n\
         listen = [\"{DUT_ADDR}:{}\"]\nhold-time = {}\n\
         [bgp.rib-sharding]\nnumber-of-shards = {}\n\
         [bgp.update-threading]\nnumber-of-threads = {}",
        t.port, t.hold, threads.shards, threads.update_threads
    );
    // ribshard resolves next hops through the kernel's tables only. The upstreams' next hops
    // (the real tables' own, or 198.51.100.x) are on no network of the bench's; on a host
    // with a default route they resolve through it, as they do in `--fib`'s namespace
    // through its default route on a link (BIRD gets that route as a static one below).
    // Elsewhere every path would be hidden: say so and let every next hop count as
    // reachable.
    if !t.fib && !kernel_resolves("198.51.100.1") {
        tracing::warn!(
            "no route of this host covers 198.51.100.1: ribshard runs with bgp.resolution off"
        );
        s.push_str("[bgp.resolution]\nenabled = false\n");
    }
    for g in t.groups() {
        let first = t.members(g).next();
        let (sends, receives) = first.map(|n| (n.sends, n.receives)).unwrap_or_default();
        let _ = writeln!(s, "\n[[bgp.group]]\nname = \"{g}\"");
        match t.role {
            Role::Transit => {
                let (import, export) = if t.policy.is_some() {
                    ("transit-in", "tag-out")
                } else if t.rpki.is_some() {
                    ("rov", "accept")
                } else {
                    ("accept", "accept")
                };
                let _ = writeln!(
                    s,
                    "type = \"external\"\nmultihop = true\nimport = [\"{}\"]\nexport = [\"{}\"]",
                    if sends { import } else { "reject" },
                    if receives { export } else { "reject" }
                );
            }
            Role::Reflector => {
                let _ = writeln!(s, "type = \"internal\"\ncluster = \"{DUT_ADDR}\"");
            }
            Role::RouteServer => {
                let _ = writeln!(
                    s,
                    "type = \"external\"\nmultihop = true\nroute-server-client = true\n\
                     import = [\"accept\"]\nexport = [\"accept\"]"
                );
            }
        }
        for n in t.members(g) {
            let _ = writeln!(
                s,
                "[[bgp.group.neighbor]]\naddress = \"{}\"\npeer-as = {}\npassive = true",
                n.addr, n.asn
            );
        }
    }
    if let Some(f) = t.policy {
        s.push_str(&crate::policy::ribshard(f));
    }
    if let Some(port) = t.rpki {
        s.push_str(&crate::rpki::ribshard_config(port));
    }
    if let Some(station) = &t.bmp {
        s.push_str(station);
    }
    if t.fib {
        s.push_str("\n[fib]\ntable = 254\n");
    }
    let _ = writeln!(
        s,
        "\n[management]\nsocket = \"{}\"",
        dir.join("ribshard.sock").display()
    );
    s
}

fn bird_config(t: &Topology, dir: &Path) -> String {
    let mut s = format!(
        "# Generated by ribshard-bench.\nrouter id {DUT_ADDR};\n\
         log \"{}/bird.log\" {{ warning, error, fatal }};\nprotocol device {{}}\n",
        dir.display()
    );
    if let Some(f) = t.policy {
        s.push_str(&crate::policy::bird(f));
    }
    if let Some(port) = t.rpki {
        s.push_str(&crate::rpki::bird_config(port));
    }
    // The table BGP resolves next hops through: with `--fib`, a table of its own, so the
    // routes that stand for the IGP are neither exported to BGP peers nor to the kernel.
    let igp = if t.fib { "igp4" } else { "master4" };
    if t.fib {
        // Best paths to the kernel's main table; the next hops resolve recursively (multihop
        // eBGP) through the namespace's default route, which ribshard reads from the kernel
        // and BIRD is given as a static route.
        s.push_str(
            "ipv4 table igp4;\n\
             protocol static { ipv4 { table igp4; }; route 0.0.0.0/0 via 198.51.100.1; }\n\
             protocol kernel { ipv4 { import none; export where source = RTS_BGP; }; }\n",
        );
    }
    if t.role == Role::Reflector {
        // iBGP next hops are resolved recursively (RFC 4271 section 5.1.3); make the
        // sources' next hops resolvable, as an IGP would.
        let _ = writeln!(
            s,
            "protocol static {{ ipv4 {{ table {igp}; }}; route 198.51.100.0/24 via \"lo\"; }}"
        );
    }
    for (i, n) in t.neighbors.iter().enumerate() {
        let common = format!(
            "local {DUT_ADDR} port {} as {LOCAL_AS}; neighbor {} as {}; strict bind on; passive on; hold time {};",
            t.port, n.addr, n.asn, t.hold
        );
        let (role, channel) = match t.role {
            Role::Transit => (
                "multihop;",
                format!(
                    "import {}; export {};{}{}",
                    match (n.sends, t.policy.is_some(), t.rpki.is_some()) {
                        (false, _, _) => "none",
                        (true, true, _) => "filter transit_in",
                        (true, false, true) => "filter rov_in",
                        (true, false, false) => "all",
                    },
                    match (n.receives, t.policy.is_some()) {
                        (false, _) => "none",
                        (true, false) => "all",
                        (true, true) => "filter tag_out",
                    },
                    if n.receives {
                        " next hop address 198.51.100.99;"
                    } else {
                        ""
                    },
                    if n.sends && t.import_table {
                        " import table on;"
                    } else {
                        ""
                    }
                ),
            ),
            Role::Reflector => (
                "rr client; rr cluster id 127.0.0.1;",
                // Not the static route above.
                "import all; export where source = RTS_BGP;".to_string(),
            ),
            Role::RouteServer => (
                "multihop; rs client;",
                "import all; export all;".to_string(),
            ),
        };
        let _ = writeln!(
            s,
            "protocol bgp n{i} {{ {common} {role} ipv4 {{ {channel} igp table {igp}; }}; }}"
        );
    }
    s
}

fn frr_config(t: &Topology, dir: &Path) -> String {
    let mut s = format!(
        "! Generated by ribshard-bench.\nfrr defaults traditional\nhostname dut\n\
         log file {}/bgpd.log warnings\nroute-map NONE deny 10\n!\nrouter bgp {LOCAL_AS}\n\
         bgp router-id {DUT_ADDR}\nno bgp ebgp-requires-policy\nno bgp network import-check\n",
        dir.display()
    );
    if t.role == Role::Reflector {
        let _ = writeln!(s, "bgp cluster-id {DUT_ADDR}");
    }
    for n in &t.neighbors {
        let a = n.addr;
        let _ = writeln!(
            s,
            "neighbor {a} remote-as {}\nneighbor {a} passive\nneighbor {a} timers {} {}\n\
             neighbor {a} disable-connected-check",
            n.asn,
            (t.hold / 3).max(1),
            t.hold
        );
    }
    s.push_str("address-family ipv4 unicast\n");
    for n in &t.neighbors {
        let a = n.addr;
        match t.role {
            Role::Transit => {
                if !n.sends {
                    let _ = writeln!(s, "neighbor {a} route-map NONE in");
                }
                if !n.receives {
                    let _ = writeln!(s, "neighbor {a} route-map NONE out");
                }
            }
            Role::Reflector => {
                let _ = writeln!(s, "neighbor {a} route-reflector-client");
            }
            Role::RouteServer => {
                let _ = writeln!(s, "neighbor {a} route-server-client");
            }
        }
    }
    s.push_str("exit-address-family\n");
    s
}

fn gobgp_config(t: &Topology) -> String {
    let mut s = format!(
        "# Generated by ribshard-bench.\n[global.config]\n  as = {LOCAL_AS}\n  router-id = \"{DUT_ADDR}\"\n  \
         port = {}\n  local-address-list = [\"{DUT_ADDR}\"]\n",
        t.port
    );
    for n in &t.neighbors {
        let _ = writeln!(
            s,
            "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{}\"\n    peer-as = {}\n  \
             [neighbors.transport.config]\n    passive-mode = true\n  \
             [neighbors.timers.config]\n    hold-time = {}",
            n.addr, n.asn, t.hold
        );
        match t.role {
            Role::Transit => {
                let _ = writeln!(
                    s,
                    "  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = 2\n  \
                     [neighbors.apply-policy.config]\n    default-import-policy = \"{}\"\n    \
                     default-export-policy = \"{}\"",
                    if n.sends { "accept-route" } else { "reject-route" },
                    if n.receives {
                        "accept-route"
                    } else {
                        "reject-route"
                    }
                );
            }
            Role::Reflector => {
                let _ = writeln!(
                    s,
                    "  [neighbors.route-reflector.config]\n    route-reflector-client = true\n    \
                     route-reflector-cluster-id = \"{DUT_ADDR}\""
                );
            }
            Role::RouteServer => {
                let _ = writeln!(
                    s,
                    "  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = 2\n  \
                     [neighbors.route-server.config]\n    route-server-client = true"
                );
            }
        }
    }
    s
}

fn openbgpd_config(t: &Topology, dir: &Path) -> String {
    let mut s = format!(
        "# Generated by ribshard-bench.\nAS {LOCAL_AS}\nrouter-id {DUT_ADDR}\n\
         listen on {DUT_ADDR} port {}\nfib-update no\nsocket \"{}/bgpd.sock\"\n\
         nexthop qualify via default\n",
        t.port,
        dir.display()
    );
    let mut filters = String::new();
    for g in t.groups() {
        let _ = writeln!(s, "group \"{g}\" {{");
        match t.role {
            Role::Transit => {}
            Role::Reflector => {
                let _ = writeln!(s, "  route-reflector {DUT_ADDR}");
            }
            Role::RouteServer => {
                let _ = writeln!(s, "  transparent-as yes");
            }
        }
        for n in t.members(g) {
            let _ = writeln!(
                s,
                "  neighbor {} {{\n    remote-as {}\n    passive\n    holdtime {}\n  }}",
                n.addr, n.asn, t.hold
            );
        }
        s.push_str("}\n");
        // The default is deny (OpenBGPD's filters: the last matching rule wins); filter
        // rules come after every group.
        let first = t.members(g).next();
        if first.is_some_and(|n| n.sends) {
            let _ = writeln!(filters, "allow from group \"{g}\"");
        }
        if first.is_some_and(|n| n.receives) {
            let nh = if t.role == Role::RouteServer {
                " set nexthop no-modify"
            } else {
                ""
            };
            let _ = writeln!(filters, "allow to group \"{g}\"{nh}");
        }
    }
    s.push_str(&filters);
    s
}
