//! The owned model of a set of path attributes: what the RIB interns and what the UPDATE
//! builder encodes. Order and flags are kept as received, so a received set re-encodes to
//! the same octets; sets built locally use canonical order and flags.

use crate::attr::{self, flags};
use crate::message::SessionParams;
use crate::nlri::Nlri;
use crate::nlri::NlriView;
use crate::types::{Family, Origin};
use crate::update::{
    parse_aggregator, parse_mp_reach, parse_mp_unreach, segment, Aggregator, AsPathView, AttrsView,
    RawAttr,
};
use std::net::Ipv4Addr;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AsSegment {
    /// One of [`segment`]'s constants.
    pub kind: u8,
    pub asns: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AsPath {
    pub segments: Vec<AsSegment>,
}

impl AsPath {
    pub fn sequence(asns: impl IntoIterator<Item = u32>) -> AsPath {
        let asns: Vec<u32> = asns.into_iter().collect();
        if asns.is_empty() {
            return AsPath::default();
        }
        AsPath {
            segments: vec![AsSegment {
                kind: segment::AS_SEQUENCE,
                asns,
            }],
        }
    }
    fn from_view(v: AsPathView<'_>) -> AsPath {
        AsPath {
            segments: v
                .segments()
                .map(|s| AsSegment {
                    kind: s.kind,
                    asns: s.asns().collect(),
                })
                .collect(),
        }
    }
    /// Segments longer than 255 ASNs are split, as the wire format requires.
    fn encode(&self, four_octet: bool, out: &mut Vec<u8>) {
        for s in &self.segments {
            for chunk in s.asns.chunks(255) {
                out.push(s.kind);
                out.push(chunk.len() as u8);
                for &a in chunk {
                    if four_octet {
                        out.extend_from_slice(&a.to_be_bytes());
                    } else {
                        let a = u16::try_from(a).unwrap_or(crate::types::AS_TRANS as u16);
                        out.extend_from_slice(&a.to_be_bytes());
                    }
                }
            }
        }
    }
    /// Path length for the decision process: AS_SET counts one, confederation segments zero.
    pub fn path_len(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s.kind {
                segment::AS_SEQUENCE => s.asns.len(),
                segment::AS_SET => 1,
                _ => 0,
            })
            .sum()
    }
}

/// NLRI of an MP attribute: parsed for the families we route, opaque for the rest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MpNlri {
    Prefixes(Vec<Nlri>),
    Opaque(Vec<u8>),
}

