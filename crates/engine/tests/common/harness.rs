//! A pipeline with sessions in front of it, as the socket tests run them, and its shutdown.
#![allow(dead_code)]

use ribshard_adjout::WriteQueueLimits;
use ribshard_engine::pipeline::{Pipeline, PipelineConfig};
use ribshard_engine::{PeerSettings, Sessions};
use ribshard_rib::Options;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Starts a pipeline of `shards` x `update_threads` and the sessions of `peers` on `listen`.
pub async fn start(
    shards: usize,
    update_threads: usize,
    write_queue: WriteQueueLimits,
    peers: Vec<PeerSettings>,
    listen: SocketAddr,
) -> (Arc<Pipeline>, Sessions) {
    let pipeline = Pipeline::start(PipelineConfig {
        shards,
        update_threads,
        options: Options::default(),
        write_queue,
    });
    let sessions = Sessions::start_with(peers, &[listen], None, Some(pipeline.clone()))
        .await
        .unwrap();
    (pipeline, sessions)
}

/// Ends the sessions (Cease), then the pipeline's threads.
pub async fn stop(pipeline: Arc<Pipeline>, sessions: Sessions) {
    sessions
        .shutdown("test over", Duration::from_millis(500))
        .await;
    tokio::task::spawn_blocking(move || pipeline.stop())
        .await
        .unwrap();
}
