//! Evaluating a chain of policies against a route, as Junos does: policies in order, terms
//! in order; a term whose conditions all hold applies its actions and then accepts, rejects,
//! goes to the next policy or (by default) the next term; the first accept or reject ends
//! the chain. Falling off its end applies a `default-action` if a matching term set one,
//! else the chain's default for its session type.
//!
//! Evaluation is split in two so that it allocates nothing unless a route changes:
//! [`Chain::evaluate`] reads the route and returns a [`Verdict`] whose [`Trace`] lists the
//! terms whose actions apply; [`Chain::apply`] makes the changed attributes. Two routes with
//! the same attribute set and trace get the same result, which callers cache.

use crate::aspath::AsPathRegex;
use crate::community::{Communities, CommunitySet};
use crate::prefix::{Key, MatchType, PrefixSet};
use ribshard_rpki::{AspaState, Validity};
use ribshard_wire::attr;
use ribshard_wire::attributes::PathAttributes;
use ribshard_wire::update::{segment, RawAttrIter};
use ribshard_wire::{Family, Origin, Prefix};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

mod actions;
pub use actions::prepend_as;
use actions::{current_communities, modify, rs_control, strip_rs_control, RsControl};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Accept,
    Reject,
    NextTerm,
    NextPolicy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Equal,
    OrHigher,
    OrLower,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumOp {
    Set(u32),
    Add(u32),
    Subtract(u32),
}

impl NumOp {
    pub(crate) fn on(self, v: u32) -> u32 {
        match self {
            NumOp::Set(n) => n,
            NumOp::Add(n) => v.saturating_add(n),
            NumOp::Subtract(n) => v.saturating_sub(n),
        }
    }
}

/// What `then next-hop` asks for; the caller knows the addresses it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NextHopSet {
    Address(IpAddr),
    /// Our address on the session (`self`).
    OurAddress,
    /// The address of the neighbor the route was learned from.
    PeerAddress,
    /// Junos `reject` / `discard`: forwarding drops the traffic (with or without an ICMP
    /// unreachable); advertised with our own address as next hop.
    Reject,
    Discard,
}

#[derive(Clone, Debug)]
pub(crate) enum Cond {
    Family(Family),
    Neighbor(Vec<IpAddr>),
    PeerAs(Vec<u32>),
    Community(Vec<Arc<CommunitySet>>),
    AsPath(Vec<Arc<AsPathRegex>>),
    AsPathLength(u32, Cmp),
    Origin(Origin),
    NextHop(Vec<IpAddr>),
    LocalPref(u32),
    Med(u32),
    RouteType {
        internal: bool,
    },
    /// Route origin validation state (RFC 6811), looked up by the caller.
    Validation(Vec<Validity>),
    /// ASPA path verification state, looked up by the caller.
    Aspa(Vec<AspaState>),
}

/// The route lists of a term (`prefix-list`, `prefix-list-filter`, `route-filter`): the
/// route matches if any of them does.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrefixCond {
    pub exact: Vec<Arc<PrefixSet<()>>>,
    pub filters: Vec<(Arc<PrefixSet<()>>, MatchType)>,
    /// Junos route filters: the longest entry covering the route decides, by its match
    /// types (several when one prefix is listed with several).
    pub route_filter: Option<Arc<PrefixSet<Vec<MatchType>>>>,
}

/// The longest entry of each prefix list looked at during one evaluation (terms often name
/// one list twice): list address and the entry's length.
#[derive(Default)]
struct Looked {
    lists: [(usize, Option<u8>); 4],
    n: usize,
}

impl Looked {
    #[inline]
    fn longest(&mut self, set: &PrefixSet<()>, family: Family, route: &Key) -> Option<u8> {
        let id = set as *const PrefixSet<()> as usize;
        if let Some((_, l)) = self.lists.iter().take(self.n).find(|(p, _)| *p == id) {
            return *l;
        }
        let l = set.trie(family).longest(route).map(|(k, _)| k.len);
        if let Some(slot) = self.lists.get_mut(self.n % 4) {
            *slot = (id, l);
        }
        self.n = (self.n + 1).min(4);
        l
    }
}

