//! `/metrics`: the same figures the show commands give, in the Prometheus (OpenMetrics) text
//! format, built with `prometheus-client` from one snapshot per scrape. Names carry the
//! `ribshard_` prefix; counters end in `_total`, durations in `_seconds`.

use crate::api::{Convergence, Histogram, Neighbor, RouteSummary, Summary, Threads, WorkQueues};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt::Error;

/// What one scrape reports.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub summary: Summary,
    pub neighbors: Vec<Neighbor>,
    pub routes: RouteSummary,
    pub threads: Threads,
    pub queues: WorkQueues,
    pub convergence: Convergence,
    pub fib: crate::api::FibSummary,
}

type Labels = Vec<(&'static str, String)>;

/// The OpenMetrics text exposition of a snapshot.
pub fn encode(s: &Snapshot) -> Result<String, Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape(s.clone())));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(out)
}

/// The same in the Prometheus text format (0.0.4), which Prometheus servers and `promtool
/// check metrics` read: a counter's family is named with its samples' `_total` (OpenMetrics
/// names it without), and there is no `# EOF`.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let lines: Vec<&str> = openmetrics.lines().collect();
    let mut out = String::with_capacity(openmetrics.len() + 1024);
    let mut counter: Option<&str> = None;
    for (i, line) in lines.iter().enumerate() {
        if *line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            let next = lines.get(i + 1).copied().unwrap_or("");
            counter = (next == format!("# TYPE {name} counter")).then_some(name);
        }
        match counter {
            Some(name) if line.starts_with("# HELP ") || line.starts_with("# TYPE ") => {
                let (head, tail) = line.split_at(7);
                let tail = tail.strip_prefix(name).unwrap_or(tail);
                out.push_str(head);
                out.push_str(name);
                out.push_str("_total");
                out.push_str(tail);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[derive(Debug)]
struct Scrape(Snapshot);

fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, f64)>,
) -> Result<(), Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, f64)>,
) -> Result<(), Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn histogram(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, Histogram)>,
) -> Result<(), Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        // The API's buckets are cumulative; the encoder wants them per bucket, the last
        // bound f64::MAX for +Inf.
        let mut prev = 0;
        let buckets: Vec<(f64, u64)> = h
            .buckets
            .iter()
            .map(|b| {
                let n = b.count.saturating_sub(prev);
                prev = b.count;
                (b.le, n)
            })
            .collect();
        if labels.is_empty() {
            m.encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &buckets, None)?;
        } else {
            let mut f = m.encode_family(&labels)?;
            f.encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &buckets, None)?;
        }
    }
    Ok(())
}

