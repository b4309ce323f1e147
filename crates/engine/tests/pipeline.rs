//! The pipeline without sockets: random announcements, withdrawals and flaps of upstream
//! peers and of downstream members give the same Loc-RIB, the same table at every
//! downstream member and the same table at a subscriber of the change stream for every
//! thread setting, re-shards included; a slow member catches up with nothing lost.

mod pipeline_fixture;

use pipeline_fixture::*;
use proptest::prelude::*;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::{Batcher, Joined, Pipeline};
use ribshard_rib::attrs::normalized_key;
use ribshard_rib::{GroupKind, LoopChecks, PeerInfo, RouteAttrs};
use ribshard_wire::{frame, parse_update, Family, Nlri, Prefix, SessionParams};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

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
    Flap {
        peer: u32,
    },
    FlapMember {
        member: usize,
    },
    /// Re-shard to one of [`SETTINGS`] with everything up (ignored by the baseline run).
    Reshard {
        setting: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let prefixes = prop::collection::vec(0u8..40, 1..12);
    prop_oneof![
        8 => (0u32..4, prefixes.clone(), 0u8..5).prop_map(|(peer, prefixes, variant)| Op::Announce { peer, prefixes, variant }),
        3 => (0u32..4, prefixes).prop_map(|(peer, prefixes)| Op::Withdraw { peer, prefixes }),
        1 => (0u32..4).prop_map(|peer| Op::Flap { peer }),
        1 => (0usize..MEMBERS.len()).prop_map(|member| Op::FlapMember { member }),
    ]
}

/// The operations above and, now and then, a re-shard.
fn op_or_reshard() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => op(),
        1 => (0usize..SETTINGS.len()).prop_map(|setting| Op::Reshard { setting }),
    ]
}

struct Member {
    sink: TestSink,
    joined: Option<Joined>,
    epoch: u32,
}

/// What a member holds after reading its bytes: prefix -> (next hop + attributes).
fn member_table(bytes: &[u8], params: &SessionParams) -> BTreeMap<Prefix, Vec<u8>> {
    let mut t = BTreeMap::new();
    let mut rest = bytes;
    let mut key = Vec::new();
    while let Ok(Some(len)) = frame(rest, 65535) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let u = parse_update(&msg[19..], params).expect("the group sends valid UPDATEs");
        assert!(u.treat_as_withdraw.is_none() && u.discarded.is_empty());
        for n in u.withdrawn_all() {
            t.remove(&n.prefix);
        }
        for n in u.announced() {
            let mp = n.prefix.family() != Family::Ipv4Unicast;
            let nh = ribshard_rib::attrs::next_hop_of(&u.attrs, mp);
            normalized_key(&u.attrs, params, nh, &mut key);
            t.insert(n.prefix, key.clone());
        }
    }
    assert!(rest.is_empty(), "a partial message");
    t
}

/// How often each prefix was announced or withdrawn in `bytes`.
fn prefix_mentions(bytes: &[u8], params: &SessionParams) -> BTreeMap<Prefix, usize> {
    let mut n = BTreeMap::new();
    let mut rest = bytes;
    while let Ok(Some(len)) = frame(rest, 65535) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let u = parse_update(&msg[19..], params).expect("the group sends valid UPDATEs");
        for x in u.withdrawn_all().chain(u.announced()) {
            *n.entry(x.prefix).or_insert(0) += 1;
        }
    }
    n
}

/// The Loc-RIB, each member's table (the twins last), and the UPDATEs the twins got
/// (the one in step, the one behind).
type Outcome = (
    Vec<(Prefix, u32, Vec<u8>)>,
    Vec<BTreeMap<Prefix, Vec<u8>>>,
    [usize; 2],
);

/// What a receiver that is behind has waiting on its socket: enough that its group holds
/// live changes ([`ribshard_adjout::PACK_BELOW`]), not enough to split it off.
const BEHIND: usize = 1 << 20;

/// `pace_ms`: milliseconds between operations, so that the pipeline has each routed and sent
/// before the next (otherwise they arrive in one burst, and are packed as one).
fn run(ops: &[Op], shards: usize, update_threads: usize, reshards: bool, pace_ms: u64) -> Outcome {
    run_arriving(ops, shards, update_threads, reshards, pace_ms, false)
}

