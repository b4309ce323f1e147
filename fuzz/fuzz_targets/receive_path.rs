//! Bytes in, an UPDATE out: one message through what an Established eBGP session does with
//! it, in one thread without sockets: framing, decoding (RFC 7606), interning with the loop
//! checks, export to an external update group, and encoding for a downstream. Checked
//! against the decoder's own verdict: a message it refuses gives a NOTIFICATION that
//! decodes as one; treat-as-withdraw announces nothing; every route exported reaches the
//! downstream as exactly that prefix in an UPDATE it accepts, or is too large for it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_rib::{export, GroupKind, GroupSpec, Interner, LoopChecks, PeerInfo};
use ribshard_wire::{decode, frame, Action, Family, Message, Nlri, SessionParams, UpdateBuilder};
use std::net::Ipv4Addr;
use std::sync::{Arc, OnceLock};

const LOCAL_AS: u32 = 65000;

fn spec() -> &'static GroupSpec {
    static SPEC: OnceLock<GroupSpec> = OnceLock::new();
    SPEC.get_or_init(|| GroupSpec {
        long_lived: true,
        name: "down".into(),
        kind: GroupKind::External,
        local_as: LOCAL_AS,
        global_as: None,
        peer_as: 65099,
        router_id: Ipv4Addr::new(192, 0, 2, 1),
        next_hop_self: true,
        local_v4: Some(Ipv4Addr::new(192, 0, 2, 1)),
        local_v6: Some("2001:db8::1".parse().unwrap()),
        export: Arc::new(ribshard_policy::Chain::builtin(true)),
        params: SessionParams {
            four_octet_as: true,
            ..SessionParams::default()
        },
        families: [true, true],
        role: None,
        add_path: None,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, bytes)) = data.split_first() else {
        return;
    };
    let params = SessionParams {
        four_octet_as: knobs & 1 != 0,
        extended_message: knobs & 2 != 0,
        add_path: [knobs & 4 != 0, knobs & 8 != 0],
        external: true,
        mrt_rib: false,
        live: true,
    };
    let Ok(Some(len)) = frame(bytes, params.max_message_len()) else {
        return;
    };
    let msg = &bytes[..len];
    let u = match decode(msg, &params) {
        Ok(Message::Update(u)) => u,
        Ok(_) => return,
        Err(e) => {
            let n = e.notification();
            match decode(&n.encode(), &SessionParams::default()) {
                Ok(Message::Notification(m)) => assert_eq!((m.code, m.subcode), (n.code, n.subcode)),
                other => panic!("our NOTIFICATION does not decode: {other:?}"),
            }
            return;
        }
    };
    if u.action() == Action::TreatAsWithdraw {
        assert_eq!(u.announced().count(), 0, "treat-as-withdraw announced routes");
    }
    let mut interner = Interner::new(LoopChecks {
        local_as: LOCAL_AS,
        loops: 1,
        router_id: 0xc000_0201,
        ..LoopChecks::default()
    });
    let src = PeerInfo {
        ebgp: true,
        router_id: 7,
        address: 7,
        local_as: LOCAL_AS,
        peer_as: 65001,
        rr_cluster: None,
        rs_client: false,
    };
    let down = spec().params;
    let builder = UpdateBuilder::new(down);
    for n in u.announced() {
        let mp = n.prefix.family() != Family::Ipv4Unicast;
        let nh = ribshard_rib::attrs::next_hop_of(&u.attrs, mp);
        let attrs = interner.intern(&u.attrs, &params, nh);
        let Some(e) = export(spec(), &src, &attrs, &n.prefix) else {
            continue;
        };
        let mut out = Vec::new();
        if builder
            .announce(&e.attrs, e.family, &e.mp_next_hop, &[Nlri::new(n.prefix)], &mut out)
            .is_err()
        {
            continue; // too large for a peer without extended messages
        }
        match decode(&out, &down) {
            Ok(Message::Update(v)) => {
                assert_eq!(v.action(), Action::Accept, "sent downstream: {v:?}");
                let sent: Vec<_> = v.announced().map(|m| m.prefix).collect();
                assert_eq!(sent, [n.prefix]);
            }
            other => panic!("sent downstream, undecodable: {other:?}"),
        }
    }
});
