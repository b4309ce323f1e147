//! A session's side of the pipeline: joining it at Established (its shards learn the peer,
//! its member joins an update group), leaving it, handing routes on in per-shard batches,
//! graceful-restart stale routes, and prefix limits (RFC 4486).

use super::deliver::Tapped;
use super::stale::Stale;
use super::task::{OverLimit, Session};
use super::{Inbound, SessionError};
use crate::negotiate::{build_open, Negotiated, PeerSettings};
use crate::pipeline::{Routed, Target};
use ribshard_adjout::MemberId;
use ribshard_fsm::{Action, Config as FsmConfig, Event};
use ribshard_policy::Source;
use ribshard_rib::shard::families;
use ribshard_rib::{GroupKind, GroupSpec, Import, Interner, LoopChecks, PeerInfo};
use ribshard_wire::notification::{cease, code, Notification};
use ribshard_wire::Family;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{info, warn};

impl Session {
    pub(super) fn tap(&mut self, m: Inbound) {
        if self.tap.is_some() {
            let update = matches!(m, Inbound::Update { .. });
            self.tapped.push_back(Tapped {
                item: m,
                mark: None,
            });
            // An UPDATE's routes go on with its batch; anything else is marked now, with
            // the routes before it handed on first.
            if !update {
                self.flush_routes();
            }
        }
    }

    /// What was tapped so far goes to the tap once what the inlet holds now is handed on.
    pub(super) fn mark_tapped(&mut self) {
        let mark = self.inlet.pushed();
        for t in self.tapped.iter_mut().rev() {
            if t.mark.is_some() {
                break;
            }
            t.mark = Some(mark);
        }
    }

    /// Queues the routes batched so far for their shards.
    pub(super) fn flush_routes(&mut self) {
        if let Some(b) = self.batcher.as_mut() {
            if !b.is_empty() {
                let epoch = b.epoch();
                for (i, m) in b.take() {
                    self.inlet.push(Routed {
                        target: Target::Shard(i, m),
                        epoch,
                        more: false,
                    });
                }
            }
            // After a re-shard, split for the shards in force (what was split for the old
            // ones is addressed again as it is delivered).
            if let Some(p) = &self.pipeline {
                if b.epoch() != p.lanes().epoch {
                    *b = p.batcher(self.index as u32);
                }
            }
        }
        self.mark_tapped();
    }

    pub(super) fn push_flush_stale(&mut self, families: [bool; 2]) {
        if let Some(p) = &self.pipeline {
            for t in p.flush_stale(self.index as u32, families) {
                self.inlet.push(t);
            }
        }
    }

    /// The restart time (or the long-lived stale time) of a neighbor that did not come back
    /// (or send End-of-RIB) is over: its stale routes go, or become long-lived stale.
    pub(super) fn stale_expired(&mut self) {
        let due = self.stale.due(Instant::now());
        if due != Default::default() {
            self.publish_stale();
        }
        if due.long_lived != [false; 2] {
            info!(neighbor = %self.name(), families = ?due.long_lived, "long-lived graceful restart: restart time over, stale routes kept with LLGR_STALE (least preferred), NO_LLGR ones removed");
            self.push_long_lived_stale(due.long_lived);
        }
        if due.flush != [false; 2] {
            info!(neighbor = %self.name(), families = ?due.flush, "graceful restart: stale time over, stale routes removed");
            self.push_flush_stale(due.flush);
        }
    }

    /// Shows the stale routes kept to `show bgp neighbor`.
    pub(super) fn publish_stale(&self) {
        let (now, wall) = (Instant::now(), std::time::SystemTime::now());
        let kept: Vec<super::StaleRoutes> = self
            .stale
            .kept()
            .into_iter()
            .map(|(family, until, long_lived)| super::StaleRoutes {
                family,
                until: wall + until.saturating_duration_since(now),
                long_lived,
            })
            .collect();
        self.status.send_modify(|st| st.stale = kept);
    }

    fn push_long_lived_stale(&mut self, families: [bool; 2]) {
        if let Some(p) = &self.pipeline {
            for t in p.long_lived_stale(self.index as u32, families) {
                self.inlet.push(t);
            }
        }
    }

