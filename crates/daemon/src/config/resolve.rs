//! Checks every setting where it is written, then resolves each neighbor's effective
//! settings: neighbor over group over `[bgp]` over the defaults.

use super::schema::{self, Raw};
use super::{ErrorKind, Locator, WarningKind};
use ribshard_engine::socket::{AoAlgorithm, TcpAoKey};
use ribshard_policy::Policies;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

pub use ribshard_wire::Family;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupType {
    Internal,
    External,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixLimit {
    pub maximum: u32,
    pub teardown: bool,
    pub idle_timeout: Option<u32>,
}

/// Threads of the pipeline (Junos `rib-sharding` / `update-threading`); 0 turns one off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threading {
    pub shards: u32,
    pub update_threads: u32,
    /// Octets queued for a member past which it is split from its update group.
    pub write_queue_high_water: u64,
}

/// One neighbor with every setting resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Where it is configured, as `bgp.group[0].neighbor[1]`.
    pub key: String,
    pub group: String,
    pub group_type: GroupType,
    pub address: IpAddr,
    pub port: u16,
    pub local_address: Option<IpAddr>,
    pub peer_as: u32,
    pub local_as: u32,
    pub hold_time: u16,
    pub connect_retry_time: u16,
    pub send_hold_time: u32,
    pub passive: bool,
    pub disable: bool,
    pub authentication_key: Option<String>,
    pub tcp_ao: Option<ribshard_engine::socket::TcpAoKey>,
    pub ttl_security: Option<u8>,
    pub multihop: bool,
    pub description: Option<String>,
    pub import: Vec<String>,
    pub export: Vec<String>,
    pub families: Vec<Family>,
    /// Per family, indexed by [`Family::index`].
    pub prefix_limits: [Option<PrefixLimit>; 2],
    pub cluster: Option<Ipv4Addr>,
    pub route_server_client: bool,
    /// Advertise ourselves as next hop; absent: yes to external peers (RFC 4271 section
    /// 5.1.3), no to internal ones.
    pub next_hop_self: Option<bool>,
    /// RFC 9234 role code.
    pub role: Option<u8>,
    /// Add-Path (RFC 7911): accept several paths per prefix from the neighbor.
    pub add_path_receive: bool,
    /// Add-Path: offer to send several paths per prefix.
    pub add_path_send: bool,
    /// Add-Path send: which paths per prefix (none: the best path alone).
    pub add_path_select: Option<ribshard_rib::AddPathSelect>,
    /// Junos `loops`: our AS may appear `loops - 1` times in a received AS_PATH.
    pub loops: u8,
    /// With a `local-as` other than `bgp.local-as`: received routes do not get it in front.
    pub local_as_private: bool,
    /// With a `local-as` other than `bgp.local-as`: routes sent carry it but not the global AS.
    pub no_prepend_global_as: bool,
    /// Junos `no-install`: its routes are never written to the kernel's table.
    pub no_install: bool,
    /// RFC 9494: the longest its routes are kept long-lived stale (`None`: what it asks).
    pub max_long_lived_stale_time: Option<u32>,
}

/// Where the management API and the metrics listen (`[management]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Management {
    pub socket: std::path::PathBuf,
    pub listen: Vec<SocketAddr>,
    /// The TCP listeners refuse requests that change state.
    pub read_only: bool,
    pub metrics: Option<SocketAddr>,
}

/// The API's socket when `[management] socket` is not set.
pub const DEFAULT_SOCKET: &str = "/run/ribshard/ribshard.sock";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub management: Management,
    pub local_as: u32,
    pub router_id: Ipv4Addr,
    pub listen: Vec<SocketAddr>,
    pub threading: Threading,
    /// The decision process's options (Junos `path-selection` and `multipath`).
    pub path_selection: ribshard_rib::Options,
    /// The start-up advertisement deferral; `None`: off (`max-delay = 0`).
    pub update_delay: Option<ribshard_engine::pipeline::UpdateDelay>,
    /// `[bgp.graceful-restart]`; `None`: graceful restart helper only.
    pub graceful_restart: Option<super::graceful::GracefulRestartConfig>,
    /// `[bgp] memory-limit`, octets; `None`: no limit.
    pub memory_limit: Option<u64>,
    /// `[policy-options]`, compiled.
    pub policies: PolicyTable,
    pub peers: Vec<Peer>,
    /// `[fib]`; `None`: nothing is written to the kernel.
    pub fib: Option<ribshard_fib::FibConfig>,
    /// `[bgp.resolution]`; `None`: every next hop is reachable at IGP cost 0.
    pub resolution: Option<ribshard_fib::ResolveConfig>,
    /// `[[bgp.originate]]`.
    pub originate: Vec<Originate>,
    /// `[mrt]`.
    pub mrt: MrtConfig,
    /// `[rpki]`; `None`: no RTR client (every route is not-found / unknown).
    pub rpki: Option<super::rpki::RpkiConfig>,
    /// `[bmp]`: the monitoring stations (none: no BMP).
    pub bmp: Vec<ribshard_bmp::StationConfig>,
    /// `[bmp] sys-name`, when set.
    pub bmp_sys_name: Option<String>,
}

