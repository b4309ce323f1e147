//! `show route`: a request turned into walks of the pipeline, and each route as the API
//! shows it (attributes decoded, the active path marked, why each path won or lost).

use super::peer_index;
use crate::state::Daemon;
use bytes::Bytes;
use ribshard_engine::pipeline::{MatchPath, RenderRoute, RouteQuery, Selection, ShownRoute};
use ribshard_mgmt::api::{
    Attributes, Reason, Route, RouteCount, RoutePath, RouteRequest, TableCount,
};
use ribshard_mgmt::birdwatcher::ROUTE_FORMAT;
use ribshard_mgmt::ApiError;
use ribshard_rib::{Ineligible, PathFilter, PathState, PathView, Within};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::update::segment;
use ribshard_wire::{parse_attributes_only, Family, Prefix, SessionParams};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Paths per chunk a shard answers: about a MiB rendered (the brief layout takes 150 octets
/// a path, JSON and `detail` nearer 400), two chunks in flight per shard. Larger chunks
/// mean fewer round trips; the budget is the daemon's memory while a table streams.
fn chunk_paths(text: bool, detail: bool) -> usize {
    if text && !detail {
        8192
    } else {
        1536
    }
}

/// How a route is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// JSON lines, one [`Route`] a line.
    Json,
    /// Junos' brief layout.
    Brief,
    Detail,
    /// Junos `terse`: a line a path.
    Terse,
    /// `receive-protocol` / `advertising-protocol`: Junos' Prefix / Nexthop / MED / Lclpref /
    /// AS path table.
    Table,
    /// JSON lines, one birdwatcher route a path (the looking glass's API).
    Birdwatcher,
}

impl Layout {
    fn of(q: &RouteRequest, text: bool) -> Layout {
        if q.format.as_deref() == Some(ROUTE_FORMAT) {
            return Layout::Birdwatcher;
        }
        let exchanged = q.receive_protocol.is_some() || q.advertising_protocol.is_some();
        match (text, q.detail, q.terse) {
            (false, _, _) => Layout::Json,
            (true, true, _) => Layout::Detail,
            (true, false, true) => Layout::Terse,
            (true, false, false) if exchanged => Layout::Table,
            (true, false, false) => Layout::Brief,
        }
    }

    /// The lines before a table's routes.
    fn header(self, table: &str) -> String {
        match self {
            Layout::Json | Layout::Birdwatcher => String::new(),
            Layout::Brief | Layout::Detail => crate::cli::render::table_header(table),
            Layout::Terse => format!(
                "\n{table}:\n+ = Active Route, * = Both\n\n{:<1} {:<1} {:<18} {:<1} {:>3} {:>10} {:>10}  {:<16}{}\n",
                "A", "V", "Destination", "P", "Prf", "Metric 1", "Metric 2", "Next hop", "AS path"
            ),
            Layout::Table => format!(
                "\n{table}:\n  {:<23} {:<20} {:>8} {:>10}    {}\n",
                "Prefix", "Nexthop", "MED", "Lclpref", "AS path"
            ),
        }
    }
}

/// How the walk's routes are written, in the shards that hold them.
#[derive(Debug)]
struct Renderer {
    names: PeerNames,
    layout: Layout,
    detail: bool,
    /// The clock when the request came, for the text layouts' route ages.
    now: u32,
}

impl RenderRoute for Renderer {
    fn render(&self, r: &ShownRoute, out: &mut Vec<u8>) {
        match self.layout {
            Layout::Brief => super::text::brief(r, &self.names, self.now, out),
            Layout::Detail => super::text::detail(r, &self.names, self.now, out),
            Layout::Terse => super::text::terse(r, out),
            Layout::Table => super::text::table(r, out),
            Layout::Birdwatcher => super::birdwatcher::routes(r, &self.names, out),
            Layout::Json => {
                let api = route(r, &self.names, self.detail);
                if serde_json::to_writer(&mut *out, &api).is_ok() {
                    out.push(b'\n');
                }
            }
        }
    }
}

