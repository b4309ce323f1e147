//! Zero-copy decoding of UPDATE messages with the error handling of RFC 7606.
//!
//! [`parse_update`] validates the message once: lengths, every path attribute, every NLRI.
//! Its result borrows the received bytes; nothing is allocated on the success path. Each
//! malformation maps to exactly one RFC 7606 action:
//! - session reset: [`UpdateError`], which names the NOTIFICATION to send;
//! - treat-as-withdraw: [`ParsedUpdate::treat_as_withdraw`], every announced prefix is withdrawn;
//! - attribute discard: [`ParsedUpdate::discarded`], the attribute is ignored.

use crate::attr::{self, flags, AttrErrorKind};
use crate::cursor::Cursor;
use crate::message::SessionParams;
use crate::nlri::{NlriChain, NlriView};
use crate::notification::{code, update as sub, Notification};
use crate::types::{Family, Origin, AFI_IPV4, AFI_IPV6, SAFI_UNICAST};
use std::net::Ipv4Addr;

/// A malformed or unacceptable attribute that did not need a session reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttrError {
    /// Attribute type code (0 when the attribute list itself is broken before a type).
    pub type_code: u8,
    pub kind: AttrErrorKind,
}

impl std::fmt::Display for AttrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (type {}): {}",
            attr::name(self.type_code),
            self.type_code,
            self.kind
        )
    }
}

/// The strongest action an UPDATE called for (RFC 7606 section 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Well-formed.
    Accept,
    /// Some attributes were ignored; the routes stand.
    AttributeDiscard,
    /// Every prefix the UPDATE announces is to be handled as withdrawn.
    TreatAsWithdraw,
    /// The session must be reset with this NOTIFICATION.
    SessionReset(Notification),
}

/// An UPDATE that needs a session reset (RFC 7606 section 2 "session reset" and the cases
/// where treat-as-withdraw cannot be applied because the NLRI cannot be located).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// Withdrawn Routes Length or Total Path Attribute Length overruns the message
    /// (RFC 4271 section 6.3).
    #[error("withdrawn routes or path attribute length exceeds the message")]
    LengthsExceedMessage,
    /// The Withdrawn Routes or NLRI field is syntactically incorrect (RFC 7606 section 5.3).
    #[error("{field} field is syntactically incorrect")]
    InvalidNetworkField { field: &'static str },
    /// MP_REACH_NLRI or MP_UNREACH_NLRI appears twice (RFC 7606 section 3 g).
    #[error("{} appears more than once", attr::name(*.type_code))]
    DuplicateMpAttribute { type_code: u8 },
    /// MP_REACH_NLRI or MP_UNREACH_NLRI cannot be parsed (RFC 7606 section 7.11, RFC 4760 section 7).
    #[error("{} is malformed: {reason}", attr::name(*.type_code))]
    MalformedMpAttribute {
        type_code: u8,
        reason: &'static str,
        attribute: Vec<u8>,
    },
    /// The attribute list breaks off inside or before an MP attribute, so its NLRI are lost.
    #[error("path attributes overrun inside {}", attr::name(*.type_code))]
    AttributeListOverrunInMp { type_code: u8 },
    /// A well-known attribute we do not know (RFC 4271 section 6.3).
    #[error("unrecognized well-known attribute type {}", .attribute.get(1).copied().unwrap_or(0))]
    UnrecognizedWellKnown { attribute: Vec<u8> },
    /// An error that calls for treat-as-withdraw in an UPDATE with no NLRI to withdraw
    /// (RFC 7606 section 5.2): the session is reset, with RFC 4271's NOTIFICATION for it.
    #[error("{} {kind}, in an UPDATE with no NLRI (RFC 7606 section 5.2)", attr::name(*.type_code))]
    MalformedWithoutNlri {
        type_code: u8,
        kind: AttrErrorKind,
        /// The attribute as received, when it was whole.
        attribute: Vec<u8>,
    },
}

