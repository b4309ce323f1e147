//! Message header errors (RFC 4271 section 6.1), OPEN errors (section 6.2, RFC 5492, RFC
//! 6286, RFC 7607, RFC 8654, RFC 9234), FSM errors (RFC 6608), ROUTE-REFRESH (RFC 2918, RFC
//! 7313) and a neighbor's NOTIFICATION, each on a live session.

use crate::bytes::{self, cap, caps_param, four_octet_as, message, multiprotocol};
use crate::{case, Case, Ctx, Expect, Kind, Phase};

const KEEPALIVE: u8 = 4;

fn keepalive() -> Vec<u8> {
    message(KEEPALIVE, &[])
}

/// A good OPEN of this peer with these capabilities instead of its own.
fn open_with(c: &Ctx, caps: &[Vec<u8>]) -> Vec<u8> {
    c.open(&caps_param(caps))
}

/// A good OPEN of this peer plus these capabilities.
fn open_plus(c: &Ctx, extra: &[Vec<u8>]) -> Vec<u8> {
    let mut caps = c.good_caps();
    caps.extend_from_slice(extra);
    open_with(c, &caps)
}

/// An OPEN with these header fields changed: version, My AS, hold time, identifier.
fn open_fields(c: &Ctx, version: u8, my_as: u16, hold: u16, id: [u8; 4]) -> Vec<u8> {
    message(
        1,
        &bytes::open_body(version, my_as, hold, id, &caps_param(&c.good_caps())),
    )
}

fn header_cases() -> Vec<Case> {
    let mut v = vec![
        case(
            "RFC 4271 6.1: a marker octet not all ones",
            Kind::Ebgp,
            |_| {
                let mut m = keepalive();
                m[3] = 0;
                (m, Expect::reset(1, 1, &[]))
            },
        ),
        case("RFC 4271 6.1: a marker of zeros", Kind::Ebgp, |_| {
            let mut m = keepalive();
            m[..16].fill(0);
            (m, Expect::reset(1, 1, &[]))
        }),
    ];
    for len in [0u16, 18] {
        v.push(case(
            format!("RFC 4271 6.1: header length {len}"),
            Kind::Ebgp,
            move |_| {
                let mut m = keepalive();
                m[16..18].copy_from_slice(&len.to_be_bytes());
                (m, Expect::reset(1, 2, &len.to_be_bytes()))
            },
        ));
    }
    for len in [4097u16, 65535] {
        v.push(case(
            format!("RFC 8654 / RFC 4271 6.1: an UPDATE of {len} octets without extended messages"),
            Kind::Ebgp,
            move |_| {
                (
                    message(2, &vec![0; len as usize - 19]),
                    Expect::reset(1, 2, &len.to_be_bytes()),
                )
            },
        ));
    }
    for ty in [0u8, 6, 7, 128, 255] {
        v.push(case(
            format!("RFC 4271 6.1: message type {ty}"),
            Kind::Ebgp,
            move |_| (message(ty, &[]), Expect::reset(1, 3, &[ty])),
        ));
    }
    let short: [(&str, u8, &[u8]); 4] = [
        ("a KEEPALIVE with a body", 4, &[0]),
        ("an UPDATE shorter than 23 octets", 2, &[0, 0, 0]),
        ("an OPEN shorter than 29 octets", 1, &[4, 0, 1]),
        ("a NOTIFICATION shorter than 21 octets", 3, &[6]),
    ];
    for (what, ty, body) in short {
        v.push(case(
            format!("RFC 4271 6.1: {what}"),
            Kind::Ebgp,
            move |_| {
                let len = (19 + body.len()) as u16;
                (message(ty, body), Expect::reset(1, 2, &len.to_be_bytes()))
            },
        ));
    }
    v.push(case(
        "RFC 8654 4: a KEEPALIVE with a body on an extended-message session",
        Kind::Extended,
        |_| (message(4, &[0]), Expect::reset(1, 2, &[0, 20])),
    ));
    v
}

