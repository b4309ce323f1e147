//! `ribshard policy test`: a chain of policies from a configuration file run against a route
//! described on the command line, offline, as the shards would run it: the term that
//! decided, and the attributes the route leaves with.

use crate::config::Config;
use ribshard_policy::{ApplyContext, Community, Member, Modified, NextHopSet, Source, Subject};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{attr, Origin, Prefix};
use std::fmt::Write;
use std::net::IpAddr;

/// The route to test, as the command line gives it.
#[derive(Clone, Debug)]
pub struct Route {
    pub prefix: String,
    pub as_path: String,
    pub communities: Vec<String>,
    pub neighbor: IpAddr,
    pub peer_as: Option<u32>,
    pub internal: bool,
    pub next_hop: Option<IpAddr>,
    pub local_preference: Option<u32>,
    pub med: Option<u32>,
    pub origin: String,
    /// For export policies reading the receivers' AS (`route-server-control`).
    pub receiver_as: Option<u32>,
}

/// Why the route or chain cannot be tested.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    #[error("--prefix: {0}")]
    Prefix(ribshard_policy::PrefixError),
    #[error("--as-path: \"{0}\" is not a list of AS numbers")]
    AsPath(String),
    #[error("--community: {0}")]
    Community(String),
    #[error("--origin: \"{0}\" is not igp, egp or incomplete")]
    Origin(String),
    #[error("{0}")]
    Chain(ribshard_policy::ChainError),
}

use ribshard_rib::attrs::NORMALIZED;

fn attributes(r: &Route, prefix: &Prefix) -> Result<(PathAttributes, Vec<u8>), TestError> {
    let asns: Vec<u32> = r
        .as_path
        .split_whitespace()
        .map(|a| a.parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| TestError::AsPath(r.as_path.clone()))?;
    let origin = match r.origin.as_str() {
        "igp" => Origin::Igp,
        "egp" => Origin::Egp,
        "incomplete" => Origin::Incomplete,
        o => return Err(TestError::Origin(o.to_string())),
    };
    let mut v = vec![
        AttrValue::Origin(origin),
        AttrValue::AsPath(AsPath::sequence(asns)),
    ];
    let nh = r.next_hop.unwrap_or(r.neighbor);
    let nh_bytes = match (prefix.family(), nh) {
        (ribshard_wire::Family::Ipv4Unicast, IpAddr::V4(a)) => {
            v.push(AttrValue::NextHop(a));
            a.octets().to_vec()
        }
        (ribshard_wire::Family::Ipv4Unicast, IpAddr::V6(a)) => a.octets().to_vec(),
        (ribshard_wire::Family::Ipv6Unicast, IpAddr::V6(a)) => a.octets().to_vec(),
        (ribshard_wire::Family::Ipv6Unicast, IpAddr::V4(a)) => a.to_ipv6_mapped().octets().to_vec(),
    };
    v.extend(r.med.map(AttrValue::Med));
    v.extend(r.local_preference.map(AttrValue::LocalPref));
    let (mut std, mut ext, mut large) = (Vec::new(), Vec::new(), Vec::new());
    for c in &r.communities {
        match Member::parse(c)
            .map_err(|e| TestError::Community(e.to_string()))?
            .value()
        {
            Some(Community::Standard(x)) => std.push(x),
            Some(Community::Extended(x)) => ext.push(x),
            Some(Community::Large(x)) => large.push(x),
            None => {
                return Err(TestError::Community(format!(
                    "\"{c}\" is a pattern: a route carries values"
                )))
            }
        }
    }
    if !std.is_empty() {
        v.push(AttrValue::Communities(std));
    }
    if !ext.is_empty() {
        v.push(AttrValue::ExtCommunities(ext));
    }
    if !large.is_empty() {
        v.push(AttrValue::LargeCommunities(large));
    }
    Ok((PathAttributes::canonical(v), nh_bytes))
}