/// When an originated network is advertised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Always,
    /// While a route of another protocol equal to or covering it is in the kernel.
    CoveringRoute,
}

/// A network we originate (`[[bgp.originate]]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Originate {
    pub prefix: ribshard_wire::Prefix,
    pub when: When,
    pub next_hop: Option<IpAddr>,
    pub med: Option<u32>,
    pub local_preference: Option<u32>,
    pub origin: ribshard_wire::Origin,
    pub communities: Vec<u32>,
}

/// `[mrt]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MrtConfig {
    pub inject: Vec<std::path::PathBuf>,
    pub updates: Option<String>,
    pub rotate_size: Option<u64>,
    pub rotate_interval: Option<u32>,
}

/// A community as written: "A:B" (16 bits each) or a well-known name (RFC 1997, RFC 7999).
pub fn community(s: &str) -> Option<u32> {
    match s {
        "no-export" => return Some(0xFFFF_FF01),
        "no-advertise" => return Some(0xFFFF_FF02),
        "no-export-subconfed" | "local-as" => return Some(0xFFFF_FF03),
        "blackhole" => return Some(0xFFFF_029A),
        _ => {}
    }
    let (a, b) = s.split_once(':')?;
    Some((u32::from(a.parse::<u16>().ok()?) << 16) | u32::from(b.parse::<u16>().ok()?))
}

/// The compiled policies of a configuration: equal when every policy is defined alike
/// (prefix-list files included).
#[derive(Clone, Debug, Default)]
pub struct PolicyTable(pub Arc<Policies>);

impl PartialEq for PolicyTable {
    fn eq(&self, o: &PolicyTable) -> bool {
        self.0.fingerprints() == o.0.fingerprints()
    }
}
impl Eq for PolicyTable {}

type Errs = Vec<(String, ErrorKind)>;
type Warns = Vec<(String, WarningKind)>;

/// TCP_MD5SIG_MAXKEYLEN of Linux.
const MAX_MD5_KEY: usize = 80;

fn secs(s: u32) -> std::time::Duration {
    std::time::Duration::from_secs(u64::from(s))
}

/// A size with its unit, as "4GiB", "512MiB" or "1.5 GiB" (KiB, MiB, GiB, TiB; KB, MB,
/// GB, TB as their powers of ten).
pub fn parse_size(s: &str) -> Result<u64, &'static str> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or("give a unit, as \"4GiB\" or \"512MiB\"")?;
    let (number, unit) = s.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| "not a number followed by a unit, as \"4GiB\"")?;
    let scale: f64 = match unit.trim() {
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return Err("the unit must be KiB, MiB, GiB or TiB (or KB, MB, GB, TB)"),
    };
    let octets = number * scale;
    if !octets.is_finite() || octets >= u64::MAX as f64 {
        return Err("too large");
    }
    Ok(octets as u64)
}

fn invalid(errs: &mut Errs, key: String, value: impl ToString, why: &'static str) {
    errs.push((
        key,
        ErrorKind::Invalid {
            value: value.to_string(),
            why,
        },
    ));
}

fn family(name: &str) -> Option<Family> {
    match name {
        "inet-unicast" => Some(Family::Ipv4Unicast),
        "inet6-unicast" => Some(Family::Ipv6Unicast),
        _ => None,
    }
}

fn role(name: &str) -> Option<u8> {
    use ribshard_wire::open::role;
    Some(match name {
        "provider" => role::PROVIDER,
        "rs" => role::RS,
        "rs-client" => role::RS_CLIENT,
        "customer" => role::CUSTOMER,
        "peer" => role::PEER,
        _ => return None,
    })
}

/// Checks a `tcp-ao` table where it is written.
fn check_tcp_ao(errs: &mut Errs, at: &str, ao: &super::schema::RawTcpAo) {
    if ao.key_id.is_none() {
        errs.push((format!("{at}.key-id"), ErrorKind::Missing));
    }
    match &ao.key {
        None => errs.push((format!("{at}.key"), ErrorKind::Missing)),
        Some(k) if k.is_empty() || k.len() > MAX_MD5_KEY => invalid(
            errs,
            format!("{at}.key"),
            format!("a key of {} octets", k.len()),
            "must be 1 to 80 octets (TCP_AO_MAXKEYLEN)",
        ),
        Some(_) => {}
    }
    if let Some(a) = &ao.algorithm {
        if AoAlgorithm::from_name(a).is_none() {
            invalid(
                errs,
                format!("{at}.algorithm"),
                format!("{a:?}"),
                "is not a TCP-AO algorithm: \"hmac-sha-1-96\" or \"aes-128-cmac-96\" (RFC 5926)",
            );
        }
    }
}

/// The most paths per prefix an `add-path-send` may name (Junos' limit).
const MAX_PATH_COUNT: u32 = 64;

