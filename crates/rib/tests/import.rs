//! Import policy in a shard: paths changed or rejected per policy, the Adj-RIB-In kept as
//! received, changed sets shared, and a new policy applied again without the peer.

use ribshard_policy::{Chain, PolicyOptions, Source};
use ribshard_rib::{source_of, Import, LoopChecks, Options, PeerInfo, RouteAttrs, Shard, WalkOp};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Nlri, Origin, Prefix};
use std::sync::Arc;

fn attrs(path: &[u32], communities: &[u32]) -> Arc<RouteAttrs> {
    let mut v = vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence(path.iter().copied())),
        AttrValue::NextHop([198, 51, 100, 1].into()),
    ];
    if !communities.is_empty() {
        v.push(AttrValue::Communities(communities.to_vec()));
    }
    Arc::new(RouteAttrs::from_attributes(
        &PathAttributes::canonical(v),
        &[198, 51, 100, 1],
        &LoopChecks::default(),
    ))
}

fn peer(i: u32) -> PeerInfo {
    PeerInfo {
        ebgp: true,
        router_id: 100 + i,
        address: u128::from(std::net::Ipv4Addr::new(198, 51, 100, i as u8).to_ipv6_mapped()),
        local_as: 65000,
        peer_as: 65001 + i,
        rr_cluster: None,
        rs_client: false,
    }
}

fn p(i: u32) -> Prefix {
    Prefix::V4 {
        addr: 0x0a00_0000 + (i << 8),
        len: 24,
    }
}

const POLICIES: &str = r#"
[community.prefer]
members = ["65001:200"]
[[policy-statement.in.term]]
name = "no-10-0-5"
from = { route-filter = ["10.0.5.0/24 exact"] }
then = { action = "reject" }
[[policy-statement.in.term]]
name = "prefer"
from = { community = "prefer" }
then = { local-preference = 200, action = "accept" }
[[policy-statement.in.term]]
name = "rest"
then = { action = "accept" }
[[policy-statement.nothing.term]]
then = { action = "reject" }
"#;

fn import(info: &PeerInfo, name: &str) -> Arc<Import> {
    let opts: PolicyOptions = toml::from_str(POLICIES).unwrap();
    let read = |_: &std::path::Path| Ok(String::new());
    let c = ribshard_policy::compile(&opts, &read);
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    let chain: Chain = c.policies.chain(&[name.to_string()], false, 65000).unwrap();
    let source: Source = source_of(info);
    Arc::new(Import {
        chain: Arc::new(chain),
        source,
        own_as: 65000,
        local_address: None,
        from_provider: false,
    })
}