/// As [`run`]; with `arriving`, an input says routes are still arriving from before the
/// first operation to after the last ([`ribshard_engine::pipeline::Arrivals`]), as a
/// session reading upstreams' tables does: then the twin in step must be sent each prefix
/// once, as it ended, however often it changed meanwhile.
fn run_arriving(
    ops: &[Op],
    shards: usize,
    update_threads: usize,
    reshards: bool,
    pace_ms: u64,
    arriving: bool,
) -> Outcome {
    let (p, recorder) = start_recorded(shards, update_threads);
    // Long enough that no machine, however slow, ends the hold before the flag is lowered.
    p.arrivals()
        .set_max_hold(std::time::Duration::from_secs(600));
    let mut flag = p.arrivals().flag();
    for i in 0..4 {
        send_all(&p, p.peer_up(i, upstream(i), None).0);
    }
    let mut members: Vec<Member> = Vec::new();
    let join = |m: usize, epoch: u32| -> Member {
        let sink = TestSink::new();
        let info = PeerInfo {
            ebgp: !matches!(MEMBERS[m].1, GroupKind::Internal { .. }),
            router_id: 0x0b00_0000 + m as u32,
            address: u128::from(0x7f00_0100 + m as u32),
            local_as: LOCAL_AS,
            peer_as: MEMBERS[m].2,
            rr_cluster: None,
            rs_client: MEMBERS[m].1 == GroupKind::RouteServer,
        };
        let id = MemberId {
            peer: member_peer(m),
            epoch,
        };
        let (msgs, joined) = p.peer_up(
            member_peer(m),
            info,
            Some((spec(m), id, Box::new(sink.clone()))),
        );
        send_all(&p, msgs);
        Member {
            sink,
            joined,
            epoch,
        }
    };
    // Half the members join before any route, half after the first few operations.
    for m in 0..3 {
        members.push(join(m, 0));
    }
    // Twins of "transit" in groups of their own, never flapped: one keeps up, the other is
    // behind, so its group packs live changes only when it must.
    let twins: Vec<TestSink> = ["transit-in-step", "transit-behind"]
        .into_iter()
        .enumerate()
        .map(|(k, name)| {
            let sink = TestSink::new();
            if k == 1 {
                sink.in_kernel.store(BEHIND, Ordering::Relaxed);
            }
            let peer = member_peer(MEMBERS.len() + k);
            let info = PeerInfo {
                ebgp: true,
                router_id: 0x0c00_0000 + k as u32,
                address: u128::from(0x7f00_0200 + k as u32),
                local_as: LOCAL_AS,
                peer_as: MEMBERS[0].2,
                rr_cluster: None,
                rs_client: false,
            };
            let mut spec = spec(0);
            spec.name = name.into();
            let id = MemberId { peer, epoch: 0 };
            let (msgs, _) = p.peer_up(peer, info, Some((spec, id, Box::new(sink.clone()))));
            send_all(&p, msgs);
            sink
        })
        .collect();
    let mut pool = Pool(HashMap::new());
    if arriving {
        // The twins' (empty) table dumps done: from here on they follow the live stream.
        p.barrier();
        flag.set(true);
    }
    for (k, o) in ops.iter().enumerate() {
        std::thread::sleep(std::time::Duration::from_millis(pace_ms));
        // (Not while routes arrive: a member joining the twins' group has its table dump
        // go after what the group holds, which then goes at once.)
        if k == 3 && !arriving {
            for m in 3..MEMBERS.len() {
                members.push(join(m, 0));
            }
        }
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
            Op::Flap { peer } => {
                send_all(&p, p.peer_down(*peer, None, None));
                send_all(&p, p.peer_up(*peer, upstream(*peer), None).0);
            }
            Op::FlapMember { member } => {
                if let Some(old) = members.get_mut(*member) {
                    send_all(
                        &p,
                        p.peer_down(member_peer(*member), None, old.joined.take()),
                    );
                    let epoch = old.epoch + 1;
                    *old = join(*member, epoch);
                }
            }
            Op::Reshard { setting } => {
                if reshards {
                    let (s, u) = SETTINGS[*setting];
                    let r = p.reconfigure(s, u);
                    let c = p.config();
                    assert_eq!(r.to, (c.shards, c.update_threads));
                }
            }
        }
    }
    if arriving {
        // Every shard done with the operations (a question waits for its routing and
        // walks) before any barrier: one shard's barrier sends what is held at once.
        let _ = p.loc_rib();
    }
    if members.len() < MEMBERS.len() {
        for m in members.len()..MEMBERS.len() {
            members.push(join(m, 0));
        }
    }
    // Everything decided and sent (a barrier packs what is held, routes arriving or not).
    p.barrier();
    flag.set(false);
    if arriving {
        let bytes = twins[0].bytes.lock().unwrap();
        let mentions = prefix_mentions(&bytes, &params());
        assert!(
            mentions.values().all(|n| *n == 1),
            "{shards} shards, {update_threads} update threads: prefixes sent more than once to the twin in step: {:?}",
            mentions.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
        );
    }
    let rib: Vec<(Prefix, u32, Vec<u8>)> = p
        .loc_rib()
        .into_iter()
        .map(|(pf, b)| (pf, b.peer, b.attrs.key().to_vec()))
        .collect();
    let mut tables: Vec<BTreeMap<Prefix, Vec<u8>>> = members
        .iter()
        .map(|m| member_table(&m.sink.bytes.lock().unwrap(), &params()))
        .collect();
    check_counts(&p, &members, &tables, &rib);
    // A subscriber of the change stream holds the Loc-RIB too, re-shards included.
    assert_eq!(recorder.table(), rib, "the change stream's subscriber");
    assert_eq!(
        *recorder.post_policy.lock().unwrap(),
        post_policy(&p),
        "the post-policy changes"
    );
    assert!(recorder.barriers.load(Ordering::Relaxed) >= p.shards());
    p.stop();
    tables.extend(
        twins
            .iter()
            .map(|t| member_table(&t.bytes.lock().unwrap(), &params())),
    );
    let updates = [twins[0].messages(), twins[1].messages()];
    (rib, tables, updates)
}

