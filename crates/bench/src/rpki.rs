//! `--rpki`: route origin validation on the upstreams' routes against an RPKI of 2026's size
//! (600,000 VRPs, synthesized from the tables: about 55% of their prefixes covered by a ROA
//! of their origin, 3% by one of another AS, the rest more-specifics and IPv6 space; 1,000
//! ASPA records of origin ASes, naming the upstream and one other AS), served by a real
//! RTR cache (NLnet Labs' rtrtr) to both daemons. Each rejects ROV-invalid routes on import
//! (ribshard `validation-state`, BIRD 2 `roa_check`); ribshard also verifies every path
//! with ASPA and tags the invalid ones (BIRD 2.0 has no ASPA). The clock starts once the
//! daemon holds every VRP. What the downstream should hold is computed here, by a plain
//! lookup of every covering prefix, not with ribshard's code.

use crate::table::Feed;
use hashbrown::{HashMap, HashSet};
use ribshard_wire::attr;
use ribshard_wire::update::{segment, RawAttrIter};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The origin AS of a route's attributes (4-octet AS_PATH): the last AS of a final
/// AS_SEQUENCE, none after an AS_SET (RFC 6811 section 2).
pub fn origin(attrs: &[u8]) -> Option<u32> {
    let path = RawAttrIter::new(attrs).find(|a| a.type_code == attr::AS_PATH)?;
    let v = path.value;
    let mut origin = None;
    let mut at = 0usize;
    while let (Some(&kind), Some(&n)) = (v.get(at), v.get(at + 1)) {
        let end = at + 2 + 4 * usize::from(n);
        match kind {
            segment::AS_SEQUENCE if n > 0 => {
                origin = v
                    .get(end - 4..end)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
            }
            segment::AS_SET => origin = None,
            _ => {}
        }
        at = end;
    }
    origin
}

/// The synthesized RPKI and what it rejects.
pub struct Synth {
    /// rtrtr's JSON input.
    pub json: String,
    /// IPv4 VRPs (what the daemon must hold before the clock starts).
    pub v4: usize,
    pub total: usize,
    pub aspas: usize,
    /// Per feed, the prefixes whose route is ROV-invalid.
    pub invalid: Vec<HashSet<u64>>,
}

fn mask(addr: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        addr & (u32::MAX << (32 - u32::from(len)))
    }
}

