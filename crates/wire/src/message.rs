//! The BGP message header, framing of a byte stream into messages, and dispatch to the
//! per-type decoders (RFC 4271 sections 4.1 and 6.1, RFC 8654 for extended messages).

use crate::notification::{self, code, Notification};
use crate::open::{Open, OpenError};
use crate::update::{parse_update, ParsedUpdate, UpdateError};

pub const HEADER_LEN: usize = 19;
/// The largest message without the extended message capability.
pub const MAX_MESSAGE_LEN: usize = 4096;
/// The largest message once both sides advertised extended messages (RFC 8654).
pub const MAX_EXTENDED_MESSAGE_LEN: usize = 65535;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageType {
    Open = 1,
    Update = 2,
    Notification = 3,
    Keepalive = 4,
    RouteRefresh = 5,
}

impl MessageType {
    pub fn from_u8(v: u8) -> Option<MessageType> {
        match v {
            1 => Some(MessageType::Open),
            2 => Some(MessageType::Update),
            3 => Some(MessageType::Notification),
            4 => Some(MessageType::Keepalive),
            5 => Some(MessageType::RouteRefresh),
            _ => None,
        }
    }
}

/// What the decoder must know of the session a message came from. Both sides of a session
/// derive it from the negotiated capabilities; MRT readers set it from the record type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SessionParams {
    /// 4-octet AS numbers in AS_PATH and AGGREGATOR (RFC 6793).
    pub four_octet_as: bool,
    /// Messages up to 65,535 octets (RFC 8654).
    pub extended_message: bool,
    /// Add-Path path identifiers in received NLRI, per [`crate::Family::index`] (RFC 7911).
    pub add_path: [bool; 2],
    /// The session is external (eBGP): LOCAL_PREF, ORIGINATOR_ID and CLUSTER_LIST from it are
    /// discarded (RFC 7606 sections 7.5, 7.9, 7.10).
    pub external: bool,
    /// Attributes of an MRT RIB entry (RFC 6396 section 4.3.4): MP_REACH_NLRI may hold only
    /// the next hop, and the prefix comes from the record, not from NLRI.
    pub mrt_rib: bool,
    /// An UPDATE from a live session: the checks on what a peer may send apply (AS 0, RFC
    /// 7607; confederation segments from outside, RFC 5065), which a file's records (MRT)
    /// are decoded without, as they were recorded.
    pub live: bool,
}

impl SessionParams {
    pub fn max_message_len(&self) -> usize {
        if self.extended_message {
            MAX_EXTENDED_MESSAGE_LEN
        } else {
            MAX_MESSAGE_LEN
        }
    }
    pub fn add_path_for(&self, family: crate::Family) -> bool {
        self.add_path.get(family.index()).copied().unwrap_or(false)
    }
}

/// ROUTE-REFRESH (RFC 2918), with the message subtype of enhanced route refresh (RFC 7313).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RouteRefresh {
    pub afi: u16,
    /// 0: normal request, 1: Beginning of Route Refresh, 2: End of Route Refresh.
    pub subtype: u8,
    pub safi: u8,
}

impl RouteRefresh {
    pub const REQUEST: u8 = 0;
    pub const BORR: u8 = 1;
    pub const EORR: u8 = 2;

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(23);
        push_header(&mut out, MessageType::RouteRefresh);
        out.extend_from_slice(&self.afi.to_be_bytes());
        out.push(self.subtype);
        out.push(self.safi);
        finish_length(&mut out);
        out
    }
}

/// One decoded message. UPDATE is a view over the caller's buffer; it is large but lives on
/// the stack, which is cheaper than a heap allocation per message.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Message<'a> {
    Open(Open),
    Update(ParsedUpdate<'a>),
    Notification(Notification),
    Keepalive,
    RouteRefresh(RouteRefresh),
}

