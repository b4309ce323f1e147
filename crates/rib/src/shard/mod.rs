//! One RIB shard: the paths of the prefixes it owns (Adj-RIB-In, kept before import policy so
//! soft reconfiguration needs nothing from the peer), their best path (Loc-RIB), and the
//! journal of prefixes whose best path changed, for the update groups.
//!
//! Changes coalesce: a prefix touched many times before [`Shard::drain_changes`] is decided
//! once. Peer-down walks run in chunks ([`Shard::peer_down`]) so a shard can keep serving
//! other work between them.

use crate::attrs::RouteAttrs;
use crate::decision::{best_path, compare, multipath_equal, Candidate, Options};
use crate::import::{self, Import, ImportCache};
use crate::next_hop::{NextHops, Resolution, Resolver};
use ribshard_wire::{Family, Nlri, Prefix};
// hashbrown with its default (foldhash) hasher inside: the table is keyed by prefixes we do
// not choose, but a shard is not reachable by anyone who could aim collisions at one bucket
// any more than the sender's own table, and SipHash costs a third of the ingest time.
use crate::prefix_map::{Handle, PrefixMap};
use smallvec::SmallVec;
use std::sync::Arc;

mod add_path;
mod dump_order;
mod post_policy;
mod rpki;
mod tally;
mod view;
mod walk;
pub use add_path::{AddPathChange, AddPathKeep, AddPathSelect, GroupDiff, Offered};
pub use dump_order::{DumpKey, DumpOrder, DumpPlace, DumpSet};
pub use post_policy::AdjRibInChange;
use post_policy::PostPolicyLog;
use tally::Tally;
pub use tally::{FamilyCounts, PeerCounters, PeerCounts};
pub use view::{Ineligible, PathFilter, PathState, PathView, RouteView, Within};
use walk::Reimport;
pub use walk::{Walk, WalkOp};

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
    pub peer_as: u32,
    /// A route reflection client of ours, in this cluster (RFC 4456).
    pub rr_cluster: Option<u32>,
    /// A route server client (RFC 7947).
    pub rs_client: bool,
}

impl PeerInfo {
    pub const NONE: PeerInfo = PeerInfo {
        ebgp: false,
        router_id: 0,
        address: 0,
        local_as: 0,
        peer_as: 0,
        rr_cluster: None,
        rs_client: false,
    };
}

/// One received path.
#[derive(Clone, Debug)]
pub struct Path {
    pub peer: PeerIndex,
    pub path_id: u32,
    pub attrs: Arc<RouteAttrs>,
    /// Arrival sequence in this shard: lower is older. A replaced path gets a new one, so
    /// it also names the path's version. 32 bits keep a path at 24 octets; it wraps after
    /// 4 billion announcements to one shard, where it can only reorder two otherwise equal
    /// paths of one peer (Add-Path) once.
    pub arrival: u32,
    /// When it arrived ([`crate::clock`] seconds, low 29 bits) and three flags: [`STALE`],
    /// [`GONE`] and [`REJECTED`]. Packed so that a path stays at 24 octets with its age.
    meta: u32,
}

/// Kept for a gracefully restarting peer (RFC 4724 section 4.2) until it sends the path
/// again, its End-of-RIB, or the restart time passes.
const STALE: u32 = 1 << 30;
/// Withdrawn or replaced, but still the best path last reported: kept (never eligible) until
/// the next decision reports the change, which needs the old path for export.
const GONE: u32 = 1 << 31;
/// Import policy rejected it: kept in the Adj-RIB-In (a new policy may accept it), never
/// chosen.
const REJECTED: u32 = 1 << 29;
const SINCE: u32 = (1 << 29) - 1;

impl Path {
    /// A path received now (`since`, in [`crate::clock`] seconds).
    pub fn new(
        peer: PeerIndex,
        path_id: u32,
        attrs: Arc<RouteAttrs>,
        arrival: u32,
        since: u32,
    ) -> Path {
        Path {
            peer,
            path_id,
            attrs,
            arrival,
            meta: since & SINCE,
        }
    }
    /// Kept as stale for a restarting peer or during its route refresh.
    pub fn stale(&self) -> bool {
        self.meta & STALE != 0
    }
    /// Withdrawn or replaced, kept only until the change is decided.
    pub fn gone(&self) -> bool {
        self.meta & GONE != 0
    }
    /// Import policy rejected it.
    pub fn rejected(&self) -> bool {
        self.meta & REJECTED != 0
    }
    fn set_rejected(&mut self, on: bool) {
        if on {
            self.meta |= REJECTED;
        } else {
            self.meta &= !REJECTED;
        }
    }
    /// Whether import policy accepted it and it does not loop.
    pub fn accepted(&self) -> bool {
        !self.rejected() && self.attrs.loop_free()
    }
    /// When the path arrived, in [`crate::clock`] seconds (17 years of them fit).
    pub fn since(&self) -> u32 {
        self.meta & SINCE
    }
    fn set_stale(&mut self, on: bool) {
        if on {
            self.meta |= STALE;
        } else {
            self.meta &= !STALE;
        }
    }
    fn set_gone(&mut self) {
        self.meta |= GONE;
    }
}

