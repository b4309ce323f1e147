//! Property test: a compiled policy decides and changes random routes exactly as a
//! straightforward interpreter of the same configuration does (linear scans over the
//! lists, the AS path expressions written out as plain code, actions on a plain struct).

mod common;

use common::*;
use proptest::prelude::*;
use ribshard_policy::{NextHopSet, Source};
use ribshard_wire::{Origin, Prefix};
use std::net::IpAddr;

const CONFIG: &str = r#"
[prefix-list.customers]
prefixes = ["10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24", "2001:db8::/32"]
[prefix-list.bogons]
prefixes = ["0.0.0.0/8", "127.0.0.0/8", "192.168.0.0/16", "fc00::/7"]
[community.tag]
members = ["65000:1"]
[community.tag2]
members = ["65000:1", "65000:2"]
[community.any-65010]
members = ["65010:*"]
[community.re]
members = ["^6502[0-4]:1.*$"]
[community.add]
members = ["65000:100", "large:65000:1:1"]
[as-path]
first = "^65001 .*$"
private = ".* [64512-65534] .*"
long = ".{4,}"
ends = ".* 13335"

[[policy-statement.p1.term]]
name = "bogons"
from = { prefix-list-filter = { list = "bogons", match = "orlonger" } }
then = { action = "reject" }
[[policy-statement.p1.term]]
name = "tagged-customers"
from = { route-filter = ["10.1.0.0/16 upto /24", "10.0.0.0/8 exact", "192.0.2.0/24 prefix-length-range /25-/28", "2001:db8::/32 orlonger"], community = "tag" }
then = { local-preference = 200, community-add = "add", action = "accept" }
[[policy-statement.p1.term]]
name = "private"
from = { as-path = "private" }
then = { action = "reject" }
[[policy-statement.p1.term]]
name = "long"
from = { as-path = "long" }
then = { metric = { add = 10 } }
[[policy-statement.p1.term]]
name = "marked"
from = { community = ["tag2", "any-65010"] }
then = { community-delete = "any-65010", as-path-prepend = 2, action = "next-policy" }
[[policy-statement.p1.term]]
name = "from-65002"
from = { peer-as = 65002 }
then = { local-preference = 50, action = "accept" }
[[policy-statement.p1.term]]
name = "cloudflare"
from = { as-path = ["ends", "first"], origin = "igp" }
then = { default-action = "accept" }

[[policy-statement.p2.term]]
name = "customers"
from = { prefix-list = "customers" }
then = { local-preference = { add = 5 }, action = "accept" }
[[policy-statement.p2.term]]
name = "re"
from = { community = "re", route-type = "external" }
then = { origin = "incomplete", next-hop = "203.0.113.1", action = "accept" }
[[policy-statement.p2.term]]
name = "v6"
from = { family = "inet6" }
then = { action = "reject" }
"#;

fn covers(entry: &Prefix, route: &Prefix) -> bool {
    if entry.family() != route.family() || entry.len() > route.len() {
        return false;
    }
    let cut = match *route {
        Prefix::V4 { addr, .. } => Prefix::V4 {
            addr,
            len: entry.len(),
        }
        .masked(),
        Prefix::V6 { addr, .. } => Prefix::V6 {
            addr,
            len: entry.len(),
        }
        .masked(),
    };
    cut == entry.masked()
}

#[derive(Clone, Debug, PartialEq)]
struct Plain {
    path: Vec<u32>,
    comms: Vec<u32>,
    large: Vec<[u32; 3]>,
    lp: Option<u32>,
    med: Option<u32>,
    origin: Origin,
    next_hop: Option<NextHopSet>,
}

