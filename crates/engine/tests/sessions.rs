//! Sessions on loopback against a scripted peer (real TCP, our codec on the other side) and
//! against another set of ribshard sessions. Every test bounds its time.

mod common;

use common::rawpeer::RawPeer;
use ribshard_engine::session::{Clear, SessionError, SessionStatus};
use ribshard_engine::{Inbound, PeerSettings, Sessions};
use ribshard_fsm::State;
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::notification::{cease, code};
use ribshard_wire::open::Capability;
use ribshard_wire::{
    decode, keepalive, Family, Message, Nlri, Notification, Open, Origin, Prefix, SessionParams,
    UpdateBuilder,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// A port the OS has free on the loopback now: tests run in parallel, beside other test
/// binaries, never on a number picked by hand.
fn port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn settings(peer: IpAddr, port: u16, peer_as: u32) -> PeerSettings {
    PeerSettings {
        address: peer,
        port,
        local_address: None,
        local_as: 65000,
        peer_as,
        router_id: Ipv4Addr::new(10, 0, 0, 1),
        internal: peer_as == 65000,
        hold_time: 9,
        connect_retry_time: 1,
        send_hold_time: 480,
        passive: true,
        disabled: false,
        authentication_key: None,
        tcp_ao: None,
        ttl_security: None,
        multihop: true,
        families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
        prefix_limits: [None, None],
        role: None,
        add_path_receive: false,
        add_path_send: false,
        add_path_select: None,
        graceful_restart: None,
        max_long_lived_stale_time: None,
        description: "test".into(),
        routing: Default::default(),
    }
}

fn updates(n: usize, base: u32) -> Vec<u8> {
    let p = SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    };
    let b = UpdateBuilder::new(p);
    let attrs = b.encode_attributes(&PathAttributes::canonical([
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([65010, 65011])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
    ]));
    let nlri: Vec<Nlri> = (0..n as u32)
        .map(|i| {
            Nlri::new(Prefix::V4 {
                addr: base + (i << 8),
                len: 24,
            })
        })
        .collect();
    let mut out = Vec::new();
    b.announce(&attrs, Family::Ipv4Unicast, &[], &nlri, &mut out)
        .unwrap();
    out
}

async fn start(
    peers: Vec<PeerSettings>,
    listen: SocketAddr,
) -> (Sessions, mpsc::Receiver<Inbound>) {
    let (tx, rx) = mpsc::channel(1024);
    let s = Sessions::start(peers, &[listen], tx).await.unwrap();
    (s, rx)
}

#[tokio::test]
async fn unconfigured_address_is_refused_with_cease_connection_rejected() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let (_s, _rx) = start(
        vec![settings(IpAddr::from([127, 0, 0, 2]), 179, 65001)],
        listen,
    )
    .await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 9]), listen).await;
    let n = p.notification().await.expect("a NOTIFICATION");
    assert_eq!(
        (n.code, n.subcode),
        (code::CEASE, cease::CONNECTION_REJECTED)
    );
    assert!(p.recv().await.is_none(), "connection closed after it");
}

