//! What ribshard knows of the kernel's routing tables for resolving next hops: the routes of
//! other protocols (never its own) in the tables it resolves through, the kernel's nexthop
//! objects those routes may name, and interface names. A [`KernelView`] is an immutable
//! snapshot: the watcher ([`crate::watch`]) builds each one and publishes it; the shards and
//! the FIB writer read it without locks.

use crate::netlink::route::{
    Hop, RouteMsg, RouteNext, RTN_BLACKHOLE, RTN_LOCAL, RTN_PROHIBIT, RTN_THROW, RTN_UNICAST,
    RTN_UNREACHABLE,
};
use crate::netlink::NexthopSpec;
use hashbrown::HashMap;
use ribshard_rib::Resolution;
use ribshard_wire::Prefix;
use smallvec::SmallVec;
use std::net::IpAddr;
use std::sync::Arc;

/// How to resolve: through which kernel tables, in order (as the kernel's own rules look
/// up `local` then `main`), and whether a default route counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveConfig {
    pub tables: Vec<u32>,
    /// Resolve through a default route (0.0.0.0/0, ::/0) too. BIRD does; FRR and OpenBGPD
    /// do not by default (`ip nht resolve-via-default`, `nexthop qualify via default`).
    pub via_default: bool,
    /// Our routes' protocol number: routes of it are never resolved through.
    pub own_protocol: u8,
}

impl Default for ResolveConfig {
    fn default() -> Self {
        ResolveConfig {
            tables: vec![
                crate::netlink::route::RT_TABLE_LOCAL,
                crate::netlink::route::RT_TABLE_MAIN,
            ],
            via_default: true,
            own_protocol: 186,
        }
    }
}

/// A route kept for resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoute {
    pub priority: u32,
    pub kind: u8,
    pub protocol: u8,
    pub next: RouteNext,
}

/// Where a next hop's traffic goes, as resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Via {
    /// No usable route covers it.
    Unreachable,
    /// It is one of this host's own addresses (a `local` route).
    Local,
    /// Out of these interfaces, through these gateways (the next hop itself for a
    /// directly connected one).
    Hops(SmallVec<[Hop; 2]>),
}

/// A next hop resolved: where it goes, at what cost, through which route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub via: Via,
    /// The resolving route's metric (the IGP cost).
    pub metric: u32,
    /// The resolving route, and its table.
    pub route: Option<(u32, Prefix)>,
}

impl Resolved {
    const UNREACHABLE: Resolved = Resolved {
        via: Via::Unreachable,
        metric: 0,
        route: None,
    };

    /// What the decision process needs of it.
    pub fn resolution(&self) -> Resolution {
        match self.via {
            Via::Unreachable => Resolution::UNREACHABLE,
            Via::Local | Via::Hops(_) => Resolution {
                reachable: true,
                metric: self.metric,
            },
        }
    }
}

fn key_of(p: &Prefix) -> (u8, u128) {
    match p.masked() {
        Prefix::V4 { addr, len } => (len, u128::from(addr)),
        Prefix::V6 { addr, len } => (len, u128::from_be_bytes(addr)),
    }
}

/// One table's routes for longest-prefix match: a hash per prefix length present, looked
/// up from the longest length down.
#[derive(Clone, Debug)]
pub struct Lpm {
    routes: HashMap<(bool, u8, u128), SmallVec<[KernelRoute; 1]>>,
    /// Routes per length, per family (false: IPv4), to skip the lengths not present.
    lens: [[u32; 129]; 2],
}

impl Default for Lpm {
    fn default() -> Lpm {
        Lpm {
            routes: HashMap::new(),
            lens: [[0; 129]; 2],
        }
    }
}

