//! `GET /v1/routes/watch`: a watcher of the shards' best-path changes
//! ([`crate::watch::RouteWatch`]) written as JSON lines, in the watcher's own task.

use super::routes::{as_path_text, next_hop, parse_destination, table_name, PeerNames};
use super::{peer_index, route_filter::PathMatch};
use crate::state::Daemon;
use crate::watch::{Watch, WatchFilter, WatchState, Watched, WATCH_QUEUE};
use bytes::Bytes;
use ribshard_mgmt::api::{RouteChange, RouteRequest, WatchEnd, WatchRequest, WatchedPath};
use ribshard_mgmt::ApiError;
use ribshard_rib::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// Octets of JSON lines handed to the connection at once, at most.
const CHUNK: usize = 64 * 1024;

/// Starts a watcher with the request's filter; its changes arrive on the channel.
pub(super) async fn watch(
    d: &Arc<Daemon>,
    q: WatchRequest,
) -> Result<mpsc::Receiver<Bytes>, ApiError> {
    let (filter, names) = {
        let live = d.live.read().await;
        let (under, covering) = match &q.prefix {
            None => (None, None),
            Some(p) => match parse_destination(p)? {
                (prefix, true) => (Some(prefix), None),
                (host, false) => (None, Some(host)),
            },
        };
        let peer = match &q.neighbor {
            Some(a) => Some(peer_index(&live, a)? as u32),
            None => None,
        };
        let paths = PathMatch::of(
            &RouteRequest {
                community: q.community.clone(),
                large_community: q.large_community.clone(),
                ..RouteRequest::default()
            },
            Vec::new(),
        )?;
        (
            WatchFilter {
                under,
                covering,
                peer,
                paths,
            },
            names(&live),
        )
    };
    let w = d.watch.watch(filter);
    info!(?q, watchers = d.watch.watchers(), "route watch started");
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(forward(d.clone(), w, names, tx));
    Ok(rx)
}

fn names(live: &crate::state::Live) -> PeerNames {
    Arc::new(
        live.peers
            .iter()
            .map(|p| (p.address.to_string(), p.peer_as))
            .collect(),
    )
}

/// Writes a watcher's changes to its connection until the client goes away or the shards
/// drop the watcher (its queue filled up).
async fn forward(d: Arc<Daemon>, mut w: Watch, mut names: PeerNames, tx: mpsc::Sender<Bytes>) {
    let state = w.state.clone();
    loop {
        let first = tokio::select! {
            m = w.rx.recv() => m,
            () = dropped(&state) => None,
        };
        let Some(first) = first else { break };
        let mut buf = Vec::with_capacity(4096);
        let mut next = Some(first);
        while let Some(m) = next {
            let known =
                |p: &Option<Path>| p.as_ref().is_none_or(|p| (p.peer as usize) < names.len());
            if !known(&m.best) || !known(&m.old) {
                // A neighbor added since the watch began.
                names = self::names(&*d.live.read().await);
            }
            line(&m, &names, &mut buf);
            next = if buf.len() < CHUNK {
                w.rx.try_recv().ok()
            } else {
                None
            };
        }
        tokio::select! {
            r = tx.send(Bytes::from(buf)) => if r.is_err() {
                // The client went away; dropping the watch removes it.
                return;
            },
            () = dropped(&state) => break,
        }
    }
    let reason = format!("fell behind: {WATCH_QUEUE} changes unread");
    warn!(
        watchers = d.watch.watchers() - 1,
        "route watch dropped: {reason}"
    );
    let mut end = serde_json::to_vec(&WatchEnd { dropped: reason }).unwrap_or_default();
    end.push(b'\n');
    let _ = tx.try_send(Bytes::from(end));
}

/// Returns once the shards have dropped the watcher.
async fn dropped(state: &WatchState) {
    while !state.dropped() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn line(m: &Watched, names: &PeerNames, out: &mut Vec<u8>) {
    let change = match (&m.old, &m.best) {
        (_, None) => "withdrawn",
        (None, Some(_)) => "added",
        (Some(_), Some(_)) => "replaced",
    };
    let c = RouteChange {
        time: m
            .at
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        table: table_name(m.prefix.family()).into(),
        prefix: m.prefix.to_string(),
        shard: m.shard,
        change: change.into(),
        best: m.best.as_ref().map(|p| watched(p, names)),
        old: m.old.as_ref().map(|p| watched(p, names)),
    };
    if serde_json::to_writer(&mut *out, &c).is_ok() {
        out.push(b'\n');
    }
}

fn watched(p: &Path, names: &PeerNames) -> WatchedPath {
    let a = p.attrs.attributes();
    let (from, peer_as) = names
        .get(p.peer as usize)
        .cloned()
        .unwrap_or_else(|| (format!("peer {}", p.peer), 0));
    WatchedPath {
        from,
        peer_as,
        next_hop: next_hop(p.attrs.next_hop()),
        as_path: a.as_path().map(as_path_text).unwrap_or_default(),
        origin: a
            .origin()
            .map_or_else(|| "INCOMPLETE".into(), |o| o.to_string()),
        local_pref: a.local_pref(),
        med: a.med(),
        communities: a
            .communities()
            .iter()
            .map(|c| format!("{}:{}", c >> 16, c & 0xffff))
            .collect(),
        large_communities: a
            .large_communities()
            .iter()
            .map(|[x, y, z]| format!("{x}:{y}:{z}"))
            .collect(),
    }
}
