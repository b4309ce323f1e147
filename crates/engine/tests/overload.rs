//! Overload through the whole pipeline: a neighbor that sends faster than the shards take.
//! Its own test binary, so that nothing else runs in the process while it measures.

mod common;

use common::harness;
use common::peers::{ebgp_peer, params};
use common::rawpeer::RawPeer;
use ribshard_engine::pipeline::{BATCH, SHARD_QUEUE};
use ribshard_engine::PeerSettings;
use ribshard_fsm::State;
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{decode, keepalive, Family, Message, Nlri, Prefix, UpdateBuilder};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

const LOCAL_AS: u32 = 65090;
const ROUTER_ID: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 90);
/// Distinct prefixes the flood announces...
const PREFIXES: u32 = 250_000;
/// ...this many to an UPDATE (little work for the session to read, as much as ever for
/// the shard to decide and advertise)...
const PER_UPDATE: u32 = 10;
/// ...over and over, each round with another community: every UPDATE changes a best path.
const ROUNDS: u32 = 40;

fn peer(addr: [u8; 4], asn: u32, downstream: bool) -> PeerSettings {
    ebgp_peer(addr, asn, LOCAL_AS, ROUTER_ID, downstream)
}

fn flood_prefix(i: u32) -> Prefix {
    Prefix::V4 {
        addr: 0x1000_0000 + (i << 8),
        len: 24,
    }
}

