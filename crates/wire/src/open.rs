//! OPEN messages (RFC 4271 section 4.2) with capabilities advertisement (RFC 5492) and
//! extended optional parameters (RFC 9072).

use crate::cursor::Cursor;
use crate::message::{finish_length, push_header, MessageType};
use crate::notification::{code, open as sub, Notification};
use crate::types::AS_TRANS;
use std::net::Ipv4Addr;

/// Capability codes (IANA "Capability Codes").
pub mod cap {
    pub const MULTIPROTOCOL: u8 = 1;
    pub const ROUTE_REFRESH: u8 = 2;
    pub const EXTENDED_MESSAGE: u8 = 6;
    pub const BGP_ROLE: u8 = 9;
    pub const GRACEFUL_RESTART: u8 = 64;
    pub const FOUR_OCTET_AS: u8 = 65;
    pub const ADD_PATH: u8 = 69;
    pub const ENHANCED_ROUTE_REFRESH: u8 = 70;
    pub const LONG_LIVED_GRACEFUL_RESTART: u8 = 71;
}

/// Optional parameter type of capabilities (RFC 5492 section 4).
pub const PARAM_CAPABILITIES: u8 = 2;
/// Marks RFC 9072 extended optional parameters.
const PARAM_EXTENDED: u8 = 255;

/// Add-Path send/receive field (RFC 7911 section 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AddPathFamily {
    pub afi: u16,
    pub safi: u8,
    /// 1: receive, 2: send, 3: both.
    pub send_receive: u8,
}

impl AddPathFamily {
    pub fn can_receive(&self) -> bool {
        self.send_receive & 1 != 0
    }
    pub fn can_send(&self) -> bool {
        self.send_receive & 2 != 0
    }
}

/// One family of the graceful restart capability (RFC 4724 section 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GracefulRestartFamily {
    pub afi: u16,
    pub safi: u8,
    /// Flags octet; bit 0x80 is Forwarding State preserved.
    pub flags: u8,
}

/// One family of the long-lived graceful restart capability (RFC 9494 section 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LongLivedFamily {
    pub afi: u16,
    pub safi: u8,
    /// Flags octet; bit 0x80 is Forwarding State preserved.
    pub flags: u8,
    /// Long-lived stale time, seconds (24 bits).
    pub stale_time: u32,
}

/// BGP roles (RFC 9234 section 4.1).
pub mod role {
    pub const PROVIDER: u8 = 0;
    pub const RS: u8 = 1;
    pub const RS_CLIENT: u8 = 2;
    pub const CUSTOMER: u8 = 3;
    pub const PEER: u8 = 4;
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// RFC 4760 section 8.
    Multiprotocol { afi: u16, safi: u8 },
    /// RFC 2918.
    RouteRefresh,
    /// RFC 7313.
    EnhancedRouteRefresh,
    /// RFC 8654.
    ExtendedMessage,
    /// RFC 6793.
    FourOctetAs(u32),
    /// RFC 7911.
    AddPath(Vec<AddPathFamily>),
    /// RFC 4724; `flags` holds the Restart State (0x8) and Notification (0x4, RFC 8538) bits.
    GracefulRestart {
        flags: u8,
        restart_time: u16,
        families: Vec<GracefulRestartFamily>,
    },
    /// RFC 9494.
    LongLivedGracefulRestart(Vec<LongLivedFamily>),
    /// RFC 9234.
    Role(u8),
    /// Any other capability, kept as received.
    Unknown { code: u8, value: Vec<u8> },
}

impl Capability {
    pub fn code(&self) -> u8 {
        match self {
            Capability::Multiprotocol { .. } => cap::MULTIPROTOCOL,
            Capability::RouteRefresh => cap::ROUTE_REFRESH,
            Capability::EnhancedRouteRefresh => cap::ENHANCED_ROUTE_REFRESH,
            Capability::ExtendedMessage => cap::EXTENDED_MESSAGE,
            Capability::FourOctetAs(_) => cap::FOUR_OCTET_AS,
            Capability::AddPath(_) => cap::ADD_PATH,
            Capability::GracefulRestart { .. } => cap::GRACEFUL_RESTART,
            Capability::LongLivedGracefulRestart(_) => cap::LONG_LIVED_GRACEFUL_RESTART,
            Capability::Role(_) => cap::BGP_ROLE,
            Capability::Unknown { code, .. } => *code,
        }
    }

