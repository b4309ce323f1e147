//! The API's MRT answers: injecting and removing RIB files, and the Loc-RIB (or a
//! neighbor's Adj-RIB-In) written as a TABLE_DUMP_V2 file (`ribshard mrt dump-rib`): a
//! PEER_INDEX_TABLE of every peer index, then one RIB record per prefix, each written by the
//! shard holding it between its routing work (the walk `show route` uses, so routing is
//! never held up by more than a chunk).

use super::{peer_index, Api};
use crate::inject::Injected as Held;
use bytes::Bytes;
use ribshard_engine::pipeline::{RenderRoute, RouteQuery, ShownRoute};
use ribshard_mgmt::api::{Injected, InjectedPeer};
use ribshard_mgmt::ApiError;
use ribshard_mrt::{MrtWriter, Peer, PeerIndexTable, RibEntry};
use ribshard_rib::{PathFilter, PathState};
use ribshard_wire::attr::{self, flags};
use ribshard_wire::Family;
use std::net::Ipv4Addr;
use std::sync::Arc;
use tokio::sync::mpsc;

pub(super) fn injected(i: Held) -> Injected {
    Injected {
        file: i.file.display().to_string(),
        peers: i
            .peers
            .into_iter()
            .map(|(index, address, asn)| InjectedPeer {
                address: address.to_string(),
                peer_as: asn,
                peer_index: index,
            })
            .collect(),
        routes: i.routes,
        skipped: i.skipped,
    }
}

/// Writes each route as a TABLE_DUMP_V2 RIB record, its MRT peer index the peer index here
/// (the PEER_INDEX_TABLE lists every one). The sequence number is set as the records are
/// put in order.
#[derive(Debug)]
struct MrtRenderer {
    /// Only the active path (the Loc-RIB); else every path shown (an Adj-RIB-In).
    loc_rib: bool,
    timestamp: u32,
}

/// A path's attributes in RIB-entry form (RFC 6396 section 4.3.4): 4-octet ASNs (as kept),
/// and a next hop that is not an IPv4 NEXT_HOP in an abbreviated MP_REACH_NLRI.
fn rib_attributes(a: &ribshard_rib::RouteAttrs, family: Family, out: &mut Vec<u8>) {
    out.extend_from_slice(a.raw());
    let nh = a.next_hop();
    if family == Family::Ipv4Unicast && nh.len() == 4 {
        return;
    }
    if nh.is_empty() {
        return;
    }
    out.extend_from_slice(&[flags::OPTIONAL, attr::MP_REACH_NLRI]);
    out.push((nh.len() + 1) as u8);
    out.push(nh.len() as u8);
    out.extend_from_slice(nh);
}

impl RenderRoute for MrtRenderer {
    fn render(&self, r: &ShownRoute, out: &mut Vec<u8>) {
        let family = r.view.prefix.family();
        let paths: Vec<_> = r
            .view
            .paths
            .iter()
            .filter(|p| !self.loc_rib || matches!(p.state, PathState::Active { .. }))
            .filter(|p| p.path.peer <= u32::from(u16::MAX))
            .collect();
        if paths.is_empty() {
            return;
        }
        let attrs: Vec<Vec<u8>> = paths
            .iter()
            .map(|p| {
                let mut v = Vec::with_capacity(p.path.attrs.raw().len() + 24);
                rib_attributes(&p.path.attrs, family, &mut v);
                v
            })
            .collect();
        let entries: Vec<RibEntry<'_>> = paths
            .iter()
            .zip(&attrs)
            .map(|(p, a)| RibEntry {
                peer_index: p.path.peer as u16,
                originated: ribshard_rib::clock::to_system(p.path.since())
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as u32),
                path_id: (p.path.path_id != 0).then_some(p.path.path_id),
                attributes: a,
            })
            .collect();
        let mut w = MrtWriter::new(std::mem::take(out));
        let _ = w.write_rib(self.timestamp, 0, &r.view.prefix, &entries);
        *out = w.into_inner();
    }
}

/// Sets the sequence number of each RIB record of a chunk (they follow one another), from
/// `next`.
fn number(chunk: &mut [u8], next: &mut u32) {
    let mut at = 0;
    while let Some(h) = chunk.get(at..at + 12) {
        let len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        if let Some(seq) = chunk.get_mut(at + 12..at + 16) {
            seq.copy_from_slice(&next.to_be_bytes());
        }
        *next = next.wrapping_add(1);
        at += 12 + len;
    }
}

impl Api {
    pub(super) async fn inject(&self, file: String) -> Result<Injected, ApiError> {
        self.daemon
            .inject_mrt(file.into())
            .await
            .map(injected)
            .map_err(ApiError::BadRequest)
    }

    pub(super) async fn uninject(&self, file: String) -> Result<Injected, ApiError> {
        self.daemon
            .remove_mrt(std::path::Path::new(&file))
            .await
            .map(injected)
            .ok_or_else(|| ApiError::NotFound(format!("{file} is not injected")))
    }

    pub(super) async fn rib(
        &self,
        neighbor: Option<String>,
    ) -> Result<mpsc::Receiver<Bytes>, ApiError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32);
        let (table, peer) = {
            let live = self.daemon.live.read().await;
            let peer = match &neighbor {
                Some(a) => Some(peer_index(&live, a)? as u32),
                None => None,
            };
            let peers = live
                .peers
                .iter()
                .enumerate()
                .map(|(i, s)| Peer {
                    bgp_id: live
                        .sessions
                        .peers
                        .get(i)
                        .and_then(|h| h.status().negotiated)
                        .map_or(Ipv4Addr::UNSPECIFIED, |n| n.peer_id),
                    address: s.address,
                    asn: s.peer_as,
                    as4: true,
                })
                .collect();
            (
                PeerIndexTable {
                    collector_id: live.config.router_id,
                    view_name: match &neighbor {
                        Some(a) => format!("ribshard Adj-RIB-In of {a}"),
                        None => "ribshard Loc-RIB".into(),
                    },
                    peers,
                },
                peer,
            )
        };
        let mut head = MrtWriter::new(Vec::new());
        head.write_peer_index_table(now, &table)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let head = head.into_inner();
        let (tx, rx) = mpsc::channel(2);
        let pipeline = self.daemon.pipeline.clone();
        let render: Arc<dyn RenderRoute> = Arc::new(MrtRenderer {
            loc_rib: peer.is_none(),
            timestamp: now,
        });
        tokio::spawn(async move {
            if tx.send(Bytes::from(head)).await.is_err() {
                return;
            }
            let mut sequence = 0u32;
            for family in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
                let mut walk = pipeline.walk_routes(
                    RouteQuery {
                        max_paths: 4096,
                        filter: PathFilter {
                            peer,
                            ..PathFilter::default()
                        },
                        render: Some(render.clone()),
                        ..RouteQuery::whole_table(family)
                    },
                    None,
                );
                while let Some(batch) = walk.next().await {
                    let mut buf: Vec<u8> =
                        Vec::with_capacity(batch.iter().map(|r| r.rendered.len()).sum());
                    for r in &batch {
                        buf.extend_from_slice(&r.rendered);
                    }
                    number(&mut buf, &mut sequence);
                    if !buf.is_empty() && tx.send(Bytes::from(buf)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }
}
