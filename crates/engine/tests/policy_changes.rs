//! Policies changed with sessions kept, through the pipeline without sockets: an import
//! policy applied again to the routes kept as received, and a member moved to the update
//! group of its new export policy. Under random routes, flaps and re-shards, every member
//! ends holding exactly what its final policy exports of the Loc-RIB; one that was in step
//! is sent only what the change alters.

mod pipeline_fixture;

use pipeline_fixture::*;
use proptest::prelude::*;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::{Batcher, Joined, Pipeline};
use ribshard_policy::{Chain, PolicyOptions};
use ribshard_rib::attrs::normalized_key;
use ribshard_rib::{source_of, GroupKind, GroupSpec, Import, PeerInfo};
use ribshard_wire::{frame, parse_attributes_only, parse_update, Family, Nlri, Prefix};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const POLICIES: &str = r#"
[community.variant-2]
members = ["65000:2"]
[community.variant-3]
members = ["65000:3"]
[community.marked]
members = ["65010:1"]
[[policy-statement.v4-low.term]]
from = { route-filter = ["10.0.0.0/11 orlonger"] }
then = { action = "accept" }
[[policy-statement.v4-low.term]]
then = { action = "reject" }
[[policy-statement.mark.term]]
from = { community = "variant-2" }
then = { action = "reject" }
[[policy-statement.mark.term]]
then = { metric = 77, community-add = "marked", action = "accept" }
[[policy-statement.by-prefix.term]]
from = { route-filter = ["10.0.0.0/12 orlonger"] }
then = { metric = 5, action = "accept" }
[[policy-statement.by-prefix.term]]
then = { action = "accept" }
[[policy-statement.no-10-5.term]]
from = { route-filter = ["10.5.0.0/16 exact"] }
then = { action = "reject" }
[[policy-statement.prefer-3.term]]
from = { community = "variant-3" }
then = { local-preference = 300 }
"#;