    fn decode(code: u8, value: &[u8]) -> Result<Capability, OpenError> {
        let bad = || OpenError::MalformedCapability { code };
        let mut c = Cursor::new(value);
        let capability = match code {
            cap::MULTIPROTOCOL => {
                let afi = c.u16().ok_or_else(bad)?;
                let _reserved = c.u8().ok_or_else(bad)?;
                let safi = c.u8().ok_or_else(bad)?;
                Capability::Multiprotocol { afi, safi }
            }
            cap::ROUTE_REFRESH => Capability::RouteRefresh,
            cap::ENHANCED_ROUTE_REFRESH => Capability::EnhancedRouteRefresh,
            cap::EXTENDED_MESSAGE => Capability::ExtendedMessage,
            cap::FOUR_OCTET_AS => Capability::FourOctetAs(c.u32().ok_or_else(bad)?),
            cap::BGP_ROLE => Capability::Role(c.u8().ok_or_else(bad)?),
            cap::ADD_PATH => {
                let mut fams = Vec::with_capacity(value.len() / 4);
                while !c.is_empty() {
                    let afi = c.u16().ok_or_else(bad)?;
                    let safi = c.u8().ok_or_else(bad)?;
                    let send_receive = c.u8().ok_or_else(bad)?;
                    fams.push(AddPathFamily {
                        afi,
                        safi,
                        send_receive,
                    });
                }
                Capability::AddPath(fams)
            }
            cap::GRACEFUL_RESTART => {
                let word = c.u16().ok_or_else(bad)?;
                let mut families = Vec::with_capacity(value.len() / 4);
                while !c.is_empty() {
                    let afi = c.u16().ok_or_else(bad)?;
                    let safi = c.u8().ok_or_else(bad)?;
                    let flags = c.u8().ok_or_else(bad)?;
                    families.push(GracefulRestartFamily { afi, safi, flags });
                }
                Capability::GracefulRestart {
                    flags: (word >> 12) as u8,
                    restart_time: word & 0x0fff,
                    families,
                }
            }
            cap::LONG_LIVED_GRACEFUL_RESTART => {
                let mut families = Vec::with_capacity(value.len() / 7);
                while !c.is_empty() {
                    let afi = c.u16().ok_or_else(bad)?;
                    let safi = c.u8().ok_or_else(bad)?;
                    let flags = c.u8().ok_or_else(bad)?;
                    let hi = c.u8().ok_or_else(bad)?;
                    let lo = c.u16().ok_or_else(bad)?;
                    families.push(LongLivedFamily {
                        afi,
                        safi,
                        flags,
                        stale_time: (u32::from(hi) << 16) | u32::from(lo),
                    });
                }
                Capability::LongLivedGracefulRestart(families)
            }
            _ => {
                return Ok(Capability::Unknown {
                    code,
                    value: value.to_vec(),
                })
            }
        };
        // Fixed-size capabilities must be exactly their size: trailing octets mean the
        // sender and we disagree on the format.
        if !c.is_empty() {
            return Err(bad());
        }
        Ok(capability)
    }

    fn encode_value(&self, out: &mut Vec<u8>) {
        match self {
            Capability::Multiprotocol { afi, safi } => {
                out.extend_from_slice(&afi.to_be_bytes());
                out.push(0);
                out.push(*safi);
            }
            Capability::RouteRefresh
            | Capability::EnhancedRouteRefresh
            | Capability::ExtendedMessage => {}
            Capability::FourOctetAs(asn) => out.extend_from_slice(&asn.to_be_bytes()),
            Capability::AddPath(fams) => {
                for f in fams {
                    out.extend_from_slice(&f.afi.to_be_bytes());
                    out.push(f.safi);
                    out.push(f.send_receive);
                }
            }
            Capability::GracefulRestart {
                flags,
                restart_time,
                families,
            } => {
                let word = (u16::from(*flags & 0xf) << 12) | (restart_time & 0x0fff);
                out.extend_from_slice(&word.to_be_bytes());
                for f in families {
                    out.extend_from_slice(&f.afi.to_be_bytes());
                    out.push(f.safi);
                    out.push(f.flags);
                }
            }
            Capability::LongLivedGracefulRestart(families) => {
                for f in families {
                    out.extend_from_slice(&f.afi.to_be_bytes());
                    out.push(f.safi);
                    out.push(f.flags);
                    out.extend_from_slice(&f.stale_time.min(0x00ff_ffff).to_be_bytes()[1..]);
                }
            }
            Capability::Role(r) => out.push(*r),
            Capability::Unknown { value, .. } => out.extend_from_slice(value),
        }
    }
}

