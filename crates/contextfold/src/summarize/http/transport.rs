//! One summarizer call over HTTP: POST a JSON body, retry what is worth retrying, and turn
//! every failure into a [`SummarizeError`] that names the status and the provider's message.
//!
//! Providers only build the body and read the answer; timeouts, retries, error messages
//! and keeping the key out of errors and logs are done here, once. Headers and bodies are
//! never logged.

use std::time::{Duration, Instant, SystemTime};

use contextfold_core::text::clip_chars;
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use serde_json::Value;

use super::retry::{self, RetryPolicy};
use super::secret::ApiKey;
use crate::summarize::SummarizeError;

/// How the key goes into a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// In a header of its own, e.g. `x-api-key`.
    Header(&'static str),
    /// As `Authorization: Bearer <key>`.
    Bearer,
}

/// Everything needed to send one provider's requests.
#[derive(Clone)]
pub(crate) struct Transport {
    /// The provider's name, for errors and logs.
    pub(crate) provider: &'static str,
    /// The base URL, as configured (shown in errors).
    pub(crate) base_url: String,
    /// The endpoint: the base URL and the API path.
    pub(crate) endpoint: String,
    /// The key, if any.
    pub(crate) key: Option<ApiKey>,
    /// How the key is sent.
    pub(crate) auth: Auth,
    /// Fixed extra headers, e.g. `anthropic-version`.
    pub(crate) headers: &'static [(&'static str, &'static str)],
    /// The limit for one attempt, answer body included.
    pub(crate) timeout: Duration,
    /// When to retry.
    pub(crate) retry: RetryPolicy,
    /// The HTTP client (a connection pool; cheap to clone).
    pub(crate) client: reqwest::Client,
}

