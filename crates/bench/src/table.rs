//! Route feeds: the tables the upstream speakers announce, encoded into UPDATEs before the
//! clock starts, so that sending costs the generator one `write` per 256 KiB.
//!
//! Real tables come from the 2010 RouteViews RIB of `../shared/data` (one table per chosen
//! peer, the attributes as the collector recorded them, prefixes packed by attribute set the
//! way a router sends a full table). Synthesized tables follow the real ones: prefix lengths
//! of a real IPv4 table, AS-path lengths of the 2010 AS2497 table, and prefixes grouped into
//! blocks of one origin that share a path (about six prefixes per attribute set, as in the
//! real table).

use hashbrown::HashMap;
use ribshard_mrt::synth::{prefixes_like_real, Rng};
use ribshard_mrt::Record;
use ribshard_wire::attributes::{AsPath, AsSegment, AttrValue, PathAttributes};
use ribshard_wire::update::segment;
use ribshard_wire::{Family, Nlri, Origin, Prefix, SessionParams, UpdateBuilder};
use std::net::Ipv4Addr;
use std::path::Path;

/// The real RIB: two full IPv4 tables (AS2497, AS4777) and a few partial ones.
pub const REAL_RIB: &str = "routeviews-wide-20100701.mrt.gz";
/// The two full-table peers of [`REAL_RIB`], in the order the scenarios use them.
pub const REAL_PEERS: [u32; 2] = [2497, 4777];

/// Session parameters of every generator session: 4-octet AS, no extended messages, no
/// Add-Path (what all five daemons negotiate with a plain speaker).
pub fn params() -> SessionParams {
    SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    }
}

/// An IPv4 prefix as one integer: address in the high 32 bits, length in the low 8.
pub fn key(p: &Prefix) -> u64 {
    match p {
        Prefix::V4 { addr, len } => (u64::from(*addr) << 8) | u64::from(*len),
        Prefix::V6 { .. } => u64::MAX,
    }
}

/// What one upstream speaker announces.
pub struct Feed {
    /// The AS the speaker has (the first AS of its paths when it is external).
    pub asn: u32,
    /// UPDATE messages back to back, then End-of-RIB for IPv4 unicast.
    pub bytes: Vec<u8>,
    /// Every prefix announced, by [`key`].
    pub prefixes: Vec<u64>,
    /// The prefixes whose route `--policy`'s transit filter accepts ([`crate::policy`]).
    pub accepted: hashbrown::HashSet<u64>,
    /// Each prefix's origin AS (the last of its AS_PATH's AS_SEQUENCE; none after an
    /// AS_SET), for `--rpki`'s ROAs and expectations.
    pub origins: hashbrown::HashMap<u64, Option<u32>>,
    /// Number of UPDATE messages (End-of-RIB included).
    pub messages: usize,
}

/// Packs `(attributes, prefix)` pairs into UPDATEs, one attribute set after the other in
/// the order each set was first seen.
fn pack(asn: u32, routes: impl IntoIterator<Item = (Vec<u8>, Prefix)>) -> Feed {
    let mut order: Vec<(Vec<u8>, Vec<Nlri>)> = Vec::new();
    let mut slot: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut prefixes = Vec::new();
    let mut accepted = hashbrown::HashSet::new();
    let mut origins = hashbrown::HashMap::new();
    for (attrs, p) in routes {
        prefixes.push(key(&p));
        origins.insert(key(&p), crate::rpki::origin(&attrs));
        if crate::policy::passes(&attrs, &p) {
            accepted.insert(key(&p));
        }
        let i = match slot.get(&attrs) {
            Some(i) => *i,
            None => {
                slot.insert(attrs.clone(), order.len());
                order.push((attrs, Vec::new()));
                order.len() - 1
            }
        };
        if let Some((_, v)) = order.get_mut(i) {
            v.push(Nlri::new(p));
        }
    }
    let b = UpdateBuilder::new(params());
    let mut bytes = Vec::with_capacity(prefixes.len() * 12);
    let mut messages = 0;
    for (attrs, nlri) in &order {
        // A set too large for one 4,096-octet message cannot be sent by anyone: skip it.
        if let Ok(n) = b.announce(attrs, Family::Ipv4Unicast, &[], nlri, &mut bytes) {
            messages += n;
        } else {
            prefixes.retain(|k| !nlri.iter().any(|n| key(&n.prefix) == *k));
            accepted.retain(|k| !nlri.iter().any(|n| key(&n.prefix) == *k));
        }
    }
    bytes.extend_from_slice(&UpdateBuilder::end_of_rib(Family::Ipv4Unicast));
    Feed {
        asn,
        bytes,
        prefixes,
        accepted,
        origins,
        messages: messages + 1,
    }
}

