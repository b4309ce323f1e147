//! An export result kept on the attribute set itself, for one way of exporting.
//!
//! Every shard that holds a prefix of a set exports that set: with the results in per-shard
//! caches, two shards computed and kept each set's export twice (64 shards, 64 times). The
//! slot on the set is read by all of them: the first shard to export a set fills it, the
//! others find it there. One way of exporting ([`ExportKind`]: a group spec but for its
//! name) has the slot; a set exported in other ways too (a reflector's non-client groups,
//! an external group per neighbor AS) keeps those results in the shard's
//! [`super::ExportCache`] as before.

use super::{Exported, GroupSpec};
use crate::shard::PeerIndex;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// One way of exporting, shared by the caches of every shard for groups whose specs differ
/// only in name. Its id is never reused, so a slot naming a kind no cache holds any more is
/// free to be taken.
#[derive(Debug)]
pub struct ExportKind {
    id: u32,
}

impl Drop for ExportKind {
    fn drop(&mut self) {
        live().remove(&self.id);
    }
}

#[derive(Debug, Default)]
struct Registry {
    by_spec: HashMap<GroupSpec, Weak<ExportKind>>,
}

/// The last kind id given, in the whole process (0 marks an empty slot): unique across
/// registries too, so a set handed to two pipelines (tests, benches) can never show one the
/// other's result.
static LAST_ID: AtomicU32 = AtomicU32::new(0);

/// The ids of the kinds alive, in the whole process (so a pipeline never takes a slot another
/// one is using). Asked only when a slot holds another kind, and then once per cache sweep.
static LIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn live() -> MutexGuard<'static, BTreeSet<u32>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The kinds in use, by spec without its name: one registry per pipeline, shared by its
/// shards and kept across re-shards. A re-shard drops the old shards' caches before the new
/// ones are made, so their kinds get new ids and the slots are filled again as the sets are
/// exported, as the per-shard caches were.
#[derive(Debug, Default)]
pub struct ExportKinds(Mutex<Registry>);

impl ExportKinds {
    pub fn for_spec(&self, spec: &GroupSpec) -> Arc<ExportKind> {
        let key = spec.without_name();
        let mut r = self.registry();
        if let Some(k) = r.by_spec.get(&key).and_then(Weak::upgrade) {
            return k;
        }
        r.by_spec.retain(|_, k| k.strong_count() > 0);
        // After four billion kinds (policy changes), ids would be reused: give up sharing
        // rather than risk it (id 0: every cache keeps its own).
        let id = LAST_ID
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .map_or(0, |n| n + 1);
        if id != 0 {
            live().insert(id);
        }
        let k = Arc::new(ExportKind { id });
        r.by_spec.insert(key, Arc::downgrade(&k));
        k
    }

    /// Kinds in use.
    pub fn len(&self) -> usize {
        let r = self.registry();
        r.by_spec.values().filter(|k| k.strong_count() > 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a set exports to under one kind (0: none yet). The peer is part of the key: a set
/// is interned per session, but nothing stops a caller handing the same set with another
/// source.
#[derive(Debug, Default)]
pub(super) struct Kept {
    kind: u32,
    peer: PeerIndex,
    pub(super) exported: Option<Arc<Exported>>,
}

/// The slot on each attribute set (24 octets); empty until a shard exports the set. Locked
/// for one lookup (or one export, so a second shard waits for the first's result rather
/// than computing it again).
#[derive(Debug, Default)]
pub struct ExportSlot(Mutex<Kept>);

impl ExportSlot {
    pub(super) fn lock(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whose the slot is, for one lookup.
pub(super) enum Claim {
    /// This kind's result for this peer.
    Ours,
    /// Empty, or its kind is gone: this kind may fill it.
    Free,
    /// Another kind in use holds it (or this kind, for another peer).
    Taken,
}

/// Which kinds a cache found alive or gone: asking takes the process-wide lock of [`LIVE`],
/// and a set exported in two ways would ask on every lookup. A kind seen alive may have gone
/// since (the slot is then left to it until the memo is cleared, at the cache's next sweep);
/// one seen gone never comes back.
#[derive(Default)]
pub(super) struct Seen(HashMap<u32, bool>);

impl Seen {
    pub(super) fn clear(&mut self) {
        self.0.retain(|_, alive| !*alive);
    }

    pub(super) fn claim(&mut self, kept: &Kept, kind: &ExportKind, peer: PeerIndex) -> Claim {
        if kind.id == 0 {
            return Claim::Taken;
        }
        if kept.kind == kind.id {
            return if kept.peer == peer {
                Claim::Ours
            } else {
                Claim::Taken
            };
        }
        if kept.kind == 0 {
            return Claim::Free;
        }
        let alive = *self
            .0
            .entry(kept.kind)
            .or_insert_with(|| live().contains(&kept.kind));
        if alive {
            Claim::Taken
        } else {
            Claim::Free
        }
    }
}

pub(super) fn fill(
    kept: &mut Kept,
    kind: &ExportKind,
    peer: PeerIndex,
    exported: Option<Arc<Exported>>,
) {
    *kept = Kept {
        kind: kind.id,
        peer,
        exported,
    };
}