#[tokio::test]
async fn establishes_and_delivers_updates_in_order() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let (s, mut rx) = start(
        vec![settings(IpAddr::from([127, 0, 0, 3]), 179, 65003)],
        listen,
    )
    .await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 3]), listen).await;
    p.establish(65003, 90).await;
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.state == State::Established)
            .await
    );
    let st = s.peers[0].status();
    let n = st.negotiated.unwrap();
    assert_eq!((n.hold_time, n.four_octet_as), (9, true));
    assert_eq!(n.families, [Family::Ipv4Unicast, Family::Ipv6Unicast]);
    p.send(&updates(3000, 0x0a00_0000)).await;
    // Up carries both OPENs as they went over the wire and the connection's ends (BMP's
    // Peer Up).
    match rx.recv().await {
        Some(Inbound::Up {
            peer: 0, opened, ..
        }) => {
            assert_eq!(opened.sent.get(18), Some(&1), "our OPEN");
            assert_eq!(opened.received.get(18), Some(&1), "its OPEN");
            assert_eq!(
                opened.remote.map(|a| a.ip()),
                Some(IpAddr::from([127, 0, 0, 3]))
            );
            assert!(opened.local.is_some());
        }
        other => panic!("{other:?}"),
    }
    let mut prefixes = 0;
    while prefixes < 3000 {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(Inbound::Update {
                message, params, ..
            })) => {
                let Ok(Message::Update(u)) = decode(&message, &params) else {
                    panic!()
                };
                prefixes += u.announced().count();
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(2), |st| st.prefixes[0] == 3000)
            .await
    );
    // A NOTIFICATION from the peer ends the session and withdraws its routes.
    p.send(&Notification::new(code::CEASE, cease::ADMINISTRATIVE_RESET, vec![]).encode())
        .await;
    match rx.recv().await {
        Some(Inbound::Down {
            peer: 0,
            stale: None,
            reason: ribshard_engine::DownReason::RemoteNotification(n),
        }) => assert_eq!(
            (n.code, n.subcode),
            (code::CEASE, cease::ADMINISTRATIVE_RESET)
        ),
        other => panic!("{other:?}"),
    }
    let st = s.peers[0].status();
    assert_eq!(st.prefixes, [0, 0]);
    // The reason is typed: the NOTIFICATION itself, code and subcode.
    match st.last_error.unwrap().value {
        SessionError::NotificationReceived(n) => {
            assert_eq!(
                (n.code, n.subcode),
                (code::CEASE, cease::ADMINISTRATIVE_RESET)
            )
        }
        other => panic!("{other:?}"),
    }
    let received = st.last_received.expect("the NOTIFICATION is kept").value;
    assert_eq!(received.subcode, cease::ADMINISTRATIVE_RESET);
    assert!(st.flaps >= 1);
}

#[tokio::test]
async fn hold_timer_expiry_sends_notification() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let mut cfg = settings(IpAddr::from([127, 0, 0, 4]), 179, 65004);
    cfg.hold_time = 3;
    let (s, _rx) = start(vec![cfg], listen).await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 4]), listen).await;
    p.establish(65004, 3).await;
    // Now silent: ribshard's keepalives arrive, then after 3 s the hold timer fires.
    let start = std::time::Instant::now();
    let n = p.notification().await.expect("NOTIFICATION");
    assert_eq!(n.code, code::HOLD_TIMER_EXPIRED);
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(2500) && waited < Duration::from_secs(6),
        "{waited:?}"
    );
    let st = s.peers[0].status();
    assert_eq!(st.last_error.unwrap().value, SessionError::HoldTimerExpired);
    assert_eq!(st.last_sent.unwrap().value.code, code::HOLD_TIMER_EXPIRED);
}

#[tokio::test]
async fn wrong_peer_as_gets_bad_peer_as() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let (s, _rx) = start(
        vec![settings(IpAddr::from([127, 0, 0, 5]), 179, 65005)],
        listen,
    )
    .await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 5]), listen).await;
    // A 4-octet AS: AS_TRANS in the OPEN's field, the real one in its capability.
    let open = Open::new(
        23456,
        90,
        Ipv4Addr::new(10, 0, 0, 2),
        vec![Capability::FourOctetAs(4_200_000_099)],
    );
    p.send(&open.encode()).await;
    let n = p.notification().await.expect("NOTIFICATION");
    assert_eq!((n.code, n.subcode), (code::OPEN_MESSAGE, 2));
    // The operator is told which AS came, not only that it was wrong.
    let e = s.peers[0].status().last_error.unwrap().value;
    assert_eq!(
        e,
        SessionError::BadPeerAs {
            received: 4_200_000_099,
            configured: 65005
        }
    );
    assert_eq!(
        e.to_string(),
        "OPEN refused: Bad Peer AS: the neighbor's OPEN says AS4200000099, peer-as is AS65005"
    );
}

