//! Start-up advertisement deferral (FRR's `update-delay`; the selection deferral of RFC 4724
//! section 4.1, applied to every start). After the daemon starts, the shards decide as routes
//! arrive but advertise to no one until every neighbor that came up has sent its whole table
//! (End-of-RIB): a downstream then gets each prefix once, as it ended, in a table dump packed
//! by attribute set, instead of every interim best path while upstream tables arrive side by
//! side (two full tables: 332,000 to 589,000 announcements for 323,486 prefixes without it,
//! depending on which upstream ran ahead).
//!
//! Waited for: every configured neighbor that advertised graceful restart (RFC 4724 section
//! 4.1 excludes those that did not: they need not send End-of-RIB). Bounded twice: past
//! `establish-wait`, neighbors not up yet are no longer waited for; past `max-delay`, nothing
//! is. This module only keeps the count; the shards hold new members back meanwhile.
//!
//! The same deferral starts again whenever every neighbor has gone down together
//! ([`Neighbors`]): a `clear bgp neighbor all`, or a router that lost every session at once,
//! holds nothing worth advertising and will be sent every table again, as at start.
//! Advertising each interim best path while the tables come back in sent a reflector's
//! clients each prefix about three times (ten sources: 330 UPDATEs per 1,000 prefixes instead
//! of 137). Together means within `establish-wait`: neighbors that reset their sessions
//! themselves reconnect at once, and one may be up again before the last has gone down.

use ribshard_rib::PeerIndex;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The deferral's bounds (`[bgp.update-delay]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateDelay {
    /// Advertising starts at the latest this long after start.
    pub max_delay: Duration,
    /// Neighbors not Established this long after start are not waited for.
    pub establish_wait: Duration,
}

impl Default for UpdateDelay {
    fn default() -> Self {
        UpdateDelay {
            max_delay: Duration::from_secs(120),
            establish_wait: Duration::from_secs(5),
        }
    }
}

/// The deferral under way, as an operator sees it (`show bgp summary`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeferralStatus {
    pub seconds: f64,
    pub max_delay: Duration,
    pub establish_wait: Duration,
    /// Established and sending their tables (End-of-RIB not in yet).
    pub neighbors_loading: usize,
    /// Configured, not Established.
    pub neighbors_not_up: usize,
    /// Established with End-of-RIB in (or not doing graceful restart).
    pub neighbors_loaded: usize,
    pub began: DeferralStart,
}

/// Why the deferral ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeferralEnd {
    /// Every configured neighbor is up and sent End-of-RIB (or does not do graceful restart).
    AllEndOfRib,
    /// Past `establish-wait`: every neighbor that came up sent End-of-RIB; the others are
    /// not waited for.
    EstablishWait,
    /// Past `max-delay`, with neighbors still sending their tables.
    MaxDelay,
    /// The number of threads changed (a re-shard starts advertising first).
    Reshard,
}

/// Why a deferral began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeferralStart {
    /// The daemon started.
    Start,
    /// Every neighbor had gone down.
    AllDown,
}

impl std::fmt::Display for DeferralEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeferralEnd::AllEndOfRib => "every neighbor sent End-of-RIB",
            DeferralEnd::EstablishWait => {
                "establish-wait passed; every neighbor up sent End-of-RIB"
            }
            DeferralEnd::MaxDelay => "max-delay passed",
            DeferralEnd::Reshard => "threads re-configured",
        })
    }
}

/// The state of a deferral under way.
#[derive(Debug)]
pub(super) struct Deferral {
    started: Instant,
    began: DeferralStart,
    bounds: UpdateDelay,
    /// The configured neighbors.
    expected: HashSet<PeerIndex>,
    /// Established, graceful restart capable, End-of-RIB not in yet.
    loading: HashSet<PeerIndex>,
    /// Established, and End-of-RIB in (or nothing to wait for).
    loaded: HashSet<PeerIndex>,
}

