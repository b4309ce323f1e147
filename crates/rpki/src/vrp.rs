//! Validated ROA payloads (RFC 6811 section 2: prefix, maximum length, origin AS) and route
//! origin validation against them.
//!
//! A table is immutable: the RTR client builds the next one from the last and the changes a
//! cache sent, and the shards validate against whichever table they were last handed, so
//! validation never takes a lock. Lookups walk a sorted array of the distinct ROA prefixes,
//! each linked to the nearest prefix covering it: the ROA prefixes covering a route are the
//! last entry not after it in (address, length) order and that entry's ancestors, so a
//! validation is one binary search and a few steps up.

use ribshard_wire::Prefix;
use std::cmp::Ordering;
use std::fmt;

/// A prefix as a sortable key: the family, the address left-aligned in 128 bits with host
/// bits cleared, and the length. In this order a prefix comes before every prefix it covers,
/// and the prefixes it covers follow it without a gap. The address is kept as two words so
/// that a key is 24 octets, not the 32 a `u128`'s alignment would make it (600,000 VRPs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub v6: bool,
    hi: u64,
    lo: u64,
    pub len: u8,
}

fn mask(addr: u128, len: u8) -> u128 {
    match len {
        0 => 0,
        l if l >= 128 => addr,
        l => addr & !(u128::MAX >> l),
    }
}

impl Key {
    fn new(v6: bool, addr: u128, len: u8) -> Key {
        Key {
            v6,
            hi: (addr >> 64) as u64,
            lo: addr as u64,
            len,
        }
    }

    /// The address, left-aligned in 128 bits.
    pub fn addr(&self) -> u128 {
        (u128::from(self.hi) << 64) | u128::from(self.lo)
    }

    pub fn of(p: &Prefix) -> Key {
        match *p {
            Prefix::V4 { addr, len } => {
                let len = len.min(32);
                Key::new(false, mask(u128::from(addr) << 96, len), len)
            }
            Prefix::V6 { addr, len } => {
                let len = len.min(128);
                Key::new(true, mask(u128::from_be_bytes(addr), len), len)
            }
        }
    }

    pub fn prefix(&self) -> Prefix {
        if self.v6 {
            Prefix::V6 {
                addr: self.addr().to_be_bytes(),
                len: self.len,
            }
        } else {
            Prefix::V4 {
                addr: (self.hi >> 32) as u32,
                len: self.len,
            }
        }
    }

    /// Whether `other` is this prefix or a more specific one inside it.
    pub fn covers(&self, other: &Key) -> bool {
        self.v6 == other.v6 && self.len <= other.len && mask(other.addr(), self.len) == self.addr()
    }

    /// The last key inside this prefix (its last address at full length): every key it
    /// covers lies in `self..=self.last()`.
    pub fn last(&self) -> Key {
        let a = self.addr();
        let last = match self.len {
            0 => u128::MAX,
            l if l >= 128 => a,
            l => a | (u128::MAX >> l),
        };
        Key::new(self.v6, last, u8::MAX)
    }

    /// The first 16 bits of the address.
    fn top16(&self) -> usize {
        (self.hi >> 48) as usize
    }
}

/// One validated ROA payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vrp {
    pub prefix: Key,
    pub max_len: u8,
    pub asn: u32,
}

impl Vrp {
    pub fn new(prefix: Prefix, max_len: u8, asn: u32) -> Vrp {
        Vrp {
            prefix: Key::of(&prefix),
            max_len,
            asn,
        }
    }
}

impl Ord for Vrp {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.prefix, self.max_len, self.asn).cmp(&(o.prefix, o.max_len, o.asn))
    }
}

impl PartialOrd for Vrp {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl fmt::Display for Vrp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} max-length {} AS{}",
            self.prefix.prefix(),
            self.max_len,
            self.asn
        )
    }
}

/// A route's origin validation state (RFC 6811 section 2). Junos calls not-found `unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Validity {
    Valid,
    NotFound,
    Invalid,
}

