//! The RTR client plugged into the pipeline: each snapshot it publishes goes to every
//! shard as an input (`Broadcast::Rpki`), in order with everything else handed on.

use crate::config::rpki::RpkiConfig;
use crate::state::Daemon;
use ribshard_rpki::client::Client;
use std::sync::Arc;
use tracing::{info, warn};

impl Daemon {
    /// Starts the RTR client for `config`, replacing the one running (`None`: none runs;
    /// the shards keep the last snapshot handed to them, as after a cache failure, until
    /// a new client's first data replaces it).
    pub fn set_rpki(&self, config: Option<&RpkiConfig>) {
        let mut slot = self.rpki.lock().unwrap_or_else(|e| e.into_inner());
        // The old client ends first (its thread is joined), so no snapshot of it can
        // follow the new one's; the new one starts from what the shards hold.
        let last = slot
            .take()
            .map(|c| {
                let s = c.status.lock().unwrap_or_else(|e| e.into_inner());
                s.current.clone()
            })
            .unwrap_or_default();
        let Some(config) = config else {
            return;
        };
        // The client's thread drives its own runtime, where handing on (which waits for
        // room in the shards' queues) may not block: one thread for the process's life
        // hands the snapshots on, in order, those of a client replaced by a reload
        // included, so an old client's last snapshot can never follow a new one's first.
        let pipeline = self.pipeline.clone();
        let inlet = self.rpki_inlet.get_or_init(move || {
            let (tx, rx) = std::sync::mpsc::channel::<ribshard_rpki::Snapshot>();
            std::thread::Builder::new()
                .name("rs-rpki-in".into())
                .spawn(move || {
                    for snap in rx {
                        pipeline.deliver_blocking(pipeline.rpki_changed(Arc::new(snap)));
                    }
                })
                .map_err(|e| warn!(error = %e, "rpki: the RTR client did not start"))
                .ok()
                .map(|_| tx)
        });
        let Some(tx) = inlet.clone() else {
            return;
        };
        let publish = Box::new(move |snap: ribshard_rpki::Snapshot| {
            let (v4, v6) = snap.vrps.counts();
            info!(
                version = snap.version,
                vrps_v4 = v4,
                vrps_v6 = v6,
                aspas = snap.aspas.len(),
                changed_roa_prefixes = snap.changed.len(),
                "rpki: new data from the cache"
            );
            let _ = tx.send(snap);
        });
        match Client::start(config.clone(), publish, last) {
            Ok(c) => *slot = Some(c),
            Err(e) => warn!(error = %e, "rpki: the RTR client did not start"),
        }
    }
}
