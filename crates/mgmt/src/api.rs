//! The management API's requests and replies. Field names are stable: they are the API
//! (docs/API.md shows every reply); add fields, never rename or remove them.
//!
//! Times are UNIX seconds (`*_at`) or durations in seconds (`*_seconds`); tables are named as
//! Junos names them (`inet.0`, `inet6.0`).

use serde::{Deserialize, Serialize};

/// `GET /v1/bgp/summary` (Junos `show bgp summary`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub local_as: u32,
    pub router_id: String,
    pub threading: Threading,
    pub groups: usize,
    pub peers: usize,
    pub down_peers: usize,
    pub tables: Vec<TablePaths>,
    pub neighbors: Vec<NeighborSummary>,
    /// While advertising waits for neighbors' tables (`[bgp.update-delay]`: after start, and
    /// after every neighbor has gone down); absent once it has begun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_delay: Option<UpdateDelayStatus>,
    /// The daemon's version.
    #[serde(default)]
    pub version: String,
    /// When the daemon started.
    #[serde(default)]
    pub started_at: f64,
    /// When a configuration reload last changed something; absent: none since the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconfigured_at: Option<f64>,
}

/// The advertisement deferral under way.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateDelayStatus {
    /// Why it began: `start`, or `all-neighbors-down` (every neighbor had gone down).
    #[serde(default)]
    pub reason: String,
    /// Since it began.
    pub elapsed_seconds: f64,
    pub max_delay_seconds: u64,
    pub establish_wait_seconds: u64,
    /// Established, their End-of-RIB not in yet.
    pub neighbors_loading: usize,
    /// Configured, not Established.
    pub neighbors_not_up: usize,
    /// Established, End-of-RIB in (or not doing graceful restart).
    pub neighbors_loaded: usize,
}

/// The pipeline's threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Threading {
    /// `rib-sharding` (shards and update threads), `update-threading` (update threads, one
    /// RIB thread) or `none` (the single-threaded mode).
    pub mode: String,
    pub shards: usize,
    pub update_threads: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TablePaths {
    pub table: String,
    pub total_paths: u64,
    pub active_paths: u64,
}

/// Prefix counts of one neighbor in one table (Junos "Active/Received/Accepted").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FamilyPrefixes {
    pub table: String,
    /// Paths in the Adj-RIB-In.
    pub received: u64,
    /// Of those, paths import policy accepts that do not loop.
    pub accepted: u64,
    /// Best paths learned from the neighbor.
    pub active: u64,
    /// Prefixes its update group advertises to it; absent while still being counted.
    pub advertised: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NeighborSummary {
    pub address: String,
    pub port: u16,
    pub peer_as: u32,
    pub group: String,
    /// The RFC 4271 state: `Idle`, `Connect`, `Active`, `OpenSent`, `OpenConfirm`,
    /// `Established`.
    pub state: String,
    /// Seconds in that state (Junos "Last Up/Dwn").
    pub state_seconds: f64,
    pub messages_received: u64,
    pub messages_sent: u64,
    /// Messages waiting to be written to the socket (Junos "OutQ").
    pub output_queue: u64,
    pub flaps: u64,
    pub families: Vec<FamilyPrefixes>,
}

