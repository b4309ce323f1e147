//! The policy language case by case: each condition and action at its boundaries, flow
//! control and chains, and the errors a configuration gets.

mod common;

use common::*;
use ribshard_policy::{NextHopSet, PolicyError, PolicyWarning};
use ribshard_wire::attr;
use ribshard_wire::attributes::AttrValue;
use ribshard_wire::Origin;

fn filter(from: &str) -> ribshard_policy::Policies {
    policies(&format!(
        r#"
        [prefix-list.list]
        prefixes = ["10.0.0.0/8", "10.1.0.0/16", "2001:db8::/32"]
        [prefix-list.empty]
        prefixes = []
        [community.a]
        members = ["65000:1"]
        [community.ab]
        members = ["65000:1", "65000:2"]
        [community.wild]
        members = ["65010:*"]
        [community.re]
        members = ["^6502[0-9]:1..$"]
        [community.big]
        members = ["large:65000:7:*"]
        [as-path]
        from-65001 = "^65001 .*$"
        to-13335 = ".* 13335"
        long = ".{{5,}}"
        [as-path-group.odd]
        as-path = {{ one = "1", three = "3" }}
        [[policy-statement.p.term]]
        name = "t"
        from = {from}
        then = {{ action = "accept" }}
        "#
    ))
}

fn matches(from: &str, r: &Route) -> bool {
    accepts(&filter(from), &["p"], r)
}

