//! Only to Customer (RFC 9234 section 5) on export: which roles get a path carrying OTC, and
//! which get OTC added. Ingress (leaks refused, OTC added from providers, peers and route
//! servers) is tested with sessions in crates/engine/tests/route_leaks.rs.

mod common;

use common::params;
use ribshard_rib::attrs::Interner;
use ribshard_rib::{export, GroupKind, GroupSpec, LoopChecks, PeerInfo, RouteAttrs};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::open::role;
use ribshard_wire::{parse_update, Origin, UpdateBuilder};
use std::net::Ipv4Addr;

const LOCAL_AS: u32 = 65000;

fn attrs(otc: Option<u32>) -> RouteAttrs {
    let mut v = vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([65001])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
    ];
    v.extend(otc.map(AttrValue::Otc));
    RouteAttrs::from_attributes(
        &PathAttributes::canonical(v),
        &[198, 51, 100, 1],
        &LoopChecks::default(),
    )
}

fn spec(kind: GroupKind, role: Option<u8>) -> GroupSpec {
    GroupSpec {
        long_lived: false,
        name: "g".into(),
        kind,
        local_as: LOCAL_AS,
        global_as: None,
        peer_as: 65099,
        router_id: Ipv4Addr::new(192, 0, 2, 1),
        next_hop_self: true,
        local_v4: None,
        local_v6: None,
        export: std::sync::Arc::new(ribshard_policy::Chain::accept_all()),
        params: params(),
        families: [true, true],
        role,
        add_path: None,
    }
}

fn src() -> PeerInfo {
    PeerInfo {
        ebgp: true,
        router_id: 7,
        address: 7,
        local_as: LOCAL_AS,
        peer_as: 65001,
        rr_cluster: None,
        rs_client: false,
    }
}

/// The OTC value a group would send, or `None` for "not sent at all"; `Some(None)`: sent
/// without OTC.
fn otc_sent(kind: GroupKind, role: Option<u8>, otc: Option<u32>) -> Option<Option<u32>> {
    let e = export(&spec(kind, role), &src(), &attrs(otc), &common::prefix())?;
    // Decode what the group would send.
    let msg = common::update_for(&e.attrs, &e.mp_next_hop);
    let u = parse_update(&msg[19..], &params()).unwrap();
    Some(u.attrs.otc)
}

#[test]
fn a_path_with_otc_goes_only_to_customers_and_route_server_clients() {
    let ext = GroupKind::External;
    // Our role towards the receiver: customer (it is our provider), peer, RS client (it is
    // our route server): not sent.
    for r in [role::CUSTOMER, role::PEER, role::RS_CLIENT] {
        assert_eq!(otc_sent(ext, Some(r), Some(65001)), None, "role {r}");
    }
    // Provider (it is our customer): sent, OTC unchanged.
    assert_eq!(
        otc_sent(ext, Some(role::PROVIDER), Some(65001)),
        Some(Some(65001))
    );
    // We are its route server.
    assert_eq!(
        otc_sent(GroupKind::RouteServer, Some(role::RS), Some(65001)),
        Some(Some(65001))
    );
}

#[test]
fn a_path_without_otc_gets_ours_towards_customers_peers_and_rs_clients() {
    let ext = GroupKind::External;
    assert_eq!(
        otc_sent(ext, Some(role::PROVIDER), None),
        Some(Some(LOCAL_AS))
    );
    assert_eq!(otc_sent(ext, Some(role::PEER), None), Some(Some(LOCAL_AS)));
    assert_eq!(
        otc_sent(GroupKind::RouteServer, Some(role::RS), None),
        Some(Some(LOCAL_AS))
    );
    // Towards our provider or route server: sent as it is.
    assert_eq!(otc_sent(ext, Some(role::CUSTOMER), None), Some(None));
    assert_eq!(otc_sent(ext, Some(role::RS_CLIENT), None), Some(None));
}

#[test]
fn without_a_role_or_over_ibgp_otc_is_left_alone() {
    assert_eq!(
        otc_sent(GroupKind::External, None, Some(65001)),
        Some(Some(65001))
    );
    assert_eq!(otc_sent(GroupKind::External, None, None), Some(None));
    let ibgp = GroupKind::Internal {
        client_cluster: None,
    };
    assert_eq!(otc_sent(ibgp, Some(role::PEER), None), Some(None));
}

#[test]
fn interning_with_otc_adds_exactly_one_attribute() {
    let b = UpdateBuilder::new(params());
    let enc = b.encode_attributes(&PathAttributes::canonical([
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([65001])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
    ]));
    let msg = common::update_for(&enc, &[]);
    let u = parse_update(&msg[19..], &params()).unwrap();
    let mut i = Interner::new(LoopChecks::default());
    let nh = [198, 51, 100, 1];
    let with = i.intern_with(
        &u.attrs,
        &params(),
        &nh,
        ribshard_rib::Ingress {
            otc: Some(65001),
            prepend: None,
        },
    );
    let without = i.intern(&u.attrs, &params(), &nh);
    assert!(!std::sync::Arc::ptr_eq(&with, &without));
    assert_eq!(
        with.attributes().get(ribshard_wire::attr::OTC),
        Some(&AttrValue::Otc(65001))
    );
    assert_eq!(without.attributes().get(ribshard_wire::attr::OTC), None);
    assert_eq!(
        with.attributes().list.len(),
        without.attributes().list.len() + 1
    );
}
