//! Work that outlives its request: the calibration an answer teaches, written back to the
//! conversation's state (and the store) after the answer has gone to the client. The proxy
//! waits for it when it stops, so a shutdown never cuts a store write off half-way.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::task::JoinSet;

/// The tasks still running after their requests.
#[derive(Clone, Default)]
pub struct Background {
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl Background {
    /// Runs `task` on the runtime, to be awaited by [`Background::drain`].
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks();
        // Finished tasks are let go here, so the set holds only what still runs.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }

    /// Waits for every task spawned so far.
    pub async fn drain(&self) {
        let mut tasks = std::mem::take(&mut *self.tasks());
        while tasks.join_next().await.is_some() {}
    }

    fn tasks(&self) -> MutexGuard<'_, JoinSet<()>> {
        self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn drain_waits_for_every_task() {
        let background = Background::default();
        let done = Arc::new(AtomicUsize::new(0));
        for pause in [30, 10, 20] {
            let done = done.clone();
            background.spawn(async move {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        background.drain().await;
        assert_eq!(done.load(Ordering::SeqCst), 3);
    }
}
