//! Next-hop resolution in a shard (RFC 4271 section 9.1.2.1): a path whose next hop does
//! not resolve is not eligible, the resolving route's metric is the IGP cost, and a change
//! of resolution decides again exactly the prefixes using the next hops whose answer
//! changed (through the next-hop index, including after a re-shard).

use proptest::prelude::*;
use ribshard_rib::{
    Ineligible, LoopChecks, Multipath, Options, PathFilter, PathState, PeerInfo, Resolution,
    Resolver, RouteAttrs, Shard,
};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Nlri, Origin, Prefix};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

/// A resolver the test sets: unknown next hops are unreachable.
#[derive(Debug, Default)]
struct Fake(Mutex<HashMap<IpAddr, Resolution>>);

impl Resolver for Fake {
    fn resolve(&self, addr: IpAddr) -> Resolution {
        self.0
            .lock()
            .unwrap()
            .get(&addr)
            .copied()
            .unwrap_or(Resolution::UNREACHABLE)
    }
}

impl Fake {
    fn set(&self, nh: [u8; 4], reachable: bool, metric: u32) {
        self.0
            .lock()
            .unwrap()
            .insert(IpAddr::from(nh), Resolution { reachable, metric });
    }
}

fn attrs(nh: [u8; 4], asn: u32) -> Arc<RouteAttrs> {
    Arc::new(RouteAttrs::from_attributes(
        &PathAttributes::canonical(vec![
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence([asn])),
            AttrValue::NextHop(Ipv4Addr::from(nh)),
        ]),
        &nh,
        &LoopChecks::default(),
    ))
}

