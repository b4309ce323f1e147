//! `show route` in Junos' layout, written straight from a shard's view of a route into bytes,
//! in the shard that holds it: attributes are read from their interned bytes without being
//! decoded into owned values, numbers written without the formatting machinery. A whole
//! table goes through here, so every allocation per path shows.

use super::routes::PeerNames;
use ribshard_engine::pipeline::ShownRoute;
use ribshard_rib::attrs::NORMALIZED;
use ribshard_rib::{Ineligible, PathState, PathView};
use ribshard_wire::attr;
use ribshard_wire::update::{segment, AsPathView, AttrsView, RawAttrIter};
use ribshard_wire::{parse_attributes_only, Origin};
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The attributes shown by name; any other is shown as its type code and value.
const KNOWN: [u8; 17] = [
    attr::ORIGIN,
    attr::AS_PATH,
    attr::NEXT_HOP,
    attr::MULTI_EXIT_DISC,
    attr::LOCAL_PREF,
    attr::ATOMIC_AGGREGATE,
    attr::AGGREGATOR,
    attr::COMMUNITIES,
    attr::ORIGINATOR_ID,
    attr::CLUSTER_LIST,
    attr::MP_REACH_NLRI,
    attr::MP_UNREACH_NLRI,
    attr::EXTENDED_COMMUNITIES,
    attr::AS4_PATH,
    attr::AS4_AGGREGATOR,
    attr::LARGE_COMMUNITY,
    attr::OTC,
];

/// Appends a number.
fn num(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        if let Some(b) = buf.get_mut(i) {
            *b = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(buf.get(i..).unwrap_or(&[]));
}

fn two(out: &mut Vec<u8>, n: u64) {
    out.push(b'0' + (n / 10 % 10) as u8);
    out.push(b'0' + (n % 10) as u8);
}

/// An age as Junos prints it: `hh:mm:ss`, days in front past one.
pub(super) fn age(out: &mut Vec<u8>, secs: u64) {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        num(out, d);
        out.extend_from_slice(b"d ");
    }
    two(out, h);
    out.push(b':');
    two(out, m);
    out.push(b':');
    two(out, s);
}

fn ipv4(out: &mut Vec<u8>, a: [u8; 4]) {
    for (i, b) in a.into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        num(out, u64::from(b));
    }
}

fn prefix(out: &mut Vec<u8>, p: &ribshard_wire::Prefix) {
    match *p {
        ribshard_wire::Prefix::V4 { addr, len } => {
            ipv4(out, addr.to_be_bytes());
            out.push(b'/');
            num(out, u64::from(len));
        }
        ribshard_wire::Prefix::V6 { .. } => {
            let _ = write!(out, "{p}");
        }
    }
}

/// Seconds since a path arrived, at `now` (read once per request: a thread-local clock
/// read every so many routes froze across requests).
fn age_of(now: u32, p: &PathView) -> u64 {
    u64::from(now.saturating_sub(p.path.since()))
}

fn spaces(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, b' ');
}

/// The attributes of a path as shown: its own, or (advertising-protocol) what the group
/// sends, with the next hop as sent.
struct Shown<'a> {
    attrs: AttrsView<'a>,
    next_hop: &'a [u8],
}

fn shown<'a>(r: &'a ShownRoute, p: &'a PathView) -> Option<Shown<'a>> {
    match &r.advertised {
        Some((e, params)) => {
            let parsed = parse_attributes_only(&e.attrs, params).ok()?;
            let next_hop: &[u8] = if e.mp_next_hop.is_empty() {
                // IPv4 unicast: the NEXT_HOP attribute, read below.
                &[]
            } else {
                &e.mp_next_hop
            };
            Some(Shown {
                attrs: parsed.attrs,
                next_hop,
            })
        }
        None => Some(Shown {
            attrs: parse_attributes_only(p.path.attrs.raw(), &NORMALIZED)
                .ok()?
                .attrs,
            next_hop: p.path.attrs.next_hop(),
        }),
    }
}

