//! # ribshard-engine: the running pipeline
//!
//! Owns the threads and tasks of a running ribshard and the bounded channels between them;
//! the one place where the thread model is visible. Today: session I/O (tokio tasks, one per
//! neighbor, plus listeners), which drives the RFC 4271 state machine of `ribshard-fsm`,
//! negotiates capabilities, runs keepalive, hold and send-hold timers, applies TCP MD5 and
//! GTSM, enforces prefix limits, keeps each neighbor's Adj-RIB-In index, and hands every
//! received UPDATE on, undecoded but validated, through a bounded channel.
//!
//! It must never run routing work on a session task: keepalives and hold timers must not
//! wait behind route processing, so sessions only frame, validate and count.

pub mod negotiate;
pub mod pipeline;
pub mod session;
pub mod socket;

pub use negotiate::{Negotiated, PeerSettings};
pub use session::{Inbound, SessionHandle, SessionStatus, Sessions};
