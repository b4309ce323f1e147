//! The same with sockets: three upstream peers send a fixed sequence of announcements and
//! withdrawals (one of them flaps), through real sessions and the pipeline, to two downstream
//! peers; what each downstream peer ends up holding is identical for every thread setting,
//! and equals what the decision process defines. Re-sharding while the routes flow changes
//! no table and takes no session down.

mod common;

use common::harness;
use common::peers::{ebgp_peer, params};
use common::rawpeer::RawPeer;
use ribshard_engine::PeerSettings;
use ribshard_fsm::State;
use ribshard_rib::attrs::{next_hop_of, normalized_key};
use ribshard_rib::{LoopChecks, RouteAttrs};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{decode, Family, Message, Nlri, Origin, Prefix, UpdateBuilder};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

const LOCAL_AS: u32 = 65050;

fn peer(addr: [u8; 4], asn: u32, downstream: bool) -> PeerSettings {
    let mut p = ebgp_peer(
        addr,
        asn,
        LOCAL_AS,
        Ipv4Addr::new(127, 0, 0, 50),
        downstream,
    );
    p.hold_time = 30;
    p
}

const UPSTREAM: [([u8; 4], u32); 3] = [
    ([127, 0, 0, 51], 65051),
    ([127, 0, 0, 52], 65052),
    ([127, 0, 0, 53], 65053),
];
const DOWNSTREAM: [([u8; 4], u32); 2] = [([127, 0, 0, 61], 65061), ([127, 0, 0, 62], 65062)];

fn prefix(i: u32) -> Prefix {
    Prefix::v4(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap()
}

/// The UPDATEs upstream `u` sends in round `r`: 300 prefixes with AS paths of lengths that
/// make each peer win some, then withdrawals of a third of them.
fn round(u: usize, r: u32) -> Vec<u8> {
    let b = UpdateBuilder::new(params());
    let mut out = Vec::new();
    for len in 0..3u32 {
        let asn = UPSTREAM[u].1;
        let mut path = vec![asn];
        path.extend((0..(len + u as u32 + r) % 4).map(|k| 64600 + k));
        let attrs = PathAttributes::canonical([
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence(path)),
            AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 51 + u as u8)),
            AttrValue::Communities(vec![asn << 16 | len]),
        ]);
        let enc = b.encode_attributes(&attrs);
        let nlri: Vec<Nlri> = (0..300)
            .filter(|i| i % 3 == len)
            .map(|i| Nlri::new(prefix(i)))
            .collect();
        b.announce(&enc, Family::Ipv4Unicast, &[], &nlri, &mut out)
            .unwrap();
    }
    let gone: Vec<Nlri> = (0..300)
        .filter(|i| (i + u as u32 + r) % 3 == 0)
        .map(|i| Nlri::new(prefix(i)))
        .collect();
    b.withdraw(Family::Ipv4Unicast, &gone, &mut out);
    out
}

/// Reads a downstream peer's messages until it has been quiet for a while: its table.
async fn table(p: &mut RawPeer) -> BTreeMap<Prefix, Vec<u8>> {
    let mut t = BTreeMap::new();
    let mut key = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(1500), p.recv()).await {
        if let Ok(Message::Update(u)) = decode(&m, &params()) {
            for n in u.withdrawn_all() {
                t.remove(&n.prefix);
            }
            for n in u.announced() {
                normalized_key(&u.attrs, &params(), next_hop_of(&u.attrs, false), &mut key);
                t.insert(n.prefix, key.clone());
            }
        }
    }
    t
}

/// Re-shards to `to` without waiting for it (routes are in flight meanwhile).
fn reshard(
    pipeline: &std::sync::Arc<ribshard_engine::pipeline::Pipeline>,
    to: Option<&(usize, usize)>,
) -> Option<tokio::task::JoinHandle<()>> {
    let &(s, u) = to?;
    let p = pipeline.clone();
    Some(tokio::task::spawn_blocking(move || {
        let r = p.reconfigure(s, u);
        assert_eq!(r.to, (p.config().shards, p.config().update_threads));
    }))
}

