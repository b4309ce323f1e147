//! The file as written: every key optional here, so that missing ones are reported by
//! [`super::resolve`] with their place, and unknown ones are refused by the parser.

use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};

/// Settings that `[bgp]`, a group and a neighbor can each give; the most specific wins.
macro_rules! with_peer_settings {
    ($(#[$m:meta])* pub struct $name:ident { $($field:ident : $ty:ty,)* }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct $name {
            $(pub $field: $ty,)*
            /// The neighbor's AS.
            pub peer_as: Option<u32>,
            /// Our AS towards these peers, if not `bgp.local-as` (Junos `local-as`). Towards
            /// external peers, routes sent carry it and then the global AS, and routes received
            /// get it put in front, unless the two options below say otherwise.
            pub local_as: Option<u32>,
            /// Junos `local-as ... private`: routes received from these peers do not get the
            /// local AS put in front. Default false.
            pub local_as_private: Option<bool>,
            /// Junos `local-as ... no-prepend-global-as`: routes sent to these peers carry the
            /// local AS only. Default false.
            pub no_prepend_global_as: Option<bool>,
            /// Proposed hold time, seconds: 0 (no keepalives) or 3 to 65535. Default 90.
            pub hold_time: Option<u16>,
            /// Seconds between connection attempts. Default 30.
            pub connect_retry_time: Option<u16>,
            /// RFC 9687 send hold time, seconds. Default: max(480, 2 x hold time).
            pub send_hold_time: Option<u32>,
            /// Never connect out; wait for the peer. Default false.
            pub passive: Option<bool>,
            /// Junos `disable`: no session (connections from the peer refused) until this
            /// is removed, or `ribshard enable bgp neighbor` (until the next reload). Default
            /// false.
            pub disable: Option<bool>,
            /// TCP MD5 signature key (RFC 2385).
            pub authentication_key: Option<String>,
            /// TCP Authentication Option (RFC 5925) instead of MD5.
            pub tcp_ao: Option<RawTcpAo>,
            /// GTSM (RFC 5082): accept only packets from at most this many hops away.
            pub ttl_security: Option<u8>,
            /// eBGP to a neighbor that is not directly connected.
            pub multihop: Option<bool>,
            /// Local address to bind before connecting, and expected on incoming connections.
            pub local_address: Option<IpAddr>,
            /// The neighbor's TCP port. Default 179.
            pub port: Option<u16>,
            pub description: Option<String>,
            /// Import policies (`policy-statement` names), evaluated in order; built in:
            /// "accept", "reject". Default: "accept" on internal groups, "reject" on external
            /// ones (RFC 8212). Falling off the end of a chain does the same.
            pub import: Option<Vec<String>>,
            /// Export policies, evaluated in order; also built in: "route-server-control".
            pub export: Option<Vec<String>>,
            /// Address families: "inet-unicast", "inet6-unicast". Default both.
            pub family: Option<Vec<String>>,
            pub prefix_limit: Option<PrefixLimits>,
            /// Route reflection: this group's clients share this cluster id (RFC 4456).
            pub cluster: Option<std::net::Ipv4Addr>,
            /// Transparent route server clients (RFC 7947).
            pub route_server_client: Option<bool>,
            /// Advertise ourselves as next hop.
            pub next_hop_self: Option<bool>,
            /// BGP role (RFC 9234): provider, customer, peer, rs, rs-client.
            pub role: Option<String>,
            /// Add-Path (RFC 7911) in the negotiated families: "receive" and/or "send".
            pub add_path: Option<Vec<String>>,
            /// Add-Path send: which paths per prefix (implies "send" in `add-path`).
            pub add_path_send: Option<RawAddPathSend>,
            /// Accept received paths holding our AS up to this many times minus one (Junos
            /// `loops`). Default 1: a path with our AS is a loop.
            pub loops: Option<u8>,
            /// Junos `no-install`: these peers' routes are never written to the kernel's
            /// table by `[fib]` (a route reflector's or route server's clients). Default
            /// false.
            pub no_install: Option<bool>,
            /// Long-lived graceful restart (RFC 9494): the longest these peers' routes are
            /// kept long-lived stale, whatever stale time they ask for (seconds; BIRD's
            /// `max long lived stale time`). Default: what they ask.
            pub max_long_lived_stale_time: Option<u32>,
        }
    };
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Raw {
    pub bgp: Option<Bgp>,
    pub management: Option<Management>,
    /// Writing the best paths into a kernel table; absent: nothing is written.
    pub fib: Option<Fib>,
    /// MRT files: a RIB injected at start, the log of received messages.
    pub mrt: Option<Mrt>,
    /// Routing policy (Junos `policy-options`).
    pub policy_options: Option<ribshard_policy::PolicyOptions>,
    /// RPKI caches (RTR, RFC 8210) for `validation-state` and `aspa-state`.
    pub rpki: Option<Rpki>,
    /// BMP monitoring stations (RFC 7854).
    pub bmp: Option<Bmp>,
}

/// `[bmp]`: the BGP Monitoring Protocol stations ribshard reports to.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Bmp {
    /// Initiation's sysName. Default: the host's name.
    pub sys_name: Option<String>,
    pub station: Option<Vec<BmpStation>>,
}

