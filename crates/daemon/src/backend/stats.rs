//! The pipeline's accounting, read for many management requests at once. At most one
//! reading of every shard and update thread is under way, and each request is answered from
//! a reading that began after it arrived (never an older figure): a hundred clients asking
//! together cost the routing threads one question each, not a hundred.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct SharedReads<T> {
    /// Readings begun so far; changed only with `last` locked.
    started: AtomicU64,
    /// The last reading finished, and its number. Locked for a whole reading, so that
    /// requests arriving meanwhile queue for the next one.
    last: tokio::sync::Mutex<Option<(u64, Arc<T>)>>,
}

impl<T> Default for SharedReads<T> {
    fn default() -> Self {
        SharedReads {
            started: AtomicU64::new(0),
            last: tokio::sync::Mutex::new(None),
        }
    }
}

impl<T> SharedReads<T> {
    /// The result of a reading begun after this call: `read`'s own, or that of a request
    /// that came while another reading was under way and did it first.
    pub async fn read<F: Future<Output = T>>(&self, read: impl FnOnce() -> F) -> Arc<T> {
        let arrived = self.started.load(Ordering::Acquire);
        let mut last = self.last.lock().await;
        // A reading numbered above what had begun when this request arrived began after it.
        if let Some((n, v)) = last.as_ref() {
            if *n > arrived {
                return v.clone();
            }
        }
        let n = self.started.fetch_add(1, Ordering::AcqRel) + 1;
        let v = Arc::new(read().await);
        *last = Some((n, v.clone()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// A hundred requests at once: each gets a reading begun after it arrived, and the
    /// readings number two or three (one under way when they came, one or two after), not
    /// a hundred.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_together_share_a_fresh_reading() {
        let reads = Arc::new(SharedReads::<usize>::default());
        let counter = Arc::new(AtomicUsize::new(0));
        let read = |reads: Arc<SharedReads<usize>>, counter: Arc<AtomicUsize>| async move {
            let begun_before = counter.load(Ordering::SeqCst);
            let got = reads
                .read(|| async {
                    let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    n
                })
                .await;
            (begun_before, *got)
        };
        // One reading under way when the hundred arrive.
        let first = tokio::spawn(read(reads.clone(), counter.clone()));
        tokio::time::sleep(Duration::from_millis(10)).await;
        let many: Vec<_> = (0..100)
            .map(|_| tokio::spawn(read(reads.clone(), counter.clone())))
            .collect();
        assert_eq!(first.await.unwrap(), (0, 1));
        for h in many {
            let (begun_before, got) = h.await.unwrap();
            assert!(
                got > begun_before,
                "answered from a reading begun before it came"
            );
        }
        let readings = counter.load(Ordering::SeqCst);
        assert!(readings <= 3, "{readings} readings for 101 requests");
    }
}
