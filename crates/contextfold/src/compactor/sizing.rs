//! How a target is shared out before a cut: the system prompt and tools, the summary's
//! budget, the pinned first request, and what is left for the verbatim tail.
//!
//! One rule for the compactor and the CLI's `plan`, so that `plan` shows the cut `compact`
//! makes.

use super::{ClipLimit, CompactConfig, Undersized};
use contextfold_core::boundary::boundaries;
use contextfold_core::clip::MIN_CLIP_TOKENS;
use contextfold_core::plan::{is_opaque_summary, PinFirst, PlanConfig};
use contextfold_core::summary::split_summary;
use contextfold_core::tokens::{TokenCounter, TokenLedger, BLOCK_OVERHEAD};
use contextfold_core::{Block, Conversation};

/// The smallest summary written when the tail leaves no room under the limit: a request
/// over the window fails outright, so the summary gives way almost entirely.
pub(super) const MIN_SUMMARY_TOKENS: u64 = 64;

/// Tokens of the summary message beyond the summary itself (marker, headings, overhead).
pub(super) const SUMMARY_FRAMING: u64 = 48;

/// The smallest summary budget a target must leave room for: the first request, shortened,
/// and a fact or two fit. Smaller, the extractive summary of a real head may hold nothing at
/// all (every section over its share); a summary that does come out empty is never folded
/// in, so the head is kept rather than dropped unseen. Small enough that compacting a short
/// conversation to half its size still works.
pub const MIN_WORKABLE_SUMMARY_TOKENS: u64 = 96;

/// The most tokens the summary may take: the configured size, but no more than half the
/// target so that the verbatim tail keeps room, except that under a hard limit it may always
/// take a quarter of the limit: in a small window, facts are worth more than a longer tail.
/// (Replay over the corpus chose these: summaries of a quarter of the target, or of 2,000
/// tokens, lost a quarter of the probes at a 16k window and cost more, because a summary too
/// small to hold the facts is redone sooner.)
/// It is never below [`MIN_WORKABLE_SUMMARY_TOKENS`] unless the configured size is.
pub(super) fn summary_budget(config: &CompactConfig, target: u64) -> u64 {
    let floor = config.limit.map_or(0, |limit| limit / 4).max(MIN_WORKABLE_SUMMARY_TOKENS);
    config.summary_tokens.min((target / 2).max(floor)).max(1)
}

/// Whether blocks kept before the summary hold the first request: they may hold only a
/// provider's opaque summaries (a Responses `compaction` item), which are kept whatever is
/// folded.
pub(super) fn holds_first_request(pinned: &[Block]) -> bool {
    pinned.iter().any(|block| !is_opaque_summary(block))
}

impl CompactConfig {
    /// The plan a compaction makes of `conversation` as it is (before any eviction): the
    /// tail gets what the target leaves after the system prompt, tools, the summary's budget
    /// and the pinned first request. With the target in tokens (raised to the smallest
    /// workable one under [`Undersized::Raise`], as a compaction raises it), for reports.
    pub fn plan_config(&self, conversation: &Conversation, counter: &dyn TokenCounter) -> (u64, PlanConfig) {
        let mut ledger = TokenLedger::new(counter);
        let current = ledger.resync_conversation(conversation);
        let mut target = self.target.tokens_after(current, ledger.preamble_tokens());
        if self.undersized == Undersized::Raise {
            if let Some(smallest) = smallest_workable(self, conversation, &ledger) {
                target = target.max(smallest.target);
            }
        }
        (target, tail_plan(self, target, conversation, &ledger))
    }
}

/// The smallest target a fold can meet, and its parts.
pub(super) struct Smallest {
    /// The preamble, a minimal summary and the newest turn together.
    pub(super) target: u64,
    /// Tokens of the system prompt and tools.
    pub(super) preamble: u64,
    /// A minimal summary with its framing.
    pub(super) summary: u64,
    /// The newest turn, its tool outputs clipped as far as clipping goes.
    pub(super) tail: u64,
}

