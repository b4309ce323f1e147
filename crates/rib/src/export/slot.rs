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
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// One way of exporting, shared by the caches of every shard for groups whose specs differ
/// only in name. Compared by address; a slot holding a kind no cache holds any more is free
/// to be taken.
#[derive(Debug, Default)]
pub struct ExportKind(());

/// The kinds in use, by spec without its name: one registry per pipeline, shared by its
/// shards (and by the shards of a re-shard, so the slots stay valid).
#[derive(Default)]
pub struct ExportKinds(Mutex<HashMap<GroupSpec, Weak<ExportKind>>>);

impl ExportKinds {
    pub fn for_spec(&self, spec: &GroupSpec) -> Arc<ExportKind> {
        let key = GroupSpec {
            name: String::new(),
            ..spec.clone()
        };
        let mut kinds = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = kinds.get(&key).and_then(Weak::upgrade) {
            return k;
        }
        kinds.retain(|_, k| k.strong_count() > 0);
        let k = Arc::new(ExportKind(()));
        kinds.insert(key, Arc::downgrade(&k));
        k
    }

    /// Kinds in use (tests).
    pub fn len(&self) -> usize {
        let kinds = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kinds.values().filter(|k| k.strong_count() > 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a set exports to under one kind. The peer is part of the key: a set is interned
/// per session, but nothing stops a caller handing the same set with another source.
#[derive(Debug)]
pub(super) struct Kept {
    kind: Weak<ExportKind>,
    peer: PeerIndex,
    pub(super) exported: Option<Arc<Exported>>,
}

/// The slot on each attribute set; empty until a shard exports the set. Locked for one
/// lookup (or one export, so a second shard waits for the first's result rather than
/// computing it again).
#[derive(Debug, Default)]
pub struct ExportSlot(Mutex<Option<Kept>>);

/// Whose the slot is, for one lookup.
pub(super) enum Claim<'a> {
    /// This kind's result for this peer.
    Kept(&'a Kept),
    /// Empty, or its kind is gone: this kind may fill it.
    Free,
    /// Another kind in use holds it.
    Taken,
}

impl ExportSlot {
    pub(super) fn lock(&self) -> MutexGuard<'_, Option<Kept>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub(super) fn claim<'a>(
    slot: &'a Option<Kept>,
    kind: &Arc<ExportKind>,
    peer: PeerIndex,
) -> Claim<'a> {
    match slot {
        Some(k) if std::ptr::eq(k.kind.as_ptr(), Arc::as_ptr(kind)) && k.peer == peer => {
            Claim::Kept(k)
        }
        Some(k) if k.kind.strong_count() > 0 => Claim::Taken,
        _ => Claim::Free,
    }
}

pub(super) fn fill(
    slot: &mut Option<Kept>,
    kind: &Arc<ExportKind>,
    peer: PeerIndex,
    exported: Option<Arc<Exported>>,
) {
    *slot = Some(Kept {
        kind: Arc::downgrade(kind),
        peer,
        exported,
    });
}
