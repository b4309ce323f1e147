//! One RIB shard: the paths of the prefixes it owns (Adj-RIB-In, kept before import policy so
//! soft reconfiguration needs nothing from the peer), their best path (Loc-RIB), and the
//! journal of prefixes whose best path changed, for the update groups.
//!
//! Changes coalesce: a prefix touched many times before [`Shard::drain_changes`] is decided
//! once. Peer-down walks run in chunks ([`Shard::peer_down`]) so a shard can keep serving
//! other work between them.

use crate::decision::{best_path, Candidate, Options};
use ribshard_wire::attributes::{AttrValue, PathAttributes};
use ribshard_wire::update::segment;
use ribshard_wire::{Nlri, Prefix};
use std::collections::HashMap;
use std::sync::Arc;

pub type PeerIndex = u32;

/// What the shard knows of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerInfo {
    pub ebgp: bool,
    pub router_id: u32,
    /// Address, IPv4 mapped into IPv6.
    pub address: u128,
    /// Our AS towards this peer (a path with an empty AS_PATH came from it).
    pub local_as: u32,
    /// Import policy: accept everything (true) or nothing (false). The policy language
    /// replaces this.
    pub import_accept: bool,
}

/// An interned attribute set with the decision inputs read from it once.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RouteAttrs {
    pub attrs: PathAttributes,
    pub local_pref: u32,
    pub as_path_len: u32,
    pub origin: u8,
    pub med: u32,
    /// First AS of the first AS_SEQUENCE; `None` for an empty path.
    pub neighbor_as: Option<u32>,
    pub originator_id: Option<u32>,
    pub cluster_list_len: u32,
}

impl RouteAttrs {
    /// Reads the decision inputs. LOCAL_PREF defaults to 100, a missing MED to 0 (RFC 4271
    /// section 9.1.2.2), a missing ORIGIN to INCOMPLETE.
    pub fn new(attrs: PathAttributes) -> RouteAttrs {
        let path = attrs.as_path();
        let neighbor_as = path.and_then(|p| {
            p.segments
                .first()
                .filter(|s| s.kind == segment::AS_SEQUENCE)
                .and_then(|s| s.asns.first().copied())
        });
        let originator_id = match attrs.get(ribshard_wire::attr::ORIGINATOR_ID) {
            Some(AttrValue::OriginatorId(a)) => Some(u32::from(*a)),
            _ => None,
        };
        let cluster_list_len = match attrs.get(ribshard_wire::attr::CLUSTER_LIST) {
            Some(AttrValue::ClusterList(c)) => c.len() as u32,
            _ => 0,
        };
        RouteAttrs {
            local_pref: attrs.local_pref().unwrap_or(100),
            as_path_len: path.map_or(0, |p| p.path_len() as u32),
            origin: attrs.origin().map_or(2, |o| o as u8),
            med: attrs.med().unwrap_or(0),
            neighbor_as,
            originator_id,
            cluster_list_len,
            attrs,
        }
    }
}

/// One received path.
#[derive(Clone, Debug)]
pub struct Path {
    pub peer: PeerIndex,
    pub path_id: u32,
    pub attrs: Arc<RouteAttrs>,
    /// Arrival sequence in this shard: lower is older.
    pub arrival: u64,
}

#[derive(Debug, Default)]
struct Dest {
    paths: Vec<Path>,
    /// The arrival number of the best path last reported in a change: it names the path
    /// and its version (a replaced path gets a new one).
    reported: Option<u64>,
    dirty: bool,
}

/// A peer-down walk in progress (see [`Shard::peer_down`]).
#[derive(Debug)]
pub struct PeerDown {
    peer: PeerIndex,
    prefixes: Vec<Prefix>,
    at: usize,
}

/// A change of a prefix's best path.
#[derive(Clone, Debug)]
pub struct Change {
    pub prefix: Prefix,
    /// The new best path; `None` when the prefix is gone.
    pub best: Option<Path>,
}

pub struct Shard {
    dests: HashMap<Prefix, Dest>,
    peers: Vec<PeerInfo>,
    options: Options,
    arrival: u64,
    journal: Vec<Prefix>,
}

impl Shard {
    pub fn new(options: Options) -> Shard {
        Shard {
            dests: HashMap::new(),
            peers: Vec::new(),
            options,
            arrival: 0,
            journal: Vec::new(),
        }
    }