/// What a chain did to a route (`policy test --json` prints it as it is).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub prefix: String,
    pub neighbor: IpAddr,
    pub peer_as: u32,
    pub internal: bool,
    /// The policies run, in order.
    pub chain: Vec<String>,
    pub accepted: bool,
    /// The term (or the chain's end) that decided, in words.
    pub decided_by: String,
    /// The attributes the route leaves with; none when rejected.
    pub attributes: Vec<Attribute>,
}

/// One attribute after the chain.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Attribute {
    pub name: &'static str,
    pub value: String,
    /// What it was, when the chain changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was: Option<String>,
}

impl Report {
    /// The report in words, as `policy test` prints it.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} from {} (AS{}, {}) through [{}]:",
            self.prefix,
            self.neighbor,
            self.peer_as,
            if self.internal {
                "internal"
            } else {
                "external"
            },
            self.chain.join(" ")
        );
        let _ = writeln!(
            out,
            "  {} by {}",
            if self.accepted {
                "accepted"
            } else {
                "rejected"
            },
            self.decided_by
        );
        for a in &self.attributes {
            match &a.was {
                Some(was) => {
                    let _ = writeln!(out, "  {}: {} (was {was})", a.name, a.value);
                }
                None => {
                    let _ = writeln!(out, "  {}: {}", a.name, a.value);
                }
            }
        }
        out
    }
}

/// Runs `names` (a chain, as a neighbor's `import` or `export` would list them) against
/// the route.
pub fn test(config: &Config, names: &[String], r: &Route) -> Result<Report, TestError> {
    let prefix = ribshard_policy::parse_prefix(&r.prefix).map_err(TestError::Prefix)?;
    let (attrs, nh) = attributes(r, &prefix)?;
    let mut raw = Vec::new();
    attrs.encode(&NORMALIZED, &mut raw);
    let chain = config
        .policies
        .0
        .chain(names, r.internal, config.local_as)
        .map_err(TestError::Chain)?;
    let source = Source {
        address: r.neighbor,
        peer_as: r.peer_as.unwrap_or(config.local_as),
        internal: r.internal,
    };
    let subject = Subject {
        prefix,
        attrs: &raw,
        next_hop: &nh,
        source: &source,
        receiver_as: r.receiver_as,
        rpki: Default::default(),
    };
    let v = chain.evaluate(&subject);
    let mut report = Report {
        prefix: prefix.to_string(),
        neighbor: r.neighbor,
        peer_as: source.peer_as,
        internal: r.internal,
        chain: names.to_vec(),
        accepted: v.accept,
        decided_by: chain.describe(&v.by),
        attributes: Vec::new(),
    };
    if !v.accept {
        return Ok(report);
    }
    let m = if v.trace.is_empty() {
        Modified {
            attrs: attrs.clone(),
            ..Modified::default()
        }
    } else {
        chain.apply(
            &v,
            &subject,
            attrs.clone(),
            &ApplyContext {
                own_as: config.local_as,
            },
        )
    };
    report.attributes = describe(&attrs, &m);
    Ok(report)
}

