//! The shard table: best paths, coalesced change journals, chunked peer-down walks, checked
//! against a straightforward model on random sequences of events.

use proptest::prelude::*;
use ribshard_rib::{
    best_path, Candidate, FamilyCounts, LoopChecks, Multipath, Options, PathFilter, PathState,
    PeerCounts, PeerInfo, RouteAttrs, Shard,
};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Nlri, Origin, Prefix};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

fn attrs(path: &[u32], lp: Option<u32>, med: Option<u32>) -> Arc<RouteAttrs> {
    let mut v = vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence(path.iter().copied())),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
    ];
    v.extend(lp.map(AttrValue::LocalPref));
    v.extend(med.map(AttrValue::Med));
    Arc::new(RouteAttrs::from_attributes(
        &PathAttributes::canonical(v),
        &[198, 51, 100, 1],
        &LoopChecks::default(),
    ))
}

fn peer(i: u32, ebgp: bool) -> PeerInfo {
    PeerInfo {
        ebgp,
        router_id: 100 + i,
        address: u128::from(i),
        local_as: 65000,
        peer_as: 65001 + i,
        rr_cluster: None,
        rs_client: false,
    }
}

fn p(i: u32) -> Prefix {
    Prefix::V4 {
        addr: 0x0a00_0000 + (i << 8),
        len: 24,
    }
}

#[test]
fn best_path_and_coalesced_changes() {
    let mut s = Shard::new(Options::default());
    s.set_peer(0, peer(0, true));
    s.set_peer(1, peer(1, true));
    let long = attrs(&[65001, 1, 2, 3], None, None);
    let short = attrs(&[65002, 3], None, None);
    s.announce(0, &long, [Nlri::new(p(1))]);
    // Five changes before the shard decides: one decision, one change.
    for _ in 0..5 {
        s.announce(1, &short, [Nlri::new(p(1))]);
        s.withdraw(1, [Nlri::new(p(1))]);
    }
    s.announce(1, &short, [Nlri::new(p(1))]);
    let c = s.drain_changes();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].best.as_ref().unwrap().peer, 1);
    // Nothing new: nothing to report.
    s.announce(1, &short, [Nlri::new(p(1))]);
    assert!(s.drain_changes().is_empty());
    // The best path goes: the other takes over; then the prefix is gone.
    s.withdraw(1, [Nlri::new(p(1))]);
    assert_eq!(s.drain_changes()[0].best.as_ref().unwrap().peer, 0);
    s.withdraw(0, [Nlri::new(p(1))]);
    let c = s.drain_changes();
    assert!(c[0].best.is_none());
    assert_eq!(s.prefixes(), 0);
}

#[test]
fn import_policy_reject_hides_paths() {
    let mut s = Shard::new(Options::default());
    s.set_peer(0, peer(0, true));
    s.set_import(
        0,
        Arc::new(ribshard_rib::Import {
            chain: Arc::new(ribshard_policy::Chain::reject_all()),
            ..ribshard_rib::Import::accept_all(ribshard_rib::source_of(&peer(0, true)))
        }),
    );
    s.announce(0, &attrs(&[65001], None, None), [Nlri::new(p(1))]);
    assert!(s.drain_changes().is_empty());
    assert_eq!(
        s.paths(),
        1,
        "kept in the Adj-RIB-In for soft reconfiguration"
    );
}

#[test]
fn peer_down_in_chunks() {
    let mut s = Shard::new(Options::default());
    s.set_peer(0, peer(0, true));
    s.set_peer(1, peer(1, true));
    let a = attrs(&[65001], None, None);
    let b = attrs(&[65002, 9], None, None);
    s.announce(0, &a, (0..1000).map(|i| Nlri::new(p(i))));
    s.announce(1, &b, (0..500).map(|i| Nlri::new(p(i))));
    s.drain_changes();
    let mut walk = s.peer_down(0);
    let mut steps = 0;
    while !s.peer_down_step(&mut walk, 100) {
        steps += 1;
    }
    assert_eq!(steps, 9);
    let c = s.drain_changes();
    assert_eq!(c.len(), 1000);
    assert_eq!(c.iter().filter(|c| c.best.is_some()).count(), 500);
    assert_eq!(s.prefixes(), 500);
}

