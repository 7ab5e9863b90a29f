//! Summarizers: turn the folded head (and the previous summary) into a new summary.
//!
//! [`Extractive`] is the offline, deterministic default. The HTTP summarizers ask an LLM
//! with the prompt the core builds ([`contextfold_core::prompt`]). All of them are
//! [`Summarizer`]s, so the compactor treats them alike.

mod extractive;
#[cfg(feature = "http")]
pub mod http;

pub use extractive::Extractive;

use contextfold_core::prompt::Instructions;
use contextfold_core::Message;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;

/// A boxed future, so summarizers can be used as trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a summarizer is asked to summarize.
#[derive(Debug, Clone, Default)]
pub struct SummaryRequest {
    /// The messages to fold (without a previous summary or a pinned request).
    pub head: Vec<Message>,
    /// The head rendered as a transcript that fits the summarizer's input budget.
    pub transcript: String,
    /// The summary being updated, if any.
    pub previous: Option<String>,
    /// Language and focus.
    pub instructions: Instructions,
    /// The most tokens the summary should hold.
    pub max_summary_tokens: u64,
    /// Whether the conversation's first request is kept verbatim outside the head.
    pub first_request_pinned: bool,
}

/// Tokens a summarizer call used, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A summary and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The summary text (without the summary marker).
    pub text: String,
    /// Tokens used.
    pub usage: Usage,
}

/// Why a summarizer failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// No API key was found.
    #[error("no API key for {provider}: set {variable}")]
    MissingKey {
        /// The provider.
        provider: &'static str,
        /// The environment variable to set.
        variable: &'static str,
    },
    /// The provider answered with an error status.
    #[error("{provider} answered {status}: {message}")]
    Status {
        /// The provider.
        provider: &'static str,
        /// The HTTP status code.
        status: u16,
        /// The provider's error message.
        message: String,
    },
    /// The request timed out.
    #[error("{provider} did not answer within {seconds} s")]
    Timeout {
        /// The provider.
        provider: &'static str,
        /// The timeout.
        seconds: u64,
    },
    /// The server could not be reached.
    #[error("cannot reach {provider} at {url}: {message}")]
    Unreachable {
        /// The provider.
        provider: &'static str,
        /// The base URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The answer was not a summary.
    #[error("{provider} sent an unexpected answer: {message}")]
    Malformed {
        /// The provider.
        provider: &'static str,
        /// What was wrong.
        message: String,
    },
    /// The summarizer's configuration cannot work (e.g. a base URL that is not a URL).
    #[error("invalid {provider} configuration: {message}")]
    Config {
        /// The provider.
        provider: &'static str,
        /// What is wrong, naming the offending value.
        message: String,
    },
}

/// Something that summarizes a head.
pub trait Summarizer: Send + Sync {
    /// The summarizer and prompt version, e.g. `extractive/v1` or
    /// `anthropic:claude-haiku-4-5/prompt-v1`; part of the summary cache key.
    fn id(&self) -> String;

    /// The most transcript tokens one request may carry.
    fn input_budget(&self) -> u64;

    /// Summarizes `request`.
    fn summarize<'a>(&'a self, request: &'a SummaryRequest) -> BoxFuture<'a, Result<Summary, SummarizeError>>;
}