/// `GET /v1/bgp/neighbors[?address=A]` (Junos `show bgp neighbor`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Neighbor {
    pub address: String,
    pub port: u16,
    pub peer_as: u32,
    pub local_as: u32,
    pub group: String,
    pub description: String,
    /// `internal` or `external`.
    pub peer_type: String,
    pub state: String,
    pub state_seconds: f64,
    /// The neighbor's BGP identifier, once its OPEN arrived.
    pub router_id: Option<String>,
    pub local_address: Option<String>,
    pub local_port: Option<u16>,
    pub remote_address: Option<String>,
    pub remote_port: Option<u16>,
    pub timers: Timers,
    /// What both OPENs agreed, while Established.
    pub capabilities: Option<Capabilities>,
    pub last_error: Option<LastError>,
    pub last_notification_sent: Option<NotificationInfo>,
    pub last_notification_received: Option<NotificationInfo>,
    pub counters: MessageCounters,
    pub flaps: u64,
    pub established_transitions: u64,
    pub families: Vec<FamilyPrefixes>,
    pub update_group: Option<UpdateGroupRef>,
    /// Its routes kept stale while it restarts (RFC 4724, RFC 9494), per table.
    #[serde(default)]
    pub stale: Vec<StaleTable>,
    /// Torn down by its prefix limit and held down until cleared.
    pub held_down: bool,
    /// Disabled by an operator (`disable bgp neighbor`, or `disable = true`).
    pub disabled: bool,
    /// Our BGP identifier towards it (Junos "Local ID").
    pub local_router_id: String,
    /// The import and export policy chains, in order (Junos "Import: [ ... ]").
    pub import: Vec<String>,
    pub export: Vec<String>,
    /// Prefix limits, per table, with the count they are checked against.
    pub prefix_limits: Vec<PrefixLimitInfo>,
    pub statistics: NeighborStatistics,
}

