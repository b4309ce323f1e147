//! `[bmp]`: the monitoring stations, checked and lowered into the monitor's configuration.

use super::schema::Bmp;
use super::ErrorKind;
use ribshard_bmp::{Ribs, StationConfig};
use std::net::SocketAddr;
use std::time::Duration;

pub(super) fn resolve(
    raw: Option<&Bmp>,
    errs: &mut Vec<(String, ErrorKind)>,
) -> Vec<StationConfig> {
    let Some(raw) = raw else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let stations = raw.station.as_deref().unwrap_or_default();
    if stations.is_empty() {
        errs.push(("bmp.station".into(), ErrorKind::Missing));
    }
    for (i, s) in stations.iter().enumerate() {
        let at = |key: &str| format!("bmp.station[{i}].{key}");
        let (Some(address), Some(port)) = (s.address, s.port) else {
            if s.address.is_none() {
                errs.push((at("address"), ErrorKind::Missing));
            }
            // BMP has no well-known port: every collector is configured with its own.
            if s.port.is_none() {
                errs.push((at("port"), ErrorKind::Missing));
            }
            continue;
        };
        let mut ribs = Ribs {
            mirroring: s.route_mirroring.unwrap_or(false),
            ..Ribs::default()
        };
        let names = s
            .route_monitoring
            .clone()
            .unwrap_or_else(|| vec!["pre-policy".into()]);
        // A station may be there for the mirrored messages alone.
        if names.is_empty() && !ribs.mirroring {
            errs.push((
                at("route-monitoring"),
                ErrorKind::Invalid {
                    value: "[]".into(),
                    why: "names no RIB: give pre-policy, post-policy, loc-rib, adj-rib-out or several (or route-mirroring = true)",
                },
            ));
        }
        for n in &names {
            match n.as_str() {
                "pre-policy" => ribs.pre_policy = true,
                "post-policy" => ribs.post_policy = true,
                "loc-rib" => ribs.loc_rib = true,
                "adj-rib-out" => ribs.adj_rib_out = true,
                "adj-rib-out-pre-policy" => errs.push((
                    at("route-monitoring"),
                    ErrorKind::Invalid {
                        value: format!("{n:?}"),
                        why: "is not built yet: adj-rib-out is what each neighbor is sent, after export policy",
                    },
                )),
                _ => errs.push((
                    at("route-monitoring"),
                    ErrorKind::Invalid {
                        value: format!("{n:?}"),
                        why: "is not a RIB BMP monitors: pre-policy, post-policy, loc-rib or adj-rib-out",
                    },
                )),
            }
        }
        let retry = s.retry.unwrap_or(1);
        let retry_max = s.retry_max.unwrap_or(60);
        if retry == 0 {
            errs.push((
                at("retry"),
                ErrorKind::Invalid {
                    value: "0".into(),
                    why: "must be at least 1 second",
                },
            ));
        }
        if retry_max < retry {
            errs.push((
                at("retry-max"),
                ErrorKind::Invalid {
                    value: retry_max.to_string(),
                    why: "is less than retry",
                },
            ));
        }
        let buffer = s.buffer_size.unwrap_or(64);
        if buffer == 0 {
            errs.push((
                at("buffer-size"),
                ErrorKind::Invalid {
                    value: "0".into(),
                    why: "must be at least 1 MiB",
                },
            ));
        }
        let address = SocketAddr::new(address, port);
        out.push(StationConfig {
            name: s.name.clone().unwrap_or_else(|| address.to_string()),
            address,
            ribs,
            statistics_interval: match s.statistics_timeout.unwrap_or(60) {
                0 => None,
                n => Some(Duration::from_secs(u64::from(n))),
            },
            buffer: buffer.max(1) as usize * 1024 * 1024,
            retry: Duration::from_secs(u64::from(retry.max(1))),
            retry_max: Duration::from_secs(u64::from(retry_max.max(retry).max(1))),
        });
    }
    out
}