impl PrefixCond {
    #[inline]
    fn matches(&self, family: Family, route: &Key, looked: &mut Looked) -> bool {
        self.exact
            .iter()
            .any(|s| looked.longest(s, family, route) == Some(route.len))
            || self.filters.iter().any(|(s, m)| {
                looked
                    .longest(s, family, route)
                    .is_some_and(|len| m.matches(len, route))
            })
            || self.route_filter.as_ref().is_some_and(|s| {
                s.trie(family)
                    .longest(route)
                    .is_some_and(|(k, ms)| ms.iter().any(|m| m.matches(k.len, route)))
            })
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Modify {
    CommunitySet(Vec<Arc<CommunitySet>>),
    CommunityDelete(Vec<Arc<CommunitySet>>),
    CommunityAdd(Vec<Arc<CommunitySet>>),
    LocalPref(NumOp),
    Med(NumOp),
    Prepend(Vec<u32>),
    PrependOwn(u8),
    ExpandLastAs(u8),
    NextHop(NextHopSet),
    Origin(Origin),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Then {
    pub flow: Option<Flow>,
    pub default_action: Option<bool>,
    pub mods: Vec<Modify>,
}

#[derive(Clone, Debug)]
pub(crate) struct Term {
    pub name: String,
    pub conds: Vec<Cond>,
    pub prefix: Option<PrefixCond>,
    pub then: Then,
}

/// A compiled `policy-statement`.
#[derive(Clone, Debug)]
pub struct Statement {
    pub name: String,
    pub(crate) terms: Vec<Term>,
    /// A hash of its definition and of everything it names: equal policies, equal hashes.
    pub fingerprint: u64,
    /// It has conditions on the prefix itself, so its result differs between routes of
    /// one attribute set.
    pub reads_prefix: bool,
    /// It reads the routes' RPKI states (`validation-state`, `aspa-state`).
    pub reads_rpki: ReadsRpki,
}

/// Which RPKI states a policy reads: the caller looks up only those.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadsRpki {
    pub validity: bool,
    pub aspa: bool,
}

impl ReadsRpki {
    pub fn any(&self) -> bool {
        self.validity || self.aspa
    }

    fn or(self, o: ReadsRpki) -> ReadsRpki {
        ReadsRpki {
            validity: self.validity || o.validity,
            aspa: self.aspa || o.aspa,
        }
    }
}

impl Statement {
    /// The names of its terms, in order.
    pub fn term_names(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.name.as_str())
    }
}

/// One policy of a chain.
#[derive(Clone, Debug)]
pub enum Item {
    Accept,
    Reject,
    Statement(Arc<Statement>),
    /// IXP route server control communities, with the route server's AS.
    RouteServerControl {
        asn: u32,
    },
}

/// The neighbor a route was learned from, as policy conditions see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Source {
    pub address: IpAddr,
    pub peer_as: u32,
    /// Learned over iBGP.
    pub internal: bool,
}

/// A route as a policy looks at it.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    /// The prefix, host bits cleared.
    pub prefix: Prefix,
    /// Path attributes in the 4-octet AS encoding, without MP_REACH / MP_UNREACH.
    pub attrs: &'a [u8],
    /// 4 octets (IPv4), 16 or 32 (IPv6, global then link-local).
    pub next_hop: &'a [u8],
    pub source: &'a Source,
    /// In an export chain, the AS of the neighbors the route goes to (route-server-control).
    pub receiver_as: Option<u32>,
    /// The route's RPKI states, where the caller looked them up ([`Chain::reads_rpki`]).
    pub rpki: RpkiStates,
}

/// A route's RPKI states as `validation-state` and `aspa-state` see them; a state not
/// looked up (no RPKI data) is not-found / unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RpkiStates {
    pub validity: Option<Validity>,
    pub aspa: Option<AspaState>,
}