impl UpdateError {
    pub fn notification(&self) -> Notification {
        let n = |s: u8, d: Vec<u8>| Notification::new(code::UPDATE_MESSAGE, s, d);
        match self {
            UpdateError::LengthsExceedMessage
            | UpdateError::DuplicateMpAttribute { .. }
            | UpdateError::AttributeListOverrunInMp { .. } => {
                n(sub::MALFORMED_ATTRIBUTE_LIST, vec![])
            }
            UpdateError::InvalidNetworkField { .. } => n(sub::INVALID_NETWORK_FIELD, vec![]),
            UpdateError::MalformedMpAttribute { attribute, .. } => {
                n(sub::OPTIONAL_ATTRIBUTE_ERROR, attribute.clone())
            }
            UpdateError::UnrecognizedWellKnown { attribute } => {
                n(sub::UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE, attribute.clone())
            }
            // RFC 4271 section 6.3: the subcode for the error, the attribute as data where
            // it names one.
            UpdateError::MalformedWithoutNlri {
                type_code,
                kind,
                attribute,
            } => match (*type_code, kind) {
                (_, AttrErrorKind::ListOverrun | AttrErrorKind::ListUnderrun) => {
                    n(sub::MALFORMED_ATTRIBUTE_LIST, vec![])
                }
                (_, AttrErrorKind::Flags) => n(sub::ATTRIBUTE_FLAGS_ERROR, attribute.clone()),
                (_, AttrErrorKind::Length) => n(sub::ATTRIBUTE_LENGTH_ERROR, attribute.clone()),
                (attr::ORIGIN, _) => n(sub::INVALID_ORIGIN_ATTRIBUTE, attribute.clone()),
                (attr::AS_PATH, _) => n(sub::MALFORMED_AS_PATH, vec![]),
                (attr::NEXT_HOP, _) => n(sub::INVALID_NEXT_HOP_ATTRIBUTE, attribute.clone()),
                _ => n(sub::OPTIONAL_ATTRIBUTE_ERROR, attribute.clone()),
            },
        }
    }
}

/// One path attribute as it stands in the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawAttr<'a> {
    pub flags: u8,
    pub type_code: u8,
    pub value: &'a [u8],
}

impl RawAttr<'_> {
    /// The attribute re-encoded exactly as received (flags, length form, value).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.flags);
        out.push(self.type_code);
        if self.flags & flags::EXTENDED_LENGTH != 0 {
            out.extend_from_slice(&(self.value.len() as u16).to_be_bytes());
        } else {
            out.push(self.value.len() as u8);
        }
        out.extend_from_slice(self.value);
    }
    fn to_vec(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(4 + self.value.len());
        self.encode(&mut v);
        v
    }
}

/// Iterates the attributes of a path attribute field, stopping at the first one that does
/// not fit (validation has already reported it).
#[derive(Clone, Debug)]
pub struct RawAttrIter<'a> {
    c: Cursor<'a>,
}

impl<'a> RawAttrIter<'a> {
    pub fn new(field: &'a [u8]) -> Self {
        RawAttrIter {
            c: Cursor::new(field),
        }
    }
}

impl<'a> Iterator for RawAttrIter<'a> {
    type Item = RawAttr<'a>;
    fn next(&mut self) -> Option<RawAttr<'a>> {
        let flags = self.c.u8()?;
        let type_code = self.c.u8()?;
        let len = if flags & flags::EXTENDED_LENGTH != 0 {
            usize::from(self.c.u16()?)
        } else {
            usize::from(self.c.u8()?)
        };
        let value = self.c.take(len)?;
        Some(RawAttr {
            flags,
            type_code,
            value,
        })
    }
}

/// AS_PATH or AS4_PATH segments, validated (RFC 4271 section 4.3, RFC 7606 section 7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsPathView<'a> {
    pub bytes: &'a [u8],
    pub four_octet: bool,
}

/// AS_PATH segment types.
pub mod segment {
    pub const AS_SET: u8 = 1;
    pub const AS_SEQUENCE: u8 = 2;
    pub const AS_CONFED_SEQUENCE: u8 = 3;
    pub const AS_CONFED_SET: u8 = 4;
}

impl<'a> AsPathView<'a> {
    /// `None` if malformed: unknown segment type, empty segment, overrun or underrun.
    pub fn parse(bytes: &'a [u8], four_octet: bool) -> Option<AsPathView<'a>> {
        let w = if four_octet { 4 } else { 2 };
        let mut c = Cursor::new(bytes);
        while !c.is_empty() {
            let t = c.u8()?;
            let n = c.u8()?;
            if !(segment::AS_SET..=segment::AS_CONFED_SET).contains(&t) || n == 0 {
                return None;
            }
            c.take(usize::from(n) * w)?;
        }
        Some(AsPathView { bytes, four_octet })
    }

    /// Segments as (type, ASNs) pairs.
    pub fn segments(&self) -> SegmentIter<'a> {
        SegmentIter {
            c: Cursor::new(self.bytes),
            four_octet: self.four_octet,
        }
    }

    /// Path length for the decision process (RFC 4271 section 9.1.2.2): an AS_SET counts
    /// one, confederation segments count zero (RFC 5065 section 5.3).
    pub fn path_len(&self) -> usize {
        self.segments()
            .map(|s| match s.kind {
                segment::AS_SEQUENCE => s.len(),
                segment::AS_SET => 1,
                _ => 0,
            })
            .sum()
    }

    /// The first AS of the first AS_SEQUENCE: the neighbour AS for MED comparison.
    pub fn first_as(&self) -> Option<u32> {
        let s = self.segments().next()?;
        if s.kind == segment::AS_SEQUENCE {
            s.asns().next()
        } else {
            None
        }
    }
}

