//! The command line's client side: `ribshard show ...`, `clear ...` and `configure reload`,
//! in Junos words, asked of the running daemon over its management API and printed as
//! Junos lays them out (or as the API's JSON with `--json`).

pub mod render;
pub mod validation;

use ribshard_mgmt::api::{
    BmpStation, ClearReply, ClearRequest, Convergence, FibSummary, FibVerify, ForwardingRoute,
    Group, Injected, LogLevelRequest, LogLevels, MrtFile, Neighbor, ReloadReply, ReloadRequest,
    RestartReply, RestartRequest, RouteChange, RouteRequest, RouteSummary, RunningConfig, Summary,
    Threads, WatchEnd, WatchRequest, WorkQueues,
};
use ribshard_mgmt::client::{Client, ClientError, Endpoint};
use std::io::{self, Write};
use std::path::PathBuf;

/// What a command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Summary,
    Neighbor {
        address: Option<String>,
        statistics: bool,
    },
    Group(Option<String>),
    Convergence,
    RouteSummary,
    Routes(Box<RouteRequest>),
    Threads,
    WorkQueues,
    Clear(ClearRequest),
    Reload(ReloadRequest),
    /// `restart [--graceful]`.
    Restart(RestartRequest),
    FibSummary,
    /// `show validation session`.
    ValidationSessions,
    /// `show bmp`.
    Bmp,
    /// `show validation database [prefix P] [origin-as N]`.
    ValidationDatabase {
        prefix: Option<String>,
        asn: Option<u32>,
    },
    /// `show route forwarding-table [DESTINATION]`.
    ForwardingTable(Option<String>),
    FibVerify,
    /// `mrt inject FILE` (a path on the daemon's host).
    MrtInject(String),
    MrtRemove(String),
    MrtInjections,
    /// `mrt dump-rib FILE [--neighbor A]`: the Loc-RIB (or the neighbor's Adj-RIB-In) as
    /// TABLE_DUMP_V2, written to FILE here.
    MrtDumpRib {
        file: PathBuf,
        neighbor: Option<String>,
    },
    /// `monitor route [PREFIX|ADDRESS] [neighbor A] [community C] [large-community C]`.
    MonitorRoute(WatchRequest),
    /// `monitor log`.
    MonitorLog,
    /// `set log level LEVEL [neighbor A]`; `show log level` without a change.
    LogLevel(Option<LogLevelRequest>),
    /// `show configuration`.
    Configuration,
}

/// Why a command line is not understood.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

fn usage(s: impl Into<String>) -> Usage {
    Usage(s.into())
}

const SHOW: &str = "show bgp summary | show bgp neighbor [ADDRESS] [statistics] | show bgp group [NAME] | \
show bgp convergence | show route summary | show route [PREFIX|ADDRESS [exact|longer|orlonger]] [table inet.0|inet6.0] \
[rib-sharding N] [receive-protocol bgp ADDRESS] [advertising-protocol bgp ADDRESS] [community C] [large-community C] \
[aspath-regex R] [next-hop A] [protocol bgp|local] [active-path] [detail|terse] [hidden] [rejected] [count] | \
show route forwarding-table [PREFIX|ADDRESS] | show fib summary | show bmp | show thread cpu | show work-queues | show log level | show configuration";

