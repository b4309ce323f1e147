//! MP_REACH_NLRI / MP_UNREACH_NLRI (RFC 4760, RFC 7606 sections 3g, 5.3 and 7.11), 2-octet-AS
//! speakers (RFC 6793), Add-Path NLRI (RFC 7911), extended messages (RFC 8654) and the input
//! of the incidents: attributes 23, 28, 35 and 40 malformed, AS paths of 2,048 to 10,000
//! ASes, 16,000 communities.

use crate::bytes::{as_path2, attr, long_sequence, mp_reach, mp_unreach, update, NH6};
use crate::{case, Case, Ctx, Expect, Kind};
use ribshard_wire::attributes::AttrValue;
use ribshard_wire::PathAttributes;

/// An IPv6 announcement of the case's prefix with this MP_REACH_NLRI instead of the good one.
fn v6_with(c: &Ctx, reach: Vec<u8>) -> Vec<u8> {
    let mut attrs: Vec<Vec<u8>> = c.base().into_iter().filter(|a| a[1] != 3).collect();
    attrs.push(reach);
    update(&[], &attrs, &[])
}

fn mp_cases() -> Vec<Case> {
    let mut v = vec![
        case("RFC 7606 3g: MP_REACH_NLRI twice", Kind::Ebgp, |c| {
            let reach = mp_reach(2, 1, &NH6, &c.nlri6());
            let mut attrs: Vec<Vec<u8>> = c.with(3, None);
            attrs.push(reach.clone());
            attrs.push(reach);
            (update(&[], &attrs, &[]), Expect::reset(3, 1, &[]))
        })
        .v6(),
        case("RFC 7606 3g: MP_UNREACH_NLRI twice", Kind::Ebgp, |c| {
            let unreach = mp_unreach(2, 1, &c.nlri6());
            (
                update(&[], &[unreach.clone(), unreach], &[]),
                Expect::reset(3, 1, &[]),
            )
        })
        .v6(),
        case(
            "RFC 7606 5.3: MP_REACH_NLRI with an IPv6 prefix of length 129",
            Kind::Ebgp,
            |c| {
                let bad = mp_reach(2, 1, &NH6, &[129, 0x20, 1]);
                (v6_with(c, bad.clone()), Expect::reset(3, 9, &bad))
            },
        )
        .v6(),
        case(
            "RFC 7606 5.3: MP_REACH_NLRI with a truncated prefix",
            Kind::Ebgp,
            |c| {
                let mut nlri = c.nlri6();
                nlri.extend_from_slice(&[64, 0x20, 1]);
                let bad = mp_reach(2, 1, &NH6, &nlri);
                (v6_with(c, bad.clone()), Expect::reset(3, 9, &bad))
            },
        )
        .v6(),
        case(
            "RFC 7606 5.3: MP_UNREACH_NLRI with a prefix of length 200",
            Kind::Ebgp,
            |_| {
                let bad = mp_unreach(2, 1, &[200, 1, 2]);
                (
                    update(&[], std::slice::from_ref(&bad), &[]),
                    Expect::reset(3, 9, &bad),
                )
            },
        )
        .v6(),
        case(
            "RFC 4760 4: MP_UNREACH_NLRI of 2 octets",
            Kind::Ebgp,
            |_| {
                let bad = attr(0x80, 15, &[0, 2]);
                (
                    update(&[], std::slice::from_ref(&bad), &[]),
                    Expect::reset(3, 9, &bad),
                )
            },
        )
        .v6(),
        case("RFC 4760 3: MP_REACH_NLRI of 4 octets", Kind::Ebgp, |c| {
            let bad = attr(0x80, 14, &[0, 2, 1, 16]);
            (v6_with(c, bad.clone()), Expect::reset(3, 9, &bad))
        })
        .v6(),
        case(
            "RFC 7606 4: MP_REACH_NLRI overrunning the attribute list",
            Kind::Ebgp,
            |c| {
                let mut attrs = c.with(3, None).concat();
                attrs.extend_from_slice(&[0x90, 14, 0, 200, 0, 2, 1]);
                (update(&[], &[attrs], &[]), Expect::reset(3, 1, &[]))
            },
        )
        .v6(),
        case(
            "RFC 4760 3: IPv4 unicast in MP_REACH_NLRI",
            Kind::Ebgp,
            |c| {
                let attrs: Vec<Vec<u8>> =
                    c.with(3, Some(mp_reach(1, 1, &[198, 51, 100, 9], &c.nlri())));
                (update(&[], &attrs, &[]), Expect::kept())
            },
        ),
        case(
            "RFC 2545 3: an IPv6 next hop with its link-local address",
            Kind::Ebgp,
            |c| {
                let mut nh = NH6.to_vec();
                nh.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
                (v6_with(c, mp_reach(2, 1, &nh, &c.nlri6())), Expect::kept())
            },
        )
        .v6(),
        case(
            "RFC 4760 7: a family not negotiated (IPv4 multicast) is ignored",
            Kind::Ebgp,
            |c| {
                let reach = mp_reach(1, 2, &[198, 51, 100, 9], &[24, 10, 200, 0]);
                (update(&[], &c.plus(reach), &[]), Expect::kept())
            },
        ),
        case(
            "RFC 4760 7: an unknown AFI in MP_UNREACH_NLRI is ignored",
            Kind::Ebgp,
            |_| {
                (
                    update(&[], &[mp_unreach(99, 1, &[8, 1])], &[]),
                    Expect::kept(),
                )
            },
        ),
        case("RFC 4724 2: End-of-RIB for IPv6", Kind::Ebgp, |_| {
            (update(&[], &[mp_unreach(2, 1, &[])], &[]), Expect::kept())
        })
        .v6(),
        case(
            "RFC 7606 7.1: ORIGIN 5 withdraws the IPv6 prefix too",
            Kind::Ebgp,
            |c| {
                let attrs = c.with(1, Some(crate::bytes::origin(5)));
                (c.announce6(attrs), Expect::Withdrawn)
            },
        )
        .v6(),
        case(
            "RFC 7606 7.2: AS 0 withdraws the IPv6 prefix too",
            Kind::Ibgp,
            |c| {
                let attrs = c.with(2, Some(crate::bytes::as_path4(&[(2, vec![0])])));
                (c.announce6(attrs), Expect::Withdrawn)
            },
        )
        .v6(),
    ];
    for (what, len) in [("0", 0usize), ("4", 4), ("24", 24), ("48", 48)] {
        v.push(
            case(
                format!("RFC 7606 7.11: an IPv6 next hop of {what} octets"),
                Kind::Ebgp,
                move |c| {
                    let bad = mp_reach(2, 1, &vec![0x20; len], &c.nlri6());
                    (v6_with(c, bad.clone()), Expect::reset(3, 9, &bad))
                },
            )
            .v6(),
        );
    }
    for (what, nh) in [
        ("::", [0u8; 16]),
        ("ff02::1 (multicast)", {
            let mut a = [0u8; 16];
            a[0] = 0xff;
            a[1] = 2;
            a[15] = 1;
            a
        }),
    ] {
        v.push(
            case(
                format!("RFC 4271 6.3: IPv6 next hop {what} is ignored"),
                Kind::Ebgp,
                move |c| {
                    (
                        v6_with(c, mp_reach(2, 1, &nh, &c.nlri6())),
                        Expect::Withdrawn,
                    )
                },
            )
            .v6(),
        );
    }
    v
}

