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
    let mut s = Shard::new(Options::default());
    for (i, t) in tables.iter().enumerate() {
        s.set_peer(i as u32, info(t));
        for (n, a) in &t.routes {
            s.announce_one(i as u32, a, *n);
        }
    }
    let _ = s.drain_changes();
    s
}