/// Checks an `add-path-send` table where it is written.
fn check_add_path_send(errs: &mut Errs, at: &str, a: &super::schema::RawAddPathSend) {
    let mode = a.mode.as_deref().unwrap_or("best");
    if !matches!(mode, "best" | "all" | "equal-cost") {
        invalid(
            errs,
            format!("{at}.mode"),
            format!("{mode:?}"),
            "is not \"best\", \"all\" or \"equal-cost\"",
        );
    }
    match (mode, a.path_count) {
        ("best", None) => errs.push((format!("{at}.path-count"), ErrorKind::Missing)),
        ("all", Some(n)) => invalid(
            errs,
            format!("{at}.path-count"),
            n.to_string(),
            "goes with mode \"best\" or \"equal-cost\": \"all\" sends every path",
        ),
        (_, Some(n)) if !(2..=MAX_PATH_COUNT).contains(&n) => invalid(
            errs,
            format!("{at}.path-count"),
            n.to_string(),
            "must be 2 to 64 (one path needs no add-path-send)",
        ),
        _ => {}
    }
}

/// The selection a checked `add-path-send` table describes.
fn add_path_select(a: &super::schema::RawAddPathSend) -> Option<ribshard_rib::AddPathSelect> {
    let n = a.path_count.unwrap_or(MAX_PATH_COUNT) as usize;
    match a.mode.as_deref().unwrap_or("best") {
        "best" => Some(ribshard_rib::AddPathSelect::Best(n)),
        "all" => Some(ribshard_rib::AddPathSelect::All),
        "equal-cost" => Some(ribshard_rib::AddPathSelect::EqualCost(n)),
        _ => None,
    }
}

/// What the shards keep ready for every neighbor's `add-path-send` together.
pub fn add_path_keep(peers: &[Peer]) -> Option<ribshard_rib::AddPathKeep> {
    let mut keep = ribshard_rib::AddPathKeep::default();
    for s in peers.iter().filter_map(|p| p.add_path_select) {
        match s {
            ribshard_rib::AddPathSelect::Best(n) => keep.ranked = keep.ranked.max(n),
            ribshard_rib::AddPathSelect::All => keep.all = true,
            ribshard_rib::AddPathSelect::EqualCost(_) => keep.equal_cost = true,
        }
    }
    keep.any().then_some(keep)
}

/// The key a checked `tcp-ao` table describes; `None` if its errors were reported.
fn tcp_ao_key(ao: &super::schema::RawTcpAo) -> Option<TcpAoKey> {
    let key_id = ao.key_id?;
    let algorithm = match &ao.algorithm {
        Some(a) => AoAlgorithm::from_name(a)?,
        None => AoAlgorithm::HmacSha1_96,
    };
    Some(TcpAoKey {
        send_id: key_id,
        receive_id: ao.receive_id.unwrap_or(key_id),
        algorithm,
        secret: ao.key.clone()?.into_bytes(),
    })
}

/// Checks the settings common to `[bgp]`, groups and neighbors where they are written.
macro_rules! check_common {
    ($errs:expr, $at:expr, $s:expr, $policies:expr) => {{
        let at: &str = $at;
        let s = $s;
        for (k, v) in [("peer-as", s.peer_as), ("local-as", s.local_as)] {
            if let Some(asn) = v {
                check_asn($errs, format!("{at}.{k}"), asn);
            }
        }
        if let Some(h) = s.hold_time {
            if h == 1 || h == 2 {
                invalid(
                    $errs,
                    format!("{at}.hold-time"),
                    h,
                    "must be 0 or at least 3 seconds (RFC 4271 section 4.2)",
                );
            }
        }
        if s.connect_retry_time == Some(0) {
            invalid(
                $errs,
                format!("{at}.connect-retry-time"),
                0,
                "must be at least 1 second",
            );
        }
        if let Some(k) = &s.authentication_key {
            if k.is_empty() || k.len() > MAX_MD5_KEY {
                invalid(
                    $errs,
                    format!("{at}.authentication-key"),
                    format!("a key of {} octets", k.len()),
                    "must be 1 to 80 octets (TCP_MD5SIG)",
                );
            }
        }
        if let Some(ao) = &s.tcp_ao {
            check_tcp_ao($errs, &format!("{at}.tcp-ao"), ao);
        }
        if s.ttl_security == Some(0) {
            invalid(
                $errs,
                format!("{at}.ttl-security"),
                0,
                "is not a hop count (1 to 255)",
            );
        }
        for (k, list) in [("import", &s.import), ("export", &s.export)] {
            for (i, p) in list.iter().flatten().enumerate() {
                let policies: &Policies = $policies;
                if !policies.defines(p) {
                    $errs.push((
                        format!("{at}.{k}[{i}]"),
                        ErrorKind::Policy(ribshard_policy::PolicyError::UndefinedPolicy(p.clone())),
                    ));
                } else if k == "import" && p == "route-server-control" {
                    invalid(
                        $errs,
                        format!("{at}.{k}[{i}]"),
                        format!("policy \"{p}\""),
                        "reads the receivers' AS: it is an export policy",
                    );
                } else if k == "export"
                    && policies.statement(p).is_some_and(|s| s.reads_rpki.any())
                {
                    invalid(
                        $errs,
                        format!("{at}.{k}[{i}]"),
                        format!("policy \"{p}\""),
                        "reads validation-state or aspa-state, which import policies look up: tag routes at import (community origin-validation-state:valid ...) and match the community here",
                    );
                }
            }
        }
        for (i, f) in s.family.iter().flatten().enumerate() {
            if family(f).is_none() {
                invalid(
                    $errs,
                    format!("{at}.family[{i}]"),
                    format!("\"{f}\""),
                    "is not a family (\"inet-unicast\", \"inet6-unicast\")",
                );
            }
        }
        if let Some(a) = &s.add_path_send {
            check_add_path_send($errs, &format!("{at}.add-path-send"), a);
        }
        for (i, a) in s.add_path.iter().flatten().enumerate() {
            if a != "receive" && a != "send" {
                invalid(
                    $errs,
                    format!("{at}.add-path[{i}]"),
                    format!("\"{a}\""),
                    "is not \"receive\" or \"send\"",
                );
            }
        }
        if let Some(r) = &s.role {
            if role(r).is_none() {
                invalid(
                    $errs,
                    format!("{at}.role"),
                    format!("\"{r}\""),
                    "is not a role (provider, customer, peer, rs, rs-client)",
                );
            }
        }
        if let Some(pl) = &s.prefix_limit {
            for (k, l) in [
                ("inet-unicast", &pl.inet_unicast),
                ("inet6-unicast", &pl.inet6_unicast),
            ] {
                if let Some(l) = l {
                    match l.maximum {
                        None => $errs
                            .push((format!("{at}.prefix-limit.{k}.maximum"), ErrorKind::Missing)),
                        Some(0) => invalid(
                            $errs,
                            format!("{at}.prefix-limit.{k}.maximum"),
                            0,
                            "must be at least 1",
                        ),
                        Some(_) => {}
                    }
                }
            }
        }
    }};
}

