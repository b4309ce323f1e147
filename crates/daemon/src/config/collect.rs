//! Every parse and type error of a file in one run: the TOML parser stops at the first, so
//! each error's key-value (or line, for a syntax error) is blanked out, every other byte and
//! line kept where it was, and the text is read again. Messages are reworded for an
//! operator: types in words, and a key written in the wrong table pointed to the right one.

use super::schema::{self, Raw};
use super::ErrorKind;
use ribshard_policy::definition as policy;
use serde::de::{self, Deserialize, Visitor};
use std::ops::Range;

/// At most this many errors from one file: past them, the rest is likely one mistake's echo.
const MAX_ERRORS: usize = 50;

/// What reading the file gave: the settings (when every error could be set aside), and each
/// error with its byte offset, key path and reason.
pub(super) struct Collected {
    pub raw: Option<Raw>,
    pub errors: Vec<(Option<usize>, String, ErrorKind)>,
    /// Key paths set aside: a later "is required" for one of them is the same mistake.
    pub blanked: Vec<String>,
    /// The text as finally read: every line where it was, so later errors find their line.
    pub text: String,
}

pub(super) fn deserialize_all(text: &str) -> Collected {
    let mut buf = text.to_string();
    let mut out = Collected {
        raw: None,
        errors: Vec::new(),
        blanked: Vec::new(),
        text: String::new(),
    };
    while out.errors.len() < MAX_ERRORS {
        let de = toml::Deserializer::new(&buf);
        let e = match serde_path_to_error::deserialize::<_, Raw>(de) {
            Ok(raw) => {
                out.raw = Some(raw);
                break;
            }
            Err(e) => e,
        };
        let mut path = e.path().to_string();
        if path == "." {
            path.clear();
        }
        let inner = e.into_inner();
        let offset = inner.span().map(|s| s.start);
        let message = inner.message().trim().replace('\n', ": ");
        let syntax = toml_edit::ImDocument::parse(buf.as_str()).is_err();
        let range = match (syntax, offset) {
            (true, Some(o)) => Some(line_range(&buf, o)),
            (false, Some(o)) => entry_at(&buf, o),
            (_, None) => None,
        };
        let (key, kind) = if syntax {
            (String::new(), ErrorKind::Parse(syntax_in_words(&message)))
        } else {
            reword(&path, &message)
        };
        if let Some(r) = &range {
            blank(&mut buf, r.clone());
            out.blanked.push(key.clone());
        }
        out.errors.push((offset, key, kind));
        if range.is_none() {
            // Nothing to set aside: reading again would give the same error.
            break;
        }
    }
    out.text = buf;
    out
}

/// The bytes of the line holding `offset`, without its newline.
fn line_range(text: &str, offset: usize) -> Range<usize> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    start..end
}

/// Spaces over every byte of `range` but newlines: offsets and line numbers stay.
fn blank(buf: &mut String, range: Range<usize>) {
    let blanked: String = buf[range.clone()]
        .chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect();
    buf.replace_range(range, &blanked);
}

/// The smallest key-value (from its line's start, so dotted keys go whole) or table (its
/// header and everything in it) of a standard table that holds `offset`.
fn entry_at(text: &str, offset: usize) -> Option<Range<usize>> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut best: Option<Range<usize>> = None;
    walk(text, doc.as_table(), offset, &mut best);
    best
}

fn consider(best: &mut Option<Range<usize>>, r: Range<usize>, offset: usize) {
    if r.contains(&offset) && best.as_ref().is_none_or(|b| r.len() < b.len()) {
        *best = Some(r);
    }
}

fn walk(text: &str, table: &toml_edit::Table, offset: usize, best: &mut Option<Range<usize>>) {
    use toml_edit::Item;
    for (name, _) in table.iter() {
        let Some((key, item)) = table.get_key_value(name) else {
            continue;
        };
        match item {
            Item::Value(v) => {
                if let (Some(k), Some(vs)) = (key.span(), v.span()) {
                    consider(best, line_range(text, k.start).start..vs.end, offset);
                }
            }
            Item::Table(t) => table_entry(text, t, offset, best),
            Item::ArrayOfTables(a) => a.iter().for_each(|t| table_entry(text, t, offset, best)),
            Item::None => {}
        }
    }
}

/// A table counts from its header to its last key-value; its contents are looked at too.
fn table_entry(text: &str, t: &toml_edit::Table, offset: usize, best: &mut Option<Range<usize>>) {
    let mut end = None;
    let mut extent = |r: Range<usize>| end = Some(end.map_or(r.end, |e: usize| e.max(r.end)));
    extent_of(t, &mut extent);
    if let (Some(h), Some(e)) = (t.span(), end.or(t.span().map(|s| s.end))) {
        if !t.is_implicit() {
            consider(best, h.start..e.max(h.end), offset);
        }
    }
    walk(text, t, offset, best);
}

