//! The route-change watch (`GET /v1/routes/watch`, `ribshard monitor route`): a subscriber of
//! the shards' change stream ([`ribshard_engine::pipeline::stream`]) that hands each watcher
//! the best-path changes its filter selects, as the shards decide them.
//!
//! It must never slow routing. A shard reads the list of watchers without a lock (none at
//! all: one atomic load and nothing more), judges each change against a watcher's filter,
//! and only tries to queue it: a watcher whose queue is full (its client reads slower than
//! routes change) is dropped there and then, and told why. The JSON is written in the
//! watcher's own task, never in a shard.

use crate::backend::route_filter::PathMatch;
use arc_swap::ArcSwap;
use ribshard_engine::pipeline::{Passed, Subscriber, Tap};
use ribshard_rib::{Change, Path, PeerIndex, Shard, Within};
use ribshard_wire::Prefix;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::mpsc;

/// Changes a watcher may have unread before it is dropped: a full table's load is far
/// more; a client that keeps up never has more than a few.
pub const WATCH_QUEUE: usize = 65_536;

/// One best-path change, as a watcher receives it.
#[derive(Clone, Debug)]
pub struct Watched {
    pub at: SystemTime,
    pub shard: usize,
    pub prefix: Prefix,
    pub old: Option<Path>,
    pub best: Option<Path>,
}

/// Which changes a watcher wants.
#[derive(Debug, Default)]
pub struct WatchFilter {
    /// The prefix and those under it.
    pub(crate) under: Option<Prefix>,
    /// An address (a host prefix): the prefixes covering it.
    pub(crate) covering: Option<Prefix>,
    /// The new or old best path came from this peer.
    pub(crate) peer: Option<PeerIndex>,
    /// The new or old best path matches (communities).
    pub(crate) paths: Option<PathMatch>,
}

impl WatchFilter {
    fn wants(&self, c: &Change) -> bool {
        let inside = |outer: Prefix, p: &Prefix| {
            Within::Under {
                prefix: outer,
                or_equal: true,
            }
            .contains(p)
        };
        if self.under.is_some_and(|u| !inside(u, &c.prefix)) {
            return false;
        }
        if self.covering.is_some_and(|a| !inside(c.prefix, &a)) {
            return false;
        }
        let either = |f: &dyn Fn(&Path) -> bool| c.best.iter().chain(c.old.iter()).any(f);
        if let Some(peer) = self.peer {
            if !either(&|p| p.peer == peer) {
                return false;
            }
        }
        if let Some(m) = &self.paths {
            if !either(&|p| m.matches_path(p)) {
                return false;
            }
        }
        true
    }
}

/// What a watcher's task and the shards share: why it was dropped, if it was.
#[derive(Debug, Default)]
pub struct WatchState {
    dropped: AtomicBool,
}

impl WatchState {
    pub fn dropped(&self) -> bool {
        self.dropped.load(Ordering::Relaxed)
    }
}

struct Watcher {
    id: u64,
    filter: WatchFilter,
    tx: mpsc::Sender<Watched>,
    state: Arc<WatchState>,
}

/// Every watcher, for the shards to read.
#[derive(Default)]
pub struct RouteWatch {
    watchers: ArcSwap<Vec<Arc<Watcher>>>,
    next: AtomicU64,
}

/// A watcher's end: its changes, and whether the shards dropped it. Dropping it removes
/// the watcher.
pub struct Watch {
    pub rx: mpsc::Receiver<Watched>,
    pub state: Arc<WatchState>,
    id: u64,
    hub: Arc<RouteWatch>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.hub.remove(self.id);
    }
}

impl RouteWatch {
    /// Starts a watcher.
    pub fn watch(self: &Arc<Self>, filter: WatchFilter) -> Watch {
        let (tx, rx) = mpsc::channel(WATCH_QUEUE);
        let state = Arc::new(WatchState::default());
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let w = Arc::new(Watcher {
            id,
            filter,
            tx,
            state: state.clone(),
        });
        self.watchers.rcu(|list| {
            let mut l = Vec::clone(list);
            l.push(w.clone());
            l
        });
        Watch {
            rx,
            state,
            id,
            hub: self.clone(),
        }
    }

