//! # ribshard-adjout: update groups
//!
//! Owns an update group's members and what they are sent: changes arrive from the shards as
//! batches of (prefix, exported attributes or withdrawal); the group packs them by attribute
//! set into full UPDATEs, encodes once, and hands the same bytes to every member that is in
//! step. A member whose write queue passes a high-water mark is split off (a "slow writer"),
//! misses the live stream, and later catches up from the shards' state (a table dump) plus
//! the withdrawals it missed, so one slow peer never holds back its group.
//!
//! A member whose export policy changes moves to another group of its update thread without
//! leaving its session: it keeps getting the old group's changes from each shard until that
//! shard starts a dump of the new group to it (sending only what differs, when it was in
//! step), so nothing is missed or sent out of order.
//!
//! It must never block (members are written through non-blocking sinks), look at paths or
//! best-path state (the shards own them), or do anything per member that can be done once per
//! group.

mod dump;
mod encode;
mod merged;

pub use dump::{DUMP_HOLD_MAX, DUMP_RELEASE};
pub use merged::Merged;

use bytes::Bytes;
use dump::HeldDump;
use ribshard_rib::{shard_of, Exported, GroupSpec};
use ribshard_wire::{Family, Prefix, RouteRefresh, UpdateBuilder};
// foldhash (hashbrown's default): keys are our pointers, peers and prefixes; SipHash showed in
// profiles of the update threads.
use hashbrown::{HashMap, HashSet};
use std::sync::Arc;

pub type GroupId = u32;

/// A member of a group: a peer's session. The epoch tells sessions of one neighbor apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberId {
    pub peer: u32,
    pub epoch: u32,
}

/// Bytes for a member's socket, and what they hold (for the session's message counters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub bytes: Bytes,
    pub messages: u32,
    /// ROUTE-REFRESH messages (BoRR, EoRR) rather than UPDATEs.
    pub route_refresh: bool,
}

impl Outgoing {
    pub fn updates(bytes: Bytes, messages: u32) -> Outgoing {
        Outgoing {
            bytes,
            messages,
            route_refresh: false,
        }
    }
}

/// Where a member's bytes go: the session's writer. Never blocks.
pub trait Sink: Send {
    /// Queues bytes for the socket. False if the session is gone.
    fn send(&self, out: Outgoing) -> bool;
    /// Octets queued and not yet written to the socket.
    fn queued(&self) -> usize;
    /// Octets waiting to leave: [`Sink::queued`] and what the kernel holds unsent.
    fn unsent(&self) -> usize {
        self.queued()
    }
    /// The neighbor behind it, as logs name it (`ADDRESS (ASn)`).
    fn neighbor(&self) -> &str;
    /// Another handle on the same writer (a member moving between two groups is in both
    /// for a moment; both write from one thread, so their bytes keep their order).
    fn duplicate(&self) -> Box<dyn Sink>;
}

/// One change for a group: the prefix, what to advertise (`None` to withdraw), and the peer
/// the advertised path came from: it is never sent back to that peer (a client's own route
/// reflected to it would carry its own next hop, which RFC 4271 section 6.3 lets it refuse).
/// In a group that sends several paths per prefix (Add-Path, RFC 7911), each change is one
/// path's, under its identifier; elsewhere `path_id` is 0 (the prefix's one path).
#[derive(Clone, Debug)]
pub struct Entry {
    pub prefix: Prefix,
    pub exported: Option<Arc<Exported>>,
    pub source: u32,
    pub path_id: u32,
    /// The peer whose path the group advertised for the prefix before this change
    /// ([`NOTHING_BEFORE`]: none; [`ANY_BEFORE`]: not known). The source of a new path is
    /// never sent it, and is sent a withdrawal instead only if it holds another of ours.
    pub before: u32,
}

/// [`Entry::before`]: the group advertised nothing for the prefix.
pub const NOTHING_BEFORE: u32 = u32::MAX;
/// [`Entry::before`]: not known, so a source may hold another path (a withdrawal is sent).
pub const ANY_BEFORE: u32 = u32::MAX - 1;

