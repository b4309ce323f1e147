//! `[bgp.graceful-restart]`: ribshard as a restarting speaker (RFC 4724), checked.

use super::schema::GracefulRestart;
use super::ErrorKind;
use std::path::PathBuf;

/// Where a graceful stop leaves its mark when `state-file` is not set (the service's
/// `StateDirectory=ribshard`).
pub const DEFAULT_STATE_FILE: &str = "/var/lib/ribshard/graceful-restart";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GracefulRestartConfig {
    /// Seconds neighbors keep our routes after our sessions drop (1 to 4095).
    pub restart_time: u16,
    /// RFC 9494: seconds neighbors keep our routes, long-lived stale, after the restart
    /// time (0: no long-lived graceful restart of ours).
    pub long_lived_stale_time: u32,
    /// SIGTERM stops gracefully (else with a Cease to every neighbor).
    pub sigterm_restarts: bool,
    pub state_file: PathBuf,
}

pub(super) fn resolve(
    raw: Option<&GracefulRestart>,
    errs: &mut Vec<(String, ErrorKind)>,
) -> Option<GracefulRestartConfig> {
    let raw = raw?;
    let restart_time = raw.restart_time.unwrap_or(120);
    if !(1..=4095).contains(&restart_time) {
        errs.push((
            "bgp.graceful-restart.restart-time".into(),
            ErrorKind::Invalid {
                value: restart_time.to_string(),
                // RFC 4724 section 3: a 12-bit field; 0 would ask neighbors to keep nothing.
                why: "must be 1 to 4095 seconds (the capability's 12-bit field)",
            },
        ));
    }
    let long_lived_stale_time = raw.long_lived_stale_time.unwrap_or(0);
    if long_lived_stale_time > 0x00ff_ffff {
        errs.push((
            "bgp.graceful-restart.long-lived-stale-time".into(),
            ErrorKind::Invalid {
                value: long_lived_stale_time.to_string(),
                // RFC 9494 section 3: a 24-bit field.
                why: "must be at most 16777215 seconds (the capability's 24-bit field)",
            },
        ));
    }
    let sigterm_restarts = match raw.on_sigterm.as_deref() {
        None | Some("restart") => true,
        Some("shutdown") => false,
        Some(other) => {
            errs.push((
                "bgp.graceful-restart.on-sigterm".into(),
                ErrorKind::Invalid {
                    value: format!("{other:?}"),
                    why: "is not what SIGTERM can do: \"restart\" or \"shutdown\"",
                },
            ));
            true
        }
    };
    let state_file = raw
        .state_file
        .clone()
        .unwrap_or_else(|| DEFAULT_STATE_FILE.into());
    if state_file.as_os_str().is_empty() {
        errs.push((
            "bgp.graceful-restart.state-file".into(),
            ErrorKind::Invalid {
                value: "\"\"".into(),
                why: "is not a path",
            },
        ));
    }
    Some(GracefulRestartConfig {
        restart_time: restart_time.clamp(1, 4095),
        long_lived_stale_time: long_lived_stale_time.min(0x00ff_ffff),
        sigterm_restarts,
        state_file,
    })
}