/// Parses the words after `show`.
pub fn parse_show(words: &[String]) -> Result<Request, Usage> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["bgp", "summary"] => Ok(Request::Summary),
        ["bgp", "neighbor"] => Ok(Request::Neighbor {
            address: None,
            statistics: false,
        }),
        ["bgp", "neighbor", a] => Ok(Request::Neighbor {
            address: Some(a.to_string()),
            statistics: false,
        }),
        ["bgp", "neighbor", a, "statistics"] => Ok(Request::Neighbor {
            address: Some(a.to_string()),
            statistics: true,
        }),
        ["bgp", "group"] => Ok(Request::Group(None)),
        ["bgp", "group", n] => Ok(Request::Group(Some(n.to_string()))),
        ["bgp", "convergence"] => Ok(Request::Convergence),
        ["route", "summary"] => Ok(Request::RouteSummary),
        ["route", "forwarding-table"] => Ok(Request::ForwardingTable(None)),
        ["route", "forwarding-table", d] => Ok(Request::ForwardingTable(Some(d.to_string()))),
        ["fib", "summary"] => Ok(Request::FibSummary),
        ["validation", "session"] => Ok(Request::ValidationSessions),
        ["bmp"] => Ok(Request::Bmp),
        ["validation", "database", rest @ ..] => {
            let (mut prefix, mut asn) = (None, None);
            for pair in rest.chunks(2) {
                match pair {
                    ["prefix", p] => prefix = Some(p.to_string()),
                    ["origin-as", a] => {
                        asn = Some(
                            a.trim_start_matches("AS")
                                .parse()
                                .map_err(|_| usage(format!("origin-as {a}: not an AS number")))?,
                        )
                    }
                    _ => {
                        return Err(usage(format!(
                            "show validation database [prefix P] [origin-as N]: unexpected {}",
                            pair.join(" ")
                        )))
                    }
                }
            }
            Ok(Request::ValidationDatabase { prefix, asn })
        }
        ["route", rest @ ..] => parse_route(rest).map(|q| Request::Routes(Box::new(q))),
        ["thread", "cpu"] => Ok(Request::Threads),
        ["log", "level"] => Ok(Request::LogLevel(None)),
        ["configuration"] => Ok(Request::Configuration),
        ["work-queues"] => Ok(Request::WorkQueues),
        _ => Err(usage(format!("show what? {SHOW}"))),
    }
}

fn parse_route(w: &[&str]) -> Result<RouteRequest, Usage> {
    let mut q = RouteRequest::default();
    let mut i = 0;
    let next = |i: &mut usize, what: &str| -> Result<String, Usage> {
        *i += 1;
        w.get(*i)
            .map(|s| s.to_string())
            .ok_or_else(|| usage(format!("{what} needs a value")))
    };
    while let Some(word) = w.get(i).copied() {
        match word {
            "exact" | "longer" | "orlonger" => {
                if q.destination.is_none() {
                    return Err(usage(format!("{word} follows a prefix")));
                }
                q.match_type = Some(word.into());
            }
            "table" => q.table = Some(next(&mut i, "table")?),
            "rib-sharding" => {
                let mut v = next(&mut i, "rib-sharding")?;
                if v == "shard" {
                    v = next(&mut i, "rib-sharding shard")?;
                }
                let n = v.strip_prefix("rs-shard-").unwrap_or(&v);
                q.shard = Some(n.parse().map_err(|_| {
                    usage(format!("rib-sharding {v}: a shard number (or rs-shard-N)"))
                })?);
            }
            "receive-protocol" | "advertising-protocol" => {
                let proto = next(&mut i, word)?;
                if proto != "bgp" {
                    return Err(usage(format!("{word} {proto}: only bgp")));
                }
                let a = next(&mut i, &format!("{word} bgp"))?;
                if word == "receive-protocol" {
                    q.receive_protocol = Some(a);
                } else {
                    q.advertising_protocol = Some(a);
                }
            }
            "detail" => q.detail = true,
            "hidden" => q.hidden = true,
            "rejected" => q.rejected = true,
            "community" => q.community = Some(next(&mut i, word)?),
            "large-community" => q.large_community = Some(next(&mut i, word)?),
            "aspath-regex" => q.aspath_regex = Some(next(&mut i, word)?),
            "next-hop" => q.next_hop = Some(next(&mut i, word)?),
            "validation-state" => q.validation_state = Some(next(&mut i, word)?),
            "protocol" => q.protocol = Some(next(&mut i, word)?),
            "active-path" => q.active_path = true,
            "terse" => q.terse = true,
            // `| count` as Junos pipes it (quoted, or the shell takes the bar).
            "count" => q.count = true,
            "|" if w.get(i + 1) == Some(&"count") => {}
            d if q.destination.is_none() && (d.contains('.') || d.contains(':')) => {
                q.destination = Some(d.into());
            }
            other => return Err(usage(format!("show route: unexpected \"{other}\"; {SHOW}"))),
        }
        i += 1;
    }
    Ok(q)
}

