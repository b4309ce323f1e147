//! The FIB writer and the kernel watcher against a real kernel, each test in a network
//! namespace of its own (made with `unshare(CLONE_NEWNET)` on the test's thread; the `ip`
//! commands it runs and the threads it starts inherit it). Needs root and iproute2.

use ribshard_fib::{
    Fib, FibChange, FibConfig, FibInput, KernelView, KernelWatch, Published, ResolveConfig, Want,
};
use ribshard_wire::Prefix;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `f` on a thread in a new network namespace.
fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare changes only this thread's namespaces.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {} (root needed)",
            std::io::Error::last_os_error()
        );
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

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

/// Two veth pairs: 10.0.0.1/24 on v0 and 10.0.1.1/24 on v2 (their peers up, addressless).
fn links() {
    ip("link set lo up");
    for (a, b, net) in [("v0", "v1", "10.0.0.1/24"), ("v2", "v3", "10.0.1.1/24")] {
        ip(&format!("link add {a} type veth peer name {b}"));
        ip(&format!("addr add {net} dev {a}"));
        ip(&format!("link set {a} up"));
        ip(&format!("link set {b} up"));
    }
}

fn p(i: u32) -> Prefix {
    Prefix::v4(Ipv4Addr::from(0x1400_0000 + (i << 8)), 24).unwrap()
}

fn to(nhs: &[&str]) -> Option<Want> {
    let mut v: smallvec::SmallVec<[IpAddr; 2]> = nhs.iter().map(|s| s.parse().unwrap()).collect();
    v.sort();
    Some(Want::Forward(v))
}

