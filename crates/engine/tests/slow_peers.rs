//! Neighbors that stop reading, over real sockets on loopback: a slow member of an update
//! group is split off and catches up without holding back the others (issue 4, item 6), and
//! a neighbor that keeps its session alive with KEEPALIVEs but never reads is dropped by the
//! send hold timer (RFC 9687) while the other sessions carry on.
//!
//! The downstream test peers open their sockets with a small receive buffer, so the kernel
//! holds little of what ribshard sends them; the upstream announces each prefix with its own
//! community, so nothing packs and the stream is about 65 octets per prefix (27 MB here).

mod common;

use common::harness;
use common::peers::{ebgp_peer, params};
use common::rawpeer::RawPeer;
use ribshard_adjout::{MemberStats, WriteQueueLimits};
use ribshard_engine::pipeline::{Pipeline, HELD_ENTRIES};
use ribshard_engine::{PeerSettings, Sessions};
use ribshard_fsm::State;
use ribshard_rib::attrs::{next_hop_of, normalized_key};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{
    decode, keepalive, Family, Message, Nlri, Origin, ParsedUpdate, Prefix, UpdateBuilder,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LOCAL_AS: u32 = 65050;
const UPSTREAM: ([u8; 4], u32) = ([127, 0, 0, 71], 65071);
/// Prefixes the upstream announces first.
const FIRST: u32 = 400_000;
/// Then it withdraws every fourth of those and announces this many new ones.
const LATER: u32 = 10_000;
/// A downstream peer's receive buffer: the kernel holds a few KiB for it, not megabytes.
const RCVBUF: u32 = 4096;
/// The update group's high-water mark here: well below the 27 MB stream, well above what
/// a reader in a debug build falls behind by.
const HIGH_WATER: usize = 2 << 20;

fn peer(addr: [u8; 4], asn: u32, downstream: bool) -> PeerSettings {
    let mut p = ebgp_peer(
        addr,
        asn,
        LOCAL_AS,
        Ipv4Addr::new(127, 0, 0, 70),
        downstream,
    );
    p.families = vec![Family::Ipv4Unicast];
    p
}

fn prefix(i: u32) -> Prefix {
    Prefix::v4(Ipv4Addr::from(0x1000_0000 + (i << 8)), 24).unwrap()
}

/// One UPDATE per prefix, each with its own community.
fn announce(range: std::ops::Range<u32>) -> Vec<u8> {
    let b = UpdateBuilder::new(params());
    let mut out = Vec::new();
    for i in range {
        let attrs = b.encode_attributes(&PathAttributes::canonical([
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence([UPSTREAM.1, 64700])),
            AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 71)),
            AttrValue::Communities(vec![64700 << 16 | (i & 0xffff), i]),
        ]));
        b.announce(
            &attrs,
            Family::Ipv4Unicast,
            &[],
            &[Nlri::new(prefix(i))],
            &mut out,
        )
        .unwrap();
    }
    out
}

fn withdrawn(i: u32) -> bool {
    i < FIRST && i % 4 == 0
}

fn withdraw() -> Vec<u8> {
    let b = UpdateBuilder::new(params());
    let gone: Vec<Nlri> = (0..FIRST)
        .filter(|&i| withdrawn(i))
        .map(|i| Nlri::new(prefix(i)))
        .collect();
    let mut out = Vec::new();
    b.withdraw(Family::Ipv4Unicast, &gone, &mut out);
    out
}

/// The prefixes every downstream peer must end up holding.
fn expected() -> BTreeSet<Prefix> {
    (0..FIRST + LATER)
        .filter(|&i| !withdrawn(i))
        .map(prefix)
        .collect()
}

/// The most a TCP socket's send buffer grows to (Linux: the last of `tcp_wmem`).
fn kernel_send_buffer_max() -> u64 {
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").expect("tcp_wmem");
    wmem.split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .expect("tcp_wmem's maximum")
}

/// Reads a peer's UPDATEs, each handed to `done`, until it says so (true) or `limit` passes
/// (false).
async fn read_updates(
    p: &mut RawPeer,
    limit: Duration,
    mut done: impl FnMut(&ParsedUpdate<'_>) -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(1), p.recv()).await else {
            continue;
        };
        if let Ok(Message::Update(u)) = decode(&m, &params()) {
            if done(&u) {
                return true;
            }
        }
    }
    false
}

/// Reads a peer's messages until an End-of-RIB (within 10 s).
async fn end_of_rib(p: &mut RawPeer) -> bool {
    read_updates(p, Duration::from_secs(10), |u| u.end_of_rib().is_some()).await
}

