//! Prefix sets: `prefix-list`, `prefix-list-filter` and `route-filter` as binary tries with
//! path compression, answering a longest-match question in O(prefix length) at most. A
//! large set also gets a direct index on the first 16 bits, so a lookup in an IRR-sized list
//! (100,000 entries) visits a handful of nodes instead of twenty.

use ribshard_wire::{Family, Prefix};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A prefix as the trie keys it: the address in the top bits of a `u128` (IPv4 in the top
/// 32), host bits cleared, and the length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub bits: u128,
    pub len: u8,
}

impl Key {
    /// The key of a route's prefix (its host bits cleared: routes are matched as routed).
    #[inline]
    pub fn of(p: &Prefix) -> Key {
        match *p {
            Prefix::V4 { addr, len } => Key {
                bits: mask(u128::from(addr) << 96, len),
                len,
            },
            Prefix::V6 { addr, len } => Key {
                bits: mask(u128::from_be_bytes(addr), len),
                len,
            },
        }
    }

    /// Whether `self` covers `other` (is equal to or shorter than it, with the same bits).
    #[inline]
    pub fn covers(&self, other: &Key) -> bool {
        self.len <= other.len
            && (other.bits ^ self.bits)
                .checked_shr(128 - u32::from(self.len))
                .unwrap_or(0)
                == 0
    }
}

#[inline]
fn mask(bits: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        bits & (u128::MAX << (128 - u32::from(len.min(128))))
    }
}

/// Whether bit `at` (from the top) is set: the side of a trie node its key goes to.
#[inline]
fn bit(bits: u128, at: u8) -> bool {
    (bits >> (127 - u32::from(at.min(127)))) & 1 == 1
}

/// Why a prefix in the configuration is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("\"{0}\" is not a prefix (expected ADDRESS/LENGTH, as 192.0.2.0/24 or 2001:db8::/32)")]
    Syntax(String),
    #[error("{text}: the length is longer than the address ({max} bits)")]
    TooLong { text: String, max: u8 },
    #[error("{text} has host bits set past /{len} (did you mean {masked}?)")]
    HostBits {
        text: String,
        len: u8,
        masked: String,
    },
}

/// Parses `ADDRESS/LENGTH`, refusing host bits (a typo more often than not).
pub fn parse_prefix(text: &str) -> Result<Prefix, PrefixError> {
    let t = text.trim();
    let (a, l) = t
        .split_once('/')
        .ok_or_else(|| PrefixError::Syntax(t.to_string()))?;
    let addr: IpAddr = a.parse().map_err(|_| PrefixError::Syntax(t.to_string()))?;
    let len: u8 = l.parse().map_err(|_| PrefixError::Syntax(t.to_string()))?;
    let p = match addr {
        IpAddr::V4(v4) => Prefix::v4(v4, len),
        IpAddr::V6(v6) => Prefix::v6(v6, len),
    }
    .ok_or(PrefixError::TooLong {
        text: t.to_string(),
        max: if addr.is_ipv4() { 32 } else { 128 },
    })?;
    if p.masked() != p {
        return Err(PrefixError::HostBits {
            text: t.to_string(),
            len,
            masked: p.masked().to_string(),
        });
    }
    Ok(p)
}

/// How a route is compared with a prefix of a `route-filter` or `prefix-list-filter` (Junos
/// match types).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MatchType {
    /// The route is the prefix.
    Exact,
    /// The prefix or anything more specific.
    OrLonger,
    /// Strictly more specific than the prefix.
    Longer,
    /// Within the prefix, at most this long (`upto /24`).
    Upto(u8),
    /// Within the prefix, from this long to that long (`prefix-length-range /25-/32`).
    LengthRange(u8, u8),
    /// On the way from the prefix down to this more specific one, both included
    /// (`through 10.1.0.0/16`).
    Through(Key),
}

impl MatchType {
    /// Whether `route` matches an entry of length `entry_len` that covers it.
    #[inline]
    pub fn matches(&self, entry_len: u8, route: &Key) -> bool {
        match *self {
            MatchType::Exact => route.len == entry_len,
            MatchType::OrLonger => true,
            MatchType::Longer => route.len > entry_len,
            MatchType::Upto(n) => route.len <= n,
            MatchType::LengthRange(a, b) => (a..=b).contains(&route.len),
            MatchType::Through(to) => route.covers(&to),
        }
    }

