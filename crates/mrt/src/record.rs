//! Typed MRT records (RFC 6396 sections 4.2, 4.3 and 4.4; RFC 8050 for Add-Path).

use crate::read::RawRecord;
use crate::types::{self, bgp4mp as b, tdv2};
use ribshard_wire::cursor::Cursor;
use ribshard_wire::types::{AFI_IPV4, AFI_IPV6};
use ribshard_wire::{Family, Prefix, SessionParams};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, thiserror::Error)]
pub enum MrtError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("read error: {0}")]
    Io(#[from] std::io::Error),
    #[error("record {record}: file ends after {got} of {expected} octets")]
    Truncated {
        record: u64,
        expected: usize,
        got: usize,
    },
    #[error("record {record}: length {length} is implausible")]
    RecordTooLarge { record: u64, length: usize },
    #[error("malformed record: {what}")]
    Malformed { what: &'static str },
    #[error("RIB entry refers to peer index {0}, which the PEER_INDEX_TABLE does not have")]
    UnknownPeerIndex(u16),
}

fn short(what: &'static str) -> MrtError {
    MrtError::Malformed { what }
}

/// A peer of the PEER_INDEX_TABLE (RFC 6396 section 4.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub bgp_id: Ipv4Addr,
    pub address: IpAddr,
    pub asn: u32,
    /// The AS was written in 4 octets (peer type bit 1).
    pub as4: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerIndexTable {
    pub collector_id: Ipv4Addr,
    pub view_name: String,
    pub peers: Vec<Peer>,
}

/// One path of a TABLE_DUMP_V2 RIB record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RibEntry<'a> {
    pub peer_index: u16,
    pub originated: u32,
    pub path_id: Option<u32>,
    /// Path attributes in RIB-entry form: 4-octet ASNs, abbreviated MP_REACH_NLRI.
    pub attributes: &'a [u8],
}

/// A TABLE_DUMP_V2 RIB record: one prefix and its paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RibRecord<'a> {
    pub subtype: u16,
    pub sequence: u32,
    pub afi: u16,
    pub safi: u8,
    pub prefix: Prefix,
    pub entries: Vec<RibEntry<'a>>,
}

impl RibRecord<'_> {
    pub fn add_path(&self) -> bool {
        (tdv2::RIB_IPV4_UNICAST_ADDPATH..=tdv2::RIB_GENERIC_ADDPATH).contains(&self.subtype)
    }
    /// How a RIB entry's attributes are decoded (RFC 6396 section 4.3.4).
    pub fn params() -> SessionParams {
        SessionParams {
            four_octet_as: true,
            mrt_rib: true,
            ..SessionParams::default()
        }
    }
}

/// A TABLE_DUMP (version 1) record: one path (RFC 6396 section 4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDump<'a> {
    pub view: u16,
    pub sequence: u16,
    pub prefix: Prefix,
    pub status: u8,
    pub originated: u32,
    pub peer_address: IpAddr,
    pub peer_as: u16,
    /// Path attributes with 2-octet ASNs.
    pub attributes: &'a [u8],
}

