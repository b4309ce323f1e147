//! The daemon's logging: what is logged (`RUST_LOG`, then `ribshard set log level LEVEL
//! [neighbor X]` at run time) and who reads it (stderr, the journal under systemd, and
//! every `ribshard monitor log`).
//!
//! A neighbor's own level costs nothing while none is set: the level macros are skipped
//! below the daemon's level as usual. While one is set, events at its level are checked
//! for their `neighbor` field, and those of other neighbors dropped.

use arc_swap::ArcSwap;
use ribshard_mgmt::api::{LogLevels as Levels, NeighborLevel};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

/// Lines a `monitor log` client may have unread before it is told it lost some.
const TAIL_LINES: usize = 4096;

/// Why a level cannot be set.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LevelError {
    #[error("\"{0}\" is not a level: one of error, warn, info, debug, trace")]
    Level(String),
    #[error("logging is not set up by this process (a test harness, a client command)")]
    NotSetUp,
}

/// Run-time control of the log, set up once by [`init`].
pub struct LogControl {
    daemon: reload::Handle<EnvFilter, Registry>,
    neighbors: NeighborLevels,
    levels: Mutex<Levels>,
    tail: broadcast::Sender<Arc<str>>,
}

static CONTROL: OnceLock<LogControl> = OnceLock::new();

/// The process's log control; `None` unless [`init`] set it up (tests, client commands).
pub fn control() -> Option<&'static LogControl> {
    CONTROL.get()
}

/// Sets up logging to stderr (JSON lines with `json`) at `RUST_LOG`'s directives (`info`
/// without it), with run-time control ([`control`]).
pub fn init(json: bool) {
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
    let env = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    let (daemon, handle) = reload::Layer::new(env);
    let neighbors = NeighborLevels::default();
    let (tail, _) = broadcast::channel(TAIL_LINES);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let stderr = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let out: Box<dyn Layer<Registry> + Send + Sync> = if json {
        stderr.json().boxed()
    } else {
        stderr.boxed()
    };
    let filter = daemon.or(neighbors.clone());
    let layers = out.and_then(Tail(tail.clone())).with_filter(filter);
    if tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .is_ok()
    {
        let _ = CONTROL.set(LogControl {
            daemon: handle,
            neighbors,
            levels: Mutex::new(Levels {
                daemon: directives,
                neighbors: Vec::new(),
            }),
            tail,
        });
    }
}

fn level(s: &str) -> Result<LevelFilter, LevelError> {
    s.parse::<LevelFilter>()
        .map_err(|_| LevelError::Level(s.to_string()))
}

impl LogControl {
    /// Sets the daemon's level, or (with `neighbor`) one neighbor's: `info` (or the
    /// daemon's level) for a neighbor ends its own.
    pub fn set(&self, lvl: &str, neighbor: Option<&str>) -> Result<Levels, LevelError> {
        let new = level(lvl)?;
        let mut levels = self.levels.lock().unwrap_or_else(|e| e.into_inner());
        match neighbor {
            None => {
                self.daemon
                    .reload(EnvFilter::new(new.to_string()))
                    .map_err(|_| LevelError::NotSetUp)?;
                levels.daemon = new.to_string().to_lowercase();
            }
            Some(n) => {
                levels.neighbors.retain(|x| x.neighbor != n);
                let daemon = level(&levels.daemon).unwrap_or(LevelFilter::INFO);
                if new > daemon {
                    levels.neighbors.push(NeighborLevel {
                        neighbor: n.to_string(),
                        level: new.to_string().to_lowercase(),
                    });
                }
                self.neighbors.0.store(Arc::new(
                    levels
                        .neighbors
                        .iter()
                        .filter_map(|x| Some((x.neighbor.clone(), level(&x.level).ok()?)))
                        .collect(),
                ));
            }
        }
        // The level macros' static check reads the filters' most verbose level.
        tracing::callsite::rebuild_interest_cache();
        Ok(levels.clone())
    }

    pub fn levels(&self) -> Levels {
        self.levels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every line logged from now on (`monitor log`); a reader that falls more than
    /// [`TAIL_LINES`] behind is told how many it lost.
    pub fn tail(&self) -> broadcast::Receiver<Arc<str>> {
        self.tail.subscribe()
    }
}

/// Neighbors logged at their own level: an event passes if it is at or above a
/// neighbor's level and its `neighbor` field names that neighbor.
#[derive(Clone, Default)]
struct NeighborLevels(Arc<ArcSwap<Vec<(String, LevelFilter)>>>);

impl NeighborLevels {
    fn most(&self) -> LevelFilter {
        self.0
            .load()
            .iter()
            .map(|(_, l)| *l)
            .max()
            .unwrap_or(LevelFilter::OFF)
    }
}

impl<S: Subscriber> Filter<S> for NeighborLevels {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        meta.is_event() && *meta.level() <= self.most()
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        // Asked again whenever a neighbor's level is set (the interest cache is rebuilt).
        if meta.is_event() && *meta.level() <= self.most() {
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        let list = self.0.load();
        let mut v = NeighborField(None);
        event.record(&mut v);
        let Some(name) = v.0 else { return false };
        // `neighbor` reads "ADDRESS (ASn)".
        let address = name.split(' ').next().unwrap_or_default();
        list.iter()
            .any(|(a, l)| a == address && *event.metadata().level() <= *l)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.most())
    }
}

struct NeighborField(Option<String>);

impl Visit for NeighborField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "neighbor" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "neighbor" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// Each event as one line for `monitor log`, written only while someone reads.
struct Tail(broadcast::Sender<Arc<str>>);

impl<S: Subscriber> Layer<S> for Tail {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if self.0.receiver_count() == 0 {
            return;
        }
        let m = event.metadata();
        let mut line = String::with_capacity(128);
        let _ = write!(line, "{} {:>5} {}:", timestamp(), m.level(), m.target());
        let mut v = Fields {
            line: &mut line,
            message: String::new(),
        };
        event.record(&mut v);
        let message = std::mem::take(&mut v.message);
        if !message.is_empty() {
            line.push(' ');
            line.push_str(&message);
        }
        let _ = self.0.send(Arc::from(line));
    }
}

struct Fields<'a> {
    line: &'a mut String,
    message: String,
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.line, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            let _ = write!(self.line, " {}={value}", field.name());
        }
    }
}

/// Now, as RFC 3339 in UTC to the millisecond.
fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (y, mo, d, h, mi, s) = crate::cli::render::civil(now.as_secs() as i64);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        now.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_words() {
        assert_eq!(level("debug"), Ok(LevelFilter::DEBUG));
        assert!(matches!(level("loud"), Err(LevelError::Level(_))));
    }
}
