//! `show route`'s filters on a path's attributes (`community`, `large-community`,
//! `aspath-regex`, `next-hop`, `protocol`, `validation-state`, `active-path`), compiled once per request with
//! the policy language's matchers and judged in the shards on the attributes as interned:
//! nothing is decoded into owned values.

use ribshard_engine::pipeline::MatchPath;
use ribshard_mgmt::api::RouteRequest;
use ribshard_mgmt::ApiError;
use ribshard_policy::community::Communities;
use ribshard_policy::{AsPathRegex, Member};
use ribshard_rib::{Path, PathState, PathView};
use ribshard_rpki::Validity;
use ribshard_wire::attr;
use ribshard_wire::update::RawAttrIter;
use std::net::IpAddr;

/// Where a path came from, as `protocol` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// Learned over a BGP session.
    Bgp,
    /// Originated here (`[[bgp.originate]]`) or injected from an MRT file.
    Local,
}

#[derive(Debug)]
pub(crate) struct PathMatch {
    /// Each must match one of the path's communities (Junos: a community's members all
    /// must be present).
    communities: Vec<Member>,
    as_path: Option<AsPathRegex>,
    /// The next hop as received, 4 octets or the 16 of a global IPv6 address.
    next_hop: Option<Vec<u8>>,
    protocol: Option<Protocol>,
    /// Paths without a state (no RPKI data) are not-found.
    validity: Option<Validity>,
    active_only: bool,
    /// Peer indexes that are local sources (their settings carry port 0).
    local: Vec<bool>,
}

impl PathMatch {
    /// The filters a request asks for; `None` when it asks for none. `local`: per peer
    /// index, whether it is a local source rather than a session.
    pub(crate) fn of(q: &RouteRequest, local: Vec<bool>) -> Result<Option<PathMatch>, ApiError> {
        let bad = |e: String| ApiError::BadRequest(e);
        let mut communities = Vec::new();
        if let Some(c) = &q.community {
            for m in c.split_whitespace() {
                communities.push(Member::parse(m).map_err(|e| bad(format!("community: {e}")))?);
            }
        }
        if let Some(c) = &q.large_community {
            for m in c.split_whitespace() {
                let text = if m.starts_with("large:") {
                    m.to_string()
                } else {
                    format!("large:{m}")
                };
                communities
                    .push(Member::parse(&text).map_err(|e| bad(format!("large-community: {e}")))?);
            }
        }
        let as_path = match &q.aspath_regex {
            Some(r) => Some(AsPathRegex::new(r).map_err(|e| bad(format!("aspath-regex: {e}")))?),
            None => None,
        };
        let next_hop = match &q.next_hop {
            Some(a) => Some(match a.parse::<IpAddr>() {
                Ok(IpAddr::V4(v4)) => v4.octets().to_vec(),
                Ok(IpAddr::V6(v6)) => v6.octets().to_vec(),
                Err(_) => return Err(bad(format!("next-hop {a}: not an address"))),
            }),
            None => None,
        };
        let protocol = match q.protocol.as_deref() {
            None => None,
            Some("bgp") => Some(Protocol::Bgp),
            Some("local") => Some(Protocol::Local),
            Some(p) => {
                return Err(bad(format!(
                    "protocol {p}: ribshard's routes are bgp (learned from a neighbor) or local (originated, injected)"
                )))
            }
        };
        let validity = match q.validation_state.as_deref() {
            None => None,
            Some("valid") => Some(Validity::Valid),
            Some("invalid") => Some(Validity::Invalid),
            Some("unknown" | "not-found") => Some(Validity::NotFound),
            Some(v) => {
                return Err(bad(format!(
                    "validation-state {v}: it is valid, invalid or unknown"
                )))
            }
        };
        let m = PathMatch {
            communities,
            as_path,
            next_hop,
            protocol,
            validity,
            active_only: q.active_path,
            local,
        };
        let none = m.communities.is_empty()
            && m.as_path.is_none()
            && m.next_hop.is_none()
            && m.protocol.is_none()
            && m.validity.is_none()
            && !m.active_only;
        Ok((!none).then_some(m))
    }
}

impl MatchPath for PathMatch {
    fn matches(&self, v: &PathView) -> bool {
        if self.active_only && !matches!(v.state, PathState::Active { .. }) {
            return false;
        }
        if self
            .validity
            .is_some_and(|want| v.validity.unwrap_or(Validity::NotFound) != want)
        {
            return false;
        }
        self.matches_path(&v.path)
    }
}

