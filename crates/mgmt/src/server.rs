//! The API server: HTTP/1.1 with JSON on a Unix socket and optional TCP listeners (which can
//! be read-only), and `/metrics` for Prometheus. What it answers comes from a [`Backend`];
//! the server only routes, encodes and streams.

use crate::api::{
    BmpStation, ClearReply, ClearRequest, Convergence, ErrorReply, FibSummary, FibVerify,
    ForwardingRoute, Group, Injected, LogLevelRequest, LogLevels, MrtFile, Neighbor, ReloadReply,
    ReloadRequest, RestartReply, RestartRequest, RouteRequest, RouteSummary, RunningConfig,
    Summary, Threads, WatchRequest, WorkQueues,
};
use crate::validation::{DatabaseQuery, ValidationDatabase, ValidationSessions};
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// Why a request could not be answered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("this listener is read-only: it refuses requests that change state")]
    ReadOnly,
    #[error("{0}")]
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::ReadOnly => StatusCode::FORBIDDEN,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = ErrorReply {
            error: self.to_string(),
        };
        (status, Json(body)).into_response()
    }
}

/// What the daemon answers with. Every method answers without stalling routing: counts
/// come from what the pipeline keeps, routes from chunked walks.
pub trait Backend: Send + Sync + 'static {
    fn summary(&self) -> impl Future<Output = Summary> + Send;
    fn neighbors(
        &self,
        address: Option<String>,
    ) -> impl Future<Output = Result<Vec<Neighbor>, ApiError>> + Send;
    fn groups(
        &self,
        name: Option<String>,
    ) -> impl Future<Output = Result<Vec<Group>, ApiError>> + Send;
    fn route_summary(&self) -> impl Future<Output = RouteSummary> + Send;
    /// Routes in order, rendered in the request's format ([`RouteRequest::format`]), a chunk
    /// per message; the channel is bounded, so a slow reader slows the walk instead of
    /// letting it pile up.
    fn routes(
        &self,
        q: RouteRequest,
    ) -> impl Future<Output = Result<mpsc::Receiver<Bytes>, ApiError>> + Send;
    /// Best-path changes as the shards decide them, as JSON lines, until the client goes
    /// away or falls behind (then a last line says so and the stream ends).
    fn watch_routes(
        &self,
        q: WatchRequest,
    ) -> impl Future<Output = Result<mpsc::Receiver<Bytes>, ApiError>> + Send;
    /// Every line logged from now on, as text lines, until the client goes away.
    fn log_tail(&self) -> impl Future<Output = Result<mpsc::Receiver<Bytes>, ApiError>> + Send;
    /// What is logged; with a request, changed first.
    fn log_level(
        &self,
        r: Option<LogLevelRequest>,
    ) -> impl Future<Output = Result<LogLevels, ApiError>> + Send;
    /// The configuration running (Junos `show configuration`), secrets hidden.
    fn running_config(&self) -> impl Future<Output = RunningConfig> + Send;
    fn threads(&self) -> impl Future<Output = Threads> + Send;
    fn work_queues(&self) -> impl Future<Output = WorkQueues> + Send;
    fn convergence(&self) -> impl Future<Output = Convergence> + Send;
    fn clear(&self, r: ClearRequest) -> impl Future<Output = Result<ClearReply, ApiError>> + Send;
    fn reload(&self, r: ReloadRequest) -> impl Future<Output = ReloadReply> + Send;
    /// Stops the daemon and starts it again (gracefully: RFC 4724); answered before it
    /// stops.
    fn restart(
        &self,
        r: RestartRequest,
    ) -> impl Future<Output = Result<RestartReply, ApiError>> + Send;
    fn fib_summary(&self) -> impl Future<Output = FibSummary> + Send;
    /// Our routes as the kernel holds them (all, or the one `destination` names: a prefix,
    /// or the longest covering an address).
    fn forwarding_table(
        &self,
        destination: Option<String>,
    ) -> impl Future<Output = Result<Vec<ForwardingRoute>, ApiError>> + Send;
    fn fib_verify(&self) -> impl Future<Output = Result<FibVerify, ApiError>> + Send;
    /// Injects an MRT RIB (its peers enter the pipeline as neighbors).
    fn mrt_inject(&self, f: MrtFile) -> impl Future<Output = Result<Injected, ApiError>> + Send;
    /// Removes an injection: its routes are withdrawn.
    fn mrt_remove(&self, f: MrtFile) -> impl Future<Output = Result<Injected, ApiError>> + Send;
    fn mrt_injections(&self) -> impl Future<Output = Vec<Injected>> + Send;
    /// The Loc-RIB (or, with `neighbor`, its Adj-RIB-In) as a TABLE_DUMP_V2 file, written
    /// as the shards' walk goes.
    fn mrt_rib(
        &self,
        neighbor: Option<String>,
    ) -> impl Future<Output = Result<mpsc::Receiver<Bytes>, ApiError>> + Send;
    /// The BMP monitoring stations.
    fn bmp_stations(&self) -> impl Future<Output = Vec<BmpStation>> + Send;
    /// The RTR client and its caches.
    fn validation_sessions(&self) -> impl Future<Output = ValidationSessions> + Send;
    /// The RPKI records in use, filtered.
    fn validation_database(
        &self,
        q: DatabaseQuery,
    ) -> impl Future<Output = Result<ValidationDatabase, ApiError>> + Send;
}

