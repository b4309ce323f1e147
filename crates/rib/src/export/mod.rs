//! Export: what an update group advertises for a best path. Runs in the shard that owns the
//! prefix, once per (attribute set, source peer, group) thanks to [`ExportCache`]; the update
//! thread then only packs and sends.
//!
//! The rules, by kind of group:
//! - external (eBGP): our AS prepended, next hop set to our address (unless the group says
//!   `next-hop-self = false`: then the received one, a third-party next hop), LOCAL_PREF, MED
//!   (RFC 4271 sections 5.1.4 and 5.1.5), ORIGINATOR_ID and CLUSTER_LIST removed; a path whose
//!   neighbor AS is the group's peer AS is not sent back to it (Junos without
//!   `advertise-peer-as`).
//! - route server clients (RFC 7947 section 2.2): AS_PATH, NEXT_HOP and MED unchanged,
//!   LOCAL_PREF, ORIGINATOR_ID and CLUSTER_LIST removed.
//! - internal (iBGP): a path learned over iBGP goes to an iBGP peer only by route reflection
//!   (RFC 4456 section 6): from a client to everyone, from a non-client to clients only;
//!   reflecting sets ORIGINATOR_ID and prepends the cluster id to CLUSTER_LIST (section 8).
//!   LOCAL_PREF is set (100 for paths from eBGP), the next hop is kept unless `next-hop-self`.
//!
//! With a BGP role towards an external or route server group (RFC 9234 section 5): a path
//! carrying Only to Customer (OTC) does not go to providers, peers or route servers, and
//! towards customers, peers and route server clients a path without OTC gets our AS as OTC.
//!
//! Export policy (`ribshard_policy`) runs first, on the path as the Loc-RIB holds it; its
//! changes are kept where the rules above would drop them when it set them explicitly
//! (`metric` towards eBGP peers, `local-preference` towards iBGP ones, `next-hop`), and
//! its `as-path-prepend` comes after the AS we prepend ourselves.
//!
//! Everywhere: unrecognized non-transitive attributes are dropped and unrecognized transitive
//! ones get the Partial bit (RFC 4271 section 5); towards a 2-octet AS speaker, AS4_PATH and
//! AS4_AGGREGATOR carry what AS_TRANS hides (RFC 6793 section 4.2.2).

mod raw;
mod slot;

pub use slot::{ExportKind, ExportKinds, ExportSlot};

use crate::attrs::RouteAttrs;
use crate::import::next_hop_bytes;
use crate::shard::{PeerIndex, PeerInfo};
use ribshard_policy::{ApplyContext, Chain, Modified, NextHopSet, Source, Subject, Trace, Verdict};
use ribshard_wire::attr::{self, flags};
use ribshard_wire::attributes::{AsPath, AsSegment, AttrValue, PathAttributes};
use ribshard_wire::update::segment;
use ribshard_wire::{Family, Prefix, SessionParams};
// foldhash (hashbrown's default), as in the shard: keys are our own pointers and encodings,
// and SipHash showed in profiles of table dumps.
use hashbrown::HashMap;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Weak};

/// What kind of peers an update group holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    External,
    RouteServer,
    Internal {
        /// Its members are our route reflection clients, in this cluster.
        client_cluster: Option<u32>,
    },
}

