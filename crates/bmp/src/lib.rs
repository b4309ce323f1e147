//! # ribshard-bmp: the BGP Monitoring Protocol
//!
//! Owns BMP's messages (RFC 7854; the Loc-RIB peer type of RFC 9069, the Adj-RIB-Out flag
//! of RFC 8671), the monitor that feeds monitoring stations from the sessions' tap, the
//! shards' change stream and what update groups send each member, and each station's
//! connection.
//!
//! It must never slow routing for a station: a station that is away is connected to again
//! with backoff, and one that falls behind loses its connection, never making anyone wait;
//! either gets a complete dump when it comes back. It reads the shards only through the
//! pipeline's walks and its change stream, and holds no lock a shard takes.

mod adj_rib_out;
mod dump;
pub mod message;
pub mod monitor;
pub mod routes;
pub mod station;
mod stats;

pub use monitor::{BmpConfig, Monitor, StationState, StationStatus};
pub use station::{Ribs, StationConfig, StationError};
