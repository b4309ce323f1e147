//! From `[policy-options]` as written ([`crate::definition`]) to compiled policies: prefix
//! lists as tries, AS path expressions as automata, communities parsed, every name
//! resolved. Each error and warning names the key it is about, as
//! `policy-options.policy-statement.NAME.term[0].from.community[1]`.

use crate::aspath::{AsPathRegex, RegexError};
use crate::community::{CommunityError, CommunitySet, Member};
use crate::definition::{
    FromDef, NumberAction, OneOrMore, PolicyOptions, PrependDef, RouteFilterDef, StatementDef,
    ThenDef,
};
use crate::eval::{
    Cmp, Cond, Flow, Modify, NextHopSet, NumOp, PrefixCond, ReadsRpki, Statement, Term, Then,
};
use crate::prefix::{parse_prefix, Key, MatchType, PrefixError, PrefixSet};
use ribshard_rpki::{AspaState, Validity};
use ribshard_wire::{Family, Origin};
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

/// What is wrong with a policy setting.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("prefix-list \"{0}\" is not defined under [policy-options.prefix-list]")]
    UndefinedPrefixList(String),
    #[error("community \"{0}\" is not defined under [policy-options.community]")]
    UndefinedCommunity(String),
    #[error("as-path \"{0}\" is not defined under [policy-options.as-path]")]
    UndefinedAsPath(String),
    #[error("as-path-group \"{0}\" is not defined under [policy-options.as-path-group]")]
    UndefinedAsPathGroup(String),
    #[error("policy \"{0}\" is not defined under [policy-options.policy-statement] (built in: accept, reject, route-server-control)")]
    UndefinedPolicy(String),
    #[error("{0}")]
    Prefix(#[from] PrefixError),
    #[error("{0}")]
    Community(#[from] CommunityError),
    #[error("\"{source_text}\": {error}")]
    Regex {
        source_text: String,
        error: RegexError,
    },
    #[error("{value}: {why}")]
    Invalid { value: String, why: String },
    #[error("needs `prefixes` or `file`")]
    EmptyPrefixList,
    #[error("has both `prefixes` and `file`: give one")]
    PrefixesAndFile,
    #[error("cannot read {path}: {error}")]
    FileRead { path: String, error: String },
    #[error("{path}:{line}: {error}")]
    FileLine {
        path: String,
        line: usize,
        error: PrefixError,
    },
    #[error("community \"{0}\" has wildcard or regular expression members: only exact values can be added or set")]
    NotAddable(String),
    #[error("term \"{0}\" is defined twice in this policy-statement")]
    DuplicateTerm(String),
    #[error("this term can never match: {0}")]
    NeverMatches(String),
    #[error("has no members")]
    NoMembers,
}

/// What loads but will not do what it seems to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyWarning {
    #[error("prefix-list \"{0}\" is empty: a term naming only it matches nothing")]
    EmptyPrefixList(String),
    #[error("term \"{term}\" is never reached: term \"{by}\" before it {action}s every route")]
    Unreachable {
        term: String,
        by: String,
        action: String,
    },
    #[error("the term has no `then` action: it only changes nothing and goes on to the next term")]
    NoAction,
}

/// Every policy of a configuration, compiled; chains are made from it by name.
#[derive(Clone, Debug, Default)]
pub struct Policies {
    pub(crate) statements: HashMap<String, Arc<Statement>>,
    /// The AS of `route-server-control`'s communities, when configured.
    pub(crate) rs_asn: Option<u32>,
}

/// A compiled configuration's policies, or what is wrong with them.
pub struct Compiled {
    pub policies: Policies,
    pub errors: Vec<(String, PolicyError)>,
    pub warnings: Vec<(String, PolicyWarning)>,
}

/// Reads a prefix list's file; given by the caller, so this crate does no I/O.
pub type ReadFile<'a> = &'a dyn Fn(&Path) -> std::io::Result<String>;

