//! One hand-made message per error rule of RFC 4271 section 6 and RFC 7606 sections 5 to 7,
//! each with its exact outcome: the NOTIFICATION (code, subcode, data) for a session reset,
//! or the RFC 7606 action and the attribute and reason that called for it.

use ribshard_wire::attr::{self, AttrErrorKind as K};
use ribshard_wire::message::MAX_MESSAGE_LEN;
use ribshard_wire::notification::{cease, Notification};
use ribshard_wire::{decode, Action, Family, Message, PathAttributes, SessionParams};

const IBGP: SessionParams = SessionParams {
    four_octet_as: true,
    extended_message: false,
    add_path: [false; 2],
    external: false,
    mrt_rib: false,
    live: true,
};
const EBGP: SessionParams = SessionParams {
    external: true,
    ..IBGP
};
const TWO_OCTET: SessionParams = SessionParams {
    four_octet_as: false,
    ..EBGP
};

fn a(flags: u8, code: u8, value: &[u8]) -> Vec<u8> {
    let mut v = vec![flags, code];
    if flags & 0x10 != 0 {
        v.extend_from_slice(&(value.len() as u16).to_be_bytes());
    } else {
        v.push(value.len() as u8);
    }
    v.extend_from_slice(value);
    v
}
fn origin() -> Vec<u8> {
    a(0x40, 1, &[0])
}
fn as_path() -> Vec<u8> {
    a(0x40, 2, &[2, 1, 0, 0, 0xfd, 0xe8])
}
fn as_path2() -> Vec<u8> {
    a(0x40, 2, &[2, 1, 0xfd, 0xe8])
}
fn next_hop() -> Vec<u8> {
    a(0x40, 3, &[192, 0, 2, 1])
}
const NLRI: &[u8] = &[24, 198, 51, 100];

/// A whole UPDATE message from its three fields.
fn update(withdrawn: &[u8], attrs: &[Vec<u8>], nlri: &[u8]) -> Vec<u8> {
    let attrs: Vec<u8> = attrs.concat();
    let mut m = vec![0xff; 16];
    let len = 19 + 2 + withdrawn.len() + 2 + attrs.len() + nlri.len();
    m.extend_from_slice(&(len as u16).to_be_bytes());
    m.push(2);
    m.extend_from_slice(&(withdrawn.len() as u16).to_be_bytes());
    m.extend_from_slice(withdrawn);
    m.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    m.extend_from_slice(&attrs);
    m.extend_from_slice(nlri);
    m
}
/// An announcement of NLRI with the mandatory attributes plus `extra`.
fn announce(extra: Vec<u8>) -> Vec<u8> {
    update(&[], &[origin(), as_path(), next_hop(), extra], NLRI)
}
fn mp_reach_v6(nh: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 2, 1, nh.len() as u8];
    v.extend_from_slice(nh);
    v.push(0);
    v.extend_from_slice(nlri);
    a(0x90, 14, &v)
}
const NH6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const NLRI6: &[u8] = &[32, 0x20, 1, 0xd, 0xb8];

fn message(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
    m.push(ty);
    m.extend_from_slice(body);
    m
}

#[track_caller]
fn reset(msg: &[u8], params: &SessionParams, code: u8, subcode: u8, data: Option<&[u8]>) {
    match decode(msg, params) {
        Err(e) => {
            let n = e.notification();
            assert_eq!((n.code, n.subcode), (code, subcode), "{e}: {n:?}");
            if let Some(d) = data {
                assert_eq!(n.data, d, "NOTIFICATION data for {e}");
            }
        }
        Ok(m) => panic!("expected NOTIFICATION {code}/{subcode}, decoded {m:?}"),
    }
}

#[track_caller]
fn outcome<'a>(msg: &'a [u8], params: &SessionParams) -> ribshard_wire::ParsedUpdate<'a> {
    match decode(msg, params) {
        Ok(Message::Update(u)) => u,
        other => panic!("expected an UPDATE, got {other:?}"),
    }
}

#[track_caller]
fn taw(msg: &[u8], params: &SessionParams, code: u8, kind: K) {
    let u = outcome(msg, params);
    assert_eq!(u.action(), Action::TreatAsWithdraw, "{u:?}");
    let e = u.treat_as_withdraw.expect("treat-as-withdraw");
    assert_eq!((e.type_code, e.kind), (code, kind));
    // Treat-as-withdraw: nothing announced, every announced prefix withdrawn.
    assert_eq!(u.announced().count(), 0);
    assert!(u.withdrawn_all().count() >= u.nlri.len());
}

