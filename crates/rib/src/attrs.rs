//! Interned attribute sets. A path in a shard points at one [`RouteAttrs`]; every prefix and
//! path with the same attributes and next hop shares it (a real full table has about one
//! distinct set per three prefixes).
//!
//! A set is kept as bytes, normalized so that sets from any session compare equal: the next
//! hop, then the path attributes in the 4-octet AS encoding (RFC 6793, AS4_PATH merged in),
//! without MP_REACH_NLRI / MP_UNREACH_NLRI (they carry prefixes, not attributes) and without
//! attributes discarded under RFC 7606. The decision inputs are read from it once, when a set
//! is first seen; export decodes the bytes once per update group (see [`crate::export`]).

use ribshard_wire::attr::{self, flags};
use ribshard_wire::attributes::{AsPath, AsSegment, AttrValue, PathAttributes};
use ribshard_wire::update::{segment, AttrsView, RawAttrIter};
use ribshard_wire::{parse_attributes_only, SessionParams};
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Import checks that depend only on the attribute set and the session it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoopChecks {
    /// Our AS towards the peer.
    pub local_as: u32,
    /// A path is refused when our AS appears this many times or more (Junos `loops`;
    /// default 1: any appearance).
    pub loops: u8,
    /// Our BGP Identifier: a reflected path carrying it as ORIGINATOR_ID is ours (RFC 4456
    /// section 8).
    pub router_id: u32,
    /// Our cluster ids: a CLUSTER_LIST holding one of them is a reflection loop (RFC 4456
    /// section 8).
    pub cluster_ids: Vec<u32>,
    /// Our global AS when `local_as` is a Junos `local-as` other than it: a path holding
    /// either is ours.
    pub global_as: Option<u32>,
    /// The path starts with our local AS, put there on receipt ([`Ingress::prepend`]): that
    /// occurrence is not a loop.
    pub prepended: bool,
}

/// Why a path loops back to us; each is counted apart for BMP (RFC 7854 section 4.8, stat
/// types 3 to 5). One octet of flags: kept on every interned set, three `bool`s made the set
/// 8 octets larger (96, and 16 more in its allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loops(u8);

impl Loops {
    pub const NONE: Loops = Loops(0);
    const AS_PATH: u8 = 1;
    const ORIGINATOR_ID: u8 = 2;
    const CLUSTER_LIST: u8 = 4;

    /// From its three reasons: our AS in the AS_PATH, as often as `loops` allows or more
    /// (RFC 4271 section 9.1.2); our BGP Identifier as ORIGINATOR_ID and one of our cluster
    /// ids in the CLUSTER_LIST (RFC 4456 section 8).
    pub fn new(as_path: bool, originator_id: bool, cluster_list: bool) -> Loops {
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        Loops(
            flag(as_path, Self::AS_PATH)
                | flag(originator_id, Self::ORIGINATOR_ID)
                | flag(cluster_list, Self::CLUSTER_LIST),
        )
    }

    pub fn as_path(self) -> bool {
        self.0 & Self::AS_PATH != 0
    }

    pub fn originator_id(self) -> bool {
        self.0 & Self::ORIGINATOR_ID != 0
    }

    pub fn cluster_list(self) -> bool {
        self.0 & Self::CLUSTER_LIST != 0
    }

    /// Whether the path loops at all.
    pub fn any(self) -> bool {
        self.0 != 0
    }

    /// Every reason of either.
    pub fn or(self, other: Loops) -> Loops {
        Loops(self.0 | other.0)
    }
}

/// What a session changes in an attribute set as it takes it in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ingress {
    /// RFC 9234 section 5: an OTC attribute of this AS, for a path from a provider, peer or
    /// route server that has none.
    pub otc: Option<u32>,
    /// Junos `local-as` (without `private`): this AS put at the front of the AS_PATH, so the
    /// path looks as if it came through the local AS.
    pub prepend: Option<u32>,
}

