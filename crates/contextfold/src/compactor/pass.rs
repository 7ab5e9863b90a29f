//! One compaction pass: evict → plan → summarize → assemble → clip → shrink → validate.
//!
//! A [`Pass`] carries the state every step reads and writes (the working conversation, one
//! token ledger, the report, the steps taken), so each step is a method with no parameter
//! list to thread through. The ledger is synced to the working conversation between steps:
//! after an edit only the changed messages are counted again.

use super::report::{Compacted, CompactionReport, Fallback, Step, Steps};
use super::sizing::{
    holds_first_request, message_counts, smallest_workable, summary_budget, tail_plan, whole_newest_turn, Smallest,
};
use super::{CompactConfig, CompactError, Compactor, Strategy, Undersized};
use crate::store::{head_hash, Summary};
use contextfold_core::clip::{clip, ClipConfig, CLIP_PREFIX, MIN_CLIP_TOKENS};
use contextfold_core::evict::{evict_with_ledger, is_evicted, EvictConfig};
use contextfold_core::plan::{plan_with_counts, NoCut, PinFirst, Plan};
use contextfold_core::summary::with_recall_note;
use contextfold_core::tokens::{Thousands, TokenCounter, TokenLedger};
use contextfold_core::{repair, validate, Block, Conversation, Message, Role, ToolResult};
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// The state of one compaction between its steps.
pub(super) struct Pass<'a> {
    pub(super) compactor: &'a Compactor,
    pub(super) config: &'a CompactConfig,
    pub(super) counter: &'a dyn TokenCounter,
    /// The conversation as the steps so far left it.
    pub(super) work: Conversation,
    /// Counts of `work` (synced by each step that reads them).
    pub(super) ledger: TokenLedger<'a>,
    pub(super) report: CompactionReport,
    pub(super) steps: Steps,
    /// The target in tokens.
    pub(super) target: u64,
    /// The summary written, to be stored.
    pub(super) summary: Option<Summary>,
    /// The full text of a summary shortened to fit the limit.
    pub(super) full_summary: Option<String>,
    started: Instant,
}