pub fn synth(feeds: &[Option<Feed>]) -> Synth {
    // Every prefix with the origin it is first seen with, in prefix order.
    let mut first: Vec<(u64, Option<u32>)> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    for f in feeds.iter().flatten() {
        for k in &f.prefixes {
            if seen.insert(*k) {
                first.push((*k, f.origins.get(k).copied().flatten()));
            }
        }
    }
    first.sort_unstable();
    // (address, length) -> (max length, AS).
    let mut roas: HashMap<(u32, u8), Vec<(u8, u32)>> = HashMap::new();
    let mut json = String::with_capacity(60 * 600_000);
    json.push_str("{\"roas\": [\n");
    let mut total = 0usize;
    let mut add = |json: &mut String, addr: u32, len: u8, max: u8, asn: u32| {
        let list = roas.entry((addr, len)).or_default();
        // A more-specific made for one prefix may be another's own ROA: once each.
        if list.contains(&(max, asn)) {
            return;
        }
        list.push((max, asn));
        let a = std::net::Ipv4Addr::from(addr);
        let _ = writeln!(
            json,
            "{}{{\"asn\": \"AS{asn}\", \"prefix\": \"{a}/{len}\", \"maxLength\": {max}}}",
            if total == 0 { "" } else { "," }
        );
        total += 1;
    };
    for (i, (k, o)) in first.iter().enumerate() {
        let (addr, len) = ((k >> 8) as u32, (k & 0xff) as u8);
        let Some(o) = o else { continue };
        match i % 100 {
            0..=54 => {
                add(&mut json, addr, len, len, *o);
                if len <= 22 {
                    add(&mut json, addr, len + 2, 24, *o);
                }
            }
            55..=57 => add(&mut json, addr, len, len, o.wrapping_add(1)),
            _ => {}
        }
    }
    let v4 = total;
    let mut n = 0u32;
    while total < 600_000 {
        let _ = writeln!(
            json,
            ",{{\"asn\": \"AS{}\", \"prefix\": \"2a{:02x}:{:x}::/32\", \"maxLength\": 48}}",
            64_512 + n % 1000,
            n >> 16,
            n & 0xffff
        );
        n += 1;
        total += 1;
    }
    // ASPA: a third of the origin ASes, each naming the upstream it was first seen behind
    // and another AS (paths through other providers verify as invalid: ribshard tags them).
    json.push_str("],\n\"aspas\": [\n");
    let mut customers: Vec<(u32, u32)> = Vec::new();
    let mut done: HashSet<u32> = HashSet::new();
    for f in feeds.iter().flatten() {
        for o in f.origins.values().flatten() {
            if done.insert(*o) && o % 3 == 0 {
                customers.push((*o, f.asn));
            }
        }
    }
    customers.sort_unstable();
    // rtrtr 0.3.3 stays in "initial validation" when given 600,000 ROAs with several
    // thousand ASPA records (found here; 1,000 load): a thousand it is.
    customers.truncate(1000);
    for (i, (c, up)) in customers.iter().enumerate() {
        // rtrtr takes providers in increasing order, without the customer.
        let mut p: Vec<u32> = vec![*up, c.wrapping_add(1)];
        p.sort_unstable();
        p.dedup();
        p.retain(|a| a != c);
        let p: Vec<String> = p.iter().map(u32::to_string).collect();
        let _ = writeln!(
            json,
            "{}{{\"customer\": {c}, \"providers\": [{}]}}",
            if i == 0 { "" } else { "," },
            p.join(", ")
        );
    }
    let aspas = customers.len();
    json.push_str("]}\n");
    // The routes each feed has that are ROV-invalid: covered by a VRP, matched by none.
    let invalid = feeds
        .iter()
        .map(|f| {
            let mut out = HashSet::new();
            for f in f.iter() {
                for k in &f.prefixes {
                    let (addr, len) = ((k >> 8) as u32, (k & 0xff) as u8);
                    let o = f.origins.get(k).copied().flatten();
                    let mut covered = false;
                    let mut valid = false;
                    for l in 0..=len {
                        if let Some(list) = roas.get(&(mask(addr, l), l)) {
                            covered = true;
                            valid |= list
                                .iter()
                                .any(|(max, asn)| *asn != 0 && Some(*asn) == o && len <= *max);
                        }
                    }
                    if covered && !valid {
                        out.insert(*k);
                    }
                }
            }
            out
        })
        .collect();
    Synth {
        json,
        v4,
        total,
        aspas,
        invalid,
    }
}

/// rtrtr serving the synthesized data over RTR on 127.0.0.1.
pub struct Cache {
    child: Child,
    pub port: u16,
}

/// rtrtr: `RIBSHARD_RTRTR`, else where scripts/test and scripts/bench-install build it
/// (target/tools/bin), else the PATH.
pub fn rtrtr_binary() -> Option<PathBuf> {
    std::env::var_os("RIBSHARD_RTRTR")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            PathBuf::from("target/tools/bin/rtrtr"),
            PathBuf::from("rtrtr"),
        ])
        .find(|p| Command::new(p).arg("--version").output().is_ok())
}

