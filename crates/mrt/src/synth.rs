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
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
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

/// Writes a PEER_INDEX_TABLE and `prefixes` RIB_IPV4_UNICAST records, each with one path
/// per peer. Returns the number of paths written.
pub fn write_table<W: Write>(
    w: &mut MrtWriter<W>,
    prefixes: usize,
    peers: usize,
    seed: u64,
    timestamp: u32,
) -> io::Result<usize> {
    let mut rng = Rng(seed | 1);
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
    let mut seen = HashSet::with_capacity(prefixes);
    let mut table = Vec::with_capacity(prefixes);
    while table.len() < prefixes {
        let len = prefix_len(&mut rng);
        // Public-looking space, 1.0.0.0 to 223.255.255.255.
        let addr = (rng.below(223) as u32 + 1) << 24 | (rng.next() as u32 & 0x00ff_ffff);
        let p = Prefix::V4 { addr, len }.masked();
        if seen.insert(p) {
            table.push(p);
        }
    }
    table.sort();
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