fn open_cases() -> Vec<Case> {
    let fresh = |name: &str, f: fn(&Ctx) -> (Vec<u8>, Expect)| {
        case(name, Kind::Fresh, f).in_phase(Phase::OpenSent)
    };
    vec![
        fresh("RFC 4271 6.2: version 3", |c| {
            let m = open_fields(c, 3, c.asn as u16, 0, [10, 0, 0, 2]);
            (m, Expect::reset(2, 1, &[0, 4]))
        }),
        fresh("RFC 4271 6.2: version 5", |c| {
            let m = open_fields(c, 5, c.asn as u16, 0, [10, 0, 0, 2]);
            (m, Expect::reset(2, 1, &[0, 4]))
        }),
        fresh("RFC 4271 6.2: hold time 1", |c| {
            let m = open_fields(c, 4, c.asn as u16, 1, [10, 0, 0, 2]);
            (m, Expect::reset(2, 6, &[]))
        }),
        fresh("RFC 4271 6.2: hold time 2", |c| {
            let m = open_fields(c, 4, c.asn as u16, 2, [10, 0, 0, 2]);
            (m, Expect::reset(2, 6, &[]))
        }),
        fresh("RFC 4271 6.2: hold time 3 is accepted", |c| {
            let m = open_fields(c, 4, c.asn as u16, 3, [10, 0, 0, 2]);
            (m, Expect::Up)
        }),
        fresh("RFC 6286 2.2: BGP Identifier 0.0.0.0", |c| {
            let m = open_fields(c, 4, c.asn as u16, 0, [0, 0, 0, 0]);
            (m, Expect::reset(2, 3, &[]))
        }),
        fresh("RFC 6286: an eBGP peer may share our BGP Identifier", |c| {
            let m = open_fields(c, 4, c.asn as u16, 0, [127, 0, 0, 90]);
            (m, Expect::Up)
        }),
        fresh("RFC 4271 6.2: My AS not the configured AS", |_| {
            let caps = [multiprotocol(1, 1), four_octet_as(64999)];
            let m = message(
                1,
                &bytes::open_body(4, 64999, 0, [10, 0, 0, 2], &caps_param(&caps)),
            );
            (m, Expect::reset(2, 2, &64999u16.to_be_bytes()))
        }),
        fresh(
            "RFC 6793 / RFC 4271 6.2: the 4-octet AS capability not the configured AS",
            |_| {
                let caps = [multiprotocol(1, 1), four_octet_as(4_200_000_001)];
                let m = message(
                    1,
                    &bytes::open_body(4, 23456, 0, [10, 0, 0, 2], &caps_param(&caps)),
                );
                (m, Expect::reset(2, 2, &23456u16.to_be_bytes()))
            },
        ),
        fresh("RFC 7607 2: My AS 0", |_| {
            let m = message(
                1,
                &bytes::open_body(4, 0, 0, [10, 0, 0, 2], &caps_param(&[multiprotocol(1, 1)])),
            );
            (m, Expect::reset(2, 2, &[0, 0]))
        }),
        fresh("RFC 7607 2: AS 0 in the 4-octet AS capability", |c| {
            let caps = [multiprotocol(1, 1), four_octet_as(0)];
            let m = message(
                1,
                &bytes::open_body(4, c.asn as u16, 0, [10, 0, 0, 2], &caps_param(&caps)),
            );
            (m, Expect::reset(2, 2, &(c.asn as u16).to_be_bytes()))
        }),
        fresh(
            "RFC 4271 6.2: optional parameter 1 (authentication, deprecated)",
            |c| (c.open(&[1, 1, 0]), Expect::reset(2, 4, &[])),
        ),
        fresh("RFC 4271 6.2: optional parameter of an unknown type", |c| {
            (c.open(&[77, 2, 0, 0]), Expect::reset(2, 4, &[]))
        }),
        fresh("RFC 5492: a capability overrunning its parameter", |c| {
            (c.open(&[2, 2, 65, 4]), Expect::reset(2, 0, &[]))
        }),
        fresh(
            "RFC 4271 6.2: optional parameters overrunning the OPEN",
            |c| {
                let mut m = c.open(&caps_param(&c.good_caps()));
                m[28] += 10;
                (m, Expect::reset(2, 0, &[]))
            },
        ),
        fresh("RFC 6793: a 4-octet AS capability of 3 octets", |c| {
            let caps = [multiprotocol(1, 1), cap(65, &[0, 0, 1])];
            (open_with(c, &caps), Expect::reset(2, 0, &[]))
        }),
        fresh("RFC 4760 8: a Multiprotocol capability of 3 octets", |c| {
            let caps = [cap(1, &[0, 1, 0]), four_octet_as(c.asn)];
            (open_with(c, &caps), Expect::reset(2, 0, &[]))
        }),
        fresh("RFC 9234 4.2: two different BGP Roles", |c| {
            (
                open_plus(c, &[cap(9, &[2]), cap(9, &[3])]),
                Expect::reset(2, 11, &[]),
            )
        }),
        fresh("RFC 9234: a BGP Role capability of 2 octets", |c| {
            (open_plus(c, &[cap(9, &[2, 2])]), Expect::reset(2, 0, &[]))
        }),
        fresh("RFC 8654 4: an OPEN of 5,000 octets", |c| {
            let mut m = c.open(&caps_param(&c.good_caps()));
            m.resize(5000, 0);
            m[16..18].copy_from_slice(&5000u16.to_be_bytes());
            (m, Expect::reset(1, 2, &5000u16.to_be_bytes()))
        }),
        fresh("RFC 5492: an unknown capability is ignored", |c| {
            (open_plus(c, &[cap(200, &[1, 2, 3])]), Expect::Up)
        }),
        fresh(
            "RFC 4760: Multiprotocol for an unknown family is ignored",
            |c| (open_plus(c, &[multiprotocol(99, 77)]), Expect::Up),
        ),
        fresh(
            "RFC 5492: a capabilities parameter of no capabilities",
            |c| {
                let mut params = caps_param(&c.good_caps());
                params.extend_from_slice(&[2, 0]);
                (c.open(&params), Expect::Up)
            },
        ),
        fresh("RFC 9072: extended optional parameters", |c| {
            let caps = caps_param(&c.good_caps());
            let mut params = vec![255, 255];
            params.extend_from_slice(&(caps.len() as u16 + 1).to_be_bytes());
            params.push(2);
            params.extend_from_slice(&(caps.len() as u16 - 2).to_be_bytes());
            params.extend_from_slice(&caps[2..]);
            let mut body = bytes::open_body(4, c.asn as u16, 0, [10, 0, 0, 2], &[]);
            body.pop();
            body.extend_from_slice(&params);
            (message(1, &body), Expect::Up)
        }),
        fresh("RFC 6608 4: a KEEPALIVE in OpenSent", |_| {
            (keepalive(), Expect::reset(5, 1, &[4]))
        }),
        fresh("RFC 6608 4: an UPDATE in OpenSent", |c| {
            (c.announce(c.base()), Expect::reset(5, 1, &[2]))
        }),
        fresh("RFC 6608 4: a ROUTE-REFRESH in OpenSent", |_| {
            (message(5, &[0, 1, 0, 1]), Expect::reset(5, 1, &[5]))
        }),
        fresh("RFC 4271 6.1: a bad marker in OpenSent", |_| {
            let mut m = keepalive();
            m[0] = 0xfe;
            (m, Expect::reset(1, 1, &[]))
        }),
        fresh(
            "RFC 4271 8.2.2: a NOTIFICATION in OpenSent ends it quietly",
            |_| (message(3, &[6, 2]), Expect::Closed),
        ),
    ]
}

