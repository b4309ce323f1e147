//! The API's answers about forwarding: the FIB writer's figures (`show fib summary`), our
//! routes as the kernel holds them (`show route forwarding-table`), and the kernel's table
//! against the Loc-RIB (`fib verify`).

use super::Api;
use ribshard_engine::pipeline::RouteQuery;
use ribshard_fib::verify::{self, Difference, Forwarding, KernelFibRoute};
use ribshard_fib::{FibStats, KernelView, Want};
use ribshard_mgmt::api::{
    FibDifference, FibNetlink, FibRoutes, FibSummary, FibVerify, ForwardingHop, ForwardingRoute,
    ResolutionSummary,
};
use ribshard_mgmt::ApiError;
use ribshard_rib::PathState;
use ribshard_wire::{Family, Prefix};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

impl Api {
    pub(super) fn fib(&self) -> FibSummary {
        let f = self.daemon.forwarding();
        let view = f.published.load();
        let c = &view.config;
        let resolution = ResolutionSummary {
            enabled: f.resolving(),
            tables: c.tables.clone(),
            resolve_via_default: c.via_default,
            kernel_routes: view.routes() as u64,
            snapshots: view.version,
        };
        let Some(fib) = f.fib.as_ref() else {
            return FibSummary {
                resolution,
                ..FibSummary::default()
            };
        };
        let s = fib.stats();
        let g = FibStats::get;
        let cfg = fib.config();
        let last = g(&s.last_flush_ms);
        FibSummary {
            enabled: true,
            table: cfg.table,
            protocol: cfg.protocol,
            metric: cfg.metric,
            nexthop_objects: s.objects.load(std::sync::atomic::Ordering::Relaxed),
            holding: s.holding.load(std::sync::atomic::Ordering::Relaxed),
            routes: FibRoutes {
                wanted: g(&s.wanted),
                installed: g(&s.installed),
                pending: g(&s.pending),
                failed: g(&s.failed),
                unresolved: g(&s.unresolved),
                conflicts: g(&s.conflicts),
            },
            leaves: g(&s.leaves),
            groups: g(&s.groups),
            netlink: FibNetlink {
                messages: g(&s.messages),
                batches: g(&s.batches),
                errors: g(&s.errors),
                route_writes: g(&s.route_writes),
                route_deletes: g(&s.route_deletes),
                object_writes: g(&s.object_writes),
                object_deletes: g(&s.object_deletes),
            },
            drift_repaired: g(&s.drift_repaired),
            kept_at_start: g(&s.kept_at_start),
            last_flush_at: (last > 0).then(|| last as f64 / 1000.0),
            resolution,
        }
    }

    /// The table and protocol our routes are written with; an error without `[fib]`.
    fn fib_key(&self) -> Result<(u32, u8, Arc<KernelView>), ApiError> {
        let f = self.daemon.forwarding();
        let fib = f.fib.as_ref().ok_or_else(|| {
            ApiError::NotFound(
                "no [fib] in the configuration: nothing is written to the kernel".into(),
            )
        })?;
        Ok((
            fib.config().table,
            fib.config().protocol,
            f.published.load(),
        ))
    }

    pub(super) async fn forwarding(
        &self,
        destination: Option<String>,
    ) -> Result<Vec<ForwardingRoute>, ApiError> {
        let (table, protocol, view) = self.fib_key()?;
        let wanted = match destination.as_deref() {
            None => None,
            Some(d) => Some(parse_destination(d)?),
        };
        let mut routes = read_kernel(table, protocol).await?;
        if let Some(d) = wanted {
            routes = match d {
                Destination::Prefix(p) => routes.into_iter().filter(|r| r.prefix == p).collect(),
                Destination::Address(a) => longest(routes, a).into_iter().collect(),
            };
        }
        Ok(routes.iter().map(|r| shown(r, &view)).collect())
    }

    pub(super) async fn verify(&self) -> Result<FibVerify, ApiError> {
        let (table, protocol, view) = self.fib_key()?;
        let no_install = {
            let f = self.daemon.forwarding();
            f.fib.as_ref().map(|x| x.no_install()).unwrap_or_default()
        };
        // What the Loc-RIB asks for, prefix by prefix, from the shards' walk.
        let mut wanted: BTreeMap<Prefix, Want> = BTreeMap::new();
        for family in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
            let mut walk = self
                .daemon
                .pipeline
                .walk_routes(RouteQuery::whole_table(family), None);
            while let Some(batch) = walk.next().await {
                for r in batch {
                    let best = r
                        .view
                        .paths
                        .iter()
                        .find(|p| matches!(p.state, PathState::Active { .. }));
                    let multipath: Vec<ribshard_rib::Path> = r
                        .view
                        .paths
                        .iter()
                        .filter(|p| p.multipath)
                        .map(|p| p.path.clone())
                        .collect();
                    if let Some(w) =
                        ribshard_fib::tap::want_of(&no_install, best.map(|p| &p.path), &multipath)
                    {
                        wanted.insert(r.view.prefix, w);
                    }
                }
            }
        }
        let kernel = read_kernel(table, protocol).await?;
        let differences = verify::compare(&view, &wanted, &kernel)
            .into_iter()
            .map(|d| difference(d, &view))
            .collect();
        Ok(FibVerify {
            kernel_routes: kernel.len() as u64,
            loc_rib_routes: wanted.len() as u64,
            differences,
        })
    }
}