/// One prefix, in the shard table's arena beside its key (8 octets for IPv4).
#[derive(Debug, Default)]
struct Dest {
    /// Its paths; the best path last reported stays here (marked `gone`) after it is
    /// withdrawn, until the next decision. Two are held in place: a prefix of a peering or
    /// edge router has one or two (two full tables: 641,942 paths for 323,486 prefixes), and
    /// a separate allocation for them cost 64 octets and a cache miss per prefix; a prefix
    /// with more (a reflector's) leaves the 48 octets unused.
    paths: SmallVec<[Path; 2]>,
    /// Arrival number of the best path last reported (the Loc-RIB entry as the update groups
    /// know it), valid with `has_reported`.
    reported: u32,
    has_reported: bool,
    /// In the journal, awaiting a decision. (Flags as `bool`s: their unused values let an
    /// `Option` of an arena entry take no room of its own.)
    dirty: bool,
}

impl Dest {
    fn reported(&self) -> Option<u32> {
        self.has_reported.then_some(self.reported)
    }
    fn reported_path(&self) -> Option<&Path> {
        let r = self.reported()?;
        self.paths.iter().find(|p| p.arrival == r)
    }
    /// Takes out the live paths matching `f` (the reported one is only marked gone), counted
    /// out of `tally`; returns how many.
    fn remove_where(
        &mut self,
        (tally, next_hops, log): Books<'_>,
        prefix: &Prefix,
        family: usize,
        mut f: impl FnMut(&Path) -> bool,
    ) -> usize {
        let r = self.reported();
        let mut removed = 0;
        self.paths.retain_mut(|p| {
            if p.gone() || !f(p) {
                return true;
            }
            removed += 1;
            tally.remove_path(p, family);
            next_hops.remove_path(&p.attrs);
            log.removed(prefix, p);
            if Some(p.arrival) == r {
                p.set_gone();
                return true;
            }
            false
        });
        removed
    }
}

/// The family of routes a next hop most often serves (an IPv4 prefix may have an IPv6
/// next hop, RFC 8950: its paths count under IPv6 here).
fn family_of(a: &std::net::IpAddr) -> Family {
    if a.is_ipv4() {
        Family::Ipv4Unicast
    } else {
        Family::Ipv6Unicast
    }
}

/// What is kept up to date as paths come and go, apart from the table (borrowed with an
/// entry of it).
type Books<'a> = (&'a mut Tally, &'a mut NextHops, &'a mut PostPolicyLog);

/// Where a prefix sits in its shard's table, in the order of [`Shard::count_step`]'s walk:
/// stable while the prefix is there (a position freed by a removed prefix may be given to a
/// new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position(Handle);

impl Position {
    /// The first position of a walk.
    pub const START: Position = Position(Handle::FIRST);
}

/// A change of a prefix's best path.
#[derive(Clone, Debug)]
pub struct Change {
    pub prefix: Prefix,
    pub position: Position,
    /// The best path reported before; `None` if the prefix was new.
    pub old: Option<Path>,
    /// The new best path; `None` when the prefix is gone.
    pub best: Option<Path>,
    /// With `multipath`, the rest of the new best path's equal-cost set, in preference
    /// order; empty without it.
    pub multipath: Vec<Path>,
    /// Whether the best path changed. With `multipath` every decided prefix is reported,
    /// since its equal-cost set may have changed with the same best path (the shard keeps
    /// no copy of the set it reported); those changes have this false, as have those where
    /// only the paths offered for Add-Path changed.
    pub best_changed: bool,
    /// With Add-Path send ([`Options::add_path`]), the paths the prefix offered before and
    /// offers now, when they changed.
    pub add_paths: Option<Box<AddPathChange>>,
    /// Only the paths offered for Add-Path changed: the best path (and, with `multipath`,
    /// its equal-cost set) is as reported, so forwarding has nothing to do.
    pub paths_only: bool,
}

