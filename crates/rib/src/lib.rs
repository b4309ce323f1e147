//! # ribshard-rib: one RIB shard
//!
//! Owns what a shard knows of its prefixes: every received path (Adj-RIB-In), the best path
//! (Loc-RIB), the BGP decision process that picks it ([`decision`]), the interned attribute
//! sets paths point at ([`attrs`]), and export — what each update group advertises for a best
//! path ([`export`]). The engine runs one [`Shard`] per shard thread.
//!
//! It must never take a lock, do I/O, or look at a prefix of another shard: a shard is
//! touched by one thread only.

pub mod attrs;
pub mod clock;
pub mod decision;
pub mod export;
pub mod import;
pub mod next_hop;
mod prefix_map;
pub mod shard;

pub use attrs::{Ingress, Interner, LoopChecks, Loops, RouteAttrs};
pub use decision::{
    best_path, compare, deciding_step, multipath_equal, Candidate, Multipath, Options, Step,
};
pub use export::{
    export, source_of, ExportCache, ExportKind, ExportKinds, Exported, GroupKind, GroupSpec,
};
pub use import::Import;
pub use next_hop::{next_hop_addr, Resolution, Resolver};
pub use shard::{
    shard_of, AddPathChange, AddPathKeep, AddPathSelect, AdjRibInChange, Change, DumpKey,
    DumpOrder, DumpPlace, DumpSet, FamilyCounts, GroupDiff, Ineligible, Offered, Path, PathFilter,
    PathState, PathView, PeerCounters, PeerCounts, PeerIndex, PeerInfo, Position, RouteView, Shard,
    Walk, WalkOp, Within,
};
