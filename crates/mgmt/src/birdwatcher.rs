//! The birdwatcher API under `/birdwatcher`: the JSON that alice-lg/birdwatcher makes of
//! BIRD's `show protocols` and `show route`, which Alice-LG's `birdwatcher` source (type
//! `single_table`) reads, so a route server's members get a looking glass with no BIRD
//! behind it. Answered from the same backend as `/v1`: counts from the sessions, routes from
//! the shards' chunked walks, streamed (a whole table is never held to answer).
//!
//! What each BIRD word means here: a protocol is a neighbor, named `R` and its address with
//! every other character `_` (`R192_0_2_1`; the address itself is accepted too); imported
//! routes are the paths import policy accepted, filtered the ones it rejected (kept, as
//! BIRD's `import keep filtered`), exported what the neighbor's update group advertises to
//! it, noexport the active paths it does not. Every time is RFC 3339 in UTC: Alice-LG's
//! `servertime`, `servertime_short` and `servertime_ext` must all be
//! `2006-01-02T15:04:05.999999999Z07:00` (docs/OPERATIONS.md).

use crate::api::{Neighbor, RouteCount, RouteRequest};
use crate::server::{stream, ApiError, Backend};
use crate::time::rfc3339;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// The route format the backend renders for these endpoints: JSON lines, one [`Route`] a
/// path.
pub const ROUTE_FORMAT: &str = "birdwatcher";

/// How long a reply may be taken as current (its `ttl`); nothing here is cached, so this
/// only tells a client's own cache when to ask again.
const TTL: Duration = Duration::from_secs(30);

/// A neighbor's protocol name: `R` and its address, every character but letters and digits
/// made `_` (an IPv4 address has no `__`, an IPv6 one with three colons always has: no two
/// addresses share a name).
pub fn protocol_id(address: &str) -> String {
    let mut id = String::with_capacity(address.len() + 1);
    id.push('R');
    id.extend(
        address
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
    );
    id
}

/// One path as birdwatcher writes a route of `show route all`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Route {
    pub network: String,
    /// The next hop.
    pub gateway: String,
    /// The protocol (neighbor) it came from.
    pub from_protocol: String,
    /// The neighbor's address.
    pub learnt_from: String,
    pub interface: String,
    /// BIRD's preference; the BGP route preference here (Junos: 170).
    pub metric: u32,
    /// The active path.
    pub primary: bool,
    /// When it arrived.
    pub age: String,
    #[serde(rename = "type")]
    pub kind: Vec<String>,
    pub bgp: Bgp,
}

/// A path's attributes, as birdwatcher decodes them (numbers in AS paths, MED and
/// LOCAL_PREF are strings there; communities are numbers).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bgp {
    /// `IGP`, `EGP` or `Incomplete`.
    pub origin: String,
    /// Each AS a string; an AS_SET as one `{1 2}`.
    pub as_path: Vec<String>,
    pub next_hop: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_pref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub med: Option<String>,
    pub communities: Vec<[u32; 2]>,
    pub large_communities: Vec<[u32; 3]>,
    /// BIRD's `(rt, 65000, 1)` as `["rt", "65000", "1"]`.
    pub ext_communities: Vec<[String; 3]>,
    /// Only to Customer (RFC 9234).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otc: Option<String>,
}

struct BwState<B> {
    backend: Arc<B>,
}

impl<B> Clone for BwState<B> {
    fn clone(&self) -> Self {
        BwState {
            backend: self.backend.clone(),
        }
    }
}

