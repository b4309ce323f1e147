//! What we offer in OPEN, and what a session gets from both OPENs (RFC 5492 capabilities,
//! RFC 4271 section 6.2 checks, RFC 9234 roles).

use ribshard_policy::Chain;
use ribshard_wire::notification::{code, open as sub, Notification};
use ribshard_wire::open::{
    cap, role, AddPathFamily, Capability, GracefulRestartFamily, LongLivedFamily,
};
use ribshard_wire::{Family, Open, SessionParams};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Everything a session needs to know about its neighbor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerSettings {
    pub address: IpAddr,
    pub port: u16,
    pub local_address: Option<IpAddr>,
    pub local_as: u32,
    pub peer_as: u32,
    pub router_id: Ipv4Addr,
    pub internal: bool,
    pub hold_time: u16,
    pub connect_retry_time: u16,
    pub send_hold_time: u32,
    pub passive: bool,
    /// Junos `disable` (`deactivate`): the session is not started, and any connection from
    /// the neighbor is refused.
    pub disabled: bool,
    pub authentication_key: Option<String>,
    /// TCP-AO (RFC 5925) instead of MD5: never both on one connection.
    pub tcp_ao: Option<crate::socket::TcpAoKey>,
    pub ttl_security: Option<u8>,
    pub multihop: bool,
    pub families: Vec<Family>,
    /// Per family ([`Family::index`]): maximum prefixes, teardown, idle timeout (seconds).
    pub prefix_limits: [Option<(u32, bool, Option<u32>)>; 2],
    /// RFC 9234 role we take towards the neighbor.
    pub role: Option<u8>,
    /// Add-Path (RFC 7911): receive multiple paths per prefix.
    pub add_path_receive: bool,
    /// Add-Path: send multiple paths per prefix.
    pub add_path_send: bool,
    /// Which paths per prefix it is sent where Add-Path send is negotiated (none: the best
    /// path alone).
    pub add_path_select: Option<ribshard_rib::AddPathSelect>,
    /// Graceful restart as the restarting speaker (`[bgp.graceful-restart]`); `None`: helper
    /// only (the capability without families: neighbors drop our routes when we go).
    pub graceful_restart: Option<LocalRestart>,
    /// RFC 9494: the longest the neighbor's routes are kept long-lived stale, whatever it
    /// asks (`None`: what it asks).
    pub max_long_lived_stale_time: Option<u32>,
    /// A name for logs.
    pub description: String,
    /// How the pipeline treats the neighbor's routes and what it advertises to it.
    pub routing: Routing,
}

impl PeerSettings {
    /// The neighbor as every log line and message names it: `ADDRESS (ASn)`.
    pub fn name(&self) -> String {
        format!("{} (AS{})", self.address, self.peer_as)
    }
}

/// The routing side of a neighbor's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routing {
    /// The configured group (update groups never span configured groups).
    pub group: String,
    /// Import policy.
    pub import: Arc<Chain>,
    /// Export policy.
    pub export: Arc<Chain>,
    /// Route reflection: the neighbor is our client in this cluster (RFC 4456).
    pub cluster: Option<Ipv4Addr>,
    /// Every cluster id we use, for CLUSTER_LIST loop detection.
    pub cluster_ids: Vec<u32>,
    pub route_server_client: bool,
    /// Advertise ourselves as next hop; `None`: to external peers only.
    pub next_hop_self: Option<bool>,
    /// Our AS may appear this many times minus one in a received AS_PATH (Junos `loops`).
    pub loops: u8,
    /// Our global AS when the session's `local_as` is a Junos `local-as` other than it (0:
    /// none). Towards an external neighbor, routes sent then carry the local AS and the
    /// global one, and routes received get the local AS in front.
    pub global_as: u32,
    /// Junos `local-as ... private`: received routes do not get the local AS in front.
    pub local_as_private: bool,
    /// Junos `local-as ... no-prepend-global-as`: routes sent carry the local AS only.
    pub no_prepend_global_as: bool,
    /// Junos `no-install`: the neighbor's routes are never written to the kernel's table
    /// (a route reflector's or route server's clients).
    pub no_install: bool,
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            group: String::new(),
            import: Arc::new(Chain::accept_all()),
            export: Arc::new(Chain::reject_all()),
            cluster: None,
            cluster_ids: Vec::new(),
            route_server_client: false,
            next_hop_self: None,
            loops: 1,
            global_as: 0,
            local_as_private: false,
            no_prepend_global_as: false,
            no_install: false,
        }
    }
}

