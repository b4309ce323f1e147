//! An update thread: owns the update groups given to it, packs each shard's changes into
//! UPDATEs once per group and fans the bytes out; asks the shards for table dumps when a
//! member joins late, asks for a refresh, or catches up after being a slow writer.
//! It never blocks on a shard, and never sends a member anything out of the order the
//! shards decided it in.

use super::give_back;
use super::{
    Arrivals, GroupReport, Handover, ToShard, ToUpdate, UpdateThreadStats, HELD_ENTRIES,
    HELD_WHILE_ARRIVING,
};
use crate::telemetry::{register, Histogram, QueueStats, Telemetry, ThreadKind};
use ribshard_adjout::{
    DumpRequest, Entry, GroupId, MemberId, Merged, UpdateGroup, WriteQueueLimits,
};
use ribshard_rib::PeerIndex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The shards' channels and their queues' accounting, where an update thread asks for dumps.
pub(super) type ShardChannels = (Vec<mpsc::Sender<ToShard>>, Vec<Arc<QueueStats>>);

pub(super) struct UpdateWorker {
    index: usize,
    shards: usize,
    limits: WriteQueueLimits,
    groups: BTreeMap<GroupId, UpdateGroup>,
    /// Where dump requests go (with the queues' accounting); `None` when this worker runs
    /// inside the single shard, which takes them from [`UpdateWorker::handle`]'s result.
    shard_tx: Option<ShardChannels>,
    /// Dump requests that found a shard queue full, retried on the next tick: an update
    /// thread never blocks on a shard (shards block on update threads).
    unsent: VecDeque<(usize, GroupId, DumpRequest)>,
    /// The deepest its queue has been, in messages.
    pub(super) queue_high_water: usize,
    telemetry: Arc<Telemetry>,
    /// Each group's latency histogram (receipt to written).
    written: HashMap<GroupId, Arc<Histogram>>,
    /// Markers seen, by (peer, token): how many shards have passed them.
    markers: HashMap<(PeerIndex, u64), usize>,
    /// Table dumps carrying routes no one was sent before (after the start-up deferral),
    /// by (group, member, token): the shards whose part has ended, and the oldest receipt.
    first_dumps: HashMap<(GroupId, MemberId, u64), (usize, Option<Instant>)>,
    /// Live changes not yet encoded, per group, in arrival order, with the oldest receipt
    /// time behind them. A group's are packed together once the queue runs dry and the
    /// group is ready (a member's socket can take more, [`UpdateGroup::ready`]), before any
    /// other message for the group, and regardless past [`HELD_ENTRIES`]: so a group encodes
    /// what all shards sent at once, and a busy receiver's changes merge while it is busy.
    held: BTreeMap<GroupId, Held>,
    held_entries: usize,
    /// Changes held since a part last went out: past [`HELD_ENTRIES`] the next part of
    /// every group's goes whether its receivers can take it or not (changes come faster
    /// than they leave), which bounds what is held.
    fresh: usize,
    /// When the oldest change held now arrived: while routes keep arriving
    /// ([`Arrivals::busy`]) changes wait for them, up to [`Arrivals::max_hold`].
    held_since: Option<Instant>,
    arrivals: Arc<Arrivals>,
    /// More messages wait in its own queue behind the one in hand: the shards' changes
    /// still arriving here, after every input upstream has lowered its flag.
    behind: bool,
    /// Whether every member of its groups was in step ([`UpdateGroup::in_step`]), and when
    /// that was asked: a question to each member's socket, asked at most every
    /// [`IN_STEP_AGE`] while changes are held.
    in_step: Option<(Instant, bool)>,
    /// Moves of a member still moving in from its previous group, in order: each goes once
    /// every shard has handed the member over (a member is in two groups at most).
    deferred_moves: Vec<Move>,
    /// Table dump entries handled since memory was last given back ([`give_back`]).
    dumped: usize,
}