impl RpkiStates {
    pub fn validity(&self) -> Validity {
        self.validity.unwrap_or(Validity::NotFound)
    }

    pub fn aspa(&self) -> AspaState {
        self.aspa.unwrap_or(AspaState::Unknown)
    }
}

/// The attributes a condition reads, found in one pass when first needed.
#[derive(Default)]
struct Scanned<'a> {
    origin: Option<u8>,
    as_path: &'a [u8],
    med: Option<u32>,
    local_pref: Option<u32>,
    communities: Communities<'a>,
}

fn be32(v: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?))
}

impl<'a> Scanned<'a> {
    fn of(raw: &'a [u8]) -> Scanned<'a> {
        let mut s = Scanned::default();
        for a in RawAttrIter::new(raw) {
            match a.type_code {
                attr::ORIGIN => s.origin = a.value.first().copied(),
                attr::AS_PATH => s.as_path = a.value,
                attr::MULTI_EXIT_DISC => s.med = be32(a.value),
                attr::LOCAL_PREF => s.local_pref = be32(a.value),
                attr::COMMUNITIES => s.communities.standard = a.value,
                attr::EXTENDED_COMMUNITIES => s.communities.extended = a.value,
                attr::LARGE_COMMUNITY => s.communities.large = a.value,
                _ => {}
            }
        }
        s
    }
}

/// AS path length as the decision process counts it: an AS_SET is one, confederation
/// segments none (RFC 4271 section 9.1.2.2, RFC 5065 section 5.3).
fn path_len(path: &[u8]) -> u32 {
    let mut n = 0u32;
    let mut at = 0usize;
    while let (Some(&kind), Some(&count)) = (path.get(at), path.get(at + 1)) {
        n += match kind {
            segment::AS_SEQUENCE => u32::from(count),
            segment::AS_SET => 1,
            _ => 0,
        };
        at += 2 + 4 * usize::from(count);
    }
    n
}

fn next_hop_is(nh: &[u8], a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => nh == v4.octets(),
        IpAddr::V6(v6) => nh.get(..16) == Some(&v6.octets()[..]),
    }
}

impl Cond {
    /// Whether it reads only the path attributes (so routes of one set agree on it).
    fn of_attributes(&self) -> bool {
        !matches!(
            self,
            Cond::Family(_)
                | Cond::Neighbor(_)
                | Cond::PeerAs(_)
                | Cond::RouteType { .. }
                | Cond::NextHop(_)
                | Cond::Validation(_)
                | Cond::Aspa(_)
        )
    }

    /// A condition on the path attributes.
    #[inline]
    fn holds_for(&self, a: &Scanned<'_>) -> bool {
        match self {
            Cond::Community(sets) => sets.iter().any(|x| x.matched_by(&a.communities)),
            Cond::AsPath(res) => res.iter().any(|r| r.matches(a.as_path)),
            Cond::AsPathLength(n, cmp) => {
                let l = path_len(a.as_path);
                match cmp {
                    Cmp::Equal => l == *n,
                    Cmp::OrHigher => l >= *n,
                    Cmp::OrLower => l <= *n,
                }
            }
            Cond::Origin(o) => a.origin.unwrap_or(2) == *o as u8,
            Cond::LocalPref(v) => a.local_pref.unwrap_or(100) == *v,
            Cond::Med(v) => a.med == Some(*v),
            _ => false,
        }
    }
}

