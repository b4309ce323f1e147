//! Graceful restart as the restarting speaker (RFC 4724): the mark a graceful stop leaves
//! for the next start (so that its OPENs carry the Restart State and Forwarding State
//! bits), `ribshard restart [--graceful]`, and the process starting itself again.

use crate::config::graceful::GracefulRestartConfig;
use crate::state::Live;
use ribshard_mgmt::api::{RestartReply, RestartRequest};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How the daemon's main loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Stopped: the process ends.
    Stopped,
    /// `ribshard restart`: the process starts itself again on the same command line.
    Restart,
}

/// Why `ribshard restart` is refused (nothing stops then).
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error(
        "graceful restart is not configured: without [bgp.graceful-restart] our OPENs ask no \
         neighbor to keep our routes (add it, reload, and the sessions that come up after \
         offer it)"
    )]
    NotConfigured,
    #[error("the daemon was started without a configuration file to start again from")]
    NoConfigFile,
    #[error("the configuration file has errors; nothing restarted:\n{0}")]
    BadConfig(String),
    #[error("cannot write the graceful restart mark {}: {source}; nothing restarted", path.display())]
    Mark {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The mark's contents: when the graceful stop happened (Unix seconds).
fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Leaves the mark of a graceful stop.
pub fn mark(cfg: &GracefulRestartConfig) -> Result<(), RestartError> {
    let write = |path: &Path| -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        // Written aside and renamed: a start never reads half a mark.
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, format!("stopped-at {}\n", now_secs()))?;
        std::fs::rename(&tmp, path)
    };
    write(&cfg.state_file).map_err(|source| RestartError::Mark {
        path: cfg.state_file.clone(),
        source,
    })
}

/// At start: whether this start is a graceful restart (a mark left by a graceful stop
/// no longer ago than the restart time, after which no neighbor holds our routes). The
/// mark is removed either way: it speaks for one start only.
pub fn take_mark(cfg: &GracefulRestartConfig) -> Option<Duration> {
    let text = std::fs::read_to_string(&cfg.state_file).ok()?;
    if let Err(e) = std::fs::remove_file(&cfg.state_file) {
        tracing::warn!(
            "graceful restart: cannot remove {}: {e}",
            cfg.state_file.display()
        );
    }
    let at: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("stopped-at "))?
        .trim()
        .parse()
        .ok()?;
    let ago = Duration::from_secs(now_secs().saturating_sub(at));
    if ago > Duration::from_secs(u64::from(cfg.restart_time)) {
        tracing::info!(
            stopped_s_ago = ago.as_secs(),
            restart_time_s = cfg.restart_time,
            "graceful restart: the last graceful stop is older than restart-time; starting cold"
        );
        return None;
    }
    Some(ago)
}

/// Checks a restart asked through the API and, when graceful, leaves the mark; the reply
/// names the neighbors that keep our routes meanwhile and those that do not.
pub fn prepare(
    live: &Live,
    config_file: Option<&Path>,
    r: &RestartRequest,
) -> Result<RestartReply, RestartError> {
    let file = config_file.ok_or(RestartError::NoConfigFile)?;
    // The new process reads the file as it is now: one that would not start is refused
    // here, while the daemon still runs.
    if let Err(errors) = crate::config::load(file).config {
        return Err(RestartError::BadConfig(errors.to_string()));
    }
    let gr = match (&live.config.graceful_restart, r.graceful) {
        (None, true) => return Err(RestartError::NotConfigured),
        (g, graceful) => g.as_ref().filter(|_| graceful),
    };
    let mut reply = RestartReply {
        graceful: r.graceful,
        ..RestartReply::default()
    };
    for (i, _) in &live.active {
        let Some(h) = live.sessions.peers.get(*i) else {
            continue;
        };
        let Some(n) = h.status().negotiated else {
            continue;
        };
        let name = h.settings.name();
        if r.graceful && n.restart_helped {
            reply.kept_by.push(name);
        } else {
            reply.lost_by.push(name);
        }
    }
    if let Some(g) = gr {
        mark(g)?;
    }
    Ok(reply)
}

/// Starts this program again in this process (same PID, so a service manager sees no
/// exit), on the same command line. Returns only on failure.
pub fn exec_again() -> std::io::Error {
    use std::os::unix::process::CommandExt;
    // An upgrade replaces the file under us: the new one is at the same path.
    let exe = match std::env::current_exe() {
        Ok(p) => {
            let s = p.to_string_lossy();
            match s.strip_suffix(" (deleted)") {
                Some(stripped) => PathBuf::from(stripped),
                None => p,
            }
        }
        Err(e) => return e,
    };
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
    std::process::Command::new(&exe)
        .arg0(argv0)
        .args(args)
        .exec()
}
