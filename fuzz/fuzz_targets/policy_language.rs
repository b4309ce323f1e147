//! The policy language's parsers on arbitrary text: an AS path expression, a community
//! member and a prefix (with a route-filter match type) must each parse or give an error,
//! never panic; what parses is then run (an expression over a few AS paths, including an
//! AS_SET). The first byte picks the parser; the rest is the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_policy::{parse_prefix, AsPathRegex, Community, MatchType, Member};

/// AS_PATH values (4-octet AS numbers): a sequence, and a sequence then a set.
const PATHS: [&[u8]; 2] = [
    &[2, 3, 0, 0, 0xfd, 0xe9, 0, 0, 0x34, 0x17, 0, 0, 0, 7],
    &[2, 1, 0, 0, 0xfd, 0xe9, 1, 2, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff],
];

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(r) = AsPathRegex::new(text) {
                for p in PATHS {
                    let _ = r.matches(p);
                }
                let _ = r.matches_asns(&[65001, 13335, 7]);
            }
        }
        1 => {
            if let Ok(m) = Member::parse(text) {
                for c in [
                    Community::Standard(65001 << 16 | 7),
                    Community::Large([65001, 1, 2]),
                    Community::Extended([0, 2, 0xfd, 0xe9, 0, 0, 0, 7]),
                ] {
                    let _ = m.matches(&c);
                }
                let _ = m.value();
            }
        }
        _ => {
            let (p, how) = text.split_once(' ').unwrap_or((text, "exact"));
            if let Ok(prefix) = parse_prefix(p) {
                let _ = MatchType::parse(how, &prefix);
            }
        }
    }
});
