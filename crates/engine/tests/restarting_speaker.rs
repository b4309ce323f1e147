//! Graceful restart as the restarting speaker (RFC 4724 section 3): what our OPEN offers
//! after a graceful restart of the process, and whether a neighbor helps. Its own test
//! binary: how the process started is a fact of the whole process.

mod common;

use common::peers::ebgp_peer;
use ribshard_engine::negotiate::{build_open, negotiate, process_started, LocalRestart};
use ribshard_wire::open::{Capability, GracefulRestartFamily, LongLivedFamily};
use ribshard_wire::{Family, Open};
use std::net::Ipv4Addr;

fn restart_capability(o: &Open) -> Option<(u8, u16, Vec<GracefulRestartFamily>)> {
    o.capabilities().find_map(|c| match c {
        Capability::GracefulRestart {
            flags,
            restart_time,
            families,
        } => Some((*flags, *restart_time, families.clone())),
        _ => None,
    })
}

/// The neighbor of every test: eBGP, AS 65001, both families.
fn neighbor() -> ribshard_engine::PeerSettings {
    ebgp_peer(
        [192, 0, 2, 2],
        65001,
        65000,
        Ipv4Addr::new(10, 0, 0, 1),
        true,
    )
}

/// The neighbor's OPEN with these capabilities.
fn their_open(caps: Vec<Capability>) -> Open {
    Open::new(65001, 90, Ipv4Addr::new(192, 0, 2, 2), caps)
}

#[test]
fn after_a_graceful_restart_the_open_says_restarted_and_forwarding_kept() {
    process_started(true);
    let mut s = neighbor();
    // Helper only: the capability without families, no bits.
    let helper = restart_capability(&build_open(&s)).unwrap();
    assert_eq!((helper.0, helper.2.len()), (0, 0));

    s.graceful_restart = Some(LocalRestart {
        restart_time: 90,
        long_lived_stale_time: 0,
    });
    let ours = build_open(&s);
    let (flags, time, families) = restart_capability(&ours).unwrap();
    assert_eq!(flags, 0x8, "Restart State within the restart time");
    assert_eq!(time, 90);
    // Every family of the session, each with Forwarding State preserved.
    assert_eq!(families.len(), s.families.len());
    assert!(families.iter().all(|f| f.flags == 0x80), "{families:?}");

    // A neighbor with the capability (a helper) keeps our routes; one without does not.
    let theirs_gr = their_open(vec![
        Capability::FourOctetAs(65001),
        Capability::GracefulRestart {
            flags: 0,
            restart_time: 120,
            families: vec![],
        },
    ]);
    assert!(negotiate(&ours, &theirs_gr, &s).unwrap().restart_helped);
    let theirs_plain = their_open(vec![Capability::FourOctetAs(65001)]);
    assert!(!negotiate(&ours, &theirs_plain, &s).unwrap().restart_helped);
    // Our OPEN without families: no neighbor keeps our routes, helper or not.
    s.graceful_restart = None;
    let helper_open = build_open(&s);
    assert!(
        !negotiate(&helper_open, &theirs_gr, &s)
            .unwrap()
            .restart_helped
    );
}

fn long_lived_capability(o: &Open) -> Option<Vec<LongLivedFamily>> {
    o.capabilities().find_map(|c| match c {
        Capability::LongLivedGracefulRestart(v) => Some(v.clone()),
        _ => None,
    })
}

