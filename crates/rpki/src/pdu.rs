//! The RPKI-to-Router protocol's PDUs (RFC 8210 section 5; version 2's ASPA PDU from
//! draft-ietf-sidrops-8210bis): the router's side, so queries are encoded and everything a
//! cache sends is decoded. Decoding never panics: a PDU that does not parse is an
//! [`RtrError`] naming the error code the router reports back (RFC 8210 section 12).

use crate::vrp::Vrp;
use ribshard_wire::Prefix;
use std::net::{Ipv4Addr, Ipv6Addr};

pub const SERIAL_NOTIFY: u8 = 0;
pub const SERIAL_QUERY: u8 = 1;
pub const RESET_QUERY: u8 = 2;
pub const CACHE_RESPONSE: u8 = 3;
pub const IPV4_PREFIX: u8 = 4;
pub const IPV6_PREFIX: u8 = 6;
pub const END_OF_DATA: u8 = 7;
pub const CACHE_RESET: u8 = 8;
pub const ROUTER_KEY: u8 = 9;
pub const ERROR_REPORT: u8 = 10;
pub const ASPA: u8 = 11;

/// The largest PDU taken: an ASPA of thousands of providers, or an error report quoting
/// one, stays far below it; anything longer is corrupt.
pub const MAX_PDU: usize = 1 << 20;

/// RFC 8210 section 12's error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    CorruptData,
    InternalError,
    NoDataAvailable,
    InvalidRequest,
    UnsupportedProtocolVersion,
    UnsupportedPduType,
    WithdrawalOfUnknownRecord,
    DuplicateAnnouncement,
    UnexpectedProtocolVersion,
    Other(u16),
}

impl ErrorCode {
    pub fn from_u16(v: u16) -> ErrorCode {
        match v {
            0 => ErrorCode::CorruptData,
            1 => ErrorCode::InternalError,
            2 => ErrorCode::NoDataAvailable,
            3 => ErrorCode::InvalidRequest,
            4 => ErrorCode::UnsupportedProtocolVersion,
            5 => ErrorCode::UnsupportedPduType,
            6 => ErrorCode::WithdrawalOfUnknownRecord,
            7 => ErrorCode::DuplicateAnnouncement,
            8 => ErrorCode::UnexpectedProtocolVersion,
            n => ErrorCode::Other(n),
        }
    }

    pub fn code(self) -> u16 {
        match self {
            ErrorCode::CorruptData => 0,
            ErrorCode::InternalError => 1,
            ErrorCode::NoDataAvailable => 2,
            ErrorCode::InvalidRequest => 3,
            ErrorCode::UnsupportedProtocolVersion => 4,
            ErrorCode::UnsupportedPduType => 5,
            ErrorCode::WithdrawalOfUnknownRecord => 6,
            ErrorCode::DuplicateAnnouncement => 7,
            ErrorCode::UnexpectedProtocolVersion => 8,
            ErrorCode::Other(n) => n,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            ErrorCode::CorruptData => "Corrupt Data",
            ErrorCode::InternalError => "Internal Error",
            ErrorCode::NoDataAvailable => "No Data Available",
            ErrorCode::InvalidRequest => "Invalid Request",
            ErrorCode::UnsupportedProtocolVersion => "Unsupported Protocol Version",
            ErrorCode::UnsupportedPduType => "Unsupported PDU Type",
            ErrorCode::WithdrawalOfUnknownRecord => "Withdrawal of Unknown Record",
            ErrorCode::DuplicateAnnouncement => "Duplicate Announcement Received",
            ErrorCode::UnexpectedProtocolVersion => "Unexpected Protocol Version",
            ErrorCode::Other(n) => return write!(f, "error code {n}"),
        };
        f.write_str(s)
    }
}

/// Why a PDU from the cache was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RtrError {
    #[error("PDU type {pdu} of {len} octets: {why}")]
    Corrupt {
        pdu: u8,
        len: usize,
        why: &'static str,
    },
    #[error("PDU type {0} is not one a cache sends")]
    UnsupportedPdu(u8),
    #[error("the cache answered in protocol version {got}, the session runs {want}")]
    UnexpectedVersion { got: u8, want: u8 },
}

impl RtrError {
    /// The error code reported back to the cache.
    pub fn code(&self) -> ErrorCode {
        match self {
            RtrError::Corrupt { .. } => ErrorCode::CorruptData,
            RtrError::UnsupportedPdu(_) => ErrorCode::UnsupportedPduType,
            RtrError::UnexpectedVersion { .. } => ErrorCode::UnexpectedProtocolVersion,
        }
    }
}

