//! The shard's table of prefixes: entries kept in a dense arena per family, found through a
//! hash table that holds only their arena positions and hashes.
//!
//! Why not a plain hash map of prefix to entry: a full table does not fit in the caches, and
//! every random probe into 40-octet buckets missed them twice (control bytes, then bucket).
//! Here the index is small enough to stay cached (9 octets per slot with its control byte),
//! entries sit in the order they were created, and a [`Handle`] reaches an entry with no
//! lookup at all. The change journal holds handles, so deciding a freshly loaded table walks
//! the arena front to back instead of probing the table once more per prefix.
//!
//! IPv4 prefixes are keyed by one 64-bit word (address and length), which hashes cheaper
//! than twenty octets and keeps an IPv4 entry 16 octets smaller.

use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use ribshard_wire::Prefix;
use std::hash::{BuildHasher, Hash};

/// Where an entry lives, valid until the entry is removed (after that, the position may be
/// given to another prefix). The top bit tells the family.
/// Handles order as a walk of the map visits them: the IPv4 arena, then the IPv6 one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Handle(u32);

const V6: u32 = 1 << 31;

impl Handle {
    /// The first position of a walk.
    pub(crate) const FIRST: Handle = Handle(0);
    fn v4(at: u32) -> Handle {
        Handle(at)
    }
    fn v6(at: u32) -> Handle {
        Handle(at | V6)
    }
    /// The handle as a number (kept in next-hop bitmaps), and back.
    pub(crate) fn raw(self) -> u32 {
        self.0
    }
    pub(crate) fn from_raw(raw: u32) -> Handle {
        Handle(raw)
    }
    /// The family's arena position: `Ok` for IPv4, `Err` for IPv6.
    fn at(self) -> Result<u32, u32> {
        if self.0 & V6 == 0 {
            Ok(self.0)
        } else {
            Err(self.0 & !V6)
        }
    }
}

/// An index slot: an arena position (low half) and the 32-bit hash of the key there (high
/// half), so growing the index rehashes without reading the arena (random reads into it
/// were 4% of a full-table load).
type Slot = u64;

#[inline]
fn slot(at: u32, h: u32) -> Slot {
    u64::from(h) << 32 | u64::from(at)
}

#[inline]
fn slot_at(s: Slot) -> u32 {
    s as u32
}

/// The table's hash from a slot's 32 bits: both halves, so the position (low bits) and the
/// control tag (top 7 bits) come from different bits of it.
#[inline]
fn spread(h: u32) -> u64 {
    u64::from(h) * 0x1_0000_0001
}

/// One family's entries.
struct Arena<K, V> {
    /// Arena positions with their keys' hashes.
    index: HashTable<Slot>,
    /// Entries in creation order; `None` where one was removed (listed in `free`).
    entries: Vec<Option<(K, V)>>,
    /// Removed positions, reused first so the arena does not grow under churn.
    free: Vec<u32>,
    hasher: DefaultHashBuilder,
}

impl<K: Copy + Eq + Hash, V> Default for Arena<K, V> {
    fn default() -> Self {
        Arena {
            index: HashTable::new(),
            entries: Vec::new(),
            free: Vec::new(),
            hasher: DefaultHashBuilder::default(),
        }
    }
}

/// The 32 bits of a key's hash a slot keeps.
#[inline]
fn hash32<K: Hash>(hasher: &DefaultHashBuilder, k: &K) -> u32 {
    (hasher.hash_one(k) >> 32) as u32
}

/// Whether slot `s` holds key `k` of hash `h`: the hashes first, so a control-tag collision
/// rarely reads the arena.
#[inline]
fn holds<K: Eq, V>(entries: &[Option<(K, V)>], s: Slot, h: u32, k: &K) -> bool {
    s >> 32 == u64::from(h)
        && entries
            .get(slot_at(s) as usize)
            .and_then(Option::as_ref)
            .is_some_and(|(key, _)| key == k)
}

