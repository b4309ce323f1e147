//! The decision process: strict total orders, independence of arrival order, and the RFC
//! 4271 steps one by one.

use proptest::prelude::*;
use ribshard_rib::{
    best_path, compare, deciding_step, multipath_equal, Candidate, Multipath, Options, Step,
};
use std::cmp::Ordering;

fn base() -> Candidate {
    Candidate {
        llgr_stale: false,
        local_pref: 100,
        as_path_len: 3,
        origin: 0,
        med: 0,
        neighbor_as: 65001,
        ebgp: true,
        igp_cost: 0,
        router_id: 10,
        cluster_list_len: 0,
        peer_address: 1,
        arrival: 0,
    }
}

/// Small value ranges so that ties, and so every step, are exercised.
fn candidate() -> impl Strategy<Value = Candidate> {
    (
        (0u32..3, 0u32..4, 0u8..3, 0u32..3, 1u32..4),
        (any::<bool>(), 0u32..3, 0u32..4, 0u32..3, 0u128..4, 0u32..4),
        // Rarely: most comparisons are between paths that are not long-lived stale.
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |((lp, len, origin, med, nas), (ebgp, igp, rid, cl, addr, arrival), llgr)| Candidate {
                llgr_stale: llgr,
                local_pref: lp * 50,
                as_path_len: len,
                origin,
                med,
                neighbor_as: nas,
                ebgp,
                igp_cost: igp,
                router_id: rid,
                cluster_list_len: cl,
                peer_address: addr,
                arrival,
            },
        )
}

