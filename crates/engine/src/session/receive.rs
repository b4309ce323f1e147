//! What a session reads: every message's effect on the state machine, ROUTE-REFRESH and its
//! enhanced markers (RFC 2918, RFC 7313), and UPDATEs: validated once (RFC 7606), the
//! Adj-RIB-In index kept, routes interned and split per shard.

use super::adj_index::AdjIndex;
use super::conn::ReadError;
use super::task::{Ending, Session};
use super::{Inbound, SessionError, Stamped};
use crate::negotiate::negotiate;
use crate::pipeline::Batcher;
use bytes::Bytes;
use ribshard_fsm::{Event, State};
use ribshard_rib::attrs::next_hop_of;
use ribshard_rib::shard::families;
use ribshard_rib::{Ingress, Loops};
use ribshard_wire::message::{MessageType, HEADER_LEN};
use ribshard_wire::notification::{cease, code, open as open_sub};
use ribshard_wire::{decode, parse_update, Family, Message, Nlri, NlriView, RouteRefresh};
use tracing::{debug, info, warn};

impl Session {
    /// Makes the UPDATEs handled since last time, and the Adj-RIB-In counts, visible to
    /// `show` and the metrics: called when the buffered input has been handled or a batch of
    /// routes is handed on, so they lag what was handled by less than a batch.
    pub(super) fn publish_received(&mut self) {
        let n = std::mem::take(&mut self.unpublished_updates);
        if n > 0 {
            let prefixes = [self.adj_rib_in[0].len(), self.adj_rib_in[1].len()];
            let input = self.input;
            self.status.send_modify(|st| {
                st.updates_received += n;
                st.prefixes = prefixes;
                st.input = input;
            });
        }
    }

    pub(super) fn received(&mut self, r: Result<Bytes, ReadError>) {
        let msg = match r {
            Ok(m) => m,
            Err(ReadError::Closed(e)) => {
                info!(neighbor = %self.name(), "connection closed: {}", e.as_ref().map_or("by the neighbor".to_string(), |e| e.to_string()));
                self.ending = Ending::Lost;
                self.set_error(match e {
                    Some(e) => SessionError::ConnectionLost(e.kind()),
                    None => SessionError::ConnectionClosed,
                });
                self.event(Event::TcpConnectionFails);
                return;
            }
            Err(ReadError::Header(e)) => {
                warn!(neighbor = %self.name(), "bad message header: {e}");
                self.set_error(SessionError::BadHeader(e.clone()));
                self.event(Event::BgpHeaderErr(e.notification()));
                return;
            }
        };
        let ty = msg.get(18).copied().unwrap_or(0);
        if let Some(t) = MessageType::from_u8(ty) {
            self.counters.received(t, msg.len());
        }
        if ty == MessageType::Update as u8 {
            self.update(msg);
            return;
        }
        let params = self
            .negotiated
            .as_ref()
            .map(|n| n.params)
            .unwrap_or_default();
        match decode(&msg, &params) {
            Ok(Message::Open(open)) => match negotiate(&self.our_open, &open, &self.s) {
                Ok(n) => {
                    debug!(neighbor = %self.name(), ?n, "OPEN accepted");
                    let hold_time = open.hold_time;
                    self.negotiated = Some(n);
                    self.open_received = Some(msg.clone());
                    self.event(Event::BgpOpen { hold_time });
                }
                Err(notification) => {
                    let error = if notification.code == code::OPEN_MESSAGE
                        && notification.subcode == open_sub::BAD_PEER_AS
                    {
                        SessionError::BadPeerAs {
                            received: open.asn(),
                            configured: self.s.peer_as,
                        }
                    } else {
                        SessionError::OpenRefused(notification.clone())
                    };
                    warn!(neighbor = %self.name(), "{error}");
                    self.set_error(error);
                    self.event(Event::BgpOpenMsgErr(notification));
                }
            },
            Ok(Message::Keepalive) => self.event(Event::KeepAliveMsg),
            Ok(Message::Notification(n)) => {
                warn!(neighbor = %self.name(), "NOTIFICATION received: {n}");
                self.ending = Ending::Notified {
                    hard_reset: n.code == code::CEASE && n.subcode == cease::HARD_RESET,
                };
                self.set_error(SessionError::NotificationReceived(n.clone()));
                self.status
                    .send_modify(|st| st.last_received = Some(Stamped::now(n.clone())));
                if n.code == code::OPEN_MESSAGE && n.subcode == open_sub::UNSUPPORTED_VERSION {
                    self.event(Event::NotifMsgVerErr);
                } else {
                    self.event(Event::NotifMsg);
                }
            }
            Ok(Message::RouteRefresh(rr)) => {
                // Before Established it is an unexpected message (RFC 6608).
                self.event(Event::RouteRefreshMsg);
                if self.fsm.state() == State::Established {
                    self.route_refresh(rr);
                }
            }
            Ok(Message::Update(_)) => {}
            Err(e) => {
                warn!(neighbor = %self.name(), "bad message: {e}");
                self.set_error(SessionError::BadMessage(e.clone()));
                let n = e.notification();
                let event = if n.code == code::OPEN_MESSAGE {
                    Event::BgpOpenMsgErr(n)
                } else {
                    Event::BgpHeaderErr(n)
                };
                self.event(event);
            }
        }
    }

