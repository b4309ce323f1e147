//! The clock paths are stamped with: whole seconds since the process first read it, so a
//! stamp fits the 30 bits a path keeps for it ([`crate::Path::since`]) for 34 years.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

fn base() -> &'static (Instant, SystemTime) {
    static BASE: OnceLock<(Instant, SystemTime)> = OnceLock::new();
    BASE.get_or_init(|| (Instant::now(), SystemTime::now()))
}

/// Seconds since the clock's start.
pub fn now() -> u32 {
    u32::try_from(base().0.elapsed().as_secs()).unwrap_or(u32::MAX)
}

/// The wall-clock time of a stamp.
pub fn to_system(secs: u32) -> SystemTime {
    base().1 + Duration::from_secs(u64::from(secs))
}

/// How long ago a stamp was.
pub fn age(secs: u32) -> Duration {
    Duration::from_secs(u64::from(now().saturating_sub(secs)))
}
