//! Walks over one peer's paths: the bounded steps that remove a peer's paths when its
//! session goes down, keep them stale through a graceful restart (RFC 4724) and make them
//! long-lived stale (RFC 9494), and apply a new import policy to what it sent.

use super::{f_of, import, Books, Dest, Handle, Import, ImportCache, Path, PeerIndex, Shard};
use crate::attrs::RouteAttrs;
use ribshard_wire::Prefix;
use std::sync::Arc;

/// What a walk over one peer's paths does (see [`Shard::walk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkOp {
    /// The session went down: remove its paths.
    Remove,
    /// The peer is restarting gracefully: keep the paths of these families as stale.
    MarkStale([bool; 2]),
    /// End-of-RIB or the restart time passed: remove what is still stale in these families.
    FlushStale([bool; 2]),
    /// The restart time passed for a peer with long-lived graceful restart (RFC 9494
    /// section 4.2): its stale paths of these families carry LLGR_STALE from now on (least
    /// preferred), those carrying NO_LLGR are removed.
    LongLivedStale([bool; 2]),
    /// The peer began re-advertising these families (BoRR, RFC 7313 section 4): mark its
    /// paths stale there until its EoRR; leave the others.
    RefreshBegin([bool; 2]),
    /// Its import policy changed: apply the new one to what it sent (kept as received).
    Reimport,
}

/// A walk over one peer's paths in progress: where it goes on in the table, nothing more.
/// It does not list the peer's prefixes when it starts (24 octets each: two full-table peers
/// going down at once held 15 MB of lists, the daemon's peak RSS on two full tables): the
/// owner finishes a peer's walks before it applies that peer's next message, and an entry
/// holding a path is never moved or removed, so the entries ahead that hold the peer's paths
/// are the ones that did when the walk began.
#[derive(Debug)]
pub struct Walk {
    pub peer: PeerIndex,
    pub op: WalkOp,
    next: Option<Handle>,
    /// [`WalkOp::LongLivedStale`]: each set's long-lived stale version, made once per walk
    /// (paths that shared a set share the new one).
    long_lived: hashbrown::HashMap<Arc<RouteAttrs>, Arc<RouteAttrs>>,
}

impl Shard {
    /// Starts a walk over the prefixes `peer` has paths for. Call [`Shard::walk_step`] until
    /// it returns true; each step is a bounded piece of work, so other work can run between
    /// steps.
    pub fn walk(&self, peer: PeerIndex, op: WalkOp) -> Walk {
        Walk {
            peer,
            op,
            next: Some(Handle::FIRST),
            long_lived: Default::default(),
        }
    }

    /// Starts removing every path of `peer` (its session went down).
    pub fn peer_down(&self, peer: PeerIndex) -> Walk {
        self.walk(peer, WalkOp::Remove)
    }

    /// Same as [`Shard::walk_step`].
    pub fn peer_down_step(&mut self, walk: &mut Walk, budget: usize) -> bool {
        // The import cache's last result holds a set of the peer's: let it go with the rest.
        self.import_cache.forget_last();
        self.walk_step(walk, budget)
    }