/// The session as both OPENs made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    pub peer_as: u32,
    pub peer_id: Ipv4Addr,
    /// The smaller of the two hold times (RFC 4271 section 4.2).
    pub hold_time: u16,
    pub four_octet_as: bool,
    pub families: Vec<Family>,
    pub route_refresh: bool,
    pub enhanced_route_refresh: bool,
    pub extended_message: bool,
    /// Per family: we receive path identifiers / we may send them.
    pub add_path_receive: [bool; 2],
    pub add_path_send: [bool; 2],
    /// The neighbor is a graceful restart speaker (RFC 4724); we help it.
    pub graceful_restart: Option<GracefulRestart>,
    /// The neighbor keeps our routes while we restart: our OPEN named families in the
    /// graceful restart capability and its OPEN has the capability (RFC 4724 section 4.2).
    pub restart_helped: bool,
    /// The neighbor sent the long-lived graceful restart capability (RFC 9494): it may be
    /// sent paths carrying LLGR_STALE.
    pub long_lived: bool,
    pub peer_role: Option<u8>,
    /// How to decode the neighbor's messages.
    pub params: SessionParams,
}

/// What a restarting neighbor asked of us as its helper (RFC 4724 section 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GracefulRestart {
    /// Seconds to keep its routes after the session drops.
    pub restart_time: u16,
    /// Families whose routes are kept (those in its capability that we negotiated).
    pub families: Vec<Family>,
    /// RFC 8538: the N bit; a NOTIFICATION (other than Hard Reset) also keeps routes.
    pub notification: bool,
    /// RFC 9494: families whose routes stay, long-lived stale, this many seconds once the
    /// restart time is over (negotiated families with a stale time above 0).
    pub long_lived: Vec<(Family, u32)>,
    /// Families whose Forwarding State bit is set (in either capability): after a restart,
    /// stale routes of the others go at once (RFC 4724 section 4.2, RFC 9494 section 4.2).
    pub forwarding: Vec<Family>,
}

impl GracefulRestart {
    /// Whether any route of the neighbor is kept when its session drops.
    pub fn keeps_routes(&self) -> bool {
        (self.restart_time > 0 && !self.families.is_empty()) || !self.long_lived.is_empty()
    }
}

/// Graceful restart as the restarting speaker (RFC 4724 section 3): what our OPEN offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalRestart {
    /// Seconds a neighbor keeps our routes after our session drops (at most 4095).
    pub restart_time: u16,
    /// RFC 9494: seconds a neighbor keeps them after that, long-lived stale (0: none).
    pub long_lived_stale_time: u32,
}

/// How this process started: after a graceful stop (a restart its neighbors were helping
/// with) or cold. One fact for the whole process, set once at start.
#[derive(Clone, Copy, Debug)]
struct ProcessStart {
    at: Instant,
    graceful: bool,
}

static PROCESS_START: OnceLock<ProcessStart> = OnceLock::new();

/// Records how this process started (the daemon calls it once, before any session).
pub fn process_started(graceful: bool) {
    let _ = PROCESS_START.set(ProcessStart {
        at: Instant::now(),
        graceful,
    });
}

/// The Restart State bit and the Forwarding State bit of our capability now (RFC 4724
/// section 3). Restart State: we restarted gracefully within the restart time, so the
/// neighbor must not wait for our End-of-RIB. Forwarding State: our routes still forward
/// (the kernel's kept them across the restart); false only within the restart time after a
/// cold start, when the neighbor must not keep routes it holds from an earlier run of ours.
pub fn restart_bits(restart_time: u16) -> (bool, bool) {
    let Some(p) = PROCESS_START.get() else {
        return (false, false);
    };
    let recent = p.at.elapsed() < Duration::from_secs(u64::from(restart_time));
    (p.graceful && recent, p.graceful || !recent)
}