/// A neighbor address and port that no session can reach: a TCP peer is one unicast host
/// that is not ourselves.
fn check_neighbor_address(
    errs: &mut Errs,
    nk: &str,
    address: IpAddr,
    port: u16,
    listen: &[SocketAddr],
) {
    let key = format!("{nk}.address");
    if address.is_unspecified() {
        invalid(
            errs,
            key,
            address,
            "is the unspecified address, not a neighbor",
        );
    } else if address.is_multicast() || address == IpAddr::from(Ipv4Addr::BROADCAST) {
        invalid(
            errs,
            key,
            address,
            "is a multicast or broadcast address: a BGP neighbor is one host (TCP)",
        );
    } else if listen.iter().any(|l| {
        l.port() == port
            && (l.ip() == address
                || (l.ip().is_unspecified()
                    && l.is_ipv4() == address.is_ipv4()
                    && super::host::is_local(address)))
    }) {
        errs.push((key, ErrorKind::OwnListenAddress { address, port }));
    }
    if port == 0 {
        invalid(
            errs,
            format!("{nk}.port"),
            0,
            "is not a port a neighbor can listen on (1 to 65535)",
        );
    }
}

/// "a.b.c.d/len" or an IPv6 prefix.
pub fn parse_prefix(s: &str) -> Option<ribshard_wire::Prefix> {
    let (a, l) = s.split_once('/')?;
    let len: u8 = l.parse().ok()?;
    match a.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => ribshard_wire::Prefix::v4(a, len),
        IpAddr::V6(a) => ribshard_wire::Prefix::v6(a, len),
    }
}

fn default_policy(t: GroupType) -> Vec<String> {
    vec![match t {
        GroupType::Internal => "accept".into(),
        GroupType::External => "reject".into(),
    }]
}

fn check_asn(errs: &mut Errs, key: String, asn: u32) {
    if asn == 0 {
        invalid(errs, key, asn, "is reserved (RFC 7607)");
    } else if asn == ribshard_wire::types::AS_TRANS {
        invalid(errs, key, asn, "is AS_TRANS, not a real AS (RFC 6793)");
    }
}

fn limit(l: &Option<schema::RawPrefixLimit>) -> Option<PrefixLimit> {
    let l = l.as_ref()?;
    Some(PrefixLimit {
        maximum: l.maximum?,
        teardown: l.teardown.unwrap_or(true),
        idle_timeout: l.idle_timeout,
    })
}

/// Every error, or the settings; and what will not work on this host either way. `base`:
/// where relative prefix-list files are, the configuration file's directory.
pub(super) fn resolve(raw: Raw, loc: &Locator<'_>, base: &Path) -> (Result<Config, Errs>, Warns) {
    let mut warns = Warns::new();
    (resolve_into(raw, loc, &mut warns, base), warns)
}

