//! The offline summarizer: a structured handoff from deterministic facts, no network.

use super::{BoxFuture, SummarizeError, Summarizer, Summary, SummaryRequest, Usage};
use contextfold_core::extract::extract;
use contextfold_core::handoff::{handoff, FirstRequest};
use contextfold_core::tokens::{TokenCounter, Tokenizer};
use contextfold_core::tools::Preset;
use std::sync::Arc;

/// The default summarizer: offline, deterministic, free. It reads the head's facts (user
/// requests, files, commands, errors, decisions, next step), not a transcript.
#[derive(Clone)]
pub struct Extractive {
    preset: Preset,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for Extractive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extractive").field("preset", &self.preset).field("counter", &self.counter.name()).finish()
    }
}

impl Default for Extractive {
    fn default() -> Self {
        Extractive { preset: Preset::Auto, counter: Tokenizer::Estimate.shared() }
    }
}

impl Extractive {
    /// Its [`Summarizer::id`], part of the summary cache key.
    pub const ID: &'static str = "extractive/v1";

    /// Recognises tools by `preset` (default: all known agents).
    pub fn preset(mut self, preset: Preset) -> Extractive {
        self.preset = preset;
        self
    }

    /// Holds summaries to their budget by `counter` (default: the calibrated estimator).
    pub fn counter(mut self, counter: Arc<dyn TokenCounter>) -> Extractive {
        self.counter = counter;
        self
    }

    /// The summary of `request`, computed on the spot.
    pub fn summarize_now(&self, request: &SummaryRequest) -> Summary {
        let facts = extract(&request.head, self.preset);
        let budget = if request.max_summary_tokens == 0 { u64::MAX } else { request.max_summary_tokens };
        Summary {
            text: handoff(
                &facts,
                request.previous.as_deref(),
                if request.first_request_pinned { FirstRequest::Pinned } else { FirstRequest::InFacts },
                budget,
                self.counter.as_ref(),
            ),
            usage: Usage::default(),
        }
    }
}

impl Summarizer for Extractive {
    fn id(&self) -> String {
        Extractive::ID.to_string()
    }

    fn input_budget(&self) -> u64 {
        u64::MAX
    }

    fn summarize<'a>(&'a self, request: &'a SummaryRequest) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move { Ok(self.summarize_now(request)) })
    }
}