/// A neighbor's prefix limit in one table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixLimitInfo {
    pub table: String,
    pub maximum: u32,
    /// Over it: the session is torn down (Cease / Maximum Number of Prefixes Reached).
    pub teardown: bool,
    /// After a teardown, seconds before the session may come up again; absent: held down
    /// until cleared.
    pub idle_timeout: Option<u32>,
    /// What the limit counts: prefixes received (with their path ids), before import policy,
    /// whether it accepts them or not.
    pub received: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timers {
    pub hold_time_configured: u16,
    /// Negotiated (the smaller of both OPENs'), while Established.
    pub hold_time: Option<u16>,
    pub keepalive: Option<u16>,
    pub connect_retry: u16,
    pub send_hold_time: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    pub tables: Vec<String>,
    pub four_octet_as: bool,
    pub route_refresh: bool,
    pub enhanced_route_refresh: bool,
    pub extended_message: bool,
    pub add_path_receive: Vec<String>,
    pub add_path_send: Vec<String>,
    pub graceful_restart: Option<GracefulRestart>,
    /// The neighbor's BGP role (RFC 9234).
    pub role: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GracefulRestart {
    pub restart_time: u16,
    pub tables: Vec<String>,
    /// RFC 8538: a NOTIFICATION (other than Hard Reset) keeps its routes too.
    pub notification: bool,
    /// RFC 9494: tables whose routes stay long-lived stale after the restart time, and
    /// for how many seconds.
    #[serde(default)]
    pub long_lived: Vec<LongLivedTable>,
}

/// A table of a restarting neighbor's routes kept stale.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StaleTable {
    pub table: String,
    /// Seconds until they go, unless its End-of-RIB comes first.
    pub seconds_left: f64,
    /// Long-lived stale (LLGR_STALE, least preferred); else within its restart time.
    pub long_lived: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LongLivedTable {
    pub table: String,
    pub stale_time: u32,
}

/// Why the session last went down or could not come up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LastError {
    pub at: f64,
    /// A stable name: `notification-received`, `connection-closed`, `connection-lost`,
    /// `connect-failed`, `hold-timer-expired`, `send-hold-timer-expired`, `bad-header`,
    /// `bad-message`, `open-refused`, `malformed-update`, `prefix-limit`, `stopped`.
    pub kind: String,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NotificationInfo {
    pub at: f64,
    pub code: u8,
    pub subcode: u8,
    pub code_name: String,
    pub subcode_name: Option<String>,
    /// The RFC 9003 shutdown communication, if it carries one.
    pub message: Option<String>,
    /// The data, as hex.
    pub data: String,
}

/// Messages per type, both ways, over the session's life.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageCounters {
    pub received: MessageTypes,
    pub sent: MessageTypes,
    pub octets_received: u64,
    pub octets_sent: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageTypes {
    pub open: u64,
    pub update: u64,
    pub notification: u64,
    pub keepalive: u64,
    pub route_refresh: u64,
}

impl MessageTypes {
    pub fn total(&self) -> u64 {
        self.open + self.update + self.notification + self.keepalive + self.route_refresh
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateGroupRef {
    pub id: u32,
    pub name: String,
    /// The update thread serving the group (`rs-update-N`), or `rs-shard-0` when update
    /// threading is off.
    pub update_thread: String,
}

/// Junos `show bgp neighbor ADDRESS statistics`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NeighborStatistics {
    /// Batches held back because the write queue was past the high-water mark, plus
    /// messages of the session's own the queue had no room for.
    pub write_queue_blocks: u64,
    /// Times designated a slow writer (split from its update group), and the last time.
    pub slow_writer: u64,
    pub last_slow_writer_at: Option<f64>,
    /// Catch-ups after being a slow writer.
    pub catch_ups: u64,
    pub octets_queued: u64,
    pub messages_queued: u64,
    pub high_water: u64,
    pub low_water: u64,
}

/// `GET /v1/bgp/groups[?name=N]` (Junos `show bgp group`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    /// `internal` or `external`.
    pub group_type: String,
    pub local_as: u32,
    /// The neighbors' AS when they share one.
    pub peer_as: Option<u32>,
    pub options: Vec<String>,
    pub total_peers: usize,
    pub established: usize,
    pub members: Vec<GroupMember>,
    pub update_groups: Vec<UpdateGroupInfo>,
    pub tables: Vec<FamilyPrefixes>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupMember {
    pub address: String,
    pub port: u16,
    pub state: String,
}

/// An update group: the members of a configured group that share everything export needs,
/// encoded for once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateGroupInfo {
    pub id: u32,
    pub update_thread: String,
    pub members: Vec<String>,
    pub updates_built: u64,
    pub octets_built: u64,
    pub prefixes_advertised: u64,
    pub prefixes_withdrawn: u64,
    pub octets_sent: u64,
}

/// `GET /v1/routes/summary` (Junos `show route summary`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteSummary {
    pub local_as: u32,
    pub router_id: String,
    pub tables: Vec<TableSummary>,
    pub high_water: HighWater,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TableSummary {
    pub table: String,
    pub destinations: u64,
    pub routes: u64,
    pub active: u64,
    /// Paths never chosen: rejected by import policy or looping (Junos `hidden`).
    pub hidden: u64,
    /// Paths whose next hop does not resolve (never chosen either).
    pub unresolved: u64,
    /// Paths per prefix (Junos "RIB:FIB ratio").
    pub rib_fib_ratio: f64,
    pub shards: Vec<ShardTable>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardTable {
    pub shard: usize,
    /// The shard's thread (`rs-shard-N`).
    pub thread: String,
    pub destinations: u64,
    pub routes: u64,
    pub active: u64,
    pub hidden: u64,
    pub unresolved: u64,
}

/// The most the RIB has held since the daemon started, sampled every second.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HighWater {
    pub destinations: Mark,
    pub routes: Mark,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    pub value: u64,
    pub at: f64,
}

/// The query of `GET /v1/routes` (Junos `show route ...`), as URL query parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RouteRequest {
    /// A prefix, or an address (its longest match).
    pub destination: Option<String>,
    /// With a prefix: `exact` (default), `longer` or `orlonger`.
    #[serde(rename = "match")]
    pub match_type: Option<String>,
    /// `inet.0` or `inet6.0`; both without it.
    pub table: Option<String>,
    /// Only this shard's part of the table (Junos `rib-sharding`).
    pub shard: Option<usize>,
    /// Only the paths received from this neighbor (Junos `receive-protocol bgp`).
    pub receive_protocol: Option<String>,
    /// What is advertised to this neighbor, as it is sent (Junos `advertising-protocol bgp`).
    pub advertising_protocol: Option<String>,
    /// The routes whose active path is not advertised to this neighbor: its export policy
    /// or the export rules reject it (BIRD `show route noexport`; the neighbor's own paths
    /// are not counted). Each route with its active path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_advertised: Option<String>,
    /// Every attribute, and why the active path won.
    pub detail: bool,
    /// Paths that are never chosen (loops, rejected by import policy) too.
    pub hidden: bool,
    /// Only the paths import policy rejected (kept as received: a new policy may take them).
    pub rejected: bool,
    /// Only paths carrying every one of these communities (space-separated, as the policy
    /// language writes them: `65000:100`, `65000:*`, `no-export`, `target:65000:1`,
    /// `large:65000:1:*`, regular expressions).
    pub community: Option<String>,
    /// Only paths carrying these large communities (`65000:1:2`, `65000:*:*`).
    pub large_community: Option<String>,
    /// Only paths whose AS path matches (the policy language's AS path expressions,
    /// `"65001 .*"`).
    pub aspath_regex: Option<String>,
    /// Only paths with this next hop (as received).
    pub next_hop: Option<String>,
    /// Only paths of this origin validation state: `valid`, `invalid`, `unknown` (not
    /// found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_state: Option<String>,
    /// `bgp` (learned from a neighbor) or `local` (originated, injected from MRT).
    pub protocol: Option<String>,
    /// Only the active path of each route.
    pub active_path: bool,
    /// Junos `terse`: one line per path (text format).
    pub terse: bool,
    /// Counted, not shown: one [`RouteCount`] line.
    pub count: bool,
    /// `json` (default): JSON lines, one [`Route`] a line. `text`: the CLI's layout (Junos'),
    /// rendered by the daemon so the whole table streams without a client decoding it.
    pub format: Option<String>,
}