/// The counts the shards keep as routes come and go (for `show` and metrics) agree with
/// what the Loc-RIB holds and what every member was sent.
fn check_counts(
    p: &Pipeline,
    members: &[Member],
    tables: &[BTreeMap<Prefix, Vec<u8>>],
    rib: &[(Prefix, u32, Vec<u8>)],
) {
    // What each group advertises is counted by a walk in the background: wait for it.
    let mut stats = p.stats().0;
    for _ in 0..200 {
        if stats
            .iter()
            .all(|s| s.groups.iter().all(|g| g.advertised.is_some()))
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        stats = p.stats().0;
    }
    for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
        let active: usize = stats.iter().map(|s| s.families[f.index()].active).sum();
        let in_rib = rib.iter().filter(|(pf, _, _)| pf.family() == f).count();
        assert_eq!(active, in_rib, "{f}: active paths summed over the shards");
    }
    for peer in 0..4u32 {
        let active: u32 = stats
            .iter()
            .filter_map(|s| s.peers.get(peer as usize))
            .map(|c| c[0].active + c[1].active)
            .sum();
        let in_rib = rib.iter().filter(|(_, from, _)| *from == peer).count();
        assert_eq!(active as usize, in_rib, "best paths from peer {peer}");
    }
    for (m, (member, table)) in members.iter().zip(tables).enumerate() {
        let Some(j) = &member.joined else { continue };
        for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
            let advertised: u64 = stats
                .iter()
                .flat_map(|s| s.groups.iter().filter(|g| g.group == j.group))
                .map(|g| g.to_member(member_peer(m)).expect("counted")[f.index()])
                .sum();
            let held = table.keys().filter(|pf| pf.family() == f).count();
            assert_eq!(advertised as usize, held, "member {m}, {f}: advertised");
        }
    }
}

const SETTINGS: [(usize, usize); 5] = [(1, 0), (1, 1), (2, 2), (4, 3), (7, 5)];

