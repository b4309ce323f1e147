//! Junos `local-as` towards an external group: routes sent carry the local AS, then the
//! global AS (unless `no-prepend-global-as`); routes received get the local AS in front
//! (unless `private`), which is not a loop, while either AS further along is.

mod common;

use common::params;
use ribshard_rib::attrs::Interner;
use ribshard_rib::{export, GroupKind, GroupSpec, Ingress, LoopChecks, PeerInfo, RouteAttrs};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{parse_update, Origin, UpdateBuilder};
use std::net::Ipv4Addr;

const GLOBAL: u32 = 65000;
const LOCAL: u32 = 65100;

fn path_of(a: &RouteAttrs) -> Vec<u32> {
    a.attributes()
        .as_path()
        .map(|p| p.segments.iter().flat_map(|s| s.asns.clone()).collect())
        .unwrap_or_default()
}

fn spec(global_as: Option<u32>) -> GroupSpec {
    GroupSpec {
        long_lived: false,
        name: "masquerade".into(),
        kind: GroupKind::External,
        local_as: LOCAL,
        global_as,
        peer_as: 65099,
        router_id: Ipv4Addr::new(192, 0, 2, 1),
        next_hop_self: true,
        local_v4: Some(Ipv4Addr::new(192, 0, 2, 1)),
        local_v6: None,
        export: std::sync::Arc::new(ribshard_policy::Chain::accept_all()),
        params: params(),
        families: [true, true],
        role: None,
        add_path: None,
    }
}

/// What a group sends of a path [65001]: its AS_PATH.
fn sent(spec: &GroupSpec) -> Vec<u32> {
    let a = RouteAttrs::from_attributes(
        &PathAttributes::canonical([
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence([65001])),
            AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
        ]),
        &[198, 51, 100, 1],
        &LoopChecks::default(),
    );
    let src = PeerInfo {
        ebgp: true,
        router_id: 7,
        address: 7,
        local_as: GLOBAL,
        peer_as: 65001,
        rr_cluster: None,
        rs_client: false,
    };
    let e = export(spec, &src, &a, &common::prefix()).unwrap();
    // Decode what the group would send.
    let msg = common::update_for(&e.attrs, &e.mp_next_hop);
    let u = parse_update(&msg[19..], &params()).unwrap();
    u.attrs
        .reconstructed_as_path()
        .into_iter()
        .flat_map(|(_, asns)| asns)
        .collect()
}

#[test]
fn sent_with_local_then_global_as() {
    assert_eq!(sent(&spec(Some(GLOBAL))), [LOCAL, GLOBAL, 65001]);
    // no-prepend-global-as
    assert_eq!(sent(&spec(None)), [LOCAL, 65001]);
}

/// An UPDATE from the masquerade peer with this AS_PATH, interned as its session does.
fn received(path: &[u32], ingress: Ingress) -> std::sync::Arc<RouteAttrs> {
    let b = UpdateBuilder::new(params());
    let enc = b.encode_attributes(&PathAttributes::canonical([
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence(path.iter().copied())),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
        AttrValue::Communities(vec![65099 << 16 | 7]),
    ]));
    let msg = common::update_for(&enc, &[]);
    let u = parse_update(&msg[19..], &params()).unwrap();
    let mut i = Interner::new(LoopChecks {
        local_as: LOCAL,
        loops: 1,
        global_as: Some(GLOBAL),
        prepended: ingress.prepend.is_some(),
        ..LoopChecks::default()
    });
    i.intern_with(&u.attrs, &params(), &[198, 51, 100, 1], ingress)
}

#[test]
fn received_with_local_as_in_front_and_both_ases_looped() {
    let prepend = Ingress {
        otc: None,
        prepend: Some(LOCAL),
    };
    let a = received(&[65099, 65001], prepend);
    assert_eq!(path_of(&a), [LOCAL, 65099, 65001]);
    assert_eq!(a.as_path_len, 3, "the decision process counts it");
    assert_eq!(a.neighbor_as, Some(LOCAL));
    assert!(a.loop_free(), "the AS put in front is not a loop");
    // The other attributes are kept as they were.
    assert_eq!(
        a.attributes().get(ribshard_wire::attr::COMMUNITIES),
        Some(&AttrValue::Communities(vec![65099 << 16 | 7]))
    );
    // Either of our ASes further along is a loop.
    assert!(!received(&[65099, LOCAL], prepend).loop_free());
    assert!(!received(&[65099, GLOBAL], prepend).loop_free());
    // private: nothing put in front; still both ASes are ours.
    let private = received(&[65099, 65001], Ingress::default());
    assert_eq!(path_of(&private), [65099, 65001]);
    assert!(private.loop_free());
    assert!(!received(&[65099, GLOBAL], Ingress::default()).loop_free());
}