    /// Parses a Junos match type: `exact`, `orlonger`, `longer`, `upto /N`,
    /// `prefix-length-range /A-/B`, `through PREFIX`; `of` is the entry's prefix, which the
    /// lengths and the through prefix are checked against.
    pub fn parse(text: &str, of: &Prefix) -> Result<MatchType, String> {
        let t = text.trim();
        let max = of.family().max_len();
        let len_of = |s: &str| -> Result<u8, String> {
            let n: u8 = s
                .trim()
                .trim_start_matches('/')
                .parse()
                .map_err(|_| format!("\"{s}\" is not a prefix length (as /24)"))?;
            if n > max {
                return Err(format!("/{n} is longer than the address ({max} bits)"));
            }
            if n < of.len() {
                return Err(format!("/{n} is shorter than the prefix {of} itself"));
            }
            Ok(n)
        };
        let (word, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
        match (word, rest.trim()) {
            ("exact", "") => Ok(MatchType::Exact),
            ("orlonger", "") => Ok(MatchType::OrLonger),
            ("longer", "") => Ok(MatchType::Longer),
            ("upto", n) if !n.is_empty() => Ok(MatchType::Upto(len_of(n)?)),
            ("prefix-length-range", r) if !r.is_empty() => {
                let (a, b) = r
                    .split_once('-')
                    .ok_or_else(|| format!("\"{r}\" is not a length range (as /25-/32)"))?;
                let (a, b) = (len_of(a)?, len_of(b)?);
                if a > b {
                    return Err(format!("the range /{a}-/{b} is empty"));
                }
                Ok(MatchType::LengthRange(a, b))
            }
            ("through", p) if !p.is_empty() => {
                let to = parse_prefix(p).map_err(|e| e.to_string())?;
                let (from, to_key) = (Key::of(of), Key::of(&to));
                if to.family() != of.family() || !from.covers(&to_key) {
                    return Err(format!("{to} is not within {of}"));
                }
                Ok(MatchType::Through(to_key))
            }
            _ => Err(format!(
                "\"{t}\" is not a match type (exact, orlonger, longer, upto /N, \
                 prefix-length-range /A-/B, through PREFIX)"
            )),
        }
    }
}

impl fmt::Display for MatchType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchType::Exact => f.write_str("exact"),
            MatchType::OrLonger => f.write_str("orlonger"),
            MatchType::Longer => f.write_str("longer"),
            MatchType::Upto(n) => write!(f, "upto /{n}"),
            MatchType::LengthRange(a, b) => write!(f, "prefix-length-range /{a}-/{b}"),
            MatchType::Through(k) => write!(f, "through {}/{}", show_bits(k.bits), k.len),
        }
    }
}

