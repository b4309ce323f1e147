//! Route leak prevention with BGP roles (RFC 9234 section 5) over real sessions: routes
//! carrying OTC from a customer, or from a peer with another AS in it, are ineligible; a
//! route from a provider or peer without OTC gets the neighbor's AS; what a customer then
//! receives carries OTC either way.

mod common;

use common::harness;
use common::peers::{announce_v4, ebgp_peer, params};
use common::rawpeer::RawPeer;
use ribshard_engine::PeerSettings;
use ribshard_wire::attributes::{AsPath, AttrValue};
use ribshard_wire::open::{role, Capability};
use ribshard_wire::{decode, Family, Message, Origin, Prefix};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const LOCAL_AS: u32 = 65090;
/// (address, AS, the role we take towards it).
const PROVIDER: ([u8; 4], u32, u8) = ([127, 0, 0, 91], 65091, role::CUSTOMER);
const CUSTOMER: ([u8; 4], u32, u8) = ([127, 0, 0, 92], 65092, role::PROVIDER);
const PEER: ([u8; 4], u32, u8) = ([127, 0, 0, 93], 65093, role::PEER);
/// Another customer, that receives.
const DOWN: ([u8; 4], u32, u8) = ([127, 0, 0, 94], 65094, role::PROVIDER);

fn settings((addr, asn, ours): ([u8; 4], u32, u8), downstream: bool) -> PeerSettings {
    let mut p = ebgp_peer(
        addr,
        asn,
        LOCAL_AS,
        Ipv4Addr::new(127, 0, 0, 90),
        downstream,
    );
    p.families = vec![Family::Ipv4Unicast];
    p.role = Some(ours);
    // One configured group per neighbor: each its own role.
    p.routing.group = format!("AS{asn}");
    p
}

/// The role the neighbor takes towards us, for its OPEN.
fn theirs(ours: u8) -> u8 {
    match ours {
        role::CUSTOMER => role::PROVIDER,
        role::PROVIDER => role::CUSTOMER,
        role::RS => role::RS_CLIENT,
        role::RS_CLIENT => role::RS,
        _ => role::PEER,
    }
}

fn prefix(i: u8) -> Prefix {
    Prefix::v4(Ipv4Addr::new(203, 0, i, 0), 24).unwrap()
}

/// One route from `asn`, with this OTC.
fn route(asn: u32, i: u8, otc: Option<u32>) -> Vec<u8> {
    let mut v = vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([asn])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 9)),
    ];
    v.extend(otc.map(AttrValue::Otc));
    announce_v4(v, prefix(i))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaks_are_ineligible_and_otc_is_set() {
    let listen = std::net::TcpListener::bind("127.0.0.90:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let peers = vec![
        settings(PROVIDER, false),
        settings(CUSTOMER, false),
        settings(PEER, false),
        settings(DOWN, true),
    ];
    let (pipeline, sessions) = harness::start(2, 2, Default::default(), peers, listen).await;
    let connect = |n: ([u8; 4], u32, u8)| async move {
        let mut p = RawPeer::connect(IpAddr::from(n.0), listen).await;
        p.establish_with(n.1, 90, vec![Capability::Role(theirs(n.2))])
            .await;
        p
    };
    let mut down = connect(DOWN).await;
    let mut provider = connect(PROVIDER).await;
    let mut customer = connect(CUSTOMER).await;
    let mut peer = connect(PEER).await;

    provider.send(&route(PROVIDER.1, 1, None)).await;
    customer.send(&route(CUSTOMER.1, 2, None)).await;
    customer.send(&route(CUSTOMER.1, 3, Some(64999))).await;
    peer.send(&route(PEER.1, 4, Some(PEER.1))).await;
    peer.send(&route(PEER.1, 5, Some(64999))).await;
    // A leak replaces what the customer announced before for the prefix.
    customer.send(&route(CUSTOMER.1, 6, None)).await;
    customer.send(&route(CUSTOMER.1, 6, Some(64999))).await;

    // What the downstream customer holds once quiet: prefix -> OTC.
    let mut got: BTreeMap<Prefix, Option<u32>> = BTreeMap::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(1500), down.recv()).await {
        if let Ok(Message::Update(u)) = decode(&m, &params()) {
            for n in u.withdrawn_all() {
                got.remove(&n.prefix);
            }
            for n in u.announced() {
                got.insert(n.prefix, u.attrs.otc);
            }
        }
    }
    let want: BTreeMap<Prefix, Option<u32>> = [
        // From our provider: OTC = its AS (ingress), kept towards a customer.
        (prefix(1), Some(PROVIDER.1)),
        // From a customer without OTC: ours added towards another customer (egress).
        (prefix(2), Some(LOCAL_AS)),
        // From a peer with its own AS as OTC: eligible.
        (prefix(4), Some(PEER.1)),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want, "3, 5 and 6 are leaks");
    assert_eq!(
        sessions.peers[1].status().prefixes[0],
        1,
        "the customer's leaked routes are not in its Adj-RIB-In count"
    );
    harness::stop(pipeline, sessions).await;
}
