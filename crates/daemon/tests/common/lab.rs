//! Namespaces for tests of forwarding and local routes: ribshard's own and its neighbors'
//! (as on other machines), joined by veth links, with BIRD 2 started in them.

use super::{output, start_ribshard, wait, with_socket, Proc};
use std::path::Path;
use std::process::{Command, Stdio};

/// A network namespace, deleted on drop (declare it before the daemons in it).
pub struct Netns(pub String);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("rs-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run("ip", &["netns", "add", &name]);
        let n = Netns(name);
        n.ip("link set lo up");
        n
    }

    /// `ip -n NS ...`, which must succeed.
    pub fn ip(&self, args: &str) -> String {
        let mut a = vec!["-n", &self.0];
        a.extend(args.split_whitespace());
        run("ip", &a)
    }

    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, program]);
        c
    }

    /// `ribshard run` in this namespace with `config` (and the test's API socket) written to
    /// `dir`, once it says it runs.
    pub fn ribshard(&self, dir: &Path, config: &str) -> Proc {
        let conf = dir.join("ribshard.toml");
        std::fs::write(&conf, with_socket(dir, config)).unwrap();
        let mut cmd = self.command(env!("CARGO_BIN_EXE_ribshard"));
        cmd.args(["run", "--config"]).arg(&conf);
        start_ribshard(cmd, dir)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// ribshard's namespace and its neighbors' (as on other machines: our writes to the
/// kernel's tables are not theirs), joined by veth links.
pub struct Lab {
    pub dut: Netns,
    pub peers: Netns,
}

impl Lab {
    pub fn new(tag: &str) -> Lab {
        Lab {
            dut: Netns::new(&format!("{tag}-d")),
            peers: Netns::new(&format!("{tag}-p")),
        }
    }

    /// Link `i`: `v{i}` in ribshard's namespace (10.i.0.1/24, 2001:db8:i::1/64) to `v{i}b`
    /// in the neighbors' (10.i.0.2/24, 2001:db8:i::2/64).
    pub fn link(&self, i: u32) {
        self.dut.ip(&format!(
            "link add v{i} type veth peer name v{i}b netns {}",
            self.peers.0
        ));
        self.dut.ip(&format!("addr add 10.{i}.0.1/24 dev v{i}"));
        self.dut
            .ip(&format!("addr add 2001:db8:{i}::1/64 dev v{i} nodad"));
        self.peers.ip(&format!("addr add 10.{i}.0.2/24 dev v{i}b"));
        self.peers
            .ip(&format!("addr add 2001:db8:{i}::2/64 dev v{i}b nodad"));
        self.dut.ip(&format!("link set v{i} up"));
        self.peers.ip(&format!("link set v{i}b up"));
    }
}

pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// BIRD 2 in the namespace, with its own control socket.
pub struct BirdNs {
    _p: Proc,
    sock: std::path::PathBuf,
}

impl BirdNs {
    pub fn start(ns: &Netns, dir: &Path, name: &str, config: &str) -> BirdNs {
        let conf = dir.join(format!("{name}.conf"));
        std::fs::write(&conf, with_log(dir, name, config)).unwrap();
        let sock = dir.join(format!("{name}.ctl"));
        let p = ns
            .command("bird")
            .args(["-f", "-c"])
            .arg(&conf)
            .arg("-s")
            .arg(&sock)
            .arg("-P")
            .arg(dir.join(format!("{name}.pid")))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
            .spawn()
            .expect("start bird");
        let b = BirdNs { _p: Proc(p), sock };
        assert!(
            wait(20, || b.cmd("show status").contains("Daemon is up")),
            "bird {name} did not start"
        );
        b
    }

    pub fn cmd(&self, c: &str) -> String {
        output(
            Command::new("birdc")
                .arg("-s")
                .arg(&self.sock)
                .args(c.split(' ')),
        )
    }

    /// Whether BIRD's protocol `proto` is Established.
    pub fn established(&self, proto: &str) -> bool {
        self.cmd(&format!("show protocols {proto}"))
            .contains("Established")
    }

    /// Writes a new configuration and has BIRD read it.
    pub fn reconfigure(&self, dir: &Path, name: &str, config: &str) {
        std::fs::write(
            dir.join(format!("{name}.conf")),
            with_log(dir, name, config),
        )
        .unwrap();
        let out = self.cmd("configure");
        assert!(out.contains("Reconfigured"), "bird {name}: {out}");
    }
}

/// A configuration that logs to a file of the test's: without a `log`, BIRD logs to
/// syslog, which on a machine without one falls back to the console, slowly enough to eat
/// a core.
pub fn with_log(dir: &Path, name: &str, config: &str) -> String {
    format!(
        "log \"{}\" all;\n{config}",
        dir.join(format!("{name}-bird.log")).display()
    )
}