struct Ctx<'a> {
    errors: Vec<(String, PolicyError)>,
    warnings: Vec<(String, PolicyWarning)>,
    prefix_lists: BTreeMap<String, (Arc<PrefixSet<()>>, u64)>,
    communities: BTreeMap<String, (Arc<CommunitySet>, u64)>,
    as_paths: BTreeMap<String, (Arc<AsPathRegex>, u64)>,
    groups: BTreeMap<String, (Vec<Arc<AsPathRegex>>, u64)>,
    read: ReadFile<'a>,
}

fn hash_of(v: &impl Hash) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

const BASE: &str = "policy-options";

/// Compiles `[policy-options]`.
pub fn compile(opts: &PolicyOptions, read: ReadFile<'_>) -> Compiled {
    let mut cx = Ctx {
        errors: Vec::new(),
        warnings: Vec::new(),
        prefix_lists: BTreeMap::new(),
        communities: BTreeMap::new(),
        as_paths: BTreeMap::new(),
        groups: BTreeMap::new(),
        read,
    };
    for (name, def) in opts.prefix_list.iter().flatten() {
        let key = format!("{BASE}.prefix-list.{name}");
        let before = cx.errors.len();
        if let Some(set) = cx.prefix_list(&key, def) {
            if set.0.is_empty() && cx.errors.len() == before {
                cx.warnings
                    .push((key, PolicyWarning::EmptyPrefixList(name.clone())));
            }
            cx.prefix_lists.insert(name.clone(), set);
        }
    }
    for (name, def) in opts.community.iter().flatten() {
        let key = format!("{BASE}.community.{name}");
        let list = def.members.as_deref().unwrap_or(&[]);
        if list.is_empty() {
            cx.errors
                .push((format!("{key}.members"), PolicyError::NoMembers));
            continue;
        }
        let mut members = Vec::new();
        for (i, m) in list.iter().enumerate() {
            match Member::parse(m) {
                Ok(m) => members.push(m),
                Err(e) => cx.errors.push((format!("{key}.members[{i}]"), e.into())),
            }
        }
        let set = CommunitySet {
            name: name.clone(),
            members,
        };
        cx.communities
            .insert(name.clone(), (Arc::new(set), hash_of(&(name, def))));
    }
    for (name, text) in opts.as_path.iter().flatten() {
        match AsPathRegex::new(text) {
            Ok(r) => {
                cx.as_paths
                    .insert(name.clone(), (Arc::new(r), hash_of(&(name, text))));
            }
            Err(error) => cx.errors.push((
                format!("{BASE}.as-path.{name}"),
                PolicyError::Regex {
                    source_text: text.clone(),
                    error,
                },
            )),
        }
    }
    for (name, def) in opts.as_path_group.iter().flatten() {
        let mut list = Vec::new();
        for (member, text) in def.as_path.iter().flatten() {
            match AsPathRegex::new(text) {
                Ok(r) => list.push(Arc::new(r)),
                Err(error) => cx.errors.push((
                    format!("{BASE}.as-path-group.{name}.as-path.{member}"),
                    PolicyError::Regex {
                        source_text: text.clone(),
                        error,
                    },
                )),
            }
        }
        if def.as_path.as_ref().is_none_or(|m| m.is_empty()) {
            cx.errors.push((
                format!("{BASE}.as-path-group.{name}.as-path"),
                PolicyError::NoMembers,
            ));
        }
        cx.groups
            .insert(name.clone(), (list, hash_of(&(name, def))));
    }
    let mut statements = HashMap::new();
    for (name, def) in opts.policy_statement.iter().flatten() {
        let key = format!("{BASE}.policy-statement.{name}");
        if ["accept", "reject", "route-server-control"].contains(&name.as_str()) {
            cx.errors.push((
                key,
                PolicyError::Invalid {
                    value: name.clone(),
                    why: "is the name of a built-in policy".into(),
                },
            ));
            continue;
        }
        let s = cx.statement(&key, name, def);
        statements.insert(name.clone(), Arc::new(s));
    }
    Compiled {
        policies: Policies {
            statements,
            rs_asn: opts.route_server_control.as_ref().and_then(|r| r.asn),
        },
        errors: cx.errors,
        warnings: cx.warnings,
    }
}

