//! The configuration file: TOML, with the words of the Junos BGP configuration where Junos
//! has one. [`load`] parses, checks every setting, and resolves each neighbor's effective
//! settings (neighbor over group over `[bgp]`); every error names the file, line and key.

pub mod bmp;
mod collect;
pub mod graceful;
mod host;
mod lower;
mod resolve;
pub mod rpki;
mod running;
mod schema;

pub use lower::{local_settings, pipeline_config, settings, threads_of};
pub use resolve::{
    community, parse_prefix, Config, Family, GroupType, Management, MrtConfig, Originate, Peer,
    PrefixLimit, Threading, When, DEFAULT_SOCKET,
};
pub use running::running;
pub use schema::Raw;

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Where `ribshard run` and `config check` look without a file named (the Debian package
/// installs the example there).
pub const DEFAULT_FILE: &str = "/etc/ribshard/ribshard.toml";

/// The annotated example printed by `ribshard config example`; a test loads it.
pub const EXAMPLE: &str = include_str!("example.toml");

/// What is wrong with a setting.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("cannot read the file: {0}")]
    Read(String),
    /// TOML syntax or a wrong type, as the TOML parser words it (types in words).
    #[error("{0}")]
    Parse(String),
    /// A key this table does not have, and where it belongs or what was meant.
    #[error("{0}")]
    UnknownKey(String),
    #[error("the file is empty: a configuration needs at least [bgp] local-as and router-id")]
    Empty,
    #[error("is required")]
    Missing,
    #[error("{value} {why}")]
    Invalid { value: String, why: &'static str },
    #[error("{value} is defined twice (first at line {first})")]
    Duplicate { value: String, first: usize },
    #[error("{address} port {port} is our own listen address (bgp.listen): the session would be with ourselves")]
    OwnListenAddress { address: IpAddr, port: u16 },
    #[error("{0}")]
    Policy(ribshard_policy::PolicyError),
}

/// What loads but will not work as written, on this host at least.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WarningKind {
    #[error("{address} is not an address of this host: connections from it will fail until it is")]
    NotLocal { address: IpAddr },
    #[error("{threads} threads for {cpus} logical CPUs: threads beyond the CPUs only take turns (see `ribshard advise`)")]
    MoreThreadsThanCpus { threads: u32, cpus: usize },
    #[error("{0}")]
    Policy(ribshard_policy::PolicyWarning),
    #[error("no neighbors are configured: the daemon runs and waits for a reload that adds some")]
    NoNeighbors,
    #[error("this host's kernel has no TCP-AO (it needs Linux 6.7 or later built with CONFIG_TCP_AO): the daemon will not start this neighbor")]
    TcpAoUnsupported,
    #[error("this import policy reads validation-state or aspa-state, but no [rpki] cache is configured: every route is unknown to it")]
    RpkiUnfed,
}

/// One finding about the configuration, located: an [`Error`] or a [`Warning`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located<K> {
    pub file: PathBuf,
    /// 1-based line, when the key is in the file.
    pub line: Option<usize>,
    /// The key path, as `bgp.group[0].neighbor[1].port`.
    pub key: String,
    pub kind: K,
}

/// A setting that keeps the file from loading.
pub type Error = Located<ErrorKind>;
/// A setting that loads but will not work as meant.
pub type Warning = Located<WarningKind>;

impl Located<()> {
    fn with<K>(self, kind: K) -> Located<K> {
        Located {
            file: self.file,
            line: self.line,
            key: self.key,
            kind,
        }
    }
}

impl<K> Located<K> {
    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        what: &str,
        kind: &dyn fmt::Display,
    ) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {what}{kind}")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "", &self.kind)
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "warning: ", &self.kind)
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

/// A file read and checked: its settings, or every error; and what will not work either way.
pub struct Checked {
    pub config: Result<Config, Errors>,
    pub warnings: Vec<Warning>,
}

