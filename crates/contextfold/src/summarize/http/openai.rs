//! OpenAI Chat Completions as a [`Summarizer`], for OpenAI itself and the servers that
//! speak its API (vLLM, llama.cpp's server, Ollama's `/v1`, …).
//!
//! Local servers often need no key, so a missing key is not an error here: the request
//! then carries no `Authorization` header at all. Sending and retrying live in the
//! transport; this module only shapes the body and reads the answer.

use std::fmt;

use contextfold_core::prompt::{summary_prompt, PROMPT_VERSION};
use serde_json::{json, Value};

use super::settings::{shared_setters, Built, Provider, Settings};
use super::transport::{error_message, Auth, Transport};
use super::{summary_tokens, usage_field};
use crate::summarize::{BoxFuture, SummarizeError, Summarizer, Summary, SummaryRequest, Usage};

const PROVIDER: Provider = Provider {
    name: "OpenAI-compatible server",
    key_variable: "OPENAI_API_KEY",
    key_required: false,
    default_base_url: "https://api.openai.com/v1",
    default_model: OpenAiCompatible::DEFAULT_MODEL,
    path: "/chat/completions",
    auth: Auth::Bearer,
    headers: &[],
};

/// Summarizes over an OpenAI-compatible Chat Completions API.
///
/// ```no_run
/// use contextfold::summarize::http::OpenAiCompatible;
///
/// # fn main() -> Result<(), contextfold::summarize::SummarizeError> {
/// // A local Ollama server: no key needed.
/// let summarizer = OpenAiCompatible::builder()
///     .base_url("http://localhost:11434/v1")
///     .model("qwen2.5:7b")
///     .input_budget(24_000)
///     .build()?;
/// # Ok(()) }
/// ```
pub struct OpenAiCompatible {
    model: String,
    max_tokens: u64,
    input_budget: u64,
    transport: Transport,
}

/// Configures an [`OpenAiCompatible`] summarizer; made by [`OpenAiCompatible::builder`]
/// or [`OpenAiCompatible::from_env`].
#[derive(Debug, Clone)]
pub struct OpenAiCompatibleBuilder {
    settings: Settings,
}

impl OpenAiCompatible {
    /// The model used unless [`OpenAiCompatibleBuilder::model`] says otherwise.
    pub const DEFAULT_MODEL: &'static str = "gpt-4o-mini";
    /// The input budget used unless [`OpenAiCompatibleBuilder::input_budget`] says
    /// otherwise: room for the prompt and a summary in a 128k-token window.
    pub const DEFAULT_INPUT_BUDGET: u64 = 100_000;

    /// A builder with the defaults (base URL `https://api.openai.com/v1`, no key) and
    /// nothing read from the environment.
    pub fn builder() -> OpenAiCompatibleBuilder {
        OpenAiCompatibleBuilder { settings: Settings::new(Self::DEFAULT_INPUT_BUDGET) }
    }

    /// A builder with the key from `OPENAI_API_KEY` (none if unset: fine for local
    /// servers) and the base URL from `OPENAI_BASE_URL` (default
    /// `https://api.openai.com/v1`).
    pub fn from_env() -> OpenAiCompatibleBuilder {
        OpenAiCompatibleBuilder {
            settings: Settings::from_env(Self::DEFAULT_INPUT_BUDGET, "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        }
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }
}

impl OpenAiCompatibleBuilder {
    /// The model to ask, as the server names it. Default: [`OpenAiCompatible::DEFAULT_MODEL`].
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.settings.model = Some(model.into());
        self
    }

    shared_setters!("100 000");

    /// Checks the configuration: fails with [`SummarizeError::Config`] for a base URL that
    /// is not an http(s) URL, a zero `max_tokens` or a zero timeout. No key is fine.
    pub fn build(self) -> Result<OpenAiCompatible, SummarizeError> {
        let Built { model, max_tokens, input_budget, transport } = self.settings.build(&PROVIDER)?;
        Ok(OpenAiCompatible { model, max_tokens, input_budget, transport })
    }
}

impl Summarizer for OpenAiCompatible {
    fn id(&self) -> String {
        format!("openai:{}/{PROMPT_VERSION}", self.model)
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
                "messages": [
                    {"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.user},
                ],
            });
            let text = self.transport.post(&body).await?;
            parse(&text).map_err(|message| self.transport.malformed(message))
        })
    }
}

/// Reads a Chat Completions answer: `choices[0].message.content` and the usage (zeros when
/// the server reports none).
fn parse(text: &str) -> Result<Summary, String> {
    let answer: Value = serde_json::from_str(text).map_err(|err| format!("the answer is not JSON ({err})"))?;
    let Some(choice) = answer.get("choices").and_then(|choices| choices.get(0)) else {
        // Some servers answer an error with status 200.
        if answer.get("error").is_some() {
            return Err(format!("the answer is an error: {}", error_message(text, None)));
        }
        return Err("the answer has no `choices`".to_owned());
    };
    let summary = choice.pointer("/message/content").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if summary.is_empty() {
        return Err("the answer has no text in `choices[0].message.content`".to_owned());
    }
    if choice.get("finish_reason").and_then(Value::as_str) == Some("length") {
        tracing::warn!(provider = PROVIDER.name, "the summary was cut off at max_tokens");
    }
    let usage = answer.get("usage");
    Ok(Summary {
        text: summary.to_owned(),
        usage: Usage {
            input_tokens: usage_field(usage, "prompt_tokens"),
            output_tokens: usage_field(usage, "completion_tokens"),
        },
    })
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
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
    fn reads_the_first_choice_and_tolerates_missing_usage() {
        let answer =
            r#"{"choices":[{"message":{"role":"assistant","content":" ## Goal\n- x "},"finish_reason":"stop"}]}"#;
        let summary = parse(answer).unwrap();
        assert_eq!(summary.text, "## Goal\n- x");
        assert_eq!(summary.usage, Usage::default());
    }

    #[test]
    fn an_answer_without_text_is_malformed() {
        assert!(parse(r#"{"choices":[{"message":{"content":null}}]}"#).unwrap_err().contains("no text"));
        assert!(parse(r#"{"choices":[]}"#).unwrap_err().contains("choices"));
        assert!(parse(r#"{"error":{"message":"boom"}}"#).unwrap_err().contains("boom"));
        assert!(parse("not json").unwrap_err().contains("not JSON"));
    }
}
