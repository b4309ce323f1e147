//! Policy evaluation over the real full tables (`../shared/data`): a 10-term transit import
//! policy with bogon prefixes and AS numbers, length limits, a 100,000-entry prefix list
//! (every fifth prefix of a 2014 RouteViews table, as an IRR list would hold), community and
//! AS path regular expressions. Each iteration evaluates the chain once per path of the two
//! 2010 tables (641,942 routes): the verdict the shards compute per path.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ribshard_mrt::{Record, RibRecord};
use ribshard_policy::{compile, Chain, Source, Subject};
use ribshard_wire::{attr, update::RawAttrIter, Prefix};
use std::hint::black_box;
use std::io::Read;

const POLICY: &str = r#"
[prefix-list.bogons]
prefixes = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
            "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
            "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"]
[prefix-list.irr]
file = "irr.txt"
[community.customer]
members = ["^2497:1[0-9][0-9]$"]
[community.blackhole]
members = ["no-export", "65535:666"]
[as-path]
bogon-asns = ".* [0 23456 64496-131071 4200000000-4294967295] .*"
tier1-transit = "^(2497 | 4777) .* (3356 | 1299 | 174 | 2914) .*"
cloudflare = ".* 13335"

[[policy-statement.transit-in.term]]
name = "bogons"
from = { prefix-list-filter = { list = "bogons", match = "orlonger" } }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "too-specific"
from = { route-filter = ["0.0.0.0/0 prefix-length-range /25-/32"] }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "bogon-asns"
from = { as-path = "bogon-asns" }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "too-long"
from = { as-path-calc-length = { count = 50, match = "orhigher" } }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "irr-customer"
from = { prefix-list-filter = { list = "irr", match = "orlonger" }, community = "customer" }
then = { local-preference = 200, action = "accept" }
[[policy-statement.transit-in.term]]
name = "irr"
from = { prefix-list-filter = { list = "irr", match = "orlonger" } }
then = { local-preference = 150, action = "accept" }
[[policy-statement.transit-in.term]]
name = "via-tier1"
from = { as-path = "tier1-transit" }
then = { metric = 10 }
[[policy-statement.transit-in.term]]
name = "blackhole"
from = { community = "blackhole" }
then = { action = "reject" }
[[policy-statement.transit-in.term]]
name = "cloudflare"
from = { as-path = "cloudflare" }
then = { local-preference = 120 }
[[policy-statement.transit-in.term]]
name = "rest"
then = { action = "accept" }
"#;

/// A path as policy sees it: prefix, attribute bytes, next hop.
type Path = (Prefix, Vec<u8>, Vec<u8>);

/// Every path of the 2010 RIB.
fn routes() -> Option<Vec<Path>> {
    let path = ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz")?;
    let mut r = ribshard_mrt::open(&path).ok()?;
    let params = RibRecord::params();
    let mut out = Vec::new();
    while let Some(raw) = r.next_record().ok()? {
        if let Ok(Record::Rib(rib)) = Record::parse(&raw) {
            for e in &rib.entries {
                if ribshard_wire::parse_attributes_only(e.attributes, &params).is_err() {
                    continue;
                }
                let nh = RawAttrIter::new(e.attributes)
                    .find(|a| a.type_code == attr::NEXT_HOP)
                    .map_or(Vec::new(), |a| a.value.to_vec());
                out.push((rib.prefix.masked(), e.attributes.to_vec(), nh));
            }
        }
    }
    Some(out)
}

/// 100,000 prefixes: every fifth of the 2014 prefix-to-AS table.
fn irr_list() -> Option<String> {
    let path = ribshard_mrt::shared_data_file("ipasn-20140513.txt.gz")?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).ok()?)
        .read_to_string(&mut text)
        .ok()?;
    Some(
        text.lines()
            .filter(|l| !l.starts_with(';'))
            .filter_map(|l| l.split('\t').next())
            .step_by(5)
            .take(100_000)
            .map(|p| format!("{p}\n"))
            .collect(),
    )
}

fn evaluate(c: &mut Criterion) {
    let (Some(routes), Some(irr)) = (routes(), irr_list()) else {
        eprintln!("SKIPPED: the policy benchmark needs ../shared/data");
        return;
    };
    let opts: ribshard_policy::PolicyOptions = toml::from_str(POLICY).expect("policy");
    let read = |_: &std::path::Path| Ok(irr.clone());
    let compiled = compile(&opts, &read);
    assert!(compiled.errors.is_empty(), "{:?}", compiled.errors);
    let chain: Chain = compiled
        .policies
        .chain(&["transit-in".to_string()], false, 4_200_000_001)
        .expect("chain");
    let source = Source {
        address: "198.51.100.1".parse().expect("address"),
        peer_as: 2497,
        internal: false,
    };
    let mut accepted = 0usize;
    for (p, a, nh) in &routes {
        let v = chain.evaluate(&Subject {
            prefix: *p,
            attrs: a,
            next_hop: nh,
            source: &source,
            receiver_as: None,
            rpki: Default::default(),
        });
        accepted += usize::from(v.accept);
    }
    eprintln!(
        "policy benchmark: {} routes, {} accepted, {} entries in the prefix list",
        routes.len(),
        accepted,
        irr.lines().count()
    );
    let mut g = c.benchmark_group("policy");
    g.sample_size(10);
    g.throughput(Throughput::Elements(routes.len() as u64));
    g.bench_function("transit-import-10-terms-real-tables", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (p, a, nh) in &routes {
                let v = chain.evaluate(&Subject {
                    prefix: *p,
                    attrs: a,
                    next_hop: nh,
                    source: &source,
                    receiver_as: None,
                    rpki: Default::default(),
                });
                n += usize::from(v.accept);
            }
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, evaluate);
criterion_main!(benches);