impl Term {
    /// `slot`: where `memo` keeps this term's answer on the attributes, if it has room.
    #[inline]
    fn matches<'a, M: Memo>(
        &self,
        s: &Subject<'a>,
        key: &Key,
        scan: &mut Option<Scanned<'a>>,
        looked: &mut Looked,
        memo: &mut M,
        slot: usize,
    ) -> bool {
        let family = s.prefix.family();
        if let Some(p) = &self.prefix {
            if !p.matches(family, key, looked) {
                return false;
            }
        }
        let mut of_attributes = false;
        for c in &self.conds {
            let ok = match c {
                Cond::Family(f) => *f == family,
                Cond::Neighbor(a) => a.contains(&s.source.address),
                Cond::PeerAs(list) => list.contains(&s.source.peer_as),
                Cond::RouteType { internal } => s.source.internal == *internal,
                Cond::NextHop(list) => list.iter().any(|a| next_hop_is(s.next_hop, a)),
                Cond::Validation(states) => states.contains(&s.rpki.validity()),
                Cond::Aspa(states) => states.contains(&s.rpki.aspa()),
                // Without a memo, in the configured order; with one, after the rest.
                _ if !M::ON => c.holds_for(scan.get_or_insert_with(|| Scanned::of(s.attrs))),
                _ => {
                    of_attributes = true;
                    true
                }
            };
            if !ok {
                return false;
            }
        }
        if !of_attributes {
            return true;
        }
        if let Some(known) = memo.get(slot) {
            return known;
        }
        let a = scan.get_or_insert_with(|| Scanned::of(s.attrs));
        let ok = self
            .conds
            .iter()
            .filter(|c| c.of_attributes())
            .all(|c| c.holds_for(a));
        memo.set(slot, ok);
        ok
    }
}

/// Where a run keeps the terms' answers on the attributes: nowhere ([`NoMemo`], so a plain
/// evaluation pays nothing for the possibility), or a [`SetMemo`].
trait Memo {
    const ON: bool;
    fn get(&self, slot: usize) -> Option<bool>;
    fn set(&mut self, slot: usize, ok: bool);
}

struct NoMemo;

impl Memo for NoMemo {
    const ON: bool = false;
    fn get(&self, _: usize) -> Option<bool> {
        None
    }
    fn set(&mut self, _: usize, _: bool) {}
}

impl Memo for &mut SetMemo {
    const ON: bool = true;
    fn get(&self, slot: usize) -> Option<bool> {
        SetMemo::get(self, slot)
    }
    fn set(&mut self, slot: usize, ok: bool) {
        SetMemo::set(self, slot, ok)
    }
}

/// What the terms of one chain found in one attribute set: the routes of an UPDATE share
/// their set, and the conditions on it (communities, AS path, origin, MED, local
/// preference) are answered once for all of them; only the prefix and the cheap conditions
/// on the neighbor are looked at per route. Up to 64 terms a chain; the rest are evaluated
/// every time.
///
/// The memo knows the set by its bytes' address: the caller must [`SetMemo::clear`] it
/// before those bytes could be freed (and the address reused by another set), e.g. by
/// holding the set while the memo refers to it.
#[derive(Debug, Default)]
pub struct SetMemo {
    /// The chain and the attribute bytes (address, length) the answers are for.
    of: (usize, usize, usize),
    known: u64,
    held: u64,
}

impl SetMemo {
    /// Forgets every answer.
    pub fn clear(&mut self) {
        *self = SetMemo::default();
    }

    fn fit(&mut self, chain: &Chain, attrs: &[u8]) {
        let of = (
            chain as *const Chain as usize,
            attrs.as_ptr() as usize,
            attrs.len(),
        );
        if self.of != of {
            *self = SetMemo {
                of,
                known: 0,
                held: 0,
            };
        }
    }

    fn get(&self, slot: usize) -> Option<bool> {
        let bit = 1u64.checked_shl(slot as u32)?;
        (self.known & bit != 0).then_some(self.held & bit != 0)
    }

    fn set(&mut self, slot: usize, ok: bool) {
        if let Some(bit) = 1u64.checked_shl(slot as u32) {
            self.known |= bit;
            if ok {
                self.held |= bit;
            } else {
                self.held &= !bit;
            }
        }
    }
}

/// Which policy and term decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decided {
    /// A term's `accept` or `reject` (item: position in the chain).
    Term { item: u16, term: u16 },
    /// A built-in policy (`accept`, `reject`, or `route-server-control` refusing).
    Builtin { item: u16 },
    /// Nothing decided; a term's `default-action` did.
    DefaultAction { item: u16, term: u16 },
    /// Nothing decided: the chain's default for its session type.
    End,
}