fn names(v: &Option<OneOrMore<String>>) -> impl Iterator<Item = (usize, &String)> {
    v.iter().flat_map(|o| o.as_slice().iter().enumerate())
}

impl Ctx<'_> {
    fn prefix_list(
        &mut self,
        key: &str,
        def: &crate::definition::PrefixListDef,
    ) -> Option<(Arc<PrefixSet<()>>, u64)> {
        let mut set: PrefixSet<()> = PrefixSet::default();
        let mut h = std::hash::DefaultHasher::new();
        def.hash(&mut h);
        match (&def.prefixes, &def.file) {
            (Some(_), Some(_)) => {
                self.errors
                    .push((key.to_string(), PolicyError::PrefixesAndFile));
                return None;
            }
            (None, None) => {
                self.errors
                    .push((key.to_string(), PolicyError::EmptyPrefixList));
                return None;
            }
            (Some(list), None) => {
                for (i, t) in list.iter().enumerate() {
                    match parse_prefix(t) {
                        Ok(p) => {
                            set.trie_mut(p.family()).entry(Key::of(&p), || ());
                        }
                        Err(e) => self.errors.push((format!("{key}.prefixes[{i}]"), e.into())),
                    }
                }
            }
            (None, Some(file)) => {
                let text = match (self.read)(Path::new(file)) {
                    Ok(t) => t,
                    Err(e) => {
                        self.errors.push((
                            format!("{key}.file"),
                            PolicyError::FileRead {
                                path: file.clone(),
                                error: e.to_string(),
                            },
                        ));
                        return None;
                    }
                };
                text.hash(&mut h);
                let mut bad = 0;
                for (n, line) in text.lines().enumerate() {
                    // One prefix a line; `#` comments and blank lines; a trailing `;` as in
                    // Junos configuration text is allowed.
                    let l = line
                        .split('#')
                        .next()
                        .unwrap_or("")
                        .trim()
                        .trim_end_matches(';');
                    if l.is_empty() {
                        continue;
                    }
                    match parse_prefix(l) {
                        Ok(p) => {
                            set.trie_mut(p.family()).entry(Key::of(&p), || ());
                        }
                        Err(error) => {
                            bad += 1;
                            if bad <= 5 {
                                self.errors.push((
                                    format!("{key}.file"),
                                    PolicyError::FileLine {
                                        path: file.clone(),
                                        line: n + 1,
                                        error,
                                    },
                                ));
                            }
                        }
                    }
                }
                if bad > 5 {
                    self.errors.push((
                        format!("{key}.file"),
                        PolicyError::Invalid {
                            value: file.clone(),
                            why: format!("{} more lines are not prefixes", bad - 5),
                        },
                    ));
                }
            }
        }
        set.finish();
        Some((Arc::new(set), h.finish()))
    }

    fn statement(&mut self, key: &str, name: &str, def: &StatementDef) -> Statement {
        let mut h = std::hash::DefaultHasher::new();
        name.hash(&mut h);
        def.hash(&mut h);
        let mut terms = Vec::new();
        let mut seen: HashMap<String, ()> = HashMap::new();
        let mut always: Option<(String, Flow)> = None;
        let mut defs: Vec<(String, String, Option<&FromDef>, Option<&ThenDef>)> = def
            .term
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| {
                (
                    format!("{key}.term[{i}]"),
                    t.name.clone().unwrap_or_else(|| format!("{}", i + 1)),
                    t.from.as_ref(),
                    t.then.as_ref(),
                )
            })
            .collect();
        if def.from.is_some() || def.then.is_some() {
            defs.push((
                key.to_string(),
                "(final)".to_string(),
                def.from.as_ref(),
                def.then.as_ref(),
            ));
        }
        for (tkey, tname, from, then) in defs {
            if seen.insert(tname.clone(), ()).is_some() {
                self.errors.push((
                    format!("{tkey}.name"),
                    PolicyError::DuplicateTerm(tname.clone()),
                ));
            }
            if let Some((by, flow)) = &always {
                self.warnings.push((
                    tkey.clone(),
                    PolicyWarning::Unreachable {
                        term: tname.clone(),
                        by: by.clone(),
                        action: if *flow == Flow::Accept {
                            "accept".into()
                        } else {
                            "reject".into()
                        },
                    },
                ));
            }
            let (conds, prefix) = match from {
                Some(f) => self.from(&tkey, f, &mut h),
                None => (Vec::new(), None),
            };
            let then = match then {
                Some(t) => self.then(&tkey, t, &mut h),
                None => {
                    self.warnings.push((tkey.clone(), PolicyWarning::NoAction));
                    Then::default()
                }
            };
            if conds.is_empty() && prefix.is_none() && always.is_none() {
                if let Some(f @ (Flow::Accept | Flow::Reject)) = then.flow {
                    always = Some((tname.clone(), f));
                }
            }
            terms.push(Term {
                name: tname,
                conds,
                prefix,
                then,
            });
        }
        let reads = |f: fn(&Cond) -> bool| terms.iter().any(|t| t.conds.iter().any(f));
        let reads_rpki = ReadsRpki {
            validity: reads(|c| matches!(c, Cond::Validation(_))),
            aspa: reads(|c| matches!(c, Cond::Aspa(_))),
        };
        let reads_prefix = reads_rpki.any()
            || terms.iter().any(|t| t.prefix.is_some())
            || reads(|c| matches!(c, Cond::Family(_)));
        Statement {
            name: name.to_string(),
            terms,
            fingerprint: h.finish(),
            reads_prefix,
            reads_rpki,
        }
    }

    fn from(
        &mut self,
        key: &str,
        f: &FromDef,
        h: &mut std::hash::DefaultHasher,
    ) -> (Vec<Cond>, Option<PrefixCond>) {
        let mut conds = Vec::new();
        let mut prefix = PrefixCond::default();
        let mut any_prefix = false;
        let k = |s: &str| format!("{key}.from.{s}");
        for (i, n) in names(&f.prefix_list) {
            any_prefix = true;
            match self.prefix_lists.get(n) {
                Some((set, fp)) => {
                    fp.hash(h);
                    prefix.exact.push(set.clone());
                }
                None => self.errors.push((
                    indexed(&k("prefix-list"), &f.prefix_list, i),
                    PolicyError::UndefinedPrefixList(n.clone()),
                )),
            }
        }
        for (i, pf) in f
            .prefix_list_filter
            .iter()
            .flat_map(|o| o.as_slice().iter().enumerate())
        {
            any_prefix = true;
            let at = indexed(&k("prefix-list-filter"), &f.prefix_list_filter, i);
            let Some((set, fp)) = self.prefix_lists.get(&pf.list).cloned() else {
                self.errors.push((
                    format!("{at}.list"),
                    PolicyError::UndefinedPrefixList(pf.list.clone()),
                ));
                continue;
            };
            fp.hash(h);
            // The lengths of `upto` and ranges are checked against the shortest entry.
            let shortest = set
                .v4
                .entries()
                .chain(set.v6.entries())
                .map(|(k, _)| k.len)
                .min()
                .unwrap_or(0);
            let probe = ribshard_wire::Prefix::V6 {
                addr: [0; 16],
                len: shortest,
            };
            match pf.match_type.trim() {
                t if t.starts_with("through") => self.errors.push((
                    format!("{at}.match"),
                    PolicyError::Invalid {
                        value: t.to_string(),
                        why: "`through` needs one prefix: use a route-filter".into(),
                    },
                )),
                t => match MatchType::parse(t, &probe) {
                    Ok(m) => prefix.filters.push((set, m)),
                    Err(why) => self.errors.push((
                        format!("{at}.match"),
                        PolicyError::Invalid {
                            value: t.to_string(),
                            why,
                        },
                    )),
                },
            }
        }
        if let Some(list) = &f.route_filter {
            any_prefix = true;
            let mut set: PrefixSet<Vec<MatchType>> = PrefixSet::default();
            for (i, rf) in list.iter().enumerate() {
                let at = format!("{}[{i}]", k("route-filter"));
                let (p, m) = match rf {
                    RouteFilterDef::Text(t) => {
                        let t = t.trim();
                        match t.split_once(char::is_whitespace) {
                            Some((p, m)) => (p.to_string(), m.trim().to_string()),
                            None => (t.to_string(), "exact".to_string()),
                        }
                    }
                    RouteFilterDef::Table { prefix, match_type } => {
                        (prefix.clone(), match_type.clone())
                    }
                };
                let p = match parse_prefix(&p) {
                    Ok(p) => p,
                    Err(e) => {
                        self.errors.push((at, e.into()));
                        continue;
                    }
                };
                match MatchType::parse(&m, &p) {
                    Ok(m) => set
                        .trie_mut(p.family())
                        .entry(Key::of(&p), Vec::new)
                        .into_iter()
                        .for_each(|v| v.push(m.clone())),
                    Err(why) => self
                        .errors
                        .push((at, PolicyError::Invalid { value: m, why })),
                }
            }
            set.finish();
            prefix.route_filter = Some(Arc::new(set));
        }
        if let Some(fam) = &f.family {
            match fam.as_str() {
                "inet" => conds.push(Cond::Family(Family::Ipv4Unicast)),
                "inet6" => conds.push(Cond::Family(Family::Ipv6Unicast)),
                other => self.errors.push((
                    k("family"),
                    PolicyError::Invalid {
                        value: other.to_string(),
                        why: "is not a family (inet or inet6)".into(),
                    },
                )),
            }
        }
        for (i, p) in names(&f.protocol) {
            if p != "bgp" {
                let known = ["direct", "static", "aggregate", "local", "ospf", "isis"];
                self.errors.push((
                    indexed(&k("protocol"), &f.protocol, i),
                    if known.contains(&p.as_str()) {
                        PolicyError::NeverMatches(format!(
                            "ribshard has only BGP routes (no {p} routes)"
                        ))
                    } else {
                        PolicyError::Invalid {
                            value: p.clone(),
                            why: "is not a protocol (bgp)".into(),
                        }
                    },
                ));
            }
        }
        if let Some(list) = &f.neighbor {
            let mut addrs = Vec::new();
            for (i, n) in list.as_slice().iter().enumerate() {
                match n.parse::<IpAddr>() {
                    Ok(a) => addrs.push(a),
                    Err(_) => self.errors.push((
                        indexed(&k("neighbor"), &f.neighbor, i),
                        PolicyError::Invalid {
                            value: n.clone(),
                            why: "is not an address".into(),
                        },
                    )),
                }
            }
            conds.push(Cond::Neighbor(addrs));
        }
        if let Some(list) = &f.peer_as {
            conds.push(Cond::PeerAs(list.as_slice().to_vec()));
        }
        if f.community.is_some() {
            let mut sets = Vec::new();
            for (i, n) in names(&f.community) {
                match self.communities.get(n) {
                    Some((c, fp)) => {
                        fp.hash(h);
                        sets.push(c.clone());
                    }
                    None => self.errors.push((
                        indexed(&k("community"), &f.community, i),
                        PolicyError::UndefinedCommunity(n.clone()),
                    )),
                }
            }
            conds.push(Cond::Community(sets));
        }
        let mut regexes: Vec<Arc<AsPathRegex>> = Vec::new();
        for (i, n) in names(&f.as_path) {
            match self.as_paths.get(n) {
                Some((r, fp)) => {
                    fp.hash(h);
                    regexes.push(r.clone());
                }
                None => self.errors.push((
                    indexed(&k("as-path"), &f.as_path, i),
                    PolicyError::UndefinedAsPath(n.clone()),
                )),
            }
        }
        for (i, n) in names(&f.as_path_group) {
            match self.groups.get(n) {
                Some((list, fp)) => {
                    fp.hash(h);
                    regexes.extend(list.iter().cloned());
                }
                None => self.errors.push((
                    indexed(&k("as-path-group"), &f.as_path_group, i),
                    PolicyError::UndefinedAsPathGroup(n.clone()),
                )),
            }
        }
        if f.as_path.is_some() || f.as_path_group.is_some() {
            conds.push(Cond::AsPath(regexes));
        }
        if let Some(l) = &f.as_path_calc_length {
            let cmp = match l.match_type.as_str() {
                "equal" => Some(Cmp::Equal),
                "orhigher" => Some(Cmp::OrHigher),
                "orlower" => Some(Cmp::OrLower),
                other => {
                    self.errors.push((
                        format!("{}.match", k("as-path-calc-length")),
                        PolicyError::Invalid {
                            value: other.to_string(),
                            why: "is not equal, orhigher or orlower".into(),
                        },
                    ));
                    None
                }
            };
            if let Some(cmp) = cmp {
                conds.push(Cond::AsPathLength(l.count, cmp));
            }
        }
        if let Some(o) = &f.origin {
            match origin(o) {
                Some(o) => conds.push(Cond::Origin(o)),
                None => self.errors.push((k("origin"), bad_origin(o))),
            }
        }
        if let Some(list) = &f.next_hop {
            let mut addrs = Vec::new();
            for (i, n) in list.as_slice().iter().enumerate() {
                match n.parse::<IpAddr>() {
                    Ok(a) => addrs.push(a),
                    Err(_) => self.errors.push((
                        indexed(&k("next-hop"), &f.next_hop, i),
                        PolicyError::Invalid {
                            value: n.clone(),
                            why: "is not an address".into(),
                        },
                    )),
                }
            }
            conds.push(Cond::NextHop(addrs));
        }
        if let Some(lp) = f.local_preference {
            conds.push(Cond::LocalPref(lp));
        }
        if let Some(m) = f.metric {
            conds.push(Cond::Med(m));
        }
        if let Some(t) = &f.route_type {
            match t.as_str() {
                "internal" => conds.push(Cond::RouteType { internal: true }),
                "external" => conds.push(Cond::RouteType { internal: false }),
                other => self.errors.push((
                    k("route-type"),
                    PolicyError::Invalid {
                        value: other.to_string(),
                        why: "is not internal or external".into(),
                    },
                )),
            }
        }
        if let Some(states) = &f.validation_state {
            let mut list = Vec::new();
            for (i, v) in states.as_slice().iter().enumerate() {
                match v.as_str() {
                    "valid" => list.push(Validity::Valid),
                    "invalid" => list.push(Validity::Invalid),
                    "unknown" | "not-found" => list.push(Validity::NotFound),
                    other => self.errors.push((
                        indexed(&k("validation-state"), &f.validation_state, i),
                        PolicyError::Invalid {
                            value: other.to_string(),
                            why: "is not valid, invalid or unknown".into(),
                        },
                    )),
                }
            }
            conds.push(Cond::Validation(list));
        }
        if let Some(states) = &f.aspa_state {
            let mut list = Vec::new();
            for (i, v) in states.as_slice().iter().enumerate() {
                match v.as_str() {
                    "valid" => list.push(AspaState::Valid),
                    "invalid" => list.push(AspaState::Invalid),
                    "unknown" => list.push(AspaState::Unknown),
                    other => self.errors.push((
                        indexed(&k("aspa-state"), &f.aspa_state, i),
                        PolicyError::Invalid {
                            value: other.to_string(),
                            why: "is not valid, invalid or unknown".into(),
                        },
                    )),
                }
            }
            conds.push(Cond::Aspa(list));
        }
        // A family no prefix condition can have.
        if let (Some(Cond::Family(fam)), true) = (
            conds.iter().find(|c| matches!(c, Cond::Family(_))),
            any_prefix,
        ) {
            let has = prefix.exact.iter().any(|s| s.has(*fam))
                || prefix.filters.iter().any(|(s, _)| s.has(*fam))
                || prefix.route_filter.as_ref().is_some_and(|s| s.has(*fam));
            let empty = prefix.exact.iter().all(|s| s.is_empty())
                && prefix.filters.iter().all(|(s, _)| s.is_empty())
                && prefix.route_filter.as_ref().is_none_or(|s| s.is_empty());
            if !has && !empty {
                self.errors.push((
                    k("family"),
                    PolicyError::NeverMatches(format!(
                        "family {} but every prefix it lists is of the other family",
                        f.family.as_deref().unwrap_or("")
                    )),
                ));
            }
        }
        let prefix = any_prefix.then_some(prefix);
        (conds, prefix)
    }

    fn communities_for_action(
        &mut self,
        key: &str,
        v: &Option<OneOrMore<String>>,
        values_only: bool,
        h: &mut std::hash::DefaultHasher,
    ) -> Vec<Arc<CommunitySet>> {
        let mut out = Vec::new();
        for (i, n) in names(v) {
            let at = indexed(key, v, i);
            match self.communities.get(n) {
                Some((c, fp)) => {
                    fp.hash(h);
                    if values_only && !c.all_values() {
                        self.errors.push((at, PolicyError::NotAddable(n.clone())));
                    } else {
                        out.push(c.clone());
                    }
                }
                None => self
                    .errors
                    .push((at, PolicyError::UndefinedCommunity(n.clone()))),
            }
        }
        out
    }

    fn then(&mut self, key: &str, t: &ThenDef, h: &mut std::hash::DefaultHasher) -> Then {
        let k = |s: &str| format!("{key}.then.{s}");
        let mut then = Then::default();
        if let Some(a) = &t.action {
            match a.as_str() {
                "accept" => then.flow = Some(Flow::Accept),
                "reject" => then.flow = Some(Flow::Reject),
                "next-term" => then.flow = Some(Flow::NextTerm),
                "next-policy" => then.flow = Some(Flow::NextPolicy),
                other => self.errors.push((
                    k("action"),
                    PolicyError::Invalid {
                        value: other.to_string(),
                        why: "is not an action (accept, reject, next-term, next-policy)".into(),
                    },
                )),
            }
        }
        if let Some(a) = &t.default_action {
            match a.as_str() {
                "accept" => then.default_action = Some(true),
                "reject" => then.default_action = Some(false),
                other => self.errors.push((
                    k("default-action"),
                    PolicyError::Invalid {
                        value: other.to_string(),
                        why: "is not accept or reject".into(),
                    },
                )),
            }
        }
        // Junos's order: communities set, deleted, then added (so a term can delete a
        // pattern and add a value of it); then the numbers and the path.
        let set = self.communities_for_action(&k("community-set"), &t.community_set, true, h);
        if t.community_set.is_some() {
            then.mods.push(Modify::CommunitySet(set));
        }
        let del =
            self.communities_for_action(&k("community-delete"), &t.community_delete, false, h);
        if !del.is_empty() {
            then.mods.push(Modify::CommunityDelete(del));
        }
        let add = self.communities_for_action(&k("community-add"), &t.community_add, true, h);
        if !add.is_empty() {
            then.mods.push(Modify::CommunityAdd(add));
        }
        if let Some(n) = &t.local_preference {
            if let Some(op) = self.number(&k("local-preference"), n) {
                then.mods.push(Modify::LocalPref(op));
            }
        }
        if let Some(n) = &t.metric {
            if let Some(op) = self.number(&k("metric"), n) {
                then.mods.push(Modify::Med(op));
            }
        }
        if let Some(p) = &t.as_path_prepend {
            let count = match p {
                PrependDef::Own(n) => *n as usize,
                PrependDef::Asns(v) => v.len(),
            };
            if count == 0 || count > 32 {
                self.errors.push((
                    k("as-path-prepend"),
                    PolicyError::Invalid {
                        value: format!("{count} AS numbers"),
                        why: "is not from 1 to 32".into(),
                    },
                ));
            } else {
                then.mods.push(match p {
                    PrependDef::Own(n) => Modify::PrependOwn(*n as u8),
                    PrependDef::Asns(v) => Modify::Prepend(v.clone()),
                });
            }
        }
        if let Some(e) = &t.as_path_expand {
            if e.last_as == 0 || e.last_as > 32 {
                self.errors.push((
                    format!("{}.last-as", k("as-path-expand")),
                    PolicyError::Invalid {
                        value: e.last_as.to_string(),
                        why: "is not a count from 1 to 32".into(),
                    },
                ));
            } else {
                then.mods.push(Modify::ExpandLastAs(e.last_as as u8));
            }
        }
        if let Some(nh) = &t.next_hop {
            let set = match nh.as_str() {
                "self" => Some(NextHopSet::OurAddress),
                "peer-address" => Some(NextHopSet::PeerAddress),
                "reject" => Some(NextHopSet::Reject),
                "discard" => Some(NextHopSet::Discard),
                a => match a.parse::<IpAddr>() {
                    Ok(a) => Some(NextHopSet::Address(a)),
                    Err(_) => {
                        self.errors.push((
                            k("next-hop"),
                            PolicyError::Invalid {
                                value: a.to_string(),
                                why: "is not self, peer-address, reject, discard or an address"
                                    .into(),
                            },
                        ));
                        None
                    }
                },
            };
            if let Some(s) = set {
                then.mods.push(Modify::NextHop(s));
            }
        }
        if let Some(o) = &t.origin {
            match origin(o) {
                Some(o) => then.mods.push(Modify::Origin(o)),
                None => self.errors.push((k("origin"), bad_origin(o))),
            }
        }
        then
    }

    fn number(&mut self, key: &str, n: &NumberAction) -> Option<NumOp> {
        match n {
            NumberAction::Set(v) => Some(NumOp::Set(*v)),
            NumberAction::Change(c) => match (c.add, c.subtract) {
                (Some(a), None) => Some(NumOp::Add(a)),
                (None, Some(s)) => Some(NumOp::Subtract(s)),
                _ => {
                    self.errors.push((
                        key.to_string(),
                        PolicyError::Invalid {
                            value: "{ add, subtract }".into(),
                            why: "give a number, or one of add and subtract".into(),
                        },
                    ));
                    None
                }
            },
        }
    }
}

