//! Table dumps from a shard to update group members: the initial table, route refresh,
//! slow-writer catch-up, and a member moved to another group because its export policy
//! changed (then what the old spec exported and the new one does not is withdrawn, and a
//! member that was in step is sent only what differs).

use super::{Advertised, GroupState, ShardWorker, ToUpdate, WALK_BUDGET};
use crate::pipeline::Membership;
use ribshard_adjout::{Entry, GroupId, MemberId, Previous};
use ribshard_rib::{DumpKey, DumpOrder, ExportCache, Exported, GroupSpec, Position};
use ribshard_wire::{Family, Prefix};
use std::time::Instant;
// foldhash (hashbrown's default), as the shard's own table: these are the shard's prefixes.
use hashbrown::HashMap;
use std::sync::Arc;

pub(super) struct DumpWalk {
    group: GroupId,
    /// The members this walk dumps to, with their tokens: several of one group when they
    /// asked before the walk took its first step (sessions coming up together), so the
    /// table is walked, and each batch encoded, once for all of them.
    members: Vec<(MemberId, u64)>,
    /// The table as the walk began, by attribute set, in dump order
    /// ([`ribshard_rib::Shard::reported_by_set`]).
    order: DumpOrder,
    /// Where it is: a set, and a prefix in it.
    at: (usize, usize),
    started: bool,
    /// Prefixes whose best path changed since the walk began, each with whether the group
    /// has sent it live since. The members follow the live changes from DumpBegin, so one
    /// sent live is held as it is now and the walk skips it (sending it again cost every
    /// client of a reflector each prefix twice after a clear); one changed without being
    /// sent (its export did not change, and the members may not have it) is read again
    /// when reached.
    changed: HashMap<Prefix, bool>,
    /// A member moved in from another spec: what that spec exported is compared with.
    previous: Option<Before>,
    /// What the group advertises of the prefixes walked so far: a group new to the shard
    /// takes it as its count when the walk ends with nothing changed meanwhile, instead of
    /// a counting walk looking up every prefix's export again.
    tally: Advertised,
    /// The oldest receipt of what the dump carries that no one was sent before (the routes
    /// learned during the start-up deferral): the update group measures from it.
    received: Option<Instant>,
}

impl DumpWalk {
    /// The dump carries routes received since `at` that no one has been sent.
    pub(super) fn received_since(&mut self, at: Instant) {
        if !self.started {
            self.received = Some(self.received.map_or(at, |r| r.min(at)));
        }
    }
}

/// The specs a moved member was exported to under, each with an export cache of its own.
struct Before {
    specs: Vec<(Arc<GroupSpec>, ExportCache)>,
    in_step: bool,
}

impl Before {
    fn reads_prefix(&self) -> bool {
        self.specs.iter().any(|(s, _)| s.export.reads_prefix())
    }

    /// What the member may hold of a path: in step, what its one previous spec exports;
    /// else whatever any of them exports (all that matters then is whether any did).
    fn exported(
        &mut self,
        src: &ribshard_rib::PeerInfo,
        peer: u32,
        attrs: &Arc<ribshard_rib::RouteAttrs>,
        p: &Prefix,
    ) -> Option<Arc<Exported>> {
        self.specs
            .iter_mut()
            .find_map(|(s, cache)| cache.get(s, src, peer, attrs, p))
    }
}

impl DumpWalk {
    /// Whether a member asking for this kind of dump can share the walk.
    fn same_kind(&self, previous: &Option<Previous>) -> bool {
        match (&self.previous, previous) {
            (None, None) => true,
            (Some(b), Some(p)) => {
                b.in_step == p.in_step
                    && b.specs.len() == p.specs.len()
                    && b.specs
                        .iter()
                        .zip(&p.specs)
                        .all(|((a, _), b)| Arc::ptr_eq(a, b))
            }
            _ => false,
        }
    }