    /// Applies the walk to up to `budget` prefixes; true when done.
    pub fn walk_step(&mut self, walk: &mut Walk, budget: usize) -> bool {
        let peer = walk.peer;
        let Some(from) = walk.next else {
            return true;
        };
        // Up to `budget` of the peer's prefixes, looking at no more than a few times as many
        // entries (a peer with few prefixes in a large table still takes bounded steps).
        let look = budget.saturating_mul(8);
        let mut found: Vec<Handle> = Vec::new();
        walk.next = None;
        for (seen, (h, _, d)) in self.dests.iter_from(from).enumerate() {
            if found.len() >= budget || seen >= look {
                walk.next = Some(h);
                break;
            }
            if d.paths.iter().any(|p| !p.gone() && p.peer == peer) {
                found.push(h);
            }
        }
        let imp = match walk.op {
            WalkOp::Reimport => self.imports.get(peer as usize).cloned().flatten(),
            _ => None,
        };
        for at in found {
            let Some((prefix, d)) = self.dests.at_mut(at) else {
                continue;
            };
            let prefix = &prefix;
            let in_family = f_of(prefix);
            let family = prefix.family().index();
            let tally = &mut self.tally;
            let nh = &mut self.next_hops;
            let log = &mut self.post_policy;
            let n = match walk.op {
                WalkOp::Reimport => {
                    let mut ctx = Reimport {
                        imp: imp.as_deref(),
                        peer,
                        cache: &mut self.import_cache,
                        rpki: self.rpki.as_deref(),
                        arrival: &mut self.arrival,
                        books: (tally, nh, log),
                    };
                    ctx.paths(prefix, d, at, family)
                }
                WalkOp::Remove => {
                    d.remove_where((tally, nh, log), prefix, family, |p| p.peer == peer)
                }
                WalkOp::FlushStale(f) if in_family(&f) => {
                    d.remove_where((tally, nh, log), prefix, family, |p| {
                        p.peer == peer && p.stale()
                    })
                }
                WalkOp::FlushStale(_) => 0,
                WalkOp::LongLivedStale(f) if in_family(&f) => {
                    let ours = |p: &Path| p.peer == peer && p.stale() && !p.gone();
                    let mut n = d.remove_where((tally, nh, &mut *log), prefix, family, |p| {
                        ours(p) && p.attrs.no_llgr
                    });
                    // A replaced path is overwritten (now long-lived stale) or marked gone
                    // with its successor pushed past `len`: neither is met again.
                    for i in 0..d.paths.len() {
                        let Some(p) = d.paths.get(i).filter(|p| ours(p) && !p.attrs.llgr_stale)
                        else {
                            continue;
                        };
                        let attrs = walk
                            .long_lived
                            .entry(p.attrs.clone())
                            .or_insert_with(|| Arc::new(p.attrs.long_lived_stale()))
                            .clone();
                        // A new version, as after a re-import: export compares it with the
                        // one reported and sends the change.
                        self.arrival = self.arrival.wrapping_add(1);
                        let mut new = Path::new(peer, p.path_id, attrs, self.arrival, p.since());
                        new.set_stale(true);
                        new.set_rejected(p.rejected());
                        log.put(prefix, &new);
                        Shard::replace(tally, nh, d, at, Some(i), new, family);
                        n += 1;
                    }
                    n
                }
                WalkOp::LongLivedStale(_) => 0,
                WalkOp::MarkStale(f) | WalkOp::RefreshBegin(f) if in_family(&f) => {
                    d.paths
                        .iter_mut()
                        .filter(|p| !p.gone() && p.peer == peer)
                        .for_each(|p| p.set_stale(true));
                    0
                }
                // Families the restarting peer does not preserve go now.
                WalkOp::MarkStale(_) => {
                    d.remove_where((tally, nh, log), prefix, family, |p| p.peer == peer)
                }
                WalkOp::RefreshBegin(_) => 0,
            };
            if n > 0 {
                Self::touch(&mut self.journal, at, d);
            }
        }
        if walk.next.is_none() {
            walk.long_lived.clear();
        }
        walk.next.is_none()
    }
}

/// What applying a peer's import policy again to its paths of one prefix needs of the
/// shard, apart from its table (the entry is borrowed for change meanwhile).
pub(super) struct Reimport<'a> {
    /// None: accept everything unchanged.
    pub(super) imp: Option<&'a Import>,
    pub(super) peer: PeerIndex,
    pub(super) cache: &'a mut ImportCache,
    pub(super) rpki: Option<&'a ribshard_rpki::Snapshot>,
    pub(super) arrival: &'a mut u32,
    pub(super) books: Books<'a>,
}

impl Reimport<'_> {
    /// Replaces each of the peer's paths whose result changed; how many did.
    pub(super) fn paths(
        &mut self,
        prefix: &Prefix,
        d: &mut Dest,
        at: Handle,
        family: usize,
    ) -> usize {
        let peer = self.peer;
        let mut n = 0;
        for i in 0..d.paths.len() {
            let Some(p) = d.paths.get(i).filter(|p| !p.gone() && p.peer == peer) else {
                continue;
            };
            let received = p.attrs.as_received().clone();
            let (attrs, rejected) = match self.imp {
                Some(imp) => import::apply(imp, peer, &received, prefix, self.cache, self.rpki),
                None => (received, false),
            };
            if Arc::ptr_eq(&attrs, &p.attrs) && rejected == p.rejected() {
                continue;
            }
            // A new version: export compares it with the one reported.
            *self.arrival = self.arrival.wrapping_add(1);
            let mut new = Path::new(peer, p.path_id, attrs, *self.arrival, p.since());
            new.set_rejected(rejected);
            new.set_stale(p.stale());
            let (tally, next_hops, log) = &mut self.books;
            log.put(prefix, &new);
            Shard::replace(tally, next_hops, d, at, Some(i), new, family);
            n += 1;
        }
        n
    }
}
