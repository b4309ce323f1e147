//! Giving freed memory back to the system where a burst of the pipeline's work has ended.
//!
//! glibc keeps what a thread frees in the arena it came from, for that arena's next
//! allocations. A burst (two full tables arriving, a table dump, a full-table peer going
//! down) leaves each arena that took part holding free pages no other thread's arena can
//! use, and the next burst, on other threads, adds its own on top. `malloc_trim` hands back
//! the free pages of every arena (a fraction of a millisecond for two full tables). Called
//! at the end of a burst, never on a timer or in the middle of one: at most once per
//! [`EVERY`], or once per [`AFTER_ENTRIES`] of a table dump's work. Two full tables: the
//! single-threaded mode's peak RSS 85 to 81 MiB (the arrival's end); after the table dumps,
//! the two-shard mode's RSS about 99 to 79 MiB (the dumps' entries are made by the shards
//! and freed by the update threads), which takes that much off the height of a peer's
//! withdrawals later; not the two-shard mode's peak, which comes during the dumps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The least time between two trims: each walks every arena's free lists under its lock.
const EVERY: Duration = Duration::from_millis(500);

/// Paths a shard must have dropped in its peer-down walks for their end to be a burst's.
pub(super) const AFTER_PATHS: usize = 50_000;

/// Table dump entries an update worker must have handled since it last gave memory back
/// for the end of its dumps to be a burst's.
pub(super) const AFTER_ENTRIES: usize = 50_000;

/// Hands free pages back to the system, unless it was done within [`EVERY`]. Returns
/// whether it did.
pub(super) fn give_back() -> bool {
    static START: OnceLock<Instant> = OnceLock::new();
    static LAST: Spacing = Spacing::new(EVERY);
    let now = START.get_or_init(Instant::now).elapsed();
    if !LAST.claim(now) {
        return false;
    }
    trim();
    true
}

/// Hands free pages back to the system at once: for the end of a burst whose own size
/// bounds how often it comes (the caller's count of work since its last trim, at least
/// [`AFTER_ENTRIES`]), so it need not wait out [`EVERY`] after another burst's trim (the
/// arrival's end comes a few milliseconds before the dumps begin).
pub(super) fn give_back_after_work() {
    trim();
}

/// At most one claim per interval, across threads.
struct Spacing {
    every: u64,
    /// Milliseconds since the start of the last claim, plus one (0: none yet).
    last: AtomicU64,
}

impl Spacing {
    const fn new(every: Duration) -> Spacing {
        Spacing {
            every: every.as_millis() as u64,
            last: AtomicU64::new(0),
        }
    }

    /// Whether a claim at `now` (time since the start) is the first for an interval.
    fn claim(&self, now: Duration) -> bool {
        let now = now.as_millis() as u64 + 1;
        let last = self.last.load(Ordering::Relaxed);
        if last != 0 && now < last + self.every {
            return false;
        }
        // Lost to another thread claiming at the same moment: that one trims.
        self.last
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only reorganises the allocator's own free lists; no pointer of
    // ours is read or invalidated.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return memory by their own rules.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_at_most_once_per_interval() {
        let s = Spacing::new(Duration::from_millis(500));
        let ms = Duration::from_millis;
        assert!(s.claim(ms(0)), "the first claim");
        assert!(!s.claim(ms(0)));
        assert!(!s.claim(ms(499)));
        assert!(s.claim(ms(500)));
        assert!(!s.claim(ms(700)));
        assert!(s.claim(ms(2_000)));
    }

    #[test]
    fn giving_back_keeps_what_is_in_use() {
        // Freed memory around live memory, then a trim: the live memory is intact.
        let keep: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 * 1024]).collect();
        let gone: Vec<Vec<u8>> = (0..64).map(|_| vec![7; 256 * 1024]).collect();
        drop(gone);
        trim();
        for (i, v) in keep.iter().enumerate() {
            assert!(v.iter().all(|&b| b == i as u8));
        }
    }
}