/// The configuration above, written out as code.
fn interpret(r: &Route) -> Option<Plain> {
    let p = r.prefix.masked();
    let mut m = Plain {
        path: r.as_path.clone(),
        comms: r.communities.clone(),
        large: r.large.clone(),
        lp: r.local_pref,
        med: r.med,
        origin: r.origin,
        next_hop: None,
    };
    let has = |c: &[u32], s: &str| c.contains(&std_comm(s));
    let in_list = |l: &[&str]| l.iter().map(|s| pfx(s)).collect::<Vec<_>>();
    let bogons = in_list(&["0.0.0.0/8", "127.0.0.0/8", "192.168.0.0/16", "fc00::/7"]);
    let customers = in_list(&["10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24", "2001:db8::/32"]);
    let private = |path: &[u32]| path.iter().any(|a| (64512..=65534).contains(a));
    let first = |path: &[u32]| path.first() == Some(&65001);
    let ends = |path: &[u32]| path.last() == Some(&13335);
    let mut default: Option<bool> = None;
    // p1
    'p1: {
        if bogons.iter().any(|b| covers(b, &p)) {
            return None;
        }
        // The longest route filter covering the route decides.
        let filters = [
            ("10.1.0.0/16", 0u8),
            ("10.0.0.0/8", 1),
            ("192.0.2.0/24", 2),
            ("2001:db8::/32", 3),
        ];
        let longest = filters
            .iter()
            .filter(|(e, _)| covers(&pfx(e), &p))
            .max_by_key(|(e, _)| pfx(e).len());
        let rf = match longest {
            Some((_, 0)) => p.len() <= 24,
            Some((_, 1)) => p.len() == 8,
            Some((_, 2)) => (25..=28).contains(&p.len()),
            Some((_, 3)) => true,
            _ => false,
        };
        if rf && has(&m.comms, "65000:1") {
            m.lp = Some(200);
            for c in [std_comm("65000:100")] {
                if !m.comms.contains(&c) {
                    m.comms.push(c);
                }
            }
            if !m.large.contains(&[65000, 1, 1]) {
                m.large.push([65000, 1, 1]);
            }
            return Some(m);
        }
        if private(&m.path) {
            return None;
        }
        if m.path.len() >= 4 {
            m.med = Some(m.med.unwrap_or(0) + 10);
        }
        let tag2 = has(&m.comms, "65000:1") && has(&m.comms, "65000:2");
        let any_65010 = m.comms.iter().any(|c| c >> 16 == 65010);
        if tag2 || any_65010 {
            m.comms.retain(|c| c >> 16 != 65010);
            m.path.splice(0..0, [65000, 65000]);
            break 'p1;
        }
        if r.source.peer_as == 65002 {
            m.lp = Some(50);
            return Some(m);
        }
        if (ends(&m.path) || first(&m.path)) && m.origin == Origin::Igp {
            default = Some(true);
        }
    }
    // p2
    if customers.contains(&p) {
        m.lp = Some(m.lp.unwrap_or(100) + 5);
        return Some(m);
    }
    let re = m.comms.iter().any(|c| {
        let text = format!("{}:{}", c >> 16, c & 0xFFFF);
        (65020..=65024).contains(&(c >> 16)) && text.split(':').nth(1).unwrap().starts_with('1')
    });
    if re && !r.source.internal {
        m.origin = Origin::Incomplete;
        m.next_hop = Some(NextHopSet::Address("203.0.113.1".parse().unwrap()));
        return Some(m);
    }
    if p.family() == ribshard_wire::Family::Ipv6Unicast {
        return None;
    }
    // The chain's end: a default-action, else the (external) default.
    match default {
        Some(true) => Some(m),
        _ => None,
    }
}

const PREFIXES: [&str; 16] = [
    "10.0.0.0/8",
    "10.0.0.0/9",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.0/25",
    "10.2.0.0/16",
    "192.0.2.0/24",
    "192.0.2.0/26",
    "192.0.2.64/29",
    "192.0.2.0/30",
    "192.168.1.0/24",
    "0.0.0.0/8",
    "8.8.8.0/24",
    "2001:db8::/32",
    "2001:db8:1::/48",
    "fc00::/8",
];
const ASNS: [u32; 7] = [65001, 65002, 13335, 64512, 65534, 3356, 1299];
const COMMS: [&str; 8] = [
    "65000:1",
    "65000:2",
    "65010:5",
    "65021:1",
    "65024:199",
    "65025:1",
    "65023:20",
    "1:1",
];