/// Timing a cache gives in End of Data (RFC 8210 section 6), in seconds; version 0
/// caches give none, and RFC 8210's defaults apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub refresh: u32,
    pub retry: u32,
    pub expire: u32,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            refresh: 3600,
            retry: 600,
            expire: 7200,
        }
    }
}

/// An ASPA record: the customer AS and its provider ASes (empty in a withdrawal).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AspaRecord {
    pub customer: u32,
    pub providers: Vec<u32>,
}

/// A PDU a cache sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromCache {
    SerialNotify {
        session: u16,
        serial: u32,
    },
    CacheResponse {
        session: u16,
    },
    Prefix {
        announce: bool,
        vrp: Vrp,
    },
    EndOfData {
        session: u16,
        serial: u32,
        timing: Option<Timing>,
    },
    CacheReset,
    /// BGPsec router keys: taken and ignored (ribshard does no BGPsec).
    RouterKey,
    Aspa {
        announce: bool,
        aspa: AspaRecord,
    },
    ErrorReport {
        code: ErrorCode,
        text: String,
    },
}

/// The header of the next PDU in `buf`: version, type, length; `None` while fewer than 8
/// octets are there.
pub fn header(buf: &[u8]) -> Option<(u8, u8, usize)> {
    let h = buf.get(..8)?;
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
    Some((h[0], h[1], len))
}

fn be16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_be_bytes([s[0], s[1]]))
}

fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Decodes one whole PDU (header included) from a cache speaking `version`.
pub fn decode(pdu: &[u8], version: u8) -> Result<FromCache, RtrError> {
    let Some((v, kind, len)) = header(pdu) else {
        return Err(RtrError::Corrupt {
            pdu: 0,
            len: pdu.len(),
            why: "shorter than a header",
        });
    };
    let corrupt = |why| RtrError::Corrupt {
        pdu: kind,
        len: pdu.len(),
        why,
    };
    if len != pdu.len() {
        return Err(corrupt("its length field does not match"));
    }
    // An error report may come in any version (it may be the one refusing ours).
    if v != version && kind != ERROR_REPORT {
        return Err(RtrError::UnexpectedVersion {
            got: v,
            want: version,
        });
    }
    let want = |n: usize| {
        if len == n {
            Ok(())
        } else {
            Err(corrupt("wrong length for its type"))
        }
    };
    let session = be16(pdu, 2);
    Ok(match kind {
        SERIAL_NOTIFY => {
            want(12)?;
            FromCache::SerialNotify {
                session,
                serial: be32(pdu, 8),
            }
        }
        CACHE_RESPONSE => {
            want(8)?;
            FromCache::CacheResponse { session }
        }
        IPV4_PREFIX | IPV6_PREFIX => {
            let v6 = kind == IPV6_PREFIX;
            want(if v6 { 32 } else { 20 })?;
            let (flags, plen, max) = (pdu[8], pdu[9], pdu[10]);
            let width = if v6 { 128 } else { 32 };
            if plen > width || max > width || max < plen {
                return Err(corrupt("prefix length or maximum length out of range"));
            }
            let prefix = if v6 {
                let mut a = [0u8; 16];
                a.copy_from_slice(&pdu[12..28]);
                Prefix::v6(Ipv6Addr::from(a), plen)
            } else {
                Prefix::v4(Ipv4Addr::from(be32(pdu, 12)), plen)
            }
            .ok_or(corrupt("prefix length out of range"))?;
            let asn = be32(pdu, if v6 { 28 } else { 16 });
            FromCache::Prefix {
                announce: flags & 1 == 1,
                vrp: Vrp::new(prefix, max, asn),
            }
        }
        END_OF_DATA => {
            let timing = match version {
                0 => {
                    want(12)?;
                    None
                }
                _ => {
                    want(24)?;
                    Some(Timing {
                        refresh: be32(pdu, 12),
                        retry: be32(pdu, 16),
                        expire: be32(pdu, 20),
                    })
                }
            };
            FromCache::EndOfData {
                session,
                serial: be32(pdu, 8),
                timing,
            }
        }
        CACHE_RESET => {
            want(8)?;
            FromCache::CacheReset
        }
        ROUTER_KEY => FromCache::RouterKey,
        ASPA if version >= 2 => {
            if len < 12 || (len - 12) % 4 != 0 {
                return Err(corrupt("an ASPA PDU is 12 octets and 4 per provider"));
            }
            let announce = pdu[2] & 1 == 1;
            FromCache::Aspa {
                announce,
                aspa: AspaRecord {
                    customer: be32(pdu, 8),
                    providers: (12..len).step_by(4).map(|at| be32(pdu, at)).collect(),
                },
            }
        }
        ERROR_REPORT => {
            let inner = be32(pdu, 8) as usize;
            let text_at = 12usize.saturating_add(inner);
            let text_len = be32(pdu, text_at) as usize;
            let text = pdu
                .get(text_at + 4..)
                .filter(|t| t.len() == text_len)
                .ok_or(corrupt("its inner lengths do not add up"))?;
            FromCache::ErrorReport {
                code: ErrorCode::from_u16(session),
                text: String::from_utf8_lossy(text).into_owned(),
            }
        }
        other => return Err(RtrError::UnsupportedPdu(other)),
    })
}

