//! Next-hop resolution as a shard uses it (RFC 4271 section 9.1.2.1): a path whose next hop
//! does not resolve is not eligible, and the cost of the route that resolves it is the IGP
//! cost the decision process compares (section 9.1.2.2 e).
//!
//! The answers come from a [`Resolver`] outside the shard (the kernel's routing tables, in
//! `ribshard-fib`), which must answer without blocking: it reads a snapshot it publishes.
//! A shard keeps, for each next hop its paths use, the last answer and where those paths
//! are (a compressed bitmap of table positions), so that when resolution changes
//! ([`crate::Shard::resolution_changed`]) only the prefixes using a next hop whose answer
//! changed are decided again, never the whole table.
//!
//! Without a resolver every next hop is reachable at cost 0 and nothing is kept.

use crate::attrs::RouteAttrs;
use crate::prefix_map::Handle;
use hashbrown::HashMap;
use roaring::RoaringBitmap;
use std::net::{IpAddr, Ipv6Addr};

/// How a next hop resolves now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resolution {
    /// A route (not one of ours) covers it; `false` makes every path through it ineligible.
    pub reachable: bool,
    /// The covering route's metric: the IGP cost of section 9.1.2.2 e.
    pub metric: u32,
}

impl Resolution {
    /// Reachable at no cost: every next hop, when nothing resolves them.
    pub const DIRECT: Resolution = Resolution {
        reachable: true,
        metric: 0,
    };
    pub const UNREACHABLE: Resolution = Resolution {
        reachable: false,
        metric: 0,
    };
}

/// Answers how a next hop resolves. Shard threads call it when they first meet a next hop
/// and when told that resolution changed, so it must return at once (read a published
/// snapshot; never a lock another thread holds for long, never I/O).
pub trait Resolver: Send + Sync + std::fmt::Debug {
    fn resolve(&self, addr: IpAddr) -> Resolution;
}

/// The address a received next hop resolves by: 4 octets (IPv4), 16, or 32 (an IPv6 global
/// address and a link-local one: the global one, unless it is unspecified). `None` for a
/// next hop that is not an address (import policy's `reject` and `discard`, or none).
pub fn next_hop_addr(nh: &[u8]) -> Option<IpAddr> {
    match nh.len() {
        4 => <[u8; 4]>::try_from(nh).ok().map(IpAddr::from),
        16 | 32 => {
            let global = <[u8; 16]>::try_from(nh.get(..16)?).ok()?;
            if global == [0; 16] && nh.len() == 32 {
                let ll = <[u8; 16]>::try_from(nh.get(16..32)?).ok()?;
                return Some(IpAddr::V6(Ipv6Addr::from(ll)));
            }
            Some(IpAddr::V6(Ipv6Addr::from(global)))
        }
        _ => None,
    }
}

/// One next hop a shard's paths use.
#[derive(Debug)]
struct Slot {
    addr: IpAddr,
    resolution: Resolution,
    /// Live paths (not withdrawn or replaced) that use it.
    paths: u32,
    /// Table positions of prefixes that have (or had) such a path. A position is added as
    /// a path arrives and removed only when the next hop's last path goes, or when a
    /// re-decision finds the prefix no longer using it; a stale one costs one decision.
    at: RoaringBitmap,
}

/// A shard's next hops: their last resolution and where their paths are.
#[derive(Debug, Default)]
pub(crate) struct NextHops {
    resolver: Option<std::sync::Arc<dyn Resolver>>,
    by_addr: HashMap<IpAddr, usize>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
}

impl NextHops {
    pub(crate) fn new(resolver: Option<std::sync::Arc<dyn Resolver>>) -> NextHops {
        NextHops {
            resolver,
            ..NextHops::default()
        }
    }

