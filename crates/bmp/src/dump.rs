//! A station's dump: what a station that connects is sent before the live feeds.
//!
//! In order: Initiation, Peer Up for every neighbor up now and the Loc-RIB's Peer Up (sent
//! at once, `monitor`); then one walk of the shards' tables (the pipeline's chunked walk,
//! at the station's pace) giving, per prefix, each path as received from the neighbors up
//! when the station connected (pre-policy Adj-RIB-In), as import policy left it if it
//! accepted it (post-policy), and the active path (Loc-RIB); for the Adj-RIB-Out, one walk
//! per update group of what it advertises, each member sent all but its own routes; then
//! End-of-RIB for each neighbor's families in each table and the Loc-RIB's; then what the
//! feeds brought meanwhile, held until now. (A group's UPDATEs for a member follow the same
//! argument: a change the walk saw may come again live, and changes nothing.)
//!
//! Why that is the table: every tapped UPDATE and every best-path change the monitor took
//! in before the walk began was in the shards before the walk's first question (the tap
//! hands an UPDATE on only once its routes are queued for the shards; a change is sent
//! after it is decided), so the walk sees it; what came after is held and replayed, and
//! replaying an announcement or withdrawal the walk already saw changes nothing. A path of
//! a neighbor that came up after the station connected is left out of the walk: its Peer
//! Up is among what is held, and its routes come after it.

use crate::message::{peer_flags, PeerHeader};
use crate::monitor::{LinkState, Peer, State};
use crate::routes::{end_of_rib, params, AdvertisedPacker, Packer};
use crate::station::{Outbox, Ribs};
use bytes::Bytes;
use hashbrown::HashMap;
use ribshard_adjout::GroupId;
use ribshard_engine::pipeline::{Pipeline, RouteQuery, ShownRoute};
use ribshard_rib::{PathState, PeerIndex};
use ribshard_wire::Family;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{debug, info};

pub(crate) enum DumpPart {
    Routes(Vec<ShownRoute>),
    /// What an update group advertises (its members' Adj-RIB-Out).
    Advertised(GroupId, Vec<ShownRoute>),
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
    /// For the Adj-RIB-Out: the update groups of the neighbors up, and their members.
    members: BTreeMap<GroupId, Vec<(usize, PeerHeader, Vec<Family>)>>,
}

impl Dump {
    pub(crate) fn new(ribs: Ribs, peers: &BTreeMap<usize, Peer>) -> Dump {
        Dump {
            held: Vec::new(),
            held_octets: 0,
            ribs,
            peers: if ribs.pre_policy || ribs.post_policy {
                peers
                    .iter()
                    .map(|(i, p)| (*i, (p.header, p.add_path, p.families.clone())))
                    .collect()
            } else {
                HashMap::new()
            },
            members: if ribs.adj_rib_out {
                members(peers)
            } else {
                BTreeMap::new()
            },
        }
    }

    /// The update groups whose output the dump walks.
    pub(crate) fn groups(&self) -> Vec<GroupId> {
        self.members.keys().copied().collect()
    }