impl Feed {
    /// The same feed without its closing End-of-RIB, as a speaker without graceful restart
    /// sends it (RFC 4724 section 2 makes the marker part of the capability).
    pub fn without_end_of_rib(mut self) -> Feed {
        let eor = UpdateBuilder::end_of_rib(Family::Ipv4Unicast);
        if self.bytes.ends_with(&eor) {
            self.bytes.truncate(self.bytes.len() - eor.len());
            self.messages = self.messages.saturating_sub(1);
        }
        self
    }
}

/// The tables of `asns` in the real RIB, limited to its first `limit` prefixes (the RIB is
/// in prefix order, so the tables of a limited run still overlap as the full ones do).
/// `None` when the file is absent.
pub fn real(dir: &Path, asns: &[u32], limit: Option<usize>) -> Option<Vec<Feed>> {
    let path = dir.join(REAL_RIB);
    if !path.is_file() {
        return None;
    }
    let mut r = ribshard_mrt::open(&path).ok()?;
    let mut index: Vec<Option<usize>> = Vec::new();
    let mut routes: Vec<Vec<(Vec<u8>, Prefix)>> = vec![Vec::new(); asns.len()];
    let mut seen = 0usize;
    while let Ok(Some(raw)) = r.next_record() {
        match Record::parse(&raw) {
            Ok(Record::PeerIndexTable(t)) => {
                index = t
                    .peers
                    .iter()
                    .map(|p| asns.iter().position(|a| *a == p.asn))
                    .collect();
            }
            Ok(Record::Rib(rib)) => {
                if rib.prefix.family() != Family::Ipv4Unicast {
                    continue;
                }
                if limit.is_some_and(|l| seen >= l) {
                    break;
                }
                seen += 1;
                for e in &rib.entries {
                    let Some(Some(t)) = index.get(usize::from(e.peer_index)) else {
                        continue;
                    };
                    if let Some(v) = routes.get_mut(*t) {
                        // TABLE_DUMP_V2 keeps attributes in 4-octet AS encoding (RFC 6396
                        // section 4.3.4): exactly what a 4-octet AS session sends.
                        v.push((e.attributes.to_vec(), rib.prefix));
                    }
                }
            }
            _ => {}
        }
    }
    Some(
        asns.iter()
            .zip(routes)
            .map(|(asn, r)| pack(*asn, r))
            .collect(),
    )
}

/// Cumulative per-mille weights of AS-path lengths (peer AS included) in the AS2497 table of
/// the 2010 RouteViews RIB.
const PATH_LENGTHS: &[(usize, u64)] = &[
    (2, 71),
    (3, 498),
    (4, 822),
    (5, 929),
    (6, 968),
    (7, 982),
    (8, 989),
    (9, 993),
    (10, 995),
    (12, 998),
    (15, 1000),
];

fn path_len(rng: &mut Rng) -> usize {
    let x = rng.below(1000);
    PATH_LENGTHS
        .iter()
        .find(|(_, w)| x < *w)
        .map(|(l, _)| *l)
        .unwrap_or(4)
}

/// Prefixes per origin block: half alone, the rest in blocks of up to 64; about six on
/// average, as the real table's prefixes per attribute set.
fn block_len(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=4 => 1,
        5..=6 => 2 + rng.below(3) as usize,
        7..=8 => 5 + rng.below(12) as usize,
        _ => 17 + rng.below(48) as usize,
    }
}

/// One synthesized source.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub asn: u32,
    /// External sources put their AS first in every path; internal ones (route reflector
    /// clients) send the path as learned from a neighbor AS, with LOCAL_PREF.
    pub external: bool,
    /// A non-loopback address (some daemons drop loopback next hops).
    pub next_hop: Ipv4Addr,
}

