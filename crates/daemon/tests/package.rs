//! The Debian package as an operator installs it: `scripts/package` builds it (`scripts/test`
//! does that first), this unpacks it into a scratch root (`dpkg-deb -x`) and checks what it
//! installs, verifies its systemd unit, and runs the packaged daemon as a non-root user with
//! only CAP_NET_BIND_SERVICE, keeping a session with a real BIRD on port 179 in a network
//! namespace of its own. Each test says SKIPPED when what it needs is missing.

mod common;

use common::*;
use ribshard_mgmt::api::Neighbor;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The newest package `scripts/package` built, in this test's target directory.
fn package() -> Option<PathBuf> {
    // target/<profile>/deps/package-<hash>
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?.parent()?.join("debian");
    let newest = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ribshard_"))
                && p.extension().is_some_and(|e| e == "deb")
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    if newest.is_none() {
        ribshard_mrt::skipped(&format!(
            "no package in {} (scripts/package builds it)",
            dir.display()
        ));
    }
    newest
}

/// The package unpacked into a scratch root.
fn unpack(deb: &Path, name: &str) -> TempDir {
    let root = tempdir(name);
    let ok = Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(&*root)
        .status()
        .expect("dpkg-deb");
    assert!(ok.success());
    root
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn the_package_installs_binary_unit_and_configuration() {
    let Some(deb) = package() else { return };
    let root = unpack(&deb, "package-files");
    let bin = root.join("usr/bin/ribshard");
    let unit = root.join("lib/systemd/system/ribshard.service");
    let conf = root.join("etc/ribshard/ribshard.toml");
    assert_eq!(mode(&bin), 0o755);
    assert_eq!(mode(&unit), 0o644);
    assert_eq!(mode(&conf), 0o640, "the configuration may hold MD5 keys");
    for doc in [
        "OPERATIONS.md",
        "API.md",
        "README.md",
        "SECURITY.md",
        "copyright",
    ] {
        assert!(
            root.join("usr/share/doc/ribshard").join(doc).is_file(),
            "{doc}"
        );
    }
    // The manual pages and the shell completions, made from the binary's definitions.
    for page in [
        "usr/share/man/man8/ribshard.8.gz",
        "usr/share/man/man8/ribshard-show.8.gz",
        "usr/share/man/man8/ribshard-monitor.8.gz",
        "usr/share/man/man5/ribshard.toml.5.gz",
        "usr/share/bash-completion/completions/ribshard",
        "usr/share/zsh/vendor-completions/_ribshard",
        "usr/share/fish/vendor_completions.d/ribshard.fish",
    ] {
        assert_eq!(mode(&root.join(page)), 0o644, "{page}");
    }
    let bash = std::fs::read_to_string(root.join("usr/share/bash-completion/completions/ribshard"))
        .unwrap();
    assert!(
        bash.contains("monitor") && bash.contains("completions"),
        "{bash}"
    );
    // The binary runs, and the configuration it ships with loads.
    let out = Command::new(&bin).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ribshard "));
    let out = Command::new(&bin)
        .args(["config", "check"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The control data: a conffile, the service user made on install.
    let control = root.join("DEBIAN");
    let ok = Command::new("dpkg-deb")
        .arg("-e")
        .arg(&deb)
        .arg(&control)
        .status()
        .unwrap();
    assert!(ok.success());
    let conffiles = std::fs::read_to_string(control.join("conffiles")).unwrap();
    assert_eq!(conffiles.trim(), "/etc/ribshard/ribshard.toml");
    let postinst = std::fs::read_to_string(control.join("postinst")).unwrap();
    assert!(postinst.contains("adduser --system --group"), "{postinst}");
    let fields = std::fs::read_to_string(control.join("control")).unwrap();
    assert!(fields.contains("Package: ribshard") && fields.contains("Depends: adduser"));
    // The unit, as the operations issue asks for it.
    let text = std::fs::read_to_string(&unit).unwrap();
    for line in [
        "User=ribshard",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE",
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
        "RuntimeDirectory=ribshard",
        "ProtectSystem=strict",
        "ExecReload=/usr/bin/ribshard configure reload",
        "ExecStart=/usr/bin/ribshard run --config /etc/ribshard/ribshard.toml",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line}");
    }
}

/// `systemd-analyze verify` on the unit, with the scratch root as `/`: the system's own
/// units (for its dependencies) are copied in beside the package.
#[test]
fn systemd_analyze_verifies_the_unit() {
    let Some(deb) = package() else { return };
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        ribshard_mrt::skipped("systemd-analyze is not installed");
        return;
    }
    let root = unpack(&deb, "package-verify");
    let units = root.join("lib/systemd/system");
    let ok = Command::new("cp")
        .arg("-rn")
        .arg("/lib/systemd/system/.")
        .arg(&units)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .arg(units.join("ribshard.service"))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

/// A network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Option<Netns> {
        let name = format!("rs-pkg-{tag}-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            ribshard_mrt::skipped("cannot create a network namespace (needs root and iproute2)");
            return None;
        }
        let ns = Netns(name);
        assert!(ns
            .exec(&["ip", "link", "set", "lo", "up"])
            .status()
            .unwrap()
            .success());
        Some(ns)
    }

    /// A command run in the namespace as user nobody with only these capabilities (as
    /// setpriv writes them: "+net_bind_service,+net_admin"), as a systemd unit's
    /// AmbientCapabilities and CapabilityBoundingSet give them.
    fn as_nobody(&self, caps: &str) -> Command {
        let (inh, amb, bnd) = (
            format!("--inh-caps=-all,{caps}"),
            format!("--ambient-caps=-all,{caps}"),
            format!("--bounding-set=-all,{caps}"),
        );
        self.exec(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            &inh,
            &amb,
            &bnd,
            "--no-new-privs",
        ])
    }

    fn exec(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).args(argv);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The package unpacked for a test, with a work directory anyone may write (ribshard runs
/// as nobody and makes its socket there, as RuntimeDirectory= lets it) and a configuration
/// of one passive eBGP neighbor, 127.0.0.2 in AS 65002, ribshard on 127.0.0.1:179.
struct Unpacked {
    _root: TempDir,
    dir: PathBuf,
    bin: PathBuf,
    conf: PathBuf,
    sock: PathBuf,
}

/// `group` goes into the neighbor's group, `extra` after it (a `[fib]`).
fn unpacked(deb: &Path, name: &str, group: &str, extra: &str) -> Unpacked {
    let root = unpack(deb, name);
    let dir = root.join("work");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = dir.join("ribshard.sock");
    let conf = dir.join("ribshard.toml");
    std::fs::write(
        &conf,
        format!(
            "[bgp]\nlocal-as = 65001\nrouter-id = \"127.0.0.1\"\nlisten = [\"127.0.0.1:179\"]\n\
             [[bgp.group]]\nname = \"peers\"\ntype = \"external\"\npeer-as = 65002\n\
             import = [\"accept\"]\nexport = [\"accept\"]\n{group}\
             [[bgp.group.neighbor]]\naddress = \"127.0.0.2\"\npassive = true\n{extra}\
             [management]\nsocket = \"{}\"\n",
            sock.display()
        ),
    )
    .unwrap();
    Unpacked {
        bin: root.join("usr/bin/ribshard"),
        _root: root,
        dir,
        conf,
        sock,
    }
}

impl Unpacked {
    /// `ribshard run` in `ns` as nobody with `caps`, logging to ribshard.log.
    fn run(&self, ns: &Netns, caps: &str) -> Proc {
        let log = std::fs::File::create(self.dir.join("ribshard.log")).unwrap();
        Proc(
            ns.as_nobody(caps)
                .arg(&self.bin)
                .arg("run")
                .arg("--config")
                .arg(&self.conf)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ribshard.log")).unwrap_or_default()
    }

    /// Waits until ribshard listens: BIRD started before would have its first connection
    /// refused and wait a minute before the next.
    fn wait_running(&self) {
        assert!(
            wait(10, || self.log().contains("ribshard running")),
            "{}",
            self.log()
        );
    }

    /// BIRD in `ns`: 127.0.0.2 in AS 65002, announcing 203.0.113.0/24 to ribshard;
    /// `session` completes its BGP protocol, `channel` its IPv4 channel. Its control socket.
    fn bird(&self, ns: &Netns, session: &str, channel: &str) -> (Proc, PathBuf) {
        let bird_dir = self.dir.join("bird");
        std::fs::create_dir_all(&bird_dir).unwrap();
        let bird_conf = bird_dir.join("bird.conf");
        std::fs::write(
            &bird_conf,
            format!(
                "router id 127.0.0.2;\nprotocol device {{}}\n\
                 protocol static s4 {{ ipv4; route 203.0.113.0/24 blackhole; }}\n\
                 protocol bgp ribsh {{\n  local 127.0.0.2 port 179 as 65002;\n  neighbor 127.0.0.1 port 179 as 65001;\n\
                 multihop; strict bind on; connect retry time 1; {session}\n\
                 ipv4 {{ export all; {channel} }};\n}}\n"
            ),
        )
        .unwrap();
        let ctl = bird_dir.join("bird.ctl");
        let p = Proc(
            ns.exec(&["bird", "-f", "-c"])
                .arg(&bird_conf)
                .arg("-s")
                .arg(&ctl)
                .arg("-P")
                .arg(bird_dir.join("bird.pid"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        (p, ctl)
    }
}

/// The packaged binary as user nobody with CAP_NET_BIND_SERVICE alone (as the unit starts it)
/// listens on 127.0.0.1:179 in a namespace of its own; a BIRD there connects to it, and the
/// session stays up past several hold times.
#[test]
fn non_root_with_only_net_bind_service_keeps_a_session_on_port_179() {
    let Some(deb) = package() else { return };
    if !have_bird() {
        return;
    }
    let Some(ns) = Netns::new("nonroot") else {
        return;
    };
    let u = unpacked(&deb, "package-nonroot", "hold-time = 3\n", "");
    let (bin, sock) = (&u.bin, &u.sock);
    let daemon = u.run(&ns, "+net_bind_service");
    u.wait_running();
    let _bird = u.bird(&ns, "hold time 3;", "import all; next hop self;");
    let neighbor = || -> Option<Neighbor> {
        let out = Command::new(bin)
            .arg("--socket")
            .arg(sock)
            .args(["--json", "show", "bgp", "neighbor", "127.0.0.2"])
            .output()
            .ok()?;
        serde_json::from_slice::<Vec<Neighbor>>(&out.stdout)
            .ok()?
            .into_iter()
            .next()
    };
    let log_of = || u.log();
    assert!(
        wait(30, || neighbor().is_some_and(|n| n.state == "Established")),
        "{:?}\n{}",
        neighbor(),
        log_of()
    );
    // Which process is ribshard: `ip netns exec` and setpriv exec into it.
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.0.id())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_string()
    };
    assert!(field("Name:").starts_with("ribshard"), "{status}");
    assert!(field("Uid:").starts_with("65534"), "{status}");
    for caps in ["CapEff:", "CapPrm:", "CapBnd:"] {
        // Bit 10: CAP_NET_BIND_SERVICE, and nothing else.
        assert_eq!(field(caps), "0000000000000400", "{caps}\n{status}");
    }
    // Several hold times later, the same session is still up, on our port 179.
    std::thread::sleep(Duration::from_secs(7));
    let n = neighbor().unwrap();
    assert_eq!(
        (n.state.as_str(), n.flaps),
        ("Established", 0),
        "{n:?}\n{}",
        log_of()
    );
    assert_eq!(n.local_port, Some(179), "{n:?}");
    let accepted: u64 = n.families.iter().map(|f| f.accepted).sum();
    assert_eq!(accepted, 1, "{n:?}");
}

/// With `[fib]`, the packaged binary as user nobody with CAP_NET_BIND_SERVICE alone (the
/// unit's default) refuses to start, naming the capability it lacks; with CAP_NET_ADMIN
/// added (the drop-in OPERATIONS.md gives) it starts and writes a BIRD neighbor's route to
/// the kernel of its namespace.
#[test]
fn with_fib_net_admin_is_needed_and_enough() {
    let Some(deb) = package() else { return };
    if !have_bird() {
        return;
    }
    let Some(ns) = Netns::new("fib") else { return };
    let u = unpacked(&deb, "package-fib", "", "[fib]\ntable = 254\n");
    let log_of = || u.log();

    // Without CAP_NET_ADMIN: a clear refusal at start.
    let mut without = u.run(&ns, "+net_bind_service");
    assert!(
        wait(10, || matches!(without.0.try_wait(), Ok(Some(_)))),
        "still running without CAP_NET_ADMIN:\n{}",
        log_of()
    );
    assert!(
        log_of().contains("needs CAP_NET_ADMIN, which this process lacks"),
        "{}",
        log_of()
    );

    // With it: BIRD's route reaches the kernel of the namespace, its next hop 10.99.0.3
    // on a veth there (it must resolve through a connected route, and not be ours).
    for cmd in [
        "ip link add rs-a type veth peer name rs-b",
        "ip addr add 10.99.0.1/24 dev rs-a",
        "ip link set rs-a up",
        "ip link set rs-b up",
    ] {
        let argv: Vec<&str> = cmd.split(' ').collect();
        assert!(ns.exec(&argv).status().unwrap().success(), "{cmd}");
    }
    let _with = u.run(&ns, "+net_bind_service,+net_admin");
    u.wait_running();
    let (_bird, bird_ctl) = u.bird(&ns, "", "import none; next hop address 10.99.0.3;");
    let kernel = || {
        let out = ns
            .exec(&["ip", "route", "show", "203.0.113.0/24"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let bird_said = || {
        let out = ns
            .exec(&["birdc", "-s"])
            .arg(&bird_ctl)
            .args(["show", "protocols", "all", "ribsh"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(
        wait(30, || kernel().contains("203.0.113.0/24")),
        "kernel: {:?}\n{}\n{}",
        kernel(),
        log_of(),
        bird_said()
    );
}
