//! The two full tables of the 2010 RouteViews RIB (`../shared/data/`), as the pipeline gets
//! them from two upstream sessions: one interned attribute set per distinct set and peer.
//! Shared by the real-data test and the ingest benchmark.
#![allow(dead_code)]

use ribshard_engine::pipeline::Pipeline;
use ribshard_mrt::{Peer, Record, RibRecord};
use ribshard_rib::attrs::next_hop_of;
use ribshard_rib::{
    GroupKind, GroupSpec, Interner, LoopChecks, Options, PeerInfo, RouteAttrs, Shard,
};
use ribshard_wire::{parse_attributes_only, Nlri, SessionParams};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The downstream peer's AS.
pub const DOWN_AS: u32 = 64900;

/// The downstream peer's session: 4-octet ASes, nothing else.
pub fn downstream_params() -> SessionParams {
    SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    }
}

/// One downstream eBGP peer's group, next hop self.
pub fn downstream() -> GroupSpec {
    GroupSpec {
        long_lived: false,
        name: "downstream".into(),
        kind: GroupKind::External,
        local_as: LOCAL_AS,
        global_as: None,
        peer_as: DOWN_AS,
        router_id: Ipv4Addr::new(192, 0, 2, 1),
        next_hop_self: true,
        local_v4: Some(Ipv4Addr::new(127, 0, 0, 1)),
        local_v6: None,
        export: std::sync::Arc::new(ribshard_policy::Chain::accept_all()),
        params: downstream_params(),
        families: [true, true],
        role: None,
        add_path: None,
    }
}

/// Our AS in these tests: absent from the 2010 paths (64999 is in them).
pub const LOCAL_AS: u32 = 4_200_000_001;

pub const FILE: &str = "routeviews-wide-20100701.mrt.gz";

/// A full-table peer and its routes, in file order.
pub struct Table {
    pub peer: Peer,
    pub routes: Vec<(Nlri, Arc<RouteAttrs>)>,
}

/// The tables of the peers in `asns` (AS2497 and AS4777 are the full ones); `None` without
/// the data file.
pub fn load(asns: &[u32]) -> Option<Vec<Table>> {
    let path = ribshard_mrt::shared_data_file(FILE)?;
    let mut r = ribshard_mrt::open(&path).expect("open the RIB");
    let mut tables: Vec<(u16, Interner, Table)> = Vec::new();
    let params = RibRecord::params();
    while let Some(raw) = r.next_record().expect("read") {
        match Record::parse(&raw) {
            Ok(Record::PeerIndexTable(t)) => {
                for (i, p) in t.peers.iter().enumerate() {
                    if asns.contains(&p.asn) {
                        let interner = Interner::new(LoopChecks {
                            local_as: LOCAL_AS,
                            loops: 1,
                            router_id: 0xc000_0201,
                            cluster_ids: vec![],
                            ..LoopChecks::default()
                        });
                        tables.push((
                            i as u16,
                            interner,
                            Table {
                                peer: *p,
                                routes: Vec::new(),
                            },
                        ));
                    }
                }
            }
            Ok(Record::Rib(rib)) => {
                for e in &rib.entries {
                    let Some((_, interner, t)) =
                        tables.iter_mut().find(|(i, _, _)| *i == e.peer_index)
                    else {
                        continue;
                    };
                    let Ok(u) = parse_attributes_only(e.attributes, &params) else {
                        continue;
                    };
                    let v6 = rib.prefix.family() != ribshard_wire::Family::Ipv4Unicast;
                    let a = interner.intern(&u.attrs, &params, next_hop_of(&u.attrs, v6));
                    t.routes.push((Nlri::new(rib.prefix), a));
                }
            }
            _ => {}
        }
    }
    Some(
        asns.iter()
            .filter_map(|asn| {
                let i = tables.iter().position(|(_, _, t)| t.peer.asn == *asn)?;
                Some(tables.swap_remove(i).2)
            })
            .collect(),
    )
}

/// The shard's view of a table's peer: an external peer with its address and identifier.
pub fn info(t: &Table) -> PeerInfo {
    PeerInfo {
        ebgp: true,
        router_id: u32::from(t.peer.bgp_id),
        address: match t.peer.address {
            std::net::IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
            std::net::IpAddr::V6(a) => u128::from(a),
        },
        local_as: LOCAL_AS,
        peer_as: t.peer.asn,
        rr_cluster: None,
        rs_client: false,
    }
}

