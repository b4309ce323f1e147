//! UPDATE errors: RFC 4271 section 6.3 (session resets), RFC 7606 (treat-as-withdraw,
//! attribute discard, per attribute with the flags, lengths and repeats it names), RFC 7607
//! (AS 0), RFC 5065 (confederation segments from outside), and next hops that are no usable
//! host address (RFC 4271 section 6.3).

use crate::bytes::{as_path4, attr, message, next_hop, origin, update};
use crate::{case, Case, Ctx, Expect, Kind};
use ribshard_wire::attributes::AttrValue;
use ribshard_wire::Origin;

type Attrs = fn(&Ctx) -> Vec<Vec<u8>>;

/// The case's prefix announced with `attrs`: withdrawn (treat-as-withdraw, or ignored).
fn withdrawn(name: &str, kind: Kind, attrs: Attrs) -> Case {
    case(name, kind, move |c| {
        (c.announce(attrs(c)), Expect::Withdrawn)
    })
}

/// The case's prefix announced with `attrs`: kept without the attribute `code`.
fn discarded(name: &str, kind: Kind, code: u8, attrs: Attrs) -> Case {
    case(name, kind, move |c| {
        (c.announce(attrs(c)), Expect::Discarded(code))
    })
}

/// An UPDATE of `attrs` and no NLRI whose attribute `bad` calls for treat-as-withdraw: RFC
/// 7606 section 5.2, a session reset with RFC 4271's subcode.
fn reset_without_nlri(name: &str, subcode: u8, bad: Vec<u8>, data: Option<Vec<u8>>) -> Case {
    case(name, Kind::Ebgp, move |c| {
        let attrs: Vec<Vec<u8>> = c
            .base()
            .into_iter()
            .filter(|a| a[1] != bad[1])
            .chain([bad.clone()])
            .collect();
        let data = data.clone().unwrap_or_else(|| bad.clone());
        (update(&[], &attrs, &[]), Expect::reset(3, subcode, &data))
    })
}

