//! Property tests: valid messages round-trip exactly; any bytes at all decode without
//! panicking into exactly one RFC 4271 / RFC 7606 outcome; the packer loses nothing.

use proptest::prelude::*;
use ribshard_wire::attributes::{AsPath, AsSegment, AttrValue, MpNlri, MpReach, PathAttributes};
use ribshard_wire::update::{segment, Aggregator};
use ribshard_wire::{
    decode, Action, Capability, Family, Message, Nlri, Open, Origin, Prefix, SessionParams,
    UpdateBuilder, UpdateMessage,
};
use std::net::Ipv4Addr;

fn params() -> impl Strategy<Value = SessionParams> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(four, ap4, ap6)| SessionParams {
        four_octet_as: four,
        extended_message: true,
        add_path: [ap4, ap6],
        external: false,
        mrt_rib: false,
        // The codec's round trips: AS 0 and the like are a live session's matter.
        live: false,
    })
}

fn asn(four: bool) -> BoxedStrategy<u32> {
    if four {
        any::<u32>().boxed()
    } else {
        (0u32..=65535).boxed()
    }
}

fn as_path(four: bool) -> impl Strategy<Value = AsPath> {
    prop::collection::vec((1u8..=4, prop::collection::vec(asn(four), 1..12)), 0..4).prop_map(
        |segs| AsPath {
            segments: segs
                .into_iter()
                .map(|(kind, asns)| AsSegment { kind, asns })
                .collect(),
        },
    )
}

fn v4_prefix() -> impl Strategy<Value = Prefix> {
    (any::<u32>(), 0u8..=32).prop_map(|(a, len)| Prefix::V4 { addr: a, len }.masked())
}
fn v6_prefix() -> impl Strategy<Value = Prefix> {
    (any::<[u8; 16]>(), 0u8..=128).prop_map(|(a, len)| Prefix::V6 { addr: a, len }.masked())
}
fn nlri(p: BoxedStrategy<Prefix>, add_path: bool) -> impl Strategy<Value = Vec<Nlri>> {
    prop::collection::vec((p, any::<u32>()), 0..40).prop_map(move |v| {
        v.into_iter()
            .map(|(prefix, id)| Nlri {
                path_id: add_path.then_some(id),
                prefix,
            })
            .collect()
    })
}