fn show_bits(bits: u128) -> String {
    // Only used for display of `through`, whose family the caller knows from context; an
    // address with nothing past the first 32 bits reads best as IPv4.
    if bits & ((1u128 << 96) - 1) == 0 {
        Ipv4Addr::from((bits >> 96) as u32).to_string()
    } else {
        Ipv6Addr::from(bits).to_string()
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    bits: u128,
    len: u8,
    /// Index into the trie's values, or [`NONE`] for a node that only joins two others.
    value: u32,
    child: [u32; 2],
}

impl Node {
    #[inline]
    fn child(&self, right: bool) -> u32 {
        if right {
            self.child[1]
        } else {
            self.child[0]
        }
    }

    fn set_child(&mut self, right: bool, c: u32) {
        if right {
            self.child[1] = c;
        } else {
            self.child[0] = c;
        }
    }
}

/// Children of a new node: `c` on its side.
fn children(right: bool, c: u32) -> [u32; 2] {
    if right {
        [NONE, c]
    } else {
        [c, NONE]
    }
}

/// Bits of the direct index of a large trie.
const STEM: u8 = 16;
/// Tries with more entries than this get the direct index (512 KiB).
const INDEXED: usize = 2048;

/// Per 16-bit stem: the longest entry shorter than 16 bits covering it, and the entries of
/// 16 bits or more under it: at most [`BUCKET`] of them in `bucket[start..start + count]`,
/// longest first, else (`count` 0) the top node of their subtrie in `start`.
#[derive(Clone, Copy, Debug)]
struct Stem {
    short: u32,
    start: u32,
    count: u32,
}

/// Entries a stem keeps in one bucket (scanned in order, in one or two cache lines) rather
/// than under a subtrie.
const BUCKET: usize = 32;

/// The direct index of a large trie.
#[derive(Clone, Debug)]
struct Index {
    stems: Box<[Stem]>,
    /// Entries of the stems' buckets: key and value index.
    bucket: Box<[(Key, u32)]>,
}

/// The prefixes of one family, each with a value, for longest-match lookups.
#[derive(Clone, Debug)]
pub struct PrefixTrie<V> {
    nodes: Vec<Node>,
    values: Vec<(Key, V)>,
    stems: Option<Index>,
    /// Which of the 256 first-octet blocks any entry touches: a route in a block no entry
    /// touches matches none, found without a walk (most routes against a bogon list).
    blocks: [u64; 4],
}

impl<V> Default for PrefixTrie<V> {
    fn default() -> Self {
        PrefixTrie {
            nodes: vec![Node {
                bits: 0,
                len: 0,
                value: NONE,
                child: [NONE; 2],
            }],
            values: Vec::new(),
            stems: None,
            blocks: [0; 4],
        }
    }
}

impl<V> PrefixTrie<V> {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The entries, in insertion order.
    pub fn entries(&self) -> impl Iterator<Item = &(Key, V)> {
        self.values.iter()
    }

    /// The value of `key`, made by `make` if the key is new. Building a trie drops its
    /// direct index; [`PrefixTrie::finish`] makes it again.
    pub fn entry(&mut self, key: Key, make: impl FnOnce() -> V) -> Option<&mut V> {
        self.stems = None;
        let key = Key {
            bits: mask(key.bits, key.len),
            len: key.len,
        };
        // The blocks of the first octet the entry covers.
        let first = (key.bits >> 120) as usize;
        let span = 1usize << (8 - key.len.min(8));
        for b in first..first + span {
            if let Some(w) = self.blocks.get_mut(b >> 6) {
                *w |= 1 << (b & 63);
            }
        }
        let at = self.insert_node(key);
        let v = match self.nodes.get(at).map(|n| n.value) {
            Some(NONE) | None => {
                self.values.push((key, make()));
                let v = (self.values.len() - 1) as u32;
                if let Some(n) = self.nodes.get_mut(at) {
                    n.value = v;
                }
                v
            }
            Some(v) => v,
        };
        self.values.get_mut(v as usize).map(|(_, v)| v)
    }

    fn push(&mut self, n: Node) -> u32 {
        self.nodes.push(n);
        (self.nodes.len() - 1) as u32
    }

    /// The node for `key`, made (and linked) if absent.
    fn insert_node(&mut self, key: Key) -> usize {
        let mut at = 0usize;
        loop {
            let Some(n) = self.nodes.get(at).copied() else {
                return 0;
            };
            if n.len == key.len {
                return at;
            }
            let b = bit(key.bits, n.len);
            let c = n.child(b);
            let Some(cn) = self.nodes.get(c as usize).copied() else {
                let leaf = self.push(Node {
                    bits: key.bits,
                    len: key.len,
                    value: NONE,
                    child: [NONE; 2],
                });
                self.link(at, b, leaf);
                return leaf as usize;
            };
            let differ = (cn.bits ^ key.bits).leading_zeros().min(128) as u8;
            let common = differ.min(cn.len).min(key.len);
            if common == cn.len {
                at = c as usize;
                continue;
            }
            let new = if common == key.len {
                // The new key lies between this node and the child.
                self.push(Node {
                    bits: key.bits,
                    len: key.len,
                    value: NONE,
                    child: children(bit(cn.bits, key.len), c),
                })
            } else {
                // A node joining the child and a new leaf where they part.
                let leaf = self.push(Node {
                    bits: key.bits,
                    len: key.len,
                    value: NONE,
                    child: [NONE; 2],
                });
                let mut child = children(bit(cn.bits, common), c);
                // The two differ at `common`: the leaf takes the other side.
                if bit(key.bits, common) {
                    child[1] = leaf;
                } else {
                    child[0] = leaf;
                }
                let join = self.push(Node {
                    bits: mask(key.bits, common),
                    len: common,
                    value: NONE,
                    child,
                });
                self.link(at, b, join);
                return leaf as usize;
            };
            self.link(at, b, new);
            return new as usize;
        }
    }

    fn link(&mut self, at: usize, right: bool, c: u32) {
        if let Some(n) = self.nodes.get_mut(at) {
            n.set_child(right, c);
        }
    }

    /// Builds the direct index of a large trie. Lookups are right without it, only slower.
    pub fn finish(&mut self) {
        if self.values.len() <= INDEXED {
            self.stems = None;
            return;
        }
        let mut stems = vec![
            Stem {
                short: NONE,
                start: NONE,
                count: 0,
            };
            1 << STEM
        ];
        let mut bucket: Vec<(Key, u32)> = Vec::new();
        for (s, stem) in stems.iter_mut().enumerate() {
            let bits = (s as u128) << (128 - u32::from(STEM));
            let mut at = 0u32;
            while let Some(n) = self.nodes.get(at as usize) {
                if mask(bits, n.len.min(STEM)) != mask(n.bits, n.len.min(STEM)) {
                    break;
                }
                if n.len >= STEM {
                    stem.start = at;
                    break;
                }
                if n.value != NONE {
                    stem.short = n.value;
                }
                at = n.child(bit(bits, n.len));
            }
            // A few entries under the stem: one bucket, longest first.
            let mut under = Vec::new();
            self.collect(stem.start, &mut under, BUCKET + 1);
            if !under.is_empty() && under.len() <= BUCKET {
                under.sort_by_key(|e: &(Key, u32)| std::cmp::Reverse(e.0.len));
                stem.start = bucket.len() as u32;
                stem.count = under.len() as u32;
                bucket.extend(under);
            }
        }
        self.stems = Some(Index {
            stems: stems.into_boxed_slice(),
            bucket: bucket.into_boxed_slice(),
        });
    }

    /// The entries of the subtrie under `at`, up to `max` (more are not looked for).
    fn collect(&self, at: u32, out: &mut Vec<(Key, u32)>, max: usize) {
        let Some(n) = self.nodes.get(at as usize) else {
            return;
        };
        if out.len() >= max {
            return;
        }
        if n.value != NONE {
            out.push((
                Key {
                    bits: n.bits,
                    len: n.len,
                },
                n.value,
            ));
        }
        for c in n.child {
            self.collect(c, out, max);
        }
    }

    /// The longest entry covering `route` (as long as it or shorter), with its key.
    #[inline]
    pub fn longest(&self, route: &Key) -> Option<&(Key, V)> {
        let block = (route.bits >> 120) as usize;
        if self
            .blocks
            .get(block >> 6)
            .is_none_or(|w| w & (1 << (block & 63)) == 0)
        {
            return None;
        }
        let (mut at, mut best) = match &self.stems {
            Some(ix) if route.len >= STEM => {
                let s = ix
                    .stems
                    .get((route.bits >> (128 - u32::from(STEM))) as usize)?;
                if s.count > 0 {
                    let from = s.start as usize;
                    let list = ix.bucket.get(from..from + s.count as usize).unwrap_or(&[]);
                    let v = list
                        .iter()
                        .find(|(k, _)| k.covers(route))
                        .map_or(s.short, |(_, v)| *v);
                    return self.values.get(v as usize);
                }
                (s.start, s.short)
            }
            _ => (0, NONE),
        };
        while let Some(n) = self.nodes.get(at as usize) {
            if n.len > route.len
                || (route.bits ^ n.bits)
                    .checked_shr(128 - u32::from(n.len))
                    .unwrap_or(0)
                    != 0
            {
                break;
            }
            if n.value != NONE {
                best = n.value;
            }
            if n.len == route.len {
                break;
            }
            at = n.child(bit(route.bits, n.len));
        }
        self.values.get(best as usize)
    }

    /// Whether `route` itself is an entry.
    #[inline]
    pub fn contains(&self, route: &Key) -> bool {
        self.longest(route).is_some_and(|(k, _)| k.len == route.len)
    }
}

/// A named set of prefixes of both families (`prefix-list`).
#[derive(Clone, Debug, Default)]
pub struct PrefixSet<V> {
    pub v4: PrefixTrie<V>,
    pub v6: PrefixTrie<V>,
}

impl<V> PrefixSet<V> {
    pub fn trie(&self, f: Family) -> &PrefixTrie<V> {
        match f {
            Family::Ipv4Unicast => &self.v4,
            Family::Ipv6Unicast => &self.v6,
        }
    }

    pub fn trie_mut(&mut self, f: Family) -> &mut PrefixTrie<V> {
        match f {
            Family::Ipv4Unicast => &mut self.v4,
            Family::Ipv6Unicast => &mut self.v6,
        }
    }

    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn finish(&mut self) {
        self.v4.finish();
        self.v6.finish();
    }

    /// Whether the set has entries of this family.
    pub fn has(&self, f: Family) -> bool {
        !self.trie(f).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        parse_prefix(s).unwrap()
    }
    fn k(s: &str) -> Key {
        Key::of(&p(s))
    }

    #[test]
    fn longest_match_in_small_and_indexed_tries() {
        for extra in [0usize, 5000] {
            let mut t: PrefixTrie<u32> = PrefixTrie::default();
            for (i, s) in [
                "10.0.0.0/8",
                "10.1.0.0/16",
                "10.1.2.0/24",
                "0.0.0.0/0",
                "10.1.0.0/20",
            ]
            .iter()
            .enumerate()
            {
                *t.entry(k(s), || 0).unwrap() = i as u32;
            }
            // Filler far away, to make the trie large enough for its index.
            for i in 0..extra {
                let a = Ipv4Addr::from(0xC000_0000u32 + ((i as u32) << 8));
                t.entry(Key::of(&Prefix::v4(a, 24).unwrap()), || 99);
            }
            t.finish();
            let at = |s: &str| t.longest(&k(s)).map(|(k, v)| (k.len, *v));
            assert_eq!(at("10.1.2.0/24"), Some((24, 2)));
            assert_eq!(at("10.1.2.128/25"), Some((24, 2)));
            assert_eq!(at("10.1.3.0/24"), Some((20, 4)));
            assert_eq!(at("10.1.16.0/24"), Some((16, 1)));
            assert_eq!(at("10.2.0.0/16"), Some((8, 0)));
            assert_eq!(at("10.0.0.0/7"), Some((0, 3)));
            assert_eq!(at("11.0.0.0/8"), Some((0, 3)));
            assert!(t.contains(&k("10.1.0.0/20")));
            assert!(!t.contains(&k("10.1.0.0/21")));
        }
    }

    #[test]
    fn host_bits_and_lengths_are_refused() {
        assert!(matches!(
            parse_prefix("10.0.0.1/8"),
            Err(PrefixError::HostBits { .. })
        ));
        assert!(matches!(
            parse_prefix("10.0.0.0/33"),
            Err(PrefixError::TooLong { .. })
        ));
        assert!(parse_prefix("2001:db8::/32").is_ok());
        assert!(parse_prefix("banana").is_err());
    }

    #[test]
    fn match_types_at_their_boundaries() {
        let e = p("10.0.0.0/8");
        let m = |s: &str| MatchType::parse(s, &e).unwrap();
        let r = |s: &str| k(s);
        assert!(m("exact").matches(8, &r("10.0.0.0/8")));
        assert!(!m("exact").matches(8, &r("10.0.0.0/9")));
        assert!(m("orlonger").matches(8, &r("10.0.0.0/8")));
        assert!(!m("longer").matches(8, &r("10.0.0.0/8")));
        assert!(m("longer").matches(8, &r("10.0.0.0/9")));
        assert!(m("upto /24").matches(8, &r("10.1.2.0/24")));
        assert!(!m("upto /24").matches(8, &r("10.1.2.0/25")));
        assert!(m("prefix-length-range /25-/32").matches(8, &r("10.1.2.0/25")));
        assert!(!m("prefix-length-range /25-/32").matches(8, &r("10.1.2.0/24")));
        let t = m("through 10.1.0.0/16");
        assert!(t.matches(8, &r("10.0.0.0/8")));
        assert!(t.matches(8, &r("10.0.0.0/12")));
        assert!(t.matches(8, &r("10.1.0.0/16")));
        assert!(!t.matches(8, &r("10.1.0.0/17")));
        assert!(!t.matches(8, &r("10.128.0.0/9")));
        assert!(MatchType::parse("upto /7", &e).is_err());
        assert!(MatchType::parse("prefix-length-range /30-/25", &e).is_err());
        assert!(MatchType::parse("through 11.0.0.0/16", &e).is_err());
        assert!(MatchType::parse("orshorter", &e).is_err());
    }
}