fn extent_of(t: &toml_edit::Table, f: &mut impl FnMut(Range<usize>)) {
    use toml_edit::Item;
    for (_, item) in t.iter() {
        match item {
            Item::Value(v) => {
                if let Some(s) = v.span() {
                    f(s)
                }
            }
            // Sub-tables have headers of their own, and stay.
            Item::Table(sub) if sub.is_implicit() => extent_of(sub, f),
            _ => {}
        }
    }
}

/// The key an error is about, and the reason in an operator's words.
fn reword(path: &str, message: &str) -> (String, ErrorKind) {
    if let Some(field) = between(message, "unknown field `", "`") {
        // The path names the key itself, or (for some tables) the table it is in.
        let (table, key) = match path.strip_suffix(field) {
            Some(t) => (t.trim_end_matches('.'), path.to_string()),
            None if path.is_empty() => ("", field.to_string()),
            None => (path, format!("{path}.{field}")),
        };
        return (key, ErrorKind::UnknownKey(hint(table, field)));
    }
    (path.to_string(), ErrorKind::Parse(types_in_words(message)))
}

fn between<'m>(s: &'m str, open: &str, close: &str) -> Option<&'m str> {
    let rest = &s[s.find(open)? + open.len()..];
    Some(&rest[..rest.find(close)?])
}

/// The parser's syntax messages, reworded where an operator would not see the problem.
fn syntax_in_words(message: &str) -> String {
    match between(message, "duplicate key `", "`") {
        Some(k) => {
            format!("`{k}` is defined twice: a table or key may appear only once ({message})")
        }
        None => message.to_string(),
    }
}

/// Serde's type names (`u16`, `a sequence`) as an operator would say them.
pub(super) fn types_in_words(message: &str) -> String {
    const WORDS: [(&str, &str); 8] = [
        ("u8", "a whole number from 0 to 255"),
        ("u16", "a whole number from 0 to 65535"),
        ("u32", "a whole number from 0 to 4294967295"),
        ("u64", "a whole number from 0 to 18446744073709551615"),
        ("a boolean", "true or false"),
        ("a sequence", "a list, as [\"a\", \"b\"]"),
        ("a string", "a quoted string"),
        ("a map", "a table"),
    ];
    const FOUND: [(&str, &str); 7] = [
        ("string", "a string"),
        ("integer", "a number"),
        ("float", "a decimal number"),
        ("boolean", "a boolean"),
        ("sequence", "a list"),
        ("map", "a table"),
        ("datetime", "a date"),
    ];
    let Some((what, expected)) = message.split_once(", expected ") else {
        return message.to_string();
    };
    let expected = expected.trim();
    let expected = WORDS
        .iter()
        .find(|(w, _)| *w == expected)
        .map(|(_, say)| say.to_string())
        .or_else(|| {
            expected
                .strip_prefix("struct ")
                .map(|_| "a table".to_string())
        })
        .unwrap_or_else(|| expected.to_string());
    // "invalid type: string \"ninety\"" → "\"ninety\" is a quoted string"
    let what = match what.split_once(": ") {
        Some(("invalid type", found)) => {
            let (kind, value) = found.split_once(' ').unwrap_or((found, ""));
            let kind = FOUND
                .iter()
                .find(|(w, _)| *w == kind)
                .map_or(kind, |(_, say)| say);
            if value.is_empty() {
                format!("found {kind}")
            } else {
                format!("{} is {kind}", value.trim_matches('`'))
            }
        }
        Some(("invalid value", found)) => {
            let value = found.split_once(' ').map_or(found, |(_, v)| v);
            format!("{} is out of range", value.trim_matches('`'))
        }
        _ => what.to_string(),
    };
    format!("{what}: expected {expected}")
}

/// Where an unknown key would be understood, if anywhere.
fn hint(path: &str, field: &str) -> String {
    let here = table_of(path);
    let elsewhere: Vec<&str> = TABLES
        .iter()
        .filter(|(name, fields)| *name != here && fields().contains(&field))
        .map(|(name, _)| *name)
        .collect();
    if !elsewhere.is_empty() {
        return format!(
            "is not a key here: it belongs under {}",
            elsewhere.join(" or ")
        );
    }
    let known = TABLES
        .iter()
        .find(|(name, _)| *name == here)
        .map(|(_, f)| f())
        .unwrap_or(&[]);
    match known.iter().min_by_key(|k| distance(k, field)) {
        Some(k) if distance(k, field) <= 2 => format!("is not a key here: did you mean `{k}`?"),
        _ => format!("is not a key here (keys here: {})", known.join(", ")),
    }
}

