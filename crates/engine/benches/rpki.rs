//! Route origin validation and ASPA verification on the two real full tables of the 2010
//! RouteViews RIB (641,957 paths) against a synthesized RPKI of 2026's size (600,000 VRPs:
//! about 55% of the table's prefixes covered by a ROA of their origin, 3% by one of another
//! AS, the rest of the VRPs more-specifics and IPv6; ASPA records for a third of the ASes
//! seen, consistent with the paths):
//! - ingest into one shard in update order with no import policy, with an import policy
//!   that reads nothing of RPKI, and with one that rejects ROV-invalid routes and tags
//!   ASPA-invalid ones (the RPKI data in place before the routes);
//! - a cache's change of 10,000 VRPs applied to the loaded shard: the paths inside the
//!   changed ROA prefixes imported again and decided (`set_rpki` and `drain_changes`), and
//!   the RTR client's part before it, the next table made from the last and the change.
//!
//! `cargo bench -p ribshard-engine --bench rpki`

#[path = "../tests/common/realdata.rs"]
mod realdata;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use realdata::{in_update_order, into_shard_validating, load, Table};
use ribshard_rpki::{AspaTable, Snapshot, Vrp, VrpTable};
use ribshard_wire::update::{segment, RawAttrIter};
use ribshard_wire::{attr, Prefix};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[community.aspa-invalid]
members = ["65535:666"]
[[policy-statement.rpki.term]]
name = "aspa"
from = { aspa-state = "invalid" }
then = { community-add = "aspa-invalid" }
[[policy-statement.rpki.term]]
name = "rov"
from = { validation-state = "invalid" }
then = { action = "reject" }
[[policy-statement.rpki.term]]
name = "rest"
then = { action = "accept" }
[[policy-statement.plain.term]]
name = "tag"
from = { community = "aspa-invalid" }
then = { action = "reject" }
[[policy-statement.plain.term]]
name = "rest"
then = { action = "accept" }
"#;

fn chain(name: &str) -> Arc<ribshard_policy::Chain> {
    let opts: ribshard_policy::PolicyOptions = toml::from_str(POLICY).expect("policy");
    let c = ribshard_policy::compile(&opts, &|_: &std::path::Path| Ok(String::new()));
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    Arc::new(
        c.policies
            .chain(&[name.to_string()], false, 4_200_000_001)
            .expect("chain"),
    )
}

/// A path's ASes, neighbor first.
fn path_of(raw: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    let Some(a) = RawAttrIter::new(raw).find(|a| a.type_code == attr::AS_PATH) else {
        return out;
    };
    let v = a.value;
    let mut at = 0;
    while at + 2 <= v.len() {
        let (kind, n) = (v[at], usize::from(v[at + 1]));
        let body = v.get(at + 2..at + 2 + 4 * n).unwrap_or(&[]);
        if kind == segment::AS_SEQUENCE {
            out.extend(
                body.chunks_exact(4)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])),
            );
        }
        at += 2 + 4 * n;
    }
    out
}

/// The synthesized RPKI, and the VRPs the 10,000-record change swaps.
fn rpki(tables: &[Table]) -> (Vec<Vrp>, AspaTable, Vec<Vrp>) {
    let mut origin: BTreeMap<Prefix, u32> = BTreeMap::new();
    let mut up: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for t in tables {
        for (n, a) in &t.routes {
            let path = path_of(a.raw());
            if let Some(o) = path.last() {
                origin.entry(n.prefix.masked()).or_insert(*o);
            }
            for w in path.windows(2) {
                if w[0] != w[1] {
                    up.entry(w[1]).or_default().insert(w[0]);
                }
            }
        }
    }
    let mut vrps = Vec::new();
    let mut swap = Vec::new();
    for (i, (p, o)) in origin.iter().enumerate() {
        match i % 100 {
            0..=54 => {
                let v = Vrp::new(*p, p.len(), *o);
                if swap.len() < 10_000 && i % 7 == 0 {
                    swap.push(v);
                }
                vrps.push(v);
                // A more-specific of the same holder, as many ROAs list.
                if p.len() <= 22 {
                    if let Prefix::V4 { addr, len } = p {
                        vrps.push(Vrp::new(
                            Prefix::V4 {
                                addr: *addr,
                                len: len + 2,
                            },
                            24,
                            *o,
                        ));
                    }
                }
            }
            55..=57 => vrps.push(Vrp::new(*p, p.len(), o.wrapping_add(1))),
            _ => {}
        }
    }
    let mut k = 0u32;
    while vrps.len() < 600_000 {
        let mut a = [0u8; 16];
        a[0] = 0x2a;
        a[1..5].copy_from_slice(&k.to_be_bytes());
        vrps.push(Vrp::new(
            Prefix::V6 { addr: a, len: 40 },
            48,
            64_512 + k % 1000,
        ));
        k += 1;
    }
    // ASPA: a third of the customers, each naming every AS seen above it (so no path is
    // invalid for want of a provider, and most hops are attested).
    let aspas = AspaTable::new(
        up.into_iter()
            .enumerate()
            .filter(|(i, _)| i % 3 == 0)
            .map(|(_, (c, p))| (c, p.into_iter().collect())),
    );
    (vrps, aspas, swap)
}

