//! Compaction events: what happened, delivered to an observer and as `tracing` events.
//!
//! Serialized, an [`Event`] is its wire format: the fields of its kind with `"event"` naming
//! it, `compacted` or `failed`.

use crate::compactor::{CompactionReport, Fallback, Steps};
use crate::summarize::Usage;
use serde::Serialize;

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Trigger {
    /// The policy decided.
    Auto,
    /// The caller asked.
    Manual,
    /// The next request would not have fit the window.
    Overflow,
}

/// Something the middleware did that an observer may want to know.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A compaction ran; its result is sent from now on.
    Compacted(CompactionEvent),
    /// A compaction failed; the history was sent as it was.
    Failed(FailedCompaction),
}

impl Event {
    /// Emits the event as a `tracing` event: a compaction at info level, a failure (or a
    /// compaction the store could not keep) at warn level.
    pub fn trace(&self) {
        match self {
            Event::Compacted(event) => event.trace(),
            Event::Failed(failed) => tracing::warn!(
                trigger = ?failed.trigger,
                request_tokens = failed.request_tokens,
                error = %failed.error,
                "contextfold compaction failed; the history was sent as it is"
            ),
        }
    }
}

/// One compaction, as reported to observers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionEvent {
    /// What started it.
    pub trigger: Trigger,
    /// What was done, in order (written `evict`, `summarize`, `evict+summarize+clip`, …).
    pub strategy: Steps,
    /// Tokens of the history before.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// The target it compacted to.
    pub target_tokens: u64,
    /// Tokens of the summary.
    pub summary_tokens: u64,
    /// User turns folded into the summary.
    pub turns_folded: usize,
    /// Messages folded into the summary.
    pub messages_folded: usize,
    /// Tool payloads evicted.
    pub offloaded: usize,
    /// Repairs made to the input.
    pub fixes: usize,
    /// Whether the summary came from the cache.
    pub cache_hit: bool,
    /// Steps that fell back.
    pub fallbacks: Vec<Fallback>,
    /// Summarizer calls made.
    pub summarizer_calls: usize,
    /// Tokens the summarizer used.
    pub summarizer_usage: Usage,
    /// Things worth knowing, one sentence each (e.g. a target raised to what can work).
    pub notes: Vec<String>,
    /// Wall time in milliseconds.
    pub duration_ms: f64,
    /// Why the store could not keep this compaction, when it could not: its pointers may
    /// then name payloads the recall tool cannot restore. Absent without an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
}

impl CompactionEvent {
    /// The event for `report`.
    pub fn new(trigger: Trigger, report: &CompactionReport) -> CompactionEvent {
        CompactionEvent {
            trigger,
            strategy: report.strategy_used.clone(),
            tokens_before: report.tokens_before,
            tokens_after: report.tokens_after,
            target_tokens: report.target_tokens,
            summary_tokens: report.summary_tokens,
            turns_folded: report.turns_folded,
            messages_folded: report.messages_folded,
            offloaded: report.offloaded,
            fixes: report.fixes.len(),
            cache_hit: report.cache_hit,
            fallbacks: report.fallbacks.clone(),
            summarizer_calls: report.summarizer_calls,
            summarizer_usage: report.summarizer_usage,
            notes: report.notes.clone(),
            duration_ms: report.duration_ms,
            store_error: None,
        }
    }

    /// Emits the event as a `tracing` event at info level.
    pub fn trace(&self) {
        tracing::info!(
            trigger = ?self.trigger,
            strategy = %self.strategy,
            tokens_before = self.tokens_before,
            tokens_after = self.tokens_after,
            summary_tokens = self.summary_tokens,
            offloaded = self.offloaded,
            cache_hit = self.cache_hit,
            fallbacks = self.fallbacks.len(),
            duration_ms = self.duration_ms,
            "contextfold compaction"
        );
        if let Some(error) = &self.store_error {
            tracing::warn!(error = %error, "contextfold compaction not stored");
        }
    }
}

/// A compaction that failed; the request went out uncompacted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedCompaction {
    /// What started it.
    pub trigger: Trigger,
    /// Estimated tokens of the request that was sent instead.
    pub request_tokens: u64,
    /// Why it failed, as a sentence.
    pub error: String,
}
