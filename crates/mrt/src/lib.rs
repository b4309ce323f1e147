//! # ribshard-mrt: MRT files (RFC 6396)
//!
//! Owns reading and writing of MRT routing information export files: TABLE_DUMP,
//! TABLE_DUMP_V2 (with the Add-Path subtypes of RFC 8050) and BGP4MP / BGP4MP_ET, plain or
//! compressed with gzip or bzip2, streamed one record at a time so a file of any size never
//! sits whole in memory. It also renders records in the one-line format of `bgpdump -m`.
//!
//! It must never interpret BGP beyond what `ribshard-wire` decodes, and never hold more than
//! one record of a file in memory.

#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

pub mod bgpdump;
mod read;
mod record;
pub mod synth;
mod write;

pub use read::{open, MrtReader, RawRecord};
pub use record::{
    Bgp4mp, Bgp4mpBody, MrtError, Peer, PeerIndexTable, Record, RibEntry, RibRecord, TableDump,
};
pub use write::{Bgp4mpSession, MrtWriter};

/// MRT record types (RFC 6396 section 4, RFC 8050).
pub mod types {
    pub const TABLE_DUMP: u16 = 12;
    pub const TABLE_DUMP_V2: u16 = 13;
    pub const BGP4MP: u16 = 16;
    pub const BGP4MP_ET: u16 = 17;

    /// TABLE_DUMP_V2 subtypes.
    pub mod tdv2 {
        pub const PEER_INDEX_TABLE: u16 = 1;
        pub const RIB_IPV4_UNICAST: u16 = 2;
        pub const RIB_IPV4_MULTICAST: u16 = 3;
        pub const RIB_IPV6_UNICAST: u16 = 4;
        pub const RIB_IPV6_MULTICAST: u16 = 5;
        pub const RIB_GENERIC: u16 = 6;
        pub const RIB_IPV4_UNICAST_ADDPATH: u16 = 8;
        pub const RIB_IPV4_MULTICAST_ADDPATH: u16 = 9;
        pub const RIB_IPV6_UNICAST_ADDPATH: u16 = 10;
        pub const RIB_IPV6_MULTICAST_ADDPATH: u16 = 11;
        pub const RIB_GENERIC_ADDPATH: u16 = 12;
    }

    /// BGP4MP and BGP4MP_ET subtypes.
    pub mod bgp4mp {
        pub const STATE_CHANGE: u16 = 0;
        pub const MESSAGE: u16 = 1;
        pub const MESSAGE_AS4: u16 = 4;
        pub const STATE_CHANGE_AS4: u16 = 5;
        pub const MESSAGE_LOCAL: u16 = 6;
        pub const MESSAGE_AS4_LOCAL: u16 = 7;
        pub const MESSAGE_ADDPATH: u16 = 8;
        pub const MESSAGE_AS4_ADDPATH: u16 = 9;
        pub const MESSAGE_LOCAL_ADDPATH: u16 = 10;
        pub const MESSAGE_AS4_LOCAL_ADDPATH: u16 = 11;
    }
}

/// A file of the real routing data kept in `../shared/data` beside the repository, for tests
/// and benchmarks built from this source tree; `None` (with a printed reason) without it.
pub fn shared_data_file(name: &str) -> Option<std::path::PathBuf> {
    let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(name);
    if f.is_file() {
        Some(f)
    } else {
        skipped(&format!("{} is absent", f.display()));
        None
    }
}

/// A test that cannot run for want of a tool or data says so, and is counted: the test
/// command (`scripts/test`) names a file in `RIBSHARD_SKIPS` and puts the count in its closing
/// line (and fails under CI, where it installs everything first). Test support, as
/// [`shared_data_file`].
pub fn skipped(reason: &str) {
    eprintln!("SKIPPED: {reason}");
    if let Some(path) = std::env::var_os("RIBSHARD_SKIPS") {
        use std::io::Write;
        let line = format!(
            "{}: {reason}\n",
            std::thread::current().name().unwrap_or("a test")
        );
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}