/// Runs the sequence with `shards` x `update_threads`, re-sharding to each of `reshards` in
/// turn: after each of the three rounds, after the flap and after the flapped peer's round.
async fn run(
    shards: usize,
    update_threads: usize,
    port: u16,
    reshards: &[(usize, usize)],
) -> Vec<BTreeMap<Prefix, Vec<u8>>> {
    let peers: Vec<PeerSettings> = UPSTREAM
        .iter()
        .map(|(a, asn)| peer(*a, *asn, false))
        .chain(DOWNSTREAM.iter().map(|(a, asn)| peer(*a, *asn, true)))
        .collect();
    let listen = SocketAddr::from(([127, 0, 0, 50], port));
    let (pipeline, sessions) =
        harness::start(shards, update_threads, Default::default(), peers, listen).await;
    let mut down = Vec::new();
    for (a, asn) in DOWNSTREAM {
        let mut p = RawPeer::connect(IpAddr::from(a), listen).await;
        p.establish(asn, 30).await;
        down.push(p);
    }
    let mut up = Vec::new();
    for (a, asn) in UPSTREAM {
        let mut p = RawPeer::connect(IpAddr::from(a), listen).await;
        p.establish(asn, 30).await;
        up.push(p);
    }
    let mut steps = reshards.iter();
    let mut pending = Vec::new();
    for r in 0..3 {
        for (u, p) in up.iter_mut().enumerate() {
            p.send(&round(u, r)).await;
        }
        pending.extend(reshard(&pipeline, steps.next()));
    }
    // The third upstream flaps: its session goes (and its routes with it), then it comes
    // back with one round only.
    drop(up.pop());
    let h = &sessions.peers[2];
    assert!(
        h.wait_for(Duration::from_secs(10), |s| s.state != State::Established)
            .await
    );
    assert!(
        h.wait_for(Duration::from_secs(10), |s| s.state == State::Active
            || s.state == State::Idle)
            .await
    );
    pending.extend(reshard(&pipeline, steps.next()));
    let mut back = RawPeer::connect(IpAddr::from(UPSTREAM[2].0), listen).await;
    back.establish(UPSTREAM[2].1, 30).await;
    back.send(&round(2, 7)).await;
    pending.extend(reshard(&pipeline, steps.next()));
    for h in pending {
        h.await.unwrap();
    }
    // Everything sent has gone through every thread.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let p = pipeline.clone();
    tokio::task::spawn_blocking(move || p.barrier())
        .await
        .unwrap();
    let mut tables = Vec::new();
    for p in &mut down {
        tables.push(table(p).await);
    }
    // No session but the flapped one ever left Established.
    for (i, h) in sessions.peers.iter().enumerate() {
        let st = h.status();
        assert_eq!(st.state, State::Established, "session {i}");
        let want = if i == 2 { 2 } else { 1 };
        assert_eq!(st.established_transitions, want, "session {i}");
    }
    harness::stop(pipeline, sessions).await;
    tables
}