pub struct Shard {
    dests: PrefixMap<Dest>,
    peers: Vec<PeerInfo>,
    options: Options,
    arrival: u32,
    /// Prefixes awaiting a decision, each once (its entry is marked `dirty`). Handles, not
    /// prefixes: deciding reaches each entry without a lookup, and an entry is only removed
    /// when it is decided, so no handle here goes stale.
    journal: Vec<Handle>,
    tally: Tally,
    /// Now, in [`crate::clock`] seconds: the arrival time given to new paths. Set by the
    /// owner before it applies a batch, so the clock is read once per batch, not per path.
    clock: u32,
    scratch: (Vec<Candidate>, Vec<usize>),
    /// Per peer index: its import policy (none: accept everything).
    imports: Vec<Option<Arc<Import>>>,
    import_cache: ImportCache,
    /// Each next hop's resolution and where its paths are.
    next_hops: NextHops,
    /// The RPKI data import policies validate against, once some came.
    rpki: Option<Arc<ribshard_rpki::Snapshot>>,
    /// The prefixes by ROA range, kept while `rpki` is set.
    rpki_index: rpki::RpkiIndex,
    /// With Add-Path send, the paths each prefix offered when last decided.
    offered: add_path::OfferedLists,
    /// The post-policy Adj-RIB-In's changes, while a subscriber wants them.
    post_policy: PostPolicyLog,
}

impl Shard {
    pub fn new(options: Options) -> Shard {
        Shard::resolving(options, None)
    }

    /// A shard whose paths are eligible only where `resolver` says their next hop is
    /// reachable, at the IGP cost it gives (none: every next hop, at cost 0).
    pub fn resolving(options: Options, resolver: Option<Arc<dyn Resolver>>) -> Shard {
        Shard {
            dests: PrefixMap::default(),
            peers: Vec::new(),
            options,
            arrival: 0,
            journal: Vec::new(),
            tally: Tally::default(),
            clock: crate::clock::now(),
            scratch: (Vec::new(), Vec::new()),
            imports: Vec::new(),
            import_cache: ImportCache::default(),
            next_hops: NextHops::new(resolver),
            rpki: None,
            rpki_index: rpki::RpkiIndex::default(),
            offered: add_path::OfferedLists::default(),
            post_policy: PostPolicyLog::default(),
        }
    }

    /// The next hops of this shard's paths: each with its last resolution and live paths.
    pub fn next_hops(&self) -> Vec<(std::net::IpAddr, Resolution, u32)> {
        self.next_hops.list()
    }

    /// Resolution may have changed (the resolver published a new answer): asks again for
    /// every next hop, and marks for decision the prefixes that use one whose answer
    /// changed (found through the next-hop index, not a table walk). Returns how many.
    pub fn resolution_changed(&mut self) -> usize {
        let mut touched = 0;
        for i in self.next_hops.refresh() {
            let Some((addr, at)) = self.next_hops.positions(i) else {
                continue;
            };
            let mut stale = Vec::new();
            for h in at {
                let Some((_, d)) = self.dests.at_mut(h) else {
                    stale.push(h);
                    continue;
                };
                let uses = d.paths.iter().any(|p| {
                    !p.gone() && crate::next_hop::next_hop_addr(p.attrs.next_hop()) == Some(addr)
                });
                if uses {
                    Self::touch(&mut self.journal, h, d);
                    touched += 1;
                } else {
                    stale.push(h);
                }
            }
            self.next_hops.forget_positions(i, &stale);
        }
        touched
    }

    /// Sets a peer's import policy, applied to the paths it sends from now on (a
    /// [`WalkOp::Reimport`] walk applies it to those it sent before).
    pub fn set_import(&mut self, peer: PeerIndex, import: Arc<Import>) {
        let i = peer as usize;
        if self.imports.len() <= i {
            self.imports.resize(i + 1, None);
        }
        if let Some(slot) = self.imports.get_mut(i) {
            *slot = Some(import);
        }
        self.import_cache.forget(peer);
    }

    /// A peer's import policy, if set.
    pub fn import_of(&self, peer: PeerIndex) -> Option<&Arc<Import>> {
        self.imports.get(peer as usize).and_then(Option::as_ref)
    }

