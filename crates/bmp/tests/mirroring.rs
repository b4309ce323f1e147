//! Route Mirroring (RFC 7854 section 4.7): a station that asks for it is sent each UPDATE
//! received in error, whole, after the neighbor's Peer Up; a station that does not is not.

use bytes::Bytes;
use ribshard_bmp::message::{self, frame, MessageType};
use ribshard_bmp::{BmpConfig, Monitor, Ribs, StationConfig};
use ribshard_engine::{DownReason, Inbound, Negotiated, Opened, SessionStatus};
use ribshard_wire::{Family, SessionParams};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

fn station(address: SocketAddr, ribs: Ribs) -> StationConfig {
    StationConfig {
        name: address.to_string(),
        address,
        ribs,
        statistics_interval: None,
        buffer: 1 << 20,
        retry: Duration::from_secs(1),
        retry_max: Duration::from_secs(1),
    }
}

fn negotiated() -> Negotiated {
    Negotiated {
        peer_as: 65007,
        peer_id: Ipv4Addr::new(192, 0, 2, 7),
        hold_time: 90,
        four_octet_as: true,
        families: vec![Family::Ipv4Unicast],
        route_refresh: false,
        enhanced_route_refresh: false,
        extended_message: false,
        add_path_receive: [false; 2],
        add_path_send: [false; 2],
        graceful_restart: None,
        restart_helped: false,
        long_lived: false,
        peer_role: None,
        params: SessionParams {
            four_octet_as: true,
            external: true,
            ..SessionParams::default()
        },
    }
}

/// The next message's type and body (after the per-peer header).
async fn next(conn: &mut TcpStream, buf: &mut Vec<u8>) -> (u8, Vec<u8>) {
    loop {
        if let Some((f, len)) = frame(buf).unwrap() {
            let out = (f.ty, f.body.to_vec());
            buf.drain(..len);
            return out;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut chunk))
            .await
            .expect("a message within 10 s")
            .unwrap();
        assert!(n > 0, "the monitor closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn errored_updates_are_mirrored_whole_to_the_stations_that_ask() {
    let mirroring = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let pre_policy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let monitor = Monitor::start(BmpConfig {
        stations: vec![
            station(
                mirroring.local_addr().unwrap(),
                Ribs {
                    mirroring: true,
                    ..Ribs::default()
                },
            ),
            station(
                pre_policy.local_addr().unwrap(),
                Ribs {
                    pre_policy: true,
                    ..Ribs::default()
                },
            ),
        ],
        sys_name: "rs".into(),
        sys_descr: "ribshard".into(),
        local_as: 65000,
        router_id: Ipv4Addr::new(192, 0, 2, 1),
    })
    .unwrap();
    let (mut m, _) = mirroring.accept().await.unwrap();
    let (mut p, _) = pre_policy.accept().await.unwrap();
    let (mut mbuf, mut pbuf) = (Vec::new(), Vec::new());
    assert_eq!(
        next(&mut m, &mut mbuf).await.0,
        MessageType::Initiation as u8
    );
    assert_eq!(
        next(&mut p, &mut pbuf).await.0,
        MessageType::Initiation as u8
    );

    let (_status_tx, status) = tokio::sync::watch::channel(SessionStatus::default());
    let remote: SocketAddr = "127.0.0.7:40000".parse().unwrap();
    // ORIGIN 7 with a route (treated as withdraw), then a /33 (it reset the session).
    let update = |body: &[u8]| {
        let mut u = vec![0xff; 16];
        u.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
        u.push(2);
        u.extend_from_slice(body);
        Bytes::from(u)
    };
    let taw = update(&[
        0, 0, 0, 11, 0x40, 1, 1, 7, 0x40, 3, 4, 127, 0, 0, 7, 24, 10, 0, 0,
    ]);
    let bad = update(&[0, 0, 0, 0, 33, 1, 2, 3, 4, 5]);
    monitor
        .received(vec![
            Inbound::Up {
                peer: 0,
                negotiated: negotiated(),
                opened: Box::new(Opened {
                    sent: Bytes::from_static(&[0xff; 29]),
                    received: Bytes::from_static(&[0xff; 29]),
                    local: Some("127.0.0.1:179".parse().unwrap()),
                    remote: Some(remote),
                    status,
                    epoch: 0,
                }),
            },
            Inbound::Errored {
                peer: 0,
                message: taw.clone(),
            },
            Inbound::Update {
                peer: 0,
                message: taw.clone(),
                params: negotiated().params,
            },
            Inbound::Errored {
                peer: 0,
                message: bad.clone(),
            },
            Inbound::Down {
                peer: 0,
                stale: None,
                reason: DownReason::RemoteClosed,
            },
        ])
        .await;

    // The mirroring station: Peer Up, the two mirrored, Peer Down; no Route Monitoring.
    let peer_up = next(&mut m, &mut mbuf).await;
    assert_eq!(peer_up.0, MessageType::PeerUp as u8);
    for pdu in [&taw, &bad] {
        let (ty, body) = next(&mut m, &mut mbuf).await;
        assert_eq!(ty, MessageType::RouteMirroring as u8);
        let info = [
            &message::mirror::INFORMATION.to_be_bytes()[..],
            &[0, 2],
            &message::mirror::ERRORED_PDU.to_be_bytes(),
        ]
        .concat();
        assert_eq!(&body[..6], &info[..], "an Errored PDU");
        assert_eq!(&body[6..8], &message::mirror::BGP_MESSAGE.to_be_bytes());
        assert_eq!(&body[8..10], &(pdu.len() as u16).to_be_bytes());
        assert_eq!(&body[10..], &pdu[..], "the message whole, as it came");
    }
    assert_eq!(next(&mut m, &mut mbuf).await.0, MessageType::PeerDown as u8);

    // The pre-policy station: the UPDATE as Route Monitoring, nothing mirrored.
    let types = [
        next(&mut p, &mut pbuf).await.0,
        next(&mut p, &mut pbuf).await.0,
        next(&mut p, &mut pbuf).await.0,
    ];
    assert_eq!(
        types,
        [
            MessageType::PeerUp as u8,
            MessageType::RouteMonitoring as u8,
            MessageType::PeerDown as u8
        ]
    );
    let stop = std::sync::Arc::clone(&monitor);
    tokio::task::spawn_blocking(move || stop.stop())
        .await
        .unwrap();
}