fn resets() -> Vec<Case> {
    let mut v = vec![
        case(
            "RFC 4271 6.3: withdrawn routes length beyond the message",
            Kind::Ebgp,
            |c| {
                let mut m = c.announce(c.base());
                m[19..21].copy_from_slice(&2000u16.to_be_bytes());
                (m, Expect::reset(3, 1, &[]))
            },
        ),
        case(
            "RFC 4271 6.3: total path attribute length beyond the message",
            Kind::Ebgp,
            |c| {
                let mut m = c.announce(c.base());
                m[21..23].copy_from_slice(&2000u16.to_be_bytes());
                (m, Expect::reset(3, 1, &[]))
            },
        ),
        case(
            "RFC 7606 5.3: an NLRI prefix of length 33",
            Kind::Ebgp,
            |c| {
                let m = update(&[], &c.base(), &[33, 10, 0, 0, 0, 0]);
                (m, Expect::reset(3, 10, &[]))
            },
        ),
        case(
            "RFC 7606 5.3: an NLRI prefix of length 255",
            Kind::Ebgp,
            |c| {
                let m = update(&[], &c.base(), &[255, 10]);
                (m, Expect::reset(3, 10, &[]))
            },
        ),
        case("RFC 7606 5.3: a truncated NLRI prefix", Kind::Ebgp, |c| {
            let mut nlri = c.nlri();
            nlri.extend_from_slice(&[24, 10, 9]);
            (update(&[], &c.base(), &nlri), Expect::reset(3, 10, &[]))
        }),
        case(
            "RFC 7606 5.3: a withdrawn prefix of length 40",
            Kind::Ebgp,
            |_| {
                let m = update(&[40, 1, 2, 3, 4, 5], &[], &[]);
                (m, Expect::reset(3, 10, &[]))
            },
        ),
        case(
            "RFC 7606 5.3: a truncated withdrawn prefix",
            Kind::Ebgp,
            |_| (update(&[24, 10], &[], &[]), Expect::reset(3, 10, &[])),
        ),
        case(
            "RFC 7606 5.3: an iBGP NLRI prefix of length 33",
            Kind::Ibgp,
            |c| {
                let m = update(&[], &c.base(), &[33, 10, 0, 0, 0, 0]);
                (m, Expect::reset(3, 10, &[]))
            },
        ),
    ];
    // Unknown attributes that claim to be well-known (not optional): incidents' types
    // among them (23 Tunnel Encapsulation, 28, 40 Prefix-SID).
    for code in [11u8, 23, 28, 40, 99, 255] {
        v.push(case(
            format!("RFC 4271 6.3: unrecognized well-known attribute {code}"),
            Kind::Ebgp,
            move |c| {
                let bad = attr(0x40, code, &[1, 2, 3]);
                (c.announce(c.plus(bad.clone())), Expect::reset(3, 2, &bad))
            },
        ));
    }
    // RFC 7606 section 5.2: an UPDATE without NLRI whose error calls for treat-as-withdraw.
    v.extend([
        reset_without_nlri("RFC 7606 5.2: ORIGIN 7 and no NLRI", 6, origin(7), None),
        reset_without_nlri(
            "RFC 7606 5.2: ORIGIN of 2 octets and no NLRI",
            5,
            attr(0x40, 1, &[0, 0]),
            None,
        ),
        reset_without_nlri(
            "RFC 7606 5.2: an AS_PATH segment of type 9 and no NLRI",
            11,
            attr(0x40, 2, &[9, 1, 0, 0, 0xfe, 0x4d]),
            Some(vec![]),
        ),
        reset_without_nlri(
            "RFC 7606 5.2: NEXT_HOP of 5 octets and no NLRI",
            5,
            attr(0x40, 3, &[1, 2, 3, 4, 5]),
            None,
        ),
        reset_without_nlri(
            "RFC 7606 5.2: COMMUNITIES of 3 octets and no NLRI",
            5,
            attr(0xc0, 8, &[1, 2, 3]),
            None,
        ),
        reset_without_nlri(
            "RFC 7606 5.2: MULTI_EXIT_DISC of 3 octets and no NLRI",
            5,
            attr(0x80, 4, &[1, 2, 3]),
            None,
        ),
        reset_without_nlri(
            "RFC 7606 5.2: ORIGIN marked optional and no NLRI",
            4,
            attr(0xc0, 1, &[0]),
            None,
        ),
    ]);
    v
}

fn origin_cases() -> Vec<Case> {
    vec![
        withdrawn("RFC 7606 7.1: ORIGIN of no octets", Kind::Ebgp, |c| {
            c.with(1, Some(attr(0x40, 1, &[])))
        }),
        withdrawn("RFC 7606 7.1: ORIGIN of 2 octets", Kind::Ebgp, |c| {
            c.with(1, Some(attr(0x40, 1, &[0, 0])))
        }),
        withdrawn("RFC 7606 7.1: ORIGIN 3", Kind::Ebgp, |c| {
            c.with(1, Some(origin(3)))
        }),
        withdrawn("RFC 7606 7.1: ORIGIN 255", Kind::Ebgp, |c| {
            c.with(1, Some(origin(255)))
        }),
        withdrawn("RFC 7606 7.1: ORIGIN 3 from iBGP", Kind::Ibgp, |c| {
            c.with(1, Some(origin(3)))
        }),
        withdrawn("RFC 7606 3c: ORIGIN marked optional", Kind::Ebgp, |c| {
            c.with(1, Some(attr(0xc0, 1, &[0])))
        }),
        withdrawn(
            "RFC 7606 3c: ORIGIN marked non-transitive",
            Kind::Ebgp,
            |c| c.with(1, Some(attr(0x00, 1, &[0]))),
        ),
        withdrawn("RFC 7606 3d: ORIGIN missing", Kind::Ebgp, |c| {
            c.with(1, None)
        }),
        withdrawn("RFC 7606 3d: ORIGIN missing from iBGP", Kind::Ibgp, |c| {
            c.with(1, None)
        }),
        case(
            "RFC 4271 4.3: ORIGIN with the extended-length bit is well formed",
            Kind::Ebgp,
            |c| {
                let m = c.announce(c.with(1, Some(attr(0x50, 1, &[2]))));
                let check = |a: &ribshard_wire::PathAttributes| match a.get(1) {
                    Some(AttrValue::Origin(Origin::Incomplete)) => Ok(()),
                    o => Err(format!("ORIGIN {o:?}")),
                };
                (m, Expect::kept_if(check))
            },
        ),
    ]
}

