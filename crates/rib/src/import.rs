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
use ribshard_policy::{
    ApplyContext, Chain, Modified, NextHopSet, ReadsRpki, RpkiStates, SetMemo, Source, Subject,
    Trace, Verdict,
};
use ribshard_rpki::{Direction, Snapshot};
use ribshard_wire::attr;
use ribshard_wire::attributes::AttrValue;
use ribshard_wire::update::RawAttrIter;
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
    /// The peer is our provider (our BGP role is customer): `aspa-state` verifies its
    /// routes with ASPA's downstream procedure, everyone else's with the upstream one.
    pub from_provider: bool,
}

impl Import {
    /// Everything accepted unchanged: the default of internal sessions, and tests.
    pub fn accept_all(source: Source) -> Import {
        Import {
            chain: Arc::new(Chain::accept_all()),
            source,
            own_as: 0,
            local_address: None,
            from_provider: false,
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
/// exists the set's address cannot be reused (or the entry is dead), so it is a sound key.
#[derive(Default)]
pub(crate) struct ImportCache {
    by_set: HashMap<(PeerIndex, usize), (Weak<RouteAttrs>, Outcome)>,
    /// The set made keeps the received one alive (it is that set, or links to it): while it
    /// lives, the received set's address is a sound key.
    by_trace: HashMap<(PeerIndex, usize, Trace), Derived>,
    sweep_at: usize,
    /// Where changed keys are built.
    scratch: Vec<u8>,
    /// The last result: an UPDATE's prefixes arrive one after another with one set, and
    /// this answers them without hashing or touching the cache's weak references. Holds the
    /// set made (and so the received one) until the next result, a policy change or a peer
    /// going down.
    last: Option<Last>,
    /// A chain that reads the prefix still answers its conditions on the attributes once
    /// per received set: the memo of those answers, and the set it is for (held, so that
    /// the address the memo knows it by is not given to another set meanwhile).
    memo: SetMemo,
    memo_for: Option<Arc<RouteAttrs>>,
    /// What the RPKI states of the last received set were, apart from the prefix: its
    /// origin AS and ASPA state (per snapshot version and ASPA procedure). The routes of an
    /// UPDATE share their set, so a path is parsed and verified once for all of them.
    rpki_last: Option<RpkiLast>,
}

struct RpkiLast {
    set: Arc<RouteAttrs>,
    version: u64,
    from_provider: bool,
    own_as: u32,
    origin: Option<u32>,
    aspa: Option<ribshard_rpki::AspaState>,
}

/// The set made keeps the received one alive (it is that set, or links to it), so the
/// received set's address is a sound key while this holds it.
struct Last {
    peer: PeerIndex,
    received: usize,
    trace: Option<Trace>,
    made: Arc<RouteAttrs>,
    rejected: bool,
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
        self.by_trace.retain(|_, d| d.strong_count() > 0);
        self.sweep_at = 2 * (self.by_set.len() + self.by_trace.len());
    }

    /// The last result, when it was for this peer, received set and trace (`None`: a
    /// chain that reads nothing of the prefix).
    fn last_of(
        &self,
        peer: PeerIndex,
        received: &Arc<RouteAttrs>,
        trace: Option<Trace>,
    ) -> Option<(Arc<RouteAttrs>, bool)> {
        self.last
            .as_ref()
            .filter(|l| {
                l.peer == peer && l.trace == trace && l.received == Arc::as_ptr(received) as usize
            })
            .map(|l| (l.made.clone(), l.rejected))
    }

    fn remember(
        &mut self,
        peer: PeerIndex,
        received: &Arc<RouteAttrs>,
        trace: Option<Trace>,
        out: &(Arc<RouteAttrs>, bool),
    ) {
        self.last = Some(Last {
            peer,
            received: Arc::as_ptr(received) as usize,
            trace,
            made: out.0.clone(),
            rejected: out.1,
        });
    }

    /// Lets go of the sets the last result holds.
    pub(crate) fn forget_last(&mut self) {
        self.last = None;
        self.rpki_last = None;
        self.forget_memo();
    }

    fn forget_memo(&mut self) {
        self.memo.clear();
        self.memo_for = None;
    }

    /// The memo of answers on `received`'s attributes, emptied if it was for another set.
    fn memo_of(&mut self, received: &Arc<RouteAttrs>) -> &mut SetMemo {
        if !self
            .memo_for
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, received))
        {
            self.memo.clear();
            self.memo_for = Some(received.clone());
        }
        &mut self.memo
    }

