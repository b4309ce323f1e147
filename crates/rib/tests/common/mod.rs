//! Helpers of the rib tests that look at attribute sets as a peer sends or receives them.
#![allow(dead_code)]

use ribshard_wire::{Family, Nlri, Prefix, SessionParams, UpdateBuilder};
use std::net::Ipv4Addr;

/// A 4-octet AS session.
pub fn params() -> SessionParams {
    SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    }
}

/// One UPDATE message announcing 203.0.113.0/24 with these encoded attributes.
pub fn update_for(attrs: &[u8], mp_next_hop: &[u8]) -> Vec<u8> {
    let mut msg = Vec::new();
    UpdateBuilder::new(params())
        .announce(
            attrs,
            Family::Ipv4Unicast,
            mp_next_hop,
            &[Nlri::new(
                Prefix::v4(Ipv4Addr::new(203, 0, 113, 0), 24).unwrap(),
            )],
            &mut msg,
        )
        .unwrap();
    msg
}

/// 203.0.113.0/24, the prefix these tests export.
pub fn prefix() -> Prefix {
    Prefix::v4(Ipv4Addr::new(203, 0, 113, 0), 24).unwrap()
}