    /// The session reached Established: join the pipeline.
    pub(super) fn pipeline_up(&mut self, n: &Negotiated) {
        let Some(p) = self.pipeline.clone() else {
            return;
        };
        let peer = self.index as u32;
        self.inlet
            .extend(p.import_policy(peer, self.import(), false));
        let r = &self.s.routing;
        let info = PeerInfo {
            ebgp: !self.s.internal,
            router_id: u32::from(n.peer_id),
            address: match self.s.address {
                IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
                IpAddr::V6(a) => u128::from(a),
            },
            local_as: self.s.local_as,
            peer_as: self.s.peer_as,
            rr_cluster: if self.s.internal {
                r.cluster.map(u32::from)
            } else {
                None
            },
            rs_client: r.route_server_client,
        };
        // Junos `local-as` towards an external neighbor (not a route server client, whose
        // paths pass unchanged): the neighbor sees the local AS and, unless
        // no-prepend-global-as, the global one; its routes get the local AS in front unless
        // private. Both ASes are ours for loop detection.
        let masquerade = self.masquerade();
        self.ingress_prepend = (masquerade && !r.local_as_private).then_some(self.s.local_as);
        self.interner = Some(Interner::new(LoopChecks {
            local_as: self.s.local_as,
            loops: r.loops,
            router_id: u32::from(self.s.router_id),
            cluster_ids: r.cluster_ids.clone(),
            global_as: masquerade.then_some(r.global_as),
            prepended: self.ingress_prepend.is_some(),
        }));
        self.batcher = Some(p.batcher(peer));
        let spec = self.group_spec(n);
        self.epoch += 1;
        let member = self.conn.as_ref().map(|c| {
            let sink: Box<dyn ribshard_adjout::Sink> = Box::new(c.route_sink(self.name()));
            (
                spec,
                MemberId {
                    peer,
                    epoch: self.epoch,
                },
                sink,
            )
        });
        let (msgs, joined) = p.peer_up(peer, info, member);
        self.joined = joined;
        let group = self.joined.clone();
        self.status.send_modify(|st| st.group = group);
        self.end_of_rib = [false; 2];
        p.telemetry().established(peer);
        self.inlet.extend(msgs);
        // Start-up deferral: its End-of-RIB is waited for only if it does graceful restart
        // (RFC 4724 section 4.1).
        let waits = n.graceful_restart.is_some();
        self.inlet.extend(p.deferral_up(peer, waits));
        // RFC 4724 section 4.2 and RFC 9494 section 4.2: a neighbor that comes back without
        // graceful restart, without a family in it, or without its Forwarding State bit
        // (it lost what it forwarded on), keeps no stale routes of that family.
        let f = self.stale.families();
        let kept = n
            .graceful_restart
            .as_ref()
            .map_or([false; 2], |g| families(&g.forwarding));
        let flush = [f[0] && !kept[0], f[1] && !kept[1]];
        if flush != [false; 2] {
            self.stale.forget(flush);
            self.publish_stale();
            self.push_flush_stale(flush);
        }
    }

