//! MRT writer: TABLE_DUMP_V2 RIB dumps and BGP4MP messages (RFC 6396 sections 4.3, 4.4).

use crate::record::{PeerIndexTable, RibEntry};
use crate::types::{self, bgp4mp as b, tdv2};
use ribshard_wire::Prefix;
use std::io::{self, Write};
use std::net::IpAddr;

pub struct MrtWriter<W: Write> {
    out: W,
    body: Vec<u8>,
}

fn push_ip(body: &mut Vec<u8>, a: &IpAddr) {
    match a {
        IpAddr::V4(a) => body.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => body.extend_from_slice(&a.octets()),
    }
}

/// The session a BGP4MP record is about: the fields every `_AS4` subtype starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bgp4mpSession {
    pub peer_as: u32,
    pub local_as: u32,
    pub peer: IpAddr,
    /// Our address on the session (its family is the peer's).
    pub local: IpAddr,
}

impl Bgp4mpSession {
    /// Peer AS, local AS, interface index (0), AFI, peer and local addresses (RFC 6396
    /// section 4.4.3).
    fn put(&self, body: &mut Vec<u8>) {
        body.extend_from_slice(&self.peer_as.to_be_bytes());
        body.extend_from_slice(&self.local_as.to_be_bytes());
        body.extend_from_slice(&0u16.to_be_bytes());
        let afi: u16 = if self.peer.is_ipv6() { 2 } else { 1 };
        body.extend_from_slice(&afi.to_be_bytes());
        push_ip(body, &self.peer);
        push_ip(body, &self.local);
    }
}

impl<W: Write> MrtWriter<W> {
    pub fn new(out: W) -> Self {
        MrtWriter {
            out,
            body: Vec::with_capacity(1 << 16),
        }
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    /// Writes one record with the common header (RFC 6396 section 2).
    pub fn write_raw(
        &mut self,
        timestamp: u32,
        mrt_type: u16,
        subtype: u16,
        body: &[u8],
    ) -> io::Result<()> {
        let len = u32::try_from(body.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MRT record too large"))?;
        let mut h = [0u8; 12];
        h[..4].copy_from_slice(&timestamp.to_be_bytes());
        h[4..6].copy_from_slice(&mrt_type.to_be_bytes());
        h[6..8].copy_from_slice(&subtype.to_be_bytes());
        h[8..].copy_from_slice(&len.to_be_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(body)
    }

    fn flush_body(&mut self, timestamp: u32, mrt_type: u16, subtype: u16) -> io::Result<()> {
        let body = std::mem::take(&mut self.body);
        let r = self.write_raw(timestamp, mrt_type, subtype, &body);
        self.body = body;
        self.body.clear();
        r
    }

    /// PEER_INDEX_TABLE (RFC 6396 section 4.3.1). Peers whose AS needs 4 octets, or that
    /// were read as such, are written with the AS4 peer type bit.
    pub fn write_peer_index_table(&mut self, timestamp: u32, t: &PeerIndexTable) -> io::Result<()> {
        self.body.clear();
        self.body.extend_from_slice(&t.collector_id.octets());
        let name = t.view_name.as_bytes();
        self.body
            .extend_from_slice(&(name.len().min(65535) as u16).to_be_bytes());
        self.body.extend_from_slice(name);
        self.body
            .extend_from_slice(&(t.peers.len().min(65535) as u16).to_be_bytes());
        for p in &t.peers {
            let as4 = p.as4 || p.asn > 65535;
            let ptype = u8::from(p.address.is_ipv6()) | (u8::from(as4) << 1);
            self.body.push(ptype);
            self.body.extend_from_slice(&p.bgp_id.octets());
            push_ip(&mut self.body, &p.address);
            if as4 {
                self.body.extend_from_slice(&p.asn.to_be_bytes());
            } else {
                self.body.extend_from_slice(&(p.asn as u16).to_be_bytes());
            }
        }
        self.flush_body(timestamp, types::TABLE_DUMP_V2, tdv2::PEER_INDEX_TABLE)
    }

    /// A RIB_IPV4_UNICAST / RIB_IPV6_UNICAST record (or the Add-Path subtypes when the
    /// entries carry path identifiers). Attributes must be in RIB-entry form.
    pub fn write_rib(
        &mut self,
        timestamp: u32,
        sequence: u32,
        prefix: &Prefix,
        entries: &[RibEntry<'_>],
    ) -> io::Result<()> {
        let add_path = entries.iter().any(|e| e.path_id.is_some());
        let subtype = match (prefix, add_path) {
            (Prefix::V4 { .. }, false) => tdv2::RIB_IPV4_UNICAST,
            (Prefix::V6 { .. }, false) => tdv2::RIB_IPV6_UNICAST,
            (Prefix::V4 { .. }, true) => tdv2::RIB_IPV4_UNICAST_ADDPATH,
            (Prefix::V6 { .. }, true) => tdv2::RIB_IPV6_UNICAST_ADDPATH,
        };
        self.body.clear();
        self.body.extend_from_slice(&sequence.to_be_bytes());
        prefix.encode(&mut self.body);
        self.body
            .extend_from_slice(&(entries.len().min(65535) as u16).to_be_bytes());
        for e in entries {
            self.body.extend_from_slice(&e.peer_index.to_be_bytes());
            self.body.extend_from_slice(&e.originated.to_be_bytes());
            if add_path {
                self.body
                    .extend_from_slice(&e.path_id.unwrap_or(0).to_be_bytes());
            }
            self.body
                .extend_from_slice(&(e.attributes.len().min(65535) as u16).to_be_bytes());
            self.body.extend_from_slice(e.attributes);
        }
        self.flush_body(timestamp, types::TABLE_DUMP_V2, subtype)
    }

    /// A received BGP message as BGP4MP MESSAGE_AS4 (RFC 6396 section 4.4.3), or
    /// MESSAGE_AS4_ADDPATH when its NLRI carry path identifiers (RFC 8050 section 3).
    pub fn write_bgp4mp_message(
        &mut self,
        timestamp: u32,
        session: &Bgp4mpSession,
        add_path: bool,
        message: &[u8],
    ) -> io::Result<()> {
        self.body.clear();
        session.put(&mut self.body);
        self.body.extend_from_slice(message);
        let subtype = if add_path {
            b::MESSAGE_AS4_ADDPATH
        } else {
            b::MESSAGE_AS4
        };
        self.flush_body(timestamp, types::BGP4MP, subtype)
    }

    /// A session's state change as BGP4MP STATE_CHANGE_AS4 (RFC 6396 section 4.4.4); states
    /// are numbered as RFC 4271's FSM (1 Idle ... 6 Established).
    pub fn write_bgp4mp_state_change(
        &mut self,
        timestamp: u32,
        session: &Bgp4mpSession,
        old: u16,
        new: u16,
    ) -> io::Result<()> {
        self.body.clear();
        session.put(&mut self.body);
        self.body.extend_from_slice(&old.to_be_bytes());
        self.body.extend_from_slice(&new.to_be_bytes());
        self.flush_body(timestamp, types::BGP4MP, b::STATE_CHANGE_AS4)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
