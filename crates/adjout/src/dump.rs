//! Table dumps to a group's members: the shards' parts held and merged in dump order, so a
//! member gets the UPDATEs one walk of the whole table would give, however many shards
//! there are; parts to members moving out; End-of-RIB when a member's dump completes.

use crate::{
    route_refresh, send, send_all, sources, Entry, Member, MemberId, Outgoing, PathKey, State,
    UpdateGroup,
};
use bytes::Bytes;
use ribshard_rib::DumpKey;
use ribshard_wire::{Family, RouteRefresh, UpdateBuilder};
use std::collections::VecDeque;

/// The parts of a table dump to one set of members (each with its token), per shard, not
/// encoded yet. Every shard walks its table in one order (by attribute set: [`DumpKey`]), so
/// the entries with a key below the least any shard has reached are complete: they go out
/// together, in that order, as one walk of the whole table would send them.
pub(crate) struct HeldDump {
    members: Vec<(MemberId, u64)>,
    /// Per shard: entries walked and not sent, in dump order.
    parts: Vec<VecDeque<(DumpKey, Entry)>>,
    /// Per shard: the key its walk has come to (`None`: not started; `Some(None)`: ended).
    walked: Vec<Option<Option<DumpKey>>>,
}

impl HeldDump {
    /// The entries every shard has walked past, in dump order.
    fn complete(&mut self) -> Vec<Entry> {
        let mut bound: Option<DumpKey> = None;
        for w in &self.walked {
            match w {
                None => return Vec::new(),
                Some(Some(k)) => bound = Some(bound.map_or(*k, |b| b.min(*k))),
                Some(None) => {}
            }
        }
        let mut out: Vec<(DumpKey, Entry)> = Vec::new();
        for part in &mut self.parts {
            // Below the bound only: a shard at the bound may have more of that key to come.
            while part
                .front()
                .is_some_and(|(k, _)| bound.is_none_or(|b| *k < b))
            {
                out.extend(part.pop_front());
            }
        }
        in_order(out)
    }

    fn held(&self) -> usize {
        self.parts.iter().map(VecDeque::len).sum()
    }
}

fn in_order(mut v: Vec<(DumpKey, Entry)>) -> Vec<Entry> {
    v.sort_unstable_by_key(|(k, _)| *k);
    v.into_iter().map(|(_, e)| e).collect()
}

/// Complete dump entries are encoded once at least this many are in (one shard's walk step):
/// with one shard, each step goes out as it comes; with several, as one shard's would.
pub const DUMP_RELEASE: usize = 4096;

/// Dump entries held at most (about 40 octets each): past it, a walk lagging far behind the
/// others no longer holds the rest back.
pub const DUMP_HOLD_MAX: usize = 1 << 20;

impl UpdateGroup {
    /// A shard starts dumping its table to a member: from now on the member follows that
    /// shard's live changes too. The withdrawals it missed from the shard go first.
    pub fn dump_begin(&mut self, shard: usize, member: MemberId, token: u64) {
        let Some(m) = self.find(member, token) else {
            return;
        };
        if let Some(l) = m.live.get_mut(shard) {
            *l = true;
        }
        let missed: Vec<PathKey> = m
            .missed
            .get(shard)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        if missed.is_empty() {
            return;
        }
        let entries: Vec<Entry> = missed.into_iter().map(Entry::withdraw_path).collect();
        // Forgotten only once delivered: a member split off again keeps them for next time.
        if self.send_to(member, &entries) {
            if let Some(m) = self.members.iter_mut().find(|m| m.id == member) {
                if let Some(s) = m.missed.get_mut(shard) {
                    s.clear();
                }
            }
        }
    }

    /// Part of shard `shard`'s table dump for these members (each with its token), in dump
    /// order (each entry with its [`DumpKey`]). Merged with the other shards' parts for the
    /// same members: what every shard has walked past goes out in that order, so a member
    /// gets the UPDATEs one walk of the whole table would give, each attribute set's
    /// prefixes together, with one shard or sixty-four, and the group holds only what the
    /// fastest shard is ahead of the slowest.
    pub fn dump(
        &mut self,
        shard: usize,
        members: &[(MemberId, u64)],
        entries: Vec<(DumpKey, Entry)>,
    ) {
        self.dump_to_moving(shard, members, &entries);
        // Sorted: two shards may have learned of the same members in another order.
        let mut members = members.to_vec();
        members.sort_unstable();
        if self
            .held_dump
            .as_ref()
            .is_some_and(|h| h.members != members)
        {
            self.send_held_dump();
        }
        let shards = self.shards;
        let h = self.held_dump.get_or_insert_with(|| HeldDump {
            members,
            parts: vec![VecDeque::new(); shards],
            walked: vec![None; shards],
        });
        if let (Some(w), Some((k, _))) = (h.walked.get_mut(shard), entries.last()) {
            *w = Some(Some(*k));
        }
        if let Some(part) = h.parts.get_mut(shard) {
            part.extend(entries);
        }
        self.send_complete();
    }