impl<'a> Pass<'a> {
    /// A pass over `conversation`, repaired, counted, with its target set.
    pub(super) fn new(compactor: &'a Compactor, conversation: &Conversation, config: &'a CompactConfig) -> Pass<'a> {
        let started = Instant::now();
        let counter = compactor.counter();
        let mut work = conversation.clone();
        let mut report = CompactionReport {
            fixes: repair(&mut work).iter().map(ToString::to_string).collect(),
            ..CompactionReport::default()
        };
        let mut ledger = TokenLedger::new(counter);
        report.tokens_before = ledger.resync_conversation(&work);
        let target = config.target.tokens_after(report.tokens_before, ledger.preamble_tokens());
        report.target_tokens = target;
        Pass {
            compactor,
            config,
            counter,
            work,
            ledger,
            report,
            steps: Steps::default(),
            target,
            summary: None,
            full_summary: None,
            started,
        }
    }

    /// Runs every step the target asks for. `originals` are the messages as the caller has
    /// them: payloads an earlier pass evicted or clipped are summarized from there.
    pub(super) async fn run(mut self, originals: &[Message]) -> Result<Compacted, CompactError> {
        // What repair leaves invalid is the input's fault: say so before any work is done.
        let problems = validate(&self.work);
        if !problems.is_empty() {
            return Err(CompactError::Input(problems));
        }
        if self.report.tokens_before <= self.target {
            self.report.tokens_after = self.report.tokens_before;
            return self.finish();
        }
        // The head is summarized from the messages as they were, not from pointers.
        let original = self.work.clone();
        if self.config.strategy != Strategy::Summarize {
            self.evict();
        }
        if self.config.strategy != Strategy::Evict && self.ledger.resync_conversation(&self.work) > self.target {
            self.fold(&original, originals).await?;
        }
        let mut tokens = self.ledger.resync_conversation(&self.work);
        if tokens > self.target {
            tokens = self.clip();
        }
        if let Some(limit) = self.config.limit.filter(|&limit| tokens > limit) {
            if let Some(full) = self.shrink_summary(tokens - limit) {
                // A summary already shortened to its room keeps its full text from before.
                if self.full_summary.is_none() {
                    self.full_summary = Some(full);
                    self.steps.push(Step::ShrinkSummary);
                }
                tokens = self.ledger.resync_conversation(&self.work);
            }
        }
        self.report.tokens_after = tokens;
        self.finish()
    }

    /// Evicts stale tool output down to the target. The ledger must be synced to `work`.
    fn evict(&mut self) {
        let config = EvictConfig { target_tokens: Some(self.target), ..self.config.evict.clone() };
        let evicted = evict_with_ledger(&mut self.work, &config, &self.ledger);
        if let Some(skipped) = evicted.skipped {
            self.report.notes.push(format!("no eviction: {skipped}"));
        }
        if evicted.offloaded > 0 {
            self.report.offloaded += evicted.offloaded;
            self.report.items.extend(evicted.items);
            self.steps.push(Step::Evict);
        }
    }

    /// Plans a cut and folds the head into a summary; without a cut, notes why (and, when
    /// only summarizing was asked, evicts instead). A target too small for any summary fails
    /// or is raised, as [`Undersized`] says; a summary that comes out empty is not folded in.
    async fn fold(&mut self, original: &Conversation, originals: &[Message]) -> Result<(), CompactError> {
        self.check_room()?;
        if self.ledger.preamble_tokens() + self.ledger.total() <= self.target {
            // The target was raised to what the conversation already fits.
            return Ok(());
        }
        let plan = match self.plan() {
            Ok(plan) => plan,
            Err(reason) => {
                self.report.notes.push(format!("no summary: {reason}"));
                if self.config.strategy == Strategy::Summarize {
                    self.report.fallbacks.push(Fallback::Evict { reason: reason.to_string() });
                    self.evict();
                }
                return Ok(());
            }
        };
        self.report.notes.extend(plan.notes.iter().cloned());
        if !holds_first_request(&plan.pinned)
            && self.config.plan.pin_first == PinFirst::Pinned
            && plan.previous_summary.is_none()
        {
            self.report.notes.push(
                "the first request is too big to keep verbatim beside the newest turn; it is folded into the summary"
                    .into(),
            );
        }
        let mut head = original_head(original, &self.work, &plan);
        restore_payloads(&mut head, originals);
        let mut previous = plan.previous_summary.clone();
        if let Some(redactor) = &self.compactor.redactor {
            self.report.secrets_redacted +=
                head.iter_mut().map(|message| redactor.redact_message(message)).sum::<usize>()
                    + previous.as_mut().map_or(0, |text| redactor.redact_string(text));
        }
        // A summary squeezed by a tail that cannot be cut is written whole and then shortened
        // to the room: the full text goes back to the caller, restored before the next fold,
        // so the facts that did not fit this time are not lost for good.
        let room = self.summary_room(&plan);
        let budget = summary_budget(self.config, self.target).max(room);
        let mut text = self.summarize(&head, previous.as_deref(), &plan, budget).await;
        self.check_summary(&mut text);
        let mut full = None;
        if room < budget && self.counter.count_text(&text) > room {
            let short = self.shortened(&text, room, holds_first_request(&plan.pinned));
            let whole = std::mem::replace(&mut text, short);
            full = (!text.trim().is_empty()).then_some(whole);
        }
        let budget = room;
        if text.trim().is_empty() {
            // Folding into nothing would drop the head unseen; it stays as it is.
            self.report.notes.push(format!(
                "no summary: a summary of at most {budget} tokens holds nothing of the {} messages to fold, so they are kept",
                head.len()
            ));
            return Ok(());
        }
        let summary = match &self.config.evict.recall_tool {
            Some(tool) => with_recall_note(&text, tool),
            None => text.clone(),
        };
        self.report.summary_tokens = self.counter.count_text(&summary);
        self.summary = Some(Summary {
            head_hash: head_hash(previous.as_deref(), &head),
            summarizer: self.report.summarizer.clone().unwrap_or_default(),
            text: full.clone().unwrap_or(text),
            usage: self.report.summarizer_usage,
        });
        self.report.turns_folded =
            head.iter().filter(|message| message.role == Role::User && message.is_authored()).count();
        self.report.messages_folded = head.len();
        let system_blocks = |conversation: &Conversation| -> usize {
            conversation.messages.iter().filter(|message| message.role == Role::System).map(|m| m.content.len()).sum()
        };
        let before = system_blocks(&self.work);
        self.work = plan.assemble(&self.work, Some(&summary));
        self.report.reminders_folded += before.saturating_sub(system_blocks(&self.work));
        self.steps.push(Step::Summarize);
        if full.is_some() {
            self.full_summary = full;
            self.steps.push(Step::ShrinkSummary);
        }
        Ok(())
    }

    /// Checks that the target leaves room for the preamble, a minimal summary and the newest
    /// turn that cannot be cut; when it does not, fails or raises the target to that. The
    /// ledger must be synced to `work`.
    fn check_room(&mut self) -> Result<(), CompactError> {
        // The newest turn is what the model just asked for: whole, when it fits under the cap
        // beside the preamble and a minimal summary.
        let ceiling = self.config.limit.or(self.config.target.usable());
        if let (Some(whole), Some(ceiling)) = (whole_newest_turn(self.config, &self.work, &self.ledger), ceiling) {
            if self.target < whole && whole <= ceiling {
                self.report.notes.push(format!(
                    "the target was raised from {} to {whole} tokens to keep the newest turn whole",
                    self.target
                ));
                self.target = whole;
                self.report.target_tokens = whole;
            }
        }
        let Some(Smallest { target: smallest, preamble, summary, tail }) =
            smallest_workable(self.config, &self.work, &self.ledger)
        else {
            return Ok(());
        };
        if self.target >= smallest {
            return Ok(());
        }
        match self.config.undersized {
            Undersized::Fail => Err(CompactError::TooSmall { target: self.target, smallest, preamble, summary, tail }),
            Undersized::Raise => {
                self.report.notes.push(format!(
                    "the target of {} tokens is too small for a summary; compacted to the smallest workable target of {smallest} tokens (the system prompt and tools take {preamble}, a minimal summary {summary}, the newest turn {tail})",
                    self.target
                ));
                self.target = smallest;
                self.report.target_tokens = smallest;
                Ok(())
            }
        }
    }

    /// Plans a cut whose tail leaves room for the system prompt, tools and the summary
    /// ([`tail_plan`]). The ledger must be synced to `work`.
    fn plan(&self) -> Result<Plan, NoCut> {
        let counts = message_counts(&self.ledger, &self.work);
        let config = tail_plan(self.config, self.target, &self.work, &self.ledger);
        plan_with_counts(&self.work, &config, self.counter, &counts)
    }

    /// Clips tool outputs, harder each round, until the conversation fits or clipping can do
    /// no more; a bounded number of rounds. Returns the conversation's tokens; the ledger
    /// must be synced to `work`.
    ///
    /// The newest step (the last assistant message and what follows it: its calls' outputs)
    /// is what the model just asked for: when it fits whole beside the preamble, only the
    /// outputs before it are clipped, unless the request is still over its cap after that.
    /// It is narrower than the newest turn [`check_room`](Pass::check_room) sizes, which is
    /// everything after the last safe cut, and is there even when no cut is.
    fn clip(&mut self) -> u64 {
        let ceiling = self.config.limit.or(self.config.target.usable());
        let start = self.work.messages.iter().rposition(|message| message.role == Role::Assistant);
        let newest = start.filter(|&start| {
            let tokens: u64 = (start..self.work.messages.len())
                .map(|index| self.ledger.message_tokens(index).unwrap_or_default())
                .sum();
            ceiling.is_some_and(|ceiling| self.ledger.preamble_tokens() + tokens <= ceiling)
        });
        let mut tokens = self.clip_before(newest.unwrap_or(self.work.messages.len()));
        if newest.is_some() && ceiling.is_some_and(|ceiling| tokens > ceiling) {
            tokens = self.clip_before(self.work.messages.len());
        }
        if !self.report.clipped.is_empty() {
            self.report.fallbacks.push(Fallback::Clip { after: self.steps.last() });
            self.steps.push(Step::Clip);
        }
        tokens
    }

    /// [`clip`](Pass::clip) of the outputs of the messages before `end`.
    ///
    /// An output clipped in an earlier round is clipped again from its original, so that its
    /// marker names the ref of the original, the payload that is stored (clipping the clipped
    /// text would name a ref that nothing stores).
    fn clip_before(&mut self, end: usize) -> u64 {
        let mut tokens = self.ledger.preamble_tokens() + self.ledger.total();
        let Some(mut limit) = self.config.max_tool_output.tokens(self.target) else {
            return tokens;
        };
        let unclipped = self.work.messages.clone();
        loop {
            for item in &self.report.clipped {
                let original = unclipped.get(item.message).and_then(|message| message.content.get(item.block));
                let block =
                    self.work.messages.get_mut(item.message).and_then(|message| message.content.get_mut(item.block));
                if let (Some(original), Some(block)) = (original, block) {
                    *block = original.clone();
                }
            }
            let clip_config = ClipConfig {
                preset: self.config.evict.preset,
                recall_tool: self.config.evict.recall_tool.clone(),
                ..ClipConfig::new(limit)
            };
            let kept = self.work.messages.split_off(end.min(self.work.messages.len()));
            let clipped = clip(&mut self.work, &clip_config, self.counter);
            self.work.messages.extend(kept);
            for item in clipped {
                // A payload clipped again is reported once, with its original size.
                match self.report.clipped.iter_mut().find(|old| (old.message, old.block) == (item.message, item.block))
                {
                    Some(old) => old.tokens_after = item.tokens_after,
                    None => self.report.clipped.push(item),
                }
            }
            tokens = self.ledger.resync_conversation(&self.work);
            if tokens <= self.target || limit <= MIN_CLIP_TOKENS {
                break;
            }
            limit = (limit / 2).max(MIN_CLIP_TOKENS);
        }
        tokens
    }

    /// Names the steps, notes a result still over the target, and validates.
    fn finish(mut self) -> Result<Compacted, CompactError> {
        let (before, after, target) = (self.report.tokens_before, self.report.tokens_after, self.target);
        self.report.strategy_used = self.steps;
        if after > target && before > target {
            self.report.notes.push(format!(
                "the result holds {} tokens, over the target of {}: no safe cut leaves less (the system prompt, tools and the newest messages are kept whole)",
                Thousands(after),
                Thousands(target)
            ));
        }
        let problems = validate(&self.work);
        if !problems.is_empty() {
            return Err(CompactError::Invalid(problems));
        }
        self.report.valid = true;
        self.report.duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        Ok(Compacted {
            conversation: self.work,
            report: self.report,
            summary: self.summary,
            full_summary: self.full_summary,
        })
    }
}