impl Validity {
    pub fn name(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::NotFound => "not-found",
            Validity::Invalid => "invalid",
        }
    }

    /// The state's value in the BGP Prefix Origin Validation State extended community
    /// (RFC 8097 section 2).
    pub fn rfc8097_value(self) -> u8 {
        match self {
            Validity::Valid => 0,
            Validity::NotFound => 1,
            Validity::Invalid => 2,
        }
    }
}

const NONE: u32 = u32::MAX;

/// A distinct ROA prefix: its records, and the nearest ROA prefix covering it.
#[derive(Clone, Copy, Debug)]
struct Node {
    key: Key,
    parent: u32,
    first: u32,
    end: u32,
}

/// Every VRP a cache gave, sorted, with the index validation walks.
#[derive(Clone, Debug, Default)]
pub struct VrpTable {
    records: Vec<Vrp>,
    nodes: Vec<Node>,
    v4: usize,
    /// For IPv4: where the nodes of each /16 begin (65,537 entries), so a lookup searches
    /// one /16's nodes, not the whole table.
    by16: Vec<u32>,
}

/// What a new table changed: the ROA prefixes whose records differ, sorted; every route
/// whose state may differ lies inside one of them.
pub type Changed = Vec<Key>;

impl VrpTable {
    /// A table of these records (in any order; duplicates count once).
    pub fn new(mut records: Vec<Vrp>) -> VrpTable {
        records.sort_unstable();
        records.dedup();
        VrpTable::sorted(records)
    }

    fn sorted(records: Vec<Vrp>) -> VrpTable {
        let mut nodes: Vec<Node> = Vec::new();
        let mut stack: Vec<u32> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if let Some(n) = nodes.last_mut().filter(|n| n.key == r.prefix) {
                n.end = i as u32 + 1;
                continue;
            }
            // Sorted, so the prefixes covering this one are on the stack, innermost on top.
            while let Some(&top) = stack.last() {
                if nodes[top as usize].key.covers(&r.prefix) {
                    break;
                }
                stack.pop();
            }
            let at = nodes.len() as u32;
            nodes.push(Node {
                key: r.prefix,
                parent: stack.last().copied().unwrap_or(NONE),
                first: i as u32,
                end: i as u32 + 1,
            });
            stack.push(at);
        }
        let v4 = records.iter().take_while(|r| !r.prefix.v6).count();
        let mut by16 = Vec::with_capacity(65_537);
        let mut at = 0usize;
        for top in 0..=65_536u32 {
            while nodes
                .get(at)
                .is_some_and(|n| !n.key.v6 && (n.key.top16() as u32) < top)
            {
                at += 1;
            }
            by16.push(at as u32);
        }
        VrpTable {
            records,
            nodes,
            v4,
            by16,
        }
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Records of IPv4 and IPv6 prefixes.
    pub fn counts(&self) -> (usize, usize) {
        (self.v4, self.records.len() - self.v4)
    }

    pub fn records(&self) -> &[Vrp] {
        &self.records
    }

    /// The records whose prefix covers `prefix` (the ones validation looked at), outermost
    /// prefix last.
    pub fn covering(&self, prefix: &Prefix) -> Vec<Vrp> {
        let mut out = Vec::new();
        self.walk_covering(&Key::of(prefix), |r| {
            out.push(*r);
            false
        });
        out
    }

    /// Calls `f` on each record covering `k` until it returns true; whether any covered.
    fn walk_covering(&self, k: &Key, mut f: impl FnMut(&Vrp) -> bool) -> bool {
        let top = k.top16();
        let at = match (k.v6, self.by16.get(top), self.by16.get(top + 1)) {
            // Nodes of lower /16s are all before the key, of higher ones all after it.
            (false, Some(&lo), Some(&hi)) => {
                let slice = self.nodes.get(lo as usize..hi as usize).unwrap_or(&[]);
                lo as usize + slice.partition_point(|n| n.key <= *k)
            }
            _ => self.nodes.partition_point(|n| n.key <= *k),
        };
        let mut i = match at.checked_sub(1) {
            Some(i) => i as u32,
            None => return false,
        };
        let mut covered = false;
        while let Some(n) = self.nodes.get(i as usize) {
            if n.key.covers(k) {
                covered = true;
                let rs = self
                    .records
                    .get(n.first as usize..n.end as usize)
                    .unwrap_or(&[]);
                if rs.iter().any(&mut f) {
                    return true;
                }
            } else if n.key.v6 != k.v6 {
                break;
            }
            i = n.parent;
        }
        covered
    }