    /// Registers or updates a peer; indexes are dense and chosen by the caller.
    pub fn set_peer(&mut self, peer: PeerIndex, info: PeerInfo) {
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize(i + 1, PeerInfo::NONE);
        }
        if let Some(p) = self.peers.get_mut(i) {
            *p = info;
        }
    }

    pub fn peer(&self, peer: PeerIndex) -> PeerInfo {
        self.peers
            .get(peer as usize)
            .copied()
            .unwrap_or(PeerInfo::NONE)
    }

    /// Prefixes with at least one path.
    pub fn prefixes(&self) -> usize {
        self.dests.len()
    }

    /// Paths in the Adj-RIB-In, all peers.
    pub fn paths(&self) -> usize {
        self.tally.paths.iter().sum()
    }

    /// Prefixes, paths and best paths of a family.
    pub fn family_counts(&self, family: Family) -> FamilyCounts {
        let f = family.index();
        FamilyCounts {
            prefixes: self.dests.len_of(family),
            paths: self.tally.paths.get(f).copied().unwrap_or(0),
            active: self.tally.active.get(f).copied().unwrap_or(0),
            hidden: self
                .tally
                .peers
                .iter()
                .filter_map(|c| c.get(f))
                .map(|c| c.received.saturating_sub(c.accepted) as usize)
                .sum(),
            unresolved: self
                .next_hops
                .list()
                .iter()
                .filter(|(a, r, _)| !r.reachable && family_of(a) == family)
                .map(|(_, _, n)| *n as usize)
                .sum(),
        }
    }

    /// Per peer index, per [`Family::index`]: its paths, loop-free paths and best paths here.
    pub fn peer_counts(&self) -> &[[PeerCounts; 2]] {
        &self.tally.peers
    }

    /// Per peer index: what its announcements met here.
    pub fn peer_counters(&self) -> &[PeerCounters] {
        &self.tally.counters
    }

    /// Sets the time new paths are stamped with ([`crate::clock::now`]).
    pub fn set_clock(&mut self, now: u32) {
        self.clock = now;
    }

    /// Prefixes whose best path changed and is not yet decided.
    pub fn pending(&self) -> usize {
        self.journal.len()
    }

    fn touch(journal: &mut Vec<Handle>, at: Handle, d: &mut Dest) {
        if !d.dirty {
            d.dirty = true;
            journal.push(at);
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
            self.announce_one(peer, attrs, n);
        }
    }

    #[inline]
    pub fn announce_one(&mut self, peer: PeerIndex, attrs: &Arc<RouteAttrs>, n: Nlri) {
        self.arrival = self.arrival.wrapping_add(1);
        let prefix = n.prefix.masked();
        let path_id = n.path_id.unwrap_or(0);
        let family = prefix.family().index();
        let (at, d) = self.dests.get_or_default(prefix);
        let existing = d
            .paths
            .iter()
            .position(|p| !p.gone() && p.peer == peer && p.path_id == path_id);
        // Sent again unchanged: it keeps its age (and is fresh again if it was stale). Unless
        // it was stale (sent again after a graceful restart, as RFC 4724 asks), a known
        // duplicate.
        if let Some(p) = existing.and_then(|i| d.paths.get_mut(i)) {
            if Arc::ptr_eq(p.attrs.as_received(), attrs) {
                if !p.stale() {
                    if let Some(c) = self.tally.counters(peer) {
                        c.duplicate_announcements = c.duplicate_announcements.wrapping_add(1);
                    }
                }
                p.set_stale(false);
                return;
            }
        }
        if self.rpki.is_some() && d.paths.is_empty() {
            self.rpki_index.add(&prefix);
        }
        let (attrs, rejected) = match self.imports.get(peer as usize) {
            Some(Some(imp)) => import::apply(
                imp,
                peer,
                attrs,
                &prefix,
                &mut self.import_cache,
                self.rpki.as_deref(),
            ),
            _ => (attrs.clone(), false),
        };
        let mut new = Path::new(peer, path_id, attrs, self.arrival, self.clock);
        new.set_rejected(rejected);
        if rejected {
            if let Some(c) = self.tally.counters(peer) {
                c.import_rejections = c.import_rejections.wrapping_add(1);
            }
        }
        self.post_policy.put(&prefix, &new);
        Self::replace(
            &mut self.tally,
            &mut self.next_hops,
            d,
            at,
            existing,
            new,
            family,
        );
        Self::touch(&mut self.journal, at, d);
    }

    /// Puts a new version of a path in place of `existing` (an index into the prefix's
    /// paths), or beside the others.
    #[inline]
    fn replace(
        tally: &mut Tally,
        next_hops: &mut NextHops,
        d: &mut Dest,
        at: Handle,
        existing: Option<usize>,
        new: Path,
        family: usize,
    ) {
        let reported = d.reported();
        next_hops.add_path(&new.attrs, at);
        match existing.and_then(|i| d.paths.get_mut(i)) {
            // An implicit withdrawal (RFC 4271 section 3.1): the new path replaces it; the
            // reported best stays until decided.
            Some(p) if Some(p.arrival) == reported => {
                tally.remove_path(p, family);
                next_hops.remove_path(&p.attrs);
                p.set_gone();
                tally.add_path(&new, family);
                d.paths.push(new);
            }
            Some(p) => {
                tally.remove_path(p, family);
                next_hops.remove_path(&p.attrs);
                tally.add_path(&new, family);
                *p = new;
            }
            None => {
                // Most prefixes have one or two paths (held in place). Past them, grow one at
                // a time up to four, then two at a time up to sixteen, then as usual: doubling
                // from four gave a reflector's prefix of ten paths room for sixteen (144
                // octets unused a prefix, 115 MB at 800,000 prefixes from ten clients).
                let more = room_to_add(d.paths.len(), d.paths.capacity());
                if more > 0 {
                    d.paths.reserve_exact(more);
                }
                tally.add_path(&new, family);
                d.paths.push(new);
            }
        }
    }

    pub fn withdraw(&mut self, peer: PeerIndex, nlri: impl IntoIterator<Item = Nlri>) {
        for n in nlri {
            self.withdraw_one(peer, n);
        }
    }

    #[inline]
    pub fn withdraw_one(&mut self, peer: PeerIndex, n: Nlri) {
        let prefix = n.prefix.masked();
        let path_id = n.path_id.unwrap_or(0);
        let family = prefix.family().index();
        if let Some((at, d)) = self.dests.get_mut(&prefix) {
            let books = (&mut self.tally, &mut self.next_hops, &mut self.post_policy);
            let n = d.remove_where(books, &prefix, family, |p| {
                p.peer == peer && p.path_id == path_id
            });
            if n > 0 {
                Self::touch(&mut self.journal, at, d);
            }
        }
    }

    /// The decision process over this shard's peers and options.
    fn decider(&self) -> Decider<'_> {
        Decider {
            peers: &self.peers,
            options: &self.options,
            next_hops: &self.next_hops,
        }
    }

    /// The best of a prefix's eligible paths, decided now.
    pub fn best(&self, prefix: &Prefix) -> Option<&Path> {
        let d = self.dests.get(&prefix.masked())?;
        let mut scratch = (Vec::new(), Vec::new());
        let i = self.best_of(&d.paths, &mut scratch)?;
        d.paths.get(i)
    }

    fn best_of(&self, paths: &[Path], scratch: &mut (Vec<Candidate>, Vec<usize>)) -> Option<usize> {
        self.decider().best_of(paths, scratch)
    }

    /// The equal-cost set of a prefix (Junos `multipath`): its best eligible path first,
    /// then the paths that share load with it ([`multipath_equal`]), in preference order.
    /// Just the best path without `multipath`.
    pub fn multipath(&self, prefix: &Prefix) -> Vec<&Path> {
        let Some(d) = self.dests.get(&prefix.masked()) else {
            return Vec::new();
        };
        let mut scratch = (Vec::new(), Vec::new());
        let Some(b) = self.best_of(&d.paths, &mut scratch) else {
            return Vec::new();
        };
        let (Some(best), Some(m)) = (d.paths.get(b), self.options.multipath) else {
            return d.paths.get(b).into_iter().collect();
        };
        std::iter::once(best)
            .chain(self.decider().equal_cost(&d.paths, best, m))
            .collect()
    }

    /// How many prefixes have an equal-cost set of more than one path.
    pub fn multipath_prefixes(&self) -> usize {
        if self.options.multipath.is_none() {
            return 0;
        }
        self.dests
            .keys()
            .filter(|p| self.multipath(p).len() > 1)
            .count()
    }

    /// The Loc-RIB entry of a prefix as last reported to the update groups.
    pub fn reported(&self, prefix: &Prefix) -> Option<&Path> {
        self.dests.get(prefix)?.reported_path()
    }

    /// Whether the shard keeps, per prefix, the paths offered for Add-Path send.
    pub fn keeps_add_paths(&self) -> bool {
        self.options.add_path.is_some_and(|k| k.any())
    }

    /// With Add-Path send, the paths a prefix offers the groups that send several, in
    /// decision order, each with the identifier it is sent with (what the last decision
    /// reported: a table dump sends what live changes follow from).
    pub fn offered(&self, prefix: &Prefix) -> Vec<(Offered, &Path)> {
        let Some(h) = self.dests.find(prefix) else {
            return Vec::new();
        };
        let Some(d) = self.dests.at(h) else {
            return Vec::new();
        };
        self.offered
            .get(h)
            .iter()
            .filter_map(|o| Some((*o, d.paths.iter().find(|p| p.arrival == o.arrival)?)))
            .collect()
    }

    /// Moves every prefix to the shard of `into` that owns it under [`shard_of`] (a re-shard:
    /// the number of shards changed). A prefix moves whole: its paths, the best path last
    /// reported and whether it awaits a decision, so nothing is decided or reported again
    /// because of the move. Peers known here become known there. The receiving shards'
    /// arrival counters move past every number moved in, so later paths stay younger.
    pub fn move_into(self, into: &mut [Shard]) {
        if into.is_empty() {
            return;
        }
        let n = into.len();
        for to in into.iter_mut() {
            for (i, info) in self.peers.iter().enumerate() {
                if *info != PeerInfo::NONE {
                    to.set_peer(i as PeerIndex, *info);
                }
            }
            to.arrival = to.arrival.max(self.arrival);
            for (i, imp) in self.imports.iter().enumerate() {
                if let Some(imp) = imp {
                    to.set_import(i as PeerIndex, imp.clone());
                }
            }
        }
        // Counters are summed over the shards, so the first new shard carries them on.
        if let Some(first) = into.first_mut() {
            for (peer, c) in self.tally.counters.iter().enumerate() {
                if let Some(to) = first.tally.counters(peer as PeerIndex) {
                    to.add(c);
                }
            }
        }
        let mut offered = self.offered;
        for (from, prefix, d) in self.dests.into_entries() {
            let Some(to) = into.get_mut(shard_of(&prefix, n)) else {
                continue;
            };
            let list = offered.take(from);
            let family = prefix.family().index();
            for p in d.paths.iter().filter(|p| !p.gone()) {
                to.tally.add_path(p, family);
            }
            if let Some(r) = d.reported_path() {
                to.tally.set_active(r.peer, family, true);
            }
            let dirty = d.dirty;
            let at = to.dests.insert(prefix, d);
            to.offered.set(at, list);
            if let Some(d) = to.dests.at(at) {
                for p in d.paths.iter().filter(|p| !p.gone()) {
                    to.next_hops.add_path(&p.attrs, at);
                }
            }
            if dirty {
                to.journal.push(at);
            }
        }
        if let Some(r) = &self.rpki {
            for to in into.iter_mut() {
                to.rpki = Some(r.clone());
                to.index_all();
            }
        }
    }

    /// Records the post-policy Adj-RIB-In's changes from now on (`true`) for
    /// [`Shard::drain_post_policy`], or stops.
    pub fn record_post_policy(&mut self, on: bool) {
        self.post_policy.set(on);
    }

    /// The post-policy Adj-RIB-In's changes since the last call, in the order they happened
    /// (a path may change more than once); empty unless recorded.
    pub fn drain_post_policy(&mut self) -> Vec<AdjRibInChange> {
        self.post_policy.drain()
    }

    /// Decides every prefix touched since the last call, once each, and returns those whose
    /// best path changed.
    pub fn drain_changes(&mut self) -> Vec<Change> {
        let mut changes = Vec::with_capacity(self.journal.len());
        self.decide(Some(&mut changes));
        changes
    }

    /// Decides every prefix touched since the last call, as [`Shard::drain_changes`] does, for
    /// a shard with no one to tell (no update group yet: the start-up deferral): the
    /// changes are counted, not built. Returns how many best paths changed.
    pub fn decide_unreported(&mut self) -> usize {
        self.decide(None)
    }

    /// The decisions of [`Shard::drain_changes`]; the changes go into `changes` if given
    /// (cloning two paths per change, which nobody reads while the start-up deferral holds
    /// every member back). Returns how many best paths changed.
    fn decide(&mut self, mut changes: Option<&mut Vec<Change>>) -> usize {
        let journal = std::mem::take(&mut self.journal);
        let mut count = 0;
        let mut scratch = std::mem::take(&mut self.scratch);
        let deciding = Decider {
            peers: &self.peers,
            options: &self.options,
            next_hops: &self.next_hops,
        };
        let multipath = self.options.multipath;
        let keep = self.options.add_path.filter(AddPathKeep::any);
        for at in journal {
            // No lookup: the journal holds where each entry is, and the decision reads the
            // peers and options beside the table, not through the shard.
            let Some((prefix, d)) = self.dests.at_mut(at) else {
                continue;
            };
            d.dirty = false;
            let family = prefix.family().index();
            // With Add-Path send the paths offered are ranked by the decision process, the
            // best first: it runs once, not again for the best path alone.
            let offer = keep.map(|keep| {
                add_path::offer(
                    keep,
                    &d.paths,
                    self.offered.get(at),
                    |p| deciding.eligible(p),
                    |p| deciding.candidate(p),
                    &self.options,
                )
            });
            let at_best = match &offer {
                Some(list) => list
                    .first()
                    .and_then(|o| d.paths.iter().find(|p| p.arrival == o.arrival)),
                None => deciding
                    .best_of(&d.paths, &mut scratch)
                    .and_then(|i| d.paths.get(i)),
            };
            let changed = at_best.map(|p| p.arrival) != d.reported();
            // Add-Path send: what the prefix offers now against what it offered.
            let offers = offer.and_then(|new| {
                let old = self.offered.get(at);
                (new[..] != *old).then(|| (old.to_vec(), new))
            });
            let add_paths = offers.map(|(old, new)| {
                let with_paths = new
                    .iter()
                    .filter_map(|o| {
                        let p = d.paths.iter().find(|p| p.arrival == o.arrival)?;
                        Some((*o, p.clone()))
                    })
                    .collect();
                self.offered.set(at, new);
                Box::new(AddPathChange {
                    old,
                    new: with_paths,
                })
            });
            let mut add_paths = add_paths.filter(|_| changes.is_some());
            if let (Some(out), false, Some(best)) = (changes.as_deref_mut(), changed, at_best) {
                // The same best path; the paths offered beside it changed (with `multipath`
                // the change below says so).
                if add_paths.is_some() && multipath.is_none() {
                    out.push(Change {
                        prefix,
                        position: Position(at),
                        old: Some(best.clone()),
                        best: Some(best.clone()),
                        multipath: Vec::new(),
                        best_changed: false,
                        add_paths: add_paths.take(),
                        paths_only: true,
                    });
                }
            }
            if let (Some(out), Some(m), false) = (changes.as_deref_mut(), multipath, changed) {
                // The same best path; its equal-cost set may still have changed.
                if let Some(best) = at_best {
                    out.push(Change {
                        prefix,
                        position: Position(at),
                        old: Some(best.clone()),
                        best: Some(best.clone()),
                        multipath: owned(deciding.equal_cost(&d.paths, best, m)),
                        best_changed: false,
                        add_paths: add_paths.take(),
                        paths_only: false,
                    });
                }
            }
            if changed {
                count += 1;
                let reported = d.reported_path();
                let (best, old) = (
                    at_best.map(|p| (p.peer, p.arrival)),
                    reported.map(|p| p.peer),
                );
                // Cloned only when it changed and someone is told: a worse path arriving
                // (half the second full table) leaves the best as it was.
                if let Some(out) = changes.as_deref_mut() {
                    out.push(Change {
                        prefix,
                        position: Position(at),
                        old: reported.cloned(),
                        best: at_best.cloned(),
                        multipath: match (multipath, at_best) {
                            (Some(m), Some(best)) => owned(deciding.equal_cost(&d.paths, best, m)),
                            _ => Vec::new(),
                        },
                        best_changed: true,
                        add_paths: add_paths.take(),
                        paths_only: false,
                    });
                }
                if let Some(peer) = old {
                    self.tally.set_active(peer, family, false);
                }
                match best {
                    Some((peer, arrival)) => {
                        d.reported = arrival;
                        d.has_reported = true;
                        self.tally.set_active(peer, family, true);
                    }
                    None => d.has_reported = false,
                }
            }
            d.paths.retain(|p| !p.gone());
            if d.paths.is_empty() {
                // (The RPKI index learns it is gone when it next looks.)
                self.dests.remove_at(at);
            }
        }
        self.scratch = scratch;
        count
    }
}

