//! Packing prefixes into UPDATE messages: one attribute set, as many prefixes per message as
//! the negotiated maximum allows (4,096 or 65,535 octets), the attributes encoded once.
//!
//! Messages are appended back to back to one buffer, so a caller can hand the same bytes to
//! every member of an update group and write them with one call.

use crate::attr::{self, flags};
use crate::attributes::PathAttributes;
use crate::message::{finish_length_at, push_header, MessageType, SessionParams, HEADER_LEN};
use crate::nlri::Nlri;
use crate::types::Family;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("path attributes of {0} octets leave no room for NLRI in one UPDATE")]
    AttributesTooLarge(usize),
}

/// Builds UPDATEs for one session setting (AS width, maximum message size).
#[derive(Clone, Debug)]
pub struct UpdateBuilder {
    params: SessionParams,
    max_len: usize,
}

/// Encodes NLRI from `nlri` while the message stays within `budget` (an offset in `out`);
/// returns those that did not fit.
#[inline]
fn fill<'n>(out: &mut Vec<u8>, nlri: &'n [Nlri], budget: usize) -> &'n [Nlri] {
    let mut used = 0;
    for n in nlri {
        if out.len() + n.wire_len() > budget {
            break;
        }
        n.encode(out);
        used += 1;
    }
    nlri.get(used..).unwrap_or(&[])
}

/// Octets of an MP_REACH_NLRI / MP_UNREACH_NLRI header with the extended length form.
const MP_ATTR_HEADER: usize = 4;

impl UpdateBuilder {
    pub fn new(params: SessionParams) -> UpdateBuilder {
        UpdateBuilder {
            max_len: params.max_message_len(),
            params,
        }
    }