/// An interned attribute set with the decision inputs read from it once.
#[derive(Debug)]
pub struct RouteAttrs {
    /// One octet of next-hop length, the next hop, then the normalized attributes.
    key: Box<[u8]>,
    /// LOCAL_PREF as received (iBGP only: RFC 7606 discards it from eBGP sessions).
    pub local_pref: Option<u32>,
    /// AS_PATH length for the decision process (AS_SET counts one, confederation segments
    /// zero).
    pub as_path_len: u32,
    /// ORIGIN as 0 (IGP), 1 (EGP), 2 (INCOMPLETE); a missing ORIGIN counts as INCOMPLETE.
    pub origin: u8,
    /// MULTI_EXIT_DISC; a missing one counts as 0 (RFC 4271 section 9.1.2.2 c).
    pub med: u32,
    /// First AS of the first AS_SEQUENCE; `None` for an empty path (a route of our own AS).
    pub neighbor_as: Option<u32>,
    pub originator_id: Option<u32>,
    pub cluster_list_len: u32,
    /// Why the path loops, if it does: it then stays in the Adj-RIB-In but is never eligible.
    pub loops: Loops,
    /// Carries LLGR_STALE (RFC 9494 section 4.5): the least preferred of paths, and never
    /// sent to a neighbor without long-lived graceful restart.
    pub llgr_stale: bool,
    /// Carries NO_LLGR (RFC 9494 section 4.2): dropped, not kept, when long-lived stale.
    pub no_llgr: bool,
    /// The set as received, when this one is what import policy made of it: the Adj-RIB-In
    /// is kept before policy, so a policy change can be applied again to what was received.
    pub received: Option<Arc<RouteAttrs>>,
    /// What the set exports to, for one way of exporting, shared by the shards.
    pub(crate) export: crate::export::ExportSlot,
}

impl PartialEq for RouteAttrs {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for RouteAttrs {}
impl Hash for RouteAttrs {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.key.hash(h)
    }
}

/// The decoding parameters of normalized attribute bytes.
pub const NORMALIZED: SessionParams = SessionParams {
    four_octet_as: true,
    extended_message: true,
    add_path: [false; 2],
    external: false,
    mrt_rib: true,
    live: false,
};

impl RouteAttrs {
    /// Whether the path does not loop back to us ([`Loops`]).
    pub fn loop_free(&self) -> bool {
        !self.loops.any()
    }

    /// The next hop as received: 4 octets (IPv4), 16 or 32 (IPv6 global and link-local).
    pub fn next_hop(&self) -> &[u8] {
        let n = usize::from(self.key.first().copied().unwrap_or(0));
        self.key.get(1..1 + n).unwrap_or(&[])
    }

    /// The normalized attributes (4-octet AS encoding, no MP attributes).
    pub fn raw(&self) -> &[u8] {
        let n = usize::from(self.key.first().copied().unwrap_or(0));
        self.key.get(1 + n..).unwrap_or(&[])
    }

    /// The key this set is interned under.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Decodes the attributes into the owned model (for export and display).
    pub fn attributes(&self) -> PathAttributes {
        match parse_attributes_only(self.raw(), &NORMALIZED) {
            Ok(p) => PathAttributes::from_view(&p.attrs, &NORMALIZED),
            Err(_) => PathAttributes::default(),
        }
    }

    /// Builds a set from its key (next hop and normalized attributes).
    pub fn from_key(key: Box<[u8]>, checks: &LoopChecks) -> RouteAttrs {
        let mut a = RouteAttrs {
            key,
            local_pref: None,
            as_path_len: 0,
            origin: 2,
            med: 0,
            neighbor_as: None,
            originator_id: None,
            cluster_list_len: 0,
            loops: Loops::NONE,
            llgr_stale: false,
            no_llgr: false,
            received: None,
            export: Default::default(),
        };
        let n = usize::from(a.key.first().copied().unwrap_or(0));
        let Ok(p) = parse_attributes_only(a.key.get(1 + n..).unwrap_or(&[]), &NORMALIZED) else {
            return a;
        };
        let v = &p.attrs;
        a.local_pref = v.local_pref;
        a.origin = v.origin.map_or(2, |o| o as u8);
        a.med = v.med.unwrap_or(0);
        let mut own = 0usize;
        if let Some(path) = v.as_path {
            a.as_path_len = path.path_len() as u32;
            a.neighbor_as = path
                .segments()
                .next()
                .filter(|s| s.kind == segment::AS_SEQUENCE)
                .and_then(|s| s.asns().next());
            own = path
                .segments()
                .map(|s| {
                    s.asns()
                        .filter(|&x| x == checks.local_as || Some(x) == checks.global_as)
                        .count()
                })
                .sum();
            if checks.prepended {
                own = own.saturating_sub(1);
            }
        }
        a.originator_id = v.originator_id.map(u32::from);
        (a.llgr_stale, a.no_llgr) = llgr_communities(v.communities.unwrap_or(&[]));
        let clusters: Vec<u32> = v
            .cluster_list
            .unwrap_or(&[])
            .chunks_exact(4)
            .filter_map(|c| c.try_into().ok().map(u32::from_be_bytes))
            .collect();
        a.cluster_list_len = clusters.len() as u32;
        a.loops = Loops::new(
            own >= usize::from(checks.loops.max(1)),
            a.originator_id == Some(checks.router_id),
            clusters.iter().any(|c| checks.cluster_ids.contains(c)),
        );
        a
    }

