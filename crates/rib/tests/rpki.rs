//! RPKI in a shard: import policies that read `validation-state` and `aspa-state` see the
//! snapshot the shard was handed, and a new snapshot imports again only the paths inside
//! the ROA prefixes it changed.

use ribshard_policy::{Chain, PolicyOptions};
use ribshard_rib::{
    source_of, Import, LoopChecks, Options, PathFilter, PeerInfo, RouteAttrs, Shard,
};
use ribshard_rpki::{AspaTable, Snapshot, Validity, Vrp, VrpTable};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Nlri, Origin, Prefix};
use std::sync::Arc;

fn attrs(path: &[u32]) -> Arc<RouteAttrs> {
    let v = vec![
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence(path.iter().copied())),
        AttrValue::NextHop([198, 51, 100, 1].into()),
    ];
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

/// 10.`b`.`i`.0/24.
fn p(b: u32, i: u32) -> Prefix {
    Prefix::V4 {
        addr: 0x0a00_0000 | (b << 16) | (i << 8),
        len: 24,
    }
}

fn p16(b: u32) -> Prefix {
    Prefix::V4 {
        addr: 0x0a00_0000 | (b << 16),
        len: 16,
    }
}

const POLICIES: &str = r#"
[[policy-statement.rov.term]]
name = "invalid"
from = { validation-state = "invalid" }
then = { action = "reject" }
[[policy-statement.rov.term]]
then = { action = "accept" }
[[policy-statement.aspa.term]]
name = "invalid"
from = { aspa-state = "invalid" }
then = { action = "reject" }
[[policy-statement.aspa.term]]
then = { action = "accept" }
"#;

fn import(info: &PeerInfo, name: &str) -> Arc<Import> {
    let opts: PolicyOptions = toml::from_str(POLICIES).unwrap();
    let read = |_: &std::path::Path| Ok(String::new());
    let c = ribshard_policy::compile(&opts, &read);
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    let chain: Chain = c.policies.chain(&[name.to_string()], false, 65000).unwrap();
    assert!(chain.reads_prefix());
    Arc::new(Import {
        chain: Arc::new(chain),
        ..Import::accept_all(source_of(info))
    })
}

fn snapshot(version: u64, old: &VrpTable, vrps: Vec<Vrp>, aspas: AspaTable) -> Arc<Snapshot> {
    let t = VrpTable::new(vrps);
    Arc::new(Snapshot {
        version,
        changed: Arc::new(old.diff(&t)),
        vrps: Arc::new(t),
        aspas: Arc::new(aspas),
        aspa_changed: true,
    })
}

/// Accepted paths per prefix, by the shard's view.
fn accepted(s: &Shard, prefix: &Prefix) -> usize {
    let filter = PathFilter {
        hidden: true,
        ..PathFilter::default()
    };
    s.route(prefix, filter)
        .map_or(0, |v| v.paths.iter().filter(|p| p.path.accepted()).count())
}