/// What the decision process defines for the final state: each upstream's last round
/// (peer 3's round 7 after its flap), shortest AS path first; equal lengths go to the lowest
/// peer address (all the scripted peers share one BGP Identifier). Returns prefix -> the AS
/// path the downstream peers must see (ours prepended).
fn expected() -> BTreeMap<Prefix, Vec<u32>> {
    let mut best: BTreeMap<Prefix, (u32, usize, Vec<u32>)> = BTreeMap::new();
    for (u, r) in [(0usize, 2u32), (1, 2), (2, 7)] {
        for i in 0..300u32 {
            if (i + u as u32 + r) % 3 == 0 {
                continue; // withdrawn in its last round
            }
            let len = i % 3;
            let mut path = vec![UPSTREAM[u].1];
            path.extend((0..(len + u as u32 + r) % 4).map(|k| 64600 + k));
            let cand = (path.len() as u32, u, path);
            best.entry(prefix(i))
                .and_modify(|b| {
                    if (cand.0, cand.1) < (b.0, b.1) {
                        *b = cand.clone();
                    }
                })
                .or_insert(cand);
        }
    }
    best.into_iter()
        .map(|(p, (_, _, path))| {
            let mut full = vec![LOCAL_AS];
            full.extend(path);
            (p, full)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_tables_downstream_for_every_thread_setting() {
    let base = run(1, 0, 27801, &[]).await;
    assert!(base[0].len() > 150, "{} prefixes", base[0].len());
    // Both downstream peers (one update group) hold the same.
    assert_eq!(base[0], base[1]);
    let got: BTreeMap<Prefix, Vec<u32>> = base[0]
        .iter()
        .map(|(p, key)| {
            let a = RouteAttrs::from_key(key.clone().into(), &LoopChecks::default()).attributes();
            let path = a
                .as_path()
                .map(|p| p.segments.iter().flat_map(|s| s.asns.clone()).collect())
                .unwrap_or_default();
            (*p, path)
        })
        .collect();
    assert_eq!(got, expected());
    for (i, (s, u)) in [(2, 2), (4, 3)].into_iter().enumerate() {
        let t = run(s, u, 27802 + i as u16, &[]).await;
        assert_eq!(t, base, "{s} shards, {u} update threads");
    }
    // Re-sharding up and down, in and out of the single-threaded mode, while routes flow.
    let steps = [(2, 2), (4, 3), (1, 0), (3, 1), (1, 1)];
    let t = run(1, 0, 27805, &steps).await;
    assert_eq!(t, base, "re-sharded through {steps:?}");
}

/// A session takes in every message one read brought before it waits again (one wake of its
/// task per read rather than per message): none of them is lost, and none after a message
/// that ends the session is taken in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_read_together_are_taken_in_up_to_one_that_ends_the_session() {
    const UP: ([u8; 4], u32) = ([127, 0, 0, 54], 65054);
    const DOWN: ([u8; 4], u32) = ([127, 0, 0, 63], 65063);
    let listen = std::net::TcpListener::bind("127.0.0.50:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let peers = vec![peer(UP.0, UP.1, false), peer(DOWN.0, DOWN.1, true)];
    let (pipeline, sessions) = harness::start(2, 2, Default::default(), peers, listen).await;
    let mut down = RawPeer::connect(IpAddr::from(DOWN.0), listen).await;
    down.establish(DOWN.1, 30).await;
    let mut up = RawPeer::connect(IpAddr::from(UP.0), listen).await;
    up.establish(UP.1, 30).await;
    let b = UpdateBuilder::new(params());
    let attrs = b.encode_attributes(&PathAttributes::canonical([
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([UP.1])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 54)),
    ]));
    // UPDATEs of 10 /24s each, the first octet `a`, from `from` on.
    let updates = |a: u32, from: u32, n: u32, out: &mut Vec<u8>| {
        for i in from..from + n {
            let nlri: Vec<Nlri> = (0..10)
                .map(|k| {
                    Nlri::new(Prefix::v4(Ipv4Addr::from(a << 24 | i << 12 | k << 8), 24).unwrap())
                })
                .collect();
            b.announce(&attrs, Family::Ipv4Unicast, &[], &nlri, out)
                .unwrap();
        }
    };
    // 200 UPDATEs in one write: all 2,000 prefixes reach the downstream peer.
    let mut burst = Vec::new();
    updates(10, 0, 200, &mut burst);
    up.send(&burst).await;
    let t = table(&mut down).await;
    assert_eq!(t.len(), 2000);
    // Ten more, a malformed one (a /33: the session is reset, RFC 7606 section 5.3), ten
    // after it: the ten after it never reach the RIB.
    let mut burst = Vec::new();
    updates(11, 0, 10, &mut burst);
    let mut bad = vec![0xff; 16];
    bad.extend_from_slice(&[0, 29, 2, 0, 0, 0, 0, 33, 1, 2, 3, 4, 5]);
    let len = bad.len() as u16;
    bad[16..18].copy_from_slice(&len.to_be_bytes());
    burst.extend_from_slice(&bad);
    updates(12, 0, 10, &mut burst);
    up.send(&burst).await;
    let n = up.notification().await.expect("a NOTIFICATION");
    assert_eq!((n.code, n.subcode), (3, 10));
    let mut announced = Vec::new();
    let mut table = t;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(1500), down.recv()).await {
        if let Ok(Message::Update(u)) = decode(&m, &params()) {
            for n in u.withdrawn_all() {
                table.remove(&n.prefix);
            }
            for n in u.announced() {
                announced.push(n.prefix);
                table.insert(n.prefix, Vec::new());
            }
        }
    }
    let after = |p: &Prefix| matches!(p, Prefix::V4 { addr, .. } if addr >> 24 == 12);
    assert!(!announced.iter().any(after), "{announced:?}");
    assert!(
        table.is_empty(),
        "the session's routes went with it: {table:?}"
    );
    harness::stop(pipeline, sessions).await;
}