fn options() -> impl Strategy<Value = Options> {
    (any::<bool>(), any::<bool>()).prop_map(|(a, e)| Options {
        always_compare_med: a,
        external_router_id: e,
        multipath: None,
        add_path: None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The step `show route detail` names is the one `compare` decides at: none exactly
    /// when the two are the same path, and the preferred path wins at that step.
    #[test]
    fn deciding_step_agrees_with_compare(a in candidate(), b in candidate(), o in options(), with_med in any::<bool>()) {
        let order = compare(&a, &b, with_med, &o);
        let step = deciding_step(&a, &b, with_med, &o);
        prop_assert_eq!(step.is_none(), order == Ordering::Equal);
        if let Some(step) = step {
            // Equal up to the step, different at it: setting b's field at that step to a's
            // makes compare look further (or tie).
            let mut c = b;
            match step {
                Step::LongLivedStale => c.llgr_stale = a.llgr_stale,
                Step::LocalPref => c.local_pref = a.local_pref,
                Step::AsPathLength => c.as_path_len = a.as_path_len,
                Step::Origin => c.origin = a.origin,
                Step::Med => c.med = a.med,
                Step::External => c.ebgp = a.ebgp,
                Step::IgpCost => c.igp_cost = a.igp_cost,
                Step::OlderPath | Step::Arrival => c.arrival = a.arrival,
                Step::RouterId => c.router_id = a.router_id,
                Step::ClusterListLength => c.cluster_list_len = a.cluster_list_len,
                Step::PeerAddress => c.peer_address = a.peer_address,
            }
            if step != Step::External {
                let later = deciding_step(&a, &c, with_med, &o);
                prop_assert!(later != Some(step), "{:?} then {:?}", step, later);
            }
        }
    }

    /// Multipath: no path in the best path's equal-cost set is better than the best before
    /// the tie-breakers, the set is the same whatever the order paths came in, and
    /// `multiple-as` only ever adds to it.
    #[test]
    fn multipath_set_is_equal_cost_and_order_free(
        mut paths in prop::collection::vec(candidate(), 1..10), o in options(), seed in any::<u64>()
    ) {
        let set = |paths: &[Candidate], multiple_as: bool| -> Vec<(u128, u32)> {
            let b = best_path(paths, &o).unwrap();
            let best = paths[b];
            let mut v: Vec<(u128, u32)> = paths
                .iter()
                .filter(|p| multipath_equal(&best, p, Multipath { multiple_as }, &o))
                .map(|p| (p.peer_address, p.arrival))
                .collect();
            v.sort();
            v
        };
        let b = best_path(&paths, &o).unwrap();
        let best = paths[b];
        for m in [false, true] {
            let mp = Multipath { multiple_as: m };
            prop_assert!(multipath_equal(&best, &best, mp, &o), "the best path is in its set");
            for p in paths.iter().filter(|p| multipath_equal(&best, p, mp, &o)) {
                prop_assert_eq!(
                    (p.local_pref, p.as_path_len, p.origin, p.ebgp, p.igp_cost),
                    (best.local_pref, best.as_path_len, best.origin, best.ebgp, best.igp_cost)
                );
                if !m {
                    prop_assert_eq!(p.neighbor_as, best.neighbor_as);
                }
            }
        }
        let (single, multi) = (set(&paths, false), set(&paths, true));
        prop_assert!(single.iter().all(|x| multi.contains(x)));
        // Another arrival order: the same sets (the best path is order-free too).
        let n = paths.len();
        paths.rotate_left((seed as usize) % n);
        prop_assert_eq!(set(&paths, false), single);
        prop_assert_eq!(set(&paths, true), multi);
    }

    /// Antisymmetric, transitive, and total: equal only for identical keys.
    #[test]
    fn compare_is_a_strict_total_order(
        a in candidate(), b in candidate(), c in candidate(), with_med in any::<bool>(), o in options()
    ) {
        let ab = compare(&a, &b, with_med, &o);
        prop_assert_eq!(ab, compare(&b, &a, with_med, &o).reverse());
        if ab == Ordering::Equal {
            // Only paths that agree on every compared key tie.
            prop_assert_eq!((a.peer_address, a.arrival), (b.peer_address, b.arrival));
        }
        let bc = compare(&b, &c, with_med, &o);
        if ab == Ordering::Less && bc == Ordering::Less {
            prop_assert_eq!(compare(&a, &c, with_med, &o), Ordering::Less);
        }
        if ab != Ordering::Greater && bc != Ordering::Greater {
            prop_assert_ne!(compare(&a, &c, with_med, &o), Ordering::Greater);
        }
    }

    /// The best path does not depend on the order paths arrived in.
    #[test]
    fn best_path_ignores_order(
        mut paths in prop::collection::vec(candidate(), 1..12), o in options(), seed in any::<u64>()
    ) {
        // Distinct peers, as in a real table: one path per peer and path id.
        for (i, p) in paths.iter_mut().enumerate() {
            p.peer_address = i as u128;
        }
        let best = paths[best_path(&paths, &o).unwrap()];
        let mut shuffled = paths.clone();
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        prop_assert_eq!(shuffled[best_path(&shuffled, &o).unwrap()], best);
    }

    /// The winner is never beaten by a path of its own neighbor AS, MED included, nor by
    /// any path without MED.
    #[test]
    fn best_path_is_unbeaten(paths in prop::collection::vec(candidate(), 1..12), o in options()) {
        let mut paths = paths;
        for (i, p) in paths.iter_mut().enumerate() {
            p.peer_address = i as u128;
        }
        let w = paths[best_path(&paths, &o).unwrap()];
        for p in &paths {
            let same_as = p.neighbor_as == w.neighbor_as;
            let with_med = same_as || o.always_compare_med;
            if !with_med {
                // Across ASes the group winner of p's AS stands in for it.
                continue;
            }
            prop_assert_ne!(compare(p, &w, true, &o), Ordering::Less);
        }
    }
}

#[test]
fn steps_in_rfc_order() {
    let o = Options::default();
    let better = |f: &dyn Fn(&mut Candidate), g: &dyn Fn(&mut Candidate)| {
        let (mut a, mut b) = (base(), base());
        b.peer_address = 2;
        f(&mut a);
        g(&mut b);
        // a wins although b has every later step in its favour.
        b.router_id = 0;
        b.peer_address = 0;
        compare(&a, &b, true, &o) == Ordering::Less
    };
    assert!(better(&|a| a.local_pref = 200, &|b| b.as_path_len = 1));
    assert!(better(&|a| a.as_path_len = 2, &|b| b.origin = 0));
    assert!(better(&|a| a.origin = 0, &|b| {
        b.origin = 1;
        b.med = 0
    }));
    assert!(better(&|a| a.med = 1, &|b| {
        b.med = 2;
        b.ebgp = true
    }));
    assert!(better(&|a| a.ebgp = true, &|b| {
        b.ebgp = false;
        b.igp_cost = 0
    }));
    assert!(better(&|a| a.igp_cost = 1, &|b| b.igp_cost = 2));
}

/// The cycle of the module documentation resolves the same way whatever the order.
#[test]
fn deterministic_med_resolves_the_classic_cycle() {
    let o = Options::default();
    let mut x = base();
    x.neighbor_as = 1;
    x.med = 5;
    x.router_id = 3;
    x.peer_address = 1;
    let mut y = base();
    y.neighbor_as = 2;
    y.router_id = 2;
    y.peer_address = 2;
    let mut z = base();
    z.neighbor_as = 1;
    z.med = 10;
    z.router_id = 1;
    z.peer_address = 3;
    // AS1's best is x (MED 5); x against y without MED: y's router id 2 wins.
    for order in [[x, y, z], [z, y, x], [y, z, x], [x, z, y]] {
        assert_eq!(order[best_path(&order, &o).unwrap()], y);
    }
    // With always-compare-med MED decides across ASes too: y's MED 0 is the lowest.
    let always = Options {
        always_compare_med: true,
        ..o
    };
    assert_eq!([x, y, z][best_path(&[x, y, z], &always).unwrap()], y);
}

#[test]
fn older_external_path_stays_without_external_router_id() {
    let o = Options {
        external_router_id: false,
        ..Options::default()
    };
    let mut old = base();
    old.router_id = 9;
    old.arrival = 1;
    let mut new = base();
    new.router_id = 1;
    new.arrival = 2;
    new.peer_address = 0;
    assert_eq!(compare(&old, &new, true, &o), Ordering::Less);
    assert_eq!(
        compare(&old, &new, true, &Options::default()),
        Ordering::Greater
    );
}

/// RFC 9494 section 4.5: a path carrying LLGR_STALE loses to any path that does not, even
/// one worse at every other step, and the step is named.
#[test]
fn long_lived_stale_is_least_preferred() {
    let stale = Candidate {
        llgr_stale: true,
        local_pref: 500,
        as_path_len: 1,
        ..base()
    };
    let worse = Candidate {
        local_pref: 50,
        as_path_len: 9,
        origin: 2,
        ebgp: false,
        peer_address: 2,
        ..base()
    };
    let o = Options::default();
    assert_eq!(compare(&worse, &stale, true, &o), Ordering::Less);
    assert_eq!(best_path(&[stale, worse], &o), Some(1));
    assert_eq!(
        deciding_step(&stale, &worse, true, &o),
        Some(Step::LongLivedStale)
    );
    // Among long-lived stale paths the usual steps decide.
    let stale_worse = Candidate {
        local_pref: 50,
        peer_address: 3,
        ..stale
    };
    assert_eq!(best_path(&[stale_worse, stale], &o), Some(1));
}
