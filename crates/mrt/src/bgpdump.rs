//! Renders MRT records in the one-line format of `bgpdump -m` (RIPE NCC bgpdump 1.6), so
//! that ribshard's output can be compared line for line with the reference tool.
//!
//! The format, per route: `TYPE|time|B/A|peer|peer AS|prefix|AS path|origin|next hop|
//! local pref|MED|communities|AG/NAG|aggregator|`; per withdrawal `TYPE|time|W|peer|AS|prefix`;
//! per state change `TYPE|time|STATE|peer|AS|old|new`. Where bgpdump has quirks (absent
//! NEXT_HOP printed as 255.255.255.255, its AS4_PATH merge, the names of three well-known
//! communities) this module reproduces them, and says so.

use crate::read::RawRecord;
use crate::record::{Bgp4mp, Bgp4mpBody, MrtError, PeerIndexTable, Record, RibRecord, TableDump};
use crate::types;
use ribshard_wire::message::HEADER_LEN;
use ribshard_wire::nlri::{Nlri, NlriView};
use ribshard_wire::types::{AFI_IPV4, AFI_IPV6, AS_TRANS, SAFI_MULTICAST, SAFI_UNICAST};
use ribshard_wire::update::{merge_count, segment, AttrsView, MpReachView, ParsedUpdate};
use ribshard_wire::{parse_attributes_only, parse_update, Family, Prefix};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Streams records to `bgpdump -m` lines. Keeps the PEER_INDEX_TABLE of TABLE_DUMP_V2 files.
#[derive(Default)]
pub struct Bgpdump {
    peers: Option<PeerIndexTable>,
    line: String,
    /// Records or messages that could not be decoded and so produced no line.
    pub skipped: u64,
}

/// What one route line needs beyond the attributes.
#[derive(Clone, Copy)]
struct Route<'r> {
    kind: &'r str,
    time: &'r str,
    flag: &'r str,
    peer: IpAddr,
    peer_as: u32,
    path_id: Option<u32>,
}

impl Bgpdump {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes the lines of one record. Undecodable records are counted in `skipped`.
    pub fn write_record(&mut self, raw: &RawRecord<'_>, out: &mut impl Write) -> io::Result<()> {
        self.line.clear();
        let record = match Record::parse(raw) {
            Ok(r) => r,
            Err(_) => {
                self.skipped += 1;
                return Ok(());
            }
        };
        let time = match raw.microseconds {
            Some(us) => format!("{}.{:06}", raw.timestamp, us),
            None => raw.timestamp.to_string(),
        };
        match record {
            Record::TableDump(t) => self.table_dump(&t, &time),
            Record::PeerIndexTable(t) => self.peers = Some(t),
            Record::Rib(r) => self.rib(&r, &time),
            Record::Bgp4mp(m) => self.bgp4mp(&m, raw.mrt_type, &time),
            Record::Other { .. } => {}
        }
        out.write_all(self.line.as_bytes())
    }

    fn table_dump(&mut self, t: &TableDump<'_>, time: &str) {
        let Ok(parsed) = parse_attributes_only(t.attributes, &TableDump::params()) else {
            self.skipped += 1;
            return;
        };
        let r = Route {
            kind: "TABLE_DUMP",
            time,
            flag: "B",
            peer: t.peer_address,
            peer_as: u32::from(t.peer_as),
            path_id: None,
        };
        let nh = rib_next_hop(&parsed.attrs);
        route_line(&mut self.line, &r, &t.prefix, &parsed.attrs, false, &nh);
    }

    fn rib(&mut self, rib: &RibRecord<'_>, time: &str) {
        let kind = if rib.add_path() {
            "TABLE_DUMP2_AP"
        } else {
            "TABLE_DUMP2"
        };
        for e in &rib.entries {
            let Some(peer) = self
                .peers
                .as_ref()
                .and_then(|p| p.peers.get(usize::from(e.peer_index)))
            else {
                self.skipped += 1;
                continue;
            };
            let Ok(parsed) = parse_attributes_only(e.attributes, &RibRecord::params()) else {
                self.skipped += 1;
                continue;
            };
            let r = Route {
                kind,
                time,
                flag: "B",
                peer: peer.address,
                peer_as: peer.asn,
                path_id: e.path_id,
            };
            let nh = rib_next_hop(&parsed.attrs);
            route_line(&mut self.line, &r, &rib.prefix, &parsed.attrs, true, &nh);
        }
    }

