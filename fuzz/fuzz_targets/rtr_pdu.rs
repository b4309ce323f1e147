//! The RTR client's decoder (RFC 8210 PDUs from a cache), in every protocol version, and
//! what a stream of them builds: VRP tables from the prefixes decoded, validated against.
//! Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_rpki::pdu::{decode, header, FromCache};
use ribshard_rpki::{AspaTable, Direction, VrpTable};

fuzz_target!(|data: &[u8]| {
    let mut vrps = Vec::new();
    let mut aspas = AspaTable::default();
    for version in 0..=2u8 {
        let mut rest = data;
        while let Some((_, _, len)) = header(rest) {
            let Some(pdu) = rest.get(..len.max(8)) else {
                let _ = decode(rest, version);
                break;
            };
            match decode(pdu, version) {
                Ok(FromCache::Prefix { vrp, .. }) => vrps.push(vrp),
                Ok(FromCache::Aspa { aspa, .. }) => aspas.set(aspa.customer, aspa.providers),
                _ => {}
            }
            rest = &rest[len.max(8)..];
        }
    }
    let t = VrpTable::new(vrps.clone());
    let (u, _) = t.with_changes(
        vrps.iter().rev().take(3).copied().collect(),
        vrps.iter().take(2).copied().collect(),
    );
    let _ = t.diff(&u);
    for r in vrps.iter().take(16) {
        let _ = t.validate(&r.prefix.prefix(), Some(r.asn));
        let _ = u.covering(&r.prefix.prefix());
        let path = [r.asn, r.asn.wrapping_add(1), r.asn];
        let _ = aspas.verify(&path, false, Direction::Upstream);
        let _ = aspas.verify(&path, false, Direction::Downstream);
    }
});
