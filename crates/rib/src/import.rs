//! Import policy, applied in the shard to each path before the decision process. The
//! Adj-RIB-In keeps the path as received; a path the policy changes points at a set made
//! from the received one ([`RouteAttrs::received`]), a path it rejects is kept, marked, and
//! never chosen, so a new policy can be applied again without asking the peer.
//!
//! Results are cached per (peer, received set) when the chain reads nothing of the prefix,
//! else per (peer, received set, trace of the terms whose actions applied): either way a
//! changed set is made once and shared by every path it fits, as interning shares received
//! sets.

use crate::attrs::{push_next_hop, RouteAttrs, NH_DISCARD, NH_REJECT, NORMALIZED};
use crate::shard::PeerIndex;
use hashbrown::HashMap;
use ribshard_policy::{ApplyContext, Chain, Modified, NextHopSet, Source, Subject, Trace};
use ribshard_wire::attr;
use ribshard_wire::attributes::AttrValue;
use ribshard_wire::{Family, Prefix};
use std::net::IpAddr;
use std::sync::{Arc, Weak};

/// A peer's import policy, with what its actions need to know of the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    pub chain: Arc<Chain>,
    /// The peer, as `from neighbor`, `peer-as` and `route-type` see it.
    pub source: Source,
    /// Our AS on the session (`as-path-prepend N`).
    pub own_as: u32,
    /// Our address on the session (`next-hop self`).
    pub local_address: Option<IpAddr>,
}

impl Import {
    /// Everything accepted unchanged: the default of internal sessions, and tests.
    pub fn accept_all(source: Source) -> Import {
        Import {
            chain: Arc::new(Chain::accept_all()),
            source,
            own_as: 0,
            local_address: None,
        }
    }
}

/// What the chain made of one received set, when that does not depend on the prefix.
#[derive(Clone, Debug)]
enum Outcome {
    Rejected,
    Unchanged,
    Changed(Weak<RouteAttrs>),
}

/// A set made from a received one.
type Derived = Weak<RouteAttrs>;

/// Sets are held weakly: a cache entry never keeps a set alive, and while the entry
/// exists the set's address cannot be reused, so it is a sound key.
#[derive(Default)]
pub(crate) struct ImportCache {
    by_set: HashMap<(PeerIndex, usize), (Weak<RouteAttrs>, Outcome)>,
    by_trace: HashMap<(PeerIndex, usize, Trace), (Weak<RouteAttrs>, Derived)>,
    sweep_at: usize,
}

impl ImportCache {
    fn sweep_if_due(&mut self) {
        let n = self.by_set.len() + self.by_trace.len();
        if n < self.sweep_at.max(4096) {
            return;
        }
        self.by_set.retain(|_, (w, o)| {
            w.strong_count() > 0 && !matches!(o, Outcome::Changed(d) if d.strong_count() == 0)
        });
        self.by_trace
            .retain(|_, (w, d)| w.strong_count() > 0 && d.strong_count() > 0);
        self.sweep_at = 2 * (self.by_set.len() + self.by_trace.len());
    }

    /// Forgets a peer's results (its policy changed).
    pub(crate) fn forget(&mut self, peer: PeerIndex) {
        self.by_set.retain(|k, _| k.0 != peer);
        self.by_trace.retain(|k, _| k.0 != peer);
    }
}

