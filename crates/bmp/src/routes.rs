//! Route Monitoring messages for routes a shard holds (dumps, the Loc-RIB feed): UPDATEs
//! packed per attribute set, as a speaker would send them, each wrapped for BMP.
//!
//! The live pre-policy feed needs none of this: it forwards the UPDATE as received.

use crate::message::{push_route_monitoring, route_monitoring, PeerHeader, PEER_HEADER_LEN};
use bytes::Bytes;
use hashbrown::HashMap;
use ribshard_rib::{Exported, RouteAttrs};
use ribshard_wire::attr;
use ribshard_wire::attributes::AttrValue;
use ribshard_wire::message::HEADER_LEN;
use ribshard_wire::update::RawAttrIter;
use ribshard_wire::{Family, Nlri, Prefix, SessionParams, UpdateBuilder};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// How routes are encoded for a station: 4-octet AS numbers always (the A flag stays clear),
/// path identifiers where the peer's session has them, messages up to 4,096 octets unless
/// an attribute set needs more (RFC 8654).
pub fn params(add_path: [bool; 2]) -> SessionParams {
    SessionParams {
        four_octet_as: true,
        extended_message: false,
        add_path,
        external: false,
        mrt_rib: false,
        live: false,
    }
}

/// Routes to announce and withdraw for one peer header, each prefix at most once.
/// Announcements are grouped by attribute set over the whole batch, as a speaker's update
/// queue would pack them: the same set reached from two shards, or a few prefixes apart in
/// one shard's decisions, still goes in one UPDATE. Sets are told apart by pointer (they are
/// interned), so grouping costs one small hash lookup per prefix.
#[derive(Default)]
pub struct Packer {
    /// Each announcement: the index of its set in `sets`, and the prefix.
    nlri: Vec<(u32, Nlri)>,
    sets: Vec<(Arc<RouteAttrs>, Family)>,
    by_set: HashMap<(usize, Family), u32>,
    withdraw: [Vec<Nlri>; 2],
}

impl Packer {
    pub fn announce(&mut self, prefix: Prefix, path_id: Option<u32>, attrs: &Arc<RouteAttrs>) {
        let family = prefix.family();
        // The last set first: runs of one set (an UPDATE's prefixes, a dump's neighbours)
        // skip the hash.
        let last = self.nlri.last().map(|(k, _)| *k).filter(|&k| {
            self.sets
                .get(k as usize)
                .is_some_and(|(a, f)| *f == family && Arc::ptr_eq(a, attrs))
        });
        let k = match last {
            Some(k) => k,
            None => {
                let sets = &mut self.sets;
                *self
                    .by_set
                    .entry((Arc::as_ptr(attrs) as usize, family))
                    .or_insert_with(|| {
                        sets.push((attrs.clone(), family));
                        (sets.len() - 1) as u32
                    })
            }
        };
        self.nlri.push((k, Nlri { path_id, prefix }));
    }

    pub fn withdraw(&mut self, prefix: Prefix, path_id: Option<u32>) {
        let family = prefix.family();
        self.withdraw[family.index()].push(Nlri { path_id, prefix });
    }

    pub fn is_empty(&self) -> bool {
        self.nlri.is_empty() && self.withdraw.iter().all(Vec::is_empty)
    }

    /// The Route Monitoring messages, back to back in one buffer: withdrawals first, then
    /// each set's announcements, sets in the order first announced. Sets that cannot be
    /// encoded (attributes too large even for 65,535 octets) are counted in the second value
    /// and left out.
    pub fn finish(&mut self, header: &PeerHeader, params: SessionParams) -> (Vec<Bytes>, usize) {
        let mut out = Vec::with_capacity(self.nlri.len() * 8 + 256);
        let mut updates = Vec::new();
        let peer = header.octets();
        let b = UpdateBuilder::new(params);
        for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
            let w = std::mem::take(&mut self.withdraw[f.index()]);
            if !w.is_empty() {
                updates.clear();
                b.withdraw(f, &w, &mut updates);
                wrap(&mut out, &peer, &updates);
            }
        }
        let mut failed = 0;
        // Stable: a set's prefixes stay in the order they came.
        self.nlri.sort_by_key(|(k, _)| *k);
        let mut nlri = Vec::new();
        for run in self.nlri.chunk_by(|a, b| a.0 == b.0) {
            let Some((attrs, family)) = run.first().and_then(|(k, _)| self.sets.get(*k as usize))
            else {
                continue;
            };
            nlri.clear();
            nlri.extend(run.iter().map(|(_, n)| *n));
            updates.clear();
            if announce(attrs, *family, &nlri, params, &mut updates) {
                wrap(&mut out, &peer, &updates);
            } else {
                failed += 1;
            }
        }
        self.nlri.clear();
        self.sets.clear();
        self.by_set.clear();
        (one_buffer(out), failed)
    }
}