    /// Notes prefixes whose best path changed: read again when the walk reaches them,
    /// unless sent live meanwhile ([`DumpWalk::sent_live`]).
    pub(super) fn changed(&mut self, prefixes: impl IntoIterator<Item = Prefix>) {
        for p in prefixes {
            self.changed.entry(p).or_insert(false);
        }
    }

    /// Notes prefixes the group has just sent live: the members have them as they are.
    pub(super) fn sent_live(&mut self, prefixes: impl IntoIterator<Item = Prefix>) {
        for p in prefixes {
            self.changed.insert(p, true);
        }
    }

    pub(super) fn group(&self) -> GroupId {
        self.group
    }
}

/// What one prefix sends a dump's members, given what the group exports for it now and,
/// for a moved member, what the previous spec exported.
fn entry_for(
    prefix: Prefix,
    now: Option<Arc<Exported>>,
    before: Option<Option<Arc<Exported>>>,
    in_step: bool,
    source: u32,
) -> Option<Entry> {
    match (before, now) {
        // A plain dump: what is exported.
        (None, now) => now.map(|e| Entry::announce(prefix, e, source, 0)),
        (Some(None), None) => None,
        // In step with the previous spec: nothing to send where nothing differs.
        (Some(Some(b)), Some(n)) if in_step && (Arc::ptr_eq(&b, &n) || b == n) => None,
        (Some(_), Some(n)) => Some(Entry::announce(prefix, n, source, 0)),
        (Some(Some(_)), None) => Some(Entry::withdraw(prefix)),
    }
}

impl ShardWorker {
    /// A table dump for a member: from now on it follows this shard's live changes; the
    /// walk sends the Loc-RIB as it stands when each step runs. A member of a group whose
    /// dump has not taken a step yet joins that walk. With `previous`, the member moved in
    /// from another group: that group stops sending it this shard's changes now.
    pub(super) fn start_dump(
        &mut self,
        group: GroupId,
        member: MemberId,
        token: u64,
        previous: Option<Previous>,
    ) {
        // Held back while advertising is deferred: the dump waits for it to end.
        if let Some(h) = self.held_members.iter_mut().find(|h| h.0.member == member) {
            if h.0.group == group {
                h.1 = token;
                h.2 = previous;
            }
            return;
        }
        let Some(t) = self.groups.get(&group).map(|g| g.update_thread) else {
            return;
        };
        // Changes decided before the member follows the live stream go out first (to its
        // old group too, if it is moving: it follows that one until DumpBegin).
        self.drain();
        let moved = self.moving.get_mut(&member).and_then(|list| {
            let i = list.iter().position(|(_, to)| *to == group)?;
            Some(list.remove(i).0)
        });
        if self.moving.get(&member).is_some_and(Vec::is_empty) {
            self.moving.remove(&member);
        }
        if let Some(from) = moved {
            let mut dropped = 0;
            for d in self.dumps.iter_mut().filter(|d| d.group == from) {
                let before = d.members.len();
                d.members.retain(|(m, _)| *m != member);
                if d.previous.is_some() {
                    dropped += before - d.members.len();
                }
            }
            self.dumps
                .retain(|d| !(d.group == from && d.members.is_empty()));
            if let Some(g) = self.groups.get_mut(&from) {
                g.moving_in = g.moving_in.saturating_sub(dropped);
            }
            self.remove_member(from);
        }
        if previous.is_some() {
            if let Some(g) = self.groups.get_mut(&group) {
                g.moving_in += 1;
            }
        }
        let shard = self.index;
        self.send_update(
            t,
            ToUpdate::DumpBegin {
                shard,
                group,
                member,
                token,
            },
        );
        // Members coming up together (the end of the start-up deferral) share one pass over
        // the table. Not a walk the table changed under: its members were sent those changes
        // live, and taking the table again for one more member sent them every prefix twice
        // (a client up again before the others after a clear-all: 100,000 redundant).
        if let Some(d) = self.dumps.iter_mut().find(|d| {
            d.group == group && !d.started && d.changed.is_empty() && d.same_kind(&previous)
        }) {
            d.members.retain(|(m, _)| *m != member);
            d.members.push((member, token));
            return;
        }
        // In the order every shard walks, so the update group can merge the shards' walks
        // into one.
        let order = self.shard.reported_by_set();
        self.dumps.push_back(DumpWalk {
            group,
            members: vec![(member, token)],
            order,
            at: (0, 0),
            started: false,
            changed: HashMap::new(),
            tally: Advertised::default(),
            received: None,
            previous: previous.map(|p| Before {
                specs: p
                    .specs
                    .into_iter()
                    .map(|s| (s, ExportCache::default()))
                    .collect(),
                in_step: p.in_step,
            }),
        });
    }