impl<K: Copy + Eq + Hash, V> Arena<K, V> {
    #[inline]
    fn find(&self, k: &K) -> Option<u32> {
        let h = hash32(&self.hasher, k);
        self.index
            .find(spread(h), |&s| holds(&self.entries, s, h, k))
            .map(|&s| slot_at(s))
    }

    #[inline]
    fn get(&self, at: u32) -> Option<&(K, V)> {
        self.entries.get(at as usize)?.as_ref()
    }

    #[inline]
    fn get_mut(&mut self, at: u32) -> Option<&mut (K, V)> {
        self.entries.get_mut(at as usize)?.as_mut()
    }

    /// The position of `k`, created with `make` if absent.
    #[inline]
    fn find_or_insert(&mut self, k: K, make: impl FnOnce() -> V) -> u32 {
        let Arena {
            index,
            entries,
            free,
            hasher,
        } = self;
        let h = hash32(hasher, &k);
        let entry = index.entry(
            spread(h),
            |&s| holds(entries, s, h, &k),
            |&s| spread((s >> 32) as u32),
        );
        match entry {
            Entry::Occupied(e) => slot_at(*e.get()),
            Entry::Vacant(e) => {
                let at = match free.pop() {
                    Some(at) => {
                        if let Some(slot) = entries.get_mut(at as usize) {
                            *slot = Some((k, make()));
                        }
                        at
                    }
                    None => {
                        // Positions are 31 bits (the handle's top bit is the family): two
                        // billion prefixes of one family in one shard, far past what memory
                        // holds at 40 octets each.
                        let at = u32::try_from(entries.len())
                            .ok()
                            .filter(|at| at & V6 == 0)
                            .expect("fewer than 2^31 prefixes of one family per shard");
                        entries.push(Some((k, make())));
                        at
                    }
                };
                e.insert(slot(at, h));
                at
            }
        }
    }

    fn remove(&mut self, at: u32) -> Option<(K, V)> {
        let (k, v) = self.entries.get_mut(at as usize)?.take()?;
        let h = hash32(&self.hasher, &k);
        if let Ok(e) = self.index.find_entry(spread(h), |&s| slot_at(s) == at) {
            e.remove();
        }
        self.free.push(at);
        Some((k, v))
    }

    fn iter(&self) -> impl Iterator<Item = &(K, V)> {
        self.entries.iter().flatten()
    }
}

pub(crate) struct PrefixMap<V> {
    v4: Arena<u64, V>,
    v6: Arena<Prefix, V>,
}

impl<V> Default for PrefixMap<V> {
    fn default() -> Self {
        PrefixMap {
            v4: Arena::default(),
            v6: Arena::default(),
        }
    }
}

#[inline]
pub(crate) fn v4_key(addr: u32, len: u8) -> u64 {
    u64::from(addr) << 8 | u64::from(len)
}

#[inline]
pub(crate) fn v4_prefix(k: u64) -> Prefix {
    Prefix::V4 {
        addr: (k >> 8) as u32,
        len: k as u8,
    }
}

impl<V> PrefixMap<V> {
    pub(crate) fn len(&self) -> usize {
        self.v4.index.len() + self.v6.index.len()
    }

    pub(crate) fn len_of(&self, family: ribshard_wire::Family) -> usize {
        match family {
            ribshard_wire::Family::Ipv4Unicast => self.v4.index.len(),
            ribshard_wire::Family::Ipv6Unicast => self.v6.index.len(),
        }
    }