    /// A set import policy made of `received`: its own decision inputs, but a loop is judged
    /// on what was received (a policy prepending our AS does not make a path loop).
    pub fn derived(key: Box<[u8]>, received: &Arc<RouteAttrs>) -> RouteAttrs {
        let mut a = RouteAttrs::from_key(key, &LoopChecks::default());
        a.loops = received.loops;
        a.received = Some(received.clone());
        a
    }

    /// [`RouteAttrs::derived`] for a set whose actions changed only LOCAL_PREF, MED, ORIGIN
    /// or communities ([`ribshard_policy::Chain::apply_raw`]): the other decision inputs are
    /// the received set's, so only those three are read from the key, without a parse.
    pub fn edited(key: Box<[u8]>, received: &Arc<RouteAttrs>) -> RouteAttrs {
        let (mut local_pref, mut med, mut origin) = (None, 0, 2);
        let mut llgr = (false, false);
        let n = usize::from(key.first().copied().unwrap_or(0));
        let u32_of = |v: &[u8]| <[u8; 4]>::try_from(v).ok().map(u32::from_be_bytes);
        for x in RawAttrIter::new(key.get(1 + n..).unwrap_or(&[])) {
            match x.type_code {
                attr::LOCAL_PREF => local_pref = u32_of(x.value),
                attr::MULTI_EXIT_DISC => med = u32_of(x.value).unwrap_or(0),
                attr::ORIGIN => origin = x.value.first().copied().filter(|o| *o <= 2).unwrap_or(2),
                attr::COMMUNITIES => llgr = llgr_communities(x.value),
                _ => {}
            }
        }
        RouteAttrs {
            key,
            local_pref,
            as_path_len: received.as_path_len,
            origin,
            med,
            neighbor_as: received.neighbor_as,
            originator_id: received.originator_id,
            cluster_list_len: received.cluster_list_len,
            loops: received.loops,
            llgr_stale: llgr.0,
            no_llgr: llgr.1,
            received: Some(received.clone()),
            export: Default::default(),
        }
    }

    /// This set with LLGR_STALE added (RFC 9494 section 4.2): what a long-lived stale path
    /// carries, is decided with (least preferred) and is advertised with. The other decision
    /// inputs are this set's; a policy change applied again to what was received makes it
    /// a plain stale path (the community is not in what was received).
    pub fn long_lived_stale(self: &Arc<Self>) -> RouteAttrs {
        let mut attrs = self.attributes();
        let mut communities = attrs.communities().to_vec();
        if !communities.contains(&LLGR_STALE) {
            communities.push(LLGR_STALE);
        }
        attrs.set(ribshard_wire::attributes::AttrValue::Communities(
            communities,
        ));
        let mut key = Vec::with_capacity(self.key.len() + 8);
        push_next_hop(&mut key, self.next_hop());
        attrs.encode(&NORMALIZED, &mut key);
        RouteAttrs {
            key: key.into_boxed_slice(),
            local_pref: self.local_pref,
            as_path_len: self.as_path_len,
            origin: self.origin,
            med: self.med,
            neighbor_as: self.neighbor_as,
            originator_id: self.originator_id,
            cluster_list_len: self.cluster_list_len,
            loops: self.loops,
            llgr_stale: true,
            no_llgr: self.no_llgr,
            received: Some(self.as_received().clone()),
            export: Default::default(),
        }
    }

    /// The set as received (itself, unless import policy changed it).
    pub fn as_received(self: &Arc<Self>) -> &Arc<RouteAttrs> {
        self.received.as_ref().unwrap_or(self)
    }