    /// The largest message this builder writes.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Encodes the attributes of a path once, without MP attributes (the builder adds
    /// them per message). Pass the result to [`UpdateBuilder::announce`] for every batch.
    pub fn encode_attributes(&self, attrs: &PathAttributes) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        for a in &attrs.list {
            let code = a.value.type_code();
            if code != attr::MP_REACH_NLRI && code != attr::MP_UNREACH_NLRI {
                a.encode(&self.params, &mut out);
            }
        }
        out
    }

    /// Appends UPDATEs announcing `nlri` with the pre-encoded attributes. IPv4 unicast goes
    /// in the NLRI field (the attributes must hold NEXT_HOP); IPv6 in MP_REACH_NLRI with
    /// `mp_next_hop` (16 or 32 octets). Returns the number of messages written.
    pub fn announce(
        &self,
        encoded_attrs: &[u8],
        family: Family,
        mp_next_hop: &[u8],
        nlri: &[Nlri],
        out: &mut Vec<u8>,
    ) -> Result<usize, BuildError> {
        if nlri.is_empty() {
            return Ok(0);
        }
        let mp = family != Family::Ipv4Unicast;
        let fixed = HEADER_LEN
            + 4
            + encoded_attrs.len()
            + if mp {
                MP_ATTR_HEADER + 5 + mp_next_hop.len()
            } else {
                0
            };
        // Room for at least the longest possible entry.
        if fixed + 21 > self.max_len {
            return Err(BuildError::AttributesTooLarge(encoded_attrs.len()));
        }
        let mut messages = 0;
        let mut rest = nlri;
        while !rest.is_empty() {
            let start = out.len();
            push_header(out, MessageType::Update);
            out.extend_from_slice(&[0, 0]); // no withdrawn routes
            let attr_len_at = out.len();
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(encoded_attrs);
            let mp_len_at = out.len() + 2;
            if mp {
                out.extend_from_slice(&[
                    flags::OPTIONAL | flags::EXTENDED_LENGTH,
                    attr::MP_REACH_NLRI,
                    0,
                    0,
                ]);
                out.extend_from_slice(&family.afi().to_be_bytes());
                out.push(family.safi());
                out.push(mp_next_hop.len() as u8);
                out.extend_from_slice(mp_next_hop);
                out.push(0);
            }
            rest = fill(out, rest, start + self.max_len);
            let attr_total = if mp {
                let mp_value = out.len() - mp_len_at - 2;
                if let Some(l) = out.get_mut(mp_len_at..mp_len_at + 2) {
                    l.copy_from_slice(&(mp_value as u16).to_be_bytes());
                }
                out.len() - attr_len_at - 2
            } else {
                encoded_attrs.len()
            };
            if let Some(l) = out.get_mut(attr_len_at..attr_len_at + 2) {
                l.copy_from_slice(&(attr_total as u16).to_be_bytes());
            }
            finish_length_at(out, start);
            messages += 1;
        }
        Ok(messages)
    }

    /// Appends UPDATEs withdrawing `nlri`: the Withdrawn Routes field for IPv4 unicast,
    /// MP_UNREACH_NLRI otherwise. Returns the number of messages written.
    pub fn withdraw(&self, family: Family, nlri: &[Nlri], out: &mut Vec<u8>) -> usize {
        let mut messages = 0;
        let mut rest = nlri;
        let mp = family != Family::Ipv4Unicast;
        while !rest.is_empty() {
            let start = out.len();
            push_header(out, MessageType::Update);
            let len_at = out.len();
            if mp {
                out.extend_from_slice(&[0, 0, 0, 0]);
                out.extend_from_slice(&[
                    flags::OPTIONAL | flags::EXTENDED_LENGTH,
                    attr::MP_UNREACH_NLRI,
                    0,
                    0,
                ]);
                out.extend_from_slice(&family.afi().to_be_bytes());
                out.push(family.safi());
            } else {
                out.extend_from_slice(&[0, 0]);
            }
            let budget = start + self.max_len - if mp { 0 } else { 2 };
            let body_at = out.len();
            rest = fill(out, rest, budget);
            let body = out.len() - body_at;
            if mp {
                // Attribute length field, then the MP_UNREACH_NLRI length.
                let attr_total = (4 + 3 + body) as u16;
                let mp_value = (3 + body) as u16;
                if let Some(l) = out.get_mut(len_at + 2..len_at + 4) {
                    l.copy_from_slice(&attr_total.to_be_bytes());
                }
                if let Some(l) = out.get_mut(len_at + 6..len_at + 8) {
                    l.copy_from_slice(&mp_value.to_be_bytes());
                }
            } else {
                if let Some(l) = out.get_mut(len_at..len_at + 2) {
                    l.copy_from_slice(&(body as u16).to_be_bytes());
                }
                out.extend_from_slice(&[0, 0]);
            }
            finish_length_at(out, start);
            messages += 1;
        }
        messages
    }

    /// The End-of-RIB marker for a family (RFC 4724 section 2).
    pub fn end_of_rib(family: Family) -> Vec<u8> {
        let mut out = Vec::with_capacity(30);
        push_header(&mut out, MessageType::Update);
        match family {
            Family::Ipv4Unicast => out.extend_from_slice(&[0, 0, 0, 0]),
            _ => {
                out.extend_from_slice(&[0, 0, 0, 6, flags::OPTIONAL, attr::MP_UNREACH_NLRI, 3]);
                out.extend_from_slice(&family.afi().to_be_bytes());
                out.push(family.safi());
            }
        }
        finish_length_at(&mut out, 0);
        out
    }
}

/// An UPDATE as owned values: what a test or a tool builds by hand. Encoding keeps the
/// attribute order and flags, so a decoded message re-encodes to the same octets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdateMessage {
    /// IPv4 unicast Withdrawn Routes field.
    pub withdrawn: Vec<Nlri>,
    pub attributes: PathAttributes,
    /// IPv4 unicast NLRI field.
    pub nlri: Vec<Nlri>,
}

impl UpdateMessage {
    pub fn from_parsed(u: &crate::update::ParsedUpdate<'_>, params: &SessionParams) -> Self {
        UpdateMessage {
            withdrawn: u.withdrawn.iter().collect(),
            attributes: PathAttributes::from_view(&u.attrs, params),
            nlri: u.nlri.iter().collect(),
        }
    }

    /// The complete message, header included. Does not split: the caller keeps it under
    /// the session's maximum (the packer above does that for bulk announcements).
    pub fn encode(&self, params: &SessionParams) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        push_header(&mut out, MessageType::Update);
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        self.withdrawn.iter().for_each(|n| n.encode(&mut out));
        let wlen = out.len() - at - 2;
        if let Some(l) = out.get_mut(at..at + 2) {
            l.copy_from_slice(&(wlen as u16).to_be_bytes());
        }
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        self.attributes.encode(params, &mut out);
        let alen = out.len() - at - 2;
        if let Some(l) = out.get_mut(at..at + 2) {
            l.copy_from_slice(&(alen as u16).to_be_bytes());
        }
        self.nlri.iter().for_each(|n| n.encode(&mut out));
        finish_length_at(&mut out, 0);
        out
    }
}
