//! Synthesized TABLE_DUMP_V2 RIB files, for users without real routing data and for tests.
//!
//! The table is deterministic for a given seed: prefixes are drawn with the prefix-length
//! mix of a real IPv4 table (mostly /24, then /22, /23, /20 ...), each of `peers` peers holds
//! every prefix with its own AS path of 2 to 8 hops, so the RIB:FIB ratio is `peers`:1.

use crate::record::{Peer, PeerIndexTable, RibEntry};
use crate::write::MrtWriter;
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Origin, Prefix, SessionParams};
use std::collections::HashSet;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};

/// A small, fast, seedable generator (xorshift64*); quality is ample for test tables.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (0 for n = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Cumulative weights (per mille) of IPv4 prefix lengths in a 2010s full table.
const LENGTHS: &[(u8, u32)] = &[
    (8, 1),
    (12, 3),
    (14, 6),
    (16, 45),
    (17, 55),
    (18, 75),
    (19, 110),
    (20, 160),
    (21, 200),
    (22, 290),
    (23, 370),
    (24, 1000),
];

fn prefix_len(rng: &mut Rng) -> u8 {
    let x = rng.below(1000) as u32;
    LENGTHS
        .iter()
        .find(|(_, w)| x < *w)
        .map(|(l, _)| *l)
        .unwrap_or(24)
}

/// Special-purpose IPv4 blocks (RFC 6890): private, loopback, link local, benchmarking and
/// documentation space. Synthesized tables stay clear of them, so a daemon that filters
/// them, or a test that uses them for next hops, is not confused.
const SPECIAL: &[(u32, u8)] = &[
    (0x0000_0000, 8),  // 0.0.0.0/8
    (0x0a00_0000, 8),  // 10.0.0.0/8
    (0x6440_0000, 10), // 100.64.0.0/10
    (0x7f00_0000, 8),  // 127.0.0.0/8
    (0xa9fe_0000, 16), // 169.254.0.0/16
    (0xac10_0000, 12), // 172.16.0.0/12
    (0xc000_0000, 24), // 192.0.0.0/24
    (0xc000_0200, 24), // 192.0.2.0/24
    (0xc0a8_0000, 16), // 192.168.0.0/16
    (0xc612_0000, 15), // 198.18.0.0/15
    (0xc633_6400, 24), // 198.51.100.0/24
    (0xcb00_7100, 24), // 203.0.113.0/24
];

fn special(addr: u32, len: u8) -> bool {
    SPECIAL.iter().any(|&(a, l)| {
        // Overlap: equal under the shorter of the two masks.
        let m = u32::MAX
            .checked_shl(32 - u32::from(len.min(l)))
            .unwrap_or(0);
        addr & m == a & m
    })
}

/// `count` distinct IPv4 unicast prefixes with the length mix of a real table, in public
/// space (1.0.0.0 to 223.255.255.255 without the special-purpose blocks), sorted.
pub fn prefixes_like_real(rng: &mut Rng, count: usize) -> Vec<Prefix> {
    let mut seen = HashSet::with_capacity(count);
    let mut table = Vec::with_capacity(count);
    while table.len() < count {
        let len = prefix_len(rng);
        let addr = (rng.below(223) as u32 + 1) << 24 | (rng.next_u64() as u32 & 0x00ff_ffff);
        let p = Prefix::V4 { addr, len }.masked();
        if let Prefix::V4 { addr, len } = p {
            if special(addr, len) {
                continue;
            }
        }
        if seen.insert(p) {
            table.push(p);
        }
    }
    table.sort();
    table
}

/// Writes a PEER_INDEX_TABLE and `prefixes` RIB_IPV4_UNICAST records, each with one path
/// per peer. Returns the number of paths written.
pub fn write_table<W: Write>(
    w: &mut MrtWriter<W>,
    prefixes: usize,
    peers: usize,
    seed: u64,
    timestamp: u32,
) -> io::Result<usize> {
    let mut rng = Rng::new(seed);
    let peer_list: Vec<Peer> = (0..peers)
        .map(|i| Peer {
            bgp_id: Ipv4Addr::from(0xC633_6400 + i as u32 + 1),
            address: IpAddr::V4(Ipv4Addr::from(0xC633_6400 + i as u32 + 1)),
            asn: 64_512 + i as u32,
            as4: true,
        })
        .collect();
    w.write_peer_index_table(
        timestamp,
        &PeerIndexTable {
            collector_id: Ipv4Addr::new(192, 0, 2, 254),
            view_name: String::new(),
            peers: peer_list.clone(),
        },
    )?;
    let table = prefixes_like_real(&mut rng, prefixes);
    let params = SessionParams {
        four_octet_as: true,
        mrt_rib: true,
        ..SessionParams::default()
    };
    let mut paths = 0;
    let mut attrs_buf: Vec<Vec<u8>> = Vec::with_capacity(peers);
    for (seq, p) in table.iter().enumerate() {
        attrs_buf.clear();
        let origin_as = 1 + rng.below(399_999) as u32;
        for peer in &peer_list {
            let hops = 1 + rng.below(7) as usize;
            let mut path = vec![peer.asn];
            path.extend((1..hops).map(|_| 1 + rng.below(65_000) as u32));
            path.push(origin_as);
            let attrs = PathAttributes::canonical([
                AttrValue::Origin(Origin::Igp),
                AttrValue::AsPath(AsPath::sequence(path)),
                AttrValue::NextHop(match peer.address {
                    IpAddr::V4(a) => a,
                    IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
                }),
            ]);
            attrs_buf.push(attrs.to_bytes(&params));
        }
        let entries: Vec<RibEntry<'_>> = attrs_buf
            .iter()
            .enumerate()
            .map(|(i, a)| RibEntry {
                peer_index: i as u16,
                originated: timestamp,
                path_id: None,
                attributes: a,
            })
            .collect();
        paths += entries.len();
        w.write_rib(timestamp, seq as u32, p, &entries)?;
    }
    Ok(paths)
}