    /// RFC 6811 section 2: valid if a covering VRP has the route's origin AS and a maximum
    /// length the route does not exceed, invalid if VRPs cover it but none matches,
    /// not-found if none covers it. `origin` is `None` where the AS_PATH ends in an AS_SET
    /// (origin NONE: it matches no VRP); AS 0 in a VRP matches nothing (RFC 6483 section 4).
    pub fn validate(&self, prefix: &Prefix, origin: Option<u32>) -> Validity {
        let k = Key::of(prefix);
        let mut valid = false;
        let covered = self.walk_covering(&k, |r| {
            valid = r.asn != 0 && Some(r.asn) == origin && k.len <= r.max_len;
            valid
        });
        match (valid, covered) {
            (true, _) => Validity::Valid,
            (false, true) => Validity::Invalid,
            (false, false) => Validity::NotFound,
        }
    }

    /// The next table: this one less `withdrawn`, plus `announced` (an announcement wins
    /// over a withdrawal of the same record), and the ROA prefixes whose records changed.
    /// One merge of sorted lists, so a cache's increment costs the table's size in copying,
    /// not a sort of it.
    pub fn with_changes(
        &self,
        mut announced: Vec<Vrp>,
        mut withdrawn: Vec<Vrp>,
    ) -> (VrpTable, Changed) {
        announced.sort_unstable();
        announced.dedup();
        withdrawn.sort_unstable();
        withdrawn.dedup();
        let mut out = Vec::with_capacity(self.records.len() + announced.len());
        let mut changed: Changed = Vec::new();
        let (mut a, mut w) = (announced.iter().peekable(), withdrawn.iter().peekable());
        for r in &self.records {
            while let Some(x) = a.next_if(|x| **x < *r) {
                out.push(*x);
                changed.push(x.prefix);
            }
            // Withdrawals of records that are not there change nothing.
            while w.next_if(|x| **x < *r).is_some() {}
            let gone = w.next_if(|x| **x == *r).is_some();
            let again = a.next_if(|x| **x == *r).is_some();
            if gone && !again {
                changed.push(r.prefix);
            } else {
                out.push(*r);
            }
        }
        for x in a {
            out.push(*x);
            changed.push(x.prefix);
        }
        changed.sort_unstable();
        changed.dedup();
        (VrpTable::sorted(out), changed)
    }