/// An optional parameter of OPEN. Type 2 holds capabilities; the rest (type 1,
/// authentication, is deprecated) are kept so the caller can reject them by type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OptionalParameter {
    Capabilities(Vec<Capability>),
    Other { param_type: u8, value: Vec<u8> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Open {
    pub version: u8,
    /// "My Autonomous System": AS_TRANS when the speaker's AS does not fit 2 octets.
    pub my_as: u16,
    pub hold_time: u16,
    pub bgp_identifier: Ipv4Addr,
    pub params: Vec<OptionalParameter>,
    /// The parameters were (or must be) encoded as RFC 9072 extended optional parameters.
    pub extended_params: bool,
}

/// An OPEN that must be refused; each variant names its NOTIFICATION (RFC 4271 section 6.2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("unsupported BGP version {0} (only 4 is supported)")]
    UnsupportedVersion(u8),
    #[error("unacceptable hold time {0} s (must be 0 or at least 3)")]
    UnacceptableHoldTime(u16),
    #[error("BGP identifier 0.0.0.0 is not valid (RFC 6286)")]
    BadBgpIdentifier,
    #[error("optional parameters overrun the message")]
    MalformedParameters,
    #[error("unsupported optional parameter type {0}")]
    UnsupportedOptionalParameter(u8),
    #[error("capability {code} is malformed")]
    MalformedCapability { code: u8 },
}

impl OpenError {
    pub fn notification(&self) -> Notification {
        match self {
            // Data: the largest version we support (RFC 4271 section 6.2).
            OpenError::UnsupportedVersion(_) => {
                Notification::new(code::OPEN_MESSAGE, sub::UNSUPPORTED_VERSION, vec![0, 4])
            }
            OpenError::UnacceptableHoldTime(_) => {
                Notification::new(code::OPEN_MESSAGE, sub::UNACCEPTABLE_HOLD_TIME, vec![])
            }
            OpenError::BadBgpIdentifier => {
                Notification::new(code::OPEN_MESSAGE, sub::BAD_BGP_IDENTIFIER, vec![])
            }
            OpenError::MalformedParameters | OpenError::MalformedCapability { .. } => {
                Notification::new(code::OPEN_MESSAGE, sub::UNSPECIFIC, vec![])
            }
            OpenError::UnsupportedOptionalParameter(_) => Notification::new(
                code::OPEN_MESSAGE,
                sub::UNSUPPORTED_OPTIONAL_PARAMETER,
                vec![],
            ),
        }
    }
}

impl Open {
    /// An OPEN for `asn`, with `my_as` set to AS_TRANS when the AS needs 4 octets.
    pub fn new(asn: u32, hold_time: u16, bgp_identifier: Ipv4Addr, caps: Vec<Capability>) -> Open {
        Open {
            version: 4,
            my_as: u16::try_from(asn).unwrap_or(AS_TRANS as u16),
            hold_time,
            bgp_identifier,
            params: vec![OptionalParameter::Capabilities(caps)],
            extended_params: false,
        }
    }

    /// Decodes the body of an OPEN (after the 19-octet header).
    pub fn decode_body(body: &[u8]) -> Result<Open, OpenError> {
        let mut c = Cursor::new(body);
        let short = OpenError::MalformedParameters;
        let version = c.u8().ok_or(short.clone())?;
        if version != 4 {
            return Err(OpenError::UnsupportedVersion(version));
        }
        let my_as = c.u16().ok_or(short.clone())?;
        let hold_time = c.u16().ok_or(short.clone())?;
        let bgp_identifier = Ipv4Addr::from(c.u32().ok_or(short.clone())?);
        let mut opt_len = usize::from(c.u8().ok_or(short.clone())?);
        let mut extended_params = false;
        // RFC 9072 section 2: a length of 255 followed by type 255 marks the extended form.
        if opt_len == 255 && c.rest().first() == Some(&PARAM_EXTENDED) {
            let _ = c.u8();
            opt_len = usize::from(c.u16().ok_or(short.clone())?);
            extended_params = true;
        }
        let params_bytes = c.take(opt_len).ok_or(short.clone())?;
        if !c.is_empty() {
            return Err(short);
        }
        let mut p = Cursor::new(params_bytes);
        let mut params = Vec::new();
        while !p.is_empty() {
            let param_type = p.u8().ok_or(OpenError::MalformedParameters)?;
            let len = if extended_params {
                p.u16().map(usize::from)
            } else {
                p.u8().map(usize::from)
            }
            .ok_or(OpenError::MalformedParameters)?;
            let value = p.take(len).ok_or(OpenError::MalformedParameters)?;
            if param_type == PARAM_CAPABILITIES {
                let mut caps = Vec::new();
                let mut cc = Cursor::new(value);
                while !cc.is_empty() {
                    let code = cc.u8().ok_or(OpenError::MalformedParameters)?;
                    let clen = cc.u8().ok_or(OpenError::MalformedParameters)?;
                    let cval = cc
                        .take(usize::from(clen))
                        .ok_or(OpenError::MalformedCapability { code })?;
                    caps.push(Capability::decode(code, cval)?);
                }
                params.push(OptionalParameter::Capabilities(caps));
            } else {
                params.push(OptionalParameter::Other {
                    param_type,
                    value: value.to_vec(),
                });
            }
        }
        let open = Open {
            version,
            my_as,
            hold_time,
            bgp_identifier,
            params,
            extended_params,
        };
        open.validate()?;
        Ok(open)
    }