/// The endpoints, to merge into the API's router (read-only, every one).
pub fn router<B: Backend>(backend: Arc<B>) -> Router {
    Router::new()
        .route("/birdwatcher/version", get(version))
        .route("/birdwatcher/status", get(status::<B>))
        .route("/birdwatcher/protocols", get(protocols::<B>))
        .route("/birdwatcher/protocols/bgp", get(protocols::<B>))
        .route("/birdwatcher/protocols/short", get(protocols_short::<B>))
        .route("/birdwatcher/routes/protocol/{id}", get(received::<B>))
        .route("/birdwatcher/routes/peer/{peer}", get(received::<B>))
        .route("/birdwatcher/routes/filtered/{id}", get(filtered::<B>))
        .route("/birdwatcher/routes/export/{id}", get(exported::<B>))
        .route("/birdwatcher/routes/noexport/{id}", get(not_exported::<B>))
        .route("/birdwatcher/routes/table/{table}", get(table::<B>))
        .route(
            "/birdwatcher/routes/table/{table}/filtered",
            get(table_filtered::<B>),
        )
        .route(
            "/birdwatcher/routes/table/{table}/peer/{peer}",
            get(table_peer::<B>),
        )
        .route("/birdwatcher/routes/prefix", get(prefixed::<B>))
        .route("/birdwatcher/route/net/{net}", get(net::<B>))
        .route(
            "/birdwatcher/route/net/{net}/table/{table}",
            get(net_table::<B>),
        )
        .route(
            "/birdwatcher/routes/count/protocol/{id}",
            get(count_protocol::<B>),
        )
        .route(
            "/birdwatcher/routes/count/primary/{id}",
            get(count_primary::<B>),
        )
        .route(
            "/birdwatcher/routes/count/table/{table}",
            get(count_table::<B>),
        )
        .with_state(BwState { backend })
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What every birdwatcher reply begins with: `api` (its version, and that nothing came
/// from a cache) and `ttl`.
fn envelope() -> Map<String, Value> {
    let at = now();
    let mut m = Map::new();
    m.insert(
        "api".into(),
        json!({
            "Version": concat!("ribshard ", env!("CARGO_PKG_VERSION")),
            "result_from_cache": false,
            "cache_status": {
                "cached_at": { "date": rfc3339(at), "timezone_type": "UTC", "timezone": "UTC" },
                "orig_ttl": TTL.as_secs(),
            },
        }),
    );
    m.insert("ttl".into(), json!(rfc3339(at + TTL.as_secs_f64())));
    m
}

async fn version() -> Json<Value> {
    Json(json!(concat!("ribshard ", env!("CARGO_PKG_VERSION"))))
}

async fn status<B: Backend>(State(s): State<BwState<B>>) -> Json<Value> {
    let sum = s.backend.summary().await;
    let mut m = envelope();
    let started = rfc3339(sum.started_at);
    m.insert(
        "status".into(),
        json!({
            "current_server": rfc3339(now()),
            "last_reboot": started,
            "last_reconfig": sum.reconfigured_at.map_or(started.clone(), rfc3339),
            "version": format!("ribshard {}", sum.version),
            "message": "Daemon is up and running",
            "router_id": sum.router_id,
        }),
    );
    Json(Value::Object(m))
}

/// BIRD's protocol state: `up` once Established, `down` when disabled, `start` otherwise.
fn bird_state(n: &Neighbor) -> &'static str {
    match (n.disabled, n.state.as_str()) {
        (true, _) => "down",
        (false, "Established") => "up",
        _ => "start",
    }
}

/// BIRD's table for a family.
fn channel(table: &str) -> &'static str {
    if table == "inet6.0" {
        "ipv6"
    } else {
        "ipv4"
    }
}

fn protocol(n: &Neighbor, at: f64) -> Value {
    let (mut imported, mut filtered, mut exported, mut preferred) = (0, 0, 0, 0);
    let mut channels = Map::new();
    // BIRD has a channel for each family the session runs (all configured, before it is up).
    let runs = |t: &str| {
        n.capabilities
            .as_ref()
            .is_none_or(|c| c.tables.iter().any(|x| x == t))
    };
    for f in n.families.iter().filter(|f| runs(&f.table)) {
        let adv = f.advertised.unwrap_or(0);
        imported += f.accepted;
        filtered += f.received.saturating_sub(f.accepted);
        exported += adv;
        preferred += f.active;
        channels.insert(
            channel(&f.table).into(),
            json!({ "routes_count": {
                "imported": f.accepted,
                "filtered": f.received.saturating_sub(f.accepted),
                "exported": adv,
                "preferred": f.active,
            }}),
        );
    }
    json!({
        "bird_protocol": "BGP",
        "protocol": protocol_id(&n.address),
        "table": "master",
        "state": bird_state(n),
        "state_changed": rfc3339(at - n.state_seconds),
        "connection": n.state,
        "bgp_state": n.state,
        "info": n.state,
        "description": n.description,
        "neighbor_address": n.address,
        "neighbor_as": n.peer_as,
        "neighbor_id": n.router_id.clone().unwrap_or_default(),
        "local_as": n.local_as,
        "source_address": n.local_address.clone().unwrap_or_default(),
        "hold_timer": n.timers.hold_time.unwrap_or(n.timers.hold_time_configured),
        "keepalive_timer": n.timers.keepalive.unwrap_or(0),
        "input_filter": n.import.join(" "),
        "output_filter": n.export.join(" "),
        "last_error": n.last_error.as_ref().map(|e| e.message.clone()).unwrap_or_default(),
        "routes": {
            "imported": imported,
            "filtered": filtered,
            "exported": exported,
            "preferred": preferred,
        },
        "channels": channels,
        "group": n.group,
    })
}

