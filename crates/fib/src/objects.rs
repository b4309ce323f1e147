//! The kernel nexthop objects the FIB writer keeps: a million routes share a few hundred of
//! them, so moving traffic to another next hop is one message, not a million.
//!
//! - A **leaf** per BGP next hop and way out: `leaf(N, j)` forwards to the j-th hop that
//!   next hop `N` resolves to (its gateway and interface).
//! - A **group** per next-hop set a route wants (`Want::Forward`: the best path's next hop,
//!   and with `multipath` those of its equal-cost set): the leaves of every next hop in it.
//!   Routes name the group, even for a single leaf, so that when `N` moves to another
//!   gateway or interface only `leaf(N, j)` is replaced (one message, whatever the number
//!   of routes), and when its number of ways out changes, only the groups holding it.
//!
//! Ids are derived from what an object is for (a hash of the next hop, or of the set, into
//! the configured id range), so after a restart the objects left in the kernel by the last
//! run are found under the ids this run would give them, and the routes naming them can be
//! kept ([`crate::writer`]'s reconciliation). Collisions move to the next free id.

use crate::kernel::{KernelView, Via};
use crate::netlink::nexthop::{self, NexthopSpec};
use crate::netlink::route::Hop;
use crate::netlink::Builder;
use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;
use std::net::IpAddr;

/// What a route wants in the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Want {
    /// Forward through these BGP next hops (sorted, each once).
    Forward(SmallVec<[IpAddr; 2]>),
    /// Import policy's `next-hop reject`: unreachable (ICMP).
    Reject,
    /// Import policy's `next-hop discard`: dropped silently.
    Discard,
}

/// How a route is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Object(u32),
    Hops(SmallVec<[Hop; 2]>),
    Blackhole,
    Unreachable,
}

/// What a change of resolution asks the writer to write again.
#[derive(Debug, Default)]
pub struct Moved {
    /// The routes of these sets.
    pub sets: Vec<Want>,
    /// Every route through one of these next hops.
    pub through: HashSet<IpAddr>,
}

/// One thing written in a batch, for telling which failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    Object(u32),
    ObjectDeleted(u32),
}

struct Leaves {
    /// Where the next hop resolved when its leaves were written.
    via: Via,
    ids: SmallVec<[(u32, Hop); 1]>,
    /// Groups holding these leaves.
    users: u32,
}

struct Group {
    id: u32,
    /// Routes installed naming it.
    routes: u32,
}

/// The objects written, by what they are for.
pub struct Objects {
    protocol: u8,
    base: u32,
    span: u32,
    /// Use objects at all (a kernel without them, or turned off: routes carry their hops).
    pub enabled: bool,
    leaves: HashMap<IpAddr, Leaves>,
    groups: HashMap<Want, Group>,
    /// Without objects: where each next hop a route was written with resolved then.
    vias: HashMap<IpAddr, Via>,
    /// Every id we hold, and the spec written under it.
    ids: HashMap<u32, NexthopSpec>,
    /// Objects of our protocol found at start, not yet claimed by this run.
    leftover: HashMap<u32, NexthopSpec>,
    /// Ids other protocols use (never written).
    foreign: HashSet<u32>,
    /// Leaves to delete once no group holds them (end of a batch).
    garbage: Vec<u32>,
    /// Ids of objects the last run left that are to be deleted and not yet: given to no
    /// object of ours until then (the delete, sent after the batch, would take it and the
    /// routes naming it with it).
    dying: HashSet<u32>,
    /// Objects written since start (created or replaced), deleted, and found right at
    /// start.
    pub written: u64,
    pub deleted: u64,
    pub adopted: u64,
}

type Sent = Vec<(u32, Written)>;

impl Objects {
    pub fn new(protocol: u8, base: u32, span: u32, enabled: bool) -> Objects {
        Objects {
            protocol,
            base,
            span: span.max(1024),
            enabled,
            leaves: HashMap::new(),
            groups: HashMap::new(),
            vias: HashMap::new(),
            ids: HashMap::new(),
            leftover: HashMap::new(),
            foreign: HashSet::new(),
            garbage: Vec::new(),
            dying: HashSet::new(),
            written: 0,
            deleted: 0,
            adopted: 0,
        }
    }