/// What `GET /v1/routes?count=true` answers: the routes the request selects, counted in
/// the daemon without being rendered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteCount {
    pub tables: Vec<TableCount>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TableCount {
    pub table: String,
    pub destinations: u64,
    pub routes: u64,
    pub active: u64,
}

/// The query of `GET /v1/routes/watch` (`ribshard monitor route`): which best-path changes
/// to stream. Without any, every change.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WatchRequest {
    /// A prefix and the prefixes under it, or an address (the prefixes covering it).
    pub prefix: Option<String>,
    /// Changes whose new or old best path came from this neighbor.
    pub neighbor: Option<String>,
    /// Changes whose new or old best path carries these communities (as in `show route`).
    pub community: Option<String>,
    pub large_community: Option<String>,
}

/// One line of `GET /v1/routes/watch`: a best-path change as the shard decided it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteChange {
    /// When the shard decided it (seconds since the Unix epoch).
    pub time: f64,
    pub table: String,
    pub prefix: String,
    pub shard: usize,
    /// `added` (a new prefix), `replaced` (a new best path) or `withdrawn` (no path left).
    pub change: String,
    pub best: Option<WatchedPath>,
    pub old: Option<WatchedPath>,
}

/// A best path in a [`RouteChange`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchedPath {
    pub from: String,
    pub peer_as: u32,
    pub next_hop: String,
    pub as_path: String,
    pub origin: String,
    pub local_pref: Option<u32>,
    pub med: Option<u32>,
    pub communities: Vec<String>,
    pub large_communities: Vec<String>,
}