impl Deferral {
    pub(super) fn new(
        bounds: UpdateDelay,
        expected: impl IntoIterator<Item = PeerIndex>,
        began: DeferralStart,
    ) -> Self {
        let d = Deferral {
            started: Instant::now(),
            began,
            bounds,
            expected: expected.into_iter().collect(),
            loading: HashSet::new(),
            loaded: HashSet::new(),
        };
        // Said at once, so that Established sessions advertising nothing are explained.
        let neighbors = d.expected.len();
        let (establish_wait_s, max_delay_s) =
            (bounds.establish_wait.as_secs(), bounds.max_delay.as_secs());
        match began {
            DeferralStart::Start => tracing::info!(
                neighbors,
                establish_wait_s,
                max_delay_s,
                "update-delay: advertising waits until every neighbor doing graceful restart has sent End-of-RIB"
            ),
            DeferralStart::AllDown => tracing::info!(
                neighbors,
                establish_wait_s,
                max_delay_s,
                "update-delay: every neighbor went down; advertising waits, as at start, until those that were up and do graceful restart have sent End-of-RIB"
            ),
        }
        d
    }

    /// A neighbor removed from the configuration: no longer waited for.
    pub(super) fn forget(&mut self, peer: PeerIndex) {
        self.expected.remove(&peer);
        self.loading.remove(&peer);
        self.loaded.remove(&peer);
    }

    /// A neighbor reached Established; `waits`: it does graceful restart, so its End-of-RIB
    /// is waited for.
    pub(super) fn up(&mut self, peer: PeerIndex, waits: bool) {
        self.loaded.remove(&peer);
        self.loading.remove(&peer);
        if waits {
            self.loading.insert(peer);
        } else {
            self.loaded.insert(peer);
        }
    }

    /// The neighbor's End-of-RIB is in, for every family it negotiated.
    pub(super) fn end_of_rib(&mut self, peer: PeerIndex) {
        if self.loading.remove(&peer) {
            self.loaded.insert(peer);
        }
    }

    pub(super) fn down(&mut self, peer: PeerIndex) {
        self.loading.remove(&peer);
        self.loaded.remove(&peer);
    }

    /// Whether the deferral is over now, and why.
    pub(super) fn over(&self, now: Instant) -> Option<DeferralEnd> {
        let elapsed = now.saturating_duration_since(self.started);
        if self.loading.is_empty() {
            if self.expected.iter().all(|p| self.loaded.contains(p)) {
                return Some(DeferralEnd::AllEndOfRib);
            }
            if elapsed >= self.bounds.establish_wait {
                return Some(DeferralEnd::EstablishWait);
            }
        }
        (elapsed >= self.bounds.max_delay).then_some(DeferralEnd::MaxDelay)
    }

    pub(super) fn status(&self) -> DeferralStatus {
        DeferralStatus {
            seconds: self.started.elapsed().as_secs_f64(),
            max_delay: self.bounds.max_delay,
            establish_wait: self.bounds.establish_wait,
            neighbors_loading: self.loading.len(),
            neighbors_not_up: self.not_up(),
            neighbors_loaded: self.loaded.len(),
            began: self.began,
        }
    }

    fn not_up(&self) -> usize {
        self.expected
            .iter()
            .filter(|p| !self.loaded.contains(p) && !self.loading.contains(p))
            .count()
    }

    /// Logs the end (what was waited for, for how long).
    pub(super) fn log_end(&self, why: DeferralEnd) {
        let not_up = self.not_up();
        let after_ms = self.started.elapsed().as_millis() as u64;
        let (loaded, loading) = (self.loaded.len(), self.loading.len());
        if why == DeferralEnd::MaxDelay {
            // A neighbor that never sent End-of-RIB held every other one back this long.
            tracing::warn!(
                after_ms,
                neighbors_loaded = loaded,
                neighbors_still_loading = loading,
                neighbors_not_up = not_up,
                "update-delay over ({why}) with neighbors still sending their tables: advertising to every neighbor"
            );
        } else {
            tracing::info!(
                after_ms,
                neighbors_loaded = loaded,
                neighbors_still_loading = loading,
                neighbors_not_up = not_up,
                "update-delay over ({why}): advertising to every neighbor"
            );
        }
    }
}