/// Brings up one upstream peer per table (peer index = table index).
pub fn peers_up(p: &Pipeline, tables: &[Table]) {
    for (i, t) in tables.iter().enumerate() {
        for m in p.peer_up(i as u32, info(t), None).0 {
            p.blocking_send(m);
        }
    }
}

/// Every path of the tables in one shard, on this thread, every prefix decided.
pub fn into_shard(tables: &[Table]) -> Shard {
    into_shard_with_import(tables, None)
}

/// A transit import policy whose accepting term changes every route (local preference and
/// a community), as `ribshard-bench --policy` configures: the shard makes a set of its own
/// for each received one.
pub const TRANSIT_IN: &str = r#"
[prefix-list.bogons]
prefixes = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
            "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
            "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/3"]
[community.from-transit]
members = ["64500:100"]
[as-path]
bogon-asns = ".* [0 23456 64496-131071 4200000000-4294967295] .*"
[[policy-statement.transit-in.term]]
name = "bogons"
from = { prefix-list-filter = { list = "bogons", match = "orlonger" } }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "lengths"
from = { route-filter = ["0.0.0.0/0 prefix-length-range /25-/32", "0.0.0.0/0 upto /7"] }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "paths"
from = { as-path = "bogon-asns" }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "accept"
then = { local-preference = 100, community-add = "from-transit", action = "accept" }
"#;

/// [`TRANSIT_IN`] compiled, as an external peer's import chain.
pub fn transit_in() -> Arc<ribshard_policy::Chain> {
    let opts: ribshard_policy::PolicyOptions = toml::from_str(TRANSIT_IN).expect("policy");
    let compiled = ribshard_policy::compile(&opts, &|_: &std::path::Path| Ok(String::new()));
    assert!(compiled.errors.is_empty(), "{:?}", compiled.errors);
    Arc::new(
        compiled
            .policies
            .chain(&["transit-in".to_string()], false, 4_200_000_001)
            .expect("chain"),
    )
}

/// The tables with each peer's routes in the order its UPDATEs bring them: the prefixes of
/// one attribute set together (in the order each set first appears), as a speaker packs them.
pub fn in_update_order(tables: &[Table]) -> Vec<Table> {
    tables
        .iter()
        .map(|t| {
            let mut first: std::collections::HashMap<usize, usize> = Default::default();
            for (i, (_, a)) in t.routes.iter().enumerate() {
                first.entry(Arc::as_ptr(a) as usize).or_insert(i);
            }
            let mut routes = t.routes.clone();
            routes.sort_by_key(|(_, a)| first.get(&(Arc::as_ptr(a) as usize)).copied());
            Table {
                peer: t.peer,
                routes,
            }
        })
        .collect()
}

/// [`into_shard`] with `import` as every peer's import chain.
pub fn into_shard_with_import(
    tables: &[Table],
    import: Option<Arc<ribshard_policy::Chain>>,
) -> Shard {
    into_shard_validating(tables, import, None)
}

/// [`into_shard_with_import`], the shard holding `rpki` before the first route comes.
#[allow(dead_code)]
pub fn into_shard_validating(
    tables: &[Table],
    import: Option<Arc<ribshard_policy::Chain>>,
    rpki: Option<Arc<ribshard_rpki::Snapshot>>,
) -> Shard {
    let mut s = Shard::new(Options::default());
    if let Some(r) = rpki {
        s.set_rpki(r);
    }
    for (i, t) in tables.iter().enumerate() {
        s.set_peer(i as u32, info(t));
        if let Some(chain) = &import {
            s.set_import(
                i as u32,
                Arc::new(ribshard_rib::Import {
                    chain: chain.clone(),
                    source: ribshard_policy::Source {
                        address: t.peer.address,
                        peer_as: t.peer.asn,
                        internal: false,
                    },
                    own_as: 4_200_000_001,
                    local_address: None,
                    from_provider: false,
                }),
            );
        }
        for (n, a) in &t.routes {
            s.announce_one(i as u32, a, *n);
        }
    }
    let _ = s.drain_changes();
    s
}