    /// A member moves to another group (its export policy changed): the shard learns the
    /// new group and sends the old one the member's changes until the new group's dump.
    pub(super) fn regroup(&mut self, member: MemberId, from: GroupId, to: Membership) {
        if let Some(h) = self.held_members.iter_mut().find(|h| h.0.member == member) {
            h.0 = to;
            return;
        }
        let caches = &mut self.caches;
        self.groups
            .entry(to.group)
            .or_insert_with(|| GroupState::new(&to, caches))
            .members += 1;
        self.moving
            .entry(member)
            .or_default()
            .push((from, to.group));
    }

    /// One step of the first table dump; false if there is none.
    pub(super) fn dump_step(&mut self) -> bool {
        let Some(mut d) = self.dumps.pop_front() else {
            return false;
        };
        d.started = true;
        let mut entries: Vec<Entry> = Vec::new();
        let mut keys: Vec<DumpKey> = Vec::new();
        if let Some(g) = self.groups.get_mut(&d.group) {
            let shard = &self.shard;
            let mut cache = super::locked(&g.cache);
            let in_step = d.previous.as_ref().is_some_and(|b| b.in_step);
            let mut budget = WALK_BUDGET;
            while budget > 0 {
                let Some(set) = d.order.sets.get(d.at.0) else {
                    break;
                };
                let src = shard.peer(set.key.1);
                // Exported once per set and family, not per prefix (unless the export
                // policy reads the prefix).
                let per_prefix = g.spec.export.reads_prefix()
                    || d.previous.as_ref().is_some_and(Before::reads_prefix);
                type Both = (Option<Arc<Exported>>, Option<Option<Arc<Exported>>>);
                let mut exported: Option<(Family, Both)> = None;
                let rest = d.order.places_of(d.at.0, d.at.1);
                let take = rest.len().min(budget);
                let mut tally = [0u64; 2];
                for place in rest.iter().take(take) {
                    let Some(prefix) = shard.dump_prefix(*place) else {
                        continue;
                    };
                    let p = &prefix;
                    let changed_here = d.changed.get(p).copied();
                    // Sent live since the walk began, whole (with Add-Path a live change is
                    // one path's: the walk sends the others).
                    if changed_here == Some(true) && d.previous.is_none() {
                        continue;
                    }
                    let changed_here = changed_here.is_some();
                    let (now, before, source) = if changed_here {
                        // Changed since the walk began: as it is now, and whatever the member
                        // had of it before is not known.
                        match shard.reported(p) {
                            Some(best) => {
                                let bsrc = shard.peer(best.peer);
                                let e = cache.get(&g.spec, &bsrc, best.peer, &best.attrs, p);
                                let before = d.previous.as_ref().map(|_| None);
                                let withdraw = d.previous.is_some() && e.is_none();
                                (e, before, if withdraw { u32::MAX } else { best.peer })
                            }
                            None => (None, d.previous.as_ref().map(|_| None), u32::MAX),
                        }
                    } else {
                        let f = p.family();
                        let (now, before) = match &exported {
                            Some((ef, both)) if *ef == f && !per_prefix => both.clone(),
                            _ => {
                                let now = cache.get(&g.spec, &src, set.key.1, &set.attrs, p);
                                let before = d
                                    .previous
                                    .as_mut()
                                    .map(|b| b.exported(&src, set.key.1, &set.attrs, p));
                                exported = Some((f, (now.clone(), before.clone())));
                                (now, before)
                            }
                        };
                        (now, before, set.key.1)
                    };
                    if now.is_some() && !changed_here {
                        if let Some(n) = tally.get_mut(p.family().index()) {
                            *n += 1;
                        }
                    }
                    let anew = changed_here && d.previous.is_some();
                    let e = if anew {
                        // Sent as it is now, or withdrawn: the member may hold anything.
                        Some(match now {
                            Some(n) => Entry::announce(*p, n, source, 0),
                            None => Entry::withdraw(*p),
                        })
                    } else {
                        entry_for(*p, now, before, in_step, source)
                    };
                    let several = super::sends_several(shard, &g.spec, p.family());
                    match several {
                        None => {
                            if let Some(e) = e {
                                entries.push(e);
                                keys.push(set.key);
                            }
                        }
                        Some(select) => {
                            // Add-Path: every path the group sends of the prefix, each under
                            // its identifier, the best path's as just found.
                            let best = shard.reported(p).map(|b| b.arrival);
                            let offered = shard.offered(p);
                            for (o, path) in select.pick(&offered, |(o, _)| o.equal_cost) {
                                let e = if Some(o.arrival) == best {
                                    e.clone()
                                } else {
                                    let psrc = shard.peer(path.peer);
                                    let now = cache.get(&g.spec, &psrc, path.peer, &path.attrs, p);
                                    let before = d
                                        .previous
                                        .as_mut()
                                        .map(|b| b.exported(&psrc, path.peer, &path.attrs, p));
                                    match (anew, now) {
                                        (true, Some(n)) => {
                                            Some(Entry::announce(*p, n, path.peer, 0))
                                        }
                                        (true, None) => Some(Entry::withdraw(*p)),
                                        (false, now) => {
                                            entry_for(*p, now, before, in_step, path.peer)
                                        }
                                    }
                                };
                                if let Some(mut e) = e {
                                    e.path_id = o.path_id;
                                    entries.push(e);
                                    keys.push(set.key);
                                }
                            }
                        }
                    }
                }
                for (f, n) in tally.into_iter().enumerate() {
                    d.tally.add_many(set.key.1, f, n);
                }
                budget = budget.saturating_sub(take.max(1));
                if d.at.1 + take >= set.len as usize {
                    d.at = (d.at.0 + 1, 0);
                } else {
                    d.at.1 += take;
                }
            }
        }
        let t = self.groups.get(&d.group).map_or(0, |g| g.update_thread);
        let group = d.group;
        if !entries.is_empty() {
            self.send_update(
                t,
                ToUpdate::Dump {
                    shard: self.index,
                    group,
                    members: d.members.clone(),
                    keys,
                    entries,
                },
            );
        }
        if d.at.0 >= d.order.sets.len() || !self.groups.contains_key(&group) {
            if let (Some(g), true) = (self.groups.get_mut(&group), d.previous.is_some()) {
                g.moving_in = g.moving_in.saturating_sub(d.members.len());
            }
            // Nothing changed since the walk took the table, so what it found exported is
            // what the group advertises now; the group counts every change from here on.
            if let Some(g) = self.groups.get_mut(&group) {
                let whole = d.at.0 >= d.order.sets.len() && d.changed.is_empty();
                if whole && g.advertised.walk == Some(Position::START) {
                    g.advertised = std::mem::take(&mut d.tally);
                }
            }
            for &(member, token) in &d.members {
                self.send_update(
                    t,
                    ToUpdate::DumpEnd {
                        shard: self.index,
                        group,
                        member,
                        token,
                        received: d.received,
                    },
                );
            }
        } else {
            self.dumps.push_front(d);
        }
        true
    }
}
