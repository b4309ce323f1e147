//! The timed phase: send the feeds (or replay a trace), wait until the receivers hold what the
//! plan expects and the DUT has been quiet, then check what they hold.

use super::plan::Plan;
use super::{BenchError, PolicyChange, Received};
use crate::dut::Dut;
use crate::policy::Filter;
use crate::speaker::{now_ns, Bits, Lean, Session, SessionError};
use crate::table::Trace;
use hashbrown::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// `RIBSHARD_BENCH_PERF_CTL`: a `perf record --control fifo:` FIFO, told to enable and
/// disable sampling as the timed phase begins and ends, so a profile holds that phase only
/// (`scripts/profile`).
pub(super) fn perf_control(what: &str) {
    if let Some(fifo) = std::env::var_os("RIBSHARD_BENCH_PERF_CTL") {
        if let Err(e) = std::fs::write(&fifo, format!("{what}\n")) {
            tracing::warn!("perf control {}: {e}", fifo.to_string_lossy());
        }
    }
}

/// When a timed phase started, how long the DUT must stay quiet to count as converged, and when
/// to give up.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    pub(super) t0: u64,
    pub(super) quiet: Duration,
    pub(super) timeout: Duration,
}

pub(super) struct Phase {
    pub(super) converge_s: f64,
    pub(super) full_s: f64,
    pub(super) converged: bool,
}