/// Parses the words after `monitor`.
pub fn parse_monitor(words: &[String]) -> Result<Request, Usage> {
    const USAGE: &str = "monitor route [PREFIX|ADDRESS] [neighbor ADDRESS] [community C] [large-community C] | monitor log";
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["log"] => Ok(Request::MonitorLog),
        ["route", rest @ ..] => {
            let mut q = WatchRequest::default();
            let mut it = rest.iter();
            while let Some(word) = it.next() {
                let mut value = || {
                    it.next()
                        .map(|v| v.to_string())
                        .ok_or_else(|| usage(format!("{word} needs a value")))
                };
                match *word {
                    "neighbor" => q.neighbor = Some(value()?),
                    "community" => q.community = Some(value()?),
                    "large-community" => q.large_community = Some(value()?),
                    p if q.prefix.is_none() && (p.contains('.') || p.contains(':')) => {
                        q.prefix = Some(p.to_string());
                    }
                    other => {
                        return Err(usage(format!(
                            "monitor route: unexpected \"{other}\"; {USAGE}"
                        )))
                    }
                }
            }
            Ok(Request::MonitorRoute(q))
        }
        _ => Err(usage(USAGE)),
    }
}

/// Parses the words after `set`.
pub fn parse_set(words: &[String]) -> Result<Request, Usage> {
    const USAGE: &str = "set log level error|warn|info|debug|trace [neighbor ADDRESS]";
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let (level, neighbor) = match w.as_slice() {
        ["log", "level", l] => (l, None),
        ["log", "level", l, "neighbor", n] => (l, Some(n.to_string())),
        _ => return Err(usage(USAGE)),
    };
    Ok(Request::LogLevel(Some(LogLevelRequest {
        level: level.to_string(),
        neighbor,
    })))
}

/// Parses the words after `clear`.
pub fn parse_clear(words: &[String]) -> Result<Request, Usage> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let (neighbor, mode) = match w.as_slice() {
        ["bgp", "neighbor", n] => (n, None),
        ["bgp", "neighbor", n, m @ ("soft" | "soft-inbound")] => (n, Some(m.to_string())),
        _ => return Err(usage("clear bgp neighbor ADDRESS|all [soft|soft-inbound]")),
    };
    Ok(Request::Clear(ClearRequest {
        neighbor: neighbor.to_string(),
        mode,
    }))
}

/// Parses the words after `disable` (`enable` with `on`): Junos `deactivate`.
pub fn parse_disable(words: &[String], on: bool) -> Result<Request, Usage> {
    let verb = if on { "enable" } else { "disable" };
    match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["bgp", "neighbor", n] => Ok(Request::Clear(ClearRequest {
            neighbor: n.to_string(),
            mode: Some(verb.into()),
        })),
        _ => Err(usage(format!("{verb} bgp neighbor ADDRESS|all"))),
    }
}

/// Parses the words after `configure`.
pub fn parse_configure(words: &[String]) -> Result<Request, Usage> {
    match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["reload"] => Ok(Request::Reload(ReloadRequest::default())),
        ["reload", "--dry-run" | "dry-run"] => Ok(Request::Reload(ReloadRequest {
            dry_run: true,
            file: None,
        })),
        _ => Err(usage("configure reload [--dry-run]")),
    }
}

/// Parses the words after `fib`.
pub fn parse_fib(words: &[String]) -> Result<Request, Usage> {
    match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["verify"] => Ok(Request::FibVerify),
        _ => Err(usage("fib verify")),
    }
}

/// The API's address: a socket path, or `ADDRESS:PORT` for a TCP listener.
pub fn endpoint(s: &str) -> Endpoint {
    match s.parse() {
        Ok(a) => Endpoint::Tcp(a),
        Err(_) => Endpoint::Unix(PathBuf::from(s)),
    }
}