impl Cache {
    pub fn start(dir: &Path, synth: &Synth) -> Result<Cache, String> {
        let bin =
            rtrtr_binary().ok_or("rtrtr is not installed (scripts/bench-install builds it)")?;
        let json = dir.join("rpki.json");
        std::fs::write(&json, &synth.json).map_err(|e| format!("{}: {e}", json.display()))?;
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| e.to_string())?;
        let conf = dir.join("rtrtr.conf");
        std::fs::write(
            &conf,
            format!(
                "log_level = \"warn\"\nlog_target = \"stderr\"\nhttp-listen = []\n\
                 [units.local]\ntype = \"json\"\nuri = \"file://{}\"\nrefresh = 3600\n\
                 [targets.rtr]\ntype = \"rtr\"\nlisten = [\"127.0.0.1:{port}\"]\nunit = \"local\"\n",
                json.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("rtrtr.log")).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("rtrtr: {e}"))?;
        let end = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > end {
                return Err("rtrtr did not listen within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(Cache { child, port })
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon's configuration for it: ribshard's `[rpki]` and import policy `rov`.
pub fn ribshard_config(port: u16) -> String {
    // The neighbors come up once the daemon holds the RPKI data (the clock starts then),
    // past the update-delay's default establish-wait (5 s after start): it waits for them.
    format!(
        "\n[bgp.update-delay]\nestablish-wait = 120\n\n[rpki]\nretry = 1\n[[rpki.cache]]\naddress = \"127.0.0.1\"\nport = {port}\n\
         [policy-options.community.aspa-invalid]\nmembers = [\"65535:666\"]\n\
         [[policy-options.policy-statement.rov.term]]\nname = \"aspa\"\n\
         from = {{ aspa-state = \"invalid\" }}\nthen = {{ community-add = \"aspa-invalid\" }}\n\
         [[policy-options.policy-statement.rov.term]]\nname = \"invalid\"\n\
         from = {{ validation-state = \"invalid\" }}\nthen = {{ action = \"reject\" }}\n\
         [[policy-options.policy-statement.rov.term]]\nname = \"rest\"\nthen = {{ action = \"accept\" }}\n"
    )
}

/// BIRD 2's: a ROA table filled by its RPKI protocol, and the import filter `rov_in`.
pub fn bird_config(port: u16) -> String {
    format!(
        "roa4 table r4;\n\
         protocol rpki rtr1 {{ roa4 {{ table r4; }}; remote 127.0.0.1 port {port}; \
         retry keep 5; refresh keep 3600; expire keep 7200; }}\n\
         filter rov_in {{ if roa_check(r4, net, bgp_path.last) = ROA_INVALID then reject; accept; }}\n"
    )
}

/// Whether the daemon holds `v4` IPv4 VRPs.
pub fn ready(cmd: &[String], bird: bool, v4: usize) -> bool {
    let Some((bin, args)) = cmd.split_first() else {
        return false;
    };
    let words: &[&str] = if bird {
        &["show", "route", "table", "r4", "count"]
    } else {
        &["show", "validation", "session"]
    };
    let Ok(out) = Command::new(bin).args(args).args(words).output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if bird {
        // "600000 of 600000 routes for 600000 networks in table r4"
        text.split_whitespace()
            .find_map(|w| w.parse::<usize>().ok())
            .is_some_and(|n| n >= v4)
    } else {
        // "RPKI data: version 1, 254887 IPv4 and ..."
        text.split(", ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n >= v4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(segments: &[(u8, &[u32])]) -> Vec<u8> {
        let mut path = Vec::new();
        for (kind, asns) in segments {
            path.push(*kind);
            path.push(asns.len() as u8);
            for a in *asns {
                path.extend_from_slice(&a.to_be_bytes());
            }
        }
        let mut a = vec![0x40, attr::AS_PATH, path.len() as u8];
        a.extend(path);
        a
    }

    #[test]
    fn origin_is_the_last_as_of_a_final_sequence() {
        assert_eq!(origin(&attrs(&[(segment::AS_SEQUENCE, &[1, 2])])), Some(2));
        assert_eq!(
            origin(&attrs(&[
                (segment::AS_SEQUENCE, &[1]),
                (segment::AS_SET, &[3, 4])
            ])),
            None
        );
        assert_eq!(
            origin(&attrs(&[
                (segment::AS_SET, &[3]),
                (segment::AS_SEQUENCE, &[5])
            ])),
            Some(5)
        );
        assert_eq!(origin(&[]), None);
    }
}