/// The smallest target that holds the preamble, a minimal summary and the newest turn
/// (which no cut can fold); `None` without a safe cut. `ledger` must be synced to `work`.
pub(super) fn smallest_workable(
    config: &CompactConfig,
    work: &Conversation,
    ledger: &TokenLedger<'_>,
) -> Option<Smallest> {
    let clip_to = (config.max_tool_output != ClipLimit::Off).then_some(MIN_CLIP_TOKENS);
    let tail = newest_turn_tokens(work, ledger, clip_to)?;
    let preamble = ledger.preamble_tokens();
    let summary = SUMMARY_FRAMING + MIN_WORKABLE_SUMMARY_TOKENS.min(config.summary_tokens);
    Some(Smallest { target: preamble + summary + tail, preamble, summary, tail })
}

/// The preamble, a minimal summary and the newest turn unclipped together: the target that
/// keeps what the model just asked for whole; `None` without a safe cut.
pub(super) fn whole_newest_turn(config: &CompactConfig, work: &Conversation, ledger: &TokenLedger<'_>) -> Option<u64> {
    let tail = newest_turn_tokens(work, ledger, None)?;
    let summary = SUMMARY_FRAMING + MIN_WORKABLE_SUMMARY_TOKENS.min(config.summary_tokens);
    Some(ledger.preamble_tokens() + summary + tail)
}

/// Tokens of the smallest tail a cut can leave (the messages after the last safe cut),
/// with each tool output over `clip_to` tokens counted as clipped to it (`None`: clipping
/// is off); `None` without a safe cut.
fn newest_turn_tokens(work: &Conversation, ledger: &TokenLedger<'_>, clip_to: Option<u64>) -> Option<u64> {
    let last = boundaries(&work.messages).last()?.index;
    let tokens = (last..work.messages.len()).map(|index| {
        let whole = ledger.message_tokens(index).unwrap_or_default();
        let (Some(blocks), Some(clip_to)) = (ledger.block_tokens(index), clip_to) else { return whole };
        let floor = clip_to + BLOCK_OVERHEAD;
        let saved: u64 = (work.messages[index].content.iter().zip(blocks))
            .filter(|(block, _)| matches!(block, Block::ToolResult(_)))
            .map(|(_, &tokens)| tokens.saturating_sub(floor))
            .sum();
        whole - saved
    });
    Some(tokens.sum())
}

/// Each message's tokens as `ledger` (synced to `conversation`) has them.
pub(super) fn message_counts(ledger: &TokenLedger<'_>, conversation: &Conversation) -> Vec<u64> {
    (0..conversation.messages.len()).map(|index| ledger.message_tokens(index).unwrap_or_default()).collect()
}

/// The plan configuration for `work` counted by `ledger` (synced to it): the tail's budget
/// is what `target` leaves after the system prompt, tools, the summary and a pinned first
/// request. The first request is kept verbatim when it fits beside the newest turn (the
/// messages after the last safe cut, which no cut can fold, its tool outputs counted as
/// clipping will leave them) and half the summary's budget; otherwise it is folded into the
/// summary.
pub(super) fn tail_plan(
    config: &CompactConfig,
    target: u64,
    work: &Conversation,
    ledger: &TokenLedger<'_>,
) -> PlanConfig {
    let budget = summary_budget(config, target);
    let room = target.saturating_sub(ledger.preamble_tokens() + budget);
    let pinned = match (config.plan.pin_first, work.messages.first()) {
        (PinFirst::Pinned, Some(first)) if first.is_authored() && split_summary(first).is_none() => {
            ledger.message_tokens(0).unwrap_or_default()
        }
        _ => 0,
    };
    let newest_turn = newest_turn_tokens(work, ledger, config.max_tool_output.tokens(target)).unwrap_or_default();
    // Beside a pinned first request the summary keeps at least half its budget (and a
    // minimal summary, where its budget holds one).
    let minimal = SUMMARY_FRAMING + MIN_WORKABLE_SUMMARY_TOKENS.min(config.summary_tokens);
    let summary = (budget / 2).max(minimal).min(budget);
    let fits = ledger.preamble_tokens() + pinned + newest_turn + summary <= target;
    let pin_first = if fits { config.plan.pin_first } else { PinFirst::Folded };
    let tail_room = room.saturating_sub(if pin_first == PinFirst::Pinned { pinned } else { 0 });
    PlanConfig {
        max_tail_tokens: Some(config.plan.max_tail_tokens.map_or(tail_room, |max| max.min(tail_room))),
        pin_first,
        // Over the target, any progress helps; the policy decides whether it is worth it.
        min_progress: 0.0,
        ..config.plan.clone()
    }
}