impl Lpm {
    pub fn len(&self) -> usize {
        self.routes.values().map(SmallVec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Adds or replaces a route (the same prefix and metric is the same route).
    pub fn insert(&mut self, dst: &Prefix, r: KernelRoute) {
        let v6 = matches!(dst, Prefix::V6 { .. });
        let (len, k) = key_of(dst);
        let list = self.routes.entry((v6, len, k)).or_default();
        match list.iter_mut().find(|x| x.priority == r.priority) {
            Some(x) => *x = r,
            None => {
                list.push(r);
                list.sort_by_key(|x| x.priority);
                if let Some(n) = self.lens[usize::from(v6)].get_mut(usize::from(len)) {
                    *n += 1;
                }
            }
        }
    }

    pub fn remove(&mut self, dst: &Prefix, priority: u32) {
        let v6 = matches!(dst, Prefix::V6 { .. });
        let (len, k) = key_of(dst);
        let Some(list) = self.routes.get_mut(&(v6, len, k)) else {
            return;
        };
        let before = list.len();
        list.retain(|x| x.priority != priority);
        if list.len() < before {
            if let Some(n) = self.lens[usize::from(v6)].get_mut(usize::from(len)) {
                *n = n.saturating_sub(1);
            }
        }
        if list.is_empty() {
            self.routes.remove(&(v6, len, k));
        }
    }

    /// Whether a route for exactly `dst` with this metric is here.
    pub fn has(&self, dst: &Prefix, priority: u32) -> bool {
        let v6 = matches!(dst, Prefix::V6 { .. });
        let (len, k) = key_of(dst);
        self.routes
            .get(&(v6, len, k))
            .is_some_and(|l| l.iter().any(|r| r.priority == priority))
    }

    /// The most specific routes covering `addr` (lowest metric first), and their prefix;
    /// with `skip_default`, a default route does not count.
    pub fn lookup(&self, addr: IpAddr, skip_default: bool) -> Option<(Prefix, &KernelRoute)> {
        let (v6, bits, a): (bool, u8, u128) = match addr {
            IpAddr::V4(a) => (false, 32, u128::from(u32::from(a))),
            IpAddr::V6(a) => (true, 128, u128::from(a)),
        };
        let lens = &self.lens[usize::from(v6)];
        let lowest = u8::from(skip_default);
        for len in (lowest..=bits).rev() {
            if lens.get(usize::from(len)).is_none_or(|n| *n == 0) {
                continue;
            }
            let shift = u32::from(bits - len);
            let k = if shift >= 128 {
                0
            } else {
                (a >> shift) << shift
            };
            if let Some(r) = self.routes.get(&(v6, len, k)).and_then(|l| l.first()) {
                let p = if v6 {
                    Prefix::V6 {
                        addr: k.to_be_bytes(),
                        len,
                    }
                } else {
                    Prefix::V4 {
                        addr: k as u32,
                        len,
                    }
                };
                return Some((p, r));
            }
        }
        None
    }

    /// Whether a unicast route equal to or covering `p` is here (not a default route).
    pub fn covers(&self, p: &Prefix) -> bool {
        let v6 = matches!(p, Prefix::V6 { .. });
        let (plen, a) = key_of(p);
        let bits: u8 = if v6 { 128 } else { 32 };
        (1..=plen).any(|len| {
            if self.lens[usize::from(v6)]
                .get(usize::from(len))
                .is_none_or(|n| *n == 0)
            {
                return false;
            }
            let shift = u32::from(bits - len);
            let k = if shift >= 128 {
                0
            } else {
                (a >> shift) << shift
            };
            self.routes
                .get(&(v6, len, k))
                .and_then(|l| l.first())
                .is_some_and(|r| r.kind == RTN_UNICAST)
        })
    }
}

/// A snapshot of the kernel's tables as resolution reads them.
#[derive(Clone, Debug, Default)]
pub struct KernelView {
    pub config: ResolveConfig,
    /// The resolution tables, by table id.
    pub tables: HashMap<u32, Lpm>,
    /// Nexthop objects of other protocols (routes may name them).
    pub nexthops: HashMap<u32, NexthopSpec>,
    /// Interface names, by index.
    pub links: HashMap<u32, String>,
    /// Counts up with every snapshot published.
    pub version: u64,
}

impl KernelView {
    pub fn new(config: ResolveConfig) -> KernelView {
        let tables = config.tables.iter().map(|t| (*t, Lpm::default())).collect();
        KernelView {
            config,
            tables,
            ..KernelView::default()
        }
    }

    /// Applies a route notification or dump entry: kept if it is in a resolution table and
    /// not ours; `gone` for a deletion.
    pub fn apply_route(&mut self, r: &RouteMsg, gone: bool) {
        if r.protocol == self.config.own_protocol || r.src_len != 0 || r.tos != 0 {
            return;
        }
        let Some(t) = self.tables.get_mut(&r.table) else {
            return;
        };
        if gone {
            t.remove(&r.dst, r.priority);
        } else {
            t.insert(
                &r.dst,
                KernelRoute {
                    priority: r.priority,
                    kind: r.kind,
                    protocol: r.protocol,
                    next: r.next.clone(),
                },
            );
        }
    }

    /// Routes kept, all tables.
    pub fn routes(&self) -> usize {
        self.tables.values().map(Lpm::len).sum()
    }

    /// How a next hop resolves: the first table (in order) with a route covering it
    /// decides; a `throw` route passes on to the next table.
    pub fn resolve(&self, addr: IpAddr) -> Resolved {
        let skip_default = !self.config.via_default;
        for t in &self.config.tables {
            let Some(lpm) = self.tables.get(t) else {
                continue;
            };
            let Some((prefix, r)) = lpm.lookup(addr, skip_default) else {
                continue;
            };
            let via = match r.kind {
                RTN_LOCAL => Via::Local,
                RTN_UNICAST => self.hops(addr, &r.next),
                RTN_THROW => continue,
                RTN_BLACKHOLE | RTN_UNREACHABLE | RTN_PROHIBIT => Via::Unreachable,
                // Broadcast, multicast, anycast: not a way to a neighbor.
                _ => continue,
            };
            if via == Via::Unreachable {
                return Resolved::UNREACHABLE;
            }
            return Resolved {
                via,
                metric: r.priority,
                route: Some((*t, prefix)),
            };
        }
        Resolved::UNREACHABLE
    }

    /// The ways out of a route towards `addr`: a hop without a gateway is a directly
    /// connected network, reached with `addr` itself as the gateway.
    fn hops(&self, addr: IpAddr, next: &RouteNext) -> Via {
        let fill = |h: &Hop| Hop {
            gateway: Some(h.gateway.unwrap_or(addr)),
            ifindex: h.ifindex,
            weight: h.weight,
        };
        let hops: SmallVec<[Hop; 2]> = match next {
            RouteNext::None => SmallVec::new(),
            RouteNext::Via(h) => std::iter::once(fill(h)).collect(),
            RouteNext::Multipath(hs) => hs.iter().map(fill).collect(),
            RouteNext::Object(id) => match self.nexthops.get(id) {
                Some(NexthopSpec::Leaf(h)) => std::iter::once(fill(h)).collect(),
                Some(NexthopSpec::Group(members)) => members
                    .iter()
                    .filter_map(|(m, w)| match self.nexthops.get(m) {
                        Some(NexthopSpec::Leaf(h)) => Some(Hop {
                            weight: *w,
                            ..fill(h)
                        }),
                        _ => None,
                    })
                    .collect(),
                Some(NexthopSpec::Blackhole) | None => SmallVec::new(),
            },
        };
        if hops.is_empty() {
            Via::Unreachable
        } else {
            Via::Hops(hops)
        }
    }

    /// Whether a route of another protocol, other than a default route, equal to or
    /// covering `p` is in a resolution table (`[[bgp.originate]]` with `when =
    /// "covering-route"`).
    pub fn covered(&self, p: &Prefix) -> bool {
        self.config
            .tables
            .iter()
            .filter_map(|t| self.tables.get(t))
            .any(|l| l.covers(p))
    }

    pub fn link_name(&self, ifindex: u32) -> Option<&str> {
        self.links.get(&ifindex).map(String::as_str)
    }
}

/// The published snapshot, read by shards (as [`ribshard_rib::Resolver`]) and the FIB
/// writer without locks.
#[derive(Debug)]
pub struct Published {
    current: arc_swap::ArcSwap<KernelView>,
}

impl Published {
    pub fn new(view: KernelView) -> Published {
        Published {
            current: arc_swap::ArcSwap::from_pointee(view),
        }
    }

    pub fn load(&self) -> Arc<KernelView> {
        self.current.load_full()
    }

    pub fn publish(&self, view: KernelView) {
        self.current.store(Arc::new(view));
    }
}

impl ribshard_rib::Resolver for Published {
    fn resolve(&self, addr: IpAddr) -> Resolution {
        self.current.load().resolve(addr).resolution()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::route::RT_TABLE_MAIN;

    fn p(s: &str) -> Prefix {
        let (a, l) = s.split_once('/').unwrap();
        match a.parse::<IpAddr>().unwrap() {
            IpAddr::V4(a) => Prefix::v4(a, l.parse().unwrap()).unwrap(),
            IpAddr::V6(a) => Prefix::v6(a, l.parse().unwrap()).unwrap(),
        }
    }

    fn route(dst: &str, next: RouteNext, priority: u32, kind: u8) -> RouteMsg {
        RouteMsg {
            dst: p(dst),
            src_len: 0,
            tos: 0,
            table: RT_TABLE_MAIN,
            protocol: 4,
            scope: 0,
            kind,
            priority,
            next,
        }
    }

    fn via(gw: &str, ifindex: u32) -> RouteNext {
        RouteNext::Via(Hop {
            gateway: Some(gw.parse().unwrap()),
            ifindex,
            weight: 1,
        })
    }

    fn connected(ifindex: u32) -> RouteNext {
        RouteNext::Via(Hop {
            gateway: None,
            ifindex,
            weight: 1,
        })
    }

    #[test]
    fn longest_match_resolves_recursively_and_never_through_our_routes() {
        let mut v = KernelView::new(ResolveConfig::default());
        v.apply_route(&route("10.0.0.0/24", connected(2), 0, RTN_UNICAST), false);
        v.apply_route(
            &route("172.16.0.0/16", via("10.0.0.1", 2), 20, RTN_UNICAST),
            false,
        );
        v.apply_route(
            &route("172.16.5.0/24", via("10.0.0.9", 2), 30, RTN_UNICAST),
            false,
        );
        let r = v.resolve("172.16.5.7".parse().unwrap());
        assert_eq!(r.metric, 30);
        assert_eq!(
            r.via,
            Via::Hops(
                [Hop {
                    gateway: Some("10.0.0.9".parse().unwrap()),
                    ifindex: 2,
                    weight: 1
                }]
                .into_iter()
                .collect()
            )
        );
        // A connected network: the next hop is its own gateway.
        let r = v.resolve("10.0.0.5".parse().unwrap());
        assert!(
            matches!(&r.via, Via::Hops(h) if h[0].gateway == Some("10.0.0.5".parse().unwrap()))
        );
        // Ours never resolve.
        let mut own = route("192.168.0.0/16", connected(2), 0, RTN_UNICAST);
        own.protocol = 186;
        v.apply_route(&own, false);
        assert_eq!(
            v.resolve("192.168.1.1".parse().unwrap()).via,
            Via::Unreachable
        );
        // A default route counts only when configured to.
        v.apply_route(
            &route("0.0.0.0/0", via("10.0.0.1", 2), 0, RTN_UNICAST),
            false,
        );
        assert!(
            v.resolve("192.168.1.1".parse().unwrap())
                .resolution()
                .reachable
        );
        v.config.via_default = false;
        assert!(
            !v.resolve("192.168.1.1".parse().unwrap())
                .resolution()
                .reachable
        );
        // Removing the more specific route falls back to the covering one.
        v.apply_route(
            &route("172.16.5.0/24", RouteNext::None, 30, RTN_UNICAST),
            true,
        );
        assert_eq!(v.resolve("172.16.5.7".parse().unwrap()).metric, 20);
        // An unreachable route makes it unreachable.
        v.apply_route(
            &route("172.16.0.0/16", RouteNext::None, 20, RTN_UNREACHABLE),
            false,
        );
        assert_eq!(
            v.resolve("172.16.5.7".parse().unwrap()).via,
            Via::Unreachable
        );
    }

    #[test]
    fn lower_metric_wins_and_covering_routes_are_found() {
        let mut v = KernelView::new(ResolveConfig::default());
        v.apply_route(
            &route("2001:db8::/32", via("fe80::1", 3), 100, RTN_UNICAST),
            false,
        );
        v.apply_route(
            &route("2001:db8::/32", via("fe80::2", 4), 50, RTN_UNICAST),
            false,
        );
        let r = v.resolve("2001:db8::7".parse().unwrap());
        assert_eq!(r.metric, 50);
        assert!(v.covered(&p("2001:db8:1::/48")));
        assert!(!v.covered(&p("2001:db9::/48")));
        assert!(
            !v.covered(&p("2001::/16")),
            "a shorter prefix is not covered"
        );
    }
}