async fn protocols<B: Backend>(State(s): State<BwState<B>>) -> Result<Json<Value>, ApiError> {
    let at = now();
    let list: Map<String, Value> = s
        .backend
        .neighbors(None)
        .await?
        .iter()
        .map(|n| (protocol_id(&n.address), protocol(n, at)))
        .collect();
    let mut m = envelope();
    m.insert("protocols".into(), Value::Object(list));
    Ok(Json(Value::Object(m)))
}

async fn protocols_short<B: Backend>(State(s): State<BwState<B>>) -> Result<Json<Value>, ApiError> {
    let at = now();
    let list: Map<String, Value> = s
        .backend
        .neighbors(None)
        .await?
        .iter()
        .map(|n| {
            (
                protocol_id(&n.address),
                json!({
                    "proto": "BGP",
                    "table": "master",
                    "state": bird_state(n),
                    "since": rfc3339(at - n.state_seconds),
                    "info": n.state,
                }),
            )
        })
        .collect();
    let mut m = envelope();
    m.insert("protocols".into(), Value::Object(list));
    Ok(Json(Value::Object(m)))
}

/// A part of a long list (`?offset=N&limit=M`, in routes): a looking glass pages a member's
/// routes without the daemon or the client holding them all.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
struct Page {
    offset: usize,
    limit: Option<usize>,
}

/// The neighbor a protocol name (or an address) names.
async fn neighbor<B: Backend>(b: &B, id: &str) -> Result<Neighbor, ApiError> {
    b.neighbors(None)
        .await?
        .into_iter()
        .find(|n| n.address == id || protocol_id(&n.address) == id)
        .ok_or_else(|| ApiError::NotFound(format!("protocol {id}: no such neighbor")))
}

/// A birdwatcher table name: `master` (both), `master4` or `master6`, or Junos' names.
fn table_of(t: &str) -> Result<Option<String>, ApiError> {
    match t {
        "master" => Ok(None),
        "master4" | "inet.0" => Ok(Some("inet.0".into())),
        "master6" | "inet6.0" => Ok(Some("inet6.0".into())),
        _ => Err(ApiError::NotFound(format!(
            "table {t}: there are master (master4 and master6)"
        ))),
    }
}

/// The routes a request selects, as birdwatcher's `{"api", "ttl", "routes": [...]}`,
/// written as the shards' walk goes: each chunk's JSON lines become array elements.
async fn routes_reply<B: Backend>(
    b: &B,
    q: RouteRequest,
    page: Page,
) -> Result<Response, ApiError> {
    let rx = b
        .routes(RouteRequest {
            format: Some(ROUTE_FORMAT.into()),
            ..q
        })
        .await?;
    Ok(stream("application/json", wrap(rx, page)))
}

/// No routes, in the same envelope (a neighbor that is not up is advertised nothing).
fn no_routes(page: Page) -> Response {
    let (tx, rx) = mpsc::channel(1);
    drop(tx);
    stream("application/json", wrap(rx, page))
}