/// One segment: its type and its AS numbers, still as wire octets.
#[derive(Clone, Copy, Debug)]
pub struct Segment<'a> {
    pub kind: u8,
    bytes: &'a [u8],
    four_octet: bool,
}

impl<'a> Segment<'a> {
    pub fn len(&self) -> usize {
        self.bytes.len() / if self.four_octet { 4 } else { 2 }
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub fn asns(&self) -> impl Iterator<Item = u32> + 'a {
        let four = self.four_octet;
        let mut c = Cursor::new(self.bytes);
        std::iter::from_fn(move || {
            if four {
                c.u32()
            } else {
                c.u16().map(u32::from)
            }
        })
    }
}

#[derive(Clone, Debug)]
pub struct SegmentIter<'a> {
    c: Cursor<'a>,
    four_octet: bool,
}

impl<'a> Iterator for SegmentIter<'a> {
    type Item = Segment<'a>;
    fn next(&mut self) -> Option<Segment<'a>> {
        let kind = self.c.u8()?;
        let n = usize::from(self.c.u8()?);
        let bytes = self.c.take(n * if self.four_octet { 4 } else { 2 })?;
        Some(Segment {
            kind,
            bytes,
            four_octet: self.four_octet,
        })
    }
}

/// AGGREGATOR or AS4_AGGREGATOR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aggregator {
    pub asn: u32,
    pub address: Ipv4Addr,
}

/// MP_REACH_NLRI (RFC 4760 section 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpReachView<'a> {
    pub afi: u16,
    pub safi: u8,
    pub next_hop: &'a [u8],
    /// The octet after the next hop; RFC 4760 reserves it (formerly the SNPA count).
    pub reserved: u8,
    /// Validated NLRI for the families ribshard routes; `None` for others (carried opaquely).
    pub nlri: Option<NlriView<'a>>,
    /// The raw NLRI octets, whatever the family.
    pub nlri_bytes: &'a [u8],
    /// The MRT RIB entry form holding only the next hop (RFC 6396 section 4.3.4).
    pub abbreviated: bool,
}

impl MpReachView<'_> {
    pub fn family(&self) -> Option<Family> {
        Family::from_afi_safi(self.afi, self.safi)
    }
    /// The global next hop: 4 octets (IPv4) or the first 16 (IPv6, RFC 2545 section 3).
    pub fn next_hop_addr(&self) -> Option<std::net::IpAddr> {
        match self.next_hop.len() {
            4 => {
                let a: [u8; 4] = self.next_hop.try_into().ok()?;
                Some(Ipv4Addr::from(a).into())
            }
            16 | 32 => {
                let a: [u8; 16] = self.next_hop.get(..16)?.try_into().ok()?;
                Some(std::net::Ipv6Addr::from(a).into())
            }
            _ => None,
        }
    }
}

/// MP_UNREACH_NLRI (RFC 4760 section 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpUnreachView<'a> {
    pub afi: u16,
    pub safi: u8,
    pub nlri: Option<NlriView<'a>>,
    pub nlri_bytes: &'a [u8],
}

/// The path attributes of one UPDATE (or MRT RIB entry), validated and indexed.
#[derive(Clone, Debug, Default)]
pub struct AttrsView<'a> {
    /// The whole path attribute field as received.
    pub raw: &'a [u8],
    pub origin: Option<Origin>,
    pub as_path: Option<AsPathView<'a>>,
    pub next_hop: Option<Ipv4Addr>,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    pub atomic_aggregate: bool,
    pub aggregator: Option<Aggregator>,
    /// COMMUNITIES value: a non-empty multiple of 4 octets.
    pub communities: Option<&'a [u8]>,
    pub originator_id: Option<Ipv4Addr>,
    /// CLUSTER_LIST value: a non-empty multiple of 4 octets.
    pub cluster_list: Option<&'a [u8]>,
    pub mp_reach: Option<MpReachView<'a>>,
    pub mp_unreach: Option<MpUnreachView<'a>>,
    /// EXTENDED_COMMUNITIES value: a non-empty multiple of 8 octets.
    pub ext_communities: Option<&'a [u8]>,
    pub as4_path: Option<AsPathView<'a>>,
    pub as4_aggregator: Option<Aggregator>,
    /// LARGE_COMMUNITY value: a non-empty multiple of 12 octets.
    pub large_communities: Option<&'a [u8]>,
    pub otc: Option<u32>,
    /// Type codes seen, for duplicate detection and for [`AttrsView::has`].
    seen: [u64; 4],
    /// Recognized type codes (all below 64) whose first occurrence was discarded.
    dropped: u64,
}

