//! A scenario's plan: the topology around the DUT, the feed each upstream sends and what each
//! downstream must hold once the feeds are learned (and after a trace or a policy change).

use super::{BenchError, Options, Scenario};
use crate::address::{self, Kind};
use crate::dut::{Neighbor, Role, Topology, LOCAL_AS};
use crate::policy::Filter;
use crate::speaker::{Bits, Index};
use crate::table::{self, Feed, Source, Spread, Trace, Winner};
use crate::verdict::Winners;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The neighbors, what each announces, and what each receiver must hold.
pub(super) struct Plan {
    pub(super) topo: Topology,
    /// Feed per neighbor (senders).
    pub(super) feeds: Vec<Option<Feed>>,
    /// Expected prefixes per neighbor (receivers) once the feeds are learned.
    pub(super) expected: Vec<Option<Bits>>,
    /// churn: expected once the trace is replayed as well.
    pub(super) after_trace: Vec<Option<Bits>>,
    /// Expected per receiver after a `--policy-change` reload.
    pub(super) after_change: Vec<Option<Bits>>,
    pub(super) index: Arc<Index>,
    pub(super) routes: usize,
    pub(super) data: &'static str,
    pub(super) trace: Option<Trace>,
    /// `--overload`: the indices of its neighbors ([`crate::overload::neighbors`]).
    pub(super) overload: std::ops::Range<usize>,
    /// `--rpki`: the RPKI served, and what it rejects.
    pub(super) rpki: Option<crate::rpki::Synth>,
    /// The upstreams advertise graceful restart ([`Options::graceful_restart`]).
    pub(super) graceful_restart: bool,
    /// route-server with `--destinations`: each shared prefix's winner, for the judging
    /// receivers ([`crate::verdict`]).
    pub(super) winners: Option<Arc<Winners>>,
}

fn real_or_synth(opts: &Options, asns: &[u32], default: usize) -> (Vec<Feed>, &'static str) {
    let limit = opts.sizes.prefixes.or(opts.quick.then_some(50_000));
    if let Some(f) = table::real(&opts.data_dir, asns, limit) {
        return (f, "real");
    }
    tracing::warn!(
        "{} absent: synthesized tables instead",
        opts.data_dir.join(table::REAL_RIB).display()
    );
    let sources: Vec<Source> = asns
        .iter()
        .enumerate()
        .map(|(i, a)| Source {
            asn: *a,
            external: true,
            next_hop: Ipv4Addr::new(198, 51, 100, (i + 1) as u8),
        })
        .collect();
    (
        table::synth(&sources, limit.unwrap_or(default), Spread::All, opts.seed),
        "synthesized",
    )
}