/// Everything export needs to know of an update group: identical for all its members.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupSpec {
    /// The configured group, for display.
    pub name: String,
    pub kind: GroupKind,
    /// Our AS towards the group (Junos `local-as` per group).
    pub local_as: u32,
    /// With a `local-as` other than our global AS on an external group: the global AS, put
    /// in the AS_PATH after the local AS (Junos' default; `None` with `no-prepend-global-as`
    /// and without `local-as`).
    pub global_as: Option<u32>,
    /// The members' AS (one per update group for external groups, and for route server
    /// groups whose export policy reads it: `route-server-control`).
    pub peer_as: u32,
    pub router_id: Ipv4Addr,
    /// Advertise ourselves as next hop (the default for external groups, RFC 4271 section
    /// 5.1.3; without it an external group gets a third-party next hop).
    pub next_hop_self: bool,
    /// Our addresses on the members' sessions, for next-hop-self.
    pub local_v4: Option<Ipv4Addr>,
    pub local_v6: Option<Ipv6Addr>,
    /// Export policy.
    pub export: Arc<Chain>,
    /// How the members' sessions encode UPDATEs (AS width, message size, Add-Path send).
    pub params: SessionParams,
    /// Families negotiated with the members, per [`Family::index`].
    pub families: [bool; 2],
    /// The BGP role (RFC 9234, `ribshard_wire::open::role`) we take towards the members of
    /// an external or route server group: it decides the OTC rules on export.
    pub role: Option<u8>,
    /// Add-Path send (RFC 7911), where negotiated: which of each prefix's paths the members
    /// get, each with its identifier (none: the best path alone).
    pub add_path: Option<crate::shard::AddPathSelect>,
    /// The members sent the long-lived graceful restart capability (RFC 9494): only they
    /// may be sent a path carrying LLGR_STALE (section 4.6); the others lose it.
    pub long_lived: bool,
}

impl GroupSpec {
    /// The way of exporting: the spec but for its configured name, which changes nothing a
    /// group sends (the key of export caches and kinds).
    pub fn without_name(&self) -> GroupSpec {
        GroupSpec {
            name: String::new(),
            ..self.clone()
        }
    }
}

/// An attribute set as one update group sends it: encoded once for the group's sessions.
#[derive(Debug, PartialEq, Eq)]
pub struct Exported {
    pub family: Family,
    /// The path attributes, encoded, without MP_REACH_NLRI (IPv4 unicast ones hold
    /// NEXT_HOP; others go with [`Exported::mp_next_hop`]).
    pub attrs: Box<[u8]>,
    /// The MP_REACH_NLRI next hop (empty for IPv4 unicast).
    pub mp_next_hop: Box<[u8]>,
}

impl Hash for Exported {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.family.hash(h);
        self.attrs.hash(h);
        self.mp_next_hop.hash(h);
    }
}

/// The neighbor a path came from, as policy sees it.
pub fn source_of(src: &PeerInfo) -> Source {
    let v6 = Ipv6Addr::from(src.address);
    Source {
        address: v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        peer_as: src.peer_as,
        internal: !src.ebgp,
    }
}

/// The route as the group's export policy looks at it.
fn subject<'a>(
    spec: &GroupSpec,
    source: &'a Source,
    attrs: &'a RouteAttrs,
    prefix: &Prefix,
) -> Subject<'a> {
    Subject {
        prefix: prefix.masked(),
        attrs: attrs.raw(),
        next_hop: attrs.next_hop(),
        source,
        receiver_as: (spec.peer_as != 0).then_some(spec.peer_as),
        rpki: Default::default(),
    }
}

/// Computes what a group advertises for a path; `None` if the group must not get it.
pub fn export(
    spec: &GroupSpec,
    src: &PeerInfo,
    attrs: &RouteAttrs,
    prefix: &Prefix,
) -> Option<Exported> {
    let source = source_of(src);
    let v = spec.export.evaluate(&subject(spec, &source, attrs, prefix));
    export_verdict(spec, src, attrs, prefix, &v)
}

/// [`export`] with the export policy's verdict for the path already known.
fn export_verdict(
    spec: &GroupSpec,
    src: &PeerInfo,
    attrs: &RouteAttrs,
    prefix: &Prefix,
    v: &Verdict,
) -> Option<Exported> {
    let family = prefix.family();
    if !v.accept || spec.families.get(family.index()) != Some(&true) {
        return None;
    }
    // RFC 9494 section 4.6: a long-lived stale path is withdrawn from neighbors that do not
    // know what LLGR_STALE means, rather than sent as if it were fresh.
    if attrs.llgr_stale && !spec.long_lived {
        return None;
    }
    let from_ibgp = !src.ebgp;
    match spec.kind {
        GroupKind::Internal { client_cluster } => {
            // RFC 4456 section 6: non-client to non-client is never reflected.
            if from_ibgp && src.rr_cluster.is_none() && client_cluster.is_none() {
                return None;
            }
        }
        GroupKind::External => {
            if attrs.neighbor_as == Some(spec.peer_as) {
                return None;
            }
        }
        GroupKind::RouteServer => {}
    }
    // Without actions of the export policy, the communities leave as received.
    if v.trace.is_empty() && !well_known_allow(spec.kind, raw_communities(attrs.raw())) {
        return None;
    }
    // Without actions of the export policy, the common cases are made on the bytes.
    if v.trace.is_empty() {
        if let Some(e) = raw::export(spec, src, attrs, family) {
            return Some(e);
        }
    }
    export_decoded(spec, src, attrs, prefix, v)
}

