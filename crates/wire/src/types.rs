//! Plain value types shared by every message: address families, prefixes, ORIGIN.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Address Family Identifier (IANA "Address Family Numbers").
pub const AFI_IPV4: u16 = 1;
/// Address Family Identifier for IPv6.
pub const AFI_IPV6: u16 = 2;
/// Subsequent AFI: unicast forwarding (RFC 4760 section 6).
pub const SAFI_UNICAST: u8 = 1;
/// Subsequent AFI: multicast RPF.
pub const SAFI_MULTICAST: u8 = 2;

/// The AS number a 2-octet speaker sees in place of a 4-octet one (RFC 6793 section 2).
pub const AS_TRANS: u32 = 23456;

/// The two address families ribshard routes. Other AFI/SAFI pairs are carried opaquely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Ipv4Unicast,
    Ipv6Unicast,
}

impl Family {
    pub fn from_afi_safi(afi: u16, safi: u8) -> Option<Family> {
        match (afi, safi) {
            (AFI_IPV4, SAFI_UNICAST) => Some(Family::Ipv4Unicast),
            (AFI_IPV6, SAFI_UNICAST) => Some(Family::Ipv6Unicast),
            _ => None,
        }
    }
    pub fn afi(self) -> u16 {
        match self {
            Family::Ipv4Unicast => AFI_IPV4,
            Family::Ipv6Unicast => AFI_IPV6,
        }
    }
    pub fn safi(self) -> u8 {
        SAFI_UNICAST
    }
    pub fn max_len(self) -> u8 {
        match self {
            Family::Ipv4Unicast => 32,
            Family::Ipv6Unicast => 128,
        }
    }
    /// Index into small per-family arrays.
    pub fn index(self) -> usize {
        match self {
            Family::Ipv4Unicast => 0,
            Family::Ipv6Unicast => 1,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Ipv4Unicast => "inet.0 (IPv4 unicast)",
            Family::Ipv6Unicast => "inet6.0 (IPv6 unicast)",
        })
    }
}

/// An IPv4 or IPv6 prefix as a fixed-size key. The address keeps whatever bits the sender put
/// past the prefix length (RFC 4271 section 4.3 calls them irrelevant); use [`Prefix::masked`]
/// for a canonical routing key, and the value as decoded for byte-exact re-encoding.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Prefix {
    V4 {
        addr: u32,
        len: u8,
    },
    /// The address as 16 octets in network order: 20-byte keys, 4-byte aligned.
    V6 {
        addr: [u8; 16],
        len: u8,
    },
}

impl Prefix {
    /// A prefix from an address and length; `None` if the length exceeds the family's width.
    pub fn v4(addr: Ipv4Addr, len: u8) -> Option<Prefix> {
        (len <= 32).then_some(Prefix::V4 {
            addr: u32::from(addr),
            len,
        })
    }
    pub fn v6(addr: Ipv6Addr, len: u8) -> Option<Prefix> {
        (len <= 128).then_some(Prefix::V6 {
            addr: addr.octets(),
            len,
        })
    }
    pub fn family(&self) -> Family {
        match self {
            Prefix::V4 { .. } => Family::Ipv4Unicast,
            Prefix::V6 { .. } => Family::Ipv6Unicast,
        }
    }
    pub fn len(&self) -> u8 {
        match *self {
            Prefix::V4 { len, .. } | Prefix::V6 { len, .. } => len,
        }
    }
    /// True for the default route (length zero).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The prefix with every bit past its length cleared.
    pub fn masked(&self) -> Prefix {
        match *self {
            Prefix::V4 { addr, len } => Prefix::V4 {
                addr: addr & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0),
                len,
            },
            Prefix::V6 { addr, len } => Prefix::V6 {
                addr: (u128::from_be_bytes(addr)
                    & u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0))
                .to_be_bytes(),
                len,
            },
        }
    }
    /// Number of address octets on the wire: ceil(len / 8).
    #[inline]
    pub fn wire_octets(&self) -> usize {
        usize::from(self.len()).div_ceil(8)
    }
    /// Appends the NLRI encoding (RFC 4271 section 4.3): length in bits, then the
    /// minimum number of octets.
    #[inline]
    pub fn encode(&self, out: &mut Vec<u8>) {
        let n = self.wire_octets();
        match *self {
            Prefix::V4 { addr, len } => {
                out.push(len);
                out.extend_from_slice(addr.to_be_bytes().get(..n).unwrap_or(&[]));
            }
            Prefix::V6 { addr, len } => {
                out.push(len);
                out.extend_from_slice(addr.get(..n).unwrap_or(&[]));
            }
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Prefix::V4 { addr, len } => write!(f, "{}/{}", Ipv4Addr::from(addr), len),
            Prefix::V6 { addr, len } => write!(f, "{}/{}", Ipv6Addr::from(addr), len),
        }
    }
}

impl fmt::Debug for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// ORIGIN (RFC 4271 section 5.1.1). Ordered as the decision process prefers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    Igp = 0,
    Egp = 1,
    Incomplete = 2,
}

impl Origin {
    pub fn from_u8(v: u8) -> Option<Origin> {
        match v {
            0 => Some(Origin::Igp),
            1 => Some(Origin::Egp),
            2 => Some(Origin::Incomplete),
            _ => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Igp => "IGP",
            Origin::Egp => "EGP",
            Origin::Incomplete => "INCOMPLETE",
        })
    }
}