/// A member moving from `group` to `to` (made with `spec` if new).
struct Move {
    group: GroupId,
    to: GroupId,
    spec: Arc<ribshard_rib::GroupSpec>,
    member: MemberId,
}

/// A group's live changes held: merged as they come (a path changed again replaces its
/// change in place, and what it was is freed), so holding costs one entry per path.
#[derive(Default)]
struct Held {
    changes: Merged,
    /// The shards they came from, in order of their first change.
    shards: Vec<usize>,
    /// The oldest receipt behind them (for the written-latency histogram).
    received: Option<Instant>,
}

/// How often held changes look again at their receivers' sockets.
pub(super) const HOLD_POLL: Duration = Duration::from_millis(1);

/// How long whether every member is in step is taken as known: with a thousand members it
/// is a thousand questions to the kernel, and held changes look every [`HOLD_POLL`].
const IN_STEP_AGE: Duration = Duration::from_millis(10);

impl UpdateWorker {
    pub(super) fn new(
        index: usize,
        shards: usize,
        limits: WriteQueueLimits,
        shard_tx: Option<ShardChannels>,
        telemetry: Arc<Telemetry>,
        arrivals: Arc<Arrivals>,
    ) -> UpdateWorker {
        UpdateWorker {
            index,
            shards,
            limits,
            groups: BTreeMap::new(),
            shard_tx,
            unsent: VecDeque::new(),
            queue_high_water: 0,
            telemetry,
            written: HashMap::new(),
            markers: HashMap::new(),
            first_dumps: HashMap::new(),
            held: BTreeMap::new(),
            held_entries: 0,
            fresh: 0,
            held_since: None,
            arrivals,
            behind: false,
            in_step: None,
            deferred_moves: Vec::new(),
            dumped: 0,
        }
    }

    /// After a shard's dump end: once no group of this worker is dumping, the entries of
    /// the dumps it took (made by the shards, freed here) are free pages in the shards'
    /// arenas, under whatever comes next (a peer's withdrawals), so they go back.
    fn dumps_ended(&mut self) {
        if self.dumped >= give_back::AFTER_ENTRIES && !self.groups.values().any(|g| g.dumping()) {
            self.dumped = 0;
            give_back::give_back_after_work();
        }
    }

    /// Moves a member between two of its groups (see [`ToUpdate::Move`]), or defers the
    /// move while the member is still moving into `group`; the new group's dump request.
    fn start_move(&mut self, mv: Move) -> Option<(GroupId, DumpRequest)> {
        let still_moving = self
            .groups
            .get(&mv.group)
            .and_then(|g| g.moved_from(mv.member))
            .is_some();
        if still_moving {
            self.deferred_moves.push(mv);
            return None;
        }
        let Move {
            group,
            to,
            spec,
            member,
        } = mv;
        let (m, previous) = self.groups.get_mut(&group).and_then(|g| {
            let previous = g.spec.clone();
            g.start_move(member).map(|m| (m, previous))
        })?;
        let (shards, limits) = (self.shards, self.limits);
        let r = self
            .groups
            .entry(to)
            .or_insert_with(|| UpdateGroup::new(to, spec, shards, limits))
            .join_moved(m, group, previous);
        Some((to, r))
    }

    /// The member's deferred moves that can go now, in order.
    fn moves_due(&mut self, member: MemberId) -> Vec<(GroupId, DumpRequest)> {
        let mut out = Vec::new();
        while let Some(i) = self.deferred_moves.iter().position(|d| d.member == member) {
            let busy = self
                .groups
                .get(&self.deferred_moves[i].group)
                .and_then(|g| g.moved_from(member))
                .is_some();
            if busy {
                break;
            }
            let mv = self.deferred_moves.remove(i);
            out.extend(self.start_move(mv));
        }
        out
    }

