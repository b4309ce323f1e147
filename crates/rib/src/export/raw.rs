//! Export made on the attribute bytes: what an update group sends for a path whose export
//! policy changed nothing, written in one pass over the interned set. Decoding every set
//! into the owned model, editing it and encoding it again was most of export's cost (a
//! table dump exports each of a full table's 117,000 sets once per group and per shard).
//!
//! The bytes are exactly those [`super::export_decoded`] gives — attribute order, flags and
//! length forms included — since a group compares and packs exports by content; a property
//! test holds the two to that. Whatever this module does not make (attributes out of
//! type-code order, a value the model would not read, an AS_PATH whose first segment
//! cannot take our AS, a BGP role's OTC rules, 2-octet AS peers) is left to the model.

use super::{ipv4_next_hop, ipv6_next_hop, Exported, GroupKind, GroupSpec};
use crate::attrs::RouteAttrs;
use crate::shard::PeerInfo;
use ribshard_wire::attr::{self, flags};
use ribshard_wire::update::{segment, AsPathView, RawAttrIter};
use ribshard_wire::Family;

/// What export does to an attribute present in the set.
enum Edit {
    Keep,
    Drop,
    /// Sent on as an unrecognized transitive attribute: the Partial bit set (RFC 4271
    /// section 5).
    Partial,
    /// A new value, the received flags kept.
    Value,
}

/// An attribute export adds or replaces, by type code: its value.
struct Put {
    code: u8,
    value: smallvec::SmallVec<[u8; 16]>,
}

/// [`super::export_decoded`] for a path the group takes, with a verdict without actions, on
/// the bytes: `None` when it must be left to the model, else what the model gives.
pub(super) fn export(
    spec: &GroupSpec,
    src: &PeerInfo,
    attrs: &RouteAttrs,
    family: Family,
) -> Option<Exported> {
    let is_internal = matches!(spec.kind, GroupKind::Internal { .. });
    if !spec.params.four_octet_as || (spec.role.is_some() && !is_internal) {
        return None;
    }
    let raw = attrs.raw();
    let from_ibgp = !src.ebgp;
    let mut next_hop_self = spec.next_hop_self;
    // What is put in (each replacing the received one, or inserted in type-code order).
    let mut puts: smallvec::SmallVec<[Put; 4]> = smallvec::SmallVec::new();
    match spec.kind {
        GroupKind::External => {
            // Our AS (and with Junos `local-as`, the global one after it) in front.
            let path = find(raw, attr::AS_PATH)?;
            let mut ours: smallvec::SmallVec<[u32; 2]> = smallvec::smallvec![spec.local_as];
            ours.extend(spec.global_as);
            puts.push(Put {
                code: attr::AS_PATH,
                value: prepended(path.value, &ours)?,
            });
        }
        GroupKind::RouteServer => next_hop_self = false,
        GroupKind::Internal { client_cluster } => {
            let lp = match find(raw, attr::LOCAL_PREF) {
                Some(a) => <[u8; 4]>::try_from(a.value).ok()?,
                None => 100u32.to_be_bytes(),
            };
            puts.push(Put {
                code: attr::LOCAL_PREF,
                value: lp.into_iter().collect(),
            });
            if from_ibgp {
                // Reflection (RFC 4456 section 8).
                if find(raw, attr::ORIGINATOR_ID).is_none() {
                    puts.push(Put {
                        code: attr::ORIGINATOR_ID,
                        value: src.router_id.to_be_bytes().into_iter().collect(),
                    });
                }
                let cluster = src.rr_cluster.or(client_cluster).unwrap_or(0);
                let mut list: smallvec::SmallVec<[u8; 16]> =
                    cluster.to_be_bytes().into_iter().collect();
                if let Some(l) = find(raw, attr::CLUSTER_LIST) {
                    list.extend_from_slice(l.value);
                }
                puts.push(Put {
                    code: attr::CLUSTER_LIST,
                    value: list,
                });
                next_hop_self = false;
            }
        }
    }
    let received = attrs.next_hop();
    let mp_next_hop: Box<[u8]> = match family {
        Family::Ipv4Unicast => {
            let nh = ipv4_next_hop(spec, next_hop_self, received);
            puts.push(Put {
                code: attr::NEXT_HOP,
                value: nh.octets().into_iter().collect(),
            });
            Box::new([])
        }
        Family::Ipv6Unicast => {
            let whole = spec.kind == GroupKind::RouteServer || from_ibgp;
            ipv6_next_hop(spec, next_hop_self, received, whole)
        }
    };
    puts.sort_unstable_by_key(|p| p.code);
    let mut out = Vec::with_capacity(raw.len() + 16);
    let mut pending = puts.iter().peekable();
    let mut previous: Option<u8> = None;
    let mut read = 0;
    for a in RawAttrIter::new(raw) {
        read += a.value.len()
            + if a.flags & flags::EXTENDED_LENGTH != 0 {
                4
            } else {
                3
            };
        // Out of type-code order, where an inserted attribute goes depends on the model's
        // list: left to it.
        if previous.is_some_and(|p| p >= a.type_code) {
            return None;
        }
        previous = Some(a.type_code);
        while let Some(p) = pending.next_if(|p| p.code < a.type_code) {
            insert(&mut out, p);
        }
        let edit = edit(spec.kind, family, a.type_code, a.flags, a.value)?;
        let replaced = pending.next_if(|p| p.code == a.type_code);
        match (edit, replaced) {
            (Edit::Drop, _) => {}
            (_, Some(p)) => put(&mut out, a.flags, a.type_code, &p.value),
            (Edit::Keep, None) => a.encode(&mut out),
            (Edit::Partial, None) => put(&mut out, a.flags | flags::PARTIAL, a.type_code, a.value),
            (Edit::Value, None) => return None,
        }
    }
    for p in pending {
        insert(&mut out, p);
    }
    // The whole field read: a set that does not parse to its end is the model's to judge.
    if read != raw.len() {
        return None;
    }
    Some(Exported {
        family,
        attrs: out.into_boxed_slice(),
        mp_next_hop,
    })
}

