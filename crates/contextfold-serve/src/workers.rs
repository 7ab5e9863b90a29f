//! Where the CPU-heavy part of a request runs: reading a large body into the model, counting
//! it and compacting it.
//!
//! Design choice: a large body is prepared on the runtime's blocking pool, at most `limit` at
//! once (the rest wait their turn, first come first served), and a small one right where it
//! is. So the threads that accept connections, forward and relay are never all held by large
//! requests, and a small request is answered while large ones are still being prepared. The
//! work is the same async code either way (`Handle::block_on` on the pool thread): its awaits
//! (locks, the store, a summarizer's HTTP call) run as they would anywhere.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::Semaphore;

/// Bodies under this size are prepared where they arrive: their work is short.
pub const INLINE_BELOW: usize = 256 * 1024;

/// The pool large requests are prepared on.
pub struct Workers {
    permits: Arc<Semaphore>,
    inline_below: usize,
    /// Large requests being prepared or waiting for their turn.
    preparing: Arc<AtomicU64>,
}

/// One more in a count while it lives.
struct Counted<'a>(&'a AtomicU64);

impl<'a> Counted<'a> {
    fn new(count: &'a AtomicU64) -> Counted<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Counted(count)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    /// At most `limit` large requests prepared at once (at least one), counted in `preparing`.
    pub fn new(limit: usize, preparing: Arc<AtomicU64>) -> Workers {
        Workers { permits: Arc::new(Semaphore::new(limit.max(1))), inline_below: INLINE_BELOW, preparing }
    }

    /// As many at once as the machine has cores.
    pub fn for_this_machine(preparing: Arc<AtomicU64>) -> Workers {
        Workers::new(std::thread::available_parallelism().map_or(2, usize::from), preparing)
    }

    /// Runs `work`, the preparation of a body of `size` bytes: here when the body is small,
    /// else on the pool once a place is free. A request dropped meanwhile (its client left)
    /// lets the work finish, so a conversation's state is never left half-updated.
    pub async fn run<T: Send + 'static>(&self, size: usize, work: impl Future<Output = T> + Send + 'static) -> T {
        if size < self.inline_below {
            return work.await;
        }
        let _counted = Counted::new(&self.preparing);
        // The semaphore is never closed.
        let permit = self.permits.clone().acquire_owned().await.ok();
        let handle = Handle::current();
        let joined = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            handle.block_on(work)
        })
        .await;
        match joined {
            Ok(done) => done,
            Err(err) => std::panic::resume_unwind(err.into_panic()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_work_runs_at_most_limit_at_once_and_small_work_does_not_wait() {
        let workers = Arc::new(Workers::new(2, Arc::default()));
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (release, gate) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let (workers, running, most, mut gate) = (workers.clone(), running.clone(), most.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                workers
                    .run(INLINE_BELOW, async move {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        let _ = gate.wait_for(|open| *open).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
            }));
        }
        while running.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Two large ones hold the pool; a small one runs all the same.
        assert_eq!(workers.run(10, async { 7 }).await, 7);
        let _ = release.send(true);
        for task in tasks {
            task.await.expect("joins");
        }
        assert_eq!(most.load(Ordering::SeqCst), 2, "never more than the limit at once");
    }
}