fn snapshot(version: u64, old: &VrpTable, new: VrpTable, aspas: &Arc<AspaTable>) -> Arc<Snapshot> {
    Arc::new(Snapshot {
        version,
        changed: Arc::new(old.diff(&new)),
        vrps: Arc::new(new),
        aspas: aspas.clone(),
        aspa_changed: version == 1,
    })
}

fn bench(c: &mut Criterion) {
    let Some(tables) = load(&[2497, 4777]) else {
        return;
    };
    let ordered = in_update_order(&tables);
    let paths: usize = tables.iter().map(|t| t.routes.len()).sum();
    let (vrps, aspas, swap) = rpki(&tables);
    let aspas = Arc::new(aspas);
    let full = VrpTable::new(vrps.clone());
    let first = snapshot(1, &VrpTable::default(), full.clone(), &aspas);
    eprintln!(
        "rpki: {} VRPs ({} IPv4), {} ASPA records; {} VRPs swap",
        full.len(),
        full.counts().0,
        aspas.len(),
        swap.len()
    );

    let mut g = c.benchmark_group("rpki-two-full-tables");
    g.sample_size(10);
    g.throughput(Throughput::Elements(paths as u64));
    for (name, import, data) in [
        ("one-shard-no-policy", None, None),
        ("one-shard-policy-without-rpki", Some(chain("plain")), None),
        (
            "one-shard-rov-and-aspa",
            Some(chain("rpki")),
            Some(first.clone()),
        ),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    let s = into_shard_validating(&ordered, import.clone(), data.clone());
                    total += t.elapsed();
                    drop(s);
                }
                total
            })
        });
    }
    g.finish();

    // The cache changes 10,000 VRPs: each swapped VRP names another AS (its routes become
    // invalid), then back.
    let mut s = into_shard_validating(&ordered, Some(chain("rpki")), Some(first.clone()));
    let swapped: Vec<Vrp> = swap
        .iter()
        .map(|v| Vrp {
            asn: v.asn.wrapping_add(1),
            ..*v
        })
        .collect();
    let (other, changed) = full.with_changes(swapped, swap.clone());
    assert_eq!(changed.len(), swap.len());
    let there = snapshot(2, &full, other.clone(), &aspas);
    let back = snapshot(3, &other, full.clone(), &aspas);
    let mut g = c.benchmark_group("rpki-cache-change");
    g.sample_size(20);
    g.throughput(Throughput::Elements(swap.len() as u64));
    // Criterion calls the routine again for each phase: the state is kept outside it.
    let mut flip = false;
    g.bench_function("10000-vrps-two-full-tables-one-shard", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let snap = if flip { back.clone() } else { there.clone() };
                flip = !flip;
                let t = Instant::now();
                let (looked, _) = s.set_rpki(snap);
                let changes = s.drain_changes();
                total += t.elapsed();
                assert!(
                    looked >= swap.len() && !changes.is_empty(),
                    "looked at {looked} prefixes, {} changes",
                    changes.len()
                );
            }
            total
        })
    });
    // What the RTR client does first: the next table from the last and the increment.
    g.bench_function("table-of-600000-vrps-with-10000-changed", |b| {
        b.iter(|| full.with_changes(swap.clone(), Vec::new()).1.len())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