/// Reset Query (RFC 8210 section 5.4).
pub fn reset_query(version: u8) -> Vec<u8> {
    vec![version, RESET_QUERY, 0, 0, 0, 0, 0, 8]
}

/// Serial Query (RFC 8210 section 5.3).
pub fn serial_query(version: u8, session: u16, serial: u32) -> Vec<u8> {
    let mut b = vec![version, SERIAL_QUERY];
    b.extend_from_slice(&session.to_be_bytes());
    b.extend_from_slice(&12u32.to_be_bytes());
    b.extend_from_slice(&serial.to_be_bytes());
    b
}

/// Error Report (RFC 8210 section 5.11), quoting the PDU it is about.
pub fn error_report(version: u8, code: ErrorCode, pdu: &[u8], text: &str) -> Vec<u8> {
    let pdu = pdu.get(..pdu.len().min(MAX_PDU / 2)).unwrap_or(&[]);
    let len = 16 + pdu.len() + text.len();
    let mut b = vec![version, ERROR_REPORT];
    b.extend_from_slice(&code.code().to_be_bytes());
    b.extend_from_slice(&(len as u32).to_be_bytes());
    b.extend_from_slice(&(pdu.len() as u32).to_be_bytes());
    b.extend_from_slice(pdu);
    b.extend_from_slice(&(text.len() as u32).to_be_bytes());
    b.extend_from_slice(text.as_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefixes_and_end_of_data() {
        let v4 = [
            1, 4, 0, 0, 0, 0, 0, 20, 1, 16, 24, 0, 10, 1, 0, 0, 0, 0, 0xfd, 0xe9,
        ];
        assert_eq!(
            decode(&v4, 1),
            Ok(FromCache::Prefix {
                announce: true,
                vrp: Vrp::new(
                    Prefix::v4(Ipv4Addr::new(10, 1, 0, 0), 16).unwrap(),
                    24,
                    65001
                ),
            })
        );
        let mut eod = vec![1, 7, 0, 5, 0, 0, 0, 24, 0, 0, 0, 9];
        for t in [600u32, 60, 7200] {
            eod.extend_from_slice(&t.to_be_bytes());
        }
        assert_eq!(
            decode(&eod, 1),
            Ok(FromCache::EndOfData {
                session: 5,
                serial: 9,
                timing: Some(Timing {
                    refresh: 600,
                    retry: 60,
                    expire: 7200
                })
            })
        );
        // A maximum length shorter than the prefix is corrupt.
        let mut bad = v4;
        bad[10] = 8;
        assert_eq!(decode(&bad, 1).unwrap_err().code(), ErrorCode::CorruptData);
        // Version 2 PDUs on a version 1 session.
        let mut v2 = v4;
        v2[0] = 2;
        assert_eq!(
            decode(&v2, 1).unwrap_err().code(),
            ErrorCode::UnexpectedProtocolVersion
        );
        let aspa = [2, 11, 1, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
        assert_eq!(
            decode(&aspa, 2),
            Ok(FromCache::Aspa {
                announce: true,
                aspa: AspaRecord {
                    customer: 1,
                    providers: vec![2, 3]
                }
            })
        );
        let e = error_report(1, ErrorCode::NoDataAvailable, &[], "no data");
        assert_eq!(
            decode(&e, 2),
            Ok(FromCache::ErrorReport {
                code: ErrorCode::NoDataAvailable,
                text: "no data".into()
            })
        );
    }

    proptest! {
        #[test]
        fn decoding_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64), v in 0u8..3) {
            let _ = decode(&b, v);
            if let Some((_, _, len)) = header(&b) {
                if len <= b.len() {
                    let _ = decode(&b[..len], v);
                }
            }
        }
    }
}
