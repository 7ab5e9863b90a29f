//! Summarizing the head: from the cache, the model summarizer (in chunks, checked for the
//! facts it must keep) or the extractive one, sized to what the limit leaves.
//!
//! The chain is LLM → extractive: a model summarizer that fails or answers nothing usable is
//! replaced by the extractive summary and the report says why ([`Fallback::Summarizer`]).

use super::pass::Pass;
use super::report::Fallback;
use super::sizing::{
    holds_first_request, summary_budget, MIN_SUMMARY_TOKENS, MIN_WORKABLE_SUMMARY_TOKENS, SUMMARY_FRAMING,
};
use crate::cache::cache_key;
use crate::summarize::{Summarizer, SummaryRequest};
use contextfold_core::check::{missing_facts, preserve, required_facts};
use contextfold_core::extract::extract;
use contextfold_core::plan::Plan;
use contextfold_core::render::render_chunks_at_most;
use contextfold_core::summary::{split_summary, summary_block, with_recall_note};
use contextfold_core::tokens::TokenCounter;
use contextfold_core::Message;
use std::sync::Arc;

/// Puts `full` back as the summary of `messages`' first message (see
/// [`Compacted::full_summary`](super::Compacted::full_summary)). Whether there was a summary
/// to replace.
pub fn restore_summary(messages: &mut [Message], full: &str) -> bool {
    let Some(first) = messages.first_mut() else { return false };
    let Some(split) = split_summary(first) else { return false };
    first.content[split.pinned.len()] = summary_block(full);
    true
}

impl Pass<'_> {
    /// The summary's budget: [`summary_budget`], shrunk to what `plan` leaves when the tail
    /// it could not cut is bigger than planned (a long loop led by signed thinking, a long
    /// last answer): under the configured limit always, so that the summary does not push
    /// the request over the window, and under the target when the summary would not fit
    /// beside that tail, so that a workable target is met. Never below
    /// [`MIN_WORKABLE_SUMMARY_TOKENS`] when the target leaves no room at all.
    pub(super) fn summary_room(&self, plan: &Plan) -> u64 {
        let budget = summary_budget(self.config, self.target);
        let taken = self.ledger.preamble_tokens() + plan.pinned_tokens + plan.tail_tokens;
        let (cap, floor) = match self.config.limit {
            Some(limit) => (limit, MIN_SUMMARY_TOKENS),
            None => (self.target, MIN_WORKABLE_SUMMARY_TOKENS.min(budget)),
        };
        let left = cap.saturating_sub(taken);
        if self.config.limit.is_none() && left >= budget {
            return budget;
        }
        // The summary message's framing, and the summarizer counting with its own counter.
        let margin = SUMMARY_FRAMING + left / 32;
        budget.min(left.saturating_sub(margin).max(floor))
    }

    /// Shortens the summary at the start of `work` by about `over` tokens, for when nothing
    /// can be cut and the request would not fit otherwise; not when even a minimal summary
    /// would leave it too big. The full summary, when it was shortened.
    pub(super) fn shrink_summary(&mut self, over: u64) -> Option<String> {
        let split = split_summary(self.work.messages.first()?)?;
        let (summary, at, first_request_pinned) =
            (split.summary.clone(), split.pinned.len(), holds_first_request(&split.pinned));
        let tokens = self.counter.count_text(&summary);
        let budget = tokens.saturating_sub(over + SUMMARY_FRAMING + tokens / 32);
        // When even the smallest summary would not fit, shrinking loses facts for nothing.
        if budget < MIN_SUMMARY_TOKENS {
            return None;
        }
        let text = self.shortened(&summary, budget, first_request_pinned);
        // A summary shortened to nothing would drop its facts from the request unseen.
        if text.trim().is_empty() {
            return None;
        }
        let text = match &self.config.evict.recall_tool {
            Some(tool) => with_recall_note(&text, tool),
            None => text,
        };
        self.work.messages.first_mut()?.content[at] = summary_block(&text);
        Some(summary)
    }

    /// `summary` in at most `budget` tokens: a handoff is trimmed section by section, other
    /// text is cut.
    pub(super) fn shortened(&self, summary: &str, budget: u64, first_request_pinned: bool) -> String {
        let request = SummaryRequest {
            previous: Some(summary.to_string()),
            max_summary_tokens: budget,
            first_request_pinned,
            ..SummaryRequest::default()
        };
        self.compactor.extractive.summarize_now(&request).text
    }

    /// The summary of `head`, from the cache, the model summarizer, or the extractive one.
    pub(super) async fn summarize(
        &mut self,
        head: &[Message],
        previous: Option<&str>,
        plan: &Plan,
        budget: u64,
    ) -> String {
        let extractive = &self.compactor.extractive;
        let id = match &self.compactor.summarizer {
            Some(model) => model.id(),
            None => extractive.id(),
        };
        let key = cache_key(head, previous, &self.config.instructions, budget, &id);
        if let Some(text) = self.compactor.cache.get(&key) {
            self.report.cache_hit = true;
            self.report.summarizer = Some(id);
            return text;
        }
        let mut request = SummaryRequest {
            head: head.to_vec(),
            transcript: String::new(),
            previous: previous.map(str::to_string),
            instructions: self.config.instructions.clone(),
            max_summary_tokens: budget,
            first_request_pinned: holds_first_request(&plan.pinned),
        };
        let text = match self.compactor.summarizer.clone() {
            None => {
                self.report.summarizer = Some(id);
                self.report.summarizer_calls += 1;
                extractive.summarize_now(&request).text
            }
            Some(model) => match self.summarize_with(&model, &mut request).await {
                Ok(text) => {
                    self.report.summarizer = Some(id);
                    text
                }
                Err(reason) => {
                    self.report.fallbacks.push(Fallback::Summarizer { summarizer: id, reason });
                    self.report.summarizer = Some(extractive.id());
                    request.previous = previous.map(str::to_string);
                    let text = extractive.summarize_now(&request).text;
                    // The fallback's summary is cached under its own id, not the model's.
                    let key = cache_key(head, previous, &self.config.instructions, budget, &extractive.id());
                    self.compactor.cache.put(&key, &text);
                    return text;
                }
            },
        };
        self.compactor.cache.put(&key, &text);
        text
    }

    /// Summarizes with `model` in at most `max_chunks` calls, then checks the facts it must
    /// keep; why it could not, as a sentence.
    async fn summarize_with(
        &mut self,
        model: &Arc<dyn Summarizer>,
        request: &mut SummaryRequest,
    ) -> Result<String, String> {
        let chunks = render_chunks_at_most(&request.head, model.input_budget(), self.config.max_chunks, self.counter);
        if chunks.len() > 1 {
            self.report.notes.push(format!("the head was summarized in {} chunks", chunks.len()));
        }
        let mut text = request.previous.clone();
        for chunk in chunks {
            request.transcript = chunk;
            request.previous = text.clone();
            self.report.summarizer_calls += 1;
            let summary = model.summarize(request).await.map_err(|err| err.to_string())?;
            self.report.summarizer_usage += summary.usage;
            if summary.text.trim().is_empty() {
                return Err("the summarizer returned an empty summary".into());
            }
            text = Some(summary.text);
        }
        let mut text = text.unwrap_or_default();
        // A model may ignore its `max_tokens`: a summary over its budget is cut to it.
        if let Some(cut) = cut_to_tokens(&text, request.max_summary_tokens, self.counter) {
            self.report.notes.push(format!(
                "the {} summary was over its budget of {} tokens; it was cut to its first {} characters",
                model.id(),
                request.max_summary_tokens,
                cut.chars().count()
            ));
            text = cut.to_string();
        }
        let required = required_facts(&extract(&request.head, self.config.evict.preset));
        let missing = missing_facts(&text, &required);
        self.report.missing_facts = missing.len();
        Ok(preserve(&text, &missing))
    }

    /// Masks what the redactor still finds in a summary: secrets an LLM pieced together, or
    /// a cached summary written without redaction. A note says so, as it should not happen.
    pub(super) fn check_summary(&mut self, text: &mut String) {
        let Some(redactor) = &self.compactor.redactor else { return };
        let found = redactor.redact_string(text);
        if found > 0 {
            self.report.secrets_redacted += found;
            self.report.notes.push(format!("the summary held {found} secret(s) after redaction; they were masked"));
        }
    }
}