fn bit(set: &[u64; 4], code: u8) -> bool {
    set.get(usize::from(code >> 6))
        .is_some_and(|w| w & (1u64 << (code & 63)) != 0)
}
fn set_bit(set: &mut [u64; 4], code: u8) {
    if let Some(w) = set.get_mut(usize::from(code >> 6)) {
        *w |= 1u64 << (code & 63);
    }
}

impl<'a> AttrsView<'a> {
    /// Whether an attribute of this type was present (even if discarded).
    pub fn has(&self, code: u8) -> bool {
        bit(&self.seen, code)
    }

    /// The attributes to keep, in received order: the first occurrence of each type,
    /// without the discarded ones. This is what the owned model is built from.
    pub fn kept(&self) -> impl Iterator<Item = RawAttr<'a>> + '_ {
        let mut seen = [0u64; 4];
        RawAttrIter::new(self.raw).filter(move |a| {
            if bit(&seen, a.type_code) {
                return false;
            }
            set_bit(&mut seen, a.type_code);
            a.type_code >= 64 || self.dropped & (1u64 << a.type_code) == 0
        })
    }

    /// The AS path a 4-octet speaker should use: AS_PATH merged with AS4_PATH per
    /// RFC 6793 section 4.2.3 when the session is 2-octet. Returns ASNs per segment.
    pub fn reconstructed_as_path(&self) -> Vec<(u8, Vec<u32>)> {
        let Some(path) = self.as_path else {
            return Vec::new();
        };
        let segs: Vec<(u8, Vec<u32>)> = path
            .segments()
            .map(|s| (s.kind, s.asns().collect()))
            .collect();
        let Some(as4) = self.as4_path else {
            return segs;
        };
        // RFC 6793 4.2.3: an AGGREGATOR other than AS_TRANS means AS4_* are stale.
        if let Some(agg) = self.aggregator {
            if agg.asn != crate::types::AS_TRANS {
                return segs;
            }
        }
        // Confederation segments in AS4_PATH are not valid (RFC 6793 section 6): skip them.
        let as4_segs: Vec<(u8, Vec<u32>)> = as4
            .segments()
            .filter(|s| s.kind == segment::AS_SEQUENCE || s.kind == segment::AS_SET)
            .map(|s| (s.kind, s.asns().collect()))
            .collect();
        let n = merge_count(&segs);
        let n4 = merge_count(&as4_segs);
        if n < n4 {
            return segs;
        }
        let mut keep = n - n4;
        let mut out = Vec::new();
        for (k, asns) in segs {
            if keep == 0 {
                break;
            }
            if k == segment::AS_SET || k == segment::AS_CONFED_SET {
                out.push((k, asns));
                keep -= 1;
            } else {
                let take = keep.min(asns.len());
                out.push((k, asns.into_iter().take(take).collect()));
                keep -= take;
            }
        }
        out.extend(as4_segs);
        out
    }
}

/// The number of ASes RFC 6793 section 4.2.3 compares when merging AS_PATH with AS4_PATH:
/// a set counts one, a sequence its length.
pub fn merge_count(segments: &[(u8, Vec<u32>)]) -> usize {
    segments
        .iter()
        .map(|(kind, asns)| {
            if *kind == segment::AS_SET || *kind == segment::AS_CONFED_SET {
                1
            } else {
                asns.len()
            }
        })
        .sum()
}

/// A validated UPDATE.
#[derive(Clone, Debug)]
pub struct ParsedUpdate<'a> {
    /// IPv4 unicast Withdrawn Routes field.
    pub withdrawn: NlriView<'a>,
    pub attrs: AttrsView<'a>,
    /// IPv4 unicast NLRI field.
    pub nlri: NlriView<'a>,
    /// Set when RFC 7606 requires every announced prefix to be withdrawn; names the
    /// first error that called for it.
    pub treat_as_withdraw: Option<AttrError>,
    /// Attributes ignored under "attribute discard" (including repeats, RFC 7606 section 3 g).
    pub discarded: smallvec::SmallVec<[AttrError; 4]>,
}

impl<'a> ParsedUpdate<'a> {
    pub fn action(&self) -> Action {
        if self.treat_as_withdraw.is_some() {
            Action::TreatAsWithdraw
        } else if !self.discarded.is_empty() {
            Action::AttributeDiscard
        } else {
            Action::Accept
        }
    }