    /// Entries at `from` and after it, in handle order, with their handles.
    pub(crate) fn iter_from(&self, from: Handle) -> impl Iterator<Item = (Handle, Prefix, &V)> {
        let (v4_at, v6_at) = match from.at() {
            Ok(at) => (at as usize, 0),
            Err(at) => (self.v4.entries.len(), at as usize),
        };
        let v4 = self.v4.entries.iter().enumerate().skip(v4_at);
        let v6 = self.v6.entries.iter().enumerate().skip(v6_at);
        v4.filter_map(|(i, e)| {
            e.as_ref()
                .map(|(k, v)| (Handle::v4(i as u32), v4_prefix(*k), v))
        })
        .chain(v6.filter_map(|(i, e)| e.as_ref().map(|(p, v)| (Handle::v6(i as u32), *p, v))))
    }

    /// The IPv4 entries by their 64-bit keys (address << 8 | length, which order as their
    /// prefixes do), or the IPv6 ones by prefix: a family's entries for a sorted selection.
    pub(crate) fn v4_entries(&self) -> impl Iterator<Item = (Handle, u64, &V)> {
        self.v4
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|(k, v)| (Handle::v4(i as u32), *k, v)))
    }

    pub(crate) fn v6_entries(&self) -> impl Iterator<Item = (Handle, Prefix, &V)> {
        self.v6
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|(p, v)| (Handle::v6(i as u32), *p, v)))
    }

    #[inline]
    pub(crate) fn find(&self, p: &Prefix) -> Option<Handle> {
        match *p {
            Prefix::V4 { addr, len } => self.v4.find(&v4_key(addr, len)).map(Handle::v4),
            Prefix::V6 { .. } => self.v6.find(p).map(Handle::v6),
        }
    }

    #[inline]
    pub(crate) fn get(&self, p: &Prefix) -> Option<&V> {
        self.at(self.find(p)?)
    }

    /// The entry of a prefix and its handle.
    #[inline]
    pub(crate) fn get_mut(&mut self, p: &Prefix) -> Option<(Handle, &mut V)> {
        let h = self.find(p)?;
        Some((h, self.at_mut(h)?.1))
    }

    /// The entry at a handle.
    #[inline]
    pub(crate) fn at(&self, h: Handle) -> Option<&V> {
        match h.at() {
            Ok(at) => self.v4.get(at).map(|(_, v)| v),
            Err(at) => self.v6.get(at).map(|(_, v)| v),
        }
    }

    /// The prefix and entry at a handle, read only.
    #[inline]
    pub(crate) fn at_with_key(&self, h: Handle) -> Option<(Prefix, &V)> {
        match h.at() {
            Ok(at) => self.v4.get(at).map(|(k, v)| (v4_prefix(*k), v)),
            Err(at) => self.v6.get(at).map(|(p, v)| (*p, v)),
        }
    }

    /// The prefix and entry at a handle.
    #[inline]
    pub(crate) fn at_mut(&mut self, h: Handle) -> Option<(Prefix, &mut V)> {
        match h.at() {
            Ok(at) => self.v4.get_mut(at).map(|(k, v)| (v4_prefix(*k), v)),
            Err(at) => self.v6.get_mut(at).map(|(p, v)| (*p, v)),
        }
    }

    /// The entry of a prefix, created empty if absent.
    #[inline]
    pub(crate) fn get_or_default(&mut self, p: Prefix) -> (Handle, &mut V)
    where
        V: Default,
    {
        self.get_or_insert_with(p, V::default)
    }

    fn get_or_insert_with(&mut self, p: Prefix, make: impl FnOnce() -> V) -> (Handle, &mut V) {
        let h = match p {
            Prefix::V4 { addr, len } => Handle::v4(self.v4.find_or_insert(v4_key(addr, len), make)),
            Prefix::V6 { .. } => Handle::v6(self.v6.find_or_insert(p, make)),
        };
        match self.at_mut(h) {
            Some((_, v)) => (h, v),
            // find_or_insert has just filled the position.
            None => unreachable!("an entry just found or inserted is there"),
        }
    }

    /// Puts `v` in for `p`, replacing any entry it had.
    pub(crate) fn insert(&mut self, p: Prefix, v: V) -> Handle {
        if let Some((h, slot)) = self.get_mut(&p) {
            *slot = v;
            return h;
        }
        self.get_or_insert_with(p, move || v).0
    }

    /// Takes out the entry at a handle; the handle is invalid afterwards.
    pub(crate) fn remove_at(&mut self, h: Handle) -> Option<V> {
        match h.at() {
            Ok(at) => self.v4.remove(at).map(|(_, v)| v),
            Err(at) => self.v6.remove(at).map(|(_, v)| v),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (Prefix, &V)> {
        self.v4
            .iter()
            .map(|(k, v)| (v4_prefix(*k), v))
            .chain(self.v6.iter().map(|(p, v)| (*p, v)))
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = Prefix> + '_ {
        self.iter().map(|(p, _)| p)
    }

    /// Every entry with the handle it had, taken out.
    pub(crate) fn into_entries(self) -> impl Iterator<Item = (Handle, Prefix, V)> {
        let v4 = self
            .v4
            .entries
            .into_iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|(k, v)| (Handle::v4(i as u32), v4_prefix(k), v)));
        let v6 = self
            .v6
            .entries
            .into_iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|(p, v)| (Handle::v6(i as u32), p, v)));
        v4.chain(v6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(addr: u32, len: u8) -> Prefix {
        Prefix::V4 { addr, len }
    }

    #[test]
    fn keys_round_trip() {
        let mut m = PrefixMap::default();
        let a = v4(0xc000_0200, 24);
        let b = v4(0xc000_0200, 23);
        let c = Prefix::V6 {
            addr: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            len: 32,
        };
        m.insert(a, 1);
        m.insert(b, 2);
        *m.get_or_default(c).1 += 3;
        assert_eq!(
            (m.get(&a), m.get(&b), m.get(&c)),
            (Some(&1), Some(&2), Some(&3))
        );
        let mut all: Vec<(Prefix, i32)> = m.iter().map(|(p, v)| (p, *v)).collect();
        all.sort();
        assert_eq!(all, vec![(b, 2), (a, 1), (c, 3)]);
        let h = m.find(&a).unwrap();
        assert_eq!(m.at_mut(h).map(|(p, v)| (p, *v)), Some((a, 1)));
        assert_eq!(m.remove_at(h), Some(1));
        assert_eq!(m.remove_at(h), None);
        assert_eq!((m.len(), m.get(&a)), (2, None));
        m.insert(b, 5);
        assert_eq!((m.len(), m.get(&b)), (2, Some(&5)));
    }

    /// Against a std HashMap through growth, removal and reuse of positions: every prefix
    /// present is found with its value, handles stay valid until their entry is removed.
    #[test]
    fn agrees_with_a_hash_map_under_churn() {
        let mut m = PrefixMap::default();
        let mut model = std::collections::HashMap::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let p = if x % 5 == 0 {
                let mut addr = [0u8; 16];
                addr[..4].copy_from_slice(&((x >> 8) as u32 % 3000).to_be_bytes());
                Prefix::V6 { addr, len: 48 }
            } else {
                v4((x >> 8) as u32 % 20_000 * 256, 24)
            };
            if x % 3 == 0 {
                let got = m.find(&p).and_then(|h| m.remove_at(h));
                assert_eq!(got, model.remove(&p), "remove {p:?}");
            } else {
                let (h, v) = m.get_or_default(p);
                *v += step;
                *model.entry(p).or_insert(0) += step;
                assert_eq!(m.at(h), model.get(&p));
            }
        }
        assert_eq!(m.len(), model.len());
        for (p, v) in &model {
            assert_eq!(m.get(p), Some(v));
        }
        let mut all: Vec<(Prefix, u32)> = m.into_entries().map(|(_, p, v)| (p, v)).collect();
        let mut want: Vec<(Prefix, u32)> = model.into_iter().collect();
        all.sort();
        want.sort();
        assert_eq!(all, want);
    }
}
