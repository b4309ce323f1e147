//! What a shard shows operators: every path of a prefix with why the active one won,
//! sorted selections a chunk at a time, longest match, and the counting walk.

use ribshard_rib::{
    LoopChecks, Loops, Options, PathFilter, PathState, PeerInfo, Position, RouteAttrs, Shard, Step,
    WalkOp, Within,
};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Family, Nlri, Origin, Prefix};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

fn attrs(path: &[u32], med: Option<u32>, checks: &LoopChecks) -> Arc<RouteAttrs> {
    let mut v = vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence(path.iter().copied())),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
    ];
    v.extend(med.map(AttrValue::Med));
    Arc::new(RouteAttrs::from_attributes(
        &PathAttributes::canonical(v),
        &[198, 51, 100, 1],
        checks,
    ))
}

fn peer(i: u32) -> PeerInfo {
    PeerInfo {
        ebgp: true,
        router_id: 100 + i,
        address: u128::from(i),
        local_as: 65000,
        peer_as: 65001 + i,
        rr_cluster: None,
        rs_client: false,
    }
}

fn pfx(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap();
    match a.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v4) => Prefix::v4(v4, l.parse().unwrap()).unwrap(),
        IpAddr::V6(v6) => Prefix::v6(v6, l.parse().unwrap()).unwrap(),
    }
}

fn shard() -> Shard {
    let mut s = Shard::new(Options::default());
    for i in 0..4 {
        s.set_peer(i, peer(i));
        if i == 3 {
            let info = peer(i);
            s.set_import(
                i,
                std::sync::Arc::new(ribshard_rib::Import {
                    chain: std::sync::Arc::new(ribshard_policy::Chain::reject_all()),
                    ..ribshard_rib::Import::accept_all(ribshard_rib::source_of(&info))
                }),
            );
        }
    }
    s
}

