//! NOTIFICATION messages (RFC 4271 section 4.5) and their error codes, including the
//! Cease subcodes of RFC 4486 and the shutdown communication of RFC 9003.

use std::fmt;

/// NOTIFICATION error codes (RFC 4271 section 4.5, RFC 6608, RFC 7313, RFC 9687).
pub mod code {
    pub const MESSAGE_HEADER: u8 = 1;
    pub const OPEN_MESSAGE: u8 = 2;
    pub const UPDATE_MESSAGE: u8 = 3;
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    pub const FSM: u8 = 5;
    pub const CEASE: u8 = 6;
    pub const ROUTE_REFRESH: u8 = 7;
    pub const SEND_HOLD_TIMER_EXPIRED: u8 = 8;
}

/// Message Header Error subcodes (RFC 4271 section 6.1).
pub mod header {
    pub const CONNECTION_NOT_SYNCHRONIZED: u8 = 1;
    pub const BAD_MESSAGE_LENGTH: u8 = 2;
    pub const BAD_MESSAGE_TYPE: u8 = 3;
}

/// OPEN Message Error subcodes (RFC 4271 section 6.2, RFC 5492, RFC 9234).
pub mod open {
    pub const UNSPECIFIC: u8 = 0;
    pub const UNSUPPORTED_VERSION: u8 = 1;
    pub const BAD_PEER_AS: u8 = 2;
    pub const BAD_BGP_IDENTIFIER: u8 = 3;
    pub const UNSUPPORTED_OPTIONAL_PARAMETER: u8 = 4;
    pub const UNACCEPTABLE_HOLD_TIME: u8 = 6;
    pub const UNSUPPORTED_CAPABILITY: u8 = 7;
    pub const ROLE_MISMATCH: u8 = 11;
}

/// UPDATE Message Error subcodes (RFC 4271 section 6.3).
pub mod update {
    pub const MALFORMED_ATTRIBUTE_LIST: u8 = 1;
    pub const UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE: u8 = 2;
    pub const MISSING_WELL_KNOWN_ATTRIBUTE: u8 = 3;
    pub const ATTRIBUTE_FLAGS_ERROR: u8 = 4;
    pub const ATTRIBUTE_LENGTH_ERROR: u8 = 5;
    pub const INVALID_ORIGIN_ATTRIBUTE: u8 = 6;
    pub const INVALID_NEXT_HOP_ATTRIBUTE: u8 = 8;
    pub const OPTIONAL_ATTRIBUTE_ERROR: u8 = 9;
    pub const INVALID_NETWORK_FIELD: u8 = 10;
    pub const MALFORMED_AS_PATH: u8 = 11;
}

/// Cease subcodes (RFC 4486, RFC 9003).
pub mod cease {
    pub const MAXIMUM_PREFIXES_REACHED: u8 = 1;
    pub const ADMINISTRATIVE_SHUTDOWN: u8 = 2;
    pub const PEER_DECONFIGURED: u8 = 3;
    pub const ADMINISTRATIVE_RESET: u8 = 4;
    pub const CONNECTION_REJECTED: u8 = 5;
    pub const OTHER_CONFIGURATION_CHANGE: u8 = 6;
    pub const CONNECTION_COLLISION_RESOLUTION: u8 = 7;
    pub const OUT_OF_RESOURCES: u8 = 8;
    pub const HARD_RESET: u8 = 9;
    pub const BFD_DOWN: u8 = 10;
}

/// ROUTE-REFRESH Message Error subcodes (RFC 7313 section 5).
pub mod route_refresh {
    pub const INVALID_MESSAGE_LENGTH: u8 = 1;
}

/// The longest shutdown communication RFC 9003 allows, in octets of UTF-8.
pub const MAX_SHUTDOWN_MESSAGE: usize = 255;

/// A NOTIFICATION: what a session sends before it closes, or what it received.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Notification {
    pub code: u8,
    pub subcode: u8,
    pub data: Vec<u8>,
}

impl Notification {
    pub fn new(code: u8, subcode: u8, data: Vec<u8>) -> Self {
        Notification {
            code,
            subcode,
            data,
        }
    }