/// What a withdrawal names: a prefix, and with Add-Path the path's identifier (else 0).
pub type PathKey = (Prefix, u32);

/// Where the changes `live_merged` sends came from: what a member that does not take them
/// must unlearn is remembered per shard.
#[derive(Clone, Copy)]
enum Parts<'a> {
    /// As each shard sent them.
    Batches(&'a [(usize, &'a [Entry])]),
    /// Merged ([`Merged`]); each one's shard is its prefix's.
    Merged,
}

/// A member that did not take `e` (from shard `s`) remembers it if it must unlearn it: a
/// withdrawal, or its own path (it holds another path of ours there, if any). A member
/// moving in still gets the shards not handed over yet from its old group.
fn unlearn(m: &mut Member, s: usize, e: &Entry) {
    if m.moved_from.is_some() && m.handed.get(s) == Some(&false) {
        return;
    }
    if e.exported.is_none() || (e.path_id == 0 && is_own(e, m.id) && may_hold_another(m, e)) {
        if let Some(missed) = m.missed.get_mut(s) {
            missed.insert(e.key());
        }
    }
}

impl Entry {
    /// An announcement of `source`'s path, where what the group advertised before is not
    /// known (a table dump, an Add-Path change): its source, if a member, may hold another.
    pub fn announce(prefix: Prefix, exported: Arc<Exported>, source: u32, path_id: u32) -> Entry {
        Entry {
            prefix,
            exported: Some(exported),
            source,
            path_id,
            before: ANY_BEFORE,
        }
    }

    pub fn withdraw(prefix: Prefix) -> Entry {
        Entry::withdraw_path((prefix, 0))
    }

    pub fn withdraw_path((prefix, path_id): PathKey) -> Entry {
        Entry {
            prefix,
            exported: None,
            source: u32::MAX,
            path_id,
            before: ANY_BEFORE,
        }
    }

    pub fn key(&self) -> PathKey {
        (self.prefix, self.path_id)
    }

    /// Whether the group advertised another peer's path for the prefix before, which the
    /// source of this one may hold: sent a withdrawal instead of its own path.
    fn source_holds_another(&self) -> bool {
        self.before != NOTHING_BEFORE && self.before != self.source
    }
}

/// Past this many queued octets a member is split from its group's live stream (default).
pub const HIGH_WATER: usize = 16 << 20;
/// The smallest high-water mark accepted: four UPDATEs of the extended size (RFC 8654).
pub const MIN_HIGH_WATER: usize = 4 * 65535;

/// A group encodes the changes it holds once some member following them has fewer octets
/// than this waiting to leave (about sixteen full UPDATEs): while every member's socket is
/// busy, later changes join or replace held ones instead of queueing behind them, so a
/// receiver that is behind gets fewer, fuller UPDATEs and one that keeps up gets each change
/// at once.
pub const PACK_BELOW: usize = 64 << 10;

/// When a member is split from its group (its write queue holds more than `high_water`
/// octets) and when it catches up (below `low_water`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteQueueLimits {
    pub high_water: usize,
    pub low_water: usize,
}

impl WriteQueueLimits {
    /// A high-water mark (at least [`MIN_HIGH_WATER`]); the low-water mark is a sixteenth of
    /// it, so a member that catches up has room for a good part of a dump before it could
    /// be split again.
    pub fn new(high_water: usize) -> WriteQueueLimits {
        let high_water = high_water.max(MIN_HIGH_WATER);
        WriteQueueLimits {
            high_water,
            low_water: high_water / 16,
        }
    }
}

impl Default for WriteQueueLimits {
    fn default() -> Self {
        WriteQueueLimits::new(HIGH_WATER)
    }
}

/// Counters of a group, for operators (Junos `show bgp group`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub updates_built: u64,
    pub bytes_built: u64,
    pub prefixes_advertised: u64,
    pub prefixes_withdrawn: u64,
}