/// The good attributes with this AS_PATH.
fn p(c: &Ctx, segments: &[(u8, Vec<u32>)]) -> Vec<Vec<u8>> {
    c.with(2, Some(as_path4(segments)))
}

/// The good attributes with an AS_PATH of this value.
fn raw(c: &Ctx, value: &[u8]) -> Vec<Vec<u8>> {
    c.with(2, Some(attr(0x40, 2, value)))
}

fn as_path_cases() -> Vec<Case> {
    vec![
        withdrawn(
            "RFC 7606 7.2: an AS_PATH segment of type 0",
            Kind::Ebgp,
            |c| p(c, &[(0, vec![c.asn])]),
        ),
        withdrawn(
            "RFC 7606 7.2: an AS_PATH segment of type 5",
            Kind::Ebgp,
            |c| p(c, &[(2, vec![c.asn]), (5, vec![64500])]),
        ),
        withdrawn(
            "RFC 7606 7.2: an AS_PATH segment longer than the attribute",
            Kind::Ebgp,
            |c| {
                let [a, b, cc, d] = c.asn.to_be_bytes();
                raw(c, &[2, 3, a, b, cc, d])
            },
        ),
        withdrawn(
            "RFC 7606 7.2: an AS_PATH segment of no ASes",
            Kind::Ebgp,
            |c| p(c, &[(2, vec![c.asn]), (2, vec![])]),
        ),
        withdrawn(
            "RFC 7606 7.2: an AS_PATH with a trailing octet",
            Kind::Ebgp,
            |c| {
                let [a, b, cc, d] = c.asn.to_be_bytes();
                raw(c, &[2, 1, a, b, cc, d, 2])
            },
        ),
        withdrawn(
            "RFC 7606 7.2: an AS_PATH with a segment header cut short",
            Kind::Ebgp,
            |c| {
                let [a, b, cc, d] = c.asn.to_be_bytes();
                raw(c, &[2, 1, a, b, cc, d, 2, 1, 0])
            },
        ),
        withdrawn(
            "RFC 7606 7.2: an AS_PATH of 2-octet ASes on a 4-octet session",
            Kind::Ebgp,
            |c| raw(c, &[2, 1, 0xfe, 0x4d]),
        ),
        withdrawn("RFC 7607 2: AS 0 first in the AS_PATH", Kind::Ebgp, |c| {
            p(c, &[(2, vec![0, c.asn])])
        }),
        withdrawn("RFC 7607 2: AS 0 last in the AS_PATH", Kind::Ebgp, |c| {
            p(c, &[(2, vec![c.asn, 64500, 0])])
        }),
        withdrawn("RFC 7607 2: AS 0 in an AS_SET", Kind::Ebgp, |c| {
            p(c, &[(2, vec![c.asn]), (1, vec![64500, 0])])
        }),
        withdrawn("RFC 7607 2: AS 0 in an iBGP AS_PATH", Kind::Ibgp, |c| {
            p(c, &[(2, vec![64500, 0])])
        }),
        withdrawn(
            "RFC 5065 / RFC 7606 7.2: AS_CONFED_SEQUENCE from an external peer",
            Kind::Ebgp,
            |c| p(c, &[(3, vec![64512]), (2, vec![c.asn])]),
        ),
        withdrawn(
            "RFC 5065 / RFC 7606 7.2: AS_CONFED_SET from an external peer",
            Kind::Ebgp,
            |c| p(c, &[(2, vec![c.asn]), (4, vec![64512, 64513])]),
        ),
        withdrawn("RFC 7606 3c: AS_PATH marked optional", Kind::Ebgp, |c| {
            let [a, b, cc, d] = c.asn.to_be_bytes();
            c.with(2, Some(attr(0xc0, 2, &[2, 1, a, b, cc, d])))
        }),
        withdrawn("RFC 7606 3d: AS_PATH missing", Kind::Ebgp, |c| {
            c.with(2, None)
        }),
        withdrawn("RFC 7606 3d: AS_PATH missing from iBGP", Kind::Ibgp, |c| {
            c.with(2, None)
        }),
        case(
            "RFC 4271 9.1.2: an AS_PATH of 900 ASes within 4,096 octets",
            Kind::Ebgp,
            |c| {
                let asns: Vec<u32> = [c.asn]
                    .into_iter()
                    .chain(4_200_000_001..4_200_000_900)
                    .collect();
                let m = c.announce(c.with(2, Some(crate::bytes::long_sequence(&asns))));
                (m, Expect::kept())
            },
        ),
    ]
}