impl PathMatch {
    /// The filters on where a path came from and its attributes (all but `active-path`).
    pub(crate) fn matches_path(&self, path: &Path) -> bool {
        if let Some(p) = self.protocol {
            let local = self.local.get(path.peer as usize).copied().unwrap_or(false);
            if local != (p == Protocol::Local) {
                return false;
            }
        }
        if let Some(nh) = &self.next_hop {
            // An IPv6 next hop may be followed by its link-local address.
            let have = path.attrs.next_hop();
            if have.get(..nh.len()) != Some(&nh[..]) || !(have.len() == nh.len() || nh.len() == 16)
            {
                return false;
            }
        }
        if self.communities.is_empty() && self.as_path.is_none() {
            return true;
        }
        // The interned attributes are normalized: 4-octet AS numbers in AS_PATH.
        let mut found = Communities::default();
        let mut as_path: &[u8] = &[];
        for a in RawAttrIter::new(path.attrs.raw()) {
            match a.type_code {
                attr::COMMUNITIES => found.standard = a.value,
                attr::EXTENDED_COMMUNITIES => found.extended = a.value,
                attr::LARGE_COMMUNITY => found.large = a.value,
                attr::AS_PATH => as_path = a.value,
                _ => {}
            }
        }
        if let Some(r) = &self.as_path {
            if !r.matches(as_path) {
                return false;
            }
        }
        self.communities
            .iter()
            .all(|m| found.iter().any(|c| m.matches(&c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ribshard_rib::{LoopChecks, Path, PeerInfo, RouteAttrs};
    use ribshard_wire::attributes::{AsPath, AsSegment, AttrValue, Attribute, PathAttributes};
    use ribshard_wire::update::segment;
    use std::sync::Arc;

    fn view(peer: u32, active: bool, communities: Vec<u32>, asns: Vec<u32>) -> PathView {
        let mut a = PathAttributes::default();
        a.list.push(Attribute::new(AttrValue::AsPath(AsPath {
            segments: vec![AsSegment {
                kind: segment::AS_SEQUENCE,
                asns,
            }],
        })));
        a.list
            .push(Attribute::new(AttrValue::Communities(communities)));
        let attrs = Arc::new(RouteAttrs::from_attributes(
            &a,
            &[192, 0, 2, 1],
            &LoopChecks::default(),
        ));
        PathView {
            path: Path::new(peer, 0, attrs, 0, 0),
            peer: PeerInfo::NONE,
            state: if active {
                PathState::Active { over: None }
            } else {
                PathState::Inactive {
                    step: None,
                    in_group: false,
                }
            },
            multipath: false,
            import: None,
            validity: None,
        }
    }

    fn matcher(f: impl FnOnce(&mut RouteRequest)) -> PathMatch {
        let mut q = RouteRequest::default();
        f(&mut q);
        PathMatch::of(&q, vec![false, true]).unwrap().unwrap()
    }

    #[test]
    fn filters_match_as_junos_show_route_does() {
        let p = view(
            0,
            true,
            vec![65000 << 16 | 100, 65000 << 16 | 7],
            vec![65001, 65002],
        );
        let inactive = view(0, false, vec![], vec![65003]);
        let local = view(1, true, vec![], vec![]);
        // Every member of the community must be there; wildcards match either half.
        assert!(matcher(|q| q.community = Some("65000:100".into())).matches(&p));
        assert!(matcher(|q| q.community = Some("65000:*".into())).matches(&p));
        assert!(matcher(|q| q.community = Some("65000:100 65000:7".into())).matches(&p));
        assert!(!matcher(|q| q.community = Some("65000:100 65000:8".into())).matches(&p));
        assert!(!matcher(|q| q.large_community = Some("65000:1:*".into())).matches(&p));
        assert!(matcher(|q| q.aspath_regex = Some("65001 .*".into())).matches(&p));
        assert!(!matcher(|q| q.aspath_regex = Some("65002 .*".into())).matches(&p));
        assert!(matcher(|q| q.next_hop = Some("192.0.2.1".into())).matches(&p));
        assert!(!matcher(|q| q.next_hop = Some("192.0.2.2".into())).matches(&p));
        assert!(matcher(|q| q.active_path = true).matches(&p));
        assert!(!matcher(|q| q.active_path = true).matches(&inactive));
        assert!(matcher(|q| q.protocol = Some("bgp".into())).matches(&p));
        assert!(!matcher(|q| q.protocol = Some("bgp".into())).matches(&local));
        assert!(matcher(|q| q.protocol = Some("local".into())).matches(&local));
        // No filter: no matcher, nothing judged per path.
        assert!(PathMatch::of(&RouteRequest::default(), Vec::new())
            .unwrap()
            .is_none());
        for bad in [
            RouteRequest {
                community: Some("65000:x".into()),
                ..RouteRequest::default()
            },
            RouteRequest {
                aspath_regex: Some("(".into()),
                ..RouteRequest::default()
            },
            RouteRequest {
                next_hop: Some("nowhere".into()),
                ..RouteRequest::default()
            },
            RouteRequest {
                protocol: Some("ospf".into()),
                ..RouteRequest::default()
            },
        ] {
            assert!(matches!(
                PathMatch::of(&bad, Vec::new()),
                Err(ApiError::BadRequest(_))
            ));
        }
    }
}