fn path_of(a: &PathAttributes) -> Vec<u32> {
    match a.get(2) {
        Some(AttrValue::AsPath(p)) => p.segments.iter().flat_map(|s| s.asns.clone()).collect(),
        _ => Vec::new(),
    }
}

/// The case's prefix announced with one more optional transitive attribute.
fn plus(c: &Ctx, code: u8, value: &[u8]) -> Vec<u8> {
    c.announce(c.plus(attr(0xc0, code, value)))
}

fn two_octet_cases() -> Vec<Case> {
    let t = Kind::TwoOctet;
    vec![
        case("RFC 6793 6: an AS4_PATH segment overrunning it", t, |c| {
            (plus(c, 17, &[2, 3, 0, 0]), Expect::Discarded(17))
        }),
        case("RFC 6793 6: AS_CONFED_SEQUENCE in AS4_PATH", t, |c| {
            (plus(c, 17, &[3, 1, 0, 0, 0xfc, 0]), Expect::Discarded(17))
        }),
        case("RFC 7607 2 / RFC 6793: AS 0 in AS4_PATH", t, |c| {
            (plus(c, 17, &[2, 1, 0, 0, 0, 0]), Expect::Discarded(17))
        }),
        case("RFC 6793 6: AS4_AGGREGATOR of 6 octets", t, |c| {
            (plus(c, 18, &[0; 6]), Expect::Discarded(18))
        }),
        case("RFC 7607 2: AS 0 in AS4_AGGREGATOR", t, |c| {
            (
                plus(c, 18, &[0, 0, 0, 0, 192, 0, 2, 1]),
                Expect::Discarded(18),
            )
        }),
        case(
            "RFC 7606 7.7: AGGREGATOR of 8 octets on a 2-octet session",
            t,
            |c| {
                (
                    plus(c, 7, &[0, 0, 0xfe, 0x4d, 192, 0, 2, 1]),
                    Expect::Discarded(7),
                )
            },
        ),
        case("RFC 7607 2: AS 0 in a 2-octet AS_PATH", t, |c| {
            let attrs = c.with(2, Some(as_path2(&[(2, vec![c.asn as u16, 0])])));
            (c.announce(attrs), Expect::Withdrawn)
        }),
        case(
            "RFC 6793 4.2.3: AS4_PATH rebuilds the 4-octet path",
            t,
            |c| {
                let attrs = {
                    let mut a = c.with(2, Some(as_path2(&[(2, vec![c.asn as u16, 23456])])));
                    a.push(attr(0xc0, 17, &[2, 1, 0xfa, 0x56, 0xea, 0x01]));
                    a
                };
                let asn = c.asn;
                let check = move |a: &PathAttributes| match path_of(a).as_slice() {
                    [x, 4_200_000_001] if *x == asn => Ok(()),
                    p => Err(format!("AS path {p:?}")),
                };
                (c.announce(attrs), Expect::kept_if(check))
            },
        ),
        case(
            "RFC 6793 4.2.3: an AS4_PATH longer than AS_PATH is ignored",
            t,
            |c| {
                let mut attrs = c.base();
                attrs.push(attr(
                    0xc0,
                    17,
                    &[2, 2, 0, 0, 0xfd, 0xe8, 0xfa, 0x56, 0xea, 0x01],
                ));
                let asn = c.asn;
                let check = move |a: &PathAttributes| match path_of(a).as_slice() {
                    [x] if *x == asn => Ok(()),
                    p => Err(format!("AS path {p:?}")),
                };
                (c.announce(attrs), Expect::kept_if(check))
            },
        ),
        case(
            "RFC 6793 4.2.3: AS4_AGGREGATOR beside AGGREGATOR AS_TRANS",
            t,
            |c| {
                let mut attrs = c.base();
                attrs.push(attr(0xc0, 7, &[0x5b, 0xa0, 192, 0, 2, 1]));
                attrs.push(attr(0xc0, 18, &[0xfa, 0x56, 0xea, 0x01, 192, 0, 2, 1]));
                let check = |a: &PathAttributes| match a.get(7) {
                    Some(AttrValue::Aggregator(g)) if g.asn == 4_200_000_001 => Ok(()),
                    o => Err(format!("AGGREGATOR {o:?}")),
                };
                (c.announce(attrs), Expect::kept_if(check))
            },
        ),
    ]
}

