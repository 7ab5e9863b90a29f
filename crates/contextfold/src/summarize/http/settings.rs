//! The knobs both HTTP summarizers share, their defaults, and checking them at `build()`.
//!
//! Each provider's builder wraps a [`Settings`] and gets the same setters from
//! [`shared_setters!`], so the two builders cannot drift apart. A builder's `build()`
//! rejects what cannot work (no key where one is needed, a base URL that is not a URL,
//! zero tokens or a zero timeout) instead of failing on the first request.

use std::fmt;
use std::time::Duration;

use super::retry::RetryPolicy;
use super::secret::ApiKey;
use super::transport::{Auth, Transport};
use crate::summarize::SummarizeError;

/// The summary's default token limit.
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 4096;
/// The default limit for one attempt.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The default number of retries after the first attempt.
pub(crate) const DEFAULT_MAX_RETRIES: u32 = 4;
/// The default wait before the first retry.
pub(crate) const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// What distinguishes one provider's API.
pub(crate) struct Provider {
    /// The name in errors and logs.
    pub(crate) name: &'static str,
    /// The environment variable that holds the key.
    pub(crate) key_variable: &'static str,
    /// Whether a request without a key is pointless (a hosted API) or fine (a local server).
    pub(crate) key_required: bool,
    /// The base URL when none is set.
    pub(crate) default_base_url: &'static str,
    /// The model when none is set.
    pub(crate) default_model: &'static str,
    /// The path after the base URL.
    pub(crate) path: &'static str,
    /// How the key is sent.
    pub(crate) auth: Auth,
    /// Fixed extra headers.
    pub(crate) headers: &'static [(&'static str, &'static str)],
}

/// A builder's state.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) base_url: Option<String>,
    pub(crate) api_key: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) max_tokens: u64,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) retry_backoff: Duration,
    pub(crate) input_budget: u64,
    pub(crate) client: Option<reqwest::Client>,
}

/// What `build()` hands a summarizer.
pub(crate) struct Built {
    pub(crate) model: String,
    pub(crate) max_tokens: u64,
    pub(crate) input_budget: u64,
    pub(crate) transport: Transport,
}

impl Settings {
    /// The defaults, with nothing read from the environment.
    pub(crate) fn new(input_budget: u64) -> Settings {
        Settings {
            base_url: None,
            api_key: None,
            model: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
            input_budget,
            client: None,
        }
    }

    /// The defaults, with the key and base URL from `key_variable` and `base_variable`
    /// (unset or blank variables are ignored).
    pub(crate) fn from_env(input_budget: u64, key_variable: &str, base_variable: &str) -> Settings {
        let read = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
        Settings { api_key: read(key_variable), base_url: read(base_variable), ..Settings::new(input_budget) }
    }

