//! The policy examples of `examples/` load, and behave as their names say: on routes made
//! for each rule, and (the transit filter) on the real 2010 full tables, where nothing it
//! accepts breaks a rule it states.

use ribshard::config::{self, Config};
use ribshard::policy_test::{test, Route};
use ribshard_mrt::{Record, RibRecord};
use ribshard_policy::{Source, Subject};
use ribshard_wire::update::segment;
use ribshard_wire::{attr, update::RawAttrIter};
use std::path::{Path, PathBuf};

fn example(name: &str) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    let checked = config::load(&path);
    match checked.config {
        Ok(c) => c,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn route(prefix: &str, path: &str, comms: &[&str]) -> Route {
    Route {
        prefix: prefix.into(),
        as_path: path.into(),
        communities: comms.iter().map(|s| s.to_string()).collect(),
        neighbor: "127.0.0.11".parse().unwrap(),
        peer_as: path.split_whitespace().next().and_then(|a| a.parse().ok()),
        internal: false,
        next_hop: None,
        local_preference: None,
        med: None,
        origin: "igp".into(),
        receiver_as: None,
    }
}

/// "accepted by policy P term T" or "rejected by ...", and the rest of the report.
fn decide(c: &Config, chain: &[&str], r: &Route) -> String {
    let names: Vec<String> = chain.iter().map(|s| s.to_string()).collect();
    test(c, &names, r).unwrap().text()
}

#[test]
fn every_example_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p: PathBuf = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let checked = config::load(&p);
            assert!(
                checked.config.is_ok(),
                "{}: {:?}",
                p.display(),
                checked.config.err()
            );
            n += 1;
        }
    }
    assert!(n >= 3, "the examples are there");
}

#[test]
fn transit_edge_filters_as_named() {
    let c = example("transit-edge.toml");
    let t = |p: &str, path: &str| decide(&c, &["transit-in"], &route(p, path, &[]));
    assert!(t("8.8.8.0/24", "3356 15169").contains("accepted by policy transit-in term accept"));
    assert!(t("8.8.8.0/24", "3356 15169").contains("communities: 64500:100"));
    assert!(t("10.1.0.0/16", "3356 15169").contains("term bogon-prefixes"));
    assert!(t("2001:db8:1::/48", "3356 15169").contains("term bogon-prefixes"));
    assert!(t("8.8.8.0/25", "3356 15169").contains("term too-long-or-too-short"));
    assert!(t("8.0.0.0/7", "3356 15169").contains("term too-long-or-too-short"));
    assert!(t("2a00::/12", "3356 15169").contains("term too-long-or-too-short"));
    assert!(t("8.8.8.0/24", "3356 64512 15169").contains("term bogon-asns"));
    assert!(t("8.8.8.0/24", "3356 23456").contains("term bogon-asns"));
    let long: String = (0..50).map(|_| "3356 ").collect();
    assert!(t("8.8.8.0/24", long.trim()).contains("term too-long-paths"));
    assert!(t("145.100.2.0/24", "3356 15169").contains("term our-own"));
    // The customer: its IRR prefixes up to /24, a /32 blackhole with the community.
    let cust = |p: &str, comms: &[&str]| decide(&c, &["customer-in"], &route(p, "64501", comms));
    assert!(cust("203.0.113.0/24", &[]).contains("accepted by policy customer-in term irr"));
    assert!(cust("203.0.113.128/25", &[]).contains("term nothing-else"));
    let bh = cust("203.0.113.7/32", &["blackhole"]);
    assert!(
        bh.contains("term blackhole") && bh.contains("next hop: discard"),
        "{bh}"
    );
    assert!(cust("198.51.100.0/24", &[]).contains("rejected"));
    // Out to transit: ours and the customers' only, the tag removed.
    let out = |p: &str, comms: &[&str]| decide(&c, &["to-transit"], &route(p, "", comms));
    assert!(out("145.100.0.0/22", &[]).contains("term ours"));
    let c2 = out("203.0.113.0/24", &["64500:200"]);
    assert!(
        c2.contains("term customers") && c2.contains("communities: none"),
        "{c2}"
    );
    assert!(out("8.8.8.0/24", &["64500:100"]).contains("term nothing-else"));
}