/// The set a path gets, and whether the policy rejected it.
pub(crate) fn apply(
    imp: &Import,
    peer: PeerIndex,
    received: &Arc<RouteAttrs>,
    prefix: &Prefix,
    cache: &mut ImportCache,
) -> (Arc<RouteAttrs>, bool) {
    let chain = &imp.chain;
    if chain.accepts_everything() {
        return (received.clone(), false);
    }
    if chain.rejects_everything() {
        return (received.clone(), true);
    }
    let ptr = Arc::as_ptr(received) as usize;
    let by_set = !chain.reads_prefix();
    if by_set {
        if let Some((_, o)) = cache.by_set.get(&(peer, ptr)) {
            match o {
                Outcome::Rejected => return (received.clone(), true),
                Outcome::Unchanged => return (received.clone(), false),
                Outcome::Changed(d) => {
                    if let Some(d) = d.upgrade() {
                        return (d, false);
                    }
                }
            }
        }
    }
    cache.sweep_if_due();
    let subject = Subject {
        prefix: prefix.masked(),
        attrs: received.raw(),
        next_hop: received.next_hop(),
        source: &imp.source,
        receiver_as: None,
    };
    let v = chain.evaluate(&subject);
    let (out, outcome) = if !v.accept {
        ((received.clone(), true), Outcome::Rejected)
    } else if v.trace.is_empty() {
        ((received.clone(), false), Outcome::Unchanged)
    } else {
        let made = match cache
            .by_trace
            .get(&(peer, ptr, v.trace))
            .and_then(|(_, d)| d.upgrade())
        {
            Some(d) => d,
            None => {
                let m = chain.apply(
                    &v,
                    &subject,
                    received.attributes(),
                    &ApplyContext { own_as: imp.own_as },
                );
                let key = changed_key(&m, received, imp, prefix.family());
                let d = if key[..] == *received.key() {
                    received.clone()
                } else {
                    Arc::new(RouteAttrs::derived(key, received))
                };
                cache.by_trace.insert(
                    (peer, ptr, v.trace),
                    (Arc::downgrade(received), Arc::downgrade(&d)),
                );
                d
            }
        };
        let o = Outcome::Changed(Arc::downgrade(&made));
        ((made, false), o)
    };
    if by_set {
        cache
            .by_set
            .insert((peer, ptr), (Arc::downgrade(received), outcome));
    }
    out
}

/// An address as a next hop of this family: IPv4 as is or from a mapped IPv6 address, IPv6
/// as is or an IPv4 address mapped.
pub fn next_hop_bytes(a: IpAddr, family: Family) -> Option<Vec<u8>> {
    match (family, a) {
        (Family::Ipv4Unicast, IpAddr::V4(v4)) => Some(v4.octets().to_vec()),
        (Family::Ipv4Unicast, IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(|v| v.octets().to_vec()),
        (Family::Ipv6Unicast, IpAddr::V6(v6)) => Some(v6.octets().to_vec()),
        (Family::Ipv6Unicast, IpAddr::V4(v4)) => Some(v4.to_ipv6_mapped().octets().to_vec()),
    }
}

/// The interning key of a changed set: its next hop (as the policy set it, where it can be
/// written in the family), then the attributes.
fn changed_key(m: &Modified, received: &RouteAttrs, imp: &Import, family: Family) -> Box<[u8]> {
    let address = |a: Option<IpAddr>| a.and_then(|a| next_hop_bytes(a, family));
    let nh: Vec<u8> = match m.next_hop {
        None => received.next_hop().to_vec(),
        Some(NextHopSet::Reject) => vec![NH_REJECT],
        Some(NextHopSet::Discard) => vec![NH_DISCARD],
        Some(NextHopSet::Address(a)) => {
            address(Some(a)).unwrap_or_else(|| received.next_hop().to_vec())
        }
        Some(NextHopSet::OurAddress) => {
            address(imp.local_address).unwrap_or_else(|| received.next_hop().to_vec())
        }
        Some(NextHopSet::PeerAddress) => {
            address(Some(imp.source.address)).unwrap_or_else(|| received.next_hop().to_vec())
        }
    };
    let mut attrs = m.attrs.clone();
    if let (Ok(v4), Some(_)) = (<[u8; 4]>::try_from(&nh[..]), attrs.get(attr::NEXT_HOP)) {
        attrs.set(AttrValue::NextHop(v4.into()));
    }
    let mut key = Vec::with_capacity(64 + received.raw().len());
    push_next_hop(&mut key, &nh);
    for a in &attrs.list {
        let code = a.value.type_code();
        if code != attr::MP_REACH_NLRI && code != attr::MP_UNREACH_NLRI {
            a.encode(&NORMALIZED, &mut key);
        }
    }
    key.into_boxed_slice()
}