fn query(q: &RouteRequest) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut add = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{k}={}", encode(v)));
        }
    };
    add("destination", &q.destination);
    add("match", &q.match_type);
    add("table", &q.table);
    add("receive_protocol", &q.receive_protocol);
    add("advertising_protocol", &q.advertising_protocol);
    add("community", &q.community);
    add("large_community", &q.large_community);
    add("aspath_regex", &q.aspath_regex);
    add("next_hop", &q.next_hop);
    add("validation_state", &q.validation_state);
    add("protocol", &q.protocol);
    if let Some(s) = q.shard {
        parts.push(format!("shard={s}"));
    }
    if q.detail {
        parts.push("detail=true".into());
    }
    if q.hidden {
        parts.push("hidden=true".into());
    }
    for (k, on) in [
        ("rejected", q.rejected),
        ("active_path", q.active_path),
        ("terse", q.terse),
        ("count", q.count),
    ] {
        if on {
            parts.push(format!("{k}=true"));
        }
    }
    if let Some(f) = &q.format {
        parts.push(format!("format={f}"));
    }
    parts.join("&")
}

/// Percent-encoding for a query value (prefixes hold '/' and ':').
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Asks the daemon and prints the answer; `json`: the API's JSON as it comes. Returns
/// whether the answer says all is well: false when `fib verify` found differences or a
/// reload was rejected (the command's exit status says so too).
pub async fn execute(endpoint: Endpoint, r: Request, json: bool) -> Result<bool, ClientError> {
    let c = Client::new(endpoint);
    let mut well = true;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let path = match &r {
        Request::Summary => "/v1/bgp/summary".to_string(),
        Request::Neighbor { address, .. } => match address {
            Some(a) => format!("/v1/bgp/neighbors?address={}", encode(a)),
            None => "/v1/bgp/neighbors".into(),
        },
        Request::Group(n) => match n {
            Some(n) => format!("/v1/bgp/groups?name={}", encode(n)),
            None => "/v1/bgp/groups".into(),
        },
        Request::Convergence => "/v1/bgp/convergence".into(),
        Request::RouteSummary => "/v1/routes/summary".into(),
        Request::Routes(q) => {
            // The daemon renders the layout: the whole table streams through as it comes.
            let q = RouteRequest {
                format: Some(if json { "json" } else { "text" }.into()),
                ..(**q).clone()
            };
            format!("/v1/routes?{}", query(&q))
        }
        Request::Threads => "/v1/threads".into(),
        Request::WorkQueues => "/v1/work-queues".into(),
        Request::Clear(_) => "/v1/bgp/clear".into(),
        Request::Reload(_) => "/v1/configure/reload".into(),
        Request::Restart(_) => "/v1/restart".into(),
        Request::FibSummary => "/v1/fib/summary".into(),
        Request::ValidationSessions => "/v1/validation/sessions".into(),
        Request::Bmp => "/v1/bmp/stations".into(),
        Request::ValidationDatabase { prefix, asn } => {
            let mut q = Vec::new();
            if let Some(p) = prefix {
                q.push(format!("prefix={}", encode(p)));
            }
            if let Some(a) = asn {
                q.push(format!("asn={a}"));
            }
            format!("/v1/validation/database?{}", q.join("&"))
        }
        Request::ForwardingTable(d) => match d {
            Some(d) => format!("/v1/fib/routes?destination={}", encode(d)),
            None => "/v1/fib/routes".into(),
        },
        Request::FibVerify => "/v1/fib/verify".into(),
        Request::MrtInject(_) => "/v1/mrt/inject".into(),
        Request::MrtRemove(_) => "/v1/mrt/remove".into(),
        Request::MrtInjections => "/v1/mrt/injections".into(),
        Request::MrtDumpRib { neighbor, .. } => match neighbor {
            Some(a) => format!("/v1/mrt/rib?neighbor={}", encode(a)),
            None => "/v1/mrt/rib".into(),
        },
        Request::MonitorRoute(q) => {
            let mut parts: Vec<String> = Vec::new();
            for (k, v) in [
                ("prefix", &q.prefix),
                ("neighbor", &q.neighbor),
                ("community", &q.community),
                ("large_community", &q.large_community),
            ] {
                if let Some(v) = v {
                    parts.push(format!("{k}={}", encode(v)));
                }
            }
            format!("/v1/routes/watch?{}", parts.join("&"))
        }
        Request::MonitorLog => "/v1/log".into(),
        Request::Configuration => "/v1/configuration".into(),
        Request::LogLevel(_) => "/v1/log/level".into(),
    };
    let text = match r {
        Request::Routes(_) | Request::MonitorLog => {
            return c.copy(&path, &mut out).await.map(|()| true)
        }
        Request::MonitorRoute(_) if json => return c.copy(&path, &mut out).await.map(|()| true),
        Request::MonitorRoute(_) => {
            let mut lines = c.lines(&path).await?;
            while let Some(l) = lines.next_line().await? {
                let text = match serde_json::from_slice::<RouteChange>(&l) {
                    Ok(change) => render::route_change(&change),
                    Err(_) => match serde_json::from_slice::<WatchEnd>(&l) {
                        Ok(end) => {
                            well = false;
                            format!("watch ended by the daemon: {}\n", end.dropped)
                        }
                        Err(_) => format!("{}\n", String::from_utf8_lossy(&l)),
                    },
                };
                if out
                    .write_all(text.as_bytes())
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    break;
                }
            }
            return Ok(well);
        }
        Request::LogLevel(Some(req)) => {
            let reply: LogLevels = c.post(&path, &req).await?;
            if json {
                serde_json::to_string_pretty(&reply)? + "\n"
            } else {
                render::log_levels(&reply)
            }
        }
        Request::MrtDumpRib { file, .. } => {
            let f = std::fs::File::create(&file).map_err(|e| ClientError::Connect {
                endpoint: Endpoint::Unix(file.clone()),
                source: e,
            })?;
            let mut w = io::BufWriter::new(f);
            c.copy(&path, &mut w).await?;
            let _ = w.flush();
            return Ok(true);
        }
        Request::MrtInject(file) | Request::MrtRemove(file) => {
            let reply: Injected = c.post(&path, &MrtFile { file }).await?;
            if json {
                serde_json::to_string_pretty(&reply)? + "\n"
            } else {
                render::injected(std::slice::from_ref(&reply))
            }
        }
        Request::FibVerify => {
            let v: FibVerify = c.get(&path).await?;
            well = v.differences.is_empty();
            if json {
                serde_json::to_string_pretty(&v)? + "\n"
            } else {
                render::fib_verify(&v)
            }
        }
        Request::Clear(req) => {
            let reply: ClearReply = c.post(&path, &req).await?;
            well = reply.neighbors.iter().all(|n| n.error.is_none());
            if json {
                serde_json::to_string_pretty(&reply)? + "\n"
            } else {
                render::clear(&reply, req.mode.as_deref())
            }
        }
        Request::Restart(r) => {
            let reply: RestartReply = c.post(&path, &r).await?;
            if json {
                serde_json::to_string_pretty(&reply)? + "\n"
            } else {
                render::restart(&reply)
            }
        }
        Request::Reload(r) => {
            let reply: ReloadReply = c.post(&path, &r).await?;
            // A rejected file is a failure: scripts and systemd's ExecReload see it.
            well = reply.outcome.succeeded();
            if json {
                serde_json::to_string_pretty(&reply)? + "\n"
            } else {
                render::reload(&reply)
            }
        }
        _ if json => {
            let raw = c.get_raw(&path).await?;
            let v: serde_json::Value = serde_json::from_slice(&raw)?;
            serde_json::to_string_pretty(&v)? + "\n"
        }
        Request::Summary => render::summary(&c.get::<Summary>(&path).await?),
        Request::Neighbor { statistics, .. } => {
            let v: Vec<Neighbor> = c.get(&path).await?;
            if statistics {
                render::neighbor_statistics(&v)
            } else {
                render::neighbors(&v)
            }
        }
        Request::Group(_) => render::groups(&c.get::<Vec<Group>>(&path).await?),
        Request::Convergence => render::convergence(&c.get::<Convergence>(&path).await?),
        Request::RouteSummary => render::route_summary(&c.get::<RouteSummary>(&path).await?),
        Request::Threads => render::threads(&c.get::<Threads>(&path).await?),
        Request::WorkQueues => render::work_queues(&c.get::<WorkQueues>(&path).await?),
        Request::FibSummary => render::fib_summary(&c.get::<FibSummary>(&path).await?),
        Request::ValidationSessions => validation::sessions(&c.get(&path).await?),
        Request::Bmp => render::bmp(&c.get::<Vec<BmpStation>>(&path).await?),
        Request::ValidationDatabase { .. } => validation::database(&c.get(&path).await?),
        Request::MrtInjections => render::injected(&c.get::<Vec<Injected>>(&path).await?),
        Request::ForwardingTable(_) => {
            render::forwarding_table(&c.get::<Vec<ForwardingRoute>>(&path).await?)
        }
        Request::LogLevel(None) => render::log_levels(&c.get::<LogLevels>(&path).await?),
        Request::Configuration => {
            let r: RunningConfig = c.get(&path).await?;
            let mut text = format!(
                "# The configuration running{}: every neighbor's settings resolved, secrets hidden.\n",
                r.file.as_deref().map(|f| format!(" (read from {f})")).unwrap_or_default()
            );
            text += &toml::to_string_pretty(&r).unwrap_or_else(|e| format!("# {e}\n"));
            text
        }
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(well)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(Into::into).collect()
    }

    #[test]
    fn junos_words_parse() {
        assert_eq!(parse_show(&words("bgp summary")), Ok(Request::Summary));
        assert_eq!(
            parse_show(&words("bgp neighbor 10.0.0.1 statistics")),
            Ok(Request::Neighbor {
                address: Some("10.0.0.1".into()),
                statistics: true
            })
        );
        let Ok(Request::Routes(q)) = parse_show(&words(
            "route 10.0.0.0/8 orlonger table inet.0 rib-sharding shard 1 receive-protocol bgp 10.0.0.1 detail hidden",
        )) else {
            panic!()
        };
        assert_eq!(q.destination.as_deref(), Some("10.0.0.0/8"));
        assert_eq!(q.match_type.as_deref(), Some("orlonger"));
        assert_eq!(q.table.as_deref(), Some("inet.0"));
        assert_eq!(q.shard, Some(1));
        assert_eq!(q.receive_protocol.as_deref(), Some("10.0.0.1"));
        assert!(q.detail && q.hidden);
        let Ok(Request::Routes(q)) = parse_show(&words("route rib-sharding rs-shard-3")) else {
            panic!()
        };
        assert_eq!(q.shard, Some(3));
        let Ok(Request::Routes(q)) = parse_show(&words(
            "route community 65000:* aspath-regex .*65001 next-hop 10.0.0.9 protocol bgp active-path terse | count",
        )) else {
            panic!()
        };
        assert_eq!(q.community.as_deref(), Some("65000:*"));
        assert_eq!(q.aspath_regex.as_deref(), Some(".*65001"));
        assert_eq!(q.next_hop.as_deref(), Some("10.0.0.9"));
        assert_eq!(q.destination, None);
        assert!(q.active_path && q.terse && q.count);
        assert_eq!(
            query(&q),
            "community=65000%3A%2A&aspath_regex=.%2A65001&next_hop=10.0.0.9&protocol=bgp&active_path=true&terse=true&count=true"
        );
        assert!(parse_show(&words("route community")).is_err());
        assert!(parse_show(&words("route longer")).is_err());
        assert!(parse_show(&words("route 10.0.0.0/8 sideways")).is_err());
        assert!(parse_show(&words("bgp")).is_err());
        assert_eq!(
            parse_clear(&words("bgp neighbor all soft-inbound")),
            Ok(Request::Clear(ClearRequest {
                neighbor: "all".into(),
                mode: Some("soft-inbound".into())
            }))
        );
        assert!(parse_clear(&words("bgp neighbor 10.0.0.1 gently")).is_err());
        assert_eq!(
            parse_configure(&words("reload")),
            Ok(Request::Reload(ReloadRequest::default()))
        );
        assert!(matches!(
            parse_configure(&words("reload --dry-run")),
            Ok(Request::Reload(ReloadRequest {
                dry_run: true,
                file: None
            }))
        ));
        assert_eq!(
            query(&RouteRequest {
                destination: Some("2001:db8::/32".into()),
                detail: true,
                ..RouteRequest::default()
            }),
            "destination=2001%3Adb8%3A%3A%2F32&detail=true"
        );
        assert_eq!(
            endpoint("127.0.0.1:50179"),
            Endpoint::Tcp("127.0.0.1:50179".parse().unwrap())
        );
        assert_eq!(
            endpoint("/run/x.sock"),
            Endpoint::Unix("/run/x.sock".into())
        );
    }
}