    fn remove(&self, id: u64) {
        self.watchers.rcu(|list| {
            list.iter()
                .filter(|w| w.id != id)
                .cloned()
                .collect::<Vec<_>>()
        });
    }

    pub fn watchers(&self) -> usize {
        self.watchers.load().len()
    }
}

/// The watch as a subscriber of the change stream.
pub struct WatchSubscriber(pub Arc<RouteWatch>);

impl Subscriber for WatchSubscriber {
    fn name(&self) -> &'static str {
        "route-watch"
    }

    fn tap(&self, shard: usize, _shards: usize) -> Box<dyn Tap> {
        Box::new(WatchTap {
            shard,
            hub: self.0.clone(),
        })
    }
}

struct WatchTap {
    shard: usize,
    hub: Arc<RouteWatch>,
}

impl Tap for WatchTap {
    fn decided(&mut self, _table: &Shard, changes: &[Change]) {
        let list = self.hub.watchers.load();
        if list.is_empty() {
            return;
        }
        let at = SystemTime::now();
        for w in list.iter() {
            if w.state.dropped() {
                continue;
            }
            for c in changes.iter().filter(|c| c.best_changed) {
                if !w.filter.wants(c) {
                    continue;
                }
                let m = Watched {
                    at,
                    shard: self.shard,
                    prefix: c.prefix,
                    old: c.old.clone(),
                    best: c.best.clone(),
                };
                // Never wait: a full queue drops the watcher, never holds the shard.
                if w.tx.try_send(m).is_err() {
                    w.state.dropped.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
    }

    // Nothing is held here: every change was queued (or its watcher dropped) in `decided`.
    fn barrier(&mut self, done: Passed) {
        done.pass();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ribshard_rib::{LoopChecks, Position, RouteAttrs};
    use ribshard_wire::attributes::PathAttributes;

    fn change(prefix: &str, peer: PeerIndex) -> Change {
        let (a, l) = prefix.split_once('/').unwrap();
        let attrs = Arc::new(RouteAttrs::from_attributes(
            &PathAttributes::default(),
            &[192, 0, 2, 1],
            &LoopChecks::default(),
        ));
        Change {
            prefix: Prefix::v4(a.parse().unwrap(), l.parse().unwrap()).unwrap(),
            position: Position::START,
            old: None,
            best: Some(Path::new(peer, 0, attrs, 0, 0)),
            multipath: Vec::new(),
            best_changed: true,
            add_paths: None,
            paths_only: false,
        }
    }

    #[test]
    fn a_watcher_gets_what_its_filter_selects_and_one_that_falls_behind_is_dropped() {
        let hub = Arc::new(RouteWatch::default());
        let mut tap = WatchSubscriber(hub.clone()).tap(0, 1);
        let table = Shard::new(ribshard_rib::Options::default());
        // Nobody watching: nothing is done.
        tap.decided(&table, &[change("10.0.0.0/24", 1)]);
        let mut under = hub.watch(WatchFilter {
            under: Some(Prefix::v4("10.0.0.0".parse().unwrap(), 8).unwrap()),
            ..WatchFilter::default()
        });
        let mut from_2 = hub.watch(WatchFilter {
            peer: Some(2),
            ..WatchFilter::default()
        });
        assert_eq!(hub.watchers(), 2);
        tap.decided(
            &table,
            &[
                change("10.1.0.0/16", 1),
                change("192.0.2.0/24", 2),
                change("10.2.0.0/16", 2),
            ],
        );
        let got = |w: &mut Watch| {
            let mut v = Vec::new();
            while let Ok(m) = w.rx.try_recv() {
                v.push(m.prefix.to_string());
            }
            v
        };
        assert_eq!(got(&mut under), ["10.1.0.0/16", "10.2.0.0/16"]);
        assert_eq!(got(&mut from_2), ["192.0.2.0/24", "10.2.0.0/16"]);
        // A watcher that never reads is dropped once its queue is full; the others go on.
        let many: Vec<Change> = (0..WATCH_QUEUE + 1)
            .map(|i| change(&format!("10.{}.{}.0/24", i / 256 % 256, i % 256), 1))
            .collect();
        tap.decided(&table, &many);
        assert!(under.state.dropped());
        assert!(!from_2.state.dropped());
        drop(under);
        assert_eq!(hub.watchers(), 1);
    }
}