#[tokio::test]
async fn prefix_limit_tears_down_with_cease_and_data() {
    let (log, _guard) = Captured::start();
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let mut cfg = settings(IpAddr::from([127, 0, 0, 6]), 179, 65006);
    cfg.prefix_limits = [Some((100, true, None)), None];
    let (s, _rx) = start(vec![cfg], listen).await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 6]), listen).await;
    p.establish(65006, 90).await;
    p.send(&updates(101, 0x0b00_0000)).await;
    let n = p.notification().await.expect("NOTIFICATION");
    assert_eq!(
        (n.code, n.subcode),
        (code::CEASE, cease::MAXIMUM_PREFIXES_REACHED)
    );
    // AFI 1, SAFI 1, the limit (RFC 4486 section 4).
    assert_eq!(n.data, [0, 1, 1, 0, 0, 0, 100]);
    // No idle timeout configured: the session stays down, new connections are refused.
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(2), |st| st.state == State::Idle)
            .await
    );
    let mut again = RawPeer::connect(IpAddr::from([127, 0, 0, 6]), listen).await;
    let n = again.notification().await.expect("NOTIFICATION");
    assert_eq!(
        (n.code, n.subcode),
        (code::CEASE, cease::CONNECTION_REJECTED)
    );
    // Said in the log, as BIRD says "Connection rejected".
    let text = log.text();
    assert!(
        text.contains("connection rejected") && text.contains("held down by its prefix limit"),
        "{text}"
    );
}

/// The log, as a test's thread-local subscriber writes it.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// What this thread logs from now until the guard goes (the sessions of a
    /// `#[tokio::test]` run on its thread).
    fn start() -> (Captured, tracing::subscriber::DefaultGuard) {
        let log = Captured::default();
        let writer = log.clone();
        let guard = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish(),
        );
        (log, guard)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// `teardown = false`: the session stays, and the crossing is logged once (not once per
/// UPDATE), then once more when the neighbor is back within the limit.
#[tokio::test]
async fn a_prefix_limit_without_teardown_logs_each_crossing_once() {
    let (log, _guard) = Captured::start();
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let mut cfg = settings(IpAddr::from([127, 0, 0, 16]), 179, 65016);
    cfg.prefix_limits = [Some((5, false, None)), None];
    let (s, _rx) = start(vec![cfg], listen).await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 16]), listen).await;
    p.establish(65016, 90).await;
    // 20 UPDATEs of 3 routes: over the limit from the second on.
    for i in 0..20u32 {
        p.send(&updates(3, 0x0f00_0000 + (i << 16))).await;
    }
    let held = |st: &SessionStatus| st.updates_received >= 20;
    assert!(
        s.peers[0].wait_for(Duration::from_secs(5), held).await,
        "{:?}",
        s.peers[0].status()
    );
    assert_eq!(s.peers[0].status().state, State::Established);
    let count = |t: &str| log.text().matches(t).count();
    assert_eq!(count("prefix limit exceeded"), 1, "{}", log.text());
    // Withdrawn down to 3 routes: back within, logged once with what happened meanwhile.
    let b = UpdateBuilder::new(SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    });
    let mut out = Vec::new();
    let gone: Vec<Nlri> = (1..20u32)
        .flat_map(|i| {
            (0..3u32).map(move |j| {
                Nlri::new(Prefix::V4 {
                    addr: 0x0f00_0000 + (i << 16) + (j << 8),
                    len: 24,
                })
            })
        })
        .collect();
    b.withdraw(Family::Ipv4Unicast, &gone, &mut out);
    p.send(&out).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while count("back within the prefix limit") == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = log.text();
    assert_eq!(count("back within the prefix limit"), 1, "{text}");
    assert!(
        text.contains("peak=60") && text.contains("batches_over=19"),
        "{text}"
    );
    // A second crossing is logged again.
    p.send(&updates(3, 0x0f10_0000)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while count("prefix limit exceeded") < 2 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(count("prefix limit exceeded"), 2, "{}", log.text());
}

