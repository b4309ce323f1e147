//! An OPEN's body of any bytes: the optional parameters and capabilities (RFC 5492, RFC 9072)
//! and every known capability's decoder. Nothing may panic; an accepted OPEN re-encodes into
//! one that decodes to the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_wire::Open;

fuzz_target!(|data: &[u8]| {
    match Open::decode_body(data) {
        Ok(open) => {
            let _ = open.asn();
            let again = open.encode();
            let back = Open::decode_body(&again[19..]).expect("re-encoded OPEN rejected");
            assert_eq!(back.capabilities().collect::<Vec<_>>(), open.capabilities().collect::<Vec<_>>());
            assert_eq!(back.asn(), open.asn());
        }
        Err(e) => {
            let _ = e.notification().encode();
        }
    }
});