fn next_hop(out: &mut Vec<u8>, s: &Shown<'_>) {
    let b = s.next_hop;
    if b.is_empty() {
        if let Some(a) = s.attrs.next_hop {
            ipv4(out, a.octets());
        }
        return;
    }
    match b.len() {
        4 => {
            if let Ok(a) = <[u8; 4]>::try_from(b) {
                ipv4(out, a);
            }
        }
        _ => {
            if let Some(a) = b.get(..16).and_then(|g| <[u8; 16]>::try_from(g).ok()) {
                let _ = write!(out, "{}", Ipv6Addr::from(a));
            }
        }
    }
}

fn as_path(out: &mut Vec<u8>, path: Option<&AsPathView<'_>>) {
    let Some(path) = path else { return };
    let mut first = true;
    for s in path.segments() {
        if !first {
            out.push(b' ');
        }
        first = false;
        let (open, close) = match s.kind {
            segment::AS_SET => (Some(b'{'), Some(b'}')),
            segment::AS_CONFED_SEQUENCE => (Some(b'('), Some(b')')),
            segment::AS_CONFED_SET => (Some(b'['), Some(b']')),
            _ => (None, None),
        };
        out.extend(open);
        for (i, asn) in s.asns().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            num(out, u64::from(asn));
        }
        out.extend(close);
    }
}

fn origin_letter(o: Option<Origin>) -> &'static [u8] {
    match o {
        Some(Origin::Igp) => b"I",
        Some(Origin::Egp) => b"E",
        _ => b"?",
    }
}

fn peer<'a>(names: &'a PeerNames, p: &PathView) -> (&'a str, u32) {
    names
        .get(p.path.peer as usize)
        .map_or(("?", 0), |(a, asn)| (a.as_str(), *asn))
}

/// What the brief layout reads of an attribute set, found by walking its attributes once
/// without validating them again (they were when the set was interned or exported).
#[derive(Default)]
struct Brief<'a> {
    origin: Option<Origin>,
    as_path: Option<AsPathView<'a>>,
    next_hop_v4: Option<[u8; 4]>,
    med: Option<u32>,
    local_pref: Option<u32>,
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?))
}

fn brief_attrs(raw: &[u8], four_octet: bool) -> Brief<'_> {
    let mut b = Brief::default();
    for a in RawAttrIter::new(raw) {
        match a.type_code {
            attr::ORIGIN => b.origin = a.value.first().and_then(|o| Origin::from_u8(*o)),
            attr::AS_PATH => b.as_path = AsPathView::parse(a.value, four_octet),
            attr::NEXT_HOP => b.next_hop_v4 = a.value.get(..4).and_then(|v| v.try_into().ok()),
            attr::MULTI_EXIT_DISC => b.med = u32_of(a.value),
            attr::LOCAL_PREF => b.local_pref = u32_of(a.value),
            _ => {}
        }
    }
    b
}

/// A path's attributes as the brief layouts read them, with its next hop: its own, or
/// (advertising-protocol) what the group sends.
fn brief_of<'a>(r: &'a ShownRoute, p: &'a PathView) -> (Brief<'a>, &'a [u8]) {
    match &r.advertised {
        Some((e, params)) => (
            brief_attrs(&e.attrs, params.four_octet_as),
            &e.mp_next_hop[..],
        ),
        None => (
            brief_attrs(p.path.attrs.raw(), true),
            p.path.attrs.next_hop(),
        ),
    }
}

/// A next hop as the brief layouts write it: NEXT_HOP for IPv4 unicast as exported, else
/// the address given (the global one of an IPv6 pair).
fn brief_next_hop(out: &mut Vec<u8>, a: &Brief<'_>, next_hop: &[u8]) {
    match (next_hop.len(), a.next_hop_v4) {
        (0, Some(nh)) => ipv4(out, nh),
        (4, _) => {
            if let Ok(nh) = <[u8; 4]>::try_from(next_hop) {
                ipv4(out, nh);
            }
        }
        _ => {
            if let Some(g) = next_hop
                .get(..16)
                .and_then(|g| <[u8; 16]>::try_from(g).ok())
            {
                let _ = write!(out, "{}", Ipv6Addr::from(g));
            }
        }
    }
}