/// One round of the flood: every prefix once, all with community 65000:`round`.
fn flood_round(asn: u32, round: u32) -> Vec<u8> {
    let b = UpdateBuilder::new(params());
    let attrs = b.encode_attributes(&PathAttributes::canonical([
        AttrValue::Origin(ribshard_wire::Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([asn])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
        AttrValue::Communities(vec![(65000 << 16) | round]),
    ]));
    let mut out = Vec::with_capacity(PREFIXES as usize * 64);
    for first in (0..PREFIXES).step_by(PER_UPDATE as usize) {
        let nlri: Vec<Nlri> = (first..first + PER_UPDATE)
            .map(|i| Nlri::new(flood_prefix(i)))
            .collect();
        b.announce(&attrs, Family::Ipv4Unicast, &[], &nlri, &mut out)
            .unwrap();
    }
    out
}

/// A neighbor floods ten million prefixes (a quarter million, forty times over, ten to an
/// UPDATE) at a pipeline of one shard, faster than the shard takes them. The session reads no further ahead than the bounded queues
/// hold (the rest waits in TCP, at the sender): what ribshard has read but the shard has
/// not taken never exceeds the queue's room, however long the flood. A neighbor with a 3 s
/// hold time beside it gets every KEEPALIVE on time, and the downstream ends with the
/// whole table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_sending_faster_than_the_shards_take() {
    let listen: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.90:0").unwrap();
        l.local_addr().unwrap()
    };
    let flooder = ([127, 0, 11, 1], 65111);
    let quiet = ([127, 0, 11, 2], 65112);
    let down = ([127, 0, 11, 3], 65113);
    let mut quiet_settings = peer(quiet.0, quiet.1, false);
    quiet_settings.hold_time = 3;
    let peers = vec![
        peer(flooder.0, flooder.1, false),
        quiet_settings,
        peer(down.0, down.1, true),
    ];
    let (pipeline, sessions) = harness::start(1, 1, Default::default(), peers, listen).await;

    let mut d = RawPeer::connect(IpAddr::from(down.0), listen).await;
    d.establish(down.1, 0).await;
    // The downstream's table: prefix -> community, until every prefix has the last round's.
    let downstream = tokio::spawn(async move {
        let mut table = std::collections::HashMap::new();
        let mut last = 0usize;
        let p = params();
        while last < PREFIXES as usize {
            let Some(m) = d.recv().await else { break };
            if let Ok(Message::Update(u)) = decode(&m, &p) {
                let round = u
                    .attrs
                    .communities
                    .map(|c| u32::from_be_bytes([0, 0, c[2], c[3]]));
                for n in u.announced() {
                    let was = table.insert(n.prefix, round);
                    if round == Some(ROUNDS - 1) && was != Some(round) {
                        last += 1;
                    }
                }
            }
        }
        last
    });

    let mut q = RawPeer::connect(IpAddr::from(quiet.0), listen).await;
    q.establish(quiet.1, 3).await;
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    // The quiet neighbor answers each KEEPALIVE and notes the longest wait between two.
    let keeper = tokio::spawn(async move {
        let mut last = Instant::now();
        let mut longest = Duration::ZERO;
        loop {
            tokio::select! {
                _ = &mut stop_rx => return (longest, q),
                m = q.recv() => {
                    let m = m.expect("the 3 s hold time session stays open");
                    match decode(&m, &params()) {
                        Ok(Message::Keepalive) => {
                            longest = longest.max(last.elapsed());
                            last = Instant::now();
                            q.send(&keepalive()).await;
                        }
                        Ok(Message::Notification(n)) => panic!("quiet session torn down: {n}"),
                        _ => {}
                    }
                }
            }
        }
    });

    let mut f = RawPeer::connect(IpAddr::from(flooder.0), listen).await;
    f.establish(flooder.1, 90).await;
    let (_r, mut w) = f.into_parts().0.into_split();
    let started = Instant::now();
    let sender = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        for round in 0..ROUNDS {
            w.write_all(&flood_round(flooder.1, round)).await.unwrap();
        }
        w
    });

    // While the flood runs: prefixes the session has read (each changing a best path)
    // against the best-path changes the shard has made. The shard is asked
    // through its queue, so it answers after taking what was queued: reading the session's
    // count after the answer makes the difference an upper bound of what was held between.
    let mut held_most = 0u64;
    let mut queue_full = false;
    while !downstream.is_finished() && started.elapsed() < Duration::from_secs(300) {
        let stats = pipeline.shard_stats().await;
        let taken: u64 = stats.iter().map(|s| s.changes).sum();
        let read = sessions.peers[0].counts().received[1] * u64::from(PER_UPDATE);
        held_most = held_most.max(read.saturating_sub(taken));
        let queues = pipeline.queues();
        queue_full |= queues.shards[0].depth == queues.shards[0].capacity;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let got = downstream.await.unwrap();
    let _w = sender.await.unwrap();
    let _ = stop_tx.send(());
    let (longest_keepalive_wait, _q) = keeper.await.unwrap();
    let queues = pipeline.queues();
    eprintln!(
        "flood of {} prefixes through in {took:?}: held at most {held_most} prefixes read \
         but not taken; the shard queue's senders waited {:?}, its high water {} of {}; \
         longest wait between KEEPALIVEs at the 3 s neighbor {longest_keepalive_wait:?}",
        PREFIXES * ROUNDS,
        queues.shards[0].blocked,
        queues.shards[0].high_water,
        queues.shards[0].capacity
    );

    assert_eq!(
        got, PREFIXES as usize,
        "the downstream has the last round's table"
    );
    // The premise: the flood was faster than the shard, which the session waited for.
    assert!(
        queue_full || queues.shards[0].blocked > Duration::ZERO,
        "the shard kept up: no overload was made"
    );
    // The bound: the shard queue's batches, the batch being filled and the one being taken,
    // the batches a shard takes before deciding (16), and one read of the socket (64 KiB,
    // at least 23 octets an UPDATE).
    let bound = ((SHARD_QUEUE + 2 + 16) * BATCH) as u64 + 65536 / 23 * u64::from(PER_UPDATE);
    assert!(
        held_most <= bound,
        "{held_most} prefixes read and not yet taken, over the {bound} the queues hold"
    );
    // KEEPALIVEs every hold time / 3 = 1 s; never near the hold time.
    assert!(
        longest_keepalive_wait < Duration::from_secs(2),
        "{longest_keepalive_wait:?} between KEEPALIVEs"
    );
    let st = sessions.peers[1].status();
    assert_eq!(
        (st.state, st.established_transitions),
        (State::Established, 1)
    );
    assert_eq!(sessions.peers[0].status().state, State::Established);
    harness::stop(pipeline, sessions).await;
}
