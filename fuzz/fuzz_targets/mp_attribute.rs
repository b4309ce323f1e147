//! MP_REACH_NLRI or MP_UNREACH_NLRI of any value (RFC 4760, RFC 7606 section 7.11), with or
//! without Add-Path, in an UPDATE of good attributes: the decoder must reset the session or
//! give NLRI that re-encode to the same routes. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_wire::{decode, Message, SessionParams, UpdateMessage};

fuzz_target!(|data: &[u8]| {
    let [knobs, value @ ..] = data else {
        return;
    };
    let params = SessionParams {
        four_octet_as: true,
        extended_message: true,
        add_path: [knobs & 1 != 0, knobs & 2 != 0],
        external: true,
        mrt_rib: false,
        live: true,
    };
    let Ok(len) = u16::try_from(value.len()) else {
        return;
    };
    let code = if knobs & 4 != 0 { 15 } else { 14 };
    let mut attrs = vec![0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xe9];
    attrs.extend_from_slice(&[0x90, code]);
    attrs.extend_from_slice(&len.to_be_bytes());
    attrs.extend_from_slice(value);
    let Ok(alen) = u16::try_from(attrs.len()) else {
        return;
    };
    let Ok(total) = u16::try_from(23 + attrs.len()) else {
        return;
    };
    let mut msg = vec![0xff; 16];
    msg.extend_from_slice(&total.to_be_bytes());
    msg.extend_from_slice(&[2, 0, 0]);
    msg.extend_from_slice(&alen.to_be_bytes());
    msg.extend_from_slice(&attrs);
    match decode(&msg, &params) {
        Ok(Message::Update(u)) => {
            let announced: Vec<_> = u.announced().collect();
            let withdrawn: Vec<_> = u.withdrawn_all().collect();
            let owned = UpdateMessage::from_parsed(&u, &params);
            let again = owned.encode(&params);
            if again.len() <= params.max_message_len() {
                match decode(&again, &params) {
                    Ok(Message::Update(v)) => {
                        assert_eq!(v.announced().collect::<Vec<_>>(), announced);
                        assert_eq!(v.withdrawn_all().collect::<Vec<_>>(), withdrawn);
                    }
                    other => panic!("re-encoded UPDATE: {other:?}"),
                }
            }
        }
        Ok(_) => {}
        Err(e) => {
            let _ = e.notification().encode();
        }
    }
});