/// The rest of [`export_verdict`], on the decoded attributes: any export policy action, and
/// what [`raw::export`] leaves (it must give exactly these bytes where it answers).
pub(crate) fn export_decoded(
    spec: &GroupSpec,
    src: &PeerInfo,
    attrs: &RouteAttrs,
    prefix: &Prefix,
    v: &Verdict,
) -> Option<Exported> {
    let family = prefix.family();
    let from_ibgp = !src.ebgp;
    let m = if v.trace.is_empty() {
        Modified {
            attrs: attrs.attributes(),
            ..Modified::default()
        }
    } else {
        let source = source_of(src);
        spec.export.apply(
            v,
            &subject(spec, &source, attrs, prefix),
            attrs.attributes(),
            &ApplyContext {
                own_as: spec.local_as,
            },
        )
    };
    // After export policy, which may have deleted a well-known community to let it go.
    if !v.trace.is_empty() && !well_known_allow(spec.kind, m.attrs.communities().iter().copied()) {
        return None;
    }
    let Modified {
        attrs: mut a,
        next_hop: policy_next_hop,
        // A LOCAL_PREF the policy set is in `a`, which internal groups send.
        local_pref_set: _,
        med_set,
    } = m;
    a.remove(attr::MP_REACH_NLRI);
    a.remove(attr::MP_UNREACH_NLRI);
    a.remove(attr::AS4_PATH);
    a.remove(attr::AS4_AGGREGATOR);
    // RFC 4271 section 5: unrecognized attributes.
    a.list.retain(|x| match x.value {
        AttrValue::Unknown { .. } => x.flags & flags::TRANSITIVE != 0,
        _ => true,
    });
    for x in &mut a.list {
        if matches!(x.value, AttrValue::Unknown { .. }) {
            x.flags |= flags::PARTIAL;
        }
    }
    // OTC is an eBGP matter: iBGP carries it unchanged (RFC 9234 section 5).
    if let (Some(role), false) = (spec.role, matches!(spec.kind, GroupKind::Internal { .. })) {
        if !only_to_customer(&mut a, role, spec.local_as) {
            return None;
        }
    }
    let mut next_hop_self = spec.next_hop_self;
    match spec.kind {
        GroupKind::External => {
            // Junos `local-as`: the peer sees the local AS, then the global one.
            if let Some(g) = spec.global_as {
                prepend(&mut a, g);
            }
            prepend(&mut a, spec.local_as);
            a.remove(attr::LOCAL_PREF);
            if !med_set {
                a.remove(attr::MULTI_EXIT_DISC);
            }
            a.remove(attr::ORIGINATOR_ID);
            a.remove(attr::CLUSTER_LIST);
        }
        GroupKind::RouteServer => {
            a.remove(attr::LOCAL_PREF);
            a.remove(attr::ORIGINATOR_ID);
            a.remove(attr::CLUSTER_LIST);
            next_hop_self = false;
        }
        GroupKind::Internal { client_cluster } => {
            // From an eBGP peer the set has no LOCAL_PREF but what import policy put there
            // (RFC 7606 section 7.5 discards a received one).
            let lp = a.local_pref().unwrap_or(100);
            a.set(AttrValue::LocalPref(lp));
            if from_ibgp {
                // Reflection (RFC 4456 section 8). The cluster is the client's when the path
                // comes from one, else the receiving clients'.
                if a.get(attr::ORIGINATOR_ID).is_none() {
                    a.set(AttrValue::OriginatorId(Ipv4Addr::from(src.router_id)));
                }
                let cluster = src.rr_cluster.or(client_cluster).unwrap_or(0);
                let mut list = match a.get(attr::CLUSTER_LIST) {
                    Some(AttrValue::ClusterList(l)) => l.clone(),
                    _ => Vec::new(),
                };
                list.insert(0, cluster);
                a.set(AttrValue::ClusterList(list));
                // A reflector does not change the next hop of a reflected path.
                next_hop_self = false;
            }
        }
    }
    let set_next_hop: Option<Vec<u8>> = match policy_next_hop {
        None => None,
        Some(NextHopSet::OurAddress | NextHopSet::Reject | NextHopSet::Discard) => {
            next_hop_self = true;
            None
        }
        Some(NextHopSet::Address(x)) => next_hop_bytes(x, family),
        Some(NextHopSet::PeerAddress) => next_hop_bytes(source_of(src).address, family),
    };
    if set_next_hop.is_some() {
        next_hop_self = false;
    }
    let received = set_next_hop.as_deref().unwrap_or(attrs.next_hop());
    let mp_next_hop: Box<[u8]> = match family {
        Family::Ipv4Unicast => {
            a.set(AttrValue::NextHop(ipv4_next_hop(
                spec,
                next_hop_self,
                received,
            )));
            Box::new([])
        }
        Family::Ipv6Unicast => {
            a.remove(attr::NEXT_HOP);
            let whole = spec.kind == GroupKind::RouteServer || from_ibgp || set_next_hop.is_some();
            ipv6_next_hop(spec, next_hop_self, received, whole)
        }
    };
    if !spec.params.four_octet_as {
        add_as4(&mut a);
    }
    let mut out = Vec::with_capacity(64 + attrs.raw().len());
    a.encode(&spec.params, &mut out);
    Some(Exported {
        family,
        attrs: out.into_boxed_slice(),
        mp_next_hop,
    })
}