/// Which neighbors are up, so that the deferral starts again when every one has gone down.
#[derive(Debug)]
pub(super) struct Neighbors {
    bounds: UpdateDelay,
    /// The neighbors Established at some time since the last deferral began (one never up
    /// since is not expected back), with what the next deferral must know of each.
    seen: HashMap<PeerIndex, Seen>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// Established now: whether it does graceful restart (its End-of-RIB is waited for),
    /// and whether that End-of-RIB is in.
    up: Option<(bool, bool)>,
    /// When it last left Established.
    down_at: Option<Instant>,
}

impl Neighbors {
    pub(super) fn new(bounds: UpdateDelay) -> Neighbors {
        Neighbors {
            bounds,
            seen: HashMap::new(),
        }
    }

    /// A neighbor reached Established; `waits`: it does graceful restart.
    pub(super) fn up(&mut self, peer: PeerIndex, waits: bool) {
        self.seen.entry(peer).or_default().up = Some((waits, false));
    }

    /// Its End-of-RIB is in for every family.
    pub(super) fn end_of_rib(&mut self, peer: PeerIndex) {
        if let Some(Some((_, eor))) = self.seen.get_mut(&peer).map(|s| s.up.as_mut()) {
            *eor = true;
        }
    }

    /// A neighbor left Established: the deferral to start, if every neighbor seen is now
    /// down or went down within `establish-wait` (it came back since, sending its table
    /// again) and none is under way (`may_start`). It waits for all of them; those already
    /// back count as they stand.
    pub(super) fn down(
        &mut self,
        peer: PeerIndex,
        now: Instant,
        may_start: bool,
    ) -> Option<Deferral> {
        let s = self.seen.get_mut(&peer)?;
        s.up?;
        s.up = None;
        s.down_at = Some(now);
        let window = self.bounds.establish_wait;
        let together = self.seen.values().all(|s| {
            s.up.is_none()
                || s.down_at
                    .is_some_and(|t| now.saturating_duration_since(t) <= window)
        });
        if !together || !may_start {
            return None;
        }
        let mut d = Deferral::new(
            self.bounds,
            self.seen.keys().copied(),
            DeferralStart::AllDown,
        );
        for (p, s) in &self.seen {
            if let Some((waits, eor)) = s.up {
                d.up(*p, waits);
                if eor {
                    d.end_of_rib(*p);
                }
            }
        }
        // Seen since this deferral began: those up now.
        self.seen.retain(|_, s| s.up.is_some());
        self.seen.values_mut().for_each(|s| s.down_at = None);
        Some(d)
    }