/// `GET /v1/configuration` (Junos `show configuration`): the configuration the daemon runs
/// with, every neighbor's settings resolved (neighbor over group over `[bgp]` over the
/// defaults), secrets hidden. Keys are the file's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunningConfig {
    /// The file it was read from.
    pub file: Option<String>,
    pub bgp: RunningBgp,
    pub neighbor: Vec<RunningNeighbor>,
    /// `[policy-options]`: the policy statements defined.
    pub policy_statements: Vec<String>,
    /// Anything else set (`[fib]`, `[bgp.resolution]`, `[[bgp.originate]]`, `[mrt]`,
    /// `[management]`), one line each.
    pub other: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunningBgp {
    pub local_as: u32,
    pub router_id: String,
    pub listen: Vec<String>,
    pub number_of_shards: u32,
    pub update_threads: u32,
    /// `[bgp] memory-limit`, as "4096MiB"; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    /// `[bgp.update-delay]` max-delay and establish-wait, seconds; absent: off.
    pub update_delay: Option<[u64; 2]>,
    pub always_compare_med: bool,
    pub external_router_id: bool,
    /// `multipath`: off, `on` or `multiple-as`.
    pub multipath: String,
    /// `[bgp.graceful-restart]`; absent: graceful restart helper only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_restart: Option<RunningGracefulRestart>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunningGracefulRestart {
    pub restart_time: u16,
    pub long_lived_stale_time: u32,
    /// "restart" or "shutdown".
    pub on_sigterm: String,
    pub state_file: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunningNeighbor {
    pub address: String,
    pub group: String,
    #[serde(rename = "type")]
    pub group_type: String,
    pub peer_as: u32,
    pub local_as: u32,
    pub port: u16,
    pub local_address: Option<String>,
    pub description: Option<String>,
    pub hold_time: u16,
    pub connect_retry_time: u16,
    pub send_hold_time: u32,
    pub passive: bool,
    pub disable: bool,
    /// `(hidden)` when one is set: the key itself is never shown.
    pub authentication_key: Option<String>,
    /// TCP-AO as `key-id N receive-id M ALGORITHM`; the key itself is never shown.
    #[serde(default)]
    pub tcp_ao: Option<String>,
    pub ttl_security: Option<u8>,
    pub multihop: bool,
    pub import: Vec<String>,
    pub export: Vec<String>,
    pub family: Vec<String>,
    /// Per family: `maximum`, and `teardown` / `idle-timeout N` as configured.
    pub prefix_limit: Vec<String>,
    pub cluster: Option<String>,
    pub route_server_client: bool,
    /// Absent: to external neighbors only.
    pub next_hop_self: Option<bool>,
    pub role: Option<String>,
    pub add_path: Vec<String>,
    /// `add-path-send`: `path-count N`, `all` or `equal-cost N`; absent: the best path alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_path_send: Option<String>,
    pub loops: u8,
    pub local_as_private: bool,
    pub no_prepend_global_as: bool,
    pub no_install: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_long_lived_stale_time: Option<u32>,
}

/// `POST /v1/log/level` (`ribshard set log level LEVEL [neighbor A]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogLevelRequest {
    /// `error`, `warn`, `info`, `debug` or `trace`.
    pub level: String,
    /// Only this neighbor's events at that level (the daemon's level stays).
    pub neighbor: Option<String>,
}

/// What is logged now (`GET /v1/log/level`, and the answer to a change).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogLevels {
    /// The daemon's level (or `RUST_LOG`'s directives, until a level is set).
    pub daemon: String,
    /// Neighbors logged at their own level.
    pub neighbors: Vec<NeighborLevel>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NeighborLevel {
    pub neighbor: String,
    pub level: String,
}

/// The last line of a watch the daemon ended: why (a client that fell behind).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchEnd {
    pub dropped: String,
}