/// RFC 1997 well-known communities.
pub const NO_EXPORT: u32 = 0xFFFF_FF01;
pub const NO_ADVERTISE: u32 = 0xFFFF_FF02;
pub const NO_EXPORT_SUBCONFED: u32 = 0xFFFF_FF03;

/// Whether a route carrying `communities` may be advertised to a group of `kind` (RFC 1997):
/// NO_ADVERTISE to no peer; NO_EXPORT and NO_EXPORT_SUBCONFED to no external peer, a
/// route server's clients included (each is another AS; ribshard has no confederation, so
/// the two mean the same here). Internal peers, reflected or not, get both.
fn well_known_allow(kind: GroupKind, mut communities: impl Iterator<Item = u32>) -> bool {
    let internal = matches!(kind, GroupKind::Internal { .. });
    !communities
        .any(|c| c == NO_ADVERTISE || (!internal && (c == NO_EXPORT || c == NO_EXPORT_SUBCONFED)))
}

/// The standard communities of an attribute set as stored (COMMUNITIES, 4 octets each).
fn raw_communities(raw: &[u8]) -> impl Iterator<Item = u32> + '_ {
    ribshard_wire::update::RawAttrIter::new(raw)
        .filter(|a| a.type_code == attr::COMMUNITIES)
        .flat_map(|a| a.value.chunks_exact(4))
        .filter_map(|c| <[u8; 4]>::try_from(c).ok().map(u32::from_be_bytes))
}

/// The NEXT_HOP an IPv4 route goes with: ours, or the one received (4 octets; else ours).
fn ipv4_next_hop(spec: &GroupSpec, next_hop_self: bool, received: &[u8]) -> Ipv4Addr {
    let ours = spec.local_v4.unwrap_or(spec.router_id);
    if next_hop_self {
        return ours;
    }
    <[u8; 4]>::try_from(received)
        .map(Ipv4Addr::from)
        .unwrap_or(ours)
}