/// The terms whose actions apply, in order (at most [`Trace::MAX`]; past that the chain is
/// evaluated again when applied). Part of a cache key: the same attributes and trace give
/// the same result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Trace {
    pub(crate) ids: [u32; Trace::MAX],
    pub(crate) len: u8,
    pub(crate) overflow: bool,
}

impl Trace {
    pub const MAX: usize = 6;

    fn push(&mut self, id: u32) {
        match self.ids.get_mut(usize::from(self.len)) {
            Some(slot) => {
                *slot = id;
                self.len += 1;
            }
            None => self.overflow = true,
        }
    }

    /// No action changes anything.
    pub fn is_empty(&self) -> bool {
        self.len == 0 && !self.overflow
    }
}

/// What a chain decided for a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Verdict {
    pub accept: bool,
    pub by: Decided,
    pub trace: Trace,
}

/// What applying a verdict's actions made: the attributes, and what the caller resolves.
#[derive(Clone, Debug, Default)]
pub struct Modified {
    pub attrs: PathAttributes,
    pub next_hop: Option<NextHopSet>,
    /// `local-preference` or `metric` was set by a term: the caller keeps them where the
    /// protocol would otherwise drop them (MED towards eBGP peers, LOCAL_PREF towards iBGP).
    pub local_pref_set: bool,
    pub med_set: bool,
}

/// What the actions need to know of where the route goes.
#[derive(Clone, Copy, Debug)]
pub struct ApplyContext {
    /// Our AS on the session: what `as-path-prepend N` and an empty path's expand repeat.
    pub own_as: u32,
}

/// A chain of policies, as configured on a neighbor, group or `[bgp]`, with the default of
/// its session type.
#[derive(Clone, Debug)]
pub struct Chain {
    pub(crate) items: Vec<Item>,
    names: Vec<String>,
    default_accept: bool,
    fingerprint: u64,
    reads_prefix: bool,
    reads_rpki: ReadsRpki,
}

impl PartialEq for Chain {
    fn eq(&self, o: &Chain) -> bool {
        self.fingerprint == o.fingerprint
            && self.default_accept == o.default_accept
            && self.names == o.names
    }
}
impl Eq for Chain {}
impl Hash for Chain {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.fingerprint.hash(h);
        self.default_accept.hash(h);
    }
}

impl Chain {
    /// The chain of these items; `default_accept`: what falling off its end does.
    pub fn new(items: Vec<(String, Item)>, default_accept: bool) -> Chain {
        let mut h = std::hash::DefaultHasher::new();
        let mut names = Vec::new();
        let mut its = Vec::new();
        let mut reads_prefix = false;
        let mut reads_rpki = ReadsRpki::default();
        for (n, i) in items {
            n.hash(&mut h);
            match &i {
                Item::Statement(s) => {
                    s.fingerprint.hash(&mut h);
                    reads_prefix |= s.reads_prefix;
                    reads_rpki = reads_rpki.or(s.reads_rpki);
                }
                Item::RouteServerControl { asn } => asn.hash(&mut h),
                Item::Accept | Item::Reject => {}
            }
            names.push(n);
            its.push(i);
        }
        Chain {
            items: its,
            names,
            default_accept,
            fingerprint: h.finish(),
            reads_prefix,
            reads_rpki,
        }
    }

    /// Everything accepted, nothing changed (`accept`, or no policy on an internal session).
    pub fn accept_all() -> Chain {
        Chain::new(vec![("accept".into(), Item::Accept)], true)
    }

    /// Nothing accepted (`reject`, or RFC 8212 on an external session without policy).
    pub fn reject_all() -> Chain {
        Chain::new(vec![("reject".into(), Item::Reject)], false)
    }