    /// What the neighbor's update group must share with it: how it is sent routes.
    fn group_spec(&self, n: &Negotiated) -> GroupSpec {
        let r = &self.s.routing;
        let masquerade = self.masquerade();
        let kind = if r.route_server_client {
            GroupKind::RouteServer
        } else if self.s.internal {
            GroupKind::Internal {
                client_cluster: r.cluster.map(u32::from),
            }
        } else {
            GroupKind::External
        };
        let next_hop_self = r.next_hop_self.unwrap_or(kind == GroupKind::External);
        let needs_local = next_hop_self;
        let local = self
            .conn
            .as_ref()
            .and_then(|c| c.local_addr())
            .map(|a| a.ip())
            .filter(|_| needs_local);
        GroupSpec {
            long_lived: n.long_lived,
            name: r.group.clone(),
            kind,
            local_as: self.s.local_as,
            global_as: (masquerade && !r.no_prepend_global_as).then_some(r.global_as),
            peer_as: self.group_peer_as(kind),
            router_id: self.s.router_id,
            next_hop_self,
            local_v4: match local {
                Some(IpAddr::V4(a)) => Some(a),
                _ => None,
            },
            local_v6: match local {
                Some(IpAddr::V6(a)) => Some(a),
                _ => None,
            },
            export: r.export.clone(),
            params: ribshard_wire::SessionParams {
                four_octet_as: n.four_octet_as,
                extended_message: n.extended_message,
                add_path: n.add_path_send,
                external: false,
                mrt_rib: false,
                // What the group sends: encoding reads none of the receive checks.
                live: false,
            },
            families: families(&n.families),
            role: if self.s.internal { None } else { self.s.role },
            add_path: self
                .s
                .add_path_select
                .filter(|_| n.add_path_send.iter().any(|s| *s)),
        }
    }

    /// Junos `local-as` towards an external neighbor (not a route server client, whose
    /// paths pass unchanged): it sees the local AS, and the global one unless
    /// no-prepend-global-as.
    fn masquerade(&self) -> bool {
        let r = &self.s.routing;
        !self.s.internal
            && !r.route_server_client
            && r.global_as != 0
            && r.global_as != self.s.local_as
    }

    /// The peer's import policy, with what its actions need of the session.
    fn import(&self) -> Arc<Import> {
        Arc::new(Import {
            chain: self.s.routing.import.clone(),
            source: Source {
                address: self.s.address,
                peer_as: self.s.peer_as,
                internal: self.s.internal,
            },
            own_as: self.s.local_as,
            local_address: self
                .conn
                .as_ref()
                .and_then(|c| c.local_addr())
                .map(|a| a.ip()),
            from_provider: !self.s.internal
                && self.s.role == Some(ribshard_wire::open::role::CUSTOMER),
        })
    }

    /// The members' AS in the update group spec, where export needs one: "not back to its
    /// AS" on eBGP, and route-server-control naming the receivers.
    fn group_peer_as(&self, kind: GroupKind) -> u32 {
        let rs = kind == GroupKind::RouteServer && self.s.routing.export.reads_receiver();
        if kind == GroupKind::External || rs {
            self.s.peer_as
        } else {
            0
        }
    }

    /// New settings (a reload changed them; [`super::needs_new_session`] found nothing that
    /// needs a new session), applied with the session kept: the import policy again to the
    /// routes kept as received; the member moved to the update group of its new export
    /// (policy, next hop), which sends it what changes; prefix limits checked at once; the
    /// hold time proposed in the next OPEN; the timers from their next start.
    pub(super) fn apply_settings(&mut self, new: PeerSettings) -> super::SettingsApplied {
        let mut done = super::SettingsApplied::default();
        let import_changed = self.s.routing.import != new.routing.import;
        let export_changed = self.s.routing.export != new.routing.export;
        let limits_changed = self.s.prefix_limits != new.prefix_limits;
        let disable = (self.s.disabled != new.disabled).then_some(new.disabled);
        if new.hold_time != self.s.hold_time {
            // Sent with the next OPEN; the FSM takes it then (Action::SendOpen).
            self.next_open = Some(build_open(&new));
        }
        self.s = new;
        self.send_hold = Duration::from_secs(u64::from(self.s.send_hold_time));
        // The hold time stays what the OPEN out (or the next one taken) proposes.
        let fsm = FsmConfig {
            hold_time: self.fsm.config().hold_time,
            ..super::task::fsm_config(&self.s)
        };
        self.fsm.set_config(fsm);
        if let Some(on) = disable {
            // `disable` written to (or removed from) the file.
            info!(neighbor = %self.name(), disabled = on, "disable changed by a reload");
            self.set_disabled(on);
            return done;
        }
        if limits_changed {
            // A crossing is logged again under the new limits; a lowered limit the
            // neighbor is over now acts now (a teardown, or the log line).
            self.over_limit = [None, None];
            if self.fsm.state() == ribshard_fsm::State::Established && self.check_prefix_limits() {
                return done;
            }
        }
        let Some(p) = self.pipeline.clone() else {
            return done;
        };
        if self.fsm.state() != ribshard_fsm::State::Established {
            return done;
        }
        if import_changed {
            info!(neighbor = %self.name(), policies = ?self.s.routing.import.names(), "import policy changed: applied again to the routes kept as received");
            // After the routes handed on so far, before any that follow.
            self.flush_routes();
            let msgs = p.import_policy(self.index as u32, self.import(), true);
            self.inlet.extend(msgs);
            done.reimported = true;
        }
        if let (Some(j), Some(n)) = (self.joined.clone(), self.negotiated.clone()) {
            let spec = self.group_spec(&n);
            if spec != *j.spec {
                if export_changed {
                    info!(neighbor = %self.name(), policies = ?self.s.routing.export.names(), "export policy changed: moved to the update group of the new policy, sent what changes");
                } else {
                    info!(neighbor = %self.name(), group = %spec.name, "export settings changed (group, next-hop-self or no-prepend-global-as): moved to the update group that sends it so, sent what changes");
                }
                let (msgs, joined) = p.regroup(&j, spec);
                self.inlet.extend(msgs);
                self.joined = Some(joined);
                let group = self.joined.clone();
                self.status.send_modify(|st| st.group = group);
                done.regrouped = true;
            }
        }
        done
    }