    /// Objects of our protocol found in the kernel at start (reused where this run writes
    /// the same object under the same id; [`Objects::unclaimed`] for the rest), and the ids
    /// other protocols use.
    pub fn found_at_start(&mut self, ours: HashMap<u32, NexthopSpec>, foreign: HashSet<u32>) {
        self.leftover = ours;
        self.foreign = foreign;
    }

    /// Objects found at start that nothing claimed, to delete once routes have moved.
    pub fn unclaimed(&mut self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.leftover.keys().copied().collect();
        self.leftover.clear();
        self.dying.extend(ids.iter().copied());
        // Groups before leaves: a leaf still in a group is refused.
        ids.sort_by_key(|id| !matches!(self.ids.get(id), Some(NexthopSpec::Group(_))));
        ids
    }

    pub fn leaves(&self) -> usize {
        self.leaves.values().map(|l| l.ids.len()).sum()
    }

    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// The id for an object of this identity: its hash in the range, moved on past ids
    /// taken by other objects of ours, by other protocols, or by an object the last run
    /// left that is not this one (the kernel refuses to turn a leaf into a group or back,
    /// and routes of ours may still name it until they are written again).
    fn id_for(&self, what: &[u8], spec: &NexthopSpec) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in what {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let span = u64::from(self.span);
        let mut k = h % span;
        for _ in 0..self.span {
            let id = self.base.wrapping_add(k as u32);
            if id != 0
                && !self.ids.contains_key(&id)
                && !self.foreign.contains(&id)
                && !self.dying.contains(&id)
                && self.leftover.get(&id).is_none_or(|s| s == spec)
            {
                return id;
            }
            k = (k + 1) % span;
        }
        self.base
    }

    /// Writes an object, unless it is already there as wanted (written by us, or left by
    /// the last run under the same id).
    fn put(&mut self, b: &mut Builder, seq: &mut u32, sent: &mut Sent, id: u32, spec: NexthopSpec) {
        if self.leftover.get(&id) == Some(&spec) {
            self.leftover.remove(&id);
            self.ids.insert(id, spec);
            self.adopted += 1;
            return;
        }
        self.leftover.remove(&id);
        if self.ids.get(&id) == Some(&spec) {
            return;
        }
        *seq = seq.wrapping_add(1);
        nexthop::put_replace(b, *seq, 0, id, self.protocol, &spec);
        sent.push((*seq, Written::Object(id)));
        self.ids.insert(id, spec);
        self.written += 1;
    }

    /// The ways out of a next hop now.
    fn hops_of(view: &KernelView, nh: IpAddr) -> (Via, SmallVec<[Hop; 2]>) {
        let r = view.resolve(nh);
        let hops = match &r.via {
            Via::Hops(h) => h.clone(),
            _ => SmallVec::new(),
        };
        (r.via, hops)
    }

    /// Writes next hop `nh`'s leaves for where it resolves now.
    fn make_leaves(
        &mut self,
        b: &mut Builder,
        seq: &mut u32,
        sent: &mut Sent,
        view: &KernelView,
        nh: IpAddr,
        users: u32,
    ) {
        let (via, hops) = Self::hops_of(view, nh);
        let mut ids = SmallVec::new();
        for (j, h) in hops.iter().enumerate() {
            let spec = leaf_spec(h);
            let id = self.id_for(&leaf_key(nh, j), &spec);
            self.put(b, seq, sent, id, spec);
            ids.push((id, *h));
        }
        self.leaves.insert(nh, Leaves { via, ids, users });
    }

    fn members(&self, nhs: &[IpAddr]) -> SmallVec<[(u32, u16); 4]> {
        nhs.iter()
            .filter_map(|nh| self.leaves.get(nh))
            .flat_map(|l| l.ids.iter().map(|(id, h)| (*id, h.weight)))
            .collect()
    }