fn l(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), Error> {
        let s = &self.0;
        let e = &mut enc;
        gauges(
            e,
            "ribshard_threads",
            "Pipeline threads configured, by kind (shard, update).",
            [
                (l(&[("kind", "shard")]), s.summary.threading.shards as f64),
                (
                    l(&[("kind", "update")]),
                    s.summary.threading.update_threads as f64,
                ),
            ],
        )?;
        let states = [
            "Idle",
            "Connect",
            "Active",
            "OpenSent",
            "OpenConfirm",
            "Established",
        ];
        gauges(
            e,
            "ribshard_bgp_sessions",
            "BGP sessions by state.",
            states.iter().map(|st| {
                let n = s.neighbors.iter().filter(|x| x.state == *st).count();
                (l(&[("state", st)]), n as f64)
            }),
        )?;
        let who = |n: &Neighbor| -> [(&'static str, String); 2] {
            [("neighbor", n.address.clone()), ("group", n.group.clone())]
        };
        gauges(
            e,
            "ribshard_bgp_neighbor_established",
            "1 while the session with the neighbor is Established.",
            s.neighbors.iter().map(|n| {
                (
                    who(n).to_vec(),
                    f64::from(u8::from(n.state == "Established")),
                )
            }),
        )?;
        for (name, help, pick) in [
            (
                "ribshard_bgp_prefixes_received",
                "Paths in the neighbor's Adj-RIB-In, by family.",
                (|f: &crate::api::FamilyPrefixes| Some(f.received)) as fn(&_) -> Option<u64>,
            ),
            (
                "ribshard_bgp_prefixes_accepted",
                "Paths from the neighbor that import policy accepts and that do not loop.",
                |f| Some(f.accepted),
            ),
            (
                "ribshard_bgp_prefixes_active",
                "Best paths learned from the neighbor.",
                |f| Some(f.active),
            ),
            (
                "ribshard_bgp_prefixes_advertised",
                "Prefixes advertised to the neighbor, by family.",
                |f| f.advertised,
            ),
        ] {
            gauges(
                e,
                name,
                help,
                s.neighbors.iter().flat_map(|n| {
                    n.families.iter().filter_map(move |f| {
                        let mut labels = who(n).to_vec();
                        labels.push(("family", f.table.clone()));
                        pick(f).map(|v| (labels, v as f64))
                    })
                }),
            )?;
        }
        let types = |m: &crate::api::MessageTypes| {
            [
                ("open", m.open),
                ("update", m.update),
                ("notification", m.notification),
                ("keepalive", m.keepalive),
                ("route_refresh", m.route_refresh),
            ]
        };
        for (name, help, received) in [
            (
                "ribshard_bgp_messages_received",
                "BGP messages received from the neighbor, by type.",
                true,
            ),
            (
                "ribshard_bgp_messages_sent",
                "BGP messages sent to the neighbor, by type.",
                false,
            ),
        ] {
            counters(
                e,
                name,
                help,
                s.neighbors.iter().flat_map(|n| {
                    let c = if received {
                        &n.counters.received
                    } else {
                        &n.counters.sent
                    };
                    types(c).into_iter().map(move |(t, v)| {
                        let mut labels = who(n).to_vec();
                        labels.push(("type", t.to_string()));
                        (labels, v as f64)
                    })
                }),
            )?;
        }
        counters(
            e,
            "ribshard_bgp_flaps",
            "Times the session left Established.",
            s.neighbors
                .iter()
                .map(|n| (who(n).to_vec(), n.flaps as f64)),
        )?;
        counters(
            e,
            "ribshard_bgp_write_queue_blocks",
            "Batches held back from the neighbor because its write queue was past the high-water mark.",
            s.neighbors
                .iter()
                .map(|n| (who(n).to_vec(), n.statistics.write_queue_blocks as f64)),
        )?;
        counters(
            e,
            "ribshard_bgp_slow_writer_events",
            "Times the neighbor was split from its update group as a slow writer.",
            s.neighbors
                .iter()
                .map(|n| (who(n).to_vec(), n.statistics.slow_writer as f64)),
        )?;
        gauges(
            e,
            "ribshard_bgp_output_queue_octets",
            "Octets queued for the neighbor and not yet written.",
            s.neighbors
                .iter()
                .map(|n| (who(n).to_vec(), n.statistics.octets_queued as f64)),
        )?;
        for (name, help, pick) in [
            (
                "ribshard_rib_prefixes",
                "Destinations in the shard's table, by family.",
                (|t: &crate::api::ShardTable| t.destinations) as fn(&_) -> u64,
            ),
            (
                "ribshard_rib_paths",
                "Paths in the shard's table, by family.",
                |t| t.routes,
            ),
            (
                "ribshard_rib_active_paths",
                "Best paths in the shard's table, by family.",
                |t| t.active,
            ),
        ] {
            gauges(
                e,
                name,
                help,
                s.routes.tables.iter().flat_map(|t| {
                    t.shards.iter().map(move |sh| {
                        (
                            l(&[("family", &t.table), ("shard", &sh.shard.to_string())]),
                            pick(sh) as f64,
                        )
                    })
                }),
            )?;
        }
        counters(
            e,
            "ribshard_thread_cpu_seconds",
            "CPU time used by each thread of the daemon.",
            s.threads
                .threads
                .iter()
                .map(|t| (l(&[("thread", &t.name), ("kind", &t.kind)]), t.cpu_seconds)),
        )?;
        counters(
            e,
            "ribshard_thread_work_items",
            "Work items a thread has done (messages, or session wake-ups).",
            s.threads
                .threads
                .iter()
                .filter(|t| t.kind != "other")
                .map(|t| (l(&[("thread", &t.name), ("kind", &t.kind)]), t.items as f64)),
        )?;
        let q = |x: &crate::api::QueueInfo| l(&[("queue", &x.kind), ("thread", &x.thread)]);
        gauges(
            e,
            "ribshard_queue_depth",
            "Messages waiting in a queue between pipeline threads.",
            s.queues.queues.iter().map(|x| (q(x), x.depth as f64)),
        )?;
        gauges(
            e,
            "ribshard_queue_high_water",
            "The deepest a queue between pipeline threads has been.",
            s.queues.queues.iter().map(|x| (q(x), x.high_water as f64)),
        )?;
        counters(
            e,
            "ribshard_queue_items",
            "Messages put in a queue between pipeline threads.",
            s.queues.queues.iter().map(|x| (q(x), x.items as f64)),
        )?;
        counters(
            e,
            "ribshard_queue_blocked_seconds",
            "Time senders waited for room in a queue between pipeline threads.",
            s.queues.queues.iter().map(|x| (q(x), x.blocked_seconds)),
        )?;
        histogram(
            e,
            "ribshard_convergence_decided_seconds",
            "From an UPDATE's receipt to its best paths decided.",
            [(Labels::new(), s.convergence.decided.clone())],
        )?;
        histogram(
            e,
            "ribshard_convergence_written_seconds",
            "From an UPDATE's receipt to its changes encoded and queued for an update group's members.",
            s.convergence
                .written
                .iter()
                .map(|g| (l(&[("group", &g.group), ("update_group", &g.id.to_string())]), g.histogram.clone())),
        )?;
        gauges(
            e,
            "ribshard_neighbor_end_of_rib_seconds",
            "From the neighbor's session Established to its End-of-RIB received.",
            s.convergence.neighbors.iter().filter_map(|n| {
                n.end_of_rib_received_seconds
                    .map(|v| (l(&[("neighbor", &n.address)]), v))
            }),
        )?;
        gauges(
            e,
            "ribshard_neighbor_propagated_seconds",
            "From the neighbor's End-of-RIB to every update group having sent its routes.",
            s.convergence.neighbors.iter().filter_map(|n| {
                n.all_groups_seconds
                    .map(|v| (l(&[("neighbor", &n.address)]), v))
            }),
        )?;
        if s.fib.enabled {
            fib(e, &s.fib)?;
        }
        Ok(())
    }
}