#[track_caller]
fn discard(msg: &[u8], params: &SessionParams, code: u8, kind: K) {
    let u = outcome(msg, params);
    assert_eq!(u.action(), Action::AttributeDiscard, "{u:?}");
    assert_eq!(u.discarded.len(), 1);
    let e = u.discarded[0];
    assert_eq!((e.type_code, e.kind), (code, kind));
    assert!(u.announced().count() > 0, "routes must stand");
    let kept = PathAttributes::from_view(&u.attrs, params);
    assert!(kept.get(code).is_none(), "discarded attribute kept");
}

// ---- RFC 4271 section 6.1: message header errors ----

#[test]
fn header_marker_not_all_ones() {
    let mut m = message(4, &[]);
    m[3] = 0;
    reset(&m, &IBGP, 1, 1, Some(&[]));
}

#[test]
fn header_length_below_19() {
    let mut m = message(4, &[]);
    m[16..18].copy_from_slice(&18u16.to_be_bytes());
    reset(&m, &IBGP, 1, 2, Some(&[0, 18]));
}

#[test]
fn header_length_over_4096_without_extended_messages() {
    let m = update(
        &[],
        &[origin(), as_path(), next_hop()],
        &vec![24; 4100 - 41],
    );
    reset(&m, &IBGP, 1, 2, Some(&(m.len() as u16).to_be_bytes()));
}

#[test]
fn extended_message_allows_large_update_but_not_large_open() {
    let nlri: Vec<u8> = (0..2000u32)
        .flat_map(|i| [24, 10, (i >> 8) as u8, i as u8])
        .collect();
    let m = update(&[], &[origin(), as_path(), next_hop()], &nlri);
    assert!(m.len() > MAX_MESSAGE_LEN);
    let ext = SessionParams {
        extended_message: true,
        ..IBGP
    };
    assert_eq!(outcome(&m, &ext).announced().count(), 2000);
    let mut open = message(1, &[4, 0xfd, 0xe8, 0, 90, 1, 2, 3, 4, 0]);
    open.resize(5000, 0);
    open[16..18].copy_from_slice(&5000u16.to_be_bytes());
    reset(&open, &ext, 1, 2, Some(&5000u16.to_be_bytes()));
}

#[test]
fn header_bad_message_type() {
    reset(&message(6, &[]), &IBGP, 1, 3, Some(&[6]));
}

#[test]
fn header_keepalive_with_body() {
    reset(&message(4, &[0]), &IBGP, 1, 2, Some(&[0, 20]));
}

#[test]
fn header_open_too_short() {
    reset(&message(1, &[4, 0, 1]), &IBGP, 1, 2, Some(&[0, 22]));
}

#[test]
fn header_update_too_short() {
    reset(&message(2, &[0, 0, 0]), &IBGP, 1, 2, Some(&[0, 22]));
}

#[test]
fn header_notification_too_short() {
    reset(&message(3, &[6]), &IBGP, 1, 2, Some(&[0, 20]));
}

#[test]
fn route_refresh_wrong_length_rfc7313() {
    let m = message(5, &[0, 1, 0, 1, 9]);
    reset(&m, &IBGP, 7, 1, Some(&m));
}

// ---- RFC 4271 section 6.2: OPEN message errors ----

fn open_body(version: u8, hold: u16, id: [u8; 4], params: &[u8]) -> Vec<u8> {
    let mut b = vec![version, 0xfd, 0xe8];
    b.extend_from_slice(&hold.to_be_bytes());
    b.extend_from_slice(&id);
    b.push(params.len() as u8);
    b.extend_from_slice(params);
    b
}

#[test]
fn open_unsupported_version() {
    reset(
        &message(1, &open_body(3, 90, [1, 2, 3, 4], &[])),
        &IBGP,
        2,
        1,
        Some(&[0, 4]),
    );
}

#[test]
fn open_unacceptable_hold_time() {
    for hold in [1, 2] {
        reset(
            &message(1, &open_body(4, hold, [1, 2, 3, 4], &[])),
            &IBGP,
            2,
            6,
            Some(&[]),
        );
    }
}

#[test]
fn open_bad_bgp_identifier() {
    reset(
        &message(1, &open_body(4, 90, [0, 0, 0, 0], &[])),
        &IBGP,
        2,
        3,
        Some(&[]),
    );
}

