//! The management API's request parsers: a `show route` query string as the HTTP server
//! deserializes it, checked as the backend does before any walk, and the same text as CLI
//! words. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_mgmt::api::RouteRequest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(q) = serde_urlencoded::from_str::<RouteRequest>(text) {
        let _ = ribshard::backend::check_route_request(&q);
    }
    let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let _ = ribshard::cli::parse_show(&words);
    let _ = ribshard::cli::parse_monitor(&words);
    let _ = ribshard::cli::parse_clear(&words);
    let _ = ribshard::cli::parse_set(&words);
    let _ = ribshard::cli::parse_configure(&words);
    let _ = ribshard::cli::parse_disable(&words, true);
});