/// Counters of a member (Junos `show bgp neighbor`: "Write Queue Blocks", "Peer designated
/// a slow writer").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberStats {
    pub bytes_sent: u64,
    /// Batches held back because the member's queue was past the high-water mark.
    pub write_queue_blocks: u64,
    /// Times it was designated a slow writer, and the last time.
    pub slow_writer: u64,
    pub last_slow_writer: Option<std::time::SystemTime>,
    pub catch_ups: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Receiving a table dump (initial, refresh or catch-up) under this token.
    Dumping {
        token: u64,
        remaining: usize,
    },
    InStep,
    /// Split off; waiting for its queue to drain.
    Slow,
}

struct Member {
    id: MemberId,
    sink: Box<dyn Sink>,
    /// The group's high-water mark, here so that [`send`] needs only the member.
    high_water: usize,
    /// Per shard: whether the member gets that shard's live changes.
    live: Vec<bool>,
    /// Per shard: prefixes withdrawn while the member was split off.
    missed: Vec<HashSet<PathKey>>,
    state: State,
    /// End-of-RIB goes out when the dump of this token completes.
    eor_token: Option<u64>,
    /// Enhanced route refresh (RFC 7313): the EoRR to send when the refresh dump of this
    /// token completes.
    eorr: Option<(u64, Family)>,
    stats: MemberStats,
    /// Moving to another group: per shard, whether that shard has handed the member over
    /// (it follows only the others here, and is never split off meanwhile).
    moving: Option<Vec<bool>>,
    /// Moved here from this group, until every shard has handed it over.
    moved_from: Option<GroupId>,
    /// Per shard, whether it has handed the member over from the old group: until then the
    /// old group sends it that shard's changes, so it remembers none missed here.
    handed: Vec<bool>,
    /// The spec of the group it moved from, until a dump here completes: each dump to it
    /// also withdraws what that spec exported and this one does not.
    previous: Option<Previous>,
}

/// What a member moved from: the specs whose exports it may still hold (several when it
/// moved again before a dump completed), and whether it was in step with the one it moved
/// from (then a dump need send only what differs from it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Previous {
    pub specs: Vec<Arc<GroupSpec>>,
    pub in_step: bool,
}

impl Previous {
    /// The same spec, for a dump that cannot rely on the member being in step with it.
    pub fn full(self) -> Previous {
        Previous {
            in_step: false,
            ..self
        }
    }
}

/// What a member takes along when it moves to another group of the same update thread.
pub struct Moving {
    id: MemberId,
    sink: Box<dyn Sink>,
    /// Specs before the group's own whose exports it may hold.
    earlier: Vec<Arc<GroupSpec>>,
    in_step: bool,
    eor: bool,
    eorr: Option<Family>,
    stats: MemberStats,
}

/// What a group asks its update thread to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpRequest {
    pub member: MemberId,
    pub token: u64,
    /// A member that moved here from another spec: the shards also withdraw what that spec
    /// exported and this one does not.
    pub previous: Option<Previous>,
}

pub struct UpdateGroup {
    pub id: GroupId,
    pub spec: Arc<GroupSpec>,
    builder: UpdateBuilder,
    shards: usize,
    limits: WriteQueueLimits,
    members: Vec<Member>,
    next_token: u64,
    pub stats: GroupStats,
    buf: Vec<u8>,
    /// Table dump parts of every shard, encoded together ([`UpdateGroup::dump`]).
    held_dump: Option<HeldDump>,
}

impl UpdateGroup {
    pub fn new(
        id: GroupId,
        spec: Arc<GroupSpec>,
        shards: usize,
        limits: WriteQueueLimits,
    ) -> UpdateGroup {
        UpdateGroup {
            id,
            builder: UpdateBuilder::new(spec.params),
            spec,
            shards: shards.max(1),
            limits,
            members: Vec::new(),
            next_token: 1,
            stats: GroupStats::default(),
            buf: Vec::new(),
            held_dump: None,
        }
    }

