//! The accept loop: each connection served over HTTP/1.1 by hyper, with the limits a server
//! facing careless or hostile clients needs.
//!
//! - A request's headers must arrive within the header timeout, counted from when the
//!   connection is ready for a request (opened, or its last answer sent): a client that
//!   trickles a byte every few seconds is cut off, and so is a keep-alive connection left
//!   idle that long.
//! - At most `max_connections` are open at once. Past it the proxy accepts nothing, and new
//!   connections wait in the system's listen queue: the proxy never runs out of file handles,
//!   so the connections it holds (and the upstream requests they make) go on working.
//!
//! On shutdown it stops accepting, lets each connection finish its request in flight, and
//! then returns.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How many connections the proxy serves at once, and how long a request's headers may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The time from a connection being ready for a request to the end of its headers.
    pub header_timeout: Duration,
    /// The most connections open at once.
    pub max_connections: usize,
}

/// How often a failing `accept` (no file handle left, say) is logged.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(60);

/// Serves `router` on `listener` within `limits` until `shutdown` resolves, then waits for the
/// connections to finish their requests in flight.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits, shutdown: impl Future<Output = ()>) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).keep_alive(true);
    let mut warned: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.ok(),
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                if warned.is_none_or(|at| at.elapsed() >= ACCEPT_WARN_EVERY) {
                    warned = Some(Instant::now());
                    tracing::warn!(error = %err, "contextfold serve: a connection could not be accepted; retrying (logged at most once a minute)");
                }
                // Most such errors (no file handle left) pass once a connection closes.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Small stream frames go out at once.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The most connections by default: half the file handles the process may open (each
/// request holds the client's and the upstream's), less some for the store and logs, at
/// most 4,096.
pub fn default_max_connections() -> usize {
    let handles = open_file_limit().unwrap_or(1024);
    (handles.saturating_sub(64) / 2).clamp(16, 4_096)
}

/// The process's limit of open files, where the system says.
fn open_file_limit() -> Option<usize> {
    // `ulimit -n` as /proc shows it: "Max open files  <soft>  <hard>  files".
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}