/// Appends UPDATEs announcing `nlri` with `attrs` (back to back) to `out`; false if the
/// set does not fit a message.
pub fn announce(
    attrs: &RouteAttrs,
    family: Family,
    nlri: &[Nlri],
    params: SessionParams,
    out: &mut Vec<u8>,
) -> bool {
    let next_hop = attrs.next_hop();
    // The set's normalized octets are already the 4-octet encoding without MP attributes:
    // sent as they are when they hold the right NEXT_HOP (IPv4) or none (IPv6), which is
    // the common case; else decoded and encoded with the next hop set.
    let as_is = {
        let mut nh = RawAttrIter::new(attrs.raw()).filter(|a| a.type_code == attr::NEXT_HOP);
        match (family, nh.next()) {
            (Family::Ipv4Unicast, Some(a)) => a.value == next_hop,
            (Family::Ipv6Unicast, None) => true,
            _ => false,
        }
    };
    let encoded = |b: &UpdateBuilder| -> std::borrow::Cow<'_, [u8]> {
        if as_is {
            return std::borrow::Cow::Borrowed(attrs.raw());
        }
        let mut pa = attrs.attributes();
        if family == Family::Ipv4Unicast {
            if let Ok(a) = <[u8; 4]>::try_from(next_hop) {
                pa.set(AttrValue::NextHop(Ipv4Addr::from(a)));
            }
        } else {
            pa.remove(attr::NEXT_HOP);
        }
        std::borrow::Cow::Owned(b.encode_attributes(&pa))
    };
    let start = out.len();
    for p in [
        params,
        SessionParams {
            extended_message: true,
            ..params
        },
    ] {
        let b = UpdateBuilder::new(p);
        let enc = encoded(&b);
        out.truncate(start);
        if b.announce(&enc, family, next_hop, nlri, out).is_ok() {
            return true;
        }
    }
    out.truncate(start);
    false
}

/// The End-of-RIB of a family (RFC 4724 section 2), for a peer header.
pub fn end_of_rib(header: &PeerHeader, family: Family) -> Bytes {
    route_monitoring(header, &UpdateBuilder::end_of_rib(family))
}

/// Routes as an update group advertises them ([`ribshard_rib::Exported`]: attributes
/// already encoded for the group's sessions), for one member's Adj-RIB-Out; runs of one set
/// go in one UPDATE, as in [`Packer`].
#[derive(Default)]
pub struct AdvertisedPacker {
    nlri: Vec<Nlri>,
    runs: Vec<(Arc<Exported>, usize)>,
}

impl AdvertisedPacker {
    pub fn announce(&mut self, prefix: Prefix, path_id: Option<u32>, e: &Arc<Exported>) {
        if !self.runs.last().is_some_and(|(a, _)| Arc::ptr_eq(a, e)) {
            self.runs.push((e.clone(), self.nlri.len()));
        }
        self.nlri.push(Nlri { path_id, prefix });
    }

    /// The Route Monitoring messages, encoded with the group's `params`; sets that do not
    /// fit a message are counted and left out (the group withdrew those prefixes).
    pub fn finish(&mut self, header: &PeerHeader, params: SessionParams) -> (Vec<Bytes>, usize) {
        let mut out = Vec::with_capacity(self.nlri.len() * 8 + 256);
        let mut updates = Vec::new();
        let peer = header.octets();
        let b = UpdateBuilder::new(params);
        let mut failed = 0;
        let runs = std::mem::take(&mut self.runs);
        for (k, (e, start)) in runs.iter().enumerate() {
            let end = runs.get(k + 1).map_or(self.nlri.len(), |r| r.1);
            let nlri = self.nlri.get(*start..end).unwrap_or_default();
            updates.clear();
            match b.announce(&e.attrs, e.family, &e.mp_next_hop, nlri, &mut updates) {
                Ok(_) => wrap(&mut out, &peer, &updates),
                Err(_) => failed += 1,
            }
        }
        self.nlri.clear();
        (one_buffer(out), failed)
    }
}

