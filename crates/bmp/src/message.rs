//! BMP messages as the monitored router writes them (RFC 7854 section 4), with the Adj-RIB-Out
//! flag of RFC 8671 and the Loc-RIB peer type of RFC 9069; and a reader of their framing, for
//! tests and tools (a station decodes them; the router never reads one).

use bytes::Bytes;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{SystemTime, UNIX_EPOCH};

/// BMP version 3 (RFC 7854 section 4.1).
pub const VERSION: u8 = 3;
/// Octets of the common header: version, length, type.
pub const COMMON_HEADER_LEN: usize = 6;
/// Octets of the per-peer header (RFC 7854 section 4.2).
pub const PEER_HEADER_LEN: usize = 42;

/// Message types (RFC 7854 section 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum MessageType {
    RouteMonitoring = 0,
    StatisticsReport = 1,
    PeerDown = 2,
    PeerUp = 3,
    Initiation = 4,
    Termination = 5,
    RouteMirroring = 6,
}

impl MessageType {
    pub fn from_u8(v: u8) -> Option<MessageType> {
        Some(match v {
            0 => MessageType::RouteMonitoring,
            1 => MessageType::StatisticsReport,
            2 => MessageType::PeerDown,
            3 => MessageType::PeerUp,
            4 => MessageType::Initiation,
            5 => MessageType::Termination,
            6 => MessageType::RouteMirroring,
            _ => return None,
        })
    }
}

/// Peer types (RFC 7854 section 4.2; 3 from RFC 9069 section 4.1).
pub mod peer_type {
    pub const GLOBAL_INSTANCE: u8 = 0;
    pub const LOC_RIB: u8 = 3;
}

/// Peer flags (RFC 7854 section 4.2, RFC 8671 section 4, RFC 9069 section 4.2).
pub mod peer_flags {
    /// The peer address is IPv6.
    pub const V: u8 = 0x80;
    /// Post-policy (else pre-policy).
    pub const L: u8 = 0x40;
    /// The UPDATE uses 2-octet AS numbers (else 4-octet).
    pub const A: u8 = 0x20;
    /// Adj-RIB-Out (else Adj-RIB-In).
    pub const O: u8 = 0x10;
    /// Loc-RIB only: the Loc-RIB is filtered.
    pub const F: u8 = 0x80;
}

/// Information TLV types of Initiation and Peer Up (RFC 7854 sections 4.3-4.4, RFC 9069
/// section 5.3).
pub mod info {
    pub const STRING: u16 = 0;
    pub const SYS_DESCR: u16 = 1;
    pub const SYS_NAME: u16 = 2;
    pub const TABLE_NAME: u16 = 3;
}

/// Termination reasons (RFC 7854 section 4.5).
pub mod term {
    pub const REASON_TLV: u16 = 1;
    pub const ADMINISTRATIVELY_CLOSED: u16 = 0;
    pub const OUT_OF_RESOURCES: u16 = 2;
}

/// Peer Down reasons (RFC 7854 section 4.9; 6 from RFC 9069 section 5.4).
pub mod down {
    pub const LOCAL_NOTIFICATION: u8 = 1;
    pub const LOCAL_NO_NOTIFICATION: u8 = 2;
    pub const REMOTE_NOTIFICATION: u8 = 3;
    pub const REMOTE_NO_NOTIFICATION: u8 = 4;
    pub const DECONFIGURED: u8 = 5;
    pub const LOCAL_SYSTEM_CLOSED: u8 = 6;
}