    /// Forgets a peer's results (its policy changed).
    pub(crate) fn forget(&mut self, peer: PeerIndex) {
        self.last = None;
        self.rpki_last = None;
        // The memo knows a chain by its address, which a new policy's chain may take.
        self.forget_memo();
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
    rpki: Option<&Snapshot>,
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
        if let Some(out) = cache.last_of(peer, received, None) {
            return out;
        }
        let hit = match cache.by_set.get(&(peer, ptr)) {
            Some((_, Outcome::Rejected)) => Some((received.clone(), true)),
            Some((_, Outcome::Unchanged)) => Some((received.clone(), false)),
            Some((_, Outcome::Changed(d))) => d.upgrade().map(|d| (d, false)),
            None => None,
        };
        if let Some(out) = hit {
            cache.remember(peer, received, None, &out);
            return out;
        }
    }
    cache.sweep_if_due();
    let subject = Subject {
        prefix: prefix.masked(),
        attrs: received.raw(),
        next_hop: received.next_hop(),
        source: &imp.source,
        receiver_as: None,
        rpki: match (chain.reads_rpki(), rpki) {
            (reads, Some(r)) if reads.any() => {
                cached_states(imp, received, prefix, r, reads, &mut cache.rpki_last)
            }
            _ => RpkiStates::default(),
        },
    };
    let v = if by_set {
        chain.evaluate(&subject)
    } else {
        chain.evaluate_memo(&subject, cache.memo_of(received))
    };
    if !v.accept || v.trace.is_empty() {
        let out = (received.clone(), !v.accept);
        if by_set {
            let o = match v.accept {
                false => Outcome::Rejected,
                true => Outcome::Unchanged,
            };
            cache
                .by_set
                .insert((peer, ptr), (Arc::downgrade(received), o));
            cache.remember(peer, received, None, &out);
        }
        return out;
    }
    let trace = (!by_set).then_some(v.trace);
    if let Some(t) = trace {
        if let Some(out) = cache.last_of(peer, received, trace) {
            return out;
        }
        if let Some(d) = cache.by_trace.get(&(peer, ptr, t)).and_then(Weak::upgrade) {
            let out = (d, false);
            cache.remember(peer, received, trace, &out);
            return out;
        }
    }
    let (key, edited) = match raw_key(chain, &v, received, &mut cache.scratch) {
        Some(k) => (k, true),
        None => {
            let m = chain.apply(
                &v,
                &subject,
                received.attributes(),
                &ApplyContext { own_as: imp.own_as },
            );
            (changed_key(&m, received, imp, prefix.family()), false)
        }
    };
    let made = if key[..] == *received.key() {
        received.clone()
    } else if edited {
        Arc::new(RouteAttrs::edited(key, received))
    } else {
        Arc::new(RouteAttrs::derived(key, received))
    };
    match trace {
        Some(t) => {
            cache.by_trace.insert((peer, ptr, t), Arc::downgrade(&made));
        }
        None => {
            let o = Outcome::Changed(Arc::downgrade(&made));
            cache
                .by_set
                .insert((peer, ptr), (Arc::downgrade(received), o));
        }
    }
    let out = (made, false);
    cache.remember(peer, received, trace, &out);
    out
}