pub(super) fn plan(opts: &Options) -> Result<Plan, BenchError> {
    let q = |quick: usize, full: usize| if opts.quick { quick } else { full };
    let s = &opts.sizes;
    let mut neighbors = Vec::new();
    let mut feeds = Vec::new();
    let mut trace = None;
    let mut shared: Vec<Winner> = Vec::new();
    let (role, data) = match opts.scenario {
        Scenario::FullTable | Scenario::TwoFullTables | Scenario::Churn => {
            let asns: &[u32] = if opts.scenario == Scenario::TwoFullTables {
                &table::REAL_PEERS
            } else {
                &table::REAL_PEERS[..1]
            };
            let (f, data) = real_or_synth(opts, asns, 323_486);
            for (i, feed) in f.into_iter().enumerate() {
                neighbors.push(Neighbor {
                    addr: address::of(Kind::Upstream, i),
                    asn: feed.asn,
                    group: "upstreams".into(),
                    receives: false,
                    sends: true,
                });
                feeds.push(Some(feed));
            }
            neighbors.push(Neighbor {
                addr: address::of(Kind::Downstream, 0),
                asn: 64_900,
                group: "downstreams".into(),
                receives: true,
                sends: false,
            });
            feeds.push(None);
            if opts.scenario == Scenario::Churn {
                let path = opts.data_dir.join("ris-updates-20160811.mrt.gz");
                let mut t =
                    table::trace(&path, table::REAL_PEERS[0], Ipv4Addr::new(198, 51, 100, 1))
                        .ok_or(BenchError::NoTrace(path))?;
                if opts.quick {
                    // The first minute of the trace.
                    let keep = t
                        .messages
                        .iter()
                        .take_while(|(at, _)| *at < 60_000_000)
                        .count();
                    t.messages.truncate(keep);
                    t.prefixes.truncate(keep);
                }
                trace = Some(t);
            }
            (Role::Transit, data)
        }
        _ if opts.overload => {
            return Err(crate::overload::OverloadError::Scenario(opts.scenario.name()).into())
        }
        Scenario::Rr | Scenario::ClearAll | Scenario::Flap => {
            let k = s.sources.unwrap_or(q(3, 10)).max(1);
            let d = s.clients.unwrap_or(q(6, 100)).max(1);
            let g = s.groups.unwrap_or(q(2, 10)).clamp(1, d);
            let n = s.prefixes.unwrap_or(q(20_000, 800_000));
            let sources: Vec<Source> = (0..k)
                .map(|i| Source {
                    asn: LOCAL_AS,
                    external: false,
                    next_hop: Ipv4Addr::new(198, 51, 100, (i + 1) as u8),
                })
                .collect();
            for (i, feed) in table::synth(&sources, n, Spread::All, opts.seed)
                .into_iter()
                .enumerate()
            {
                neighbors.push(Neighbor {
                    addr: address::of(Kind::Upstream, i),
                    asn: LOCAL_AS,
                    group: "sources".into(),
                    receives: true,
                    sends: true,
                });
                feeds.push(Some(feed));
            }
            for j in 0..d {
                neighbors.push(Neighbor {
                    addr: address::of(Kind::Downstream, j),
                    asn: LOCAL_AS,
                    group: format!("clients{}", j % g),
                    receives: true,
                    sends: false,
                });
                feeds.push(None);
            }
            (Role::Reflector, "synthesized")
        }
        Scenario::RouteServer => {
            let p = s.peers.unwrap_or(q(4, 20)).max(2);
            let n = s.prefixes.unwrap_or(q(20_000, 500_000));
            let sources: Vec<Source> = (0..p)
                .map(|i| Source {
                    asn: address::route_server_client_as(i),
                    external: true,
                    // Shared past 254 clients: a next hop need not be unique.
                    next_hop: Ipv4Addr::new(198, 51, 100, (i % 254 + 1) as u8),
                })
                .collect();
            // Fewer destinations than routes: clients share them ([`Spread::Shared`]).
            let (f, winners) = match s.destinations.filter(|d| *d < n) {
                Some(d) => {
                    table::synth_with_winners(&sources, d, Spread::Shared { routes: n }, opts.seed)
                }
                None => (
                    table::synth(&sources, n, Spread::Share, opts.seed),
                    Vec::new(),
                ),
            };
            shared = winners;
            for (i, feed) in f.into_iter().enumerate() {
                neighbors.push(Neighbor {
                    addr: address::of(Kind::RouteServerClient, i),
                    asn: feed.asn,
                    group: "rs-clients".into(),
                    receives: true,
                    sends: true,
                });
                feeds.push(Some(feed));
            }
            (Role::RouteServer, "synthesized")
        }
    };
    let overload = if opts.overload {
        let at = neighbors.len();
        for n in crate::overload::neighbors() {
            neighbors.push(n);
            feeds.push(None);
        }
        at..neighbors.len()
    } else {
        0..0
    };
    let index = Arc::new(Index::new(
        feeds
            .iter()
            .flatten()
            .flat_map(|f| f.prefixes.iter().copied())
            .chain(
                trace
                    .iter()
                    .flat_map(|t| t.prefixes.iter().flatten().map(|(k, _)| *k)),
            ),
    )?);
    let routes = feeds.iter().flatten().map(|f| f.prefixes.len()).sum();
    let winners = (!shared.is_empty()).then(|| Arc::new(Winners::new(&index, &shared)));
    let rpki = opts.rpki.then(|| crate::rpki::synth(&feeds));
    // Receivers in the rr setups (sources included) are checked only where they are not
    // sources: a source gets the reflected best paths of the others, which depend on ties.
    let expected_with = |trace: Option<&Trace>, filter: Filter| -> Vec<Option<Bits>> {
        neighbors
            .iter()
            .enumerate()
            .map(|(i, n)| {
                // The overload's never-reading downstream is never checked.
                if !n.receives || (role == Role::Reflector && n.sends) || overload.contains(&i) {
                    return None;
                }
                // Shared destinations: what the client does not win, from its winner.
                if let Some(w) = &winners {
                    return Some(w.expected_at(i as u32));
                }
                let mut b = Bits::new(index.len());
                for (j, f) in feeds.iter().enumerate() {
                    // A route server never sends a peer its own routes back.
                    if role == Role::RouteServer && j == i {
                        continue;
                    }
                    for f in f.iter() {
                        for k in &f.prefixes {
                            // With the transit filter: what it accepts of some upstream.
                            if opts.policy && !(f.accepted.contains(k) && filter.keeps(*k)) {
                                continue;
                            }
                            // With --rpki: what is not ROV-invalid from some upstream.
                            if rpki.as_ref().is_some_and(|r| {
                                r.invalid.get(j).is_some_and(|inv| inv.contains(k))
                            }) {
                                continue;
                            }
                            if let Some(x) = index.get(*k) {
                                b.set(x);
                            }
                        }
                    }
                }
                for (k, announce) in trace.iter().flat_map(|t| t.prefixes.iter().flatten()) {
                    if let Some(x) = index.get(*k) {
                        if *announce {
                            b.set(x);
                        } else {
                            b.clear(x);
                        }
                    }
                }
                Some(b)
            })
            .collect()
    };
    // Receivers in the rr setups are checked only where they are not sources: a source gets
    // the reflected best paths of the others, which depend on tie-breaks.
    let expected = expected_with(None, Filter::FIRST);
    let after_trace = match &trace {
        Some(t) => expected_with(Some(t), Filter::FIRST),
        None => Vec::new(),
    };
    let after_change = if opts.policy_change {
        expected_with(None, Filter::CHANGED)
    } else {
        Vec::new()
    };
    let hold = if opts.scenario == Scenario::Churn {
        9
    } else {
        240
    };
    Ok(Plan {
        topo: Topology {
            role,
            port: opts.port,
            hold,
            neighbors,
            policy: opts.policy.then_some(Filter::FIRST),
            import_table: opts.policy_change,
            fib: opts.fib,
            rpki: None,
            bmp: None,
        },
        rpki,
        feeds: if opts.graceful_restart {
            feeds
        } else {
            feeds
                .into_iter()
                .map(|f| f.map(Feed::without_end_of_rib))
                .collect()
        },
        graceful_restart: opts.graceful_restart,
        winners,
        expected,
        after_trace,
        after_change,
        index,
        routes,
        data,
        trace,
        overload,
    })
}
