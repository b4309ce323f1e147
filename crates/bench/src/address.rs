//! The loopback addresses the bench gives its neighbors: one block of 127.0.0.0/8 per kind
//! of neighbor (127.KIND.0.0/16), numbered 250 to a /24, so no two neighbors of a run share
//! an address at any count (64,000 per kind) and none is the DUT's (127.0.0.1). Before,
//! each kind had one /24 and the 256th neighbor took the first one's address.

use std::net::Ipv4Addr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Full-table upstreams and route-reflector sources.
    Upstream = 1,
    /// Downstreams and route-reflector clients.
    Downstream = 2,
    /// Route-server clients (they send and receive).
    RouteServerClient = 3,
    /// The bench's receivers behind relays (another daemon between the DUT and the bench).
    RelayReceiver = 4,
    /// `--overload`'s neighbors.
    Overload = 5,
}

/// The `i`th neighbor of a kind.
pub fn of(kind: Kind, i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, kind as u8, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// A route-server client's AS: 65001 up, and past the 2-octet private range's end, 4-octet
/// private ASes (RFC 6996), so that none is reserved (AS 65535, RFC 7300) or for
/// documentation (65536-65551, RFC 5398).
pub fn route_server_client_as(i: usize) -> u32 {
    if i < 500 {
        65_001 + i as u32
    } else {
        4_200_000_000 + i as u32
    }
}

/// The client whose AS is `asn` ([`route_server_client_as`]'s inverse).
pub fn route_server_client(asn: u32) -> Option<usize> {
    match asn {
        65_001..=65_500 => Some((asn - 65_001) as usize),
        a if a >= 4_200_000_500 => Some((a - 4_200_000_000) as usize),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn no_two_neighbors_share_an_address() {
        let kinds = [
            Kind::Upstream,
            Kind::Downstream,
            Kind::RouteServerClient,
            Kind::RelayReceiver,
            Kind::Overload,
        ];
        let mut seen = HashSet::new();
        for r in kinds {
            for i in 0..5_000 {
                let a = of(r, i);
                assert!(a.is_loopback() && a != Ipv4Addr::new(127, 0, 0, 1), "{a}");
                assert!(a.octets()[3] != 0 && a.octets()[3] != 255, "{a}");
                assert!(seen.insert(a), "{r:?} {i}: {a} given twice");
            }
        }
    }

    #[test]
    fn route_server_clients_get_usable_ases() {
        for i in 0..2_000 {
            assert_eq!(route_server_client(route_server_client_as(i)), Some(i));
        }
        let ases: HashSet<u32> = (0..2_000).map(route_server_client_as).collect();
        assert_eq!(ases.len(), 2_000);
        for a in ases {
            assert!(
                a != 65_535 && !(65_536..=65_551).contains(&a) && a != 23_456,
                "{a}"
            );
        }
    }
}
