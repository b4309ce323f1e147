//! Communities (RFC 1997), extended communities (RFC 4360) and large communities (RFC 8092)
//! as policy names them: exact values, wildcards (`65000:*`), well-known names, and regular
//! expressions over their text (`^65000:1..$`), compiled once into automata.

use regex_automata::dfa::{dense, Automaton};
use regex_automata::Input;
use std::fmt::{self, Write as _};
use std::sync::Arc;

/// One community of a route, of any of the three kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Community {
    Standard(u32),
    Extended([u8; 8]),
    Large([u32; 3]),
}

/// Well-known standard communities by their usual names.
pub const WELL_KNOWN: [(&str, u32); 9] = [
    ("no-export", 0xFFFF_FF01),
    ("no-advertise", 0xFFFF_FF02),
    ("no-export-subconfed", 0xFFFF_FF03),
    ("no-peer", 0xFFFF_FF04),
    ("graceful-shutdown", 0xFFFF_0000),
    ("accept-own", 0xFFFF_0001),
    ("llgr-stale", 0xFFFF_0006),
    ("no-llgr", 0xFFFF_0007),
    ("blackhole", 0xFFFF_029A),
];

/// Extended community sub-types (RFC 4360 section 4, RFC 5668).
const SUB_TARGET: u8 = 0x02;
const SUB_ORIGIN: u8 = 0x03;

/// The BGP Prefix Origin Validation State extended community (RFC 8097 section 2): non-
/// transitive opaque type, sub-type 0, the state in the last octet.
const OVS: [&str; 3] = ["valid", "not-found", "invalid"];
const OVS_PREFIX: &str = "origin-validation-state:";

fn ovs(state: u8) -> Community {
    Community::Extended([0x43, 0x00, 0, 0, 0, 0, 0, state])
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Community::Standard(v) => match WELL_KNOWN.iter().find(|(_, x)| *x == v) {
                Some((name, _)) => f.write_str(name),
                None => write!(f, "{}:{}", v >> 16, v & 0xFFFF),
            },
            Community::Large([a, b, c]) => write!(f, "large:{a}:{b}:{c}"),
            Community::Extended(e) => match (ovs_text(&e), ext_text(&e)) {
                (Some(state), _) => write!(f, "{OVS_PREFIX}{state}"),
                (None, Some((kind, rest))) => write!(f, "{kind}:{rest}"),
                (None, None) => {
                    f.write_str("0x")?;
                    for b in e {
                        write!(f, "{b:02x}")?;
                    }
                    Ok(())
                }
            },
        }
    }
}

/// The state an RFC 8097 community carries.
fn ovs_text(e: &[u8; 8]) -> Option<&'static str> {
    match e {
        [0x43, 0x00, 0, 0, 0, 0, 0, s] => OVS.get(usize::from(*s)).copied(),
        _ => None,
    }
}

/// `target` or `origin` and `ADMIN:VALUE` for the extended communities we name.
fn ext_text(e: &[u8; 8]) -> Option<(&'static str, String)> {
    let kind = match e[1] {
        SUB_TARGET => "target",
        SUB_ORIGIN => "origin",
        _ => return None,
    };
    let u16_at = |i: usize| be16(e, i);
    let u32_at = |i: usize| be32(e, i);
    let rest = match e[0] & 0x3F {
        0x00 => format!("{}:{}", u16_at(2), u32_at(4)),
        0x01 => format!("{}:{}", std::net::Ipv4Addr::from(u32_at(2)), u16_at(6)),
        0x02 => format!("{}:{}", u32_at(2), u16_at(6)),
        _ => return None,
    };
    Some((kind, rest))
}

/// A big-endian number at `at`, 0 past the end (callers pass whole attribute values).
fn be16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|x| x.try_into().ok())
        .map_or(0, u16::from_be_bytes)
}

fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|x| x.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

/// Why a community member does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommunityError {
    #[error("\"{0}\" is not a community (as 65000:100, a well-known name such as no-export, target:65000:100, origin-validation-state:valid, large:65000:1:2, a wildcard as 65000:*, or a regular expression)")]
    Syntax(String),
    #[error("\"{text}\": {field} does not fit in {bits} bits")]
    Range {
        text: String,
        field: &'static str,
        bits: u8,
    },
    #[error("\"{text}\": bad regular expression: {reason}")]
    Regex { text: String, reason: String },
}

/// The kind a member's text is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Standard,
    Extended(u8),
    Large,
}