    /// Prefixes announced by this UPDATE with its attributes: the NLRI field, then
    /// MP_REACH_NLRI. Empty under treat-as-withdraw.
    #[inline]
    pub fn announced(&self) -> NlriChain<'a> {
        if self.treat_as_withdraw.is_some() {
            return NlriChain::new([None; 4]);
        }
        NlriChain::new([
            Some(self.nlri),
            self.attrs.mp_reach.and_then(|m| m.nlri),
            None,
            None,
        ])
    }

    /// Prefixes withdrawn by this UPDATE: the Withdrawn Routes field, MP_UNREACH_NLRI,
    /// and under treat-as-withdraw also everything it announced.
    #[inline]
    pub fn withdrawn_all(&self) -> NlriChain<'a> {
        let unreach = self.attrs.mp_unreach.and_then(|m| m.nlri);
        let (nlri, reach) = match self.treat_as_withdraw {
            Some(_) => (Some(self.nlri), self.attrs.mp_reach.and_then(|m| m.nlri)),
            None => (None, None),
        };
        NlriChain::new([Some(self.withdrawn), unreach, nlri, reach])
    }

    /// `Some(family)` if this is an End-of-RIB marker (RFC 4724 section 2): an empty UPDATE
    /// for IPv4 unicast, or one holding only an empty MP_UNREACH_NLRI.
    pub fn end_of_rib(&self) -> Option<Family> {
        if self.withdrawn.is_empty() && self.nlri.is_empty() {
            if self.attrs.raw.is_empty() {
                return Some(Family::Ipv4Unicast);
            }
            let mut it = RawAttrIter::new(self.attrs.raw);
            let only = it.next()?;
            if it.next().is_none() && only.type_code == attr::MP_UNREACH_NLRI {
                let u = self.attrs.mp_unreach?;
                if u.nlri_bytes.is_empty() {
                    return Family::from_afi_safi(u.afi, u.safi);
                }
            }
        }
        None
    }
}

/// Parses the body of an UPDATE (after the 19-octet header).
#[inline]
pub fn parse_update<'a>(
    body: &'a [u8],
    params: &SessionParams,
) -> Result<ParsedUpdate<'a>, UpdateError> {
    let mut c = Cursor::new(body);
    let wlen = usize::from(c.u16().ok_or(UpdateError::LengthsExceedMessage)?);
    let withdrawn_bytes = c.take(wlen).ok_or(UpdateError::LengthsExceedMessage)?;
    let alen = usize::from(c.u16().ok_or(UpdateError::LengthsExceedMessage)?);
    let attr_bytes = c.take(alen).ok_or(UpdateError::LengthsExceedMessage)?;
    let nlri_bytes = c.rest();

    let v4_add_path = params.add_path_for(Family::Ipv4Unicast);
    let withdrawn = NlriView::parse(withdrawn_bytes, Family::Ipv4Unicast, v4_add_path).ok_or(
        UpdateError::InvalidNetworkField {
            field: "Withdrawn Routes",
        },
    )?;
    let nlri = NlriView::parse(nlri_bytes, Family::Ipv4Unicast, v4_add_path)
        .ok_or(UpdateError::InvalidNetworkField { field: "NLRI" })?;

    let mut out = ParsedUpdate {
        withdrawn,
        attrs: AttrsView {
            raw: attr_bytes,
            ..AttrsView::default()
        },
        nlri,
        treat_as_withdraw: None,
        discarded: smallvec::SmallVec::new(),
    };
    parse_attributes(attr_bytes, params, &mut out)?;

    // RFC 7606 section 3 d: missing well-known mandatory attributes, when there is
    // anything to announce. NEXT_HOP is needed only for the NLRI field (RFC 4760 section 3).
    let mp_announces = out.attrs.mp_reach.is_some_and(|m| !m.nlri_bytes.is_empty());
    if out.treat_as_withdraw.is_none() && !params.mrt_rib && (!nlri.is_empty() || mp_announces) {
        let missing = if out.attrs.origin.is_none() && !out.attrs.has(attr::ORIGIN) {
            Some(attr::ORIGIN)
        } else if out.attrs.as_path.is_none() && !out.attrs.has(attr::AS_PATH) {
            Some(attr::AS_PATH)
        } else if !nlri.is_empty() && !out.attrs.has(attr::NEXT_HOP) {
            Some(attr::NEXT_HOP)
        } else {
            None
        };
        if let Some(type_code) = missing {
            out.treat_as_withdraw = Some(AttrError {
                type_code,
                kind: AttrErrorKind::Missing,
            });
        }
    }
    // RFC 7606 section 5.2: treat-as-withdraw needs NLRI to withdraw; an UPDATE of
    // attributes alone that calls for it resets the session.
    if let Some(e) = out.treat_as_withdraw.filter(|_| params.live) {
        let nothing = |v: Option<NlriView<'_>>| v.is_none_or(|n| n.is_empty());
        let no_nlri = nlri.is_empty()
            && withdrawn.is_empty()
            && nothing(out.attrs.mp_reach.and_then(|m| m.nlri))
            && nothing(out.attrs.mp_unreach.and_then(|m| m.nlri));
        if no_nlri {
            let attribute = RawAttrIter::new(attr_bytes)
                .find(|a| a.type_code == e.type_code)
                .map(RawAttr::to_vec)
                .unwrap_or_default();
            return Err(UpdateError::MalformedWithoutNlri {
                type_code: e.type_code,
                kind: e.kind,
                attribute,
            });
        }
    }
    Ok(out)
}