    /// The ROA prefixes whose records differ between two tables.
    pub fn diff(&self, new: &VrpTable) -> Changed {
        let mut changed = Vec::new();
        let (mut a, mut b) = (
            self.records.iter().peekable(),
            new.records.iter().peekable(),
        );
        loop {
            let k = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(x), Some(y)) => match x.cmp(y) {
                    Ordering::Equal => {
                        a.next();
                        b.next();
                        continue;
                    }
                    Ordering::Less => a.next().map(|r| r.prefix),
                    Ordering::Greater => b.next().map(|r| r.prefix),
                },
                (Some(_), None) => a.next().map(|r| r.prefix),
                (None, Some(_)) => b.next().map(|r| r.prefix),
            };
            if let Some(k) = k {
                changed.push(k);
            }
        }
        changed.sort_unstable();
        changed.dedup();
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p4(s: &str) -> Prefix {
        let (a, l) = s.split_once('/').unwrap();
        Prefix::v4(a.parse().unwrap(), l.parse().unwrap()).unwrap()
    }

    fn vrp(s: &str, max: u8, asn: u32) -> Vrp {
        Vrp::new(p4(s), max, asn)
    }

    #[test]
    fn keys_are_small() {
        assert_eq!(std::mem::size_of::<Key>(), 24);
        assert_eq!(std::mem::size_of::<Vrp>(), 32);
    }

    #[test]
    fn rfc6811_states() {
        let t = VrpTable::new(vec![
            vrp("10.0.0.0/8", 16, 65001),
            vrp("10.1.0.0/16", 24, 65002),
            vrp("192.0.2.0/24", 24, 0),
        ]);
        assert_eq!(t.validate(&p4("10.0.0.0/8"), Some(65001)), Validity::Valid);
        assert_eq!(t.validate(&p4("10.2.0.0/16"), Some(65001)), Validity::Valid);
        // Longer than the maximum length.
        assert_eq!(
            t.validate(&p4("10.2.3.0/24"), Some(65001)),
            Validity::Invalid
        );
        // The inner ROA allows it, the outer one still covers it.
        assert_eq!(t.validate(&p4("10.1.3.0/24"), Some(65002)), Validity::Valid);
        assert_eq!(
            t.validate(&p4("10.1.3.0/24"), Some(65001)),
            Validity::Invalid
        );
        assert_eq!(t.validate(&p4("10.1.0.0/16"), Some(65001)), Validity::Valid);
        // Origin NONE (AS_SET last) matches nothing.
        assert_eq!(t.validate(&p4("10.0.0.0/8"), None), Validity::Invalid);
        // AS 0 ROAs make everything inside invalid.
        assert_eq!(t.validate(&p4("192.0.2.0/24"), Some(0)), Validity::Invalid);
        assert_eq!(
            t.validate(&p4("11.0.0.0/8"), Some(65001)),
            Validity::NotFound
        );
        // Less specific than every ROA.
        assert_eq!(
            t.validate(&p4("0.0.0.0/0"), Some(65001)),
            Validity::NotFound
        );
        let v6 = Prefix::v6("2001:db8::".parse().unwrap(), 32).unwrap();
        assert_eq!(t.validate(&v6, Some(65001)), Validity::NotFound);
        assert_eq!(t.covering(&p4("10.1.3.0/24")).len(), 2);
    }

    fn any_vrp() -> impl Strategy<Value = Vrp> {
        // A small space, so prefixes nest and collide.
        (0u32..16, 0u8..=6, 0u8..=4, 1u32..4).prop_map(|(a, len, more, asn)| {
            let len = len + 2;
            Vrp::new(Prefix::V4 { addr: a << 26, len }, (len + more).min(32), asn)
        })
    }

    fn slow(records: &[Vrp], p: &Prefix, origin: Option<u32>) -> Validity {
        let k = Key::of(p);
        let cover: Vec<_> = records.iter().filter(|r| r.prefix.covers(&k)).collect();
        if cover
            .iter()
            .any(|r| r.asn != 0 && Some(r.asn) == origin && k.len <= r.max_len)
        {
            Validity::Valid
        } else if cover.is_empty() {
            Validity::NotFound
        } else {
            Validity::Invalid
        }
    }

    proptest! {
        #[test]
        fn validation_agrees_with_the_definition(
            records in proptest::collection::vec(any_vrp(), 0..40),
            routes in proptest::collection::vec((0u32..64, 0u8..=12, 0u32..5), 1..40),
        ) {
            let t = VrpTable::new(records.clone());
            for (a, len, asn) in routes {
                let p = Prefix::V4 { addr: a << 24, len };
                let origin = (asn > 0).then_some(asn);
                prop_assert_eq!(t.validate(&p, origin), slow(&records, &p, origin));
            }
        }

        #[test]
        fn changes_give_the_table_and_what_differs(
            old in proptest::collection::vec(any_vrp(), 0..40),
            announced in proptest::collection::vec(any_vrp(), 0..20),
            withdrawn in proptest::collection::vec(any_vrp(), 0..20),
        ) {
            let t = VrpTable::new(old.clone());
            let (n, changed) = t.with_changes(announced.clone(), withdrawn.clone());
            let mut want: Vec<Vrp> = old.into_iter().filter(|r| !withdrawn.contains(r)).collect();
            want.extend(announced.iter().copied());
            let want = VrpTable::new(want);
            prop_assert_eq!(n.records(), want.records());
            prop_assert_eq!(&changed, &t.diff(&n));
        }
    }
}
