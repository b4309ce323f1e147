//! `[bgp] memory-limit`: the process's resident memory watched against a configured
//! limit, so that a neighbor bringing more routes than the machine can hold ends its own
//! session (Cease / Out of Resources, RFC 4486 section 4) instead of the kernel's OOM
//! killer ending every session. It only reads /proc/self/statm and sets a flag the
//! sessions read; it never frees anything or touches a shard.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tracing::{info, warn};

/// How often the resident size is read.
const SAMPLE: Duration = Duration::from_millis(200);

/// Over the limit until the resident size falls below this share of it, so that a process
/// hovering at the limit does not flip on every sample.
const CLEAR_AT: f64 = 0.9;

#[derive(Debug, Default)]
pub struct MemoryGuard {
    /// Octets; 0: no limit.
    limit: AtomicU64,
    over: AtomicBool,
    /// The last resident size read, octets.
    resident: AtomicU64,
    watching: AtomicBool,
}

impl MemoryGuard {
    /// Sets the limit (octets; `None`: none) and, the first time one is set, starts the
    /// thread that watches it. Takes effect at the next sample.
    pub fn set_limit(self: &Arc<Self>, limit: Option<u64>) {
        self.limit.store(limit.unwrap_or(0), Ordering::Relaxed);
        if limit.is_none() {
            self.over.store(false, Ordering::Relaxed);
            return;
        }
        if !self.watching.swap(true, Ordering::Relaxed) {
            let weak = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("memory-guard".into())
                .spawn(move || watch(weak));
            if let Err(e) = spawned {
                warn!("memory-limit: cannot start its thread: {e}");
                self.watching.store(false, Ordering::Relaxed);
            }
        }
        self.sample();
    }

    /// The limit in octets, if any.
    pub fn limit(&self) -> Option<u64> {
        Some(self.limit.load(Ordering::Relaxed)).filter(|l| *l > 0)
    }

    /// Whether the process is over its limit: sessions then take no new prefixes.
    pub fn over(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }

    /// The resident size last read, octets.
    pub fn resident(&self) -> u64 {
        self.resident.load(Ordering::Relaxed)
    }

    /// Reads the resident size and judges it against the limit.
    fn sample(&self) {
        let Some(rss) = resident_octets() else {
            return;
        };
        self.resident.store(rss, Ordering::Relaxed);
        let Some(limit) = self.limit() else {
            return;
        };
        let was = self.over();
        if !was && rss > limit {
            self.over.store(true, Ordering::Relaxed);
            warn!(
                resident_mib = rss >> 20,
                limit_mib = limit >> 20,
                "memory-limit reached: neighbors that send new prefixes are stopped (Cease / Out of Resources)"
            );
        } else if was && (rss as f64) < limit as f64 * CLEAR_AT {
            self.over.store(false, Ordering::Relaxed);
            info!(
                resident_mib = rss >> 20,
                limit_mib = limit >> 20,
                "back under the memory-limit"
            );
        }
    }
}

fn watch(guard: Weak<MemoryGuard>) {
    while let Some(g) = guard.upgrade() {
        g.sample();
        drop(g);
        std::thread::sleep(SAMPLE);
    }
}

/// The process's resident set size from /proc/self/statm (second field, in pages).
fn resident_octets() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_judged_against_the_resident_size() {
        let g = Arc::new(MemoryGuard::default());
        assert!(!g.over());
        g.set_limit(Some(1));
        assert!(g.over(), "any process is over one octet");
        assert!(g.resident() > 0);
        g.set_limit(Some(u64::MAX / 2));
        g.sample();
        assert!(!g.over(), "far under the limit again");
        g.set_limit(None);
        assert!(!g.over());
        assert_eq!(g.limit(), None);
    }
}