/// Pads what was written since `start` to `width` (at least one space after it).
fn pad_to(out: &mut Vec<u8>, start: usize, width: usize) {
    let used = out.len() - start;
    spaces(out, width.saturating_sub(used).max(1));
}

/// A number right-aligned in `width`, or blanks.
fn right(out: &mut Vec<u8>, n: Option<u32>, width: usize) {
    let mut b = Vec::new();
    if let Some(n) = n {
        num(&mut b, u64::from(n));
    }
    spaces(out, width.saturating_sub(b.len()));
    out.extend_from_slice(&b);
}

/// One route of `show route`.
pub(super) fn brief(r: &ShownRoute, names: &PeerNames, now: u32, out: &mut Vec<u8>) {
    for (i, p) in r.view.paths.iter().enumerate() {
        let (a, next_hop) = brief_of(r, p);
        let start = out.len();
        if i == 0 {
            prefix(out, &r.view.prefix);
        }
        let used = out.len() - start;
        spaces(out, 18usize.saturating_sub(used) + 1);
        out.extend_from_slice(if matches!(p.state, PathState::Active { .. }) {
            b"*[BGP/170] "
        } else {
            b" [BGP/170] "
        });
        age(out, age_of(now, p));
        if let Some(lp) = a.local_pref {
            out.extend_from_slice(b", localpref ");
            num(out, u64::from(lp));
        }
        if let Some(m) = a.med {
            out.extend_from_slice(b", MED ");
            num(out, u64::from(m));
        }
        out.extend_from_slice(b", from ");
        out.extend_from_slice(peer(names, p).0.as_bytes());
        if matches!(p.state, PathState::Ineligible(_)) {
            out.extend_from_slice(b" (hidden)");
        }
        out.push(b'\n');
        spaces(out, 22);
        out.extend_from_slice(b"AS path: ");
        as_path(out, a.as_path.as_ref());
        out.push(b' ');
        out.extend_from_slice(origin_letter(a.origin));
        out.push(b'\n');
        spaces(out, 20);
        out.extend_from_slice(b"> to ");
        brief_next_hop(out, &a, next_hop);
        out.push(b'\n');
    }
}

/// The last column of the one-line layouts: AS path and origin (`65001 I`, `I` alone),
/// and the line's end.
fn path_and_origin(out: &mut Vec<u8>, a: &Brief<'_>) {
    as_path(out, a.as_path.as_ref());
    if a.as_path
        .as_ref()
        .is_some_and(|p| p.segments().next().is_some())
    {
        out.push(b' ');
    }
    out.extend_from_slice(origin_letter(a.origin));
    out.push(b'\n');
}

/// One route of `show route terse` (Junos): a line a path, `A`ctive and `V`alidation
/// (`?`: not validated) flags, protocol and preference, local preference and MED as
/// metrics 1 and 2, next hop and AS path.
pub(super) fn terse(r: &ShownRoute, out: &mut Vec<u8>) {
    for (i, p) in r.view.paths.iter().enumerate() {
        let (a, next_hop) = brief_of(r, p);
        let active = matches!(p.state, PathState::Active { .. });
        if i == 0 {
            out.extend_from_slice(if active { b"* ? " } else { b"  ? " });
            let start = out.len();
            prefix(out, &r.view.prefix);
            pad_to(out, start, 19);
        } else {
            out.extend_from_slice(if active { b"*   " } else { b"    " });
            spaces(out, 19);
        }
        out.extend_from_slice(b"B 170 ");
        right(out, a.local_pref, 10);
        out.push(b' ');
        right(out, a.med, 10);
        out.extend_from_slice(if active { b" >" } else { b"  " });
        let start = out.len();
        brief_next_hop(out, &a, next_hop);
        pad_to(out, start, 16);
        path_and_origin(out, &a);
    }
}