/// The decision process over a shard's peers and options, apart from its table, so a table
/// entry can be decided while it is borrowed for change.
struct Decider<'a> {
    peers: &'a [PeerInfo],
    options: &'a Options,
    next_hops: &'a NextHops,
}

impl Decider<'_> {
    fn candidate(&self, p: &Path) -> Candidate {
        let info = self
            .peers
            .get(p.peer as usize)
            .copied()
            .unwrap_or(PeerInfo::NONE);
        let a = &p.attrs;
        Candidate {
            llgr_stale: a.llgr_stale,
            // RFC 4271 section 5.1.5: LOCAL_PREF from an external peer is not used (the
            // session discards it, RFC 7606 section 7.5); one here was set by import policy.
            local_pref: a.local_pref.unwrap_or(100),
            as_path_len: a.as_path_len,
            origin: a.origin,
            med: a.med,
            neighbor_as: a.neighbor_as.unwrap_or(info.local_as),
            ebgp: info.ebgp,
            igp_cost: self.next_hops.resolution(a).metric,
            router_id: a.originator_id.unwrap_or(info.router_id),
            cluster_list_len: a.cluster_list_len,
            peer_address: info.address,
            arrival: p.arrival,
        }
    }

    /// Whether a path may be chosen: it is there, import policy accepts it, it does not
    /// loop and its next hop resolves (RFC 4271 section 9.1.2.1).
    fn eligible(&self, p: &Path) -> bool {
        !p.gone() && p.accepted() && self.next_hops.resolution(&p.attrs).reachable
    }

    /// Why a path is not eligible (`None` if it is).
    fn ineligible(&self, p: &Path) -> Option<Ineligible> {
        if !p.attrs.loop_free() {
            Some(Ineligible::Loop)
        } else if p.rejected() {
            Some(Ineligible::Rejected)
        } else if !self.next_hops.resolution(&p.attrs).reachable {
            Some(Ineligible::Unresolved)
        } else {
            None
        }
    }

    /// The rest of `best`'s equal-cost set among `paths` ([`multipath_equal`]), in
    /// preference order.
    fn equal_cost<'p>(
        &self,
        paths: &'p [Path],
        best: &Path,
        m: crate::decision::Multipath,
    ) -> Vec<&'p Path> {
        if paths.len() < 2 {
            return Vec::new();
        }
        let bc = self.candidate(best);
        let mut rest: Vec<(&Path, Candidate)> = paths
            .iter()
            .filter(|p| !std::ptr::eq(*p, best) && self.eligible(p))
            .map(|p| (p, self.candidate(p)))
            .filter(|(_, c)| multipath_equal(&bc, c, m, self.options))
            .collect();
        // MED is no tie-breaker here: it is equal wherever multipath_equal compared it.
        rest.sort_by(|(_, a), (_, b)| compare(a, b, false, self.options));
        rest.into_iter().map(|(p, _)| p).collect()
    }

    /// The index of the best eligible path; `scratch` is reused between calls so deciding
    /// allocates nothing.
    fn best_of(&self, paths: &[Path], scratch: &mut (Vec<Candidate>, Vec<usize>)) -> Option<usize> {
        // One path (the common case for most prefixes): no candidates to build.
        if let [only] = paths {
            return self.eligible(only).then_some(0);
        }
        let (cands, index) = scratch;
        cands.clear();
        index.clear();
        for (i, p) in paths.iter().enumerate() {
            if self.eligible(p) {
                cands.push(self.candidate(p));
                index.push(i);
            }
        }
        let i = best_path(cands, self.options)?;
        index.get(i).copied()
    }
}