/// Parses a path attribute field on its own, as MRT RIB entries carry them.
pub fn parse_attributes_only<'a>(
    field: &'a [u8],
    params: &SessionParams,
) -> Result<ParsedUpdate<'a>, UpdateError> {
    let mut out = ParsedUpdate {
        withdrawn: NlriView::empty(Family::Ipv4Unicast),
        attrs: AttrsView {
            raw: field,
            ..AttrsView::default()
        },
        nlri: NlriView::empty(Family::Ipv4Unicast),
        treat_as_withdraw: None,
        discarded: smallvec::SmallVec::new(),
    };
    parse_attributes(field, params, &mut out)?;
    Ok(out)
}

fn parse_attributes<'a>(
    field: &'a [u8],
    params: &SessionParams,
    out: &mut ParsedUpdate<'a>,
) -> Result<(), UpdateError> {
    let mut c = Cursor::new(field);
    while !c.is_empty() {
        let start = c.rest();
        let flags = c.u8().unwrap_or(0);
        // RFC 7606 section 4: fewer octets than an attribute header, or a length past the
        // field, is treat-as-withdraw, unless the broken attribute held NLRI.
        let Some(type_code) = c.u8() else {
            taw(out, 0, AttrErrorKind::ListUnderrun);
            break;
        };
        let len = if flags & flags::EXTENDED_LENGTH != 0 {
            c.u16().map(usize::from)
        } else {
            c.u8().map(usize::from)
        };
        let Some(value) = len.and_then(|l| c.take(l)) else {
            if type_code == attr::MP_REACH_NLRI || type_code == attr::MP_UNREACH_NLRI {
                return Err(UpdateError::AttributeListOverrunInMp { type_code });
            }
            let kind = if len.is_none() {
                AttrErrorKind::ListUnderrun
            } else {
                AttrErrorKind::ListOverrun
            };
            taw(out, type_code, kind);
            break;
        };
        let whole = start.get(..start.len() - c.len()).unwrap_or(start);
        let raw = RawAttr {
            flags,
            type_code,
            value,
        };

        if out.attrs.has(type_code) {
            // RFC 7606 section 3 g.
            if type_code == attr::MP_REACH_NLRI || type_code == attr::MP_UNREACH_NLRI {
                return Err(UpdateError::DuplicateMpAttribute { type_code });
            }
            out.discarded.push(AttrError {
                type_code,
                kind: AttrErrorKind::Duplicate,
            });
            continue;
        }
        set_bit(&mut out.attrs.seen, type_code);

        match attr::expected_flags(type_code) {
            None if flags & flags::OPTIONAL == 0 => {
                // RFC 4271 section 6.3: an unrecognized well-known attribute.
                return Err(UpdateError::UnrecognizedWellKnown {
                    attribute: whole.to_vec(),
                });
            }
            None => continue, // unknown optional: carried as is
            Some(expected) => {
                // RFC 7606 section 3 c: Optional and Transitive bits must match; treat-as-
                // withdraw unless the attribute's own rule says otherwise (attribute
                // discard for ATOMIC_AGGREGATE and AGGREGATOR, sections 7.6 and 7.7).
                if flags & (flags::OPTIONAL | flags::TRANSITIVE) != expected {
                    let kind = AttrErrorKind::Flags;
                    if attr::error_action(type_code, kind) == attr::ErrorAction::Discard {
                        discard(out, type_code, kind);
                        continue;
                    }
                    taw(out, type_code, kind);
                    // Still parse MP attributes so their NLRI can be withdrawn.
                    if type_code != attr::MP_REACH_NLRI && type_code != attr::MP_UNREACH_NLRI {
                        continue;
                    }
                }
            }
        }
        if let Err(kind) = parse_known(raw, params, &mut out.attrs) {
            match attr::error_action(type_code, kind) {
                attr::ErrorAction::TreatAsWithdraw => taw(out, type_code, kind),
                attr::ErrorAction::Discard => discard(out, type_code, kind),
                attr::ErrorAction::SessionReset => {
                    return Err(UpdateError::MalformedMpAttribute {
                        type_code,
                        reason: kind.reason(),
                        attribute: raw.to_vec(),
                    })
                }
            }
        }
    }
    Ok(())
}

