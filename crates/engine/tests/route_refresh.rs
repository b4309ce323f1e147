//! Enhanced route refresh (RFC 7313) over real sessions: a neighbor that re-advertises
//! between BoRR and EoRR loses exactly what it did not send again, downstream too; a
//! neighbor that asks for the table gets it between a BoRR and an EoRR. Without the
//! capability, the markers are ignored.

mod common;

use common::harness;
use common::peers::{ebgp_peer, params};
use common::rawpeer::RawPeer;
use ribshard_engine::pipeline::Pipeline;
use ribshard_engine::{PeerSettings, Sessions};
use ribshard_fsm::State;
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::open::Capability;
use ribshard_wire::{decode, Family, Message, Nlri, Origin, Prefix, RouteRefresh, UpdateBuilder};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

const LOCAL_AS: u32 = 65080;
const UP: ([u8; 4], u32) = ([127, 0, 0, 81], 65081);
const DOWN: ([u8; 4], u32) = ([127, 0, 0, 82], 65082);

fn peer(addr: [u8; 4], asn: u32, downstream: bool) -> PeerSettings {
    ebgp_peer(
        addr,
        asn,
        LOCAL_AS,
        Ipv4Addr::new(127, 0, 0, 80),
        downstream,
    )
}

fn prefix(i: u32) -> Prefix {
    Prefix::v4(Ipv4Addr::from(0x0a50_0000 + (i << 8)), 24).unwrap()
}

fn announce(range: std::ops::Range<u32>) -> Vec<u8> {
    let b = UpdateBuilder::new(params());
    let attrs = b.encode_attributes(&PathAttributes::canonical([
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([UP.1])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 81)),
    ]));
    let nlri: Vec<Nlri> = range.map(|i| Nlri::new(prefix(i))).collect();
    let mut out = Vec::new();
    b.announce(&attrs, Family::Ipv4Unicast, &[], &nlri, &mut out)
        .unwrap();
    out
}

fn marker(subtype: u8) -> Vec<u8> {
    RouteRefresh {
        afi: 1,
        subtype,
        safi: 1,
    }
    .encode()
}

/// What a downstream peer reads: UPDATEs applied to its table, ROUTE-REFRESH subtypes in
/// order, until it holds `want` prefixes (and, if `until_eorr`, has seen an EoRR) or 10 s pass.
async fn read(
    p: &mut RawPeer,
    table: &mut BTreeSet<Prefix>,
    want: usize,
    until_eorr: bool,
) -> Vec<(u8, usize)> {
    let mut markers = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if table.len() == want && (!until_eorr || markers.iter().any(|(s, _)| *s == 2)) {
            break;
        }
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(1), p.recv()).await else {
            continue;
        };
        match decode(&m, &params()) {
            Ok(Message::Update(u)) => {
                for n in u.withdrawn_all() {
                    table.remove(&n.prefix);
                }
                for n in u.announced() {
                    table.insert(n.prefix);
                }
            }
            // The subtype, and how many prefixes the table held when it came.
            Ok(Message::RouteRefresh(rr)) => markers.push((rr.subtype, table.len())),
            _ => {}
        }
    }
    markers
}

async fn start(port: u16) -> (Arc<Pipeline>, Sessions, SocketAddr) {
    let listen = SocketAddr::from(([127, 0, 0, 80], port));
    let peers = vec![peer(UP.0, UP.1, false), peer(DOWN.0, DOWN.1, true)];
    let (pipeline, sessions) = harness::start(2, 2, Default::default(), peers, listen).await;
    (pipeline, sessions, listen)
}

fn enhanced() -> Vec<Capability> {
    vec![Capability::RouteRefresh, Capability::EnhancedRouteRefresh]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enhanced_route_refresh_both_ways() {
    let (pipeline, sessions, listen) = start(28121).await;
    let mut down = RawPeer::connect(IpAddr::from(DOWN.0), listen).await;
    down.establish_with(DOWN.1, 90, enhanced()).await;
    let mut up = RawPeer::connect(IpAddr::from(UP.0), listen).await;
    up.establish_with(UP.1, 90, enhanced()).await;
    assert!(
        sessions.peers[0]
            .wait_for(Duration::from_secs(5), |s| s
                .negotiated
                .as_ref()
                .is_some_and(|n| n.enhanced_route_refresh))
            .await
    );

    let mut table = BTreeSet::new();
    up.send(&announce(0..100)).await;
    read(&mut down, &mut table, 100, false).await;
    assert_eq!(table.len(), 100);

    // The upstream re-advertises 0..60 only: 60..100 were not sent again and go, here and
    // downstream, at its EoRR.
    up.send(&marker(RouteRefresh::BORR)).await;
    up.send(&announce(0..60)).await;
    up.send(&marker(RouteRefresh::EORR)).await;
    read(&mut down, &mut table, 60, false).await;
    assert_eq!(table, (0..60).map(prefix).collect::<BTreeSet<_>>());
    assert!(
        sessions.peers[0]
            .wait_for(Duration::from_secs(5), |s| s.prefixes[0] == 60)
            .await,
        "Adj-RIB-In count {:?}",
        sessions.peers[0].status().prefixes
    );

    // The downstream asks for the table: BoRR, the 60 prefixes, then EoRR.
    down.send(&marker(RouteRefresh::REQUEST)).await;
    let mut again = BTreeSet::new();
    let markers = read(&mut down, &mut again, 60, true).await;
    assert_eq!(
        markers,
        [(RouteRefresh::BORR, 0), (RouteRefresh::EORR, 60)],
        "BoRR before the table, EoRR after it"
    );
    assert_eq!(again, table);
    harness::stop(pipeline, sessions).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_without_the_capability_are_ignored() {
    let (pipeline, sessions, listen) = start(28122).await;
    let mut down = RawPeer::connect(IpAddr::from(DOWN.0), listen).await;
    down.establish_with(DOWN.1, 90, vec![Capability::RouteRefresh])
        .await;
    let mut up = RawPeer::connect(IpAddr::from(UP.0), listen).await;
    up.establish_with(UP.1, 90, vec![Capability::RouteRefresh])
        .await;
    let mut table = BTreeSet::new();
    up.send(&announce(0..100)).await;
    read(&mut down, &mut table, 100, false).await;
    up.send(&marker(RouteRefresh::BORR)).await;
    up.send(&announce(0..60)).await;
    up.send(&marker(RouteRefresh::EORR)).await;
    // Nothing is withdrawn; a plain refresh request gets the table without markers.
    down.send(&marker(RouteRefresh::REQUEST)).await;
    let mut again = BTreeSet::new();
    let markers = read(&mut down, &mut again, 100, false).await;
    assert!(markers.is_empty(), "{markers:?}");
    assert_eq!(again.len(), 100);
    assert_eq!(sessions.peers[0].status().prefixes[0], 100);
    assert_eq!(sessions.peers[0].status().state, State::Established);
    harness::stop(pipeline, sessions).await;
}