    /// The session left Established: its routes leave the pipeline (or stay stale).
    pub(super) fn pipeline_down(&mut self, stale: Option<&crate::negotiate::GracefulRestart>) {
        let Some(p) = self.pipeline.clone() else {
            return;
        };
        // Routes received before the session ended are applied before it goes.
        self.flush_routes();
        self.batcher = None;
        self.interner = None;
        // RFC 4724 section 4.2 and RFC 9494 section 4.2: the families kept, for the restart
        // time, then long-lived stale where the neighbor asked; with a restart time of 0
        // the long-lived ones are long-lived stale at once.
        let now = Instant::now();
        let mut kept = Stale::default();
        if let Some(g) = stale {
            let long_lived = |f: Family| g.long_lived.iter().find(|x| x.0 == f).map(|x| x.1);
            if g.restart_time > 0 {
                let restart = now + Duration::from_secs(u64::from(g.restart_time));
                for f in &g.families {
                    kept.keep(*f, restart, long_lived(*f));
                }
            }
            // Long-lived families not kept for a restart time: long-lived from now.
            for (f, secs) in &g.long_lived {
                if !kept.families().get(f.index()).copied().unwrap_or(false) {
                    kept.keep(*f, now, Some(*secs));
                }
            }
        }
        let families_kept = stale.map(|_| kept.families());
        self.status.send_modify(|st| st.group = None);
        let msgs = p.peer_down(self.index as u32, families_kept, self.joined.take());
        self.inlet.extend(msgs);
        self.inlet.extend(p.deferral_down(self.index as u32));
        self.stale = kept;
        self.publish_stale();
        // Families long-lived at once.
        self.stale_expired();
    }

    /// After our Cease NOTIFICATION (`subcode`, sent already with its data): stops the
    /// session and holds it down until cleared, or restarts it after `idle` seconds.
    fn stop_held(&mut self, subcode: u8, idle: Option<u32>) {
        self.set_held_down(idle.is_none());
        self.event_with(Event::AutomaticStop(subcode), |a| match a {
            Action::SendNotification(_) => None,
            Action::StartIdleHoldTimer(_) => {
                idle.map(|t| Action::StartIdleHoldTimer(t.min(u32::from(u16::MAX)) as u16))
            }
            other => Some(other),
        });
    }

