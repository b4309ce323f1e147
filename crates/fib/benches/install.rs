//! How fast a full table reaches the kernel, in a network namespace of its own (root): the
//! FIB writer against `ip -batch` with a nexthop object (the same routes, one request and
//! one acknowledgement each) and against the kernel's own insertion cost (the same route
//! messages, pre-encoded, many a `sendmsg`, nothing else done: the floor), and how long
//! moving every route to another next hop takes (the writer replacing one nexthop object
//! when the IGP route under its next hop changes, against `ip nexthop replace`).
//!
//! `cargo bench -p ribshard-fib --bench install -- [--prefixes N] [--real FILE] [--rounds R]
//! [--json FILE]`: the real 2010 table's prefixes from `../shared/data` unless told otherwise.

use ribshard_fib::netlink::nexthop::{self, NexthopSpec};
use ribshard_fib::netlink::route::Hop;
use ribshard_fib::netlink::route::{self, Forward, RouteKey};
use ribshard_fib::netlink::{Builder, NlSocket, RTNLGRP_IPV4_ROUTE, RTNLGRP_NEXTHOP};
use ribshard_fib::{
    Fib, FibChange, FibConfig, FibInput, FibStats, KernelView, KernelWatch, Published,
    ResolveConfig, Want,
};
use ribshard_wire::Prefix;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ip(args: &str) -> String {
    let out = Command::new("ip")
        .args(args.split_whitespace())
        .output()
        .expect("iproute2's ip");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare changes only this thread's namespaces.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        );
        ip("link set lo up");
        for (a, b, net) in [("v0", "v1", "10.0.0.1/24"), ("v2", "v3", "10.0.1.1/24")] {
            ip(&format!("link add {a} type veth peer name {b}"));
            ip(&format!("addr add {net} dev {a}"));
            ip(&format!("link set {a} up"));
            ip(&format!("link set {b} up"));
        }
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// The IPv4 prefixes of an MRT RIB (or `n` synthesized ones following its lengths).
fn prefixes(real: Option<&str>, n: Option<usize>) -> Vec<Prefix> {
    let mut out: Vec<Prefix> = Vec::new();
    if let Some(path) = real.filter(|p| std::path::Path::new(p).exists()) {
        let mut seen = std::collections::HashSet::new();
        let mut r = ribshard_mrt::open(std::path::Path::new(path)).expect("the MRT file");
        while let Ok(Some(raw)) = r.next_record() {
            if let Ok(ribshard_mrt::Record::Rib(rib)) = ribshard_mrt::Record::parse(&raw) {
                let p = rib.prefix.masked();
                if matches!(p, Prefix::V4 { len, .. } if len > 0) && seen.insert(p) {
                    out.push(p);
                }
            }
        }
    }
    if let Some(n) = n {
        if out.len() < n {
            // Synthesized /24s past the real ones (their lengths would need a table).
            let mut i = 0u32;
            let have: std::collections::HashSet<Prefix> = out.iter().copied().collect();
            while out.len() < n {
                let p = Prefix::v4(Ipv4Addr::from(0x2000_0000u32 + (i << 8)), 24).unwrap();
                if !have.contains(&p) {
                    out.push(p);
                }
                i += 1;
            }
        }
        out.truncate(n);
    }
    out
}

fn our_routes() -> usize {
    ip("route show table main proto 186")
        .lines()
        .filter(|l| !l.starts_with(' '))
        .count()
}

/// `ip -batch` with a nexthop object: seconds.
fn ip_batch(ps: &[Prefix]) -> f64 {
    ip("nexthop add id 7 via 10.0.0.2 dev v0");
    let file = std::env::temp_dir().join(format!("fib-bench-{}.batch", std::process::id()));
    let text: String = ps
        .iter()
        .map(|p| format!("route add {p} nhid 7 proto 186 metric 20\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let t = Instant::now();
    ip(&format!("-batch {}", file.display()));
    let s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&file);
    assert_eq!(our_routes(), ps.len());
    // Deleting the object deletes its routes.
    ip("nexthop del id 7");
    s
}

/// The kernel's own cost: the same requests, pre-encoded, 256 KiB a `sendmsg`, no
/// acknowledgement, nothing else done. Seconds.
fn floor(ps: &[Prefix]) -> f64 {
    ip("nexthop add id 8 via 10.0.0.2 dev v0");
    let key = RouteKey {
        table: 254,
        protocol: 186,
        priority: 20,
    };
    let mut batches = Vec::new();
    let mut b = Builder::default();
    for (i, p) in ps.iter().enumerate() {
        route::put_replace(&mut b, i as u32, 0, p, &key, &Forward::Object(8));
        if b.len() >= 256 << 10 {
            batches.push(b.finish().to_vec());
            b.clear();
        }
    }
    batches.push(b.finish().to_vec());
    let mut sock = NlSocket::open(&[]).unwrap();
    let t = Instant::now();
    for batch in &batches {
        sock.send(batch).unwrap();
        while let Ok(Some(_)) = sock.recv(None) {}
    }
    let s = t.elapsed().as_secs_f64();
    assert_eq!(our_routes(), ps.len());
    ip("nexthop del id 8");
    s
}

struct Run {
    fib: Fib,
    _watch: KernelWatch,
}

fn start() -> Run {
    let resolve = ResolveConfig::default();
    let published = Arc::new(Published::new(KernelView::new(resolve.clone())));
    let fib = Fib::start(FibConfig::default(), published.clone()).unwrap();
    let l = fib.listener();
    let watch = KernelWatch::start(published, resolve, Some(fib.portid()), vec![l]).unwrap();
    let _ = fib.sender().send(FibInput::Advertising {
        shard: 0,
        shards: 1,
    });
    Run { fib, _watch: watch }
}

/// The FIB writer: from the first change handed to it to the last route written, seconds;
/// the process's CPU meanwhile (user + system); and how long moving the next hop every
/// route uses took: from `ip route add` under it to the writer's nexthop replace returned.
fn writer(ps: &[Prefix]) -> (f64, f64, f64) {
    let r = start();
    let nh: smallvec::SmallVec<[IpAddr; 2]> =
        std::iter::once(IpAddr::from([10, 0, 0, 2])).collect();
    let changes: Vec<Vec<FibChange>> = ps
        .chunks(4096)
        .map(|c| {
            c.iter()
                .map(|p| FibChange {
                    prefix: *p,
                    want: Some(Want::Forward(nh.clone())),
                })
                .collect()
        })
        .collect();
    let cpu0 = process_cpu();
    let t = Instant::now();
    for c in changes {
        r.fib.sender().send(FibInput::Changes(c)).unwrap();
    }
    assert!(r.fib.sync(Duration::from_secs(600)));
    let s = t.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu0;
    assert_eq!(our_routes(), ps.len());
    assert_eq!(FibStats::get(&r.fib.stats().installed), ps.len() as u64);
    // Moving the next hop: the IGP route under it changes; the writer replaces one leaf. Done
    // when its batch (the one object written) has returned from the kernel.
    let st = r.fib.stats();
    let objects = FibStats::get(&st.object_writes);
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let t = Instant::now();
    ip("route add 10.0.0.2/32 via 10.0.1.2 dev v2");
    while FibStats::get(&st.object_writes) == objects || FibStats::get(&st.last_flush_ms) < since_ms
    {
        std::thread::sleep(Duration::from_micros(100));
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the next hop did not move"
        );
    }
    let moved = t.elapsed().as_secs_f64();
    assert!(ip("nexthop show").contains("via 10.0.1.2 dev v2"));
    assert_eq!(
        FibStats::get(&st.route_writes),
        ps.len() as u64,
        "no route written again"
    );
    ip("route del 10.0.0.2/32");
    // Withdrawn: everything removed before the next round.
    let none: Vec<FibChange> = ps
        .iter()
        .map(|p| FibChange {
            prefix: *p,
            want: None,
        })
        .collect();
    r.fib.sender().send(FibInput::Changes(none)).unwrap();
    assert!(r.fib.sync(Duration::from_secs(600)));
    assert_eq!(our_routes(), 0);
    eprintln!(
        "  writer: {s:.3} s, {cpu:.2} s CPU; next hop moved in {:.1} ms",
        moved * 1000.0
    );
    (s, cpu, moved)
}

/// The kernel's own nexthop replace under every route: one request on a socket of our
/// own, timed to `sendmsg` returning (the kernel moves the routes in the sender's context),
/// as the writer sends it. `watched`: with a socket subscribed to route notifications as
/// the kernel watcher's is (its filter dropping the replacer's), since a routing daemon
/// watches the kernel and the kernel then hands it each route's notification of the move
/// (one a route, with `net.ipv4.nexthop_compat_mode` 1, the default). Seconds.
fn kernel_move(ps: &[Prefix], watched: bool) -> f64 {
    ip("nexthop add id 9 via 10.0.0.2 dev v0");
    ip("nexthop add id 10 group 9");
    let key = RouteKey {
        table: 254,
        protocol: 186,
        priority: 20,
    };
    let mut sock = NlSocket::open(&[]).unwrap();
    let mut b = Builder::default();
    for (i, p) in ps.iter().enumerate() {
        route::put_replace(&mut b, i as u32, 0, p, &key, &Forward::Object(10));
        if b.len() >= 256 << 10 {
            sock.send(b.finish()).unwrap();
            b.clear();
            while let Ok(Some(_)) = sock.recv(None) {}
        }
    }
    sock.send(b.finish()).unwrap();
    while let Ok(Some(_)) = sock.recv(None) {}
    let monitor = watched.then(|| {
        let m = NlSocket::open(&[RTNLGRP_IPV4_ROUTE, RTNLGRP_NEXTHOP]).unwrap();
        m.drop_from(sock.portid()).unwrap();
        m
    });
    let ifindex = unsafe { libc::if_nametoindex(c"v2".as_ptr()) };
    assert_ne!(ifindex, 0, "v2");
    let mut b = Builder::default();
    nexthop::put_replace(
        &mut b,
        1,
        0,
        9,
        186,
        &NexthopSpec::Leaf(Hop {
            gateway: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2))),
            ifindex,
            weight: 1,
        }),
    );
    let t = Instant::now();
    sock.send(b.finish()).unwrap();
    let s = t.elapsed().as_secs_f64();
    assert!(
        sock.recv(None).ok().flatten().is_none(),
        "the kernel refused the replace"
    );
    assert!(ip("nexthop show id 9").contains("via 10.0.1.2 dev v2"));
    drop(monitor);
    ip("nexthop del id 10");
    ip("nexthop del id 9");
    s
}

