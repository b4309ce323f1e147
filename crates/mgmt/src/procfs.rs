//! The daemon's threads as the kernel counts them: name and CPU time from /proc/self/task,
//! sampled every second so that each thread's share of a CPU over the last 1, 10 and 60
//! seconds can be given (`show thread cpu`).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// One thread as read now.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadCpu {
    pub tid: i32,
    pub name: String,
    pub cpu_seconds: f64,
}

/// Every thread of this process.
pub fn threads() -> Vec<ThreadCpu> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out: Vec<ThreadCpu> = dir
        .flatten()
        .filter_map(|e| {
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // "tid (comm) state ..." : the name may hold spaces and parentheses.
            let open = stat.find('(')?;
            let close = stat.rfind(')')?;
            let name = stat.get(open + 1..close)?.to_string();
            let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
            // Fields 14 and 15 of the file (utime, stime) are 11 and 12 after the name.
            let utime: f64 = rest.get(11)?.parse().ok()?;
            let stime: f64 = rest.get(12)?.parse().ok()?;
            Some(ThreadCpu {
                tid,
                name,
                cpu_seconds: (utime + stime) / ticks,
            })
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

/// CPU times sampled once a second, for the last minute.
#[derive(Debug, Default)]
pub struct CpuHistory {
    samples: VecDeque<(Instant, HashMap<i32, f64>)>,
}

impl CpuHistory {
    /// Records a sample taken now.
    pub fn record(&mut self, now: Instant, threads: &[ThreadCpu]) {
        self.samples.push_back((
            now,
            threads.iter().map(|t| (t.tid, t.cpu_seconds)).collect(),
        ));
        while self.samples.len() > 62 {
            self.samples.pop_front();
        }
    }

    /// A thread's share of one CPU between the sample closest to `secs` ago and `now`
    /// (where it used `cpu` seconds in all); 0 without a sample that old.
    pub fn share(&self, tid: i32, now: Instant, cpu: f64, secs: f64) -> f64 {
        let then = self
            .samples
            .iter()
            .rev()
            .find(|(t, _)| now.duration_since(*t).as_secs_f64() >= secs * 0.9)
            .or_else(|| self.samples.front());
        let Some((t, m)) = then else { return 0.0 };
        let dt = now.duration_since(*t).as_secs_f64();
        if dt < 0.05 {
            return 0.0;
        }
        let before = m.get(&tid).copied().unwrap_or(0.0);
        ((cpu - before) / dt).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_threads_with_a_busy_one() {
        let h = std::thread::Builder::new()
            .name("rs-test-busy".into())
            .spawn(|| {
                let t = Instant::now();
                let mut x = 0u64;
                while t.elapsed().as_millis() < 300 {
                    x = x.wrapping_mul(31).wrapping_add(7);
                }
                std::hint::black_box(x);
            })
            .unwrap();
        let before = Instant::now();
        let mut hist = CpuHistory::default();
        hist.record(before, &threads());
        h.join().unwrap();
        // The busy thread has ended; this one (the test) at least is listed.
        let now = threads();
        assert!(!now.is_empty());
        assert!(now.iter().all(|t| t.cpu_seconds >= 0.0));
        let me = now.first().unwrap();
        let share = hist.share(me.tid, Instant::now(), me.cpu_seconds, 1.0);
        assert!((0.0..=1.0).contains(&share));
    }
}
