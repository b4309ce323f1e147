//! The BGP decision process (RFC 4271 section 9.1.2.2, with the steps operators expect).
//!
//! Steps, in order: not long-lived stale (RFC 9494 section 4.5: a path carrying LLGR_STALE is
//! the least preferred); highest LOCAL_PREF; shortest AS_PATH (an AS_SET counts one,
//! confederation segments zero); lowest ORIGIN; lowest MED among paths from the same
//! neighbor AS (all paths with `always_compare_med`); eBGP over iBGP; lowest IGP cost to the
//! next hop; lowest router id (ORIGINATOR_ID when reflected, RFC 4456 section 9) — for
//! external paths only with `external_router_id`, else the older path stays; shortest
//! CLUSTER_LIST; lowest peer address.
//!
//! With `multipath`, the paths equal to the best one up to the tie-breakers (and from its
//! neighbor AS, unless `multiple-as`) form its equal-cost set ([`multipath_equal`]); the
//! best path alone is advertised.
//!
//! MED compared only within a neighbor AS cannot be a pairwise total order: with paths
//! x (AS1, MED 5, id 3), y (AS2, id 2), z (AS1, MED 10, id 1) the steps give x < z, z < y and
//! y < x. So selection is done as Junos and "deterministic MED" do: paths are grouped by
//! neighbor AS, each group's best is found with MED, and the group winners are compared
//! without MED. Both orders used are strict total orders ([`compare`] with and without the
//! MED step), and the result does not depend on the order in which paths arrived.

use std::cmp::Ordering;

/// What the decision process reads of a path: a few words, computed once when an
/// attribute set is interned and a path is received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// Carries LLGR_STALE: loses to any path that does not.
    pub llgr_stale: bool,
    /// LOCAL_PREF, after import policy (100 when absent).
    pub local_pref: u32,
    pub as_path_len: u32,
    /// ORIGIN as 0 (IGP), 1 (EGP), 2 (INCOMPLETE).
    pub origin: u8,
    /// MULTI_EXIT_DISC; absent counts as 0, the best (RFC 4271 section 9.1.2.2 c).
    pub med: u32,
    /// First AS of the AS_PATH; our own AS for a path with an empty one.
    pub neighbor_as: u32,
    pub ebgp: bool,
    /// IGP cost to the next hop, 0 when unknown.
    pub igp_cost: u32,
    /// ORIGINATOR_ID if present, else the BGP Identifier of the peer.
    pub router_id: u32,
    pub cluster_list_len: u32,
    /// The peer's address, IPv4 ones mapped into IPv6 so all compare.
    pub peer_address: u128,
    /// When the path arrived, in a sequence the shard keeps: lower is older.
    pub arrival: u32,
}

/// Decision options (Junos `path-selection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Compare MED between paths from different neighbor ASes.
    pub always_compare_med: bool,
    /// Compare router ids of external paths instead of keeping the older one. On by
    /// default (unlike Junos): arrival order differs with thread settings, and results must
    /// not.
    pub external_router_id: bool,
    /// Load sharing (Junos `multipath`): keep the equal-cost set beside the best path.
    pub multipath: Option<Multipath>,
    /// Add-Path send (RFC 7911): the paths per prefix kept ready for the update groups that
    /// send several (`crate::shard::AddPathKeep`); none when no group does.
    pub add_path: Option<crate::shard::AddPathKeep>,
}

/// Junos `multipath`: which paths share load with the best one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Multipath {
    /// Junos `multiple-as`: paths from different neighbor ASes may share load (by default
    /// they must come from the best path's neighbor AS).
    pub multiple_as: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            always_compare_med: false,
            external_router_id: true,
            multipath: None,
            add_path: None,
        }
    }
}

/// Compares two paths; `Less` means `a` is preferred. `with_med` includes the MED step
/// (callers pass it only for paths of one neighbor AS, or with `always_compare_med`).
/// A strict total order for a fixed `with_med`: every step is a key comparison, and the
/// last ones (peer address, then arrival) tell any two distinct paths apart.
pub fn compare(a: &Candidate, b: &Candidate, with_med: bool, o: &Options) -> Ordering {
    a.llgr_stale
        .cmp(&b.llgr_stale)
        .then(b.local_pref.cmp(&a.local_pref))
        .then(a.as_path_len.cmp(&b.as_path_len))
        .then(a.origin.cmp(&b.origin))
        .then(if with_med {
            a.med.cmp(&b.med)
        } else {
            Ordering::Equal
        })
        .then(b.ebgp.cmp(&a.ebgp))
        .then(a.igp_cost.cmp(&b.igp_cost))
        .then_with(|| {
            if a.ebgp && b.ebgp && !o.external_router_id {
                // Junos default: the older external path stays (RFC 4271 allows it).
                a.arrival.cmp(&b.arrival)
            } else {
                a.router_id.cmp(&b.router_id)
            }
        })
        .then(a.cluster_list_len.cmp(&b.cluster_list_len))
        .then(a.peer_address.cmp(&b.peer_address))
        .then(a.arrival.cmp(&b.arrival))
}