fn wrap(mut rx: mpsc::Receiver<Bytes>, page: Page) -> mpsc::Receiver<Bytes> {
    let (tx, out) = mpsc::channel(2);
    let head = {
        let mut v = serde_json::to_vec(&Value::Object(envelope())).unwrap_or_default();
        v.pop(); // the closing brace: the routes follow
        v.extend_from_slice(b",\"routes\":[");
        v
    };
    tokio::spawn(async move {
        if tx.send(Bytes::from(head)).await.is_err() {
            return;
        }
        let (mut seen, mut sent, mut more) = (0usize, 0usize, false);
        while let Some(chunk) = rx.recv().await {
            let mut buf = Vec::with_capacity(chunk.len() + 16);
            for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                seen += 1;
                if seen <= page.offset {
                    continue;
                }
                if page.limit.is_some_and(|l| sent >= l) {
                    more = true;
                    break;
                }
                if sent > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(line);
                sent += 1;
            }
            if !buf.is_empty() && tx.send(Bytes::from(buf)).await.is_err() {
                return;
            }
            // Past the page: dropping the receiver ends the walk.
            if more {
                break;
            }
        }
        let tail = match page.limit {
            Some(limit) => format!(
                "],\"pagination\":{{\"offset\":{},\"limit\":{limit},\"returned\":{sent},\"more\":{more}}}}}",
                page.offset
            ),
            None => "]}".into(),
        };
        let _ = tx.send(Bytes::from(tail)).await;
    });
    out
}

/// A neighbor's routes: `select` makes the request from its address. Only an Established
/// neighbor is advertised anything (`up_only`): for any other the list is empty.
async fn neighbor_routes<B: Backend>(
    b: &B,
    id: &str,
    page: Page,
    up_only: bool,
    select: impl FnOnce(String) -> RouteRequest,
) -> Result<Response, ApiError> {
    let n = neighbor(b, id).await?;
    if up_only && n.state != "Established" {
        return Ok(no_routes(page));
    }
    routes_reply(b, select(n.address), page).await
}

async fn received<B: Backend>(
    State(s): State<BwState<B>>,
    Path(id): Path<String>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    neighbor_routes(&*s.backend, &id, page, false, |a| RouteRequest {
        receive_protocol: Some(a),
        ..RouteRequest::default()
    })
    .await
}

async fn filtered<B: Backend>(
    State(s): State<BwState<B>>,
    Path(id): Path<String>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    neighbor_routes(&*s.backend, &id, page, false, |a| RouteRequest {
        receive_protocol: Some(a),
        rejected: true,
        ..RouteRequest::default()
    })
    .await
}

async fn exported<B: Backend>(
    State(s): State<BwState<B>>,
    Path(id): Path<String>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    neighbor_routes(&*s.backend, &id, page, true, |a| RouteRequest {
        advertising_protocol: Some(a),
        ..RouteRequest::default()
    })
    .await
}

async fn not_exported<B: Backend>(
    State(s): State<BwState<B>>,
    Path(id): Path<String>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    neighbor_routes(&*s.backend, &id, page, true, |a| RouteRequest {
        not_advertised: Some(a),
        ..RouteRequest::default()
    })
    .await
}

/// A table's routes (`master`, `master4`, `master6`), with `q`'s other fields.
async fn table_routes<B: Backend>(
    b: &B,
    t: &str,
    page: Page,
    q: RouteRequest,
) -> Result<Response, ApiError> {
    let q = RouteRequest {
        table: table_of(t)?,
        ..q
    };
    routes_reply(b, q, page).await
}

async fn table<B: Backend>(
    State(s): State<BwState<B>>,
    Path(t): Path<String>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    table_routes(&*s.backend, &t, page, RouteRequest::default()).await
}

async fn table_filtered<B: Backend>(
    State(s): State<BwState<B>>,
    Path(t): Path<String>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    let q = RouteRequest {
        rejected: true,
        ..RouteRequest::default()
    };
    table_routes(&*s.backend, &t, page, q).await
}

async fn table_peer<B: Backend>(
    State(s): State<BwState<B>>,
    Path((t, peer)): Path<(String, String)>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    let q = RouteRequest {
        receive_protocol: Some(neighbor(&*s.backend, &peer).await?.address),
        ..RouteRequest::default()
    };
    table_routes(&*s.backend, &t, page, q).await
}

#[derive(Deserialize)]
struct PrefixQuery {
    prefix: Option<String>,
    #[serde(flatten)]
    page: PageFields,
}

/// [`Page`] inside another query (serde's flatten needs plain fields).
#[derive(Default, Deserialize)]
struct PageFields {
    offset: Option<usize>,
    limit: Option<usize>,
}

async fn prefixed<B: Backend>(
    State(s): State<BwState<B>>,
    Query(q): Query<PrefixQuery>,
) -> Result<Response, ApiError> {
    let prefix = q
        .prefix
        .ok_or_else(|| ApiError::BadRequest("need a prefix as single query parameter".into()))?;
    let page = Page {
        offset: q.page.offset.unwrap_or(0),
        limit: q.page.limit,
    };
    let r = RouteRequest {
        destination: Some(prefix),
        ..RouteRequest::default()
    };
    routes_reply(&*s.backend, r, page).await
}