#[test]
fn a_route_names_why_each_path_lost() {
    let mut s = shard();
    let plain = LoopChecks::default();
    let p = pfx("10.1.0.0/16");
    // Peer 0: the shortest path. Peer 1: longer. Peer 2: same length as peer 0, same
    // neighbor AS, higher MED (loses in its group). Peer 3: rejected by import policy.
    s.announce(0, &attrs(&[65001, 7], Some(5), &plain), [Nlri::new(p)]);
    s.announce(1, &attrs(&[65002, 8, 7], None, &plain), [Nlri::new(p)]);
    s.announce(2, &attrs(&[65001, 7], Some(10), &plain), [Nlri::new(p)]);
    let refused = attrs(&[65004, 7], None, &plain);
    s.announce(3, &refused, [Nlri::new(p)]);
    // A path holding our AS loops.
    let looping = LoopChecks {
        local_as: 65000,
        ..LoopChecks::default()
    };
    s.announce(
        1,
        &attrs(&[65002, 65000, 7], None, &looping),
        [Nlri {
            path_id: Some(9),
            prefix: p,
        }],
    );
    s.drain_changes();
    let explain = PathFilter {
        explain: true,
        ..PathFilter::default()
    };
    let v = s.route(&p, explain).unwrap();
    let states: Vec<(u32, PathState)> = v.paths.iter().map(|x| (x.path.peer, x.state)).collect();
    assert_eq!(
        states,
        [
            (
                0,
                PathState::Active {
                    over: Some(Step::Med)
                }
            ),
            (
                2,
                PathState::Inactive {
                    step: Some(Step::Med),
                    in_group: true
                }
            ),
            (
                1,
                PathState::Inactive {
                    step: Some(Step::AsPathLength),
                    in_group: false
                }
            ),
        ]
    );
    // Hidden paths only when asked for, with their reason.
    let all = s
        .route(
            &p,
            PathFilter {
                peer: None,
                hidden: true,
                explain: true,
                rejected: false,
            },
        )
        .unwrap();
    let hidden: Vec<(u32, PathState)> = all
        .paths
        .iter()
        .skip(3)
        .map(|x| (x.path.peer, x.state))
        .collect();
    assert_eq!(hidden.len(), 2);
    assert!(hidden.contains(&(3, PathState::Ineligible(ribshard_rib::Ineligible::Rejected))));
    assert!(hidden.contains(&(1, PathState::Ineligible(ribshard_rib::Ineligible::Loop))));
    // The rejected path names the policy that rejected it; `rejected` shows it alone.
    let rejected = all.paths.iter().find(|x| x.path.peer == 3).unwrap();
    assert_eq!(rejected.import.as_deref(), Some("policy reject"));
    let only = s
        .route(
            &p,
            PathFilter {
                rejected: true,
                explain: true,
                ..PathFilter::default()
            },
        )
        .unwrap();
    assert_eq!(only.paths.len(), 1);
    assert_eq!(only.paths[0].path.peer, 3);
    // One peer's paths (receive-protocol).
    let from1 = s
        .route(
            &p,
            PathFilter {
                peer: Some(1),
                hidden: false,
                explain: false,
                rejected: false,
            },
        )
        .unwrap();
    assert_eq!(from1.paths.len(), 1);
    assert_eq!(from1.paths[0].path.peer, 1);
    // Counts: peer 1 has two paths, one loop-free, none active.
    let c = s.peer_counts()[1][0];
    assert_eq!((c.received, c.accepted, c.active), (2, 1, 0));
    assert_eq!(s.peer_counts()[0][0].active, 1);
    // Peer 3's one announcement was rejected as it came; sent again unchanged it is a known
    // duplicate, not rejected again, and a new version of it is rejected.
    assert_eq!(s.peer_counters()[3].import_rejections, 1);
    assert_eq!(s.peer_counters()[3].duplicate_announcements, 0);
    s.announce(3, &refused, [Nlri::new(p)]);
    assert_eq!(s.peer_counters()[3].import_rejections, 1);
    assert_eq!(s.peer_counters()[3].duplicate_announcements, 1);
    // Kept stale through a graceful restart and sent again: refreshed, no duplicate.
    let mut w = s.walk(3, WalkOp::MarkStale([true, true]));
    while !s.walk_step(&mut w, 100) {}
    s.announce(3, &refused, [Nlri::new(p)]);
    assert_eq!(s.peer_counters()[3].duplicate_announcements, 1);
    s.announce(3, &attrs(&[65004, 8], None, &plain), [Nlri::new(p)]);
    assert_eq!(s.peer_counters()[3].import_rejections, 2);
    assert_eq!(s.peer_counts()[3][0].received, 1);
}

/// Each reason a path loops is told apart (BMP counts them apart, RFC 7854 section 4.8).
#[test]
fn loops_are_told_apart() {
    let checks = LoopChecks {
        local_as: 65000,
        router_id: 0x0a00_0001,
        cluster_ids: vec![0x0a00_00fe],
        ..LoopChecks::default()
    };
    let with = |path: &[u32], more: Vec<AttrValue>| {
        let mut v = vec![
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence(path.iter().copied())),
            AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
        ];
        v.extend(more);
        RouteAttrs::from_attributes(&PathAttributes::canonical(v), &[198, 51, 100, 1], &checks)
            .loops
    };
    let clean = with(&[65001], vec![]);
    assert!(!clean.any());
    assert_eq!(clean, Loops::NONE);
    let as_path = with(&[65001, 65000], vec![]);
    assert!(as_path.as_path() && !as_path.originator_id() && !as_path.cluster_list());
    let originator = with(
        &[],
        vec![AttrValue::OriginatorId(Ipv4Addr::new(10, 0, 0, 1))],
    );
    assert!(originator.originator_id() && !originator.as_path() && !originator.cluster_list());
    let cluster = with(
        &[],
        vec![AttrValue::ClusterList(vec![0x0a00_0009, 0x0a00_00fe])],
    );
    assert!(cluster.cluster_list() && !cluster.as_path() && !cluster.originator_id());
    let both = with(&[65000], vec![AttrValue::ClusterList(vec![0x0a00_00fe])]);
    assert_eq!(both, as_path.or(cluster));
    // Someone else's ids are no loop.
    let other = with(
        &[],
        vec![
            AttrValue::OriginatorId(Ipv4Addr::new(10, 0, 0, 2)),
            AttrValue::ClusterList(vec![0x0a00_0003]),
        ],
    );
    assert!(!other.any());
}