/// The key of the `i`th name of a list written as a list (or of the one written alone).
fn indexed<T>(key: &str, v: &Option<OneOrMore<T>>, i: usize) -> String {
    match v {
        Some(OneOrMore::More(_)) => format!("{key}[{i}]"),
        _ => key.to_string(),
    }
}

fn origin(s: &str) -> Option<Origin> {
    match s {
        "igp" => Some(Origin::Igp),
        "egp" => Some(Origin::Egp),
        "incomplete" => Some(Origin::Incomplete),
        _ => None,
    }
}

fn bad_origin(s: &str) -> PolicyError {
    PolicyError::Invalid {
        value: s.to_string(),
        why: "is not an origin (igp, egp, incomplete)".into(),
    }
}

impl Policies {
    /// Whether a policy of this name exists (built-in or configured).
    pub fn defines(&self, name: &str) -> bool {
        is_builtin(name) || self.statements.contains_key(name)
    }

    /// A configured policy statement.
    pub fn statement(&self, name: &str) -> Option<&Arc<Statement>> {
        self.statements.get(name)
    }

    /// Each policy statement's name and fingerprint, sorted, and the route server AS: equal
    /// for equal definitions.
    pub fn fingerprints(&self) -> (Vec<(&str, u64)>, Option<u32>) {
        let mut v: Vec<(&str, u64)> = self
            .statements
            .iter()
            .map(|(n, s)| (n.as_str(), s.fingerprint))
            .collect();
        v.sort_unstable();
        (v, self.rs_asn)
    }

    /// The AS `route-server-control` names in its communities, if set in the file.
    pub fn route_server_asn(&self) -> Option<u32> {
        self.rs_asn
    }
}

/// The built-in policies' names.
pub fn is_builtin(name: &str) -> bool {
    matches!(name, "accept" | "reject" | "route-server-control")
}
