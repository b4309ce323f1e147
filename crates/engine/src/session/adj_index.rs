//! A session's Adj-RIB-In index for one family: which prefixes (with path identifiers under
//! Add-Path) the neighbor has announced and not withdrawn. It gives the counts an operator
//! sees and prefix limits act on (RFC 4486) at once, as each UPDATE is read, and what an
//! enhanced route refresh did not send again (RFC 7313); the paths themselves live in the
//! shards.
//!
//! One per neighbor and family, so it is kept small, and it is touched for every prefix
//! received, so it is kept near in memory. An IPv4 prefix of length 24 or less without a path
//! identifier (nearly every one) is one bit: lengths 0 to 16 in a bitmap of 16 KiB, lengths 17
//! to 24 in a block of 64 octets per /16 ([`V4Bits`]). Prefixes arrive grouped by attribute
//! set, mostly in address order, so consecutive ones fall in the same few blocks; a hash set
//! spread them over a table of 2.5 MiB per full table, a cache miss each (7% of the daemon's
//! CPU taking in two full tables), whatever the hash. No hash either: nothing a neighbor
//! sends can make it slower. The rest (longer IPv4 prefixes, IPv6, Add-Path) are hash sets,
//! SipHash with random keys as the standard library's, since the keys come from the neighbor.

use ribshard_wire::{Nlri, Prefix};
use std::collections::HashSet;

#[derive(Clone, Debug, Default)]
pub struct AdjIndex {
    /// IPv4 prefixes of length 24 or less without a path identifier.
    v4: V4Bits,
    /// Longer IPv4 prefixes without a path identifier: address << 8 | length.
    v4_long: HashSet<u64>,
    /// Everything else (IPv6, Add-Path).
    other: HashSet<Nlri>,
}

enum Key {
    V4(u32, u8),
    V4Long(u64),
    Other(Nlri),
}

/// The key of a prefix as received: host bits past the length are irrelevant (RFC 4271
/// section 4.3), so they are cleared.
fn key(n: Nlri) -> Key {
    let prefix = n.prefix.masked();
    match (prefix, n.path_id) {
        (Prefix::V4 { addr, len }, None) if len <= 24 => Key::V4(addr, len),
        (Prefix::V4 { addr, len }, None) => Key::V4Long(u64::from(addr) << 8 | u64::from(len)),
        _ => Key::Other(Nlri { prefix, ..n }),
    }
}

impl AdjIndex {
    /// True if it was not there.
    pub fn insert(&mut self, n: Nlri) -> bool {
        match key(n) {
            Key::V4(addr, len) => self.v4.insert(addr, len),
            Key::V4Long(k) => self.v4_long.insert(k),
            Key::Other(n) => self.other.insert(n),
        }
    }

    /// True if it was there.
    pub fn remove(&mut self, n: Nlri) -> bool {
        match key(n) {
            Key::V4(addr, len) => self.v4.remove(addr, len),
            Key::V4Long(k) => self.v4_long.remove(&k),
            Key::Other(n) => self.other.remove(&n),
        }
    }

