//! Add-Path send through the pipeline without sockets: under random announcements and
//! withdrawals from four upstreams, a member sent the best two paths per prefix and one sent
//! every path hold, per prefix, as many paths as there are eligible (up to two), each under
//! its own identifier; a member that joins late (a table dump) ends with what the one that
//! followed every live change holds; and every thread setting gives the same tables.

mod pipeline_fixture;

use pipeline_fixture::*;
use proptest::prelude::*;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::{Batcher, Pipeline, PipelineConfig};
use ribshard_rib::attrs::normalized_key;
use ribshard_rib::{AddPathKeep, AddPathSelect, GroupSpec, Options};
use ribshard_wire::{frame, parse_update, Family, Nlri, Prefix, SessionParams};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const SETTINGS: [(usize, usize); 3] = [(1, 0), (2, 2), (3, 1)];

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
}

fn op() -> impl Strategy<Value = Op> {
    let prefixes = proptest::collection::vec(prop_oneof![0u8..6, 32u8..35], 1..5);
    prop_oneof![
        3 => (0u32..4, prefixes.clone(), 0u8..5)
            .prop_map(|(peer, prefixes, variant)| Op::Announce { peer, prefixes, variant }),
        1 => (0u32..4, prefixes).prop_map(|(peer, prefixes)| Op::Withdraw { peer, prefixes }),
    ]
}

fn sending() -> SessionParams {
    SessionParams {
        add_path: [true, true],
        ..params()
    }
}

/// Member `m`'s spec (a transit group), sending several paths per prefix.
fn several(m: usize, select: AddPathSelect) -> GroupSpec {
    GroupSpec {
        name: format!("add-path-{m}"),
        params: sending(),
        add_path: Some(select),
        ..spec(0)
    }
}

/// What a member holds: (prefix, path identifier) -> its attributes and next hop.
type Held = BTreeMap<(Prefix, u32), Vec<u8>>;

fn held(bytes: &[u8]) -> Held {
    let mut t = Held::new();
    let mut rest = bytes;
    let mut key = Vec::new();
    while let Ok(Some(len)) = frame(rest, 65535) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let u = parse_update(&msg[19..], &sending()).expect("valid UPDATEs");
        for n in u.withdrawn_all() {
            t.remove(&(n.prefix, n.path_id.expect("an identifier")));
        }
        for n in u.announced() {
            let mp = n.prefix.family() != Family::Ipv4Unicast;
            let nh = ribshard_rib::attrs::next_hop_of(&u.attrs, mp);
            normalized_key(&u.attrs, &sending(), nh, &mut key);
            t.insert((n.prefix, n.path_id.expect("an identifier")), key.clone());
        }
    }
    t
}

fn settle(p: &Pipeline) {
    p.barrier();
    std::thread::sleep(ribshard_engine::pipeline::TICK * 2);
    p.barrier();
}

/// The members' tables: best two (followed live), all, best two (joined at the end).
fn run(ops: &[Op], (shards, update_threads): (usize, usize)) -> [Held; 3] {
    let p = Pipeline::start(PipelineConfig {
        shards,
        update_threads,
        options: Options {
            add_path: Some(AddPathKeep {
                ranked: 2,
                all: true,
                equal_cost: false,
            }),
            ..Options::default()
        },
        write_queue: Default::default(),
    });
    for i in 0..4 {
        send_all(&p, p.peer_up(i, upstream(i), None).0);
    }
    let join = |m: usize, select: AddPathSelect| {
        let sink = TestSink::new();
        let id = MemberId {
            peer: member_peer(m),
            epoch: 0,
        };
        let (msgs, _) = p.peer_up(
            member_peer(m),
            upstream(0),
            Some((several(m, select), id, Box::new(sink.clone()))),
        );
        send_all(&p, msgs);
        sink
    };
    let two = join(0, AddPathSelect::Best(2));
    let all = join(1, AddPathSelect::All);
    let mut pool = Pool(HashMap::new());
    for o in ops {
        let mut b;
        match o {
            Op::Announce {
                peer,
                prefixes,
                variant,
            } => {
                b = Batcher::new(*peer, p.shards());
                for &i in prefixes {
                    let pf = prefix(i);
                    b.announce(&pool.get(*peer, *variant, pf.family()), Nlri::new(pf));
                }
            }
            Op::Withdraw { peer, prefixes } => {
                b = Batcher::new(*peer, p.shards());
                for &i in prefixes {
                    b.withdraw(Nlri::new(prefix(i)));
                }
            }
        }
        flush(&p, &mut b);
    }
    settle(&p);
    let late = join(2, AddPathSelect::Best(2));
    settle(&p);
    let out = [&two, &all, &late].map(|s| held(&s.bytes.lock().unwrap()));
    out
}

/// Per prefix, the upstreams whose path is eligible at the end (variant 4 loops).
fn eligible(ops: &[Op]) -> BTreeMap<Prefix, BTreeSet<u32>> {
    let mut by: BTreeMap<(Prefix, u32), u8> = BTreeMap::new();
    for o in ops {
        match o {
            Op::Announce {
                peer,
                prefixes,
                variant,
            } => {
                for &i in prefixes {
                    by.insert((prefix(i), *peer), *variant);
                }
            }
            Op::Withdraw { peer, prefixes } => {
                for &i in prefixes {
                    by.remove(&(prefix(i), *peer));
                }
            }
        }
    }
    let mut out: BTreeMap<Prefix, BTreeSet<u32>> = BTreeMap::new();
    for ((pf, peer), v) in by {
        if v != 4 {
            out.entry(pf).or_default().insert(peer);
        }
    }
    out
}

fn per_prefix(h: &Held) -> BTreeMap<Prefix, usize> {
    let mut n = BTreeMap::new();
    for (pf, _) in h.keys() {
        *n.entry(*pf).or_insert(0) += 1;
    }
    n
}

proptest! {
    #![proptest_config(persisted(12, "add_path_pipeline"))]
    #[test]
    fn members_hold_their_paths_in_every_setting(ops in proptest::collection::vec(op(), 1..30)) {
        let eligible = eligible(&ops);
        let want_two: BTreeMap<Prefix, usize> =
            eligible.iter().map(|(p, s)| (*p, s.len().min(2))).collect();
        let want_all: BTreeMap<Prefix, usize> =
            eligible.iter().map(|(p, s)| (*p, s.len())).collect();
        let mut first: Option<[Held; 3]> = None;
        for setting in SETTINGS {
            let [two, all, late] = run(&ops, setting);
            prop_assert_eq!(&per_prefix(&two), &want_two, "best two, {:?}", setting);
            prop_assert_eq!(&per_prefix(&all), &want_all, "all, {:?}", setting);
            prop_assert_eq!(&late, &two, "the late member's dump, {:?}", setting);
            // The best two are the first two of all.
            for (k, v) in &two {
                prop_assert_eq!(all.get(k), Some(v));
            }
            match &first {
                None => first = Some([two, all, late]),
                Some(f) => {
                    prop_assert_eq!(&f[0], &two, "differs from {:?} in {:?}", SETTINGS[0], setting);
                    prop_assert_eq!(&f[1], &all);
                }
            }
        }
    }
}