#[test]
fn selections_are_sorted_chunks_and_cover_the_table_once() {
    let mut s = shard();
    let a = attrs(&[65001], None, &LoopChecks::default());
    let mut all = Vec::new();
    for i in 0..1000u32 {
        let p = Prefix::V4 {
            addr: 0x0a00_0000 | (i.wrapping_mul(2654435761) & 0x00ff_ff00),
            len: 24 + (i % 3) as u8,
        }
        .masked();
        all.push(p);
        s.announce(0, &a, [Nlri::new(p)]);
    }
    s.announce(
        0,
        &a,
        [
            Nlri::new(pfx("2001:db8::/32")),
            Nlri::new(pfx("2001:db8:1::/48")),
        ],
    );
    s.drain_changes();
    all.sort();
    all.dedup();
    let select = |s: &Shard, f, after: Option<&Prefix>, within, n| -> Vec<Prefix> {
        let chosen = s.select(f, after, within, n);
        // Each comes with where it is: the same route, found without a lookup.
        for (p, at) in &chosen {
            assert_eq!(s.route_at(*at, PathFilter::default()).unwrap().prefix, *p);
        }
        chosen.into_iter().map(|(p, _)| p).collect()
    };
    let mut walked = Vec::new();
    let mut after = None;
    loop {
        let chunk = select(&s, Family::Ipv4Unicast, after.as_ref(), Within::All, 77);
        if chunk.is_empty() {
            break;
        }
        assert!(chunk.len() <= 77);
        after = chunk.last().copied();
        walked.extend(chunk);
    }
    assert_eq!(walked, all);
    assert_eq!(
        select(&s, Family::Ipv6Unicast, None, Within::All, 10),
        [pfx("2001:db8::/32"), pfx("2001:db8:1::/48")]
    );
    // longer / orlonger.
    s.announce(
        0,
        &a,
        [
            Nlri::new(pfx("192.0.2.0/24")),
            Nlri::new(pfx("192.0.2.128/25")),
            Nlri::new(pfx("192.0.0.0/16")),
        ],
    );
    s.drain_changes();
    let under = |p: &str, or_equal| Within::Under {
        prefix: pfx(p),
        or_equal,
    };
    assert_eq!(
        select(
            &s,
            Family::Ipv4Unicast,
            None,
            under("192.0.2.0/24", true),
            10
        ),
        [pfx("192.0.2.0/24"), pfx("192.0.2.128/25")]
    );
    assert_eq!(
        select(
            &s,
            Family::Ipv4Unicast,
            None,
            under("192.0.2.0/24", false),
            10
        ),
        [pfx("192.0.2.128/25")]
    );
    // Longest match of an address.
    assert_eq!(
        s.longest_match("192.0.2.200".parse().unwrap()),
        Some(pfx("192.0.2.128/25"))
    );
    assert_eq!(
        s.longest_match("192.0.2.1".parse().unwrap()),
        Some(pfx("192.0.2.0/24"))
    );
    assert_eq!(
        s.longest_match("192.0.9.1".parse().unwrap()),
        Some(pfx("192.0.0.0/16"))
    );
    assert_eq!(
        s.longest_match("2001:db8:1::5".parse().unwrap()),
        Some(pfx("2001:db8:1::/48"))
    );
    assert_eq!(s.longest_match("203.0.113.1".parse().unwrap()), None);
}

#[test]
fn the_counting_walk_visits_every_reported_prefix_once() {
    let mut s = shard();
    let a = attrs(&[65001], None, &LoopChecks::default());
    for i in 0..300u32 {
        s.announce(
            0,
            &a,
            [Nlri::new(Prefix::V4 {
                addr: i << 8,
                len: 24,
            })],
        );
    }
    s.announce(0, &a, [Nlri::new(pfx("2001:db8::/32"))]);
    s.drain_changes();
    let mut seen = Vec::new();
    let mut at = Some(Position::START);
    while let Some(from) = at {
        at = s.count_step(from, 64, |p, path| {
            assert_eq!(path.peer, 0);
            seen.push(p);
        });
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 301);
}
