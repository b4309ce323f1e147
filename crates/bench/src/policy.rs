//! `--policy`: the transit scenarios with a typical transit filter on import (bogon
//! prefixes, prefixes too long or too short, bogon AS numbers anywhere in the path, paths of
//! 50 AS or more, our own prefixes) that also sets local preference and tags the route, and
//! an export policy that adds a community. The same policy in each daemon's language, and
//! what it accepts computed here, independently of any of them, for the expected tables.
//! `--policy-change` then reloads the daemon with [`Filter::CHANGED`].

use ribshard_wire::update::{segment, RawAttrIter};
use ribshard_wire::{attr, Prefix};

/// What varies between the transit filter a run starts with and the one a
/// `--policy-change` reload puts in its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The longest prefix accepted.
    pub max_len: u8,
    /// The community the import policy adds is 64500:`tag`.
    pub tag: u16,
}

impl Filter {
    pub const FIRST: Filter = Filter {
        max_len: 24,
        tag: 100,
    };
    /// Refuses the /24s too (about half of a 2010 table) and tags differently, so that every
    /// route the downstream keeps changes.
    pub const CHANGED: Filter = Filter {
        max_len: 23,
        tag: 101,
    };

    /// Whether a route [`passes`] the first filter accepts is accepted by this one too: they
    /// differ only in `max_len` (CHANGED's is the lower) and the tag.
    pub fn keeps(self, key: u64) -> bool {
        key & 0xff <= u64::from(self.max_len)
    }

    /// The communities the import policy (64500:`tag`) and the export policy (64500:200)
    /// add: every route a downstream receives must carry both.
    pub fn tags(self) -> [u32; 2] {
        [64500 << 16 | u32::from(self.tag), 64500 << 16 | 200]
    }
}

/// Bogon IPv4 prefixes (each and everything under it).
pub const BOGONS: [(&str, [u8; 4], u8); 13] = [
    ("0.0.0.0/8", [0, 0, 0, 0], 8),
    ("10.0.0.0/8", [10, 0, 0, 0], 8),
    ("100.64.0.0/10", [100, 64, 0, 0], 10),
    ("127.0.0.0/8", [127, 0, 0, 0], 8),
    ("169.254.0.0/16", [169, 254, 0, 0], 16),
    ("172.16.0.0/12", [172, 16, 0, 0], 12),
    ("192.0.0.0/24", [192, 0, 0, 0], 24),
    ("192.0.2.0/24", [192, 0, 2, 0], 24),
    ("192.168.0.0/16", [192, 168, 0, 0], 16),
    ("198.18.0.0/15", [198, 18, 0, 0], 15),
    ("198.51.100.0/24", [198, 51, 100, 0], 24),
    ("203.0.113.0/24", [203, 0, 113, 0], 24),
    ("224.0.0.0/3", [224, 0, 0, 0], 3),
];

/// Reserved, documentation and private AS numbers (RFC 7607, 6793, 5398, 6996, 7300).
pub const BOGON_ASNS: [(u32, u32); 4] = [
    (0, 0),
    (23456, 23456),
    (64496, 131_071),
    (4_200_000_000, u32::MAX),
];

/// Our own prefix, refused from outside.
pub const OURS: (&str, [u8; 4], u8) = ("145.100.0.0/22", [145, 100, 0, 0], 22);

fn within(p: u32, len: u8, net: [u8; 4], net_len: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(net_len)).unwrap_or(0);
    len >= net_len && p & mask == u32::from_be_bytes(net) & mask
}

/// Whether the transit filter ([`Filter::FIRST`]) accepts a route (attributes as a 4-octet
/// session sends them).
pub fn passes(attrs: &[u8], prefix: &Prefix) -> bool {
    let Prefix::V4 { addr, len } = prefix.masked() else {
        return true;
    };
    if BOGONS.iter().any(|(_, n, l)| within(addr, len, *n, *l)) {
        return false;
    }
    if !(8..=Filter::FIRST.max_len).contains(&len) || within(addr, len, OURS.1, OURS.2) {
        return false;
    }
    let path = RawAttrIter::new(attrs)
        .find(|a| a.type_code == attr::AS_PATH)
        .map_or(&[][..], |a| a.value);
    let (mut length, mut at) = (0usize, 0usize);
    while let (Some(&kind), Some(&n)) = (path.get(at), path.get(at + 1)) {
        let body = path.get(at + 2..at + 2 + 4 * usize::from(n)).unwrap_or(&[]);
        at += 2 + 4 * usize::from(n);
        let bogon = body.chunks_exact(4).any(|c| {
            let a = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            BOGON_ASNS.iter().any(|(lo, hi)| (*lo..=*hi).contains(&a))
        });
        if bogon {
            return false;
        }
        length += match kind {
            segment::AS_SEQUENCE => usize::from(n),
            segment::AS_SET => 1,
            _ => 0,
        };
    }
    length < 50
}

