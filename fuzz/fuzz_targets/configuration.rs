//! Any text as the configuration file: parsed, checked and lowered as `ribshard check` and a
//! reload do. Nothing may panic; every error names the file and a line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = ribshard::config::parse(text, Path::new("fuzz.toml")) {
        let shown = errors.to_string();
        assert!(shown.contains("fuzz.toml"), "an error without its file: {shown}");
    }
});