/// Whether an earlier pass replaced `result`'s payload with a pointer or clipped it.
pub(crate) fn replaced(result: &ToolResult) -> bool {
    is_evicted(result) || result.text().contains(CLIP_PREFIX)
}

/// The tool_use ids of the results in `messages` whose payload an earlier pass replaced: the
/// only originals a fold reads from the caller.
pub(crate) fn replaced_results(messages: &[Message]) -> HashSet<&str> {
    messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolResult(result) if replaced(result) => Some(result.tool_use_id.as_str()),
            _ => None,
        })
        .collect()
}

/// Puts back, from `originals`, the payloads of tool results that an earlier pass replaced
/// with a pointer or clipped, matching results by their tool_use id.
fn restore_payloads(head: &mut [Message], originals: &[Message]) {
    let mut results = head.iter_mut().flat_map(|message| message.content.iter_mut()).filter_map(|block| match block {
        Block::ToolResult(result) if replaced(result) => Some(result),
        _ => None,
    });
    let Some(first) = results.next() else { return };
    let by_id: HashMap<&str, &ToolResult> = originals
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolResult(result) if !replaced(result) => Some((result.tool_use_id.as_str(), result)),
            _ => None,
        })
        .collect();
    for result in std::iter::once(first).chain(results) {
        if let Some(original) = by_id.get(result.tool_use_id.as_str()) {
            *result = (*original).clone();
        }
    }
}

/// The head of `plan` with the original (un-evicted) payloads: eviction keeps every block in
/// place, so the same indices name the same messages.
fn original_head(original: &Conversation, work: &Conversation, plan: &Plan) -> Vec<Message> {
    let cut = plan.cut.index;
    let from_original = |range: std::ops::Range<usize>| original.messages.get(range).unwrap_or(&[]).to_vec();
    if original.messages.len() != work.messages.len() {
        return plan.head.clone();
    }
    match cut.checked_sub(plan.head.len()) {
        Some(0) => from_original(0..cut),
        Some(1) => from_original(1..cut),
        // The rest of an old summary message comes first, then messages 1.. of the head.
        _ => {
            let mut head = vec![plan.head[0].clone()];
            head.extend(from_original(1..cut));
            head
        }
    }
}