proptest! {
    #![proptest_config(persisted(24, "pipeline"))]

    #[test]
    fn same_result_for_every_thread_setting(ops in prop::collection::vec(op(), 1..60)) {
        let (rib, tables, [in_step, behind]) = run(&ops, 1, 0, false, 1);
        // The two members of one update group hold the same table, and so do the twins
        // of their group, the one behind included.
        prop_assert_eq!(&tables[0], &tables[1]);
        let n = tables.len();
        prop_assert_eq!(&tables[n - 2], &tables[0]);
        prop_assert_eq!(&tables[n - 1], &tables[0]);
        // The one behind gets what changed meanwhile merged: never more UPDATEs. (Compared
        // single-threaded only: with threads, the twins' table dumps start at different
        // points of the shards' streams, so they split dump and live changes apart.)
        prop_assert!(behind <= in_step, "behind got {} UPDATEs, in step {}", behind, in_step);
        for (s, u) in SETTINGS.into_iter().skip(1) {
            let (r, t, _) = run(&ops, s, u, false, 0);
            prop_assert_eq!(&r, &rib, "Loc-RIB with {} shards, {} update threads", s, u);
            for (m, (a, b)) in tables.iter().zip(&t).enumerate() {
                prop_assert_eq!(a, b, "member {} with {} shards, {} update threads", m, s, u);
            }
        }
    }
}

proptest! {
    #![proptest_config(persisted(24, "pipeline"))]

    /// Re-sharding (both thread counts, up and down, with sessions and members up, table
    /// dumps under way and walks pending) changes nothing routing does: the same Loc-RIB and
    /// the same table at every member as the single-threaded mode without re-shards.
    #[test]
    fn resharding_midway_changes_nothing(
        ops in prop::collection::vec(op_or_reshard(), 1..60),
        first in 0usize..SETTINGS.len(),
    ) {
        let (rib, tables, _) = run(&ops, 1, 0, false, 0);
        let (s, u) = SETTINGS[first];
        let (r, t, _) = run(&ops, s, u, true, 0);
        prop_assert_eq!(&r, &rib, "Loc-RIB starting with {} shards, {} update threads", s, u);
        for (m, (a, b)) in tables.iter().zip(&t).enumerate() {
            prop_assert_eq!(a, b, "member {} starting with {} shards, {} update threads", m, s, u);
        }
    }
}

proptest! {
    #![proptest_config(persisted(24, "pipeline"))]

    /// Upstreams whose tables interleave (and flap), no start-up deferral, routes still
    /// arriving throughout: a member in step is sent each prefix once, as it ended (not
    /// each path as it came), in every thread setting, and every member holds what it
    /// holds without the wait. No member joins meanwhile: a table dump to a group sends
    /// what the group holds first.
    #[test]
    fn while_routes_arrive_a_member_is_sent_each_prefix_once(
        ops in prop::collection::vec(
            op().prop_filter("members stay", |o| !matches!(o, Op::FlapMember { .. })),
            1..60,
        ),
    ) {
        let (_, tables, _) = run(&ops, 1, 0, false, 0);
        for (s, u) in [(1, 0), (2, 2), (4, 3)] {
            let (_, t, _) = run_arriving(&ops, s, u, false, 0, true);
            for (m, (a, b)) in tables.iter().zip(&t).enumerate() {
                prop_assert_eq!(a, b, "member {} with {} shards, {} update threads", m, s, u);
            }
        }
    }
}

/// A prefix changed three times while a receiver is behind reaches it once, as it ended;
/// the receiver in step gets each change at once.
#[test]
fn a_receiver_behind_gets_what_changed_meanwhile_merged() {
    let ops: Vec<Op> = (0..3)
        .map(|variant| Op::Announce {
            peer: 0,
            prefixes: vec![1, 2, 3],
            variant,
        })
        .collect();
    let (_, tables, [in_step, behind]) = run(&ops, 1, 0, false, 50);
    let n = tables.len();
    assert_eq!(tables[n - 1], tables[n - 2]);
    assert_eq!(tables[n - 1].len(), 3);
    // Both got End-of-RIB for two families after their (empty) table dump.
    assert_eq!((in_step, behind), (2 + 3, 2 + 1));
}

