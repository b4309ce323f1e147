//! Routes and policies for the policy tests: configurations as the file writes them, routes
//! as the shards hand them to policy (normalized attribute bytes).
#![allow(dead_code)]

use ribshard_policy::{
    compile, ApplyContext, Chain, Modified, Policies, PolicyError, PolicyWarning, Source, Subject,
};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{parse_attributes_only, Origin, Prefix, SessionParams};
use std::net::IpAddr;

/// Attribute bytes as the shards keep them: 4-octet AS numbers.
pub const NORMALIZED: SessionParams = SessionParams {
    four_octet_as: true,
    extended_message: true,
    add_path: [false; 2],
    external: false,
    mrt_rib: true,
    live: false,
};

/// `[policy-options]` from TOML text (the table's contents), with prefix-list files read
/// from `files` by name.
/// Policies, errors and warnings of a configuration.
pub type Checked = (
    Policies,
    Vec<(String, PolicyError)>,
    Vec<(String, PolicyWarning)>,
);

pub fn try_compile(text: &str, files: &[(&str, &str)]) -> Checked {
    let opts: ribshard_policy::PolicyOptions = toml::from_str(text).expect("TOML of the test");
    let read = |p: &std::path::Path| -> std::io::Result<String> {
        files
            .iter()
            .find(|(n, _)| std::path::Path::new(n) == p)
            .map(|(_, t)| t.to_string())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
    };
    let c = compile(&opts, &read);
    (c.policies, c.errors, c.warnings)
}

pub fn policies(text: &str) -> Policies {
    let (p, errors, _) = try_compile(text, &[]);
    assert!(errors.is_empty(), "errors: {errors:?}");
    p
}

/// A route for a policy to look at.
#[derive(Clone, Debug)]
pub struct Route {
    pub prefix: Prefix,
    pub as_path: Vec<u32>,
    pub communities: Vec<u32>,
    pub large: Vec<[u32; 3]>,
    pub ext: Vec<[u8; 8]>,
    pub local_pref: Option<u32>,
    pub med: Option<u32>,
    pub origin: Origin,
    pub next_hop: IpAddr,
    pub source: Source,
}

pub fn pfx(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap();
    let len: u8 = l.parse().unwrap();
    match a.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v4) => Prefix::v4(v4, len).unwrap(),
        IpAddr::V6(v6) => Prefix::v6(v6, len).unwrap(),
    }
}

pub fn std_comm(s: &str) -> u32 {
    let (a, b) = s.split_once(':').unwrap();
    a.parse::<u32>().unwrap() << 16 | b.parse::<u32>().unwrap()
}

impl Route {
    pub fn new(prefix: &str) -> Route {
        Route {
            prefix: pfx(prefix),
            as_path: vec![65001, 13335],
            communities: Vec::new(),
            large: Vec::new(),
            ext: Vec::new(),
            local_pref: None,
            med: None,
            origin: Origin::Igp,
            next_hop: "192.0.2.1".parse().unwrap(),
            source: Source {
                address: "198.51.100.1".parse().unwrap(),
                peer_as: 65001,
                internal: false,
            },
        }
    }

    pub fn path(mut self, p: &[u32]) -> Route {
        self.as_path = p.to_vec();
        self
    }

    pub fn comm(mut self, c: &[&str]) -> Route {
        self.communities = c.iter().map(|s| std_comm(s)).collect();
        self
    }

    pub fn attributes(&self) -> PathAttributes {
        let mut v = vec![AttrValue::Origin(self.origin)];
        v.push(AttrValue::AsPath(AsPath::sequence(
            self.as_path.iter().copied(),
        )));
        if let IpAddr::V4(a) = self.next_hop {
            v.push(AttrValue::NextHop(a));
        }
        v.extend(self.med.map(AttrValue::Med));
        v.extend(self.local_pref.map(AttrValue::LocalPref));
        if !self.communities.is_empty() {
            v.push(AttrValue::Communities(self.communities.clone()));
        }
        if !self.ext.is_empty() {
            v.push(AttrValue::ExtCommunities(self.ext.clone()));
        }
        if !self.large.is_empty() {
            v.push(AttrValue::LargeCommunities(self.large.clone()));
        }
        PathAttributes::canonical(v)
    }

    pub fn bytes(&self) -> (Vec<u8>, Vec<u8>) {
        let mut raw = Vec::new();
        self.attributes().encode(&NORMALIZED, &mut raw);
        let nh = match self.next_hop {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        (raw, nh)
    }
}

/// What a chain made of a route: accepted with its attributes, or rejected.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub accept: bool,
    pub modified: Option<Modified>,
    pub decided_by: String,
}

pub fn run_chain(chain: &Chain, r: &Route, receiver_as: Option<u32>) -> Outcome {
    let (raw, nh) = r.bytes();
    let s = Subject {
        prefix: r.prefix.masked(),
        attrs: &raw,
        next_hop: &nh,
        source: &r.source,
        receiver_as,
        rpki: Default::default(),
    };
    let v = chain.evaluate(&s);
    let modified = (v.accept && !v.trace.is_empty()).then(|| {
        let attrs = PathAttributes::from_view(
            &parse_attributes_only(&raw, &NORMALIZED).unwrap().attrs,
            &NORMALIZED,
        );
        chain.apply(&v, &s, attrs, &ApplyContext { own_as: 65000 })
    });
    Outcome {
        accept: v.accept,
        modified,
        decided_by: chain.describe(&v.by),
    }
}

/// Runs these policies (a chain; falling off its end rejects, as on an external session).
pub fn run(p: &Policies, names: &[&str], r: &Route) -> Outcome {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let chain = p.chain(&names, false, 65000).expect("chain");
    run_chain(&chain, r, None)
}

pub fn accepts(p: &Policies, names: &[&str], r: &Route) -> bool {
    run(p, names, r).accept
}

/// The attributes an accepted route leaves with (unchanged ones as they came).
pub fn result(p: &Policies, names: &[&str], r: &Route) -> Option<PathAttributes> {
    let o = run(p, names, r);
    o.accept.then(|| {
        o.modified
            .map(|m| m.attrs)
            .unwrap_or_else(|| r.attributes())
    })
}
