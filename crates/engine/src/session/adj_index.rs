//! A session's Adj-RIB-In index for one family: which prefixes (with path identifiers under
//! Add-Path) the neighbor has announced and not withdrawn. It gives the counts an operator
//! sees and prefix limits act on (RFC 4486) at once, as each UPDATE is read, and what an
//! enhanced route refresh did not send again (RFC 7313); the paths themselves live in the
//! shards.
//!
//! One per neighbor and family, so it is kept small, and it is touched for every prefix
//! received, so it is kept near in memory. IPv4 prefixes of length 24 or less without a path
//! identifier (nearly every one) start in a hash set of `u32` (the address, whose low octet is
//! zero, with the length there: 5 octets a slot with the table's control byte). A set spreads
//! them over its whole table, a cache miss each whatever the hash: 2.5 MiB and 7% of the
//! daemon's CPU taking in two full tables. Once a set is large and dense enough that bits
//! take at most 5/4 of its memory (a full table from some 65,000 prefixes on), it becomes
//! [`V4Bits`]: lengths 0 to 16 in a bitmap of 16 KiB, 17 to 24 in a block of 64 octets per
//! /16. Prefixes arrive grouped by attribute set, mostly in address order, so consecutive ones
//! fall in the same few blocks. A sparse table (a route-server client's prefixes, a few a /16)
//! stays a set, and bits that grow sparse go back to one at twice its memory: the index never
//! takes much more than a set would. Sets hash with SipHash and random keys, as the standard
//! library's, since the keys come from the neighbor; bits need no hash.

use ribshard_wire::{Nlri, Prefix};
use std::collections::HashSet;

#[derive(Clone, Debug, Default)]
pub struct AdjIndex {
    /// IPv4 prefixes of length 24 or less without a path identifier.
    v4: V4,
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

    pub fn contains(&self, n: Nlri) -> bool {
        match key(n) {
            Key::V4(addr, len) => self.v4.contains(addr, len),
            Key::V4Long(k) => self.v4_long.contains(&k),
            Key::Other(n) => self.other.contains(&n),
        }
    }

