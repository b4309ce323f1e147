//! RFC 1997 well-known communities on every export path: NO_EXPORT and NO_EXPORT_SUBCONFED
//! never leave the AS (external groups, a route server's clients), NO_ADVERTISE goes to no
//! one; an export policy that deletes one lets the route go.

mod common;

use common::params;
use ribshard_policy::PolicyOptions;
use ribshard_rib::export::{NO_ADVERTISE, NO_EXPORT, NO_EXPORT_SUBCONFED};
use ribshard_rib::{export, GroupKind, GroupSpec, LoopChecks, PeerInfo, RouteAttrs};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Origin, Prefix};
use std::net::Ipv4Addr;
use std::sync::Arc;

const LOCAL_AS: u32 = 65000;

fn attrs(communities: &[u32]) -> RouteAttrs {
    let mut v = vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([65001])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
    ];
    if !communities.is_empty() {
        v.push(AttrValue::Communities(communities.to_vec()));
    }
    RouteAttrs::from_attributes(
        &PathAttributes::canonical(v),
        &[198, 51, 100, 1],
        &LoopChecks::default(),
    )
}

fn spec(kind: GroupKind, export: Arc<ribshard_policy::Chain>) -> GroupSpec {
    GroupSpec {
        long_lived: false,
        name: "g".into(),
        kind,
        local_as: LOCAL_AS,
        global_as: None,
        peer_as: if matches!(kind, GroupKind::Internal { .. }) {
            LOCAL_AS
        } else {
            65099
        },
        router_id: Ipv4Addr::new(192, 0, 2, 1),
        next_hop_self: true,
        local_v4: None,
        local_v6: None,
        export,
        params: params(),
        families: [true, true],
        role: None,
        add_path: None,
    }
}

/// An eBGP neighbor in AS 65001 (a route server client for the route server group).
fn src(rs_client: bool) -> PeerInfo {
    PeerInfo {
        ebgp: true,
        router_id: 7,
        address: 7,
        local_as: LOCAL_AS,
        peer_as: 65001,
        rr_cluster: None,
        rs_client,
    }
}

fn p() -> Prefix {
    Prefix::v4(Ipv4Addr::new(203, 0, 113, 0), 24).unwrap()
}

#[test]
fn well_known_communities_are_honoured_on_every_export_path() {
    let accept = Arc::new(ribshard_policy::Chain::accept_all());
    let external = spec(GroupKind::External, accept.clone());
    let internal = spec(
        GroupKind::Internal {
            client_cluster: None,
        },
        accept.clone(),
    );
    let reflected = spec(
        GroupKind::Internal {
            client_cluster: Some(1),
        },
        accept.clone(),
    );
    let route_server = spec(GroupKind::RouteServer, accept);
    // (community, external, internal, reflected to clients, route server clients)
    let cases = [
        (None, true, true, true, true),
        (Some(NO_EXPORT), false, true, true, false),
        (Some(NO_EXPORT_SUBCONFED), false, true, true, false),
        (Some(NO_ADVERTISE), false, false, false, false),
        (Some(65001 << 16 | 100), true, true, true, true),
    ];
    for (c, ext, int, refl, rs) in cases {
        let a = attrs(&c.into_iter().collect::<Vec<_>>());
        let got = [
            export(&external, &src(false), &a, &p()).is_some(),
            export(&internal, &src(false), &a, &p()).is_some(),
            export(&reflected, &src(false), &a, &p()).is_some(),
            export(&route_server, &src(true), &a, &p()).is_some(),
        ];
        assert_eq!(got, [ext, int, refl, rs], "community {c:x?}");
    }
}

#[test]
fn an_export_policy_that_deletes_no_export_lets_the_route_go() {
    let opts: PolicyOptions = toml::from_str(
        r#"
[community.no-export]
members = ["no-export"]
[[policy-statement.strip.term]]
then = { community-delete = "no-export", action = "accept" }
"#,
    )
    .unwrap();
    let c = ribshard_policy::compile(&opts, &|_: &std::path::Path| Ok(String::new()));
    let chain = c
        .policies
        .chain(&["strip".to_string()], true, LOCAL_AS)
        .unwrap();
    let external = spec(GroupKind::External, Arc::new(chain));
    let e = export(
        &external,
        &src(false),
        &attrs(&[NO_EXPORT, 65001 << 16 | 7]),
        &p(),
    )
    .expect("sent once the policy deleted NO_EXPORT");
    assert!(!e.attrs.windows(4).any(|w| w == NO_EXPORT.to_be_bytes()));
    // NO_ADVERTISE stays: the policy did not delete it.
    assert!(export(&external, &src(false), &attrs(&[NO_ADVERTISE]), &p()).is_none());
}
