//! # ribshard-rib: one RIB shard
//!
//! Owns what a shard knows of its prefixes: every received path (Adj-RIB-In), the best path
//! (Loc-RIB), and the BGP decision process that picks it. Today: the decision process
//! ([`decision`]) and the shard table with its change journal ([`shard`]); threads, import
//! policy and update groups around it follow (issue 4).
//!
//! It must never take a lock, do I/O, or look at a prefix of another shard: a shard is
//! touched by one thread only.

pub mod decision;
pub mod shard;

pub use decision::{best_path, compare, Candidate, Options};
pub use shard::{Change, Path, PeerDown, PeerIndex, PeerInfo, RouteAttrs, Shard};