    /// A member moving out still follows the shards that have not handed it over, for their
    /// table dumps as for their live changes: it gets their parts at once, unmerged (it
    /// leaves before a merge would complete). Dropped, a part's withdrawal of what an
    /// earlier spec exported would be lost: the shard counts it sent (its walk is done), and
    /// the new group's dump sees only the prefixes still in the table.
    fn dump_to_moving(
        &mut self,
        shard: usize,
        members: &[(MemberId, u64)],
        entries: &[(DumpKey, Entry)],
    ) {
        let follows = |m: &Member, token: u64| {
            m.moving
                .as_ref()
                .is_some_and(|v| v.get(shard) == Some(&false))
                && matches!(m.state, State::Dumping { token: t, .. } if t == token)
        };
        let moving: Vec<MemberId> = members
            .iter()
            .filter(|(id, token)| {
                self.members
                    .iter()
                    .any(|m| m.id == *id && follows(m, *token))
            })
            .map(|(id, _)| *id)
            .collect();
        if !moving.is_empty() {
            let entries: Vec<Entry> = entries.iter().map(|(_, e)| e.clone()).collect();
            self.dump_to(&moving, &entries);
        }
    }

    /// Sends the held dump entries every shard has walked past, once there are enough of
    /// them or every walk has ended.
    fn send_complete(&mut self) {
        let Some(h) = &mut self.held_dump else {
            return;
        };
        let ended = h.walked.iter().all(|w| *w == Some(None));
        if !ended && h.held() < DUMP_RELEASE {
            return;
        }
        if h.held() >= DUMP_HOLD_MAX {
            // A walk lags far behind: bound the memory rather than the UPDATEs.
            self.send_held_parts();
            return;
        }
        let members = h.members.clone();
        let ready = h.complete();
        if !ready.is_empty() {
            self.dump_now(&members, &ready);
        }
    }

    /// Encodes and sends every dump entry held, complete or not, keeping where each shard's
    /// walk has come to.
    pub(crate) fn send_held_parts(&mut self) {
        let Some(h) = &mut self.held_dump else {
            return;
        };
        let members = h.members.clone();
        let entries = in_order(h.parts.iter_mut().flat_map(std::mem::take).collect());
        if !entries.is_empty() {
            self.dump_now(&members, &entries);
        }
    }

    /// Encodes and sends the dump parts held, if any, and forgets the walks. Each member gets
    /// them if it still dumps under the token they were walked for (a later dump sends the
    /// table again).
    pub fn send_held_dump(&mut self) {
        self.send_held_parts();
        self.held_dump = None;
    }

    /// Sends dump entries to those of these members still dumping under the token they were
    /// walked for ([`UpdateGroup::dump_to`]).
    fn dump_now(&mut self, members: &[(MemberId, u64)], entries: &[Entry]) {
        let targets: Vec<MemberId> = members
            .iter()
            .filter(|(m, t)| self.find(*m, *t).is_some())
            .map(|(m, _)| *m)
            .collect();
        self.dump_to(&targets, entries);
    }

    /// Encodes dump entries once for these members; a member is not sent the paths it is
    /// the source of.
    fn dump_to(&mut self, targets: &[MemberId], entries: &[Entry]) {
        let mut apart = sources(entries);
        apart.retain(|p| targets.iter().any(|t| t.peer == *p));
        let Some(encoded) = self.encode_apart(entries, &apart) else {
            return;
        };
        for &member in targets {
            if let Some(m) = self.members.iter_mut().find(|m| m.id == member) {
                send_all(m, encoded.for_member(member.peer));
            }
        }
    }

    /// A shard finished its dump; after the last one the member is in step, and after its
    /// first dump it gets End-of-RIB for each family (RFC 4724 section 2).
    pub fn dump_end(&mut self, shard: usize, member: MemberId, token: u64) {
        let families = self.spec.families;
        if let Some(h) = &mut self.held_dump {
            if h.members.contains(&(member, token)) {
                if let Some(w) = h.walked.get_mut(shard) {
                    *w = Some(None);
                }
                self.send_complete();
            }
        }
        let Some(m) = self.find(member, token) else {
            return;
        };
        if let State::Dumping { remaining, .. } = &mut m.state {
            *remaining = remaining.saturating_sub(1);
            if *remaining > 0 {
                return;
            }
        }
        // Its whole table is in: what is held goes out before it is in step.
        self.send_held_dump();
        let Some(m) = self.members.iter_mut().find(|m| m.id == member) else {
            return;
        };
        m.state = State::InStep;
        // A whole table under this spec is in: nothing of the one it moved from is left.
        if m.moved_from.is_none() {
            m.previous = None;
        }
        if let Some((_, f)) = m.eorr.take().filter(|(t, _)| *t == token) {
            send(m, route_refresh(f, RouteRefresh::EORR));
        }
        // The first complete dump, whatever its token (a slow first dump restarts).
        if m.eor_token.is_some() {
            let mut sent = true;
            for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
                if families.get(f.index()) == Some(&true) {
                    let eor = Bytes::from(UpdateBuilder::end_of_rib(f));
                    sent &= send(m, Outgoing::updates(eor, 1));
                }
            }
            if sent {
                m.eor_token = None;
            }
        }
    }
}
