//! Keeping the API key out of logs, errors and `Debug` output.
//!
//! The key lives in an [`ApiKey`] whose `Debug` prints `[redacted]`, and every error the
//! HTTP summarizers return passes through [`ApiKey::redact_error`], which replaces any echo
//! of the key (a server quoting it back, a key pasted into a base URL) with `[redacted]`.

use std::fmt;

use super::super::SummarizeError;

/// What a secret is replaced with.
pub(crate) const REDACTED: &str = "[redacted]";

/// An API key that never prints itself.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ApiKey(String);

impl ApiKey {
    /// Wraps `key`; an empty or blank key counts as none.
    pub(crate) fn new(key: impl Into<String>) -> Option<ApiKey> {
        let key = key.into().trim().to_owned();
        (!key.is_empty()).then_some(ApiKey(key))
    }

    /// The key itself, for the request header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `[redacted]`.
    pub(crate) fn redact(&self, text: &str) -> String {
        text.replace(&self.0, REDACTED)
    }

    /// `err` with the key redacted from every text it carries.
    pub(crate) fn redact_error(&self, err: SummarizeError) -> SummarizeError {
        match err {
            SummarizeError::Status { provider, status, message } => {
                SummarizeError::Status { provider, status, message: self.redact(&message) }
            }
            SummarizeError::Unreachable { provider, url, message } => {
                SummarizeError::Unreachable { provider, url: self.redact(&url), message: self.redact(&message) }
            }
            SummarizeError::Malformed { provider, message } => {
                SummarizeError::Malformed { provider, message: self.redact(&message) }
            }
            SummarizeError::Config { provider, message } => {
                SummarizeError::Config { provider, message: self.redact(&message) }
            }
            other => other,
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_keys_are_none_and_debug_hides_the_key() {
        assert!(ApiKey::new("  ").is_none());
        let key = ApiKey::new(" sk-secret ").unwrap();
        assert_eq!(key.expose(), "sk-secret");
        assert_eq!(format!("{key:?}"), "[redacted]");
    }

    #[test]
    fn redacts_every_text_of_an_error() {
        let key = ApiKey::new("sk-secret").unwrap();
        let err = key.redact_error(SummarizeError::Unreachable {
            provider: "Anthropic",
            url: "http://h/?key=sk-secret".into(),
            message: "sk-secret and sk-secret".into(),
        });
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(shown.contains("[redacted] and [redacted]"), "{shown}");
    }
}
