//! Questions the pipeline answers between its routing work: route walks (sorted, chunked,
//! across a re-shard, under sustained routing) and convergence telemetry.

mod pipeline_fixture;

use pipeline_fixture::*;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::Batcher;
use ribshard_rib::PeerInfo;
use ribshard_wire::{Family, Nlri, Prefix};
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// A walk of the routes returns every prefix once, in order, a chunk at a time from each
/// shard, with the active path the Loc-RIB holds; it goes on after a re-shard from where it
/// was; exact and longest-match lookups find their prefix whatever shard owns it.
#[test]
fn route_walks_are_sorted_chunked_and_survive_a_reshard() {
    use ribshard_engine::pipeline::{RouteQuery, Selection};
    use ribshard_rib::{PathFilter, PathState, Within};
    let p = start(4, 2);
    for i in 0..2 {
        send_all(&p, p.peer_up(i, upstream(i), None).0);
    }
    let mut pool = Pool(HashMap::new());
    let mut want = Vec::new();
    for i in 0..3000u32 {
        let pf = Prefix::v4(
            Ipv4Addr::from(0x0a00_0000 | (i.wrapping_mul(2_654_435_761) & 0x00ff_ff00)),
            24,
        )
        .unwrap();
        want.push(pf);
        for peer in 0..2 {
            let mut b = Batcher::new(peer, p.shards());
            b.announce(
                &pool.get(peer, (i % 3) as u8, Family::Ipv4Unicast),
                Nlri::new(pf),
            );
            flush(&p, &mut b);
        }
    }
    want.sort();
    want.dedup();
    p.barrier();
    let rib = p.loc_rib();
    assert_eq!(rib.iter().map(|(pf, _)| *pf).collect::<Vec<_>>(), want);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let query = |select| RouteQuery {
        select,
        after: None,
        max_paths: 100,
        filter: PathFilter::default(),
        advertised: None,
        withheld: None,
        render: None,
        matcher: None,
    };
    let mut walk = p.walk_routes(
        query(Selection::Table(Family::Ipv4Unicast, Within::All)),
        None,
    );
    let mut got = Vec::new();
    let mut resharded = false;
    while let Some(routes) = rt.block_on(walk.next()) {
        for r in routes {
            assert_eq!(r.view.paths.len(), 2, "{}", r.view.prefix);
            assert!(matches!(r.view.paths[0].state, PathState::Active { .. }));
            got.push((r.view.prefix, r.view.paths[0].path.peer));
        }
        if !resharded && got.len() > 1000 {
            p.reconfigure(2, 2);
            resharded = true;
        }
    }
    assert!(resharded);
    let want_active: Vec<(Prefix, u32)> = rib.iter().map(|(pf, b)| (*pf, b.peer)).collect();
    assert_eq!(got, want_active);
    // Exact and longest match.
    let target = want[1234];
    let exact = rt
        .block_on(p.walk_routes(query(Selection::Exact(target)), None).next())
        .unwrap();
    assert_eq!(exact.len(), 1);
    assert_eq!(exact[0].view.prefix, target);
    let Prefix::V4 { addr, .. } = target else {
        unreachable!()
    };
    let inside = std::net::IpAddr::V4(Ipv4Addr::from(addr | 77));
    let longest = rt
        .block_on(
            p.walk_routes(query(Selection::Longest(inside)), None)
                .next(),
        )
        .unwrap();
    assert_eq!(longest[0].view.prefix, target);
    // One shard's routes: exactly those it owns.
    let mut only = p.walk_routes(
        query(Selection::Table(Family::Ipv4Unicast, Within::All)),
        Some(1),
    );
    let mut from_one = Vec::new();
    while let Some(routes) = rt.block_on(only.next()) {
        from_one.extend(routes.into_iter().map(|r| {
            assert_eq!(r.shard, 1);
            r.view.prefix
        }));
    }
    let owned: Vec<Prefix> = want
        .iter()
        .copied()
        .filter(|pf| ribshard_rib::shard_of(pf, 2) == 1)
        .collect();
    assert_eq!(from_one, owned);
    p.stop();
}

