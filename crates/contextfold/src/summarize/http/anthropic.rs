//! The Anthropic Messages API as a [`Summarizer`]: one system prompt, one user message.
//!
//! The prompt comes from the core ([`summary_prompt`]); this module only shapes the body
//! and reads the answer. Sending, retrying and error messages live in the transport.

use std::fmt;

use contextfold_core::prompt::{summary_prompt, PROMPT_VERSION};
use serde_json::{json, Value};

use super::settings::{shared_setters, Built, Provider, Settings};
use super::transport::{Auth, Transport};
use super::{summary_tokens, usage_field};
use crate::summarize::{BoxFuture, SummarizeError, Summarizer, Summary, SummaryRequest, Usage};

const PROVIDER: Provider = Provider {
    name: "Anthropic",
    key_variable: "ANTHROPIC_API_KEY",
    key_required: true,
    default_base_url: "https://api.anthropic.com",
    default_model: Anthropic::DEFAULT_MODEL,
    path: "/v1/messages",
    auth: Auth::Header("x-api-key"),
    headers: &[("anthropic-version", "2023-06-01")],
};

/// Summarizes with a Claude model over the Anthropic Messages API.
///
/// ```no_run
/// use contextfold::summarize::http::Anthropic;
///
/// # fn main() -> Result<(), contextfold::summarize::SummarizeError> {
/// // ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL) from the environment:
/// let summarizer = Anthropic::from_env().model("claude-sonnet-4-5").build()?;
/// # Ok(()) }
/// ```
pub struct Anthropic {
    model: String,
    max_tokens: u64,
    input_budget: u64,
    transport: Transport,
}

/// Configures an [`Anthropic`] summarizer; made by [`Anthropic::builder`] or
/// [`Anthropic::from_env`].
#[derive(Debug, Clone)]
pub struct AnthropicBuilder {
    settings: Settings,
}

impl Anthropic {
    /// The model used unless [`AnthropicBuilder::model`] says otherwise.
    pub const DEFAULT_MODEL: &'static str = "claude-haiku-4-5";
    /// The input budget used unless [`AnthropicBuilder::input_budget`] says otherwise.
    pub const DEFAULT_INPUT_BUDGET: u64 = 150_000;

    /// A builder with the defaults and nothing read from the environment; set the key
    /// with [`AnthropicBuilder::api_key`].
    pub fn builder() -> AnthropicBuilder {
        AnthropicBuilder { settings: Settings::new(Self::DEFAULT_INPUT_BUDGET) }
    }

    /// A builder with the key from `ANTHROPIC_API_KEY` and the base URL from
    /// `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`). Without a key,
    /// [`AnthropicBuilder::build`] fails with [`SummarizeError::MissingKey`].
    pub fn from_env() -> AnthropicBuilder {
        AnthropicBuilder {
            settings: Settings::from_env(Self::DEFAULT_INPUT_BUDGET, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        }
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }
}

impl AnthropicBuilder {
    /// The model to ask. Default: [`Anthropic::DEFAULT_MODEL`], fast and cheap; a larger
    /// model writes better summaries at a higher cost.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.settings.model = Some(model.into());
        self
    }

    shared_setters!("150 000");

    /// Checks the configuration: fails with [`SummarizeError::MissingKey`] without a key,
    /// and with [`SummarizeError::Config`] for a base URL that is not an http(s) URL, a
    /// zero `max_tokens` or a zero timeout.
    pub fn build(self) -> Result<Anthropic, SummarizeError> {
        let Built { model, max_tokens, input_budget, transport } = self.settings.build(&PROVIDER)?;
        Ok(Anthropic { model, max_tokens, input_budget, transport })
    }
}

impl Summarizer for Anthropic {
    fn id(&self) -> String {
        format!("anthropic:{}/{PROMPT_VERSION}", self.model)
    }

    fn input_budget(&self) -> u64 {
        self.input_budget
    }

    fn summarize<'a>(&'a self, request: &'a SummaryRequest) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move {
            let prompt = summary_prompt(&request.transcript, request.previous.as_deref(), &request.instructions);
            let body = json!({
                "model": self.model,
                "max_tokens": summary_tokens(self.max_tokens, request.max_summary_tokens),
                "system": prompt.system,
                "messages": [{"role": "user", "content": prompt.user}],
            });
            let text = self.transport.post(&body).await?;
            parse(&text).map_err(|message| self.transport.malformed(message))
        })
    }
}

/// Reads a Messages API answer: the text blocks of `content`, joined, and the usage.
fn parse(text: &str) -> Result<Summary, String> {
    let answer: Value = serde_json::from_str(text).map_err(|err| format!("the answer is not JSON ({err})"))?;
    let content =
        answer.get("content").and_then(Value::as_array).ok_or_else(|| "the answer has no `content` list".to_owned())?;
    let summary: String = content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    let summary = summary.trim();
    if summary.is_empty() {
        return Err("the answer has no text".to_owned());
    }
    let stop_reason = answer.get("stop_reason").and_then(Value::as_str);
    if stop_reason == Some("max_tokens") {
        tracing::warn!(provider = PROVIDER.name, "the summary was cut off at max_tokens");
    }
    let usage = answer.get("usage");
    // Cached input is counted apart from `input_tokens`; all of it was input.
    let input_tokens = usage_field(usage, "input_tokens")
        + usage_field(usage, "cache_creation_input_tokens")
        + usage_field(usage, "cache_read_input_tokens");
    Ok(Summary {
        text: summary.to_owned(),
        usage: Usage { input_tokens, output_tokens: usage_field(usage, "output_tokens") },
    })
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("input_budget", &self.input_budget)
            .field("transport", &self.transport)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_text_blocks_and_counts_cached_input() {
        let answer = r###"{"content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"## Goal\n"},
            {"type":"text","text":"- fix it\n"}],"stop_reason":"end_turn",
            "usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":7}}"###;
        let summary = parse(answer).unwrap();
        assert_eq!(summary.text, "## Goal\n- fix it");
        assert_eq!(summary.usage, Usage { input_tokens: 15, output_tokens: 7 });
    }

    #[test]
    fn an_answer_without_text_is_malformed() {
        assert!(parse(r#"{"content":[]}"#).unwrap_err().contains("no text"));
        assert!(parse(r#"{"id":"x"}"#).unwrap_err().contains("content"));
        assert!(parse("<html>").unwrap_err().contains("not JSON"));
    }
}