/// RFC 7606 section 2, attribute discard: the attribute is left out of the route.
fn discard(out: &mut ParsedUpdate<'_>, type_code: u8, kind: AttrErrorKind) {
    out.attrs.dropped |= 1u64.checked_shl(u32::from(type_code)).unwrap_or(0);
    out.discarded.push(AttrError { type_code, kind });
}

fn taw(out: &mut ParsedUpdate<'_>, type_code: u8, kind: AttrErrorKind) {
    if out.treat_as_withdraw.is_none() {
        out.treat_as_withdraw = Some(AttrError { type_code, kind });
    }
}

fn ipv4(v: &[u8]) -> Option<Ipv4Addr> {
    let a: [u8; 4] = v.try_into().ok()?;
    Some(Ipv4Addr::from(a))
}

fn u32_of(v: &[u8]) -> Option<u32> {
    let a: [u8; 4] = v.try_into().ok()?;
    Some(u32::from_be_bytes(a))
}

fn list_of(v: &[u8], unit: usize) -> Result<&[u8], AttrErrorKind> {
    if v.is_empty() || v.len() % unit != 0 {
        Err(AttrErrorKind::Length)
    } else {
        Ok(v)
    }
}

/// Parses one recognized attribute into `a`. The error kind picks the RFC 7606 action.
fn parse_known<'a>(
    raw: RawAttr<'a>,
    params: &SessionParams,
    a: &mut AttrsView<'a>,
) -> Result<(), AttrErrorKind> {
    let v = raw.value;
    match raw.type_code {
        attr::ORIGIN => {
            let [o] = v else {
                return Err(AttrErrorKind::Length);
            };
            a.origin = Some(Origin::from_u8(*o).ok_or(AttrErrorKind::InvalidValue)?);
        }
        attr::AS_PATH => {
            let path =
                AsPathView::parse(v, params.four_octet_as).ok_or(AttrErrorKind::MalformedAsPath)?;
            if params.live {
                // One pass: RFC 7607 section 2 (AS 0) and RFC 5065 section 5 (confederation
                // segments from an external peer), both treat-as-withdraw (RFC 7606 7.2).
                for seg in path.segments() {
                    if seg.asns().any(|asn| asn == 0) {
                        return Err(AttrErrorKind::AsZero);
                    }
                    let confed = seg.kind == segment::AS_CONFED_SEQUENCE
                        || seg.kind == segment::AS_CONFED_SET;
                    if confed && params.external {
                        return Err(AttrErrorKind::ConfedFromOutside);
                    }
                }
            }
            a.as_path = Some(path);
        }
        attr::NEXT_HOP => a.next_hop = Some(ipv4(v).ok_or(AttrErrorKind::Length)?),
        attr::MULTI_EXIT_DISC => a.med = Some(u32_of(v).ok_or(AttrErrorKind::Length)?),
        attr::LOCAL_PREF => {
            if params.external {
                return Err(AttrErrorKind::FromExternalPeer);
            }
            a.local_pref = Some(u32_of(v).ok_or(AttrErrorKind::Length)?);
        }
        attr::ATOMIC_AGGREGATE => {
            if !v.is_empty() {
                return Err(AttrErrorKind::Length);
            }
            a.atomic_aggregate = true;
        }
        attr::AGGREGATOR => {
            let g = parse_aggregator(v, params.four_octet_as).ok_or(AttrErrorKind::Length)?;
            // RFC 7607 section 2: attribute discard (RFC 7606 section 7.7).
            if params.live && g.asn == 0 {
                return Err(AttrErrorKind::AsZero);
            }
            a.aggregator = Some(g);
        }
        attr::COMMUNITIES => a.communities = Some(list_of(v, 4)?),
        attr::ORIGINATOR_ID => {
            if params.external {
                return Err(AttrErrorKind::FromExternalPeer);
            }
            a.originator_id = Some(ipv4(v).ok_or(AttrErrorKind::Length)?);
        }
        attr::CLUSTER_LIST => {
            if params.external {
                return Err(AttrErrorKind::FromExternalPeer);
            }
            a.cluster_list = Some(list_of(v, 4)?);
        }
        attr::MP_REACH_NLRI => a.mp_reach = Some(parse_mp_reach(v, params)?),
        attr::MP_UNREACH_NLRI => a.mp_unreach = Some(parse_mp_unreach(v, params)?),
        attr::EXTENDED_COMMUNITIES => a.ext_communities = Some(list_of(v, 8)?),
        attr::AS4_PATH => {
            // RFC 6793 section 3: a 4-octet session has no use for AS4_PATH.
            if params.four_octet_as && !params.mrt_rib {
                return Err(AttrErrorKind::UnexpectedOnFourOctetSession);
            }
            let path = AsPathView::parse(v, true).ok_or(AttrErrorKind::MalformedAsPath)?;
            // RFC 7607 section 2 sends AS 0 here to RFC 6793 section 6: attribute discard.
            if params.live && path.segments().any(|s| s.asns().any(|asn| asn == 0)) {
                return Err(AttrErrorKind::AsZero);
            }
            a.as4_path = Some(path);
        }
        attr::AS4_AGGREGATOR => {
            if params.four_octet_as && !params.mrt_rib {
                return Err(AttrErrorKind::UnexpectedOnFourOctetSession);
            }
            let g = parse_aggregator(v, true).ok_or(AttrErrorKind::Length)?;
            if params.live && g.asn == 0 {
                return Err(AttrErrorKind::AsZero);
            }
            a.as4_aggregator = Some(g);
        }
        attr::LARGE_COMMUNITY => a.large_communities = Some(list_of(v, 12)?),
        attr::OTC => a.otc = Some(u32_of(v).ok_or(AttrErrorKind::Length)?),
        _ => {}
    }
    Ok(())
}