/// Our routes in the main table: prefix and the `nhid` each names (`ip -json`).
fn our_routes() -> Vec<(String, Option<u64>)> {
    let out = ip("-json route show table main proto 186");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["dst"].as_str().unwrap_or("").to_string(),
                        r["nhid"].as_u64(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

struct Running {
    fib: Fib,
    watch: KernelWatch,
}

fn start(config: FibConfig) -> Running {
    let resolve = ResolveConfig::default();
    let published = Arc::new(Published::new(KernelView::new(resolve.clone())));
    // The writer first: the watcher has the kernel drop the echoes of its writes.
    let fib = Fib::start(config, published.clone()).unwrap();
    let listener = fib.listener();
    let watch = KernelWatch::start(published, resolve, Some(fib.portid()), vec![listener]).unwrap();
    Running { fib, watch }
}

fn send(r: &Running, changes: Vec<FibChange>) {
    r.fib.sender().send(FibInput::Changes(changes)).unwrap();
}

fn release(r: &Running) {
    r.fib
        .sender()
        .send(FibInput::Advertising {
            shard: 0,
            shards: 1,
        })
        .unwrap();
}

fn stat(r: &Running, f: impl Fn(&ribshard_fib::FibStats) -> &std::sync::atomic::AtomicU64) -> u64 {
    ribshard_fib::FibStats::get(f(r.fib.stats()))
}

#[test]
fn routes_are_installed_replaced_and_deleted_through_nexthop_objects() {
    in_netns(|| {
        links();
        let r = start(FibConfig::default());
        send(
            &r,
            (0..1000)
                .map(|i| FibChange {
                    prefix: p(i),
                    want: to(&["10.0.0.2"]),
                })
                .collect(),
        );
        // A first start (none of ours in the table, nothing to reconcile): written as the
        // shards decide, before the start-up deferral ends.
        assert!(r.fib.sync(Duration::from_secs(10)));
        assert_eq!(our_routes().len(), 1000);
        release(&r);
        let routes = our_routes();
        assert_eq!(routes.len(), 1000);
        let nhid = routes[0].1.expect("routes name a nexthop object");
        assert!(
            routes.iter().all(|(_, id)| *id == Some(nhid)),
            "one group for all"
        );
        // A thousand routes, one leaf and one group: about a thousand messages, in few batches.
        assert!(stat(&r, |s| &s.batches) < 10, "batched");
        assert_eq!(stat(&r, |s| &s.leaves), 1);
        assert_eq!(stat(&r, |s| &s.groups), 1);

        // ECMP: the set's group holds both next hops' leaves.
        send(
            &r,
            vec![FibChange {
                prefix: p(0),
                want: to(&["10.0.0.2", "10.0.1.2"]),
            }],
        );
        assert!(r.fib.sync(Duration::from_secs(5)));
        let nh = ip("-json nexthop show");
        let v: serde_json::Value = serde_json::from_str(&nh).unwrap();
        let groups: Vec<&serde_json::Value> = v
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["group"].is_array())
            .collect();
        assert!(
            groups
                .iter()
                .any(|g| g["group"].as_array().unwrap().len() == 2),
            "{nh}"
        );

        // The next hop moves to another interface: one leaf replaced, no route written.
        let writes = stat(&r, |s| &s.route_writes);
        ip("route add 10.0.0.2/32 via 10.0.1.2 dev v2");
        let began = Instant::now();
        loop {
            let out = ip("nexthop show");
            if out
                .lines()
                .any(|l| l.contains("via 10.0.1.2 dev v2") && !l.contains("group"))
                && out.matches("dev v2").count() >= 2
            {
                break;
            }
            assert!(
                began.elapsed() < Duration::from_secs(5),
                "the leaf did not move: {out}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(r.fib.sync(Duration::from_secs(5)));
        assert_eq!(
            stat(&r, |s| &s.route_writes),
            writes,
            "no route written again"
        );
        assert_eq!(our_routes().len(), 1000);

        // Withdrawn: the routes and the objects go.
        send(
            &r,
            (0..1000)
                .map(|i| FibChange {
                    prefix: p(i),
                    want: None,
                })
                .collect(),
        );
        assert!(r.fib.sync(Duration::from_secs(10)));
        assert!(our_routes().is_empty());
        let left = ip("nexthop show");
        assert!(
            !left.contains("proto 186") && left.trim().is_empty(),
            "objects left: {left}"
        );
        drop(r.watch);
    });
}

#[test]
fn a_restart_writes_only_the_differences() {
    in_netns(|| {
        links();
        // Every tenth prefix through the other next hop, every seventh through both (ECMP).
        let before = |i: u32| match (i % 7, i % 10) {
            (0, _) => to(&["10.0.0.2", "10.0.1.2"]),
            (_, 0) => to(&["10.0.1.2"]),
            _ => to(&["10.0.0.2"]),
        };
        {
            let r = start(FibConfig::default());
            release(&r);
            send(
                &r,
                (0..2000)
                    .map(|i| FibChange {
                        prefix: p(i),
                        want: before(i),
                    })
                    .collect(),
            );
            assert!(r.fib.sync(Duration::from_secs(10)));
            assert_eq!(our_routes().len(), 2000);
        }
        // Stopped: the routes stay in the kernel.
        assert_eq!(our_routes().len(), 2000);
        // While it was down: 0..100 gone, 2000..2100 new, 200..300 moved to 10.0.1.2.
        let after = |i: u32| {
            if (200..300).contains(&i) {
                to(&["10.0.1.2"])
            } else {
                before(i)
            }
        };
        let r = start(FibConfig::default());
        send(
            &r,
            (100..2100)
                .map(|i| FibChange {
                    prefix: p(i),
                    want: after(i),
                })
                .collect(),
        );
        // Routes of ours in the table: nothing is written before the start-up deferral
        // ends (then they are reconciled, not flushed and added again).
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(stat(&r, |s| &s.route_writes), 0);
        release(&r);
        assert!(r.fib.sync(Duration::from_secs(10)));
        assert_eq!(our_routes().len(), 2000);
        let moved = (100..2000).filter(|i| after(*i) != before(*i)).count() as u64;
        let writes = stat(&r, |s| &s.route_writes);
        let deletes = stat(&r, |s| &s.route_deletes);
        assert_eq!(
            (writes, deletes),
            (100 + moved, 100),
            "only the differences written"
        );
        assert_eq!(stat(&r, |s| &s.kept_at_start), 1900 - moved);
        drop(r.watch);
    });
}

/// The last run's objects are in the kernel but its routes are not (an operator flushed
/// them, or it was stopped while it removed them): the objects go, and the routes written
/// meanwhile under the same ids are not taken with them (they were refused with EINVAL
/// once the late delete had removed what they named, and retried forever).
#[test]
fn objects_left_without_their_routes_are_replaced_not_reused_by_mistake() {
    in_netns(|| {
        links();
        let want = |i: u32| match i % 3 {
            0 => to(&["10.0.0.2", "10.0.1.2"]),
            1 => to(&["10.0.1.2"]),
            _ => to(&["10.0.0.2"]),
        };
        let all = |n: u32| -> Vec<FibChange> {
            (0..n)
                .map(|i| FibChange {
                    prefix: p(i),
                    want: want(i),
                })
                .collect()
        };
        {
            let r = start(FibConfig::default());
            release(&r);
            send(&r, all(3000));
            assert!(r.fib.sync(Duration::from_secs(10)));
        }
        // Not `ip route flush`: it sends each route back as dumped, and the kernel refuses
        // a delete naming both an object and its next hop.
        let batch: String = our_routes()
            .iter()
            .map(|(dst, _)| format!("route del {dst} table main proto 186 metric 20\n"))
            .collect();
        let mut del = Command::new("ip")
            .args(["-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut del.stdin.take().unwrap(), batch.as_bytes()).unwrap();
        assert!(del.wait().unwrap().success());
        assert!(our_routes().is_empty());
        assert!(!ip("nexthop show").is_empty(), "the objects stay");
        let r = start(FibConfig::default());
        send(&r, all(3000));
        release(&r);
        assert!(r.fib.sync(Duration::from_secs(10)));
        assert_eq!(our_routes().len(), 3000);
        assert_eq!(stat(&r, |s| &s.failed), 0, "no route refused");
        assert_eq!(stat(&r, |s| &s.errors), 0, "no netlink error");
        drop(r.watch);
    });
}

#[test]
fn without_nexthop_objects_routes_carry_their_next_hops() {
    in_netns(|| {
        links();
        let r = start(FibConfig {
            nexthop_objects: false,
            ..FibConfig::default()
        });
        release(&r);
        send(
            &r,
            vec![
                FibChange {
                    prefix: p(1),
                    want: to(&["10.0.0.2"]),
                },
                FibChange {
                    prefix: p(2),
                    want: to(&["10.0.0.2", "10.0.1.2"]),
                },
            ],
        );
        assert!(r.fib.sync(Duration::from_secs(5)));
        let out = ip("route show table main proto 186");
        assert!(out.contains("20.0.1.0/24 via 10.0.0.2 dev v0"), "{out}");
        assert!(
            out.contains("nexthop via 10.0.0.2 dev v0")
                && out.contains("nexthop via 10.0.1.2 dev v2"),
            "{out}"
        );
        // The next hop moves: its routes are written again.
        ip("route add 10.0.0.2/32 via 10.0.1.2 dev v2");
        let began = Instant::now();
        while !ip("route show table main proto 186").contains("20.0.1.0/24 via 10.0.1.2 dev v2") {
            assert!(began.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(r.watch);
    });
}

#[test]
fn an_unreachable_next_hop_installs_nothing_until_it_resolves() {
    in_netns(|| {
        links();
        let r = start(FibConfig::default());
        release(&r);
        send(
            &r,
            vec![FibChange {
                prefix: p(1),
                want: to(&["192.0.2.7"]),
            }],
        );
        assert!(r.fib.sync(Duration::from_secs(5)));
        assert!(our_routes().is_empty());
        assert_eq!(stat(&r, |s| &s.unresolved), 1);
        ip("route add 192.0.2.0/24 via 10.0.0.2 dev v0");
        let began = Instant::now();
        while our_routes().len() != 1 {
            assert!(
                began.elapsed() < Duration::from_secs(5),
                "not installed once resolved"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Someone deletes it: written again.
        ip("route del 20.0.1.0/24 proto 186");
        let began = Instant::now();
        while our_routes().len() != 1 {
            assert!(
                began.elapsed() < Duration::from_secs(5),
                "drift not repaired"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(stat(&r, |s| &s.drift_repaired) >= 1);
        drop(r.watch);
    });
}

/// ECMP at SONiC's scale: 512 next-hop sets of 32 next hops, 256 of 64, 128 of 128, each a
/// kernel group of that many leaves (one per next hop: 128 gateways on one link), with a
/// route naming each; then every route withdrawn and every object gone.
#[test]
fn ecmp_groups_at_sonic_scale() {
    in_netns(|| {
        links();
        let r = start(FibConfig::default());
        release(&r);
        let gw = |i: u32| format!("10.0.0.{}", 2 + i);
        let mut changes = Vec::new();
        let mut shape = Vec::new();
        for (sets, width) in [(512u32, 32u32), (256, 64), (128, 128)] {
            for s in 0..sets {
                // Sets differ by where their run of `width` gateways starts (and by width).
                let nhs: Vec<String> = (0..width).map(|k| gw((s + k) % 128)).collect();
                let refs: Vec<&str> = nhs.iter().map(String::as_str).collect();
                let prefix = p(changes.len() as u32);
                changes.push(FibChange {
                    prefix,
                    want: to(&refs),
                });
                shape.push((prefix, width as usize));
            }
        }
        let n = changes.len();
        send(&r, changes);
        assert!(r.fib.sync(Duration::from_secs(60)));
        assert_eq!(our_routes().len(), n);
        assert_eq!(stat(&r, |s| &s.errors), 0, "the kernel refused none");
        assert_eq!(stat(&r, |s| &s.leaves), 128, "a leaf per gateway");
        // Each route's group holds its set's leaves (as `ip` reads the kernel).
        let groups: std::collections::HashMap<u64, usize> = {
            let out = ip("-json nexthop show");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            v.as_array()
                .unwrap()
                .iter()
                .filter_map(|o| Some((o["id"].as_u64()?, o["group"].as_array()?.len())))
                .collect()
        };
        let routes: std::collections::HashMap<String, u64> = our_routes()
            .into_iter()
            .filter_map(|(dst, id)| Some((dst, id?)))
            .collect();
        for (prefix, width) in &shape {
            let id = routes[&prefix.to_string()];
            assert_eq!(groups.get(&id), Some(width), "{prefix}");
        }
        send(
            &r,
            shape
                .iter()
                .map(|(prefix, _)| FibChange {
                    prefix: *prefix,
                    want: None,
                })
                .collect(),
        );
        assert!(r.fib.sync(Duration::from_secs(60)));
        assert!(our_routes().is_empty());
        assert!(ip("nexthop show").trim().is_empty(), "every object deleted");
        drop(r.watch);
    });
}