fn process_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime (fields 14 and 15, 12 and 13 after the name).
    (ticks(11) + ticks(12)) / 100.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/routeviews-wide-20100701.mrt.gz"
    );
    let real = arg("--real").unwrap_or_else(|| root.to_string());
    let n = arg("--prefixes").and_then(|v| v.parse().ok());
    let rounds: usize = arg("--rounds").and_then(|v| v.parse().ok()).unwrap_or(3);
    let real_count = prefixes(Some(&real), None).len();
    let ps = prefixes(Some(&real), n);
    let source = match (real_count, ps.len()) {
        (0, _) => "synthesized /24s".to_string(),
        (r, n) if n > r => format!("the real 2010 table's {r} and synthesized /24s"),
        _ => "the real 2010 table".to_string(),
    };
    eprintln!("{} IPv4 prefixes ({source}), {rounds} rounds", ps.len());
    let out = in_netns(move || {
        let mut runs: [Vec<f64>; 7] = Default::default();
        for round in 0..rounds {
            // Alternated, so that a noisy moment hits each alike.
            let (ws, cpu, moved) = writer(&ps);
            let (b, f) = (ip_batch(&ps), floor(&ps));
            let (m, mw) = (kernel_move(&ps, false), kernel_move(&ps, true));
            eprintln!(
                "round {round}: writer {ws:.3} s, ip -batch {b:.3} s, floor {f:.3} s; \
                 next hop moved {:.1} ms, the kernel's replace {:.1} ms ({:.1} ms watched)",
                moved * 1e3,
                m * 1e3,
                mw * 1e3
            );
            for (v, x) in runs.iter_mut().zip([ws, cpu, moved, b, f, m, mw]) {
                v.push(x);
            }
        }
        (runs.map(median), ps.len())
    });
    let ([w, c, mv, b, f, m, mw], n) = out;
    let line = format!(
        "{{\"prefixes\":{n},\"source\":\"{source}\",\"rounds\":{rounds},\"writer_s\":{w:.4},\"writer_cpu_s\":{c:.3},\"ip_batch_s\":{b:.4},\"floor_s\":{f:.4},\"writer_move_s\":{mv:.4},\"kernel_nexthop_replace_s\":{m:.4},\"kernel_nexthop_replace_watched_s\":{mw:.4},\"speedup_vs_ip_batch\":{:.2}}}",
        b / w
    );
    println!("{line}");
    if let Some(path) = arg("--json") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        let _ = writeln!(file, "{line}");
    }
}
