//! An upstream: one fixed base URL, one connection pool, and the request as it goes out.
//! There are two, the Anthropic API's and the OpenAI API's.
//!
//! The target is always the configured base followed by the request's path and query (for
//! OpenAI, whose base URL ends in the API version, the path after its `/v1`), so
//! no request can name another host (no open relay; an absolute-form request line or a
//! path such as `//elsewhere` stays on the upstream). Redirects are relayed to the client,
//! never followed: following one would send the client's key wherever it pointed.

use crate::config::{shown_url, upstream_url, ConfigError, ServeConfig};
use crate::error::ProxyError;
use axum::http::{HeaderMap, Method};
use bytes::Bytes;
use reqwest::Url;
use std::time::Duration;

/// The upstream API and how to reach it.
#[derive(Debug, Clone)]
pub struct Upstream {
    client: reqwest::Client,
    base: Url,
    /// The start of every client path that the base URL already ends in.
    prefix: &'static str,
    /// The base as log lines and errors show it.
    shown: String,
    timeout: Duration,
}

impl Upstream {
    /// The Anthropic upstream `config` names (`--upstream`).
    pub fn new(config: &ServeConfig) -> Result<Upstream, ConfigError> {
        Upstream::at(&config.upstream, "", config)
    }

    /// The OpenAI upstream `config` names (`--upstream-openai`): its base URL ends in `/v1`,
    /// as OpenAI clients' base URLs do, so `/v1/chat/completions` goes to its
    /// `/chat/completions`.
    pub fn openai(config: &ServeConfig) -> Result<Upstream, ConfigError> {
        Upstream::at(&config.upstream_openai, "/v1", config)
    }

    fn at(url: &str, prefix: &'static str, config: &ServeConfig) -> Result<Upstream, ConfigError> {
        let base = upstream_url(url)?;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .connect_timeout(config.upstream_timeout.min(Duration::from_secs(30)));
        // A proxy set in the environment is for the outside world, not for this machine.
        let host = base.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        if crate::headers::is_loopback_name(host) {
            builder = builder.no_proxy();
        }
        let client =
            builder.build().map_err(|err| ConfigError::Upstream { url: shown_url(url), why: err.to_string() })?;
        let shown = base.as_str().trim_end_matches('/').to_string();
        Ok(Upstream { client, base, prefix, shown, timeout: config.upstream_timeout })
    }

    /// The base URL, for log lines and errors.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The URL `path_and_query` (as the client sent it, from `/`) resolves to: the base,
    /// then the path, always on the base's host.
    fn target(&self, path_and_query: &str) -> Result<Url, ProxyError> {
        let path = match path_and_query.strip_prefix(self.prefix) {
            Some(rest) if rest.is_empty() || rest.starts_with(['/', '?']) => rest,
            _ => path_and_query,
        };
        let joined = format!("{}{}", self.base.as_str().trim_end_matches('/'), path);
        match Url::parse(&joined) {
            Ok(url) if url.host() == self.base.host() && url.port() == self.base.port() => Ok(url),
            _ => Err(ProxyError::bad_request("the request path cannot be forwarded to the upstream")),
        }
    }

    /// Sends the request and waits for the upstream's response headers, at most the
    /// upstream timeout.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<reqwest::Response, ProxyError> {
        let url = self.target(path_and_query)?;
        // A body, even an empty one, goes with the methods that carry one (and says its length).
        let carries_body = !body.is_empty() || matches!(method, Method::POST | Method::PUT | Method::PATCH);
        let mut request = self.client.request(method, url).headers(headers);
        if carries_body {
            request = request.body(body);
        }
        match tokio::time::timeout(self.timeout, request.send()).await {
            Err(_) => Err(ProxyError::timeout(&self.shown, self.timeout.as_secs_f64())),
            Ok(Err(err)) => Err(ProxyError::unreachable(&self.shown, &describe(err))),
            Ok(Ok(response)) => Ok(response),
        }
    }
}

/// What went wrong reaching the upstream, without the URL (its query may hold a key).
fn describe(err: reqwest::Error) -> String {
    let connect = err.is_connect();
    let err = err.without_url();
    let mut cause: &dyn std::error::Error = &err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    let cause = cause.to_string();
    if connect {
        format!("could not connect ({cause})")
    } else {
        cause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_must_be_plain_http_urls() {
        assert!(upstream_url("https://api.anthropic.com").is_ok());
        assert!(upstream_url("http://127.0.0.1:9000/prefix").is_ok());
        for bad in ["ftp://x", "not a url", "https://user:sk-ant-secret@host", "https://h/?key=1", "unix:/tmp/s"] {
            let err = upstream_url(bad).unwrap_err().to_string();
            assert!(!err.contains("sk-ant-secret"), "{err}");
        }
    }

    #[test]
    fn targets_stay_on_the_upstream() {
        let config = ServeConfig { upstream: "http://127.0.0.1:9/base".into(), ..ServeConfig::default() };
        let upstream = Upstream::new(&config).unwrap();
        assert_eq!(
            upstream.target("/v1/messages?beta=true").unwrap().as_str(),
            "http://127.0.0.1:9/base/v1/messages?beta=true"
        );
        let sneaky = upstream.target("//evil.example/v1/models").unwrap();
        assert_eq!(sneaky.host_str(), Some("127.0.0.1"));
        let at = upstream.target("@evil.example/x");
        assert!(at.map_or(true, |url| url.host_str() == Some("127.0.0.1")));
        let config = ServeConfig { upstream_openai: "http://127.0.0.1:9/v1".into(), ..ServeConfig::default() };
        let openai = Upstream::openai(&config).unwrap();
        assert_eq!(openai.target("/v1/chat/completions").unwrap().as_str(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(openai.target("/v1/models?limit=2").unwrap().as_str(), "http://127.0.0.1:9/v1/models?limit=2");
        assert_eq!(openai.target("/v1x").unwrap().as_str(), "http://127.0.0.1:9/v1/v1x");
    }
}
