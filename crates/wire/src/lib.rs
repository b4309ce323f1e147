//! # ribshard-wire: the BGP-4 wire codec
//!
//! Owns every octet ribshard sends or receives on a BGP session: the message header and
//! framing, OPEN and capabilities, UPDATE decoding as zero-copy validated views with the
//! error handling of RFC 7606, the owned attribute model the RIB interns, the UPDATE builder
//! that packs prefixes by attribute set, NOTIFICATION, KEEPALIVE and ROUTE-REFRESH.
//!
//! It must never do I/O, keep session state, allocate on the per-prefix decode path, or
//! panic on any input: indexing, `unwrap` and `expect` are denied here, and the decoder is
//! fuzzed (`fuzz/`).

#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable
)]

pub mod attr;
pub mod attributes;
pub mod builder;
pub mod cursor;
pub mod message;
pub mod nlri;
pub mod notification;
pub mod open;
pub mod types;
pub mod update;

pub use attributes::{
    AsPath, AsSegment, AttrValue, Attribute, MpNlri, MpReach, MpUnreach, PathAttributes,
};
pub use builder::{BuildError, UpdateBuilder, UpdateMessage};
pub use message::{decode, frame, keepalive, DecodeError, Message, RouteRefresh, SessionParams};
pub use nlri::{Nlri, NlriView};
pub use notification::Notification;
pub use open::{Capability, Open, OpenError};
pub use types::{Family, Origin, Prefix};
pub use update::{
    parse_attributes_only, parse_update, Action, AttrError, AttrsView, ParsedUpdate, UpdateError,
};