/// The messages of a buffer, as the outbox takes them (none if it is empty).
fn one_buffer(out: Vec<u8>) -> Vec<Bytes> {
    if out.is_empty() {
        Vec::new()
    } else {
        vec![Bytes::from(out)]
    }
}

/// Each UPDATE of a back-to-back buffer (as a member's connection was sent them) in a Route
/// Monitoring message, in one buffer.
pub fn wrap_updates(header: &PeerHeader, updates: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(updates.len() + updates.len() / 8 + PEER_HEADER_LEN);
    wrap(&mut out, &header.octets(), updates);
    Bytes::from(out)
}

/// Wraps each UPDATE of a back-to-back buffer in a Route Monitoring message (RFC 7854
/// section 4.6), appended to `out`.
fn wrap(out: &mut Vec<u8>, peer: &[u8; PEER_HEADER_LEN], updates: &[u8]) {
    let mut rest = updates;
    while rest.len() >= HEADER_LEN {
        let len = usize::from(u16::from_be_bytes([rest[16], rest[17]]));
        let Some(msg) = rest.get(..len.max(HEADER_LEN)) else {
            break;
        };
        push_route_monitoring(out, peer, msg);
        rest = &rest[msg.len()..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::frame;
    use ribshard_rib::LoopChecks;
    use ribshard_wire::attributes::{AsPath, PathAttributes};
    use ribshard_wire::nlri::NlriChain;
    use ribshard_wire::{parse_update, Origin};

    fn set(asn: u32) -> Arc<RouteAttrs> {
        let attrs = PathAttributes::canonical(vec![
            AttrValue::Origin(Origin::Igp),
            AttrValue::AsPath(AsPath::sequence(vec![asn])),
            AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        ])
        .to_bytes(&params([false; 2]));
        let mut key = vec![4, 192, 0, 2, 1];
        key.extend(attrs);
        Arc::new(RouteAttrs::from_key(key.into(), &LoopChecks::default()))
    }

    /// Each Route Monitoring message's (withdrawn, announced) prefixes, in order.
    fn updates(msgs: &[Bytes]) -> Vec<(Vec<String>, Vec<String>)> {
        let mut out = Vec::new();
        for m in msgs {
            let mut rest = &m[..];
            while let Some((f, len)) = frame(rest).unwrap() {
                let u = parse_update(&f.body[HEADER_LEN..], &params([false; 2])).unwrap();
                let names =
                    |c: NlriChain<'_>| -> Vec<String> { c.map(|n| n.prefix.to_string()).collect() };
                out.push((names(u.withdrawn_all()), names(u.announced())));
                rest = &rest[len..];
            }
        }
        out
    }

    /// A set's prefixes go in one UPDATE however they were interleaved with another set's
    /// (a second shard's decisions), withdrawals first.
    #[test]
    fn a_set_is_one_update_across_the_batch() {
        let (a, b) = (set(64_500), set(64_501));
        let p = |s: &str| -> Prefix {
            let (a, l) = s.split_once('/').unwrap();
            Prefix::v4(a.parse().unwrap(), l.parse().unwrap()).unwrap()
        };
        let mut k = Packer::default();
        k.announce(p("10.0.0.0/8"), None, &a);
        k.announce(p("10.1.0.0/16"), None, &a);
        k.announce(p("192.0.2.0/24"), None, &b);
        k.withdraw(p("203.0.113.0/24"), None);
        k.announce(p("11.0.0.0/8"), None, &a);
        k.announce(p("198.51.100.0/24"), None, &b);
        let header = PeerHeader::loc_rib(64_500, Ipv4Addr::new(192, 0, 2, 9));
        let (msgs, failed) = k.finish(&header, params([false; 2]));
        assert_eq!(failed, 0);
        let s = |v: &[&str]| -> Vec<String> { v.iter().map(|x| x.to_string()).collect() };
        assert_eq!(
            updates(&msgs),
            vec![
                (s(&["203.0.113.0/24"]), s(&[])),
                (s(&[]), s(&["10.0.0.0/8", "10.1.0.0/16", "11.0.0.0/8"])),
                (s(&[]), s(&["192.0.2.0/24", "198.51.100.0/24"])),
            ]
        );
        assert!(k.is_empty());
    }
}