/// The model of one prefix: (peer, path id) -> (attribute set index, arrival).
type Model = BTreeMap<(u32, u32), (usize, u32)>;

#[derive(Clone, Debug)]
enum Op {
    Announce {
        peer: u32,
        prefix: u32,
        path_id: u32,
        attrs: usize,
    },
    Withdraw {
        peer: u32,
        prefix: u32,
        path_id: u32,
    },
    PeerDown {
        peer: u32,
    },
    Drain,
    /// Decided with no one told ([`Shard::decide_unreported`]).
    Quiet,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..4, 0u32..6, 0u32..2, 0usize..5).prop_map(|(peer, prefix, path_id, attrs)| Op::Announce { peer, prefix, path_id, attrs }),
        3 => (0u32..4, 0u32..6, 0u32..2).prop_map(|(peer, prefix, path_id)| Op::Withdraw { peer, prefix, path_id }),
        1 => (0u32..4).prop_map(|peer| Op::PeerDown { peer }),
        2 => Just(Op::Drain),
        1 => Just(Op::Quiet),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// After any sequence, the shard's best paths and the Loc-RIB rebuilt from its change
    /// journal both equal a straightforward computation over the surviving paths.
    #[test]
    fn matches_a_straightforward_model(ops in prop::collection::vec(op(), 1..80)) {
        let pool = [
            attrs(&[65001, 1], None, None),
            attrs(&[65002, 2, 3], Some(200), None),
            attrs(&[65001, 4], None, Some(10)),
            attrs(&[65003], None, Some(5)),
            attrs(&[], Some(100), None),
        ];
        let peers: Vec<PeerInfo> = (0..4).map(|i| peer(i, i != 3)).collect();
        let mut s = Shard::new(Options::default());
        for (i, pi) in peers.iter().enumerate() {
            s.set_peer(i as u32, *pi);
        }
        s.record_post_policy(true);
        let mut model: BTreeMap<u32, Model> = BTreeMap::new();
        let mut loc_rib: BTreeMap<Prefix, (u32, u32)> = BTreeMap::new();
        // The post-policy Adj-RIB-In as a monitoring station rebuilds it from the changes.
        let mut post_policy = PostPolicy::new();
        let mut arrival = 0u32;
        let apply = |s: &mut Shard, loc_rib: &mut BTreeMap<Prefix, (u32, u32)>, pp: &mut PostPolicy| {
            take_post_policy(s, pp);
            for c in s.drain_changes() {
                match c.best {
                    Some(b) => { loc_rib.insert(c.prefix, (b.peer, b.path_id)); }
                    None => { loc_rib.remove(&c.prefix); }
                }
            }
        };
        // Peer-down walks go on between later events, as in a shard thread: a step after
        // each event of another peer, and a peer's walks are finished before its own next
        // event is applied.
        let mut walks: Vec<ribshard_rib::Walk> = Vec::new();
        for o in &ops {
            let of = match *o {
                Op::Announce { peer, .. } | Op::Withdraw { peer, .. } | Op::PeerDown { peer } => Some(peer),
                Op::Drain | Op::Quiet => None,
            };
            let (mine, others): (Vec<_>, Vec<_>) = walks.drain(..).partition(|w| Some(w.peer) == of);
            walks = others;
            for mut w in mine {
                while !s.peer_down_step(&mut w, 1) {}
            }
            if let Some(mut w) = walks.pop() {
                if !s.peer_down_step(&mut w, 1) {
                    walks.push(w);
                }
            }
            match *o {
                Op::Announce { peer, prefix, path_id, attrs } => {
                    arrival += 1;
                    let e = model.entry(prefix).or_default();
                    match e.get(&(peer, path_id)) {
                        Some((a, _)) if *a == attrs => {}
                        _ => { e.insert((peer, path_id), (attrs, arrival)); }
                    }
                    s.announce(peer, &pool[attrs], [Nlri { path_id: Some(path_id), prefix: p(prefix) }]);
                }
                Op::Withdraw { peer, prefix, path_id } => {
                    if let Some(e) = model.get_mut(&prefix) { e.remove(&(peer, path_id)); }
                    s.withdraw(peer, [Nlri { path_id: Some(path_id), prefix: p(prefix) }]);
                }
                Op::PeerDown { peer } => {
                    for e in model.values_mut() { e.retain(|(pe, _), _| *pe != peer); }
                    walks.push(s.peer_down(peer));
                }
                Op::Drain => apply(&mut s, &mut loc_rib, &mut post_policy),
                Op::Quiet => {
                    s.decide_unreported();
                    take_post_policy(&mut s, &mut post_policy);
                    // What was decided unreported is the Loc-RIB later changes start from.
                    for prefix in 0..6u32 {
                        match s.reported(&p(prefix)) {
                            Some(b) => { loc_rib.insert(p(prefix), (b.peer, b.path_id)); }
                            None => { loc_rib.remove(&p(prefix)); }
                        }
                    }
                }
            }
        }
        for mut w in walks {
            while !s.peer_down_step(&mut w, 2) {}
        }
        apply(&mut s, &mut loc_rib, &mut post_policy);
        let mut want_post_policy = PostPolicy::new();
        for prefix in 0..6u32 {
            let paths: Vec<((u32, u32), (usize, u32))> = model.get(&prefix).map(|m| m.iter().map(|(k, v)| (*k, *v)).collect()).unwrap_or_default();
            let cands: Vec<Candidate> = paths.iter().map(|((pe, _), (a, arr))| {
                let ra = &pool[*a];
                let info = peers[*pe as usize];
                Candidate {
                    llgr_stale: ra.llgr_stale,
                    // Sessions discard LOCAL_PREF from eBGP peers (RFC 7606 section 7.5): one
                    // in a set is iBGP's or import policy's, and counts.
                    local_pref: ra.local_pref.unwrap_or(100),
                    as_path_len: ra.as_path_len,
                    origin: ra.origin,
                    med: ra.med,
                    neighbor_as: ra.neighbor_as.unwrap_or(info.local_as),
                    ebgp: info.ebgp,
                    igp_cost: 0,
                    router_id: info.router_id,
                    cluster_list_len: 0,
                    peer_address: info.address,
                    arrival: *arr,
                }
            }).collect();
            let want = best_path(&cands, &Options::default()).map(|i| paths[i].0);
            let got = s.best(&p(prefix)).map(|b| (b.peer, b.path_id));
            prop_assert_eq!(got, want, "prefix {}", prefix);
            prop_assert_eq!(loc_rib.get(&p(prefix)).copied(), want, "journal, prefix {}", prefix);
        }
        // The counts kept as paths come and go equal a recount of the table.
        let mut want = vec![[PeerCounts::default(); 2]; 4];
        let mut family = FamilyCounts::default();
        for prefix in 0..6u32 {
            let Some(v) = s.route(&p(prefix), PathFilter { peer: None, hidden: true, explain: true, rejected: false }) else {
                continue;
            };
            family.prefixes += 1;
            // The brief view (no explanations, the active path as reported) agrees with the
            // explained one on every path's standing and order.
            let brief = s.route(&p(prefix), PathFilter { peer: None, hidden: true, explain: false, rejected: false }).unwrap();
            let standing = |v: &ribshard_rib::RouteView| -> Vec<(u32, u32, u8)> {
                v.paths.iter().map(|x| (x.path.peer, x.path.path_id, match x.state {
                    PathState::Active { .. } => 0,
                    PathState::Inactive { .. } => 1,
                    PathState::Ineligible(_) => 2,
                })).collect()
            };
            prop_assert_eq!(standing(&brief), standing(&v));
            for pv in &v.paths {
                if pv.path.accepted() {
                    want_post_policy.insert((p(prefix), pv.path.peer, pv.path.path_id), pv.path.attrs.clone());
                }
                let c = &mut want[pv.path.peer as usize][0];
                c.received += 1;
                c.accepted += u32::from(pv.path.accepted());
                family.paths += 1;
                if matches!(pv.state, PathState::Active { .. }) {
                    c.active += 1;
                    family.active += 1;
                }
            }
        }
        let mut got = s.peer_counts().to_vec();
        got.resize(4, [PeerCounts::default(); 2]);
        prop_assert_eq!(got, want);
        prop_assert_eq!(s.family_counts(ribshard_wire::Family::Ipv4Unicast), family);
        // The post-policy changes, replayed in order, leave the accepted paths as they are.
        prop_assert_eq!(post_policy, want_post_policy);
    }
}

