//! Input a peer may send that the RFCs say how to handle, over live sessions: AS 0 (RFC
//! 7607), confederation segments from outside (RFC 5065), next hops that are no usable
//! host address (RFC 4271 section 6.3), an UPDATE of attributes alone that calls for
//! treat-as-withdraw (RFC 7606 section 5.2), unexpected messages (RFC 6608), conflicting
//! BGP Roles (RFC 9234 section 4.2), and the well-known communities (RFC 1997) on export.

mod common;

use common::harness;
use common::peers::{announce_v4, ebgp_peer, params};
use common::rawpeer::RawPeer;
use ribshard_engine::{PeerSettings, Sessions};
use ribshard_fsm::State;
use ribshard_wire::attributes::{AsPath, AsSegment, AttrValue, PathAttributes};
use ribshard_wire::notification::code;
use ribshard_wire::open::{role, Capability};
use ribshard_wire::update::{segment, Aggregator};
use ribshard_wire::{decode, Family, Message, Open, Origin, Prefix};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

const LOCAL_AS: u32 = 65070;
const UP: ([u8; 4], u32) = ([127, 0, 0, 71], 65071);
const DOWN: ([u8; 4], u32) = ([127, 0, 0, 72], 65072);
const INTERNAL: [u8; 4] = [127, 0, 0, 73];

/// Our listener on 127.0.0.70, on a port the OS had free.
fn listen() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.70:0").unwrap();
    l.local_addr().unwrap()
}

fn peer((addr, asn): ([u8; 4], u32), downstream: bool) -> PeerSettings {
    let mut p = ebgp_peer(
        addr,
        asn,
        LOCAL_AS,
        Ipv4Addr::new(127, 0, 0, 70),
        downstream,
    );
    p.families = vec![Family::Ipv4Unicast];
    p
}

fn internal() -> PeerSettings {
    let mut p = peer((INTERNAL, LOCAL_AS), true);
    p.internal = true;
    p.routing.group = "internal".into();
    p
}

fn prefix(i: u8) -> Prefix {
    Prefix::v4(Ipv4Addr::new(203, 0, i, 0), 24).unwrap()
}

fn good() -> Vec<AttrValue> {
    vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([UP.1])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 9)),
    ]
}

/// `good()` with `change` made to it.
fn with(change: impl FnOnce(&mut Vec<AttrValue>)) -> Vec<AttrValue> {
    let mut v = good();
    change(&mut v);
    v
}

fn set(v: &mut Vec<AttrValue>, a: AttrValue) {
    v.retain(|x| std::mem::discriminant(x) != std::mem::discriminant(&a));
    v.push(a);
}

fn announce(attrs: Vec<AttrValue>, i: u8) -> Vec<u8> {
    announce_v4(attrs, prefix(i))
}

/// Sessions alone (no pipeline) with the upstream configured, and a scripted upstream
/// connected to them, nothing sent yet.
async fn upstream_alone() -> (Sessions, RawPeer) {
    let listen = listen();
    let sessions = Sessions::start_with(vec![peer(UP, false)], &[listen], None, None)
        .await
        .unwrap();
    let up = RawPeer::connect(IpAddr::from(UP.0), listen).await;
    (sessions, up)
}

/// What a receiving peer holds once nothing more comes for 1.5 s: prefix -> attributes.
async fn table(p: &mut RawPeer) -> BTreeMap<Prefix, PathAttributes> {
    let mut got = BTreeMap::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(1500), p.recv()).await {
        if let Ok(Message::Update(u)) = decode(&m, &params()) {
            for n in u.withdrawn_all() {
                got.remove(&n.prefix);
            }
            let a = PathAttributes::from_view(&u.attrs, &params());
            for n in u.announced() {
                got.insert(n.prefix, a.clone());
            }
        }
    }
    got
}

fn prefixes(t: &BTreeMap<Prefix, PathAttributes>) -> Vec<u8> {
    t.keys()
        .map(|p| match p {
            Prefix::V4 { addr, .. } => (addr >> 8 & 0xff) as u8,
            Prefix::V6 { .. } => 0,
        })
        .collect()
}