/// Statistics types (RFC 7854 section 4.8).
pub mod stat {
    /// Prefixes rejected by inbound policy (32-bit counter).
    pub const REJECTED: u16 = 0;
    /// Known duplicate prefix advertisements (32-bit counter).
    pub const DUPLICATE_ANNOUNCEMENTS: u16 = 1;
    /// Known duplicate withdraws (32-bit counter).
    pub const DUPLICATE_WITHDRAWS: u16 = 2;
    /// UPDATEs invalidated by a CLUSTER_LIST loop, an AS_PATH loop, an ORIGINATOR_ID loop
    /// (32-bit counters).
    pub const CLUSTER_LIST_LOOPS: u16 = 3;
    pub const AS_PATH_LOOPS: u16 = 4;
    pub const ORIGINATOR_ID_LOOPS: u16 = 5;
    /// Routes in the Adj-RIBs-In (64-bit gauge).
    pub const ADJ_RIB_IN: u16 = 7;
    /// Routes in the Loc-RIB (64-bit gauge).
    pub const LOC_RIB: u16 = 8;
    /// Per AFI/SAFI: routes in the Adj-RIB-In.
    pub const ADJ_RIB_IN_AFI: u16 = 9;
    /// Per AFI/SAFI: routes in the Loc-RIB.
    pub const LOC_RIB_AFI: u16 = 10;
    /// UPDATEs subjected to treat-as-withdraw (RFC 7606), and their prefixes (32-bit
    /// counters).
    pub const TREAT_AS_WITHDRAW_UPDATES: u16 = 11;
    pub const TREAT_AS_WITHDRAW_PREFIXES: u16 = 12;
    /// Routes in the post-policy Adj-RIB-Out, and per AFI/SAFI (64-bit gauges, RFC 8671
    /// section 5).
    pub const POST_POLICY_ADJ_RIB_OUT: u16 = 15;
    pub const POST_POLICY_ADJ_RIB_OUT_AFI: u16 = 17;
    /// Routes in the post-policy Adj-RIB-In, and per AFI/SAFI (64-bit gauges; IANA's BMP
    /// Statistics Types).
    pub const POST_POLICY_ADJ_RIB_IN: u16 = 20;
    pub const POST_POLICY_ADJ_RIB_IN_AFI: u16 = 21;
}

/// Who a message is about (RFC 7854 section 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerHeader {
    pub peer_type: u8,
    pub flags: u8,
    pub distinguisher: u64,
    pub address: IpAddr,
    pub asn: u32,
    pub bgp_id: Ipv4Addr,
    /// When the information was learned (seconds, microseconds since the epoch); zero if
    /// not known.
    pub timestamp: (u32, u32),
}

impl PeerHeader {
    /// A neighbor of the global instance; the V flag follows its address.
    pub fn global(address: IpAddr, asn: u32, bgp_id: Ipv4Addr) -> PeerHeader {
        PeerHeader {
            peer_type: peer_type::GLOBAL_INSTANCE,
            flags: if address.is_ipv6() { peer_flags::V } else { 0 },
            distinguisher: 0,
            address,
            asn,
            bgp_id,
            timestamp: (0, 0),
        }
    }

    /// The router's own Loc-RIB (RFC 9069 section 4.1): no peer address, our AS and id.
    pub fn loc_rib(local_as: u32, router_id: Ipv4Addr) -> PeerHeader {
        PeerHeader {
            peer_type: peer_type::LOC_RIB,
            flags: 0,
            distinguisher: 0,
            address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            asn: local_as,
            bgp_id: router_id,
            timestamp: (0, 0),
        }
    }

    pub fn with_flags(mut self, flags: u8) -> PeerHeader {
        self.flags |= flags;
        self
    }

    /// Stamped with the time now.
    pub fn now(mut self) -> PeerHeader {
        self.timestamp = now();
        self
    }

    /// The header's 42 octets.
    pub fn octets(&self) -> [u8; PEER_HEADER_LEN] {
        let mut v = Vec::with_capacity(PEER_HEADER_LEN);
        self.write(&mut v);
        let mut out = [0; PEER_HEADER_LEN];
        out.copy_from_slice(&v);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.push(self.peer_type);
        out.push(self.flags);
        out.extend_from_slice(&self.distinguisher.to_be_bytes());
        out.extend_from_slice(&address16(self.address));
        out.extend_from_slice(&self.asn.to_be_bytes());
        out.extend_from_slice(&self.bgp_id.octets());
        out.extend_from_slice(&self.timestamp.0.to_be_bytes());
        out.extend_from_slice(&self.timestamp.1.to_be_bytes());
    }
}

/// Seconds and microseconds since the epoch.
pub fn now() -> (u32, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() as u32, d.subsec_micros())
}