#[test]
fn route_filters_at_their_boundaries() {
    let f = |m: &str| format!(r#"{{ route-filter = ["10.0.0.0/8 {m}"] }}"#);
    let r = Route::new;
    assert!(matches(&f("exact"), &r("10.0.0.0/8")));
    assert!(!matches(&f("exact"), &r("10.0.0.0/9")));
    assert!(matches(&f("orlonger"), &r("10.0.0.0/8")));
    assert!(matches(&f("orlonger"), &r("10.255.0.0/16")));
    assert!(!matches(&f("orlonger"), &r("11.0.0.0/16")));
    assert!(!matches(&f("orlonger"), &r("10.0.0.0/7")));
    assert!(!matches(&f("longer"), &r("10.0.0.0/8")));
    assert!(matches(&f("longer"), &r("10.0.0.0/9")));
    assert!(matches(&f("upto /24"), &r("10.1.2.0/24")));
    assert!(!matches(&f("upto /24"), &r("10.1.2.0/25")));
    assert!(matches(
        &f("prefix-length-range /16-/20"),
        &r("10.1.0.0/16")
    ));
    assert!(matches(
        &f("prefix-length-range /16-/20"),
        &r("10.1.0.0/20")
    ));
    assert!(!matches(
        &f("prefix-length-range /16-/20"),
        &r("10.1.0.0/15")
    ));
    assert!(!matches(
        &f("prefix-length-range /16-/20"),
        &r("10.1.0.0/21")
    ));
    let t = f("through 10.1.0.0/16");
    assert!(matches(&t, &r("10.0.0.0/8")));
    assert!(matches(&t, &r("10.0.0.0/15")));
    assert!(matches(&t, &r("10.1.0.0/16")));
    assert!(!matches(&t, &r("10.1.0.0/17")));
    assert!(!matches(&t, &r("10.2.0.0/16")));
    // Host bits of a route are irrelevant (RFC 4271 section 4.3): matched as routed.
    assert!(matches(&f("exact"), &r("10.0.0.0/8")));
    let mut host = r("10.0.0.0/8");
    host.prefix = ribshard_wire::Prefix::V4 {
        addr: 0x0a00_0001,
        len: 8,
    };
    assert!(matches(&f("exact"), &host));
    // IPv6, and never across families.
    let v6 = r#"{ route-filter = ["2001:db8::/32 upto /48"] }"#;
    assert!(matches(v6, &r("2001:db8:1::/48")));
    assert!(!matches(v6, &r("2001:db8:1::/49")));
    assert!(!matches(v6, &r("32.1.13.0/24")));
}

#[test]
fn the_longest_route_filter_decides_as_in_junos() {
    // 10.1.2.0/24 is under both; the longer entry (exact) decides, and fails.
    let from = r#"{ route-filter = ["10.0.0.0/8 orlonger", "10.1.0.0/16 exact"] }"#;
    assert!(!matches(from, &Route::new("10.1.2.0/24")));
    assert!(matches(from, &Route::new("10.1.0.0/16")));
    assert!(matches(from, &Route::new("10.2.0.0/16")));
    // Two match types on one prefix: either will do.
    let both =
        r#"{ route-filter = ["10.0.0.0/8 exact", "10.0.0.0/8 prefix-length-range /24-/24"] }"#;
    assert!(matches(both, &Route::new("10.0.0.0/8")));
    assert!(matches(both, &Route::new("10.9.9.0/24")));
    assert!(!matches(both, &Route::new("10.9.0.0/16")));
}

#[test]
fn prefix_lists_exact_and_filtered() {
    let r = Route::new;
    assert!(matches(r#"{ prefix-list = "list" }"#, &r("10.1.0.0/16")));
    assert!(!matches(r#"{ prefix-list = "list" }"#, &r("10.1.0.0/17")));
    assert!(matches(
        r#"{ prefix-list = ["empty", "list"] }"#,
        &r("2001:db8::/32")
    ));
    let f = |m: &str| format!(r#"{{ prefix-list-filter = {{ list = "list", match = "{m}" }} }}"#);
    assert!(matches(&f("orlonger"), &r("10.200.0.0/16")));
    assert!(matches(&f("longer"), &r("10.1.0.0/17")));
    // The longest entry is 10.1.0.0/16 itself: not longer.
    assert!(!matches(&f("longer"), &r("10.1.0.0/16")));
    assert!(matches(&f("upto /24"), &r("2001:db8::/24")).eq(&false));
    assert!(matches(&f("upto /24"), &r("10.1.1.0/24")));
    // Route lists of one term are one condition: any of them.
    let any = r#"{ prefix-list = "empty", route-filter = ["192.0.2.0/24 exact"] }"#;
    assert!(matches(any, &r("192.0.2.0/24")));
}

#[test]
fn large_prefix_lists_from_files() {
    let mut text = String::from("# as bgpq4 writes them\n");
    for i in 0..50_000u32 {
        text += &format!("{}.{}.{}.0/24\n", 100 + (i >> 16), (i >> 8) & 255, i & 255);
    }
    text += "2001:db8::/32;\n";
    let (p, errors, _) = try_compile(
        r#"
        [prefix-list.irr]
        file = "irr.txt"
        [[policy-statement.p.term]]
        from = { prefix-list-filter = { list = "irr", match = "orlonger" } }
        then = { action = "accept" }
        "#,
        &[("irr.txt", &text)],
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert!(accepts(&p, &["p"], &Route::new("100.195.79.0/24")));
    assert!(accepts(&p, &["p"], &Route::new("100.195.79.128/25")));
    assert!(!accepts(&p, &["p"], &Route::new("100.195.80.0/24")));
    assert!(!accepts(&p, &["p"], &Route::new("100.195.0.0/16")));
    assert!(accepts(&p, &["p"], &Route::new("2001:db8:ff::/48")));
    // A bad line names the file and line.
    let (_, errors, _) = try_compile(
        r#"
        [prefix-list.irr]
        file = "bad.txt"
        "#,
        &[("bad.txt", "192.0.2.0/24\n192.0.2.1/24\n")],
    );
    assert!(
        matches!(&errors[0].1, PolicyError::FileLine { line: 2, .. }),
        "{errors:?}"
    );
    let (_, errors, _) = try_compile("[prefix-list.x]\nfile = \"missing.txt\"\n", &[]);
    assert!(matches!(&errors[0].1, PolicyError::FileRead { .. }));
}

#[test]
fn communities_all_of_a_set_any_of_the_sets() {
    let r = |c: &[&str]| Route::new("192.0.2.0/24").comm(c);
    assert!(matches(r#"{ community = "a" }"#, &r(&["65000:1"])));
    assert!(!matches(r#"{ community = "ab" }"#, &r(&["65000:1"])));
    assert!(matches(
        r#"{ community = "ab" }"#,
        &r(&["65000:2", "65000:1"])
    ));
    assert!(matches(r#"{ community = ["ab", "a"] }"#, &r(&["65000:1"])));
    assert!(matches(r#"{ community = "wild" }"#, &r(&["65010:77"])));
    assert!(!matches(r#"{ community = "wild" }"#, &r(&["65011:77"])));
    assert!(matches(r#"{ community = "re" }"#, &r(&["65027:100"])));
    assert!(!matches(r#"{ community = "re" }"#, &r(&["65027:1000"])));
    let mut big = r(&[]);
    big.large = vec![[65000, 7, 99]];
    assert!(matches(r#"{ community = "big" }"#, &big));
    big.large = vec![[65000, 8, 99]];
    assert!(!matches(r#"{ community = "big" }"#, &big));
}

#[test]
fn as_paths_lengths_and_the_rest() {
    let r = |p: &[u32]| Route::new("192.0.2.0/24").path(p);
    assert!(matches(r#"{ as-path = "from-65001" }"#, &r(&[65001, 2])));
    assert!(!matches(r#"{ as-path = "from-65001" }"#, &r(&[2, 65001])));
    assert!(matches(
        r#"{ as-path = ["long", "to-13335"] }"#,
        &r(&[1, 13335])
    ));
    assert!(matches(r#"{ as-path = "long" }"#, &r(&[1, 2, 3, 4, 5])));
    assert!(!matches(r#"{ as-path = "long" }"#, &r(&[1, 2, 3, 4])));
    assert!(matches(r#"{ as-path-group = "odd" }"#, &r(&[3])));
    assert!(!matches(r#"{ as-path-group = "odd" }"#, &r(&[2])));
    let len = |m: &str| format!(r#"{{ as-path-calc-length = {{ count = 3, match = "{m}" }} }}"#);
    assert!(matches(&len("equal"), &r(&[1, 2, 3])));
    assert!(matches(&len("orhigher"), &r(&[1, 2, 3, 4])));
    assert!(!matches(&len("orlower"), &r(&[1, 2, 3, 4])));
    let mut x = Route::new("192.0.2.0/24");
    x.origin = Origin::Incomplete;
    x.local_pref = Some(150);
    x.med = Some(7);
    assert!(matches(r#"{ origin = "incomplete" }"#, &x));
    assert!(!matches(r#"{ origin = "igp" }"#, &x));
    assert!(matches(r#"{ local-preference = 150 }"#, &x));
    assert!(matches(r#"{ metric = 7 }"#, &x));
    assert!(!matches(r#"{ metric = 8 }"#, &x));
    // Without LOCAL_PREF a route counts as 100; without MED it has no metric.
    let plain = Route::new("192.0.2.0/24");
    assert!(matches(r#"{ local-preference = 100 }"#, &plain));
    assert!(!matches(r#"{ metric = 0 }"#, &plain));
    assert!(matches(r#"{ next-hop = "192.0.2.1" }"#, &plain));
    assert!(matches(
        r#"{ neighbor = ["198.51.100.9", "198.51.100.1"] }"#,
        &plain
    ));
    assert!(!matches(r#"{ neighbor = "198.51.100.9" }"#, &plain));
    assert!(matches(r#"{ peer-as = 65001 }"#, &plain));
    assert!(matches(r#"{ route-type = "external" }"#, &plain));
    assert!(!matches(r#"{ route-type = "internal" }"#, &plain));
    assert!(matches(r#"{ family = "inet", protocol = "bgp" }"#, &plain));
    assert!(!matches(r#"{ family = "inet6" }"#, &plain));
    // Every condition of a term must hold.
    assert!(!matches(r#"{ family = "inet", peer-as = 1 }"#, &plain));
}

fn then(then: &str, r: &Route) -> ribshard_wire::attributes::PathAttributes {
    let p = policies(&format!(
        r#"
        [community.a]
        members = ["65000:1"]
        [community.b]
        members = ["65000:2", "large:65000:0:1", "target:65000:9"]
        [community.all-65000]
        members = ["65000:*"]
        [[policy-statement.p.term]]
        then = {then}
        "#
    ));
    result(&p, &["p"], r).expect("accepted")
}

#[test]
fn actions_change_what_they_say() {
    let r = Route::new("192.0.2.0/24").comm(&["65000:7", "65001:1"]);
    let a = then(r#"{ local-preference = 200, action = "accept" }"#, &r);
    assert_eq!(a.local_pref(), Some(200));
    let mut lp = r.clone();
    lp.local_pref = Some(150);
    assert_eq!(
        then(
            r#"{ local-preference = { add = 10 }, action = "accept" }"#,
            &lp
        )
        .local_pref(),
        Some(160)
    );
    assert_eq!(
        then(
            r#"{ local-preference = { subtract = 200 }, action = "accept" }"#,
            &lp
        )
        .local_pref(),
        Some(0)
    );
    // Without LOCAL_PREF, add counts from 100.
    assert_eq!(
        then(
            r#"{ local-preference = { add = 1 }, action = "accept" }"#,
            &r
        )
        .local_pref(),
        Some(101)
    );
    assert_eq!(
        then(r#"{ metric = { add = 5 }, action = "accept" }"#, &r).med(),
        Some(5)
    );
    // Communities: delete goes before add whatever the order written; set replaces all
    // three kinds.
    let a = then(
        r#"{ community-add = "a", community-delete = "all-65000", action = "accept" }"#,
        &r,
    );
    assert_eq!(a.communities(), &[std_comm("65001:1"), std_comm("65000:1")]);
    let a = then(r#"{ community-set = "b", action = "accept" }"#, &r);
    assert_eq!(a.communities(), &[std_comm("65000:2")]);
    assert_eq!(a.large_communities(), &[[65000, 0, 1]]);
    assert!(matches!(
        a.get(attr::EXTENDED_COMMUNITIES),
        Some(AttrValue::ExtCommunities(v)) if v.len() == 1
    ));
    // Adding what is there adds nothing.
    let a = then(
        r#"{ community-add = "a", action = "accept" }"#,
        &r.clone().comm(&["65000:1"]),
    );
    assert_eq!(a.communities(), &[std_comm("65000:1")]);
    // Deleting the last one removes the attribute.
    let a = then(
        r#"{ community-delete = "all-65000", action = "accept" }"#,
        &r.clone().comm(&["65000:1"]),
    );
    assert!(a.get(attr::COMMUNITIES).is_none());
    let path = |a: ribshard_wire::attributes::PathAttributes| -> Vec<u32> {
        a.as_path()
            .unwrap()
            .segments
            .iter()
            .flat_map(|s| s.asns.clone())
            .collect()
    };
    assert_eq!(
        path(then(
            r#"{ as-path-prepend = [1, 2], action = "accept" }"#,
            &r
        )),
        [1, 2, 65001, 13335]
    );
    assert_eq!(
        path(then(r#"{ as-path-prepend = 2, action = "accept" }"#, &r)),
        [65000, 65000, 65001, 13335]
    );
    assert_eq!(
        path(then(
            r#"{ as-path-expand = { last-as = 2 }, action = "accept" }"#,
            &r
        )),
        [65001, 65001, 65001, 13335]
    );
    assert_eq!(
        path(then(
            r#"{ as-path-expand = { last-as = 1 }, action = "accept" }"#,
            &r.clone().path(&[])
        )),
        [65000]
    );
    assert_eq!(
        then(r#"{ origin = "egp", action = "accept" }"#, &r).origin(),
        Some(Origin::Egp)
    );
}

#[test]
fn next_hop_actions_are_left_to_the_caller() {
    let p = policies(
        r#"
        [[policy-statement.p.term]]
        then = { next-hop = "self", action = "accept" }
        [[policy-statement.q.term]]
        then = { next-hop = "203.0.113.9", action = "accept" }
        [[policy-statement.d.term]]
        then = { next-hop = "discard", action = "accept" }
        "#,
    );
    let r = Route::new("192.0.2.0/24");
    let nh = |n: &str| run(&p, &[n], &r).modified.unwrap().next_hop;
    assert_eq!(nh("p"), Some(NextHopSet::OurAddress));
    assert_eq!(
        nh("q"),
        Some(NextHopSet::Address("203.0.113.9".parse().unwrap()))
    );
    assert_eq!(nh("d"), Some(NextHopSet::Discard));
}

#[test]
fn flow_control_and_chains_as_in_junos() {
    let p = policies(
        r#"
        [community.tag]
        members = ["65000:1"]
        [[policy-statement.mark.term]]
        name = "lp"
        then = { local-preference = 120 }
        [[policy-statement.mark.term]]
        name = "tagged"
        from = { community = "tag" }
        then = { local-preference = { add = 5 }, action = "next-policy" }
        [[policy-statement.mark.term]]
        name = "never-reached-by-tagged"
        then = { local-preference = 999 }
        [[policy-statement.only-v4.term]]
        from = { family = "inet" }
        then = { action = "accept" }
        [[policy-statement.only-v4.term]]
        then = { action = "reject" }
        [[policy-statement.lenient.term]]
        then = { default-action = "accept" }
        [[policy-statement.strict.term]]
        from = { peer-as = 1 }
        then = { action = "accept" }
        "#,
    );
    let tagged = Route::new("192.0.2.0/24").comm(&["65000:1"]);
    let plain = Route::new("192.0.2.0/24");
    // Terms without an action go on to the next; next-policy skips the rest of the policy.
    let o = run(&p, &["mark", "only-v4"], &tagged);
    assert!(o.accept);
    assert_eq!(o.modified.unwrap().attrs.local_pref(), Some(125));
    assert_eq!(o.decided_by, "policy only-v4 term 1");
    let o = run(&p, &["mark", "only-v4"], &plain);
    assert_eq!(o.modified.unwrap().attrs.local_pref(), Some(999));
    // The first accept or reject ends the chain.
    assert!(!accepts(
        &p,
        &["only-v4", "mark"],
        &Route::new("2001:db8::/32")
    ));
    // Falling off the end: the chain's default (rejecting here, an external session)...
    assert!(!accepts(&p, &["strict"], &plain));
    assert!(!accepts(&p, &["mark"], &plain));
    // ...unless a matched term set a default-action; built-ins decide at once.
    assert!(accepts(&p, &["lenient", "strict"], &plain));
    assert!(accepts(&p, &["strict", "accept"], &plain));
    assert!(!accepts(&p, &["reject", "only-v4"], &plain));
    // A rejected route keeps nothing of the changes made on the way.
    let o = run(&p, &["mark", "reject"], &plain);
    assert!(!o.accept && o.modified.is_none());
    // The internal default accepts.
    let chain = p.chain(&["strict".to_string()], true, 65000).unwrap();
    assert!(run_chain(&chain, &plain, None).accept);
    assert!(run_chain(&chain, &plain, None)
        .decided_by
        .contains("accepted by default"));
}

#[test]
fn route_server_control_communities() {
    let p = policies("[route-server-control]\nasn = 64999\n");
    let chain = p
        .chain(
            &["route-server-control".to_string(), "accept".to_string()],
            false,
            1,
        )
        .unwrap();
    let send = |c: &[&str], large: &[[u32; 3]], to: u32| {
        let mut r = Route::new("192.0.2.0/24").comm(c);
        r.large = large.to_vec();
        let o = run_chain(&chain, &r, Some(to));
        o.accept.then(|| {
            o.modified
                .map(|m| m.attrs)
                .unwrap_or_else(|| r.attributes())
        })
    };
    // Not to 65002; to no one but 65003.
    assert!(send(&["0:65002"], &[], 65002).is_none());
    assert!(send(&["0:65002"], &[], 65004).is_some());
    assert!(send(&["0:64999", "64999:65003"], &[], 65004).is_none());
    assert!(send(&["0:64999", "64999:65003"], &[], 65003).is_some());
    assert!(send(&[], &[[64999, 0, 65002]], 65002).is_none());
    assert!(send(&[], &[[64999, 0, 0], [64999, 1, 4200000001]], 4200000001).is_some());
    // Prepend the announcing neighbor's AS, and strip the control communities.
    let a = send(&["65502:65002", "65001:7"], &[], 65002).unwrap();
    let path: Vec<u32> = a
        .as_path()
        .unwrap()
        .segments
        .iter()
        .flat_map(|s| s.asns.clone())
        .collect();
    assert_eq!(path, [65001, 65001, 65001, 13335]);
    assert_eq!(a.communities(), &[std_comm("65001:7")]);
    let a = send(&[], &[[64999, 103, 0], [1, 2, 3]], 65009).unwrap();
    assert_eq!(a.as_path().unwrap().segments[0].asns.len(), 5);
    assert_eq!(a.large_communities(), &[[1, 2, 3]]);
    // Untouched routes stay untouched.
    assert!(run_chain(&chain, &Route::new("192.0.2.0/24"), Some(65002))
        .modified
        .is_none());
}

#[test]
fn errors_name_the_key_and_the_reason() {
    let (_, errors, warnings) = try_compile(
        r#"
        [prefix-list.ok]
        prefixes = ["10.0.0.0/8", "10.0.0.1/8"]
        [prefix-list.both]
        prefixes = ["10.0.0.0/8"]
        file = "x"
        [community.wild]
        members = ["65000:*"]
        [community.bad]
        members = ["65000:70000"]
        [as-path]
        broken = "65001 (1 2"
        [[policy-statement.p.term]]
        name = "undefined"
        from = { prefix-list = "nope", community = ["wild", "missing"] }
        then = { community-add = "wild", action = "accepted" }
        [[policy-statement.p.term]]
        name = "contradiction"
        from = { family = "inet6", route-filter = ["10.0.0.0/8 orlonger"] }
        then = { action = "accept" }
        [[policy-statement.p.term]]
        name = "static"
        from = { protocol = "static" }
        then = { action = "accept" }
        [[policy-statement.p.term]]
        name = "everything"
        then = { action = "reject" }
        [[policy-statement.p.term]]
        name = "after-everything"
        then = { action = "accept" }
        [[policy-statement.accept.term]]
        then = { action = "accept" }
        "#,
        &[],
    );
    let find = |key: &str| {
        errors
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, e)| e.to_string())
            .collect::<Vec<_>>()
            .join(" | ")
    };
    assert!(find("policy-options.prefix-list.ok.prefixes[1]").contains("host bits"));
    assert!(find("policy-options.prefix-list.both").contains("both"));
    assert!(find("policy-options.community.bad.members[0]").contains("16 bits"));
    assert!(find("policy-options.as-path.broken").contains("at character 7"));
    let t0 = "policy-options.policy-statement.p.term[0]";
    assert!(find(&format!("{t0}.from.prefix-list")).contains("\"nope\" is not defined"));
    assert!(find(&format!("{t0}.from.community[1]")).contains("\"missing\""));
    assert!(find(&format!("{t0}.then.community-add")).contains("wildcard"));
    assert!(find(&format!("{t0}.then.action")).contains("accepted: is not an action"));
    assert!(
        find("policy-options.policy-statement.p.term[1].from.family").contains("can never match")
    );
    assert!(
        find("policy-options.policy-statement.p.term[2].from.protocol").contains("can never match")
    );
    assert!(find("policy-options.policy-statement.accept").contains("built-in"));
    assert!(warnings
        .iter()
        .any(|(k, w)| k.ends_with("term[4]") && matches!(w, PolicyWarning::Unreachable { .. })));
}