#[test]
fn a_new_snapshot_imports_again_only_what_it_covers() {
    let mut s = Shard::new(Options::default());
    let info = peer(0);
    s.set_peer(0, info);
    s.set_import(0, import(&info, "rov"));
    // Before any data every route is not-found: all accepted.
    for b in 1..=3 {
        for i in 0..100 {
            s.announce(0, &attrs(&[65001]), [Nlri::new(p(b, i))]);
        }
    }
    assert_eq!(s.drain_changes().len(), 300);

    // 10.2/16 belongs to another AS: its hundred routes become invalid and go. Only the
    // routes inside the changed ROA prefixes are looked at.
    let first = snapshot(
        1,
        &VrpTable::default(),
        vec![Vrp::new(p16(1), 24, 65001), Vrp::new(p16(2), 24, 65099)],
        AspaTable::default(),
    );
    let (looked, _) = s.set_rpki(first.clone());
    assert_eq!(looked, 200);
    let c = s.drain_changes();
    assert_eq!(c.len(), 100);
    assert!(c.iter().all(|c| c.best.is_none()));
    assert_eq!(accepted(&s, &p(2, 5)), 0);
    assert_eq!(accepted(&s, &p(1, 5)), 1);
    // A route arriving later is validated on arrival (and indexed).
    s.announce(0, &attrs(&[65001]), [Nlri::new(p(2, 200))]);
    assert!(s.drain_changes().is_empty());

    // 10.2/16 now has a ROA for AS65001 too: only its 101 routes are looked at again,
    // and they come back.
    let second = snapshot(
        2,
        &first.vrps,
        vec![
            Vrp::new(p16(1), 24, 65001),
            Vrp::new(p16(2), 24, 65099),
            Vrp::new(p16(2), 24, 65001),
        ],
        AspaTable::default(),
    );
    assert_eq!(&second.changed[..], &[ribshard_rpki::Key::of(&p16(2))]);
    let (looked, _) = s.set_rpki(second.clone());
    assert_eq!(looked, 101);
    assert_eq!(s.drain_changes().len(), 101);
    // The view shows each path's state.
    let v = s.route(&p(2, 5), PathFilter::default()).unwrap();
    assert_eq!(v.paths[0].validity, Some(Validity::Valid));
    let v = s.route(&p(3, 5), PathFilter::default()).unwrap();
    assert_eq!(v.paths[0].validity, Some(Validity::NotFound));

    // Withdrawn prefixes leave the index as they are found missing.
    for i in 0..100 {
        s.withdraw(0, [Nlri::new(p(1, i))]);
    }
    s.drain_changes();
    let third = snapshot(3, &second.vrps, vec![], AspaTable::default());
    assert_eq!(third.changed.len(), 2);
    let (looked, _) = s.set_rpki(third);
    assert_eq!(looked, 101);
}

#[test]
fn aspa_changes_ask_for_a_walk_of_the_peers_that_read_it() {
    let mut s = Shard::new(Options::default());
    let (a, b) = (peer(0), peer(1));
    s.set_peer(0, a);
    s.set_peer(1, b);
    s.set_import(0, import(&a, "aspa"));
    s.set_import(1, import(&b, "rov"));
    // From customer 65001, originated by 65010 which names only 65020 as provider: a leak.
    s.announce(0, &attrs(&[65001, 65010]), [Nlri::new(p(1, 1))]);
    assert_eq!(s.drain_changes().len(), 1);
    let snap = snapshot(
        1,
        &VrpTable::default(),
        vec![],
        AspaTable::new([(65010, vec![65020])]),
    );
    let (_, walk) = s.set_rpki(snap);
    assert_eq!(walk, vec![0]);
    let mut w = s.walk(0, ribshard_rib::WalkOp::Reimport);
    while !s.walk_step(&mut w, 16) {}
    let c = s.drain_changes();
    assert_eq!(c.len(), 1);
    assert!(c[0].best.is_none());
}

#[test]
fn data_before_the_routes_and_a_change_after() {
    let mut s = Shard::new(Options::default());
    let first = snapshot(
        1,
        &VrpTable::default(),
        vec![Vrp::new(p16(1), 24, 65001)],
        AspaTable::default(),
    );
    s.set_rpki(first.clone());
    let info = peer(0);
    s.set_peer(0, info);
    s.set_import(0, import(&info, "rov"));
    for i in 0..10 {
        s.announce(0, &attrs(&[65001]), [Nlri::new(p(1, i))]);
    }
    assert_eq!(s.drain_changes().len(), 10);
    let second = snapshot(
        2,
        &first.vrps,
        vec![Vrp::new(p16(1), 24, 65002)],
        AspaTable::default(),
    );
    let (looked, _) = s.set_rpki(second);
    assert_eq!(looked, 10);
    assert_eq!(s.drain_changes().len(), 10);
    assert_eq!(accepted(&s, &p(1, 3)), 0);
}