fn next_hop_cases() -> Vec<Case> {
    let mut v = vec![
        withdrawn("RFC 7606 7.3: NEXT_HOP of 3 octets", Kind::Ebgp, |c| {
            c.with(3, Some(attr(0x40, 3, &[198, 51, 100])))
        }),
        withdrawn("RFC 7606 7.3: NEXT_HOP of 5 octets", Kind::Ebgp, |c| {
            c.with(3, Some(attr(0x40, 3, &[198, 51, 100, 9, 9])))
        }),
        withdrawn("RFC 7606 7.3: NEXT_HOP of no octets", Kind::Ebgp, |c| {
            c.with(3, Some(attr(0x40, 3, &[])))
        }),
        withdrawn("RFC 7606 3c: NEXT_HOP marked optional", Kind::Ebgp, |c| {
            c.with(3, Some(attr(0xc0, 3, &[198, 51, 100, 9])))
        }),
        withdrawn(
            "RFC 7606 3d: NEXT_HOP missing with IPv4 NLRI",
            Kind::Ebgp,
            |c| c.with(3, None),
        ),
        withdrawn("RFC 7606 3d: NEXT_HOP missing from iBGP", Kind::Ibgp, |c| {
            c.with(3, None)
        }),
    ];
    let unusable: [(&str, [u8; 4]); 7] = [
        ("0.0.0.0", [0, 0, 0, 0]),
        ("224.0.0.1 (multicast)", [224, 0, 0, 1]),
        ("239.255.255.255 (multicast)", [239, 255, 255, 255]),
        ("240.0.0.1 (class E)", [240, 0, 0, 1]),
        ("255.255.255.255", [255, 255, 255, 255]),
        ("our own address on the session", [127, 0, 0, 90]),
        ("0.0.0.0 from iBGP", [0, 0, 0, 0]),
    ];
    for (what, a) in unusable {
        let kind = if what.ends_with("iBGP") {
            Kind::Ibgp
        } else {
            Kind::Ebgp
        };
        v.push(case(
            format!("RFC 4271 6.3: NEXT_HOP {what} is ignored"),
            kind,
            move |c| (c.announce(c.with(3, Some(next_hop(a)))), Expect::Withdrawn),
        ));
    }
    v.push(case(
        "RFC 4271 5.1.3: NEXT_HOP of the peer's own address is used",
        Kind::Ebgp,
        |c| {
            (
                c.announce(c.with(3, Some(next_hop([127, 0, 1, 9])))),
                Expect::kept(),
            )
        },
    ));
    v
}

