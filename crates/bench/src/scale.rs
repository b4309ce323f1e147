//! The charts of the route-server scale section (`scripts/scale`): convergence time and the
//! daemon's peak RSS against clients, a line per daemon and route count, from the rows that
//! `ribshard-bench run route-server --json` wrote (medians over the correct runs). A cell
//! with no correct run (a DNF) has no point: the table beside the charts says why.

use crate::report::median_of;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ScaleChartError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {source}")]
    Row {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("no TrueType font found for the charts (install fonts-dejavu-core)")]
    NoFont,
    #[error("{path}: {reason}")]
    Chart { path: PathBuf, reason: String },
}

/// Daemons in the order the section lists them; a series is named as the table names it.
const ORDER: [&str; 5] = ["ribshard", "bird2", "frr", "openbgpd", "gobgpd"];

fn label(row: &Value) -> String {
    let dut = row["dut"].as_str().unwrap_or("?");
    match dut {
        "ribshard" => format!(
            "ribshard {}x{}",
            row["shards"].as_u64().unwrap_or(0),
            row["update_threads"].as_u64().unwrap_or(0)
        ),
        "bird2" => "BIRD 2".into(),
        "frr" => "FRR".into(),
        "openbgpd" => "OpenBGPD".into(),
        "gobgpd" => "GoBGP".into(),
        other => other.into(),
    }
}

/// Routes, and the distinct prefixes they are for.
type Size = (u64, u64);

/// A size as the legend gives it: 200k routes, 2M routes (for 800k destinations).
fn size((routes, prefixes): Size) -> String {
    let short = |n: u64| match n {
        n if n >= 1_000_000 && n % 100_000 == 0 => format!("{}M", n as f64 / 1e6),
        n => format!("{}k", n / 1000),
    };
    if prefixes < routes {
        format!("{} routes, {} destinations", short(routes), short(prefixes))
    } else {
        format!("{} routes", short(routes))
    }
}

/// A series per (daemon, routes): (clients, median of `f` over the correct runs).
type Series = Vec<(String, Vec<(f64, f64)>)>;

fn series(rows: &[Value], f: impl Fn(&Value) -> Option<f64>) -> Series {
    // (daemon rank, label, routes) -> clients -> values
    let mut cells: BTreeMap<(usize, String, Size), BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    for r in rows {
        let dut = r["dut"].as_str().unwrap_or("");
        let rank = ORDER.iter().position(|d| *d == dut).unwrap_or(ORDER.len());
        let (Some(routes), Some(clients)) = (r["routes"].as_u64(), r["downstream_peers"].as_u64())
        else {
            continue;
        };
        // A DNF row written by scripts/scale gives no distinct count: every route its own.
        let routes = (routes, r["prefixes"].as_u64().unwrap_or(routes));
        let values = cells
            .entry((rank, label(r), routes))
            .or_default()
            .entry(clients)
            .or_default();
        if r["correct"].as_bool() == Some(true) {
            values.extend(f(r));
        }
    }
    let several_sizes = cells
        .keys()
        .map(|k| k.2)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    cells
        .into_iter()
        .map(|((_, name, routes), by_clients)| {
            let name = if several_sizes {
                format!("{name}, {}", size(routes))
            } else {
                name
            };
            let pts = by_clients
                .into_iter()
                .filter_map(|(c, v)| median_of(v).map(|m| (c as f64, m)))
                .collect();
            (name, pts)
        })
        .collect()
}

/// Reads the rows of `json` and writes `scale-time.png` and `scale-rss.png` into `dir`.
pub fn write(json: &Path, dir: &Path) -> Result<[PathBuf; 2], ScaleChartError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ScaleChartError::Io { path, source }
    };
    let text = std::fs::read_to_string(json).map_err(io(json))?;
    let mut rows = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        rows.push(
            serde_json::from_str::<Value>(line).map_err(|source| ScaleChartError::Row {
                path: json.to_path_buf(),
                line: i + 1,
                source,
            })?,
        );
    }
    let font = crate::chart::font().ok_or(ScaleChartError::NoFont)?;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let time = dir.join("scale-time.png");
    let rss = dir.join("scale-rss.png");
    let charts = [
        (
            &time,
            crate::chart::Axes {
                title: "Route server: convergence time against clients (log-log)",
                x: "clients",
                y: "seconds",
                x_thousands: false,
            },
            series(&rows, |r| r["converge_s"].as_f64()),
        ),
        (
            &rss,
            crate::chart::Axes {
                title: "Route server: the daemon's peak RSS against clients (log-log)",
                x: "clients",
                y: "MiB",
                x_thousands: false,
            },
            series(&rows, |r| {
                r["dut_peak_rss_bytes"]
                    .as_f64()
                    .map(|b| b / f64::from(1 << 20))
            }),
        ),
    ];
    for (path, axes, s) in &charts {
        crate::chart::lines(path, font, axes, s).map_err(|reason| ScaleChartError::Chart {
            path: path.to_path_buf(),
            reason,
        })?;
    }
    Ok([time, rss])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Medians over the correct runs only, one point per client count; a DNF cell has none.
    #[test]
    fn series_take_medians_of_correct_runs() {
        let row = |dut: &str, clients: u64, s: f64, correct: bool| {
            serde_json::json!({"dut": dut, "shards": 2, "update_threads": 2, "routes": 200000,
                "downstream_peers": clients, "converge_s": s, "correct": correct})
        };
        let rows = vec![
            row("bird2", 10, 0.7, true),
            row("ribshard", 10, 0.3, true),
            row("ribshard", 10, 0.1, true),
            row("ribshard", 10, 0.2, true),
            row("ribshard", 100, 9.0, false),
            row("ribshard", 100, 0.4, true),
            row("bird2", 100, 300.0, false),
        ];
        let s = series(&rows, |r| r["converge_s"].as_f64());
        assert_eq!(
            s,
            vec![
                ("ribshard 2x2".to_string(), vec![(10.0, 0.2), (100.0, 0.4)]),
                ("BIRD 2".to_string(), vec![(10.0, 0.7)]),
            ]
        );
    }
}