    /// A next hop import policy set to `reject` or `discard` (Junos): no address, one octet.
    pub fn next_hop_action(&self) -> Option<NextHopAction> {
        match self.next_hop() {
            [NH_REJECT] => Some(NextHopAction::Reject),
            [NH_DISCARD] => Some(NextHopAction::Discard),
            _ => None,
        }
    }

    /// Builds a set from the owned model (tests, locally originated routes).
    pub fn from_attributes(attrs: &PathAttributes, next_hop: &[u8], checks: &LoopChecks) -> Self {
        let mut key = Vec::with_capacity(64);
        push_next_hop(&mut key, next_hop);
        for a in &attrs.list {
            let code = a.value.type_code();
            if code != attr::MP_REACH_NLRI && code != attr::MP_UNREACH_NLRI {
                a.encode(&NORMALIZED, &mut key);
            }
        }
        RouteAttrs::from_key(key.into_boxed_slice(), checks)
    }
}

/// The one-octet next hops import policy's `next-hop reject` and `discard` leave in a set's
/// key (a received next hop has 4, 16 or 32 octets).
pub const NH_REJECT: u8 = 0;
pub const NH_DISCARD: u8 = 1;

/// Where traffic for a path whose next hop import policy replaced goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHopAction {
    /// Dropped, with an ICMP unreachable.
    Reject,
    /// Dropped silently.
    Discard,
}

/// RFC 9494 section 4.1: the LLGR_STALE and NO_LLGR communities.
pub const LLGR_STALE: u32 = 0xFFFF_0006;
pub const NO_LLGR: u32 = 0xFFFF_0007;

/// Whether a COMMUNITIES value holds LLGR_STALE, and NO_LLGR.
fn llgr_communities(value: &[u8]) -> (bool, bool) {
    let mut found = (false, false);
    for c in value.chunks_exact(4) {
        match c.try_into().map(u32::from_be_bytes) {
            Ok(LLGR_STALE) => found.0 = true,
            Ok(NO_LLGR) => found.1 = true,
            _ => {}
        }
    }
    found
}

pub(crate) fn push_next_hop(key: &mut Vec<u8>, next_hop: &[u8]) {
    let nh = next_hop.get(..32).unwrap_or(next_hop);
    key.push(nh.len() as u8);
    key.extend_from_slice(nh);
}

/// Writes the interning key of a received attribute set: the next hop, then the kept
/// attributes in the 4-octet encoding, without MP attributes.
pub fn normalized_key(
    view: &AttrsView<'_>,
    params: &SessionParams,
    next_hop: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    push_next_hop(out, next_hop);
    let needs_merge =
        !params.four_octet_as || view.has(attr::AS4_PATH) || view.has(attr::AS4_AGGREGATOR);
    if !needs_merge {
        // The common case: copy the kept attributes as they were received.
        for a in view.kept() {
            if a.type_code != attr::MP_REACH_NLRI && a.type_code != attr::MP_UNREACH_NLRI {
                a.encode(out);
            }
        }
        return;
    }
    // A 2-octet session, or AS4_* attributes: rebuild AS_PATH and AGGREGATOR as a 4-octet
    // speaker sees them (RFC 6793 section 4.2.3) and drop the AS4_* attributes.
    let mut owned = PathAttributes::from_view(view, params);
    let merged = view.reconstructed_as_path();
    if view.as_path.is_some() {
        owned.set(AttrValue::AsPath(AsPath {
            segments: merged
                .into_iter()
                .map(|(kind, asns)| AsSegment { kind, asns })
                .collect(),
        }));
    }
    if let (Some(AttrValue::As4Aggregator(a4)), Some(AttrValue::Aggregator(a))) = (
        owned.get(attr::AS4_AGGREGATOR).cloned(),
        owned.get(attr::AGGREGATOR),
    ) {
        if a.asn == ribshard_wire::types::AS_TRANS {
            owned.set(AttrValue::Aggregator(a4));
        }
    }
    owned.remove(attr::AS4_PATH);
    owned.remove(attr::AS4_AGGREGATOR);
    for a in &owned.list {
        let code = a.value.type_code();
        if code != attr::MP_REACH_NLRI && code != attr::MP_UNREACH_NLRI {
            a.encode(&NORMALIZED, out);
        }
    }
}

/// An interned set, looked up by its key bytes.
struct ByKey(Arc<RouteAttrs>);