/// An address in 16 octets: IPv4 in the last four, zeros before (RFC 7854 section 4.2).
fn address16(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V6(v6) => v6.octets(),
        IpAddr::V4(v4) => {
            let mut out = [0; 16];
            out[12..].copy_from_slice(&v4.octets());
            out
        }
    }
}

/// Starts a message: the common header with its length left to [`finish`].
fn start(ty: MessageType, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(COMMON_HEADER_LEN + capacity);
    out.push(VERSION);
    out.extend_from_slice(&[0; 4]);
    out.push(ty as u8);
    out
}

fn finish(mut out: Vec<u8>) -> Bytes {
    let len = (out.len() as u32).to_be_bytes();
    out[1..5].copy_from_slice(&len);
    Bytes::from(out)
}

fn tlv(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&(value.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(
        value
            .get(..value.len().min(u16::MAX as usize))
            .unwrap_or(&[]),
    );
}

/// Initiation (RFC 7854 section 4.3): sysDescr and sysName are required.
pub fn initiation(sys_name: &str, sys_descr: &str) -> Bytes {
    let mut out = start(
        MessageType::Initiation,
        8 + sys_name.len() + sys_descr.len(),
    );
    tlv(&mut out, info::SYS_DESCR, sys_descr.as_bytes());
    tlv(&mut out, info::SYS_NAME, sys_name.as_bytes());
    finish(out)
}

/// Termination (RFC 7854 section 4.5) with a reason and a string for the operator.
pub fn termination(reason: u16, why: &str) -> Bytes {
    let mut out = start(MessageType::Termination, 10 + why.len());
    tlv(&mut out, info::STRING, why.as_bytes());
    tlv(&mut out, term::REASON_TLV, &reason.to_be_bytes());
    finish(out)
}

/// Route Monitoring (RFC 7854 section 4.6): one BGP UPDATE, whole (header included).
pub fn route_monitoring(peer: &PeerHeader, update: &[u8]) -> Bytes {
    let mut out = start(MessageType::RouteMonitoring, PEER_HEADER_LEN + update.len());
    peer.write(&mut out);
    out.extend_from_slice(update);
    finish(out)
}

/// Appends a Route Monitoring message for one UPDATE, with a per-peer header as
/// [`PeerHeader::octets`] wrote it.
pub fn push_route_monitoring(out: &mut Vec<u8>, peer: &[u8; PEER_HEADER_LEN], update: &[u8]) {
    let len = (COMMON_HEADER_LEN + PEER_HEADER_LEN + update.len()) as u32;
    out.push(VERSION);
    out.extend_from_slice(&len.to_be_bytes());
    out.push(MessageType::RouteMonitoring as u8);
    out.extend_from_slice(peer);
    out.extend_from_slice(update);
}

/// The headers of a Route Monitoring message whose UPDATE (`update_len` octets) follows
/// apart: a received UPDATE is sent as it is, not copied.
pub fn route_monitoring_header(peer: &PeerHeader, update_len: usize) -> Bytes {
    let mut out = start(MessageType::RouteMonitoring, PEER_HEADER_LEN);
    peer.write(&mut out);
    let len = ((out.len() + update_len) as u32).to_be_bytes();
    out[1..5].copy_from_slice(&len);
    Bytes::from(out)
}

/// Route Mirroring TLVs and Information codes (RFC 7854 section 4.7).
pub mod mirror {
    pub const BGP_MESSAGE: u16 = 0;
    pub const INFORMATION: u16 = 1;
    /// The message that follows was in error.
    pub const ERRORED_PDU: u16 = 0;
}

/// Route Mirroring (RFC 7854 section 4.7) of a BGP message received in error: an
/// Information TLV (Errored PDU), then the message whole, as it came.
pub fn route_mirroring_errored(peer: &PeerHeader, pdu: &[u8]) -> Bytes {
    let mut out = start(
        MessageType::RouteMirroring,
        PEER_HEADER_LEN + 10 + pdu.len(),
    );
    peer.write(&mut out);
    tlv(
        &mut out,
        mirror::INFORMATION,
        &mirror::ERRORED_PDU.to_be_bytes(),
    );
    tlv(&mut out, mirror::BGP_MESSAGE, pdu);
    finish(out)
}

/// Peer Up (RFC 7854 section 4.10): our end of the connection, both ports, the OPENs as
/// sent and received (whole messages), and information TLVs.
pub fn peer_up(
    peer: &PeerHeader,
    local: (IpAddr, u16),
    remote_port: u16,
    sent_open: &[u8],
    received_open: &[u8],
    information: &[(u16, &[u8])],
) -> Bytes {
    let mut out = start(
        MessageType::PeerUp,
        PEER_HEADER_LEN + 20 + sent_open.len() + received_open.len(),
    );
    peer.write(&mut out);
    out.extend_from_slice(&address16(local.0));
    out.extend_from_slice(&local.1.to_be_bytes());
    out.extend_from_slice(&remote_port.to_be_bytes());
    out.extend_from_slice(sent_open);
    out.extend_from_slice(received_open);
    for (ty, value) in information {
        tlv(&mut out, *ty, value);
    }
    finish(out)
}

/// Peer Down (RFC 7854 section 4.9): a reason and its data (a NOTIFICATION, an FSM event
/// code, or nothing).
pub fn peer_down(peer: &PeerHeader, reason: u8, data: &[u8]) -> Bytes {
    let mut out = start(MessageType::PeerDown, PEER_HEADER_LEN + 1 + data.len());
    peer.write(&mut out);
    out.push(reason);
    out.extend_from_slice(data);
    finish(out)
}

/// One statistic of a Statistics Report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// A 32-bit counter.
    Counter(u16, u32),
    /// A 64-bit gauge.
    Gauge(u16, u64),
    /// A 64-bit gauge for one AFI/SAFI.
    FamilyGauge(u16, u16, u8, u64),
}