/// Where the API listens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerConfig {
    /// The Unix socket (created mode 0660, its directory if missing).
    pub socket: Option<PathBuf>,
    /// TCP listeners for the API.
    pub listen: Vec<SocketAddr>,
    /// The TCP listeners refuse every request that changes state.
    pub read_only: bool,
    /// A TCP listener for `/metrics` only.
    pub metrics: Option<SocketAddr>,
}

struct AppState<B> {
    backend: Arc<B>,
}

impl<B> Clone for AppState<B> {
    fn clone(&self) -> Self {
        AppState {
            backend: self.backend.clone(),
        }
    }
}

fn router<B: Backend>(backend: Arc<B>, read_only: bool) -> Router {
    let r = Router::new()
        .route("/v1/bgp/summary", get(summary::<B>))
        .route("/v1/bgp/neighbors", get(neighbors::<B>))
        .route("/v1/bgp/groups", get(groups::<B>))
        .route("/v1/bgp/convergence", get(convergence::<B>))
        .route("/v1/routes/summary", get(route_summary::<B>))
        .route("/v1/routes", get(routes::<B>))
        .route("/v1/routes/watch", get(watch_routes::<B>))
        .route("/v1/log", get(log_tail::<B>))
        .route("/v1/configuration", get(running_config::<B>))
        .route("/v1/threads", get(threads::<B>))
        .route("/v1/work-queues", get(work_queues::<B>))
        .route("/v1/fib/summary", get(fib_summary::<B>))
        .route("/v1/fib/routes", get(forwarding_table::<B>))
        .route("/v1/fib/verify", get(fib_verify::<B>))
        .route("/v1/mrt/injections", get(mrt_injections::<B>))
        .route("/v1/mrt/rib", get(mrt_rib::<B>))
        .route("/v1/validation/sessions", get(validation_sessions::<B>))
        .route("/v1/bmp/stations", get(bmp_stations::<B>))
        .route("/v1/validation/database", get(validation_database::<B>))
        .route("/metrics", get(metrics::<B>));
    // A read-only listener refuses every request that changes state, whatever it holds.
    let r = if read_only {
        r.route("/v1/bgp/clear", post(refuse))
            .route("/v1/configure/reload", post(refuse))
            .route("/v1/restart", post(refuse))
            .route("/v1/mrt/inject", post(refuse))
            .route("/v1/mrt/remove", post(refuse))
            .route("/v1/log/level", get(log_levels::<B>).post(refuse))
    } else {
        r.route("/v1/bgp/clear", post(clear::<B>))
            .route("/v1/configure/reload", post(reload::<B>))
            .route("/v1/restart", post(restart::<B>))
            .route("/v1/mrt/inject", post(mrt_inject::<B>))
            .route("/v1/mrt/remove", post(mrt_remove::<B>))
            .route(
                "/v1/log/level",
                get(log_levels::<B>).post(set_log_level::<B>),
            )
    };
    // The looking glass's API reads only, on every listener.
    r.with_state(AppState {
        backend: backend.clone(),
    })
    .merge(crate::birdwatcher::router(backend))
}

async fn refuse() -> ApiError {
    ApiError::ReadOnly
}

fn metrics_router<B: Backend>(backend: Arc<B>) -> Router {
    Router::new()
        .route("/metrics", get(metrics::<B>))
        .with_state(AppState { backend })
}