/// The post-policy Adj-RIB-In a monitoring station keeps: (prefix, peer, path id) -> set.
type PostPolicy = BTreeMap<(Prefix, u32, u32), Arc<RouteAttrs>>;

fn take_post_policy(s: &mut Shard, pp: &mut PostPolicy) {
    for c in s.drain_post_policy() {
        match c.attrs {
            Some(a) => {
                pp.insert((c.prefix, c.peer, c.path_id), a);
            }
            None => {
                pp.remove(&(c.prefix, c.peer, c.path_id));
            }
        }
    }
}

/// Import policy decides what the post-policy Adj-RIB-In holds: a rejected path leaves it,
/// a re-import under a policy that accepts brings it back, with the policy's attributes.
#[test]
fn post_policy_changes_follow_import_policy() {
    let mut s = Shard::new(Options::default());
    s.set_peer(0, peer(0, true));
    s.record_post_policy(true);
    let reject = Arc::new(ribshard_rib::Import {
        chain: Arc::new(ribshard_policy::Chain::reject_all()),
        ..ribshard_rib::Import::accept_all(ribshard_rib::source_of(&peer(0, true)))
    });
    let a = attrs(&[65001], None, None);
    s.announce(0, &a, [Nlri::new(p(1))]);
    let c = s.drain_post_policy();
    assert_eq!(c.len(), 1);
    assert!(c[0].attrs.as_ref().is_some_and(|x| Arc::ptr_eq(x, &a)));
    s.set_import(0, reject);
    let mut w = s.walk(0, ribshard_rib::WalkOp::Reimport);
    while !s.walk_step(&mut w, 10) {}
    let c = s.drain_post_policy();
    assert_eq!(
        (c.len(), c[0].prefix, c[0].attrs.is_none()),
        (1, p(1), true)
    );
    s.set_import(
        0,
        Arc::new(ribshard_rib::Import::accept_all(ribshard_rib::source_of(
            &peer(0, true),
        ))),
    );
    let mut w = s.walk(0, ribshard_rib::WalkOp::Reimport);
    while !s.walk_step(&mut w, 10) {}
    let c = s.drain_post_policy();
    assert_eq!(c.len(), 1);
    assert!(c[0].attrs.is_some());
    // A peer going down takes its paths out; off, nothing is recorded.
    let mut w = s.peer_down(0);
    while !s.peer_down_step(&mut w, 10) {}
    assert_eq!(s.drain_post_policy().len(), 1);
    s.record_post_policy(false);
    s.announce(0, &a, [Nlri::new(p(2))]);
    assert!(s.drain_post_policy().is_empty());
}