    /// A live path through `attrs` arrived at position `at`.
    #[inline]
    pub(crate) fn add_path(&mut self, attrs: &RouteAttrs, at: Handle) {
        let Some(resolver) = &self.resolver else {
            return;
        };
        let Some(addr) = next_hop_addr(attrs.next_hop()) else {
            return;
        };
        let i = match self.by_addr.get(&addr) {
            Some(i) => *i,
            None => {
                let slot = Slot {
                    addr,
                    resolution: resolver.resolve(addr),
                    paths: 0,
                    at: RoaringBitmap::new(),
                };
                let i = match self.free.pop() {
                    Some(i) => {
                        if let Some(s) = self.slots.get_mut(i) {
                            *s = Some(slot);
                        }
                        i
                    }
                    None => {
                        self.slots.push(Some(slot));
                        self.slots.len() - 1
                    }
                };
                self.by_addr.insert(addr, i);
                i
            }
        };
        if let Some(Some(s)) = self.slots.get_mut(i) {
            s.paths += 1;
            s.at.insert(at.raw());
        }
    }

    /// A live path through `attrs` was withdrawn or replaced.
    #[inline]
    pub(crate) fn remove_path(&mut self, attrs: &RouteAttrs) {
        if self.resolver.is_none() {
            return;
        }
        let Some(addr) = next_hop_addr(attrs.next_hop()) else {
            return;
        };
        let Some(&i) = self.by_addr.get(&addr) else {
            return;
        };
        let Some(Some(s)) = self.slots.get_mut(i) else {
            return;
        };
        s.paths = s.paths.saturating_sub(1);
        if s.paths == 0 {
            self.by_addr.remove(&addr);
            if let Some(slot) = self.slots.get_mut(i) {
                *slot = None;
            }
            self.free.push(i);
        }
    }

    /// How the next hop of `attrs` resolves, as last answered.
    #[inline]
    pub(crate) fn resolution(&self, attrs: &RouteAttrs) -> Resolution {
        let Some(resolver) = &self.resolver else {
            return Resolution::DIRECT;
        };
        // Import policy's reject and discard, and a route without a next hop, are not
        // forwarded to a neighbor: nothing to resolve.
        let Some(addr) = next_hop_addr(attrs.next_hop()) else {
            return Resolution::DIRECT;
        };
        match self.by_addr.get(&addr).and_then(|i| self.slots.get(*i)) {
            Some(Some(s)) => s.resolution,
            // A path not counted here (a withdrawn one kept for export): ask.
            _ => resolver.resolve(addr),
        }
    }

    /// Asks the resolver again for every next hop; returns the slots whose answer changed
    /// (to decide their prefixes again).
    pub(crate) fn refresh(&mut self) -> Vec<usize> {
        let Some(resolver) = &self.resolver else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            let now = resolver.resolve(s.addr);
            if now != s.resolution {
                s.resolution = now;
                changed.push(i);
            }
        }
        changed
    }

    /// The next hop of slot `i` and the positions its paths were seen at.
    pub(crate) fn positions(&self, i: usize) -> Option<(IpAddr, Vec<Handle>)> {
        let s = self.slots.get(i)?.as_ref()?;
        Some((s.addr, s.at.iter().map(Handle::from_raw).collect()))
    }

    /// Forgets positions whose prefix no longer has a path through slot `i`'s next hop.
    pub(crate) fn forget_positions(&mut self, i: usize, stale: &[Handle]) {
        if let Some(Some(s)) = self.slots.get_mut(i) {
            for h in stale {
                s.at.remove(h.raw());
            }
        }
    }

    /// Next hops in use with their last answer and live paths, by address.
    pub(crate) fn list(&self) -> Vec<(IpAddr, Resolution, u32)> {
        let mut v: Vec<_> = self
            .slots
            .iter()
            .flatten()
            .map(|s| (s.addr, s.resolution, s.paths))
            .collect();
        v.sort_by_key(|x| x.0);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_hop_addresses() {
        assert_eq!(
            next_hop_addr(&[192, 0, 2, 1]),
            Some("192.0.2.1".parse().unwrap())
        );
        let g: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let ll: Ipv6Addr = "fe80::1".parse().unwrap();
        let mut both = g.octets().to_vec();
        both.extend_from_slice(&ll.octets());
        assert_eq!(next_hop_addr(&both), Some(IpAddr::V6(g)));
        let mut only_ll = [0u8; 16].to_vec();
        only_ll.extend_from_slice(&ll.octets());
        assert_eq!(next_hop_addr(&only_ll), Some(IpAddr::V6(ll)));
        assert_eq!(next_hop_addr(&[0]), None, "policy's next-hop reject");
        assert_eq!(next_hop_addr(&[]), None);
    }
}
