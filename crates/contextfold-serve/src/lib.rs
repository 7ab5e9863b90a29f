//! contextfold-serve: `contextfold serve`, a drop-in proxy for the Anthropic Messages API
//! and OpenAI's Chat Completions and Responses APIs that keeps long conversations inside
//! their context window.
//!
//! A client points its base URL at the proxy (`ANTHROPIC_BASE_URL=http://127.0.0.1:8787`,
//! `OPENAI_BASE_URL=http://127.0.0.1:8787/v1`); the proxy forwards every request to its
//! API's configured upstream and relays every response as it arrives. On `POST /v1/messages`
//! (and `count_tokens`), `POST /v1/chat/completions` and `POST /v1/responses` it runs each
//! conversation's [`CompactionMiddleware`](contextfold::middleware::CompactionMiddleware)
//! and, when that compacts, replaces the body's `messages` (or `input`) and nothing else.
//!
//! # Brief overview
//!
//! - [`ServeConfig`]: where to listen and forward, how to compact, the limits.
//! - [`Proxy::bind`] checks the configuration and binds; [`Proxy::run`] serves until its
//!   shutdown future resolves, then drains the requests in flight.
//! - [`shutdown_signal`] resolves on Ctrl-C or SIGTERM; [`init_logging`] writes the
//!   one-line-per-request log to standard error.
//!
//! ```no_run
//! # async fn example() -> Result<(), contextfold_serve::ServeError> {
//! use contextfold_serve::{Proxy, ServeConfig};
//! let proxy = Proxy::bind(ServeConfig::default()).await?;
//! println!("listening on http://{}", proxy.local_addr());
//! proxy.run(contextfold_serve::shutdown_signal()).await
//! # }
//! ```
//!
//! **Invariants**: the upstream receives the client's bytes when nothing is compacted, and
//! only `messages` (or `input`) changes when something is; between two compactions every request's
//! prefix is the same text as the previous one's; a compacted request that would break a
//! rule of the API is never sent (the client's is, unchanged); no header, body or query
//! string is logged.
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod action;
mod allocator;
mod api;
mod app;
mod background;
mod body;
mod branches;
pub mod calls;
mod compaction;
pub mod config;
mod conversations;
mod endpoints;
mod error;
mod forward;
mod headers;
mod known;
mod log;
pub mod mcp;
mod metrics;
mod parsed;
mod preamble;
mod prepare;
mod proxy;
mod received;
mod relay;
mod retention;
mod route;
pub mod savings;
mod secrets;
mod server;
mod session;
#[cfg(target_os = "linux")]
mod shm_fault;
mod split;
mod state;
mod store;
pub mod ui;
mod usage;
pub mod window;
mod workers;

pub use config::{ConfigError, LogFormat, ServeConfig, UnknownLogFormat};
pub use headers::{SESSION_HEADER, SWITCH_HEADER, TOKEN_HEADER};
pub use log::{init_logging, init_logging_to};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Why the proxy could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}; choose another --listen address")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] store::OpenError),
}

/// Counts of what the proxy did, since it started.
#[derive(Debug, Default)]
pub struct Stats {
    requests: AtomicU64,
    unchanged: AtomicU64,
    compacted: AtomicU64,
    resent: AtomicU64,
    untouched: AtomicU64,
    conversations: AtomicU64,
    preparing: Arc<AtomicU64>,
    savings: savings::Savings,
    metrics: metrics::Metrics,
}