/// `[[bmp.station]]`: one monitoring station ribshard connects to (Junos `bmp station`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BmpStation {
    /// For logs and `show bmp`. Default: address and port.
    pub name: Option<String>,
    pub address: Option<IpAddr>,
    pub port: Option<u16>,
    /// Which RIBs it is sent: `pre-policy` (Adj-RIB-In as received), `post-policy`,
    /// `loc-rib`, `adj-rib-out`. Default `["pre-policy"]`.
    pub route_monitoring: Option<Vec<String>>,
    /// Route Mirroring (RFC 7854 section 4.7) of every UPDATE received in error (RFC 7606
    /// handled it, or it reset the session). Default false.
    pub route_mirroring: Option<bool>,
    /// Seconds between Statistics Reports; 0: none. Default 60.
    pub statistics_timeout: Option<u32>,
    /// MiB that may wait for the station before it is dropped (and dumped again when it
    /// is back). Default 64.
    pub buffer_size: Option<u32>,
    /// Seconds before connecting again after a failure, doubled each time up to
    /// `retry-max`. Defaults 1 and 60.
    pub retry: Option<u32>,
    pub retry_max: Option<u32>,
}

/// `[rpki]`: the RPKI-to-Router caches import policies validate routes against.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Rpki {
    /// The highest RTR version offered: 2 (ASPA), 1 or 0. Default 2; a cache that speaks
    /// less is followed down.
    pub max_version: Option<u8>,
    /// Seconds between connection attempts while no cache answers, until a cache gives
    /// its own retry interval. Default 60.
    pub retry: Option<u32>,
    pub cache: Option<Vec<RpkiCache>>,
}

/// `[[rpki.cache]]`: one RTR cache over TCP.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RpkiCache {
    pub address: Option<IpAddr>,
    /// Default 323 (rpki-rtr).
    pub port: Option<u16>,
    /// Lower is preferred (RFC 8210 section 10). Default: the cache's place in the list.
    pub preference: Option<u8>,
}

/// `[management]`: where the management API and the metrics listen.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Management {
    /// The API's Unix socket. Default /run/ribshard/ribshard.sock.
    pub socket: Option<std::path::PathBuf>,
    /// TCP addresses for the API too. Default none.
    pub listen: Option<Vec<SocketAddr>>,
    /// The TCP listeners refuse every request that changes state. Default true.
    pub read_only: Option<bool>,
    /// A TCP address serving `/metrics` only.
    pub metrics: Option<SocketAddr>,
}