    /// Registers or updates a peer; indexes are dense and chosen by the caller.
    pub fn set_peer(&mut self, peer: PeerIndex, info: PeerInfo) {
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize(
                i + 1,
                PeerInfo {
                    ebgp: false,
                    router_id: 0,
                    address: 0,
                    local_as: 0,
                    import_accept: false,
                },
            );
        }
        if let Some(p) = self.peers.get_mut(i) {
            *p = info;
        }
    }

    /// Prefixes with at least one path.
    pub fn prefixes(&self) -> usize {
        self.dests.len()
    }

    /// Paths in the Adj-RIB-In, all peers.
    pub fn paths(&self) -> usize {
        self.dests.values().map(|d| d.paths.len()).sum()
    }

    fn touch(journal: &mut Vec<Prefix>, prefix: Prefix, d: &mut Dest) {
        if !d.dirty {
            d.dirty = true;
            journal.push(prefix);
        }
    }

    /// Paths from `peer` for these prefixes, replacing its earlier ones (same path id).
    pub fn announce(
        &mut self,
        peer: PeerIndex,
        attrs: &Arc<RouteAttrs>,
        nlri: impl IntoIterator<Item = Nlri>,
    ) {
        for n in nlri {
            self.arrival += 1;
            let prefix = n.prefix.masked();
            let path_id = n.path_id.unwrap_or(0);
            let d = self.dests.entry(prefix).or_default();
            let path = Path {
                peer,
                path_id,
                attrs: attrs.clone(),
                arrival: self.arrival,
            };
            match d
                .paths
                .iter_mut()
                .find(|p| p.peer == peer && p.path_id == path_id)
            {
                // An implicit withdrawal: the newer path replaces it, but keeps its age
                // only if nothing changed.
                Some(p) if Arc::ptr_eq(&p.attrs, attrs) => continue,
                Some(p) => *p = path,
                None => d.paths.push(path),
            }
            Self::touch(&mut self.journal, prefix, d);
        }
    }

    pub fn withdraw(&mut self, peer: PeerIndex, nlri: impl IntoIterator<Item = Nlri>) {
        for n in nlri {
            let prefix = n.prefix.masked();
            let path_id = n.path_id.unwrap_or(0);
            if let Some(d) = self.dests.get_mut(&prefix) {
                let before = d.paths.len();
                d.paths
                    .retain(|p| !(p.peer == peer && p.path_id == path_id));
                if d.paths.len() != before {
                    Self::touch(&mut self.journal, prefix, d);
                }
            }
        }
    }

    /// Starts removing every path of `peer` (its session went down): notes the prefixes it
    /// has paths for. Then call [`Shard::peer_down_step`] until it returns true; each step is
    /// a bounded piece of work, so other work can run between steps.
    pub fn peer_down(&self, peer: PeerIndex) -> PeerDown {
        PeerDown {
            peer,
            prefixes: self
                .dests
                .iter()
                .filter(|(_, d)| d.paths.iter().any(|p| p.peer == peer))
                .map(|(p, _)| *p)
                .collect(),
            at: 0,
        }
    }

    /// Removes the peer's paths from up to `budget` prefixes; true when done.
    pub fn peer_down_step(&mut self, walk: &mut PeerDown, budget: usize) -> bool {
        let end = (walk.at + budget).min(walk.prefixes.len());
        for prefix in walk.prefixes.get(walk.at..end).unwrap_or(&[]) {
            if let Some(d) = self.dests.get_mut(prefix) {
                let before = d.paths.len();
                d.paths.retain(|p| p.peer != walk.peer);
                if d.paths.len() != before {
                    Self::touch(&mut self.journal, *prefix, d);
                }
            }
        }
        walk.at = end;
        walk.at >= walk.prefixes.len()
    }

    fn candidate(&self, p: &Path) -> Candidate {
        let info = self.peers.get(p.peer as usize).copied();
        let a = &p.attrs;
        Candidate {
            local_pref: a.local_pref,
            as_path_len: a.as_path_len,
            origin: a.origin,
            med: a.med,
            neighbor_as: a
                .neighbor_as
                .unwrap_or_else(|| info.map_or(0, |i| i.local_as)),
            ebgp: info.is_some_and(|i| i.ebgp),
            igp_cost: 0,
            router_id: a
                .originator_id
                .unwrap_or_else(|| info.map_or(0, |i| i.router_id)),
            cluster_list_len: a.cluster_list_len,
            peer_address: info.map_or(0, |i| i.address),
            arrival: p.arrival,
        }
    }

    /// The best of a prefix's paths that import policy accepts.
    pub fn best(&self, prefix: &Prefix) -> Option<&Path> {
        let d = self.dests.get(&prefix.masked())?;
        self.best_of(d)
    }

    fn best_of<'d>(&self, d: &'d Dest) -> Option<&'d Path> {
        let eligible: Vec<&Path> = d
            .paths
            .iter()
            .filter(|p| {
                self.peers
                    .get(p.peer as usize)
                    .is_some_and(|i| i.import_accept)
            })
            .collect();
        let cands: Vec<Candidate> = eligible.iter().map(|p| self.candidate(p)).collect();
        let i = best_path(&cands, &self.options)?;
        eligible.get(i).copied()
    }

    /// Decides every prefix touched since the last call, once each, and returns those whose
    /// best path changed.
    pub fn drain_changes(&mut self) -> Vec<Change> {
        let journal = std::mem::take(&mut self.journal);
        let mut changes = Vec::with_capacity(journal.len());
        for prefix in journal {
            let Some(d) = self.dests.get(&prefix) else {
                continue;
            };
            let best = self.best_of(d).cloned();
            let key = best.as_ref().map(|p| p.arrival);
            let changed = key != d.reported;
            let empty = d.paths.is_empty();
            if let Some(d) = self.dests.get_mut(&prefix) {
                d.dirty = false;
                d.reported = key;
            }
            if empty {
                self.dests.remove(&prefix);
            }
            if changed {
                changes.push(Change { prefix, best });
            }
        }
        changes
    }
}