/// One member of a named community: a value, a pattern, or a regular expression.
#[derive(Clone, Debug)]
pub enum Member {
    Value(Community),
    /// A standard community with `*` for either half.
    StandardWild([Option<u16>; 2]),
    /// A large community with `*` for any of its three parts.
    LargeWild([Option<u32>; 3]),
    /// A route target / origin with `*` for either part (both ASN forms, any width).
    ExtendedWild {
        sub: u8,
        admin: Option<u32>,
        value: Option<u32>,
    },
    /// A regular expression over the text (`A:B`; `A:B:C` for large communities; `A:B` of
    /// the subtype for extended ones), matched anywhere in it unless anchored.
    Regex(Arc<TextRegex>),
}

/// A compiled regular expression over a community's text.
pub struct TextRegex {
    pub source: String,
    kind: Kind,
    dfa: dense::DFA<Vec<u32>>,
}

impl fmt::Debug for TextRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TextRegex({:?})", self.source)
    }
}

/// A small stack buffer for a community's text: no allocation per match.
struct Text {
    buf: [u8; 48],
    len: usize,
}

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl TextRegex {
    fn matches(&self, c: &Community) -> bool {
        let mut t = Text {
            buf: [0; 48],
            len: 0,
        };
        let ok = match (*c, self.kind) {
            (Community::Standard(v), Kind::Standard) => {
                write!(t, "{}:{}", v >> 16, v & 0xFFFF).is_ok()
            }
            (Community::Large([a, b, cc]), Kind::Large) => write!(t, "{a}:{b}:{cc}").is_ok(),
            (Community::Extended(e), Kind::Extended(sub)) if e[1] == sub => match ext_parts(&e) {
                Some((a, v)) => write!(t, "{a}:{v}").is_ok(),
                None => false,
            },
            _ => false,
        };
        ok && self
            .dfa
            .try_search_fwd(&Input::new(t.buf.get(..t.len).unwrap_or(&[])).earliest(true))
            .ok()
            .flatten()
            .is_some()
    }
}

/// The administrator (ASN or IPv4 address as a number) and assigned number of a two-part
/// extended community.
fn ext_parts(e: &[u8; 8]) -> Option<(u32, u32)> {
    let u16_at = |i: usize| u32::from(be16(e, i));
    let u32_at = |i: usize| be32(e, i);
    match e[0] & 0x3F {
        0x00 => Some((u16_at(2), u32_at(4))),
        0x01 | 0x02 => Some((u32_at(2), u16_at(6))),
        _ => None,
    }
}

impl Member {
    /// Whether the member matches one community.
    #[inline]
    pub fn matches(&self, c: &Community) -> bool {
        match (self, c) {
            (Member::Value(v), c) => v == c,
            (Member::StandardWild([a, b]), Community::Standard(v)) => {
                a.is_none_or(|a| u32::from(a) == v >> 16)
                    && b.is_none_or(|b| u32::from(b) == v & 0xFFFF)
            }
            (Member::LargeWild(w), Community::Large(l)) => {
                w.iter().zip(l).all(|(w, x)| w.is_none_or(|w| w == *x))
            }
            (Member::ExtendedWild { sub, admin, value }, Community::Extended(e)) => {
                e[1] == *sub
                    && ext_parts(e).is_some_and(|(a, v)| {
                        admin.is_none_or(|x| x == a) && value.is_none_or(|x| x == v)
                    })
            }
            (Member::Regex(r), c) => r.matches(c),
            _ => false,
        }
    }

    /// The value to add or set: only exact members have one.
    pub fn value(&self) -> Option<Community> {
        match self {
            Member::Value(v) => Some(*v),
            _ => None,
        }
    }

    /// Parses a member as Junos writes them.
    pub fn parse(text: &str) -> Result<Member, CommunityError> {
        let t = text.trim();
        let syntax = || CommunityError::Syntax(t.to_string());
        if let Some((_, v)) = WELL_KNOWN.iter().find(|(n, _)| *n == t) {
            return Ok(Member::Value(Community::Standard(*v)));
        }
        if let Some(state) = t.strip_prefix(OVS_PREFIX) {
            return match OVS.iter().position(|s| *s == state) {
                Some(i) => Ok(Member::Value(ovs(i as u8))),
                None => Err(syntax()),
            };
        }
        let (kind, body) = if let Some(rest) = t.strip_prefix("large:") {
            (Kind::Large, rest)
        } else if let Some(rest) = t.strip_prefix("target:") {
            (Kind::Extended(SUB_TARGET), rest)
        } else if let Some(rest) = t.strip_prefix("origin:") {
            (Kind::Extended(SUB_ORIGIN), rest)
        } else {
            (Kind::Standard, t)
        };
        if let Kind::Extended(sub) = kind {
            // An IPv4 address as administrator: target:192.0.2.1:100.
            if let Some((a, v)) = body.rsplit_once(':') {
                if let Ok(ip) = a.parse::<std::net::Ipv4Addr>() {
                    let v = num(t, v, "the assigned number", 16)?;
                    let a = u32::from(ip).to_be_bytes();
                    let v = (v as u16).to_be_bytes();
                    return Ok(Member::Value(Community::Extended([
                        0x01, sub, a[0], a[1], a[2], a[3], v[0], v[1],
                    ])));
                }
            }
        }
        let parts: Vec<&str> = body.split(':').collect();
        let wanted = if kind == Kind::Large { 3 } else { 2 };
        let simple = parts.len() == wanted
            && parts
                .iter()
                .all(|p| *p == "*" || (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())));
        if simple {
            return simple_member(t, kind, &parts);
        }
        if body.bytes().any(|b| b"^$.*+?[]()|{}\\".contains(&b)) {
            return TextRegex::new(t, body, kind).map(|r| Member::Regex(Arc::new(r)));
        }
        Err(syntax())
    }
}

