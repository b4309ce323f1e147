//! Statistics Reports (RFC 7854 section 4.8, RFC 8671 section 5), on each station's
//! interval: per neighbor, what the station monitors of it, and the Loc-RIB's.
//!
//! The sessions' counts (the Adj-RIB-In, what the neighbor's UPDATEs did) are read from
//! their status. The shards' (what import policy rejected, the post-policy Adj-RIB-In, each
//! member's Adj-RIB-Out) are asked
//! of the pipeline by a task of its own, and the reports go when the answer comes: the
//! monitor never waits for a shard, since a shard may be waiting for the monitor.

use crate::message::{stat, statistics, Stat};
use crate::monitor::{LinkState, State, Station};
use ribshard_engine::pipeline::ShardStats;
use ribshard_wire::Family;
use std::time::{Duration, Instant};

/// How long the shards' counts are waited for.
const SHARDS_ANSWER: Duration = Duration::from_secs(10);

impl State {
    /// On the monitor's tick: reports for the stations whose interval came, now, or once
    /// the shards' counts they need are in.
    pub(crate) fn statistics_due(&mut self) {
        if self.counting {
            return;
        }
        let now = Instant::now();
        let due: Vec<&Station> = self.stations.iter().filter(|s| is_due(s, now)).collect();
        if due.is_empty() {
            return;
        }
        // Every per-neighbor report has a count of the shards' (import policy's rejections
        // at least).
        let from_shards = due.iter().any(|s| {
            let r = s.config.ribs;
            r.pre_policy || r.post_policy || r.adj_rib_out
        });
        match self.pipeline.clone().filter(|_| from_shards) {
            Some(pipeline) => {
                self.counting = true;
                let counts = self.counts.clone();
                // A shard that does not answer in time (it never should) leaves the shards'
                // counts out of this round, not the statistics stopped.
                tokio::spawn(async move {
                    let asked = tokio::time::timeout(SHARDS_ANSWER, pipeline.shard_stats());
                    let _ = counts.send(asked.await.unwrap_or_default()).await;
                });
            }
            None => self.statistics(&[]),
        }
    }

    /// Statistics Reports for the stations whose interval came, with the shards' counts
    /// (none when not asked: the reports then leave out what they count).
    pub(crate) fn statistics(&mut self, shards: &[ShardStats]) {
        self.counting = false;
        let now = Instant::now();
        for s in &mut self.stations {
            let Some(every) = s.config.statistics_interval.filter(|_| is_due(s, now)) else {
                continue;
            };
            s.next_stats = Some(now + every);
            let ribs = s.config.ribs;
            let mut msgs = Vec::new();
            for (&index, p) in &self.peers {
                let (counts, input, group) = {
                    let st = p.status.borrow();
                    (st.prefixes, st.input, st.group.as_ref().map(|g| g.group))
                };
                let mut stats = Vec::new();
                if (ribs.pre_policy || ribs.post_policy) && !shards.is_empty() {
                    let c = ShardStats::peer_counters(shards, index);
                    stats.extend([
                        Stat::Counter(stat::REJECTED, c.import_rejections),
                        Stat::Counter(stat::DUPLICATE_ANNOUNCEMENTS, c.duplicate_announcements),
                    ]);
                }
                if ribs.pre_policy {
                    let counts = counts.map(|c| c as u64);
                    let adj_rib_in = (stat::ADJ_RIB_IN, stat::ADJ_RIB_IN_AFI);
                    gauges(&mut stats, adj_rib_in, &p.families, counts);
                    let counters = [
                        (stat::CLUSTER_LIST_LOOPS, input.cluster_list_loops),
                        (stat::AS_PATH_LOOPS, input.as_path_loops),
                        (stat::ORIGINATOR_ID_LOOPS, input.originator_id_loops),
                        (stat::DUPLICATE_WITHDRAWS, input.duplicate_withdraws),
                        (
                            stat::TREAT_AS_WITHDRAW_UPDATES,
                            input.treat_as_withdraw_updates,
                        ),
                        (
                            stat::TREAT_AS_WITHDRAW_PREFIXES,
                            input.treat_as_withdraw_prefixes,
                        ),
                    ];
                    // 32-bit counters wrap (RFC 7854 section 4.8).
                    stats.extend(counters.map(|(ty, v)| Stat::Counter(ty, v as u32)));
                }
                if ribs.post_policy && !shards.is_empty() {
                    let accepted = ShardStats::peer_total(shards, index, |c| c.accepted);
                    let post = (
                        stat::POST_POLICY_ADJ_RIB_IN,
                        stat::POST_POLICY_ADJ_RIB_IN_AFI,
                    );
                    gauges(&mut stats, post, &p.families, accepted);
                }
                // What is advertised to it, while it is a member of a group and every
                // shard has counted it.
                let sent = group
                    .filter(|_| ribs.adj_rib_out && !shards.is_empty())
                    .and_then(|g| ShardStats::advertised_to(shards, g, index as u32));
                if let Some(sent) = sent {
                    let out = (
                        stat::POST_POLICY_ADJ_RIB_OUT,
                        stat::POST_POLICY_ADJ_RIB_OUT_AFI,
                    );
                    gauges(&mut stats, out, &p.families, sent);
                }
                if !stats.is_empty() {
                    msgs.push(statistics(&p.header.now(), &stats));
                }
            }
            if ribs.loc_rib {
                let c = self.loc_rib_counts.map(|c| c.max(0) as u64);
                let mut stats = Vec::new();
                let both = [Family::Ipv4Unicast, Family::Ipv6Unicast];
                let loc_rib = (stat::LOC_RIB, stat::LOC_RIB_AFI);
                gauges(&mut stats, loc_rib, &both, c);
                msgs.push(statistics(&self.loc_header.now(), &stats));
            }
            if !s.outbox.push(msgs, s.config.buffer) {
                s.link = LinkState::Down;
            }
        }
        self.show();
    }
}

/// Whether the station is up and its interval came.
fn is_due(s: &Station, now: Instant) -> bool {
    matches!(s.link, LinkState::Up)
        && s.config.statistics_interval.is_some()
        && s.next_stats.is_some_and(|at| now >= at)
}

/// The gauge of a table (`ty.0`: both families) and one per AFI/SAFI of `families` (`ty.1`),
/// from counts per [`Family::index`].
fn gauges(stats: &mut Vec<Stat>, ty: (u16, u16), families: &[Family], counts: [u64; 2]) {
    stats.push(Stat::Gauge(ty.0, counts.iter().sum()));
    for f in families {
        stats.push(Stat::FamilyGauge(
            ty.1,
            f.afi(),
            f.safi(),
            counts[f.index()],
        ));
    }
}