/// The export rules as members see them, on a fixed sequence.
#[test]
fn export_rules_per_group() {
    let ops = vec![
        Op::Announce {
            peer: 0,
            prefixes: vec![1],
            variant: 0,
        },
        Op::Announce {
            peer: 2,
            prefixes: vec![2, 33],
            variant: 1,
        },
        Op::Announce {
            peer: 3,
            prefixes: vec![3],
            variant: 0,
        },
        Op::Announce {
            peer: 0,
            prefixes: vec![4],
            variant: 4,
        },
    ];
    let (rib, t, _) = run(&ops, 2, 2, false, 0);
    // The looping path (our AS in it) is never best.
    assert!(!rib.iter().any(|(p, _, _)| *p == prefix(4)));
    assert_eq!(rib.len(), 4);
    let transit = &t[0];
    assert_eq!(transit.len(), 4, "everything goes to an external group");
    let a = RouteAttrs::from_key(transit[&prefix(1)].clone().into(), &LoopChecks::default());
    assert_eq!(a.neighbor_as, Some(LOCAL_AS), "our AS prepended");
    assert_eq!(a.next_hop(), &[127, 0, 0, 1], "next hop self");
    assert_eq!(a.local_pref, None, "no LOCAL_PREF to eBGP");
    assert_eq!(a.med, 0, "MED not passed to another AS");
    // Routes from AS 65001 do not go back to AS 65001.
    assert!(!t[2].contains_key(&prefix(1)));
    assert!(t[2].contains_key(&prefix(2)));
    // Plain iBGP: eBGP routes only; the client's route is reflected (client to non-client).
    let ibgp = &t[3];
    assert!(ibgp.contains_key(&prefix(1)) && ibgp.contains_key(&prefix(3)));
    let r = RouteAttrs::from_key(ibgp[&prefix(3)].clone().into(), &LoopChecks::default());
    assert_eq!(
        r.originator_id,
        Some(0x0a00_0004),
        "ORIGINATOR_ID of the client"
    );
    assert_eq!(r.cluster_list_len, 1);
    assert_eq!(
        r.next_hop(),
        &[198, 51, 100, 4],
        "a reflector keeps the next hop"
    );
    let e = RouteAttrs::from_key(ibgp[&prefix(1)].clone().into(), &LoopChecks::default());
    assert_eq!(e.local_pref, Some(100));
    assert_eq!(e.neighbor_as, Some(65001), "no prepend inside the AS");
    // Route server: transparent.
    let rs = RouteAttrs::from_key(t[5][&prefix(2)].clone().into(), &LoopChecks::default());
    assert_eq!(rs.neighbor_as, Some(65002));
    assert_eq!(rs.med, 12);
    assert_eq!(rs.as_path_len, 2);
    let v6 = RouteAttrs::from_key(t[5][&prefix(33)].clone().into(), &LoopChecks::default());
    assert_eq!(v6.next_hop().len(), 16);
    assert_eq!(v6.next_hop()[15], 3, "route server keeps the IPv6 next hop");
}