/// How one attempt failed.
struct Failure {
    error: SummarizeError,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Transport {
    /// POSTs `body` and returns the text of a 2xx answer, retrying per the policy.
    pub(crate) async fn post(&self, body: &Value) -> Result<String, SummarizeError> {
        let bytes =
            serde_json::to_vec(body).map_err(|err| self.malformed(format!("cannot encode the request: {err}")))?;
        let started = Instant::now();
        let mut retries = 0;
        loop {
            tracing::debug!(
                provider = self.provider,
                attempt = retries + 1,
                body_bytes = bytes.len(),
                "sending summary request"
            );
            match self.attempt(bytes.clone()).await {
                Ok(text) => {
                    tracing::debug!(
                        provider = self.provider,
                        attempts = retries + 1,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "summary request answered"
                    );
                    return Ok(text);
                }
                Err(failure) => {
                    let error = self.redact(failure.error);
                    if !failure.retryable || retries >= self.retry.max_retries {
                        return Err(error);
                    }
                    retries += 1;
                    let wait = self.retry.wait(retries, failure.retry_after);
                    tracing::warn!(
                        provider = self.provider,
                        retry = retries,
                        max_retries = self.retry.max_retries,
                        wait_ms = wait.as_millis() as u64,
                        error = %error,
                        "summary request failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// A [`SummarizeError::Malformed`] for this provider, with the key redacted.
    pub(crate) fn malformed(&self, message: impl Into<String>) -> SummarizeError {
        self.redact(SummarizeError::Malformed { provider: self.provider, message: message.into() })
    }

    fn redact(&self, error: SummarizeError) -> SummarizeError {
        match &self.key {
            Some(key) => key.redact_error(error),
            None => error,
        }
    }

    /// One request and its answer's body.
    async fn attempt(&self, body: Vec<u8>) -> Result<String, Failure> {
        let mut request =
            self.client.post(&self.endpoint).timeout(self.timeout).header(CONTENT_TYPE, "application/json").body(body);
        for (name, value) in self.headers {
            request = request.header(*name, *value);
        }
        if let Some(key) = &self.key {
            request = match self.auth {
                Auth::Header(name) => request.header(name, self.sensitive(key.expose())?),
                Auth::Bearer => {
                    request.header(reqwest::header::AUTHORIZATION, self.sensitive(&format!("Bearer {}", key.expose()))?)
                }
            };
        }
        let response = request.send().await.map_err(|err| self.transport_failure(err))?;
        let status = response.status();
        let retry_after = server_wait(response.headers());
        let text = response.text().await.map_err(|err| self.transport_failure(err))?;
        if status.is_success() {
            return Ok(text);
        }
        let message = error_message(&text, status.canonical_reason());
        Err(Failure {
            error: SummarizeError::Status { provider: self.provider, status: status.as_u16(), message },
            retryable: retry::is_retryable(status.as_u16()),
            retry_after,
        })
    }

    /// A header value marked sensitive, so that reqwest's own `Debug` output hides it.
    /// (The builders check the key, so this does not fail in practice.)
    fn sensitive(&self, value: &str) -> Result<reqwest::header::HeaderValue, Failure> {
        let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| Failure {
            error: SummarizeError::Config {
                provider: self.provider,
                message: "the API key is not a valid HTTP header value".into(),
            },
            retryable: false,
            retry_after: None,
        })?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// A timeout, or a connection that failed or broke off.
    fn transport_failure(&self, err: reqwest::Error) -> Failure {
        if err.is_timeout() {
            return Failure {
                error: SummarizeError::Timeout { provider: self.provider, seconds: self.timeout.as_secs() },
                retryable: true,
                retry_after: None,
            };
        }
        Failure {
            retryable: !err.is_builder(),
            error: SummarizeError::Unreachable {
                provider: self.provider,
                url: self.base_url.clone(),
                message: error_chain(err),
            },
            retry_after: None,
        }
    }
}

/// The wait the server asked for, from `retry-after-ms` or `retry-after`.
fn server_wait(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    retry::retry_after(header("retry-after-ms"), header("retry-after"), SystemTime::now())
}

/// `err` and its causes, without the URL (the caller names the base URL itself).
fn error_chain(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut message = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            message.push_str(": ");
            message.push_str(&cause_text);
        }
        source = cause.source();
    }
    message
}

/// The longest error body quoted when it carries no recognisable message.
const MAX_QUOTED: usize = 300;

/// The provider's error message from an error answer's body.
///
/// Reads Anthropic's `{"type":"error","error":{"type":…,"message":…}}`, OpenAI's
/// `{"error":{"message":…,"type":…}}`, and the shapes of common compatible servers
/// (`{"error":"…"}`, `{"message":"…"}`, `{"detail":"…"}`); otherwise quotes the body,
/// clipped, or gives the status's reason for an empty body.
pub(crate) fn error_message(body: &str, reason: Option<&str>) -> String {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        let error = value.get("error");
        let message = text(error.and_then(|error| error.get("message")))
            .or_else(|| text(error))
            .or_else(|| text(value.get("message")))
            .or_else(|| text(value.get("detail")));
        if let Some(message) = message {
            return match text(error.and_then(|error| error.get("type"))) {
                Some(kind) => format!("{kind}: {message}"),
                None => message.to_owned(),
            };
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return reason.unwrap_or("no error message").to_owned();
    }
    clip_chars(body, MAX_QUOTED)
}

/// The text of `value`, if it is a non-blank string.
fn text(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|text| !text.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_providers_error_shape() {
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(error_message(anthropic, None), "authentication_error: invalid x-api-key");
        let openai = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(error_message(openai, None), "invalid_request_error: Incorrect API key provided");
        assert_eq!(error_message(r#"{"error":"model 'x' not found"}"#, None), "model 'x' not found");
        assert_eq!(error_message(r#"{"object":"error","message":"too long"}"#, None), "too long");
        assert_eq!(error_message(r#"{"detail":"Not Found"}"#, None), "Not Found");
        assert_eq!(error_message("  ", Some("Bad Gateway")), "Bad Gateway");
        assert_eq!(error_message("<html>oops</html>", None), "<html>oops</html>");
        let long = "é".repeat(400);
        let clipped = error_message(&long, None);
        assert_eq!(clipped.chars().count(), MAX_QUOTED + 1);
        assert!(clipped.ends_with('…'));
    }
}