    /// RFC 9234 section 5, ingress, on an eBGP session with a configured role: (whether the
    /// UPDATE's routes are a leak and ineligible, the OTC to add to them). A route with OTC
    /// from a customer or route server client is a leak, so is one from a peer whose OTC is
    /// not the peer's AS; a route without OTC from a provider, peer or route server gets the
    /// neighbor's AS as OTC.
    pub(super) fn only_to_customer(&self, otc: Option<u32>) -> (bool, Option<u32>) {
        use ribshard_wire::open::role;
        let peer_as = self.s.peer_as;
        let ours = if self.s.internal { None } else { self.s.role };
        match (ours, otc) {
            // We are their provider or their route server: they are a customer or a client.
            (Some(role::PROVIDER | role::RS), Some(_)) => (true, None),
            (Some(role::PEER), Some(v)) => (v != peer_as, None),
            // They are our provider, our peer or our route server.
            (Some(role::CUSTOMER | role::PEER | role::RS_CLIENT), None) => (false, Some(peer_as)),
            _ => (false, None),
        }
    }

    /// ROUTE-REFRESH (RFC 2918) and the markers of enhanced route refresh (RFC 7313).
    pub(super) fn route_refresh(&mut self, rr: RouteRefresh) {
        let enhanced = self
            .negotiated
            .as_ref()
            .is_some_and(|n| n.enhanced_route_refresh);
        let family = Family::from_afi_safi(rr.afi, rr.safi).filter(|f| {
            self.negotiated
                .as_ref()
                .is_some_and(|n| n.families.contains(f))
        });
        let Some(family) = family else {
            // RFC 2918 section 4: a family that was not negotiated is ignored.
            debug!(neighbor = %self.name(), afi = rr.afi, safi = rr.safi, "ROUTE-REFRESH for a family not negotiated: ignored");
            return;
        };
        match rr.subtype {
            RouteRefresh::REQUEST => {
                // The table again; framed by BoRR and EoRR when enhanced (RFC 7313 section 4).
                if let (Some(p), Some(j)) = (&self.pipeline, &self.joined) {
                    let t = p.refresh(j, enhanced.then_some(family));
                    self.inlet.push(t);
                }
                self.tap(Inbound::RouteRefresh {
                    peer: self.index,
                    afi: rr.afi,
                    safi: rr.safi,
                });
            }
            RouteRefresh::BORR if enhanced => {
                debug!(neighbor = %self.name(), %family, "BoRR: the neighbor re-advertises");
                self.flush_routes();
                let f = family.index();
                if let (Some(slot), Some(adj)) =
                    (self.refreshing.get_mut(f), self.adj_rib_in.get(f))
                {
                    *slot = Some(adj.clone());
                }
                if let Some(p) = &self.pipeline {
                    for t in p.refresh_begin(self.index as u32, families(&[family])) {
                        self.inlet.push(t);
                    }
                }
            }
            RouteRefresh::EORR if enhanced => {
                // What was not sent again since the BoRR goes (RFC 7313 section 4). An EoRR
                // without a BoRR purges nothing (stale paths of a graceful restart wait for
                // the End-of-RIB).
                let f = family.index();
                let Some(left) = self.refreshing.get_mut(f).and_then(Option::take) else {
                    debug!(neighbor = %self.name(), %family, "EoRR without BoRR: ignored");
                    return;
                };
                debug!(neighbor = %self.name(), %family, purged = left.len(), "EoRR");
                if let Some(adj) = self.adj_rib_in.get_mut(f) {
                    adj.remove_all(&left);
                }
                self.flush_routes();
                self.push_flush_stale(families(&[family]));
                let counts = [self.adj_rib_in[0].len(), self.adj_rib_in[1].len()];
                self.status.send_modify(|st| st.prefixes = counts);
            }
            // RFC 7313 section 5: other subtypes, and markers without the capability, are
            // ignored.
            other => {
                debug!(neighbor = %self.name(), subtype = other, "ROUTE-REFRESH subtype ignored");
            }
        }
    }

