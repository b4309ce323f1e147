//! Helpers of the interop tests: real daemons as child processes, killed on drop.
#![allow(dead_code)]

pub mod lab;
pub mod operator;

use ribshard_mrt::{Bgp4mpBody, Record};
use ribshard_wire::{decode, Message, PathAttributes, Prefix};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Proc(pub Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A test's scratch directory (configurations, logs, sockets of the daemons it starts):
/// removed when the test passes, kept when it fails so that the logs can be read. Declare
/// it before the daemons, so that they are stopped first.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for reading: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn tempdir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("ribshard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// The management API socket of the ribshard started in `dir`.
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("ribshard.sock")
}

/// A neighbor's entry of `show bgp neighbor ADDRESS --json` from the API at `sock`.
pub fn neighbor_json(sock: &Path, neighbor: &str) -> serde_json::Value {
    let (out, _) = operator::cli(sock, &["--json", "show", "bgp", "neighbor", neighbor]);
    // The first JSON value of the output (what the client wrote to stderr comes after).
    let v: serde_json::Value = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    if v.is_array() {
        v[0].clone()
    } else {
        v
    }
}

/// A neighbor's session history from ribshard's API: (established transitions, flaps). A
/// session reset on either side shows in both. (BIRD's "since" column is no witness: it is
/// kept on the monotonic clock and printed as wall time, a millisecond either way from one
/// `show protocols` to the next.)
pub fn session_history(sock: &Path, neighbor: &str) -> (u64, u64) {
    let n = neighbor_json(sock, neighbor);
    (
        n["established_transitions"].as_u64().unwrap_or(u64::MAX),
        n["flaps"].as_u64().unwrap_or(u64::MAX),
    )
}

/// What the ribshard started in `dir` has logged.
pub fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("ribshard.log")).unwrap_or_default()
}

/// A configuration with the test's own API socket (the default one is the system's).
pub fn with_socket(dir: &Path, config: &str) -> String {
    if config.contains("[management]") {
        return config.to_string();
    }
    format!(
        "{config}\n[management]\nsocket = \"{}\"\n",
        socket(dir).display()
    )
}

pub fn ribshard(dir: &Path, config: &str) -> (Proc, PathBuf) {
    let conf = dir.join("ribshard.toml");
    std::fs::write(&conf, with_socket(dir, config)).unwrap();
    let dump = dir.join("updates.mrt");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ribshard"));
    cmd.arg("run")
        .arg("--config")
        .arg(&conf)
        .arg("--dump-updates")
        .arg(&dump);
    (start_ribshard(cmd, dir), dump)
}

/// Starts `cmd` (a `ribshard run`) logging to `dir`/ribshard.log, and returns once it says
/// it runs. Its listeners are bound before it logs that: a neighbor started earlier would
/// have its first connection refused and wait out its connect-retry timer (OpenBGPD and
/// BIRD: 120 s), longer than any test waits.
pub fn start_ribshard(mut cmd: Command, dir: &Path) -> Proc {
    let log = dir.join("ribshard.log");
    let _ = std::fs::remove_file(&log);
    let p = cmd
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start ribshard");
    let mut p = Proc(p);
    let started = wait(30, || {
        log_of(dir).contains("ribshard running") || matches!(p.0.try_wait(), Ok(Some(_)))
    });
    assert!(started, "ribshard did not start in 30 s:\n{}", log_of(dir));
    p
}