/// The route's attributes after the chain, each marked where it changed.
fn describe(before: &PathAttributes, m: &Modified) -> Vec<Attribute> {
    let a = &m.attrs;
    let path = |p: &PathAttributes| -> String {
        p.as_path()
            .map(|p| {
                p.segments
                    .iter()
                    .flat_map(|s| s.asns.iter().map(|x| x.to_string()))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let comms = |p: &PathAttributes| -> String {
        let mut v: Vec<String> = p
            .communities()
            .iter()
            .map(|c| Community::Standard(*c).to_string())
            .collect();
        if let Some(AttrValue::ExtCommunities(e)) = p.get(attr::EXTENDED_COMMUNITIES) {
            v.extend(e.iter().map(|c| Community::Extended(*c).to_string()));
        }
        v.extend(
            p.large_communities()
                .iter()
                .map(|c| Community::Large(*c).to_string()),
        );
        if v.is_empty() {
            "none".into()
        } else {
            v.join(" ")
        }
    };
    let num = |x: Option<u32>| x.map_or("none".to_string(), |v| v.to_string());
    let mut lines = Vec::new();
    let mut line = |name: &'static str, value: String, was: String| {
        let was = (value != was).then_some(was);
        lines.push(Attribute { name, value, was });
    };
    line("AS path", path(a), path(before));
    line(
        "origin",
        a.origin().map_or("none".into(), |o| o.to_string()),
        before.origin().map_or("none".into(), |o| o.to_string()),
    );
    line(
        "local-preference",
        num(a.local_pref()),
        num(before.local_pref()),
    );
    line("metric (MED)", num(a.med()), num(before.med()));
    line("communities", comms(a), comms(before));
    let nh = match m.next_hop {
        None => "unchanged".to_string(),
        Some(NextHopSet::Address(x)) => x.to_string(),
        Some(NextHopSet::OurAddress) => "self (our address on the session)".into(),
        Some(NextHopSet::PeerAddress) => "the neighbor's address".into(),
        Some(NextHopSet::Reject) => "reject".into(),
        Some(NextHopSet::Discard) => "discard".into(),
    };
    lines.push(Attribute {
        name: "next hop",
        value: nh,
        was: None,
    });
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        let text = format!(
            "{}\n{}",
            r#"
[bgp]
local-as = 65000
router-id = "192.0.2.1"
[[bgp.group]]
name = "up"
type = "external"
peer-as = 65001
import = ["in"]
[[bgp.group.neighbor]]
address = "192.0.2.9"
"#,
            r#"
[policy-options.community.tag]
members = ["65001:7"]
[[policy-options.policy-statement.in.term]]
name = "private"
from = { as-path = "private" }
then = { action = "reject" }
[[policy-options.policy-statement.in.term]]
name = "tagged"
from = { community = "tag" }
then = { local-preference = 200, as-path-prepend = 1, action = "accept" }
[policy-options.as-path]
private = ". .* [64512-65534] .*"
"#
        );
        crate::config::parse(&text, std::path::Path::new("t.toml")).unwrap()
    }

    fn route(path: &str, comms: &[&str]) -> Route {
        Route {
            prefix: "198.51.100.0/24".into(),
            as_path: path.into(),
            communities: comms.iter().map(|s| s.to_string()).collect(),
            neighbor: "192.0.2.9".parse().unwrap(),
            peer_as: Some(65001),
            internal: false,
            next_hop: None,
            local_preference: None,
            med: None,
            origin: "igp".into(),
            receiver_as: None,
        }
    }

    #[test]
    fn names_the_term_and_the_changes() {
        let c = config();
        let chain = ["in".to_string()];
        let out = test(&c, &chain, &route("65001 64512", &[])).unwrap().text();
        assert!(out.contains("rejected by policy in term private"), "{out}");
        let out = test(&c, &chain, &route("65001 13335", &["65001:7"]))
            .unwrap()
            .text();
        assert!(out.contains("accepted by policy in term tagged"), "{out}");
        assert!(out.contains("local-preference: 200 (was none)"), "{out}");
        assert!(
            out.contains("AS path: 65000 65001 13335 (was 65001 13335)"),
            "{out}"
        );
        // Falling off the end of an external chain: RFC 8212.
        let out = test(&c, &chain, &route("65001 13335", &[])).unwrap().text();
        assert!(
            out.contains("rejected by end of chain [in]: rejected by default"),
            "{out}"
        );
        assert!(matches!(
            test(&c, &["nope".to_string()], &route("1", &[])),
            Err(TestError::Chain(_))
        ));
        assert!(matches!(
            test(&c, &chain, &route("one two", &[])),
            Err(TestError::AsPath(_))
        ));
    }
}