#[tokio::test]
async fn malformed_update_resets_with_the_exact_notification() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let (_s, mut rx) = start(
        vec![settings(IpAddr::from([127, 0, 0, 7]), 179, 65007)],
        listen,
    )
    .await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 7]), listen).await;
    p.establish(65007, 90).await;
    let message = |body: &[u8]| {
        let mut m = vec![0xff; 16];
        m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
        m.push(2);
        m.extend_from_slice(body);
        m
    };
    // ORIGIN 7 with a route: treated as withdraw (RFC 7606 section 7.1), the session stays.
    let taw = message(&[
        0, 0, 0, 20, // no withdrawals; 20 octets of attributes
        0x40, 1, 1, 7, // ORIGIN 7
        0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xef, // AS_PATH 65007
        0x40, 3, 4, 127, 0, 0, 7, // NEXT_HOP
        24, 10, 0, 0, // 10.0.0.0/24
    ]);
    p.send(&taw).await;
    // NLRI with a /33: Invalid Network Field.
    let bad = message(&[0, 0, 0, 0, 33, 1, 2, 3, 4, 5]);
    p.send(&bad).await;
    let n = p.notification().await.expect("NOTIFICATION");
    assert_eq!((n.code, n.subcode), (code::UPDATE_MESSAGE, 10));
    // The tap has each errored UPDATE as it came (for BMP's Route Mirroring): the first
    // before its Update, the second before the Down it caused.
    let mut seen = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        let done = matches!(m, Inbound::Down { .. });
        seen.push(match m {
            Inbound::Up { .. } => "up".to_string(),
            Inbound::Errored { message, .. } if message[..] == taw[..] => "errored taw".into(),
            Inbound::Errored { message, .. } if message[..] == bad[..] => "errored bad".into(),
            Inbound::Update { message, .. } if message[..] == taw[..] => "taw".into(),
            Inbound::Down { .. } => "down".into(),
            other => format!("{other:?}"),
        });
        if done {
            break;
        }
    }
    assert_eq!(seen, ["up", "errored taw", "taw", "errored bad", "down"]);
}

/// Keepalives run apart from routing work: while one session is flooded with a million
/// prefixes and its consumer lags, a second session with a 3 s hold time stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_are_never_starved_by_a_flood() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let flooder = settings(IpAddr::from([127, 0, 0, 11]), 179, 65011);
    let mut quiet = settings(IpAddr::from([127, 0, 0, 12]), 179, 65012);
    quiet.hold_time = 3;
    let (tx, mut rx) = mpsc::channel(64);
    let s = Sessions::start(vec![flooder, quiet], &[listen], tx)
        .await
        .unwrap();
    // A slow consumer: 50 µs per message, the routing work the flood waits for.
    let consumer = tokio::spawn(async move {
        let mut prefixes = 0usize;
        while let Some(m) = rx.recv().await {
            if let Inbound::Update {
                message, params, ..
            } = m
            {
                if let Ok(Message::Update(u)) = decode(&message, &params) {
                    prefixes += u.announced().count();
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            if prefixes >= 1_000_000 {
                return prefixes;
            }
        }
        prefixes
    });
    let mut q = RawPeer::connect(IpAddr::from([127, 0, 0, 12]), listen).await;
    q.establish(65012, 3).await;
    // The quiet peer answers keepalives for 10 s (over three hold times).
    let keeper = tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_secs(2), q.recv()).await {
                Ok(Some(m)) => {
                    if let Ok(Message::Notification(n)) = decode(&m, &SessionParams::default()) {
                        panic!("quiet session torn down: {n}");
                    }
                    q.send(&keepalive()).await;
                }
                Ok(None) => panic!("quiet session closed"),
                Err(_) => {}
            }
        }
        // Handed back, so the session stays up while it is checked.
        q
    });
    let mut f = RawPeer::connect(IpAddr::from([127, 0, 0, 11]), listen).await;
    f.establish(65011, 90).await;
    let flood: Vec<u8> = (0..4u32)
        .flat_map(|k| updates(250_000, 0x1000_0000 + (k << 26)))
        .collect();
    let (_r, mut w) = f.s.into_split();
    let sender = tokio::spawn(async move {
        w.write_all(&flood).await.unwrap();
        w
    });
    let _q = keeper
        .await
        .expect("the 3 s hold time session stayed up for 10 s");
    assert_eq!(s.peers[1].status().state, State::Established);
    assert_eq!(s.peers[1].status().established_transitions, 1);
    let _w = sender.await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(60), consumer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, 1_000_000);
}