/// The transit filter over every route of the two real full tables: what it accepts keeps
/// every rule it states.
#[test]
fn transit_edge_on_the_real_tables() {
    let Some(path) = ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz") else {
        return;
    };
    let c = example("transit-edge.toml");
    let chain = c
        .policies
        .0
        .chain(&["transit-in".to_string()], false, c.local_as)
        .unwrap();
    let mut r = ribshard_mrt::open(&path).unwrap();
    let params = RibRecord::params();
    let bogon_as =
        |a: u32| a == 0 || a == 23456 || (64496..=131071).contains(&a) || a >= 4_200_000_000;
    let (mut accepted, mut rejected) = (0usize, 0usize);
    let mut peers: Vec<u32> = Vec::new();
    while let Some(raw) = r.next_record().unwrap() {
        match Record::parse(&raw) {
            Ok(Record::PeerIndexTable(t)) => peers = t.peers.iter().map(|p| p.asn).collect(),
            Ok(Record::Rib(rib)) => {
                for e in &rib.entries {
                    if ribshard_wire::parse_attributes_only(e.attributes, &params).is_err() {
                        continue;
                    }
                    let peer_as = peers.get(usize::from(e.peer_index)).copied().unwrap_or(0);
                    let source = Source {
                        address: "127.0.0.11".parse().unwrap(),
                        peer_as,
                        internal: false,
                    };
                    let nh = RawAttrIter::new(e.attributes)
                        .find(|a| a.type_code == attr::NEXT_HOP)
                        .map_or(Vec::new(), |a| a.value.to_vec());
                    let prefix = rib.prefix.masked();
                    let v = chain.evaluate(&Subject {
                        prefix,
                        attrs: e.attributes,
                        next_hop: &nh,
                        source: &source,
                        receiver_as: None,
                        rpki: Default::default(),
                    });
                    if !v.accept {
                        rejected += 1;
                        continue;
                    }
                    accepted += 1;
                    assert!((8..=24).contains(&prefix.len()), "{prefix} accepted");
                    let as_path = RawAttrIter::new(e.attributes)
                        .find(|a| a.type_code == attr::AS_PATH)
                        .map_or(&[][..], |a| a.value);
                    let mut asns = Vec::new();
                    let mut at = 0;
                    while let (Some(&k), Some(&n)) = (as_path.get(at), as_path.get(at + 1)) {
                        let body = &as_path[at + 2..at + 2 + 4 * usize::from(n)];
                        // An AS_SET's members count too (a set matches where a member does).
                        if k == segment::AS_SEQUENCE || k == segment::AS_SET {
                            asns.extend(
                                body.chunks(4)
                                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])),
                            );
                        }
                        at += 2 + 4 * usize::from(n);
                    }
                    assert!(
                        asns.len() < 50,
                        "{prefix}: a path of {} accepted",
                        asns.len()
                    );
                    assert!(
                        !asns.iter().skip(1).any(|a| bogon_as(*a)),
                        "{prefix}: {asns:?} accepted"
                    );
                }
            }
            _ => {}
        }
    }
    eprintln!("transit-edge on the 2010 tables: {accepted} routes accepted, {rejected} rejected");
    assert!(
        accepted > 600_000 && rejected > 1_000,
        "{accepted} {rejected}"
    );
}

#[test]
fn peering_router_as_in_the_book() {
    let c = example("peering-router.toml");
    let r = route("8.8.8.0/24", "10000 15169", &[]);
    let out = decide(&c, &["COLOR-EBGP-ROUTES", "accept"], &r);
    assert!(
        out.contains("accepted by policy accept") && out.contains("64510:20"),
        "{out}"
    );
    assert!(decide(&c, &["DENY-ALL"], &r).contains("rejected by policy DENY-ALL term deny"));
    let mut rr = route("8.8.8.0/24", "", &["12001:1000"]);
    rr.internal = true;
    assert!(decide(&c, &["AS12001-non-continental-check"], &rr).contains("term continental-check"));
    assert!(
        decide(&c, &["AS12001-non-regional-check"], &rr).contains("term reject-all-other-routes")
    );
}

#[test]
fn dc_edge_as_in_the_book() {
    let c = example("dc-edge.toml");
    let cis = |p: &str| decide(&c, &["IPV6-CUST-CIS-PREFIX-LIST"], &route(p, "8075", &[]));
    assert!(cis("2603:1030:7::/48").contains("term 100"));
    // The book's policy ends in `then accept`: the rest is accepted too, by the last term.
    assert!(
        cis("2001:db8::/32").contains("accepted by policy IPV6-CUST-CIS-PREFIX-LIST term (final)")
    );
    let out = |p: &str| decide(&c, &["permit-static-bgp"], &route(p, "", &[]));
    assert!(out("207.46.32.132/32").contains("term permit"));
    assert!(out("199.242.32.0/23").contains("term permit"));
    assert!(out("199.242.32.0/24").contains("term rest"));
    assert!(out("207.46.33.40/29").contains("term exceptions"));
    let g = |p: &str| decide(&c, &["ipv6-plist-1-only"], &route(p, "15169", &[]));
    assert!(g("2607:f8b0:4000::/36").contains("term listed"));
    assert!(g("2a03:2880::/32").contains("term rest"));
}