    pub fn len(&self) -> usize {
        self.v4.len + self.v4_long.len() + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes out every entry of `gone`.
    pub fn remove_all(&mut self, gone: &AdjIndex) {
        self.v4.remove_all(&gone.v4);
        for k in &gone.v4_long {
            self.v4_long.remove(k);
        }
        for n in &gone.other {
            self.other.remove(n);
        }
    }
}

/// Bits of the bitmap for lengths 0 to 16: one per prefix, 2^17 - 1.
const SHORT_WORDS: usize = 1 << 17 >> 6;
/// A block's bits: the 2 + 4 + ... + 256 = 510 prefixes of lengths 17 to 24 under a /16.
type Block = [u64; 8];
/// Blocks found by binary search up to this many, then through a table of every /16 (256
/// KiB, against the blocks' 64 KiB at that point).
const SPARSE_MAX: usize = 1024;

/// IPv4 prefixes of length 24 or less, one bit each. Blocks are kept once made (a withdrawn
/// prefix clears its bit): at most 65,536 of them, 4 MiB, whatever the neighbor sends.
#[derive(Clone, Debug, Default)]
struct V4Bits {
    /// Lengths 0 to 16, made on first use: bit `2^len - 1 + (addr >> (32 - len))`.
    short: Option<Box<[u64; SHORT_WORDS]>>,
    /// Lengths 17 to 24 by /16: bit `2^(len - 16) - 2 + the len - 16 bits after the /16`.
    blocks: Vec<Block>,
    /// The /16 of each block.
    block_of: Vec<u16>,
    /// Which block holds a /16: `(/16, block)` sorted, up to [`SPARSE_MAX`] blocks.
    sparse: Vec<(u16, u32)>,
    /// Then, by /16, its block + 1 (0: none).
    dense: Option<Box<[u32]>>,
    /// Bits set.
    len: usize,
}

/// Where a prefix's bit is: the short bitmap, or a /16's block.
enum Bit {
    Short(usize),
    Block(u16, usize),
}

fn bit(addr: u32, len: u8) -> Bit {
    match len {
        0 => Bit::Short(0),
        1..=16 => Bit::Short((1 << len) - 1 + (addr >> (32 - len)) as usize),
        _ => {
            let sub = u32::from(len - 16);
            let under = (addr >> (32 - u32::from(len))) & ((1 << sub) - 1);
            Bit::Block((addr >> 16) as u16, (1 << sub) - 2 + under as usize)
        }
    }
}

/// Sets (or clears) bit `i` of `words`; true if it changed.
fn flip(words: &mut [u64], i: usize, on: bool) -> bool {
    let Some(w) = words.get_mut(i / 64) else {
        return false;
    };
    let mask = 1u64 << (i % 64);
    let was = *w & mask != 0;
    if on {
        *w |= mask;
    } else {
        *w &= !mask;
    }
    was != on
}

impl V4Bits {
    fn insert(&mut self, addr: u32, len: u8) -> bool {
        let changed = match bit(addr, len) {
            Bit::Short(i) => {
                let short = self.short.get_or_insert_with(|| Box::new([0; SHORT_WORDS]));
                flip(&mut short[..], i, true)
            }
            Bit::Block(hi, i) => {
                let b = self.block_or_new(hi);
                self.blocks
                    .get_mut(b)
                    .is_some_and(|block| flip(block, i, true))
            }
        };
        self.len += usize::from(changed);
        changed
    }

    fn remove(&mut self, addr: u32, len: u8) -> bool {
        let changed = match bit(addr, len) {
            Bit::Short(i) => self
                .short
                .as_mut()
                .is_some_and(|short| flip(&mut short[..], i, false)),
            Bit::Block(hi, i) => match self.block(hi) {
                Some(b) => self
                    .blocks
                    .get_mut(b)
                    .is_some_and(|block| flip(block, i, false)),
                None => false,
            },
        };
        self.len -= usize::from(changed);
        changed
    }

    fn remove_all(&mut self, gone: &V4Bits) {
        if let (Some(mine), Some(theirs)) = (self.short.as_mut(), gone.short.as_ref()) {
            for (m, t) in mine.iter_mut().zip(theirs.iter()) {
                self.len -= (*m & t).count_ones() as usize;
                *m &= !t;
            }
        }
        for (hi, theirs) in gone.block_of.iter().zip(&gone.blocks) {
            let Some(mine) = self.block(*hi).and_then(|b| self.blocks.get_mut(b)) else {
                continue;
            };
            for (m, t) in mine.iter_mut().zip(theirs) {
                self.len -= (*m & t).count_ones() as usize;
                *m &= !t;
            }
        }
    }

    fn block(&self, hi: u16) -> Option<usize> {
        match &self.dense {
            Some(d) => d
                .get(usize::from(hi))
                .and_then(|&b| b.checked_sub(1))
                .map(|b| b as usize),
            None => self
                .sparse
                .binary_search_by_key(&hi, |e| e.0)
                .ok()
                .and_then(|i| self.sparse.get(i))
                .map(|e| e.1 as usize),
        }
    }

