//! `show validation session` and `show validation database`: the RTR client's status and
//! the records it holds, read from the client (never from the shards).

use crate::state::{unix, Daemon};
use ribshard_mgmt::api::LastError;
use ribshard_mgmt::validation::{
    AspaEntry, DatabaseQuery, RtrCache, ValidationDatabase, ValidationSessions, VrpEntry,
};
use ribshard_mgmt::ApiError;
use ribshard_rpki::client::SessionError;
use ribshard_rpki::{Key, Snapshot};

fn kind(e: &SessionError) -> &'static str {
    match e {
        SessionError::Connect(_) => "connect-failed",
        SessionError::Io(_) => "connection-lost",
        SessionError::Closed => "connection-closed",
        SessionError::Timeout(_) => "timeout",
        SessionError::Reported { .. } => "cache-error",
        SessionError::Protocol(_) => "protocol-error",
        SessionError::SessionChanged { .. } => "session-changed",
    }
}

/// The snapshot in use, if a client runs.
fn current(daemon: &Daemon) -> Option<Snapshot> {
    let c = daemon.rpki.lock().unwrap_or_else(|e| e.into_inner());
    let s = c.as_ref()?.status.lock().unwrap_or_else(|e| e.into_inner());
    Some(s.current.clone())
}

pub(super) fn sessions(daemon: &Daemon) -> ValidationSessions {
    let c = daemon.rpki.lock().unwrap_or_else(|e| e.into_inner());
    let Some(client) = c.as_ref() else {
        return ValidationSessions::default();
    };
    let s = client.status.lock().unwrap_or_else(|e| e.into_inner());
    let (v4, v6) = s.current.vrps.counts();
    ValidationSessions {
        configured: true,
        version: s.current.version,
        vrps_v4: v4 as u64,
        vrps_v6: v6 as u64,
        aspas: s.current.aspas.len() as u64,
        expired: s.expired,
        caches: s
            .caches
            .iter()
            .map(|c| RtrCache {
                address: c.config.address.to_string(),
                preference: c.config.preference,
                state: c.state.name().into(),
                version: c.version,
                session_id: c.session_id,
                serial: c.serial,
                refresh: c.timing.refresh,
                retry: c.timing.retry,
                expire: c.timing.expire,
                records_v4: c.records.0 as u64,
                records_v6: c.records.1 as u64,
                aspas: c.records.2 as u64,
                last_update: c.last_update.map(unix),
                up_since: c
                    .since
                    .filter(|_| c.state == ribshard_rpki::client::CacheState::Up)
                    .map(unix),
                flaps: c.flaps,
                last_error: c.last_error.as_ref().map(|(at, e)| LastError {
                    at: unix(*at),
                    kind: kind(e).into(),
                    message: e.to_string(),
                }),
            })
            .collect(),
    }
}

pub(super) fn database(daemon: &Daemon, q: DatabaseQuery) -> Result<ValidationDatabase, ApiError> {
    let prefix = match &q.prefix {
        None => None,
        Some(p) => {
            Some(Key::of(&ribshard_policy::parse_prefix(p).map_err(|e| {
                ApiError::BadRequest(format!("prefix {p}: {e}"))
            })?))
        }
    };
    let limit = q.limit.unwrap_or(10_000);
    let Some(snap) = current(daemon) else {
        return Ok(ValidationDatabase::default());
    };
    let mut out = ValidationDatabase {
        version: snap.version,
        ..ValidationDatabase::default()
    };
    let related = |k: &Key| prefix.is_none_or(|p| p.covers(k) || k.covers(&p));
    for r in snap.vrps.records() {
        if !related(&r.prefix) || q.asn.is_some_and(|a| a != r.asn) {
            continue;
        }
        out.matching += 1;
        if out.vrps.len() < limit {
            out.vrps.push(VrpEntry {
                prefix: r.prefix.prefix().to_string(),
                max_length: r.max_len,
                asn: r.asn,
            });
        }
    }
    if prefix.is_none() {
        for (customer, providers) in snap.aspas.sorted() {
            if q.asn.is_some_and(|a| a != customer) {
                continue;
            }
            out.matching += 1;
            if out.vrps.len() + out.aspas.len() < limit {
                out.aspas.push(AspaEntry {
                    customer,
                    providers: providers.to_vec(),
                });
            }
        }
    }
    out.truncated = out.matching > (out.vrps.len() + out.aspas.len()) as u64;
    Ok(out)
}