    pub fn len(&self) -> usize {
        self.v4.len() + self.v4_long.len() + self.other.len()
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

/// IPv4 prefixes of length 24 or less: a set while small or sparse, then bits.
#[derive(Clone, Debug)]
struct V4 {
    form: Form,
    /// The size at which the form is looked at again: at [`BITS_FROM`], then twice the size
    /// at the last look, so looking (a pass over the prefixes) costs a constant per prefix
    /// however a neighbor moves around one size.
    check_at: usize,
}

#[derive(Clone, Debug)]
enum Form {
    /// [`packed`] prefixes.
    Set(HashSet<u32>),
    Bits(Box<V4Bits>),
}

impl Default for V4 {
    fn default() -> V4 {
        V4 {
            form: Form::Set(HashSet::new()),
            check_at: BITS_FROM,
        }
    }
}

/// A prefix of length 24 or less as one `u32`: masked, the address's low octet is zero, so
/// the length fits there.
fn packed(addr: u32, len: u8) -> u32 {
    addr | u32::from(len)
}

/// The address and length of a [`packed`] prefix.
fn unpacked(k: u32) -> (u32, u8) {
    (k & !0xff, (k & 0xff) as u8)
}

/// The size at which a set is first looked at for bits.
const BITS_FROM: usize = 4096;

impl V4 {
    fn insert(&mut self, addr: u32, len: u8) -> bool {
        let new = match &mut self.form {
            Form::Bits(b) => b.insert(addr, len),
            Form::Set(s) => s.insert(packed(addr, len)),
        };
        if new && self.len() >= self.check_at {
            self.check_at = 2 * self.len();
            match &self.form {
                Form::Bits(b) => {
                    if let Some(s) = b.to_set() {
                        self.form = Form::Set(s);
                    }
                }
                Form::Set(s) => {
                    if let Some(b) = V4Bits::from_set(s) {
                        self.form = Form::Bits(Box::new(b));
                    }
                }
            }
        }
        new
    }

    fn remove(&mut self, addr: u32, len: u8) -> bool {
        match &mut self.form {
            Form::Bits(b) => b.remove(addr, len),
            Form::Set(s) => s.remove(&packed(addr, len)),
        }
    }

    fn contains(&self, addr: u32, len: u8) -> bool {
        match &self.form {
            Form::Bits(b) => b.contains(addr, len),
            Form::Set(s) => s.contains(&packed(addr, len)),
        }
    }

    fn len(&self) -> usize {
        match &self.form {
            Form::Bits(b) => b.len,
            Form::Set(s) => s.len(),
        }
    }

    fn remove_all(&mut self, gone: &V4) {
        match (&mut self.form, &gone.form) {
            (Form::Bits(mine), Form::Bits(theirs)) => mine.remove_all(theirs),
            (_, Form::Set(theirs)) => {
                for &k in theirs {
                    let (addr, len) = unpacked(k);
                    self.remove(addr, len);
                }
            }
            (_, Form::Bits(theirs)) => theirs.for_each(|addr, len| {
                self.remove(addr, len);
            }),
        }
    }
}

/// Bits of the bitmap for lengths 0 to 16: one per prefix, 2^17 - 1.
const SHORT_WORDS: usize = 1 << 17 >> 6;
/// A block's bits: the 2 + 4 + ... + 256 = 510 prefixes of lengths 17 to 24 under a /16.
type Block = [u64; 8];
/// Blocks found by binary search up to this many, then through a table of every /16 (256
/// KiB, against the blocks' 256 KiB at that point).
const SPARSE_MAX: usize = 4096;

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

/// Calls `f` with the index of each bit set in `words`.
fn ones(words: &[u64], mut f: impl FnMut(usize)) {
    for (w, &word) in words.iter().enumerate() {
        let mut x = word;
        while x != 0 {
            f(w * 64 + x.trailing_zeros() as usize);
            x &= x - 1;
        }
    }
}

/// Clears in `words` the bits set in `gone`; how many were set.
fn clear(words: &mut [u64], gone: &[u64]) -> usize {
    let mut n = 0;
    for (w, g) in words.iter_mut().zip(gone) {
        n += (*w & g).count_ones() as usize;
        *w &= !g;
    }
    n
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

/// What bits take with blocks for `sixteens` /16s.
fn bits_bytes(sixteens: usize) -> usize {
    let lookup = if sixteens > SPARSE_MAX {
        4 << 16
    } else {
        8 * sixteens
    };
    SHORT_WORDS * 8 + sixteens * (std::mem::size_of::<Block>() + 2) + lookup
}

/// What a set of `len` prefixes takes: a slot of 5 octets a bucket, at most 7/8 of them used.
fn set_bytes(len: usize) -> usize {
    (len * 8 / 7 + 1).next_power_of_two() * 5
}

impl V4Bits {
    /// The set as bits, if they take at most 5/4 of its memory: a full table's prefixes do
    /// once some 65,000 of them are in (and take half as bits at the end), a sparse table's
    /// (a /16 each) never would.
    fn from_set(set: &HashSet<u32>) -> Option<V4Bits> {
        let mut seen = vec![0u64; 1 << 16 >> 6];
        let mut sixteens = 0usize;
        for &k in set {
            let (addr, len) = unpacked(k);
            if len > 16 {
                let hi = (addr >> 16) as usize;
                if let Some(w) = seen.get_mut(hi / 64) {
                    sixteens += usize::from(*w & 1 << (hi % 64) == 0);
                    *w |= 1 << (hi % 64);
                }
            }
        }
        if bits_bytes(sixteens) * 4 > set_bytes(set.len()) * 5 {
            return None;
        }
        let mut b = V4Bits::default();
        for &k in set {
            let (addr, len) = unpacked(k);
            b.insert(addr, len);
        }
        Some(b)
    }

    /// Back to a set, if the bits take more than twice what it would (a table that became
    /// sparse as it grew).
    fn to_set(&self) -> Option<HashSet<u32>> {
        if bits_bytes(self.blocks.len()) <= 2 * set_bytes(self.len) {
            return None;
        }
        let mut set = HashSet::with_capacity(self.len);
        self.for_each(|addr, len| {
            set.insert(packed(addr, len));
        });
        Some(set)
    }

    /// Calls `f` with each prefix held (address and length).
    fn for_each(&self, mut f: impl FnMut(u32, u8)) {
        if let Some(short) = &self.short {
            ones(&short[..], |i| {
                // Bit 2^len - 1 + n: len is where i + 1 has its top bit.
                let len = usize::BITS - 1 - (i + 1).leading_zeros();
                let n = (i + 1 - (1 << len)) as u32;
                f(n.checked_shl(32 - len).unwrap_or(0), len as u8);
            });
        }
        for (hi, block) in self.block_of.iter().zip(&self.blocks) {
            ones(block, |i| {
                // Bit 2^sub - 2 + n.
                let sub = usize::BITS - 1 - (i + 2).leading_zeros();
                let n = (i + 2 - (1 << sub)) as u32;
                let len = 16 + sub;
                f(u32::from(*hi) << 16 | n << (32 - len), len as u8);
            });
        }
    }

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

    fn contains(&self, addr: u32, len: u8) -> bool {
        let set =
            |words: &[u64], i: usize| words.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1);
        match bit(addr, len) {
            Bit::Short(i) => self.short.as_ref().is_some_and(|short| set(&short[..], i)),
            Bit::Block(hi, i) => self
                .block(hi)
                .and_then(|b| self.blocks.get(b))
                .is_some_and(|block| set(block, i)),
        }
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
            self.len -= clear(&mut mine[..], &theirs[..]);
        }
        for (hi, theirs) in gone.block_of.iter().zip(&gone.blocks) {
            if let Some(mine) = self.block(*hi).and_then(|b| self.blocks.get_mut(b)) {
                self.len -= clear(mine, theirs);
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
        fn contains(&self, n: Nlri) -> bool {
            self.0.contains(&Nlri {
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

    /// A table of `n` /24s, `per` under each /16 (from 1.0.0.0 on).
    fn dense(n: u32, per: u32) -> impl Iterator<Item = Nlri> {
        (0..n).map(move |i| nlri(0x0100_0000 + ((i / per) << 16 | (i % per) << 8), 24, None))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every operation answers as a set of the masked prefixes would, at every length,
        /// in each form: a set; bits with blocks found by binary search; bits with more
        /// /16s than that holds.
        #[test]
        fn answers_as_a_set_of_prefixes(
            ops in prop::collection::vec(
                (0u8..3, any::<u32>(), 0u8..=32, prop::option::weighted(0.1, 0u32..3)),
                1..400,
            ),
            form in 0u8..3,
        ) {
            let mut i = AdjIndex::default();
            let mut m = Model::default();
            let before = match form {
                0 => 0,
                1 => BITS_FROM as u32,
                _ => 16 * (SPARSE_MAX as u32 + 50),
            };
            for n in dense(before, 16) {
                prop_assert_eq!(i.insert(n), m.insert(n));
            }
            prop_assert_eq!(matches!(i.v4.form, Form::Bits(_)), form > 0);
            let (mut gone, mut gone_model) = (AdjIndex::default(), Vec::new());
            for (op, addr, len, id) in ops {
                // Addresses close together half the time, so prefixes share blocks.
                let addr = if addr % 2 == 0 { addr & 0x010f_ffff } else { addr };
                let n = nlri(addr, len, id);
                prop_assert_eq!(i.contains(n), m.contains(n));
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

    #[test]
    fn bits_for_dense_tables_a_set_for_sparse_ones() {
        let mut full = AdjIndex::default();
        for n in dense(50_000, 12) {
            full.insert(n);
        }
        assert!(matches!(full.v4.form, Form::Bits(_)));
        let mut sparse = AdjIndex::default();
        for n in dense(50_000, 1) {
            sparse.insert(n);
        }
        assert!(matches!(sparse.v4.form, Form::Set(_)));
        assert_eq!((full.len(), sparse.len()), (50_000, 50_000));
        // A size once looked at is not looked at again until the table doubles, however a
        // neighbor goes back and forth across it: a sparse table of 4,096 made dense at the
        // same size stays a set, up to 8,192.
        let mut back = AdjIndex::default();
        let spread: Vec<Nlri> = dense(BITS_FROM as u32, 1).collect();
        for n in &spread {
            back.insert(*n);
        }
        assert!(matches!(back.v4.form, Form::Set(_)));
        for n in spread.iter().skip(1) {
            back.remove(*n);
        }
        for n in dense(2 * BITS_FROM as u32, 16).skip(1) {
            back.insert(n);
            let bits = matches!(back.v4.form, Form::Bits(_));
            assert_eq!(bits, back.len() >= 2 * BITS_FROM, "{}", back.len());
        }
        // Dense at first, then a /16 each: back to a set, every prefix kept.
        let mut grown = AdjIndex::default();
        let first: Vec<Nlri> = dense(BITS_FROM as u32, 16).collect();
        let then: Vec<Nlri> = (0..12_000u32)
            .map(|i| nlri(0x2000_0000 + (i << 16), 24, None))
            .collect();
        for n in &first {
            grown.insert(*n);
        }
        assert!(matches!(grown.v4.form, Form::Bits(_)));
        for n in &then {
            grown.insert(*n);
        }
        assert!(matches!(grown.v4.form, Form::Set(_)));
        assert_eq!(grown.len(), first.len() + then.len());
        for n in first.iter().chain(&then) {
            assert!(grown.remove(*n));
        }
        assert!(grown.is_empty());
    }

    /// An enhanced route refresh takes out what was not sent again (RFC 7313 section 4):
    /// whichever form each index has.
    #[test]
    fn remove_all_across_forms() {
        let bits = || {
            let mut i = AdjIndex::default();
            dense(20_000, 16).for_each(|n| {
                i.insert(n);
            });
            i
        };
        let some = || {
            let mut i = AdjIndex::default();
            dense(20_000, 16).step_by(7).for_each(|n| {
                i.insert(n);
            });
            i
        };
        // Bits less bits (a refresh's copy, re-sent prefixes taken out of it).
        let mut adj = bits();
        let mut left = adj.clone();
        for n in dense(20_000, 16).skip(5) {
            left.remove(n);
        }
        adj.remove_all(&left);
        assert_eq!(adj.len(), 19_995);
        // Bits less a set, a set less bits.
        let mut adj = bits();
        let small = some();
        assert!(matches!(small.v4.form, Form::Set(_)));
        adj.remove_all(&small);
        assert_eq!(adj.len(), 20_000 - small.len());
        let mut adj = some();
        adj.remove_all(&bits());
        assert!(adj.is_empty());
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