/// What export does to a received attribute; `None` where the model would read it as
/// something else than its bytes say (then the model decides).
fn edit(kind: GroupKind, family: Family, code: u8, f: u8, v: &[u8]) -> Option<Edit> {
    let len = v.len();
    match attr::expected_flags(code) {
        // Unrecognized: passed on if transitive (RFC 4271 section 5). One marked well-known
        // is an error the model's parser answers by reading no attribute at all.
        None if f & flags::OPTIONAL == 0 => return None,
        None if f & flags::TRANSITIVE != 0 => return Some(Edit::Partial),
        None => return Some(Edit::Drop),
        // Flags other than the type's are an error its parser handles (RFC 7606).
        Some(expected) if f & (flags::OPTIONAL | flags::TRANSITIVE) != expected => return None,
        Some(_) => {}
    }
    // The model's reading of the value: one its parser refuses or discards, or that it
    // keeps unrecognized, is the model's to judge; one it reads encodes back to the same
    // octets.
    let well_formed = match code {
        attr::ORIGIN => len == 1 && v.first().is_some_and(|o| *o <= 2),
        attr::AS_PATH => AsPathView::parse(v, true).is_some(),
        attr::NEXT_HOP
        | attr::MULTI_EXIT_DISC
        | attr::LOCAL_PREF
        | attr::ORIGINATOR_ID
        | attr::OTC => len == 4,
        attr::ATOMIC_AGGREGATE => len == 0,
        attr::AGGREGATOR => len == 8,
        attr::COMMUNITIES | attr::CLUSTER_LIST => len > 0 && len % 4 == 0,
        attr::EXTENDED_COMMUNITIES => len > 0 && len % 8 == 0,
        attr::LARGE_COMMUNITY => len > 0 && len % 12 == 0,
        // Never in an interned set (sessions take them apart).
        _ => false,
    };
    if !well_formed {
        return None;
    }
    Some(match (kind, code) {
        (_, attr::NEXT_HOP) if family == Family::Ipv6Unicast => Edit::Drop,
        (_, attr::NEXT_HOP) => Edit::Value,
        (GroupKind::External, attr::AS_PATH) => Edit::Value,
        (
            GroupKind::External,
            attr::LOCAL_PREF | attr::MULTI_EXIT_DISC | attr::ORIGINATOR_ID | attr::CLUSTER_LIST,
        ) => Edit::Drop,
        (GroupKind::RouteServer, attr::LOCAL_PREF | attr::ORIGINATOR_ID | attr::CLUSTER_LIST) => {
            Edit::Drop
        }
        _ => Edit::Keep,
    })
}

