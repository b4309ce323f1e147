//! Ingest of the two real full tables of the 2010 RouteViews RIB (641,957 paths): into one
//! shard on one core (announce and best path), and through the whole pipeline to one
//! downstream peer for each thread setting, that peer sent the best path or (Add-Path) the
//! best two or every path; and re-sharding the loaded pipeline (the pause a SIGHUP with new
//! thread counts costs). Memory per path is the `memory` bench.
//!
//! `cargo bench -p ribshard-engine --bench ingest`

#[path = "../tests/common/realdata.rs"]
mod realdata;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use realdata::{
    downstream, in_update_order, info, into_shard, into_shard_with_import, load, peers_up,
    transit_in, Table, DOWN_AS,
};
use ribshard_adjout::{MemberId, Sink};
use ribshard_engine::pipeline::{Batcher, Pipeline, PipelineConfig, Target};
use ribshard_rib::{AddPathKeep, AddPathSelect, GroupSpec, Options, PeerInfo};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A downstream peer that takes everything at once.
struct Discard(Arc<AtomicU64>);
impl Sink for Discard {
    fn send(&self, out: ribshard_adjout::Outgoing) -> bool {
        self.0.fetch_add(out.bytes.len() as u64, Ordering::Relaxed);
        true
    }
    fn queued(&self) -> usize {
        0
    }
    fn neighbor(&self) -> &str {
        "test downstream"
    }
    fn duplicate(&self) -> Box<dyn Sink> {
        Box::new(Discard(self.0.clone()))
    }
}

/// Everything through the pipeline: two upstream peers, one downstream peer.
fn through_pipeline(tables: &[Table], shards: usize, update_threads: usize, stamp: bool) -> u64 {
    through_pipeline_to(tables, shards, update_threads, stamp, None)
}

/// The same, the downstream peer sent several paths per prefix with `select`.
fn through_pipeline_to(
    tables: &[Table],
    shards: usize,
    update_threads: usize,
    stamp: bool,
    select: Option<AddPathSelect>,
) -> u64 {
    let (p, sent) = loaded_to(tables, shards, update_threads, stamp, select);
    p.stop();
    sent.load(Ordering::Relaxed)
}

/// A pipeline holding both tables, with one downstream peer in step; and what it was sent.
/// `stamp`: batches carry their receipt time as sessions stamp them, so the convergence
/// telemetry measures them (without it, it measures nothing).
fn loaded(
    tables: &[Table],
    shards: usize,
    update_threads: usize,
    stamp: bool,
) -> (Arc<Pipeline>, Arc<AtomicU64>) {
    loaded_to(tables, shards, update_threads, stamp, None)
}

fn loaded_to(
    tables: &[Table],
    shards: usize,
    update_threads: usize,
    stamp: bool,
    select: Option<AddPathSelect>,
) -> (Arc<Pipeline>, Arc<AtomicU64>) {
    let keep = select.map(|s| match s {
        AddPathSelect::Best(n) => AddPathKeep {
            ranked: n,
            ..AddPathKeep::default()
        },
        AddPathSelect::All => AddPathKeep {
            all: true,
            ..AddPathKeep::default()
        },
        AddPathSelect::EqualCost(_) => AddPathKeep {
            equal_cost: true,
            ..AddPathKeep::default()
        },
    });
    let p = Pipeline::start(PipelineConfig {
        shards,
        update_threads,
        options: Options {
            add_path: keep,
            ..Options::default()
        },
        write_queue: Default::default(),
    });
    let spec = match select {
        None => downstream(),
        Some(s) => {
            let d = downstream();
            GroupSpec {
                params: ribshard_wire::SessionParams {
                    add_path: [true, true],
                    ..d.params
                },
                add_path: Some(s),
                ..d
            }
        }
    };
    let sent = Arc::new(AtomicU64::new(0));
    let id = MemberId { peer: 9, epoch: 1 };
    let down = PeerInfo {
        peer_as: DOWN_AS,
        ..info(&tables[0])
    };
    for m in p
        .peer_up(9, down, Some((spec, id, Box::new(Discard(sent.clone())))))
        .0
    {
        p.blocking_send(m);
    }
    peers_up(&p, tables);
    let mut batchers: Vec<Batcher> = (0..tables.len())
        .map(|i| Batcher::new(i as u32, p.shards()))
        .collect();
    for (i, t) in tables.iter().enumerate() {
        for (k, (n, a)) in t.routes.iter().enumerate() {
            // Sessions stamp every UPDATE they read (convergence telemetry); a full table
            // holds about three prefixes an UPDATE.
            if stamp && k % 3 == 0 {
                batchers[i].stamp(std::time::Instant::now);
            }
            batchers[i].announce(a, *n);
            if batchers[i].len() >= 4096 {
                for (s, m) in batchers[i].take() {
                    p.blocking_send(Target::Shard(s, m));
                }
            }
        }
        for (s, m) in batchers[i].take() {
            p.blocking_send(Target::Shard(s, m));
        }
    }
    p.barrier();
    (p, sent)
}