/// Reads a downstream peer's UPDATEs until it holds exactly `want`, or `limit` passes:
/// its table (prefix -> attributes as sent), and whether it got there.
async fn read_until(
    p: &mut RawPeer,
    want: &BTreeSet<Prefix>,
    limit: Duration,
) -> (BTreeMap<Prefix, Vec<u8>>, bool) {
    let mut t = BTreeMap::new();
    let mut key = Vec::new();
    let done = read_updates(p, limit, |u| {
        for n in u.withdrawn_all() {
            t.remove(&n.prefix);
        }
        for n in u.announced() {
            normalized_key(&u.attrs, &params(), next_hop_of(&u.attrs, false), &mut key);
            t.insert(n.prefix, key.clone());
        }
        t.len() == want.len() && t.keys().eq(want.iter())
    })
    .await;
    (t, done)
}

async fn start(
    downstream: Vec<PeerSettings>,
    write_queue: WriteQueueLimits,
    port: u16,
) -> (Arc<Pipeline>, Sessions, SocketAddr) {
    let mut peers = vec![peer(UPSTREAM.0, UPSTREAM.1, false)];
    peers.extend(downstream);
    let listen = SocketAddr::from(([127, 0, 0, 70], port));
    let (pipeline, sessions) = harness::start(2, 2, write_queue, peers, listen).await;
    (pipeline, sessions, listen)
}

async fn member_stats(p: &Arc<Pipeline>, peer: u32) -> Option<MemberStats> {
    let p = p.clone();
    let (_, threads) = tokio::task::spawn_blocking(move || p.stats())
        .await
        .unwrap();
    threads
        .into_iter()
        .flat_map(|t| t.groups)
        .flat_map(|g| g.members)
        .find(|(id, _)| id.peer == peer)
        .map(|(_, s)| s)
}

/// Two members of one update group (same AS, same policy); the second never reads until the
/// first has the whole table. The first must get everything within the bound while the
/// second holds back nothing but its own bytes; then the second reads and ends with the same
/// table, withdrawals it missed included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_reading_is_split_off_and_catches_up() {
    let (fast_addr, slow_addr, down_as) = ([127, 0, 0, 72], [127, 0, 0, 73], 65072);
    let (pipeline, sessions, listen) = start(
        vec![
            peer(fast_addr, down_as, true),
            peer(slow_addr, down_as, true),
        ],
        WriteQueueLimits::new(HIGH_WATER),
        28111,
    )
    .await;
    let mut fast = RawPeer::connect(IpAddr::from(fast_addr), listen).await;
    fast.establish(down_as, 0).await;
    let mut slow = RawPeer::connect_with_rcvbuf(IpAddr::from(slow_addr), listen, RCVBUF).await;
    slow.establish(down_as, 0).await;
    // Both members' first table dump (empty: End-of-RIB alone) is over before any route
    // comes: a member takes its dump whatever its queue holds, so routes arriving during it
    // would reach the slow member as dump, past the high-water mark.
    for p in [&mut fast, &mut slow] {
        assert!(end_of_rib(p).await, "End-of-RIB after the first dump");
    }
    let mut up = RawPeer::connect(IpAddr::from(UPSTREAM.0), listen).await;
    up.establish(UPSTREAM.1, 90).await;

    let want = expected();
    let reader = {
        let want = want.clone();
        tokio::spawn(async move {
            let (t, done) = read_until(&mut fast, &want, Duration::from_secs(60)).await;
            (fast, t, done, Instant::now())
        })
    };
    up.send(&announce(0..FIRST)).await;
    up.send(&withdraw()).await;
    up.send(&announce(FIRST..FIRST + LATER)).await;
    let sent = Instant::now();

    let (_fast, fast_table, done, at) = reader.await.unwrap();
    assert!(
        done,
        "the in-step member got {} of {} prefixes while the other did not read",
        fast_table.len(),
        want.len()
    );
    // The bound: the whole table within 30 s of the upstream's last message (about 2 s on
    // an idle 2-core machine); a group held back by its slow member would never get there.
    let took = at.saturating_duration_since(sent);
    assert!(took < Duration::from_secs(30), "took {took:?}");

    let s = member_stats(&pipeline, 2)
        .await
        .expect("slow member's stats");
    assert!(s.slow_writer >= 1, "designated a slow writer: {s:?}");
    assert!(s.write_queue_blocks >= 1, "{s:?}");
    let f = member_stats(&pipeline, 1)
        .await
        .expect("fast member's stats");
    // What the slow member was handed is bounded by the high-water mark, not by the table.
    // Its write queue took parts of the group's changes until it held more than the mark,
    // and the part that crossed it went whole: at most HELD_ENTRIES changes, each one
    // UPDATE here (of the same size: no more than the in-step member's octets per announced
    // prefix), even though the whole table was held while it arrived. The rest went into
    // the socket, which the kernel holds (its send buffer) since the peer reads nothing.
    let queued = sessions.peers[2].output_queue().octets;
    let per_prefix = f.bytes_sent / u64::from(FIRST + LATER);
    let one_batch = HELD_ENTRIES as u64 * per_prefix;
    assert!(
        queued <= HIGH_WATER as u64 + one_batch,
        "slow member's queue holds {queued} octets; high-water mark {HIGH_WATER}, one batch {one_batch}"
    );
    let in_kernel = s.bytes_sent.saturating_sub(queued);
    eprintln!("in-step member complete {took:?} after the upstream's last message; slow {s:?} ({queued} octets queued, {in_kernel} written), fast {f:?}");
    assert!(
        in_kernel <= kernel_send_buffer_max() + (64 << 10),
        "{in_kernel} octets written to a socket whose peer reads nothing"
    );
    // And the test means something: the table is far more than all that.
    assert!(
        s.bytes_sent < f.bytes_sent / 2,
        "slow member queued {} octets, fast member {}",
        s.bytes_sent,
        f.bytes_sent
    );

    // Now it reads: old announcements first, then the catch-up, with what it missed.
    let (slow_table, done) = read_until(&mut slow, &want, Duration::from_secs(60)).await;
    assert!(done, "caught up to {} of {}", slow_table.len(), want.len());
    assert_eq!(slow_table, fast_table, "same routes, same attributes");
    let s = member_stats(&pipeline, 2)
        .await
        .expect("slow member's stats");
    assert!(s.catch_ups >= 1, "{s:?}");
    assert_eq!(
        sessions.peers[2].status().state,
        State::Established,
        "a slow member is split, not dropped"
    );
    harness::stop(pipeline, sessions).await;
}

