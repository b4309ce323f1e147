//! A scripted BGP speaker for tests: our codec over a real socket.
#![allow(dead_code)]

use ribshard_wire::open::Capability;
use ribshard_wire::{decode, frame, keepalive, Message, Notification, Open, SessionParams};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A scripted BGP speaker: our codec over a real socket.
pub struct RawPeer {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl RawPeer {
    pub async fn connect(from: IpAddr, to: SocketAddr) -> RawPeer {
        let sock = TcpSocket::new_v4().unwrap();
        sock.bind(SocketAddr::new(from, 0)).unwrap();
        RawPeer {
            s: sock.connect(to).await.unwrap(),
            buf: Vec::new(),
        }
    }
    /// Connects with a receive buffer of about `rcvbuf` octets, so that a peer that stops
    /// reading is noticed after little data rather than after the kernel's megabytes.
    pub async fn connect_with_rcvbuf(from: IpAddr, to: SocketAddr, rcvbuf: u32) -> RawPeer {
        let sock = TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(rcvbuf).unwrap();
        sock.bind(SocketAddr::new(from, 0)).unwrap();
        RawPeer {
            s: sock.connect(to).await.unwrap(),
            buf: Vec::new(),
        }
    }
    /// The socket and what was read from it but not yet returned as messages.
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        (self.s, self.buf)
    }
    pub fn from_parts(s: TcpStream, buf: Vec<u8>) -> RawPeer {
        RawPeer { s, buf }
    }
    pub async fn send(&mut self, m: &[u8]) {
        self.s.write_all(m).await.unwrap();
    }
    /// The next message, or `None` when the connection closes or 10 s pass.
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Ok(Some(len)) = frame(&self.buf, 65535) {
                    return Some(self.buf.drain(..len).collect());
                }
                let mut chunk = [0u8; 65536];
                match self.s.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await
        .ok()
        .flatten()
    }
    /// Waits for a NOTIFICATION, skipping other messages.
    pub async fn notification(&mut self) -> Option<Notification> {
        while let Some(m) = self.recv().await {
            if let Ok(Message::Notification(n)) = decode(&m, &SessionParams::default()) {
                return Some(n);
            }
        }
        None
    }
    /// OPEN both ways and KEEPALIVE both ways.
    pub async fn establish(&mut self, asn: u32, hold: u16) {
        self.establish_with(asn, hold, vec![]).await;
    }

    pub async fn establish_with(&mut self, asn: u32, hold: u16, extra: Vec<Capability>) {
        let mut caps = vec![
            Capability::Multiprotocol { afi: 1, safi: 1 },
            Capability::Multiprotocol { afi: 2, safi: 1 },
            Capability::FourOctetAs(asn),
        ];
        caps.extend(extra);
        let open = Open::new(asn, hold, Ipv4Addr::new(10, 0, 0, 2), caps);
        self.send(&open.encode()).await;
        let m = self.recv().await.expect("OPEN from ribshard");
        assert!(matches!(
            decode(&m, &SessionParams::default()),
            Ok(Message::Open(_))
        ));
        self.send(&keepalive()).await;
        let m = self.recv().await.expect("KEEPALIVE from ribshard");
        assert!(matches!(
            decode(&m, &SessionParams::default()),
            Ok(Message::Keepalive)
        ));
    }
}