fn num(text: &str, s: &str, field: &'static str, bits: u8) -> Result<u32, CommunityError> {
    let n: u64 = s
        .parse()
        .map_err(|_| CommunityError::Syntax(text.to_string()))?;
    if n >> bits != 0 {
        return Err(CommunityError::Range {
            text: text.to_string(),
            field,
            bits,
        });
    }
    Ok(n as u32)
}

fn simple_member(t: &str, kind: Kind, parts: &[&str]) -> Result<Member, CommunityError> {
    let field = |i: usize, name: &'static str, bits: u8| -> Result<Option<u32>, CommunityError> {
        match parts.get(i).copied() {
            Some("*") => Ok(None),
            Some(s) => num(t, s, name, bits).map(Some),
            None => Err(CommunityError::Syntax(t.to_string())),
        }
    };
    match kind {
        Kind::Standard => {
            let (a, b) = (field(0, "the AS", 16)?, field(1, "the value", 16)?);
            match (a, b) {
                (Some(a), Some(b)) => Ok(Member::Value(Community::Standard(a << 16 | b))),
                _ => Ok(Member::StandardWild([
                    a.map(|x| x as u16),
                    b.map(|x| x as u16),
                ])),
            }
        }
        Kind::Large => {
            let w = [
                field(0, "the global administrator", 32)?,
                field(1, "the first local part", 32)?,
                field(2, "the second local part", 32)?,
            ];
            match w {
                [Some(a), Some(b), Some(c)] => Ok(Member::Value(Community::Large([a, b, c]))),
                _ => Ok(Member::LargeWild(w)),
            }
        }
        Kind::Extended(sub) => {
            let admin = field(0, "the administrator", 32)?;
            let value = field(1, "the assigned number", 32)?;
            match (admin, value) {
                (Some(a), Some(v)) => {
                    // A 2-octet AS takes a 32-bit value; a 4-octet AS a 16-bit one.
                    let e = if a <= 0xFFFF {
                        let a = (a as u16).to_be_bytes();
                        let v = v.to_be_bytes();
                        [0x00, sub, a[0], a[1], v[0], v[1], v[2], v[3]]
                    } else {
                        if v > 0xFFFF {
                            return Err(CommunityError::Range {
                                text: t.to_string(),
                                field: "the assigned number (with a 4-octet AS)",
                                bits: 16,
                            });
                        }
                        let a = a.to_be_bytes();
                        let v = (v as u16).to_be_bytes();
                        [0x02, sub, a[0], a[1], a[2], a[3], v[0], v[1]]
                    };
                    Ok(Member::Value(Community::Extended(e)))
                }
                _ => Ok(Member::ExtendedWild { sub, admin, value }),
            }
        }
    }
}

impl TextRegex {
    fn new(text: &str, pattern: &str, kind: Kind) -> Result<TextRegex, CommunityError> {
        let dfa = dense::Builder::new()
            .configure(dense::Config::new().dfa_size_limit(Some(1 << 20)))
            .build(pattern)
            .map_err(|e| CommunityError::Regex {
                text: text.to_string(),
                reason: e.to_string(),
            })?;
        Ok(TextRegex {
            source: text.to_string(),
            kind,
            dfa,
        })
    }
}

/// The communities of a route, read from the attribute values as they are on the wire.
#[derive(Clone, Copy, Debug, Default)]
pub struct Communities<'a> {
    /// COMMUNITIES: 4 octets each.
    pub standard: &'a [u8],
    /// EXTENDED_COMMUNITIES: 8 octets each.
    pub extended: &'a [u8],
    /// LARGE_COMMUNITY: 12 octets each.
    pub large: &'a [u8],
}