/// Our OPEN for this neighbor.
pub fn build_open(s: &PeerSettings) -> Open {
    let mut caps: Vec<Capability> = s
        .families
        .iter()
        .map(|f| Capability::Multiprotocol {
            afi: f.afi(),
            safi: f.safi(),
        })
        .collect();
    caps.push(Capability::RouteRefresh);
    caps.push(Capability::EnhancedRouteRefresh);
    caps.push(Capability::FourOctetAs(s.local_as));
    caps.push(Capability::ExtendedMessage);
    caps.push(match s.graceful_restart {
        // RFC 4724 section 3: every family of the session is one the neighbor keeps our
        // routes of while we restart.
        Some(g) => {
            let (restarted, forwarding) = restart_bits(g.restart_time);
            Capability::GracefulRestart {
                flags: if restarted { 0x8 } else { 0 },
                restart_time: g.restart_time.min(0x0fff),
                families: s
                    .families
                    .iter()
                    .map(|f| GracefulRestartFamily {
                        afi: f.afi(),
                        safi: f.safi(),
                        flags: if forwarding { 0x80 } else { 0 },
                    })
                    .collect(),
            }
        }
        // A helper only: no families of our own preserved.
        None => Capability::GracefulRestart {
            flags: 0,
            restart_time: 120,
            families: Vec::<GracefulRestartFamily>::new(),
        },
    });
    // RFC 9494 section 3: long-lived graceful restart; without families we only help (we
    // keep a neighbor's routes long-lived stale, and may be sent LLGR_STALE paths).
    let long_lived = s
        .graceful_restart
        .filter(|g| g.long_lived_stale_time > 0)
        .map(|g| {
            let (_, forwarding) = restart_bits(g.restart_time);
            s.families
                .iter()
                .map(|f| LongLivedFamily {
                    afi: f.afi(),
                    safi: f.safi(),
                    flags: if forwarding { 0x80 } else { 0 },
                    stale_time: g.long_lived_stale_time.min(0x00ff_ffff),
                })
                .collect()
        })
        .unwrap_or_default();
    caps.push(Capability::LongLivedGracefulRestart(long_lived));
    let send_receive = u8::from(s.add_path_receive) | (u8::from(s.add_path_send) << 1);
    if send_receive != 0 {
        caps.push(Capability::AddPath(
            s.families
                .iter()
                .map(|f| AddPathFamily {
                    afi: f.afi(),
                    safi: f.safi(),
                    send_receive,
                })
                .collect(),
        ));
    }
    if let Some(r) = s.role {
        caps.push(Capability::Role(r));
    }
    Open::new(s.local_as, s.hold_time, s.router_id, caps)
}

fn open_error(subcode: u8, data: Vec<u8>) -> Notification {
    Notification::new(code::OPEN_MESSAGE, subcode, data)
}

/// The role pairs RFC 9234 section 4.2 allows.
fn roles_match(ours: u8, theirs: u8) -> bool {
    matches!(
        (ours, theirs),
        (role::PROVIDER, role::CUSTOMER)
            | (role::CUSTOMER, role::PROVIDER)
            | (role::RS, role::RS_CLIENT)
            | (role::RS_CLIENT, role::RS)
            | (role::PEER, role::PEER)
    )
}