/// Two sets of ribshard sessions peering with each other: A (AS `asn`, 10.0.0.1) on
/// `a_addr`, B (AS `asn + 1`, 10.0.0.2) on `b_addr`, both connecting out; `tweak` adjusts
/// the settings before they start.
async fn pair(
    a_addr: IpAddr,
    b_addr: IpAddr,
    asn: u32,
    tweak: impl FnOnce(&mut PeerSettings, &mut PeerSettings),
) -> [(Sessions, mpsc::Receiver<Inbound>); 2] {
    let (pa, pb) = (port(), port());
    let mut a = settings(b_addr, pb, asn + 1);
    a.local_as = asn;
    a.passive = false;
    a.local_address = a_addr.is_ipv4().then_some(a_addr);
    let mut b = settings(a_addr, pa, asn);
    b.local_as = asn + 1;
    b.router_id = Ipv4Addr::new(10, 0, 0, 2);
    b.passive = false;
    b.local_address = b_addr.is_ipv4().then_some(b_addr);
    tweak(&mut a, &mut b);
    [
        start(vec![a], SocketAddr::new(a_addr, pa)).await,
        start(vec![b], SocketAddr::new(b_addr, pb)).await,
    ]
}

async fn up(s: &Sessions, secs: u64) -> bool {
    s.peers[0]
        .wait_for(Duration::from_secs(secs), |st| {
            st.state == State::Established
        })
        .await
}