impl Communities<'_> {
    /// Every community of the route, standard ones first.
    pub fn iter(&self) -> impl Iterator<Item = Community> + '_ {
        let std = self
            .standard
            .chunks_exact(4)
            .map(|c| Community::Standard(be32(c, 0)));
        let ext = self
            .extended
            .chunks_exact(8)
            .map(|c| Community::Extended(c.try_into().unwrap_or([0; 8])));
        let large = self
            .large
            .chunks_exact(12)
            .map(|c| Community::Large([be32(c, 0), be32(c, 4), be32(c, 8)]));
        std.chain(ext).chain(large)
    }
}

/// A named community (`community NAME members [...]`).
#[derive(Clone, Debug)]
pub struct CommunitySet {
    pub name: String,
    pub members: Vec<Member>,
}

impl CommunitySet {
    /// Junos `from community NAME`: the route has something matching every member.
    #[inline]
    pub fn matched_by(&self, route: &Communities<'_>) -> bool {
        !self.members.is_empty()
            && self
                .members
                .iter()
                .all(|m| route.iter().any(|c| m.matches(&c)))
    }

    /// Whether any member matches this community (`community delete NAME`).
    #[inline]
    pub fn any_matches(&self, c: &Community) -> bool {
        self.members.iter().any(|m| m.matches(c))
    }

    /// The values this set adds (`community add` / `set`); wildcard and regular expression
    /// members have none, which configuration checks refuse there.
    pub fn values(&self) -> impl Iterator<Item = Community> + '_ {
        self.members.iter().filter_map(Member::value)
    }

    /// Whether every member is a value (so the set can be added or set).
    pub fn all_values(&self) -> bool {
        self.members.iter().all(|m| m.value().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Member {
        Member::parse(s).unwrap()
    }
    fn std(a: u32, b: u32) -> Community {
        Community::Standard(a << 16 | b)
    }

    #[test]
    fn values_wildcards_and_names() {
        assert!(m("65000:100").matches(&std(65000, 100)));
        assert!(!m("65000:100").matches(&std(65000, 101)));
        assert!(m("65000:*").matches(&std(65000, 7)));
        assert!(!m("65000:*").matches(&std(65001, 7)));
        assert!(m("*:7").matches(&std(65001, 7)));
        assert!(m("no-export").matches(&Community::Standard(0xFFFF_FF01)));
        assert!(m("large:65000:1:2").matches(&Community::Large([65000, 1, 2])));
        assert!(m("large:65000:*:2").matches(&Community::Large([65000, 9, 2])));
        assert!(!m("large:65000:*:2").matches(&std(65000, 2)));
        let rt = m("target:65000:100");
        assert_eq!(
            rt.value(),
            Some(Community::Extended([0, 2, 0xFD, 0xE8, 0, 0, 0, 100]))
        );
        assert!(m("target:65000:*").matches(&rt.value().unwrap()));
        assert!(!m("origin:65000:*").matches(&rt.value().unwrap()));
        let wide = m("target:4200000000:7").value().unwrap();
        assert!(m("target:4200000000:*").matches(&wide));
        assert!(Member::parse("target:4200000000:70000").is_err());
        assert!(m("target:192.0.2.1:7").value().is_some());
        assert!(Member::parse("65536:1").is_err());
        assert!(Member::parse("65000").is_err());
    }

    #[test]
    fn regular_expressions_over_the_text() {
        let r = m("^65000:1..$");
        assert!(r.matches(&std(65000, 100)));
        assert!(r.matches(&std(65000, 199)));
        assert!(!r.matches(&std(65000, 1000)));
        assert!(!r.matches(&std(65000, 10)));
        // Unanchored: anywhere in the text.
        assert!(m("6500[0-9]:.*").matches(&std(65003, 1)));
        assert!(m("large:^65000:[0-9]+:7$").matches(&Community::Large([65000, 42, 7])));
        assert!(!m("large:^65000:[0-9]+:7$").matches(&Community::Large([65000, 42, 70])));
        assert!(matches!(
            Member::parse("^65000:(1$"),
            Err(CommunityError::Regex { .. })
        ));
    }

    #[test]
    fn a_named_community_needs_all_its_members() {
        let set = CommunitySet {
            name: "both".into(),
            members: vec![m("65000:1"), m("65000:2")],
        };
        let bytes: Vec<u8> = [std(65000, 1), std(65000, 2)]
            .iter()
            .flat_map(|c| match c {
                Community::Standard(v) => v.to_be_bytes(),
                _ => unreachable!(),
            })
            .collect();
        let both = Communities {
            standard: &bytes,
            ..Communities::default()
        };
        let one = Communities {
            standard: &bytes[..4],
            ..Communities::default()
        };
        assert!(set.matched_by(&both));
        assert!(!set.matched_by(&one));
    }
}
