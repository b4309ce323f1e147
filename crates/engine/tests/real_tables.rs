//! The two full tables of the 2010 RouteViews RIB, fed to the pipeline from two upstream
//! peers, give exactly the best paths the decision process defines, checked against a
//! straightforward computation written here from the RFC's rules; and the same for one
//! shard and for several. A downstream eBGP peer receives exactly those best paths, through
//! the update threads (full-table drains, split into many messages per shard). Skips (saying
//! so) without `../shared/data`.

mod common;

use common::realdata::{
    downstream, downstream_params, info, load, peers_up, Table, DOWN_AS, LOCAL_AS,
};
use ribshard_adjout::{MemberId, Sink};
use ribshard_engine::pipeline::{Batcher, Pipeline, PipelineConfig, Target, UpdateDelay};
use ribshard_rib::attrs::NORMALIZED;
use ribshard_rib::{Options, PeerInfo, RouteAttrs};
use ribshard_wire::update::segment;
use ribshard_wire::{frame, parse_attributes_only, parse_update, Prefix};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What the downstream peer is sent, kept whole.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<u8>>>);

impl Sink for Received {
    fn send(&self, out: ribshard_adjout::Outgoing) -> bool {
        self.0.lock().unwrap().extend_from_slice(&out.bytes);
        true
    }
    fn queued(&self) -> usize {
        0
    }
    fn neighbor(&self) -> &str {
        "test downstream"
    }
    fn duplicate(&self) -> Box<dyn Sink> {
        Box::new(self.clone())
    }
}

/// The downstream peer's table from the UPDATEs it was sent: each prefix with the second AS
/// of its AS_PATH (ours comes first; the second names the upstream peer the path came from);
/// and how many UPDATEs that took.
fn downstream_table(bytes: &[u8]) -> (HashMap<Prefix, u32>, usize) {
    let mut t = HashMap::new();
    let mut rest = bytes;
    let mut updates = 0;
    while let Ok(Some(len)) = frame(rest, 4096) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        updates += 1;
        let u = parse_update(&msg[19..], &downstream_params()).expect("valid UPDATEs");
        for n in u.withdrawn_all() {
            t.remove(&n.prefix);
        }
        if u.announced().next().is_none() {
            continue;
        }
        let mut asns = u
            .attrs
            .as_path
            .iter()
            .flat_map(|p| p.segments())
            .filter(|s| s.kind == segment::AS_SEQUENCE)
            .flat_map(|s| s.asns());
        assert_eq!(asns.next(), Some(LOCAL_AS), "our AS first");
        let from = asns.next().unwrap_or(0);
        for n in u.announced() {
            t.insert(n.prefix, from);
        }
    }
    assert!(rest.is_empty(), "a partial message");
    (t, updates)
}

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

/// The Loc-RIB (prefix, peer, attribute set), the downstream peer's table and the UPDATEs
/// it took.
type Fed = (Vec<(Prefix, u32, usize)>, (HashMap<Prefix, u32>, usize));

fn feed(tables: &[Table], shards: usize, update_threads: usize) -> Fed {
    feed_with(tables, shards, update_threads, false)
}

/// Feeds both tables to a pipeline with one downstream member; `deferred`: with the start-up
/// advertisement deferral, every peer doing graceful restart and sending End-of-RIB (the
/// downstream at once, each upstream after its table).
fn feed_with(tables: &[Table], shards: usize, update_threads: usize, deferred: bool) -> Fed {
    let config = PipelineConfig {
        shards,
        update_threads,
        options: Options::default(),
        write_queue: Default::default(),
    };
    let p = if deferred {
        let mut peers: Vec<u32> = (0..tables.len() as u32).collect();
        peers.push(9);
        Pipeline::start_deferred(config, Some((UpdateDelay::default(), peers)))
    } else {
        Pipeline::start(config)
    };
    let received = Received::default();
    let down = PeerInfo {
        peer_as: DOWN_AS,
        ..info(&tables[0])
    };
    let id = MemberId { peer: 9, epoch: 1 };
    let member = Some((
        downstream(),
        id,
        Box::new(received.clone()) as Box<dyn Sink>,
    ));
    for m in p.peer_up(9, down, member).0 {
        p.blocking_send(m);
    }
    peers_up(&p, tables);
    if deferred {
        for peer in 0..tables.len() as u32 {
            assert!(p.deferral_up(peer, true).is_empty());
        }
        assert!(p.deferral_up(9, true).is_empty());
        assert!(
            p.deferral_end_of_rib(9).is_empty(),
            "upstreams still loading"
        );
    }
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
    for (i, b) in batchers.iter_mut().enumerate() {
        for (s, m) in b.take() {
            p.blocking_send(Target::Shard(s, m));
        }
        if deferred {
            let over = p.deferral_end_of_rib(i as u32);
            assert_eq!(
                over.is_empty(),
                i + 1 < tables.len(),
                "ends with the last table"
            );
            for m in over {
                p.blocking_send(m);
            }
        }
    }
    p.barrier();
    let rib = p
        .loc_rib()
        .into_iter()
        .map(|(pf, b)| (pf, b.peer, Arc::as_ptr(&b.attrs) as usize))
        .collect();
    p.stop();
    let bytes = received.0.lock().unwrap();
    (rib, downstream_table(&bytes))
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
    let mut updates = Vec::new();
    for (shards, uts) in [(1, 0), (2, 2), (1, 1), (4, 1)] {
        let (got, (sent, n)) = feed(&tables, shards, uts);
        updates.push(((shards, uts), n));
        assert_eq!(got.len(), want.len(), "prefixes with {shards} shards");
        // Every best path reaches the downstream peer, from the peer that won it.
        assert_eq!(sent.len(), want.len(), "prefixes sent with {shards} shards");
        for (pf, (wp, _)) in &want {
            assert_eq!(
                sent.get(pf),
                Some(&tables[*wp as usize].peer.asn),
                "{pf} sent with {shards} shards"
            );
        }
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
    eprintln!("UPDATEs to the downstream peer by (shards, update threads): {updates:?}");
}

/// With the start-up deferral, the downstream gets the two tables as one table dump packed
/// across shards: the same UPDATEs with one shard as with four (the issue asks within 1%;
/// the packing makes it exact), each prefix once, and fewer than without the deferral.
#[test]
fn deferred_start_sends_the_same_updates_whatever_the_shards() {
    let Some(tables) = load(&[2497, 4777]) else {
        return;
    };
    let mut counts = Vec::new();
    for (shards, uts) in [(1, 0), (1, 1), (4, 1), (4, 3)] {
        let (rib, (sent, updates)) = feed_with(&tables, shards, uts, true);
        assert_eq!(
            sent.len(),
            rib.len(),
            "every best path sent ({shards}x{uts})"
        );
        for (pf, peer, _) in &rib {
            assert_eq!(sent.get(pf), Some(&tables[*peer as usize].peer.asn), "{pf}");
        }
        counts.push(((shards, uts), updates));
    }
    eprintln!("UPDATEs with the deferral by (shards, update threads): {counts:?}");
    let one = counts[0].1 as f64;
    for ((shards, uts), n) in &counts {
        let off = (*n as f64 - one).abs() / one;
        assert!(
            off <= 0.01,
            "{shards}x{uts}: {n} UPDATEs against {one} with one shard"
        );
    }
    // Without it, interim best paths go out while the second table arrives.
    let (_, (_, undeferred)) = feed(&tables, 4, 1);
    assert!(
        counts.iter().all(|(_, n)| *n < undeferred),
        "{counts:?} against {undeferred} without the deferral"
    );
}