fn add_path_cases() -> Vec<Case> {
    let a = Kind::AddPath;
    vec![
        case("RFC 7911 3: a path identifier and no prefix", a, |c| {
            let mut nlri = c.nlri();
            nlri.extend_from_slice(&[0, 0, 0, 2]);
            (update(&[], &c.base(), &nlri), Expect::reset(3, 10, &[]))
        }),
        case("RFC 7911 3: a path identifier cut short", a, |c| {
            let mut nlri = c.nlri();
            nlri.extend_from_slice(&[0, 0]);
            (update(&[], &c.base(), &nlri), Expect::reset(3, 10, &[]))
        }),
        case(
            "RFC 7911 3: a path identifier and a prefix of length 33",
            a,
            |c| {
                let nlri = [0, 0, 0, 2, 33, 10, 0, 0, 0, 0];
                (update(&[], &c.base(), &nlri), Expect::reset(3, 10, &[]))
            },
        ),
        case(
            "RFC 7911 3: a withdrawn route without its path identifier",
            a,
            |_| (update(&[24, 10, 1, 2], &[], &[]), Expect::reset(3, 10, &[])),
        ),
        case(
            "RFC 7911 3: MP_REACH_NLRI with a path identifier cut short",
            a,
            |c| {
                let bad = mp_reach(2, 1, &NH6, &[0, 0, 1]);
                (v6_with(c, bad.clone()), Expect::reset(3, 9, &bad))
            },
        )
        .v6(),
        case("RFC 7911 3: two paths of one prefix", a, |c| {
            let mut nlri = c.nlri();
            nlri.extend_from_slice(&[0, 0, 0, 2]);
            nlri.extend_from_slice(&c.nlri()[4..]);
            (update(&[], &c.base(), &nlri), Expect::kept())
        }),
        case(
            "RFC 7911 3: a withdrawal of one path of two leaves the other",
            a,
            |c| {
                let mut w = vec![0, 0, 0, 2];
                w.extend_from_slice(&c.nlri()[4..]);
                (update(&w, &[], &[]), Expect::kept())
            },
        ),
    ]
}