/// Statistics Report (RFC 7854 section 4.8).
pub fn statistics(peer: &PeerHeader, stats: &[Stat]) -> Bytes {
    let mut out = start(
        MessageType::StatisticsReport,
        PEER_HEADER_LEN + 4 + 15 * stats.len(),
    );
    peer.write(&mut out);
    out.extend_from_slice(&(stats.len() as u32).to_be_bytes());
    for s in stats {
        match *s {
            Stat::Counter(ty, v) => tlv(&mut out, ty, &v.to_be_bytes()),
            Stat::Gauge(ty, v) => tlv(&mut out, ty, &v.to_be_bytes()),
            Stat::FamilyGauge(ty, afi, safi, v) => {
                let mut value = Vec::with_capacity(11);
                value.extend_from_slice(&afi.to_be_bytes());
                value.push(safi);
                value.extend_from_slice(&v.to_be_bytes());
                tlv(&mut out, ty, &value);
            }
        }
    }
    finish(out)
}

/// A message as framed: its type, its per-peer header (for the types that have one) and
/// what follows that.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Framed<'a> {
    pub ty: u8,
    pub peer: Option<PeerHeader>,
    pub body: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("BMP version {0}, not 3")]
    Version(u8),
    #[error("message length {0} is shorter than its headers")]
    Short(u32),
}