    /// Whether live changes are held for some group.
    pub(super) fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Encodes the live changes held: all of them for every group (`all`: what follows must
    /// come after them), or the next part of each group's whose receivers can take it.
    pub(super) fn pack_held(&mut self, all: bool) {
        if all {
            if self.holding() {
                tracing::debug!(
                    held = self.held_entries,
                    "held live changes go out before a message that must follow them"
                );
            }
            let ids: Vec<GroupId> = self.held.keys().copied().collect();
            for id in ids {
                self.pack_group(id);
            }
        } else {
            self.pack_due(false);
        }
    }

    /// Encodes the next part ([`HELD_ENTRIES`] changes at most) of each group's held changes
    /// whose receivers can take it, or (`forced`, held changes grow faster than they leave)
    /// of every group's. Not while routes are still arriving (a prefix's better path may
    /// be among them), for up to [`Arrivals::max_hold`], unless forced; and forced only
    /// past [`HELD_WHILE_ARRIVING`] while every member is in step.
    ///
    /// A part goes to each member whole, so a member behind takes at most one past its
    /// high-water mark before it is split off; the next part waits for a member in step to
    /// take it, so one in step is not split off by a backlog handed at once.
    fn pack_due(&mut self, forced: bool) {
        let arriving = (self.behind || self.arrivals.busy())
            && self
                .held_since
                .is_some_and(|t| t.elapsed() < self.arrivals.max_hold());
        if arriving && (!forced || (self.held_entries < HELD_WHILE_ARRIVING && self.all_in_step()))
        {
            return;
        }
        let groups = &self.groups;
        let due: Vec<GroupId> = self
            .held
            .keys()
            .filter(|id| forced || groups.get(*id).is_none_or(UpdateGroup::ready))
            .copied()
            .collect();
        if due.is_empty() {
            return;
        }
        tracing::debug!(
            forced,
            arriving,
            held = self.held_entries,
            fresh = self.fresh,
            groups = due.len(),
            "held live changes go out"
        );
        for id in due {
            self.pack_part(id);
        }
        // What is held now waits for a member that can take it; only changes coming
        // faster than it goes force the next part.
        self.fresh = 0;
    }

    /// Whether every member of its groups is in step, as of at most [`IN_STEP_AGE`] ago.
    fn all_in_step(&mut self) -> bool {
        if let Some((at, yes)) = self.in_step {
            if at.elapsed() < IN_STEP_AGE {
                return yes;
            }
        }
        let yes = self.groups.values().all(UpdateGroup::in_step);
        self.in_step = Some((Instant::now(), yes));
        yes
    }

    /// Encodes the live changes held for one group, together.
    fn pack_group(&mut self, group: GroupId) {
        if let Some(h) = self.held.remove(&group) {
            if self.held.is_empty() {
                self.held_since = None;
            }
            let shards = h.shards;
            self.send_live(group, &shards, h.changes.into_entries(), h.received);
        }
    }

    /// Encodes [`HELD_ENTRIES`] of the live changes held for one group (whole attribute sets,
    /// [`Merged::take_part`]); the rest wait.
    fn pack_part(&mut self, group: GroupId) {
        let Some(h) = self.held.get_mut(&group) else {
            return;
        };
        if h.changes.len() <= HELD_ENTRIES {
            self.pack_group(group);
            return;
        }
        let part = h.changes.take_part(HELD_ENTRIES);
        let shards = h.shards.clone();
        // The oldest receipt went with the first part; later ones count from their own.
        let received = h.received.take();
        self.send_live(group, &shards, part, received);
    }

    fn send_live(
        &mut self,
        group: GroupId,
        shards: &[usize],
        changes: Vec<Entry>,
        received: Option<Instant>,
    ) {
        self.held_entries = self.held_entries.saturating_sub(changes.len());
        self.fresh = self.fresh.saturating_sub(changes.len());
        if let Some(g) = self.groups.get_mut(&group) {
            g.live_distinct(shards, &changes);
            if let Some(at) = received {
                let telemetry = &self.telemetry;
                self.written
                    .entry(group)
                    .or_insert_with(|| telemetry.written(group, &g.spec.name))
                    .observe(at.elapsed());
            }
        }
    }

    /// A shard's part of a dump has ended; once every shard's has, a dump that carried
    /// routes first sent by it (learned during the start-up deferral) counts in the group's
    /// receipt-to-written histogram, from the oldest of them, once per member it went to.
    fn first_dump_ended(
        &mut self,
        group: GroupId,
        member: MemberId,
        token: u64,
        received: Option<Instant>,
    ) {
        let key = (group, member, token);
        let (seen, oldest) = self.first_dumps.entry(key).or_insert((0, None));
        *seen += 1;
        if let Some(r) = received {
            *oldest = Some(oldest.map_or(r, |o| o.min(r)));
        }
        if *seen < self.shards {
            return;
        }
        let oldest = *oldest;
        self.first_dumps.remove(&key);
        // No shard had routes waiting: an ordinary dump, not a delayed first send.
        let Some(oldest) = oldest else { return };
        if let Some(g) = self.groups.get(&group) {
            let telemetry = &self.telemetry;
            self.written
                .entry(group)
                .or_insert_with(|| telemetry.written(group, &g.spec.name))
                .observe(oldest.elapsed());
        }
    }

    pub(super) fn index(&self) -> usize {
        self.index
    }

    /// Takes over a group (a re-shard).
    pub(super) fn adopt(&mut self, g: UpdateGroup) {
        self.groups.insert(g.id, g);
    }

    /// A shard (or, `None`, every shard at once) starts a moved member's dump in `group`:
    /// its old group stops sending it that shard's changes first, and hands over what it
    /// missed from it.
    fn hand_over(&mut self, group: GroupId, member: MemberId, shard: Option<usize>) {
        let Some(from) = self.groups.get(&group).and_then(|g| g.moved_from(member)) else {
            return;
        };
        self.pack_group(from);
        let (missed, done) = match self.groups.get_mut(&from) {
            Some(old) => {
                old.send_held_dump();
                let missed = match shard {
                    Some(s) => vec![old.hand_over(member, s)],
                    None => old.hand_over_all(member),
                };
                (missed, !old.has(member))
            }
            None => (Vec::new(), true),
        };
        if self.groups.get(&from).is_some_and(UpdateGroup::is_empty) {
            self.groups.remove(&from);
        }
        if let Some(g) = self.groups.get_mut(&group) {
            g.moved_in(member, shard, missed, done);
        }
    }

    /// Its groups, to hand over (a re-shard). Dump requests not sent yet are dropped: the
    /// re-shard starts those dumps again. Members moving between two groups finish moving
    /// (the groups may go to different threads), with what they missed in the old one.
    pub(super) fn into_groups(mut self) -> Vec<UpdateGroup> {
        self.pack_held(true);
        // Moves finish (and moves waiting for them start and finish) here: the dumps they
        // need are asked of the new shards by the groups themselves (a re-shard restarts
        // every dump under way).
        loop {
            let moving: Vec<(GroupId, MemberId)> = self
                .groups
                .iter()
                .flat_map(|(id, g)| g.moving_in().into_iter().map(|m| (*id, m)))
                .collect();
            for (group, member) in &moving {
                self.hand_over(*group, *member, None);
            }
            let Some(member) = self.deferred_moves.first().map(|d| d.member) else {
                break;
            };
            if self.moves_due(member).is_empty() && moving.is_empty() {
                // Its groups are gone: nothing to move.
                self.deferred_moves.retain(|d| d.member != member);
            }
        }
        self.groups
            .values_mut()
            .for_each(UpdateGroup::send_held_dump);
        self.groups.into_values().collect()
    }

    /// Handles a message; returns the dump requests for the caller to deliver when there
    /// are no shard channels (update threading off).
    pub(super) fn handle(&mut self, msg: ToUpdate) -> Vec<(GroupId, DumpRequest)> {
        let mut requests: Vec<(GroupId, DumpRequest)> = Vec::new();
        // Held changes go out before anything that must follow them: a group's before its
        // membership and dumps change, every group's before a marker or a barrier.
        match &msg {
            ToUpdate::Live { .. } | ToUpdate::Stats(_) | ToUpdate::Tick => {}
            ToUpdate::Move { group, to, .. } => {
                self.pack_group(*group);
                self.pack_group(*to);
            }
            ToUpdate::Join { group, .. }
            | ToUpdate::Leave { group, .. }
            | ToUpdate::Refresh { group, .. }
            | ToUpdate::DumpBegin { group, .. }
            | ToUpdate::Dump { group, .. }
            | ToUpdate::DumpEnd { group, .. } => self.pack_group(*group),
            // Not a table dump's held parts: each shard passes a barrier only once its walks
            // are done, so after the last one every dump has ended and gone out (a surrender
            // sends them in `into_groups`).
            ToUpdate::Marker { .. }
            | ToUpdate::Barrier(_)
            | ToUpdate::Surrender(_)
            | ToUpdate::Stop => self.pack_held(true),
        }
        match msg {
            ToUpdate::Join {
                group,
                spec,
                member,
                sink,
            } => {
                let (shards, limits) = (self.shards, self.limits);
                self.groups
                    .entry(group)
                    .or_insert_with(|| UpdateGroup::new(group, spec, shards, limits))
                    .join(member, sink, 0);
            }
            ToUpdate::Leave { group, member } => {
                self.deferred_moves
                    .retain(|d| d.member.peer != member.peer || d.member.epoch > member.epoch);
                // A member still moving in leaves its old group too.
                let from = self.groups.get(&group).and_then(|g| g.moved_from(member));
                for id in [Some(group), from].into_iter().flatten() {
                    if let Some(g) = self.groups.get_mut(&id) {
                        g.leave(member);
                        if g.is_empty() {
                            self.groups.remove(&id);
                        }
                    }
                }
            }
            ToUpdate::Move {
                group,
                to,
                spec,
                member,
            } => {
                let mv = Move {
                    group,
                    to,
                    spec,
                    member,
                };
                // After the member's moves waiting already.
                if self.deferred_moves.iter().any(|d| d.member == member) {
                    self.deferred_moves.push(mv);
                } else {
                    requests.extend(self.start_move(mv));
                }
            }
            ToUpdate::Refresh {
                group,
                member,
                enhanced,
            } => {
                if let Some(r) = self
                    .groups
                    .get_mut(&group)
                    .and_then(|g| g.refresh(member, enhanced))
                {
                    requests.push((group, r));
                }
            }
            ToUpdate::Live {
                shard,
                group,
                entries,
                received,
            } => {
                self.held_since.get_or_insert_with(Instant::now);
                let h = self.held.entry(group).or_default();
                let added = h.changes.extend(entries);
                self.held_entries += added;
                self.fresh += added;
                if !h.shards.contains(&shard) {
                    h.shards.push(shard);
                }
                h.received = match (h.received, received) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if self.fresh >= HELD_ENTRIES {
                    // Past the bound (larger while routes are still arriving).
                    self.pack_due(true);
                }
            }
            ToUpdate::Marker { peer, token, .. } => {
                let seen = self.markers.entry((peer, token)).or_insert(0);
                *seen += 1;
                if *seen >= self.shards {
                    self.markers.remove(&(peer, token));
                    for id in self.groups.keys() {
                        self.telemetry.marker_reached(peer, token, *id);
                    }
                }
            }
            ToUpdate::DumpBegin {
                shard,
                group,
                member,
                token,
            } => {
                self.hand_over(group, member, Some(shard));
                if let Some(g) = self.groups.get_mut(&group) {
                    g.dump_begin(shard, member, token);
                }
                requests.extend(self.moves_due(member));
            }
            ToUpdate::Dump {
                shard,
                group,
                members,
                keys,
                entries,
            } => {
                self.dumped += entries.len();
                if let Some(g) = self.groups.get_mut(&group) {
                    let entries = keys.into_iter().zip(entries).collect();
                    g.dump(shard, &members, entries);
                }
            }
            ToUpdate::DumpEnd {
                shard,
                group,
                member,
                token,
                received,
            } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    g.dump_end(shard, member, token);
                }
                self.first_dump_ended(group, member, token, received);
                self.dumps_ended();
            }
            ToUpdate::Barrier(ack) => {
                let _ = ack.send(());
            }
            ToUpdate::Stats(reply) => {
                let thread = self.index;
                let _ = reply.send(UpdateThreadStats {
                    thread: self.shard_tx.is_some().then_some(thread),
                    cpu_seconds: super::shard_thread::thread_cpu_seconds(),
                    queue_high_water: self.queue_high_water,
                    groups: self
                        .groups
                        .values()
                        .map(|g| GroupReport {
                            thread,
                            group: g.id,
                            name: g.spec.name.clone(),
                            spec: g.spec.clone(),
                            stats: g.stats.clone(),
                            members: g.members().map(|(m, s)| (m, s.clone())).collect(),
                        })
                        .collect(),
                });
            }
            ToUpdate::Tick => {
                for (id, g) in self.groups.iter_mut() {
                    requests.extend(g.catch_ups().into_iter().map(|r| (*id, r)));
                }
            }
            // Taken by `run` (or the shard) before it gets here.
            ToUpdate::Surrender(_) | ToUpdate::Stop => {}
        }
        match &self.shard_tx {
            None => requests,
            Some(_) => {
                for (group, r) in requests {
                    for s in 0..self.shards {
                        self.unsent.push_back((s, group, r.clone()));
                    }
                }
                self.flush_requests();
                Vec::new()
            }
        }
    }

    fn flush_requests(&mut self) {
        let Some((tx, queues)) = &self.shard_tx else {
            return;
        };
        while let Some((s, group, r)) = self.unsent.pop_front() {
            let Some(sender) = tx.get(s) else { continue };
            if let Some(q) = queues.get(s) {
                q.sent();
            }
            let msg = ToShard::Dump {
                group,
                member: r.member,
                token: r.token,
                previous: r.previous.clone(),
            };
            match sender.try_send(msg) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    self.unsent.push_front((s, group, r));
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
    }
}