fn route() -> impl Strategy<Value = Route> {
    (
        0..PREFIXES.len(),
        prop::collection::vec(0..ASNS.len(), 0..6),
        prop::collection::vec(0..COMMS.len(), 0..4),
        prop::option::of(prop_oneof![Just(100u32), Just(200)]),
        prop::option::of(prop_oneof![Just(0u32), Just(50)]),
        0u8..3,
        prop_oneof![Just(65001u32), Just(65002)],
        any::<bool>(),
    )
        .prop_map(|(p, path, comms, lp, med, origin, peer_as, internal)| {
            let mut r = Route::new(PREFIXES[p]);
            r.as_path = path.into_iter().map(|i| ASNS[i]).collect();
            let mut c: Vec<&str> = comms.into_iter().map(|i| COMMS[i]).collect();
            c.dedup();
            r = r.comm(&c);
            r.local_pref = lp;
            r.med = med;
            r.origin = Origin::from_u8(origin).unwrap();
            r.source = Source {
                address: "198.51.100.1".parse::<IpAddr>().unwrap(),
                peer_as,
                internal,
            };
            r
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn compiled_equals_interpreted(r in route()) {
        let p = policies(CONFIG);
        let want = interpret(&r);
        let o = run(&p, &["p1", "p2"], &r);
        prop_assert_eq!(o.accept, want.is_some(), "decided by {}", o.decided_by);
        if let Some(w) = want {
            let (attrs, nh) = match o.modified {
                Some(m) => (m.attrs, m.next_hop),
                None => (r.attributes(), None),
            };
            let got = Plain {
                path: attrs.as_path().map(|p| p.segments.iter().flat_map(|s| s.asns.clone()).collect()).unwrap_or_default(),
                comms: attrs.communities().to_vec(),
                large: attrs.large_communities().to_vec(),
                lp: attrs.local_pref(),
                med: attrs.med(),
                origin: attrs.origin().unwrap(),
                next_hop: nh,
            };
            prop_assert_eq!(got, w, "decided by {}", o.decided_by);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Routes sharing attribute sets, as an UPDATE's prefixes do, evaluated one after
    /// another with the set's answers remembered: the same verdict as each evaluated alone,
    /// whatever the prefix, the neighbor, and however the sets alternate.
    #[test]
    fn remembered_set_answers_change_no_verdict(
        routes in prop::collection::vec(route(), 1..4),
        order in prop::collection::vec((0usize..4, 0..PREFIXES.len(), any::<bool>()), 1..40),
    ) {
        let p = policies(CONFIG);
        let chain = p.chain(&["p1".to_string(), "p2".to_string()], false, 65000).expect("chain");
        let sets: Vec<(Vec<u8>, Vec<u8>)> = routes.iter().map(|r| r.bytes()).collect();
        let mut memo = ribshard_policy::SetMemo::default();
        for (i, (set, prefix, other_peer)) in order.into_iter().enumerate() {
            let Some((r, (raw, nh))) = routes.get(set).zip(sets.get(set)) else { continue };
            let source = Source {
                peer_as: if other_peer { 65002 } else { r.source.peer_as },
                ..r.source
            };
            let s = ribshard_policy::Subject {
                prefix: pfx(PREFIXES[prefix]).masked(),
                attrs: raw,
                next_hop: nh,
                source: &source,
                receiver_as: None,
                rpki: Default::default(),
            };
            prop_assert_eq!(chain.evaluate_memo(&s, &mut memo), chain.evaluate(&s), "route {}", i);
        }
    }
}
