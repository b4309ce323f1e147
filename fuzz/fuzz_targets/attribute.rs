//! One path attribute of any type, flags and value, after a good ORIGIN, AS_PATH and
//! NEXT_HOP: each attribute's decoder (RFC 7606 section 7) under any session parameters.
//! Nothing may panic; what is kept must re-encode into attributes that decode to the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_wire::{decode, parse_attributes_only, Message, PathAttributes, SessionParams};

fuzz_target!(|data: &[u8]| {
    let [knobs, flags, code, value @ ..] = data else {
        return;
    };
    let params = SessionParams {
        four_octet_as: knobs & 1 != 0,
        extended_message: true,
        add_path: [false; 2],
        external: knobs & 2 != 0,
        mrt_rib: false,
        live: knobs & 4 != 0,
    };
    let Ok(len) = u16::try_from(value.len()) else {
        return;
    };
    let mut attrs = vec![0x40, 1, 1, 0, 0x40, 3, 4, 198, 51, 100, 1];
    if params.four_octet_as {
        attrs.extend_from_slice(&[0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xe9]);
    } else {
        attrs.extend_from_slice(&[0x40, 2, 4, 2, 1, 0xfd, 0xe9]);
    }
    attrs.extend_from_slice(&[*flags | 0x10, *code]);
    attrs.extend_from_slice(&len.to_be_bytes());
    attrs.extend_from_slice(value);
    let mut body = vec![0, 0];
    let Ok(alen) = u16::try_from(attrs.len()) else {
        return;
    };
    body.extend_from_slice(&alen.to_be_bytes());
    body.extend_from_slice(&attrs);
    body.extend_from_slice(&[24, 203, 0, 113]);
    let Ok(total) = u16::try_from(19 + body.len()) else {
        return;
    };
    let mut msg = vec![0xff; 16];
    msg.extend_from_slice(&total.to_be_bytes());
    msg.push(2);
    msg.extend_from_slice(&body);
    match decode(&msg, &params) {
        Ok(Message::Update(u)) => {
            let _ = u.announced().count() + u.withdrawn_all().count();
            let _ = u.attrs.reconstructed_as_path();
            let kept = PathAttributes::from_view(&u.attrs, &params);
            let again = kept.to_bytes(&params);
            let p = parse_attributes_only(&again, &params).expect("re-encoded attributes rejected");
            assert_eq!(PathAttributes::from_view(&p.attrs, &params), kept, "round trip");
        }
        Ok(_) => {}
        Err(e) => {
            let _ = e.notification().encode();
        }
    }
});
