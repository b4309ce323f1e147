//! Criterion benchmarks of the codec: decoding real UPDATEs and packing prefixes.
//!
//! Run with `scripts/bench` (which also rewrites BENCHMARKS.md), or
//! `cargo bench -p ribshard-wire --bench codec`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ribshard_mrt::{Bgp4mpBody, Record, RibRecord};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{
    decode, parse_attributes_only, Family, Message, Nlri, Origin, Prefix, SessionParams,
    UpdateBuilder,
};
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// Every UPDATE of a BGP4MP trace, with the parameters to decode it.
fn trace_updates(name: &str) -> Vec<(Vec<u8>, SessionParams)> {
    let Some(path) = ribshard_mrt::shared_data_file(name) else {
        return Vec::new();
    };
    let mut r = ribshard_mrt::open(path).expect("open trace");
    let mut out = Vec::new();
    while let Some(raw) = r.next_record().expect("read") {
        if let Ok(Record::Bgp4mp(m)) = Record::parse(&raw) {
            if let Bgp4mpBody::Message(msg) = m.body {
                if msg.get(18) == Some(&2) {
                    out.push((msg.to_vec(), m.params()));
                }
            }
        }
    }
    out
}

/// A full table as a session would receive it: one peer's routes of the 2010 RouteViews
/// RIB, grouped by attribute set and packed into UPDATEs. Synthesized when the data is absent.
fn full_table_updates() -> (Vec<u8>, SessionParams) {
    let params = SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    };
    let mut groups: HashMap<Vec<u8>, Vec<Nlri>> = HashMap::new();
    if let Some(path) = ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz") {
        let mut r = ribshard_mrt::open(path).expect("open RIB");
        let mut full_peer = None;
        while let Some(raw) = r.next_record().expect("read") {
            match Record::parse(&raw) {
                // The AS4777 full table.
                Ok(Record::PeerIndexTable(t)) => {
                    full_peer = t.peers.iter().position(|p| p.asn == 4777);
                }
                Ok(Record::Rib(rib)) => {
                    let peer = full_peer.map(|i| i as u16);
                    for e in rib.entries.iter().filter(|e| Some(e.peer_index) == peer) {
                        let u = parse_attributes_only(e.attributes, &RibRecord::params())
                            .expect("attributes");
                        let attrs = PathAttributes::from_view(&u.attrs, &RibRecord::params());
                        groups
                            .entry(attrs.to_bytes(&params))
                            .or_default()
                            .push(Nlri::new(rib.prefix));
                    }
                }
                _ => {}
            }
        }
    }
    if groups.is_empty() {
        for (i, p) in synth_prefixes(300_000).into_iter().enumerate() {
            groups
                .entry(attrs_for(i / 3).to_bytes(&params))
                .or_default()
                .push(Nlri::new(p));
        }
    }
    let b = UpdateBuilder::new(params);
    let mut out = Vec::new();
    for (attrs, nlri) in &groups {
        b.announce(attrs, Family::Ipv4Unicast, &[], nlri, &mut out)
            .expect("pack");
    }
    (out, params)
}

fn synth_prefixes(n: usize) -> Vec<Prefix> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Prefix::V4 {
                addr: (x as u32) & 0xffff_ff00,
                len: 24,
            }
        })
        .collect()
}

fn attrs_for(i: usize) -> PathAttributes {
    PathAttributes::canonical([
        AttrValue::Origin(Origin::Igp),
        AttrValue::AsPath(AsPath::sequence([64_500, 3356, 1299, 10_000 + i as u32])),
        AttrValue::NextHop(Ipv4Addr::new(198, 51, 100, 1)),
        AttrValue::Communities(vec![0xFDE8_0001, 0xFDE8_0002]),
    ])
}

/// Decodes every message of `stream` (back to back) and touches every prefix.
fn decode_stream(stream: &[u8], params: &SessionParams) -> usize {
    let mut buf = stream;
    let mut prefixes = 0;
    while let Ok(Some(len)) = ribshard_wire::frame(buf, params.max_message_len()) {
        let (msg, rest) = buf.split_at(len);
        // The hot path of a session: frame, then parse the UPDATE body in place.
        if let Ok(u) = ribshard_wire::parse_update(msg.get(19..).unwrap_or(&[]), params) {
            for n in u.announced().chain(u.withdrawn_all()) {
                prefixes += usize::from(!n.prefix.is_empty());
            }
            black_box(&u.attrs);
        }
        buf = rest;
    }
    prefixes
}

fn bench_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.sample_size(20);
    for name in ["ris-updates-20160811.mrt.gz", "ris-updates-20070211.mrt.gz"] {
        let msgs = trace_updates(name);
        if msgs.is_empty() {
            eprintln!("SKIPPED decode/{name}: ../shared/data is absent");
            continue;
        }
        let prefixes: usize = msgs
            .iter()
            .map(|(m, p)| match decode(m, p) {
                Ok(Message::Update(u)) => u.announced().count() + u.withdrawn_all().count(),
                _ => 0,
            })
            .sum();
        g.throughput(Throughput::Elements(prefixes as u64));
        g.bench_function(BenchmarkId::new("ris-trace", name), |b| {
            b.iter(|| {
                let mut n = 0;
                for (m, p) in &msgs {
                    if let Ok(u) = ribshard_wire::parse_update(m.get(19..).unwrap_or(&[]), p) {
                        n += u.announced().count() + u.withdrawn_all().count();
                        black_box(&u.attrs);
                    }
                }
                n
            })
        });
    }
    let (stream, params) = full_table_updates();
    let prefixes = decode_stream(&stream, &params);
    g.throughput(Throughput::Elements(prefixes as u64));
    g.bench_function("full-table-as-updates", |b| {
        b.iter(|| decode_stream(black_box(&stream), &params))
    });
    g.finish();
}