    /// The checks of RFC 4271 section 6.2 that need no configuration. Peer AS and
    /// identifier collisions are the session's to check.
    fn validate(&self) -> Result<(), OpenError> {
        if self.hold_time == 1 || self.hold_time == 2 {
            return Err(OpenError::UnacceptableHoldTime(self.hold_time));
        }
        if self.bgp_identifier.is_unspecified() {
            return Err(OpenError::BadBgpIdentifier);
        }
        for p in &self.params {
            if let OptionalParameter::Other { param_type, .. } = p {
                return Err(OpenError::UnsupportedOptionalParameter(*param_type));
            }
        }
        Ok(())
    }

    pub fn capabilities(&self) -> impl Iterator<Item = &Capability> {
        self.params.iter().flat_map(|p| match p {
            OptionalParameter::Capabilities(c) => c.as_slice(),
            OptionalParameter::Other { .. } => &[],
        })
    }

    /// The speaker's AS: from the 4-octet AS capability when present (RFC 6793 section 3).
    pub fn asn(&self) -> u32 {
        self.capabilities()
            .find_map(|c| match c {
                Capability::FourOctetAs(a) => Some(*a),
                _ => None,
            })
            .unwrap_or(u32::from(self.my_as))
    }

    pub fn has(&self, code: u8) -> bool {
        self.capabilities().any(|c| c.code() == code)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut params = Vec::new();
        let ext = self.extended_params || self.params_len_short() > 255;
        for p in &self.params {
            let (ptype, value) = match p {
                OptionalParameter::Capabilities(caps) => {
                    let mut v = Vec::new();
                    for c in caps {
                        v.push(c.code());
                        let at = v.len();
                        v.push(0);
                        c.encode_value(&mut v);
                        let len = v.len() - at - 1;
                        if let Some(l) = v.get_mut(at) {
                            *l = len.min(255) as u8;
                        }
                    }
                    (PARAM_CAPABILITIES, v)
                }
                OptionalParameter::Other { param_type, value } => (*param_type, value.clone()),
            };
            params.push(ptype);
            if ext {
                params.extend_from_slice(&(value.len().min(65535) as u16).to_be_bytes());
            } else {
                params.push(value.len().min(255) as u8);
            }
            params.extend_from_slice(&value);
        }
        let mut out = Vec::with_capacity(32 + params.len());
        push_header(&mut out, MessageType::Open);
        out.push(self.version);
        out.extend_from_slice(&self.my_as.to_be_bytes());
        out.extend_from_slice(&self.hold_time.to_be_bytes());
        out.extend_from_slice(&self.bgp_identifier.octets());
        if ext {
            out.push(255);
            out.push(PARAM_EXTENDED);
            out.extend_from_slice(&(params.len().min(65535) as u16).to_be_bytes());
        } else {
            out.push(params.len() as u8);
        }
        out.extend_from_slice(&params);
        finish_length(&mut out);
        out
    }

    fn params_len_short(&self) -> usize {
        self.params
            .iter()
            .map(|p| match p {
                OptionalParameter::Capabilities(caps) => {
                    2 + caps
                        .iter()
                        .map(|c| {
                            let mut v = Vec::new();
                            c.encode_value(&mut v);
                            2 + v.len()
                        })
                        .sum::<usize>()
                }
                OptionalParameter::Other { value, .. } => 2 + value.len(),
            })
            .sum()
    }
}