/// Two sets of ribshard sessions that both connect out: collision resolution leaves one
/// Established session; an MD5 key on both sides is required and enough.
#[tokio::test]
async fn ribshard_to_ribshard_with_md5_and_collision() {
    let [(sa, _ra), (sb, _rb)] = pair(
        IpAddr::from([127, 0, 0, 21]),
        IpAddr::from([127, 0, 0, 22]),
        65021,
        |a, b| {
            a.authentication_key = Some("shared".into());
            b.authentication_key = Some("shared".into());
        },
    )
    .await;
    for s in [&sa, &sb] {
        assert!(up(s, 15).await, "{:?}", s.peers[0].status());
    }
    // Stable: still one session after a few keepalives.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(sa.peers[0].status().established_transitions, 1);
    sa.shutdown("maintenance", Duration::from_secs(1)).await;
    assert!(
        sb.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.state != State::Established)
            .await
    );
    match sb.peers[0].status().last_error.unwrap().value {
        SessionError::NotificationReceived(n) => {
            assert_eq!(n.shutdown_message(), Some(Ok("maintenance")))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn md5_key_mismatch_gives_no_session() {
    let [(sa, _ra), (_sb, _rb)] = pair(
        IpAddr::from([127, 0, 0, 31]),
        IpAddr::from([127, 0, 0, 32]),
        65031,
        |a, b| {
            a.authentication_key = Some("one".into());
            b.authentication_key = Some("two".into());
        },
    )
    .await;
    assert!(
        !up(&sa, 5).await,
        "a session came up with different MD5 keys"
    );
}

/// TCP-AO (RFC 5925), judged on the kernel the test runs on. Where the kernel has it, the
/// same Master Key Tuple on both sides is needed and enough, as with MD5. Where it does
/// not (CONFIG_TCP_AO off), a neighbor configured with it is refused with an error that
/// names the neighbor and the reason, typed at the socket, rather than run unsigned.
#[tokio::test]
async fn tcp_ao_signs_the_session_or_is_refused_with_a_clear_error() {
    use ribshard_engine::socket::{self, AoAlgorithm, TcpAoKey, TcpAoUnsupported};
    let key = |secret: &str| TcpAoKey {
        send_id: 7,
        receive_id: 7,
        algorithm: AoAlgorithm::AesCmac128_96,
        secret: secret.as_bytes().to_vec(),
    };
    if socket::tcp_ao_supported() {
        let [(sa, _ra), (sb, _rb)] = pair(
            IpAddr::from([127, 0, 0, 41]),
            IpAddr::from([127, 0, 0, 42]),
            65041,
            |a, b| {
                a.tcp_ao = Some(key("shared"));
                b.tcp_ao = Some(key("shared"));
            },
        )
        .await;
        for s in [&sa, &sb] {
            assert!(up(s, 15).await, "{:?}", s.peers[0].status());
        }
        let [(sa, _ra), (_sb, _rb)] = pair(
            IpAddr::from([127, 0, 0, 43]),
            IpAddr::from([127, 0, 0, 44]),
            65043,
            |a, b| {
                a.tcp_ao = Some(key("one"));
                b.tcp_ao = Some(key("two"));
            },
        )
        .await;
        assert!(
            !up(&sa, 5).await,
            "a session came up with different TCP-AO keys"
        );
    } else {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        let e = socket::set_ao(&socket, IpAddr::from([127, 0, 0, 41]), &key("k"), true)
            .expect_err("the kernel has no TCP-AO");
        assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
        assert!(e
            .get_ref()
            .is_some_and(|i| i.downcast_ref::<TcpAoUnsupported>().is_some()));
        let mut a = settings(IpAddr::from([127, 0, 0, 41]), port(), 65041);
        a.tcp_ao = Some(key("shared"));
        let (tx, _rx) = mpsc::channel(16);
        let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
        let refused = Sessions::start(vec![a], &[listen], tx)
            .await
            .err()
            .expect("a TCP-AO neighbor refused where the kernel has none");
        let text = refused.to_string();
        assert!(
            text.starts_with("neighbor 127.0.0.41 (AS65041): tcp-ao: TCP-AO (RFC 5925) is not available in this kernel (Linux ")
                && text.contains("CONFIG_TCP_AO"),
            "{text}"
        );
    }
}

/// A neighbor that restarts gracefully (RFC 4724) keeps its routes when its connection
/// drops, until it sends End-of-RIB; one that sends a NOTIFICATION without the N bit does not.
#[tokio::test]
async fn graceful_restart_helper_keeps_routes_until_end_of_rib() {
    use ribshard_wire::open::GracefulRestartFamily;
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let (_s, mut rx) = start(
        vec![settings(IpAddr::from([127, 0, 0, 13]), 179, 65013)],
        listen,
    )
    .await;
    let gr = Capability::GracefulRestart {
        flags: 0,
        restart_time: 90,
        families: vec![GracefulRestartFamily {
            afi: 1,
            safi: 1,
            flags: 0x80,
        }],
    };
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 13]), listen).await;
    p.establish_with(65013, 90, vec![gr.clone()]).await;
    p.send(&updates(10, 0x0c00_0000)).await;
    // The connection breaks: a restart, not a withdrawal.
    drop(p);
    let mut down = None;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        if let Inbound::Down { stale, .. } = m {
            down = Some(stale);
            break;
        }
    }
    let stale = down.expect("Down").expect("routes kept as stale");
    assert_eq!(
        (stale.restart_time, stale.families.as_slice()),
        (90, &[Family::Ipv4Unicast][..])
    );
    // It comes back and ends its table with End-of-RIB.
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 13]), listen).await;
    p.establish_with(65013, 90, vec![gr]).await;
    p.send(&updates(10, 0x0c00_0000)).await;
    p.send(&UpdateBuilder::end_of_rib(Family::Ipv4Unicast))
        .await;
    let mut eor = false;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        if let Inbound::EndOfRib { family, .. } = m {
            eor = family == Family::Ipv4Unicast;
            break;
        }
    }
    assert!(eor, "End-of-RIB delivered");
    // A NOTIFICATION without the N bit (RFC 8538) is a real end: no stale routes.
    p.send(&Notification::new(code::CEASE, cease::ADMINISTRATIVE_RESET, vec![]).encode())
        .await;
    let mut down = None;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        if let Inbound::Down { stale, .. } = m {
            down = Some(stale);
            break;
        }
    }
    assert_eq!(down, Some(None));
}

/// Sessions over IPv6 transport (both ends on ::1, told apart by port).
#[tokio::test]
async fn ipv6_transport() {
    let lo: IpAddr = "::1".parse().unwrap();
    let [(sa, _ra), (sb, _rb)] = pair(lo, lo, 65051, |_, _| {}).await;
    for s in [&sa, &sb] {
        assert!(up(s, 15).await, "{:?}", s.peers[0].status());
    }
}

