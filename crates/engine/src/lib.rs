//! # ribshard-engine: the running pipeline
//!
//! Owns the threads and tasks of a running ribshard and the bounded channels between them;
//! the one place where the thread model is visible: session I/O ([`session`]: tokio tasks, one
//! per neighbor, plus listeners), which drives the RFC 4271 state machine of `ribshard-fsm`,
//! negotiates capabilities, runs keepalive, hold and send-hold timers, applies TCP MD5 and
//! GTSM, enforces prefix limits, parses and interns received routes and batches them per shard;
//! and the pipeline ([`pipeline`]): shard threads and update threads, whose numbers can change
//! while sessions stay up (re-sharding). Sessions are added and removed while running. It
//! answers the management API's questions (counts, walks of the routes a chunk at a time,
//! queues) between routing work, and measures itself ([`telemetry`]: work per thread,
//! queues, convergence latencies).
//!
//! It must never run routing work on a session task (keepalives and hold timers must not wait
//! behind route processing: sessions only frame, parse, intern and batch), never block an
//! update thread on a shard (the one direction that would close a cycle of full queues), and
//! never let a question (`show route`) delay routing by more than a chunk now and then.

pub mod local;
pub mod memory;
pub mod negotiate;
pub mod pipeline;
pub mod session;
pub mod socket;
pub mod telemetry;

pub use negotiate::{Negotiated, PeerSettings};
pub use session::{
    needs_new_session, DownReason, Inbound, InputCounts, Opened, SessionHandle, SessionStatus,
    Sessions, SettingsApplied,
};