/// The table a key path is in, as the configuration writes it.
fn table_of(path: &str) -> &'static str {
    let parts: Vec<&str> = path
        .split('.')
        .filter(|p| !p.is_empty())
        .map(|p| p.split('[').next().unwrap_or(p))
        .collect();
    match parts.as_slice() {
        [] => "the top level",
        ["bgp"] => "[bgp]",
        ["bgp", "group"] => "[[bgp.group]]",
        ["bgp", "group", "neighbor"] => "[[bgp.group.neighbor]]",
        ["bgp", "rib-sharding"] => "[bgp.rib-sharding]",
        ["bgp", "update-threading"] => "[bgp.update-threading]",
        ["bgp", "path-selection"] => "[bgp.path-selection]",
        ["bgp", "multipath"] => "[bgp.multipath]",
        ["bgp", "update-delay"] => "[bgp.update-delay]",
        ["bgp", "graceful-restart"] => "[bgp.graceful-restart]",
        ["management"] => "[management]",
        ["policy-options"] => "[policy-options]",
        ["policy-options", "prefix-list", _] => "[policy-options.prefix-list.NAME]",
        ["policy-options", "community", _] => "[policy-options.community.NAME]",
        ["policy-options", "as-path-group", _] => "[policy-options.as-path-group.NAME]",
        ["policy-options", "route-server-control"] => "[policy-options.route-server-control]",
        ["policy-options", "policy-statement", _] => "[policy-options.policy-statement.NAME]",
        ["policy-options", "policy-statement", _, "term"] => {
            "[[policy-options.policy-statement.NAME.term]]"
        }
        [.., "from"] => "from",
        [.., "then"] => "then",
        [.., "prefix-limit"] => "prefix-limit",
        [.., "prefix-limit", _] => "prefix-limit.inet-unicast / inet6-unicast",
        _ => "",
    }
}

type Fields = fn() -> &'static [&'static str];

/// Every table of the configuration and its keys, read from the schema itself.
const TABLES: [(&str, Fields); 23] = [
    ("[policy-options]", fields_of::<policy::PolicyOptions>),
    (
        "[policy-options.prefix-list.NAME]",
        fields_of::<policy::PrefixListDef>,
    ),
    (
        "[policy-options.community.NAME]",
        fields_of::<policy::CommunityDef>,
    ),
    (
        "[policy-options.as-path-group.NAME]",
        fields_of::<policy::AsPathGroupDef>,
    ),
    (
        "[policy-options.route-server-control]",
        fields_of::<policy::RouteServerControlDef>,
    ),
    (
        "[policy-options.policy-statement.NAME]",
        fields_of::<policy::StatementDef>,
    ),
    (
        "[[policy-options.policy-statement.NAME.term]]",
        fields_of::<policy::TermDef>,
    ),
    ("from", fields_of::<policy::FromDef>),
    ("then", fields_of::<policy::ThenDef>),
    ("the top level", fields_of::<Raw>),
    ("[bgp]", fields_of::<schema::Bgp>),
    ("[[bgp.group]]", fields_of::<schema::Group>),
    ("[[bgp.group.neighbor]]", fields_of::<schema::Neighbor>),
    ("[bgp.rib-sharding]", fields_of::<schema::RibSharding>),
    ("[bgp.update-delay]", fields_of::<schema::UpdateDelay>),
    (
        "[bgp.graceful-restart]",
        fields_of::<schema::GracefulRestart>,
    ),
    (
        "[bgp.update-threading]",
        fields_of::<schema::UpdateThreading>,
    ),
    ("[bgp.path-selection]", fields_of::<schema::PathSelection>),
    ("[bgp.multipath]", fields_of::<schema::Multipath>),
    ("[management]", fields_of::<schema::Management>),
    ("prefix-limit", fields_of::<schema::PrefixLimits>),
    ("add-path-send", fields_of::<schema::RawAddPathSend>),
    (
        "prefix-limit.inet-unicast / inet6-unicast",
        fields_of::<schema::RawPrefixLimit>,
    ),
];

/// The field names a derived `Deserialize` asks for: a deserializer that answers
/// `deserialize_struct` by handing them back as its error.
fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    match T::deserialize(FieldProbe) {
        Err(Probe::Fields(f)) => f,
        _ => &[],
    }
}

struct FieldProbe;

#[derive(Debug)]
enum Probe {
    Fields(&'static [&'static str]),
    Other,
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field probe")
    }
}

impl std::error::Error for Probe {}

impl de::Error for Probe {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Probe::Other
    }
}

impl<'de> de::Deserializer<'de> for FieldProbe {
    type Error = Probe;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probe> {
        Err(Probe::Other)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probe> {
        Err(Probe::Fields(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Edit distance, for "did you mean".
pub(super) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