async fn connect(listen: SocketAddr, addr: [u8; 4], asn: u32) -> RawPeer {
    let mut p = RawPeer::connect(IpAddr::from(addr), listen).await;
    p.establish(asn, 90).await;
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_a_peer_may_not_send_are_ignored_and_well_known_communities_honoured() {
    let listen = listen();
    let peers = vec![peer(UP, false), peer(DOWN, true), internal()];
    let (pipeline, sessions) = harness::start(1, 0, Default::default(), peers, listen).await;
    let mut down = connect(listen, DOWN.0, DOWN.1).await;
    let mut inside = connect(listen, INTERNAL, LOCAL_AS).await;
    let mut up = connect(listen, UP.0, UP.1).await;

    let confed = AsPath {
        segments: vec![
            AsSegment {
                kind: segment::AS_CONFED_SEQUENCE,
                asns: vec![64512],
            },
            AsSegment {
                kind: segment::AS_SEQUENCE,
                asns: vec![UP.1],
            },
        ],
    };
    let next_hop = |a: [u8; 4]| with(|v| set(v, AttrValue::NextHop(Ipv4Addr::from(a))));
    let community = |c: u32| with(|v| v.push(AttrValue::Communities(vec![c])));
    let sent: Vec<(u8, Vec<AttrValue>)> = vec![
        // RFC 7607: AS 0 in AS_PATH, treat-as-withdraw.
        (
            1,
            with(|v| set(v, AttrValue::AsPath(AsPath::sequence([UP.1, 0])))),
        ),
        // RFC 5065: confederation segments from an external peer, treat-as-withdraw.
        (2, with(|v| set(v, AttrValue::AsPath(confed)))),
        // RFC 4271 section 6.3: next hops that are no usable host address, ignored.
        (3, next_hop([0, 0, 0, 0])),
        (4, next_hop([224, 0, 0, 1])),
        (5, next_hop([240, 0, 0, 1])),
        (6, next_hop([127, 0, 0, 70])),
        // RFC 7607: AS 0 in AGGREGATOR, attribute discard: the route stays.
        (
            7,
            with(|v| {
                v.push(AttrValue::Aggregator(Aggregator {
                    asn: 0,
                    address: Ipv4Addr::new(192, 0, 2, 1),
                }))
            }),
        ),
        // RFC 1997.
        (8, community(0xFFFF_FF01)),
        (9, community(0xFFFF_FF02)),
        (10, community(0xFFFF_FF03)),
        (11, good()),
        // Sent good, then with AS 0: withdrawn.
        (12, good()),
        (
            12,
            with(|v| set(v, AttrValue::AsPath(AsPath::sequence([0])))),
        ),
        // RFC 4271 section 9.1.2: our own AS in the path, kept but never chosen.
        (
            13,
            with(|v| set(v, AttrValue::AsPath(AsPath::sequence([UP.1, LOCAL_AS])))),
        ),
    ];
    // Withdrawn before it was ever announced: a duplicate withdraw to BMP (RFC 7854
    // section 4.8, type 2); and 11 after all of it, withdrawn once and then again.
    let withdraw = |i: u8| {
        let mut out = Vec::new();
        ribshard_wire::UpdateBuilder::new(params()).withdraw(
            Family::Ipv4Unicast,
            &[ribshard_wire::Nlri::new(prefix(i))],
            &mut out,
        );
        out
    };
    up.send(&withdraw(200)).await;
    for (i, attrs) in sent {
        up.send(&announce(attrs, i)).await;
    }
    let outside = table(&mut down).await;
    assert_eq!(prefixes(&outside), [7, 11], "external: {outside:?}");
    let aggregated = &outside[&prefix(7)];
    assert!(
        aggregated
            .list
            .iter()
            .all(|a| !matches!(a.value, AttrValue::Aggregator(_))),
        "the AGGREGATOR with AS 0 was discarded: {aggregated:?}"
    );
    let within = table(&mut inside).await;
    assert_eq!(
        prefixes(&within),
        [7, 8, 10, 11],
        "NO_EXPORT and NO_EXPORT_SUBCONFED stay inside the AS, NO_ADVERTISE goes nowhere"
    );
    // None of it reset the session.
    let st = sessions.peers[0].status();
    assert_eq!(st.state, State::Established);
    assert!(st.last_sent.is_none(), "{:?}", st.last_sent);
    assert_eq!(st.prefixes[0], 6, "7 to 11 and 13 are in its Adj-RIB-In");
    // Counted for BMP's statistics: three UPDATEs treated as withdraw (1, 2 and the second
    // of 12), one prefix each; withdrawals of what was not held: 200, and 11 the second time;
    // one UPDATE whose path loops (13).
    up.send(&withdraw(11)).await;
    up.send(&withdraw(11)).await;
    let want = ribshard_engine::InputCounts {
        duplicate_withdraws: 2,
        treat_as_withdraw_updates: 3,
        treat_as_withdraw_prefixes: 3,
        as_path_loops: 1,
        ..Default::default()
    };
    let counted = sessions.peers[0]
        .wait_for(Duration::from_secs(10), |st| st.input == want)
        .await;
    assert!(counted, "{:?}", sessions.peers[0].status().input);
    harness::stop(pipeline, sessions).await;
}

/// An UPDATE with attributes and nothing to announce or withdraw, whose ORIGIN is invalid:
/// treat-as-withdraw has nothing to act on (RFC 7606 section 5.2), so the session is reset
/// with RFC 4271's NOTIFICATION for an invalid ORIGIN, the attribute as data.
#[tokio::test]
async fn a_malformed_update_without_nlri_resets_the_session() {
    let (sessions, mut up) = upstream_alone().await;
    up.establish(UP.1, 90).await;
    let attrs: &[u8] = &[
        0x40, 1, 1, 7, // ORIGIN 7: not a value
        0x40, 2, 6, 2, 1, 0, 0, 0xfe, 0x2f, // AS_PATH 65071
        0x40, 3, 4, 198, 51, 100, 9, // NEXT_HOP
    ];
    let mut body = vec![0, 0];
    body.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    body.extend_from_slice(attrs);
    let mut msg = vec![0xff; 16];
    msg.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
    msg.push(2);
    msg.extend_from_slice(&body);
    up.send(&msg).await;
    let n = up.notification().await.expect("a NOTIFICATION");
    assert_eq!(
        (n.code, n.subcode, n.data.as_slice()),
        (code::UPDATE_MESSAGE, 6, &[0x40, 1, 1, 7][..])
    );
    sessions
        .shutdown("test over", Duration::from_millis(200))
        .await;
}

/// RFC 6608: an UPDATE in OpenConfirm is an FSM error naming the state (subcode 2) and the
/// message's type (data: 2).
#[tokio::test]
async fn an_unexpected_message_gets_an_fsm_error_with_its_type() {
    let (sessions, mut up) = upstream_alone().await;
    let open = Open::new(
        UP.1,
        90,
        Ipv4Addr::new(10, 0, 0, 2),
        vec![Capability::FourOctetAs(UP.1)],
    );
    up.send(&open.encode()).await;
    // Our OPEN and KEEPALIVE: we are in OpenConfirm, waiting for its KEEPALIVE.
    for _ in 0..2 {
        assert!(up.recv().await.is_some());
    }
    up.send(&announce(good(), 1)).await;
    let n = up.notification().await.expect("a NOTIFICATION");
    assert_eq!(
        (n.code, n.subcode, n.data.as_slice()),
        (code::FSM, 2, &[2u8][..])
    );
    sessions
        .shutdown("test over", Duration::from_millis(200))
        .await;
}

/// RFC 9234 section 4.2: the BGP Role capability twice with different values is a Role
/// Mismatch, whether or not we have a role configured.
#[tokio::test]
async fn conflicting_roles_in_one_open_are_a_role_mismatch() {
    let (sessions, mut up) = upstream_alone().await;
    let open = Open::new(
        UP.1,
        90,
        Ipv4Addr::new(10, 0, 0, 2),
        vec![
            Capability::FourOctetAs(UP.1),
            Capability::Role(role::PEER),
            Capability::Role(role::CUSTOMER),
        ],
    );
    up.send(&open.encode()).await;
    let n = up.notification().await.expect("a NOTIFICATION");
    assert_eq!((n.code, n.subcode), (code::OPEN_MESSAGE, 11));
    sessions
        .shutdown("test over", Duration::from_millis(200))
        .await;
}
