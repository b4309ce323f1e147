//! Helpers of the interop tests: real daemons as child processes, killed on drop.
#![allow(dead_code)]

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

pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ribshard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn ribshard(dir: &Path, config: &str) -> (Proc, PathBuf) {
    let conf = dir.join("ribshard.toml");
    std::fs::write(&conf, config).unwrap();
    let dump = dir.join("updates.mrt");
    let p = Command::new(env!("CARGO_BIN_EXE_ribshard"))
        .arg("run")
        .arg("--config")
        .arg(&conf)
        .arg("--dump-updates")
        .arg(&dump)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("ribshard.log")).unwrap())
        .spawn()
        .expect("start ribshard");
    (Proc(p), dump)
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