    /// A Cease with an RFC 9003 shutdown communication (Administrative Shutdown or Reset).
    /// The message is cut at a UTF-8 character boundary to fit 255 octets.
    pub fn cease_with_message(subcode: u8, message: &str) -> Self {
        let mut end = message.len().min(MAX_SHUTDOWN_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let text = message.as_bytes().get(..end).unwrap_or(&[]);
        let mut data = Vec::with_capacity(1 + text.len());
        data.push(text.len() as u8);
        data.extend_from_slice(text);
        Notification::new(code::CEASE, subcode, data)
    }

    /// The RFC 9003 shutdown communication, if this is an Administrative Shutdown or Reset
    /// that carries one. `Some(Err(..))` when the length or UTF-8 is invalid: RFC 9003
    /// section 3 says to log that and otherwise handle the NOTIFICATION as usual.
    pub fn shutdown_message(&self) -> Option<Result<&str, ShutdownMessageError>> {
        if self.code != code::CEASE
            || !(self.subcode == cease::ADMINISTRATIVE_SHUTDOWN
                || self.subcode == cease::ADMINISTRATIVE_RESET)
        {
            return None;
        }
        let (&len, rest) = self.data.split_first()?;
        let Some(text) = rest.get(..usize::from(len)) else {
            return Some(Err(ShutdownMessageError::Truncated));
        };
        Some(std::str::from_utf8(text).map_err(|_| ShutdownMessageError::InvalidUtf8))
    }

    /// Encodes the complete message, header included.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(21 + self.data.len());
        crate::message::push_header(&mut out, crate::message::MessageType::Notification);
        out.push(self.code);
        out.push(self.subcode);
        out.extend_from_slice(&self.data);
        crate::message::finish_length(&mut out);
        out
    }

    /// The names of the code and of the subcode (when it has one), as the RFCs give them.
    pub fn names(&self) -> (&'static str, Option<&'static str>) {
        describe_codes(self.code, self.subcode)
    }

    /// A short human name of the code and subcode, as operators read them in logs.
    pub fn describe(&self) -> String {
        let (c, s) = describe_codes(self.code, self.subcode);
        match s {
            Some(s) => format!("{c} / {s}"),
            None => format!("{c} / subcode {}", self.subcode),
        }
    }
}

impl fmt::Debug for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Notification({}/{} {}, data {:02x?})",
            self.code,
            self.subcode,
            self.describe(),
            self.data
        )
    }
}

impl fmt::Display for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())?;
        if let Some(Ok(msg)) = self.shutdown_message() {
            write!(f, ": \"{msg}\"")?;
        }
        Ok(())
    }
}

/// Why an RFC 9003 shutdown communication could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShutdownMessageError {
    #[error("shutdown communication length exceeds the NOTIFICATION data")]
    Truncated,
    #[error("shutdown communication is not valid UTF-8")]
    InvalidUtf8,
}

fn describe_codes(c: u8, s: u8) -> (&'static str, Option<&'static str>) {
    match c {
        code::MESSAGE_HEADER => (
            "Message Header Error",
            match s {
                1 => Some("Connection Not Synchronized"),
                2 => Some("Bad Message Length"),
                3 => Some("Bad Message Type"),
                _ => None,
            },
        ),
        code::OPEN_MESSAGE => (
            "OPEN Message Error",
            match s {
                0 => Some("Unspecific"),
                1 => Some("Unsupported Version Number"),
                2 => Some("Bad Peer AS"),
                3 => Some("Bad BGP Identifier"),
                4 => Some("Unsupported Optional Parameter"),
                6 => Some("Unacceptable Hold Time"),
                7 => Some("Unsupported Capability"),
                11 => Some("Role Mismatch"),
                _ => None,
            },
        ),
        code::UPDATE_MESSAGE => (
            "UPDATE Message Error",
            match s {
                1 => Some("Malformed Attribute List"),
                2 => Some("Unrecognized Well-known Attribute"),
                3 => Some("Missing Well-known Attribute"),
                4 => Some("Attribute Flags Error"),
                5 => Some("Attribute Length Error"),
                6 => Some("Invalid ORIGIN Attribute"),
                8 => Some("Invalid NEXT_HOP Attribute"),
                9 => Some("Optional Attribute Error"),
                10 => Some("Invalid Network Field"),
                11 => Some("Malformed AS_PATH"),
                _ => None,
            },
        ),
        code::HOLD_TIMER_EXPIRED => ("Hold Timer Expired", None),
        code::FSM => ("Finite State Machine Error", None),
        code::CEASE => (
            "Cease",
            match s {
                1 => Some("Maximum Number of Prefixes Reached"),
                2 => Some("Administrative Shutdown"),
                3 => Some("Peer De-configured"),
                4 => Some("Administrative Reset"),
                5 => Some("Connection Rejected"),
                6 => Some("Other Configuration Change"),
                7 => Some("Connection Collision Resolution"),
                8 => Some("Out of Resources"),
                9 => Some("Hard Reset"),
                10 => Some("BFD Down"),
                _ => None,
            },
        ),
        code::ROUTE_REFRESH => (
            "ROUTE-REFRESH Message Error",
            match s {
                1 => Some("Invalid Message Length"),
                _ => None,
            },
        ),
        code::SEND_HOLD_TIMER_EXPIRED => ("Send Hold Timer Expired", None),
        _ => ("Unknown error code", None),
    }
}