/// Which sources announce a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Every source announces every prefix, each with its own AS path (RIB:FIB = K:1).
    All,
    /// Each origin block is announced by one source, round robin (a route server's peers).
    Share,
    /// Exactly `routes` paths over the prefixes: each prefix announced by one source or by
    /// several in a row of the round robin (from its origin block's), the first with the
    /// shortest AS path and each next one with its own AS once more in front (so every
    /// daemon picks the same best path, RFC 4271 section 9.1.2.2 a); a route server's peers
    /// sharing destinations, as in the BIRD seed's 2M routes for 800K.
    Shared { routes: usize },
}

/// Who should win a prefix of a [`Spread::Shared`] table: the source with the shortest path,
/// and the next one (a route server that sends each client its best path other than the
/// client's own sends this one to the winner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Winner {
    /// The prefix, by [`key`].
    pub key: u64,
    /// Indices of the sources; `second` is `None` for a prefix of one source.
    pub best: u32,
    pub second: Option<u32>,
}

/// Synthesized tables for `sources` over `prefixes` prefixes; deterministic for a seed.
pub fn synth(sources: &[Source], prefixes: usize, spread: Spread, seed: u64) -> Vec<Feed> {
    synth_with_winners(sources, prefixes, spread, seed).0
}

/// [`synth`], and for [`Spread::Shared`] the winner of every prefix (empty otherwise).
pub fn synth_with_winners(
    sources: &[Source],
    prefixes: usize,
    spread: Spread,
    seed: u64,
) -> (Vec<Feed>, Vec<Winner>) {
    let mut rng = Rng::new(seed);
    let table = prefixes_like_real(&mut rng, prefixes);
    let p = params();
    let mut routes: Vec<Vec<(Vec<u8>, Prefix)>> = vec![Vec::new(); sources.len()];
    let mut winners = Vec::new();
    let mut at = 0;
    let mut block = 0usize;
    while at < table.len() {
        let n = block_len(&mut rng).min(table.len() - at);
        let prefixes = table.get(at..at + n).unwrap_or_default();
        // Public AS numbers only (RFC 6996, RFC 5398 ranges skipped), so no origin is the AS
        // of a bench speaker (private 64512-65534): a receiver would drop such a route as a
        // loop (RFC 4271 section 9.1.2) while the expectation counts it.
        let origin = match 1 + rng.below(330_000) as u32 {
            o if o >= 64_496 => o + (131_072 - 64_496),
            o => o,
        };
        if let Spread::Shared { routes: total } = spread {
            // Sources of the prefix at `x` of the table: what keeps the paths so far on the
            // line to `total` over the whole table, so that the run has exactly `total`.
            let line = |x: usize| total.saturating_mul(x) / table.len().max(1);
            let count = |x: usize| (line(x + 1) - line(x)).clamp(1, sources.len());
            let widest = (at..at + n).map(count).max().unwrap_or(1);
            let hops = path_len(&mut rng);
            let transit: Vec<u32> = (2..hops).map(|_| 1 + rng.below(64_000) as u32).collect();
            for j in 0..widest {
                let i = (block + j) % sources.len();
                let Some(s) = sources.get(i) else { continue };
                let mut path = vec![s.asn; 1 + j];
                path.extend(&transit);
                path.push(origin);
                let values = vec![
                    AttrValue::Origin(Origin::Igp),
                    AttrValue::AsPath(AsPath::sequence(path)),
                    AttrValue::NextHop(s.next_hop),
                ];
                let attrs = PathAttributes::canonical(values).to_bytes(&p);
                if let Some(v) = routes.get_mut(i) {
                    v.extend(
                        (at..at + n)
                            .filter(|x| count(*x) > j)
                            .filter_map(|x| table.get(x))
                            .map(|pf| (attrs.clone(), *pf)),
                    );
                }
            }
            let n_sources = sources.len();
            winners.extend((at..at + n).filter_map(|x| {
                Some(Winner {
                    key: key(table.get(x)?),
                    best: (block % n_sources) as u32,
                    second: (count(x) > 1).then_some(((block + 1) % n_sources) as u32),
                })
            }));
            at += n;
            block += 1;
            continue;
        }
        for (i, s) in sources.iter().enumerate() {
            if spread == Spread::Share && block % sources.len() != i {
                continue;
            }
            // The path as this source has it: its neighbor (its own AS when external, else
            // an AS that differs per source), transit ASes, the block's origin.
            let hops = path_len(&mut rng);
            let mut path = Vec::with_capacity(hops);
            path.push(if s.external { s.asn } else { 64_600 + i as u32 });
            while path.len() + 1 < hops {
                path.push(1 + rng.below(64_000) as u32);
            }
            path.push(origin);
            let mut values = vec![
                AttrValue::Origin(Origin::Igp),
                AttrValue::AsPath(AsPath::sequence(path)),
                AttrValue::NextHop(s.next_hop),
            ];
            if !s.external {
                values.push(AttrValue::LocalPref(100));
            }
            let attrs = PathAttributes::canonical(values).to_bytes(&p);
            if let Some(v) = routes.get_mut(i) {
                v.extend(prefixes.iter().map(|pf| (attrs.clone(), *pf)));
            }
        }
        at += n;
        block += 1;
    }
    let feeds = sources
        .iter()
        .zip(routes)
        .map(|(s, r)| pack(s.asn, r))
        .collect();
    (feeds, winners)
}

