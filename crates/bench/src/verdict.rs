//! Receivers that judge, prefix by prefix, what a route server sends its clients when the
//! clients share destinations ([`Spread::Shared`](crate::table::Spread::Shared), the BIRD
//! seed's 2M routes for 800K destinations). There a replacement is not a new prefix, so the
//! lean receivers' count ([`crate::speaker::Lean`]) cannot tell a converged table, and an
//! exact table per client (a hash of attributes per prefix) would not fit 1,000 clients.
//!
//! Each destination has a known winner (the shortest AS path, [`Winner`]); a receiver keeps
//! two bits per destination: held from the winner (good), held from a source it should not
//! be (bad). It is converged when it holds every destination it should from its winner and
//! nothing bad. A route server sends a client nothing for a destination the client itself
//! wins (RFC 7947 section 2.2: a client is not sent its own routes back), or, where it keeps
//! a best path per client, the runner-up; both are right, and neither counts.
//!
//! It must never look at more of an UPDATE than the first AS of the AS_PATH (who sent the
//! route through the transparent route server) and the prefixes.

use crate::speaker::{Bits, Index};
use crate::table::Winner;

/// Winner and runner-up per prefix number of the [`Index`] (`NONE`: not a shared prefix),
/// side by side: a receiver reads both with one cache miss.
pub struct Winners {
    pairs: Vec<[u16; 2]>,
}

/// No source (the route server's clients are at most 64,000: [`crate::address`]).
const NONE: u16 = u16::MAX;

fn source(s: Option<u32>) -> u16 {
    s.and_then(|s| u16::try_from(s).ok()).unwrap_or(NONE)
}

impl Winners {
    pub fn new(index: &Index, winners: &[Winner]) -> Winners {
        let mut w = Winners {
            pairs: vec![[NONE; 2]; index.len()],
        };
        for x in winners {
            let Some(n) = index.get(x.key) else { continue };
            if let Some(p) = w.pairs.get_mut(n as usize) {
                *p = [source(Some(x.best)), source(x.second)];
            }
        }
        w
    }

    /// The prefixes `client` must hold from their winner: every one it does not win.
    pub fn expected_at(&self, client: u32) -> Bits {
        let mut b = Bits::new(self.pairs.len());
        let client = source(Some(client));
        for (n, [best, _]) in self.pairs.iter().enumerate() {
            if *best != client && *best != NONE {
                b.set(n as u32);
            }
        }
        b
    }
}

/// What one receiving client holds, judged ([`Winners`]).
pub struct Verdict {
    winners: std::sync::Arc<Winners>,
    /// The receiving client's number among the sources.
    me: u16,
    good: Bits,
    bad: Bits,
    /// Prefixes held from their winner, and held from a source they should not be.
    pub good_held: u64,
    pub bad_held: u64,
}

/// Who sent an announcement, as the receiver judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    /// A source of the run, by number.
    Source(u32),
    /// An AS_PATH whose first AS is no source's: always wrong.
    Unknown,
}

impl Verdict {
    pub fn new(winners: std::sync::Arc<Winners>, me: u32) -> Verdict {
        let n = winners.pairs.len();
        Verdict {
            winners,
            me: source(Some(me)),
            good: Bits::new(n),
            bad: Bits::new(n),
            good_held: 0,
            bad_held: 0,
        }
    }

    /// Prefix number `n` withdrawn (`from` None) or announced by `from`. True when it was
    /// held from its winner and is announced by its winner again: the winner's route never
    /// changes in these runs, so that is a redundant announcement.
    pub fn judge(&mut self, n: u32, from: Option<From>) -> bool {
        let was_good = self.good.clear(n);
        if was_good {
            self.good_held -= 1;
        }
        if self.bad.clear(n) {
            self.bad_held -= 1;
        }
        let Some(from) = from else { return false };
        let at = n as usize;
        let [best, second] = self.winners.pairs.get(at).copied().unwrap_or([NONE; 2]);
        let from = match from {
            From::Source(s) => source(Some(s)),
            From::Unknown => NONE,
        };
        match from {
            s if best != self.me && s == best && best != NONE => {
                self.good.set(n);
                self.good_held += 1;
                was_good
            }
            // The runner-up at the winner: a route server with a best path per client.
            s if best == self.me && s == second && second != NONE => false,
            _ => {
                self.bad.set(n);
                self.bad_held += 1;
                false
            }
        }
    }
}