/// Walks go on while routing never stops: a shard kept busy answers a question that
/// continues a walk's selection at least every 100 ms, and one that needs a scan of the
/// table at least every second, so `show route` during a long convergence still finishes,
/// several at once too.
#[test]
fn route_walks_finish_while_routing_keeps_shards_busy() {
    use ribshard_engine::pipeline::{RouteQuery, Selection};
    use ribshard_rib::{PathFilter, Within};
    use std::sync::atomic::{AtomicBool, Ordering};
    let p = start(2, 2);
    send_all(&p, p.peer_up(0, upstream(0), None).0);
    send_all(&p, p.peer_up(1, upstream(1), None).0);
    let mut pool = Pool(HashMap::new());
    let attrs = pool.get(0, 0, Family::Ipv4Unicast);
    let mut b = Batcher::new(0, p.shards());
    let held: Vec<Prefix> = (0..2000u32)
        .map(|i| Prefix::v4(Ipv4Addr::from(0x0a00_0000 | (i << 8)), 24).unwrap())
        .collect();
    for pf in &held {
        b.announce(&attrs, Nlri::new(*pf));
    }
    flush(&p, &mut b);
    p.barrier();
    // Peer 1 flaps a block of its own without pause until the walk is done.
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let churn = {
        let (p, done) = (p.clone(), done.clone());
        let attrs = pool.get(1, 1, Family::Ipv4Unicast);
        std::thread::spawn(move || {
            let mut b = Batcher::new(1, p.shards());
            let mut rounds = 0u32;
            while !done.load(Ordering::Relaxed) {
                for i in 0..500u32 {
                    let n =
                        Nlri::new(Prefix::v4(Ipv4Addr::from(0x0b00_0000 | (i << 8)), 24).unwrap());
                    if rounds % 2 == 0 {
                        b.announce(&attrs, n);
                    } else {
                        b.withdraw(n);
                    }
                }
                flush(&p, &mut b);
                rounds += 1;
            }
            rounds
        })
    };
    // Long enough for the shards to count themselves loaded.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Four walks at once: each needs a scan of the table of its own, which a loaded shard
    // makes at most once a second; every one still finishes.
    let walks: Vec<_> = (0..4)
        .map(|_| {
            let p = p.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let mut walk = p.walk_routes(
                    RouteQuery {
                        select: Selection::Table(Family::Ipv4Unicast, Within::All),
                        after: None,
                        max_paths: 200,
                        filter: PathFilter::default(),
                        advertised: None,
                        withheld: None,
                        render: None,
                        matcher: None,
                    },
                    None,
                );
                let mut got = Vec::new();
                while let Some(routes) = rt.block_on(walk.next()) {
                    got.extend(routes.into_iter().map(|r| r.view.prefix));
                }
                got
            })
        })
        .collect();
    let walked: Vec<Vec<Prefix>> = walks.into_iter().map(|w| w.join().unwrap()).collect();
    done.store(true, Ordering::Relaxed);
    let rounds = churn.join().unwrap();
    assert!(rounds > 1, "routing kept busy: {rounds} rounds");
    let mut want = held.clone();
    want.sort();
    for mut got in walked {
        got.retain(|pf| held.contains(pf));
        assert_eq!(got, want);
    }
    p.stop();
}

/// Convergence telemetry: batches stamped as sessions stamp them are measured when decided
/// and when written for a group; a marker behind a peer's routes reports when each group has
/// sent them.
#[test]
fn telemetry_measures_batches_and_markers() {
    for (s, u) in [(1, 0), (2, 2)] {
        let p = start(s, u);
        send_all(&p, p.peer_up(0, upstream(0), None).0);
        let m = 0;
        let info = PeerInfo {
            address: 0x100,
            peer_as: MEMBERS[m].2,
            ..upstream(0)
        };
        let id = MemberId {
            peer: member_peer(m),
            epoch: 0,
        };
        let (msgs, joined) = p.peer_up(
            member_peer(m),
            info,
            Some((spec(m), id, Box::new(TestSink::new()))),
        );
        send_all(&p, msgs);
        let group = joined.unwrap().group;
        let t = p.telemetry().clone();
        t.established(0);
        let mut pool = Pool(HashMap::new());
        let mut b = p.batcher(0);
        b.stamp(std::time::Instant::now);
        for i in 0..20u8 {
            let pf = prefix(i);
            b.announce(&pool.get(0, 0, pf.family()), Nlri::new(pf));
        }
        flush(&p, &mut b);
        let token = t.end_of_rib(0, p.groups()).expect("the first End-of-RIB");
        assert_eq!(t.end_of_rib(0, p.groups()), None, "counted once");
        send_all(&p, p.marker(0, token));
        p.barrier();
        assert!(t.decided.snapshot().count() >= 1, "{s}x{u}");
        let written = t.written_snapshot();
        assert!(
            written
                .iter()
                .any(|(g, _, h)| *g == group && h.count() >= 1),
            "{s}x{u}: {written:?}"
        );
        let n = t.neighbors();
        let (_, c) = n.iter().find(|(peer, _)| *peer == 0).unwrap();
        assert!(c.end_of_rib_received.is_some());
        assert!(c.groups.contains_key(&group), "{s}x{u}: {c:?}");
        p.stop();
    }
}
