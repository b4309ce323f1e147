//! What the FIB writer counts, read by `show fib summary` and `/metrics` without asking the
//! writer's thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct FibStats {
    /// Prefixes whose best path asks for a kernel route.
    pub wanted: AtomicU64,
    /// Routes in the kernel as wanted.
    pub installed: AtomicU64,
    /// Prefixes waiting to be written.
    pub pending: AtomicU64,
    /// Routes whose last write the kernel refused (retried).
    pub failed: AtomicU64,
    /// Routes wanted that nothing forwards to (no next hop resolves to a way out).
    pub unresolved: AtomicU64,
    /// Routes the kernel holds under our key from another protocol (never touched).
    pub conflicts: AtomicU64,
    pub route_writes: AtomicU64,
    pub route_deletes: AtomicU64,
    pub object_writes: AtomicU64,
    pub object_deletes: AtomicU64,
    pub leaves: AtomicU64,
    pub groups: AtomicU64,
    /// Netlink messages and `sendmsg` batches sent, errors answered.
    pub messages: AtomicU64,
    pub batches: AtomicU64,
    pub errors: AtomicU64,
    /// Routes of ours changed or removed by someone else, written again.
    pub drift_repaired: AtomicU64,
    /// At start: routes of ours found right and kept, written, deleted.
    pub kept_at_start: AtomicU64,
    pub written_at_start: AtomicU64,
    pub deleted_at_start: AtomicU64,
    /// Milliseconds since the Unix epoch of the last batch sent (0: none yet).
    pub last_flush_ms: AtomicU64,
    /// Waiting for the start-up deferral to end before writing anything.
    pub holding: AtomicBool,
    /// Whether routes name nexthop objects (else they carry their next hops).
    pub objects: AtomicBool,
}

impl FibStats {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn set(c: &AtomicU64, n: u64) {
        c.store(n, Ordering::Relaxed);
    }
}