    /// `accept` or `reject`, as a flag says.
    pub fn builtin(accept: bool) -> Chain {
        if accept {
            Chain::accept_all()
        } else {
            Chain::reject_all()
        }
    }

    /// The policies' names, as configured.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether the chain accepts every route unchanged, so callers may skip it.
    pub fn accepts_everything(&self) -> bool {
        matches!(self.items.first(), Some(Item::Accept))
            || (self.items.is_empty() && self.default_accept)
    }

    /// Whether the chain refuses every route.
    pub fn rejects_everything(&self) -> bool {
        matches!(self.items.first(), Some(Item::Reject))
            || (self.items.is_empty() && !self.default_accept)
    }

    /// Whether routes of one attribute set and source can get different verdicts (the
    /// chain reads the prefix): then results are cached by verdict, not by set.
    pub fn reads_prefix(&self) -> bool {
        self.reads_prefix
    }

    /// Which RPKI states the chain reads: the caller looks them up for [`Subject::rpki`].
    /// A chain that reads one also [`Chain::reads_prefix`], so its results are never
    /// cached by attribute set alone (the states change with the RPKI data).
    pub fn reads_rpki(&self) -> ReadsRpki {
        self.reads_rpki
    }

    /// Whether the chain reads the receivers' AS (`route-server-control`): an update group
    /// then holds neighbors of one AS only.
    pub fn reads_receiver(&self) -> bool {
        self.items
            .iter()
            .any(|i| matches!(i, Item::RouteServerControl { .. }))
    }

    /// The policy and term a decision names, for display.
    pub fn describe(&self, d: &Decided) -> String {
        let term = |item: u16, term: u16| -> String {
            let name = self
                .names
                .get(usize::from(item))
                .map_or("?", String::as_str);
            match self.items.get(usize::from(item)) {
                Some(Item::Statement(s)) => {
                    let t = s
                        .terms
                        .get(usize::from(term))
                        .map_or("?", |t| t.name.as_str());
                    format!("policy {name} term {t}")
                }
                _ => format!("policy {name}"),
            }
        };
        match *d {
            Decided::Term { item, term: t } => term(item, t),
            Decided::Builtin { item } => term(item, 0),
            Decided::DefaultAction { item, term: t } => {
                format!("default-action of {}", term(item, t))
            }
            Decided::End => format!(
                "end of chain [{}]: {} by default",
                self.names.join(" "),
                if self.default_accept {
                    "accepted"
                } else {
                    "rejected"
                }
            ),
        }
    }