/// `text` cut to at most `budget` tokens, at a line end where one fits (else at a character
/// boundary); `None` when it is within the budget. Only a prefix of a few bytes per token of
/// the budget is ever counted, so a summary of megabytes costs no more than a short one.
fn cut_to_tokens<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> Option<&'a str> {
    // No token is longer than 16 bytes in practice: a prefix of that many bytes per token that
    // fits means the whole text fits only when it is the whole text.
    let probe_len = usize::try_from(budget.saturating_mul(16)).unwrap_or(usize::MAX).min(text.len());
    let probe = &text[..text.floor_char_boundary(probe_len)];
    let fits = |end: usize| counter.count_text(&probe[..end]) <= budget;
    if probe.len() == text.len() && fits(probe.len()) {
        return None;
    }
    // The longest prefix ending at a line end that fits, by bisection over the line ends.
    let ends: Vec<usize> = probe.match_indices('\n').map(|(at, _)| at + 1).collect();
    let lines = ends.partition_point(|&end| fits(end));
    if lines > 0 {
        return Some(probe[..ends[lines - 1]].trim_end());
    }
    // Not even the first line fits: the longest prefix at a character boundary.
    let chars: Vec<usize> = probe.char_indices().map(|(at, _)| at).chain([probe.len()]).collect();
    let fitting = chars.partition_point(|&end| fits(end));
    Some(&probe[..chars[fitting.saturating_sub(1)]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextfold_core::tokens::Tokenizer;

    #[test]
    fn an_over_long_summary_is_cut_to_its_budget_at_a_line_end() {
        let counter = Tokenizer::Estimate.counter();
        let text: String = (0..5_000).map(|line| format!("- fact number {line} about the billing module\n")).collect();
        let cut = cut_to_tokens(&text, 200, counter).expect("over budget");
        assert!(counter.count_text(cut) <= 200);
        assert!(counter.count_text(cut) > 150, "{}", counter.count_text(cut));
        assert!(text.starts_with(cut) && cut.ends_with("module"), "whole lines");
        assert_eq!(cut_to_tokens("- a short summary\n", 200, counter), None);
        // One long line is cut at a character boundary, never inside a character.
        let wide = "é".repeat(10_000);
        let cut = cut_to_tokens(&wide, 50, counter).expect("over budget");
        assert!(counter.count_text(cut) <= 50 && !cut.is_empty());
    }
}