/// ribshard's `[policy-options]`, with `transit-in` and `tag-out`.
pub fn ribshard(f: Filter) -> String {
    let bogons: Vec<String> = BOGONS.iter().map(|(p, _, _)| format!("\"{p}\"")).collect();
    let asns: Vec<String> = BOGON_ASNS
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    format!(
        r#"
[policy-options.prefix-list.bogons]
prefixes = [{bogons}]
[policy-options.prefix-list.ours]
prefixes = ["{ours}"]
[policy-options.community.from-transit]
members = ["64500:{tag}"]
[policy-options.community.to-downstream]
members = ["64500:200"]
[policy-options.as-path]
bogon-asns = ".* [{asns}] .*"
too-long = ".{{50,}}"
[[policy-options.policy-statement.transit-in.term]]
name = "bogons"
from = {{ prefix-list-filter = {{ list = "bogons", match = "orlonger" }} }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.transit-in.term]]
name = "lengths"
from = {{ route-filter = ["0.0.0.0/0 prefix-length-range /{too_long}-/32", "0.0.0.0/0 upto /7"] }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.transit-in.term]]
name = "paths"
from = {{ as-path = ["bogon-asns", "too-long"] }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.transit-in.term]]
name = "ours"
from = {{ prefix-list-filter = {{ list = "ours", match = "orlonger" }} }}
then = {{ action = "reject" }}
[[policy-options.policy-statement.transit-in.term]]
name = "accept"
then = {{ local-preference = 100, community-add = "from-transit", action = "accept" }}
[[policy-options.policy-statement.tag-out.term]]
then = {{ community-add = "to-downstream", action = "accept" }}
"#,
        bogons = bogons.join(", "),
        ours = OURS.0,
        asns = asns.join(" "),
        tag = f.tag,
        too_long = f.max_len + 1,
    )
}

/// BIRD's definitions and filters `transit_in` and `tag_out`.
pub fn bird(f: Filter) -> String {
    let bogons: Vec<String> = BOGONS.iter().map(|(p, _, _)| format!("{p}+")).collect();
    let asns: Vec<String> = BOGON_ASNS
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}..{b}")
            }
        })
        .collect();
    format!(
        "define BOGONS = [ {} ];\ndefine BOGON_ASNS = [ {} ];\ndefine OURS = [ {}+ ];\n\
         filter transit_in {{\n  if net ~ BOGONS then reject;\n  \
         if net.len > {} || net.len < 8 then reject;\n  \
         if bgp_path ~ BOGON_ASNS then reject;\n  if bgp_path.len >= 50 then reject;\n  \
         if net ~ OURS then reject;\n  bgp_local_pref = 100;\n  \
         bgp_community.add((64500, {}));\n  accept;\n}}\n\
         filter tag_out {{\n  bgp_community.add((64500, 200));\n  accept;\n}}\n",
        bogons.join(", "),
        asns.join(", "),
        OURS.0,
        f.max_len,
        f.tag
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};

    fn attrs(path: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        PathAttributes::canonical([AttrValue::AsPath(AsPath::sequence(path.iter().copied()))])
            .encode(&crate::table::params(), &mut out);
        out
    }

    fn p(a: [u8; 4], len: u8) -> Prefix {
        Prefix::v4(a.into(), len).unwrap()
    }

    #[test]
    fn the_filter_as_stated() {
        assert!(passes(&attrs(&[2497, 15169]), &p([8, 8, 8, 0], 24)));
        assert!(!passes(&attrs(&[2497, 15169]), &p([10, 1, 0, 0], 16)));
        assert!(!passes(&attrs(&[2497, 15169]), &p([8, 8, 8, 0], 25)));
        assert!(!passes(&attrs(&[2497, 15169]), &p([8, 0, 0, 0], 7)));
        assert!(!passes(&attrs(&[2497, 64512, 15169]), &p([8, 8, 8, 0], 24)));
        assert!(!passes(&attrs(&[2497; 50]), &p([8, 8, 8, 0], 24)));
        assert!(passes(&attrs(&[2497; 49]), &p([8, 8, 8, 0], 24)));
        assert!(!passes(&attrs(&[2497]), &p([145, 100, 1, 0], 24)));
    }
}