/// Reads the first message of `buf`: `Ok(None)` when it is not all there yet, else the
/// message and its length.
pub fn frame(buf: &[u8]) -> Result<Option<(Framed<'_>, usize)>, FrameError> {
    let Some(h) = buf.get(..COMMON_HEADER_LEN) else {
        return Ok(None);
    };
    if h[0] != VERSION {
        return Err(FrameError::Version(h[0]));
    }
    let len = u32::from_be_bytes([h[1], h[2], h[3], h[4]]);
    let ty = h[5];
    let has_peer = !matches!(
        MessageType::from_u8(ty),
        Some(MessageType::Initiation | MessageType::Termination)
    );
    let min = COMMON_HEADER_LEN + if has_peer { PEER_HEADER_LEN } else { 0 };
    if (len as usize) < min {
        return Err(FrameError::Short(len));
    }
    let Some(msg) = buf.get(..len as usize) else {
        return Ok(None);
    };
    let mut rest = &msg[COMMON_HEADER_LEN..];
    let peer = if has_peer {
        let p = &rest[..PEER_HEADER_LEN];
        rest = &rest[PEER_HEADER_LEN..];
        let u32_at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let mut a = [0u8; 16];
        a.copy_from_slice(&p[10..26]);
        let address = if p[1] & peer_flags::V != 0 && p[0] != peer_type::LOC_RIB {
            IpAddr::from(a)
        } else {
            IpAddr::from([a[12], a[13], a[14], a[15]])
        };
        let mut d = [0u8; 8];
        d.copy_from_slice(&p[2..10]);
        Some(PeerHeader {
            peer_type: p[0],
            flags: p[1],
            distinguisher: u64::from_be_bytes(d),
            address,
            asn: u32_at(26),
            bgp_id: Ipv4Addr::from(u32_at(30)),
            timestamp: (u32_at(34), u32_at(38)),
        })
    } else {
        None
    };
    Ok(Some((
        Framed {
            ty,
            peer,
            body: rest,
        },
        len as usize,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_frame_back() {
        let peer = PeerHeader::global("2001:db8::1".parse().unwrap(), 65001, [192, 0, 2, 1].into())
            .with_flags(peer_flags::L);
        let update = [0xffu8; 23];
        let m = route_monitoring(&peer, &update);
        let (f, len) = frame(&m).unwrap().unwrap();
        assert_eq!(len, m.len());
        assert_eq!(f.ty, MessageType::RouteMonitoring as u8);
        assert_eq!(f.peer, Some(peer));
        assert_eq!(f.body, &update);
        assert_eq!(m.len(), COMMON_HEADER_LEN + PEER_HEADER_LEN + update.len());
        // Not all there: nothing yet.
        assert_eq!(frame(&m[..m.len() - 1]).unwrap(), None);

        let i = initiation("r1", "ribshard 0.1");
        let (f, _) = frame(&i).unwrap().unwrap();
        assert_eq!(f.peer, None);
        assert_eq!(f.body, b"\x00\x01\x00\x0cribshard 0.1\x00\x02\x00\x02r1");

        let v4 = PeerHeader::global("192.0.2.1".parse().unwrap(), 65001, [192, 0, 2, 1].into());
        let s = statistics(
            &v4,
            &[
                Stat::Gauge(stat::ADJ_RIB_IN, 7),
                Stat::FamilyGauge(stat::ADJ_RIB_IN_AFI, 1, 1, 7),
                Stat::Counter(stat::TREAT_AS_WITHDRAW_UPDATES, 3),
            ],
        );
        let (f, _) = frame(&s).unwrap().unwrap();
        assert_eq!(f.peer.unwrap().address, v4.address);
        assert_eq!(&f.body[..4], &[0, 0, 0, 3]);
        assert_eq!(f.body.len(), 4 + 12 + 15 + 8);
        // A counter: type, length 4, the 32-bit value.
        assert_eq!(&f.body[f.body.len() - 8..], &[0, 11, 0, 4, 0, 0, 0, 3]);
    }

    #[test]
    fn an_errored_pdu_is_mirrored_whole() {
        let peer = PeerHeader::global("192.0.2.1".parse().unwrap(), 65001, [192, 0, 2, 1].into());
        let mut pdu = vec![0xffu8; 16];
        pdu.extend_from_slice(&[0, 27, 2, 0, 0, 0, 4, 0x40, 1, 1, 7]);
        let m = route_mirroring_errored(&peer, &pdu);
        let (f, len) = frame(&m).unwrap().unwrap();
        assert_eq!(len, m.len());
        assert_eq!(f.ty, MessageType::RouteMirroring as u8);
        assert_eq!(f.peer, Some(peer));
        // Information: Errored PDU; then the BGP Message TLV, the PDU as it came.
        assert_eq!(&f.body[..6], &[0, 1, 0, 2, 0, 0]);
        assert_eq!(&f.body[6..10], &[0, 0, 0, pdu.len() as u8]);
        assert_eq!(&f.body[10..], &pdu[..]);
    }

    #[test]
    fn bad_frames_are_errors() {
        assert_eq!(frame(&[1, 0, 0, 0, 6, 4]), Err(FrameError::Version(1)));
        assert_eq!(frame(&[3, 0, 0, 0, 10, 0]), Err(FrameError::Short(10)));
    }
}
