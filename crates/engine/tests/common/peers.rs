//! Settings of the scripted peers the socket tests configure, and the session parameters
//! they speak with.
#![allow(dead_code)]

use ribshard_engine::negotiate::Routing;
use ribshard_engine::PeerSettings;
use ribshard_wire::attributes::{AttrValue, PathAttributes};
use ribshard_wire::{Family, Nlri, Prefix, SessionParams, UpdateBuilder};
use std::net::{IpAddr, Ipv4Addr};

/// 4-octet AS, no extended messages, no Add-Path: what the scripted peers negotiate.
pub fn params() -> SessionParams {
    SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    }
}

/// An eBGP neighbor at `addr` in `asn`, passive, multihop, both families, hold time 90 s;
/// in configured group "down" (advertised to) or "up" (learned from, advertised nothing).
pub fn ebgp_peer(
    addr: [u8; 4],
    asn: u32,
    local_as: u32,
    router_id: Ipv4Addr,
    downstream: bool,
) -> PeerSettings {
    PeerSettings {
        address: IpAddr::from(addr),
        port: 179,
        local_address: None,
        local_as,
        peer_as: asn,
        router_id,
        internal: false,
        hold_time: 90,
        connect_retry_time: 1,
        send_hold_time: 480,
        passive: true,
        disabled: false,
        authentication_key: None,
        tcp_ao: None,
        ttl_security: None,
        multihop: true,
        families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
        prefix_limits: [None, None],
        role: None,
        add_path_receive: false,
        add_path_send: false,
        add_path_select: None,
        graceful_restart: None,
        max_long_lived_stale_time: None,
        description: format!("AS{asn}"),
        routing: Routing {
            group: if downstream { "down" } else { "up" }.into(),
            import: std::sync::Arc::new(ribshard_policy::Chain::accept_all()),
            export: std::sync::Arc::new(ribshard_policy::Chain::builtin(downstream)),
            ..Routing::default()
        },
    }
}

/// An UPDATE announcing one IPv4 prefix with these attributes, as the scripted peers send.
pub fn announce_v4(attrs: Vec<AttrValue>, prefix: Prefix) -> Vec<u8> {
    let b = UpdateBuilder::new(params());
    let enc = b.encode_attributes(&PathAttributes::canonical(attrs));
    let mut out = Vec::new();
    b.announce(
        &enc,
        Family::Ipv4Unicast,
        &[],
        &[Nlri::new(prefix)],
        &mut out,
    )
    .unwrap();
    out
}
