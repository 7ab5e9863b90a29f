//! What a compaction did: its steps, its fallbacks and its report, typed in Rust and written
//! in the `--json` report (and the events) with the names and values the CLI has always used.

use crate::store::Summary;
use crate::summarize::{Extractive, Usage};
use contextfold_core::clip::Clipped;
use contextfold_core::evict::Offload;
use contextfold_core::Conversation;
use serde::{Serialize, Serializer};
use std::fmt;

/// One step a compaction took, in the order taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Step {
    /// Stale tool output became pointers.
    Evict,
    /// The head was folded into a summary.
    Summarize,
    /// The largest tool outputs were clipped from the middle.
    Clip,
    /// The summary was shortened to fit the hard limit or the room a tail that cannot be cut
    /// leaves (its full text is in [`Compacted::full_summary`]).
    ShrinkSummary,
}

impl Step {
    /// The name in reports: `evict`, `summarize`, `clip`, `shrink-summary`.
    pub fn name(self) -> &'static str {
        match self {
            Step::Evict => "evict",
            Step::Summarize => "summarize",
            Step::Clip => "clip",
            Step::ShrinkSummary => "shrink-summary",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// The steps of a compaction; written as their names joined by `+`, or `none`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Steps(pub Vec<Step>);

impl Steps {
    /// Whether `step` was taken.
    pub fn contains(&self, step: Step) -> bool {
        self.0.contains(&step)
    }

    /// The last step taken.
    pub fn last(&self) -> Option<Step> {
        self.0.last().copied()
    }

    pub(crate) fn push(&mut self, step: Step) {
        self.0.push(step);
    }
}

impl fmt::Display for Steps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.pad("none");
        }
        let names: Vec<&str> = self.0.iter().map(|step| step.name()).collect();
        f.pad(&names.join("+"))
    }
}

impl Serialize for Steps {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A step that did not happen as asked, and what was done instead. Written as `{"from",
/// "to", "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// The summarizer failed or answered nothing usable; the extractive summary was used.
    Summarizer {
        /// The summarizer's id (e.g. `anthropic:claude-haiku-4-5/prompt-v1`).
        summarizer: String,
        /// Why, as a sentence.
        reason: String,
    },
    /// No cut left a head to summarize ([`Strategy::Summarize`](super::Strategy::Summarize));
    /// stale tool output was evicted instead.
    Evict {
        /// Why there was no cut, as a sentence.
        reason: String,
    },
    /// Still over the target after the steps before; the largest tool outputs were clipped.
    Clip {
        /// The step after which clipping ran (`None` when it was the first).
        after: Option<Step>,
    },
}

impl Fallback {
    /// What failed or could not help: a summarizer id, `summarize`, or the step before
    /// clipping (`none` when there was none).
    pub fn from(&self) -> &str {
        match self {
            Fallback::Summarizer { summarizer, .. } => summarizer,
            Fallback::Evict { .. } => Step::Summarize.name(),
            Fallback::Clip { after } => after.map_or("none", Step::name),
        }
    }

    /// What was done instead: `extractive/v1`, `evict` or `clip`.
    pub fn to(&self) -> &str {
        match self {
            Fallback::Summarizer { .. } => Extractive::ID,
            Fallback::Evict { .. } => Step::Evict.name(),
            Fallback::Clip { .. } => Step::Clip.name(),
        }
    }

    /// Why, as a sentence.
    pub fn reason(&self) -> &str {
        match self {
            Fallback::Summarizer { reason, .. } | Fallback::Evict { reason } => reason,
            Fallback::Clip { .. } => "still over the target; the largest tool outputs were clipped from the middle",
        }
    }
}

impl Serialize for Fallback {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            from: &'a str,
            to: &'a str,
            reason: &'a str,
        }
        Wire { from: self.from(), to: self.to(), reason: self.reason() }.serialize(serializer)
    }
}

/// What a compaction did. Serialized, it is the `--json` report of `contextfold compact`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CompactionReport {
    /// Tokens before.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// The target.
    pub target_tokens: u64,
    /// What was done, in order (`none`, or step names joined by `+`).
    pub strategy_used: Steps,
    /// Tokens of the summary (0 without one).
    pub summary_tokens: u64,
    /// Payloads evicted.
    pub offloaded: usize,
    /// Each evicted payload.
    pub items: Vec<Offload>,
    /// Each clipped payload.
    pub clipped: Vec<Clipped>,
    /// Steps that fell back, in order.
    pub fallbacks: Vec<Fallback>,
    /// The summarizer used (after fallbacks).
    pub summarizer: Option<String>,
    /// Summarizer calls made.
    pub summarizer_calls: usize,
    /// Tokens the summarizer calls used.
    pub summarizer_usage: Usage,
    /// Whether the summary came from the cache.
    pub cache_hit: bool,
    /// User turns folded into the summary.
    pub turns_folded: usize,
    /// Messages folded into the summary.
    pub messages_folded: usize,
    /// Identical repeats of mid-conversation system text (a harness's reminders) dropped,
    /// the newest copy kept; absent from the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub reminders_folded: usize,
    /// Facts an LLM summary left out and that were appended to it.
    pub missing_facts: usize,
    /// Secrets masked in what the summarizer saw (head and previous summary) and in its
    /// summary, with [`Compactor::with_redactor`](super::Compactor::with_redactor); absent
    /// from the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub secrets_redacted: usize,
    /// Repairs made to the input before compacting.
    pub fixes: Vec<String>,
    /// Other things worth knowing, one sentence each.
    pub notes: Vec<String>,
    /// Whether the result passes validation (always true for a returned result).
    pub valid: bool,
    /// Wall time in milliseconds.
    pub duration_ms: f64,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

impl CompactionReport {
    /// Whether the summarizer asked for failed and the extractive summary stood in.
    pub fn summarizer_fell_back(&self) -> Option<&Fallback> {
        self.fallbacks.iter().find(|fallback| matches!(fallback, Fallback::Summarizer { .. }))
    }
}

/// A compacted conversation and its report.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    /// The new conversation.
    pub conversation: Conversation,
    /// What was done.
    pub report: CompactionReport,
    /// The summary written for the head (without the recall note), when one was.
    pub summary: Option<Summary>,
    /// When the summary at the start of the result was shortened to fit the limit: its full
    /// text, for a caller to put back before the next compaction so that no fact is lost
    /// for good (see [`restore_summary`](super::restore_summary)).
    pub full_summary: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_fallbacks_write_the_names_reports_always_had() {
        assert_eq!(serde_json::to_value(Steps::default()).unwrap(), "none");
        let steps = Steps(vec![Step::Evict, Step::Summarize, Step::Clip, Step::ShrinkSummary]);
        assert_eq!(serde_json::to_value(&steps).unwrap(), "evict+summarize+clip+shrink-summary");
        assert_eq!(format!("{:<10}|", Steps(vec![Step::Evict])), "evict     |");
        let fallback = Fallback::Summarizer { summarizer: "openai:x/prompt-v1".into(), reason: "timeout".into() };
        assert_eq!(
            serde_json::to_value(&fallback).unwrap(),
            serde_json::json!({"from": "openai:x/prompt-v1", "to": "extractive/v1", "reason": "timeout"})
        );
        let clip = serde_json::to_value(Fallback::Clip { after: None }).unwrap();
        assert_eq!((clip["from"].as_str(), clip["to"].as_str()), (Some("none"), Some("clip")));
        let evict = serde_json::to_value(Fallback::Evict { reason: "no cut".into() }).unwrap();
        assert_eq!((evict["from"].as_str(), evict["to"].as_str()), (Some("summarize"), Some("evict")));
    }
}