fn chains() -> Vec<Arc<Chain>> {
    let opts: PolicyOptions = toml::from_str(POLICIES).unwrap();
    let read = |_: &std::path::Path| Ok(String::new());
    let c = ribshard_policy::compile(&opts, &read);
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    let names: [&[&str]; 5] = [
        &["accept"],
        &["v4-low"],
        &["mark"],
        &["by-prefix"],
        &["no-10-5", "prefer-3", "accept"],
    ];
    names
        .iter()
        .map(|n| {
            let n: Vec<String> = n.iter().map(|s| s.to_string()).collect();
            Arc::new(c.policies.chain(&n, false, LOCAL_AS).unwrap())
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Op {
    Announce {
        peer: u32,
        prefixes: Vec<u8>,
        variant: u8,
    },
    Withdraw {
        peer: u32,
        prefixes: Vec<u8>,
    },
    FlapMember {
        member: usize,
    },
    Export {
        member: usize,
        policy: usize,
    },
    Import {
        peer: u32,
        policy: usize,
    },
    Reshard {
        setting: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let prefixes = prop::collection::vec(0u8..40, 1..12);
    prop_oneof![
        8 => (0u32..4, prefixes.clone(), 0u8..5).prop_map(|(peer, prefixes, variant)| Op::Announce { peer, prefixes, variant }),
        3 => (0u32..4, prefixes).prop_map(|(peer, prefixes)| Op::Withdraw { peer, prefixes }),
        1 => (0usize..MEMBERS.len()).prop_map(|member| Op::FlapMember { member }),
        3 => (0usize..MEMBERS.len(), 0usize..5).prop_map(|(member, policy)| Op::Export { member, policy }),
        2 => (0u32..3, prop_oneof![Just(0usize), Just(4)]).prop_map(|(peer, policy)| Op::Import { peer, policy }),
        1 => (0usize..3).prop_map(|setting| Op::Reshard { setting }),
    ]
}

const SETTINGS: [(usize, usize); 3] = [(1, 0), (2, 2), (4, 3)];

fn member_info(m: usize) -> PeerInfo {
    PeerInfo {
        ebgp: !matches!(MEMBERS[m].1, GroupKind::Internal { .. }),
        router_id: 0x0b00_0000 + m as u32,
        address: u128::from(0x7f00_0100 + m as u32),
        local_as: LOCAL_AS,
        peer_as: MEMBERS[m].2,
        rr_cluster: None,
        rs_client: MEMBERS[m].1 == GroupKind::RouteServer,
    }
}

struct Member {
    sink: TestSink,
    joined: Option<Joined>,
    epoch: u32,
    policy: usize,
}

fn spec_with(m: usize, chain: &Arc<Chain>) -> GroupSpec {
    GroupSpec {
        export: chain.clone(),
        ..spec(m)
    }
}

fn join(p: &Pipeline, m: usize, epoch: u32, policy: usize, chains: &[Arc<Chain>]) -> Member {
    let sink = TestSink::new();
    let id = MemberId {
        peer: member_peer(m),
        epoch,
    };
    let (msgs, joined) = p.peer_up(
        member_peer(m),
        member_info(m),
        Some((spec_with(m, &chains[policy]), id, Box::new(sink.clone()))),
    );
    send_all(p, msgs);
    Member {
        sink,
        joined,
        epoch,
        policy,
    }
}

/// What a member holds after reading its bytes: prefix -> (next hop + attributes).
fn member_table(bytes: &[u8]) -> BTreeMap<Prefix, Vec<u8>> {
    let mut t = BTreeMap::new();
    let mut rest = bytes;
    let mut key = Vec::new();
    while let Ok(Some(len)) = frame(rest, 65535) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let u = parse_update(&msg[19..], &params()).expect("valid UPDATEs");
        for n in u.withdrawn_all() {
            t.remove(&n.prefix);
        }
        for n in u.announced() {
            let mp = n.prefix.family() != Family::Ipv4Unicast;
            let nh = ribshard_rib::attrs::next_hop_of(&u.attrs, mp);
            normalized_key(&u.attrs, &params(), nh, &mut key);
            t.insert(n.prefix, key.clone());
        }
    }
    t
}

/// What a group of this spec advertises of the Loc-RIB to `member`, as a member reads it.
fn expected(
    rib: &[(Prefix, ribshard_rib::Path)],
    spec: &GroupSpec,
    member: u32,
) -> BTreeMap<Prefix, Vec<u8>> {
    let mut t = BTreeMap::new();
    let mut key = Vec::new();
    for (prefix, best) in rib {
        if best.peer == member {
            continue;
        }
        let Some(e) = ribshard_rib::export(spec, &upstream(best.peer), &best.attrs, prefix) else {
            continue;
        };
        let view = parse_attributes_only(&e.attrs, &params()).unwrap();
        let nh: Vec<u8> = match prefix.family() {
            Family::Ipv4Unicast => view.attrs.next_hop.unwrap().octets().to_vec(),
            Family::Ipv6Unicast => e.mp_next_hop.to_vec(),
        };
        normalized_key(&view.attrs, &params(), &nh, &mut key);
        t.insert(*prefix, key.clone());
    }
    t
}

/// Everything sent so far is through: a barrier, then time for the dump requests an update
/// thread may still retry (a full shard queue is tried again on its tick), then a barrier.
fn settle(p: &Pipeline) {
    p.barrier();
    std::thread::sleep(ribshard_engine::pipeline::TICK * 2);
    p.barrier();
}

fn run(ops: &[Op], setting: usize) {
    let chains = chains();
    let (s, u) = SETTINGS[setting];
    let p = start(s, u);
    for i in 0..4 {
        send_all(&p, p.peer_up(i, upstream(i), None).0);
    }
    let mut members: Vec<Member> = (0..MEMBERS.len())
        .map(|m| join(&p, m, 0, 0, &chains))
        .collect();
    let mut pool = Pool(HashMap::new());
    for o in ops {
        match o {
            Op::Announce {
                peer,
                prefixes,
                variant,
            } => {
                let mut b = Batcher::new(*peer, p.shards());
                for &i in prefixes {
                    let pf = prefix(i);
                    b.announce(&pool.get(*peer, *variant, pf.family()), Nlri::new(pf));
                }
                flush(&p, &mut b);
            }
            Op::Withdraw { peer, prefixes } => {
                let mut b = Batcher::new(*peer, p.shards());
                for &i in prefixes {
                    b.withdraw(Nlri::new(prefix(i)));
                }
                flush(&p, &mut b);
            }
            Op::FlapMember { member } => {
                let old = &mut members[*member];
                send_all(
                    &p,
                    p.peer_down(member_peer(*member), None, old.joined.take()),
                );
                let (epoch, policy) = (old.epoch + 1, old.policy);
                *old = join(&p, *member, epoch, policy, &chains);
            }
            Op::Export { member, policy } => {
                let mm = &mut members[*member];
                mm.policy = *policy;
                let Some(j) = mm.joined.clone() else { continue };
                let new = spec_with(*member, &chains[*policy]);
                if new != *j.spec {
                    let (msgs, joined) = p.regroup(&j, new);
                    send_all(&p, msgs);
                    mm.joined = Some(joined);
                }
            }
            Op::Import { peer, policy } => {
                let import = Arc::new(Import {
                    chain: chains[*policy].clone(),
                    ..Import::accept_all(source_of(&upstream(*peer)))
                });
                send_all(&p, p.import_policy(*peer, import, true));
            }
            Op::Reshard { setting } => {
                if u > 0 {
                    let (s, u) = SETTINGS[*setting];
                    if u > 0 {
                        p.reconfigure(s, u);
                    }
                }
            }
        }
    }
    settle(&p);
    let rib = p.loc_rib();
    for (m, mm) in members.iter().enumerate() {
        let j = mm.joined.as_ref().unwrap();
        let want = expected(&rib, &j.spec, member_peer(m));
        let got = member_table(&mm.sink.bytes.lock().unwrap());
        let extra: Vec<&Prefix> = got.keys().filter(|k| !want.contains_key(k)).collect();
        let missing: Vec<&Prefix> = want.keys().filter(|k| !got.contains_key(k)).collect();
        let wrong: Vec<&Prefix> = got
            .iter()
            .filter(|(k, v)| want.get(*k).is_some_and(|w| w != *v))
            .map(|(k, _)| k)
            .collect();
        assert!(
            extra.is_empty() && missing.is_empty() && wrong.is_empty(),
            "setting {setting}: member {m} with policy {}: extra {extra:?}, missing {missing:?}, different {wrong:?}",
            mm.policy
        );
    }
    p.stop();
}

proptest! {
    #![proptest_config(persisted(32, "policy_changes"))]

    #[test]
    fn members_hold_what_their_final_policy_exports(
        ops in prop::collection::vec(op(), 1..50),
        setting in 0usize..3,
    ) {
        run(&ops, setting);
    }
}

/// A member in step whose export policy changes is sent what differs, nothing else; the
/// member beside it in the old group is sent nothing.
#[test]
fn an_in_step_member_gets_only_the_difference() {
    for (s, u) in SETTINGS {
        let chains = chains();
        let p = start(s, u);
        for i in 0..3 {
            send_all(&p, p.peer_up(i, upstream(i), None).0);
        }
        // Members 0 and 1 share the "transit" group.
        let a = join(&p, 0, 0, 0, &chains);
        let b = join(&p, 1, 0, 0, &chains);
        let mut pool = Pool(HashMap::new());
        let mut batch = Batcher::new(2, p.shards());
        for i in 0..40u8 {
            let pf = prefix(i);
            batch.announce(&pool.get(2, 1, pf.family()), Nlri::new(pf));
        }
        flush(&p, &mut batch);
        settle(&p);
        let before_a = a.sink.bytes.lock().unwrap().len();
        let before_b = b.sink.bytes.lock().unwrap().len();
        // v4-low: 10.0-31.x.x stay (32 prefixes), the 8 IPv6 ones are withdrawn.
        let j = a.joined.clone().unwrap();
        let (msgs, joined) = p.regroup(&j, spec_with(0, &chains[1]));
        send_all(&p, msgs);
        settle(&p);
        let after = a.sink.bytes.lock().unwrap()[before_a..].to_vec();
        let mut announced = 0;
        let mut withdrawn = 0;
        let mut rest: &[u8] = &after;
        while let Ok(Some(len)) = frame(rest, 65535) {
            let (msg, tail) = rest.split_at(len);
            rest = tail;
            let u = parse_update(&msg[19..], &params()).unwrap();
            announced += u.announced().count();
            withdrawn += u.withdrawn_all().count();
        }
        assert_eq!((announced, withdrawn), (0, 8), "({s}, {u})");
        assert_eq!(
            b.sink.bytes.lock().unwrap().len(),
            before_b,
            "the other member: nothing"
        );
        // Live changes follow the new policy: an IPv6 announcement does not reach it.
        let mut batch = Batcher::new(0, p.shards());
        for i in [1u8, 35] {
            let pf = prefix(i);
            batch.announce(&pool.get(0, 0, pf.family()), Nlri::new(pf));
        }
        flush(&p, &mut batch);
        settle(&p);
        let rib = p.loc_rib();
        let got = member_table(&a.sink.bytes.lock().unwrap());
        assert_eq!(got, expected(&rib, &joined.spec, member_peer(0)));
        assert_eq!(got.len(), 32);
        p.stop();
    }
}
