//! LLM summarizers over HTTP: [`Anthropic`] (Messages API) and [`OpenAiCompatible`] (Chat
//! Completions: OpenAI, vLLM, llama.cpp, Ollama).
//!
//! Both send the prompt the core builds ([`contextfold_core::prompt::summary_prompt`]) as
//! one system prompt and one user message, and share one transport: a per-attempt
//! timeout, retries with exponential backoff and jitter on 429, 500–504, 529, timeouts and
//! connection errors (honouring `retry-after`), no retry on other 4xx, and errors that
//! name the status and the provider's message. The API key is never logged and is
//! redacted from errors and `Debug` output.
//!
//! ```no_run
//! use contextfold::summarize::http::Anthropic;
//! use contextfold::summarize::{Summarizer, SummaryRequest};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), contextfold::summarize::SummarizeError> {
//! let summarizer = Anthropic::from_env().timeout(Duration::from_secs(60)).build()?;
//! let request = SummaryRequest { transcript: "[user]\nfix the parser\n".into(), ..Default::default() };
//! let summary = summarizer.summarize(&request).await?;
//! assert!(!summary.text.is_empty());
//! # Ok(()) }
//! ```

mod anthropic;
mod openai;
mod retry;
mod secret;
mod settings;
mod transport;

pub use anthropic::{Anthropic, AnthropicBuilder};
pub use openai::{OpenAiCompatible, OpenAiCompatibleBuilder};

use serde_json::Value;

/// The summary's token limit for one request: the configured limit, or the request's own
/// when that is lower and not 0.
fn summary_tokens(configured: u64, requested: u64) -> u64 {
    if requested > 0 {
        configured.min(requested)
    } else {
        configured
    }
}

/// A token count from a provider's `usage` object; 0 when absent.
fn usage_field(usage: Option<&Value>, name: &str) -> u64 {
    usage.and_then(|usage| usage.get(name)).and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_nonzero_limit_wins() {
        assert_eq!(summary_tokens(4096, 0), 4096);
        assert_eq!(summary_tokens(4096, 1000), 1000);
        assert_eq!(summary_tokens(4096, 9000), 4096);
    }
}