/// One line of `GET /v1/routes` (JSON lines): a prefix with its paths.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Route {
    pub prefix: String,
    pub table: String,
    pub shard: usize,
    pub paths: Vec<RoutePath>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutePath {
    /// `active`, `inactive` or `hidden`.
    pub state: String,
    /// For an active path: the decision step that separated it from the runner-up. For an
    /// inactive one: the step it lost at. For a hidden one: why it is never chosen.
    pub reason: Option<Reason>,
    /// In the active path's equal-cost set (multipath).
    pub multipath: bool,
    pub stale: bool,
    pub from: String,
    pub peer_as: u32,
    pub peer_router_id: String,
    pub path_id: u32,
    pub age_seconds: u64,
    pub next_hop: String,
    pub as_path: String,
    pub origin: String,
    pub local_pref: Option<u32>,
    pub med: Option<u32>,
    pub communities: Vec<String>,
    pub large_communities: Vec<String>,
    /// The import policy and term that accepted or rejected the path, as `policy P term T`
    /// (not in the text layout's brief view).
    pub import_policy: Option<String>,
    /// Route origin validation (RFC 6811): `valid`, `invalid` or `not-found`; absent
    /// without RPKI data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_state: Option<String>,
    /// With `detail` (or `advertising-protocol`): the rest of the attributes.
    pub attributes: Option<Attributes>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    /// A stable name (`local-preference`, `as-path-length`, ..., `loop`, `rejected`).
    pub step: String,
    /// Junos' words for it.
    pub description: String,
    /// Lost within its neighbor AS first (deterministic MED: "Not Best in its group").
    pub in_group: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Attributes {
    pub extended_communities: Vec<String>,
    pub atomic_aggregate: bool,
    pub aggregator: Option<String>,
    pub originator_id: Option<String>,
    pub cluster_list: Vec<String>,
    /// RFC 9234 Only to Customer.
    pub otc: Option<u32>,
    /// Attributes carried without being interpreted: type code and value as hex.
    pub unknown: Vec<String>,
}

/// `GET /v1/threads` (Quagga `show thread cpu`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Threads {
    pub threads: Vec<ThreadInfo>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The OS thread name (`top -H` shows it).
    pub name: String,
    pub tid: i32,
    /// `session`, `shard`, `update`, `ticker`, `main`, or `other`.
    pub kind: String,
    pub cpu_seconds: f64,
    /// Share of one CPU over the last 1, 10 and 60 seconds (0 to 1).
    pub share_1s: f64,
    pub share_10s: f64,
    pub share_60s: f64,
    /// Work items done (messages for pipeline threads, wake-ups for session workers).
    pub items: u64,
    pub longest_item_seconds: f64,
}

/// `GET /v1/work-queues` (Quagga `show work-queues`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkQueues {
    pub queues: Vec<QueueInfo>,
    pub write_queues: WriteQueues,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueInfo {
    /// `session-to-shard` or `shard-to-update`.
    pub kind: String,
    /// The receiving thread.
    pub thread: String,
    pub depth: u64,
    pub capacity: u64,
    pub high_water: u64,
    pub items: u64,
    /// Time senders waited for room.
    pub blocked_seconds: f64,
}

/// Every member's write queue, summarised.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteQueues {
    pub sessions: usize,
    pub messages_queued: u64,
    pub octets_queued: u64,
    pub largest_octets: u64,
    pub largest_neighbor: Option<String>,
    pub high_water: u64,
    /// Members split from their update group right now.
    pub slow_writers: usize,
}

/// `GET /v1/bgp/convergence`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Convergence {
    /// From an UPDATE's receipt to its best paths decided.
    pub decided: Histogram,
    /// Per update group: from an UPDATE's receipt to what it changed being encoded and
    /// queued for the group's members.
    pub written: Vec<GroupHistogram>,
    pub neighbors: Vec<NeighborConvergence>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Cumulative counts per upper bound, seconds (Prometheus buckets).
    pub buckets: Vec<Bucket>,
    pub count: u64,
    pub sum_seconds: f64,
    /// Upper bounds of the buckets holding these quantiles.
    pub p50_seconds: Option<f64>,
    pub p90_seconds: Option<f64>,
    pub p99_seconds: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// `+Inf` is the largest finite float here.
    pub le: f64,
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupHistogram {
    pub group: String,
    pub id: u32,
    pub histogram: Histogram,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NeighborConvergence {
    pub address: String,
    pub established_at: f64,
    /// From Established to the End-of-RIB of every family received.
    pub end_of_rib_received_seconds: Option<f64>,
    /// From there to each update group having sent everything before it.
    pub groups: Vec<GroupTime>,
    /// From there to the last group; absent until every group has.
    pub all_groups_seconds: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupTime {
    pub group: String,
    pub id: u32,
    pub seconds: f64,
}

/// `POST /v1/bgp/clear` (Junos `clear bgp neighbor`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClearRequest {
    /// An address, or `all`.
    pub neighbor: String,
    /// `hard` (default), `soft` or `soft-inbound`.
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClearReply {
    pub neighbors: Vec<Cleared>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cleared {
    pub address: String,
    /// `null` when done; else why not.
    pub error: Option<String>,
}

/// What a reload did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReloadOutcome {
    /// The file's changes are in force (some may wait for a restart: `needs_restart`).
    Applied,
    /// The file says what runs already.
    Unchanged,
    /// Errors in the file, or no file to read: nothing changed.
    #[default]
    Rejected,
    /// A dry run: nothing changed; `changes` says what a reload of the file would do.
    Planned,
}

impl ReloadOutcome {
    /// The configuration in the file is the one running: the reload succeeded.
    pub fn succeeded(self) -> bool {
        self != ReloadOutcome::Rejected
    }
}

impl std::fmt::Display for ReloadOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReloadOutcome::Applied => "applied",
            ReloadOutcome::Unchanged => "unchanged",
            ReloadOutcome::Rejected => "rejected",
            ReloadOutcome::Planned => "planned (dry run: nothing changed)",
        })
    }
}

