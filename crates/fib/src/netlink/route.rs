//! Routes (`RTM_NEWROUTE`, `RTM_DELROUTE`): `struct rtmsg` and the `RTA_*` attributes.

use super::{u32_of, Attrs, Builder, AF_INET, AF_INET6};
use ribshard_wire::Prefix;
use smallvec::SmallVec;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const RTA_DST: u16 = 1;
pub const RTA_OIF: u16 = 4;
pub const RTA_GATEWAY: u16 = 5;
pub const RTA_PRIORITY: u16 = 6;
pub const RTA_MULTIPATH: u16 = 9;
pub const RTA_TABLE: u16 = 15;
pub const RTA_VIA: u16 = 18;
pub const RTA_NH_ID: u16 = 30;

pub const RTN_UNICAST: u8 = 1;
pub const RTN_LOCAL: u8 = 2;
pub const RTN_BROADCAST: u8 = 3;
pub const RTN_ANYCAST: u8 = 4;
pub const RTN_MULTICAST: u8 = 5;
pub const RTN_BLACKHOLE: u8 = 6;
pub const RTN_UNREACHABLE: u8 = 7;
pub const RTN_PROHIBIT: u8 = 8;
pub const RTN_THROW: u8 = 9;

pub const RT_SCOPE_UNIVERSE: u8 = 0;
pub const RT_SCOPE_LINK: u8 = 253;
pub const RT_SCOPE_HOST: u8 = 254;

/// `RTNH_F_DEAD`, `RTNH_F_LINKDOWN`: a next hop the kernel does not use (its link is down).
pub const RTNH_F_DEAD: u32 = 1;
pub const RTNH_F_LINKDOWN: u32 = 16;

/// The main table.
pub const RT_TABLE_MAIN: u32 = 254;
pub const RT_TABLE_LOCAL: u32 = 255;

/// One way out: a gateway (none for a directly connected destination) on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hop {
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
    /// ECMP weight, 1 to 256.
    pub weight: u16,
}

/// How a route forwards, as the kernel says it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum RouteNext {
    /// None given (a blackhole, or a message without one).
    #[default]
    None,
    /// `RTA_GATEWAY` (or `RTA_VIA`) and `RTA_OIF`.
    Via(Hop),
    /// `RTA_MULTIPATH`.
    Multipath(SmallVec<[Hop; 2]>),
    /// `RTA_NH_ID`: a nexthop object.
    Object(u32),
}

/// A route as the kernel reports it (a dump, a notification).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteMsg {
    pub dst: Prefix,
    /// A source-specific route (IPv6 `from`): never one to resolve through.
    pub src_len: u8,
    pub tos: u8,
    pub table: u32,
    pub protocol: u8,
    pub scope: u8,
    /// `RTN_*`.
    pub kind: u8,
    pub priority: u32,
    pub next: RouteNext,
}

fn addr_of(family: u8, v: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?))),
        _ => None,
    }
}

/// `RTA_VIA`: a family (u16) then the address.
fn via_of(v: &[u8]) -> Option<IpAddr> {
    let family = u16::from_ne_bytes(v.get(0..2)?.try_into().ok()?);
    addr_of(u8::try_from(family).ok()?, v.get(2..)?)
}

impl RouteMsg {
    /// Decodes the payload of an `RTM_NEWROUTE` / `RTM_DELROUTE`; `None` for a family other
    /// than IPv4 and IPv6, or a malformed one.
    pub fn decode(payload: &[u8]) -> Option<RouteMsg> {
        let h = payload.get(..12)?;
        let (&family, &dst_len, &src_len, &tos) = (h.first()?, h.get(1)?, h.get(2)?, h.get(3)?);
        let (&table8, &protocol, &scope, &kind) = (h.get(4)?, h.get(5)?, h.get(6)?, h.get(7)?);
        let flags = u32_of(h.get(8..12)?)?;
        if family != AF_INET && family != AF_INET6 {
            return None;
        }
        let mut dst = None;
        let mut table = u32::from(table8);
        let mut priority = 0;
        let mut gateway = None;
        let mut oif = 0;
        let mut next = RouteNext::None;
        let mut object = None;
        for (t, v) in Attrs::new(payload.get(12..)?) {
            match t {
                RTA_DST => dst = addr_of(family, v),
                RTA_TABLE => table = u32_of(v)?,
                RTA_PRIORITY => priority = u32_of(v)?,
                RTA_GATEWAY => gateway = addr_of(family, v),
                RTA_VIA => gateway = via_of(v),
                RTA_OIF => oif = u32_of(v)?,
                RTA_NH_ID => object = Some(u32_of(v)?),
                RTA_MULTIPATH => next = RouteNext::Multipath(hops(family, v)),
                _ => {}
            }
        }
        let down = flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN) != 0;
        if matches!(next, RouteNext::None) && (gateway.is_some() || oif != 0) && !down {
            next = RouteNext::Via(Hop {
                gateway,
                ifindex: oif,
                weight: 1,
            });
        }
        // A route naming an object also shows its ways out (`nexthop_compat_mode`); the
        // object is what it is written with.
        if let Some(id) = object {
            next = RouteNext::Object(id);
        }
        let dst = match (family, dst) {
            (AF_INET, Some(IpAddr::V4(a))) => Prefix::v4(a, dst_len)?,
            (AF_INET6, Some(IpAddr::V6(a))) => Prefix::v6(a, dst_len)?,
            // The default route carries no RTA_DST.
            (AF_INET, None) => Prefix::v4(Ipv4Addr::UNSPECIFIED, dst_len)?,
            (AF_INET6, None) => Prefix::v6(Ipv6Addr::UNSPECIFIED, dst_len)?,
            _ => return None,
        };
        Some(RouteMsg {
            dst: dst.masked(),
            src_len,
            tos,
            table,
            protocol,
            scope,
            kind,
            priority,
            next,
        })
    }
}

