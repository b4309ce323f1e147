//! Faults at the connection level, over real sockets: neighbors that connect and send
//! nothing or half an OPEN hold up nobody (not even their own next connection), and a
//! thousand sessions connecting at once all come up while an established one carries on.

mod common;

use common::harness;
use common::peers::{announce_v4, ebgp_peer};
use common::rawpeer::RawPeer;
use ribshard_engine::PeerSettings;
use ribshard_fsm::State;
use ribshard_wire::attributes::{AsPath, AttrValue};
use ribshard_wire::{decode, Message, Open, Origin, Prefix};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

const LOCAL_AS: u32 = 65080;
const ROUTER_ID: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 80);

fn listen() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.80:0").unwrap();
    l.local_addr().unwrap()
}

fn peer(addr: [u8; 4], asn: u32, downstream: bool) -> PeerSettings {
    ebgp_peer(addr, asn, LOCAL_AS, ROUTER_ID, downstream)
}

/// A connection through OPEN and KEEPALIVE both ways, 4-octet ASes, hold time 0.
async fn establish(addr: [u8; 4], asn: u32, listen: SocketAddr) -> RawPeer {
    let mut p = RawPeer::connect(IpAddr::from(addr), listen).await;
    p.establish(asn, 0).await;
    p
}

fn route(i: u8, asn: u32) -> Vec<u8> {
    announce_v4(
        vec![
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence([asn])),
            AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
        ],
        Prefix::v4(Ipv4Addr::new(203, 0, i, 0), 24).unwrap(),
    )
}

/// Reads UPDATEs until 203.0.`i`.0/24 has been announced for every `i` of `all`, in any
/// order (routes of different shards reach a downstream in no fixed order).
async fn wait_for_all(p: &mut RawPeer, all: &[u8]) {
    let mut want: Vec<Prefix> = all
        .iter()
        .map(|&i| Prefix::v4(Ipv4Addr::new(203, 0, i, 0), 24).unwrap())
        .collect();
    let params = common::peers::params();
    while !want.is_empty() {
        let m = p.recv().await.expect("the routes downstream");
        if let Ok(Message::Update(u)) = decode(&m, &params) {
            for n in u.announced() {
                want.retain(|w| *w != n.prefix);
            }
        }
    }
}

async fn wait_for(p: &mut RawPeer, i: u8) {
    wait_for_all(p, &[i]).await;
}

/// A neighbor's address that connects and sends nothing, and one that sends 20 octets of
/// an OPEN and stops: neither blocks the other sessions, and each neighbor's next, proper
/// connection comes up at once (RFC 4271 section 6.8: the connection that completes its
/// OPEN wins; the stalled one is closed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_half_open_connections_hold_up_nobody() {
    let listen = listen();
    let up = ([127, 0, 8, 1], 65081);
    let down = ([127, 0, 8, 2], 65082);
    let silent = ([127, 0, 8, 3], 65083);
    let half = ([127, 0, 8, 4], 65084);
    let peers = vec![
        peer(up.0, up.1, false),
        peer(down.0, down.1, true),
        peer(silent.0, silent.1, false),
        peer(half.0, half.1, false),
    ];
    let (pipeline, sessions) = harness::start(2, 2, Default::default(), peers, listen).await;
    let mut d = establish(down.0, down.1, listen).await;
    let mut u = establish(up.0, up.1, listen).await;

    // Stalled connections: ten that send nothing, ten with half an OPEN.
    let mut stalled = Vec::new();
    for _ in 0..10 {
        stalled.push(RawPeer::connect(IpAddr::from(silent.0), listen).await);
    }
    let open = Open::new(half.1, 90, Ipv4Addr::from(half.0), vec![]).encode();
    for _ in 0..10 {
        let mut p = RawPeer::connect(IpAddr::from(half.0), listen).await;
        p.send(&open[..20]).await;
        stalled.push(p);
    }
    // Routing carries on through them.
    u.send(&route(1, up.1)).await;
    wait_for(&mut d, 1).await;

    // The stalled neighbors' proper connections come up at once, beside their stalled
    // ones, and their routes flow.
    let t = Instant::now();
    let mut s = establish(silent.0, silent.1, listen).await;
    let mut h = establish(half.0, half.1, listen).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    s.send(&route(2, silent.1)).await;
    h.send(&route(3, half.1)).await;
    wait_for_all(&mut d, &[2, 3]).await;
    for i in 0..4 {
        let st = sessions.peers[i].status();
        assert_eq!(st.state, State::Established, "session {i}");
    }
    assert_eq!(sessions.peers[0].status().established_transitions, 1);
    drop(stalled);
    harness::stop(pipeline, sessions).await;
}

