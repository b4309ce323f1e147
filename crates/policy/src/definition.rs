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

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RouteFilterDef {
    Text(String),
    /// `{ prefix, match }`.
    Table {
        prefix: String,
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
    /// Route origin validation state (RFC 6811): `valid`, `invalid` or `unknown` (no ROA
    /// covers the route). Import policies only.
    pub validation_state: Option<OneOrMore<String>>,
    /// AS path verification with ASPA: `valid`, `invalid` or `unknown`. Import policies only.
    pub aspa_state: Option<OneOrMore<String>>,
}

/// A number set, or changed by an amount.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

// The values that may be written two ways. serde's untagged enums answer a wrong type with
// "data did not match any variant of untagged enum ..."; these say what was expected, in
// words, and pass on the inner value's own error (a list member of the wrong type, say).

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMore<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMore<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("one value or a list of them")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(a)).map(OneOrMore::More)
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(a)).map(OneOrMore::One)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                T::deserialize(v.into_deserializer()).map(OneOrMore::One)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                T::deserialize(v.into_deserializer()).map(OneOrMore::One)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                T::deserialize(v.into_deserializer()).map(OneOrMore::One)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                T::deserialize(v.into_deserializer()).map(OneOrMore::One)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                T::deserialize(v.into_deserializer()).map(OneOrMore::One)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<'de> Deserialize<'de> for RouteFilterDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            prefix: String,
            #[serde(rename = "match")]
            match_type: String,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RouteFilterDef;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "\"PREFIX MATCH\" (as \"10.0.0.0/8 orlonger\") or a table { prefix, match }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RouteFilterDef::Text(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                let t = Table::deserialize(MapAccessDeserializer::new(a))?;
                Ok(RouteFilterDef::Table {
                    prefix: t.prefix,
                    match_type: t.match_type,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for NumberAction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NumberAction;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a number from 0 to 4294967295 (written without quotes), \
                     or a table { add = N } or { subtract = N }",
                )
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u32::try_from(v)
                    .map(NumberAction::Set)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                u32::try_from(v)
                    .map(NumberAction::Set)
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                ChangeDef::deserialize(MapAccessDeserializer::new(a)).map(NumberAction::Change)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for PrependDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PrependDef;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a count (our own AS that many times) or a list of AS numbers, \
                     written without quotes",
                )
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u32::try_from(v)
                    .map(PrependDef::Own)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                u32::try_from(v)
                    .map(PrependDef::Own)
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(a)).map(PrependDef::Asns)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct T {
        then: Option<ThenDef>,
        from: Option<FromDef>,
    }

    fn err(text: &str) -> String {
        toml::from_str::<T>(text).unwrap_err().message().to_string()
    }

    #[test]
    fn values_written_two_ways_say_what_was_expected() {
        let e = err("then = { local-preference = \"80\" }");
        assert!(
            e.contains("invalid type: string \"80\", expected a number from 0 to 4294967295"),
            "{e}"
        );
        let e = err("then = { metric = -1 }");
        assert!(e.contains("invalid value: integer `-1`"), "{e}");
        let e = err("then = { as-path-prepend = \"65000\" }");
        assert!(e.contains("expected a count (our own AS"), "{e}");
        let e = err("from = { peer-as = [65001, \"x\"] }");
        assert!(
            e.contains("invalid type: string \"x\", expected u32"),
            "{e}"
        );
        let e = err("from = { route-filter = [7] }");
        assert!(e.contains("expected \"PREFIX MATCH\""), "{e}");
        let ok: T = toml::from_str(
            "then = { local-preference = { add = 10 }, as-path-prepend = [1, 2] }\n\
             from = { community = \"a\", peer-as = 1, route-filter = [\"10.0.0.0/8 exact\", \
             { prefix = \"10.0.0.0/8\", match = \"exact\" }] }",
        )
        .unwrap();
        let then = ok.then.unwrap();
        assert!(matches!(
            then.local_preference,
            Some(NumberAction::Change(_))
        ));
        assert_eq!(then.as_path_prepend, Some(PrependDef::Asns(vec![1, 2])));
        let from = ok.from.unwrap();
        assert_eq!(from.peer_as, Some(OneOrMore::One(1)));
        assert_eq!(from.route_filter.map(|r| r.len()), Some(2));
    }
}
