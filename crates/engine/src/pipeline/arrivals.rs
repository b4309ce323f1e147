//! Whether routes are still arriving: a session with more to read from its neighbor (or
//! routes not yet handed on), a shard with routes queued. While they are, update groups hold
//! their live changes rather than pack them ([`MAX_HOLD`] and `HELD_ENTRIES` bound the
//! wait), so a prefix whose better path is still on its way goes to the members once: with
//! two upstreams sending their tables together and no start-up deferral to wait for (they
//! do not do graceful restart, or one comes up while the other's table is arriving), a
//! member that can always take more would otherwise be sent each prefix as each path came.
//! A neighbor trickling changes leaves nothing unread between them, so its changes go out
//! as soon as they are decided, as before.
//!
//! This is what BIRD 2 gets from its single thread (its outgoing buckets fill while it is
//! busy reading, and a prefix changed again moves to its new bucket before it is sent) and
//! what RFC 4271 section 9.2.1.1's MinRouteAdvertisementInterval does by the clock; here the
//! wait ends as soon as the input does.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest an update group holds live changes while routes keep arriving: a neighbor
/// sending without pause (a full table of millions of routes, a flood) must not keep the
/// others' changes from the members for its whole length.
pub const MAX_HOLD: Duration = Duration::from_secs(2);

/// How long routes count as still arriving after a session last saw its neighbor stream
/// (a full table's pace: the session decides). A neighbor streaming its table is not always
/// running (on a loaded machine its process waits for a core for a few milliseconds at a
/// time), and the socket empties meanwhile; churn, even replayed ten times as fast as
/// recorded, never comes at that pace, so its changes never wait for the grace.
pub const STREAM_GRACE: Duration = Duration::from_millis(25);

/// How many inputs have routes still to come, and when a session last saw a stream. Shared by every generation of threads (a re-shard keeps
/// it), counted by [`ArrivalFlag`]s.
#[derive(Debug)]
pub struct Arrivals {
    raised: AtomicUsize,
    origin: Instant,
    /// Nanoseconds from `origin` to the last [`Arrivals::streaming`]; 0: never.
    streamed: AtomicU64,
    /// [`MAX_HOLD`] unless set otherwise, in nanoseconds.
    max_hold: AtomicU64,
}

impl Default for Arrivals {
    fn default() -> Arrivals {
        Arrivals {
            raised: AtomicUsize::new(0),
            origin: Instant::now(),
            streamed: AtomicU64::new(0),
            max_hold: AtomicU64::new(MAX_HOLD.as_nanos() as u64),
        }
    }
}

impl Arrivals {
    /// Some input has routes still to come, or a stream was seen within [`STREAM_GRACE`].
    pub fn busy(&self) -> bool {
        if self.raised.load(Ordering::Relaxed) > 0 {
            return true;
        }
        let at = self.streamed.load(Ordering::Relaxed);
        at > 0 && self.nanos().saturating_sub(at) < STREAM_GRACE.as_nanos() as u64
    }

    /// A session's neighbor is sending at a full table's pace.
    pub fn streaming(&self) {
        self.streamed.store(self.nanos().max(1), Ordering::Relaxed);
    }

    /// The longest live changes are held while routes arrive: [`MAX_HOLD`] unless set
    /// (0: no holding).
    pub fn max_hold(&self) -> Duration {
        Duration::from_nanos(self.max_hold.load(Ordering::Relaxed))
    }

    /// Sets [`Arrivals::max_hold`]: a test that holds a flag raised while it feeds routes
    /// sets it long, so that a slow machine cannot end the hold halfway.
    pub fn set_max_hold(&self, d: Duration) {
        self.max_hold.store(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    fn nanos(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// One input's flag, lowered.
    pub fn flag(self: &Arc<Self>) -> ArrivalFlag {
        ArrivalFlag {
            arrivals: self.clone(),
            raised: false,
        }
    }
}

/// One input's part of [`Arrivals`]: raised while it has routes still to come, lowered when
/// dropped (a session gone, a shard replaced by a re-shard).
#[derive(Debug)]
pub struct ArrivalFlag {
    arrivals: Arc<Arrivals>,
    raised: bool,
}

impl ArrivalFlag {
    pub fn set(&mut self, more: bool) {
        if more != self.raised {
            self.raised = more;
            if more {
                self.arrivals.raised.fetch_add(1, Ordering::Relaxed);
            } else {
                self.arrivals.raised.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for ArrivalFlag {
    fn drop(&mut self) {
        self.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_counts_for_its_grace() {
        let a = Arc::new(Arrivals::default());
        assert!(!a.busy());
        a.streaming();
        assert!(a.busy());
        std::thread::sleep(STREAM_GRACE * 2);
        assert!(!a.busy());
    }

    #[test]
    fn busy_while_any_flag_is_raised_and_lowered_when_dropped() {
        let a = Arc::new(Arrivals::default());
        let (mut x, mut y) = (a.flag(), a.flag());
        assert!(!a.busy());
        x.set(true);
        x.set(true);
        y.set(true);
        assert!(a.busy());
        x.set(false);
        assert!(a.busy(), "y is still raised");
        drop(y);
        assert!(!a.busy());
        x.set(false);
        assert!(!a.busy(), "lowering twice counts once");
    }
}