/// A change names the best path reported before it, even once that path is withdrawn or
/// replaced (export compares what each group was sent with what it gets now).
#[test]
fn changes_carry_the_old_best() {
    let mut s = Shard::new(Options::default());
    s.set_peer(0, peer(0, true));
    let a = attrs(&[65001, 1], None, None);
    let b = attrs(&[65001, 2], None, None);
    s.announce(0, &a, [Nlri::new(p(1)), Nlri::new(p(2))]);
    assert_eq!(s.drain_changes().len(), 2);
    s.announce(0, &b, [Nlri::new(p(1))]);
    s.withdraw(0, [Nlri::new(p(2))]);
    let mut c = s.drain_changes();
    c.sort_by_key(|c| c.prefix);
    assert_eq!(c.len(), 2);
    assert!(Arc::ptr_eq(&c[0].old.as_ref().unwrap().attrs, &a));
    assert!(Arc::ptr_eq(&c[0].best.as_ref().unwrap().attrs, &b));
    assert!(Arc::ptr_eq(&c[1].old.as_ref().unwrap().attrs, &a));
    assert!(c[1].best.is_none());
    assert_eq!(s.paths(), 1);
    assert_eq!(s.prefixes(), 1);
}

#[test]
fn multipath_keeps_the_equal_cost_set() {
    // Peers 0 and 1 in AS 65001 and 65002 (first AS of their paths), 2 in AS 65001 too with
    // a longer path, 3 in AS 65001 with a MED.
    let single = Options {
        multipath: Some(Multipath { multiple_as: false }),
        ..Options::default()
    };
    let multiple = Options {
        multipath: Some(Multipath { multiple_as: true }),
        ..Options::default()
    };
    for (o, want) in [
        (Options::default(), vec![0]),
        (single, vec![0, 4]),
        (multiple, vec![0, 1, 4]),
    ] {
        let mut s = Shard::new(o);
        for i in 0..5 {
            s.set_peer(i, peer(i, true));
        }
        s.announce(0, &attrs(&[65001, 7], None, None), [Nlri::new(p(1))]);
        s.announce(1, &attrs(&[65002, 7], None, None), [Nlri::new(p(1))]);
        s.announce(2, &attrs(&[65001, 7, 8], None, None), [Nlri::new(p(1))]);
        s.announce(3, &attrs(&[65001, 7], None, Some(20)), [Nlri::new(p(1))]);
        s.announce(4, &attrs(&[65001, 9], None, None), [Nlri::new(p(1))]);
        s.drain_changes();
        let set: Vec<u32> = s.multipath(&p(1)).iter().map(|x| x.peer).collect();
        assert_eq!(set, want, "{o:?}");
        assert_eq!(s.multipath_prefixes(), usize::from(want.len() > 1), "{o:?}");
        // The best path alone is reported for advertisement.
        assert_eq!(s.reported(&p(1)).map(|x| x.peer), Some(0));
    }
}

