//! # ribshard-mgmt: the management API
//!
//! Owns what operators and tools use to see and steer a running ribshard: the API's request
//! and reply types ([`api`], stable JSON documented in docs/API.md), the HTTP/1.1 server on a
//! Unix socket and TCP ([`server`], answering from a [`server::Backend`] the daemon
//! implements), its client ([`client`], for `ribshard show` / `clear` / `configure`), the
//! Prometheus exposition ([`metrics`]), the per-thread CPU sampler ([`procfs`]) and the
//! birdwatcher API a looking glass (Alice-LG) reads ([`birdwatcher`]).
//!
//! It must never reach into routing state itself (the backend asks the pipeline, which
//! answers between its routing work), hold a whole table in memory to answer (routes stream
//! as JSON lines a chunk at a time), or block a tokio worker.

pub mod api;
pub mod birdwatcher;
pub mod client;
pub mod metrics;
pub mod procfs;
pub mod server;
pub mod time;
pub mod validation;

pub use server::{ApiError, Backend, ServerConfig};
