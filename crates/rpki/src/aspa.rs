//! AS path verification with ASPA records (draft-ietf-sidrops-aspa-verification, the
//! procedures of its section 6 for routes from customers, lateral peers and route-server
//! clients (upstream) and from providers (downstream)).
//!
//! An ASPA record names the provider ASes a customer AS has; a hop from customer to provider
//! in the path is `Provider+` when the record lists it, `Not Provider+` when a record exists
//! and does not, `No Attestation` without a record. A path is valid when it can be an up
//! ramp (then, downstream, a down ramp) of `Provider+` hops, invalid when even the hops not
//! known to be wrong cannot make one, unknown in between.

use hashbrown::HashMap;
use std::sync::Arc;

/// Which procedure a route needs: where it came from (its neighbor's BGP role).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From a customer, a lateral peer, a route server or a route-server client.
    Upstream,
    /// From a provider.
    Downstream,
}

/// A route's AS path verification state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AspaState {
    Valid,
    Unknown,
    Invalid,
}

impl AspaState {
    pub fn name(self) -> &'static str {
        match self {
            AspaState::Valid => "valid",
            AspaState::Unknown => "unknown",
            AspaState::Invalid => "invalid",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hop {
    ProviderPlus,
    NotProviderPlus,
    NoAttestation,
}

/// Every ASPA record a cache gave: customer AS to its providers, sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AspaTable {
    records: HashMap<u32, Arc<[u32]>>,
}

impl AspaTable {
    pub fn new(records: impl IntoIterator<Item = (u32, Vec<u32>)>) -> AspaTable {
        let mut t = AspaTable::default();
        for (c, p) in records {
            t.set(c, p);
        }
        t
    }

    /// Sets a customer's providers (replacing its record, RFC 8210bis: one record per
    /// customer).
    pub fn set(&mut self, customer: u32, mut providers: Vec<u32>) {
        providers.sort_unstable();
        providers.dedup();
        self.records.insert(customer, providers.into());
    }

    pub fn remove(&mut self, customer: u32) -> bool {
        self.records.remove(&customer).is_some()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn providers(&self, customer: u32) -> Option<&[u32]> {
        self.records.get(&customer).map(|p| &p[..])
    }

    /// Every record, by customer AS.
    pub fn sorted(&self) -> Vec<(u32, &[u32])> {
        let mut v: Vec<_> = self.records.iter().map(|(c, p)| (*c, &p[..])).collect();
        v.sort_unstable_by_key(|r| r.0);
        v
    }

    fn hop(&self, customer: u32, provider: u32) -> Hop {
        match self.records.get(&customer) {
            None => Hop::NoAttestation,
            Some(p) if p.binary_search(&provider).is_ok() => Hop::ProviderPlus,
            Some(_) => Hop::NotProviderPlus,
        }
    }

    /// Verifies an AS path given neighbor first (as received), with `set` true when it has
    /// an AS_SET (then it is invalid). Prepends count once.
    pub fn verify(&self, path: &[u32], has_set: bool, direction: Direction) -> AspaState {
        if has_set {
            return AspaState::Invalid;
        }
        // Origin first, prepends collapsed: AS(1) .. AS(N).
        let mut p: Vec<u32> = Vec::with_capacity(path.len());
        for &a in path.iter().rev() {
            if p.last() != Some(&a) {
                p.push(a);
            }
        }
        let n = p.len();
        if n == 0 {
            return AspaState::Invalid;
        }
        // The longest run of hops up from the origin (customer to provider) that are
        // Provider+ (min) or not Not Provider+ (max); a ramp of n ASes has n - 1 hops.
        let up = |accept: fn(Hop) -> bool| -> usize {
            p.windows(2)
                .position(|w| !accept(self.hop(w[0], w[1])))
                .map_or(n, |i| i + 1)
        };
        let down = |accept: fn(Hop) -> bool| -> usize {
            p.windows(2)
                .rev()
                .position(|w| !accept(self.hop(w[1], w[0])))
                .map_or(n, |i| i + 1)
        };
        let max = |h: Hop| h != Hop::NotProviderPlus;
        let min = |h: Hop| h == Hop::ProviderPlus;
        match direction {
            Direction::Upstream => {
                if n == 1 {
                    AspaState::Valid
                } else if up(max) < n {
                    AspaState::Invalid
                } else if up(min) < n {
                    AspaState::Unknown
                } else {
                    AspaState::Valid
                }
            }
            Direction::Downstream => {
                if n <= 2 {
                    AspaState::Valid
                } else if up(max) + down(max) < n {
                    AspaState::Invalid
                } else if up(min) + down(min) < n {
                    AspaState::Unknown
                } else {
                    AspaState::Valid
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AspaState::*;
    use Direction::*;

    fn table() -> AspaTable {
        // 10 and 20 are customers of 100; 100 of 1000; 30 is a customer of 300 only.
        AspaTable::new([
            (10, vec![100]),
            (20, vec![100]),
            (100, vec![1000]),
            (30, vec![300]),
        ])
    }

    #[test]
    fn upstream_paths() {
        let t = table();
        // Neighbor first: from customer 100, originated by its customer 10.
        assert_eq!(t.verify(&[100, 10], false, Upstream), Valid);
        assert_eq!(t.verify(&[100, 100, 10, 10], false, Upstream), Valid);
        assert_eq!(t.verify(&[10], false, Upstream), Valid);
        // 30 names 300 alone: 30 -> 100 is a leak.
        assert_eq!(t.verify(&[100, 30], false, Upstream), Invalid);
        // 40 has no record.
        assert_eq!(t.verify(&[100, 40], false, Upstream), Unknown);
        assert_eq!(t.verify(&[100, 10], true, Upstream), Invalid);
    }

    #[test]
    fn downstream_paths() {
        let t = table();
        // From provider 1000: up 10 -> 100 -> 1000... as received by 1000's other customer.
        assert_eq!(t.verify(&[1000, 100, 10], false, Downstream), Valid);
        // Up from 10 to 100, down from 100 to its customer 20, our provider.
        assert_eq!(t.verify(&[20, 100, 10], false, Downstream), Valid);
        // 10 is no customer of 30, nor 20 of 30: no up and down ramp makes the path.
        assert_eq!(t.verify(&[20, 30, 10], false, Downstream), Invalid);
        assert_eq!(t.verify(&[100, 10], false, Downstream), Valid);
        assert_eq!(t.verify(&[1000, 50, 40], false, Downstream), Unknown);
    }
}