#[test]
fn open_unsupported_optional_parameter() {
    reset(
        &message(1, &open_body(4, 90, [1, 2, 3, 4], &[1, 1, 0])),
        &IBGP,
        2,
        4,
        None,
    );
}

#[test]
fn open_capability_overruns_parameter() {
    reset(
        &message(1, &open_body(4, 90, [1, 2, 3, 4], &[2, 2, 65, 4])),
        &IBGP,
        2,
        0,
        None,
    );
}

#[test]
fn open_malformed_known_capability() {
    // A 4-octet AS capability of 3 octets.
    let p = [2, 5, 65, 3, 0, 0, 1];
    reset(
        &message(1, &open_body(4, 90, [1, 2, 3, 4], &p)),
        &IBGP,
        2,
        0,
        None,
    );
}

// ---- RFC 4271 section 6.3 / RFC 7606: session reset ----

#[test]
fn update_withdrawn_length_exceeds_message() {
    let mut m = update(&[], &[], &[]);
    m[19..21].copy_from_slice(&10u16.to_be_bytes());
    reset(&m, &IBGP, 3, 1, Some(&[]));
}

#[test]
fn update_attribute_length_exceeds_message() {
    let mut m = update(&[], &[origin()], &[]);
    m[21..23].copy_from_slice(&100u16.to_be_bytes());
    reset(&m, &IBGP, 3, 1, Some(&[]));
}

#[test]
fn update_nlri_prefix_too_long() {
    let m = update(
        &[],
        &[origin(), as_path(), next_hop()],
        &[33, 1, 2, 3, 4, 5],
    );
    reset(&m, &IBGP, 3, 10, Some(&[]));
}

#[test]
fn update_nlri_truncated() {
    let m = update(&[], &[origin(), as_path(), next_hop()], &[24, 1, 2]);
    reset(&m, &IBGP, 3, 10, Some(&[]));
}

#[test]
fn update_withdrawn_routes_malformed() {
    reset(
        &update(&[40, 1, 2, 3, 4, 5], &[], &[]),
        &IBGP,
        3,
        10,
        Some(&[]),
    );
}

#[test]
fn update_unrecognized_well_known_attribute() {
    let bad = a(0x40, 99, &[1, 2]);
    reset(&announce(bad.clone()), &IBGP, 3, 2, Some(&bad));
}

#[test]
fn update_mp_reach_twice_rfc7606_3g() {
    let m = update(
        &[],
        &[
            origin(),
            as_path(),
            mp_reach_v6(&NH6, NLRI6),
            mp_reach_v6(&NH6, NLRI6),
        ],
        &[],
    );
    reset(&m, &IBGP, 3, 1, Some(&[]));
}

#[test]
fn update_mp_reach_bad_next_hop_length_rfc7606_7_11() {
    let bad = mp_reach_v6(&[192, 0, 2, 1], NLRI6);
    let m = update(&[], &[origin(), as_path(), bad.clone()], &[]);
    reset(&m, &IBGP, 3, 9, Some(&bad));
}

#[test]
fn update_mp_reach_bad_nlri() {
    let bad = mp_reach_v6(&NH6, &[129, 0, 0]);
    let m = update(&[], &[origin(), as_path(), bad.clone()], &[]);
    reset(&m, &IBGP, 3, 9, Some(&bad));
}

#[test]
fn update_mp_unreach_truncated() {
    let bad = a(0x80, 15, &[0, 2]);
    reset(
        &update(&[], std::slice::from_ref(&bad), &[]),
        &IBGP,
        3,
        9,
        Some(&bad),
    );
}

#[test]
fn update_attribute_list_overrun_inside_mp_reach() {
    let mut attrs = [origin(), as_path()].concat();
    attrs.extend_from_slice(&[0x90, 14, 0, 200, 0, 2, 1]);
    let m = update(&[], &[attrs], &[]);
    reset(&m, &IBGP, 3, 1, Some(&[]));
}

// ---- RFC 7606 section 7: treat-as-withdraw ----

#[test]
fn origin_bad_length_7_1() {
    let m = update(&[], &[a(0x40, 1, &[0, 0]), as_path(), next_hop()], NLRI);
    taw(&m, &IBGP, attr::ORIGIN, K::Length);
}

#[test]
fn origin_undefined_value_7_1() {
    let m = update(&[], &[a(0x40, 1, &[3]), as_path(), next_hop()], NLRI);
    taw(&m, &IBGP, attr::ORIGIN, K::InvalidValue);
}