/// A re-shard moves each prefix whole: its paths, the best path last reported and a pending
/// decision; nothing is reported again because of the move, and later changes diff against
/// what was reported before it.
#[test]
fn move_into_keeps_reported_state_and_pending_work() {
    use ribshard_rib::shard_of;
    let mut s = Shard::new(Options::default());
    s.set_peer(0, peer(0, true));
    s.set_peer(1, peer(1, true));
    let a = attrs(&[65001, 1], None, None);
    let b = attrs(&[65002, 1, 2], None, None);
    for i in 0..100 {
        s.announce(0, &a, [Nlri::new(p(i))]);
        s.announce(1, &b, [Nlri::new(p(i))]);
    }
    // Peer 2's five paths are rejected by import policy, counted as they come.
    s.set_peer(2, peer(2, true));
    s.set_import(
        2,
        std::sync::Arc::new(ribshard_rib::Import {
            chain: std::sync::Arc::new(ribshard_policy::Chain::reject_all()),
            ..ribshard_rib::Import::accept_all(ribshard_rib::source_of(&peer(2, true)))
        }),
    );
    s.announce(2, &a, (0..5).map(|i| Nlri::new(p(i))));
    assert_eq!(s.drain_changes().len(), 100);
    // Ten prefixes lose their best path and are not decided yet when the shard moves.
    for i in 0..10 {
        s.withdraw(0, [Nlri::new(p(i))]);
    }
    let mut into: Vec<Shard> = (0..3).map(|_| Shard::new(Options::default())).collect();
    s.move_into(&mut into);
    assert_eq!(into.iter().map(Shard::prefixes).sum::<usize>(), 100);
    assert_eq!(into.iter().map(Shard::paths).sum::<usize>(), 195);
    // The rejections counted before the move are still counted, once, over the shards.
    let rejections = |s: &Shard| s.peer_counters().get(2).map_or(0, |c| c.import_rejections);
    assert_eq!(into.iter().map(rejections).sum::<u32>(), 5);
    let mut changes = Vec::new();
    for (k, t) in into.iter_mut().enumerate() {
        for i in 0..100 {
            let owned = shard_of(&p(i), 3) == k;
            assert_eq!(
                t.reported(&p(i)).is_some(),
                owned,
                "prefix {i} in shard {k}"
            );
        }
        assert_eq!(t.peer(1), peer(1, true), "peers are known everywhere");
        changes.extend(t.drain_changes());
    }
    // Only the ten withdrawn before the move change, from the old best to the other path.
    assert_eq!(changes.len(), 10);
    for c in &changes {
        assert_eq!(c.old.as_ref().map(|o| o.peer), Some(0));
        assert_eq!(c.best.as_ref().map(|o| o.peer), Some(1));
    }
    // A path announced after the move is younger than every path moved in.
    let t = &mut into[shard_of(&p(50), 3)];
    let moved = t.reported(&p(50)).map(|b| b.arrival).unwrap();
    t.announce(0, &b, [Nlri::new(p(50))]);
    let c = t.drain_changes();
    assert!(c[0].best.as_ref().unwrap().arrival > moved);
    assert!(c[0].best.as_ref().unwrap().arrival > 200);
}