fn resolve_into(
    raw: Raw,
    loc: &Locator<'_>,
    warns: &mut Warns,
    base: &Path,
) -> Result<Config, Errs> {
    let mut errs = Errs::new();
    let read = |p: &Path| std::fs::read_to_string(base.join(p));
    let compiled = ribshard_policy::compile(&raw.policy_options.unwrap_or_default(), &read);
    errs.extend(
        compiled
            .errors
            .into_iter()
            .map(|(k, e)| (k, ErrorKind::Policy(e))),
    );
    warns.extend(
        compiled
            .warnings
            .into_iter()
            .map(|(k, w)| (k, WarningKind::Policy(w))),
    );
    let policies = compiled.policies;
    let Some(bgp) = raw.bgp else {
        return Err(vec![("bgp".into(), ErrorKind::Missing)]);
    };
    check_common!(&mut errs, "bgp", &bgp, &policies);
    // `local-as` under [bgp] is our AS (checked with the common settings above).
    let local_as = match bgp.local_as {
        Some(a) => a,
        None => {
            errs.push(("bgp.local-as".into(), ErrorKind::Missing));
            0
        }
    };
    let router_id = match bgp.router_id {
        Some(id) if id.is_unspecified() => {
            invalid(
                &mut errs,
                "bgp.router-id".into(),
                id,
                "is not a valid BGP identifier (RFC 6286)",
            );
            id
        }
        Some(id) => id,
        None => {
            errs.push(("bgp.router-id".into(), ErrorKind::Missing));
            Ipv4Addr::UNSPECIFIED
        }
    };
    let listen = bgp.listen.clone().unwrap_or_else(|| {
        vec![
            SocketAddr::from(([0, 0, 0, 0], 179)),
            SocketAddr::from(([0u16; 8], 179)),
        ]
    });
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let shards = bgp.rib_sharding.as_ref().and_then(|r| r.number_of_shards);
    let update_threads = bgp
        .update_threading
        .as_ref()
        .and_then(|u| u.number_of_threads);
    // Unset: the rule of `advise::default_threads` for this machine's cores. One set alone
    // keeps the other workable: shards need update threads, update threads any shards.
    let (rule_shards, rule_threads) =
        crate::advise::default_threads(crate::advise::machine::cores());
    let threading = Threading {
        shards: shards.unwrap_or(match update_threads {
            Some(0) => 1,
            _ => rule_shards,
        }),
        update_threads: update_threads.unwrap_or(match shards {
            Some(s) if s > 1 => rule_threads.max(1),
            _ => rule_threads,
        }),
        write_queue_high_water: bgp
            .update_threading
            .as_ref()
            .and_then(|u| u.write_queue_high_water)
            .unwrap_or(ribshard_adjout::HIGH_WATER as u64),
    };
    for (threads, key) in [
        (threading.shards, "bgp.rib-sharding.number-of-shards"),
        (
            threading.update_threads,
            "bgp.update-threading.number-of-threads",
        ),
    ] {
        if threads > cpus {
            warns.push((
                key.into(),
                WarningKind::MoreThreadsThanCpus {
                    threads,
                    cpus: cpus as usize,
                },
            ));
        }
    }
    if threading.write_queue_high_water < ribshard_adjout::MIN_HIGH_WATER as u64 {
        invalid(
            &mut errs,
            "bgp.update-threading.write-queue-high-water".into(),
            threading.write_queue_high_water,
            "must be at least 262140 octets (four UPDATEs of the largest size)",
        );
    }
    if threading.shards > 1024 {
        invalid(
            &mut errs,
            "bgp.rib-sharding.number-of-shards".into(),
            threading.shards,
            "must be 0 to 1024",
        );
    }
    if threading.update_threads > 1024 {
        invalid(
            &mut errs,
            "bgp.update-threading.number-of-threads".into(),
            threading.update_threads,
            "must be 0 to 1024",
        );
    }

    if threading.update_threads == 0 && threading.shards > 1 {
        invalid(
            &mut errs,
            "bgp.update-threading.number-of-threads".into(),
            0,
            "RIB sharding needs update threading (as in Junos): set number-of-shards to 0 or 1 for the single-threaded mode",
        );
    }

    let defaults = ribshard_rib::Options::default();
    let ps = bgp.path_selection.clone().unwrap_or_default();
    let path_selection = ribshard_rib::Options {
        always_compare_med: ps.always_compare_med.unwrap_or(defaults.always_compare_med),
        external_router_id: ps.external_router_id.unwrap_or(defaults.external_router_id),
        multipath: bgp.multipath.as_ref().map(|m| ribshard_rib::Multipath {
            multiple_as: m.multiple_as.unwrap_or(false),
        }),
        add_path: None,
    };

    let memory_limit = match bgp.memory_limit.as_deref().map(parse_size) {
        None => None,
        Some(Ok(octets)) if octets >= 64 << 20 => Some(octets),
        Some(Ok(_)) => {
            invalid(
                &mut errs,
                "bgp.memory-limit".into(),
                bgp.memory_limit.clone().unwrap_or_default(),
                "must be at least 64MiB",
            );
            None
        }
        Some(Err(why)) => {
            invalid(
                &mut errs,
                "bgp.memory-limit".into(),
                bgp.memory_limit.clone().unwrap_or_default(),
                why,
            );
            None
        }
    };

    let update_delay = {
        let defaults = ribshard_engine::pipeline::UpdateDelay::default();
        let u = bgp.update_delay.clone().unwrap_or_default();
        let max = u.max_delay.map_or(defaults.max_delay, secs);
        let establish = u.establish_wait.map_or(defaults.establish_wait, secs);
        if establish > max && !max.is_zero() {
            invalid(
                &mut errs,
                "bgp.update-delay.establish-wait".into(),
                establish.as_secs(),
                "must not be more than max-delay",
            );
        }
        (!max.is_zero()).then_some(ribshard_engine::pipeline::UpdateDelay {
            max_delay: max,
            establish_wait: establish.min(max),
        })
    };

    let fib = raw.fib.as_ref().map(|f| {
        let d = ribshard_fib::FibConfig::default();
        ribshard_fib::FibConfig {
            table: f.table.unwrap_or(d.table),
            protocol: f.protocol.unwrap_or(d.protocol),
            metric: f.metric.unwrap_or(d.metric),
            nexthop_objects: f.nexthop_objects.unwrap_or(d.nexthop_objects),
            flush_delay: f.flush_delay.map_or(d.flush_delay, |ms| {
                std::time::Duration::from_millis(u64::from(ms))
            }),
            retain: f.retain.unwrap_or(d.retain),
            ..d
        }
    });
    if let Some(f) = &raw.fib {
        if f.table == Some(0) || f.table == Some(255) {
            invalid(
                &mut errs,
                "fib.table".into(),
                f.table.unwrap_or(0),
                "is not a table routes can be written to (0 is unspecified, 255 is local)",
            );
        }
        if let Some(p) = f.protocol.filter(|p| *p <= 4) {
            invalid(
                &mut errs,
                "fib.protocol".into(),
                p,
                "is reserved for the kernel's own routes (0 to 4): use 186 (bgp) or another",
            );
        }
        if f.flush_delay.is_some_and(|ms| ms > 1000) {
            invalid(
                &mut errs,
                "fib.flush-delay".into(),
                f.flush_delay.unwrap_or(0),
                "must be at most 1000 milliseconds",
            );
        }
    }
    let r = bgp.resolution.clone().unwrap_or_default();
    let resolution = r.enabled.unwrap_or(true).then(|| {
        let d = ribshard_fib::ResolveConfig::default();
        ribshard_fib::ResolveConfig {
            tables: r.tables.clone().unwrap_or(d.tables),
            via_default: r.resolve_via_default.unwrap_or(d.via_default),
            own_protocol: fib.as_ref().map_or(d.own_protocol, |f| f.protocol),
        }
    });
    if r.tables.as_ref().is_some_and(Vec::is_empty) {
        invalid(
            &mut errs,
            "bgp.resolution.tables".into(),
            "[]",
            "needs at least one table (255 is local, 254 main)",
        );
    }

    let mut originate = Vec::new();
    for (i, o) in bgp.originate.iter().flatten().enumerate() {
        let k = format!("bgp.originate[{i}]");
        let prefix = match &o.prefix {
            None => {
                errs.push((format!("{k}.prefix"), ErrorKind::Missing));
                continue;
            }
            Some(p) => match parse_prefix(p) {
                Some(x) => x,
                None => {
                    invalid(
                        &mut errs,
                        format!("{k}.prefix"),
                        format!("\"{p}\""),
                        "is not a prefix (as \"192.0.2.0/24\" or \"2001:db8::/32\")",
                    );
                    continue;
                }
            },
        };
        if prefix != prefix.masked() {
            invalid(
                &mut errs,
                format!("{k}.prefix"),
                prefix,
                "has host bits set (write the network's address)",
            );
        }
        let when = match o.when.as_deref() {
            None | Some("covering-route") => When::CoveringRoute,
            Some("always") => When::Always,
            Some(w) => {
                invalid(
                    &mut errs,
                    format!("{k}.when"),
                    format!("\"{w}\""),
                    "is not \"covering-route\" or \"always\"",
                );
                When::Always
            }
        };
        let origin = match o.origin.as_deref() {
            None | Some("igp") => ribshard_wire::Origin::Igp,
            Some("egp") => ribshard_wire::Origin::Egp,
            Some("incomplete") => ribshard_wire::Origin::Incomplete,
            Some(x) => {
                invalid(
                    &mut errs,
                    format!("{k}.origin"),
                    format!("\"{x}\""),
                    "is not \"igp\", \"egp\" or \"incomplete\"",
                );
                ribshard_wire::Origin::Igp
            }
        };
        if let Some(nh) = o.next_hop {
            if nh.is_unspecified() || nh.is_multicast() {
                invalid(
                    &mut errs,
                    format!("{k}.next-hop"),
                    nh,
                    "is not a usable next hop",
                );
            }
        }
        let mut communities = Vec::new();
        for (j, c) in o.communities.iter().flatten().enumerate() {
            match community(c) {
                Some(v) => communities.push(v),
                None => invalid(&mut errs, format!("{k}.communities[{j}]"), format!("\"{c}\""), "is not a community (\"65000:100\", or a well-known name such as \"no-export\")"),
            }
        }
        originate.push(Originate {
            prefix: prefix.masked(),
            when,
            next_hop: o.next_hop,
            med: o.med,
            local_preference: o.local_preference,
            origin,
            communities,
        });
    }
    let m = raw.mrt.clone().unwrap_or_default();
    if m.rotate_size == Some(0) {
        invalid(
            &mut errs,
            "mrt.rotate-size".into(),
            0,
            "must be at least 1 octet",
        );
    }
    if m.rotate_interval == Some(0) {
        invalid(
            &mut errs,
            "mrt.rotate-interval".into(),
            0,
            "must be at least 1 second",
        );
    }
    if (m.rotate_size.is_some() || m.rotate_interval.is_some()) && m.updates.is_none() {
        invalid(
            &mut errs,
            "mrt.updates".into(),
            "nothing",
            "is needed to rotate (the file name)",
        );
    }
    for (i, f) in m.inject.iter().flatten().enumerate() {
        if !f.exists() {
            errs.push((
                format!("mrt.inject[{i}]"),
                ErrorKind::Invalid {
                    value: f.display().to_string(),
                    why: "does not exist",
                },
            ));
        }
    }
    let mrt = MrtConfig {
        inject: m.inject.unwrap_or_default(),
        updates: m.updates,
        rotate_size: m.rotate_size,
        rotate_interval: m.rotate_interval,
    };

    let mut peers = Vec::new();
    let mut group_names: HashMap<String, String> = HashMap::new();
    let mut neighbors: HashMap<(IpAddr, u16), String> = HashMap::new();
    for (gi, g) in bgp.group.iter().flatten().enumerate() {
        let gk = format!("bgp.group[{gi}]");
        check_common!(&mut errs, &gk, g, &policies);
        let name = match &g.name {
            Some(n) => {
                if let Some(first) = group_names.get(n) {
                    errs.push((
                        format!("{gk}.name"),
                        ErrorKind::Duplicate {
                            value: format!("group \"{n}\""),
                            first: loc.line_of_key(first).unwrap_or(0),
                        },
                    ));
                } else {
                    group_names.insert(n.clone(), format!("{gk}.name"));
                }
                n.clone()
            }
            None => {
                errs.push((format!("{gk}.name"), ErrorKind::Missing));
                String::new()
            }
        };
        let group_type = match g.r#type.as_deref() {
            Some("internal") => GroupType::Internal,
            Some("external") => GroupType::External,
            Some(other) => {
                invalid(
                    &mut errs,
                    format!("{gk}.type"),
                    format!("\"{other}\""),
                    "must be \"internal\" or \"external\"",
                );
                GroupType::External
            }
            None => {
                errs.push((format!("{gk}.type"), ErrorKind::Missing));
                GroupType::External
            }
        };
        for (ni, n) in g.neighbor.iter().flatten().enumerate() {
            let nk = format!("{gk}.neighbor[{ni}]");
            check_common!(&mut errs, &nk, n, &policies);
            macro_rules! pick {
                ($f:ident) => {
                    n.$f.clone()
                        .or_else(|| g.$f.clone())
                        .or_else(|| bgp.$f.clone())
                };
            }
            let Some(address) = n.address else {
                errs.push((format!("{nk}.address"), ErrorKind::Missing));
                continue;
            };
            let port = pick!(port).unwrap_or(179);
            check_neighbor_address(&mut errs, &nk, address, port, &listen);
            if let Some(first) = neighbors.get(&(address, port)) {
                errs.push((
                    format!("{nk}.address"),
                    ErrorKind::Duplicate {
                        value: format!("neighbor {address} port {port}"),
                        first: loc.line_of_key(first).unwrap_or(0),
                    },
                ));
            } else {
                neighbors.insert((address, port), format!("{nk}.address"));
            }
            let peer_local_as = pick!(local_as).unwrap_or(local_as);
            let peer_as = match (pick!(peer_as), group_type) {
                (Some(a), _) => a,
                (None, GroupType::Internal) => peer_local_as,
                (None, GroupType::External) => {
                    errs.push((format!("{nk}.peer-as"), ErrorKind::Missing));
                    0
                }
            };
            if group_type == GroupType::Internal && peer_as != peer_local_as {
                invalid(
                    &mut errs,
                    format!("{nk}.peer-as"),
                    peer_as,
                    "must equal our AS for an internal peer",
                );
            }
            if group_type == GroupType::External && peer_as == peer_local_as && peer_as != 0 {
                invalid(
                    &mut errs,
                    format!("{nk}.peer-as"),
                    peer_as,
                    "must differ from our AS for an external peer (or use type = \"internal\")",
                );
            }
            let local_as_private = pick!(local_as_private).unwrap_or(false);
            let no_prepend_global_as = pick!(no_prepend_global_as).unwrap_or(false);
            for (set, key) in [
                (local_as_private, "local-as-private"),
                (no_prepend_global_as, "no-prepend-global-as"),
            ] {
                if set && (peer_local_as == local_as || group_type == GroupType::Internal) {
                    invalid(
                        &mut errs,
                        format!("{gk}.{key}"),
                        "true",
                        "applies only with a local-as other than bgp.local-as, on external groups",
                    );
                }
            }
            let cluster = pick!(cluster);
            if cluster.is_some() && group_type == GroupType::External {
                invalid(
                    &mut errs,
                    format!("{gk}.cluster"),
                    "cluster",
                    "applies to internal groups only (route reflection)",
                );
            }
            let rs_client = pick!(route_server_client).unwrap_or(false);
            if rs_client && group_type == GroupType::Internal {
                invalid(
                    &mut errs,
                    format!("{gk}.route-server-client"),
                    "route-server-client",
                    "applies to external groups only",
                );
            }
            if let Some(local) = pick!(local_address) {
                if !super::host::is_local(local) {
                    warns.push((
                        format!("{nk}.local-address"),
                        WarningKind::NotLocal { address: local },
                    ));
                }
                if local.is_ipv4() != address.is_ipv4() {
                    invalid(
                        &mut errs,
                        format!("{nk}.local-address"),
                        local,
                        "is not of the neighbor's address family",
                    );
                }
            }
            if pick!(authentication_key).is_some() && pick!(tcp_ao).is_some() {
                invalid(
                    &mut errs,
                    format!("{nk}.tcp-ao"),
                    "with authentication-key",
                    "cannot be: a connection is signed with TCP-AO or with TCP MD5, not both",
                );
            }
            if pick!(tcp_ao).is_some() && !ribshard_engine::socket::tcp_ao_supported() {
                warns.push((format!("{nk}.tcp-ao"), WarningKind::TcpAoUnsupported));
            }
            let hold_time = pick!(hold_time).unwrap_or(90);
            let families = pick!(family)
                .map(|v| v.iter().filter_map(|f| family(f)).collect())
                .unwrap_or_else(|| vec![Family::Ipv4Unicast, Family::Ipv6Unicast]);
            let limits = pick!(prefix_limit).unwrap_or_default();
            peers.push(Peer {
                key: nk,
                group: name.clone(),
                group_type,
                address,
                port,
                local_address: pick!(local_address),
                peer_as,
                local_as: peer_local_as,
                hold_time,
                connect_retry_time: pick!(connect_retry_time).unwrap_or(30),
                send_hold_time: pick!(send_hold_time)
                    .unwrap_or_else(|| 480u32.max(2 * u32::from(hold_time))),
                passive: pick!(passive).unwrap_or(false),
                disable: pick!(disable).unwrap_or(false),
                authentication_key: pick!(authentication_key),
                tcp_ao: pick!(tcp_ao).as_ref().and_then(tcp_ao_key),
                ttl_security: pick!(ttl_security),
                multihop: pick!(multihop).unwrap_or(false),
                description: pick!(description),
                // RFC 8212: without a policy, an external session accepts and sends nothing.
                import: pick!(import).unwrap_or_else(|| default_policy(group_type)),
                export: pick!(export).unwrap_or_else(|| default_policy(group_type)),
                families,
                prefix_limits: [limit(&limits.inet_unicast), limit(&limits.inet6_unicast)],
                cluster,
                route_server_client: rs_client,
                next_hop_self: pick!(next_hop_self),
                role: pick!(role).and_then(|r| role(&r)),
                add_path_receive: pick!(add_path).is_some_and(|v| v.iter().any(|a| a == "receive")),
                add_path_send: pick!(add_path).is_some_and(|v| v.iter().any(|a| a == "send"))
                    || pick!(add_path_send).is_some(),
                add_path_select: pick!(add_path_send).as_ref().and_then(add_path_select),
                loops: pick!(loops).unwrap_or(1),
                local_as_private,
                no_prepend_global_as,
                no_install: pick!(no_install).unwrap_or(false),
                max_long_lived_stale_time: pick!(max_long_lived_stale_time),
            });
        }
    }
    // A route server is often brought up empty and filled by reloads (as BIRD allows).
    if peers.is_empty() && errs.is_empty() {
        warns.push(("bgp.group".into(), WarningKind::NoNeighbors));
    }
    let rpki = super::rpki::resolve(raw.rpki.as_ref(), &mut errs);
    let bmp = super::bmp::resolve(raw.bmp.as_ref(), &mut errs);
    let graceful_restart = super::graceful::resolve(bgp.graceful_restart.as_ref(), &mut errs);
    if rpki.is_none() {
        super::rpki::warn_unfed(&peers, &policies, warns);
    }
    let m = raw.management.unwrap_or_default();
    if m.socket.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
        invalid(
            &mut errs,
            "management.socket".into(),
            "\"\"",
            "is not a path (the API always has its socket)",
        );
    }
    let management = Management {
        socket: m.socket.unwrap_or_else(|| DEFAULT_SOCKET.into()),
        listen: m.listen.unwrap_or_default(),
        read_only: m.read_only.unwrap_or(true),
        metrics: m.metrics,
    };
    if errs.is_empty() {
        Ok(Config {
            management,
            local_as,
            router_id,
            listen,
            threading,
            path_selection: ribshard_rib::Options {
                add_path: add_path_keep(&peers),
                ..path_selection
            },
            update_delay,
            graceful_restart,
            memory_limit,
            policies: PolicyTable(Arc::new(policies)),
            peers,
            fib,
            resolution,
            originate,
            mrt,
            rpki,
            bmp,
            bmp_sys_name: raw.bmp.as_ref().and_then(|b| b.sys_name.clone()),
        })
    } else {
        Err(errs)
    }
}
