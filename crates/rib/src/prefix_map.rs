//! A hash map keyed by (masked) prefixes, with IPv4 prefixes as one 64-bit word: a table
//! entry of a full table's IPv4 prefix is then 8 octets of key instead of 20 (plus 4 of
//! padding), which is about 13 octets per path of the two real full tables, and hashing one
//! word is cheaper than hashing twenty octets.

use hashbrown::HashMap;
use ribshard_wire::Prefix;

pub(crate) struct PrefixMap<V> {
    v4: HashMap<u64, V>,
    v6: HashMap<Prefix, V>,
}

impl<V> Default for PrefixMap<V> {
    fn default() -> Self {
        PrefixMap {
            v4: HashMap::new(),
            v6: HashMap::new(),
        }
    }
}

#[inline]
fn v4_key(addr: u32, len: u8) -> u64 {
    u64::from(addr) << 8 | u64::from(len)
}

#[inline]
fn v4_prefix(k: u64) -> Prefix {
    Prefix::V4 {
        addr: (k >> 8) as u32,
        len: k as u8,
    }
}

impl<V> PrefixMap<V> {
    pub(crate) fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    #[inline]
    pub(crate) fn get(&self, p: &Prefix) -> Option<&V> {
        match *p {
            Prefix::V4 { addr, len } => self.v4.get(&v4_key(addr, len)),
            Prefix::V6 { .. } => self.v6.get(p),
        }
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, p: &Prefix) -> Option<&mut V> {
        match *p {
            Prefix::V4 { addr, len } => self.v4.get_mut(&v4_key(addr, len)),
            Prefix::V6 { .. } => self.v6.get_mut(p),
        }
    }

    #[inline]
    pub(crate) fn get_or_default(&mut self, p: Prefix) -> &mut V
    where
        V: Default,
    {
        match p {
            Prefix::V4 { addr, len } => self.v4.entry(v4_key(addr, len)).or_default(),
            Prefix::V6 { .. } => self.v6.entry(p).or_default(),
        }
    }

    pub(crate) fn insert(&mut self, p: Prefix, v: V) {
        match p {
            Prefix::V4 { addr, len } => {
                self.v4.insert(v4_key(addr, len), v);
            }
            Prefix::V6 { .. } => {
                self.v6.insert(p, v);
            }
        }
    }

    pub(crate) fn remove(&mut self, p: &Prefix) -> Option<V> {
        match *p {
            Prefix::V4 { addr, len } => self.v4.remove(&v4_key(addr, len)),
            Prefix::V6 { .. } => self.v6.remove(p),
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

    pub(crate) fn into_iter(self) -> impl Iterator<Item = (Prefix, V)> {
        self.v4
            .into_iter()
            .map(|(k, v)| (v4_prefix(k), v))
            .chain(self.v6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let mut m = PrefixMap::default();
        let a = Prefix::V4 {
            addr: 0xc000_0200,
            len: 24,
        };
        let b = Prefix::V4 {
            addr: 0xc000_0200,
            len: 23,
        };
        let c = Prefix::V6 {
            addr: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            len: 32,
        };
        m.insert(a, 1);
        m.insert(b, 2);
        *m.get_or_default(c) += 3;
        assert_eq!(
            (m.get(&a), m.get(&b), m.get(&c)),
            (Some(&1), Some(&2), Some(&3))
        );
        let mut all: Vec<(Prefix, i32)> = m.iter().map(|(p, v)| (p, *v)).collect();
        all.sort();
        assert_eq!(all, vec![(b, 2), (a, 1), (c, 3)]);
        assert_eq!(m.remove(&a), Some(1));
        assert_eq!(m.len(), 2);
    }
}