/// Two sockets per session here (ours and the neighbor's): the soft limit raised toward
/// the hard one when it is lower than that.
fn raise_open_files(want: u64) {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a valid pointer to a local.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < want {
            l.rlim_cur = want.min(l.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// 1,000 neighbors connecting at once: every session comes up, and an established session
/// beside them carries a route through while they do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_sessions_connecting_at_once() {
    const N: usize = 1000;
    raise_open_files(4 * N as u64);
    let listen = listen();
    let up = ([127, 0, 9, 1], 65091);
    let down = ([127, 0, 9, 2], 65092);
    let addr = |i: usize| [127, 1 + (i / 250) as u8, (i % 250) as u8, 10];
    let mut peers = vec![peer(up.0, up.1, false), peer(down.0, down.1, true)];
    for i in 0..N {
        peers.push(peer(addr(i), 64512 + i as u32, false));
    }
    let (pipeline, sessions) = harness::start(2, 2, Default::default(), peers, listen).await;
    let mut d = establish(down.0, down.1, listen).await;
    let mut u = establish(up.0, up.1, listen).await;

    let t = Instant::now();
    let crowd: Vec<_> = (0..N)
        .map(|i| tokio::spawn(establish(addr(i), 64512 + i as u32, listen)))
        .collect();
    u.send(&route(1, up.1)).await;
    wait_for(&mut d, 1).await;
    let mut conns = Vec::with_capacity(N);
    for c in crowd {
        conns.push(c.await.expect("every session comes up"));
    }
    // Our side may mark the last ones Established a moment after their KEEPALIVE.
    let deadline = Instant::now() + Duration::from_secs(10);
    let up_now = loop {
        let n = sessions
            .peers
            .iter()
            .filter(|p| p.status().state == State::Established)
            .count();
        if n == N + 2 || Instant::now() > deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = t.elapsed();
    assert_eq!(up_now, N + 2, "after {took:?}");
    assert_eq!(sessions.peers[0].status().established_transitions, 1);
    eprintln!("{N} sessions established in {took:?}");
    drop(conns);
    harness::stop(pipeline, sessions).await;
}

/// `[bgp] memory-limit`: over it, a neighbor that brings new prefixes is stopped with Cease /
/// Out of Resources and held down; one that only replaces or withdraws routes carries on,
/// and so do the routes of the others. Under it again, new prefixes are taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_memory_limit_a_neighbor_bringing_new_prefixes_is_stopped() {
    let listen = listen();
    let a = ([127, 0, 10, 1], 65101);
    let b = ([127, 0, 10, 2], 65102);
    let down = ([127, 0, 10, 3], 65103);
    let peers = vec![
        peer(a.0, a.1, false),
        peer(b.0, b.1, false),
        peer(down.0, down.1, true),
    ];
    let (pipeline, sessions) = harness::start(2, 2, Default::default(), peers, listen).await;
    let mut d = establish(down.0, down.1, listen).await;
    let mut pa = establish(a.0, a.1, listen).await;
    let mut pb = establish(b.0, b.1, listen).await;
    pa.send(&route(1, a.1)).await;
    wait_for(&mut d, 1).await;

    // Any process is over a limit of one octet.
    pipeline.memory().set_limit(Some(1));
    assert!(pipeline.memory().over());
    // A replaces its route (no new prefix): it stays.
    pa.send(&route(1, a.1)).await;
    // B brings a new prefix: stopped, held down.
    pb.send(&route(2, b.1)).await;
    let n = pb.notification().await.expect("a NOTIFICATION");
    assert_eq!((n.code, n.subcode), (6, 8), "{n}");
    assert!(pb.recv().await.is_none(), "the connection closes");
    let st = sessions.peers[1].status();
    assert!(st.held_down, "held down until cleared");
    assert!(matches!(
        st.last_error.map(|e| e.value),
        Some(ribshard_engine::session::SessionError::MemoryLimit { .. })
    ));
    assert_eq!(sessions.peers[0].status().state, State::Established);

    // Under the limit again: A's new prefix is taken and goes downstream; B's never came.
    pipeline.memory().set_limit(None);
    pa.send(&route(3, a.1)).await;
    let want = Prefix::v4(Ipv4Addr::new(203, 0, 2, 0), 24).unwrap();
    let params = common::peers::params();
    loop {
        let m = d.recv().await.expect("route 3 downstream");
        if let Ok(Message::Update(u)) = decode(&m, &params) {
            assert!(
                u.announced().all(|n| n.prefix != want),
                "B's route went out"
            );
            if u.announced()
                .any(|n| n.prefix.to_string() == "203.0.3.0/24")
            {
                break;
            }
        }
    }
    assert_eq!(sessions.peers[0].status().established_transitions, 1);
    harness::stop(pipeline, sessions).await;
}