fn bench(c: &mut Criterion) {
    let Some(tables) = load(&[2497, 4777]) else {
        return;
    };
    let paths: usize = tables.iter().map(|t| t.routes.len()).sum();
    let mut g = c.benchmark_group("ingest-two-full-tables");
    g.sample_size(10);
    g.throughput(Throughput::Elements(paths as u64));
    // Announce and decide only: the table is dropped outside the timing.
    g.bench_function("one-shard-no-threads", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                let t = std::time::Instant::now();
                let s = into_shard(&tables);
                total += t.elapsed();
                drop(s);
            }
            total
        })
    });
    // Announce and decide in the order sessions bring the routes (a set's prefixes
    // together), without import policy and with one that changes every route it accepts.
    let ordered = in_update_order(&tables);
    let chain = transit_in();
    for (name, import) in [
        ("one-shard-update-order", None),
        ("one-shard-update-order-import-policy", Some(chain)),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let t = std::time::Instant::now();
                    let s = into_shard_with_import(&ordered, import.clone());
                    total += t.elapsed();
                    drop(s);
                }
                total
            })
        });
    }
    for (s, u) in [(1, 0), (1, 1), (2, 2)] {
        g.bench_function(format!("pipeline-{s}-shards-{u}-update-threads"), |b| {
            b.iter(|| through_pipeline(&tables, s, u, true))
        });
    }
    // The convergence telemetry's cost: the same as the 2x2 row with nothing to measure.
    g.bench_function(
        "pipeline-2-shards-2-update-threads-without-telemetry",
        |b| b.iter(|| through_pipeline(&tables, 2, 2, false)),
    );
    g.finish();
    // Add-Path send: the downstream peer sent the best path, the best two, or every path
    // (same run, so the ratios hold on a noisy machine). The octets each sends are printed.
    let mut g = c.benchmark_group("add-path-two-full-tables");
    g.sample_size(10);
    g.throughput(Throughput::Elements(paths as u64));
    for (s, u) in [(1, 0), (2, 2)] {
        for (name, select) in [
            ("best-path", None),
            ("best-2", Some(AddPathSelect::Best(2))),
            ("all-paths", Some(AddPathSelect::All)),
        ] {
            let octets = through_pipeline_to(&tables, s, u, true, select);
            eprintln!("add-path {s}x{u} {name}: {octets} octets sent downstream");
            g.bench_function(format!("pipeline-{s}x{u}-{name}"), |b| {
                b.iter(|| through_pipeline_to(&tables, s, u, true, select))
            });
        }
    }
    g.finish();
    // A re-shard moves every prefix to its new shard and restarts the threads; routing waits
    // meanwhile. One iteration is two re-shards: 2x2 to 1x0 and back.
    let mut g = c.benchmark_group("reshard-two-full-tables");
    g.sample_size(10);
    g.throughput(Throughput::Elements(2 * paths as u64));
    let (p, sent) = loaded(&tables, 2, 2, true);
    let before = sent.load(Ordering::Relaxed);
    g.bench_function("2x2-to-1x0-and-back", |b| {
        b.iter(|| {
            let r = p.reconfigure(1, 0);
            let back = p.reconfigure(2, 2);
            assert_eq!(r.paths, back.paths);
        })
    });
    g.finish();
    p.barrier();
    assert_eq!(
        sent.load(Ordering::Relaxed),
        before,
        "a member in step is sent nothing by a re-shard"
    );
    p.stop();
}

criterion_group!(benches, bench);
criterion_main!(benches);