    /// How to write a route that wants `want`, writing first (into the same batch, ahead
    /// of the route) the objects it needs. `None`: nothing to install (no next hop of the
    /// set resolves to a way out). A route written with it is counted with
    /// [`Objects::acquire`], and given back with [`Objects::release`].
    pub fn target(
        &mut self,
        b: &mut Builder,
        seq: &mut u32,
        sent: &mut Sent,
        view: &KernelView,
        want: &Want,
    ) -> Option<Target> {
        let nhs = match want {
            Want::Reject => return Some(Target::Unreachable),
            Want::Discard => return Some(Target::Blackhole),
            Want::Forward(nhs) => nhs,
        };
        if !self.enabled {
            let mut hops: SmallVec<[Hop; 2]> = SmallVec::new();
            for nh in nhs {
                let (via, h) = Self::hops_of(view, *nh);
                self.vias.insert(*nh, via);
                hops.extend(h);
            }
            return (!hops.is_empty()).then_some(Target::Hops(hops));
        }
        if let Some(g) = self.groups.get(want) {
            return Some(Target::Object(g.id));
        }
        for nh in nhs {
            if !self.leaves.contains_key(nh) {
                self.make_leaves(b, seq, sent, view, *nh, 0);
            }
        }
        let members = self.members(nhs);
        if members.is_empty() {
            return None;
        }
        for nh in nhs {
            if let Some(l) = self.leaves.get_mut(nh) {
                l.users += 1;
            }
        }
        let spec = NexthopSpec::Group(members);
        let id = self.id_for(&group_key(want), &spec);
        self.put(b, seq, sent, id, spec);
        self.groups.insert(want.clone(), Group { id, routes: 0 });
        Some(Target::Object(id))
    }

    /// A route naming `want`'s group was written.
    pub fn acquire(&mut self, want: &Want) {
        if let Some(g) = self.groups.get_mut(want) {
            g.routes += 1;
        }
    }

    /// A route naming `want`'s group was removed or moved elsewhere.
    pub fn release(&mut self, want: &Want) {
        if let Some(g) = self.groups.get_mut(want) {
            g.routes = g.routes.saturating_sub(1);
        }
    }

    /// Deletes the groups no route names any more, then the leaves no group holds (written
    /// after the routes of the batch, which the kernel applies in order).
    pub fn collect(&mut self, b: &mut Builder, seq: &mut u32, sent: &mut Sent) {
        let unused: Vec<Want> = self
            .groups
            .iter()
            .filter(|(_, g)| g.routes == 0)
            .map(|(w, _)| w.clone())
            .collect();
        for w in unused {
            let Some(g) = self.groups.remove(&w) else {
                continue;
            };
            self.ids.remove(&g.id);
            *seq = seq.wrapping_add(1);
            nexthop::put_delete(b, *seq, 0, g.id);
            sent.push((*seq, Written::ObjectDeleted(g.id)));
            self.deleted += 1;
            if let Want::Forward(nhs) = &w {
                for nh in nhs {
                    if let Some(l) = self.leaves.get_mut(nh) {
                        l.users = l.users.saturating_sub(1);
                    }
                }
            }
        }
        let idle: Vec<IpAddr> = self
            .leaves
            .iter()
            .filter(|(_, l)| l.users == 0)
            .map(|(nh, _)| *nh)
            .collect();
        for nh in idle {
            if let Some(l) = self.leaves.remove(&nh) {
                for (id, _) in l.ids {
                    self.ids.remove(&id);
                    self.garbage.push(id);
                }
            }
        }
        for id in std::mem::take(&mut self.garbage) {
            // Free from here on: the kernel applies the delete before anything later.
            self.dying.remove(&id);
            *seq = seq.wrapping_add(1);
            nexthop::put_delete(b, *seq, 0, id);
            sent.push((*seq, Written::ObjectDeleted(id)));
            self.deleted += 1;
        }
    }

    /// Deletes objects by id (left over from the last run) with the next collection.
    pub fn delete(&mut self, ids: Vec<u32>) {
        self.garbage.extend(ids);
    }