/// A prefix-limit teardown without an idle timeout holds the session down even when a
/// restart timer was already armed: here our first connect was refused (arming the idle hold
/// timer), then the neighbor connected to us before it fired. Nothing may bring it back but
/// `clear`: no connect of ours for longer than the idle hold and connect retry timers.
#[tokio::test]
async fn prefix_limit_hold_down_outlasts_a_timer_armed_before_it() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let neighbor_port = port();
    let mut cfg = settings(IpAddr::from([127, 0, 0, 15]), neighbor_port, 65015);
    cfg.passive = false;
    cfg.connect_retry_time = 2;
    cfg.prefix_limits = [Some((5, true, None)), None];
    let (s, _rx) = start(vec![cfg], listen).await;
    // Nothing listens at the neighbor's port yet: our connect is refused at once.
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.last_error.is_some())
            .await,
        "{:?}",
        s.peers[0].status()
    );
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 15]), listen).await;
    p.establish(65015, 90).await;
    let neighbor = tokio::net::TcpListener::bind((Ipv4Addr::new(127, 0, 0, 15), neighbor_port))
        .await
        .unwrap();
    p.send(&updates(6, 0x0e00_0000)).await;
    let n = p.notification().await.expect("NOTIFICATION");
    assert_eq!(n.subcode, cease::MAXIMUM_PREFIXES_REACHED);
    // Idle hold and connect retry are 2 s here; twice that passes without a connect.
    let connected = tokio::time::timeout(Duration::from_secs(4), neighbor.accept()).await;
    assert!(connected.is_err(), "the held-down session connected again");
    let st = s.peers[0].status();
    assert!(st.held_down, "{st:?}");
    assert_eq!((st.state, st.established_transitions), (State::Idle, 1));
    // `clear` brings it back: it connects to the neighbor.
    s.peers[0].clear(Clear::Hard).await.unwrap();
    let connected = tokio::time::timeout(Duration::from_secs(5), neighbor.accept()).await;
    assert!(connected.is_ok(), "not connected after clear");
}

/// After a prefix-limit teardown with an idle timeout, the session accepts the neighbor again.
#[tokio::test]
async fn prefix_limit_idle_timeout_allows_reconnect() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let mut cfg = settings(IpAddr::from([127, 0, 0, 14]), 179, 65014);
    cfg.prefix_limits = [Some((5, true, Some(1))), None];
    let (s, _rx) = start(vec![cfg], listen).await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 14]), listen).await;
    p.establish(65014, 90).await;
    p.send(&updates(6, 0x0d00_0000)).await;
    let n = p.notification().await.expect("NOTIFICATION");
    assert_eq!(n.subcode, cease::MAXIMUM_PREFIXES_REACHED);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 14]), listen).await;
    p.establish(65014, 90).await;
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.established_transitions == 2)
            .await
    );
}

/// GTSM (RFC 5082): with ttl-security on both ends the session comes up; an end that sends
/// with an eBGP TTL of 1 is not heard by one that accepts only TTL 255.
#[tokio::test]
async fn gtsm() {
    for (b_gtsm, expect_up) in [(Some(1), true), (None, false)] {
        let [(sa, _ra), (_sb, _rb)] = pair(
            IpAddr::from([127, 0, 0, 61]),
            IpAddr::from([127, 0, 0, 62]),
            65061,
            |a, b| {
                a.passive = true;
                a.ttl_security = Some(1);
                a.multihop = false;
                b.ttl_security = b_gtsm;
                b.multihop = false;
            },
        )
        .await;
        assert_eq!(up(&sa, 6).await, expect_up, "peer GTSM {b_gtsm:?}");
    }
}

/// Add-Path (RFC 7911): when both sides agree, NLRI carry path identifiers and two paths of
/// one prefix are two entries of the Adj-RIB-In.
#[tokio::test]
async fn add_path_receive() {
    use ribshard_wire::open::AddPathFamily;
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let mut cfg = settings(IpAddr::from([127, 0, 0, 15]), 179, 65015);
    cfg.add_path_receive = true;
    let (s, mut rx) = start(vec![cfg], listen).await;
    let mut p = RawPeer::connect(IpAddr::from([127, 0, 0, 15]), listen).await;
    let send = Capability::AddPath(vec![AddPathFamily {
        afi: 1,
        safi: 1,
        send_receive: 2,
    }]);
    p.establish_with(65015, 90, vec![send]).await;
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.state == State::Established)
            .await
    );
    let n = s.peers[0].status().negotiated.unwrap();
    assert_eq!(
        (n.add_path_receive, n.add_path_send),
        ([true, false], [false, false])
    );
    let params = SessionParams {
        four_octet_as: true,
        add_path: [true, false],
        ..SessionParams::default()
    };
    let b = UpdateBuilder::new(params);
    let attrs = b.encode_attributes(&PathAttributes::canonical([
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([65015])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 15)),
    ]));
    let prefix = Prefix::V4 {
        addr: 0xcb00_7100,
        len: 24,
    };
    let nlri = [
        Nlri {
            path_id: Some(1),
            prefix,
        },
        Nlri {
            path_id: Some(2),
            prefix,
        },
    ];
    let mut out = Vec::new();
    b.announce(&attrs, Family::Ipv4Unicast, &[], &nlri, &mut out)
        .unwrap();
    p.send(&out).await;
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.prefixes[0] == 2)
            .await
    );
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        if let Inbound::Update { params, .. } = m {
            assert_eq!(params.add_path, [true, false]);
            return;
        }
    }
    panic!("no UPDATE delivered");
}