    /// A neighbor removed from the configuration.
    pub(super) fn forget(&mut self, peer: PeerIndex) {
        self.seen.remove(&peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(establish: u64, max: u64) -> UpdateDelay {
        UpdateDelay {
            max_delay: Duration::from_secs(max),
            establish_wait: Duration::from_secs(establish),
        }
    }

    #[test]
    fn ends_when_every_neighbor_sent_end_of_rib() {
        let mut d = Deferral::new(bounds(5, 120), [0, 1, 2], DeferralStart::Start);
        let now = Instant::now();
        assert_eq!(d.over(now), None);
        d.up(0, true);
        d.up(1, true);
        d.up(2, false); // no graceful restart: not waited for once up
        assert_eq!(d.over(now), None);
        d.end_of_rib(0);
        assert_eq!(d.over(now), None);
        d.end_of_rib(1);
        assert_eq!(d.over(now), Some(DeferralEnd::AllEndOfRib));
    }

    #[test]
    fn a_neighbor_going_down_is_waited_for_until_establish_wait() {
        let mut d = Deferral::new(bounds(5, 120), [0, 1], DeferralStart::Start);
        let start = Instant::now();
        d.up(0, true);
        d.end_of_rib(0);
        d.up(1, true);
        d.down(1);
        assert_eq!(d.over(start), None);
        let later = start + Duration::from_secs(6);
        assert_eq!(d.over(later), Some(DeferralEnd::EstablishWait));
    }

    #[test]
    fn a_neighbor_still_loading_is_waited_for_until_max_delay() {
        let mut d = Deferral::new(bounds(5, 120), [0, 1], DeferralStart::Start);
        let start = Instant::now();
        d.up(0, true);
        assert_eq!(d.over(start + Duration::from_secs(60)), None);
        assert_eq!(
            d.over(start + Duration::from_secs(121)),
            Some(DeferralEnd::MaxDelay)
        );
    }

    #[test]
    fn no_neighbors_configured_ends_at_once() {
        let d = Deferral::new(bounds(5, 120), [], DeferralStart::Start);
        assert_eq!(d.over(Instant::now()), Some(DeferralEnd::AllEndOfRib));
    }

    /// The deferral starts again when the last neighbor up goes down, waiting for those
    /// that were up since the last one began; not while one is still up.
    #[test]
    fn every_neighbor_down_starts_it_again() {
        let now = Instant::now();
        let mut n = Neighbors::new(bounds(5, 120));
        n.up(0, true);
        n.up(1, true);
        n.up(2, true);
        assert!(n.down(2, now, true).is_none(), "two still up");
        n.forget(2);
        assert!(n.down(0, now, true).is_none(), "one still up");
        assert!(n.down(7, now, true).is_none(), "never up: not the last one");
        let mut d = n.down(1, now, true).expect("the last one went down");
        assert_eq!(d.began, DeferralStart::AllDown);
        d.up(0, true);
        d.end_of_rib(0);
        assert_eq!(d.over(now), None, "neighbor 1 was up: waited for");
        d.up(1, true);
        d.end_of_rib(1);
        assert_eq!(d.over(now), Some(DeferralEnd::AllEndOfRib), "2 was removed");
        assert!(n.down(1, now, true).is_none(), "down twice");
        n.up(3, false);
        assert!(n.down(3, now, true).is_some_and(|d| d.expected.len() == 1));
    }

    /// Neighbors that reset their sessions themselves reconnect at once: one back before the
    /// last has gone down still makes the resets one, and the deferral knows where the one
    /// back stands. One that stayed up, or went down too long before, does not.
    #[test]
    fn neighbors_down_together_start_it_again() {
        let t0 = Instant::now();
        let mut n = Neighbors::new(bounds(5, 120));
        for p in 0..3 {
            n.up(p, true);
            n.end_of_rib(p);
        }
        assert!(n.down(0, t0, true).is_none());
        n.up(0, true); // back at once, sending its table again
        assert!(n.down(1, t0, true).is_none(), "2 still up");
        let d = n
            .down(2, t0 + Duration::from_secs(1), true)
            .expect("all three went down within establish-wait");
        assert_eq!(
            d.status().neighbors_loading,
            1,
            "0 is back, its End-of-RIB not in"
        );
        assert_eq!(d.status().neighbors_not_up, 2);
        // Once more, but 0 went down long before the others and is back: it stayed up as
        // far as this reset goes.
        let mut n = Neighbors::new(bounds(5, 120));
        for p in 0..3 {
            n.up(p, true);
        }
        assert!(n.down(0, t0, true).is_none());
        n.up(0, true);
        let later = t0 + Duration::from_secs(10);
        assert!(n.down(1, later, true).is_none());
        assert!(
            n.down(2, later, true).is_none(),
            "0 is up, and went down 10 s before"
        );
    }
}
