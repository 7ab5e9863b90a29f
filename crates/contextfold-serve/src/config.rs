//! The proxy's configuration, with the defaults a user would choose, checked before binding.

use contextfold::compactor::{Compactor, Strategy};
use contextfold::middleware::DEFAULT_TARGET;
use contextfold::store::StoreLocation;
use reqwest::Url;
use std::net::SocketAddr;
use std::time::Duration;

/// Where the proxy listens by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";
/// Where it forwards Anthropic requests by default.
pub const DEFAULT_UPSTREAM: &str = "https://api.anthropic.com";
/// Where it forwards OpenAI requests by default (a base URL that ends in the API version,
/// as OpenAI clients' do).
pub const DEFAULT_UPSTREAM_OPENAI: &str = "https://api.openai.com/v1";
/// The largest request body by default: 512 MiB. A client that never compacts its own
/// history (the proxy answers with the usage of the compacted request) sends it whole on
/// every call, past the API's own 32 MiB limit after hours; what goes upstream is the
/// compacted request. A body is held once in memory while it is prepared, so this is also
/// about the most one request can cost.
pub const DEFAULT_MAX_BODY: usize = 512 * 1024 * 1024;
/// Tokens kept free for the answer by default (as `compact`).
pub const DEFAULT_RESERVE: u64 = 16_000;
/// Conversations whose state is held at once by default.
pub const DEFAULT_MAX_SESSIONS: usize = 1_000;
/// How long the upstream may take to answer by default (its response headers): ten
/// minutes, the time a long non-streaming answer may take.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a streaming upstream may stay silent by default.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a client may take to send a request's headers by default, counted from when its
/// connection is ready for one (opened, or its last answer sent).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// The shortest proxy token accepted: one a guess cannot find.
pub const MIN_TOKEN_LEN: usize = 16;

/// How the per-request log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One human-readable line per request.
    #[default]
    Text,
    /// One JSON object per request.
    Json,
}

/// A log format name that is not `text` or `json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format `{0}` (expected text or json)")]
pub struct UnknownLogFormat(pub String);

impl std::str::FromStr for LogFormat {
    type Err = UnknownLogFormat;

    fn from_str(name: &str) -> Result<LogFormat, UnknownLogFormat> {
        match name {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(UnknownLogFormat(other.to_owned())),
        }
    }
}

/// Everything `contextfold serve` is told. [`Default`] is the documented command-line default.
#[derive(Clone)]
pub struct ServeConfig {
    /// Where to listen (default 127.0.0.1:8787). Any address but loopback needs
    /// `allow_remote` and an `auth_token`.
    pub listen: SocketAddr,
    /// The API Anthropic requests go to (default <https://api.anthropic.com>); requests never
    /// name another host.
    pub upstream: String,
    /// The API OpenAI requests go to (default <https://api.openai.com/v1>): a base URL that
    /// ends in `/v1`, which the clients' paths start with.
    pub upstream_openai: String,
    /// Accept a non-loopback `listen` address.
    pub allow_remote: bool,
    /// A token every request must carry (`x-contextfold-token: T` or
    /// `Proxy-Authorization: Bearer T`), compared in constant time, but for the probes
    /// `/health` and `/ready`. Required off loopback.
    pub auth_token: Option<String>,
    /// The model's context window; `None` looks it up by the request's model
    /// ([`crate::window::model_window`]).
    pub window: Option<u64>,
    /// Tokens of the window kept free for the answer.
    pub reserve: u64,
    /// The share of the usable window a compaction aims for (default 0.2).
    pub target: f64,
    /// What a compaction may do.
    pub strategy: Strategy,
    /// The compactor: summarizer, token counter, redaction.
    pub compactor: Compactor,
    /// The largest request body accepted, in bytes (larger: 413).
    pub max_body: usize,
    /// How long the upstream may take to send its response headers (then 504).
    pub upstream_timeout: Duration,
    /// How long a streaming upstream may stay silent before the stream is cut.
    pub idle_timeout: Duration,
    /// Conversations whose state is held at once; the least recently used goes first.
    pub max_sessions: usize,
    /// How long a client may take to send a request's headers, counted from when its
    /// connection is ready for one (opened, or its last answer sent): so also how long a
    /// keep-alive connection may stay idle.
    pub header_timeout: Duration,
    /// The most client connections open at once (more wait to be accepted); by default half
    /// the process's open-file limit, at most 4,096.
    pub max_connections: usize,
    /// The store (a SQLite file or a PostgreSQL database) each conversation's compactions
    /// are kept in; `None` keeps state in memory only. Opened once, when the proxy binds.
    pub store: Option<StoreLocation>,
    /// How the per-request log lines are written.
    pub log_format: LogFormat,
    /// Sessions of the store not written for this long are deleted (checked at start-up and
    /// then every tenth of it, at most hourly); `None` keeps them.
    pub retain: Option<Duration>,
}

impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeConfig")
            .field("listen", &self.listen)
            .field("upstream", &self.upstream)
            .field("upstream_openai", &self.upstream_openai)
            .field("allow_remote", &self.allow_remote)
            .field("auth_token", &self.auth_token.as_ref().map(|_| "[set]"))
            .field("window", &self.window)
            .field("reserve", &self.reserve)
            .field("target", &self.target)
            .field("strategy", &self.strategy)
            .field("compactor", &self.compactor)
            .field("max_body", &self.max_body)
            .field("upstream_timeout", &self.upstream_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_sessions", &self.max_sessions)
            .field("header_timeout", &self.header_timeout)
            .field("retain", &self.retain)
            .field("max_connections", &self.max_connections)
            .field("store", &self.store.as_ref().map(ToString::to_string))
            .field("log_format", &self.log_format)
            .finish()
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: DEFAULT_LISTEN.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 8787))),
            upstream: DEFAULT_UPSTREAM.to_string(),
            upstream_openai: DEFAULT_UPSTREAM_OPENAI.to_string(),
            allow_remote: false,
            auth_token: None,
            window: None,
            reserve: DEFAULT_RESERVE,
            target: DEFAULT_TARGET,
            strategy: Strategy::Auto,
            compactor: Compactor::default(),
            max_body: DEFAULT_MAX_BODY,
            upstream_timeout: DEFAULT_UPSTREAM_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            retain: None,
            max_connections: crate::server::default_max_connections(),
            store: None,
            log_format: LogFormat::Text,
        }
    }
}

/// A configuration the proxy refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A non-loopback address without `--allow-remote`.
    #[error("refusing to listen on {0}: it is not a loopback address; pass --allow-remote (with an --auth-token) to accept other machines")]
    RemoteNotAllowed(SocketAddr),
    /// A non-loopback address without a token.
    #[error("refusing to listen on {0} without a proxy token; set --auth-token or CONTEXTFOLD_AUTH_TOKEN")]
    RemoteWithoutToken(SocketAddr),
    /// An empty token.
    #[error("the proxy token is empty; give --auth-token (or CONTEXTFOLD_AUTH_TOKEN) a value")]
    EmptyToken,
    /// A token too short, or with spaces or control characters, to be a secret.
    #[error("the proxy token must be at least {MIN_TOKEN_LEN} printable characters without spaces (it has {0}); use a long random one, e.g. `openssl rand -hex 24`")]
    WeakToken(usize),
    /// No room for connections.
    #[error("--max-connections must be at least 1")]
    NoConnections,
    /// A header timeout of zero.
    #[error("--header-timeout must be above zero")]
    HeaderTimeout,
    /// An upstream that is not an http(s) URL of a host.
    #[error("the upstream `{url}` is not usable: {why}")]
    Upstream {
        /// The URL as given (credentials removed).
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A target outside (0, 1].
    #[error("the target {0} is not a share of the window between 0 and 1")]
    Target(String),
    /// No room for conversations.
    #[error("--max-sessions must be at least 1")]
    NoSessions,
    /// A reserve as big as the window.
    #[error("the reserve ({reserve} tokens) leaves nothing of the window ({window} tokens)")]
    Reserve {
        /// The window.
        window: u64,
        /// The reserve.
        reserve: u64,
    },
}

impl ServeConfig {
    /// Checks the settings that cannot work together, before anything is bound.
    pub fn check(&self) -> Result<(), ConfigError> {
        match self.auth_token.as_deref() {
            Some("") => return Err(ConfigError::EmptyToken),
            Some(token) if token.chars().count() < MIN_TOKEN_LEN || !token.chars().all(|c| c.is_ascii_graphic()) => {
                return Err(ConfigError::WeakToken(token.chars().count()));
            }
            _ => {}
        }
        if self.max_connections == 0 {
            return Err(ConfigError::NoConnections);
        }
        if self.header_timeout.is_zero() {
            return Err(ConfigError::HeaderTimeout);
        }
        if !self.listen.ip().is_loopback() {
            if !self.allow_remote {
                return Err(ConfigError::RemoteNotAllowed(self.listen));
            }
            if self.auth_token.is_none() {
                return Err(ConfigError::RemoteWithoutToken(self.listen));
            }
        }
        if !(self.target > 0.0 && self.target <= 1.0) {
            return Err(ConfigError::Target(self.target.to_string()));
        }
        if self.max_sessions == 0 {
            return Err(ConfigError::NoSessions);
        }
        // Without --window, the smallest window the table gives is the default one.
        let window = self.window.unwrap_or(crate::window::DEFAULT_WINDOW);
        if self.reserve >= window {
            return Err(ConfigError::Reserve { window, reserve: self.reserve });
        }
        upstream_url(&self.upstream)?;
        upstream_url(&self.upstream_openai)?;
        Ok(())
    }
}
/// Checks the upstream base URL: http or https, a host, no credentials, no query.
pub(crate) fn upstream_url(text: &str) -> Result<Url, ConfigError> {
    let bad = |why: &str| ConfigError::Upstream { url: shown_url(text), why: why.to_string() };
    let url = Url::parse(text).map_err(|err| bad(&err.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("it must start with http:// or https://"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("it must not hold credentials (clients send their own keys)"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("it must not have a query or fragment"));
    }
    Ok(url)
}

/// `text` without any credentials it holds, for error messages.
pub(crate) fn shown_url(text: &str) -> String {
    match Url::parse(text) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        Err(_) => "(not a URL)".to_string(),
    }
}