/// Who each peer index is: address and AS.
pub(super) type PeerNames = Arc<Vec<(String, u32)>>;

/// Starts the walks of a request; the routes arrive on the channel in order.
pub(super) async fn routes(
    d: &Arc<Daemon>,
    q: RouteRequest,
) -> Result<mpsc::Receiver<Bytes>, ApiError> {
    let text = match q.format.as_deref() {
        None | Some("json" | ROUTE_FORMAT) => false,
        Some("text") => true,
        Some(f) => {
            return Err(ApiError::BadRequest(format!(
                "format {f}: one of json, text"
            )))
        }
    };
    let (select, families) = selection(&q)?;
    let layout = Layout::of(&q, text);
    let (names, filter, advertised, withheld, matcher) = {
        let live = d.live.read().await;
        let names: PeerNames = Arc::new(
            live.peers
                .iter()
                .map(|p| (p.address.to_string(), p.peer_as))
                .collect(),
        );
        let filter = PathFilter {
            peer: match &q.receive_protocol {
                Some(a) => Some(peer_index(&live, a)? as u32),
                None => None,
            },
            hidden: q.hidden,
            // Only the detail and JSON layouts say why a path won or lost.
            explain: matches!(layout, Layout::Detail | Layout::Json) && !q.count,
            rejected: q.rejected,
        };
        let member_of = |a: &String| -> Result<_, ApiError> {
            let i = peer_index(&live, a)?;
            let group = live
                .sessions
                .peers
                .get(i)
                .and_then(|h| h.status().group)
                .ok_or_else(|| {
                    ApiError::NotFound(format!(
                        "neighbor {a} is not Established: nothing is advertised to it"
                    ))
                })?;
            Ok((group.group, i as u32))
        };
        let advertised = q.advertising_protocol.as_ref().map(member_of).transpose()?;
        let withheld = q.not_advertised.as_ref().map(member_of).transpose()?;
        let local = live.peers.iter().map(|p| p.port == 0).collect();
        let matcher = super::route_filter::PathMatch::of(&q, local)?
            .map(|m| Arc::new(m) as Arc<dyn MatchPath>);
        (names, filter, advertised, withheld, matcher)
    };
    let shards = d.pipeline.shards();
    if let Some(s) = q.shard.filter(|s| *s >= shards) {
        return Err(ApiError::BadRequest(format!(
            "shard {s}: there are {shards} shard(s), 0 to {}",
            shards - 1
        )));
    }
    let (tx, rx) = mpsc::channel(1);
    let pipeline = d.pipeline.clone();
    let render: Option<Arc<dyn RenderRoute>> = (!q.count).then(|| {
        Arc::new(Renderer {
            names,
            layout,
            detail: q.detail,
            now: ribshard_rib::clock::now(),
        }) as Arc<dyn RenderRoute>
    });
    let only = q.shard;
    let max_paths = chunk_paths(text, q.detail);
    // The walk of one table; counted, its routes are not rendered.
    let query = move |family: Family, max_paths: usize| RouteQuery {
        select: match select {
            Selection::Table(_, within) => Selection::Table(family, within),
            other => other,
        },
        after: None,
        max_paths,
        filter,
        advertised,
        withheld,
        render: render.clone(),
        matcher: matcher.clone(),
    };
    if q.count {
        tokio::spawn(async move {
            let mut counts = RouteCount::default();
            for family in families {
                let mut walk = pipeline.walk_routes(query(family, 16384), only);
                let mut c = TableCount {
                    table: table_name(family).into(),
                    ..TableCount::default()
                };
                while let Some(batch) = walk.next().await {
                    for r in &batch {
                        c.destinations += 1;
                        c.routes += r.view.paths.len() as u64;
                        c.active += r
                            .view
                            .paths
                            .iter()
                            .filter(|p| matches!(p.state, PathState::Active { .. }))
                            .count() as u64;
                    }
                }
                counts.tables.push(c);
            }
            let out = if text {
                crate::cli::render::route_count(&counts).into_bytes()
            } else {
                let mut v = serde_json::to_vec(&counts).unwrap_or_default();
                v.push(b'\n');
                v
            };
            let _ = tx.send(Bytes::from(out)).await;
        });
        return Ok(rx);
    }
    tokio::spawn(async move {
        for family in families {
            let mut walk = pipeline.walk_routes(query(family, max_paths), only);
            let mut first = true;
            while let Some(batch) = walk.next().await {
                if batch.is_empty() {
                    continue;
                }
                let mut buf =
                    Vec::with_capacity(batch.iter().map(|r| r.rendered.len()).sum::<usize>() + 64);
                if first {
                    buf.extend_from_slice(layout.header(table_name(family)).as_bytes());
                }
                first = false;
                for r in &batch {
                    buf.extend_from_slice(&r.rendered);
                }
                // The client went away: stop walking.
                if tx.send(Bytes::from(buf)).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(rx)
}

/// Checks a route request as [`routes`] does before any walk starts (its selection and its
/// filters), with no daemon: what the fuzz target of the API's request parser drives.
pub fn check_request(q: &RouteRequest) -> Result<(), ApiError> {
    selection(q)?;
    super::route_filter::PathMatch::of(q, Vec::new())?;
    Ok(())
}

/// What a request selects, and in which tables.
fn selection(q: &RouteRequest) -> Result<(Selection, Vec<Family>), ApiError> {
    let table = match q.table.as_deref() {
        None => None,
        Some("inet.0") => Some(Family::Ipv4Unicast),
        Some("inet6.0") => Some(Family::Ipv6Unicast),
        Some(t) => {
            return Err(ApiError::BadRequest(format!(
                "table {t}: ribshard has inet.0 and inet6.0"
            )))
        }
    };
    let all = || match table {
        Some(f) => vec![f],
        None => vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
    };
    let Some(dest) = q.destination.as_deref() else {
        if q.match_type.is_some() {
            return Err(ApiError::BadRequest(
                "exact, longer and orlonger need a prefix".into(),
            ));
        }
        return Ok((Selection::Table(Family::Ipv4Unicast, Within::All), all()));
    };
    let (prefix, is_prefix) = parse_destination(dest)?;
    if table.is_some_and(|t| t != prefix.family()) {
        return Err(ApiError::BadRequest(format!(
            "{dest} is not in table {}",
            q.table.as_deref().unwrap_or_default()
        )));
    }
    let family = vec![prefix.family()];
    match (q.match_type.as_deref(), is_prefix) {
        (None, false) => Ok((Selection::Longest(addr_of(&prefix)), family)),
        (None | Some("exact"), true) => Ok((Selection::Exact(prefix), family)),
        (Some("longer"), _) => Ok((
            Selection::Table(
                prefix.family(),
                Within::Under {
                    prefix,
                    or_equal: false,
                },
            ),
            family,
        )),
        (Some("orlonger"), _) => Ok((
            Selection::Table(
                prefix.family(),
                Within::Under {
                    prefix,
                    or_equal: true,
                },
            ),
            family,
        )),
        (Some("exact"), false) => Ok((Selection::Exact(prefix), family)),
        (Some(m), _) => Err(ApiError::BadRequest(format!(
            "match {m}: one of exact, longer, orlonger"
        ))),
    }
}

/// A prefix (`true`), or an address as a host prefix (`false`).
pub(super) fn parse_destination(s: &str) -> Result<(Prefix, bool), ApiError> {
    let bad = || ApiError::BadRequest(format!("{s}: not a prefix or an address"));
    match s.split_once('/') {
        Some((a, l)) => {
            let len: u8 = l.parse().map_err(|_| bad())?;
            let p = match a.parse::<IpAddr>().map_err(|_| bad())? {
                IpAddr::V4(v4) => Prefix::v4(v4, len),
                IpAddr::V6(v6) => Prefix::v6(v6, len),
            }
            .ok_or_else(bad)?;
            Ok((p.masked(), true))
        }
        None => match s.parse::<IpAddr>().map_err(|_| bad())? {
            IpAddr::V4(v4) => Ok((Prefix::v4(v4, 32).ok_or_else(bad)?, false)),
            IpAddr::V6(v6) => Ok((Prefix::v6(v6, 128).ok_or_else(bad)?, false)),
        },
    }
}

fn addr_of(p: &Prefix) -> IpAddr {
    match *p {
        Prefix::V4 { addr, .. } => IpAddr::V4(Ipv4Addr::from(addr)),
        Prefix::V6 { addr, .. } => IpAddr::V6(Ipv6Addr::from(addr)),
    }
}

pub(super) fn table_name(f: Family) -> &'static str {
    match f {
        Family::Ipv4Unicast => "inet.0",
        Family::Ipv6Unicast => "inet6.0",
    }
}

/// What the group sends for a route (`advertising-protocol`), decoded: the attributes and
/// the next hop.
pub(super) fn sent(r: &ShownRoute) -> Option<(PathAttributes, String)> {
    r.advertised.as_ref().map(|(e, params)| {
        let attrs = decode(&e.attrs, params);
        let nh = if e.mp_next_hop.is_empty() {
            attrs.next_hop().map(|a| a.to_string()).unwrap_or_default()
        } else {
            next_hop(&e.mp_next_hop)
        };
        (attrs, nh)
    })
}

/// A route as the API shows it.
fn route(r: &ShownRoute, names: &PeerNames, detail: bool) -> Route {
    let prefix = r.view.prefix;
    let sent = sent(r);
    let paths = r
        .view
        .paths
        .iter()
        .map(|p| path(p, names, detail || sent.is_some(), sent.clone()))
        .collect();
    Route {
        prefix: prefix.to_string(),
        table: table_name(prefix.family()).into(),
        shard: r.shard,
        paths,
    }
}

fn decode(raw: &[u8], params: &SessionParams) -> PathAttributes {
    match parse_attributes_only(raw, params) {
        Ok(p) => PathAttributes::from_view(&p.attrs, params),
        Err(_) => PathAttributes::default(),
    }
}

fn path(
    v: &PathView,
    names: &PeerNames,
    detail: bool,
    advertised: Option<(PathAttributes, String)>,
) -> RoutePath {
    let (attrs, nh) = match advertised {
        Some(a) => a,
        None => (v.path.attrs.attributes(), next_hop(v.path.attrs.next_hop())),
    };
    let (state, reason) = match v.state {
        PathState::Active { over } => ("active", over.map(|s| reason(s.id(), s.describe(), false))),
        PathState::Inactive { step, in_group } => (
            "inactive",
            step.map(|s| reason(s.id(), s.describe(), in_group)),
        ),
        PathState::Ineligible(Ineligible::Loop) => (
            "hidden",
            Some(reason(
                "loop",
                "AS path, originator or cluster list loop",
                false,
            )),
        ),
        PathState::Ineligible(Ineligible::Rejected) => (
            "hidden",
            Some(reason("rejected", "Rejected by import policy", false)),
        ),
        PathState::Ineligible(Ineligible::Unresolved) => (
            "hidden",
            Some(reason(
                "next-hop-unresolved",
                "Unusable path (next hop unresolved)",
                false,
            )),
        ),
    };
    let (from, peer_as) = names
        .get(v.path.peer as usize)
        .cloned()
        .unwrap_or_else(|| (format!("peer {}", v.path.peer), 0));
    RoutePath {
        state: state.into(),
        reason,
        multipath: v.multipath,
        stale: v.path.stale(),
        from,
        peer_as,
        peer_router_id: Ipv4Addr::from(v.peer.router_id).to_string(),
        path_id: v.path.path_id,
        age_seconds: ribshard_rib::clock::age(v.path.since()).as_secs(),
        next_hop: nh,
        as_path: attrs.as_path().map(as_path_text).unwrap_or_default(),
        origin: attrs
            .origin()
            .map_or_else(|| "INCOMPLETE".into(), |o| o.to_string()),
        local_pref: attrs.local_pref(),
        med: attrs.med(),
        communities: attrs
            .communities()
            .iter()
            .map(|c| format!("{}:{}", c >> 16, c & 0xffff))
            .collect(),
        large_communities: attrs
            .large_communities()
            .iter()
            .map(|[a, b, c]| format!("{a}:{b}:{c}"))
            .collect(),
        import_policy: v.import.clone(),
        validation_state: v.validity.map(|s| s.name().to_string()),
        attributes: detail.then(|| other_attributes(&attrs)),
    }
}

fn reason(step: &str, description: &str, in_group: bool) -> Reason {
    Reason {
        step: step.into(),
        description: description.into(),
        in_group,
    }
}

/// A next hop as received: IPv4, or IPv6 (the global address when a link-local follows).
pub(super) fn next_hop(b: &[u8]) -> String {
    match b.len() {
        4 => {
            <[u8; 4]>::try_from(b).map_or_else(|_| String::new(), |a| Ipv4Addr::from(a).to_string())
        }
        16 | 32 => b
            .get(..16)
            .and_then(|g| <[u8; 16]>::try_from(g).ok())
            .map_or_else(String::new, |a| Ipv6Addr::from(a).to_string()),
        _ => String::new(),
    }
}

/// An AS path as Junos prints it: sequences plain, sets in braces, confederation segments
/// in parentheses and brackets.
pub(super) fn as_path_text(p: &AsPath) -> String {
    as_path_segments(p).join(" ")
}

/// An AS path in words: each AS of a sequence, each set or confederation segment whole.
pub(super) fn as_path_segments(p: &AsPath) -> Vec<String> {
    let mut parts = Vec::new();
    for s in &p.segments {
        let asns = s.asns.iter().map(u32::to_string);
        let whole = |open: &str, close: &str| {
            format!(
                "{open}{}{close}",
                asns.clone().collect::<Vec<_>>().join(" ")
            )
        };
        match s.kind {
            segment::AS_SET => parts.push(whole("{", "}")),
            segment::AS_CONFED_SEQUENCE => parts.push(whole("(", ")")),
            segment::AS_CONFED_SET => parts.push(whole("[", "]")),
            _ => parts.extend(asns),
        }
    }
    parts
}

fn other_attributes(a: &PathAttributes) -> Attributes {
    let mut out = Attributes::default();
    for attr in &a.list {
        match &attr.value {
            AttrValue::ExtCommunities(v) => {
                out.extended_communities = v.iter().map(ext_community).collect();
            }
            AttrValue::AtomicAggregate => out.atomic_aggregate = true,
            AttrValue::Aggregator(g) | AttrValue::As4Aggregator(g) => {
                out.aggregator = Some(format!("{} {}", g.asn, g.address));
            }
            AttrValue::OriginatorId(id) => out.originator_id = Some(id.to_string()),
            AttrValue::ClusterList(v) => {
                out.cluster_list = v.iter().map(|c| Ipv4Addr::from(*c).to_string()).collect();
            }
            AttrValue::Otc(asn) => out.otc = Some(*asn),
            AttrValue::Unknown { type_code, value } => {
                let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
                out.unknown.push(format!("{type_code}:{hex}"));
            }
            _ => {}
        }
    }
    out
}

/// Route targets and origins as Junos writes them (`target:65000:100`), others in hex.
pub(super) fn ext_community(c: &[u8; 8]) -> String {
    match target_or_origin(c[0], c) {
        Some((origin, global, local)) => {
            let kind = if origin { "origin" } else { "target" };
            format!("{kind}:{global}:{local}")
        }
        None => c.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// A route target or route origin (RFC 4360 sections 4 and 5, RFC 5668): whether it is an
/// origin, and its global and local administrators as text; `None` for any other kind.
/// `t`: the type octet as the caller reads it (the looking glass ignores the transitive bit).
pub(super) fn target_or_origin(t: u8, c: &[u8; 8]) -> Option<(bool, String, String)> {
    let [_, sub, a, b, x, y, z, w] = *c;
    let origin = match sub {
        0x02 => false,
        0x03 => true,
        _ => return None,
    };
    let (global, local) = match t {
        0x00 => (
            u16::from_be_bytes([a, b]).to_string(),
            u32::from_be_bytes([x, y, z, w]).to_string(),
        ),
        0x01 => (
            Ipv4Addr::new(a, b, x, y).to_string(),
            u16::from_be_bytes([z, w]).to_string(),
        ),
        0x02 => (
            u32::from_be_bytes([a, b, x, y]).to_string(),
            u16::from_be_bytes([z, w]).to_string(),
        ),
        _ => return None,
    };
    Some((origin, global, local))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_select_as_junos_does() {
        let q = |d: Option<&str>, m: Option<&str>, t: Option<&str>| RouteRequest {
            destination: d.map(Into::into),
            match_type: m.map(Into::into),
            table: t.map(Into::into),
            ..RouteRequest::default()
        };
        let p = |s: &str| parse_destination(s).unwrap().0;
        assert_eq!(
            selection(&q(Some("10.0.0.0/8"), None, None)).unwrap(),
            (Selection::Exact(p("10.0.0.0/8")), vec![Family::Ipv4Unicast])
        );
        assert_eq!(
            selection(&q(Some("10.1.2.3"), None, None)).unwrap().0,
            Selection::Longest("10.1.2.3".parse().unwrap())
        );
        assert_eq!(
            selection(&q(Some("10.1.0.0/16"), Some("orlonger"), None))
                .unwrap()
                .0,
            Selection::Table(
                Family::Ipv4Unicast,
                Within::Under {
                    prefix: p("10.1.0.0/16"),
                    or_equal: true
                }
            )
        );
        assert_eq!(
            selection(&q(None, None, Some("inet6.0"))).unwrap().1,
            vec![Family::Ipv6Unicast]
        );
        assert_eq!(selection(&q(None, None, None)).unwrap().1.len(), 2);
        // Host bits are cleared, as Junos does.
        assert_eq!(p("10.1.2.3/16"), p("10.1.0.0/16"));
        for bad in [
            q(Some("10.0.0.0/33"), None, None),
            q(Some("nonsense"), None, None),
            q(None, None, Some("inet.3")),
            q(Some("10.0.0.0/8"), Some("shorter"), None),
            q(Some("2001:db8::/32"), None, Some("inet.0")),
            q(None, Some("longer"), None),
        ] {
            assert!(
                matches!(selection(&bad), Err(ApiError::BadRequest(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn extended_communities_and_paths_read_as_in_junos() {
        assert_eq!(
            ext_community(&[0x00, 0x02, 0xfd, 0xe8, 0, 0, 0, 100]),
            "target:65000:100"
        );
        assert_eq!(
            ext_community(&[0x01, 0x03, 192, 0, 2, 1, 0, 7]),
            "origin:192.0.2.1:7"
        );
        assert_eq!(
            ext_community(&[0x43, 0, 0, 0, 0, 0, 0, 1]),
            "4300000000000001"
        );
        let p = AsPath {
            segments: vec![
                ribshard_wire::attributes::AsSegment {
                    kind: segment::AS_SEQUENCE,
                    asns: vec![65001, 65002],
                },
                ribshard_wire::attributes::AsSegment {
                    kind: segment::AS_SET,
                    asns: vec![1, 2],
                },
            ],
        };
        assert_eq!(as_path_text(&p), "65001 65002 {1 2}");
    }
}