/// A 1,500-octet UPDATE as a session receives it (AS_PATH of 20 ASes, 30 communities, an
/// AGGREGATOR, 250 IPv4 prefixes), and the same message made malformed in one place, each
/// the same size: the RFC 7606 paths (treat-as-withdraw, attribute discard, session reset)
/// must cost no more than the valid message.
fn malformed_variants() -> Vec<(&'static str, Vec<u8>)> {
    fn attr(flags: u8, code: u8, value: &[u8]) -> Vec<u8> {
        let mut v = vec![flags, code, value.len() as u8];
        v.extend_from_slice(value);
        v
    }
    let path: Vec<u8> = [2u8, 20]
        .into_iter()
        .chain((0..20u32).flat_map(|i| (64_600 + i).to_be_bytes()))
        .collect();
    let communities: Vec<u8> = (0..30u32)
        .flat_map(|i| (0xfde8_0000 + i).to_be_bytes())
        .collect();
    let build = |origin: u8, path: &[u8], aggregator_as: u32, last_len: u8| {
        let mut attrs = attr(0x40, 1, &[origin]);
        attrs.extend(attr(0x40, 2, path));
        attrs.extend(attr(0x40, 3, &[198, 51, 100, 1]));
        attrs.extend(attr(0xc0, 8, &communities));
        let mut agg = aggregator_as.to_be_bytes().to_vec();
        agg.extend_from_slice(&[192, 0, 2, 1]);
        attrs.extend(attr(0xc0, 7, &agg));
        let mut nlri: Vec<u8> = (0..249u32)
            .flat_map(|i| [24, 10, (i >> 8) as u8, i as u8])
            .collect();
        nlri.extend_from_slice(&[last_len, 10, 1, 0]);
        let mut m = vec![0xff; 16];
        m.extend_from_slice(&((23 + attrs.len() + nlri.len()) as u16).to_be_bytes());
        m.extend_from_slice(&[2, 0, 0]);
        m.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        m.extend_from_slice(&attrs);
        m.extend_from_slice(&nlri);
        m
    };
    let mut as_zero = path.clone();
    let end = as_zero.len();
    as_zero[end - 4..].fill(0);
    vec![
        ("valid", build(0, &path, 64_600, 24)),
        ("treat-as-withdraw: ORIGIN 7", build(7, &path, 64_600, 24)),
        (
            "treat-as-withdraw: AS 0 last in AS_PATH",
            build(0, &as_zero, 64_600, 24),
        ),
        ("attribute discard: AGGREGATOR AS 0", build(0, &path, 0, 24)),
        (
            "session reset: the last prefix of length 33",
            build(0, &path, 64_600, 33),
        ),
    ]
}

fn bench_malformed(c: &mut Criterion) {
    let mut g = c.benchmark_group("malformed");
    let params = SessionParams {
        four_octet_as: true,
        external: true,
        live: true,
        ..SessionParams::default()
    };
    for (name, msg) in malformed_variants() {
        g.throughput(Throughput::Bytes(msg.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| match decode(black_box(&msg), &params) {
                Ok(Message::Update(u)) => {
                    black_box(&u.attrs);
                    u.announced().count() + u.withdrawn_all().count()
                }
                Ok(_) => 0,
                Err(e) => e.notification().data.len(),
            })
        });
    }
    g.finish();
}

fn bench_pack(c: &mut Criterion) {
    let mut g = c.benchmark_group("pack");
    g.sample_size(10);
    let params = SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    };
    let b = UpdateBuilder::new(params);
    let nlri: Vec<Nlri> = synth_prefixes(1_000_000)
        .into_iter()
        .map(Nlri::new)
        .collect();
    g.throughput(Throughput::Elements(nlri.len() as u64));
    let one = b.encode_attributes(&attrs_for(0));
    let mut out = Vec::with_capacity(8 << 20);
    g.bench_function("1M-prefixes-one-attribute-set", |bench| {
        bench.iter(|| {
            out.clear();
            b.announce(&one, Family::Ipv4Unicast, &[], &nlri, &mut out)
                .expect("pack")
        })
    });
    // A real full table has about three prefixes per attribute set.
    let sets: Vec<Vec<u8>> = (0..nlri.len() / 3 + 1)
        .map(|i| b.encode_attributes(&attrs_for(i)))
        .collect();
    g.bench_function("1M-prefixes-3-per-attribute-set", |bench| {
        bench.iter(|| {
            out.clear();
            let mut msgs = 0;
            for (set, chunk) in sets.iter().zip(nlri.chunks(3)) {
                msgs += b
                    .announce(set, Family::Ipv4Unicast, &[], chunk, &mut out)
                    .expect("pack");
            }
            msgs
        })
    });
    g.bench_function("1M-withdrawals", |bench| {
        bench.iter(|| {
            out.clear();
            b.withdraw(Family::Ipv4Unicast, &nlri, &mut out)
        })
    });
    g.finish();
}

criterion_group!(benches, bench_decode, bench_malformed, bench_pack);
criterion_main!(benches);