/// The `struct rtnexthop` entries of an `RTA_MULTIPATH`.
fn hops(family: u8, mut v: &[u8]) -> SmallVec<[Hop; 2]> {
    let mut out = SmallVec::new();
    while let Some(h) = v.get(..8) {
        let len = usize::from(u16::from_ne_bytes([h[0], h[1]]));
        let down = u32::from(h[2]) & (RTNH_F_DEAD | RTNH_F_LINKDOWN) != 0;
        let weight = u16::from(h[3]) + 1;
        let ifindex = u32::from_ne_bytes([h[4], h[5], h[6], h[7]]);
        if len < 8 || len > v.len() {
            break;
        }
        let mut gateway = None;
        for (t, a) in Attrs::new(v.get(8..len).unwrap_or(&[])) {
            match t {
                RTA_GATEWAY => gateway = addr_of(family, a),
                RTA_VIA => gateway = via_of(a),
                _ => {}
            }
        }
        // A next hop whose link is down carries nothing.
        if !down {
            out.push(Hop {
                gateway,
                ifindex,
                weight,
            });
        }
        v = v.get(super::align(len).min(v.len())..).unwrap_or(&[]);
    }
    out
}

fn family_of(p: &Prefix) -> u8 {
    match p {
        Prefix::V4 { .. } => AF_INET,
        Prefix::V6 { .. } => AF_INET6,
    }
}

fn dst_octets(p: &Prefix, out: &mut [u8; 16]) -> usize {
    match p.masked() {
        Prefix::V4 { addr, .. } => {
            out[..4].copy_from_slice(&addr.to_be_bytes());
            4
        }
        Prefix::V6 { addr, .. } => {
            *out = addr;
            16
        }
    }
}

/// Where a route of ours goes: the table, protocol and metric it is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteKey {
    pub table: u32,
    pub protocol: u8,
    pub priority: u32,
}

/// What a route of ours forwards to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Forward<'a> {
    Object(u32),
    Hops(&'a [Hop]),
    Blackhole,
    Unreachable,
}

fn rtmsg(p: &Prefix, key: &RouteKey, kind: u8, scope: u8) -> [u8; 12] {
    let table8 = if key.table < 256 { key.table as u8 } else { 0 };
    [
        family_of(p),
        p.len(),
        0,
        0,
        table8,
        key.protocol,
        scope,
        kind,
        0,
        0,
        0,
        0,
    ]
}

fn put_gateway(b: &mut Builder, route_family: u8, gw: IpAddr) {
    match (route_family, gw) {
        (AF_INET, IpAddr::V4(a)) => b.attr(RTA_GATEWAY, &a.octets()),
        (AF_INET6, IpAddr::V6(a)) => b.attr(RTA_GATEWAY, &a.octets()),
        // RFC 8950: an IPv4 route through an IPv6 gateway.
        (_, IpAddr::V6(a)) => {
            let mut v = (u16::from(AF_INET6)).to_ne_bytes().to_vec();
            v.extend_from_slice(&a.octets());
            b.attr(RTA_VIA, &v);
        }
        (_, IpAddr::V4(a)) => {
            let mut v = (u16::from(AF_INET)).to_ne_bytes().to_vec();
            v.extend_from_slice(&a.octets());
            b.attr(RTA_VIA, &v);
        }
    }
}