/// A valid UPDATE for the given session parameters.
fn update(p: SessionParams) -> impl Strategy<Value = UpdateMessage> {
    let four = p.four_octet_as;
    let optional = (
        prop::option::of(any::<u32>().prop_map(AttrValue::Med)),
        prop::option::of(any::<u32>().prop_map(AttrValue::LocalPref)),
        prop::option::of(Just(AttrValue::AtomicAggregate)),
        prop::option::of((asn(four), any::<u32>()).prop_map(|(asn, a)| {
            AttrValue::Aggregator(Aggregator {
                asn,
                address: Ipv4Addr::from(a),
            })
        })),
        prop::option::of(
            prop::collection::vec(any::<u32>(), 1..20).prop_map(AttrValue::Communities),
        ),
        prop::option::of(any::<u32>().prop_map(|a| AttrValue::OriginatorId(Ipv4Addr::from(a)))),
        prop::option::of(
            prop::collection::vec(any::<u32>(), 1..5).prop_map(AttrValue::ClusterList),
        ),
        prop::option::of(
            prop::collection::vec(any::<[u8; 8]>(), 1..5).prop_map(AttrValue::ExtCommunities),
        ),
        prop::option::of(
            prop::collection::vec(any::<[u32; 3]>(), 1..5).prop_map(AttrValue::LargeCommunities),
        ),
        prop::option::of(any::<u32>().prop_map(AttrValue::Otc)),
        prop::option::of(
            prop::collection::vec(any::<u8>(), 0..300).prop_map(|value| AttrValue::Unknown {
                type_code: 201,
                value,
            }),
        ),
    );
    (
        prop_oneof![
            Just(Origin::Igp),
            Just(Origin::Egp),
            Just(Origin::Incomplete)
        ],
        as_path(four),
        any::<u32>(),
        optional,
        nlri(v4_prefix().boxed(), p.add_path[0]),
        nlri(v4_prefix().boxed(), p.add_path[0]),
        prop::option::of((nlri(v6_prefix().boxed(), p.add_path[1]), any::<bool>())),
    )
        .prop_map(move |(origin, path, nh, opt, withdrawn, announced, mp)| {
            let mut values = vec![
                AttrValue::Origin(origin),
                AttrValue::AsPath(path),
                AttrValue::NextHop(Ipv4Addr::from(nh)),
            ];
            let (a, b, c, d, e, f, g, h, i, j, k) = opt;
            values.extend([a, b, c, d, e, f, g, h, i, j, k].into_iter().flatten());
            if let Some((v6, link_local)) = mp {
                values.push(AttrValue::MpReach(MpReach {
                    afi: 2,
                    safi: 1,
                    next_hop: vec![0x20; if link_local { 32 } else { 16 }],
                    reserved: 0,
                    nlri: MpNlri::Prefixes(v6),
                    abbreviated: false,
                }));
            }
            UpdateMessage {
                withdrawn,
                attributes: PathAttributes::canonical(values),
                nlri: announced,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn valid_updates_round_trip((p, u) in params().prop_flat_map(|p| (Just(p), update(p)))) {
        let wire = u.encode(&p);
        let Ok(Message::Update(parsed)) = decode(&wire, &p) else {
            panic!("valid UPDATE rejected");
        };
        prop_assert_eq!(parsed.action(), Action::Accept);
        let back = UpdateMessage::from_parsed(&parsed, &p);
        prop_assert_eq!(&back, &u);
        prop_assert_eq!(back.encode(&p), wire);
    }

    #[test]
    fn valid_opens_round_trip(
        asn in any::<u32>(),
        hold in prop_oneof![Just(0u16), 3u16..],
        id in 1u32..,
        rr in any::<bool>(),
        fams in prop::collection::vec((1u16..3, 1u8..3, 1u8..4), 0..4),
        role in prop::option::of(0u8..5),
        unknown in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut caps = vec![Capability::FourOctetAs(asn)];
        caps.extend(fams.iter().map(|&(afi, safi, _)| Capability::Multiprotocol { afi, safi }));
        if rr {
            caps.push(Capability::RouteRefresh);
            caps.push(Capability::EnhancedRouteRefresh);
        }
        caps.push(Capability::AddPath(fams.iter().map(|&(afi, safi, sr)| {
            ribshard_wire::open::AddPathFamily { afi, safi, send_receive: sr }
        }).collect()));
        caps.push(Capability::GracefulRestart { flags: 8, restart_time: 120, families: vec![] });
        caps.push(Capability::LongLivedGracefulRestart(fams.iter().map(|&(afi, safi, sr)| {
            ribshard_wire::open::LongLivedFamily {
                afi,
                safi,
                flags: sr << 6,
                stale_time: (u32::from(afi) * 0x10001 + u32::from(sr) * 0x7f_0000) & 0xff_ffff,
            }
        }).collect()));
        caps.extend(role.map(Capability::Role));
        caps.push(Capability::Unknown { code: 200, value: unknown });
        let open = Open::new(asn, hold, Ipv4Addr::from(id), caps);
        let wire = open.encode();
        let Ok(Message::Open(back)) = decode(&wire, &SessionParams::default()) else {
            panic!("valid OPEN rejected");
        };
        prop_assert_eq!(back.asn(), asn);
        prop_assert_eq!(&back, &open);
        prop_assert_eq!(back.encode(), wire);
    }

    /// Any bytes at all: no panic, and exactly one outcome that is self-consistent.
    #[test]
    fn arbitrary_bytes_get_exactly_one_outcome(
        body in prop::collection::vec(any::<u8>(), 0..600),
        ty in 1u8..=6,
        p in params(),
    ) {
        let mut msg = vec![0xff; 16];
        msg.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
        msg.push(ty);
        msg.extend_from_slice(&body);
        check_outcome(&msg, &p);
        // And the raw bytes, header included, as they come.
        check_outcome(&body, &p);
    }

    /// Valid UPDATEs with bytes overwritten: the malformations real peers send.
    #[test]
    fn mutated_updates_get_exactly_one_outcome(
        (p, u) in params().prop_flat_map(|p| (Just(p), update(p))),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut wire = u.encode(&p);
        for (at, byte) in edits {
            let i = 19 + at.index(wire.len() - 19);
            wire[i] = byte;
        }
        check_outcome(&wire, &p);
    }

    /// The packer splits at the maximum size and loses or reorders nothing.
    #[test]
    fn packer_loses_nothing(
        v4 in nlri(v4_prefix().boxed(), false),
        v6 in nlri(v6_prefix().boxed(), false),
        extended in any::<bool>(),
        repeat in 1usize..200,
    ) {
        let p = SessionParams { four_octet_as: true, extended_message: extended, ..SessionParams::default() };
        let b = UpdateBuilder::new(p);
        let attrs = PathAttributes::canonical([
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath { segments: vec![AsSegment { kind: segment::AS_SEQUENCE, asns: vec![65001, 65002] }] }),
            AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        ]);
        let enc = b.encode_attributes(&attrs);
        for (family, list) in [(Family::Ipv4Unicast, v4), (Family::Ipv6Unicast, v6)] {
            let list: Vec<Nlri> = std::iter::repeat_n(list, repeat).flatten().collect();
            let mut out = Vec::new();
            let n = b.announce(&enc, family, &[0x20; 16], &list, &mut out).unwrap();
            let got = collect(&out, &p, n, true);
            prop_assert_eq!(&got, &list);
            let mut out = Vec::new();
            let n = b.withdraw(family, &list, &mut out);
            prop_assert_eq!(&collect(&out, &p, n, false), &list);
        }
    }
}

fn collect(mut buf: &[u8], p: &SessionParams, messages: usize, announce: bool) -> Vec<Nlri> {
    let mut got = Vec::new();
    let mut count = 0;
    while !buf.is_empty() {
        let len = ribshard_wire::frame(buf, p.max_message_len())
            .unwrap()
            .unwrap();
        assert!(len <= p.max_message_len());
        let Ok(Message::Update(u)) = decode(&buf[..len], p) else {
            panic!("packed UPDATE rejected");
        };
        assert_eq!(u.action(), Action::Accept);
        if announce {
            got.extend(u.announced());
        } else {
            got.extend(u.withdrawn_all());
        }
        buf = &buf[len..];
        count += 1;
    }
    assert_eq!(count, messages);
    got
}

fn check_outcome(msg: &[u8], p: &SessionParams) {
    match decode(msg, p) {
        Err(e) => {
            let n = e.notification();
            assert!(matches!(n.code, 1 | 2 | 3 | 7), "{e}: {n:?}");
            assert!(n.subcode <= 11);
        }
        Ok(Message::Update(u)) => {
            let announced = u.announced().count();
            match u.action() {
                Action::TreatAsWithdraw => {
                    assert!(u.treat_as_withdraw.is_some());
                    assert_eq!(announced, 0);
                }
                Action::AttributeDiscard => assert!(!u.discarded.is_empty()),
                Action::Accept => assert!(u.discarded.is_empty() && u.treat_as_withdraw.is_none()),
                Action::SessionReset(_) => unreachable!("decode reports resets as errors"),
            }
            // Building the owned model never fails, whatever was received.
            let _ = PathAttributes::from_view(&u.attrs, p);
        }
        Ok(_) => {}
    }
}