/// An AS_PATH value with `ours` in front (the first of them first), as the model's
/// prepends leave it when its first segment is an AS_SEQUENCE with room for them all;
/// `None` otherwise (a new segment: the model's).
fn prepended(path: &[u8], ours: &[u32]) -> Option<smallvec::SmallVec<[u8; 16]>> {
    let (&kind, &n) = (path.first()?, path.get(1)?);
    if kind != segment::AS_SEQUENCE || usize::from(n) + ours.len() > 255 {
        return None;
    }
    let mut v = smallvec::SmallVec::with_capacity(path.len() + 4 * ours.len());
    v.push(kind);
    v.push(n + ours.len() as u8);
    for a in ours {
        v.extend_from_slice(&a.to_be_bytes());
    }
    v.extend_from_slice(path.get(2..)?);
    Some(v)
}

/// The first attribute of a type in the set.
fn find(raw: &[u8], code: u8) -> Option<ribshard_wire::update::RawAttr<'_>> {
    RawAttrIter::new(raw).find(|a| a.type_code == code)
}

/// Writes an attribute the set did not have, with its type's flags (`Attribute::new`).
fn insert(out: &mut Vec<u8>, p: &Put) {
    put(
        out,
        attr::expected_flags(p.code).unwrap_or(0),
        p.code,
        &p.value,
    );
}

