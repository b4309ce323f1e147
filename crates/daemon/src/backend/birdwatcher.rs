//! Routes as the birdwatcher API writes them (`ribshard_mgmt::birdwatcher`): each path of a
//! route one JSON line, rendered in the shard that holds it, as the other layouts are.

use super::routes::{as_path_segments, next_hop, sent, target_or_origin, PeerNames};
use ribshard_engine::pipeline::ShownRoute;
use ribshard_mgmt::birdwatcher::{protocol_id, Bgp, Route};
use ribshard_rib::PathState;
use ribshard_wire::attributes::{AttrValue, PathAttributes};
use ribshard_wire::Origin;
use std::time::{SystemTime, UNIX_EPOCH};

/// BIRD's preference column; BGP routes here have Junos' route preference.
const PREFERENCE: u32 = 170;

/// Writes every path of `r`, one line each.
pub(super) fn routes(r: &ShownRoute, names: &PeerNames, out: &mut Vec<u8>) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let sent = sent(r);
    for v in &r.view.paths {
        let (attrs, gateway) = match &sent {
            Some((a, nh)) => (a.clone(), nh.clone()),
            None => (v.path.attrs.attributes(), next_hop(v.path.attrs.next_hop())),
        };
        let from = names
            .get(v.path.peer as usize)
            .map_or_else(|| format!("peer {}", v.path.peer), |(a, _)| a.clone());
        let age = ribshard_rib::clock::age(v.path.since()).as_secs_f64();
        let route = Route {
            network: r.view.prefix.to_string(),
            gateway: gateway.clone(),
            from_protocol: protocol_id(&from),
            learnt_from: from,
            interface: String::new(),
            metric: PREFERENCE,
            primary: matches!(v.state, PathState::Active { .. }),
            age: ribshard_mgmt::time::rfc3339(now - age),
            kind: vec!["BGP".into(), "unicast".into(), "univ".into()],
            bgp: bgp(&attrs, gateway),
        };
        if serde_json::to_writer(&mut *out, &route).is_ok() {
            out.push(b'\n');
        }
    }
}

fn bgp(a: &PathAttributes, next_hop: String) -> Bgp {
    let mut b = Bgp {
        origin: match a.origin() {
            Some(Origin::Igp) => "IGP",
            Some(Origin::Egp) => "EGP",
            Some(Origin::Incomplete) | None => "Incomplete",
        }
        .into(),
        as_path: a.as_path().map(as_path_segments).unwrap_or_default(),
        next_hop,
        local_pref: a.local_pref().map(|v| v.to_string()),
        med: a.med().map(|v| v.to_string()),
        communities: a
            .communities()
            .iter()
            .map(|c| [c >> 16, c & 0xffff])
            .collect(),
        large_communities: a.large_communities().to_vec(),
        ..Bgp::default()
    };
    for attr in &a.list {
        match &attr.value {
            AttrValue::ExtCommunities(v) => {
                b.ext_communities = v.iter().map(ext_community).collect();
            }
            AttrValue::Otc(asn) => b.otc = Some(asn.to_string()),
            _ => {}
        }
    }
    b
}

/// An extended community as BIRD writes it: `(rt, 65000, 1)`, `(ro, 192.0.2.1, 7)`, others
/// `(generic, 0x..., 0x...)`.
fn ext_community(c: &[u8; 8]) -> [String; 3] {
    match target_or_origin(c[0] & 0x3f, c) {
        Some((origin, global, local)) => [(if origin { "ro" } else { "rt" }).into(), global, local],
        None => {
            let [t, sub, a, b, x, y, z, w] = *c;
            [
                "generic".into(),
                format!("0x{:x}", u32::from_be_bytes([t, sub, a, b])),
                format!("0x{:x}", u32::from_be_bytes([x, y, z, w])),
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_communities_read_as_in_bird() {
        assert_eq!(
            ext_community(&[0x00, 0x02, 0xfd, 0xe8, 0, 0, 0, 100]),
            ["rt", "65000", "100"]
        );
        assert_eq!(
            ext_community(&[0x01, 0x03, 192, 0, 2, 1, 0, 7]),
            ["ro", "192.0.2.1", "7"]
        );
        assert_eq!(
            ext_community(&[0x02, 0x02, 0, 1, 0, 0, 0, 9]),
            ["rt", "65536", "9"]
        );
        assert_eq!(
            ext_community(&[0x43, 0, 0, 0, 0, 0, 0, 1]),
            ["generic", "0x43000000", "0x1"]
        );
    }
}