/// A TCP port the OS has free on `addr` now (bound, then released for the daemon that the
/// test configures with it).
pub fn free_port(addr: &str) -> u16 {
    std::net::TcpListener::bind((addr, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub fn wait(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// What the dump holds so far: the attributes of each announced prefix, and the withdrawn.
pub fn read_dump(path: &Path) -> (BTreeMap<Prefix, PathAttributes>, BTreeSet<Prefix>) {
    let (mut ann, mut wd) = (BTreeMap::new(), BTreeSet::new());
    let Ok(mut r) = ribshard_mrt::open(path) else {
        return (ann, wd);
    };
    while let Ok(Some(raw)) = r.next_record() {
        let Ok(Record::Bgp4mp(m)) = Record::parse(&raw) else {
            continue;
        };
        let Bgp4mpBody::Message(msg) = m.body else {
            continue;
        };
        let params = ribshard_wire::SessionParams {
            four_octet_as: true,
            ..Default::default()
        };
        if let Ok(Message::Update(u)) = decode(msg, &params) {
            let attrs = PathAttributes::from_view(&u.attrs, &params);
            for n in u.announced() {
                wd.remove(&n.prefix);
                ann.insert(n.prefix, attrs.clone());
            }
            for n in u.withdrawn_all() {
                ann.remove(&n.prefix);
                wd.insert(n.prefix);
            }
        }
    }
    (ann, wd)
}

/// ribshard as AS65040 on 127.0.0.40:`port_r`, with one external neighbor.
pub fn ribshard_config(
    port_r: u16,
    peer: &str,
    peer_as: u32,
    port_p: u16,
    extra_neighbor: &str,
    passive: bool,
) -> String {
    format!(
        "[bgp]\nlocal-as = 65040\nrouter-id = \"127.0.0.40\"\nlisten = [\"127.0.0.40:{port_r}\"]\n\
         [[bgp.group]]\nname = \"peers\"\ntype = \"external\"\npeer-as = {peer_as}\n\
         import = [\"accept\"]\nexport = [\"reject\"]\n\
         [[bgp.group.neighbor]]\naddress = \"{peer}\"\nport = {port_p}\nlocal-address = \"127.0.0.40\"\n\
         multihop = true\npassive = {passive}\nconnect-retry-time = 2\n{extra_neighbor}\n"
    )
}

/// Parses "a.b.c.d/len" or an IPv6 prefix.
pub fn prefix(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap();
    match a.parse::<std::net::IpAddr>().unwrap() {
        std::net::IpAddr::V4(v4) => Prefix::v4(v4, l.parse().unwrap()).unwrap(),
        std::net::IpAddr::V6(v6) => Prefix::v6(v6, l.parse().unwrap()).unwrap(),
    }
}

/// The AS numbers of a path, flattened.
pub fn asns(a: &PathAttributes) -> Vec<u32> {
    a.as_path()
        .map(|p| p.segments.iter().flat_map(|s| s.asns.clone()).collect())
        .unwrap_or_default()
}

/// The attributes every interop peer sets on its test routes: its own AS as the whole path,
/// MED 50 and the community `AS:100`.
pub fn assert_tagged(a: &PathAttributes, peer_as: u32, what: &str) {
    assert_eq!(asns(a), [peer_as], "{what}");
    assert_eq!(a.med(), Some(50), "{what}");
    assert!(a.communities().contains(&((peer_as << 16) | 100)), "{what}");
}

// ---- BIRD 2 ----

pub fn have_bird() -> bool {
    let ok = Command::new("bird").arg("--version").output().is_ok();
    if !ok {
        ribshard_mrt::skipped("bird is not installed (apt-get install bird2)");
    }
    ok
}

pub struct Bird {
    _p: Proc,
    sock: PathBuf,
}

impl Bird {
    pub fn start(dir: &Path, config: &str) -> Bird {
        let conf = dir.join("bird.conf");
        std::fs::write(&conf, config.replace("DIR", dir.to_str().unwrap())).unwrap();
        let sock = dir.join("bird.ctl");
        let p = Command::new("bird")
            .arg("-f")
            .arg("-c")
            .arg(&conf)
            .arg("-s")
            .arg(&sock)
            .arg("-P")
            .arg(dir.join("bird.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bird");
        let b = Bird { _p: Proc(p), sock };
        assert!(
            wait(10, || b.cmd("show status").contains("Daemon is up")),
            "bird did not start"
        );
        b
    }
    pub fn cmd(&self, c: &str) -> String {
        let out = Command::new("birdc")
            .arg("-s")
            .arg(&self.sock)
            .args(c.split(' '))
            .output()
            .expect("birdc");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    pub fn established(&self, proto: &str) -> bool {
        self.cmd(&format!("show protocols {proto}"))
            .contains("Established")
    }
}

/// Starts FRR's bgpd (without zebra) on 127.0.0.43 `port` with `conf`, logging to
/// `dir`/bgpd.log; returns it and a `vtysh -c` runner.
pub fn frr(dir: &Path, conf: &str, port: u16) -> (Proc, impl Fn(&str) -> String) {
    let path = dir.join("bgpd.conf");
    std::fs::write(&path, conf).unwrap();
    let p = Command::new("/usr/lib/frr/bgpd")
        .args(["-Z", "-S", "-f"])
        .arg(&path)
        .args(["-p", &port.to_string(), "-l", "127.0.0.43", "-P", "0", "-i"])
        .arg(dir.join("bgpd.pid"))
        .arg("--vty_socket")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("bgpd.log")).unwrap())
        .spawn()
        .expect("start FRR bgpd");
    let dir = dir.to_path_buf();
    let vtysh = move |c: &str| {
        output(
            Command::new("vtysh")
                .arg("--vty_socket")
                .arg(&dir)
                .args(["-c", c]),
        )
    };
    (Proc(p), vtysh)
}

// ---- GoBGP ----

pub fn have(cmd: &str, arg: &str) -> bool {
    let ok = Command::new(cmd).arg(arg).output().is_ok();
    if !ok {
        ribshard_mrt::skipped(&format!("{cmd} is not installed"));
    }
    ok
}

pub fn output(cmd: &mut Command) -> String {
    cmd.output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

pub struct GoBgp {
    _p: Proc,
    api: String,
}

impl GoBgp {
    pub fn start(dir: &Path, port_g: u16, port_r: u16, passive: bool) -> GoBgp {
        GoBgp::start_as(dir, 65042, port_g, port_r, passive)
    }

    /// GoBGP as AS `asn` on 127.0.0.42:`port_g`, peering with ribshard (127.0.0.40:`port_r`).
    pub fn start_as(dir: &Path, asn: u32, port_g: u16, port_r: u16, passive: bool) -> GoBgp {
        let conf = dir.join("gobgpd.toml");
        std::fs::write(
            &conf,
            format!(
                r#"[global.config]
  as = {asn}
  router-id = "127.0.0.42"
  port = {port_g}
  local-address-list = ["127.0.0.42"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "127.0.0.40"
    peer-as = 65040
  [neighbors.transport.config]
    local-address = "127.0.0.42"
    remote-port = {port_r}
    passive-mode = {passive}
  [neighbors.timers.config]
    connect-retry = 2
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
"#
            ),
        )
        .unwrap();
        let api_port = port_g + 1000;
        let p = Command::new("gobgpd")
            .arg("-f")
            .arg(&conf)
            .arg("-p")
            .arg("--api-hosts")
            .arg(format!("127.0.0.42:{api_port}"))
            .arg("--pprof-disable")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("gobgpd.log")).unwrap())
            .spawn()
            .expect("start gobgpd");
        GoBgp {
            _p: Proc(p),
            api: api_port.to_string(),
        }
    }
    pub fn cli(&self, args: &[&str]) -> String {
        output(
            Command::new("gobgp")
                .args(["-u", "127.0.0.42", "-p", &self.api])
                .args(args),
        )
    }
}

// ---- OpenBGPD ----

/// Starts OpenBGPD with `conf`; it needs root for its chroot /run/openbgpd, made here in a
/// private mount namespace. Logs to `dir/bgpd.log`.
pub fn openbgpd(dir: &Path, conf: &Path) -> Proc {
    let run = dir.join("run");
    let p = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mkdir -p {run}/openbgpd && mount --bind {run} /run && exec bgpd -d -v -f {conf}",
            run = run.display(),
            conf = conf.display()
        ))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("bgpd.log")).unwrap())
        .spawn()
        .expect("start OpenBGPD");
    Proc(p)
}

