//! Nexthop objects (`RTM_NEWNEXTHOP`, Linux 5.3; `ip nexthop`): `struct nhmsg` and the
//! `NHA_*` attributes. A route names one by id (`RTA_NH_ID`), so moving every route through
//! a next hop is one message replacing the object.

use super::route::Hop;
use super::{u32_of, Attrs, Builder, AF_INET, AF_INET6, AF_UNSPEC};
use smallvec::SmallVec;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const NHA_ID: u16 = 1;
pub const NHA_GROUP: u16 = 2;
pub const NHA_GROUP_TYPE: u16 = 3;
pub const NHA_BLACKHOLE: u16 = 4;
pub const NHA_OIF: u16 = 5;
pub const NHA_GATEWAY: u16 = 6;

/// `RTNH_F_ONLINK` in `nhmsg.nh_flags`.
pub const RTNH_F_ONLINK: u32 = 4;

/// What a nexthop object is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NexthopSpec {
    /// One way out.
    Leaf(Hop),
    /// Traffic dropped.
    Blackhole,
    /// A multipath group of other objects: (id, weight 1-256).
    Group(SmallVec<[(u32, u16); 4]>),
}

/// A nexthop object as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NexthopMsg {
    pub id: u32,
    pub protocol: u8,
    pub spec: NexthopSpec,
}

fn addr_of(family: u8, v: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?))),
        _ => None,
    }
}

impl NexthopMsg {
    pub fn decode(payload: &[u8]) -> Option<NexthopMsg> {
        let h = payload.get(..8)?;
        let (&family, &protocol) = (h.first()?, h.get(2)?);
        let mut id = None;
        let mut gateway = None;
        let mut oif = 0;
        let mut blackhole = false;
        let mut group: Option<SmallVec<[(u32, u16); 4]>> = None;
        for (t, v) in Attrs::new(payload.get(8..)?) {
            match t {
                NHA_ID => id = u32_of(v),
                NHA_GATEWAY => gateway = addr_of(family, v),
                NHA_OIF => oif = u32_of(v)?,
                NHA_BLACKHOLE => blackhole = true,
                NHA_GROUP => {
                    group = Some(
                        v.chunks_exact(8)
                            .map(|c| {
                                let id = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                                (id, u16::from(c[4]) + 1)
                            })
                            .collect(),
                    )
                }
                _ => {}
            }
        }
        let spec = match (group, blackhole) {
            (Some(g), _) => NexthopSpec::Group(g),
            (None, true) => NexthopSpec::Blackhole,
            (None, false) => NexthopSpec::Leaf(Hop {
                gateway,
                ifindex: oif,
                weight: 1,
            }),
        };
        Some(NexthopMsg {
            id: id?,
            protocol,
            spec,
        })
    }
}

/// Writes an object add-or-replace. Replacing an object moves every route that names it; a
/// leaf cannot become a group or the reverse (the kernel refuses).
pub fn put_replace(
    b: &mut Builder,
    seq: u32,
    flags: u16,
    id: u32,
    protocol: u8,
    spec: &NexthopSpec,
) {
    let (family, nh_flags) = match spec {
        NexthopSpec::Leaf(Hop {
            gateway: Some(IpAddr::V4(_)),
            ..
        }) => (AF_INET, 0u32),
        NexthopSpec::Leaf(Hop {
            gateway: Some(IpAddr::V6(_)),
            ..
        }) => (AF_INET6, 0),
        // A device-only next hop (a point-to-point link).
        NexthopSpec::Leaf(Hop { gateway: None, .. }) => (AF_INET, 0),
        NexthopSpec::Blackhole | NexthopSpec::Group(_) => (AF_UNSPEC, 0),
    };
    let mut fixed = [family, 0, protocol, 0, 0, 0, 0, 0];
    fixed[4..8].copy_from_slice(&nh_flags.to_ne_bytes());
    b.begin(
        super::RTM_NEWNEXTHOP,
        super::NLM_F_REQUEST | super::NLM_F_CREATE | super::NLM_F_REPLACE | flags,
        seq,
        &fixed,
    );
    b.attr_u32(NHA_ID, id);
    match spec {
        NexthopSpec::Leaf(h) => {
            match h.gateway {
                Some(IpAddr::V4(a)) => b.attr(NHA_GATEWAY, &a.octets()),
                Some(IpAddr::V6(a)) => b.attr(NHA_GATEWAY, &a.octets()),
                None => {}
            }
            b.attr_u32(NHA_OIF, h.ifindex);
        }
        NexthopSpec::Blackhole => b.attr(NHA_BLACKHOLE, &[]),
        NexthopSpec::Group(members) => {
            let mut v = Vec::with_capacity(members.len() * 8);
            for (id, w) in members {
                v.extend_from_slice(&id.to_ne_bytes());
                v.push(u8::try_from(w.clamp(&1, &256) - 1).unwrap_or(255));
                v.extend_from_slice(&[0, 0, 0]);
            }
            b.attr(NHA_GROUP, &v);
        }
    }
    b.end();
}

pub fn put_delete(b: &mut Builder, seq: u32, flags: u16, id: u32) {
    b.begin(
        super::RTM_DELNEXTHOP,
        super::NLM_F_REQUEST | flags,
        seq,
        &[AF_UNSPEC, 0, 0, 0, 0, 0, 0, 0],
    );
    b.attr_u32(NHA_ID, id);
    b.end();
}

pub fn put_dump(b: &mut Builder, seq: u32) {
    b.begin(
        super::RTM_GETNEXTHOP,
        super::NLM_F_REQUEST | super::NLM_F_DUMP,
        seq,
        &[AF_UNSPEC, 0, 0, 0, 0, 0, 0, 0],
    );
    b.end();
}

#[cfg(test)]
mod tests {
    use super::super::Messages;
    use super::*;

    fn round_trip(spec: NexthopSpec) {
        let mut b = Builder::default();
        put_replace(&mut b, 1, 0, 42, 186, &spec);
        let buf = b.finish().to_vec();
        let m = Messages::new(&buf).next().unwrap();
        assert_eq!(
            NexthopMsg::decode(m.payload),
            Some(NexthopMsg {
                id: 42,
                protocol: 186,
                spec
            })
        );
    }

    #[test]
    fn objects_decode_as_encoded() {
        round_trip(NexthopSpec::Leaf(Hop {
            gateway: Some("10.0.0.2".parse().unwrap()),
            ifindex: 7,
            weight: 1,
        }));
        round_trip(NexthopSpec::Leaf(Hop {
            gateway: Some("fe80::1".parse().unwrap()),
            ifindex: 2,
            weight: 1,
        }));
        round_trip(NexthopSpec::Blackhole);
        round_trip(NexthopSpec::Group([(1, 1), (2, 256)].into_iter().collect()));
    }
}