/// A message that must end the session: each variant names the NOTIFICATION to send.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("message header marker is not all ones")]
    ConnectionNotSynchronized,
    #[error("bad message length {length}")]
    BadMessageLength { length: u16 },
    #[error("bad message type {0}")]
    BadMessageType(u8),
    #[error("OPEN: {0}")]
    Open(#[from] OpenError),
    #[error("UPDATE: {0}")]
    Update(#[from] UpdateError),
    #[error("ROUTE-REFRESH of {} octets (must be 23)", .message.len())]
    RouteRefreshLength { message: Vec<u8> },
}

impl DecodeError {
    /// The NOTIFICATION this error calls for (RFC 4271 section 6).
    pub fn notification(&self) -> Notification {
        match self {
            DecodeError::ConnectionNotSynchronized => Notification::new(
                code::MESSAGE_HEADER,
                notification::header::CONNECTION_NOT_SYNCHRONIZED,
                vec![],
            ),
            DecodeError::BadMessageLength { length } => Notification::new(
                code::MESSAGE_HEADER,
                notification::header::BAD_MESSAGE_LENGTH,
                length.to_be_bytes().to_vec(),
            ),
            DecodeError::BadMessageType(t) => Notification::new(
                code::MESSAGE_HEADER,
                notification::header::BAD_MESSAGE_TYPE,
                vec![*t],
            ),
            DecodeError::Open(e) => e.notification(),
            DecodeError::Update(e) => e.notification(),
            // RFC 7313 section 5: the data field carries the complete message.
            DecodeError::RouteRefreshLength { message } => Notification::new(
                code::ROUTE_REFRESH,
                notification::route_refresh::INVALID_MESSAGE_LENGTH,
                message.clone(),
            ),
        }
    }
}

/// Checks the header at the start of `buf` (RFC 4271 section 6.1). Returns the message
/// length once the whole message is in `buf`, `Ok(None)` while more bytes are needed.
pub fn frame(buf: &[u8], max_len: usize) -> Result<Option<usize>, DecodeError> {
    let Some(header) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let (marker, rest) = header.split_at(16);
    if marker.iter().any(|&b| b != 0xff) {
        return Err(DecodeError::ConnectionNotSynchronized);
    }
    let (len_bytes, ty) = rest.split_at(2);
    let length = u16::from_be_bytes([
        len_bytes.first().copied().unwrap_or(0),
        len_bytes.get(1).copied().unwrap_or(0),
    ]);
    let ty = ty.first().copied().unwrap_or(0);
    let len = usize::from(length);
    let Some(mtype) = MessageType::from_u8(ty) else {
        // RFC 4271 6.1 checks the length before the type.
        if !(HEADER_LEN..=max_len).contains(&len) {
            return Err(DecodeError::BadMessageLength { length });
        }
        return Err(DecodeError::BadMessageType(ty));
    };
    // RFC 8654 section 4: OPEN and KEEPALIVE keep their old limits.
    let type_ok = match mtype {
        MessageType::Open => (29..=MAX_MESSAGE_LEN).contains(&len),
        MessageType::Update => (23..=max_len).contains(&len),
        MessageType::Notification => (21..=max_len).contains(&len),
        MessageType::Keepalive => len == HEADER_LEN,
        // Wrong ROUTE-REFRESH lengths get their own error (RFC 7313 section 5).
        MessageType::RouteRefresh => (HEADER_LEN..=max_len).contains(&len),
    };
    if !type_ok {
        return Err(DecodeError::BadMessageLength { length });
    }
    Ok((buf.len() >= len).then_some(len))
}

/// Decodes one complete message (header included), as framed by [`frame`].
///
/// A session's receive loop should send UPDATEs (type 2) straight to
/// [`crate::parse_update`]: wrapping the 448-octet view in [`Message`] costs a copy that
/// measured about a quarter of the decode time of a full table.
#[inline]
pub fn decode<'a>(msg: &'a [u8], params: &SessionParams) -> Result<Message<'a>, DecodeError> {
    let len = match frame(msg, params.max_message_len())? {
        Some(len) => len,
        None => {
            return Err(DecodeError::BadMessageLength {
                length: msg.len().min(usize::from(u16::MAX)) as u16,
            })
        }
    };
    let body = msg.get(HEADER_LEN..len).unwrap_or(&[]);
    let ty = msg.get(18).copied().unwrap_or(0);
    match MessageType::from_u8(ty) {
        Some(MessageType::Open) => Ok(Message::Open(Open::decode_body(body)?)),
        Some(MessageType::Update) => Ok(Message::Update(parse_update(body, params)?)),
        Some(MessageType::Notification) => {
            let (&c, rest) = body
                .split_first()
                .ok_or(DecodeError::BadMessageLength { length: len as u16 })?;
            let (&s, data) = rest
                .split_first()
                .ok_or(DecodeError::BadMessageLength { length: len as u16 })?;
            Ok(Message::Notification(Notification::new(
                c,
                s,
                data.to_vec(),
            )))
        }
        Some(MessageType::Keepalive) => Ok(Message::Keepalive),
        Some(MessageType::RouteRefresh) => match body {
            [a0, a1, subtype, safi] => Ok(Message::RouteRefresh(RouteRefresh {
                afi: u16::from_be_bytes([*a0, *a1]),
                subtype: *subtype,
                safi: *safi,
            })),
            _ => Err(DecodeError::RouteRefreshLength {
                message: msg.get(..len).unwrap_or(msg).to_vec(),
            }),
        },
        None => Err(DecodeError::BadMessageType(ty)),
    }
}

/// A KEEPALIVE: the header alone.
pub fn keepalive() -> [u8; HEADER_LEN] {
    let mut m = [0xffu8; HEADER_LEN];
    if let Some(tail) = m.get_mut(16..) {
        tail.copy_from_slice(&[0, HEADER_LEN as u8, MessageType::Keepalive as u8]);
    }
    m
}

/// Starts a message in `out`: marker, a length to be filled in, type.
pub(crate) fn push_header(out: &mut Vec<u8>, ty: MessageType) {
    out.extend_from_slice(&[0xff; 16]);
    out.extend_from_slice(&[0, 0]);
    out.push(ty as u8);
}

/// Writes the length of the message that starts at the beginning of `out`.
pub(crate) fn finish_length(out: &mut [u8]) {
    finish_length_at(out, 0);
}

/// Writes the length of the message that starts at `start` in `out`.
pub(crate) fn finish_length_at(out: &mut [u8], start: usize) {
    let len = out.len().saturating_sub(start).min(usize::from(u16::MAX)) as u16;
    if let Some(l) = out.get_mut(start + 16..start + 18) {
        l.copy_from_slice(&len.to_be_bytes());
    }
}