/// The FIB writer's figures (`[fib]` only).
fn fib(e: &mut DescriptorEncoder, f: &crate::api::FibSummary) -> Result<(), Error> {
    let r = &f.routes;
    gauges(
        e,
        "ribshard_fib_routes",
        "Kernel routes of ours, by state: wanted (a best path asks for one), installed, pending (waiting to be written), failed (refused, retried), unresolved (nothing to forward to), conflict (another protocol holds the route).",
        [
            ("wanted", r.wanted),
            ("installed", r.installed),
            ("pending", r.pending),
            ("failed", r.failed),
            ("unresolved", r.unresolved),
            ("conflict", r.conflicts),
        ]
        .map(|(k, v)| (l(&[("state", k)]), v as f64)),
    )?;
    gauges(
        e,
        "ribshard_fib_nexthop_objects",
        "Kernel nexthop objects of ours: a leaf per next hop and way out, a group per next-hop set.",
        [("leaf", f.leaves), ("group", f.groups)].map(|(k, v)| (l(&[("kind", k)]), v as f64)),
    )?;
    let n = &f.netlink;
    counters(
        e,
        "ribshard_fib_netlink_messages",
        "Netlink requests sent to the kernel, by what they did.",
        [
            ("route-write", n.route_writes),
            ("route-delete", n.route_deletes),
            ("object-write", n.object_writes),
            ("object-delete", n.object_deletes),
        ]
        .map(|(k, v)| (l(&[("operation", k)]), v as f64)),
    )?;
    counters(
        e,
        "ribshard_fib_netlink_batches",
        "sendmsg calls to the kernel (many requests each).",
        [(Labels::new(), n.batches as f64)],
    )?;
    counters(
        e,
        "ribshard_fib_netlink_errors",
        "Requests the kernel refused.",
        [(Labels::new(), n.errors as f64)],
    )?;
    counters(
        e,
        "ribshard_fib_drift_repaired",
        "Routes of ours changed or removed by someone else and written again.",
        [(Labels::new(), f.drift_repaired as f64)],
    )?;
    if let Some(t) = f.last_flush_at {
        gauges(
            e,
            "ribshard_fib_last_flush_timestamp_seconds",
            "When the FIB writer last sent a batch to the kernel (UNIX time).",
            [(Labels::new(), t)],
        )?;
    }
    gauges(
        e,
        "ribshard_fib_holding",
        "1 while the FIB writer waits for the start-up deferral to end before writing.",
        [(Labels::new(), f64::from(u8::from(f.holding)))],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_with_total_in_the_prometheus_format() {
        let om = "# HELP a_b Things.\n# TYPE a_b counter\na_b_total{x=\"1\"} 2\n\
                  # HELP g Level.\n# TYPE g gauge\ng 1.0\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP a_b_total Things.\n# TYPE a_b_total counter\na_b_total{x=\"1\"} 2\n\
             # HELP g Level.\n# TYPE g gauge\ng 1.0\n"
        );
    }

    #[test]
    fn a_snapshot_encodes() {
        let mut s = Snapshot::default();
        s.convergence.decided = Histogram {
            buckets: vec![
                crate::api::Bucket {
                    le: 0.001,
                    count: 2,
                },
                crate::api::Bucket {
                    le: f64::MAX,
                    count: 3,
                },
            ],
            count: 3,
            sum_seconds: 0.5,
            ..Histogram::default()
        };
        let text = to_prometheus_text(&encode(&s).unwrap());
        assert!(
            text.contains("ribshard_convergence_decided_seconds_bucket{le=\"0.001\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("ribshard_convergence_decided_seconds_bucket{le=\"+Inf\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("ribshard_convergence_decided_seconds_count 3"),
            "{text}"
        );
    }
}