/// `GET /v1/bmp/stations`: one BMP monitoring station (RFC 7854) as it stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BmpStation {
    pub name: String,
    pub address: String,
    /// "Connecting", "Dumping" (connected, being sent the tables) or "Up".
    pub state: String,
    /// The RIBs it is sent ("pre-policy", "post-policy", "loc-rib", "adj-rib-out"), and
    /// "route-mirroring" when it is sent the UPDATEs received in error.
    pub ribs: Vec<String>,
    /// Connections made so far.
    pub connections: u64,
    /// How the last connection ended, or why the last attempt failed.
    pub last_error: Option<String>,
    /// Octets written to it since the daemon started, and octets waiting for it now.
    pub written: u64,
    pub waiting: u64,
}

/// `POST /v1/restart`'s body (`ribshard restart [--graceful]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartRequest {
    /// Restart as a graceful restart speaker (RFC 4724): sessions closed without
    /// NOTIFICATION to the neighbors that keep our routes, kernel routes kept. Else every
    /// neighbor is sent Cease / Administrative Shutdown first.
    #[serde(default)]
    pub graceful: bool,
}

/// `POST /v1/restart`: accepted; the daemon stops and starts again on its configuration
/// file as it reads now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartReply {
    pub graceful: bool,
    /// Established neighbors that keep our routes meanwhile (graceful only).
    pub kept_by: Vec<String>,
    /// Established neighbors that lose our routes until the sessions are back: not
    /// graceful, or the neighbor (or this session's OPEN of ours) lacks graceful restart.
    pub lost_by: Vec<String>,
}

/// `POST /v1/configure/reload`'s body, optional: without one, what SIGHUP does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadRequest {
    /// Say what a reload would do, change nothing (`configure reload --dry-run`).
    #[serde(default)]
    pub dry_run: bool,
    /// Another file to compare with the running configuration (`config diff FILE`): only
    /// with `dry_run`. Absent: the daemon's own file.
    #[serde(default)]
    pub file: Option<String>,
}

/// `POST /v1/configure/reload`: what SIGHUP does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReloadReply {
    pub outcome: ReloadOutcome,
    /// Every error as `file:line: key: reason`.
    pub errors: Vec<String>,
    /// What changed, in words.
    pub changes: Vec<String>,
    /// Changes that wait for a restart.
    pub needs_restart: Vec<String>,
    /// What loads but will not work as written, as `file:line: key: warning: reason`.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// An error reply: HTTP status 400 (a bad request), 403 (read-only), 404 (no such
/// neighbor, group or route) or 500.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub error: String,
}