/// A member that stops reading is split from its group and catches up from the shards'
/// state, withdrawals included, once it drains.
#[test]
fn slow_member_catches_up() {
    // (shards, update threads) and a re-shard while the member is split off.
    for (shards, uts, reshard) in [
        (1, 0, None),
        (2, 2, None),
        (1, 0, Some((3, 2))),
        (2, 2, Some((1, 0))),
        (4, 3, Some((2, 1))),
    ] {
        let p = start(shards, uts);
        send_all(&p, p.peer_up(0, upstream(0), None).0);
        let sinks: Vec<TestSink> = (0..2).map(|_| TestSink::new()).collect();
        for (m, s) in sinks.iter().enumerate() {
            let info = PeerInfo {
                ebgp: true,
                peer_as: 65010,
                address: m as u128 + 1,
                ..upstream(0)
            };
            let id = MemberId {
                peer: 10 + m as u32,
                epoch: 0,
            };
            send_all(
                &p,
                p.peer_up(
                    10 + m as u32,
                    info,
                    Some((spec(0), id, Box::new(s.clone()))),
                )
                .0,
            );
        }
        let mut pool = Pool(HashMap::new());
        let announce = |ps: std::ops::Range<u8>, v: u8, pool: &mut Pool| {
            let mut b = Batcher::new(0, p.shards());
            for i in ps {
                b.announce(&pool.get(0, v, prefix(i).family()), Nlri::new(prefix(i)));
            }
            flush(&p, &mut b);
        };
        announce(0..40, 0, &mut pool);
        p.barrier();
        // Member 1 stops reading: its queue is past the high-water mark.
        sinks[1].queued.store(usize::MAX, Ordering::Relaxed);
        announce(0..20, 1, &mut pool);
        let mut b = Batcher::new(0, p.shards());
        for i in 20..30 {
            b.withdraw(Nlri::new(prefix(i)));
        }
        flush(&p, &mut b);
        p.barrier();
        let (_, groups) = p.stats();
        let slow = groups[0].groups[0]
            .members
            .iter()
            .find(|(m, _)| m.peer == 11)
            .unwrap()
            .1
            .clone();
        assert_eq!(slow.slow_writer, 1, "designated a slow writer once");
        assert!(slow.write_queue_blocks >= 1);
        let fast = member_table(&sinks[0].bytes.lock().unwrap(), &params());
        assert_eq!(
            fast.len(),
            30,
            "the member in step got everything meanwhile"
        );
        let fast = match reshard {
            None => fast,
            Some((s, u)) => {
                // Its missed withdrawals now belong to other shards; more go meanwhile.
                p.reconfigure(s, u);
                let mut b = p.batcher(0);
                for i in 30..35 {
                    b.withdraw(Nlri::new(prefix(i)));
                }
                flush(&p, &mut b);
                p.barrier();
                let fast = member_table(&sinks[0].bytes.lock().unwrap(), &params());
                assert_eq!(fast.len(), 25, "in step across the re-shard");
                fast
            }
        };
        // It reads again: the next tick starts its catch-up.
        sinks[1].queued.store(0, Ordering::Relaxed);
        p.tick();
        std::thread::sleep(std::time::Duration::from_millis(50));
        p.barrier();
        let caught_up = member_table(&sinks[1].bytes.lock().unwrap(), &params());
        assert_eq!(
            caught_up, fast,
            "with {shards} shards, {uts} update threads, re-shard {reshard:?}"
        );
        p.stop();
    }
}

/// Two peers that both send routes and receive the other's, in their own update groups,
/// coming up one after the other (a route reflector's clients).
#[test]
fn late_peer_routes_reach_earlier_member() {
    for (shards, uts) in [(1, 0), (2, 2)] {
        let p = start(shards, uts);
        let mut pool = Pool(HashMap::new());
        let mut sinks = Vec::new();
        for (peer, m, pf) in [(3u32, 4usize, 1u8), (2, 5, 2)] {
            let sink = TestSink::new();
            let id = MemberId { peer, epoch: 1 };
            send_all(
                &p,
                p.peer_up(
                    peer,
                    upstream(peer),
                    Some((spec(m), id, Box::new(sink.clone()))),
                )
                .0,
            );
            let mut b = Batcher::new(peer, p.shards());
            b.announce(
                &pool.get(peer, 0, Family::Ipv4Unicast),
                Nlri::new(prefix(pf)),
            );
            flush(&p, &mut b);
            p.barrier();
            sinks.push(sink);
        }
        let first = member_table(&sinks[0].bytes.lock().unwrap(), &params());
        let second = member_table(&sinks[1].bytes.lock().unwrap(), &params());
        assert!(first.contains_key(&prefix(2)), "{shards}/{uts}: {first:?}");
        assert!(
            second.contains_key(&prefix(1)),
            "{shards}/{uts}: {second:?}"
        );
        assert!(
            !first.contains_key(&prefix(1)),
            "not sent back to its source"
        );
        p.stop();
    }
}

