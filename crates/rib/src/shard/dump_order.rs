//! The order a table dump walks a shard in: its reported best paths grouped by attribute
//! set and source, the groups in an order every shard shares, so that an update group can
//! merge the shards' walks into one.

use super::{Handle, PeerIndex, Shard};
use crate::attrs::RouteAttrs;
use ribshard_wire::Prefix;
use std::sync::Arc;

/// Where a prefix goes in a table dump ([`Shard::reported_by_set`]): its best path's
/// attribute set by content (the same in every shard) and its source peer.
pub type DumpKey = (u64, PeerIndex);

/// A table as a dump walks it ([`Shard::reported_by_set`]): the groups of prefixes whose
/// best path has one attribute set and source, in key order, and where each prefix lies in
/// the shard's table ([`DumpPlace`], 4 octets, where a prefix would take 20: the order of two
/// full tables is built at the moment the table is largest, when the start-up deferral ends).
#[derive(Clone, Debug, Default)]
pub struct DumpOrder {
    pub sets: Vec<DumpSet>,
    places: Vec<DumpPlace>,
}

/// Where a prefix of a [`DumpOrder`] lies in the table it was taken from; read it with
/// [`Shard::dump_prefix`]. A re-shard drops every dump, so a place never outlives its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpPlace(Handle);

/// One group of [`DumpOrder`]: its prefixes are at `start..start + len`.
#[derive(Clone, Debug)]
pub struct DumpSet {
    /// The content hash of `attrs` and the source peer.
    pub key: DumpKey,
    pub attrs: Arc<RouteAttrs>,
    pub start: u32,
    pub len: u32,
}

impl DumpOrder {
    /// The places of set `i`'s prefixes from `offset` on.
    pub fn places_of(&self, i: usize, offset: usize) -> &[DumpPlace] {
        self.sets
            .get(i)
            .and_then(|s| {
                let start = s.start as usize + offset;
                self.places.get(start..s.start as usize + s.len as usize)
            })
            .unwrap_or(&[])
    }
}

/// The content hash of an attribute set, the same in every shard (a fixed seed): a set
/// import policy changed is made by each shard for its own paths (sessions intern what they
/// receive, once for all shards), so one content can lie at another address in each shard
/// and pointers cannot be compared. foldhash rather than SipHash: it
/// showed in profiles of table dumps, and the hash only orders sets (no table is keyed by
/// it, so a peer choosing colliding sets gains nothing but an order).
fn dump_hash(attrs: &RouteAttrs) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x7269_6273_6861_7264).hash_one(attrs)
}

impl Shard {
    /// Every prefix with a reported best path, grouped by that path's attribute set and
    /// source, the groups in [`DumpKey`] order: the order a table dump walks them. Every
    /// shard orders alike, so an update group can merge the shards' walks into one in which
    /// each attribute set's prefixes come together, however the table is spread. One pass
    /// over the table as it lies in memory; the walk then exports once per group. The
    /// prefixes are one array (a vector per group cost 13 MiB more on two full tables).
    pub fn reported_by_set(&self) -> DumpOrder {
        // Every reported prefix with its best path's set (by address: interned) and source,
        // sorted so that each set's prefixes lie together, in table order. A sort rather
        // than a map from set to group: this list is one allocation, handed back to the
        // system whole once the order is built, where the map's growth and a list of groups
        // grown by doubling left pieces in the shard thread's allocator arena (peak RSS 4
        // MiB lower on two full tables at one shard, though 2 MiB more while built).
        let mut found: Vec<(usize, PeerIndex, Handle)> = Vec::with_capacity(self.dests.len());
        for (h, _, d) in self.dests.iter_from(Handle::FIRST) {
            if let Some(best) = d.reported_path() {
                found.push((Arc::as_ptr(&best.attrs) as usize, best.peer, h));
            }
        }
        found.sort_unstable();
        let same = |a: &(usize, PeerIndex, Handle), b: &(usize, PeerIndex, Handle)| {
            (a.0, a.1) == (b.0, b.1)
        };
        let mut sets: Vec<DumpSet> = Vec::with_capacity(found.chunk_by(same).count());
        let mut at = 0u32;
        for run in found.chunk_by(same) {
            // A run is never empty; its set is read from its first prefix's best path.
            let first = run.first().and_then(|&(_, peer, h)| {
                let (_, d) = self.dests.at_with_key(h)?;
                Some((d.reported_path()?.attrs.clone(), peer))
            });
            if let Some((attrs, peer)) = first {
                sets.push(DumpSet {
                    key: (dump_hash(&attrs), peer),
                    attrs,
                    start: at,
                    len: run.len() as u32,
                });
            }
            at += run.len() as u32;
        }
        // Groups in key order (ties, two sets of one source whose contents hash alike, by
        // where their prefixes lie: a total order), then their prefixes in that order.
        sets.sort_unstable_by_key(|s| (s.key, s.start));
        let mut places: Vec<DumpPlace> = Vec::with_capacity(found.len());
        for s in &mut sets {
            let run = found
                .get(s.start as usize..(s.start + s.len) as usize)
                .unwrap_or(&[]);
            s.start = places.len() as u32;
            places.extend(run.iter().map(|f| DumpPlace(f.2)));
        }
        DumpOrder { sets, places }
    }

    /// The prefix at a place of a [`DumpOrder`] taken from this table, if it has a best path
    /// reported. The entry there may since have been removed and the place given to a prefix
    /// added later: that one is new to the dump's members, so either it is not decided yet
    /// (`None`: its decision goes to them live) or its change is among those the walk was
    /// told of, and is read as it is now. A removed prefix is not visited: its withdrawal
    /// went to the members live.
    pub fn dump_prefix(&self, place: DumpPlace) -> Option<Prefix> {
        let (p, d) = self.dests.at_with_key(place.0)?;
        d.reported().map(|_| p)
    }
}
