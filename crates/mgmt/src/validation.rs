//! Replies about RPKI: `GET /v1/validation/sessions` (`show validation session`) and
//! `GET /v1/validation/database` (`show validation database`).

use crate::api::LastError;
use serde::{Deserialize, Serialize};

/// The RTR client and its caches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationSessions {
    /// `[rpki]` is configured.
    pub configured: bool,
    /// The data in use: its snapshot version (0: none yet) and record counts.
    pub version: u64,
    pub vrps_v4: u64,
    pub vrps_v6: u64,
    pub aspas: u64,
    /// The data was dropped: no cache answered within its expire interval.
    pub expired: bool,
    pub caches: Vec<RtrCache>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RtrCache {
    /// `address:port`.
    pub address: String,
    /// Lower is preferred.
    pub preference: u8,
    /// `idle`, `connecting`, `syncing`, `up` or `down`.
    pub state: String,
    /// The RTR version the session runs (or last ran).
    pub version: Option<u8>,
    pub session_id: Option<u16>,
    pub serial: Option<u32>,
    /// The intervals the cache gave (RFC 8210 section 6), seconds.
    pub refresh: u32,
    pub retry: u32,
    pub expire: u32,
    pub records_v4: u64,
    pub records_v6: u64,
    pub aspas: u64,
    /// Unix time of its last End of Data, and since when it is up.
    pub last_update: Option<f64>,
    pub up_since: Option<f64>,
    /// Times it went down after being up.
    pub flaps: u32,
    /// Why its last session ended. `kind`: `connect-failed`, `connection-lost`,
    /// `connection-closed`, `timeout`, `cache-error`, `protocol-error`, `session-changed`.
    pub last_error: Option<LastError>,
}

/// VRPs and ASPA records, filtered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationDatabase {
    pub version: u64,
    /// Records matching the filters, before the limit.
    pub matching: u64,
    pub vrps: Vec<VrpEntry>,
    pub aspas: Vec<AspaEntry>,
    /// More matched than the limit.
    pub truncated: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VrpEntry {
    pub prefix: String,
    pub max_length: u8,
    pub asn: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AspaEntry {
    pub customer: u32,
    pub providers: Vec<u32>,
}

/// `GET /v1/validation/database`'s filters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseQuery {
    /// VRPs of this prefix, of prefixes inside it and of those covering it.
    pub prefix: Option<String>,
    /// VRPs of this origin AS, and the ASPA record of this customer AS.
    pub asn: Option<u32>,
    /// At most this many records (default 10,000).
    pub limit: Option<usize>,
}