pub(super) fn run(mut w: UpdateWorker, mut rx: mpsc::Receiver<ToUpdate>, queue: Arc<QueueStats>) {
    let work = register(ThreadKind::Update, w.index);
    loop {
        let m = if w.holding() {
            // Changes wait for a busy receiver: look at its socket again soon.
            match rx.try_recv() {
                Ok(m) => m,
                Err(mpsc::error::TryRecvError::Empty) => {
                    w.behind = false;
                    w.pack_held(false);
                    if w.holding() {
                        std::thread::sleep(HOLD_POLL);
                    }
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
        } else {
            match rx.blocking_recv() {
                Some(m) => m,
                None => return,
            }
        };
        match m {
            ToUpdate::Stop => return,
            ToUpdate::Surrender(reply) => {
                let _ = reply.send(Handover {
                    table: None,
                    groups: Vec::new(),
                    worker: Some(w),
                });
                return;
            }
            _ => {}
        }
        w.behind = !rx.is_empty();
        w.queue_high_water = w.queue_high_water.max(rx.len() + 1);
        queue.depth_seen(rx.len() + 1);
        let began = Instant::now();
        w.handle(m);
        // Nothing more waiting: what the shards sent so far goes out, packed together, to
        // the groups whose receivers can take it.
        if rx.is_empty() {
            w.behind = false;
            w.pack_held(false);
        }
        work.item(began.elapsed());
        if !w.unsent.is_empty() {
            // Retry soon without spinning; the shard is draining its queue meanwhile.
            std::thread::sleep(Duration::from_micros(200));
            w.flush_requests();
        }
    }
}