/// Binds every listener and serves them until the tasks are aborted.
pub async fn serve<B: Backend>(
    backend: Arc<B>,
    cfg: &ServerConfig,
) -> io::Result<Vec<JoinHandle<()>>> {
    let mut tasks = Vec::new();
    if let Some(path) = &cfg.socket {
        let l = bind_unix(path)?;
        info!(socket = %path.display(), "management API listening");
        let app = router(backend.clone(), false);
        tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(l, app).await {
                warn!("management API socket: {e}");
            }
        }));
    }
    for addr in &cfg.listen {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
        info!(%addr, read_only = cfg.read_only, "management API listening");
        let app = router(backend.clone(), cfg.read_only);
        tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(l, app).await {
                warn!("management API listener: {e}");
            }
        }));
    }
    if let Some(addr) = cfg.metrics {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
        info!(%addr, "metrics listening");
        let app = metrics_router(backend.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(l, app).await {
                warn!("metrics listener: {e}");
            }
        }));
    }
    Ok(tasks)
}

/// A Unix socket at `path`: its directory made if missing, a stale socket from an earlier
/// run replaced, the new one mode 0660 (owner and group).
fn bind_unix(path: &Path) -> io::Result<tokio::net::UnixListener> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(named)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => {
            // Another daemon answering on it must not lose it.
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{}: another daemon answers on this socket", path.display()),
                ));
            }
            std::fs::remove_file(path).map_err(named)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: exists and is not a socket", path.display()),
            ))
        }
        Err(_) => {}
    }
    let l = tokio::net::UnixListener::bind(path).map_err(named)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(named)?;
    Ok(l)
}

async fn summary<B: Backend>(State(s): State<AppState<B>>) -> Json<Summary> {
    Json(s.backend.summary().await)
}

#[derive(Deserialize)]
struct AddressQuery {
    address: Option<String>,
}

async fn neighbors<B: Backend>(
    State(s): State<AppState<B>>,
    Query(q): Query<AddressQuery>,
) -> Result<Json<Vec<Neighbor>>, ApiError> {
    Ok(Json(s.backend.neighbors(q.address).await?))
}

#[derive(Deserialize)]
struct NameQuery {
    name: Option<String>,
}

async fn groups<B: Backend>(
    State(s): State<AppState<B>>,
    Query(q): Query<NameQuery>,
) -> Result<Json<Vec<Group>>, ApiError> {
    Ok(Json(s.backend.groups(q.name).await?))
}

async fn convergence<B: Backend>(State(s): State<AppState<B>>) -> Json<Convergence> {
    Json(s.backend.convergence().await)
}

async fn route_summary<B: Backend>(State(s): State<AppState<B>>) -> Json<RouteSummary> {
    Json(s.backend.route_summary().await)
}

/// JSON lines (one route a line) or the CLI's text, written as the walk goes.
async fn routes<B: Backend>(
    State(s): State<AppState<B>>,
    Query(q): Query<RouteRequest>,
) -> Result<Response, ApiError> {
    let kind = match q.format.as_deref() {
        None | Some("json") => "application/x-ndjson",
        Some("text") => "text/plain; charset=utf-8",
        Some(f) => {
            return Err(ApiError::BadRequest(format!(
                "format {f}: one of json, text"
            )))
        }
    };
    let rx = s.backend.routes(q).await?;
    Ok(stream(kind, rx))
}

async fn watch_routes<B: Backend>(
    State(s): State<AppState<B>>,
    Query(q): Query<WatchRequest>,
) -> Result<Response, ApiError> {
    let rx = s.backend.watch_routes(q).await?;
    Ok(stream("application/x-ndjson", rx))
}

async fn running_config<B: Backend>(State(s): State<AppState<B>>) -> Json<RunningConfig> {
    Json(s.backend.running_config().await)
}

async fn log_tail<B: Backend>(State(s): State<AppState<B>>) -> Result<Response, ApiError> {
    let rx = s.backend.log_tail().await?;
    Ok(stream("text/plain; charset=utf-8", rx))
}

async fn log_levels<B: Backend>(State(s): State<AppState<B>>) -> Result<Json<LogLevels>, ApiError> {
    s.backend.log_level(None).await.map(Json)
}

async fn set_log_level<B: Backend>(
    State(s): State<AppState<B>>,
    Json(r): Json<LogLevelRequest>,
) -> Result<Json<LogLevels>, ApiError> {
    s.backend.log_level(Some(r)).await.map(Json)
}

/// A body written as its chunks come.
pub(crate) fn stream(kind: &'static str, rx: mpsc::Receiver<Bytes>) -> Response {
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<Bytes, io::Error>(chunk), rx))
    });
    ([(header::CONTENT_TYPE, kind)], Body::from_stream(body)).into_response()
}