    /// Runs the chain; `on_mods` gets each term whose actions apply, as `item << 16 | term`.
    fn run<'a>(&self, s: &Subject<'a>, on_mods: &mut impl FnMut(u32)) -> (bool, Decided) {
        self.run_with(s, on_mods, NoMemo)
    }

    fn run_with<'a, M: Memo>(
        &self,
        s: &Subject<'a>,
        on_mods: &mut impl FnMut(u32),
        mut memo: M,
    ) -> (bool, Decided) {
        let key = Key::of(&s.prefix);
        let mut scan: Option<Scanned<'a>> = None;
        let mut looked = Looked::default();
        let mut default: Option<(bool, u16, u16)> = None;
        // Each term's place in the memo: terms numbered across the chain.
        let mut slot = 0usize;
        for (ii, item) in self.items.iter().enumerate() {
            let i = ii as u16;
            match item {
                Item::Accept => return (true, Decided::Builtin { item: i }),
                Item::Reject => return (false, Decided::Builtin { item: i }),
                Item::RouteServerControl { asn } => {
                    let a = scan.get_or_insert_with(|| Scanned::of(s.attrs));
                    match rs_control(*asn, s.receiver_as, &a.communities) {
                        RsControl::Refuse => return (false, Decided::Builtin { item: i }),
                        RsControl::Pass { changes: true, .. } => on_mods(u32::from(i) << 16),
                        RsControl::Pass { .. } => {}
                    }
                }
                Item::Statement(st) => {
                    let first = slot;
                    slot += st.terms.len();
                    for (ti, t) in st.terms.iter().enumerate() {
                        if !t.matches(s, &key, &mut scan, &mut looked, &mut memo, first + ti) {
                            continue;
                        }
                        let id = u32::from(i) << 16 | ti as u32;
                        if !t.then.mods.is_empty() {
                            on_mods(id);
                        }
                        if let Some(d) = t.then.default_action {
                            default = Some((d, i, ti as u16));
                        }
                        match t.then.flow {
                            Some(Flow::Accept) => {
                                return (
                                    true,
                                    Decided::Term {
                                        item: i,
                                        term: ti as u16,
                                    },
                                )
                            }
                            Some(Flow::Reject) => {
                                return (
                                    false,
                                    Decided::Term {
                                        item: i,
                                        term: ti as u16,
                                    },
                                )
                            }
                            Some(Flow::NextPolicy) => break,
                            Some(Flow::NextTerm) | None => {}
                        }
                    }
                }
            }
        }
        match default {
            Some((d, item, term)) => (d, Decided::DefaultAction { item, term }),
            None => (self.default_accept, Decided::End),
        }
    }

    /// What the chain decides for a route; allocates nothing.
    #[inline]
    pub fn evaluate(&self, s: &Subject<'_>) -> Verdict {
        self.evaluate_with(s, NoMemo)
    }

    /// [`Chain::evaluate`] for routes that share their attribute set, one after another:
    /// the terms' conditions on the set are answered once (see [`SetMemo`]).
    #[inline]
    pub fn evaluate_memo(&self, s: &Subject<'_>, memo: &mut SetMemo) -> Verdict {
        memo.fit(self, s.attrs);
        self.evaluate_with(s, memo)
    }

    #[inline]
    fn evaluate_with<M: Memo>(&self, s: &Subject<'_>, memo: M) -> Verdict {
        let mut trace = Trace::default();
        let (accept, by) = self.run_with(s, &mut |id| trace.push(id), memo);
        Verdict {
            accept,
            by,
            trace: if accept { trace } else { Trace::default() },
        }
    }

    /// Applies an accepting verdict's actions to the route's attributes (decoded by the
    /// caller into `attrs`).
    pub fn apply(
        &self,
        v: &Verdict,
        s: &Subject<'_>,
        attrs: PathAttributes,
        cx: &ApplyContext,
    ) -> Modified {
        let mut m = Modified {
            attrs,
            ..Modified::default()
        };
        if v.trace.overflow {
            let mut all = Vec::new();
            self.run(s, &mut |id| all.push(id));
            for id in all {
                self.apply_one(id, s, cx, &mut m);
            }
        } else {
            for &id in v.trace.ids.iter().take(usize::from(v.trace.len)) {
                self.apply_one(id, s, cx, &mut m);
            }
        }
        m
    }

    fn apply_one(&self, id: u32, s: &Subject<'_>, cx: &ApplyContext, m: &mut Modified) {
        let (item, term) = ((id >> 16) as usize, (id & 0xFFFF) as usize);
        match self.items.get(item) {
            Some(Item::Statement(st)) => {
                if let Some(t) = st.terms.get(term) {
                    for x in &t.then.mods {
                        modify(x, m, cx);
                    }
                }
            }
            Some(Item::RouteServerControl { asn }) => {
                let comms = current_communities(&m.attrs);
                let view = Communities {
                    standard: &comms.0,
                    extended: &[],
                    large: &comms.1,
                };
                if let RsControl::Pass { prepend, .. } = rs_control(*asn, s.receiver_as, &view) {
                    strip_rs_control(&mut m.attrs, *asn);
                    if prepend > 0 {
                        let first = m
                            .attrs
                            .as_path()
                            .and_then(|p| p.segments.first())
                            .filter(|x| x.kind == segment::AS_SEQUENCE)
                            .and_then(|x| x.asns.first().copied());
                        if let Some(a) = first {
                            for _ in 0..prepend {
                                prepend_as(&mut m.attrs, a);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}