fn owned(paths: Vec<&Path>) -> Vec<Path> {
    paths.into_iter().cloned().collect()
}

/// Whether a family flag is set for the prefix's family.
fn f_of(prefix: &Prefix) -> impl Fn(&[bool; 2]) -> bool + '_ {
    move |f| f.get(prefix.family().index()) == Some(&true)
}

/// Which shard owns a prefix: a hash of the masked prefix, modulo the number of shards. The
/// same everywhere in the process, for its whole life.
#[inline]
pub fn shard_of(prefix: &Prefix, shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    let h = match prefix.masked() {
        Prefix::V4 { addr, len } => u64::from(addr) << 8 | u64::from(len),
        Prefix::V6 { addr, len } => {
            let a = u128::from_be_bytes(addr);
            ((a >> 64) as u64 ^ (a as u64).rotate_left(17)) ^ u64::from(len)
        }
    };
    // A multiplicative mix (Fibonacci hashing), then a range reduction without division.
    let mixed = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (((mixed >> 32) * shards as u64) >> 32) as usize
}

/// The family of a walk's flags, for callers building [`WalkOp`] values.
pub fn families(list: &[Family]) -> [bool; 2] {
    let mut f = [false; 2];
    for x in list {
        if let Some(b) = f.get_mut(x.index()) {
            *b = true;
        }
    }
    f
}