fn later_cases() -> Vec<Case> {
    let confirm = |name: &str, f: fn(&Ctx) -> (Vec<u8>, Expect)| {
        case(name, Kind::Fresh, f).in_phase(Phase::OpenConfirm)
    };
    let established = |name: &str, f: fn(&Ctx) -> (Vec<u8>, Expect)| case(name, Kind::Ebgp, f);
    vec![
        confirm("RFC 6608 4: an UPDATE in OpenConfirm", |c| {
            (c.announce(c.base()), Expect::reset(5, 2, &[2]))
        }),
        confirm("RFC 6608 4: a ROUTE-REFRESH in OpenConfirm", |_| {
            (message(5, &[0, 1, 0, 1]), Expect::reset(5, 2, &[5]))
        }),
        confirm("RFC 4271 6.1: a bad message type in OpenConfirm", |_| {
            (message(9, &[]), Expect::reset(1, 3, &[9]))
        }),
        confirm(
            "RFC 4271 8.2.2: a NOTIFICATION in OpenConfirm ends it quietly",
            |_| (message(3, &[4, 0]), Expect::Closed),
        ),
        established("RFC 6608 4: an OPEN in Established", |c| {
            (
                c.open(&caps_param(&c.good_caps())),
                Expect::reset(5, 3, &[1]),
            )
        }),
        established("RFC 7313 5: a ROUTE-REFRESH of 2 octets", |_| {
            let m = message(5, &[0, 1]);
            (m.clone(), Expect::reset(7, 1, &m))
        }),
        established("RFC 7313 5: a ROUTE-REFRESH of 5 octets", |_| {
            let m = message(5, &[0, 1, 0, 1, 9]);
            (m.clone(), Expect::reset(7, 1, &m))
        }),
        established("RFC 2918 4: a ROUTE-REFRESH is answered", |_| {
            (message(5, &[0, 1, 0, 1]), Expect::kept())
        }),
        established(
            "RFC 2918 4: a ROUTE-REFRESH for a family not negotiated is ignored",
            |_| (message(5, &[0, 1, 0, 2]), Expect::kept()),
        ),
        established(
            "RFC 7313 5: a ROUTE-REFRESH of an unknown subtype is ignored",
            |_| (message(5, &[0, 1, 9, 1]), Expect::kept()),
        ),
        established("RFC 4271 4.4: a KEEPALIVE in Established", |_| {
            (keepalive(), Expect::kept())
        }),
        established(
            "RFC 4271 8.2.2: a NOTIFICATION in Established ends the session quietly",
            |_| (message(3, &[6, 2]), Expect::Closed),
        ),
        established(
            "RFC 9003: a NOTIFICATION whose shutdown communication overruns it",
            |_| (message(3, &[6, 2, 200, b'b', b'y', b'e']), Expect::Closed),
        ),
        established(
            "RFC 9003: a shutdown communication that is not UTF-8",
            |_| (message(3, &[6, 4, 2, 0xff, 0xfe]), Expect::Closed),
        ),
        established("RFC 4271 6.4: a NOTIFICATION of an unknown code", |_| {
            (message(3, &[99, 99, 1, 2, 3]), Expect::Closed)
        }),
    ]
}

pub fn cases() -> Vec<Case> {
    let mut v = header_cases();
    v.extend(open_cases());
    v.extend(later_cases());
    v
}