async fn threads<B: Backend>(State(s): State<AppState<B>>) -> Json<Threads> {
    Json(s.backend.threads().await)
}

async fn work_queues<B: Backend>(State(s): State<AppState<B>>) -> Json<WorkQueues> {
    Json(s.backend.work_queues().await)
}

async fn fib_summary<B: Backend>(State(s): State<AppState<B>>) -> Json<FibSummary> {
    Json(s.backend.fib_summary().await)
}

#[derive(Deserialize)]
struct DestinationQuery {
    destination: Option<String>,
}

async fn forwarding_table<B: Backend>(
    State(s): State<AppState<B>>,
    Query(q): Query<DestinationQuery>,
) -> Result<Json<Vec<ForwardingRoute>>, ApiError> {
    Ok(Json(s.backend.forwarding_table(q.destination).await?))
}

async fn bmp_stations<B: Backend>(State(s): State<AppState<B>>) -> Json<Vec<BmpStation>> {
    Json(s.backend.bmp_stations().await)
}

async fn validation_sessions<B: Backend>(State(s): State<AppState<B>>) -> Json<ValidationSessions> {
    Json(s.backend.validation_sessions().await)
}

async fn validation_database<B: Backend>(
    State(s): State<AppState<B>>,
    Query(q): Query<DatabaseQuery>,
) -> Result<Json<ValidationDatabase>, ApiError> {
    Ok(Json(s.backend.validation_database(q).await?))
}

async fn fib_verify<B: Backend>(State(s): State<AppState<B>>) -> Result<Json<FibVerify>, ApiError> {
    Ok(Json(s.backend.fib_verify().await?))
}

async fn mrt_inject<B: Backend>(
    State(s): State<AppState<B>>,
    Json(f): Json<MrtFile>,
) -> Result<Json<Injected>, ApiError> {
    Ok(Json(s.backend.mrt_inject(f).await?))
}

async fn mrt_remove<B: Backend>(
    State(s): State<AppState<B>>,
    Json(f): Json<MrtFile>,
) -> Result<Json<Injected>, ApiError> {
    Ok(Json(s.backend.mrt_remove(f).await?))
}

async fn mrt_injections<B: Backend>(State(s): State<AppState<B>>) -> Json<Vec<Injected>> {
    Json(s.backend.mrt_injections().await)
}

#[derive(Deserialize)]
struct NeighborQuery {
    neighbor: Option<String>,
}

/// An MRT file, written as the walk goes.
async fn mrt_rib<B: Backend>(
    State(s): State<AppState<B>>,
    Query(q): Query<NeighborQuery>,
) -> Result<Response, ApiError> {
    let rx = s.backend.mrt_rib(q.neighbor).await?;
    Ok(stream("application/octet-stream", rx))
}

async fn clear<B: Backend>(
    State(s): State<AppState<B>>,
    Json(r): Json<ClearRequest>,
) -> Result<Json<ClearReply>, ApiError> {
    Ok(Json(s.backend.clear(r).await?))
}

async fn restart<B: Backend>(
    State(s): State<AppState<B>>,
    Json(r): Json<RestartRequest>,
) -> Result<Json<RestartReply>, ApiError> {
    Ok(Json(s.backend.restart(r).await?))
}

/// The body is optional (`curl -X POST` with none reloads), else a [`ReloadRequest`].
async fn reload<B: Backend>(
    State(s): State<AppState<B>>,
    body: Bytes,
) -> Result<Json<ReloadReply>, ApiError> {
    let r: ReloadRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ReloadRequest::default()
    } else {
        serde_json::from_slice::<Option<ReloadRequest>>(&body)
            .map_err(|e| ApiError::BadRequest(format!("reload request: {e}")))?
            .unwrap_or_default()
    };
    Ok(Json(s.backend.reload(r).await))
}

/// Prometheus text (0.0.4) unless the scraper asks for OpenMetrics.
async fn metrics<B: Backend>(
    State(s): State<AppState<B>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let b = &s.backend;
    let snapshot = crate::metrics::Snapshot {
        summary: b.summary().await,
        neighbors: b.neighbors(None).await.unwrap_or_default(),
        routes: b.route_summary().await,
        threads: b.threads().await,
        queues: b.work_queues().await,
        convergence: b.convergence().await,
        fib: b.fib_summary().await,
    };
    match crate::metrics::encode(&snapshot) {
        Ok(text) if openmetrics => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            crate::metrics::to_prometheus_text(&text),
        )
            .into_response(),
        Err(e) => ApiError::Internal(format!("cannot encode the metrics: {e}")).into_response(),
    }
}