with_peer_settings! {
    pub struct Bgp {
        router_id: Option<std::net::Ipv4Addr>,
        // The resident memory the process keeps under, as "4GiB" or "512MiB": over it, a
        // neighbor that sends new prefixes is stopped (Cease / Out of Resources) and held
        // down until cleared. Default: no limit.
        memory_limit: Option<String>,
        listen: Option<Vec<SocketAddr>>,
        rib_sharding: Option<RibSharding>,
        update_threading: Option<UpdateThreading>,
        path_selection: Option<PathSelection>,
        multipath: Option<Multipath>,
        update_delay: Option<UpdateDelay>,
        graceful_restart: Option<GracefulRestart>,
        resolution: Option<Resolution>,
        originate: Option<Vec<Originate>>,
        group: Option<Vec<Group>>,
    }
}

/// `[[bgp.originate]]`: a network we advertise, as if learned from a neighbor of our own
/// AS with an empty AS_PATH (eBGP peers see our AS; the decision process prefers it to any
/// learned path of the same LOCAL_PREF).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Originate {
    /// The prefix, as "192.0.2.0/24".
    pub prefix: Option<String>,
    /// "covering-route" (default): advertised while a route of another protocol equal to
    /// or covering it (not a default route) is in the kernel's tables; "always".
    pub when: Option<String>,
    /// The next hop it carries; default none: each neighbor gets our own address.
    pub next_hop: Option<IpAddr>,
    pub med: Option<u32>,
    pub local_preference: Option<u32>,
    /// "igp" (default), "egp" or "incomplete".
    pub origin: Option<String>,
    /// Communities it carries, as "65000:100" or a well-known name ("no-export").
    pub communities: Option<Vec<String>>,
}

/// `[mrt]`: routing data in MRT files (RFC 6396).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Mrt {
    /// TABLE_DUMP_V2 RIB files injected at start, each of their peers entering the
    /// pipeline as a neighbor (`ribshard mrt inject` does it at run time).
    pub inject: Option<Vec<std::path::PathBuf>>,
    /// The BGP4MP log of every received message and state change, as route collectors
    /// write; strftime fields (%Y %m %d %H %M %S) in the name name each file.
    pub updates: Option<String>,
    /// Start a new file past this many octets. Default: no limit.
    pub rotate_size: Option<u64>,
    /// Start a new file every this many seconds (aligned to the clock, as collectors
    /// do: 900 gives :00, :15, :30, :45). Default: no interval.
    pub rotate_interval: Option<u32>,
}

/// `[fib]`: the best paths written into a kernel routing table, in bulk, through nexthop
/// objects (Linux 5.3; without them each route carries its next hops).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Fib {
    /// The kernel table (a number; 254 is `main`). Default 254.
    pub table: Option<u32>,
    /// The routes' protocol number (`ip route` shows 186 as `proto bgp`). Default 186.
    pub protocol: Option<u8>,
    /// The routes' metric: another protocol's route with a lower one wins. Default 20.
    pub metric: Option<u32>,
    /// Use kernel nexthop objects. Default true (where the kernel has them).
    pub nexthop_objects: Option<bool>,
    /// Milliseconds a change waits for others before they are written together. Default 2.
    pub flush_delay: Option<u32>,
    /// Leave the routes in the kernel when ribshard stops, for the next start to reconcile
    /// without a gap in forwarding. Default true; false removes them at stop.
    pub retain: Option<bool>,
}

/// `[bgp.resolution]`: how next hops resolve (RFC 4271 section 9.1.2.1): through the
/// kernel's tables, never through our own routes; a path whose next hop does not resolve
/// is not eligible, and the resolving route's metric is its IGP cost.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Resolution {
    /// Resolve next hops at all. Default true; false: every next hop is reachable at cost 0
    /// (a route server or reflector off the forwarding path).
    pub enabled: Option<bool>,
    /// Kernel tables looked up, in order. Default [255, 254] (local, then main).
    pub tables: Option<Vec<u32>>,
    /// A default route resolves next hops too. Default true.
    pub resolve_via_default: Option<bool>,
}