impl MpNlri {
    fn from_view(view: Option<NlriView<'_>>, raw: &[u8]) -> MpNlri {
        match view {
            Some(n) => MpNlri::Prefixes(n.iter().collect()),
            None => MpNlri::Opaque(raw.to_vec()),
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            MpNlri::Prefixes(p) => p.iter().for_each(|n| n.encode(out)),
            MpNlri::Opaque(b) => out.extend_from_slice(b),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MpReach {
    pub afi: u16,
    pub safi: u8,
    pub next_hop: Vec<u8>,
    pub reserved: u8,
    pub nlri: MpNlri,
    /// The MRT RIB entry form: next hop length and next hop only.
    pub abbreviated: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MpUnreach {
    pub afi: u16,
    pub safi: u8,
    pub nlri: MpNlri,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrValue {
    Origin(Origin),
    AsPath(AsPath),
    NextHop(Ipv4Addr),
    Med(u32),
    LocalPref(u32),
    AtomicAggregate,
    Aggregator(Aggregator),
    Communities(Vec<u32>),
    OriginatorId(Ipv4Addr),
    ClusterList(Vec<u32>),
    MpReach(MpReach),
    MpUnreach(MpUnreach),
    ExtCommunities(Vec<[u8; 8]>),
    As4Path(AsPath),
    As4Aggregator(Aggregator),
    LargeCommunities(Vec<[u32; 3]>),
    Otc(u32),
    /// Any attribute we do not interpret, carried byte for byte.
    Unknown {
        type_code: u8,
        value: Vec<u8>,
    },
}

impl AttrValue {
    pub fn type_code(&self) -> u8 {
        match self {
            AttrValue::Origin(_) => attr::ORIGIN,
            AttrValue::AsPath(_) => attr::AS_PATH,
            AttrValue::NextHop(_) => attr::NEXT_HOP,
            AttrValue::Med(_) => attr::MULTI_EXIT_DISC,
            AttrValue::LocalPref(_) => attr::LOCAL_PREF,
            AttrValue::AtomicAggregate => attr::ATOMIC_AGGREGATE,
            AttrValue::Aggregator(_) => attr::AGGREGATOR,
            AttrValue::Communities(_) => attr::COMMUNITIES,
            AttrValue::OriginatorId(_) => attr::ORIGINATOR_ID,
            AttrValue::ClusterList(_) => attr::CLUSTER_LIST,
            AttrValue::MpReach(_) => attr::MP_REACH_NLRI,
            AttrValue::MpUnreach(_) => attr::MP_UNREACH_NLRI,
            AttrValue::ExtCommunities(_) => attr::EXTENDED_COMMUNITIES,
            AttrValue::As4Path(_) => attr::AS4_PATH,
            AttrValue::As4Aggregator(_) => attr::AS4_AGGREGATOR,
            AttrValue::LargeCommunities(_) => attr::LARGE_COMMUNITY,
            AttrValue::Otc(_) => attr::OTC,
            AttrValue::Unknown { type_code, .. } => *type_code,
        }
    }

    /// Flags a locally built attribute carries. Unknown attributes are optional transitive
    /// ones being passed on, so they get the Partial bit (RFC 4271 section 5).
    pub fn default_flags(&self) -> u8 {
        match attr::expected_flags(self.type_code()) {
            Some(f) => f,
            None => flags::OPTIONAL | flags::TRANSITIVE | flags::PARTIAL,
        }
    }

    /// Converts a received attribute; anything that does not parse stays opaque.
    fn from_raw(a: RawAttr<'_>, params: &SessionParams) -> AttrValue {
        let parsed = (|| -> Option<AttrValue> {
            let v = a.value;
            let u32s = |unit: usize| -> Option<Vec<u32>> {
                (v.len() % unit == 0).then(|| {
                    v.chunks_exact(4)
                        .filter_map(|c| c.try_into().ok().map(u32::from_be_bytes))
                        .collect()
                })
            };
            let ipv4 = || -> Option<Ipv4Addr> {
                let b: [u8; 4] = v.try_into().ok()?;
                Some(Ipv4Addr::from(b))
            };
            Some(match a.type_code {
                attr::ORIGIN => AttrValue::Origin(Origin::from_u8(*v.first()?)?),
                attr::AS_PATH => AttrValue::AsPath(AsPath::from_view(AsPathView::parse(
                    v,
                    params.four_octet_as,
                )?)),
                attr::NEXT_HOP => AttrValue::NextHop(ipv4()?),
                attr::MULTI_EXIT_DISC => AttrValue::Med(u32::from_be_bytes(v.try_into().ok()?)),
                attr::LOCAL_PREF => AttrValue::LocalPref(u32::from_be_bytes(v.try_into().ok()?)),
                attr::ATOMIC_AGGREGATE if v.is_empty() => AttrValue::AtomicAggregate,
                attr::COMMUNITIES => AttrValue::Communities(u32s(4)?),
                attr::ORIGINATOR_ID => AttrValue::OriginatorId(ipv4()?),
                attr::CLUSTER_LIST => AttrValue::ClusterList(u32s(4)?),
                attr::EXTENDED_COMMUNITIES if v.len() % 8 == 0 => AttrValue::ExtCommunities(
                    v.chunks_exact(8)
                        .filter_map(|c| c.try_into().ok())
                        .collect(),
                ),
                attr::LARGE_COMMUNITY if v.len() % 12 == 0 => AttrValue::LargeCommunities(
                    v.chunks_exact(12)
                        .map(|c| {
                            let w = |i: usize| {
                                c.get(i..i + 4)
                                    .and_then(|b| b.try_into().ok())
                                    .map(u32::from_be_bytes)
                                    .unwrap_or(0)
                            };
                            [w(0), w(4), w(8)]
                        })
                        .collect(),
                ),
                attr::OTC => AttrValue::Otc(u32::from_be_bytes(v.try_into().ok()?)),
                attr::AS4_PATH => {
                    AttrValue::As4Path(AsPath::from_view(AsPathView::parse(v, true)?))
                }
                attr::AGGREGATOR => {
                    AttrValue::Aggregator(parse_aggregator(v, params.four_octet_as)?)
                }
                attr::AS4_AGGREGATOR => AttrValue::As4Aggregator(parse_aggregator(v, true)?),
                attr::MP_REACH_NLRI => {
                    let m = parse_mp_reach(v, params).ok()?;
                    AttrValue::MpReach(MpReach {
                        afi: m.afi,
                        safi: m.safi,
                        next_hop: m.next_hop.to_vec(),
                        reserved: m.reserved,
                        nlri: MpNlri::from_view(m.nlri, m.nlri_bytes),
                        abbreviated: m.abbreviated,
                    })
                }
                attr::MP_UNREACH_NLRI => {
                    let m = parse_mp_unreach(v, params).ok()?;
                    AttrValue::MpUnreach(MpUnreach {
                        afi: m.afi,
                        safi: m.safi,
                        nlri: MpNlri::from_view(m.nlri, m.nlri_bytes),
                    })
                }
                _ => return None,
            })
        })();
        parsed.unwrap_or(AttrValue::Unknown {
            type_code: a.type_code,
            value: a.value.to_vec(),
        })
    }

    fn encode_value(&self, params: &SessionParams, out: &mut Vec<u8>) {
        match self {
            AttrValue::Origin(o) => out.push(*o as u8),
            AttrValue::AsPath(p) => p.encode(params.four_octet_as, out),
            AttrValue::As4Path(p) => p.encode(true, out),
            AttrValue::NextHop(a) | AttrValue::OriginatorId(a) => {
                out.extend_from_slice(&a.octets())
            }
            AttrValue::Med(v) | AttrValue::LocalPref(v) | AttrValue::Otc(v) => {
                out.extend_from_slice(&v.to_be_bytes())
            }
            AttrValue::AtomicAggregate => {}
            AttrValue::Aggregator(a) => {
                if params.four_octet_as {
                    out.extend_from_slice(&a.asn.to_be_bytes());
                } else {
                    let asn = u16::try_from(a.asn).unwrap_or(crate::types::AS_TRANS as u16);
                    out.extend_from_slice(&asn.to_be_bytes());
                }
                out.extend_from_slice(&a.address.octets());
            }
            AttrValue::As4Aggregator(a) => {
                out.extend_from_slice(&a.asn.to_be_bytes());
                out.extend_from_slice(&a.address.octets());
            }
            AttrValue::Communities(v) | AttrValue::ClusterList(v) => v
                .iter()
                .for_each(|c| out.extend_from_slice(&c.to_be_bytes())),
            AttrValue::ExtCommunities(v) => v.iter().for_each(|c| out.extend_from_slice(c)),
            AttrValue::LargeCommunities(v) => v
                .iter()
                .flatten()
                .for_each(|w| out.extend_from_slice(&w.to_be_bytes())),
            AttrValue::MpReach(m) => {
                if m.abbreviated {
                    out.push(m.next_hop.len() as u8);
                    out.extend_from_slice(&m.next_hop);
                } else {
                    out.extend_from_slice(&m.afi.to_be_bytes());
                    out.push(m.safi);
                    out.push(m.next_hop.len() as u8);
                    out.extend_from_slice(&m.next_hop);
                    out.push(m.reserved);
                    m.nlri.encode(out);
                }
            }
            AttrValue::MpUnreach(m) => {
                out.extend_from_slice(&m.afi.to_be_bytes());
                out.push(m.safi);
                m.nlri.encode(out);
            }
            AttrValue::Unknown { value, .. } => out.extend_from_slice(value),
        }
    }
}

/// One attribute with the flags it is (or was) sent with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attribute {
    pub flags: u8,
    pub value: AttrValue,
}

impl Attribute {
    /// An attribute with the default flags for its type, and the Extended Length bit when
    /// the value takes more than 255 octets (measured with 4-octet ASNs, the longer form).
    pub fn new(value: AttrValue) -> Attribute {
        let mut scratch = Vec::new();
        let wide = SessionParams {
            four_octet_as: true,
            ..SessionParams::default()
        };
        value.encode_value(&wide, &mut scratch);
        let ext = if scratch.len() > 255 {
            flags::EXTENDED_LENGTH
        } else {
            0
        };
        Attribute {
            flags: value.default_flags() | ext,
            value,
        }
    }

    /// Appends flags, type, length and value. The Extended Length bit is kept as received
    /// and added when the value needs it.
    pub fn encode(&self, params: &SessionParams, out: &mut Vec<u8>) {
        let start = out.len();
        let ext = self.flags & flags::EXTENDED_LENGTH != 0;
        out.push(self.flags);
        out.push(self.value.type_code());
        out.extend_from_slice(if ext { &[0, 0] } else { &[0] });
        let vstart = out.len();
        self.value.encode_value(params, out);
        let vlen = out.len() - vstart;
        if ext {
            if let Some(l) = out.get_mut(vstart - 2..vstart) {
                l.copy_from_slice(&(vlen.min(65535) as u16).to_be_bytes());
            }
        } else if vlen <= 255 {
            if let Some(l) = out.get_mut(vstart - 1) {
                *l = vlen as u8;
            }
        } else {
            // Too long for one length octet: switch to the extended form.
            if let Some(f) = out.get_mut(start) {
                *f |= flags::EXTENDED_LENGTH;
            }
            if let Some(l) = out.get_mut(vstart - 1) {
                *l = (vlen >> 8) as u8;
            }
            out.insert(vstart, vlen as u8);
        }
    }
}

/// A set of path attributes, in wire order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathAttributes {
    pub list: Vec<Attribute>,
}

impl PathAttributes {
    /// The attributes of a validated UPDATE or RIB entry: every kept attribute, in order,
    /// with its flags (discarded ones and repeats left out).
    pub fn from_view(view: &AttrsView<'_>, params: &SessionParams) -> PathAttributes {
        PathAttributes {
            list: view
                .kept()
                .map(|a| Attribute {
                    flags: a.flags,
                    value: AttrValue::from_raw(a, params),
                })
                .collect(),
        }
    }

    /// Builds a set in canonical order (ascending type code) with default flags.
    pub fn canonical(values: impl IntoIterator<Item = AttrValue>) -> PathAttributes {
        let mut list: Vec<Attribute> = values.into_iter().map(Attribute::new).collect();
        list.sort_by_key(|a| a.value.type_code());
        PathAttributes { list }
    }

    pub fn encode(&self, params: &SessionParams, out: &mut Vec<u8>) {
        for a in &self.list {
            a.encode(params, out);
        }
    }

    pub fn to_bytes(&self, params: &SessionParams) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(params, &mut v);
        v
    }

    pub fn get(&self, type_code: u8) -> Option<&AttrValue> {
        self.list
            .iter()
            .map(|a| &a.value)
            .find(|v| v.type_code() == type_code)
    }

    /// Replaces the attribute of the same type, or inserts it in type-code order.
    pub fn set(&mut self, value: AttrValue) {
        let code = value.type_code();
        if let Some(a) = self.list.iter_mut().find(|a| a.value.type_code() == code) {
            a.value = value;
            return;
        }
        let at = self
            .list
            .iter()
            .position(|a| a.value.type_code() > code)
            .unwrap_or(self.list.len());
        self.list.insert(at, Attribute::new(value));
    }

    pub fn remove(&mut self, type_code: u8) -> Option<AttrValue> {
        let at = self
            .list
            .iter()
            .position(|a| a.value.type_code() == type_code)?;
        Some(self.list.remove(at).value)
    }

    pub fn origin(&self) -> Option<Origin> {
        match self.get(attr::ORIGIN)? {
            AttrValue::Origin(o) => Some(*o),
            _ => None,
        }
    }
    pub fn as_path(&self) -> Option<&AsPath> {
        match self.get(attr::AS_PATH)? {
            AttrValue::AsPath(p) => Some(p),
            _ => None,
        }
    }
    pub fn next_hop(&self) -> Option<Ipv4Addr> {
        match self.get(attr::NEXT_HOP)? {
            AttrValue::NextHop(a) => Some(*a),
            _ => None,
        }
    }
    pub fn med(&self) -> Option<u32> {
        match self.get(attr::MULTI_EXIT_DISC)? {
            AttrValue::Med(v) => Some(*v),
            _ => None,
        }
    }
    pub fn local_pref(&self) -> Option<u32> {
        match self.get(attr::LOCAL_PREF)? {
            AttrValue::LocalPref(v) => Some(*v),
            _ => None,
        }
    }
    pub fn communities(&self) -> &[u32] {
        match self.get(attr::COMMUNITIES) {
            Some(AttrValue::Communities(v)) => v,
            _ => &[],
        }
    }
    pub fn large_communities(&self) -> &[[u32; 3]] {
        match self.get(attr::LARGE_COMMUNITY) {
            Some(AttrValue::LargeCommunities(v)) => v,
            _ => &[],
        }
    }
    pub fn mp_reach(&self) -> Option<&MpReach> {
        match self.get(attr::MP_REACH_NLRI)? {
            AttrValue::MpReach(m) => Some(m),
            _ => None,
        }
    }

    /// Moves NLRI out of MP_REACH_NLRI / MP_UNREACH_NLRI, leaving the attributes that
    /// describe a path: what a RIB interns.
    pub fn take_mp_nlri(&mut self) -> (Vec<Nlri>, Vec<Nlri>) {
        let mut reach = Vec::new();
        let mut unreach = Vec::new();
        for a in &mut self.list {
            match &mut a.value {
                AttrValue::MpReach(m) => {
                    if let MpNlri::Prefixes(p) = &mut m.nlri {
                        reach.append(p);
                    }
                }
                AttrValue::MpUnreach(m) => {
                    if let MpNlri::Prefixes(p) = &mut m.nlri {
                        unreach.append(p);
                    }
                }
                _ => {}
            }
        }
        self.list
            .retain(|a| a.value.type_code() != attr::MP_UNREACH_NLRI);
        (reach, unreach)
    }

    /// The IPv6 (or other MP) next hop for a family, from MP_REACH_NLRI.
    pub fn mp_next_hop(&self, family: Family) -> Option<&[u8]> {
        let m = self.mp_reach()?;
        (m.afi == family.afi() && m.safi == family.safi()).then_some(m.next_hop.as_slice())
    }
}