    pub(super) fn update(&mut self, msg: Bytes) {
        if self.fsm.state() != State::Established {
            // The FSM answers an UPDATE outside Established with an FSM error.
            self.event(Event::UpdateMsg);
            return;
        }
        let Some(params) = self.negotiated.as_ref().map(|n| n.params) else {
            return;
        };
        let body = msg.get(HEADER_LEN..).unwrap_or(&[]);
        let parsed = match parse_update(body, &params) {
            Ok(u) => u,
            Err(e) => {
                warn!(neighbor = %self.name(), "UPDATE needs a session reset: {e}");
                self.tap(Inbound::Errored {
                    peer: self.index,
                    message: msg.clone(),
                });
                self.set_error(SessionError::MalformedUpdate(e.clone()));
                self.event(Event::UpdateMsgErr(e.notification()));
                return;
            }
        };
        // The Withdrawn Routes and MP_UNREACH_NLRI lead `withdrawn_all`; past them come
        // the announcements an UPDATE treated as withdraw withdraws.
        let mut explicit = usize::MAX;
        if let Some(e) = parsed.treat_as_withdraw {
            warn!(neighbor = %self.name(), "UPDATE treated as withdraw (RFC 7606): {e}");
            let count = |v: Option<NlriView>| v.map_or(0, |v| v.iter().count());
            let reach = parsed.attrs.mp_reach.and_then(|m| m.nlri);
            let unreach = parsed.attrs.mp_unreach.and_then(|m| m.nlri);
            explicit = count(Some(parsed.withdrawn)) + count(unreach);
            self.input.treat_as_withdraw_updates += 1;
            self.input.treat_as_withdraw_prefixes +=
                (count(Some(parsed.nlri)) + count(reach)) as u64;
        }
        for e in &parsed.discarded {
            debug!(neighbor = %self.name(), "attribute discarded (RFC 7606): {e}");
        }
        let errored = parsed.treat_as_withdraw.is_some() || !parsed.discarded.is_empty();
        // Over the memory-limit, an UPDATE that brings new prefixes stops the session
        // before any of its routes go on.
        if self.memory_refuses(&parsed) {
            return;
        }
        let end_of_rib = parsed.end_of_rib();
        if let Some(f) = end_of_rib {
            info!(neighbor = %self.name(), family = %f, "End-of-RIB received");
        }
        if let Some(b) = self.batcher.as_mut() {
            b.stamp(std::time::Instant::now);
        }
        let (leak, add_otc) = self.only_to_customer(parsed.attrs.otc);
        let ingress = Ingress {
            otc: add_otc,
            prepend: self.ingress_prepend,
        };
        if leak && (!parsed.nlri.is_empty() || parsed.attrs.mp_reach.is_some()) {
            debug!(neighbor = %self.name(), otc = ?parsed.attrs.otc, "route leak (RFC 9234 section 5): the UPDATE's routes are ineligible");
        }
        // One pass over the prefixes: the Adj-RIB-In index (prefix limits, counts) and, with
        // a pipeline, the per-shard batches.
        // Canonical: an IPv4 session on a dual-stack listener has a mapped address.
        let local = self.status.borrow().local.map(|a| a.ip().to_canonical());
        let settings = &self.s;
        let warned = &mut self.next_hop_warned;
        let adj = &mut self.adj_rib_in;
        let refreshing = &mut self.refreshing;
        let mut pipe = self.batcher.as_mut().zip(self.interner.as_mut());
        // A withdrawal (or an announcement that is a route leak): out of the Adj-RIB-In
        // index, no longer awaited by a refresh, and withdrawn in the pipeline; true if the
        // index held it.
        let unlearn = |n: Nlri,
                       adj: &mut [AdjIndex; 2],
                       refreshing: &mut [Option<AdjIndex>; 2],
                       b: Option<&mut Batcher>| {
            let f = n.prefix.family().index();
            let held = adj.get_mut(f).is_some_and(|set| set.remove(n));
            if let Some(Some(set)) = refreshing.get_mut(f) {
                set.remove(n);
            }
            if let Some(b) = b {
                b.withdraw(n);
            }
            held
        };
        for (i, n) in parsed.withdrawn_all().enumerate() {
            let held = unlearn(n, adj, refreshing, pipe.as_mut().map(|(b, _)| &mut **b));
            if !held && i < explicit {
                self.input.duplicate_withdraws += 1;
            }
        }
        // Why the UPDATE's routes loop, if they do (counted once an UPDATE, as BMP does).
        let mut looped = Loops::NONE;
        if parsed.treat_as_withdraw.is_none() {
            // The NLRI field (next hop in NEXT_HOP), then MP_REACH_NLRI (its own next hop).
            let mp = parsed.attrs.mp_reach.and_then(|m| m.nlri);
            for (run, in_mp) in [(Some(parsed.nlri), false), (mp, true)] {
                let Some(run) = run.filter(|r| !r.is_empty()) else {
                    continue;
                };
                // RFC 4271 section 6.3: a next hop that is no usable host address makes
                // the routes ignored (as withdrawn), with no NOTIFICATION.
                let unusable = unusable_next_hop(next_hop_of(&parsed.attrs, in_mp), local);
                if let (Some(why), false) = (unusable, *warned) {
                    warn!(neighbor = %settings.name(), "routes ignored (RFC 4271 section 6.3): next hop is {why}; logged once a session");
                    *warned = true;
                }
                let leak = leak || unusable.is_some();
                let attrs = pipe.as_mut().filter(|_| !leak).map(|(_, interner)| {
                    let nh = next_hop_of(&parsed.attrs, in_mp);
                    if ingress == Ingress::default() {
                        interner.intern(&parsed.attrs, &params, nh)
                    } else {
                        interner.intern_with(&parsed.attrs, &params, nh, ingress)
                    }
                });
                if let Some(a) = &attrs {
                    looped = looped.or(a.loops);
                }
                for n in run.iter() {
                    let f = n.prefix.family().index();
                    if leak {
                        // Ineligible: as if withdrawn, replacing what the peer sent before.
                        unlearn(n, adj, refreshing, pipe.as_mut().map(|(b, _)| &mut **b));
                        continue;
                    }
                    if let Some(set) = adj.get_mut(f) {
                        set.insert(n);
                    }
                    if let Some(Some(set)) = refreshing.get_mut(f) {
                        set.remove(n);
                    }
                    if let (Some((b, _)), Some(a)) = (pipe.as_mut(), attrs.as_ref()) {
                        b.announce(a, n);
                    }
                }
            }
        }
        drop(parsed);
        self.input.count_loops(looped);
        // Published when the buffered input is handled (`publish_received`): a watch
        // update per UPDATE cost the session thread 5% of its time on a full table.
        self.unpublished_updates += 1;
        self.event(Event::UpdateMsg);
        if self.check_prefix_limits() {
            return;
        }
        if let Some(family) = end_of_rib {
            self.end_of_rib_received(family);
            // RFC 4724 section 4.2: stale routes of the family that were not sent again go.
            let f = self.stale.families();
            let only = families(&[family]);
            if f[0] && only[0] || f[1] && only[1] {
                self.stale.forget(only);
                self.publish_stale();
                self.flush_routes();
                self.push_flush_stale(only);
            }
            // Last: after its routes and the stale ones it flushed (the post-policy feed
            // sends its own End-of-RIB once every shard has handed on what came before).
            self.flush_routes();
            if let Some(p) = &self.pipeline {
                for t in p.end_of_rib(self.index as u32, family, self.epoch) {
                    self.inlet.push(t);
                }
            }
        }
        if self.tap.is_some() {
            if errored {
                self.tap(Inbound::Errored {
                    peer: self.index,
                    message: msg.clone(),
                });
            }
            self.tap(match end_of_rib {
                Some(family) => Inbound::EndOfRib {
                    peer: self.index,
                    family,
                },
                None => Inbound::Update {
                    peer: self.index,
                    message: msg,
                    params,
                },
            });
        }
    }
}

