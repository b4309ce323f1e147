//! # ribshard-policy: routing policy
//!
//! Owns the policy language of `[policy-options]` (Junos's `prefix-list`, `community`,
//! `as-path`, `as-path-group` and `policy-statement` with terms), its compiled form — prefix
//! lists as tries, AS path expressions as automata over AS numbers, communities parsed once —
//! and the evaluation of a chain of policies against a route. Shards evaluate import chains
//! per path and export chains per update group; a compiled policy is one immutable value
//! they share.
//!
//! It must never do I/O (prefix-list files are read by the caller's function), keep routing
//! state, allocate while evaluating a route that no action changes, or panic on any input:
//! indexing, `unwrap` and `expect` are denied here.

#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

pub mod aspath;
pub mod community;
pub mod compile;
pub mod definition;
pub mod eval;
pub mod prefix;
pub mod raw;

pub use aspath::{AsPathRegex, RegexError};
pub use community::{Community, CommunitySet, Member};
pub use compile::{compile, is_builtin, Compiled, Policies, PolicyError, PolicyWarning};
pub use definition::PolicyOptions;
pub use eval::{
    prepend_as, ApplyContext, Chain, Decided, Item, Modified, NextHopSet, ReadsRpki, RpkiStates,
    SetMemo, Source, Statement, Subject, Trace, Verdict,
};
pub use prefix::{parse_prefix, Key, MatchType, PrefixError, PrefixSet, PrefixTrie};
pub use raw::RawApplied;

use std::sync::Arc;

/// Why a chain cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("policy \"{0}\" is not defined under [policy-options.policy-statement] (built in: accept, reject, route-server-control)")]
    Undefined(String),
}

/// Where a chain is used: import policies see where routes come from, export policies
/// where they go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Import,
    Export,
}

impl Policies {
    /// The chain of these policies, in order; `default_accept`: what falling off its end
    /// does (Junos's BGP default accepts; RFC 8212 refuses on external sessions), and
    /// `own_as`: the route server AS of `route-server-control` unless configured.
    pub fn chain(
        &self,
        names: &[String],
        default_accept: bool,
        own_as: u32,
    ) -> Result<Chain, ChainError> {
        let mut items = Vec::new();
        for n in names {
            let item = match n.as_str() {
                "accept" => Item::Accept,
                "reject" => Item::Reject,
                "route-server-control" => Item::RouteServerControl {
                    asn: self.route_server_asn().unwrap_or(own_as),
                },
                _ => Item::Statement(Arc::clone(
                    self.statement(n)
                        .ok_or_else(|| ChainError::Undefined(n.clone()))?,
                )),
            };
            items.push((n.clone(), item));
        }
        Ok(Chain::new(items, default_accept))
    }
}
