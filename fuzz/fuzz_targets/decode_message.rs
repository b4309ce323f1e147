//! Any bytes, under any session parameters, through the whole receive path: framing,
//! decoding, the owned model, and re-encoding what was kept. Nothing may panic, and what
//! the decoder accepted must re-encode into something it accepts again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_wire::{decode, parse_attributes_only, Message, PathAttributes, SessionParams, UpdateMessage};

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, bytes)) = data.split_first() else {
        return;
    };
    let params = SessionParams {
        four_octet_as: knobs & 1 != 0,
        extended_message: knobs & 2 != 0,
        add_path: [knobs & 4 != 0, knobs & 8 != 0],
        external: knobs & 16 != 0,
        mrt_rib: false,
        live: knobs & 32 != 0,
    };
    // As a stream: frame and decode messages until the bytes run out or an error.
    let mut buf = bytes;
    while let Ok(Some(len)) = ribshard_wire::frame(buf, params.max_message_len()) {
        let (msg, rest) = buf.split_at(len);
        match decode(msg, &params) {
            Ok(Message::Update(u)) => {
                let _ = u.announced().count() + u.withdrawn_all().count();
                let _ = u.end_of_rib();
                let _ = u.attrs.reconstructed_as_path();
                let owned = UpdateMessage::from_parsed(&u, &params);
                let again = owned.encode(&params);
                if again.len() <= params.max_message_len() {
                    assert!(decode(&again, &params).is_ok(), "re-encoded UPDATE rejected");
                }
            }
            Ok(Message::Open(o)) => {
                let _ = o.asn();
                let _ = o.encode();
            }
            Ok(Message::Notification(n)) => {
                let _ = n.shutdown_message();
                let _ = n.to_string();
            }
            Ok(_) => {}
            Err(e) => {
                let _ = e.notification();
            }
        }
        buf = rest;
    }
    // As the path attributes of an MRT RIB entry.
    let rib = SessionParams { mrt_rib: true, live: false, ..params };
    if let Ok(u) = parse_attributes_only(bytes, &rib) {
        let attrs = PathAttributes::from_view(&u.attrs, &rib);
        let _ = attrs.to_bytes(&rib);
    }
});