    /// `[bgp] memory-limit`: while the process is over the limit, a neighbor whose UPDATE
    /// announces a prefix not in its Adj-RIB-In is stopped with Cease / Out of Resources
    /// (RFC 4486 section 4) and held down until cleared, before any of the UPDATE's routes
    /// go on; replacing or withdrawing routes is fine, and the other sessions and their
    /// routes stay. True if it was stopped.
    pub(super) fn memory_refuses(&mut self, u: &ribshard_wire::ParsedUpdate<'_>) -> bool {
        // One relaxed load per UPDATE while under the limit; no reference count touched.
        let Some(guard) = self.pipeline.as_ref().map(|p| p.memory()) else {
            return false;
        };
        if !guard.over() {
            return false;
        }
        let guard = guard.clone();
        let adj = &self.adj_rib_in;
        let new = u.announced().any(|n| {
            adj.get(n.prefix.family().index())
                .is_some_and(|a| !a.contains(n))
        });
        if !new {
            return false;
        }
        let limit_mib = guard.limit().unwrap_or(0) >> 20;
        warn!(
            neighbor = %self.name(), resident_mib = guard.resident() >> 20, limit_mib,
            "new prefixes over the memory-limit: stopping the session (Cease / Out of Resources) until cleared"
        );
        self.set_error(SessionError::MemoryLimit { limit_mib });
        self.notify(Notification::new(
            code::CEASE,
            cease::OUT_OF_RESOURCES,
            vec![],
        ));
        self.stop_held(cease::OUT_OF_RESOURCES, None);
        true
    }

    /// Tears the session down past a family's maximum (RFC 4486 section 4, Cease subcode 1).
    pub(super) fn check_prefix_limits(&mut self) -> bool {
        for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
            let Some(Some((max, teardown, idle))) = self.s.prefix_limits.get(f.index()).copied()
            else {
                continue;
            };
            let count = self.adj_rib_in[f.index()].len();
            if count as u64 <= u64::from(max) {
                if let Some(o) = self.over_limit[f.index()].take() {
                    info!(
                        neighbor = %self.name(), family = %f, count, max, peak = o.peak,
                        batches_over = o.batches,
                        "back within the prefix limit"
                    );
                }
                continue;
            }
            if !teardown {
                // Once per crossing: a table arriving over the limit would log every batch.
                if let Some(o) = &mut self.over_limit[f.index()] {
                    o.batches += 1;
                    o.peak = o.peak.max(count);
                } else {
                    warn!(
                        neighbor = %self.name(), family = %f, count, max,
                        "prefix limit exceeded (teardown = false: routes kept; \
                         logged again once back within it)"
                    );
                    self.over_limit[f.index()] = Some(OverLimit {
                        batches: 1,
                        peak: count,
                    });
                }
                continue;
            }
            warn!(neighbor = %self.name(), family = %f, count, max, "prefix limit exceeded: tearing down");
            self.set_error(SessionError::PrefixLimit {
                family: f,
                maximum: max,
            });
            // Data: AFI, SAFI and the upper bound (RFC 4486 section 4).
            let mut data = f.afi().to_be_bytes().to_vec();
            data.push(f.safi());
            data.extend_from_slice(&max.to_be_bytes());
            self.notify(Notification::new(
                code::CEASE,
                cease::MAXIMUM_PREFIXES_REACHED,
                data,
            ));
            self.stop_held(cease::MAXIMUM_PREFIXES_REACHED, idle);
            return true;
        }
        false
    }

    /// End-of-RIB for a family: once every negotiated family's is in, a marker follows the
    /// neighbor's routes through the pipeline, and each update group notes when it has sent
    /// them all (`show bgp convergence`).
    pub(super) fn end_of_rib_received(&mut self, family: Family) {
        if let Some(e) = self.end_of_rib.get_mut(family.index()) {
            *e = true;
        }
        let all = self.negotiated.as_ref().is_some_and(|n| {
            n.families
                .iter()
                .all(|f| self.end_of_rib.get(f.index()) == Some(&true))
        });
        let Some(p) = self.pipeline.clone().filter(|_| all) else {
            return;
        };
        let peer = self.index as u32;
        self.flush_routes();
        if let Some(token) = p.telemetry().end_of_rib(peer, p.groups()) {
            self.inlet.extend(p.marker(peer, token));
        }
        // After its routes: the shards have them all when they start advertising.
        self.inlet.extend(p.deferral_end_of_rib(peer));
    }
}