/// A route with this many ASes in its AS_PATH.
fn long_path(c: &Ctx, n: u32) -> Vec<u8> {
    let asns: Vec<u32> = [c.asn]
        .into_iter()
        .chain((1..n).map(|i| 4_200_000_000 + i))
        .collect();
    c.announce(c.with(2, Some(long_sequence(&asns))))
}

fn large_cases() -> Vec<Case> {
    let x = Kind::Extended;
    let mut v = Vec::new();
    for n in [2_048u32, 4_096, 10_000] {
        v.push(case(
            format!("RFC 8654 / CVE-2026-49943: an AS_PATH of {n} ASes"),
            x,
            move |c| (long_path(c, n), Expect::TooLarge { extended: true }),
        ));
    }
    v.push(case("RFC 8654: 16,000 communities", x, |c| {
        let value: Vec<u8> = (0..16_000u32)
            .flat_map(|i| (0xfe4d_0000 + i).to_be_bytes())
            .collect();
        (
            c.announce(c.plus(attr(0xd0, 8, &value))),
            Expect::TooLarge { extended: true },
        )
    }));
    v.push(case(
        "RFC 8654: an UPDATE of 4,097 octets on an extended-message session",
        x,
        |c| {
            let fixed = c.announce(c.base()).len() + 4;
            let pad = vec![7u8; 4097 - fixed];
            let m = c.announce(c.plus(attr(0xd0, 203, &pad)));
            assert_eq!(m.len(), 4097);
            (m, Expect::TooLarge { extended: true })
        },
    ));
    v.push(case(
        "RFC 8654: an UPDATE of 65,535 octets, too large to pass on with our AS",
        x,
        |c| {
            let fixed = c.announce(c.base()).len() + 4;
            let pad = vec![7u8; 65535 - fixed];
            let m = c.announce(c.plus(attr(0xd0, 203, &pad)));
            assert_eq!(m.len(), 65535);
            (m, Expect::TooLarge { extended: false })
        },
    ));
    v
}

/// The attributes of the incidents, malformed: OTC (35) is ours to check (RFC 9234 section
/// 5: treat-as-withdraw); 23, 28 and 40 we do not parse, so RFC 4271 section 9 has them
/// carried on, opaque, with the Partial bit set.
fn incident_cases() -> Vec<Case> {
    let mut v = vec![case(
        "RFC 9234 5 / the 2025 OTC incident: OTC of 3 octets",
        Kind::Ebgp,
        |c| {
            (
                c.announce(c.plus(attr(0xc0, 35, &[0, 1, 2]))),
                Expect::Withdrawn,
            )
        },
    )];
    for code in [23u8, 28, 40] {
        v.push(case(
            format!("RFC 4271 9 / CVE-2023-38802: a malformed attribute {code} is carried opaque"),
            Kind::Ebgp,
            move |c| {
                let m = c.announce(c.plus(attr(0xc0, code, &[0xff, 0, 0xff])));
                let check = move |a: &PathAttributes| match a.get(code) {
                    Some(_) => Ok(()),
                    None => Err(format!("attribute {code} dropped")),
                };
                (m, Expect::kept_if(check))
            },
        ));
    }
    v
}

pub fn cases() -> Vec<Case> {
    let mut v = mp_cases();
    v.extend(two_octet_cases());
    v.extend(add_path_cases());
    v.extend(large_cases());
    v.extend(incident_cases());
    v
}