/// `[bgp.update-delay]` (FRR's `update-delay`): after start, and after every neighbor has gone
/// down, advertise to no one until every neighbor that came up has sent End-of-RIB, so
/// downstreams get each prefix once.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UpdateDelay {
    /// Seconds after start when advertising begins regardless; 0 turns the deferral off.
    /// Default 120.
    pub max_delay: Option<u32>,
    /// Seconds after start past which neighbors not up yet are not waited for. Default 5.
    pub establish_wait: Option<u32>,
}

/// `[bgp.graceful-restart]`: ribshard as a restarting speaker (RFC 4724). Present, every
/// session's OPEN names its families in the graceful restart capability, so neighbors keep
/// our routes (and forward on them) while ribshard restarts; absent, ribshard only helps
/// neighbors that restart.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GracefulRestart {
    /// Seconds a neighbor keeps our routes after our session drops, 1 to 4095. Default 120.
    pub restart_time: Option<u16>,
    /// Long-lived graceful restart (RFC 9494): seconds a neighbor keeps our routes after
    /// that, marked LLGR_STALE and least preferred, up to 16777215. Default 0: none.
    pub long_lived_stale_time: Option<u32>,
    /// What SIGTERM does: "restart" (default: sessions closed without NOTIFICATION, kernel
    /// routes kept, so that neighbors keep forwarding until ribshard is back) or "shutdown"
    /// (Cease to every neighbor, as without graceful restart).
    pub on_sigterm: Option<String>,
    /// Where a graceful stop leaves its time, for the next start to know it is a restart.
    /// Default /var/lib/ribshard/graceful-restart.
    pub state_file: Option<std::path::PathBuf>,
}

/// Junos `path-selection`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PathSelection {
    pub always_compare_med: Option<bool>,
    pub external_router_id: Option<bool>,
}

/// Junos `multipath`: present, it turns load sharing on.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Multipath {
    pub multiple_as: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RibSharding {
    pub number_of_shards: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UpdateThreading {
    pub number_of_threads: Option<u32>,
    /// Octets queued for a neighbor past which it is split from its update group.
    pub write_queue_high_water: Option<u64>,
}

with_peer_settings! {
    pub struct Group {
        name: Option<String>,
        r#type: Option<String>,
        neighbor: Option<Vec<Neighbor>>,
    }
}

with_peer_settings! {
    pub struct Neighbor {
        address: Option<IpAddr>,
    }
}

/// `add-path-send = { path-count = 4 }`, `{ mode = "all" }` or `{ mode = "equal-cost",
/// path-count = 8 }` (Junos `add-path send path-count N`, `path-selection-mode`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawAddPathSend {
    /// How many paths per prefix, 2 to 64 (with `mode = "equal-cost"`, at most; default 64).
    pub path_count: Option<u32>,
    /// "best" (the best N, default), "all" (every eligible path) or "equal-cost" (the best
    /// path's equal-cost set).
    pub mode: Option<String>,
}

/// `tcp-ao = { key-id = 1, algorithm = "hmac-sha-1-96", key = "..." }`: one Master Key
/// Tuple (RFC 5925 section 3.1).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawTcpAo {
    /// The KeyID sent (SendID), and expected from the neighbor unless `receive-id` says
    /// otherwise: 0 to 255.
    pub key_id: Option<u8>,
    /// The KeyID expected from the neighbor (RecvID), if not `key-id`.
    pub receive_id: Option<u8>,
    /// "hmac-sha-1-96" or "aes-128-cmac-96" (RFC 5926). Default "hmac-sha-1-96".
    pub algorithm: Option<String>,
    /// The master key: 1 to 80 octets.
    pub key: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PrefixLimits {
    pub inet_unicast: Option<RawPrefixLimit>,
    pub inet6_unicast: Option<RawPrefixLimit>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawPrefixLimit {
    pub maximum: Option<u32>,
    /// Tear the session down past the maximum (else only log). Default true.
    pub teardown: Option<bool>,
    /// Seconds before reconnecting after a teardown; absent: stay down until cleared.
    pub idle_timeout: Option<u32>,
}