fn peer(i: u32) -> PeerInfo {
    PeerInfo {
        ebgp: false,
        router_id: 100 + i,
        address: u128::from(i),
        local_as: 65000,
        peer_as: 65000,
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

const A: [u8; 4] = [192, 0, 2, 1];
const B: [u8; 4] = [192, 0, 2, 2];

fn shard(r: &Arc<Fake>, options: Options) -> Shard {
    let mut s = Shard::resolving(options, Some(r.clone() as Arc<dyn Resolver>));
    s.set_peer(0, peer(0));
    s.set_peer(1, peer(1));
    s
}

#[test]
fn an_unresolved_next_hop_makes_a_path_ineligible_until_it_resolves() {
    let r = Arc::new(Fake::default());
    r.set(B, true, 10);
    let mut s = shard(&r, Options::default());
    // Peer 0 (lower router id, would win) through A, which does not resolve.
    s.announce(0, &attrs(A, 65001), [Nlri::new(p(1))]);
    s.announce(1, &attrs(B, 65001), [Nlri::new(p(1))]);
    let c = s.drain_changes();
    assert_eq!(c[0].best.as_ref().unwrap().peer, 1);
    let hidden = s
        .route(
            &p(1),
            PathFilter {
                hidden: true,
                ..PathFilter::default()
            },
        )
        .unwrap();
    assert!(hidden
        .paths
        .iter()
        .any(|v| v.path.peer == 0 && v.state == PathState::Ineligible(Ineligible::Unresolved)));
    // A resolves, at a lower cost: only then is the prefix decided again.
    assert_eq!(s.resolution_changed(), 0, "nothing changed");
    r.set(A, true, 5);
    assert_eq!(s.resolution_changed(), 1);
    let c = s.drain_changes();
    assert_eq!(c[0].best.as_ref().unwrap().peer, 0);
    // The IGP cost decides: A costlier than B now.
    r.set(A, true, 50);
    s.resolution_changed();
    assert_eq!(s.drain_changes()[0].best.as_ref().unwrap().peer, 1);
    // Neither resolves: the prefix has no best path (withdrawn downstream).
    r.set(A, false, 0);
    r.set(B, false, 0);
    assert_eq!(
        s.resolution_changed(),
        2,
        "both next hops' prefix, once each"
    );
    let c = s.drain_changes();
    assert_eq!(c.len(), 1);
    assert!(c[0].best.is_none());
    assert_eq!(s.prefixes(), 1, "the paths stay in the Adj-RIB-In");
}

#[test]
fn equal_cost_sets_follow_igp_cost() {
    let r = Arc::new(Fake::default());
    r.set(A, true, 10);
    r.set(B, true, 10);
    let mut s = shard(
        &r,
        Options {
            multipath: Some(Multipath::default()),
            ..Options::default()
        },
    );
    s.announce(0, &attrs(A, 65001), [Nlri::new(p(1))]);
    s.announce(1, &attrs(B, 65001), [Nlri::new(p(1))]);
    let c = s.drain_changes();
    let last = c.last().unwrap();
    assert_eq!(last.multipath.len(), 1, "both paths share load");
    // B costs more: the set shrinks with the same best path, reported as such.
    r.set(B, true, 20);
    s.resolution_changed();
    let c = s.drain_changes();
    assert_eq!(c.len(), 1);
    assert!(!c[0].best_changed);
    assert!(c[0].multipath.is_empty());
}

#[derive(Clone, Debug)]
enum Op {
    Announce(u32, u8, u8),
    Withdraw(u32, u8),
    Resolve(u8, bool, u32),
    Down(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u32..3, 0u8..30, 0u8..4).prop_map(|(peer, i, nh)| Op::Announce(peer, i, nh)),
        2 => (0u32..3, 0u8..30).prop_map(|(peer, i)| Op::Withdraw(peer, i)),
        2 => (0u8..4, any::<bool>(), 0u32..3).prop_map(|(nh, up, m)| Op::Resolve(nh, up, m)),
        1 => (0u32..3).prop_map(Op::Down),
    ]
}

fn nh(i: u8) -> [u8; 4] {
    [192, 0, 2, 10 + i]
}

proptest! {
    /// Deciding again only through the index gives the best paths a decision of every
    /// prefix would, in one shard and after a re-shard into three.
    #[test]
    fn the_index_decides_again_what_a_full_decision_would(ops in prop::collection::vec(op(), 1..80)) {
        let r = Arc::new(Fake::default());
        for i in 0..4 {
            r.set(nh(i), true, 0);
        }
        let mut s = shard(&r, Options::default());
        s.set_peer(2, peer(2));
        let mut reported: BTreeMap<Prefix, Option<(u32, Vec<u8>)>> = BTreeMap::new();
        let track = |s: &mut Shard, reported: &mut BTreeMap<Prefix, Option<(u32, Vec<u8>)>>| {
            for c in s.drain_changes() {
                reported.insert(c.prefix, c.best.map(|b| (b.peer, b.attrs.key().to_vec())));
            }
        };
        for (k, o) in ops.iter().enumerate() {
            match *o {
                Op::Announce(peer, i, n) => s.announce(peer, &attrs(nh(n), 65001 + peer), [Nlri::new(p(u32::from(i)))]),
                Op::Withdraw(peer, i) => s.withdraw(peer, [Nlri::new(p(u32::from(i)))]),
                Op::Resolve(n, up, m) => {
                    r.set(nh(n), up, m);
                    s.resolution_changed();
                }
                Op::Down(peer) => {
                    let mut w = s.peer_down(peer);
                    while !s.peer_down_step(&mut w, 7) {}
                }
            }
            if k % 3 == 0 {
                track(&mut s, &mut reported);
            }
            if k == ops.len() / 2 {
                // A re-shard halfway: the index moves with the prefixes.
                track(&mut s, &mut reported);
                let mut into: Vec<Shard> = (0..3).map(|_| {
                    let mut t = shard(&r, Options::default());
                    t.set_peer(2, peer(2));
                    t
                }).collect();
                s.move_into(&mut into);
                s = into.remove(0);
                // Keep only the prefixes of the first new shard from here.
                reported.retain(|pf, _| ribshard_rib::shard_of(pf, 3) == 0);
            }
        }
        track(&mut s, &mut reported);
        // What a decision of every prefix (of the shard kept) now gives.
        let resharded = ops.len() / 2 < ops.len();
        for i in 0..30u32 {
            let pf = p(i);
            if resharded && ribshard_rib::shard_of(&pf, 3) != 0 {
                continue;
            }
            let want = reported.get(&pf).cloned().flatten();
            let best = s.best(&pf).map(|b| (b.peer, b.attrs.key().to_vec()));
            prop_assert_eq!(best, want, "{:?}", pf);
        }
    }
}