/// One route of `show route receive-protocol bgp A` / `advertising-protocol bgp A`
/// (Junos's table: Prefix, Nexthop, MED, Lclpref, AS path).
pub(super) fn table(r: &ShownRoute, out: &mut Vec<u8>) {
    for p in &r.view.paths {
        let (a, next_hop) = brief_of(r, p);
        out.extend_from_slice(if matches!(p.state, PathState::Active { .. }) {
            b"* "
        } else {
            b"  "
        });
        let start = out.len();
        prefix(out, &r.view.prefix);
        pad_to(out, start, 24);
        let start = out.len();
        brief_next_hop(out, &a, next_hop);
        pad_to(out, start, 21);
        right(out, a.med, 8);
        out.push(b' ');
        right(out, a.local_pref, 10);
        spaces(out, 4);
        path_and_origin(out, &a);
    }
}

/// One route of `show route detail`: every attribute, and why each path won or lost.
pub(super) fn detail(r: &ShownRoute, names: &PeerNames, now: u32, out: &mut Vec<u8>) {
    let active = r
        .view
        .paths
        .iter()
        .filter(|p| matches!(p.state, PathState::Active { .. }))
        .count();
    let _ = writeln!(
        out,
        "{} (shard rs-shard-{}, {} entries, {} announced)",
        r.view.prefix,
        r.shard,
        r.view.paths.len(),
        active
    );
    const PAD: &[u8] = b"                ";
    for p in &r.view.paths {
        let Some(s) = shown(r, p) else { continue };
        let a = &s.attrs;
        let is_active = matches!(p.state, PathState::Active { .. });
        out.extend_from_slice(if is_active {
            b"        *BGP    Preference: 170\n"
        } else {
            b"         BGP    Preference: 170\n"
        });
        let (from, peer_as) = peer(names, p);
        out.extend_from_slice(PAD);
        out.extend_from_slice(b"Source: ");
        out.extend_from_slice(from.as_bytes());
        out.push(b'\n');
        out.extend_from_slice(PAD);
        out.extend_from_slice(b"Next hop: ");
        next_hop(out, &s);
        out.push(b'\n');
        out.extend_from_slice(PAD);
        out.extend_from_slice(match p.state {
            PathState::Active { .. } => b"State: <Active",
            PathState::Inactive { .. } => b"State: <NotBest",
            PathState::Ineligible(_) => b"State: <Hidden",
        });
        if p.path.stale() {
            out.extend_from_slice(b" Stale");
        }
        if p.multipath {
            out.extend_from_slice(b" Multipath");
        }
        out.extend_from_slice(b">\n");
        out.extend_from_slice(PAD);
        out.extend_from_slice(b"Peer AS: ");
        num(out, u64::from(peer_as));
        out.extend_from_slice(b"  Router ID: ");
        ipv4(out, p.peer.router_id.to_be_bytes());
        out.push(b'\n');
        if p.path.path_id != 0 {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Path ID: ");
            num(out, u64::from(p.path.path_id));
            out.push(b'\n');
        }
        out.extend_from_slice(PAD);
        out.extend_from_slice(b"Age: ");
        age(out, age_of(now, p));
        out.push(b'\n');
        out.extend_from_slice(PAD);
        out.extend_from_slice(b"AS path: ");
        as_path(out, a.as_path.as_ref());
        out.push(b' ');
        out.extend_from_slice(origin_letter(a.origin));
        out.push(b'\n');
        out.extend_from_slice(PAD);
        out.extend_from_slice(b"Origin: ");
        out.extend_from_slice(
            a.origin
                .map_or("INCOMPLETE", |o| match o {
                    Origin::Igp => "IGP",
                    Origin::Egp => "EGP",
                    Origin::Incomplete => "INCOMPLETE",
                })
                .as_bytes(),
        );
        out.push(b'\n');
        if let Some(lp) = a.local_pref {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Localpref: ");
            num(out, u64::from(lp));
            out.push(b'\n');
        }
        if let Some(m) = a.med {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"MED: ");
            num(out, u64::from(m));
            out.push(b'\n');
        }
        if let Some(c) = a.communities {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Communities:");
            for v in c.chunks_exact(4) {
                let v = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
                out.push(b' ');
                num(out, u64::from(v >> 16));
                out.push(b':');
                num(out, u64::from(v & 0xffff));
            }
            out.push(b'\n');
        }
        if let Some(c) = a.large_communities {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Large communities:");
            for v in c.chunks_exact(12) {
                out.push(b' ');
                for (i, w) in v.chunks_exact(4).enumerate() {
                    if i > 0 {
                        out.push(b':');
                    }
                    num(out, u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]])));
                }
            }
            out.push(b'\n');
        }
        if let Some(c) = a.ext_communities {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Extended communities:");
            for v in c.chunks_exact(8) {
                if let Ok(v) = <[u8; 8]>::try_from(v) {
                    out.push(b' ');
                    out.extend_from_slice(super::routes::ext_community(&v).as_bytes());
                }
            }
            out.push(b'\n');
        }
        if a.atomic_aggregate {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Atomic aggregate\n");
        }
        if let Some(g) = a.as4_aggregator.or(a.aggregator) {
            let _ = writeln!(out, "                Aggregator: {} {}", g.asn, g.address);
        }
        if let Some(id) = a.originator_id {
            let _ = writeln!(out, "                Originator ID: {id}");
        }
        if let Some(c) = a.cluster_list {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Cluster list:");
            for v in c.chunks_exact(4) {
                let _ = write!(out, " {}", Ipv4Addr::new(v[0], v[1], v[2], v[3]));
            }
            out.push(b'\n');
        }
        if let Some(otc) = a.otc {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Only to customer: ");
            num(out, u64::from(otc));
            out.push(b'\n');
        }
        for u in RawAttrIter::new(a.raw).filter(|x| !KNOWN.contains(&x.type_code)) {
            let _ = write!(out, "                Unknown attribute: {}:", u.type_code);
            for b in u.value {
                let _ = write!(out, "{b:02x}");
            }
            out.push(b'\n');
        }
        let reason: Option<(&str, &str)> = match p.state {
            PathState::Active { over: Some(s) } => {
                Some(("Won over the next best path by ", s.describe()))
            }
            PathState::Active { over: None } => None,
            PathState::Inactive {
                step: Some(step),
                in_group: true,
            } => Some(("Inactive reason: Not Best in its group - ", step.describe())),
            PathState::Inactive {
                step: Some(step), ..
            } => Some(("Inactive reason: ", step.describe())),
            PathState::Inactive { step: None, .. } => None,
            PathState::Ineligible(Ineligible::Loop) => Some((
                "Hidden reason: ",
                "AS path, originator or cluster list loop",
            )),
            PathState::Ineligible(Ineligible::Rejected) => {
                Some(("Hidden reason: ", "Rejected by import policy"))
            }
            PathState::Ineligible(Ineligible::Unresolved) => {
                Some(("Hidden reason: ", "Unusable path (next hop unresolved)"))
            }
        };
        if let Some((what, why)) = reason {
            out.extend_from_slice(PAD);
            out.extend_from_slice(what.as_bytes());
            out.extend_from_slice(why.as_bytes());
            out.push(b'\n');
        }
        if let Some(by) = &p.import {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Import: ");
            out.extend_from_slice(by.as_bytes());
            out.push(b'\n');
        }
        if let Some(v) = p.validity {
            out.extend_from_slice(PAD);
            out.extend_from_slice(b"Validation State: ");
            out.extend_from_slice(v.name().as_bytes());
            out.push(b'\n');
        }
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use ribshard_rib::{LoopChecks, Path, PeerInfo, RouteAttrs, RouteView, Step};
    use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
    use std::sync::Arc;

    fn path(peer: u32, asns: &[u32], med: Option<u32>, nh: [u8; 4], state: PathState) -> PathView {
        let mut v = vec![
            AttrValue::Origin(if med.is_some() {
                Origin::Incomplete
            } else {
                Origin::Igp
            }),
            AttrValue::AsPath(AsPath::sequence(asns.iter().copied())),
            AttrValue::NextHop(Ipv4Addr::from(nh)),
            AttrValue::Communities(vec![(65001 << 16) | 100]),
        ];
        v.extend(med.map(AttrValue::Med));
        let attrs = Arc::new(RouteAttrs::from_attributes(
            &PathAttributes::canonical(v),
            &nh,
            &LoopChecks::default(),
        ));
        let since = ribshard_rib::clock::now();
        PathView {
            import: None,
            validity: None,
            path: Path::new(peer, 0, attrs, peer, since),
            peer: PeerInfo {
                router_id: u32::from(Ipv4Addr::new(10, 0, 0, peer as u8)),
                ..PeerInfo::NONE
            },
            state,
            multipath: false,
        }
    }

    fn route() -> (ShownRoute, PeerNames) {
        let view = RouteView {
            prefix: ribshard_wire::Prefix::v4(Ipv4Addr::new(1, 0, 0, 0), 24).unwrap(),
            paths: vec![
                path(
                    0,
                    &[2497, 13335],
                    None,
                    [198, 51, 100, 1],
                    PathState::Active {
                        over: Some(Step::AsPathLength),
                    },
                ),
                path(
                    1,
                    &[4777, 2516, 13335],
                    Some(5),
                    [198, 51, 100, 2],
                    PathState::Inactive {
                        step: Some(Step::AsPathLength),
                        in_group: false,
                    },
                ),
            ],
        };
        let names: PeerNames = Arc::new(vec![
            ("127.0.0.20".into(), 2497),
            ("127.0.0.21".into(), 4777),
        ]);
        let r = ShownRoute {
            shard: 1,
            view,
            advertised: None,
            advertised_paths: Vec::new(),
            rendered: Default::default(),
        };
        (r, names)
    }

    /// The output with its ages (`hh:mm:ss`, read off the clock) as `AGE`.
    fn without_ages(out: Vec<u8>) -> String {
        let b = out;
        let is_age = |w: &[u8]| {
            w.len() == 8
                && w.iter().enumerate().all(|(k, c)| {
                    if k == 2 || k == 5 {
                        *c == b':'
                    } else {
                        c.is_ascii_digit()
                    }
                })
        };
        let mut s = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b.get(i..i + 8).is_some_and(is_age) {
                s.extend_from_slice(b"AGE");
                i += 8;
            } else {
                s.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8(s).unwrap()
    }

    #[test]
    fn ages_read_as_in_junos() {
        let mut out = Vec::new();
        age(&mut out, 3723);
        out.push(b' ');
        age(&mut out, 90061);
        assert_eq!(String::from_utf8(out).unwrap(), "01:02:03 1d 01:01:01");
    }

    /// `show route`, to the column, as Junos lays it out.
    #[test]
    fn brief_layout() {
        let (r, names) = route();
        let mut out = Vec::new();
        brief(&r, &names, ribshard_rib::clock::now(), &mut out);
        let want = "\
1.0.0.0/24         *[BGP/170] AGE, from 127.0.0.20
                      AS path: 2497 13335 I
                    > to 198.51.100.1
                    [BGP/170] AGE, MED 5, from 127.0.0.21
                      AS path: 4777 2516 13335 ?
                    > to 198.51.100.2
";
        assert_eq!(without_ages(out), want);
    }

    #[test]
    fn detail_layout() {
        let (r, names) = route();
        let mut out = Vec::new();
        detail(&r, &names, ribshard_rib::clock::now(), &mut out);
        let text = without_ages(out);
        let want_start = "\
1.0.0.0/24 (shard rs-shard-1, 2 entries, 1 announced)
        *BGP    Preference: 170
                Source: 127.0.0.20
                Next hop: 198.51.100.1
                State: <Active>
                Peer AS: 2497  Router ID: 10.0.0.0
                Age: AGE
                AS path: 2497 13335 I
                Origin: IGP
                Communities: 65001:100
                Won over the next best path by AS path
         BGP    Preference: 170
";
        assert!(text.starts_with(want_start), "{text}");
        assert!(text.contains("                MED: 5\n"), "{text}");
        assert!(
            text.contains("                Inactive reason: AS path\n"),
            "{text}"
        );
        assert!(text.ends_with("\n\n"), "{text}");
    }
}