#[test]
fn as_path_malformed_segments_7_2() {
    for path in [
        vec![5, 1, 0, 0, 0, 1],    // undefined segment type
        vec![2, 0],                // zero-length segment
        vec![2, 2, 0, 0, 0, 1],    // overrun
        vec![2, 1, 0, 0, 0, 1, 2], // underrun: one octet left
    ] {
        let m = update(&[], &[origin(), a(0x40, 2, &path), next_hop()], NLRI);
        taw(&m, &IBGP, attr::AS_PATH, K::MalformedAsPath);
    }
}

#[test]
fn next_hop_bad_length_7_3() {
    let m = update(
        &[],
        &[origin(), as_path(), a(0x40, 3, &[1, 2, 3, 4, 5])],
        NLRI,
    );
    taw(&m, &IBGP, attr::NEXT_HOP, K::Length);
}

#[test]
fn med_bad_length_7_4() {
    taw(
        &announce(a(0x80, 4, &[0, 0, 1])),
        &IBGP,
        attr::MULTI_EXIT_DISC,
        K::Length,
    );
}

#[test]
fn local_pref_bad_length_7_5() {
    taw(
        &announce(a(0x40, 5, &[0, 100])),
        &IBGP,
        attr::LOCAL_PREF,
        K::Length,
    );
}

#[test]
fn communities_bad_length_7_8() {
    taw(
        &announce(a(0xc0, 8, &[])),
        &IBGP,
        attr::COMMUNITIES,
        K::Length,
    );
    taw(
        &announce(a(0xc0, 8, &[0, 1, 0, 2, 0, 3])),
        &IBGP,
        attr::COMMUNITIES,
        K::Length,
    );
}

#[test]
fn originator_id_bad_length_7_9() {
    taw(
        &announce(a(0x80, 9, &[1, 2, 3, 4, 5])),
        &IBGP,
        attr::ORIGINATOR_ID,
        K::Length,
    );
}

#[test]
fn cluster_list_bad_length_7_10() {
    taw(
        &announce(a(0x80, 10, &[1, 2, 3, 4, 5, 6])),
        &IBGP,
        attr::CLUSTER_LIST,
        K::Length,
    );
}

#[test]
fn extended_communities_bad_length_7_14() {
    taw(
        &announce(a(0xc0, 16, &[0; 12])),
        &IBGP,
        attr::EXTENDED_COMMUNITIES,
        K::Length,
    );
}

#[test]
fn large_community_bad_length_rfc8092() {
    taw(
        &announce(a(0xc0, 32, &[0; 8])),
        &IBGP,
        attr::LARGE_COMMUNITY,
        K::Length,
    );
}

#[test]
fn otc_bad_length_rfc9234() {
    taw(&announce(a(0xc0, 35, &[0, 1])), &IBGP, attr::OTC, K::Length);
}

#[test]
fn attribute_flags_conflict_rfc7606_3c() {
    // ORIGIN marked optional; MED marked transitive.
    let m = update(&[], &[a(0xc0, 1, &[0]), as_path(), next_hop()], NLRI);
    taw(&m, &IBGP, attr::ORIGIN, K::Flags);
    taw(
        &announce(a(0xc0, 4, &[0, 0, 0, 1])),
        &IBGP,
        attr::MULTI_EXIT_DISC,
        K::Flags,
    );
}

#[test]
fn attribute_flags_conflict_where_discard_is_the_rule_rfc7606_7_6_7_7() {
    // ATOMIC_AGGREGATE marked optional, AGGREGATOR marked well-known: attribute discard.
    discard(
        &announce(a(0xc0, 6, &[])),
        &IBGP,
        attr::ATOMIC_AGGREGATE,
        K::Flags,
    );
    discard(
        &announce(a(0x40, 7, &[0, 0, 0xfd, 0xe8, 192, 0, 2, 1])),
        &IBGP,
        attr::AGGREGATOR,
        K::Flags,
    );
}

#[test]
fn missing_well_known_attributes_rfc7606_3d() {
    taw(
        &update(&[], &[as_path(), next_hop()], NLRI),
        &IBGP,
        attr::ORIGIN,
        K::Missing,
    );
    taw(
        &update(&[], &[origin(), next_hop()], NLRI),
        &IBGP,
        attr::AS_PATH,
        K::Missing,
    );
    taw(
        &update(&[], &[origin(), as_path()], NLRI),
        &IBGP,
        attr::NEXT_HOP,
        K::Missing,
    );
}