/// The RPKI states of a route the chain reads: origin validation (RFC 6811) and ASPA. The
/// parts that depend on the attribute set alone (its origin AS, its ASPA state) are taken
/// from the last set's when the route shares it: the routes of an UPDATE do.
fn cached_states(
    imp: &Import,
    received: &Arc<RouteAttrs>,
    prefix: &Prefix,
    rpki: &Snapshot,
    reads: ReadsRpki,
    last: &mut Option<RpkiLast>,
) -> RpkiStates {
    let hit = last.as_ref().filter(|l| {
        Arc::ptr_eq(&l.set, received)
            && l.version == rpki.version
            && l.from_provider == imp.from_provider
            && l.own_as == imp.own_as
            && (l.aspa.is_some() || !reads.aspa)
    });
    let (origin, aspa) = match hit {
        Some(l) => (l.origin, l.aspa),
        None => {
            let (ases, has_set, origin) = as_path(received.raw(), imp.own_as);
            let aspa = reads.aspa.then(|| {
                let dir = match imp.from_provider {
                    true => Direction::Downstream,
                    false => Direction::Upstream,
                };
                rpki.aspas.verify(&ases, has_set, dir)
            });
            *last = Some(RpkiLast {
                set: received.clone(),
                version: rpki.version,
                from_provider: imp.from_provider,
                own_as: imp.own_as,
                origin,
                aspa,
            });
            (origin, aspa)
        }
    };
    RpkiStates {
        validity: reads.validity.then(|| rpki.vrps.validate(prefix, origin)),
        aspa,
    }
}

/// The AS_PATH (4-octet ASes) of interned attribute bytes as ASPA reads it: its
/// AS_SEQUENCE ASes neighbor first, whether it has an AS_SET, and the origin AS as RFC 6811
/// section 2 defines it: the last AS of a final AS_SEQUENCE, none (NONE) after an AS_SET,
/// our own AS for an empty path. Confederation segments are left out.
pub(crate) fn as_path(raw: &[u8], own_as: u32) -> (Vec<u32>, bool, Option<u32>) {
    use ribshard_wire::update::segment;
    let path = RawAttrIter::new(raw)
        .find(|a| a.type_code == attr::AS_PATH)
        .map_or(&[][..], |a| a.value);
    let mut ases = Vec::new();
    let mut has_set = false;
    let mut last_set = false;
    let mut at = 0usize;
    while let (Some(&kind), Some(&count)) = (path.get(at), path.get(at + 1)) {
        let body = path
            .get(at + 2..at + 2 + 4 * usize::from(count))
            .unwrap_or(&[]);
        match kind {
            segment::AS_SEQUENCE => {
                ases.extend(
                    body.chunks_exact(4)
                        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])),
                );
                last_set = false;
            }
            segment::AS_SET => {
                has_set = true;
                last_set = true;
            }
            _ => {}
        }
        at += 2 + 4 * usize::from(count);
    }
    let origin = match (last_set, ases.last()) {
        (true, _) => None,
        (false, Some(a)) => Some(*a),
        (false, None) => Some(own_as),
    };
    (ases, has_set, origin)
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

/// The key of a changed set made on the attribute bytes ([`Chain::apply_raw`]: the common
/// actions, without decoding), when the actions allow it and the set's NEXT_HOP attribute
/// is its next hop (else [`changed_key`] writes the one into the other).
fn raw_key(
    chain: &Chain,
    v: &Verdict,
    received: &RouteAttrs,
    scratch: &mut Vec<u8>,
) -> Option<Box<[u8]>> {
    let nh = received.next_hop();
    let raw = received.raw();
    let agrees = RawAttrIter::new(raw)
        .find(|a| a.type_code == attr::NEXT_HOP)
        .is_none_or(|a| nh.len() != 4 || a.value == nh);
    if !agrees {
        return None;
    }
    // Built in the cache's buffer, then copied once at its size.
    scratch.clear();
    push_next_hop(scratch, nh);
    chain.apply_raw(v, raw, scratch)?;
    Some(Box::from(&scratch[..]))
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