/// Sends every sender's feed and waits for convergence of `watch`.
pub(super) fn timed_phase(
    plan: &Plan,
    sessions: &[Option<Session>],
    senders: &[usize],
    watch: &[usize],
    clock: Clock,
    dut: &mut Dut,
) -> Result<Phase, BenchError> {
    let done = AtomicUsize::new(0);
    let failed: Mutex<Option<SessionError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for &i in senders {
            let (Some(Some(sess)), Some(Some(feed))) = (sessions.get(i), plan.feeds.get(i)) else {
                done.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let (done, failed) = (&done, &failed);
            s.spawn(move || {
                if let Err(e) = sess.send(&feed.bytes) {
                    if let Ok(mut f) = failed.lock() {
                        f.get_or_insert(e);
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        wait_converged(
            &plan.expected,
            sessions,
            watch,
            &done,
            senders.len(),
            clock,
            dut,
        )
    })
    .and_then(|p| match failed.into_inner().ok().flatten() {
        Some(e) => Err(e.into()),
        None => Ok(p),
    })
}

pub(super) fn wait_converged(
    expected: &[Option<Bits>],
    sessions: &[Option<Session>],
    watch: &[usize],
    done: &AtomicUsize,
    senders: usize,
    clock: Clock,
    dut: &mut Dut,
) -> Result<Phase, BenchError> {
    let Clock { t0, quiet, timeout } = clock;
    let quiet = quiet.as_nanos() as u64;
    let deadline = t0 + timeout.as_nanos() as u64;
    let mut full_at: Option<u64> = None;
    // A DUT that stops sending while some receiver is still short or long will not converge:
    // give up after this long with every sender done and no UPDATE, rather than at the deadline.
    let stall = (quiet * 20).max(60_000_000_000);
    let mut senders_done_at: Option<u64> = None;
    let mut polls = 0u64;
    // Counted once: a poll every 2 ms counting every receiver's expected set cost the bench a
    // share of a core on route-server (20 sets of 500,000).
    let expected_held: Vec<Option<u64>> = expected
        .iter()
        .map(|e| e.as_ref().map(Bits::count))
        .collect();
    loop {
        std::thread::sleep(Duration::from_millis(2));
        polls += 1;
        if polls % 50 == 0 {
            dut.check()?;
        }
        let now = now_ns();
        let mut full = done.load(Ordering::Relaxed) >= senders;
        let mut last = t0;
        for &i in watch {
            let (Some(Some(s)), Some(Some(e))) = (sessions.get(i), expected_held.get(i)) else {
                continue;
            };
            let st = &s.stats;
            full &= st.held.load(Ordering::Relaxed) == *e
                && st.extras.load(Ordering::Relaxed) == 0
                && st.untagged.load(Ordering::Relaxed) == 0;
            last = last.max(st.last_update_ns.load(Ordering::Relaxed));
        }
        if full && full_at.is_none() {
            full_at = Some(now);
        }
        if !full {
            full_at = None;
        }
        if let Some(f) = full_at {
            if now.saturating_sub(last) >= quiet {
                return Ok(Phase {
                    converge_s: (last.max(t0) - t0) as f64 / 1e9,
                    full_s: (f.min(last.max(f)) - t0) as f64 / 1e9,
                    converged: true,
                });
            }
        }
        if done.load(Ordering::Relaxed) >= senders {
            senders_done_at.get_or_insert(now);
        }
        let stalled = senders_done_at.is_some_and(|d| now.saturating_sub(last.max(d)) >= stall);
        if now > deadline || stalled {
            return Ok(Phase {
                converge_s: (now - t0) as f64 / 1e9,
                full_s: (now - t0) as f64 / 1e9,
                converged: false,
            });
        }
    }
}

/// What each watched receiver has been sent so far.
pub(super) fn received_by(sessions: &[Option<Session>], watch: &[usize]) -> Vec<Received> {
    watch
        .iter()
        .filter_map(|&i| sessions.get(i)?.as_ref())
        .map(|s| {
            let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            Received {
                peer: s.spec.local.to_string(),
                updates: load(&s.stats.updates),
                octets: load(&s.stats.update_octets),
                announced: load(&s.stats.announced),
                withdrawn: load(&s.stats.withdrawn),
                redundant: load(&s.stats.redundant),
                held: load(&s.stats.held),
            }
        })
        .collect()
}

/// `--policy-change`: every receiver must now hold what [`Filter::CHANGED`] accepts, with its
/// tags; the daemon is reloaded with it and the clock runs from the reload command to the
/// downstreams' convergence (`clock.t0` is set here). Whether it converged, and the figures.
pub(super) fn change_policy(
    plan: &Plan,
    sessions: &[Option<Session>],
    receivers: &[usize],
    clock: Clock,
    dut: &mut Dut,
) -> Result<(bool, PolicyChange), BenchError> {
    let mut changed = plan.topo.clone();
    changed.policy = Some(Filter::CHANGED);
    let mut before = Received::default();
    received_by(sessions, receivers)
        .iter()
        .for_each(|r| before.add(r));
    // Before the reload: what is held now carries the old tags and must be sent again.
    for &i in receivers {
        let Some(Some(s)) = sessions.get(i) else {
            continue;
        };
        if let Some(mut h) = s.holding.as_ref().and_then(|h| h.lock().ok()) {
            h.require(&Filter::CHANGED.tags());
            s.stats
                .untagged
                .store(h.untagged.count(), Ordering::Relaxed);
        }
    }
    let (cpu0, t0) = (dut.cpu_seconds(), now_ns());
    dut.reload(&changed)?;
    tracing::info!(
        "reloaded with the changed import policy in {:.3} s",
        (now_ns() - t0) as f64 / 1e9
    );
    let phase = wait_converged(
        &plan.after_change,
        sessions,
        receivers,
        &AtomicUsize::new(0),
        0,
        Clock { t0, ..clock },
        dut,
    )?;
    let mut after = Received::default();
    received_by(sessions, receivers)
        .iter()
        .for_each(|r| after.add(r));
    let received = Received {
        peer: String::new(),
        updates: after.updates - before.updates,
        octets: after.octets - before.octets,
        announced: after.announced - before.announced,
        withdrawn: after.withdrawn - before.withdrawn,
        redundant: after.redundant - before.redundant,
        held: after.held,
    };
    Ok((
        phase.converged,
        PolicyChange {
            converge_s: phase.converge_s,
            dut_cpu_s: dut.cpu_seconds() - cpu0,
            received,
        },
    ))
}

/// Whether every watched receiver holds exactly its expected prefixes; the first problem.
pub(super) fn check(
    plan: &Plan,
    expected: &[Option<Bits>],
    sessions: &[Option<Session>],
    watch: &[usize],
) -> Option<String> {
    let mut keys: Option<Vec<u64>> = None;
    for &i in watch {
        let n = &plan.topo.neighbors[i];
        let (Some(Some(s)), Some(Some(e))) = (sessions.get(i), expected.get(i)) else {
            continue;
        };
        if s.stats.down.load(Ordering::Relaxed) {
            return Some(format!("{}: the session went down", n.addr));
        }
        if s.stats.malformed.load(Ordering::Relaxed) {
            return Some(format!("{}: received a malformed UPDATE", n.addr));
        }
        let Some(h) = s.holding.as_ref().and_then(|h| h.lock().ok()) else {
            continue;
        };
        if let Some(v) = &h.verdict {
            if v.good_held != e.count() || v.bad_held > 0 || !h.extras.is_empty() {
                return Some(format!(
                    "{}: holds {} of its {} prefixes from their winners, {} from a source it \
                     should not, {} unknown (a judging receiver)",
                    n.addr,
                    v.good_held,
                    e.count(),
                    v.bad_held,
                    h.extras.len()
                ));
            }
            continue;
        }
        if let Some(got) = h.lean {
            let keys = keys.get_or_insert_with(|| plan.index.keys());
            let want = Lean::of(e.ones().filter_map(|n| keys.get(n as usize).copied()));
            if got != want {
                return Some(format!(
                    "{}: holds {} prefixes by its count, expected {}{} (a lean receiver: a \
                     prefix announced twice counts twice)",
                    n.addr,
                    got.held,
                    want.held,
                    if got.held == want.held {
                        ", not the same ones"
                    } else {
                        ""
                    }
                ));
            }
            continue;
        }
        let wrong = h.bits.differences(e);
        if wrong > 0 || !h.extras.is_empty() {
            return Some(format!(
                "{}: holds {} prefixes, expected {}: {} differ, {} unexpected",
                n.addr,
                h.bits.count(),
                e.count(),
                wrong,
                h.extras.len()
            ));
        }
        if h.untagged.count() > 0 {
            return Some(format!(
                "{}: {} prefixes held without the policy's communities",
                n.addr,
                h.untagged.count()
            ));
        }
    }
    None
}

pub(super) fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(i).copied()
}

/// Replays the trace through sender `up` at `speed`; returns (send time, prefixes) per message.
pub(super) fn replay(
    session: &Session,
    trace: &Trace,
    speed: f64,
) -> Result<Vec<u64>, SessionError> {
    let start = now_ns();
    let mut sent = Vec::with_capacity(trace.messages.len());
    for (at, bytes) in &trace.messages {
        let due = start + (*at as f64 * 1000.0 / speed) as u64;
        let now = now_ns();
        if due > now {
            std::thread::sleep(Duration::from_nanos(due - now));
        }
        sent.push(now_ns());
        session.send(bytes)?;
    }
    Ok(sent)
}

/// Latency of each sent prefix: from its send to the first receipt of that prefix before the
/// same prefix is sent again. A send with no receipt in that window changed nothing the DUT
/// advertises (a duplicate, or a path that did not win) and gives no sample: daemons that
/// suppress unchanged re-advertisements must not be charged the wait until the next change.
pub(super) fn latencies(trace: &Trace, sent: &[u64], received: &[(u64, u64)]) -> Vec<f64> {
    let mut at: HashMap<u64, Vec<u64>> = HashMap::new();
    for (k, t) in received {
        at.entry(*k).or_default().push(*t);
    }
    // Every send time of each prefix, in order (the trace is replayed in order).
    let mut sends: HashMap<u64, Vec<u64>> = HashMap::new();
    for (keys, t_send) in trace.prefixes.iter().zip(sent) {
        for (k, _) in keys {
            sends.entry(*k).or_default().push(*t_send);
        }
    }
    let mut out = Vec::new();
    for (keys, t_send) in trace.prefixes.iter().zip(sent) {
        for (k, _) in keys {
            let Some(v) = at.get(k) else { continue };
            let next_send = sends.get(k).and_then(|s| {
                let j = s.partition_point(|t| t <= t_send);
                s.get(j).copied()
            });
            let i = v.partition_point(|t| t < t_send);
            if let Some(t) = v.get(i).filter(|t| next_send.is_none_or(|n| **t < n)) {
                out.push((t - t_send) as f64 / 1e6);
            }
        }
    }
    out.sort_by(f64::total_cmp);
    out
}