/// BIRD's `show route for NET`: the longest match of an address, or the prefix given.
async fn net<B: Backend>(
    State(s): State<BwState<B>>,
    Path(net): Path<String>,
) -> Result<Response, ApiError> {
    let q = RouteRequest {
        destination: Some(net),
        ..RouteRequest::default()
    };
    routes_reply(&*s.backend, q, Page::default()).await
}

async fn net_table<B: Backend>(
    State(s): State<BwState<B>>,
    Path((net, t)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let q = RouteRequest {
        destination: Some(net),
        table: table_of(&t)?,
        ..RouteRequest::default()
    };
    routes_reply(&*s.backend, q, Page::default()).await
}

/// Counts a request's routes in the daemon: paths, or only active ones.
async fn count<B: Backend>(b: &B, q: RouteRequest, active: bool) -> Result<Json<Value>, ApiError> {
    let mut rx = b.routes(RouteRequest { count: true, ..q }).await?;
    let mut body = Vec::new();
    while let Some(chunk) = rx.recv().await {
        body.extend_from_slice(&chunk);
    }
    let counts: RouteCount = serde_json::from_slice(&body)
        .map_err(|e| ApiError::Internal(format!("route count: {e}")))?;
    let n: u64 = counts
        .tables
        .iter()
        .map(|t| if active { t.active } else { t.routes })
        .sum();
    let mut m = envelope();
    m.insert("routes".into(), json!(n));
    Ok(Json(Value::Object(m)))
}

/// A neighbor's accepted paths, or (`active`) those that are the active path, counted.
async fn count_neighbor<B: Backend>(
    b: &B,
    id: &str,
    active: bool,
) -> Result<Json<Value>, ApiError> {
    let q = RouteRequest {
        receive_protocol: Some(neighbor(b, id).await?.address),
        ..RouteRequest::default()
    };
    count(b, q, active).await
}

async fn count_protocol<B: Backend>(
    State(s): State<BwState<B>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    count_neighbor(&*s.backend, &id, false).await
}

async fn count_primary<B: Backend>(
    State(s): State<BwState<B>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    count_neighbor(&*s.backend, &id, true).await
}

async fn count_table<B: Backend>(
    State(s): State<BwState<B>>,
    Path(t): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let q = RouteRequest {
        table: table_of(&t)?,
        ..RouteRequest::default()
    };
    count(&*s.backend, q, false).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_are_distinct_and_safe() {
        assert_eq!(protocol_id("192.0.2.1"), "R192_0_2_1");
        assert_eq!(protocol_id("2001:db8::1"), "R2001_db8__1");
        assert_ne!(protocol_id("::1:2:3"), protocol_id("1.2.3.0"));
    }

    #[tokio::test]
    async fn routes_become_one_array_paged() {
        let (tx, rx) = mpsc::channel(4);
        tx.send(Bytes::from_static(b"{\"a\":1}\n{\"a\":2}\n"))
            .await
            .unwrap();
        tx.send(Bytes::from_static(b"{\"a\":3}\n")).await.unwrap();
        tx.send(Bytes::from_static(b"{\"a\":4}\n")).await.unwrap();
        drop(tx);
        let read = |mut out: mpsc::Receiver<Bytes>| async move {
            let mut v = Vec::new();
            while let Some(c) = out.recv().await {
                v.extend_from_slice(&c);
            }
            serde_json::from_slice::<Value>(&v).unwrap()
        };
        let all = read(wrap(rx, Page::default())).await;
        assert_eq!(all["routes"], json!([{"a":1},{"a":2},{"a":3},{"a":4}]));
        assert!(all["api"]["Version"].is_string());
        assert_eq!(all["api"]["result_from_cache"], json!(false));

        let (tx, rx) = mpsc::channel(4);
        tx.send(Bytes::from_static(b"{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"))
            .await
            .unwrap();
        drop(tx);
        let page = read(wrap(
            rx,
            Page {
                offset: 1,
                limit: Some(1),
            },
        ))
        .await;
        assert_eq!(page["routes"], json!([{"a":2}]));
        assert_eq!(page["pagination"]["more"], json!(true));
    }
}