/// Writes a route add-or-replace (`NLM_F_CREATE | NLM_F_REPLACE`): it replaces only the
/// route with the same destination, table, TOS and metric.
pub fn put_replace(b: &mut Builder, seq: u32, flags: u16, p: &Prefix, key: &RouteKey, f: &Forward) {
    let kind = match f {
        Forward::Blackhole => RTN_BLACKHOLE,
        Forward::Unreachable => RTN_UNREACHABLE,
        _ => RTN_UNICAST,
    };
    let family = family_of(p);
    b.begin(
        super::RTM_NEWROUTE,
        super::NLM_F_REQUEST | super::NLM_F_CREATE | super::NLM_F_REPLACE | flags,
        seq,
        &rtmsg(p, key, kind, RT_SCOPE_UNIVERSE),
    );
    put_key(b, p, key);
    match f {
        Forward::Object(id) => b.attr_u32(RTA_NH_ID, *id),
        Forward::Hops([one]) => {
            if let Some(gw) = one.gateway {
                put_gateway(b, family, gw);
            }
            b.attr_u32(RTA_OIF, one.ifindex);
        }
        Forward::Hops(hops) => {
            let at = b.begin_nested(RTA_MULTIPATH);
            for h in hops.iter() {
                let start = b.position();
                let w = u8::try_from(h.weight.clamp(1, 256) - 1).unwrap_or(255);
                b.raw(&[0, 0, 0, w]);
                b.raw(&h.ifindex.to_ne_bytes());
                if let Some(gw) = h.gateway {
                    put_gateway(b, family, gw);
                }
                let len = b.since(start) as u16;
                b.patch_u16(start, len);
            }
            b.end_nested(at);
        }
        Forward::Blackhole | Forward::Unreachable => {}
    }
    b.end();
}

/// The attributes that name a route of ours with the rtmsg: destination, table, metric.
fn put_key(b: &mut Builder, p: &Prefix, key: &RouteKey) {
    let mut dst = [0u8; 16];
    let n = dst_octets(p, &mut dst);
    if !p.is_empty() {
        b.attr(RTA_DST, &dst[..n]);
    }
    b.attr_u32(RTA_TABLE, key.table);
    b.attr_u32(RTA_PRIORITY, key.priority);
}

/// Writes a route delete: only ours (same table, protocol and metric).
pub fn put_delete(b: &mut Builder, seq: u32, flags: u16, p: &Prefix, key: &RouteKey) {
    b.begin(
        super::RTM_DELROUTE,
        super::NLM_F_REQUEST | flags,
        seq,
        &rtmsg(p, key, 0, 0),
    );
    put_key(b, p, key);
    b.end();
}

/// Writes a dump request for the routes of one family.
pub fn put_dump(b: &mut Builder, seq: u32, family: u8) {
    b.begin(
        super::RTM_GETROUTE,
        super::NLM_F_REQUEST | super::NLM_F_DUMP,
        seq,
        &[family, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    b.end();
}

#[cfg(test)]
mod tests {
    use super::super::Messages;
    use super::*;

    fn key() -> RouteKey {
        RouteKey {
            table: 1000,
            protocol: 186,
            priority: 20,
        }
    }

    fn v4(s: &str) -> Prefix {
        let (a, l) = s.split_once('/').unwrap();
        Prefix::v4(a.parse().unwrap(), l.parse().unwrap()).unwrap()
    }

    fn round_trip(p: &Prefix, f: &Forward) -> RouteMsg {
        let mut b = Builder::default();
        put_replace(&mut b, 1, 0, p, &key(), f);
        let buf = b.finish().to_vec();
        let m = Messages::new(&buf).next().unwrap();
        RouteMsg::decode(m.payload).unwrap()
    }

    #[test]
    fn routes_decode_as_encoded() {
        let p = v4("10.1.0.0/16");
        let r = round_trip(&p, &Forward::Object(77));
        assert_eq!((r.dst, r.table, r.protocol, r.priority), (p, 1000, 186, 20));
        assert_eq!(r.next, RouteNext::Object(77));
        let hop = Hop {
            gateway: Some("192.0.2.1".parse().unwrap()),
            ifindex: 3,
            weight: 1,
        };
        assert_eq!(
            round_trip(&p, &Forward::Hops(&[hop])).next,
            RouteNext::Via(hop)
        );
        let two = [
            hop,
            Hop {
                gateway: Some("2001:db8::1".parse().unwrap()),
                ifindex: 4,
                weight: 3,
            },
        ];
        assert_eq!(
            round_trip(&p, &Forward::Hops(&two)).next,
            RouteNext::Multipath(two.iter().copied().collect())
        );
        let d = round_trip(&v4("0.0.0.0/0"), &Forward::Blackhole);
        assert_eq!((d.dst, d.kind), (v4("0.0.0.0/0"), RTN_BLACKHOLE));
    }

    /// What we encode, an independent decoder (netlink-packet-route) reads the same way.
    #[test]
    fn netlink_packet_route_reads_our_routes() {
        use netlink_packet_route::route::{RouteAttribute, RouteMessage};
        use netlink_packet_route::RouteNetlinkMessage;
        let p = Prefix::v6("2001:db8:1::".parse().unwrap(), 48).unwrap();
        let mut b = Builder::default();
        put_replace(&mut b, 9, 0, &p, &key(), &Forward::Object(5));
        let buf = b.finish().to_vec();
        let m =
            netlink_packet_core::NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf).unwrap();
        let netlink_packet_core::NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(
            RouteMessage {
                header, attributes, ..
            },
        )) = m.payload
        else {
            panic!("not a route: {m:?}");
        };
        assert_eq!(header.destination_prefix_length, 48);
        assert!(attributes.contains(&RouteAttribute::Table(1000)));
        assert!(attributes.contains(&RouteAttribute::Priority(20)));
        assert!(attributes.contains(&RouteAttribute::NhId(5)));
    }
}
