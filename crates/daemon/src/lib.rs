//! # ribshard (library part of the daemon crate)
//!
//! Owns what the `ribshard` binary is built from: the configuration file and its lowering
//! into engine settings ([`config`]), its reload (SIGHUP and `configure reload`: what
//! changed and what applies live, [`reload`]), the running daemon's shared state
//! ([`state`]), the management API's answers ([`backend`]), `run`, and the command line's
//! client side ([`cli`]: `show`, `clear`, `configure`), `ribshard advise` ([`advise`]:
//! reads the machine and the API, changes nothing) and `ribshard policy test`
//! ([`policy_test`]: runs a file's policies offline). It must never implement protocol
//! logic that belongs in the library crates (`wire`, `fsm`, and the pipeline crates), nor
//! serve HTTP itself (`ribshard-mgmt` does).

pub mod advise;
pub mod backend;
pub mod cli;
pub mod config;
pub mod forwarding;
pub mod inject;
pub mod logging;
pub mod manual;
pub mod originate;
pub mod policy_test;
pub mod reload;
pub mod restart;
pub mod rpki;
pub mod run;
pub mod state;
pub mod updates_log;
pub mod watch;