enum Destination {
    Prefix(Prefix),
    Address(IpAddr),
}

fn parse_destination(d: &str) -> Result<Destination, ApiError> {
    let bad = || ApiError::BadRequest(format!("{d}: a prefix (10.0.0.0/8) or an address"));
    match d.split_once('/') {
        Some((a, l)) => {
            let len: u8 = l.parse().map_err(|_| bad())?;
            let p = match a.parse::<IpAddr>().map_err(|_| bad())? {
                IpAddr::V4(a) => Prefix::v4(a, len),
                IpAddr::V6(a) => Prefix::v6(a, len),
            };
            Ok(Destination::Prefix(p.ok_or_else(bad)?.masked()))
        }
        None => Ok(Destination::Address(d.parse().map_err(|_| bad())?)),
    }
}

/// The most specific of our routes covering `a`.
fn longest(routes: Vec<KernelFibRoute>, a: IpAddr) -> Option<KernelFibRoute> {
    // `a` cut to a route's length is that route's prefix (of the same family).
    let covers = |p: &Prefix| -> bool {
        let cut = match a {
            IpAddr::V4(v) => Prefix::v4(v, p.len()),
            IpAddr::V6(v) => Prefix::v6(v, p.len()),
        };
        cut.map(|c| c.masked()) == Some(*p)
    };
    routes
        .into_iter()
        .filter(|r| covers(&r.prefix))
        .max_by_key(|r| r.prefix.len())
}

async fn read_kernel(table: u32, protocol: u8) -> Result<Vec<KernelFibRoute>, ApiError> {
    // A dump of a full table takes a second: off the API's runtime.
    tokio::task::spawn_blocking(move || verify::kernel_routes(table, protocol))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| ApiError::Internal(format!("reading the kernel's table: {e}")))
}

fn hop_text(h: &ribshard_fib::netlink::route::Hop, view: &KernelView) -> ForwardingHop {
    ForwardingHop {
        gateway: h.gateway.map(|g| g.to_string()),
        interface: view
            .link_name(h.ifindex)
            .map_or_else(|| format!("if{}", h.ifindex), str::to_string),
    }
}

fn shown(r: &KernelFibRoute, view: &KernelView) -> ForwardingRoute {
    let (kind, next_hops) = match &r.forwarding {
        Forwarding::Hops(h) => ("unicast", h.iter().map(|h| hop_text(h, view)).collect()),
        Forwarding::Reject => ("reject", Vec::new()),
        Forwarding::Discard => ("discard", Vec::new()),
        Forwarding::Nothing => ("none", Vec::new()),
    };
    ForwardingRoute {
        destination: r.prefix.to_string(),
        kind: kind.into(),
        next_hops,
        object: r.object,
        metric: r.metric,
    }
}

fn forwarding_text(f: &Forwarding, view: &KernelView) -> String {
    match f {
        Forwarding::Hops(h) => h
            .iter()
            .map(|h| {
                let x = hop_text(h, view);
                match x.gateway {
                    Some(g) => format!("via {g} dev {}", x.interface),
                    None => format!("dev {}", x.interface),
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        Forwarding::Reject => "reject".into(),
        Forwarding::Discard => "discard".into(),
        Forwarding::Nothing => "nothing".into(),
    }
}

fn difference(d: Difference, view: &KernelView) -> FibDifference {
    match d {
        Difference::Missing { prefix, want } => FibDifference {
            prefix: prefix.to_string(),
            kind: "missing".into(),
            want: Some(forwarding_text(&want, view)),
            kernel: None,
        },
        Difference::Extra { prefix, kernel } => FibDifference {
            prefix: prefix.to_string(),
            kind: "extra".into(),
            want: None,
            kernel: Some(forwarding_text(&kernel, view)),
        },
        Difference::Different {
            prefix,
            want,
            kernel,
        } => FibDifference {
            prefix: prefix.to_string(),
            kind: "different".into(),
            want: Some(forwarding_text(&want, view)),
            kernel: Some(forwarding_text(&kernel, view)),
        },
    }
}
