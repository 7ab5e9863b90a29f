//! The store's own tokio runtime, and the one way its synchronous methods wait for the
//! asynchronous driver: from a plain thread, a `spawn_blocking` thread or async code alike.
//!
//! The connections (their I/O, timers and background tasks) live on the store's runtime,
//! one worker thread of its own, so the caller's runtime never drives them. A call polls its
//! future on the caller's thread and parks in between; the worker wakes it. Nothing calls
//! `block_on` inside another runtime (tokio forbids that), and on a multi-threaded runtime
//! the wait runs in `block_in_place`, so the worker's other tasks move elsewhere meanwhile.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// The runtime the store's connections run on.
#[derive(Debug)]
pub(in crate::store) struct Driver {
    runtime: Option<Runtime>,
}

impl Driver {
    pub(super) fn new() -> std::io::Result<Driver> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("contextfold-postgres")
            .enable_all()
            .build()?;
        Ok(Driver { runtime: Some(runtime) })
    }

    pub(in crate::store) fn handle(&self) -> &Handle {
        // `runtime` is only taken in `drop`.
        self.runtime.as_ref().map(Runtime::handle).expect("the runtime lives as long as the driver")
    }

    /// Runs `future` to completion with the store's runtime as its context, blocking this
    /// thread until it is done.
    pub(in crate::store) fn run<F: Future>(&self, future: F) -> F::Output {
        let on_worker_pool =
            Handle::try_current().is_ok_and(|caller| caller.runtime_flavor() == RuntimeFlavor::MultiThread);
        let wait = || {
            let _context = self.handle().enter();
            park_on(future)
        };
        if on_worker_pool {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // A runtime dropped inside async code would panic waiting for its tasks; the
        // connections' tasks need no goodbye.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on this thread, parking between polls until its waker is called.
fn park_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn tick() -> u32 {
        // A timer of the store's runtime: it only fires if that runtime is driven.
        tokio::time::sleep(Duration::from_millis(5)).await;
        tokio::spawn(async { 41 }).await.unwrap() + 1
    }

    #[test]
    fn runs_from_a_plain_thread() {
        assert_eq!(Driver::new().unwrap().run(tick()), 42);
    }

    #[test]
    fn runs_inside_either_kind_of_runtime_and_is_dropped_there() {
        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        current.block_on(async {
            let driver = Driver::new().unwrap();
            assert_eq!(driver.run(tick()), 42);
            let driver = Arc::new(driver);
            let inner = driver.clone();
            assert_eq!(tokio::task::spawn_blocking(move || inner.run(tick())).await.unwrap(), 42);
        });
        let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        multi.block_on(async {
            let driver = Arc::new(Driver::new().unwrap());
            let inner = driver.clone();
            assert_eq!(tokio::spawn(async move { inner.run(tick()) }).await.unwrap(), 42);
            let inner = driver.clone();
            assert_eq!(tokio::task::spawn_blocking(move || inner.run(tick())).await.unwrap(), 42);
            drop(driver);
        });
    }
}