/// The MP_REACH_NLRI next hop of an IPv6 route: ours, or the one received, link-local part
/// included only when `whole`.
fn ipv6_next_hop(spec: &GroupSpec, next_hop_self: bool, received: &[u8], whole: bool) -> Box<[u8]> {
    if next_hop_self || received.len() < 16 {
        let v6 = spec
            .local_v6
            .unwrap_or_else(|| spec.local_v4.unwrap_or(spec.router_id).to_ipv6_mapped());
        Box::new(v6.octets())
    } else if whole {
        received.into()
    } else {
        // A link-local next hop means nothing beyond its link: keep the global one.
        received.get(..16).unwrap_or(received).into()
    }
}

/// RFC 9234 section 5, egress, with `role` the one we take towards the receiver: false if
/// the path must not go (it carries OTC and the receiver is our provider, peer or route
/// server); else OTC is added where the receiver is our customer, peer or route server
/// client and the path has none.
fn only_to_customer(a: &mut PathAttributes, role: u8, local_as: u32) -> bool {
    use ribshard_wire::open::role as r;
    let has = a.get(attr::OTC).is_some();
    match role {
        // Towards a provider, a peer or a route server.
        r::CUSTOMER | r::PEER | r::RS_CLIENT if has => return false,
        _ => {}
    }
    if !has && matches!(role, r::PROVIDER | r::PEER | r::RS) {
        a.set(AttrValue::Otc(local_as));
    }
    true
}

/// Puts an AS at the front of the AS_PATH (RFC 4271 section 5.1.2), creating one if absent.
pub(crate) fn prepend(a: &mut PathAttributes, asn: u32) {
    ribshard_policy::prepend_as(a, asn);
}

/// Towards a 2-octet AS speaker: AS4_PATH and AS4_AGGREGATOR when a 4-octet ASN would be
/// hidden behind AS_TRANS (RFC 6793 section 4.2.2).
fn add_as4(a: &mut PathAttributes) {
    let wide = |x: u32| x > u32::from(u16::MAX);
    if let Some(p) = a.as_path() {
        if p.segments.iter().flat_map(|s| &s.asns).any(|&x| wide(x)) {
            let segs: Vec<AsSegment> = p
                .segments
                .iter()
                .filter(|s| s.kind == segment::AS_SEQUENCE || s.kind == segment::AS_SET)
                .cloned()
                .collect();
            a.set(AttrValue::As4Path(AsPath { segments: segs }));
        }
    }
    if let Some(AttrValue::Aggregator(g)) = a.get(attr::AGGREGATOR).cloned() {
        if wide(g.asn) {
            a.set(AttrValue::As4Aggregator(g));
        }
    }
}

/// A source set and what it exports to. The set is held weakly: that keeps its address
/// unique (the allocation stays while a `Weak` does) without keeping the set alive, so the
/// session's interner, which sweeps the sets nobody else holds, is not kept from it by the
/// cache, nor the cache by the interner.
type CacheEntry = (Weak<RouteAttrs>, Option<Arc<Exported>>);

/// Export results of one update group, computed once per (attribute set, source peer) and
/// interned so that equal results are one `Arc` (the update thread packs by pointer). With
/// a kind ([`ExportCache::of_kind`]), results go on the set itself where they can
/// ([`ExportSlot`]), shared with the other shards' caches of that kind.
#[derive(Default)]
pub struct ExportCache {
    kind: Option<Arc<ExportKind>>,
    seen: slot::Seen,
    /// Keyed by the source set's address; the value holds the set weakly, so the address
    /// cannot be reused while the entry exists.
    by_source: HashMap<(usize, PeerIndex), CacheEntry>,
    /// With an export policy that reads the prefix: by source set, source peer, family and
    /// the terms whose actions applied.
    by_trace: HashMap<(usize, PeerIndex, Family, Trace), CacheEntry>,
    interned: HashMap<Arc<Exported>, ()>,
    sweep_at: usize,
}

impl ExportCache {
    /// A cache that keeps its results on the sets where it can, shared by every cache of
    /// the kind. A cache without one (`default`) keeps everything to itself.
    pub fn of_kind(kind: Arc<ExportKind>) -> ExportCache {
        ExportCache {
            kind: Some(kind),
            ..ExportCache::default()
        }
    }