/// NLnet Labs' rtrtr, the RTR cache of the RPKI tests: `RIBSHARD_RTRTR`, else where
/// scripts/test builds it (target/tools/bin), else the PATH.
pub fn rtrtr() -> Option<PathBuf> {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/bin/rtrtr");
    let found = std::env::var_os("RIBSHARD_RTRTR")
        .map(PathBuf::from)
        .into_iter()
        .chain([built, PathBuf::from("rtrtr")])
        .find(|p| Command::new(p).arg("--version").output().is_ok());
    if found.is_none() {
        ribshard_mrt::skipped(
            "rtrtr is not installed (scripts/test builds it: cargo install rtrtr)",
        );
    }
    found
}

/// An rtrtr serving, over RTR on 127.0.0.1:`port`, the ROAs and ASPAs of `dir`/rpki.json
/// (read again every second).
pub struct Rtrtr {
    _p: Proc,
    pub json: PathBuf,
    pub port: u16,
}

impl Rtrtr {
    pub fn start(bin: &Path, dir: &Path, json: &str) -> Rtrtr {
        let path = dir.join("rpki.json");
        std::fs::write(&path, json).unwrap();
        let port = free_port("127.0.0.1");
        let conf = dir.join("rtrtr.conf");
        std::fs::write(
            &conf,
            format!(
                "log_level = \"info\"\nlog_target = \"stderr\"\nhttp-listen = []\n\
                 [units.local]\ntype = \"json\"\nuri = \"file://{}\"\nrefresh = 1\n\
                 [targets.rtr]\ntype = \"rtr\"\nlisten = [\"127.0.0.1:{port}\"]\nunit = \"local\"\n",
                path.display()
            ),
        )
        .unwrap();
        let p = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("rtrtr.log")).unwrap())
            .spawn()
            .expect("start rtrtr");
        let p = Proc(p);
        assert!(
            wait(20, || std::net::TcpStream::connect(("127.0.0.1", port))
                .is_ok()),
            "rtrtr did not listen:\n{}",
            std::fs::read_to_string(dir.join("rtrtr.log")).unwrap_or_default()
        );
        Rtrtr {
            _p: p,
            json: path,
            port,
        }
    }

    /// Serves other records from now on (rtrtr notices within a second or two).
    pub fn set(&self, json: &str) {
        let tmp = self.json.with_extension("new");
        std::fs::write(&tmp, json).unwrap();
        std::fs::rename(&tmp, &self.json).unwrap();
    }
}