    /// Checks the settings and sets up the transport for `provider`.
    pub(crate) fn build(self, provider: &Provider) -> Result<Built, SummarizeError> {
        let config = |message: String| SummarizeError::Config { provider: provider.name, message };
        let key = self.api_key.as_deref().and_then(ApiKey::new);
        if key.is_none() && provider.key_required {
            return Err(SummarizeError::MissingKey { provider: provider.name, variable: provider.key_variable });
        }
        let redact = |text: &str| key.as_ref().map_or_else(|| text.to_owned(), |key| key.redact(text));
        if let Some(key) = &key {
            if reqwest::header::HeaderValue::from_str(key.expose()).is_err() {
                return Err(config("the API key is not a valid HTTP header value".into()));
            }
        }
        let base_url = self.base_url.as_deref().unwrap_or(provider.default_base_url).trim().trim_end_matches('/');
        match reqwest::Url::parse(base_url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            Ok(url) => {
                return Err(config(format!(
                    "base URL `{}`: the scheme must be http or https, not {}",
                    redact(base_url),
                    url.scheme()
                )))
            }
            Err(err) => return Err(config(format!("base URL `{}` is not a URL: {err}", redact(base_url)))),
        }
        if self.max_tokens == 0 {
            return Err(config("max_tokens is 0; a summary needs at least 1 token".into()));
        }
        if self.timeout.is_zero() {
            return Err(config("the timeout is 0; every request would time out".into()));
        }
        let model =
            self.model.filter(|model| !model.trim().is_empty()).unwrap_or_else(|| provider.default_model.to_owned());
        let client = match self.client {
            Some(client) => client,
            None => reqwest::Client::builder()
                .user_agent(concat!("contextfold/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|err| config(format!("cannot set up the HTTP client: {err}")))?,
        };
        let transport = Transport {
            provider: provider.name,
            base_url: base_url.to_owned(),
            endpoint: format!("{base_url}{}", provider.path),
            key,
            auth: provider.auth,
            headers: provider.headers,
            timeout: self.timeout,
            retry: RetryPolicy { max_retries: self.max_retries, base: self.retry_backoff },
            client,
        };
        Ok(Built { model, max_tokens: self.max_tokens, input_budget: self.input_budget, transport })
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("base_url", &self.base_url.as_ref().map(|url| redact_opt(self.api_key.as_deref(), url)))
            .field("api_key", &self.api_key.as_ref().map(|_| super::secret::REDACTED))
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff", &self.retry_backoff)
            .field("input_budget", &self.input_budget)
            .field("custom_client", &self.client.is_some())
            .finish()
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("endpoint", &redact_opt(self.key.as_ref().map(ApiKey::expose), &self.endpoint))
            .field("api_key", &self.key)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.retry.max_retries)
            .field("retry_backoff", &self.retry.base)
            .finish()
    }
}

/// `text` with `key` redacted, if there is a (non-blank) key.
fn redact_opt(key: Option<&str>, text: &str) -> String {
    match key.and_then(ApiKey::new) {
        Some(key) => key.redact(text),
        None => text.to_owned(),
    }
}

/// The setters both builders share; `$budget` is the default input budget, for the docs.
macro_rules! shared_setters {
    ($budget:literal) => {
        /// The server's base URL, without the API path (which is appended). Default: the
        /// provider's public API, or the provider's `*_BASE_URL` variable with `from_env`.
        pub fn base_url(mut self, url: impl Into<String>) -> Self {
            self.settings.base_url = Some(url.into());
            self
        }

        /// The API key, replacing any read from the environment. It is sent in a header and
        /// never printed: `Debug` output and errors show `[redacted]`.
        pub fn api_key(mut self, key: impl Into<String>) -> Self {
            self.settings.api_key = Some(key.into());
            self
        }

        /// The most tokens a summary may have. Default: 4096. A request's own
        /// `max_summary_tokens`, when lower and not 0, wins. Must not be 0.
        pub fn max_tokens(mut self, tokens: u64) -> Self {
            self.settings.max_tokens = tokens;
            self
        }

        /// The limit for one attempt, the answer's body included. Default: 120 s. A long
        /// transcript can take a while to summarize; a short limit costs retries.
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.timeout = timeout;
            self
        }

        /// Retries after the first attempt on 429, 500–504, 529, timeouts and connection
        /// errors (never on other 4xx). Default: 4. Each retry is a paid request.
        pub fn max_retries(mut self, retries: u32) -> Self {
            self.settings.max_retries = retries;
            self
        }

        /// The wait before the first retry; it doubles with each further retry (with
        /// jitter, at most 60 s). A server's `retry-after` replaces it. Default: 1 s.
        pub fn retry_backoff(mut self, base: std::time::Duration) -> Self {
            self.settings.retry_backoff = base;
            self
        }

        #[doc = concat!(
                                    "The most transcript tokens one request may carry ([`Summarizer::input_budget`]). ",
                                    "Default: ",
                                    $budget,
                                    ". Set it below the model's context window, less the summary's `max_tokens`.\n\n",
                                    "[`Summarizer::input_budget`]: crate::summarize::Summarizer::input_budget"
                                )]
        pub fn input_budget(mut self, tokens: u64) -> Self {
            self.settings.input_budget = tokens;
            self
        }

        /// A `reqwest` client of your own (for a proxy, custom certificates or a shared
        /// connection pool). Default: a new client. The timeout above still applies.
        pub fn http_client(mut self, client: reqwest::Client) -> Self {
            self.settings.client = Some(client);
            self
        }
    };
}

pub(crate) use shared_setters;
