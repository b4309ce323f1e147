//! A session's Adj-RIB-In index for one family: which prefixes (with path identifiers under
//! Add-Path) the neighbor has announced and not withdrawn. It gives the counts an operator
//! sees and prefix limits act on (RFC 4486) at once, as each UPDATE is read, and what an
//! enhanced route refresh did not send again (RFC 7313); the paths themselves live in the
//! shards.
//!
//! One per neighbor and family, so it is kept small: an IPv4 prefix of length 24 or less
//! without a path identifier (nearly every one) is a single `u32` (the address, whose low
//! octet is zero, with the length there), 5 octets a slot with the hash table's control byte;
//! a longer one a `u64` (9), against 29 for the general key. Two full tables: 9.0 MiB of
//! indexes with `u64` keys, 5.0 with these (the memory bench). SipHash with random keys, as
//! the standard library's sets: the keys come from the neighbor.

use ribshard_wire::{Nlri, Prefix};
use std::collections::HashSet;

#[derive(Clone, Debug, Default)]
pub struct AdjIndex {
    /// IPv4 prefixes of length 24 or less without a path identifier: address | length.
    v4: HashSet<u32>,
    /// Longer IPv4 prefixes without a path identifier: address << 8 | length.
    v4_long: HashSet<u64>,
    /// Everything else (IPv6, Add-Path).
    other: HashSet<Nlri>,
}

enum Key {
    V4(u32),
    V4Long(u64),
    Other(Nlri),
}

/// The key of a prefix as received: host bits past the length are irrelevant (RFC 4271
/// section 4.3), so they are cleared.
fn key(n: Nlri) -> Key {
    let prefix = n.prefix.masked();
    match (prefix, n.path_id) {
        // Masked, the address's low octet is zero: the length fits there.
        (Prefix::V4 { addr, len }, None) if len <= 24 => Key::V4(addr | u32::from(len)),
        (Prefix::V4 { addr, len }, None) => Key::V4Long(u64::from(addr) << 8 | u64::from(len)),
        _ => Key::Other(Nlri { prefix, ..n }),
    }
}

impl AdjIndex {
    /// True if it was not there.
    pub fn insert(&mut self, n: Nlri) -> bool {
        match key(n) {
            Key::V4(k) => self.v4.insert(k),
            Key::V4Long(k) => self.v4_long.insert(k),
            Key::Other(n) => self.other.insert(n),
        }
    }

    /// True if it was there.
    pub fn remove(&mut self, n: Nlri) -> bool {
        match key(n) {
            Key::V4(k) => self.v4.remove(&k),
            Key::V4Long(k) => self.v4_long.remove(&k),
            Key::Other(n) => self.other.remove(&n),
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
        for k in &gone.v4 {
            self.v4.remove(k);
        }
        for k in &gone.v4_long {
            self.v4_long.remove(k);
        }
        for n in &gone.other {
            self.other.remove(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

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