    /// Resolution changed: moves every next hop whose ways out changed. One keeping its
    /// number of ways out has its leaves replaced in place (a message each, whatever the
    /// number of routes); otherwise its leaves are made again and the groups holding it
    /// replaced. Returns what must be written again: with objects, the sets left with
    /// nothing to forward to (their routes go until they resolve again); without them,
    /// every route through a next hop that moved (each route carries its hops).
    pub fn moved(
        &mut self,
        b: &mut Builder,
        seq: &mut u32,
        sent: &mut Sent,
        view: &KernelView,
    ) -> Moved {
        if !self.enabled {
            let mut through = HashSet::new();
            for (nh, via) in self.vias.iter_mut() {
                let now = view.resolve(*nh).via;
                if *via != now {
                    *via = now;
                    through.insert(*nh);
                }
            }
            return Moved {
                sets: Vec::new(),
                through,
            };
        }
        let mut regroup: HashSet<IpAddr> = HashSet::new();
        let nhs: Vec<IpAddr> = self.leaves.keys().copied().collect();
        for nh in nhs {
            let (via, hops) = Self::hops_of(view, nh);
            let Some(l) = self.leaves.get(&nh) else {
                continue;
            };
            if l.via == via {
                continue;
            }
            if l.ids.len() == hops.len() && !hops.is_empty() {
                // The same number of ways out: each leaf replaced where it is.
                let ids: SmallVec<[(u32, Hop); 1]> = l
                    .ids
                    .iter()
                    .zip(hops.iter())
                    .map(|((id, _), h)| (*id, *h))
                    .collect();
                for (id, h) in &ids {
                    self.put(b, seq, sent, *id, leaf_spec(h));
                }
                if let Some(l) = self.leaves.get_mut(&nh) {
                    l.via = via;
                    l.ids = ids;
                }
            } else {
                regroup.insert(nh);
            }
        }
        if regroup.is_empty() {
            return Moved::default();
        }
        // Leaves made again for the next hops whose number of ways out changed...
        let mut old_ids = Vec::new();
        for nh in &regroup {
            if let Some(l) = self.leaves.remove(nh) {
                for (id, _) in &l.ids {
                    self.ids.remove(id);
                }
                old_ids.extend(l.ids.iter().map(|(id, _)| *id));
                self.make_leaves(b, seq, sent, view, *nh, l.users);
            }
        }
        // ... then the groups holding them, in place; a group left with no member cannot
        // be written: its routes go (written again, they find nothing to install).
        let mut rewrite = Vec::new();
        for w in self.sets_with(&regroup) {
            let Want::Forward(nhs) = &w else { continue };
            let members = self.members(nhs);
            let Some(id) = self.groups.get(&w).map(|g| g.id) else {
                continue;
            };
            if members.is_empty() {
                rewrite.push(w);
                continue;
            }
            self.put(b, seq, sent, id, NexthopSpec::Group(members));
        }
        // The old leaves go once no group holds them (at the end of the batch).
        let kept: HashSet<u32> = self
            .leaves
            .values()
            .flat_map(|l| l.ids.iter().map(|(id, _)| *id))
            .collect();
        self.garbage
            .extend(old_ids.into_iter().filter(|id| !kept.contains(id)));
        Moved {
            sets: rewrite,
            through: HashSet::new(),
        }
    }

    /// The sets written that hold one of these next hops.
    fn sets_with(&self, nhs: &HashSet<IpAddr>) -> Vec<Want> {
        self.groups
            .keys()
            .filter(|w| matches!(w, Want::Forward(n) if n.iter().any(|x| nhs.contains(x))))
            .cloned()
            .collect()
    }

    /// What object `id` is, as written.
    pub fn spec(&self, id: u32) -> Option<&NexthopSpec> {
        self.ids.get(&id)
    }

    /// The group a set's routes name now, if written.
    pub fn group_of(&self, want: &Want) -> Option<u32> {
        self.groups.get(want).map(|g| g.id)
    }

    /// A write the kernel refused: it does not hold what we thought.
    pub fn failed(&mut self, id: u32) {
        self.ids.remove(&id);
        // Not given to another object this run: whatever the kernel holds under it is not
        // what we think.
        self.foreign.insert(id);
    }
}

fn leaf_spec(h: &Hop) -> NexthopSpec {
    NexthopSpec::Leaf(Hop { weight: 1, ..*h })
}

fn leaf_key(nh: IpAddr, j: usize) -> Vec<u8> {
    let mut k = vec![1u8];
    match nh {
        IpAddr::V4(a) => k.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => k.extend_from_slice(&a.octets()),
    }
    k.extend_from_slice(&(j as u32).to_be_bytes());
    k
}

fn group_key(want: &Want) -> Vec<u8> {
    let mut k = vec![2u8];
    if let Want::Forward(nhs) = want {
        for nh in nhs {
            match nh {
                IpAddr::V4(a) => k.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => k.extend_from_slice(&a.octets()),
            }
        }
    }
    k
}