    pub fn get(
        &mut self,
        spec: &GroupSpec,
        src: &PeerInfo,
        peer: PeerIndex,
        attrs: &Arc<RouteAttrs>,
        prefix: &Prefix,
    ) -> Option<Arc<Exported>> {
        let family = prefix.family();
        let ptr = Arc::as_ptr(attrs) as usize;
        // The interned results count: with the results on the sets, the maps stay empty
        // and only they grow.
        if self.len() >= self.sweep_at.max(4096) {
            self.sweep();
        }
        if spec.export.reads_prefix() {
            // The verdict first (no allocation), then the result per trace.
            let source = source_of(src);
            let v = spec.export.evaluate(&subject(spec, &source, attrs, prefix));
            if !v.accept {
                return None;
            }
            let key = (ptr, peer, family, v.trace);
            if let Some((_, e)) = self.by_trace.get(&key) {
                return e.clone();
            }
            let e =
                export_verdict(spec, src, attrs, prefix, &v).map(|e| intern(&mut self.interned, e));
            self.by_trace
                .insert(key, (Arc::downgrade(attrs), e.clone()));
            return e;
        }
        if let Some(kind) = &self.kind {
            let mut kept = attrs.export.lock();
            match self.seen.claim(&kept, kind, peer) {
                // A set of one family's next hop used for the other's prefixes (rare)
                // goes to the map below.
                slot::Claim::Ours => {
                    if kept.exported.as_ref().is_none_or(|e| e.family == family) {
                        return kept.exported.clone();
                    }
                }
                slot::Claim::Free => {
                    let e = export(spec, src, attrs, prefix).map(|e| intern(&mut self.interned, e));
                    slot::fill(&mut kept, kind, peer, e.clone());
                    return e;
                }
                slot::Claim::Taken => {}
            }
        }
        if let Some((_, e)) = self.by_source.get(&(ptr, peer)) {
            if e.as_ref().is_none_or(|e| e.family == family) {
                return e.clone();
            }
        }
        let e = export(spec, src, attrs, prefix).map(|e| intern(&mut self.interned, e));
        self.by_source
            .insert((ptr, peer), (Arc::downgrade(attrs), e.clone()));
        e
    }

    /// Forgets results whose source set no path holds any more.
    pub fn sweep(&mut self) {
        self.by_source.retain(|_, (a, _)| a.strong_count() > 0);
        self.by_trace.retain(|_, (a, _)| a.strong_count() > 0);
        self.interned.retain(|e, _| Arc::strong_count(e) > 1);
        self.seen.clear();
        self.sweep_at = self.len() * 2;
    }