/// `GET /v1/fib/summary` (`show fib summary`): the FIB writer and next-hop resolution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FibSummary {
    /// `[fib]` is configured: the best paths are written to the kernel.
    pub enabled: bool,
    /// The kernel table, the routes' protocol number and metric.
    pub table: u32,
    pub protocol: u8,
    pub metric: u32,
    /// Routes name kernel nexthop objects (else each carries its next hops).
    pub nexthop_objects: bool,
    /// Nothing is written until the start-up deferral ends.
    pub holding: bool,
    pub routes: FibRoutes,
    /// Nexthop objects of ours: a leaf per next hop and way out, a group per next-hop set.
    pub leaves: u64,
    pub groups: u64,
    pub netlink: FibNetlink,
    /// Routes of ours changed or removed by someone else, written again.
    pub drift_repaired: u64,
    /// At start: routes left by the last run kept as they were (the others were written
    /// again or removed).
    pub kept_at_start: u64,
    /// When the last batch was written (UNIX seconds).
    pub last_flush_at: Option<f64>,
    pub resolution: ResolutionSummary,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FibRoutes {
    /// Prefixes whose best path asks for a kernel route.
    pub wanted: u64,
    pub installed: u64,
    /// Waiting to be written.
    pub pending: u64,
    /// Refused by the kernel, retried.
    pub failed: u64,
    /// Nothing to forward to: no next hop of theirs resolves to a way out.
    pub unresolved: u64,
    /// Held under our metric by another protocol: never replaced.
    pub conflicts: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FibNetlink {
    pub messages: u64,
    /// `sendmsg` calls (many messages each).
    pub batches: u64,
    pub errors: u64,
    pub route_writes: u64,
    pub route_deletes: u64,
    pub object_writes: u64,
    pub object_deletes: u64,
}

/// How next hops resolve (`[bgp.resolution]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResolutionSummary {
    /// Through the kernel's tables (else every next hop is reachable at cost 0).
    pub enabled: bool,
    pub tables: Vec<u32>,
    pub resolve_via_default: bool,
    /// Routes of other protocols the resolver knows, all tables looked up.
    pub kernel_routes: u64,
    /// Snapshots of the kernel's tables published since start.
    pub snapshots: u64,
}

/// `GET /v1/fib/routes[?destination=P]` (`show route forwarding-table`): our routes as the
/// kernel holds them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ForwardingRoute {
    pub destination: String,
    /// `unicast`, `reject` (unreachable), `discard` (blackhole) or `none` (names nothing
    /// usable).
    pub kind: String,
    pub next_hops: Vec<ForwardingHop>,
    /// The nexthop object (group) it names.
    pub object: Option<u32>,
    pub metric: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ForwardingHop {
    pub gateway: Option<String>,
    pub interface: String,
}

/// `GET /v1/fib/verify` (`ribshard fib verify`): the kernel's routes against what the
/// Loc-RIB's best paths ask, each difference listed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FibVerify {
    /// Routes of ours in the kernel table.
    pub kernel_routes: u64,
    /// Prefixes whose best path asks for a route (resolving or not).
    pub loc_rib_routes: u64,
    pub differences: Vec<FibDifference>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FibDifference {
    pub prefix: String,
    /// `missing` (asked, not in the kernel), `extra` (in the kernel, not asked) or
    /// `different` (forwarding elsewhere).
    pub kind: String,
    /// What the Loc-RIB asks, and what the kernel has, in words.
    pub want: Option<String>,
    pub kernel: Option<String>,
}

/// `POST /v1/mrt/inject` and `POST /v1/mrt/remove`: an MRT file, a path on the daemon's
/// host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MrtFile {
    pub file: String,
}

/// An injected MRT RIB (`GET /v1/mrt/injections` lists them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Injected {
    pub file: String,
    /// The file's peers, each a source of routes here.
    pub peers: Vec<InjectedPeer>,
    pub routes: u64,
    /// RIB entries that could not be taken (attributes that do not parse).
    pub skipped: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InjectedPeer {
    pub address: String,
    pub peer_as: u32,
    /// Its peer index in the pipeline.
    pub peer_index: u32,
}
