//! A restarting neighbor's routes we keep (RFC 4724 section 4.2, RFC 9494 section 4.2): per
//! family, until when, and whether long-lived graceful restart follows the restart time.

use ribshard_wire::Family;
use tokio::time::Instant;

/// The families by [`Family::index`].
const FAMILIES: [Family; 2] = [Family::Ipv4Unicast, Family::Ipv6Unicast];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Stale {
    /// Per family ([`ribshard_wire::Family::index`]): its routes are kept until then.
    until: [Option<Instant>; 2],
    /// Per family: when `until` comes, the routes stay this many seconds more, long-lived
    /// stale (they get LLGR_STALE then).
    long_lived: [Option<u32>; 2],
    /// Per family: the routes are long-lived stale now.
    in_long_lived: [bool; 2],
}

/// What is due when a family's time comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Due {
    /// Families whose stale routes go.
    pub flush: [bool; 2],
    /// Families whose stale routes become long-lived stale.
    pub long_lived: [bool; 2],
}

impl Stale {
    /// Keeps a family's routes until `until`, then long-lived stale for `long_lived` s.
    pub fn keep(&mut self, family: Family, until: Instant, long_lived: Option<u32>) {
        let family = family.index();
        if let (Some(u), Some(l)) = (self.until.get_mut(family), self.long_lived.get_mut(family)) {
            *u = Some(until);
            *l = long_lived.filter(|s| *s > 0);
        }
        if let Some(x) = self.in_long_lived.get_mut(family) {
            *x = false;
        }
    }

    /// Per family kept: until when, and whether long-lived stale now.
    pub fn kept(&self) -> Vec<(Family, Instant, bool)> {
        FAMILIES
            .into_iter()
            .zip(self.until)
            .zip(self.in_long_lived)
            .filter_map(|((f, u), ll)| Some((f, u?, ll)))
            .collect()
    }

    /// The families with routes kept.
    pub fn families(&self) -> [bool; 2] {
        [self.until[0].is_some(), self.until[1].is_some()]
    }

    /// The next moment something is due.
    pub fn next(&self) -> Option<Instant> {
        self.until.iter().flatten().min().copied()
    }

    /// Forgets these families (their routes were flushed, or sent again).
    pub fn forget(&mut self, families: [bool; 2]) {
        for (i, f) in families.iter().enumerate() {
            if *f {
                if let (Some(u), Some(l)) = (self.until.get_mut(i), self.long_lived.get_mut(i)) {
                    (*u, *l) = (None, None);
                }
                if let Some(x) = self.in_long_lived.get_mut(i) {
                    *x = false;
                }
            }
        }
    }

    /// What is due at `now`: families to flush, and families entering long-lived stale
    /// (kept from `now` for their long-lived stale time).
    pub fn due(&mut self, now: Instant) -> Due {
        let mut due = Due::default();
        for i in 0..2 {
            let (Some(u), Some(l)) = (self.until.get_mut(i), self.long_lived.get_mut(i)) else {
                continue;
            };
            if u.is_none_or(|t| t > now) {
                continue;
            }
            match l.take() {
                Some(secs) => {
                    *u = Some(now + std::time::Duration::from_secs(u64::from(secs)));
                    if let Some(x) = due.long_lived.get_mut(i) {
                        *x = true;
                    }
                    if let Some(x) = self.in_long_lived.get_mut(i) {
                        *x = true;
                    }
                }
                None => {
                    *u = None;
                    if let Some(x) = due.flush.get_mut(i) {
                        *x = true;
                    }
                    if let Some(x) = self.in_long_lived.get_mut(i) {
                        *x = false;
                    }
                }
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn restart_time_then_long_lived_then_gone() {
        let t0 = Instant::now();
        let mut s = Stale::default();
        s.keep(Family::Ipv4Unicast, t0 + Duration::from_secs(10), Some(100));
        s.keep(Family::Ipv6Unicast, t0 + Duration::from_secs(10), None);
        assert_eq!(s.families(), [true, true]);
        assert_eq!(s.next(), Some(t0 + Duration::from_secs(10)));
        assert_eq!(s.due(t0), Due::default());
        let at = t0 + Duration::from_secs(10);
        assert_eq!(
            s.due(at),
            Due {
                flush: [false, true],
                long_lived: [true, false]
            }
        );
        assert_eq!(s.families(), [true, false]);
        assert_eq!(
            s.kept(),
            vec![(Family::Ipv4Unicast, at + Duration::from_secs(100), true)]
        );
        assert_eq!(s.next(), Some(at + Duration::from_secs(100)));
        assert_eq!(
            s.due(at + Duration::from_secs(100)),
            Due {
                flush: [true, false],
                long_lived: [false, false]
            }
        );
        assert_eq!(s, Stale::default());
    }

    #[test]
    fn forgetting_a_family_forgets_its_long_lived_time() {
        let t0 = Instant::now();
        let mut s = Stale::default();
        s.keep(Family::Ipv4Unicast, t0, Some(100));
        s.forget([true, false]);
        assert_eq!(s.due(t0 + Duration::from_secs(1)), Due::default());
        assert_eq!(s.next(), None);
    }
}