#[test]
fn import_policy_changes_rejects_and_is_applied_again() {
    let mut s = Shard::new(Options::default());
    let (a, b) = (peer(0), peer(1));
    s.set_peer(0, a);
    s.set_peer(1, b);
    s.set_import(0, import(&a, "in"));
    // Peer 0's routes carry "prefer": local preference 200 beats peer 1's shorter path.
    let preferred = attrs(&[65001, 7, 8], &[65001 << 16 | 200]);
    let plain = attrs(&[65002, 7], &[]);
    s.announce(0, &preferred, (0..10).map(|i| Nlri::new(p(i))));
    s.announce(1, &plain, (0..10).map(|i| Nlri::new(p(i))));
    let changes = s.drain_changes();
    assert_eq!(changes.len(), 10);
    for i in 0..10 {
        let best = s.best(&p(i)).unwrap();
        if i == 5 {
            // Rejected from peer 0: peer 1's path wins; peer 0's stays, marked.
            assert_eq!(best.peer, 1);
            let route = s
                .route(
                    &p(i),
                    ribshard_rib::PathFilter {
                        hidden: true,
                        ..Default::default()
                    },
                )
                .unwrap();
            assert!(route
                .paths
                .iter()
                .any(|v| v.path.peer == 0 && v.path.rejected()));
        } else {
            assert_eq!(best.peer, 0, "prefix {i}");
            assert_eq!(best.attrs.local_pref, Some(200));
            // Kept as received, and one changed set shared by every prefix.
            assert!(Arc::ptr_eq(best.attrs.as_received(), &preferred));
        }
    }
    let changed: Vec<_> = (0..10)
        .filter(|&i| i != 5)
        .map(|i| s.best(&p(i)).unwrap().attrs.clone())
        .collect();
    assert!(changed.iter().all(|x| Arc::ptr_eq(x, &changed[0])));
    let counts = s.peer_counts()[0][0];
    assert_eq!(
        (counts.received, counts.accepted, counts.active),
        (10, 9, 9)
    );
    // The same set sent again is no change at all.
    s.announce(0, &preferred, [Nlri::new(p(0))]);
    assert!(s.drain_changes().is_empty());

    // A new policy for peer 0: everything rejected, applied to what it sent before.
    s.set_import(0, import(&a, "nothing"));
    let mut w = s.walk(0, WalkOp::Reimport);
    while !s.walk_step(&mut w, 3) {}
    let changes = s.drain_changes();
    assert_eq!(changes.len(), 9, "every prefix peer 0 had moves to peer 1");
    assert!(changes.iter().all(|c| c.best.as_ref().unwrap().peer == 1));
    assert_eq!(s.peer_counts()[0][0].accepted, 0);
    assert_eq!(s.paths(), 20, "nothing left the Adj-RIB-In");
    // And back: the routes come back from what was kept.
    s.set_import(0, import(&a, "in"));
    let mut w = s.walk(0, WalkOp::Reimport);
    while !s.walk_step(&mut w, 100) {}
    assert_eq!(s.drain_changes().len(), 9);
    assert_eq!(s.best(&p(0)).unwrap().attrs.local_pref, Some(200));
}

/// The sets the common actions make on the attribute bytes (`Chain::apply_raw`, read by
/// `RouteAttrs::edited`) are the ones decoding, changing and encoding makes: the same key,
/// so they intern alike, and the same decision inputs.
#[test]
fn sets_edited_in_place_equal_decoded_ones() {
    let opts: PolicyOptions = toml::from_str(
        r#"
[community.tag]
members = ["64500:100", "large:64500:1:1"]
[[policy-statement.edit.term]]
then = { local-preference = 120, metric = { add = 5 }, origin = "egp", community-add = "tag", action = "accept" }
"#,
    )
    .unwrap();
    let c = ribshard_policy::compile(&opts, &|_: &std::path::Path| Ok(String::new()));
    let chain = c
        .policies
        .chain(&["edit".to_string()], false, 65000)
        .unwrap();
    let info = peer(0);
    let source = source_of(&info);
    for received in [
        attrs(&[65001, 7, 8], &[65001 << 16 | 200]),
        attrs(&[65001], &[]),
        attrs(&[], &[1, 2, 3]),
    ] {
        let s = ribshard_policy::Subject {
            prefix: p(0),
            attrs: received.raw(),
            next_hop: received.next_hop(),
            source: &source,
            receiver_as: None,
            rpki: Default::default(),
        };
        let v = chain.evaluate(&s);
        let mut key = vec![received.next_hop().len() as u8];
        key.extend_from_slice(received.next_hop());
        chain
            .apply_raw(&v, received.raw(), &mut key)
            .expect("actions made on the bytes");
        let edited = RouteAttrs::edited(key.into_boxed_slice(), &received);
        let m = chain.apply(
            &v,
            &s,
            received.attributes(),
            &ribshard_policy::ApplyContext { own_as: 65000 },
        );
        let decoded =
            RouteAttrs::from_attributes(&m.attrs, received.next_hop(), &LoopChecks::default());
        assert_eq!(edited.key(), decoded.key());
        assert_eq!(
            (
                edited.local_pref,
                edited.med,
                edited.origin,
                edited.as_path_len
            ),
            (
                decoded.local_pref,
                decoded.med,
                decoded.origin,
                decoded.as_path_len
            )
        );
        assert_eq!(
            (
                edited.neighbor_as,
                edited.cluster_list_len,
                edited.loop_free()
            ),
            (
                decoded.neighbor_as,
                decoded.cluster_list_len,
                decoded.loop_free()
            )
        );
        assert_eq!(
            (edited.local_pref, edited.med, edited.origin),
            (Some(120), 5, 1)
        );
    }
}