/// Reads, parses and checks a configuration file.
pub fn load(path: &Path) -> Checked {
    match std::fs::read_to_string(path) {
        Ok(text) => check(&text, path),
        Err(e) => Checked {
            config: Err(Errors(vec![Error {
                file: path.to_path_buf(),
                line: None,
                key: String::new(),
                kind: ErrorKind::Read(e.to_string()),
            }])),
            warnings: Vec::new(),
        },
    }
}

/// Parses and checks configuration text; `path` only names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Config, Errors> {
    check(text, path).config
}

/// Parses and checks configuration text, every error and warning of it.
pub fn check(text: &str, path: &Path) -> Checked {
    let locator = Locator::new(text);
    let located = |line: Option<usize>, key: String| Located {
        file: path.to_path_buf(),
        line,
        key,
        kind: (),
    };
    if text.trim().is_empty() {
        return Checked {
            config: Err(Errors(vec![
                located(Some(1), String::new()).with(ErrorKind::Empty)
            ])),
            warnings: Vec::new(),
        };
    }
    let collected = collect::deserialize_all(text);
    let mut errors: Vec<Error> = collected
        .errors
        .into_iter()
        .map(|(offset, key, kind)| {
            let line = offset
                .map(|o| locator.line_of_offset(o))
                .or_else(|| locator.line_of_key(&key));
            located(line, key).with(kind)
        })
        .collect();
    let mut warnings = Vec::new();
    let mut config = None;
    // Keys are found in the text as read last: the same lines, and it parses.
    let locator = Locator::new(&collected.text);
    if let Some(raw) = collected.raw {
        let base = path.parent().unwrap_or(Path::new("."));
        let (resolved, warned) = resolve::resolve(raw, &locator, base);
        let line_of = |key: &str| locator.line_of_key(key);
        match resolved {
            Ok(c) => config = Some(c),
            Err(errs) => errors.extend(
                errs.into_iter()
                    .filter(|(key, kind)| !echo(&collected.blanked, key, kind))
                    .map(|(key, kind)| located(line_of(&key), key).with(kind)),
            ),
        }
        warnings = warned
            .into_iter()
            .filter(|(key, _)| !echoed_warning(&collected.blanked, key))
            .map(|(key, kind)| located(line_of(&key), key).with(kind))
            .collect();
    }
    errors.sort_by_key(|e| e.line.unwrap_or(usize::MAX));
    Checked {
        config: match (config, errors.is_empty()) {
            (Some(c), true) => Ok(c),
            _ => Err(Errors(errors)),
        },
        warnings,
    }
}

/// Whether an error of the settings follows from a key set aside for an error of its own:
/// that key now missing (where it is written, or inherited by a group or neighbor), no
/// neighbors left, or a neighbor checked against a listen address set aside.
fn echo(blanked: &[String], key: &str, kind: &ErrorKind) -> bool {
    let last = |k: &str| k.rsplit('.').next().unwrap_or(k).to_string();
    match kind {
        // Misspelt (`routerid`) counts too.
        ErrorKind::Missing => blanked
            .iter()
            .any(|b| b == key || collect::distance(&last(b), &last(key)) <= 2),
        ErrorKind::OwnListenAddress { .. } => blanked.iter().any(|b| b.starts_with("bgp.listen")),
        _ => blanked.iter().any(|b| b == key),
    }
}

/// Whether a warning follows from a key set aside for an error: under that key, or in the
/// same policy statement (a term whose `then` was set aside "has no action", and the terms
/// after it "are never reached").
fn echoed_warning(blanked: &[String], key: &str) -> bool {
    let statement = |k: &str| -> Option<String> {
        let mut parts = k.splitn(4, '.');
        let (a, b, c) = (parts.next()?, parts.next()?, parts.next()?);
        (a == "policy-options" && b == "policy-statement").then(|| {
            // `in.term[0]...` or `in`: the statement's name without its term index.
            format!("{a}.{b}.{}", c.split('[').next().unwrap_or(c))
        })
    };
    blanked.iter().any(|b| {
        key == b
            || key.starts_with(&format!("{b}."))
            || key.starts_with(&format!("{b}["))
            || statement(b).is_some_and(|s| statement(key) == Some(s))
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
