//! # ribshard-rpki: RPKI data and the validation of routes against it
//!
//! Owns validated ROA payloads and ASPA records as immutable, versioned tables
//! ([`vrp::VrpTable`], [`aspa::AspaTable`], handed out together as a [`Snapshot`]), route
//! origin validation (RFC 6811) and AS path verification with ASPA, the RPKI-to-Router
//! protocol's PDUs (RFC 8210 and its version 2), and (feature `client`) the RTR client that
//! keeps the tables from one or more caches.
//!
//! It must never hold routing state or block a reader: shards validate against the
//! snapshot they were last handed, without locks, and a new snapshot says which ROA
//! prefixes changed so only the routes inside them are looked at again. Decoding a cache's
//! PDUs never panics.

pub mod aspa;
#[cfg(feature = "client")]
pub mod client;
pub mod pdu;
pub mod vrp;

pub use aspa::{AspaState, AspaTable, Direction};
pub use vrp::{Changed, Key, Validity, Vrp, VrpTable};

use std::sync::Arc;

/// The RPKI data the shards validate against, and what changed since the one before.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Counts up with every snapshot published.
    pub version: u64,
    pub vrps: Arc<VrpTable>,
    pub aspas: Arc<AspaTable>,
    /// ROA prefixes whose records differ from the previous snapshot's.
    pub changed: Arc<Changed>,
    /// The ASPA records differ from the previous snapshot's: every route whose import
    /// reads the ASPA state is verified again.
    pub aspa_changed: bool,
}
