//! Add-Path send in the shard: on random announcements and withdrawals from several peers
//! (one of them sending its own path identifiers), with re-shards between, a receiver that
//! applies only what each change tells its group ends with exactly the paths the shard
//! offers that group, under identifiers unique per prefix.

use proptest::prelude::*;
use ribshard_rib::{AddPathKeep, AddPathSelect, LoopChecks, Options, PeerInfo, RouteAttrs, Shard};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Nlri, Origin, Prefix};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

fn attrs(peer: u32, len: usize, med: u32) -> Arc<RouteAttrs> {
    let path: Vec<u32> = std::iter::repeat_n(65001 + peer, len).collect();
    Arc::new(RouteAttrs::from_attributes(
        &PathAttributes::canonical([
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence(path)),
            AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
            AttrValue::Med(med),
        ]),
        &[198, 51, 100, 1],
        &LoopChecks::default(),
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

fn p(i: u32) -> Prefix {
    Prefix::V4 {
        addr: 0x0a00_0000 + (i << 8),
        len: 24,
    }
}

/// Peer 3 sends Add-Path identifiers of its own; the others none.
const ADD_PATH_PEER: u32 = 3;

#[derive(Clone, Debug)]
enum Op {
    Announce {
        peer: u32,
        id: u32,
        prefix: u32,
        len: usize,
        med: u32,
    },
    Withdraw {
        peer: u32,
        id: u32,
        prefix: u32,
    },
    Drain,
    Reshard,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u32..4, 1u32..4, 0u32..3, 1usize..4, 0u32..2).prop_map(|(peer, id, prefix, len, med)| Op::Announce {
            peer,
            id: if peer == ADD_PATH_PEER { id } else { 0 },
            prefix,
            len,
            med,
        }),
        3 => (0u32..4, 1u32..4, 0u32..3).prop_map(|(peer, id, prefix)| Op::Withdraw {
            peer,
            id: if peer == ADD_PATH_PEER { id } else { 0 },
            prefix,
        }),
        2 => Just(Op::Drain),
        1 => Just(Op::Reshard),
    ]
}

const SELECTS: [AddPathSelect; 4] = [
    AddPathSelect::Best(2),
    AddPathSelect::Best(3),
    AddPathSelect::All,
    AddPathSelect::EqualCost(8),
];

/// What a receiver holds: (prefix, identifier) -> (peer, its identifier, version).
type Held = BTreeMap<(Prefix, u32), (u32, u32, u32)>;

fn options() -> Options {
    Options {
        add_path: Some(AddPathKeep {
            ranked: 3,
            all: true,
            equal_cost: true,
        }),
        ..Options::default()
    }
}

fn new_shard() -> Shard {
    let mut s = Shard::new(options());
    for i in 0..4 {
        s.set_peer(i, peer(i));
    }
    s
}

fn drain(s: &mut Shard, held: &mut [Held]) {
    for c in s.drain_changes() {
        // Without multipath, a change that keeps the best path changed only what is offered.
        assert_eq!(c.paths_only, !c.best_changed);
        let Some(a) = &c.add_paths else { continue };
        for (select, h) in SELECTS.iter().zip(held.iter_mut()) {
            let d = a.for_group(*select);
            for id in d.withdrawn {
                assert!(
                    h.remove(&(c.prefix, id)).is_some(),
                    "{id} withdrawn, never sent"
                );
            }
            for (o, path, _) in d.sent {
                h.insert(
                    (c.prefix, o.path_id),
                    (path.peer, path.path_id, path.arrival),
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn receivers_hold_what_the_shard_offers(ops in proptest::collection::vec(op(), 1..60)) {
        let mut s = new_shard();
        let mut held: Vec<Held> = vec![Held::new(); SELECTS.len()];
        for o in ops {
            match o {
                Op::Announce { peer, id, prefix, len, med } => {
                    let n = Nlri { path_id: (id != 0).then_some(id), prefix: p(prefix) };
                    s.announce(peer, &attrs(peer, len, med), [n]);
                }
                Op::Withdraw { peer, id, prefix } => {
                    let n = Nlri { path_id: (id != 0).then_some(id), prefix: p(prefix) };
                    s.withdraw(peer, [n]);
                }
                Op::Drain => drain(&mut s, &mut held),
                Op::Reshard => {
                    let mut into = vec![Shard::new(options())];
                    s.move_into(&mut into);
                    s = into.pop().unwrap();
                }
            }
        }
        drain(&mut s, &mut held);
        for (select, h) in SELECTS.iter().zip(&held) {
            let mut want = Held::new();
            for i in 0..3 {
                let offered = s.offered(&p(i));
                let ids: BTreeSet<u32> = offered.iter().map(|(o, _)| o.path_id).collect();
                prop_assert_eq!(ids.len(), offered.len(), "identifiers repeat");
                if let Some((first, _)) = offered.first() {
                    prop_assert_eq!(Some(first.arrival), s.reported(&p(i)).map(|b| b.arrival));
                    prop_assert!(first.equal_cost);
                }
                for (o, path) in select.pick(&offered, |(o, _)| o.equal_cost) {
                    want.insert((p(i), o.path_id), (path.peer, path.path_id, path.arrival));
                }
            }
            prop_assert_eq!(h, &want, "{:?}", select);
        }
    }
}

#[test]
fn identifiers_are_the_peers_and_kept_while_a_path_stays() {
    let mut s = new_shard();
    s.announce(0, &attrs(0, 2, 0), [Nlri::new(p(0))]);
    s.announce(1, &attrs(1, 1, 0), [Nlri::new(p(0))]);
    s.announce(
        ADD_PATH_PEER,
        &attrs(3, 3, 0),
        [Nlri {
            path_id: Some(7),
            prefix: p(0),
        }],
    );
    s.announce(
        ADD_PATH_PEER,
        &attrs(3, 3, 0),
        [Nlri {
            path_id: Some(9),
            prefix: p(0),
        }],
    );
    let c = s.drain_changes();
    let ids: Vec<(u32, u32)> = c[0]
        .add_paths
        .as_ref()
        .unwrap()
        .new
        .iter()
        .map(|(o, _)| (o.peer, o.path_id))
        .collect();
    // In decision order: peer 1 (shortest), peer 0, then peer 3's two (ids of our own).
    assert_eq!(ids, [(1, 2), (0, 1), (3, 1 << 31), (3, (1 << 31) + 1)]);
    // A new version of peer 0's path keeps its identifier; the group sends it again.
    s.announce(0, &attrs(0, 2, 1), [Nlri::new(p(0))]);
    let c = s.drain_changes();
    let a = c[0].add_paths.as_ref().unwrap();
    assert!(!c[0].best_changed);
    let d = a.for_group(AddPathSelect::Best(2));
    assert!(d.withdrawn.is_empty());
    assert_eq!(d.sent.len(), 1);
    assert_eq!((d.sent[0].0.path_id, d.sent[0].2), (1, true));
    // A worse path arriving beyond what any group reads changes nothing.
    let mut s2 = Shard::new(Options {
        add_path: Some(AddPathKeep {
            ranked: 2,
            all: false,
            equal_cost: false,
        }),
        ..Options::default()
    });
    for i in 0..4 {
        s2.set_peer(i, peer(i));
    }
    s2.announce(0, &attrs(0, 1, 0), [Nlri::new(p(0))]);
    s2.announce(1, &attrs(1, 2, 0), [Nlri::new(p(0))]);
    s2.drain_changes();
    s2.announce(2, &attrs(2, 3, 0), [Nlri::new(p(0))]);
    assert!(s2.drain_changes().is_empty());
}