#[test]
fn no_nlri_means_nothing_is_missing() {
    let m = update(&[24, 10, 0, 0], &[], &[]);
    let u = outcome(&m, &IBGP);
    assert_eq!(u.action(), Action::Accept);
    assert_eq!(u.withdrawn_all().count(), 1);
}

#[test]
fn mp_reach_needs_no_next_hop_attribute() {
    let m = update(&[], &[origin(), as_path(), mp_reach_v6(&NH6, NLRI6)], &[]);
    let u = outcome(&m, &IBGP);
    assert_eq!(u.action(), Action::Accept);
    assert_eq!(
        u.announced()
            .map(|n| n.prefix.to_string())
            .collect::<Vec<_>>(),
        ["2001:db8::/32"]
    );
}

#[test]
fn treat_as_withdraw_covers_mp_reach_nlri() {
    let m = update(
        &[],
        &[a(0x40, 1, &[7]), as_path(), mp_reach_v6(&NH6, NLRI6)],
        &[],
    );
    taw(&m, &IBGP, attr::ORIGIN, K::InvalidValue);
    let u = outcome(&m, &IBGP);
    assert_eq!(
        u.withdrawn_all()
            .map(|n| n.prefix.to_string())
            .collect::<Vec<_>>(),
        ["2001:db8::/32"]
    );
}

#[test]
fn attribute_list_overrun_and_underrun_rfc7606_4() {
    // The last attribute claims more octets than the field holds: the NLRI field is
    // still found from the Total Path Attribute Length, and withdrawn.
    let mut attrs = [origin(), as_path(), next_hop()].concat();
    attrs.extend_from_slice(&[0xc0, 8, 200, 0, 0]);
    let m = update(&[], &[attrs], NLRI);
    taw(&m, &IBGP, attr::COMMUNITIES, K::ListOverrun);
    assert_eq!(outcome(&m, &IBGP).withdrawn_all().count(), 1);
    let mut attrs = [origin(), as_path(), next_hop()].concat();
    attrs.extend_from_slice(&[0x40, 5]);
    taw(
        &update(&[], &[attrs], NLRI),
        &IBGP,
        attr::LOCAL_PREF,
        K::ListUnderrun,
    );
    let mut attrs = [origin(), as_path(), next_hop()].concat();
    attrs.push(0x40);
    taw(&update(&[], &[attrs], NLRI), &IBGP, 0, K::ListUnderrun);
}

// ---- attribute discard ----

#[test]
fn atomic_aggregate_bad_length_7_6() {
    discard(
        &announce(a(0x40, 6, &[1])),
        &IBGP,
        attr::ATOMIC_AGGREGATE,
        K::Length,
    );
}

#[test]
fn aggregator_bad_length_7_7() {
    let m = update(
        &[],
        &[origin(), as_path2(), next_hop(), a(0xc0, 7, &[0; 7])],
        NLRI,
    );
    discard(&m, &TWO_OCTET, attr::AGGREGATOR, K::Length);
    discard(
        &announce(a(0xc0, 7, &[0; 6])),
        &IBGP,
        attr::AGGREGATOR,
        K::Length,
    );
}

#[test]
fn local_pref_from_external_peer_7_5() {
    let m = announce(a(0x40, 5, &[0, 0, 0, 200]));
    discard(&m, &EBGP, attr::LOCAL_PREF, K::FromExternalPeer);
    assert_eq!(outcome(&m, &EBGP).attrs.local_pref, None);
    assert_eq!(outcome(&m, &IBGP).attrs.local_pref, Some(200));
}

#[test]
fn reflection_attributes_from_external_peer_7_9_7_10() {
    discard(
        &announce(a(0x80, 9, &[1, 2, 3, 4])),
        &EBGP,
        attr::ORIGINATOR_ID,
        K::FromExternalPeer,
    );
    discard(
        &announce(a(0x80, 10, &[1, 2, 3, 4])),
        &EBGP,
        attr::CLUSTER_LIST,
        K::FromExternalPeer,
    );
}