/// Checks the neighbor's OPEN against the configuration and negotiates the session.
/// An error is the NOTIFICATION to send (RFC 4271 section 6.2).
pub fn negotiate(ours: &Open, theirs: &Open, s: &PeerSettings) -> Result<Negotiated, Notification> {
    let peer_as = theirs.asn();
    if peer_as != s.peer_as {
        // Data: the AS in the OPEN, as Junos and FRR send it.
        return Err(open_error(
            sub::BAD_PEER_AS,
            theirs.my_as.to_be_bytes().to_vec(),
        ));
    }
    // RFC 6286 section 2.2: identifiers must differ within an AS.
    if s.internal && theirs.bgp_identifier == s.router_id {
        return Err(open_error(
            sub::BAD_BGP_IDENTIFIER,
            theirs.bgp_identifier.octets().to_vec(),
        ));
    }
    let peer_role = theirs.capabilities().find_map(|c| match c {
        Capability::Role(r) => Some(*r),
        _ => None,
    });
    // RFC 9234 section 4.2: the capability repeated with different values is a Role
    // Mismatch, whatever our own role.
    let conflicting = theirs.capabilities().any(|c| match (c, peer_role) {
        (Capability::Role(r), Some(first)) => *r != first,
        _ => false,
    });
    if conflicting {
        return Err(open_error(sub::ROLE_MISMATCH, vec![]));
    }
    if let (Some(o), Some(t)) = (s.role, peer_role) {
        if !roles_match(o, t) {
            return Err(open_error(sub::ROLE_MISMATCH, vec![]));
        }
    }
    let four_octet_as = theirs.has(cap::FOUR_OCTET_AS) && ours.has(cap::FOUR_OCTET_AS);
    // No multiprotocol capability at all means IPv4 unicast only (RFC 4760 section 1).
    let theirs_mp: Vec<Family> = theirs
        .capabilities()
        .filter_map(|c| match c {
            Capability::Multiprotocol { afi, safi } => Family::from_afi_safi(*afi, *safi),
            _ => None,
        })
        .collect();
    let theirs_mp = if theirs.has(cap::MULTIPROTOCOL) {
        theirs_mp
    } else {
        vec![Family::Ipv4Unicast]
    };
    let families: Vec<Family> = s
        .families
        .iter()
        .copied()
        .filter(|f| theirs_mp.contains(f))
        .collect();
    let add_path = |f: Family, open: &Open| -> u8 {
        open.capabilities()
            .find_map(|c| match c {
                Capability::AddPath(v) => v
                    .iter()
                    .find(|a| a.afi == f.afi() && a.safi == f.safi())
                    .map(|a| a.send_receive),
                _ => None,
            })
            .unwrap_or(0)
    };
    let mut add_path_receive = [false; 2];
    let mut add_path_send = [false; 2];
    for f in &families {
        let (o, t) = (add_path(*f, ours), add_path(*f, theirs));
        if let Some(x) = add_path_receive.get_mut(f.index()) {
            *x = o & 1 != 0 && t & 2 != 0;
        }
        if let Some(x) = add_path_send.get_mut(f.index()) {
            *x = o & 2 != 0 && t & 1 != 0;
        }
    }
    let extended_message = theirs.has(cap::EXTENDED_MESSAGE) && ours.has(cap::EXTENDED_MESSAGE);
    let long_lived_cap = theirs.capabilities().find_map(|c| match c {
        Capability::LongLivedGracefulRestart(v) => Some(v),
        _ => None,
    });
    let forwarding_ll: Vec<Family> = long_lived_cap
        .into_iter()
        .flatten()
        .filter(|f| f.flags & 0x80 != 0)
        .filter_map(|f| Family::from_afi_safi(f.afi, f.safi))
        .collect();
    let forwarding = |gr: &[GracefulRestartFamily]| -> Vec<Family> {
        gr.iter()
            .filter(|f| f.flags & 0x80 != 0)
            .filter_map(|f| Family::from_afi_safi(f.afi, f.safi))
            .chain(forwarding_ll.iter().copied())
            .filter(|f| families.contains(f))
            .collect()
    };
    let long_lived: Vec<(Family, u32)> = long_lived_cap
        .map(|v| {
            v.iter()
                .filter(|f| f.stale_time > 0)
                .filter_map(|f| {
                    let secs = f
                        .stale_time
                        .min(s.max_long_lived_stale_time.unwrap_or(u32::MAX));
                    Some((Family::from_afi_safi(f.afi, f.safi)?, secs))
                })
                .filter(|(_, secs)| *secs > 0)
                .filter(|(f, _)| families.contains(f))
                .collect()
        })
        .unwrap_or_default();
    let graceful_restart = theirs
        .capabilities()
        .find_map(|c| match c {
            Capability::GracefulRestart {
                flags,
                restart_time,
                families: fams,
            } => Some(GracefulRestart {
                restart_time: *restart_time,
                families: fams
                    .iter()
                    .filter_map(|f| Family::from_afi_safi(f.afi, f.safi))
                    .filter(|f| families.contains(f))
                    .collect(),
                notification: flags & 0x4 != 0,
                long_lived: long_lived.clone(),
                forwarding: forwarding(fams),
            }),
            _ => None,
        })
        // RFC 9494 section 3 wants both capabilities; LLGR alone still asks us to keep
        // its routes, from the moment the session drops.
        .or_else(|| {
            (!long_lived.is_empty()).then(|| GracefulRestart {
                restart_time: 0,
                families: Vec::new(),
                notification: false,
                long_lived: long_lived.clone(),
                forwarding: forwarding(&[]),
            })
        });
    let offered = ours
        .capabilities()
        .any(|c| matches!(c, Capability::GracefulRestart { families, .. } if !families.is_empty()));
    let restart_helped = offered && theirs.has(cap::GRACEFUL_RESTART);
    Ok(Negotiated {
        peer_as,
        peer_id: theirs.bgp_identifier,
        hold_time: ours.hold_time.min(theirs.hold_time),
        four_octet_as,
        families,
        route_refresh: theirs.has(cap::ROUTE_REFRESH) || theirs.has(128),
        enhanced_route_refresh: theirs.has(cap::ENHANCED_ROUTE_REFRESH),
        extended_message,
        add_path_receive,
        add_path_send,
        graceful_restart,
        restart_helped,
        long_lived: long_lived_cap.is_some(),
        peer_role,
        params: SessionParams {
            four_octet_as,
            extended_message,
            add_path: add_path_receive,
            external: !s.internal,
            mrt_rib: false,
            live: true,
        },
    })
}
