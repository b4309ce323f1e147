//! Path attribute type codes, flags and the RFC 7606 action for each kind of error.

/// Attribute flag bits (RFC 4271 section 4.3).
pub mod flags {
    pub const OPTIONAL: u8 = 0x80;
    pub const TRANSITIVE: u8 = 0x40;
    pub const PARTIAL: u8 = 0x20;
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

pub const ORIGIN: u8 = 1;
pub const AS_PATH: u8 = 2;
pub const NEXT_HOP: u8 = 3;
pub const MULTI_EXIT_DISC: u8 = 4;
pub const LOCAL_PREF: u8 = 5;
pub const ATOMIC_AGGREGATE: u8 = 6;
pub const AGGREGATOR: u8 = 7;
/// RFC 1997.
pub const COMMUNITIES: u8 = 8;
/// RFC 4456.
pub const ORIGINATOR_ID: u8 = 9;
/// RFC 4456.
pub const CLUSTER_LIST: u8 = 10;
/// RFC 4760.
pub const MP_REACH_NLRI: u8 = 14;
/// RFC 4760.
pub const MP_UNREACH_NLRI: u8 = 15;
/// RFC 4360.
pub const EXTENDED_COMMUNITIES: u8 = 16;
/// RFC 6793.
pub const AS4_PATH: u8 = 17;
/// RFC 6793.
pub const AS4_AGGREGATOR: u8 = 18;
/// RFC 8092.
pub const LARGE_COMMUNITY: u8 = 32;
/// Only to Customer, RFC 9234.
pub const OTC: u8 = 35;

const WELL_KNOWN: u8 = flags::TRANSITIVE;
const OPT_TRANS: u8 = flags::OPTIONAL | flags::TRANSITIVE;
const OPT_NON_TRANS: u8 = flags::OPTIONAL;

/// The Optional and Transitive bits an attribute must carry; `None` if we do not know it.
pub fn expected_flags(type_code: u8) -> Option<u8> {
    Some(match type_code {
        ORIGIN | AS_PATH | NEXT_HOP | LOCAL_PREF | ATOMIC_AGGREGATE => WELL_KNOWN,
        MULTI_EXIT_DISC | ORIGINATOR_ID | CLUSTER_LIST | MP_REACH_NLRI | MP_UNREACH_NLRI => {
            OPT_NON_TRANS
        }
        AGGREGATOR | COMMUNITIES | EXTENDED_COMMUNITIES | AS4_PATH | AS4_AGGREGATOR
        | LARGE_COMMUNITY | OTC => OPT_TRANS,
        _ => return None,
    })
}

/// The attribute's name as the RFCs write it.
pub fn name(type_code: u8) -> &'static str {
    match type_code {
        ORIGIN => "ORIGIN",
        AS_PATH => "AS_PATH",
        NEXT_HOP => "NEXT_HOP",
        MULTI_EXIT_DISC => "MULTI_EXIT_DISC",
        LOCAL_PREF => "LOCAL_PREF",
        ATOMIC_AGGREGATE => "ATOMIC_AGGREGATE",
        AGGREGATOR => "AGGREGATOR",
        COMMUNITIES => "COMMUNITIES",
        ORIGINATOR_ID => "ORIGINATOR_ID",
        CLUSTER_LIST => "CLUSTER_LIST",
        MP_REACH_NLRI => "MP_REACH_NLRI",
        MP_UNREACH_NLRI => "MP_UNREACH_NLRI",
        EXTENDED_COMMUNITIES => "EXTENDED_COMMUNITIES",
        AS4_PATH => "AS4_PATH",
        AS4_AGGREGATOR => "AS4_AGGREGATOR",
        LARGE_COMMUNITY => "LARGE_COMMUNITY",
        OTC => "OTC",
        0 => "attribute list",
        _ => "unknown attribute",
    }
}

/// What was wrong with an attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AttrErrorKind {
    #[error("Optional/Transitive flags conflict with the attribute type")]
    Flags,
    #[error("length is invalid for this attribute")]
    Length,
    #[error("value is not defined")]
    InvalidValue,
    #[error("malformed AS path segment")]
    MalformedAsPath,
    #[error("received from an external peer")]
    FromExternalPeer,
    #[error("not expected on a 4-octet AS session")]
    UnexpectedOnFourOctetSession,
    #[error("appears more than once")]
    Duplicate,
    #[error("well-known mandatory attribute missing")]
    Missing,
    #[error("attribute length runs past the path attributes")]
    ListOverrun,
    #[error("path attributes end inside an attribute header")]
    ListUnderrun,
    #[error("next hop length is invalid for the address family")]
    InvalidNextHopLength,
    /// RFC 7607 section 2.
    #[error("holds AS number 0")]
    AsZero,
    /// RFC 5065 section 5 (RFC 7606 section 7.2): ribshard is in no confederation, so no
    /// external peer may send these segments.
    #[error("holds AS_CONFED segments from a peer outside our confederation")]
    ConfedFromOutside,
    #[error("NLRI is syntactically incorrect")]
    InvalidNlri,
}

impl AttrErrorKind {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            AttrErrorKind::InvalidNextHopLength => "next hop length is invalid",
            AttrErrorKind::InvalidNlri => "NLRI is syntactically incorrect",
            _ => "attribute is too short",
        }
    }
}

/// RFC 7606 actions for attribute errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorAction {
    TreatAsWithdraw,
    Discard,
    SessionReset,
}

/// RFC 7606 section 7 (and RFC 6793 section 6, RFC 8092 section 5, RFC 9234 section 5):
/// the action for an error in a recognized attribute.
pub fn error_action(type_code: u8, kind: AttrErrorKind) -> ErrorAction {
    match (type_code, kind) {
        (MP_REACH_NLRI | MP_UNREACH_NLRI, _) => ErrorAction::SessionReset,
        (_, AttrErrorKind::FromExternalPeer | AttrErrorKind::UnexpectedOnFourOctetSession) => {
            ErrorAction::Discard
        }
        (ATOMIC_AGGREGATE | AGGREGATOR | AS4_PATH | AS4_AGGREGATOR, _) => ErrorAction::Discard,
        _ => ErrorAction::TreatAsWithdraw,
    }
}
