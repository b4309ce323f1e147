//! A station's dump: what a station that connects is sent before the live feeds.
//!
//! In order: Initiation, Peer Up for every neighbor up now and the Loc-RIB's Peer Up (sent
//! at once, `monitor`); then one walk of the shards' tables (the pipeline's chunked walk,
//! at the station's pace) giving, per prefix, each path as received from the neighbors up
//! when the station connected (pre-policy Adj-RIB-In) and the active path (Loc-RIB); then
//! End-of-RIB for each neighbor's families and the Loc-RIB's; then what the feeds brought
//! meanwhile, held until now.
//!
//! Why that is the table: every tapped UPDATE and every best-path change the monitor took
//! in before the walk began was in the shards before the walk's first question (the tap
//! hands an UPDATE on only once its routes are queued for the shards; a change is sent
//! after it is decided), so the walk sees it; what came after is held and replayed, and
//! replaying an announcement or withdrawal the walk already saw changes nothing. A path of
//! a neighbor that came up after the station connected is left out of the walk: its Peer
//! Up is among what is held, and its routes come after it.

use crate::message::PeerHeader;
use crate::monitor::{LinkState, Peer, State};
use crate::routes::{end_of_rib, params, Packer};
use crate::station::{Outbox, Ribs};
use bytes::Bytes;
use hashbrown::HashMap;
use ribshard_engine::pipeline::{Pipeline, RouteQuery, ShownRoute};
use ribshard_rib::PathState;
use ribshard_wire::Family;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{debug, info};

pub(crate) enum DumpPart {
    Routes(Vec<ShownRoute>),
    Done,
}

/// A station's dump in progress.
pub(crate) struct Dump {
    /// What the feeds brought meanwhile, sent after the dump.
    held: Vec<Bytes>,
    pub(crate) held_octets: usize,
    ribs: Ribs,
    /// The neighbors up when the station connected: their header, Add-Path and families.
    peers: HashMap<usize, (PeerHeader, [bool; 2], Vec<Family>)>,
}

impl Dump {
    pub(crate) fn new(ribs: Ribs, peers: &BTreeMap<usize, Peer>) -> Dump {
        Dump {
            held: Vec::new(),
            held_octets: 0,
            ribs,
            peers: if ribs.pre_policy {
                peers
                    .iter()
                    .map(|(i, p)| (*i, (p.header, p.add_path, p.families.clone())))
                    .collect()
            } else {
                HashMap::new()
            },
        }
    }

    /// Holds live messages until the dump is sent; false past the bound.
    pub(crate) fn hold(&mut self, msgs: &[Bytes], bound: usize) -> bool {
        self.held_octets += msgs.iter().map(Bytes::len).sum::<usize>();
        self.held.extend(msgs.iter().cloned());
        self.held_octets <= bound
    }

    /// Route Monitoring for a chunk of the walk: the Loc-RIB's, then each neighbor's.
    fn routes(&self, routes: &[ShownRoute], loc_header: &PeerHeader) -> Vec<Bytes> {
        let mut loc_rib = Packer::default();
        let mut adj_rib_in: HashMap<usize, Packer> = HashMap::new();
        for r in routes {
            let prefix = r.view.prefix;
            for pv in &r.view.paths {
                let path = &pv.path;
                if path.gone() {
                    continue;
                }
                if self.ribs.loc_rib && matches!(pv.state, PathState::Active { .. }) {
                    loc_rib.announce(prefix, None, &path.attrs);
                }
                if let Some((_, add_path, _)) = self.peers.get(&(path.peer as usize)) {
                    let id = add_path[prefix.family().index()].then_some(path.path_id);
                    adj_rib_in.entry(path.peer as usize).or_default().announce(
                        prefix,
                        id,
                        path.attrs.as_received(),
                    );
                }
            }
        }
        let (mut msgs, failed) = loc_rib.finish(&loc_header.now(), params([false; 2]));
        let mut order: Vec<_> = adj_rib_in.into_iter().collect();
        order.sort_unstable_by_key(|(p, _)| *p);
        let mut too_large = failed;
        for (peer, mut packer) in order {
            if let Some((header, add_path, _)) = self.peers.get(&peer) {
                let (m, failed) = packer.finish(&header.now(), params(*add_path));
                too_large += failed;
                msgs.extend(m);
            }
        }
        if too_large > 0 {
            debug!(
                sets = too_large,
                "BMP dump: attribute sets too large for an UPDATE left out"
            );
        }
        msgs
    }

    /// End-of-RIB for every table dumped.
    fn end(&self, loc_header: &PeerHeader) -> Vec<Bytes> {
        let mut msgs = Vec::new();
        for (header, _, families) in self.peers.values() {
            for f in families {
                msgs.push(end_of_rib(&header.now(), *f));
            }
        }
        if self.ribs.loc_rib {
            for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
                msgs.push(end_of_rib(&loc_header.now(), f));
            }
        }
        msgs
    }
}

impl State {
    pub(crate) fn dump_part(&mut self, id: usize, generation: u64, part: DumpPart) {
        let loc_header = self.loc_header;
        let Some(s) = self.stations.get_mut(id) else {
            return;
        };
        if s.generation != generation {
            return;
        }
        let LinkState::Dumping(d) = &mut s.link else {
            return;
        };
        let done = matches!(part, DumpPart::Done);
        let mut msgs = match part {
            DumpPart::Routes(routes) => d.routes(&routes, &loc_header),
            DumpPart::Done => d.end(&loc_header),
        };
        if done {
            msgs.append(&mut d.held);
        }
        if !s.outbox.push(msgs, s.config.buffer) {
            s.link = LinkState::Down;
        } else if done {
            info!(station = %s.config.name, "BMP station: dump sent, live");
            s.link = LinkState::Up;
        }
        self.show();
    }
}

/// Walks the shards' tables for station `id` (both families), on a task of its own, at the
/// station's pace; `hidden`: every path received (rejected and ineligible ones too), not
/// only the eligible ones.
pub(crate) fn walk(
    pipeline: &Option<Arc<Pipeline>>,
    dumps: &mpsc::Sender<(usize, u64, DumpPart)>,
    id: usize,
    generation: u64,
    hidden: bool,
    (outbox, bound): (Arc<Outbox>, usize),
) {
    let tx = dumps.clone();
    let pipeline = pipeline.clone();
    tokio::spawn(async move {
        // No pipeline yet (only before the daemon attached it): nothing to dump.
        if let Some(pipeline) = pipeline {
            for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
                let mut query = RouteQuery::whole_table(f);
                query.filter.hidden = hidden;
                let mut walk = pipeline.walk_routes(query, None);
                while let Some(routes) = walk.next().await {
                    // A connection that ended ends the walk.
                    if !outbox.room(bound).await {
                        return;
                    }
                    let part = DumpPart::Routes(routes);
                    if tx.send((id, generation, part)).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send((id, generation, DumpPart::Done)).await;
    });
}