/// Room a prefix's paths get before one more is added ([`Shard::replace`]); 0 to leave it to
/// the vector.
fn room_to_add(len: usize, capacity: usize) -> usize {
    match len {
        n if n < capacity || n >= 16 => 0,
        n if n < 4 => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod size {
    /// A prefix's paths: two in place, then room for exactly as many up to four, then for
    /// at most one more than it holds up to sixteen.
    #[test]
    fn paths_grow_close_to_their_number() {
        let mut v: smallvec::SmallVec<[u8; 2]> = smallvec::SmallVec::new();
        let mut caps = Vec::new();
        for _ in 0..12 {
            let more = super::room_to_add(v.len(), v.capacity());
            if more > 0 {
                v.reserve_exact(more);
            }
            v.push(0);
            caps.push(v.capacity());
        }
        assert_eq!(caps, [2, 2, 3, 4, 6, 6, 8, 8, 10, 10, 12, 12]);
    }

    /// The arena entry of an IPv4 prefix: key, two paths in place with their length, the
    /// reported path's arrival number, two flags.
    #[test]
    fn an_ipv4_entry_is_72_octets() {
        assert_eq!(std::mem::size_of::<super::Path>(), 24);
        assert_eq!(std::mem::size_of::<Option<(u64, super::Dest)>>(), 72);
    }
}