/// Why a next hop is no usable host address (RFC 4271 section 6.3), if it is not: the
/// unspecified address, multicast, IPv4 class E and broadcast, or our own address on the
/// session. An IPv6 next hop is its global address (a link-local may follow).
fn unusable_next_hop(nh: &[u8], ours: Option<std::net::IpAddr>) -> Option<&'static str> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let addr = match nh.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(nh).ok()?)),
        16 | 32 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(nh.get(..16)?).ok()?)),
        _ => return None,
    };
    if Some(addr) == ours {
        return Some("our own address on this session");
    }
    match addr {
        IpAddr::V4(a) if a.is_unspecified() => Some("0.0.0.0"),
        IpAddr::V4(a) if a.is_multicast() => Some("a multicast address"),
        // 240.0.0.0/4 (class E) and 255.255.255.255.
        IpAddr::V4(a) if a.octets()[0] >= 240 => Some("a class E or broadcast address"),
        IpAddr::V6(a) if a.is_unspecified() => Some("::"),
        IpAddr::V6(a) if a.is_multicast() => Some("a multicast address"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::unusable_next_hop;

    #[test]
    fn next_hops_that_are_no_usable_host_address() {
        let ours = Some("127.0.0.1".parse().unwrap());
        for (nh, bad) in [
            (&[198, 51, 100, 1][..], false),
            (&[0, 0, 0, 0], true),
            (&[224, 0, 0, 5], true),
            (&[239, 255, 255, 255], true),
            (&[240, 0, 0, 1], true),
            (&[255, 255, 255, 255], true),
            (&[127, 0, 0, 1], true),
            (&[127, 0, 0, 2], false),
        ] {
            assert_eq!(unusable_next_hop(nh, ours).is_some(), bad, "{nh:?}");
        }
        let mut v6 = [0u8; 16];
        assert!(unusable_next_hop(&v6, ours).is_some(), "::");
        v6[0] = 0xff;
        assert!(unusable_next_hop(&v6, ours).is_some(), "ff00::/8");
        v6[0] = 0x20;
        v6[1] = 0x01;
        assert!(unusable_next_hop(&v6, ours).is_none(), "2001::");
        // A global address followed by a link-local one.
        let mut both = [0u8; 32];
        both[..16].copy_from_slice(&v6);
        both[16] = 0xfe;
        both[17] = 0x80;
        assert!(unusable_next_hop(&both, ours).is_none());
    }
}