    fn block_or_new(&mut self, hi: u16) -> usize {
        if let Some(b) = self.block(hi) {
            return b;
        }
        let b = self.blocks.len();
        self.blocks.push([0; 8]);
        self.block_of.push(hi);
        match &mut self.dense {
            Some(d) => {
                if let Some(e) = d.get_mut(usize::from(hi)) {
                    *e = b as u32 + 1;
                }
            }
            None if self.sparse.len() < SPARSE_MAX => {
                let at = self.sparse.partition_point(|e| e.0 < hi);
                self.sparse.insert(at, (hi, b as u32));
            }
            None => {
                let mut d = vec![0u32; 1 << 16].into_boxed_slice();
                for (i, h) in self.block_of.iter().enumerate() {
                    if let Some(e) = d.get_mut(usize::from(*h)) {
                        *e = i as u32 + 1;
                    }
                }
                self.dense = Some(d);
                self.sparse = Vec::new();
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// What the index must count: the prefixes themselves, masked.
    #[derive(Default)]
    struct Model(BTreeSet<Nlri>);

    impl Model {
        fn insert(&mut self, n: Nlri) -> bool {
            self.0.insert(Nlri {
                prefix: n.prefix.masked(),
                ..n
            })
        }
        fn remove(&mut self, n: Nlri) -> bool {
            self.0.remove(&Nlri {
                prefix: n.prefix.masked(),
                ..n
            })
        }
    }

    fn nlri(addr: u32, len: u8, id: Option<u32>) -> Nlri {
        Nlri {
            prefix: Prefix::V4 { addr, len },
            path_id: id,
        }
    }

    proptest! {
        /// Every operation answers as a set of the masked prefixes would, at every length,
        /// with blocks looked up both ways (few, then more than `SPARSE_MAX`).
        #[test]
        fn answers_as_a_set_of_prefixes(
            ops in prop::collection::vec(
                (0u8..3, any::<u32>(), 0u8..=32, prop::option::weighted(0.1, 0u32..3)),
                1..400,
            ),
            spread in prop::bool::ANY,
        ) {
            let mut i = AdjIndex::default();
            let mut m = Model::default();
            if spread {
                // More blocks than the sparse lookup holds.
                for k in 0..(SPARSE_MAX as u32 + 50) {
                    let n = nlri(k << 16 | 0x8000, 17, None);
                    prop_assert_eq!(i.insert(n), m.insert(n));
                }
            }
            let (mut gone, mut gone_model) = (AdjIndex::default(), Vec::new());
            for (op, addr, len, id) in ops {
                // Addresses close together half the time, so prefixes share blocks.
                let addr = if addr % 2 == 0 { addr & 0x0a0f_ffff } else { addr };
                let n = nlri(addr, len, id);
                match op {
                    0 => prop_assert_eq!(i.insert(n), m.insert(n)),
                    1 => prop_assert_eq!(i.remove(n), m.remove(n)),
                    _ => {
                        gone.insert(n);
                        gone_model.push(n);
                    }
                }
                prop_assert_eq!(i.len(), m.0.len());
            }
            i.remove_all(&gone);
            for n in gone_model {
                m.remove(n);
            }
            prop_assert_eq!(i.len(), m.0.len());
            for n in m.0.clone() {
                prop_assert!(i.remove(n), "{:?}", n);
            }
            prop_assert!(i.is_empty());
        }
    }

    fn v4(a: [u8; 4], len: u8) -> Nlri {
        Nlri::new(Prefix::v4(Ipv4Addr::from(a), len).unwrap())
    }

    #[test]
    fn counts_each_prefix_and_path_once_host_bits_ignored() {
        let mut i = AdjIndex::default();
        assert!(i.insert(v4([10, 0, 0, 0], 8)));
        assert!(!i.insert(v4([10, 1, 2, 3], 8)), "host bits are irrelevant");
        assert!(
            i.insert(v4([10, 0, 0, 0], 16)),
            "another length, another prefix"
        );
        let with_id = Nlri {
            path_id: Some(7),
            ..v4([10, 0, 0, 0], 8)
        };
        assert!(i.insert(with_id), "a path identifier is another path");
        assert!(i.insert(v4([10, 0, 0, 0], 0)), "the default route");
        assert!(i.insert(v4([10, 0, 0, 0], 24)));
        assert!(
            i.insert(v4([10, 0, 0, 0], 25)),
            "longer than 24: its own key"
        );
        assert!(i.insert(v4([10, 0, 0, 128], 25)));
        assert!(!i.insert(v4([10, 0, 0, 129], 25)), "host bits, past 24 too");
        assert!(i.insert(v4([10, 0, 0, 1], 32)));
        assert_eq!(i.len(), 8);
        for (a, len) in [([0, 0, 0, 0], 0), ([10, 0, 0, 0], 24), ([10, 0, 0, 0], 25)] {
            assert!(i.remove(v4(a, len)));
        }
        assert!(i.remove(v4([10, 0, 0, 128], 25)));
        assert!(i.remove(v4([10, 0, 0, 1], 32)));
        assert_eq!(i.len(), 3);
        let six = Nlri::new(Prefix::v6(Ipv6Addr::LOCALHOST, 128).unwrap());
        assert!(i.insert(six));
        assert_eq!(i.len(), 4);
        let mut gone = AdjIndex::default();
        gone.insert(v4([10, 0, 0, 0], 16));
        gone.insert(six);
        i.remove_all(&gone);
        assert_eq!(i.len(), 2);
        assert!(i.remove(v4([10, 0, 0, 1], 8)));
        assert!(!i.remove(v4([10, 0, 0, 0], 8)));
        assert!(i.remove(with_id));
        assert!(i.is_empty());
    }
}