/// Members of one group that come up together share one table dump (one walk, one encoding
/// per batch); each ends with exactly the table of a member that followed the live stream.
#[test]
fn members_joining_together_get_the_whole_table() {
    for (shards, uts) in [(1, 0), (2, 2)] {
        let p = start(shards, uts);
        let mut pool = Pool(HashMap::new());
        let member = |peer: u32| PeerInfo {
            ebgp: true,
            router_id: 0x0a00_0100 + peer,
            address: u128::from(0x7f00_0100 + peer),
            local_as: LOCAL_AS,
            peer_as: 65010,
            rr_cluster: None,
            rs_client: false,
        };
        let join = |p: &Pipeline, peer: u32, sink: &TestSink| {
            let id = MemberId { peer, epoch: 1 };
            send_all(
                p,
                p.peer_up(
                    peer,
                    member(peer),
                    Some((spec(0), id, Box::new(sink.clone()))),
                )
                .0,
            );
        };
        let live = TestSink::new();
        join(&p, 20, &live);
        for peer in 0..3u32 {
            send_all(&p, p.peer_up(peer, upstream(peer), None).0);
            let mut b = Batcher::new(peer, p.shards());
            for i in (peer as u8..64).step_by(2) {
                let f = prefix(i).family();
                b.announce(&pool.get(peer, i % 3, f), Nlri::new(prefix(i)));
            }
            flush(&p, &mut b);
        }
        p.barrier();
        let together: Vec<TestSink> = (21..25u32)
            .map(|peer| {
                let s = TestSink::new();
                join(&p, peer, &s);
                s
            })
            .collect();
        p.barrier();
        let want = member_table(&live.bytes.lock().unwrap(), &params());
        assert_eq!(want.len(), 64, "{shards}/{uts}");
        for s in &together {
            let got = member_table(&s.bytes.lock().unwrap(), &params());
            assert_eq!(got, want, "{shards}/{uts}");
        }
        p.stop();
    }
}

/// A member that leaves after a re-shard moved its group to another update thread leaves it
/// there (its Leave follows the group, not the thread it joined on).
#[test]
fn leave_after_a_reshard_reaches_the_moved_group() {
    let p = start(2, 2);
    let mut joined = Vec::new();
    // Three groups: on update threads 0, 1, 0; with three threads the third moves to 2.
    for m in [0, 2, 3] {
        let info = PeerInfo {
            ebgp: m != 3,
            address: 0x100 + m as u128,
            peer_as: MEMBERS[m].2,
            ..upstream(0)
        };
        let id = MemberId {
            peer: member_peer(m),
            epoch: 0,
        };
        let (msgs, j) = p.peer_up(
            member_peer(m),
            info,
            Some((spec(m), id, Box::new(TestSink::new()))),
        );
        send_all(&p, msgs);
        joined.push((m, j));
    }
    p.barrier();
    let groups_on = |p: &Pipeline| -> Vec<(String, usize, usize)> {
        let (_, threads) = p.stats();
        let mut v: Vec<_> = threads
            .iter()
            .flat_map(|t| t.groups.iter())
            .map(|g| (g.name.clone(), g.thread, g.members.len()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        groups_on(&p),
        [
            ("back-to-65001".into(), 1, 1),
            ("ibgp".into(), 0, 1),
            ("transit".into(), 0, 1)
        ]
    );
    p.reconfigure(3, 3);
    assert_eq!(
        groups_on(&p),
        [
            ("back-to-65001".into(), 1, 1),
            ("ibgp".into(), 2, 1),
            ("transit".into(), 0, 1)
        ]
    );
    let (m, j) = joined.pop().unwrap();
    send_all(&p, p.peer_down(member_peer(m), None, j));
    p.barrier();
    assert_eq!(
        groups_on(&p),
        [("back-to-65001".into(), 1, 1), ("transit".into(), 0, 1)],
        "the ibgp member left its group on its new thread"
    );
    p.stop();
}

/// Stopping does not wait for the periodic tick: the ticker thread is told at once. (It
/// used to poll a flag between 200 ms sleeps, so every stop, and every pipeline benchmark,
/// waited up to a tick.)
#[test]
fn stop_does_not_wait_for_a_tick() {
    use ribshard_engine::pipeline::TICK;
    for (s, u) in [(1, 0), (2, 2)] {
        let p = start(s, u);
        // Well inside the ticker's first wait.
        std::thread::sleep(TICK / 10);
        let t = std::time::Instant::now();
        p.stop();
        let took = t.elapsed();
        assert!(took < TICK / 2, "{s}x{u}: stop took {took:?}");
    }
}
