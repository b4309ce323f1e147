//! `[policy-options]` as the configuration file writes it, in Junos's words and hierarchy.
//! Every key is optional here; [`crate::compile`] checks them and names what is wrong.
//!
//! ```toml
//! [policy-options.prefix-list.customers]
//! prefixes = ["10.0.0.0/10"]                 # or: file = "/etc/ribshard/customers.txt"
//! [policy-options.community.tagged]
//! members = ["65011:1"]
//! [policy-options.as-path]
//! too-long = ".{50,}"
//! [[policy-options.policy-statement.from-upstream.term]]
//! name = "tagged"
//! from = { prefix-list-filter = { list = "customers", match = "orlonger" }, community = ["tagged"] }
//! then = { local-preference = 200, action = "accept" }
//! ```

use serde::Deserialize;
use std::collections::BTreeMap;

/// `[policy-options]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyOptions {
    pub prefix_list: Option<BTreeMap<String, PrefixListDef>>,
    pub community: Option<BTreeMap<String, CommunityDef>>,
    /// Named AS path regular expressions.
    pub as_path: Option<BTreeMap<String, String>>,
    pub as_path_group: Option<BTreeMap<String, AsPathGroupDef>>,
    pub policy_statement: Option<BTreeMap<String, StatementDef>>,
    /// The built-in `route-server-control` policy (IXP route server control communities).
    pub route_server_control: Option<RouteServerControlDef>,
}

/// `prefix-list NAME`: prefixes written here, or one a line in a file (as bgpq4 writes them).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PrefixListDef {
    pub prefixes: Option<Vec<String>>,
    pub file: Option<String>,
}

/// `community NAME members [...]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CommunityDef {
    pub members: Option<Vec<String>>,
}

/// `as-path-group NAME { as-path A "..."; }`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AsPathGroupDef {
    pub as_path: Option<BTreeMap<String, String>>,
}

/// `[policy-options.route-server-control]`: the AS the control communities name.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RouteServerControlDef {
    /// The route server's AS in the control communities. Default: `bgp.local-as`.
    pub asn: Option<u32>,
}

/// `policy-statement NAME`: its terms, and optionally a last unnamed one (`from` / `then`
/// directly under the statement, as Junos allows).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StatementDef {
    pub term: Option<Vec<TermDef>>,
    pub from: Option<FromDef>,
    pub then: Option<ThenDef>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TermDef {
    pub name: Option<String>,
    pub from: Option<FromDef>,
    pub then: Option<ThenDef>,
}

/// One or several, as TOML lets both be written.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(untagged)]
pub enum OneOrMore<T> {
    One(T),
    More(Vec<T>),
}

impl<T> OneOrMore<T> {
    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMore::One(t) => std::slice::from_ref(t),
            OneOrMore::More(v) => v,
        }
    }
}

/// `prefix-list-filter NAME MATCH`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PrefixListFilterDef {
    pub list: String,
    /// `exact`, `orlonger`, `longer`, `upto /N`, `prefix-length-range /A-/B`.
    #[serde(rename = "match")]
    pub match_type: String,
}

/// `route-filter PREFIX MATCH`, as a table or as one string `"10.0.0.0/8 orlonger"`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(untagged)]
pub enum RouteFilterDef {
    Text(String),
    Table {
        prefix: String,
        #[serde(rename = "match")]
        match_type: String,
    },
}

/// `as-path-calc-length`: the AS path length (RFC 4271 counting: an AS_SET is one).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AsPathLengthDef {
    pub count: u32,
    /// `equal`, `orhigher` or `orlower`.
    #[serde(rename = "match")]
    pub match_type: String,
}

/// A term's `from`: every condition written must hold; a list of names matches if any does.
/// `prefix-list`, `prefix-list-filter` and `route-filter` together are one condition that
/// holds if any of them does (as Junos evaluates route lists).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FromDef {
    pub prefix_list: Option<OneOrMore<String>>,
    pub prefix_list_filter: Option<OneOrMore<PrefixListFilterDef>>,
    pub route_filter: Option<Vec<RouteFilterDef>>,
    /// `inet` or `inet6`.
    pub family: Option<String>,
    /// `bgp` (the only protocol whose routes ribshard has).
    pub protocol: Option<OneOrMore<String>>,
    /// The address of the neighbor the route was learned from.
    pub neighbor: Option<OneOrMore<String>>,
    /// The AS of the neighbor the route was learned from.
    pub peer_as: Option<OneOrMore<u32>>,
    pub community: Option<OneOrMore<String>>,
    pub as_path: Option<OneOrMore<String>>,
    pub as_path_group: Option<OneOrMore<String>>,
    pub as_path_calc_length: Option<AsPathLengthDef>,
    /// `igp`, `egp` or `incomplete`.
    pub origin: Option<String>,
    pub next_hop: Option<OneOrMore<String>>,
    pub local_preference: Option<u32>,
    pub metric: Option<u32>,
    /// `internal` or `external`: learned over iBGP or eBGP.
    pub route_type: Option<String>,
}

/// A number set, or changed by an amount.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(untagged)]
pub enum NumberAction {
    Set(u32),
    Change(ChangeDef),
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ChangeDef {
    pub add: Option<u32>,
    pub subtract: Option<u32>,
}

/// `as-path-prepend`: these AS numbers, or our own AS this many times.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(untagged)]
pub enum PrependDef {
    Own(u32),
    Asns(Vec<u32>),
}

/// `as-path-expand last-as count N`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ExpandDef {
    pub last_as: u32,
}

/// A term's `then`: actions in Junos's order of application, and at most one of `action`
/// (accept, reject, next-term, next-policy).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ThenDef {
    pub action: Option<String>,
    pub default_action: Option<String>,
    pub local_preference: Option<NumberAction>,
    pub metric: Option<NumberAction>,
    pub community_set: Option<OneOrMore<String>>,
    pub community_add: Option<OneOrMore<String>>,
    pub community_delete: Option<OneOrMore<String>>,
    pub as_path_prepend: Option<PrependDef>,
    pub as_path_expand: Option<ExpandDef>,
    /// `self`, `peer-address`, `reject`, `discard` or an address.
    pub next_hop: Option<String>,
    /// `igp`, `egp` or `incomplete`.
    pub origin: Option<String>,
}