    pub fn members(&self) -> impl Iterator<Item = (MemberId, &MemberStats)> {
        self.members.iter().map(|m| (m.id, &m.stats))
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether a table dump to any member is under way (parts held or members waiting for
    /// a shard's walk).
    pub fn dumping(&self) -> bool {
        self.held_dump.is_some()
            || self
                .members
                .iter()
                .any(|m| matches!(m.state, State::Dumping { .. }))
    }

    /// Whether live changes held for the group should be encoded now: a member following
    /// the live stream can take them (see [`PACK_BELOW`]), or none follows it (what is
    /// withdrawn meanwhile is remembered per member, so holding would gain nothing).
    pub fn ready(&self) -> bool {
        let mut following = self.following().peekable();
        // Our own queue first: asking the kernel is a system call, per member.
        following.peek().is_none() || following.any(can_take_more)
    }

    /// Whether every member following the live stream can take more now (none is behind):
    /// only then may the group's changes be held long, since a part goes to a member whole.
    pub fn in_step(&self) -> bool {
        self.following().all(can_take_more)
    }

    /// The members following the live stream of some shard (not split off).
    fn following(&self) -> impl Iterator<Item = &Member> {
        self.members
            .iter()
            .filter(|m| m.state != State::Slow && m.live.iter().any(|l| *l))
    }

    /// A new member; it gets nothing until the shards dump the table to it under `token`
    /// (the caller asks them), then End-of-RIB.
    pub fn join(&mut self, id: MemberId, sink: Box<dyn Sink>, token: u64) {
        self.send_held_dump();
        self.leave(id);
        self.members.push(Member {
            id,
            sink,
            high_water: self.limits.high_water,
            live: vec![false; self.shards],
            missed: vec![HashSet::new(); self.shards],
            state: State::Dumping {
                token,
                remaining: self.shards,
            },
            eor_token: Some(token),
            eorr: None,
            stats: MemberStats::default(),
            moving: None,
            moved_from: None,
            handed: Vec::new(),
            previous: None,
        });
    }

    /// A member starts moving to another group of this update thread (its export policy
    /// changed): it stays here, following the shards it follows, until each hands it over
    /// ([`UpdateGroup::hand_over`]). What it takes along: its writer, whether it is in step,
    /// and the End-of-RIB or EoRR it still waits for.
    pub fn start_move(&mut self, id: MemberId) -> Option<Moving> {
        self.send_held_dump();
        let shards = self.shards;
        let m = self
            .members
            .iter_mut()
            .find(|m| m.id == id && m.moving.is_none())?;
        m.moving = Some(vec![false; shards]);
        Some(Moving {
            id,
            sink: m.sink.duplicate(),
            earlier: m.previous.take().map(|p| p.specs).unwrap_or_default(),
            in_step: m.state == State::InStep,
            eor: m.eor_token.take().is_some(),
            eorr: m.eorr.take().map(|(_, f)| f),
            stats: std::mem::take(&mut m.stats),
        })
    }

    /// Shard `shard` now sends a moving member its changes in the new group: the member stops
    /// following it here. Returns the withdrawals it missed from that shard, for the new
    /// group to send; once every shard has handed it over, it leaves.
    pub fn hand_over(&mut self, id: MemberId, shard: usize) -> HashSet<PathKey> {
        let Some(m) = self
            .members
            .iter_mut()
            .find(|m| m.id == id && m.moving.is_some())
        else {
            return HashSet::new();
        };
        if let Some(l) = m.live.get_mut(shard) {
            *l = false;
        }
        let missed = m
            .missed
            .get_mut(shard)
            .map(std::mem::take)
            .unwrap_or_default();
        if let Some(done) = m.moving.as_mut().and_then(|v| v.get_mut(shard)) {
            *done = true;
        }
        if m.moving.as_ref().is_some_and(|v| v.iter().all(|d| *d)) {
            self.members.retain(|x| x.id != id || x.moving.is_none());
        }
        missed
    }

    /// Every shard's hand-over at once, with what the member missed from each (a re-shard:
    /// the shards' walks are gone, and the new group's dump starts again).
    pub fn hand_over_all(&mut self, id: MemberId) -> Vec<HashSet<PathKey>> {
        (0..self.shards).map(|s| self.hand_over(id, s)).collect()
    }

    /// A member moving in from group `from`: it gets a table dump under a new token, which
    /// also withdraws what `previous` exported (only what differs when it was in step).
    pub fn join_moved(
        &mut self,
        m: Moving,
        from: GroupId,
        previous: Arc<GroupSpec>,
    ) -> DumpRequest {
        self.send_held_dump();
        self.leave(m.id);
        let token = self.next_token;
        self.next_token += 1;
        let mut specs = m.earlier;
        specs.push(previous);
        let prev = Previous {
            in_step: m.in_step && specs.len() == 1,
            specs,
        };
        self.members.push(Member {
            id: m.id,
            sink: m.sink,
            high_water: self.limits.high_water,
            live: vec![false; self.shards],
            missed: vec![HashSet::new(); self.shards],
            state: State::Dumping {
                token,
                remaining: self.shards,
            },
            eor_token: m.eor.then_some(token),
            eorr: m.eorr.map(|f| (token, f)),
            stats: m.stats,
            moving: None,
            moved_from: Some(from),
            handed: vec![false; self.shards],
            previous: Some(prev.clone()),
        });
        DumpRequest {
            member: m.id,
            token,
            previous: Some(prev),
        }
    }

    /// The members still moving in from another group.
    pub fn moving_in(&self) -> Vec<MemberId> {
        self.members
            .iter()
            .filter(|m| m.moved_from.is_some())
            .map(|m| m.id)
            .collect()
    }

    /// The group a member is moving in from, while some shard has not handed it over.
    pub fn moved_from(&self, id: MemberId) -> Option<GroupId> {
        self.members
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.moved_from)
    }

    /// What a shard (or, `None`, every shard) of the old group handed over: withdrawals to
    /// send with this group's dump. `done`: every shard has.
    pub fn moved_in(
        &mut self,
        id: MemberId,
        shard: Option<usize>,
        missed: Vec<HashSet<PathKey>>,
        done: bool,
    ) {
        let Some(m) = self.members.iter_mut().find(|m| m.id == id) else {
            return;
        };
        match shard {
            Some(s) => {
                if let (Some(into), Some(set)) = (m.missed.get_mut(s), missed.into_iter().next()) {
                    into.extend(set);
                }
                if let Some(h) = m.handed.get_mut(s) {
                    *h = true;
                }
            }
            None => {
                for (into, set) in m.missed.iter_mut().zip(missed) {
                    into.extend(set);
                }
                m.handed.iter_mut().for_each(|h| *h = true);
            }
        }
        if done {
            m.moved_from = None;
        }
    }

    pub fn leave(&mut self, id: MemberId) {
        self.send_held_dump();
        self.members
            .retain(|m| m.id.peer != id.peer || m.id.epoch > id.epoch);
    }

    /// Whether a member of this id is here (moving out or not).
    pub fn has(&self, id: MemberId) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    /// A ROUTE-REFRESH from a member (RFC 2918): the table again, from every shard. With
    /// `enhanced` (the member negotiated enhanced route refresh, RFC 7313 section 4), the
    /// dump is framed by a BoRR now and an EoRR for that family when it completes, so the
    /// member can purge what it did not get again.
    pub fn refresh(&mut self, id: MemberId, enhanced: Option<Family>) -> Option<DumpRequest> {
        self.send_held_dump();
        let token = self.next_token;
        let m = self.members.iter_mut().find(|m| m.id == id)?;
        self.next_token += 1;
        if m.state == State::Slow {
            // It catches up anyway once it drains.
            return None;
        }
        m.eorr = None;
        if let Some(f) = enhanced {
            if send(m, route_refresh(f, RouteRefresh::BORR)) {
                m.eorr = Some((token, f));
            }
        }
        m.state = State::Dumping {
            token,
            remaining: self.shards,
        };
        Some(DumpRequest {
            member: id,
            token,
            previous: m.previous.clone().map(Previous::full),
        })
    }

    /// Live changes from a shard: encoded once, the same bytes to every member in step
    /// (a member that is the source of some of the paths gets them without those, and
    /// their prefixes withdrawn instead).
    pub fn live(&mut self, shard: usize, entries: &[Entry]) {
        self.live_batches(&[(shard, entries)]);
    }

    /// Live changes from several shards (or several batches of one), in the order they
    /// came: when every member follows all of those shards alike, they are packed together
    /// (a prefix changed twice goes out once, as it ended), so the UPDATEs a member gets do
    /// not depend on how many shards the table is spread over. Otherwise each batch goes
    /// as it came.
    pub fn live_batches(&mut self, batches: &[(usize, &[Entry])]) {
        let Some(&(first, _)) = batches.first() else {
            return;
        };
        // A dump part held was decided before these changes: it goes first. The walks'
        // places are kept, so the rest of the dump still merges.
        self.send_held_parts();
        let shards: Vec<usize> = batches.iter().map(|(s, _)| *s).collect();
        if batches.len() == 1 || !self.alike(&shards) {
            for (shard, entries) in batches {
                self.live_merged(*shard, Parts::Batches(&[(*shard, entries)]), entries);
            }
            return;
        }
        let mut merged = Merged::default();
        for (_, entries) in batches {
            merged.extend(entries.iter().cloned());
        }
        self.live_merged(first, Parts::Batches(batches), &merged.into_entries());
    }

    /// Live changes from `shards` already merged as they came ([`Merged`]: each path once,
    /// as it ended): sent together when every member follows those shards alike, otherwise
    /// each shard's part on its own.
    pub fn live_distinct(&mut self, shards: &[usize], entries: &[Entry]) {
        let Some(&first) = shards.first() else {
            return;
        };
        self.send_held_parts();
        if shards.len() == 1 || self.alike(shards) {
            self.live_merged(first, Parts::Merged, entries);
            return;
        }
        let n = self.shards;
        for &s in shards {
            let part: Vec<Entry> = entries
                .iter()
                .filter(|e| shard_of(&e.prefix, n) == s)
                .cloned()
                .collect();
            self.live_merged(s, Parts::Merged, &part);
        }
    }

    /// Whether every member follows all of `shards` alike (all or none of them).
    fn alike(&self, shards: &[usize]) -> bool {
        let Some(&first) = shards.first() else {
            return true;
        };
        self.members.iter().all(|m| {
            let f = m.live.get(first);
            shards.iter().all(|s| m.live.get(*s) == f)
        })
    }

    /// Sends `entries` to the members following `shard` (and, by the caller's check, every
    /// shard of `batches`); the others remember, per shard, what they must unlearn.
    fn live_merged(&mut self, shard: usize, parts: Parts<'_>, entries: &[Entry]) {
        // The members following this shard whose own paths are in it: each gets the shared
        // encoding without its paths' span, and those prefixes withdrawn instead (it may
        // hold another path we sent it before).
        let shards = self.shards;
        let following = |m: &Member| m.live.get(shard) == Some(&true);
        let mut apart = sources(entries);
        apart.retain(|p| self.members.iter().any(|m| m.id.peer == *p && following(m)));
        let Some(encoded) = self.encode_apart(entries, &apart) else {
            return;
        };
        tracing::debug!(group = %self.spec.name, shard, entries = entries.len(), octets = encoded.len(), members = self.members.len(), "live changes");
        // Each source member's prefixes where it may hold another path of ours, found in
        // one pass over the batch. With Add-Path a member holds each path under its own
        // identifier, and never had one of its own paths': there is nothing to withdraw.
        let moved: HashSet<u32> = self
            .members
            .iter()
            .filter(|m| m.previous.is_some())
            .map(|m| m.id.peer)
            .collect();
        let mut by_source: HashMap<u32, Vec<Entry>> = HashMap::new();
        for e in entries
            .iter()
            .filter(|e| e.exported.is_some() && e.path_id == 0)
        {
            if apart.contains(&e.source) && (e.source_holds_another() || moved.contains(&e.source))
            {
                by_source
                    .entry(e.source)
                    .or_default()
                    .push(Entry::withdraw(e.prefix));
            }
        }
        let own: Vec<(u32, Option<Outgoing>)> = by_source
            .into_iter()
            .map(|(p, withdrawn)| (p, self.encode(&withdrawn)))
            .collect();
        for m in &mut self.members {
            if following(m) {
                let mut pieces: Vec<Outgoing> = own
                    .iter()
                    .filter(|(p, _)| *p == m.id.peer)
                    .filter_map(|(_, w)| w.clone())
                    .collect();
                pieces.extend(encoded.for_member(m.id.peer));
                if send_all(m, pieces) {
                    continue;
                }
            }
            // Not following this shard yet, or split off: remember what it must unlearn
            // (withdrawing a prefix it never had is harmless, RFC 4271 section 9).
            match parts {
                Parts::Batches(batches) => {
                    for (s, batch) in batches {
                        for e in batch.iter() {
                            unlearn(m, *s, e);
                        }
                    }
                }
                Parts::Merged => {
                    for e in entries {
                        unlearn(m, shard_of(&e.prefix, shards), e);
                    }
                }
            }
        }
    }

    fn find(&mut self, member: MemberId, token: u64) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| {
            m.id == member
                && m.moving.is_none()
                && matches!(m.state, State::Dumping { token: t, .. } if t == token)
        })
    }

    fn send_to(&mut self, member: MemberId, entries: &[Entry]) -> bool {
        let Some(bytes) = self.encode(entries) else {
            return true;
        };
        match self.members.iter_mut().find(|m| m.id == member) {
            Some(m) => send(m, bytes),
            None => false,
        }
    }

    /// The number of shards changed (a re-shard, with every shard's changes delivered
    /// before it). Members in step stay in step: the shards' tables moved whole, so what
    /// they were sent is still what the shards report. The withdrawals a member missed are
    /// sorted again by the shard that now owns each prefix. A member whose table dump was
    /// under way gets a new one from every shard under a new token (the old shards' walks
    /// are gone); the dump requests to deliver are returned. A split-off member stays split
    /// off and catches up as usual.
    pub fn reshard(&mut self, shards: usize) -> Vec<DumpRequest> {
        self.send_held_dump();
        let shards = shards.max(1);
        self.shards = shards;
        let mut out = Vec::new();
        for m in &mut self.members {
            let mut missed = vec![HashSet::new(); shards];
            for p in m.missed.drain(..).flatten() {
                if let Some(s) = missed.get_mut(shard_of(&p.0, shards)) {
                    s.insert(p);
                }
            }
            m.missed = missed;
            m.live = vec![m.state == State::InStep; shards];
            if let State::Dumping { .. } = m.state {
                let token = self.next_token;
                self.next_token += 1;
                m.state = State::Dumping {
                    token,
                    remaining: shards,
                };
                // An enhanced route refresh still ends with its EoRR, after the new dump.
                m.eorr = m.eorr.map(|(_, f)| (token, f));
                if m.eor_token.is_some() {
                    m.eor_token = Some(token);
                }
                out.push(DumpRequest {
                    member: m.id,
                    token,
                    previous: m.previous.clone().map(Previous::full),
                });
            }
        }
        out
    }

    /// Split members whose queue has drained: each needs a table dump under a new token.
    pub fn catch_ups(&mut self) -> Vec<DumpRequest> {
        let due = |m: &Member| {
            m.state == State::Slow && m.moving.is_none() && m.sink.queued() < self.limits.low_water
        };
        if !self.members.iter().any(due) {
            return Vec::new();
        }
        self.send_held_dump();
        let mut out = Vec::new();
        for m in &mut self.members {
            if m.state == State::Slow
                && m.moving.is_none()
                && m.sink.queued() < self.limits.low_water
            {
                let token = self.next_token;
                self.next_token += 1;
                m.state = State::Dumping {
                    token,
                    remaining: self.shards,
                };
                m.stats.catch_ups += 1;
                out.push(DumpRequest {
                    member: m.id,
                    token,
                    previous: m.previous.clone().map(Previous::full),
                });
            }
        }
        out
    }
}

