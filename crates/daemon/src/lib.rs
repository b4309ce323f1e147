//! # ribshard (library part of the daemon crate)
//!
//! Owns what the `ribshard` binary is built from: the configuration file, its reload
//! (SIGHUP: what changed and what applies live) and `run`; the management API as it
//! arrives. It must never implement protocol logic that
//! belongs in the library crates (`wire`, `fsm`, and the pipeline crates).

pub mod config;
pub mod reload;
pub mod run;