impl Stats {
    fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self, action: log::Action) {
        let counter = match action {
            log::Action::Unchanged => &self.unchanged,
            log::Action::Compacted => &self.compacted,
            log::Action::Resent => &self.resent,
            log::Action::Untouched => &self.untouched,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests received.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Conversation requests sent with the client's body unchanged.
    pub fn unchanged(&self) -> u64 {
        self.unchanged.load(Ordering::Relaxed)
    }

    /// Conversation requests for which a compaction ran.
    pub fn compactions(&self) -> u64 {
        self.compacted.load(Ordering::Relaxed)
    }

    /// Conversation requests that resent an earlier compaction.
    pub fn resent(&self) -> u64 {
        self.resent.load(Ordering::Relaxed)
    }

    /// Large requests being prepared (or waiting for their turn) on the workers' pool.
    pub fn preparing(&self) -> u64 {
        self.preparing.load(Ordering::Relaxed)
    }

    /// Conversations whose state is held (as of the last conversation request).
    pub fn conversations(&self) -> u64 {
        self.conversations.load(Ordering::Relaxed)
    }

    fn set_conversations(&self, held: usize) {
        self.conversations.store(held as u64, Ordering::Relaxed);
    }

    /// Calls, compactions, tokens and estimated costs with and without contextfold.
    pub fn savings(&self) -> &savings::Savings {
        &self.savings
    }

    /// The metrics `/metrics` serves.
    pub(crate) fn metrics(&self) -> &metrics::Metrics {
        &self.metrics
    }

    /// Conversation requests forwarded as they came for a reason of their own (compaction
    /// turned off, server-side compaction or history the server holds, a body the
    /// compaction cannot read, a compacted request that would break a rule of the API).
    pub fn untouched(&self) -> u64 {
        self.untouched.load(Ordering::Relaxed)
    }
}

/// A bound proxy, ready to run.
pub struct Proxy {
    listener: tokio::net::TcpListener,
    app: Arc<app::App>,
    limits: server::Limits,
    retain: Option<std::time::Duration>,
}

impl Proxy {
    /// Checks `config` and binds its listen address.
    pub async fn bind(config: ServeConfig) -> Result<Proxy, ServeError> {
        config.check()?;
        allocator::tune();
        let upstream = forward::Upstream::new(&config)?;
        let openai = forward::Upstream::openai(&config)?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let stats = Arc::new(Stats::default());
        let store = match config.store.clone() {
            Some(location) => Some(store::ProxyStore::open(location, stats.metrics.store_errors()).await?),
            None => None,
        };
        let app = app::App {
            upstream,
            openai,
            settings: compaction::Settings {
                compactor: config.compactor.clone(),
                window: config.window,
                reserve: config.reserve,
                target: config.target,
                strategy: config.strategy,
            },
            conversations: conversations::Conversations::new(config.max_sessions),
            parsed: conversations::Conversations::new(config.max_sessions),
            known: known::KnownLists::new(config.max_sessions),
            preambles: preamble::Preambles::default(),
            mcp: mcp::Endpoint::new(store.as_ref(), config.allow_remote),
            ui: ui::Dashboard::for_proxy(
                store.as_ref().map(store::ProxyStore::sessions),
                config.auth_token.clone(),
                config.allow_remote,
            ),
            store,
            token: config.auth_token.clone(),
            max_body: config.max_body,
            idle_timeout: config.idle_timeout,
            log_format: config.log_format,
            workers: workers::Workers::for_this_machine(stats.preparing.clone()),
            stats,
            background: background::Background::default(),
        };
        let limits = server::Limits { header_timeout: config.header_timeout, max_connections: config.max_connections };
        Ok(Proxy { listener, app: Arc::new(app), limits, retain: config.retain })
    }

    /// The address it listens on (the port the system chose, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// The upstream Anthropic requests go to, as shown in log lines.
    pub fn upstream(&self) -> &str {
        self.app.upstream.shown()
    }

    /// The upstream OpenAI requests go to, as shown in log lines.
    pub fn upstream_openai(&self) -> &str {
        self.app.openai.shown()
    }

    /// Where conversations' compactions are kept (a path, or a URL without its password);
    /// `None` when state is held in memory only.
    pub fn store(&self) -> Option<String> {
        self.app.store.as_ref().map(|store| store.location().to_string())
    }

    /// What the proxy has done so far.
    pub fn stats(&self) -> Arc<Stats> {
        self.app.stats.clone()
    }

    /// Serves until `shutdown` resolves, then stops accepting and waits for the requests in
    /// flight (streams included) to finish, and for what their answers write back.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let background = self.app.background.clone();
        let limits = self.limits;
        let retention = match (&self.app.store, self.retain) {
            (Some(store), Some(retain)) => Some(tokio::spawn(retention::prune(store.clone(), retain))),
            _ => None,
        };
        let router = axum::Router::new().fallback(proxy::handle).with_state(self.app);
        server::serve(self.listener, router, limits, shutdown).await;
        retention.inspect(tokio::task::JoinHandle::abort);
        background.drain().await;
        Ok(())
    }
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    // The handlers are registered now, not when the future is first polled: a signal that
    // comes right after the address is printed must stop the process, not kill it.
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        async fn received(signal: Option<Signal>) {
            match signal {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        async move {
            tokio::select! {
                () = received(interrupt) => {}
                () = received(terminate) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
