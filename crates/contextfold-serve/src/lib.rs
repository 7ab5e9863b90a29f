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

mod background;
mod body;
mod compaction;
pub mod config;
mod conversations;
mod error;
mod forward;
mod headers;
mod known;
mod log;
mod openai;
mod parsed;
mod preamble;
mod prepare;
mod proxy;
mod relay;
mod route;
mod secrets;
mod session;
mod split;
mod state;
mod store;
mod usage;
pub mod window;

pub use config::{ConfigError, LogFormat, ServeConfig, UnknownLogFormat};
pub use headers::{SESSION_HEADER, SWITCH_HEADER, TOKEN_HEADER};
pub use log::init_logging;

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
    /// The server failed while running.
    #[error("the server stopped: {0}")]
    Serve(std::io::Error),
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

    /// Conversations whose state is held (as of the last conversation request).
    pub fn conversations(&self) -> u64 {
        self.conversations.load(Ordering::Relaxed)
    }

    fn set_conversations(&self, held: usize) {
        self.conversations.store(held as u64, Ordering::Relaxed);
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
    app: Arc<proxy::App>,
}

impl Proxy {
    /// Checks `config` and binds its listen address.
    pub async fn bind(config: ServeConfig) -> Result<Proxy, ServeError> {
        config.check()?;
        let upstream = forward::Upstream::new(&config)?;
        let openai = forward::Upstream::openai(&config)?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let store = match config.store.clone() {
            Some(location) => Some(store::ProxyStore::open(location).await?),
            None => None,
        };
        let app = proxy::App {
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
            store,
            token: config.auth_token.clone(),
            max_body: config.max_body,
            idle_timeout: config.idle_timeout,
            log_format: config.log_format,
            stats: Arc::new(Stats::default()),
            background: background::Background::default(),
        };
        Ok(Proxy { listener, app: Arc::new(app) })
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
        use axum::serve::ListenerExt;
        let background = self.app.background.clone();
        let router = axum::Router::new().fallback(proxy::handle).with_state(self.app);
        // Small stream frames go out at once.
        let listener = self.listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let served = axum::serve(listener, router).with_graceful_shutdown(shutdown).await.map_err(ServeError::Serve);
        background.drain().await;
        served
    }
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