/// RFC 9687: a neighbor that sends KEEPALIVEs (so our hold timer never expires) but reads
/// nothing for the send hold time loses its session and its TCP connection; the upstream's
/// session carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_hold_timer_drops_a_neighbor_that_stops_reading() {
    let (down_addr, down_as) = ([127, 0, 0, 74], 65074);
    let send_hold = Duration::from_secs(2);
    let mut d = peer(down_addr, down_as, true);
    d.hold_time = 9;
    d.send_hold_time = send_hold.as_secs() as u32;
    let (pipeline, sessions, listen) = start(vec![d], WriteQueueLimits::default(), 28112).await;
    let mut down = RawPeer::connect_with_rcvbuf(IpAddr::from(down_addr), listen, RCVBUF).await;
    down.establish(down_as, 9).await;
    let (sock, _) = down.into_parts();
    let (mut read, mut write) = sock.into_split();
    // KEEPALIVEs every second, as a live but stuck speaker sends them.
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let keepalives = tokio::spawn(async move {
        loop {
            if write.write_all(&keepalive()).await.is_err() {
                break;
            }
            tokio::select! {
                _ = &mut stop_rx => break,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    });
    let mut up = RawPeer::connect(IpAddr::from(UPSTREAM.0), listen).await;
    up.establish(UPSTREAM.1, 90).await;
    let (h_up, h_down) = (&sessions.peers[0], &sessions.peers[1]);
    assert!(
        h_down
            .wait_for(Duration::from_secs(5), |s| s.state == State::Established)
            .await
    );
    let started = Instant::now();
    up.send(&announce(0..FIRST)).await;

    assert!(
        h_down
            .wait_for(Duration::from_secs(60), |s| s.state != State::Established)
            .await,
        "still Established 60 s after it stopped reading"
    );
    assert!(
        started.elapsed() >= send_hold,
        "down after {:?}",
        started.elapsed()
    );
    let st = h_down.status();
    assert_eq!(
        st.last_error.map(|e| e.value),
        Some(ribshard_engine::session::SessionError::SendHoldTimerExpired)
    );
    assert_eq!(h_up.status().state, State::Established);
    assert_eq!(h_up.status().established_transitions, 1);

    // The connection is gone: reading now finds its end (after whatever was in flight)
    // within the close grace, rather than a session that goes on.
    let _ = stop_tx.send(());
    keepalives.await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        let mut sink = vec![0u8; 1 << 16];
        loop {
            match read.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "connection still open 20 s later");
    harness::stop(pipeline, sessions).await;
}