    /// Route Monitoring for a chunk of what `group` advertises: for each of its members,
    /// all but the routes it is the source of (a group never sends a member its own).
    fn advertised(&self, group: GroupId, routes: &[ShownRoute]) -> Vec<Bytes> {
        let mut msgs = Vec::new();
        let mut too_large = 0;
        for (peer, header, _) in self.members.get(&group).into_iter().flatten() {
            let mut packer = AdvertisedPacker::default();
            let mut params = None;
            for r in routes {
                let Some((e, p)) = &r.advertised else {
                    continue;
                };
                params = Some(*p);
                // Add-Path: each path under the identifier the group sends it with, but
                // the member's own.
                if !r.advertised_paths.is_empty() {
                    for a in r
                        .advertised_paths
                        .iter()
                        .filter(|a| a.source as usize != *peer)
                    {
                        packer.announce(r.view.prefix, Some(a.path_id), &a.exported);
                    }
                    continue;
                }
                let source = r.view.paths.first().map(|v| v.path.peer as usize);
                if source == Some(*peer) {
                    continue;
                }
                // A group that negotiated Add-Path and sends one path sends it as path 1.
                let id = p.add_path[r.view.prefix.family().index()].then_some(1);
                packer.announce(r.view.prefix, id, e);
            }
            if let Some(params) = params {
                let (m, failed) = packer.finish(&header.now(), params);
                too_large += failed;
                msgs.extend(m);
            }
        }
        if too_large > 0 {
            debug!(
                sets = too_large,
                "BMP dump: Adj-RIB-Out sets too large for an UPDATE left out"
            );
        }
        msgs
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
        let mut post_policy: HashMap<usize, Packer> = HashMap::new();
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
                    if self.ribs.pre_policy {
                        adj_rib_in.entry(path.peer as usize).or_default().announce(
                            prefix,
                            id,
                            path.attrs.as_received(),
                        );
                    }
                    if self.ribs.post_policy && path.accepted() {
                        post_policy.entry(path.peer as usize).or_default().announce(
                            prefix,
                            id,
                            &path.attrs,
                        );
                    }
                }
            }
        }
        let (mut msgs, failed) = loc_rib.finish(&loc_header.now(), params([false; 2]));
        let mut too_large = failed;
        for (flags, packers) in [(0, adj_rib_in), (peer_flags::L, post_policy)] {
            let mut order: Vec<_> = packers.into_iter().collect();
            order.sort_unstable_by_key(|(p, _)| *p);
            for (peer, mut packer) in order {
                if let Some((header, add_path, _)) = self.peers.get(&peer) {
                    let header = header.with_flags(flags).now();
                    let (m, failed) = packer.finish(&header, params(*add_path));
                    too_large += failed;
                    msgs.extend(m);
                }
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
        let tables = [
            (self.ribs.pre_policy, 0),
            (self.ribs.post_policy, peer_flags::L),
        ];
        for (header, _, families) in self.peers.values() {
            for (_, flags) in tables.iter().filter(|(on, _)| *on) {
                for f in families {
                    msgs.push(end_of_rib(&header.with_flags(*flags).now(), *f));
                }
            }
        }
        for (_, header, families) in self.members.values().flatten() {
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

/// The neighbors up in an update group now (this session's membership), by group, each with
/// its Adj-RIB-Out header (the O and L flags, A for a 2-octet session).
fn members(
    peers: &BTreeMap<usize, Peer>,
) -> BTreeMap<GroupId, Vec<(usize, PeerHeader, Vec<Family>)>> {
    let mut out: BTreeMap<GroupId, Vec<_>> = BTreeMap::new();
    for (i, p) in peers {
        let joined = p.status.borrow().group.clone();
        let Some(j) = joined.filter(|j| j.member.epoch == p.epoch) else {
            continue;
        };
        let mut flags = peer_flags::O | peer_flags::L;
        if !p.four_octet_as {
            flags |= peer_flags::A;
        }
        let header = p.header.with_flags(flags);
        out.entry(j.group)
            .or_default()
            .push((*i, header, p.families.clone()));
    }
    out
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
            DumpPart::Advertised(group, routes) => d.advertised(group, &routes),
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

/// Walks the shards' tables for station `id`'s connection `generation` (both families), on
/// a task of its own, at the station's pace: the table once for the RIBs it reads (every
/// path received, rejected and ineligible ones too, where a neighbor's Adj-RIB-In is
/// dumped), then what each of `groups` advertises.
pub(crate) fn walk(
    pipeline: &Option<Arc<Pipeline>>,
    dumps: &mpsc::Sender<(usize, u64, DumpPart)>,
    (id, generation): (usize, u64),
    (ribs, groups): (Ribs, Vec<GroupId>),
    (outbox, bound): (Arc<Outbox>, usize),
) {
    let tx = dumps.clone();
    let pipeline = pipeline.clone();
    let table = ribs.pre_policy || ribs.post_policy || ribs.loc_rib;
    let hidden = ribs.pre_policy || ribs.post_policy;
    let mut passes: Vec<Option<GroupId>> = Vec::new();
    if table {
        passes.push(None);
    }
    passes.extend(groups.into_iter().map(Some));
    tokio::spawn(async move {
        // No pipeline yet (only before the daemon attached it): nothing to dump.
        if let Some(pipeline) = pipeline {
            for pass in passes {
                for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
                    let mut query = RouteQuery::whole_table(f);
                    query.filter.hidden = hidden && pass.is_none();
                    // No member has this index: every route the group advertises.
                    query.advertised = pass.map(|g| (g, PeerIndex::MAX));
                    let mut walk = pipeline.walk_routes(query, None);
                    while let Some(routes) = walk.next().await {
                        // A connection that ended ends the walk.
                        if !outbox.room(bound).await {
                            return;
                        }
                        let part = match pass {
                            None => DumpPart::Routes(routes),
                            Some(g) => DumpPart::Advertised(g, routes),
                        };
                        if tx.send((id, generation, part)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        let _ = tx.send((id, generation, DumpPart::Done)).await;
    });
}
