//! The configuration file: TOML, with the words of the Junos BGP configuration where Junos
//! has one. [`load`] parses, checks every setting, and resolves each neighbor's effective
//! settings (neighbor over group over `[bgp]`); every error names the file, line and key.

mod lower;
mod resolve;
mod schema;

pub use lower::{pipeline_config, settings, threads_of};
pub use resolve::{
    Config, Family, GroupType, Management, Peer, PrefixLimit, Threading, DEFAULT_SOCKET,
};
pub use schema::Raw;

use std::fmt;
use std::path::{Path, PathBuf};

/// The annotated example printed by `ribshard config example`; a test loads it.
pub const EXAMPLE: &str = include_str!("example.toml");

/// What is wrong with a setting.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("cannot read the file: {0}")]
    Read(String),
    /// TOML syntax, a wrong type, or an unknown key, as the TOML parser words it.
    #[error("{0}")]
    Parse(String),
    #[error("is required")]
    Missing,
    #[error("{value} {why}")]
    Invalid { value: String, why: &'static str },
    #[error("{value} is defined twice (first at line {first})")]
    Duplicate { value: String, first: usize },
    #[error("no neighbors are configured")]
    NoNeighbors,
}

/// One configuration error, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub file: PathBuf,
    /// 1-based line, when the key is in the file.
    pub line: Option<usize>,
    /// The key path, as `bgp.group[0].neighbor[1].port`.
    pub key: String,
    pub kind: ErrorKind,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.kind)
        } else {
            write!(f, ": {}: {}", self.key, self.kind)
        }
    }
}

impl std::error::Error for Error {}

/// All the errors of one file (`config check` prints them all, not just the first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Errors(pub Vec<Error>);

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

/// Reads, parses and checks a configuration file.
pub fn load(path: &Path) -> Result<Config, Errors> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Errors(vec![Error {
            file: path.to_path_buf(),
            line: None,
            key: String::new(),
            kind: ErrorKind::Read(e.to_string()),
        }])
    })?;
    parse(&text, path)
}

/// Parses and checks configuration text; `path` only names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Config, Errors> {
    let locator = Locator::new(text);
    let de = toml::Deserializer::new(text);
    let raw: Raw = serde_path_to_error::deserialize(de).map_err(|e| {
        let path_str = e.path().to_string();
        let inner = e.into_inner();
        let line = inner
            .span()
            .map(|s| locator.line_of_offset(s.start))
            .or_else(|| locator.line_of_key(&path_str));
        Errors(vec![Error {
            file: path.to_path_buf(),
            line,
            key: if path_str == "." {
                String::new()
            } else {
                path_str
            },
            kind: ErrorKind::Parse(inner.message().to_string()),
        }])
    })?;
    resolve::resolve(raw, &locator).map_err(|errs| {
        Errors(
            errs.into_iter()
                .map(|(key, kind)| Error {
                    file: path.to_path_buf(),
                    line: locator.line_of_key(&key),
                    key,
                    kind,
                })
                .collect(),
        )
    })
}

/// Finds the line of a key path in the document.
pub(crate) struct Locator<'t> {
    text: &'t str,
    doc: Option<toml_edit::ImDocument<&'t str>>,
}

impl<'t> Locator<'t> {
    fn new(text: &'t str) -> Self {
        Locator {
            text,
            doc: toml_edit::ImDocument::parse(text).ok(),
        }
    }

    fn line_of_offset(&self, offset: usize) -> usize {
        1 + self
            .text
            .as_bytes()
            .iter()
            .take(offset)
            .filter(|&&b| b == b'\n')
            .count()
    }

    /// `bgp.group[1].neighbor[0].address` → the line of that key, or of the closest
    /// enclosing key or table that is in the file.
    pub(crate) fn line_of_key(&self, path: &str) -> Option<usize> {
        let doc = self.doc.as_ref()?;
        let parts: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
        let offset = find(doc.as_table(), &parts, None)?;
        Some(self.line_of_offset(offset))
    }
}

fn find(table: &dyn toml_edit::TableLike, parts: &[&str], best: Option<usize>) -> Option<usize> {
    use toml_edit::{Item, Value};
    let Some((part, rest)) = parts.split_first() else {
        return best;
    };
    let (name, index) = match part.split_once('[') {
        Some((n, i)) => (n, i.trim_end_matches(']').parse::<usize>().ok()),
        None => (*part, None),
    };
    let Some((key, value)) = table.get_key_value(name) else {
        return best;
    };
    let best = key.span().map(|s| s.start).or(best);
    match (index, value) {
        (None, v) => match v.as_table_like() {
            Some(t) => find(t, rest, best),
            None => best,
        },
        (Some(i), Item::ArrayOfTables(a)) => match a.get(i) {
            Some(t) => find(t, rest, t.span().map(|s| s.start).or(best)),
            None => best,
        },
        (Some(i), Item::Value(Value::Array(a))) => {
            a.get(i).and_then(|v| v.span()).map(|s| s.start).or(best)
        }
        _ => best,
    }
}

#[cfg(test)]
mod tests;