/// The first AS of an AS_PATH attribute's first AS_SEQUENCE (4-octet AS numbers, RFC 6793)
/// in an UPDATE's path attributes: the route server's client that sent the route, since a
/// transparent route server does not put its own AS in front (RFC 7947 section 2.2.2).
pub fn first_as(attrs: &[u8]) -> Option<u32> {
    match as_path(attrs)? {
        [2, count, a, b, c, d, ..] if *count > 0 => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// The value of the AS_PATH attribute (RFC 4271 section 4.3) among an UPDATE's path
/// attributes; `None` when absent or cut short before it.
pub fn as_path(mut attrs: &[u8]) -> Option<&[u8]> {
    while let [flags, code, rest @ ..] = attrs {
        let (len, head) = if flags & 0x10 != 0 {
            match rest {
                [a, b, ..] => (usize::from(u16::from_be_bytes([*a, *b])), 2),
                _ => return None,
            }
        } else {
            (usize::from(*rest.first()?), 1)
        };
        let value = rest.get(head..head + len)?;
        if *code == 2 {
            return Some(value);
        }
        attrs = rest.get(head + len..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn winners() -> (Index, Arc<Winners>) {
        let keys = [10u64 << 8, 11 << 8, 12 << 8];
        let index = Index::new(keys).expect("index");
        let w = [
            Winner {
                key: keys[0],
                best: 0,
                second: Some(1),
            },
            Winner {
                key: keys[1],
                best: 1,
                second: Some(2),
            },
            Winner {
                key: keys[2],
                best: 2,
                second: None,
            },
        ];
        let winners = Arc::new(Winners::new(&index, &w));
        (index, winners)
    }

    /// Client 0 wins the first prefix: it must hold the other two from their winners, and
    /// the runner-up for its own is neither good nor bad.
    #[test]
    fn a_receiver_is_judged_by_winners() {
        let (index, w) = winners();
        let n = |k: u64| index.get(k).expect("indexed");
        assert_eq!(w.expected_at(0).count(), 2);
        let mut v = Verdict::new(w, 0);
        v.judge(n(11 << 8), Some(From::Source(2)));
        assert_eq!(
            (v.good_held, v.bad_held),
            (0, 1),
            "the runner-up is not the winner"
        );
        assert!(!v.judge(n(11 << 8), Some(From::Source(1))));
        v.judge(n(12 << 8), Some(From::Source(2)));
        assert!(
            v.judge(n(12 << 8), Some(From::Source(2))),
            "the same route again"
        );
        assert_eq!(
            (v.good_held, v.bad_held),
            (2, 0),
            "a replacement is not a new prefix"
        );
        v.judge(n(10 << 8), Some(From::Source(1)));
        assert_eq!(
            (v.good_held, v.bad_held),
            (2, 0),
            "its own prefix's runner-up"
        );
        v.judge(n(10 << 8), Some(From::Source(2)));
        assert_eq!(v.bad_held, 1);
        v.judge(n(10 << 8), None);
        v.judge(n(12 << 8), None);
        assert_eq!((v.good_held, v.bad_held), (1, 0));
        v.judge(n(12 << 8), Some(From::Unknown));
        assert_eq!(v.bad_held, 1);
    }

    #[test]
    fn the_first_as_is_the_sender() {
        // ORIGIN, then AS_PATH (extended length) with one AS_SEQUENCE of 65001 65001 3.
        let mut attrs = vec![0x40, 1, 1, 0, 0x50, 2, 0, 14, 2, 3];
        for a in [65_001u32, 65_001, 3] {
            attrs.extend(a.to_be_bytes());
        }
        assert_eq!(first_as(&attrs), Some(65_001));
        assert_eq!(first_as(&attrs[..8]), None, "cut short");
        assert_eq!(first_as(&[0x40, 1, 1, 0]), None, "no AS_PATH");
    }
}