    fn bgp4mp(&mut self, m: &Bgp4mp<'_>, mrt_type: u16, time: &str) {
        let mut kind = String::from(if mrt_type == types::BGP4MP_ET {
            "BGP4MP_ET"
        } else {
            "BGP4MP"
        });
        if m.local() {
            kind.push_str("_LOCAL");
        }
        if m.add_path() {
            kind.push_str("_AP");
        }
        // bgpdump prints the collector's side for messages it sent.
        let (peer, peer_as) = if m.local() {
            (m.local_address, m.local_as)
        } else {
            (m.peer_address, m.peer_as)
        };
        let msg = match m.body {
            Bgp4mpBody::StateChange { old, new } => {
                let _ = writeln!(
                    self.line,
                    "{}|{}|STATE|{}|{}|{}|{}",
                    kind, time, peer, peer_as, old, new
                );
                return;
            }
            Bgp4mpBody::Message(msg) => msg,
        };
        // Only UPDATEs make lines.
        if msg.get(18) != Some(&2) {
            return;
        }
        let params = m.params();
        let body = msg.get(HEADER_LEN..).unwrap_or(&[]);
        let Ok(update) = parse_update(body, &params) else {
            self.skipped += 1;
            return;
        };
        let mut r = Route {
            kind: &kind,
            time,
            flag: "W",
            peer,
            peer_as,
            path_id: None,
        };
        self.update_lines(&mut r, &update, !m.as4(), m.add_path());
    }

    fn update_lines(
        &mut self,
        r: &mut Route<'_>,
        u: &ParsedUpdate<'_>,
        two_octet: bool,
        add_path: bool,
    ) {
        let a = &u.attrs;
        // Withdrawals: the Withdrawn Routes field, then MP_UNREACH_NLRI.
        let unreach = a
            .mp_unreach
            .and_then(|m| printed_nlri(m.afi, m.safi, m.nlri_bytes, add_path));
        for n in u.withdrawn.iter().chain(unreach.into_iter().flatten()) {
            let _ = write!(
                self.line,
                "{}|{}|W|{}|{}|{}",
                r.kind, r.time, r.peer, r.peer_as, n.prefix
            );
            if let Some(id) = n.path_id {
                let _ = write!(self.line, "|{id}");
            }
            self.line.push('\n');
        }
        r.flag = "A";
        let v4_nh = a.next_hop.unwrap_or(Ipv4Addr::BROADCAST);
        for n in u.nlri.iter() {
            announce(
                &mut self.line,
                r,
                &n,
                a,
                two_octet,
                &IpAddr::V4(v4_nh).to_string(),
            );
        }
        if let Some(mp) = a.mp_reach {
            let nh = mp_next_hop(&mp);
            let nlri = printed_nlri(mp.afi, mp.safi, mp.nlri_bytes, add_path);
            for n in nlri.into_iter().flatten() {
                announce(&mut self.line, r, &n, a, two_octet, &nh);
            }
        }
    }
}

fn announce(line: &mut String, r: &Route<'_>, n: &Nlri, a: &AttrsView<'_>, two: bool, nh: &str) {
    let route = Route {
        path_id: n.path_id,
        ..*r
    };
    route_line(line, &route, &n.prefix, a, !two, nh);
}

/// bgpdump prints IPv4 and IPv6 unicast and multicast NLRI (and the old SAFI 3, both);
/// they share the unicast prefix syntax.
fn printed_nlri(afi: u16, safi: u8, bytes: &[u8], add_path: bool) -> Option<NlriView<'_>> {
    if !matches!(safi, SAFI_UNICAST | SAFI_MULTICAST | 3) {
        return None;
    }
    let syntax = match afi {
        AFI_IPV4 => Family::Ipv4Unicast,
        AFI_IPV6 => Family::Ipv6Unicast,
        _ => return None,
    };
    NlriView::parse(bytes, syntax, add_path)
}

fn mp_next_hop(mp: &MpReachView<'_>) -> String {
    if mp.afi == AFI_IPV4 && !mp.abbreviated {
        let mut a = [0u8; 4];
        if let Some(src) = mp.next_hop.get(..4) {
            a.copy_from_slice(src);
        }
        return Ipv4Addr::from(a).to_string();
    }
    let mut a = [0u8; 16];
    let n = mp.next_hop.len().min(16);
    if let (Some(d), Some(s)) = (a.get_mut(..n), mp.next_hop.get(..n)) {
        d.copy_from_slice(s);
    }
    Ipv6Addr::from(a).to_string()
}

/// Next hop of a RIB entry: the MP_REACH_NLRI one when present, else NEXT_HOP; bgpdump
/// prints an absent NEXT_HOP as 255.255.255.255 (its INADDR_NONE default).
fn rib_next_hop(a: &AttrsView<'_>) -> String {
    match a.mp_reach {
        Some(mp) if mp.afi == AFI_IPV6 || mp.abbreviated => mp_next_hop(&mp),
        _ => a.next_hop.unwrap_or(Ipv4Addr::BROADCAST).to_string(),
    }
}

fn route_line(
    line: &mut String,
    r: &Route<'_>,
    prefix: &Prefix,
    a: &AttrsView<'_>,
    four_octet: bool,
    next_hop: &str,
) {
    let (path, aggregator) = as_path_and_aggregator(a, four_octet);
    let _ = write!(
        line,
        "{}|{}|{}|{}|{}|{}|",
        r.kind, r.time, r.flag, r.peer, r.peer_as, prefix
    );
    if let Some(id) = r.path_id {
        let _ = write!(line, "{id}|");
    }
    let origin = a.origin.map(|o| o.to_string());
    let _ = write!(
        line,
        "{}|{}|{}|{}|{}|",
        path,
        origin.as_deref().unwrap_or("INCOMPLETE"),
        next_hop,
        a.local_pref.unwrap_or(0),
        a.med.unwrap_or(0)
    );
    if let Some(c) = a.communities {
        write_communities(line, c);
    }
    line.push('|');
    line.push_str(if a.atomic_aggregate { "AG" } else { "NAG" });
    line.push('|');
    if let Some((asn, addr)) = aggregator {
        let _ = write!(line, "{asn} {addr}");
    }
    line.push_str("|\n");
}

