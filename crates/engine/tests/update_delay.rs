//! The start-up advertisement deferral (`[bgp.update-delay]`): nothing is advertised until
//! every configured neighbor doing graceful restart has sent End-of-RIB, or the bounds pass;
//! then every member gets the table whole, and End-of-RIB after it.

mod pipeline_fixture;

use pipeline_fixture::*;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::{
    Batcher, DeferralStart, Joined, Pipeline, PipelineConfig, UpdateDelay,
};
use ribshard_rib::Options;
use ribshard_wire::{Family, Nlri, Prefix};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

fn start_deferred(
    shards: usize,
    update_threads: usize,
    bounds: UpdateDelay,
    peers: &[u32],
) -> std::sync::Arc<Pipeline> {
    Pipeline::start_deferred(
        PipelineConfig {
            shards,
            update_threads,
            options: Options::default(),
            write_queue: Default::default(),
        },
        Some((bounds, peers.to_vec())),
    )
}

const MEMBER: usize = 0;

/// Brings the downstream member up (it does not do graceful restart, so it is not waited for)
/// and upstream 0, which sends three prefixes.
fn member_and_upstream(p: &Pipeline, pool: &mut Pool, upstream_gr: bool) -> (TestSink, Joined) {
    let sink = TestSink::new();
    let id = MemberId {
        peer: member_peer(MEMBER),
        epoch: 1,
    };
    let up = p.peer_up(
        id.peer,
        upstream(2),
        Some((spec(MEMBER), id, Box::new(sink.clone()))),
    );
    send_all(p, up.0);
    let joined = up.1.expect("a member");
    send_all(p, p.deferral_up(id.peer, false));
    send_all(p, p.peer_up(0, upstream(0), None).0);
    send_all(p, p.deferral_up(0, upstream_gr));
    let mut b = Batcher::new(0, p.shards());
    for i in 1..=3 {
        b.announce(&pool.get(0, 0, Family::Ipv4Unicast), Nlri::new(prefix(i)));
    }
    flush(p, &mut b);
    p.barrier();
    (sink, joined)
}

/// The downstream member up again, as epoch 2 (not doing graceful restart).
fn member_again(p: &Pipeline) -> TestSink {
    let sink = TestSink::new();
    let peer = member_peer(MEMBER);
    let id = MemberId { peer, epoch: 2 };
    let up = p.peer_up(
        peer,
        upstream(2),
        Some((spec(MEMBER), id, Box::new(sink.clone()))),
    );
    send_all(p, up.0);
    send_all(p, p.deferral_up(peer, false));
    sink
}

/// The prefixes a member was sent, announced and not withdrawn since.
fn member_table(sink: &TestSink) -> BTreeSet<Prefix> {
    let bytes = sink.bytes.lock().unwrap();
    let mut rest: &[u8] = &bytes;
    let mut t = BTreeSet::new();
    while let Ok(Some(len)) = ribshard_wire::frame(rest, 65535) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let u = ribshard_wire::parse_update(&msg[19..], &params()).expect("an UPDATE");
        for n in u.withdrawn_all() {
            t.remove(&n.prefix);
        }
        t.extend(u.announced().map(|n| n.prefix));
    }
    t
}

fn bounds(establish_ms: u64, max_ms: u64) -> UpdateDelay {
    UpdateDelay {
        max_delay: Duration::from_millis(max_ms),
        establish_wait: Duration::from_millis(establish_ms),
    }
}