impl PartialEq for ByKey {
    fn eq(&self, o: &Self) -> bool {
        self.0.key == o.0.key
    }
}
impl Eq for ByKey {}
impl Hash for ByKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // Must hash exactly as `[u8]` does, for `Borrow<[u8]>` lookups.
        self.0.key[..].hash(h)
    }
}
impl Borrow<[u8]> for ByKey {
    fn borrow(&self) -> &[u8] {
        &self.0.key
    }
}

/// The attribute sets of one session (or any one source), each kept once. Owned by the
/// session task that parses the source's UPDATEs, so it needs no lock; sets no path holds any
/// more are swept out as the table grows.
pub struct Interner {
    /// foldhash rather than SipHash (which was 2% of the daemon's CPU taking in two full
    /// tables): its `quality` variant, seeded at random per interner, since the keys are a
    /// peer's bytes.
    sets: HashSet<ByKey, foldhash::quality::RandomState>,
    checks: LoopChecks,
    scratch: Vec<u8>,
    sweep_at: usize,
}

impl Interner {
    pub fn new(checks: LoopChecks) -> Interner {
        Interner {
            sets: HashSet::default(),
            checks,
            scratch: Vec::with_capacity(256),
            sweep_at: 1024,
        }
    }

    /// Distinct sets held.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// The interned set for a received attribute field and next hop.
    pub fn intern(
        &mut self,
        view: &AttrsView<'_>,
        params: &SessionParams,
        next_hop: &[u8],
    ) -> Arc<RouteAttrs> {
        let mut key = std::mem::take(&mut self.scratch);
        normalized_key(view, params, next_hop, &mut key);
        let a = self.intern_key(&key);
        self.scratch = key;
        a
    }

    /// As [`Interner::intern`], with the session's changes on receipt ([`Ingress`]).
    pub fn intern_with(
        &mut self,
        view: &AttrsView<'_>,
        params: &SessionParams,
        next_hop: &[u8],
        ingress: Ingress,
    ) -> Arc<RouteAttrs> {
        let mut key = std::mem::take(&mut self.scratch);
        normalized_key(view, params, next_hop, &mut key);
        if let Some(asn) = ingress.prepend {
            // Rare (sessions with a `local-as`): rebuilt through the owned model.
            let n = 1 + usize::from(key.first().copied().unwrap_or(0));
            let mut a = match parse_attributes_only(key.get(n..).unwrap_or(&[]), &NORMALIZED) {
                Ok(p) => PathAttributes::from_view(&p.attrs, &NORMALIZED),
                Err(_) => PathAttributes::default(),
            };
            crate::export::prepend(&mut a, asn);
            key.truncate(n);
            for x in &a.list {
                x.encode(&NORMALIZED, &mut key);
            }
        }
        if let Some(otc) = ingress.otc {
            key.extend_from_slice(&[flags::OPTIONAL | flags::TRANSITIVE, attr::OTC, 4]);
            key.extend_from_slice(&otc.to_be_bytes());
        }
        let a = self.intern_key(&key);
        self.scratch = key;
        a
    }

    /// The interned set for a key built with [`normalized_key`].
    pub fn intern_key(&mut self, key: &[u8]) -> Arc<RouteAttrs> {
        if let Some(found) = self.sets.get(key) {
            return found.0.clone();
        }
        if self.sets.len() >= self.sweep_at {
            self.sweep();
        }
        let a = Arc::new(RouteAttrs::from_key(key.into(), &self.checks));
        self.sets.insert(ByKey(a.clone()));
        a
    }

    /// Drops the sets no path refers to any more.
    pub fn sweep(&mut self) {
        self.sets.retain(|s| Arc::strong_count(&s.0) > 1);
        self.sweep_at = (self.sets.len() * 2).max(1024);
    }
}

/// The next hop of a family in an UPDATE: NEXT_HOP for IPv4 unicast, the MP_REACH_NLRI next
/// hop otherwise.
pub fn next_hop_of<'a>(view: &AttrsView<'a>, mp: bool) -> &'a [u8] {
    if mp {
        view.mp_reach.map_or(&[][..], |m| m.next_hop)
    } else {
        RawAttrIter::new(view.raw)
            .find(|a| a.type_code == attr::NEXT_HOP)
            .map_or(&[][..], |a| a.value)
    }
}