/// Communities as bgpdump writes them: `AS:value`, with three well-known names (it calls
/// 0xFFFFFF03 `local-AS`, RFC 1997's NO_EXPORT_SUBCONFED).
fn write_communities(line: &mut String, c: &[u8]) {
    for (i, chunk) in c.chunks_exact(4).enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let v = u32::from_be_bytes([
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
            chunk.get(3).copied().unwrap_or(0),
        ]);
        match v {
            0xFFFF_FF01 => line.push_str("no-export"),
            0xFFFF_FF02 => line.push_str("no-advertise"),
            0xFFFF_FF03 => line.push_str("local-AS"),
            _ => {
                let _ = write!(line, "{}:{}", v >> 16, v & 0xffff);
            }
        }
    }
}

type Segments = Vec<(u8, Vec<u32>)>;

/// The AS path string and aggregator, after bgpdump's AS4_PATH / AS4_AGGREGATOR handling
/// for 2-octet data (RFC 6793 section 4.2.3, with bgpdump's own merge, reproduced as is:
/// it fills the leading part from the first AS_PATH segment only).
fn as_path_and_aggregator(
    a: &AttrsView<'_>,
    four_octet: bool,
) -> (String, Option<(u32, Ipv4Addr)>) {
    let mut aggregator = a.aggregator.map(|g| (g.asn, g.address));
    let segs: Option<Segments> = a
        .as_path
        .map(|p| p.segments().map(|s| (s.kind, s.asns().collect())).collect());
    let Some(segs) = segs else {
        return (String::new(), aggregator);
    };
    if four_octet {
        return (path_string(&segs), aggregator);
    }
    if let (Some(agg), Some(agg4)) = (a.aggregator, a.as4_aggregator) {
        if agg.asn != AS_TRANS {
            return (path_string(&segs), aggregator);
        }
        aggregator = Some((agg4.asn, agg4.address));
    }
    let Some(as4) = a.as4_path else {
        return (path_string(&segs), aggregator);
    };
    let new: Segments = as4
        .segments()
        .map(|s| (s.kind, s.asns().collect()))
        .collect();
    let (old_count, new_count) = (merge_count(&segs), merge_count(&new));
    if old_count < new_count {
        return (path_string(&segs), aggregator);
    }
    let want = old_count - new_count;
    let mut merged: Segments = Vec::new();
    let mut have = 0usize;
    if let Some(first) = segs.first() {
        while have < want {
            let (k, asns) = first.clone();
            if k == segment::AS_SET || k == segment::AS_CONFED_SET {
                have += 1;
                merged.push((k, asns));
            } else {
                have += asns.len();
                let mut asns = asns;
                if have > want {
                    asns.truncate(asns.len() - (have - want));
                }
                merged.push((k, asns));
            }
        }
    }
    merged.extend(new);
    (path_string(&merged), aggregator)
}

fn path_string(segs: &Segments) -> String {
    let delim = |k: u8| match k {
        segment::AS_SET => ('{', '}'),
        segment::AS_CONFED_SET => ('[', ']'),
        segment::AS_CONFED_SEQUENCE => ('(', ')'),
        _ => (' ', ' '),
    };
    let mut s = String::new();
    let mut prev = segment::AS_SEQUENCE;
    let mut space = false;
    for (k, asns) in segs {
        if prev != segment::AS_SEQUENCE {
            s.push(delim(prev).1);
        }
        if space {
            s.push(' ');
        }
        if *k != segment::AS_SEQUENCE {
            s.push(delim(*k).0);
        }
        space = false;
        let sep = if *k == segment::AS_SET || *k == segment::AS_CONFED_SET {
            ','
        } else {
            ' '
        };
        for asn in asns {
            if space {
                s.push(sep);
            } else {
                space = true;
            }
            let _ = write!(s, "{asn}");
        }
        prev = *k;
    }
    if let Some((k, _)) = segs.last() {
        if *k != segment::AS_SEQUENCE {
            s.push(delim(*k).1);
        }
    }
    s
}

/// Dumps a whole MRT file as `bgpdump -m` does. Returns records read and those skipped.
pub fn dump_file(path: &std::path::Path, out: &mut impl Write) -> Result<(u64, u64), MrtError> {
    let mut reader = crate::open(path)?;
    let mut fmt = Bgpdump::new();
    while let Some(rec) = reader.next_record()? {
        fmt.write_record(&rec, out)?;
    }
    Ok((reader.records_read(), fmt.skipped))
}