/// A recorded update trace, turned into what one upstream speaker replays: messages with
/// their offset from the first one, the speaker's AS put in front of every path.
pub struct Trace {
    /// (microseconds after the first message, UPDATE message).
    pub messages: Vec<(u64, Vec<u8>)>,
    /// Announced and withdrawn prefixes per message, by [`key`].
    pub prefixes: Vec<Vec<(u64, bool)>>,
}

/// Reads the IPv4 unicast UPDATEs of a BGP4MP trace for replay by a speaker of AS `asn`
/// with next hop `next_hop`. IPv6 parts are left out (the bench sessions are IPv4 only).
pub fn trace(path: &Path, asn: u32, next_hop: Ipv4Addr) -> Option<Trace> {
    let mut r = ribshard_mrt::open(path).ok()?;
    let mut out = Trace {
        messages: Vec::new(),
        prefixes: Vec::new(),
    };
    let p = params();
    let b = UpdateBuilder::new(p);
    let mut first: Option<u64> = None;
    while let Ok(Some(raw)) = r.next_record() {
        let t = u64::from(raw.timestamp) * 1_000_000 + u64::from(raw.microseconds.unwrap_or(0));
        let Ok(Record::Bgp4mp(m)) = Record::parse(&raw) else {
            continue;
        };
        let ribshard_mrt::Bgp4mpBody::Message(msg) = m.body else {
            continue;
        };
        let mp = m.params();
        let Ok(ribshard_wire::Message::Update(u)) = ribshard_wire::decode(msg, &mp) else {
            continue;
        };
        let withdrawn: Vec<Nlri> = u.withdrawn.iter().collect();
        let announced: Vec<Nlri> = u.nlri.iter().collect();
        if withdrawn.is_empty() && announced.is_empty() {
            continue;
        }
        let start = *first.get_or_insert(t);
        let mut bytes = Vec::new();
        let mut keys = Vec::new();
        if !withdrawn.is_empty() {
            b.withdraw(Family::Ipv4Unicast, &withdrawn, &mut bytes);
            keys.extend(withdrawn.iter().map(|n| (key(&n.prefix), false)));
        }
        if !announced.is_empty() {
            let mut attrs = PathAttributes::from_view(&u.attrs, &mp);
            // The real path (AS4_PATH where a 2-octet speaker recorded one, RFC 6793), with
            // the replaying speaker's AS in front as an external neighbor must put it.
            let base = match attrs.get(ribshard_wire::attr::AS4_PATH) {
                Some(AttrValue::As4Path(p)) => p.clone(),
                _ => attrs.as_path().cloned().unwrap_or_default(),
            };
            let mut path = base;
            match path.segments.first_mut() {
                Some(s) if s.kind == segment::AS_SEQUENCE && s.asns.len() < 255 => {
                    s.asns.insert(0, asn)
                }
                _ => path.segments.insert(
                    0,
                    AsSegment {
                        kind: segment::AS_SEQUENCE,
                        asns: vec![asn],
                    },
                ),
            }
            attrs.set(AttrValue::AsPath(path));
            attrs.remove(ribshard_wire::attr::AS4_PATH);
            attrs.remove(ribshard_wire::attr::MP_REACH_NLRI);
            attrs.remove(ribshard_wire::attr::MP_UNREACH_NLRI);
            attrs.set(AttrValue::NextHop(next_hop));
            let encoded = b.encode_attributes(&attrs);
            if b.announce(&encoded, Family::Ipv4Unicast, &[], &announced, &mut bytes)
                .is_err()
            {
                continue;
            }
            keys.extend(announced.iter().map(|n| (key(&n.prefix), true)));
        }
        out.messages.push((t.saturating_sub(start), bytes));
        out.prefixes.push(keys);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(n: usize) -> Vec<Source> {
        (0..n)
            .map(|i| Source {
                asn: 65_001 + i as u32,
                external: true,
                next_hop: Ipv4Addr::new(198, 51, 100, i as u8 + 1),
            })
            .collect()
    }

    /// Shared destinations: exactly the routes asked for, every destination announced by its
    /// winner, and the runner-up where there is one, with a path one AS longer.
    #[test]
    fn shared_destinations_have_one_winner_each() {
        let s = sources(7);
        let (feeds, winners) = synth_with_winners(&s, 3_000, Spread::Shared { routes: 7_500 }, 9);
        assert_eq!(feeds.iter().map(|f| f.prefixes.len()).sum::<usize>(), 7_500);
        assert_eq!(winners.len(), 3_000);
        let held: Vec<hashbrown::HashSet<u64>> = feeds
            .iter()
            .map(|f| f.prefixes.iter().copied().collect())
            .collect();
        for w in &winners {
            assert!(held[w.best as usize].contains(&w.key), "{w:?}");
            if let Some(r) = w.second {
                assert_ne!(r, w.best);
                assert!(held[r as usize].contains(&w.key), "{w:?}");
            }
            let sources = held.iter().filter(|h| h.contains(&w.key)).count();
            assert_eq!(sources > 1, w.second.is_some(), "{w:?}");
        }
        let with_second = winners.iter().filter(|w| w.second.is_some()).count();
        assert_eq!(
            with_second, 3_000,
            "2.5 routes a destination: every one has two"
        );
    }

    /// The winner's path is the shortest: the runner-up has its own AS once more in front.
    #[test]
    fn the_runner_up_path_is_one_longer() {
        let s = sources(3);
        let (feeds, winners) = synth_with_winners(&s, 50, Spread::Shared { routes: 100 }, 1);
        let w = winners
            .iter()
            .find(|w| w.second.is_some())
            .expect("a shared prefix");
        // AS_PATH lengths (one AS_SEQUENCE) of the UPDATEs of a feed that announce w.key.
        let path_len = |f: &Feed| {
            let mut lens = Vec::new();
            let mut at = 0;
            while let Some(l) = f.bytes.get(at + 16..at + 18) {
                let len = usize::from(u16::from_be_bytes([l[0], l[1]]));
                let msg = &f.bytes[at..at + len];
                at += len;
                let wlen = usize::from(u16::from_be_bytes([msg[19], msg[20]]));
                let alen = usize::from(u16::from_be_bytes([msg[21 + wlen], msg[22 + wlen]]));
                let attrs = &msg[23 + wlen..23 + wlen + alen];
                let Ok(ribshard_wire::Message::Update(u)) = ribshard_wire::decode(msg, &params())
                else {
                    continue;
                };
                if u.nlri.iter().any(|n| key(&n.prefix) == w.key) {
                    let path = ribshard_wire::update::RawAttrIter::new(attrs)
                        .find(|a| a.type_code == ribshard_wire::attr::AS_PATH)
                        .expect("AS_PATH");
                    lens.push(usize::from(path.value[1]));
                }
            }
            lens
        };
        let best = path_len(&feeds[w.best as usize]);
        let second = path_len(&feeds[w.second.expect("second") as usize]);
        assert_eq!((best.len(), second.len()), (1, 1));
        assert_eq!(second[0], best[0] + 1);
    }
}