/// The index of the best of `paths`, or `None` if there are none.
pub fn best_path(paths: &[Candidate], o: &Options) -> Option<usize> {
    if o.always_compare_med {
        return (0..paths.len()).min_by(|&i, &j| cmp_at(paths, i, j, true, o));
    }
    // Deterministic MED: the best of each neighbor AS, then the best of those without MED.
    // Paths per prefix are few (one per peer), so the quadratic grouping is the cheap way.
    let mut winners: Vec<usize> = Vec::new();
    for i in 0..paths.len() {
        let asn = paths.get(i)?.neighbor_as;
        match winners
            .iter_mut()
            .find(|w| paths.get(**w).is_some_and(|p| p.neighbor_as == asn))
        {
            Some(w) => {
                if cmp_at(paths, i, *w, true, o) == Ordering::Less {
                    *w = i;
                }
            }
            None => winners.push(i),
        }
    }
    winners
        .into_iter()
        .min_by(|&i, &j| cmp_at(paths, i, j, false, o))
}

/// Whether `p` shares load with the best path `best` (Junos `multipath`): equal to it at
/// every step before the tie-breakers (LOCAL_PREF, AS_PATH length, ORIGIN, MED where MED is
/// compared, eBGP or iBGP, IGP cost), and from the same neighbor AS unless `multiple-as`.
pub fn multipath_equal(best: &Candidate, p: &Candidate, m: Multipath, o: &Options) -> bool {
    let same_as = p.neighbor_as == best.neighbor_as;
    (same_as || m.multiple_as)
        && p.llgr_stale == best.llgr_stale
        && p.local_pref == best.local_pref
        && p.as_path_len == best.as_path_len
        && p.origin == best.origin
        && (!(same_as || o.always_compare_med) || p.med == best.med)
        && p.ebgp == best.ebgp
        && p.igp_cost == best.igp_cost
}

fn cmp_at(paths: &[Candidate], i: usize, j: usize, with_med: bool, o: &Options) -> Ordering {
    match (paths.get(i), paths.get(j)) {
        (Some(a), Some(b)) => compare(a, b, with_med, o),
        _ => Ordering::Equal,
    }
}

/// A step of the decision process, as an operator reads why one path beat another (the
/// Junos "inactive reason").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Long-lived stale (LLGR_STALE) against not.
    LongLivedStale,
    LocalPref,
    AsPathLength,
    Origin,
    Med,
    /// eBGP over iBGP.
    External,
    IgpCost,
    /// The older of two external paths stays (without `external-router-id`).
    OlderPath,
    RouterId,
    ClusterListLength,
    PeerAddress,
    /// Two paths of one peer (Add-Path) that tie everywhere else: the older one.
    Arrival,
}

impl Step {
    /// A stable name for machines (the management API).
    pub fn id(self) -> &'static str {
        match self {
            Step::LongLivedStale => "long-lived-stale",
            Step::LocalPref => "local-preference",
            Step::AsPathLength => "as-path-length",
            Step::Origin => "origin",
            Step::Med => "med",
            Step::External => "external-over-internal",
            Step::IgpCost => "igp-cost",
            Step::OlderPath => "older-path",
            Step::RouterId => "router-id",
            Step::ClusterListLength => "cluster-list-length",
            Step::PeerAddress => "peer-address",
            Step::Arrival => "arrival",
        }
    }

    /// The words Junos uses for it.
    pub fn describe(self) -> &'static str {
        match self {
            Step::LongLivedStale => "Long-lived stale",
            Step::LocalPref => "Local Preference",
            Step::AsPathLength => "AS path",
            Step::Origin => "Origin",
            Step::Med => "Route Metric or MED comparison",
            Step::External => "Interior > Exterior",
            Step::IgpCost => "IGP metric",
            Step::OlderPath => "Active preferred",
            Step::RouterId => "Router ID",
            Step::ClusterListLength => "Cluster list length",
            Step::PeerAddress => "Update source",
            Step::Arrival => "Older path",
        }
    }
}

/// The step at which [`compare`] tells `a` and `b` apart (`None` if it does not: the same
/// path). Mirrors [`compare`] step for step; a property test holds them together.
pub fn deciding_step(a: &Candidate, b: &Candidate, with_med: bool, o: &Options) -> Option<Step> {
    let older_path = a.ebgp && b.ebgp && !o.external_router_id;
    let steps = [
        (a.llgr_stale != b.llgr_stale, Step::LongLivedStale),
        (a.local_pref != b.local_pref, Step::LocalPref),
        (a.as_path_len != b.as_path_len, Step::AsPathLength),
        (a.origin != b.origin, Step::Origin),
        (with_med && a.med != b.med, Step::Med),
        (a.ebgp != b.ebgp, Step::External),
        (a.igp_cost != b.igp_cost, Step::IgpCost),
        (older_path && a.arrival != b.arrival, Step::OlderPath),
        (!older_path && a.router_id != b.router_id, Step::RouterId),
        (
            a.cluster_list_len != b.cluster_list_len,
            Step::ClusterListLength,
        ),
        (a.peer_address != b.peer_address, Step::PeerAddress),
        (a.arrival != b.arrival, Step::Arrival),
    ];
    steps
        .into_iter()
        .find(|(differs, _)| *differs)
        .map(|(_, s)| s)
}
