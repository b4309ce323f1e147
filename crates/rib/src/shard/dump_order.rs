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

/// The content hash of an attribute set, the same in every shard (a fixed seed): each shard
/// interns its own sets, so pointers cannot be compared. foldhash rather than SipHash: it
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
        let mut sets: Vec<DumpSet> = Vec::new();
        let mut at: hashbrown::HashMap<(*const RouteAttrs, PeerIndex), u32> =
            hashbrown::HashMap::new();
        let mut found: Vec<(u32, Handle)> = Vec::with_capacity(self.dests.len());
        for (h, _, d) in self.dests.iter_from(Handle::FIRST) {
            let Some(best) = d.reported_path() else {
                continue;
            };
            let i = *at
                .entry((Arc::as_ptr(&best.attrs), best.peer))
                .or_insert_with(|| {
                    sets.push(DumpSet {
                        key: (dump_hash(&best.attrs), best.peer),
                        attrs: best.attrs.clone(),
                        start: 0,
                        len: 0,
                    });
                    (sets.len() - 1) as u32
                });
            if let Some(s) = sets.get_mut(i as usize) {
                s.len += 1;
            }
            found.push((i, h));
        }
        drop(at);
        // Sets in key order, each given its place; then every prefix into its set's place.
        // Ties (two sets of one source whose contents hash alike) go by first sight, so the
        // order is total and the starts rise along it.
        let mut order: Vec<u32> = (0..sets.len() as u32).collect();
        order.sort_unstable_by_key(|&i| (sets.get(i as usize).map(|s| s.key), i));
        let mut next = 0u32;
        for &i in &order {
            if let Some(s) = sets.get_mut(i as usize) {
                s.start = next;
                next += s.len;
            }
        }
        drop(order);
        let mut fill: Vec<u32> = sets.iter().map(|s| s.start).collect();
        let mut places: Vec<DumpPlace> = vec![DumpPlace(Handle::FIRST); found.len()];
        for (i, h) in found {
            if let Some(f) = fill.get_mut(i as usize) {
                if let Some(slot) = places.get_mut(*f as usize) {
                    *slot = DumpPlace(h);
                }
                *f += 1;
            }
        }
        drop(fill);
        // Into key order where they lie (starts rise along it, each set has a prefix):
        // sorting a copy kept two lists of sets at the table's largest moment.
        sets.sort_unstable_by_key(|s| s.start);
        sets.shrink_to_fit();
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