/// A ROUTE-REFRESH message of this subtype (RFC 7313 BoRR or EoRR) for a family.
fn route_refresh(f: Family, subtype: u8) -> Outgoing {
    let bytes = Bytes::from(
        RouteRefresh {
            afi: f.afi(),
            subtype,
            safi: f.safi(),
        }
        .encode(),
    );
    Outgoing {
        bytes,
        messages: 1,
        route_refresh: true,
    }
}

/// The peers whose paths the entries advertise.
fn sources(entries: &[Entry]) -> HashSet<u32> {
    entries
        .iter()
        .filter(|e| e.exported.is_some())
        .map(|e| e.source)
        .collect()
}

/// Whether a member has little waiting to leave, in our queue and the kernel's.
fn can_take_more(m: &Member) -> bool {
    m.sink.queued() < PACK_BELOW && m.sink.unsent() < PACK_BELOW
}

/// Whether a member that is the source of `e` may hold another path of ours for its
/// prefix: the group advertised one before, or the member moved in and may still hold what
/// its old group's spec exported. Otherwise a withdrawal would name a prefix it never had
/// (harmless, RFC 4271 section 9, but an UPDATE for nothing; BIRD sends none).
fn may_hold_another(m: &Member, e: &Entry) -> bool {
    e.source_holds_another() || m.previous.is_some()
}