/// While a session does not read because what it received cannot be handed on (here the
/// tap, never read: a stuck MRT writer; in the daemon also full shard queues), the
/// neighbor's KEEPALIVEs wait in the socket: the hold timer must not expire on a neighbor
/// that is alive while we are the slow one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_timer_waits_while_backpressure_holds_reading() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let peer = IpAddr::from([127, 0, 0, 31]);
    let (tx, mut rx) = mpsc::channel(1);
    let s = Sessions::start(vec![settings(peer, 179, 65031)], &[listen], tx)
        .await
        .unwrap();
    let p = RawPeer::connect(peer, listen).await;
    let mut p = p;
    p.establish(65031, 3).await;
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.state == State::Established)
            .await
    );
    // Enough UPDATEs that the one-message tap is full and the session stops reading.
    for i in 0..50u32 {
        p.send(&updates(10, 0x0a00_0000 + (i << 16))).await;
    }
    let (sock, _) = p.into_parts();
    let (_read, mut write) = sock.into_split();
    let keepalives = tokio::spawn(async move {
        loop {
            if write.write_all(&keepalive()).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    // Twice the hold time without reading anything.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let st = s.peers[0].status();
    assert_eq!(st.state, State::Established, "{:?}", st.last_error);
    assert_eq!(st.established_transitions, 1);
    // Reading again, it works through what waited.
    let mut got = 0;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(2), rx.recv()).await {
        if matches!(m, Inbound::Update { .. }) {
            got += 1;
        }
    }
    assert_eq!(got, 50, "every UPDATE handed on once the tap reads again");
    assert_eq!(s.peers[0].status().state, State::Established);
    keepalives.abort();
}

/// A neighbor that closes and reconnects while its old session's work still waits to be
/// handed on (the tap is full): the old session ends on the next tick (the socket is in
/// CLOSE_WAIT), not after its unread UPDATEs, and the new one comes up at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_is_not_held_back_by_pending_work() {
    let listen: SocketAddr = (Ipv4Addr::new(127, 0, 0, 1), port()).into();
    let peer = IpAddr::from([127, 0, 0, 32]);
    let (tx, mut rx) = mpsc::channel(1);
    let s = Sessions::start(vec![settings(peer, 179, 65032)], &[listen], tx)
        .await
        .unwrap();
    let mut p = RawPeer::connect(peer, listen).await;
    p.establish(65032, 90).await;
    for i in 0..50u32 {
        p.send(&updates(10, 0x0a00_0000 + (i << 16))).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(p);
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(10), |st| st.state != State::Established)
            .await
    );
    let mut p = RawPeer::connect(peer, listen).await;
    // establish() fails (no OPEN back within its time) if the session does not read.
    p.establish(65032, 90).await;
    assert!(
        s.peers[0]
            .wait_for(Duration::from_secs(5), |st| st.state == State::Established
                && st.established_transitions == 2)
            .await
    );
    // What the first session had read reaches the tap (what it had not read went with it);
    // then the new session's UPDATEs flow.
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {}
    p.send(&updates(5, 0x0b00_0000)).await;
    let next = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rx.recv().await {
                Some(Inbound::Update { .. }) | None => return,
                Some(_) => {}
            }
        }
    })
    .await;
    assert!(next.is_ok(), "no UPDATE from the new session");
}
