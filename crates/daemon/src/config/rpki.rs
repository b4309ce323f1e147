//! `[rpki]`: the RTR caches, checked and lowered into the client's configuration.

use super::resolve::Peer;
use super::schema::Rpki;
use super::{ErrorKind, WarningKind};
use ribshard_rpki::client::{CacheConfig, ClientConfig};
use std::net::SocketAddr;
use std::time::Duration;

/// The RTR client's configuration, as resolved.
pub type RpkiConfig = ClientConfig;

/// The port of rpki-rtr over TCP (RFC 6810 section 7, IANA).
pub const RTR_PORT: u16 = 323;

pub(super) fn resolve(
    raw: Option<&Rpki>,
    errs: &mut Vec<(String, ErrorKind)>,
) -> Option<RpkiConfig> {
    let raw = raw?;
    let mut caches = Vec::new();
    for (i, c) in raw.cache.iter().flatten().enumerate() {
        let Some(address) = c.address else {
            errs.push((format!("rpki.cache[{i}].address"), ErrorKind::Missing));
            continue;
        };
        caches.push(CacheConfig {
            address: SocketAddr::new(address, c.port.unwrap_or(RTR_PORT)),
            preference: c.preference.unwrap_or(i.min(255) as u8),
        });
    }
    if caches.is_empty() && raw.cache.iter().flatten().next().is_none() {
        errs.push(("rpki.cache".into(), ErrorKind::Missing));
    }
    let max_version = raw.max_version.unwrap_or(2);
    if max_version > 2 {
        errs.push((
            "rpki.max-version".into(),
            ErrorKind::Invalid {
                value: max_version.to_string(),
                why: "is not an RTR version ribshard speaks (0, 1 or 2)",
            },
        ));
    }
    if raw.retry == Some(0) {
        errs.push((
            "rpki.retry".into(),
            ErrorKind::Invalid {
                value: "0".into(),
                why: "must be at least 1 second",
            },
        ));
    }
    Some(ClientConfig {
        caches,
        max_version: max_version.min(2),
        retry: Duration::from_secs(u64::from(raw.retry.unwrap_or(60).max(1))),
    })
}

/// Import policies that read RPKI states with no `[rpki]` to feed them: every route is
/// not-found and unknown, which the operator should hear of.
pub(super) fn warn_unfed(
    peers: &[Peer],
    policies: &ribshard_policy::Policies,
    warns: &mut Vec<(String, WarningKind)>,
) {
    for p in peers {
        for (i, name) in p.import.iter().enumerate() {
            if policies.statement(name).is_some_and(|s| s.reads_rpki.any()) {
                warns.push((format!("{}.import[{i}]", p.key), WarningKind::RpkiUnfed));
            }
        }
    }
}