impl TableDump<'_> {
    pub fn params() -> SessionParams {
        SessionParams {
            four_octet_as: false,
            mrt_rib: true,
            ..SessionParams::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bgp4mpBody<'a> {
    /// A whole BGP message, header included.
    Message(&'a [u8]),
    StateChange {
        old: u16,
        new: u16,
    },
}

/// A BGP4MP or BGP4MP_ET record (RFC 6396 section 4.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bgp4mp<'a> {
    pub subtype: u16,
    pub peer_as: u32,
    pub local_as: u32,
    pub interface_index: u16,
    pub afi: u16,
    pub peer_address: IpAddr,
    pub local_address: IpAddr,
    pub body: Bgp4mpBody<'a>,
}

impl Bgp4mp<'_> {
    pub fn as4(&self) -> bool {
        matches!(
            self.subtype,
            b::MESSAGE_AS4
                | b::STATE_CHANGE_AS4
                | b::MESSAGE_AS4_LOCAL
                | b::MESSAGE_AS4_ADDPATH
                | b::MESSAGE_AS4_LOCAL_ADDPATH
        )
    }
    /// The message was sent by the collector, not received.
    pub fn local(&self) -> bool {
        matches!(
            self.subtype,
            b::MESSAGE_LOCAL
                | b::MESSAGE_AS4_LOCAL
                | b::MESSAGE_LOCAL_ADDPATH
                | b::MESSAGE_AS4_LOCAL_ADDPATH
        )
    }
    pub fn add_path(&self) -> bool {
        (b::MESSAGE_ADDPATH..=b::MESSAGE_AS4_LOCAL_ADDPATH).contains(&self.subtype)
    }
    /// How the carried BGP message is decoded.
    pub fn params(&self) -> SessionParams {
        SessionParams {
            four_octet_as: self.as4(),
            extended_message: true,
            add_path: [self.add_path(); 2],
            external: false,
            mrt_rib: false,
            live: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    TableDump(TableDump<'a>),
    PeerIndexTable(PeerIndexTable),
    Rib(RibRecord<'a>),
    Bgp4mp(Bgp4mp<'a>),
    /// A type or subtype this reader does not interpret (OSPF, IS-IS, RIB_GENERIC of other
    /// families, ...).
    Other {
        mrt_type: u16,
        subtype: u16,
    },
}

fn ip(c: &mut Cursor<'_>, afi: u16) -> Result<IpAddr, MrtError> {
    match afi {
        AFI_IPV4 => Ok(IpAddr::V4(Ipv4Addr::from(c.u32().ok_or(short("address"))?))),
        AFI_IPV6 => {
            let b = c.take(16).ok_or(short("address"))?;
            let a: [u8; 16] = b.try_into().map_err(|_| short("address"))?;
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => Err(short("unknown address family")),
    }
}

fn prefix_from(c: &mut Cursor<'_>, family: Family) -> Result<Prefix, MrtError> {
    let len = c.u8().ok_or(short("prefix length"))?;
    if len > family.max_len() {
        return Err(short("prefix length exceeds the address family"));
    }
    let bytes = c
        .take(usize::from(len).div_ceil(8))
        .ok_or(short("prefix"))?;
    let mut a = [0u8; 16];
    if let Some(d) = a.get_mut(..bytes.len()) {
        d.copy_from_slice(bytes);
    }
    let [x0, x1, x2, x3, ..] = a;
    Ok(match family {
        Family::Ipv4Unicast => Prefix::V4 {
            addr: u32::from_be_bytes([x0, x1, x2, x3]),
            len,
        },
        Family::Ipv6Unicast => Prefix::V6 { addr: a, len },
    })
}

impl<'a> Record<'a> {
    pub fn parse(raw: &RawRecord<'a>) -> Result<Record<'a>, MrtError> {
        let mut c = Cursor::new(raw.body);
        match (raw.mrt_type, raw.subtype) {
            (types::TABLE_DUMP, st @ (1 | 2)) => {
                let afi = st;
                let view = c.u16().ok_or(short("TABLE_DUMP view"))?;
                let sequence = c.u16().ok_or(short("TABLE_DUMP sequence"))?;
                let addr = ip(&mut c, afi)?;
                let len = c.u8().ok_or(short("TABLE_DUMP prefix length"))?;
                let prefix = match addr {
                    IpAddr::V4(a) => Prefix::v4(a, len),
                    IpAddr::V6(a) => Prefix::v6(a, len),
                }
                .ok_or(short("TABLE_DUMP prefix length"))?;
                let status = c.u8().ok_or(short("TABLE_DUMP status"))?;
                let originated = c.u32().ok_or(short("TABLE_DUMP time"))?;
                let peer_address = ip(&mut c, afi)?;
                let peer_as = c.u16().ok_or(short("TABLE_DUMP peer AS"))?;
                let alen = c.u16().ok_or(short("TABLE_DUMP attribute length"))?;
                let attributes = c
                    .take(usize::from(alen))
                    .ok_or(short("TABLE_DUMP attributes"))?;
                Ok(Record::TableDump(TableDump {
                    view,
                    sequence,
                    prefix,
                    status,
                    originated,
                    peer_address,
                    peer_as,
                    attributes,
                }))
            }
            (types::TABLE_DUMP_V2, tdv2::PEER_INDEX_TABLE) => {
                let collector_id = Ipv4Addr::from(c.u32().ok_or(short("collector id"))?);
                let nlen = c.u16().ok_or(short("view name length"))?;
                let name = c.take(usize::from(nlen)).ok_or(short("view name"))?;
                let count = c.u16().ok_or(short("peer count"))?;
                let mut peers = Vec::with_capacity(usize::from(count));
                for _ in 0..count {
                    let ptype = c.u8().ok_or(short("peer type"))?;
                    let bgp_id = Ipv4Addr::from(c.u32().ok_or(short("peer BGP id"))?);
                    let address = ip(&mut c, if ptype & 1 != 0 { AFI_IPV6 } else { AFI_IPV4 })?;
                    let as4 = ptype & 2 != 0;
                    let asn = if as4 { c.u32() } else { c.u16().map(u32::from) }
                        .ok_or(short("peer AS"))?;
                    peers.push(Peer {
                        bgp_id,
                        address,
                        asn,
                        as4,
                    });
                }
                Ok(Record::PeerIndexTable(PeerIndexTable {
                    collector_id,
                    view_name: String::from_utf8_lossy(name).into_owned(),
                    peers,
                }))
            }
            (types::TABLE_DUMP_V2, st @ tdv2::RIB_IPV4_UNICAST..=tdv2::RIB_GENERIC_ADDPATH)
                if st != 7 =>
            {
                let add_path = st >= tdv2::RIB_IPV4_UNICAST_ADDPATH;
                let base = if add_path { st - 6 } else { st };
                let sequence = c.u32().ok_or(short("RIB sequence"))?;
                let (afi, safi) = match base {
                    tdv2::RIB_IPV4_UNICAST => (AFI_IPV4, 1),
                    tdv2::RIB_IPV4_MULTICAST => (AFI_IPV4, 2),
                    tdv2::RIB_IPV6_UNICAST => (AFI_IPV6, 1),
                    tdv2::RIB_IPV6_MULTICAST => (AFI_IPV6, 2),
                    _ => (
                        c.u16().ok_or(short("RIB_GENERIC AFI"))?,
                        c.u8().ok_or(short("RIB_GENERIC SAFI"))?,
                    ),
                };
                // RIB_GENERIC of a family we cannot delimit (VPN, flowspec, ...) is skipped.
                let family = match (afi, safi) {
                    (AFI_IPV4, 1 | 2) => Family::Ipv4Unicast,
                    (AFI_IPV6, 1 | 2) => Family::Ipv6Unicast,
                    _ => {
                        return Ok(Record::Other {
                            mrt_type: raw.mrt_type,
                            subtype: raw.subtype,
                        })
                    }
                };
                let prefix = prefix_from(&mut c, family)?;
                let count = c.u16().ok_or(short("RIB entry count"))?;
                let mut entries = Vec::with_capacity(usize::from(count));
                for _ in 0..count {
                    let peer_index = c.u16().ok_or(short("RIB peer index"))?;
                    let originated = c.u32().ok_or(short("RIB originated time"))?;
                    let path_id = if add_path {
                        Some(c.u32().ok_or(short("RIB path id"))?)
                    } else {
                        None
                    };
                    let alen = c.u16().ok_or(short("RIB attribute length"))?;
                    let attributes = c.take(usize::from(alen)).ok_or(short("RIB attributes"))?;
                    entries.push(RibEntry {
                        peer_index,
                        originated,
                        path_id,
                        attributes,
                    });
                }
                Ok(Record::Rib(RibRecord {
                    subtype: st,
                    sequence,
                    afi,
                    safi,
                    prefix,
                    entries,
                }))
            }
            (types::BGP4MP | types::BGP4MP_ET, st @ 0..=11) if !matches!(st, 2 | 3) => {
                let as4 = matches!(
                    st,
                    b::MESSAGE_AS4
                        | b::STATE_CHANGE_AS4
                        | b::MESSAGE_AS4_LOCAL
                        | b::MESSAGE_AS4_ADDPATH
                        | b::MESSAGE_AS4_LOCAL_ADDPATH
                );
                let asn = |c: &mut Cursor<'_>| {
                    if as4 {
                        c.u32()
                    } else {
                        c.u16().map(u32::from)
                    }
                };
                let peer_as = asn(&mut c).ok_or(short("BGP4MP peer AS"))?;
                let local_as = asn(&mut c).ok_or(short("BGP4MP local AS"))?;
                let interface_index = c.u16().ok_or(short("BGP4MP interface"))?;
                let afi = c.u16().ok_or(short("BGP4MP AFI"))?;
                let peer_address = ip(&mut c, afi)?;
                let local_address = ip(&mut c, afi)?;
                let body = if st == b::STATE_CHANGE || st == b::STATE_CHANGE_AS4 {
                    Bgp4mpBody::StateChange {
                        old: c.u16().ok_or(short("old state"))?,
                        new: c.u16().ok_or(short("new state"))?,
                    }
                } else {
                    Bgp4mpBody::Message(c.rest())
                };
                Ok(Record::Bgp4mp(Bgp4mp {
                    subtype: st,
                    peer_as,
                    local_as,
                    interface_index,
                    afi,
                    peer_address,
                    local_address,
                    body,
                }))
            }
            (mrt_type, subtype) => Ok(Record::Other { mrt_type, subtype }),
        }
    }
}