/// RFC 9494 section 3: with a long-lived stale time our OPEN names every family with it
/// (Forwarding State as in the graceful restart capability); without, the capability is
/// empty (we help, keeping a neighbor's routes long-lived stale, and may be sent LLGR_STALE
/// paths). A neighbor's long-lived families are what we keep for it, and how long.
#[test]
fn long_lived_graceful_restart_in_both_opens() {
    process_started(true);
    let mut s = neighbor();
    assert_eq!(long_lived_capability(&build_open(&s)), Some(vec![]));
    s.graceful_restart = Some(LocalRestart {
        restart_time: 90,
        long_lived_stale_time: 3600,
    });
    let ours = build_open(&s);
    let ll = long_lived_capability(&ours).unwrap();
    assert_eq!(ll.len(), s.families.len());
    assert!(
        ll.iter().all(|f| f.stale_time == 3600 && f.flags == 0x80),
        "{ll:?}"
    );

    let theirs = their_open(vec![
        Capability::Multiprotocol { afi: 1, safi: 1 },
        Capability::FourOctetAs(65001),
        // No graceful restart capability: long-lived alone still asks us to keep
        // its routes, from the moment the session drops.
        Capability::LongLivedGracefulRestart(vec![
            LongLivedFamily {
                afi: 1,
                safi: 1,
                flags: 0,
                stale_time: 600,
            },
            // Not negotiated (IPv6 is not in its multiprotocol list): ignored.
            LongLivedFamily {
                afi: 2,
                safi: 1,
                flags: 0,
                stale_time: 600,
            },
        ]),
    ]);
    let n = negotiate(&ours, &theirs, &s).unwrap();
    assert!(n.long_lived);
    let g = n.graceful_restart.unwrap();
    assert_eq!(g.restart_time, 0);
    assert_eq!(g.long_lived, vec![(Family::Ipv4Unicast, 600)]);
    assert!(g.keeps_routes());
    // Its Forwarding State bit is clear: after a restart its stale routes would go at once.
    assert!(g.forwarding.is_empty());
}

/// RFC 4724 section 4.2: the families a restarted neighbor still forwards on are those with
/// the Forwarding State bit, in either capability.
#[test]
fn forwarding_state_per_family() {
    let s = neighbor();
    let ours = build_open(&s);
    let theirs = their_open(vec![
        Capability::Multiprotocol { afi: 1, safi: 1 },
        Capability::Multiprotocol { afi: 2, safi: 1 },
        Capability::FourOctetAs(65001),
        Capability::GracefulRestart {
            flags: 0x8,
            restart_time: 120,
            families: vec![
                GracefulRestartFamily {
                    afi: 1,
                    safi: 1,
                    flags: 0,
                },
                GracefulRestartFamily {
                    afi: 2,
                    safi: 1,
                    flags: 0x80,
                },
            ],
        },
    ]);
    let g = negotiate(&ours, &theirs, &s)
        .unwrap()
        .graceful_restart
        .unwrap();
    assert_eq!(g.families, vec![Family::Ipv4Unicast, Family::Ipv6Unicast]);
    assert_eq!(g.forwarding, vec![Family::Ipv6Unicast]);
}

/// `max-long-lived-stale-time` caps what a neighbor asks; 0 refuses long-lived graceful
/// restart with it.
#[test]
fn the_long_lived_stale_time_a_neighbor_asks_is_capped() {
    let mut s = neighbor();
    let ours = build_open(&s);
    let theirs = their_open(vec![
        Capability::FourOctetAs(65001),
        Capability::GracefulRestart {
            flags: 0,
            restart_time: 120,
            families: vec![],
        },
        Capability::LongLivedGracefulRestart(vec![LongLivedFamily {
            afi: 1,
            safi: 1,
            flags: 0x80,
            stale_time: 0x00ff_ffff,
        }]),
    ]);
    let asked = |s: &ribshard_engine::PeerSettings| {
        negotiate(&ours, &theirs, s)
            .unwrap()
            .graceful_restart
            .unwrap()
            .long_lived
    };
    assert_eq!(asked(&s), vec![(Family::Ipv4Unicast, 0x00ff_ffff)]);
    s.max_long_lived_stale_time = Some(3600);
    assert_eq!(asked(&s), vec![(Family::Ipv4Unicast, 3600)]);
    s.max_long_lived_stale_time = Some(0);
    assert_eq!(asked(&s), vec![]);
}