/// Writes an attribute as the model's `Attribute::encode` does: the Extended Length form
/// when the flags ask for it or the value needs it.
fn put(out: &mut Vec<u8>, f: u8, code: u8, value: &[u8]) {
    let ext = f & flags::EXTENDED_LENGTH != 0 || value.len() > 255;
    out.push(if ext { f | flags::EXTENDED_LENGTH } else { f });
    out.push(code);
    if ext {
        out.extend_from_slice(&(value.len().min(65535) as u16).to_be_bytes());
    } else {
        out.push(value.len() as u8);
    }
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::LoopChecks;
    use proptest::prelude::*;
    use ribshard_wire::{Prefix, SessionParams};
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::sync::Arc;

    /// An attribute as (type code, flags, value).
    type Raw = (u8, u8, Vec<u8>);

    fn encode(list: &[Raw]) -> Vec<u8> {
        let mut out = Vec::new();
        for (code, f, v) in list {
            out.push(*f);
            out.push(*code);
            if f & flags::EXTENDED_LENGTH != 0 {
                out.extend_from_slice(&(v.len() as u16).to_be_bytes());
            } else {
                out.push(v.len() as u8);
            }
            out.extend_from_slice(v);
        }
        out
    }

    fn set(next_hop: &[u8], list: &[Raw]) -> RouteAttrs {
        let mut key = vec![next_hop.len() as u8];
        key.extend_from_slice(next_hop);
        key.extend(encode(list));
        RouteAttrs::from_key(key.into_boxed_slice(), &LoopChecks::default())
    }

    fn as_path(segments: &[(u8, usize)], first: u32) -> Vec<u8> {
        let mut v = Vec::new();
        for (k, (kind, n)) in segments.iter().enumerate() {
            v.push(*kind);
            v.push(*n as u8);
            for i in 0..*n {
                v.extend_from_slice(&(first + (k * 1000 + i) as u32).to_be_bytes());
            }
        }
        v
    }

    /// A value for a type code: well formed most of the time, else any octets.
    fn value(code: u8) -> impl Strategy<Value = Vec<u8>> {
        let good: BoxedStrategy<Vec<u8>> = match code {
            attr::ORIGIN => (0u8..3).prop_map(|o| vec![o]).boxed(),
            attr::AS_PATH => prop::collection::vec(
                (
                    prop_oneof![8 => Just(2u8), 1 => 1u8..5],
                    prop_oneof![3 => 1usize..6, 1 => 250usize..256],
                ),
                0..3,
            )
            .prop_map(|s| as_path(&s, 64_500))
            .boxed(),
            attr::NEXT_HOP
            | attr::MULTI_EXIT_DISC
            | attr::LOCAL_PREF
            | attr::ORIGINATOR_ID
            | attr::OTC => any::<[u8; 4]>().prop_map(|b| b.to_vec()).boxed(),
            attr::ATOMIC_AGGREGATE => Just(Vec::new()).boxed(),
            attr::AGGREGATOR => any::<[u8; 8]>().prop_map(|b| b.to_vec()).boxed(),
            attr::COMMUNITIES | attr::CLUSTER_LIST => prop::collection::vec(any::<u8>(), 0..20)
                .prop_map(|mut v| {
                    v.truncate(v.len() / 4 * 4);
                    v
                })
                .boxed(),
            attr::EXTENDED_COMMUNITIES => prop::collection::vec(any::<[u8; 8]>(), 0..3)
                .prop_map(|v| v.concat())
                .boxed(),
            attr::LARGE_COMMUNITY => prop::collection::vec(any::<[u8; 12]>(), 0..3)
                .prop_map(|v| v.concat())
                .boxed(),
            _ => prop::collection::vec(any::<u8>(), 0..10).boxed(),
        };
        prop_oneof![19 => good, 1 => prop::collection::vec(any::<u8>(), 0..12)]
    }

    fn attribute() -> impl Strategy<Value = Raw> {
        let code = prop_oneof![
            4 => prop::sample::select(vec![1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 32, 35]),
            1 => prop::sample::select(vec![14u8, 17, 18, 20, 99, 200]),
        ];
        code.prop_flat_map(|c| {
            let usual = attr::expected_flags(c).unwrap_or(flags::OPTIONAL | flags::TRANSITIVE);
            let f = prop_oneof![
                12 => Just(usual),
                1 => Just(usual | flags::EXTENDED_LENGTH),
                1 => Just(usual | flags::PARTIAL),
                1 => any::<u8>().prop_map(|f| f & 0xf0),
            ];
            (Just(c), f, value(c))
        })
    }

    /// Attribute lists, in type-code order most of the time.
    fn attributes() -> impl Strategy<Value = Vec<Raw>> {
        (
            prop::collection::vec(attribute(), 0..9),
            prop::bool::weighted(0.8),
            prop::bool::weighted(0.8),
        )
            .prop_map(|(mut v, sort, dedup)| {
                if sort {
                    v.sort_by_key(|a| a.0);
                    if dedup {
                        v.dedup_by_key(|a| a.0);
                    }
                }
                v
            })
    }

    fn kind() -> impl Strategy<Value = GroupKind> {
        prop_oneof![
            Just(GroupKind::External),
            Just(GroupKind::RouteServer),
            Just(GroupKind::Internal {
                client_cluster: None
            }),
            Just(GroupKind::Internal {
                client_cluster: Some(0x0a0a_0a0a)
            }),
        ]
    }

    fn spec(
        kind: GroupKind,
        global_as: Option<u32>,
        next_hop_self: bool,
        locals: (bool, bool),
        role: Option<u8>,
        four_octet_as: bool,
    ) -> GroupSpec {
        GroupSpec {
            long_lived: false,
            name: "g".into(),
            kind,
            local_as: 65_000,
            global_as,
            peer_as: 65_010,
            router_id: Ipv4Addr::new(192, 0, 2, 1),
            next_hop_self,
            local_v4: locals.0.then_some(Ipv4Addr::new(127, 0, 0, 1)),
            local_v6: locals.1.then_some(Ipv6Addr::LOCALHOST),
            export: Arc::new(ribshard_policy::Chain::accept_all()),
            params: SessionParams {
                four_octet_as,
                ..SessionParams::default()
            },
            families: [true, true],
            role,
            add_path: None,
        }
    }

    fn source(ebgp: bool, rr_cluster: Option<u32>) -> PeerInfo {
        PeerInfo {
            ebgp,
            router_id: 0x0a00_0001,
            address: u128::from(0x7f00_0010u32),
            local_as: 65_000,
            peer_as: if ebgp { 65_001 } else { 65_000 },
            rr_cluster,
            rs_client: false,
        }
    }

    fn decoded(spec: &GroupSpec, src: &PeerInfo, a: &RouteAttrs, p: &Prefix) -> Option<Exported> {
        let s = super::super::source_of(src);
        let v = spec.export.evaluate(&super::super::subject(spec, &s, a, p));
        super::super::export_decoded(spec, src, a, p, &v)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        /// Wherever the bytes path answers, it answers exactly what the model gives.
        #[test]
        fn the_bytes_path_gives_the_models_bytes(
            list in attributes(),
            next_hop in prop::sample::select(vec![0usize, 1, 4, 16, 32]),
            kind in kind(),
            global_as in prop::option::of(Just(64_999u32)),
            next_hop_self in any::<bool>(),
            locals in any::<(bool, bool)>(),
            role in prop::option::weighted(0.1, 0u8..5),
            four_octet_as in prop::bool::weighted(0.9),
            ebgp in any::<bool>(),
            rr_cluster in prop::option::of(Just(0x0b0b_0b0bu32)),
            v6 in any::<bool>(),
        ) {
            let nh: Vec<u8> = (0..next_hop as u8).map(|i| i + 1).collect();
            let a = set(&nh, &list);
            let spec = spec(kind, global_as, next_hop_self, locals, role, four_octet_as);
            let src = source(ebgp, rr_cluster);
            let p = if v6 {
                Prefix::v6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0), 48).unwrap()
            } else {
                Prefix::v4(Ipv4Addr::new(10, 1, 0, 0), 16).unwrap()
            };
            if let Some(e) = export(&spec, &src, &a, p.family()) {
                prop_assert_eq!(Some(e), decoded(&spec, &src, &a, &p), "{:?}", list);
            }
        }
    }

    /// The common sets of each kind of group are made on the bytes (not all left to the
    /// model, which would make the property above hold trivially).
    #[test]
    fn common_sets_are_made_on_the_bytes() {
        let list: Vec<Raw> = vec![
            (attr::ORIGIN, 0x40, vec![0]),
            (attr::AS_PATH, 0x40, as_path(&[(2, 3)], 65_001)),
            (attr::NEXT_HOP, 0x40, vec![198, 51, 100, 1]),
            (attr::MULTI_EXIT_DISC, 0x80, vec![0, 0, 0, 10]),
            (attr::LOCAL_PREF, 0x40, vec![0, 0, 0, 200]),
            (attr::COMMUNITIES, 0xc0, vec![0xfd, 0xe8, 0, 1]),
            (99, 0xc0, vec![1, 2, 3]),
            (100, 0x80, vec![1]),
        ];
        let a = set(&[198, 51, 100, 1], &list);
        let v4 = Prefix::v4(Ipv4Addr::new(10, 1, 0, 0), 16).unwrap();
        let v6 = Prefix::v6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0), 48).unwrap();
        for kind in [
            GroupKind::External,
            GroupKind::RouteServer,
            GroupKind::Internal {
                client_cluster: Some(7),
            },
        ] {
            for (ebgp, p) in [(true, v4), (false, v4), (true, v6)] {
                let spec = spec(kind, Some(64_999), true, (true, true), None, true);
                let src = source(ebgp, None);
                let e = export(&spec, &src, &a, p.family());
                assert!(e.is_some(), "{kind:?} {ebgp} {p}");
                assert_eq!(e, decoded(&spec, &src, &a, &p), "{kind:?} {ebgp} {p}");
            }
        }
    }

    /// AS_PATHs whose first segment is full or nearly: our AS goes into it while it has
    /// room, else the model makes a new segment; both ways give the model's bytes.
    #[test]
    fn full_first_segments() {
        let v4 = Prefix::v4(Ipv4Addr::new(10, 1, 0, 0), 16).unwrap();
        for n in [1, 253, 254, 255] {
            for global_as in [None, Some(64_999)] {
                for kind in [2, 1] {
                    let list: Vec<Raw> = vec![
                        (attr::ORIGIN, 0x40, vec![0]),
                        (
                            attr::AS_PATH,
                            0x40 | flags::EXTENDED_LENGTH,
                            as_path(&[(kind, n), (2, 2)], 65_001),
                        ),
                        (attr::NEXT_HOP, 0x40, vec![198, 51, 100, 1]),
                    ];
                    let a = set(&[198, 51, 100, 1], &list);
                    let spec = spec(
                        GroupKind::External,
                        global_as,
                        true,
                        (true, false),
                        None,
                        true,
                    );
                    let src = source(true, None);
                    let want = decoded(&spec, &src, &a, &v4);
                    let room = kind == 2 && n + 1 + usize::from(global_as.is_some()) <= 255;
                    match export(&spec, &src, &a, v4.family()) {
                        Some(e) => {
                            assert!(room, "{n} {global_as:?} {kind}");
                            assert_eq!(Some(e), want, "{n} {global_as:?} {kind}");
                        }
                        None => assert!(!room, "{n} {global_as:?} {kind}: left to the model"),
                    }
                }
            }
        }
    }
}