#[test]
fn as4_attributes_rfc6793() {
    // On a 4-octet session AS4_PATH and AS4_AGGREGATOR are discarded.
    let as4 = a(0xc0, 17, &[2, 1, 0, 1, 0, 0]);
    discard(
        &announce(as4.clone()),
        &IBGP,
        attr::AS4_PATH,
        K::UnexpectedOnFourOctetSession,
    );
    // Malformed ones on a 2-octet session are discarded too (RFC 6793 section 6).
    let m = update(
        &[],
        &[origin(), as_path2(), next_hop(), a(0xc0, 17, &[2, 3, 0, 0])],
        NLRI,
    );
    discard(&m, &TWO_OCTET, attr::AS4_PATH, K::MalformedAsPath);
    let m = update(
        &[],
        &[origin(), as_path2(), next_hop(), a(0xc0, 18, &[0; 6])],
        NLRI,
    );
    discard(&m, &TWO_OCTET, attr::AS4_AGGREGATOR, K::Length);
    // A good AS4_PATH on a 2-octet session rebuilds the 4-octet path.
    let m = update(
        &[],
        &[
            origin(),
            a(0x40, 2, &[2, 2, 0xfd, 0xe8, 0x5b, 0xa0]),
            next_hop(),
            as4,
        ],
        NLRI,
    );
    let u = outcome(&m, &TWO_OCTET);
    assert_eq!(u.action(), Action::Accept);
    assert_eq!(
        u.attrs.reconstructed_as_path(),
        vec![(2, vec![65000]), (2, vec![65536])]
    );
}

#[test]
fn repeated_attribute_keeps_the_first_rfc7606_3g() {
    let m = update(
        &[],
        &[
            origin(),
            as_path(),
            next_hop(),
            a(0xc0, 8, &[0, 1, 0, 1]),
            a(0xc0, 8, &[0, 2, 0, 2]),
        ],
        NLRI,
    );
    let u = outcome(&m, &IBGP);
    assert_eq!(u.action(), Action::AttributeDiscard);
    assert_eq!(
        (u.discarded[0].type_code, u.discarded[0].kind),
        (attr::COMMUNITIES, K::Duplicate)
    );
    let kept = PathAttributes::from_view(&u.attrs, &IBGP);
    assert_eq!(kept.communities(), &[0x0001_0001]);
}

// ---- accepted ----

#[test]
fn unknown_optional_transitive_attribute_is_carried() {
    let m = announce(a(0xc0, 200, &[9, 9, 9]));
    let u = outcome(&m, &IBGP);
    assert_eq!(u.action(), Action::Accept);
    let kept = PathAttributes::from_view(&u.attrs, &IBGP);
    assert!(kept.get(200).is_some());
}

#[test]
fn end_of_rib_markers_rfc4724() {
    assert_eq!(
        outcome(&update(&[], &[], &[]), &IBGP).end_of_rib(),
        Some(Family::Ipv4Unicast)
    );
    let m = update(&[], &[a(0x80, 15, &[0, 2, 1])], &[]);
    assert_eq!(outcome(&m, &IBGP).end_of_rib(), Some(Family::Ipv6Unicast));
    assert_eq!(outcome(&announce(vec![]), &IBGP).end_of_rib(), None);
    for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
        let eor = ribshard_wire::UpdateBuilder::end_of_rib(f);
        assert_eq!(outcome(&eor, &IBGP).end_of_rib(), Some(f));
    }
}

#[test]
fn shutdown_communication_rfc9003() {
    let n =
        Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, "maintenance: ticket 42");
    let wire = n.encode();
    match decode(&wire, &IBGP) {
        Ok(Message::Notification(got)) => {
            assert_eq!(got, n);
            assert_eq!(got.shutdown_message(), Some(Ok("maintenance: ticket 42")));
        }
        other => panic!("{other:?}"),
    }
    let long = "x".repeat(300);
    let n = Notification::cease_with_message(cease::ADMINISTRATIVE_RESET, &long);
    assert_eq!(
        n.shutdown_message().and_then(Result::ok).map(str::len),
        Some(255)
    );
    let bad = Notification::new(6, cease::ADMINISTRATIVE_SHUTDOWN, vec![2, 0xff, 0xfe]);
    assert!(matches!(bad.shutdown_message(), Some(Err(_))));
    let short = Notification::new(6, cease::ADMINISTRATIVE_SHUTDOWN, vec![9, b'a']);
    assert!(matches!(short.shutdown_message(), Some(Err(_))));
}

// ---- What a live peer may not send (RFC 7607, RFC 5065, RFC 7606 section 5.2) ----