/// Optional attributes whose length must be a fixed size or a non-zero multiple of one.
fn length_cases() -> Vec<Case> {
    let mut v = Vec::new();
    // (attribute, RFC 7606 section, flags, type, kind, lengths that are wrong)
    type Rule = (&'static str, &'static str, u8, u8, Kind, &'static [usize]);
    let rules: [Rule; 9] = [
        ("MULTI_EXIT_DISC", "7.4", 0x80, 4, Kind::Ebgp, &[0, 3, 5]),
        ("LOCAL_PREF", "7.5", 0x40, 5, Kind::Ibgp, &[0, 3, 5]),
        ("COMMUNITIES", "7.8", 0xc0, 8, Kind::Ebgp, &[0, 3, 5, 6]),
        ("COMMUNITIES", "7.8", 0xc0, 8, Kind::Ibgp, &[5]),
        ("ORIGINATOR_ID", "7.9", 0x80, 9, Kind::Ibgp, &[0, 3, 5]),
        ("CLUSTER_LIST", "7.10", 0x80, 10, Kind::Ibgp, &[0, 3, 5]),
        (
            "EXTENDED_COMMUNITIES",
            "7.14",
            0xc0,
            16,
            Kind::Ebgp,
            &[0, 7, 9],
        ),
        (
            "LARGE_COMMUNITY",
            "RFC 8092 5",
            0xc0,
            32,
            Kind::Ebgp,
            &[0, 11, 13],
        ),
        ("OTC", "RFC 9234 5", 0xc0, 35, Kind::Ebgp, &[0, 3, 5]),
    ];
    for (name, section, flags, code, kind, lengths) in rules {
        for &len in lengths {
            let section = if section.starts_with("RFC") {
                section.to_string()
            } else {
                format!("RFC 7606 {section}")
            };
            let from = if kind == Kind::Ibgp { " from iBGP" } else { "" };
            v.push(case(
                format!("{section}: {name} of {len} octets{from}"),
                kind,
                move |c| {
                    let bad = attr(flags, code, &vec![1; len]);
                    (c.announce(c.with(code, Some(bad))), Expect::Withdrawn)
                },
            ));
        }
    }
    // RFC 7606 section 3c: the Optional or Transitive bit in conflict.
    let flags: [(&str, u8, u8, &[u8]); 5] = [
        ("MULTI_EXIT_DISC marked transitive", 0xc0, 4, &[0, 0, 0, 1]),
        ("MULTI_EXIT_DISC marked well-known", 0x40, 4, &[0, 0, 0, 1]),
        ("COMMUNITIES marked well-known", 0x40, 8, &[0, 1, 0, 1]),
        ("COMMUNITIES marked non-transitive", 0x80, 8, &[0, 1, 0, 1]),
        ("OTC marked well-known", 0x40, 35, &[0, 0, 0xfe, 0x4d]),
    ];
    for (what, f, code, value) in flags {
        v.push(case(format!("RFC 7606 3c: {what}"), Kind::Ebgp, move |c| {
            (c.announce(c.plus(attr(f, code, value))), Expect::Withdrawn)
        }));
    }
    v
}

fn discard_cases() -> Vec<Case> {
    vec![
        discarded(
            "RFC 7606 7.6: ATOMIC_AGGREGATE of 1 octet",
            Kind::Ebgp,
            6,
            |c| c.plus(attr(0x40, 6, &[1])),
        ),
        discarded(
            "RFC 7606 7.6: ATOMIC_AGGREGATE marked optional",
            Kind::Ebgp,
            6,
            |c| c.plus(attr(0xc0, 6, &[])),
        ),
        discarded(
            "RFC 7606 7.7: AGGREGATOR of 6 octets on a 4-octet session",
            Kind::Ebgp,
            7,
            |c| c.plus(attr(0xc0, 7, &[0, 0, 0xfe, 0x4d, 192, 0])),
        ),
        discarded("RFC 7606 7.7: AGGREGATOR of 9 octets", Kind::Ebgp, 7, |c| {
            c.plus(attr(0xc0, 7, &[0; 9]))
        }),
        discarded("RFC 7607 2: AS 0 in AGGREGATOR", Kind::Ebgp, 7, |c| {
            c.plus(attr(0xc0, 7, &[0, 0, 0, 0, 192, 0, 2, 1]))
        }),
        discarded(
            "RFC 7606 3c: AGGREGATOR marked well-known",
            Kind::Ebgp,
            7,
            |c| c.plus(attr(0x40, 7, &[0, 0, 0xfe, 0x4d, 192, 0, 2, 1])),
        ),
        discarded(
            "RFC 7606 7.9: ORIGINATOR_ID from an external peer",
            Kind::Ebgp,
            9,
            |c| c.plus(attr(0x80, 9, &[1, 2, 3, 4])),
        ),
        discarded(
            "RFC 7606 7.10: CLUSTER_LIST from an external peer",
            Kind::Ebgp,
            10,
            |c| c.plus(attr(0x80, 10, &[1, 2, 3, 4])),
        ),
        discarded(
            "RFC 6793 3: AS4_PATH on a 4-octet session",
            Kind::Ebgp,
            17,
            |c| c.plus(attr(0xc0, 17, &[2, 1, 0, 1, 0, 0])),
        ),
        discarded(
            "RFC 6793 3: AS4_AGGREGATOR on a 4-octet session",
            Kind::Ebgp,
            18,
            |c| c.plus(attr(0xc0, 18, &[0, 1, 0, 0, 192, 0, 2, 1])),
        ),
        case(
            "RFC 7606 7.5: LOCAL_PREF from an external peer is ignored",
            Kind::Ebgp,
            |c| {
                let m = c.announce(c.plus(attr(0x40, 5, &999u32.to_be_bytes())));
                let check = |a: &ribshard_wire::PathAttributes| match a.get(5) {
                    Some(AttrValue::LocalPref(999)) => Err("LOCAL_PREF 999 kept".to_string()),
                    _ => Ok(()),
                };
                (m, Expect::kept_if(check))
            },
        ),
    ]
}

/// RFC 7606 section 3g: a repeated attribute (other than MP_REACH / MP_UNREACH): all but the
/// first discarded. RFC 7606 section 4: the attribute list over- and underrun.
fn list_cases() -> Vec<Case> {
    vec![
        case(
            "RFC 7606 3g: ORIGIN twice keeps the first",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.base();
                attrs.push(origin(2));
                let check = |a: &ribshard_wire::PathAttributes| match a.get(1) {
                    Some(AttrValue::Origin(Origin::Igp)) => Ok(()),
                    o => Err(format!("ORIGIN {o:?}")),
                };
                (c.announce(attrs), Expect::kept_if(check))
            },
        ),
        case(
            "RFC 7606 3g: COMMUNITIES twice keeps the first",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.plus(attr(0xc0, 8, &[0, 1, 0, 1]));
                attrs.push(attr(0xc0, 8, &[0, 2, 0, 2]));
                let check = |a: &ribshard_wire::PathAttributes| match a.communities() {
                    [0x0001_0001] => Ok(()),
                    o => Err(format!("COMMUNITIES {o:?}")),
                };
                (c.announce(attrs), Expect::kept_if(check))
            },
        ),
        case(
            "RFC 7606 3g: NEXT_HOP twice keeps the first",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.base();
                attrs.push(next_hop([198, 51, 100, 77]));
                let check = |a: &ribshard_wire::PathAttributes| match a.get(3) {
                    Some(AttrValue::NextHop(n)) if n.octets() == [198, 51, 100, 9] => Ok(()),
                    o => Err(format!("NEXT_HOP {o:?}")),
                };
                (c.announce(attrs), Expect::kept_if(check))
            },
        ),
        case(
            "RFC 7606 3g: MULTI_EXIT_DISC twice keeps the first",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.plus(attr(0x80, 4, &[0, 0, 0, 5]));
                attrs.push(attr(0x80, 4, &[0, 0, 0, 6]));
                let check = |a: &ribshard_wire::PathAttributes| match a.get(4) {
                    Some(AttrValue::Med(5)) => Ok(()),
                    o => Err(format!("MED {o:?}")),
                };
                (c.announce(attrs), Expect::kept_if(check))
            },
        ),
        case(
            "RFC 7606 4: the last attribute overruns the attribute field",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.base().concat();
                attrs.extend_from_slice(&[0xc0, 8, 200, 0, 0]);
                (update(&[], &[attrs], &c.nlri()), Expect::Withdrawn)
            },
        ),
        case(
            "RFC 7606 4: an attribute header cut short",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.base().concat();
                attrs.extend_from_slice(&[0x40, 5]);
                (update(&[], &[attrs], &c.nlri()), Expect::Withdrawn)
            },
        ),
        case("RFC 7606 4: an attribute of one octet", Kind::Ebgp, |c| {
            let mut attrs = c.base().concat();
            attrs.push(0x40);
            (update(&[], &[attrs], &c.nlri()), Expect::Withdrawn)
        }),
        case(
            "RFC 7606 4: an extended length cut short",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.base().concat();
                attrs.extend_from_slice(&[0xd0, 8, 0]);
                (update(&[], &[attrs], &c.nlri()), Expect::Withdrawn)
            },
        ),
        case(
            "RFC 4271 9: an unknown optional transitive attribute is carried",
            Kind::Ebgp,
            |c| {
                let m = c.announce(c.plus(attr(0xc0, 201, &[9, 9, 9])));
                let check = |a: &ribshard_wire::PathAttributes| match a.get(201) {
                    Some(_) => Ok(()),
                    None => Err("attribute 201 dropped".to_string()),
                };
                (m, Expect::kept_if(check))
            },
        ),
        case(
            "RFC 4271 9: an unknown optional non-transitive attribute is not passed on",
            Kind::Ebgp,
            |c| {
                let m = c.announce(c.plus(attr(0x80, 202, &[9])));
                (m, Expect::kept())
            },
        ),
        case(
            "RFC 4271 6.3: an UPDATE of only withdrawals of unknown prefixes",
            Kind::Ebgp,
            |_| (update(&[24, 10, 250, 250], &[], &[]), Expect::kept()),
        ),
        case("RFC 4724 2: End-of-RIB for IPv4", Kind::Ebgp, |_| {
            (update(&[], &[], &[]), Expect::kept())
        }),
        case(
            "RFC 4271 4.3: an UPDATE with NLRI and no attributes",
            Kind::Ebgp,
            |c| (update(&[], &[], &c.nlri()), Expect::Withdrawn),
        ),
        case(
            "RFC 4271 4.1: a message with trailing octets after the NLRI",
            Kind::Ebgp,
            |c| {
                let mut m = c.announce(c.base());
                m.extend_from_slice(&[24]);
                let len = m.len() as u16;
                m[16..18].copy_from_slice(&len.to_be_bytes());
                (m, Expect::reset(3, 10, &[]))
            },
        ),
        case(
            "RFC 4271 6.1: an UPDATE whose header type is KEEPALIVE",
            Kind::Ebgp,
            |c| {
                let mut m = c.announce(c.base());
                m[18] = 4;
                let len = m.len() as u16;
                (m, Expect::reset(1, 2, &len.to_be_bytes()))
            },
        ),
        case(
            "RFC 4271 6.1: a message of type 2 with a KEEPALIVE's length",
            Kind::Ebgp,
            |_| (message(2, &[]), Expect::reset(1, 2, &[0, 19])),
        ),
    ]
}

pub fn cases() -> Vec<Case> {
    let mut v = resets();
    v.extend(origin_cases());
    v.extend(as_path_cases());
    v.extend(next_hop_cases());
    v.extend(length_cases());
    v.extend(discard_cases());
    v.extend(list_cases());
    v
}