    /// Entries held: results kept here and distinct results made.
    pub fn len(&self) -> usize {
        self.by_source.len() + self.by_trace.len() + self.interned.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The one `Arc` of an export result.
fn intern(interned: &mut HashMap<Arc<Exported>, ()>, e: Exported) -> Arc<Exported> {
    match interned.get_key_value(&e) {
        Some((k, _)) => k.clone(),
        None => {
            let a = Arc::new(e);
            interned.insert(a.clone(), ());
            a
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::{Interner, LoopChecks};
    use std::net::Ipv4Addr;

    fn route_server() -> GroupSpec {
        GroupSpec {
            long_lived: false,
            name: "clients".into(),
            kind: GroupKind::RouteServer,
            local_as: 65_000,
            global_as: None,
            peer_as: 0,
            router_id: Ipv4Addr::new(192, 0, 2, 1),
            next_hop_self: false,
            local_v4: None,
            local_v6: None,
            export: Arc::new(Chain::accept_all()),
            params: SessionParams::default(),
            families: [true, true],
            role: None,
            add_path: None,
        }
    }

    /// A route server client in AS 65001.
    fn client() -> PeerInfo {
        PeerInfo {
            ebgp: true,
            router_id: 1,
            address: u128::from(0x7f00_0010u32),
            local_as: 65_000,
            peer_as: 65_001,
            rr_cluster: None,
            rs_client: true,
        }
    }

    /// A set no path holds any more leaves both the session's interner and the export
    /// cache: neither keeps it for the other (a long-lived session's churn would otherwise
    /// keep every set it ever received, in every group's cache).
    #[test]
    fn sets_no_path_holds_are_swept_from_interner_and_cache() {
        let spec = route_server();
        let src = client();
        let mut interner = Interner::new(LoopChecks::default());
        let mut cache = ExportCache::default();
        let p = Prefix::v4(Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        // ORIGIN IGP, AS_PATH [65001], after a 4-octet next hop.
        let key = [
            4, 127, 0, 0, 16, 0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xe9,
        ];
        let path = interner.intern_key(&key);
        let e = cache.get(&spec, &src, 1, &path, &p);
        assert!(e.is_some());
        assert_eq!(cache.get(&spec, &src, 1, &path, &p), e);
        assert_eq!(cache.len(), 2, "computed once: one entry, one result");
        drop((path, e));
        interner.sweep();
        cache.sweep();
        assert_eq!(interner.len(), 0, "the interner let the set go");
        assert_eq!(cache.len(), 0, "the cache let the set go");
    }

    /// Caches of one kind (one per shard) share the results they keep on the sets: the
    /// second shard neither computes nor keeps anything. Another kind in use keeps its own;
    /// a kind no cache holds any more gives the slot up.
    #[test]
    fn shards_share_the_results_kept_on_sets() {
        let spec = route_server();
        let src = client();
        let kinds = Arc::new(ExportKinds::default());
        let kind = kinds.for_spec(&spec);
        let (mut first, mut second) = (
            ExportCache::of_kind(kind.clone()),
            ExportCache::of_kind(kind.clone()),
        );
        let p = Prefix::v4(Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        let key = [
            4, 127, 0, 0, 16, 0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xe9,
        ];
        let set = Arc::new(RouteAttrs::from_key(key.into(), &LoopChecks::default()));
        let e = first.get(&spec, &src, 1, &set, &p).unwrap();
        let found = second.get(&spec, &src, 1, &set, &p).unwrap();
        assert!(Arc::ptr_eq(&e, &found), "the first shard's result");
        assert_eq!(second.len(), 0, "nothing computed or kept by the second");
        // Another kind (an external group): its own result, kept in its cache.
        let other_spec = GroupSpec {
            kind: GroupKind::External,
            next_hop_self: true,
            local_v4: Some(Ipv4Addr::LOCALHOST),
            ..route_server()
        };
        let mut other = ExportCache::of_kind(kinds.for_spec(&other_spec));
        let o = other.get(&other_spec, &src, 1, &set, &p).unwrap();
        assert_ne!(o, e);
        assert_eq!(other.len(), 2, "kept in the map: the slot is taken");
        // Another pipeline's registry (the same set handed to two, as tests do): its kinds
        // never read, nor take, this one's slots.
        let elsewhere = Arc::new(ExportKinds::default());
        let mut theirs = ExportCache::of_kind(elsewhere.for_spec(&other_spec));
        assert_eq!(theirs.get(&other_spec, &src, 1, &set, &p), Some(o.clone()));
        assert_eq!(theirs.len(), 2, "kept in its map: the slot's kind is alive");
        // Another source peer with the same set: not the slot's result.
        let mut from = src;
        from.rs_client = false;
        assert_eq!(first.get(&spec, &from, 2, &set, &p).as_deref(), Some(&*e));
        assert_eq!(first.len(), 2, "kept in the map");
        // The first kind gone: the slot goes to the next kind that exports the set.
        drop((first, second, kind));
        let mut again = ExportCache::of_kind(kinds.for_spec(&other_spec));
        assert_eq!(again.get(&other_spec, &src, 1, &set, &p), Some(o));
        drop(other);
        let mut third = ExportCache::of_kind(kinds.for_spec(&other_spec));
        assert!(third.get(&other_spec, &src, 1, &set, &p).is_some());
        assert_eq!(third.len(), 0, "found on the set, filled by `again`");
        assert_eq!(
            again.len(),
            1,
            "filled the freed slot: only its interned result"
        );
    }
}
