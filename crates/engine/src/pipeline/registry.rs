//! Update groups by what makes them one: members with identical specs share a group, made
//! on the next update thread (round-robin) for its first member. A member whose spec
//! changes (its export policy did) moves to a group of the new spec on its own update
//! thread, so that one thread hands it over from one group to the other.

use ribshard_adjout::GroupId;
use ribshard_rib::GroupSpec;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct Registry {
    /// Every group with members: its spec and how many.
    groups: HashMap<GroupId, (Arc<GroupSpec>, usize)>,
    /// The group a new member of a spec joins.
    by_spec: HashMap<Arc<GroupSpec>, GroupId>,
    /// The update thread of every group that exists.
    pub(super) placement: HashMap<GroupId, usize>,
    next_id: GroupId,
    pub(super) next_thread: usize,
}

impl Registry {
    /// The group for a member with this spec (made on the next of `threads` if none).
    pub(super) fn join(
        &mut self,
        spec: GroupSpec,
        threads: usize,
    ) -> (GroupId, Arc<GroupSpec>, usize) {
        if let Some(id) = self.by_spec.get(&spec).copied() {
            if let Some((s, n)) = self.groups.get_mut(&id) {
                *n += 1;
                let t = self.placement.get(&id).copied().unwrap_or(0);
                return (id, s.clone(), t);
            }
        }
        let t = self.next_thread % threads.max(1);
        self.next_thread += 1;
        self.make(Arc::new(spec), t)
    }

    fn make(&mut self, spec: Arc<GroupSpec>, thread: usize) -> (GroupId, Arc<GroupSpec>, usize) {
        let id = self.next_id;
        self.next_id += 1;
        self.groups.insert(id, (spec.clone(), 1));
        self.by_spec.entry(spec.clone()).or_insert(id);
        self.placement.insert(id, thread);
        (id, spec, thread)
    }

    /// A member left `group`.
    pub(super) fn leave(&mut self, group: GroupId) {
        let Some((spec, n)) = self.groups.get_mut(&group) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n > 0 {
            return;
        }
        let spec = spec.clone();
        self.groups.remove(&group);
        self.placement.remove(&group);
        if self.by_spec.get(&spec) == Some(&group) {
            self.by_spec.remove(&spec);
            // Another group of the spec (made by a move) takes new members now.
            if let Some((id, _)) = self.groups.iter().find(|(_, (s, _))| *s == spec) {
                self.by_spec.insert(spec, *id);
            }
        }
    }

    /// A member of `from` moves to a group of `spec` on the same update thread (made if
    /// there is none there), and leaves `from`.
    pub(super) fn regroup(
        &mut self,
        from: GroupId,
        spec: GroupSpec,
    ) -> (GroupId, Arc<GroupSpec>, usize) {
        let thread = self.placement.get(&from).copied().unwrap_or(0);
        let found = self
            .groups
            .iter()
            .find(|(id, (s, _))| **s == spec && self.placement.get(id) == Some(&thread))
            .map(|(id, (s, _))| (*id, s.clone()));
        let to = match found {
            Some((id, s)) => {
                if let Some((_, n)) = self.groups.get_mut(&id) {
                    *n += 1;
                }
                (id, s, thread)
            }
            None => self.make(Arc::new(spec), thread),
        };
        self.leave(from);
        to
    }

    /// Groups with members now.
    pub(super) fn len(&self) -> usize {
        self.groups.len()
    }

    /// Their ids.
    pub(super) fn ids(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.groups.keys().copied()
    }
}