#[test]
fn as_zero_rfc7607() {
    // In AS_PATH: malformed, treat-as-withdraw (RFC 7606 section 7.2).
    let zero_path = a(0x40, 2, &[2, 2, 0, 0, 0xfd, 0xe8, 0, 0, 0, 0]);
    let m = update(&[], &[origin(), zero_path, next_hop()], NLRI);
    taw(&m, &EBGP, attr::AS_PATH, K::AsZero);
    // In AGGREGATOR: attribute discard (RFC 7606 section 7.7).
    discard(
        &announce(a(0xc0, 7, &[0, 0, 0, 0, 192, 0, 2, 1])),
        &EBGP,
        attr::AGGREGATOR,
        K::AsZero,
    );
    // In AS4_PATH and AS4_AGGREGATOR (a 2-octet session): attribute discard (RFC 6793
    // section 6, where RFC 7607 sends them).
    let m = update(
        &[],
        &[
            origin(),
            as_path2(),
            next_hop(),
            a(0xc0, 17, &[2, 1, 0, 0, 0, 0]),
        ],
        NLRI,
    );
    discard(&m, &TWO_OCTET, attr::AS4_PATH, K::AsZero);
    let m = update(
        &[],
        &[
            origin(),
            as_path2(),
            next_hop(),
            a(0xc0, 18, &[0, 0, 0, 0, 192, 0, 2, 1]),
        ],
        NLRI,
    );
    discard(&m, &TWO_OCTET, attr::AS4_AGGREGATOR, K::AsZero);
    // A file's record (MRT) is decoded as recorded.
    let recorded = SessionParams {
        live: false,
        ..EBGP
    };
    let m = update(
        &[],
        &[origin(), a(0x40, 2, &[2, 1, 0, 0, 0, 0]), next_hop()],
        NLRI,
    );
    assert_eq!(outcome(&m, &recorded).action(), Action::Accept);
}

#[test]
fn confederation_segments_from_outside_rfc5065() {
    // AS_CONFED_SEQUENCE (3) then AS_SEQUENCE: from an external peer, treat-as-withdraw.
    let confed = a(0x40, 2, &[3, 1, 0, 0, 0xfc, 0, 2, 1, 0, 0, 0xfd, 0xe8]);
    let m = update(&[], &[origin(), confed.clone(), next_hop()], NLRI);
    taw(&m, &EBGP, attr::AS_PATH, K::ConfedFromOutside);
    // AS_CONFED_SET (4) too.
    let set = a(0x40, 2, &[4, 1, 0, 0, 0xfc, 0, 2, 1, 0, 0, 0xfd, 0xe8]);
    let m = update(&[], &[origin(), set, next_hop()], NLRI);
    taw(&m, &EBGP, attr::AS_PATH, K::ConfedFromOutside);
    // From an internal peer the segments are its own AS's matter.
    let m = update(&[], &[origin(), confed, next_hop()], NLRI);
    assert_eq!(outcome(&m, &IBGP).action(), Action::Accept);
}

#[test]
fn treat_as_withdraw_without_nlri_is_a_session_reset_rfc7606_5_2() {
    // An invalid ORIGIN with nothing to announce or withdraw: Invalid ORIGIN Attribute, the
    // attribute as data.
    let bad_origin = a(0x40, 1, &[7]);
    let m = update(&[], &[bad_origin.clone(), as_path(), next_hop()], &[]);
    reset(&m, &EBGP, 3, 6, Some(&bad_origin));
    // A bad AS_PATH: Malformed AS_PATH, no data.
    let m = update(
        &[],
        &[origin(), a(0x40, 2, &[2, 1, 0, 0, 0, 0]), next_hop()],
        &[],
    );
    reset(&m, &EBGP, 3, 11, Some(&[]));
    // A COMMUNITIES of a bad length: Attribute Length Error, the attribute as data.
    let bad = a(0xc0, 8, &[0, 1, 2]);
    let m = update(&[], &[origin(), as_path(), next_hop(), bad.clone()], &[]);
    reset(&m, &EBGP, 3, 5, Some(&bad));
    // With prefixes to withdraw, treat-as-withdraw applies.
    let m = update(
        &[24, 198, 51, 100],
        &[bad_origin, as_path(), next_hop()],
        &[],
    );
    let u = outcome(&m, &EBGP);
    assert_eq!(u.action(), Action::TreatAsWithdraw);
    assert_eq!(u.withdrawn_all().count(), 1);
}
