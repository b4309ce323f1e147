//! Reading back what the kernel forwards with, and comparing it with what the Loc-RIB asks
//! (`ribshard fib verify`, `show route forwarding-table`): each route of ours in the table
//! with its ways out (through its nexthop object and group, when it names one), against
//! the ways out each prefix's next hops resolve to now.

use crate::kernel::{KernelView, Via};
use crate::netlink::route::{
    self, Hop, RouteMsg, RouteNext, RTN_BLACKHOLE, RTN_UNICAST, RTN_UNREACHABLE,
};
use crate::netlink::{
    nexthop, Builder, NexthopMsg, NexthopSpec, NlError, NlSocket, AF_INET, AF_INET6,
    RTM_NEWNEXTHOP, RTM_NEWROUTE,
};
use crate::objects::Want;
use hashbrown::HashMap;
use ribshard_wire::Prefix;
use std::collections::BTreeMap;

/// How a route forwards.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Forwarding {
    /// Out of these ways (sorted).
    Hops(Vec<Hop>),
    /// `unreachable` (import policy's `next-hop reject`).
    Reject,
    /// `blackhole` (`next-hop discard`).
    Discard,
    /// Nothing to forward to (a route naming a missing object, an empty group).
    Nothing,
}

/// A route of ours as the kernel holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFibRoute {
    pub prefix: Prefix,
    pub forwarding: Forwarding,
    /// The nexthop object it names, if any.
    pub object: Option<u32>,
    pub metric: u32,
}

/// Every route of `protocol` in `table`, with what it forwards to.
pub fn kernel_routes(table: u32, protocol: u8) -> Result<Vec<KernelFibRoute>, NlError> {
    let mut sock = NlSocket::open(&[])?;
    let mut b = Builder::default();
    let mut objects: HashMap<u32, NexthopSpec> = HashMap::new();
    nexthop::put_dump(&mut b, 1);
    if let Ok(all) = sock.dump(b.finish(), 1) {
        for (k, payload) in all {
            if k == RTM_NEWNEXTHOP {
                if let Some(n) = NexthopMsg::decode(&payload) {
                    objects.insert(n.id, n.spec);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (i, family) in [AF_INET, AF_INET6].into_iter().enumerate() {
        b.clear();
        let seq = 2 + i as u32;
        route::put_dump(&mut b, seq, family);
        for (k, payload) in sock.dump(b.finish(), seq)? {
            if k != RTM_NEWROUTE {
                continue;
            }
            let Some(r) = RouteMsg::decode(&payload) else {
                continue;
            };
            if r.table != table || r.protocol != protocol {
                continue;
            }
            out.push(KernelFibRoute {
                prefix: r.dst,
                forwarding: forwarding_of(&r, &objects),
                object: match r.next {
                    RouteNext::Object(id) => Some(id),
                    _ => None,
                },
                metric: r.priority,
            });
        }
    }
    out.sort_by_key(|r| r.prefix);
    Ok(out)
}

fn sorted(mut h: Vec<Hop>) -> Forwarding {
    if h.is_empty() {
        return Forwarding::Nothing;
    }
    // Weights are not compared: a group spreads by its members.
    for x in h.iter_mut() {
        x.weight = 1;
    }
    h.sort();
    h.dedup();
    Forwarding::Hops(h)
}

fn forwarding_of(r: &RouteMsg, objects: &HashMap<u32, NexthopSpec>) -> Forwarding {
    match r.kind {
        RTN_UNREACHABLE => return Forwarding::Reject,
        RTN_BLACKHOLE => return Forwarding::Discard,
        RTN_UNICAST => {}
        _ => return Forwarding::Nothing,
    }
    match &r.next {
        RouteNext::None => Forwarding::Nothing,
        RouteNext::Via(h) => sorted(vec![*h]),
        RouteNext::Multipath(m) => sorted(m.to_vec()),
        RouteNext::Object(id) => match objects.get(id) {
            Some(NexthopSpec::Leaf(h)) => sorted(vec![*h]),
            Some(NexthopSpec::Group(members)) => sorted(
                members
                    .iter()
                    .filter_map(|(m, _)| match objects.get(m) {
                        Some(NexthopSpec::Leaf(h)) => Some(*h),
                        _ => None,
                    })
                    .collect(),
            ),
            Some(NexthopSpec::Blackhole) => Forwarding::Discard,
            None => Forwarding::Nothing,
        },
    }
}

/// What a prefix wanting `want` should forward to, resolved through `view` now.
pub fn expected(view: &KernelView, want: &Want) -> Forwarding {
    match want {
        Want::Reject => Forwarding::Reject,
        Want::Discard => Forwarding::Discard,
        Want::Forward(nhs) => sorted(
            nhs.iter()
                .flat_map(|nh| match view.resolve(*nh).via {
                    Via::Hops(h) => h.to_vec(),
                    _ => Vec::new(),
                })
                .collect(),
        ),
    }
}

/// One way the kernel and the Loc-RIB disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    /// The Loc-RIB's best path asks for a route the kernel does not have.
    Missing { prefix: Prefix, want: Forwarding },
    /// The kernel has a route of ours the Loc-RIB does not ask for.
    Extra { prefix: Prefix, kernel: Forwarding },
    /// Both have it, forwarding differently.
    Different {
        prefix: Prefix,
        want: Forwarding,
        kernel: Forwarding,
    },
}

impl Difference {
    pub fn prefix(&self) -> Prefix {
        match self {
            Difference::Missing { prefix, .. }
            | Difference::Extra { prefix, .. }
            | Difference::Different { prefix, .. } => *prefix,
        }
    }
}

/// Compares the kernel's routes with what each prefix of the Loc-RIB wants (`wanted`:
/// prefix and what its best path asks, from the Loc-RIB itself). A prefix whose next hops
/// resolve to nothing is expected absent.
pub fn compare(
    view: &KernelView,
    wanted: &BTreeMap<Prefix, Want>,
    kernel: &[KernelFibRoute],
) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut held: BTreeMap<Prefix, &KernelFibRoute> = BTreeMap::new();
    for k in kernel {
        held.insert(k.prefix, k);
    }
    for (p, w) in wanted {
        let want = expected(view, w);
        match (held.remove(p), want) {
            (None, Forwarding::Nothing) => {}
            (None, want) => out.push(Difference::Missing { prefix: *p, want }),
            (Some(k), Forwarding::Nothing) => out.push(Difference::Extra {
                prefix: *p,
                kernel: k.forwarding.clone(),
            }),
            (Some(k), want) if k.forwarding != want => out.push(Difference::Different {
                prefix: *p,
                want,
                kernel: k.forwarding.clone(),
            }),
            (Some(_), _) => {}
        }
    }
    for (p, k) in held {
        out.push(Difference::Extra {
            prefix: p,
            kernel: k.forwarding.clone(),
        });
    }
    out.sort_by_key(Difference::prefix);
    out
}