/// AGGREGATOR (2- or 4-octet AS) or AS4_AGGREGATOR: AS then IPv4 address, nothing more.
pub(crate) fn parse_aggregator(v: &[u8], four_octet: bool) -> Option<Aggregator> {
    let mut c = Cursor::new(v);
    let asn = if four_octet {
        c.u32()?
    } else {
        u32::from(c.u16()?)
    };
    let address = Ipv4Addr::from(c.u32()?);
    c.is_empty().then_some(Aggregator { asn, address })
}

/// Validated NLRI of an MP attribute for the families we route; `None` for the others.
fn family_nlri<'a>(
    family: Option<Family>,
    bytes: &'a [u8],
    params: &SessionParams,
) -> Result<Option<NlriView<'a>>, AttrErrorKind> {
    match family {
        Some(f) => NlriView::parse(bytes, f, params.add_path_for(f))
            .map(Some)
            .ok_or(AttrErrorKind::InvalidNlri),
        None => Ok(None),
    }
}

pub(crate) fn parse_mp_unreach<'a>(
    v: &'a [u8],
    params: &SessionParams,
) -> Result<MpUnreachView<'a>, AttrErrorKind> {
    let mut c = Cursor::new(v);
    let (Some(afi), Some(safi)) = (c.u16(), c.u8()) else {
        return Err(AttrErrorKind::Length);
    };
    let nlri_bytes = c.rest();
    let nlri = family_nlri(Family::from_afi_safi(afi, safi), nlri_bytes, params)?;
    Ok(MpUnreachView {
        afi,
        safi,
        nlri,
        nlri_bytes,
    })
}

pub(crate) fn parse_mp_reach<'a>(
    v: &'a [u8],
    params: &SessionParams,
) -> Result<MpReachView<'a>, AttrErrorKind> {
    let mut c = Cursor::new(v);
    // RFC 6396 section 4.3.4: in RIB entries only the next hop length and next hop remain.
    // The full form starts with an AFI whose first octet is 0; the abbreviated one with a
    // non-zero next hop length.
    if params.mrt_rib && v.first().is_some_and(|&b| b != 0) {
        let nh_len = usize::from(c.u8().ok_or(AttrErrorKind::Length)?);
        let next_hop = c.take(nh_len).ok_or(AttrErrorKind::Length)?;
        let (afi, safi) = match nh_len {
            4 => (AFI_IPV4, SAFI_UNICAST),
            _ => (AFI_IPV6, SAFI_UNICAST),
        };
        return Ok(MpReachView {
            afi,
            safi,
            next_hop,
            reserved: 0,
            nlri: None,
            nlri_bytes: &[],
            abbreviated: true,
        });
    }
    let (Some(afi), Some(safi), Some(nh_len)) = (c.u16(), c.u8(), c.u8()) else {
        return Err(AttrErrorKind::Length);
    };
    let next_hop = c.take(usize::from(nh_len)).ok_or(AttrErrorKind::Length)?;
    let reserved = c.u8().ok_or(AttrErrorKind::Length)?;
    let family = Family::from_afi_safi(afi, safi);
    // Next hop lengths: IPv4 4, or 16/32 with an IPv6 next hop (RFC 8950); IPv6 16 or 32
    // with a link-local address (RFC 2545 section 3).
    let nh_ok = match family {
        Some(Family::Ipv4Unicast) => matches!(nh_len, 4 | 16 | 32),
        Some(Family::Ipv6Unicast) => matches!(nh_len, 16 | 32),
        None => true,
    };
    if !nh_ok {
        return Err(AttrErrorKind::InvalidNextHopLength);
    }
    let nlri_bytes = c.rest();
    let nlri = family_nlri(family, nlri_bytes, params)?;
    Ok(MpReachView {
        afi,
        safi,
        next_hop,
        reserved,
        nlri,
        nlri_bytes,
        abbreviated: false,
    })
}
