//! What a term's actions do to a route's attributes: community changes, AS path prepends,
//! and the route-server control communities a route server reads and strips.

use super::{ApplyContext, Modified, Modify};
use crate::community::{Communities, Community, CommunitySet};
use ribshard_wire::attr;
use ribshard_wire::attributes::{AsSegment, AttrValue, PathAttributes};
use ribshard_wire::update::segment;
use std::sync::Arc;

/// Standard communities a route server reads (and strips) under `route-server-control`.
const RS_PREPEND: [u32; 3] = [65501, 65502, 65503];

/// The standard and large communities of owned attributes, as wire bytes.
pub(super) fn current_communities(a: &PathAttributes) -> (Vec<u8>, Vec<u8>) {
    let std: Vec<u8> = a
        .communities()
        .iter()
        .flat_map(|c| c.to_be_bytes())
        .collect();
    let large: Vec<u8> = a
        .large_communities()
        .iter()
        .flat_map(|l| l.iter().flat_map(|x| x.to_be_bytes()))
        .collect();
    (std, large)
}

pub(super) enum RsControl {
    Refuse,
    Pass { prepend: u8, changes: bool },
}

/// IXP route server control communities (the common Euro-IX scheme), for a route going to
/// neighbors of `receiver` AS, with the route server in AS `rs`:
/// - `0:PEER` / `RS:0:PEER`: not to PEER; `0:RS` / `RS:0:0`: to no one, except
///   `RS:PEER` / `RS:1:PEER`: to PEER;
/// - `65501..65503:PEER` (`:0` for everyone) / `RS:101..103:PEER`: prepend the announcing
///   neighbor's AS 1-3 times towards PEER.
pub(super) fn rs_control(rs: u32, receiver: Option<u32>, c: &Communities<'_>) -> RsControl {
    let Some(peer) = receiver else {
        return RsControl::Pass {
            prepend: 0,
            changes: false,
        };
    };
    let mut deny = false;
    let mut none = false;
    let mut allow = false;
    let mut prepend = 0u8;
    let mut any = false;
    let small = |x: u32| x <= 0xFFFF;
    for x in c.iter() {
        match x {
            Community::Standard(v) => {
                let (hi, lo) = (v >> 16, v & 0xFFFF);
                if hi == 0 || (small(rs) && hi == rs) || RS_PREPEND.contains(&hi) {
                    any = true;
                }
                if hi == 0 && small(peer) && lo == peer {
                    deny = true;
                }
                if hi == 0 && small(rs) && lo == rs {
                    none = true;
                }
                if small(rs) && hi == rs && small(peer) && lo == peer {
                    allow = true;
                }
                if let Some(n) = RS_PREPEND.iter().position(|&p| p == hi) {
                    if lo == 0 || (small(peer) && lo == peer) {
                        prepend = prepend.max(n as u8 + 1);
                    }
                }
            }
            Community::Large([a, b, l]) if a == rs => {
                any = true;
                match b {
                    0 if l == peer => deny = true,
                    0 if l == 0 => none = true,
                    1 if l == peer => allow = true,
                    101..=103 if l == peer || l == 0 => prepend = prepend.max((b - 100) as u8),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if deny || (none && !allow) {
        return RsControl::Refuse;
    }
    RsControl::Pass {
        prepend,
        changes: any,
    }
}

/// Removes the control communities `route-server-control` reads.
pub(super) fn strip_rs_control(a: &mut PathAttributes, rs: u32) {
    let keep_std = |v: &u32| {
        let hi = v >> 16;
        !(hi == 0 || (rs <= 0xFFFF && hi == rs) || RS_PREPEND.contains(&hi))
    };
    if let Some(AttrValue::Communities(list)) = a.get(attr::COMMUNITIES).cloned() {
        let kept: Vec<u32> = list.into_iter().filter(keep_std).collect();
        set_or_remove(a, attr::COMMUNITIES, kept, AttrValue::Communities);
    }
    if let Some(AttrValue::LargeCommunities(list)) = a.get(attr::LARGE_COMMUNITY).cloned() {
        let kept: Vec<[u32; 3]> = list.into_iter().filter(|l| l[0] != rs).collect();
        set_or_remove(a, attr::LARGE_COMMUNITY, kept, AttrValue::LargeCommunities);
    }
}

fn set_or_remove<T>(a: &mut PathAttributes, code: u8, list: Vec<T>, f: fn(Vec<T>) -> AttrValue) {
    if list.is_empty() {
        a.remove(code);
    } else {
        a.set(f(list));
    }
}

/// Puts an AS at the front of the AS_PATH (RFC 4271 section 5.1.2), making one if absent.
pub fn prepend_as(a: &mut PathAttributes, asn: u32) {
    let mut path = a.as_path().cloned().unwrap_or_default();
    match path.segments.first_mut() {
        Some(s) if s.kind == segment::AS_SEQUENCE && s.asns.len() < 255 => s.asns.insert(0, asn),
        _ => path.segments.insert(
            0,
            AsSegment {
                kind: segment::AS_SEQUENCE,
                asns: vec![asn],
            },
        ),
    }
    a.set(AttrValue::AsPath(path));
}

pub(super) fn modify(x: &Modify, m: &mut Modified, cx: &ApplyContext) {
    let a = &mut m.attrs;
    match x {
        Modify::CommunitySet(sets) => {
            a.remove(attr::COMMUNITIES);
            a.remove(attr::EXTENDED_COMMUNITIES);
            a.remove(attr::LARGE_COMMUNITY);
            add_communities(a, sets);
        }
        Modify::CommunityDelete(sets) => {
            let hit = |c: Community| sets.iter().any(|s| s.any_matches(&c));
            if let Some(AttrValue::Communities(l)) = a.get(attr::COMMUNITIES).cloned() {
                let kept = l
                    .into_iter()
                    .filter(|v| !hit(Community::Standard(*v)))
                    .collect();
                set_or_remove(a, attr::COMMUNITIES, kept, AttrValue::Communities);
            }
            if let Some(AttrValue::ExtCommunities(l)) = a.get(attr::EXTENDED_COMMUNITIES).cloned() {
                let kept = l
                    .into_iter()
                    .filter(|v| !hit(Community::Extended(*v)))
                    .collect();
                set_or_remove(
                    a,
                    attr::EXTENDED_COMMUNITIES,
                    kept,
                    AttrValue::ExtCommunities,
                );
            }
            if let Some(AttrValue::LargeCommunities(l)) = a.get(attr::LARGE_COMMUNITY).cloned() {
                let kept = l
                    .into_iter()
                    .filter(|v| !hit(Community::Large(*v)))
                    .collect();
                set_or_remove(a, attr::LARGE_COMMUNITY, kept, AttrValue::LargeCommunities);
            }
        }
        Modify::CommunityAdd(sets) => add_communities(a, sets),
        Modify::LocalPref(op) => {
            let v = op.on(a.local_pref().unwrap_or(100));
            a.set(AttrValue::LocalPref(v));
            m.local_pref_set = true;
        }
        Modify::Med(op) => {
            let v = op.on(a.med().unwrap_or(0));
            a.set(AttrValue::Med(v));
            m.med_set = true;
        }
        Modify::Prepend(list) => {
            for asn in list.iter().rev() {
                prepend_as(a, *asn);
            }
        }
        Modify::PrependOwn(n) => {
            for _ in 0..*n {
                prepend_as(a, cx.own_as);
            }
        }
        Modify::ExpandLastAs(n) => {
            let last = a
                .as_path()
                .and_then(|p| p.segments.first())
                .filter(|x| x.kind == segment::AS_SEQUENCE)
                .and_then(|x| x.asns.first().copied())
                .unwrap_or(cx.own_as);
            for _ in 0..*n {
                prepend_as(a, last);
            }
        }
        Modify::NextHop(n) => m.next_hop = Some(*n),
        Modify::Origin(o) => a.set(AttrValue::Origin(*o)),
    }
}

/// Adds the values of these sets that the route does not have yet, each kind to its own
/// attribute.
fn add_communities(a: &mut PathAttributes, sets: &[Arc<CommunitySet>]) {
    let mut std: Vec<u32> = a.communities().to_vec();
    let mut ext: Vec<[u8; 8]> = match a.get(attr::EXTENDED_COMMUNITIES) {
        Some(AttrValue::ExtCommunities(l)) => l.clone(),
        _ => Vec::new(),
    };
    let mut large: Vec<[u32; 3]> = a.large_communities().to_vec();
    let (s0, e0, l0) = (std.len(), ext.len(), large.len());
    for c in sets.iter().flat_map(|s| s.values()) {
        match c {
            Community::Standard(v) if !std.contains(&v) => std.push(v),
            Community::Extended(v) if !ext.contains(&v) => ext.push(v),
            Community::Large(v) if !large.contains(&v) => large.push(v),
            _ => {}
        }
    }
    if std.len() != s0 {
        a.set(AttrValue::Communities(std));
    }
    if ext.len() != e0 {
        a.set(AttrValue::ExtCommunities(ext));
    }
    if large.len() != l0 {
        a.set(AttrValue::LargeCommunities(large));
    }
}