/// Whether an entry advertises a path learned from this member.
fn is_own(e: &Entry, m: MemberId) -> bool {
    e.exported.is_some() && e.source == m.peer
}

/// Hands bytes to a member, or splits it off when its queue is past the high-water mark;
/// true if the bytes went out.
fn send(m: &mut Member, out: Outgoing) -> bool {
    send_all(m, vec![out])
}

/// Hands pieces of one batch to a member, all or none ([`send`]).
fn send_all(m: &mut Member, pieces: Vec<Outgoing>) -> bool {
    if pieces.is_empty() {
        return true;
    }
    if m.state == State::Slow {
        m.stats.write_queue_blocks += 1;
        return false;
    }
    // A member receiving a table dump takes it all: the dump is bounded by the table, and
    // splitting it off would only restart the dump. A member moving out is not split off
    // either: its new group's dump follows at once.
    if m.sink.queued() > m.high_water
        && !matches!(m.state, State::Dumping { .. })
        && m.moving.is_none()
    {
        m.stats.write_queue_blocks += 1;
        m.stats.slow_writer += 1;
        m.stats.last_slow_writer = Some(std::time::SystemTime::now());
        tracing::info!(
            neighbor = m.sink.neighbor(),
            queued = m.sink.queued(),
            high_water = m.high_water,
            "peer designated a slow writer: split from its update group"
        );
        m.state = State::Slow;
        m.live.iter_mut().for_each(|l| *l = false);
        // A dump that did not finish restarts from scratch (End-of-RIB still to come if it
        // was the first).
        return false;
    }
    let mut sent = true;
    for out in pieces {
        m.stats.bytes_sent += out.bytes.len() as u64;
        sent &= m.sink.send(out);
    }
    sent
}
