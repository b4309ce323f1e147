//! Any bytes as an MRT file: reading, typed parsing and bgpdump rendering must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_mrt::{bgpdump::Bgpdump, MrtReader, Record};

fuzz_target!(|data: &[u8]| {
    let mut reader = MrtReader::new(data);
    let mut fmt = Bgpdump::new();
    let mut out = Vec::new();
    while let Ok(Some(raw)) = reader.next_record() {
        let _ = Record::parse(&raw);
        let _ = fmt.write_record(&raw, &mut out);
    }
});