/// Polls (the ticker ends a deferral by time) until the member has `n` messages.
fn wait_for_messages(sink: &TestSink, n: usize, within: Duration) -> Duration {
    let began = Instant::now();
    while sink.messages() < n {
        assert!(
            began.elapsed() < within,
            "{} messages after {within:?}",
            sink.messages()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    began.elapsed()
}

#[test]
fn advertising_waits_for_end_of_rib_then_sends_the_table_once() {
    for (shards, uts) in [(1, 0), (2, 2)] {
        let p = start_deferred(
            shards,
            uts,
            bounds(60_000, 60_000),
            &[0, member_peer(MEMBER)],
        );
        let mut pool = Pool(HashMap::new());
        let (sink, _) = member_and_upstream(&p, &mut pool, true);
        assert!(p.deferral_status().is_some());
        assert_eq!(
            sink.messages(),
            0,
            "{shards}x{uts}: nothing before End-of-RIB"
        );
        // The shards decided meanwhile.
        assert_eq!(p.loc_rib().len(), 3);
        let over = p.deferral_end_of_rib(0);
        assert!(!over.is_empty(), "the last neighbor's End-of-RIB ends it");
        assert!(p.deferral_status().is_none());
        send_all(&p, over);
        p.barrier();
        // One UPDATE for the three prefixes (one attribute set), then End-of-RIB for each
        // family.
        assert_eq!(sink.messages(), 3, "{shards}x{uts}");
        let table = member_table(&sink);
        assert_eq!(table.len(), 3, "{shards}x{uts}");
        p.stop();
    }
}

#[test]
fn a_neighbor_without_graceful_restart_is_not_waited_for() {
    let p = start_deferred(2, 2, bounds(60_000, 60_000), &[0, member_peer(MEMBER)]);
    let mut pool = Pool(HashMap::new());
    let (sink, _) = member_and_upstream(&p, &mut pool, false);
    // Both up, neither sends End-of-RIB by RFC 4724 section 4.1's reading: not waited for.
    assert!(p.deferral_status().is_none());
    assert_eq!(member_table(&sink).len(), 3);
    p.stop();
}

#[test]
fn a_neighbor_not_up_is_waited_for_until_establish_wait() {
    // Neighbor 5 is configured but never comes up.
    let p = start_deferred(2, 2, bounds(300, 60_000), &[0, 5, member_peer(MEMBER)]);
    let began = Instant::now();
    let mut pool = Pool(HashMap::new());
    let (sink, _) = member_and_upstream(&p, &mut pool, true);
    assert!(
        p.deferral_end_of_rib(0).is_empty(),
        "neighbor 5 is still waited for"
    );
    assert_eq!(sink.messages(), 0);
    wait_for_messages(&sink, 3, Duration::from_secs(10));
    assert!(began.elapsed() >= Duration::from_millis(300));
    assert!(p.deferral_status().is_none());
    assert_eq!(member_table(&sink).len(), 3);
    p.stop();
}

#[test]
fn a_neighbor_still_loading_is_waited_for_until_max_delay() {
    let p = start_deferred(1, 0, bounds(100, 500), &[0, member_peer(MEMBER)]);
    let began = Instant::now();
    let mut pool = Pool(HashMap::new());
    let (sink, _) = member_and_upstream(&p, &mut pool, true);
    // Upstream 0 never sends End-of-RIB.
    wait_for_messages(&sink, 3, Duration::from_secs(10));
    assert!(began.elapsed() >= Duration::from_millis(500));
    p.stop();
}

/// A member that goes down while held back is forgotten; its next session gets the table
/// once, like any member.
#[test]
fn a_member_flapping_during_the_deferral_gets_the_table_once() {
    for (shards, uts) in [(1, 0), (2, 2)] {
        let p = start_deferred(
            shards,
            uts,
            bounds(60_000, 60_000),
            &[0, member_peer(MEMBER)],
        );
        let mut pool = Pool(HashMap::new());
        let (first, joined) = member_and_upstream(&p, &mut pool, true);
        let peer = member_peer(MEMBER);
        // Down, then up again as epoch 2.
        send_all(&p, p.peer_down(peer, None, Some(joined)));
        send_all(&p, p.deferral_down(peer));
        let second = member_again(&p);
        send_all(&p, p.deferral_end_of_rib(0));
        p.barrier();
        assert_eq!(
            first.messages(),
            0,
            "{shards}x{uts}: the old session got nothing"
        );
        assert_eq!(second.messages(), 3, "{shards}x{uts}");
        assert_eq!(p.groups(), 1);
        p.stop();
    }
}

/// A re-shard during the deferral starts advertising (the new threads start without one).
#[test]
fn a_reshard_ends_the_deferral() {
    let p = start_deferred(1, 1, bounds(60_000, 60_000), &[0, member_peer(MEMBER)]);
    let mut pool = Pool(HashMap::new());
    let (sink, _) = member_and_upstream(&p, &mut pool, true);
    assert_eq!(sink.messages(), 0);
    p.reconfigure(2, 2);
    assert!(p.deferral_status().is_none());
    p.barrier();
    assert_eq!(member_table(&sink).len(), 3);
    p.stop();
}

/// Once every neighbor has gone down (a `clear bgp neighbor all`), advertising waits again,
/// as at start, for the neighbors that were up; one neighbor going down while another stays
/// up changes nothing.
#[test]
fn every_neighbor_down_defers_advertising_again() {
    for (shards, uts) in [(1, 0), (2, 2)] {
        let p = start_deferred(
            shards,
            uts,
            bounds(60_000, 60_000),
            &[0, member_peer(MEMBER)],
        );
        let mut pool = Pool(HashMap::new());
        let (first, joined) = member_and_upstream(&p, &mut pool, true);
        send_all(&p, p.deferral_end_of_rib(0));
        p.barrier();
        assert_eq!(first.messages(), 3, "{shards}x{uts}");
        // The upstream flaps with the member up: no deferral, its routes go and come back.
        send_all(&p, p.peer_down(0, None, None));
        send_all(&p, p.deferral_down(0));
        assert!(
            p.deferral_status().is_none(),
            "{shards}x{uts}: one still up"
        );
        send_all(&p, p.peer_up(0, upstream(0), None).0);
        send_all(&p, p.deferral_up(0, true));
        let mut b = Batcher::new(0, p.shards());
        b.announce(&pool.get(0, 0, Family::Ipv4Unicast), Nlri::new(prefix(1)));
        flush(&p, &mut b);
        p.barrier();
        assert_eq!(member_table(&first), BTreeSet::from([prefix(1)]));
        // Now both go down: the last one starts the deferral again.
        let peer = member_peer(MEMBER);
        send_all(&p, p.peer_down(peer, None, Some(joined)));
        send_all(&p, p.deferral_down(peer));
        send_all(&p, p.peer_down(0, None, None));
        send_all(&p, p.deferral_down(0));
        let status = p.deferral_status().expect("deferred again");
        assert_eq!(status.began, DeferralStart::AllDown);
        // Both come back; the upstream sends its table over several batches.
        let second = member_again(&p);
        send_all(&p, p.peer_up(0, upstream(0), None).0);
        send_all(&p, p.deferral_up(0, true));
        for i in 1..=4 {
            b.announce(&pool.get(0, 0, Family::Ipv4Unicast), Nlri::new(prefix(i)));
            flush(&p, &mut b);
        }
        p.barrier();
        assert_eq!(
            second.messages(),
            0,
            "{shards}x{uts}: held until End-of-RIB"
        );
        let over = p.deferral_end_of_rib(0);
        assert!(!over.is_empty(), "{shards}x{uts}: its End-of-RIB ends it");
        send_all(&p, over);
        p.barrier();
        // The table whole in one UPDATE (one attribute set), End-of-RIB for each family.
        assert_eq!(second.messages(), 3, "{shards}x{uts}");
        assert_eq!(member_table(&second).len(), 4, "{shards}x{uts}");
        p.stop();
    }
}

/// A neighbor removed from the configuration is not waited for.
#[test]
fn a_removed_neighbor_is_not_waited_for() {
    let p = start_deferred(2, 2, bounds(60_000, 60_000), &[0, 5, member_peer(MEMBER)]);
    let mut pool = Pool(HashMap::new());
    let (sink, _) = member_and_upstream(&p, &mut pool, true);
    assert!(
        p.deferral_end_of_rib(0).is_empty(),
        "neighbor 5 is waited for"
    );
    p.deferral_forget(5);
    // The tick ends it (the deferral's news came before the neighbor was removed).
    wait_for_messages(&sink, 3, Duration::from_secs(10));
    assert_eq!(member_table(&sink).len(), 3);
    p.stop();
}

/// The start-up deferral holds update groups, not the change stream: a subscriber gets
/// every change as it is decided, and each shard's word that the deferral ended after
/// them; a re-shard that ends it tells the old shards' taps, and the new shards' taps say
/// so when they start.
#[test]
fn subscribers_see_every_change_during_the_deferral() {
    for (shards, uts) in [(1, 0), (2, 2)] {
        let r = Recorder::default();
        let p = Pipeline::start_with(
            PipelineConfig {
                shards,
                update_threads: uts,
                options: Options::default(),
                write_queue: Default::default(),
            },
            ribshard_engine::pipeline::Inputs {
                update_delay: Some((bounds(60_000, 60_000), vec![0, member_peer(MEMBER)])),
                subscribers: vec![std::sync::Arc::new(r.clone())],
                ..Default::default()
            },
        );
        let mut pool = Pool(HashMap::new());
        let (sink, _) = member_and_upstream(&p, &mut pool, true);
        assert_eq!(sink.messages(), 0, "update groups are held");
        let seen: Vec<Prefix> = r.table().into_iter().map(|(pf, _, _)| pf).collect();
        assert_eq!(
            seen,
            vec![prefix(1), prefix(2), prefix(3)],
            "{shards}x{uts}"
        );
        assert_eq!(r.advertising.load(std::sync::atomic::Ordering::Relaxed), 0);
        send_all(&p, p.deferral_end_of_rib(0));
        p.barrier();
        assert_eq!(
            r.advertising.load(std::sync::atomic::Ordering::Relaxed),
            shards,
            "each shard says the deferral ended"
        );
        p.reconfigure(3, 2);
        assert_eq!(
            r.advertising.load(std::sync::atomic::Ordering::Relaxed),
            shards + 3,
            "new shards start without a deferral"
        );
        assert_eq!(r.table().len(), 3);
        p.stop();
    }
}