/// A dump order keeps where each prefix lies, not the prefix: a place whose prefix was
/// removed reads as nothing, and one given to a prefix added since reads as nothing until
/// that prefix is decided (its decision reaches the dump's members live).
#[test]
fn dump_places_read_the_table_as_it_is() {
    let mut s = Shard::new(Options::default());
    s.set_peer(0, peer(0, true));
    let a = attrs(&[65001, 7], None, None);
    s.announce(0, &a, [Nlri::new(p(1)), Nlri::new(p(2))]);
    s.drain_changes();
    let order = s.reported_by_set();
    assert_eq!(order.sets.len(), 1);
    let places = order.places_of(0, 0).to_vec();
    let read =
        |s: &Shard| -> Vec<Option<Prefix>> { places.iter().map(|at| s.dump_prefix(*at)).collect() };
    assert_eq!(read(&s), vec![Some(p(1)), Some(p(2))]);
    // Withdrawn but not decided: still the best path last reported, still read.
    s.withdraw(0, [Nlri::new(p(1))]);
    assert_eq!(read(&s), vec![Some(p(1)), Some(p(2))]);
    s.drain_changes();
    assert_eq!(read(&s), vec![None, Some(p(2))]);
    // A prefix added since takes the freed place (the table reuses it): not read until
    // decided, then read as itself (the walk reads such a prefix as it is now).
    s.announce(0, &a, [Nlri::new(p(3))]);
    assert_eq!(read(&s), vec![None, Some(p(2))]);
    let changes = s.drain_changes();
    assert_eq!(changes.len(), 1);
    assert_eq!(read(&s), vec![Some(p(3)), Some(p(2))]);
}

proptest! {
    /// A dump order holds every reported prefix once, under the set and source of its best
    /// path, the groups in key order; and two tables holding the same sets (two shards)
    /// order those sets alike, whatever order the routes came in.
    #[test]
    fn dump_order_groups_every_best_path_once_in_key_order(
        routes in proptest::collection::vec((0u32..400, 0u32..3, 0usize..6), 1..600),
    ) {
        let sets: Vec<Arc<RouteAttrs>> = (0..6u32).map(|i| attrs(&[65001, 100 + i], None, None)).collect();
        let mut s = Shard::new(Options::default());
        let mut t = Shard::new(Options::default());
        for i in 0..3 {
            s.set_peer(i, peer(i, true));
            t.set_peer(i, peer(i, true));
        }
        for &(n, from, set) in &routes {
            s.announce(from, &sets[set], [Nlri::new(p(n))]);
        }
        // The same routes in the other order into another table.
        for &(n, from, set) in routes.iter().rev() {
            t.announce(from, &sets[set], [Nlri::new(p(n))]);
        }
        s.drain_changes();
        t.drain_changes();
        for table in [&s, &t] {
            let order = table.reported_by_set();
            let mut seen = std::collections::BTreeSet::new();
            for (i, set) in order.sets.iter().enumerate() {
                let places = order.places_of(i, 0);
                prop_assert_eq!(places.len(), set.len as usize);
                for at in places {
                    let prefix = table.dump_prefix(*at).unwrap();
                    let best = table.reported(&prefix).unwrap();
                    prop_assert!(Arc::ptr_eq(&best.attrs, &set.attrs));
                    prop_assert_eq!(best.peer, set.key.1);
                    prop_assert!(seen.insert(prefix), "a prefix twice");
                }
            }
            prop_assert_eq!(seen.len(), table.prefixes());
            prop_assert!(order.sets.windows(2).all(|w| w[0].key <= w[1].key));
        }
        let keys = |x: &Shard| -> std::collections::BTreeSet<_> { x.reported_by_set().sets.iter().map(|s| s.key).collect() };
        let (ks, kt) = (keys(&s), keys(&t));
        // Both orders are of one key list: the keys both have come in one order.
        let both: Vec<_> = ks.intersection(&kt).copied().collect();
        let in_s: Vec<_> = s.reported_by_set().sets.iter().map(|x| x.key).filter(|k| kt.contains(k)).collect();
        let in_t: Vec<_> = t.reported_by_set().sets.iter().map(|x| x.key).filter(|k| ks.contains(k)).collect();
        prop_assert_eq!(&in_s, &both);
        prop_assert_eq!(&in_t, &both);
    }
}
