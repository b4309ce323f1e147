//! The two full tables of the 2010 RouteViews RIB, fed to the pipeline from two upstream
//! peers, give exactly the best paths the decision process defines, checked against a
//! straightforward computation written here from the RFC's rules; and the same for one
//! shard and for several. Skips (saying so) without `../shared/data`.

mod common;

use common::realdata::{info, load, peers_up, Table};
use ribshard_engine::pipeline::{Batcher, Pipeline, PipelineConfig, Target};
use ribshard_rib::attrs::NORMALIZED;
use ribshard_rib::{Options, PeerInfo, RouteAttrs};
use ribshard_wire::update::segment;
use ribshard_wire::{parse_attributes_only, Prefix};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// RFC 4271 section 9.1.2.2 for two external paths, computed from the attribute bytes:
/// shortest AS_PATH (an AS_SET counts one), lowest ORIGIN, lowest MED if both come from the
/// same neighbor AS, then the lowest BGP Identifier and the lowest peer address.
fn prefer(a: (&RouteAttrs, &PeerInfo), b: (&RouteAttrs, &PeerInfo)) -> Ordering {
    let facts = |r: &RouteAttrs| {
        let u = parse_attributes_only(r.raw(), &NORMALIZED).expect("normalized attributes");
        let mut len = 0u32;
        let mut first = None;
        if let Some(p) = u.attrs.as_path {
            for s in p.segments() {
                match s.kind {
                    segment::AS_SEQUENCE => {
                        if first.is_none() {
                            first = s.asns().next();
                        }
                        len += s.len() as u32
                    }
                    segment::AS_SET => len += 1,
                    _ => {}
                }
            }
        }
        let origin = u.attrs.origin.map_or(2, |o| o as u8);
        (len, origin, u.attrs.med.unwrap_or(0), first)
    };
    let (la, oa, ma, fa) = facts(a.0);
    let (lb, ob, mb, fb) = facts(b.0);
    la.cmp(&lb)
        .then(oa.cmp(&ob))
        .then(if fa == fb {
            ma.cmp(&mb)
        } else {
            Ordering::Equal
        })
        .then(a.1.router_id.cmp(&b.1.router_id))
        .then(a.1.address.cmp(&b.1.address))
}

fn feed(tables: &[Table], shards: usize, update_threads: usize) -> Vec<(Prefix, u32, usize)> {
    let p = Pipeline::start(PipelineConfig {
        shards,
        update_threads,
        options: Options::default(),
        write_queue: Default::default(),
    });
    peers_up(&p, tables);
    // Both sessions at once, interleaved in batches as two sessions would deliver them.
    let mut batchers: Vec<Batcher> = (0..tables.len())
        .map(|i| Batcher::new(i as u32, p.shards()))
        .collect();
    let longest = tables.iter().map(|t| t.routes.len()).max().unwrap_or(0);
    for k in 0..longest {
        for (i, t) in tables.iter().enumerate() {
            if let Some((n, a)) = t.routes.get(k) {
                batchers[i].announce(a, *n);
                if batchers[i].len() >= 4096 {
                    for (s, m) in batchers[i].take() {
                        p.blocking_send(Target::Shard(s, m));
                    }
                }
            }
        }
    }
    for b in &mut batchers {
        for (s, m) in b.take() {
            p.blocking_send(Target::Shard(s, m));
        }
    }
    p.barrier();
    let rib = p
        .loc_rib()
        .into_iter()
        .map(|(pf, b)| (pf, b.peer, Arc::as_ptr(&b.attrs) as usize))
        .collect();
    p.stop();
    rib
}

#[test]
fn two_routeviews_tables_give_the_defined_best_paths() {
    let Some(tables) = load(&[2497, 4777]) else {
        return;
    };
    assert_eq!(tables.len(), 2, "both full-table peers are in the file");
    assert!(tables.iter().all(|t| t.routes.len() > 300_000));
    let infos: Vec<PeerInfo> = tables.iter().map(info).collect();
    // The straightforward computation.
    let mut want: HashMap<Prefix, (u32, &Arc<RouteAttrs>)> = HashMap::new();
    for (i, t) in tables.iter().enumerate() {
        for (n, a) in &t.routes {
            let i = i as u32;
            want.entry(n.prefix)
                .and_modify(|cur| {
                    let (ci, ca) = *cur;
                    if prefer((&**a, &infos[i as usize]), (&**ca, &infos[ci as usize]))
                        == Ordering::Less
                    {
                        *cur = (i, a);
                    }
                })
                .or_insert((i, a));
        }
    }
    for (shards, uts) in [(1, 0), (2, 2)] {
        let got = feed(&tables, shards, uts);
        assert_eq!(got.len(), want.len(), "prefixes with {shards} shards");
        let mut from = [0usize; 2];
        for (pf, peer, attrs) in &got {
            let (wp, wa) = want[pf];
            assert_eq!(*peer, wp, "{pf} with {shards} shards");
            assert_eq!(*attrs, Arc::as_ptr(wa) as usize, "{pf}");
            from[*peer as usize] += 1;
        }
        // Both peers win a real share: the comparison is not decided by one rule.
        assert!(from.iter().all(|&n| n > 10_000), "{from:?}");
        eprintln!(
            "{} prefixes, best from AS{}: {}, from AS{}: {} ({shards} shards, {uts} update threads)",
            got.len(),
            tables[0].peer.asn,
            from[0],
            tables[1].peer.asn,
            from[1]
        );
    }
}
