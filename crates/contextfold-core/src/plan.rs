//! The plan: where to cut a conversation into a head to fold and a tail to keep verbatim.
//!
//! The cut is chosen among the safe [`boundaries`]. "At least" constraints (keep N user
//! turns, keep at least K tail tokens) give a latest allowed cut; the "at most" constraint
//! (a tail of at most K tokens) gives an earliest one. When both hold, the earliest cut that
//! fits the maximum is taken, so the tail keeps as much as the budget allows. The first user
//! request may be pinned, and a previous summary at the start is folded into the new one. A
//! provider's own summary of earlier turns (a `compaction` block, see [`is_opaque_summary`])
//! is opaque, so it is never folded: a head holding one keeps it, pinned before our summary.
//! Mid-conversation system messages of the head are kept verbatim ([`Plan::assemble`]),
//! so they count with the pinned request, not with what is folded.

use crate::boundary::{boundaries, Boundary};
use crate::conversation::{Block, Conversation, Message, Role};
use crate::summary::{assemble_keeping, split_summary};
use crate::tokens::{count_block, count_message, Thousands, TokenCounter};
use serde::Serialize;
use serde_json::Value;
use std::fmt;

/// Whether the first user message is kept verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinFirst {
    /// Keep the first user request verbatim at the start of the compacted conversation.
    #[default]
    Pinned,
    /// Fold it like any other message.
    Folded,
}

/// Where to cut. The [`Default`] keeps a tail of at most 16k tokens, pins the first request
/// and requires the head to hold at least 10% of the tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanConfig {
    /// Keep at least the last N user turns in the tail.
    pub keep_turns: Option<usize>,
    /// Keep at least this many tokens in the tail.
    pub min_tail_tokens: Option<u64>,
    /// Keep at most this many tokens in the tail (the budget for the verbatim part).
    pub max_tail_tokens: Option<u64>,
    /// Whether to pin the first user request.
    pub pin_first: PinFirst,
    /// Do nothing unless the head holds at least this fraction of the tokens (0.0–1.0).
    pub min_progress: f64,
}

/// The default tail budget of [`PlanConfig::default`].
pub const DEFAULT_TAIL_TOKENS: u64 = 16_000;

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            keep_turns: None,
            min_tail_tokens: None,
            max_tail_tokens: Some(DEFAULT_TAIL_TOKENS),
            pin_first: PinFirst::Pinned,
            min_progress: 0.10,
        }
    }
}

/// A split of a conversation into head and tail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The cut: the tail starts at `cut.index`.
    pub cut: Boundary,
    /// Blocks kept verbatim before the summary: the first user request (when pinned), then
    /// the head's opaque summaries ([`is_opaque_summary`]), which cannot be folded.
    pub pinned: Vec<Block>,
    /// The summary found at the start of the conversation, to be folded in.
    pub previous_summary: Option<String>,
    /// The messages to fold (without the pinned request and the previous summary).
    #[serde(skip)]
    pub head: Vec<Message>,
    /// Tokens of the head (including a previous summary, not its system messages).
    pub head_tokens: u64,
    /// Tokens kept verbatim before the tail: the pinned blocks and the head's system messages.
    pub pinned_tokens: u64,
    /// Tokens of the tail.
    pub tail_tokens: u64,
    /// Tokens of all messages (a part of the conversation's total, which also counts the
    /// system prompt and tools).
    pub total_tokens: u64,
    /// Constraints that could not all be met, one sentence each.
    pub notes: Vec<String>,
}

impl Plan {
    /// The kept tail of `conversation`.
    pub fn tail<'a>(&self, conversation: &'a Conversation) -> &'a [Message] {
        conversation.messages.get(self.cut.index..).unwrap_or(&[])
    }

    /// The head's mid-conversation system messages, which are kept rather than folded.
    pub fn kept_system<'a>(&self, conversation: &'a Conversation) -> impl Iterator<Item = &'a Message> {
        let head = conversation.messages.get(..self.cut.index).unwrap_or(&[]);
        head.iter().filter(|message| message.role == Role::System)
    }

    /// The compacted `conversation` (the one this plan was made for): the pinned request and
    /// `summary`, the head's system messages verbatim, then the tail
    /// ([`crate::summary::assemble_keeping`]).
    pub fn assemble(&self, conversation: &Conversation, summary: Option<&str>) -> Conversation {
        let kept: Vec<Message> = self.kept_system(conversation).cloned().collect();
        assemble_keeping(conversation, summary, &self.pinned, &kept, self.tail(conversation))
    }
}

/// Why there is nothing to cut.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NoCut {
    /// The conversation has no safe cut point.
    NoBoundary,
    /// Keeping the requested turns leaves nothing to fold.
    KeepTurns(usize),
    /// Keeping the requested tail tokens leaves nothing to fold.
    KeepTokens(u64),
    /// Everything that could be folded already fits the tail budget.
    Fits {
        /// Tokens of the foldable messages.
        tokens: u64,
        /// The tail budget.
        max_tail_tokens: u64,
    },
    /// The head would be too small to be worth folding.
    TooLittle {
        /// Tokens the head would hold.
        head_tokens: u64,
        /// Tokens of the conversation.
        total_tokens: u64,
        /// The required fraction.
        min_progress: f64,
    },
}

impl fmt::Display for NoCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoCut::NoBoundary => f.write_str("the conversation has no safe cut point"),
            NoCut::KeepTurns(turns) => write!(f, "keeping the last {turns} user turn(s) leaves nothing to fold"),
            NoCut::KeepTokens(tokens) => {
                write!(f, "keeping at least {} tail tokens leaves nothing to fold", Thousands(*tokens))
            }
            NoCut::Fits { tokens, max_tail_tokens } => write!(
                f,
                "the messages that could be folded hold {} tokens, within the tail budget of {}",
                Thousands(*tokens),
                Thousands(*max_tail_tokens)
            ),
            NoCut::TooLittle { head_tokens, total_tokens, min_progress } => write!(
                f,
                "the head would hold {} of the messages' {} tokens, less than the minimum of {:.0}%",
                Thousands(*head_tokens),
                Thousands(*total_tokens),
                min_progress * 100.0
            ),
        }
    }
}

/// Plans a cut of `conversation`, counting tokens with `counter`.
pub fn plan(conversation: &Conversation, config: &PlanConfig, counter: &dyn TokenCounter) -> Result<Plan, NoCut> {
    let counts: Vec<u64> = conversation.messages.iter().map(|message| count_message(counter, message)).collect();
    plan_with_counts(conversation, config, counter, &counts)
}

/// [`plan`] with the messages' token counts given (e.g. from a [`crate::tokens::TokenLedger`]),
/// so re-planning a grown conversation does not recount it.
pub fn plan_with_counts(
    conversation: &Conversation,
    config: &PlanConfig,
    counter: &dyn TokenCounter,
    counts: &[u64],
) -> Result<Plan, NoCut> {
    let messages = &conversation.messages;
    let count = |index: usize| counts.get(index).copied().unwrap_or_default();
    // suffix[i] = tokens of messages[i..].
    let mut suffix = vec![0u64; messages.len() + 1];
    for index in (0..messages.len()).rev() {
        suffix[index] = suffix[index + 1] + count(index);
    }
    let total_tokens = suffix[0];

    // What message 0 contributes: pinned blocks, a previous summary, folded rest.
    let (pinned, previous_summary, first_rest) = match messages.first().and_then(split_summary) {
        Some(split) => (split.pinned, Some(split.summary), split.rest),
        None => match messages.first() {
            Some(first) if config.pin_first == PinFirst::Pinned && first.role == Role::User && first.is_authored() => {
                (first.content.clone(), None, Vec::new())
            }
            _ => (Vec::new(), None, Vec::new()),
        },
    };
    let first_in_head = previous_summary.is_some() || pinned.is_empty();
    let pinned_tokens = blocks_tokens(counter, &pinned);

    let foldable = suffix[usize::from(!first_in_head)];
    if let Some(max) = config.max_tail_tokens.filter(|&max| foldable <= max) {
        return Err(NoCut::Fits { tokens: foldable, max_tail_tokens: max });
    }
    let cuts = boundaries(messages);
    if cuts.is_empty() {
        return Err(NoCut::NoBoundary);
    }

    // Latest allowed cut from the "at least" constraints.
    let mut upper = messages.len();
    if let Some(turns) = config.keep_turns.filter(|&turns| turns > 0) {
        let turn_starts: Vec<usize> = (0..messages.len())
            .filter(|&index| {
                let message = &messages[index];
                message.role == Role::User
                    && message.is_authored()
                    && !message.content.iter().any(|block| matches!(block, Block::ToolResult(_)))
            })
            .collect();
        match turn_starts.len().checked_sub(turns).map(|at| turn_starts[at]) {
            Some(start) if start > 0 => upper = upper.min(start),
            _ => return Err(NoCut::KeepTurns(turns)),
        }
    }
    if let Some(min) = config.min_tail_tokens {
        match cuts.iter().rev().find(|cut| suffix[cut.index] >= min) {
            Some(cut) => upper = upper.min(cut.index),
            None => return Err(NoCut::KeepTokens(min)),
        }
    }
    let allowed: Vec<Boundary> = cuts.iter().copied().filter(|cut| cut.index <= upper).collect();
    let mut notes = Vec::new();
    let chosen = match config.max_tail_tokens {
        Some(max) => {
            // Earliest cut whose tail fits; failing that, the latest cut there is.
            match allowed.iter().find(|cut| suffix[cut.index] <= max) {
                Some(cut) => *cut,
                None => {
                    let fitting = cuts.iter().find(|cut| suffix[cut.index] <= max);
                    let cut = fitting.or(cuts.last()).copied().ok_or(NoCut::NoBoundary)?;
                    if cut.index > upper {
                        notes.push(format!(
                            "the tail budget of {} tokens overrides keeping the requested turns or tokens",
                            Thousands(max)
                        ));
                    }
                    if suffix[cut.index] > max {
                        notes.push(format!(
                            "the smallest safe tail holds {} tokens, over the budget of {}",
                            Thousands(suffix[cut.index]),
                            Thousands(max)
                        ));
                    }
                    cut
                }
            }
        }
        None => match allowed.last() {
            Some(cut) => *cut,
            None => return Err(NoCut::KeepTurns(config.keep_turns.unwrap_or_default())),
        },
    };

    let mut head: Vec<Message> = Vec::with_capacity(chosen.index);
    let kept_tokens: u64 = (1..chosen.index).filter(|&index| messages[index].role == Role::System).map(count).sum();
    let mut head_tokens = total_tokens - suffix[chosen.index] - kept_tokens;
    if first_in_head {
        if previous_summary.is_some() {
            // The old summary message: its rest is folded as a user message of its own.
            if !first_rest.is_empty() {
                head.push(Message::new(Role::User, first_rest));
            }
        } else if let Some(first) = messages.first() {
            head.push(first.clone());
        }
    } else {
        head_tokens = head_tokens.saturating_sub(count(0));
    }
    head.extend(messages.get(1..chosen.index).unwrap_or(&[]).iter().cloned());
    // The head's opaque summaries stay (the head keeps them too, so that its messages are
    // the conversation's; a summarizer sees only that one was there).
    let mut pinned = pinned;
    let mut pinned_tokens = pinned_tokens;
    for block in head.iter().flat_map(|message| &message.content).filter(|block| is_opaque_summary(block)) {
        let tokens = count_block(counter, block);
        head_tokens = head_tokens.saturating_sub(tokens);
        pinned_tokens += tokens;
        pinned.push(block.clone());
    }
    if head.is_empty() || (head_tokens as f64) < config.min_progress * total_tokens as f64 {
        return Err(NoCut::TooLittle { head_tokens, total_tokens, min_progress: config.min_progress });
    }
    Ok(Plan {
        cut: chosen,
        pinned,
        previous_summary,
        head,
        head_tokens,
        pinned_tokens: pinned_tokens + kept_tokens,
        tail_tokens: suffix[chosen.index],
        total_tokens,
        notes,
    })
}

/// Whether `block` is a provider's own summary of earlier turns: a `compaction` item of the
/// OpenAI Responses API or Anthropic's `compaction` block. Its content is encrypted or
/// server-made, so it cannot be folded into a summary of ours; the plan keeps it.
pub fn is_opaque_summary(block: &Block) -> bool {
    matches!(block, Block::Other(value) if value.get("type").and_then(Value::as_str) == Some("compaction"))
}

fn blocks_tokens(counter: &dyn TokenCounter, blocks: &[Block]) -> u64 {
    if blocks.is_empty() {
        return 0;
    }
    count_message(counter, &Message::new(Role::User, blocks.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::BoundaryKind;
    use crate::summary::assemble;
    use crate::tokens::Chars4;
    use crate::validate::validate;
    use serde_json::{json, Value};

    fn long_session(turns: usize, cycles: usize) -> Conversation {
        let mut messages = Vec::new();
        let mut id = 0;
        for turn in 0..turns {
            messages.push(json!({"role": "user", "content": format!("request {turn}: please do the thing")}));
            for _ in 0..cycles {
                id += 1;
                messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{id}"), "name": "Read", "input": {"file_path": "a.rs"}}]}));
                messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{id}"), "content": "x".repeat(400)}]}));
            }
            messages.push(json!({"role": "assistant", "content": format!("done with {turn}")}));
        }
        Conversation::from_value(Value::Array(messages)).unwrap()
    }

    fn check(conversation: &Conversation, config: PlanConfig) -> Plan {
        let plan = plan(conversation, &config, &Chars4).expect("a plan");
        let out = assemble(conversation, Some("summary"), &plan.pinned, plan.tail(conversation));
        assert!(validate(&out).is_empty(), "{:?}", validate(&out));
        plan
    }

    #[test]
    fn keeps_the_requested_turns() {
        let conversation = long_session(4, 3);
        let plan =
            check(&conversation, PlanConfig { keep_turns: Some(2), max_tail_tokens: None, ..PlanConfig::default() });
        assert_eq!(plan.cut.kind, BoundaryKind::TurnStart);
        assert_eq!(plan.cut.index, 16);
        assert_eq!(plan.pinned, conversation.messages[0].content);
        assert_eq!(plan.head.len(), 15);
    }

    #[test]
    fn a_single_long_turn_is_cut_at_a_tool_cycle() {
        let conversation = long_session(1, 300);
        let plan = check(&conversation, PlanConfig { max_tail_tokens: Some(2_000), ..PlanConfig::default() });
        assert_eq!(plan.cut.kind, BoundaryKind::ToolCycle);
        assert!(plan.tail_tokens <= 2_000);
        assert!(plan.tail_tokens > 1_500, "keeps as much as fits: {}", plan.tail_tokens);
    }

    #[test]
    fn too_little_to_fold_is_no_plan() {
        let conversation = long_session(2, 1);
        let err = plan(&conversation, &PlanConfig::default(), &Chars4).unwrap_err();
        assert!(matches!(err, NoCut::Fits { .. }), "{err}");
        let config =
            PlanConfig { max_tail_tokens: None, keep_turns: Some(1), min_progress: 0.6, ..PlanConfig::default() };
        let err = plan(&conversation, &config, &Chars4).unwrap_err();
        assert!(matches!(err, NoCut::TooLittle { .. }), "{err}");
        let config = PlanConfig { keep_turns: Some(2), max_tail_tokens: None, ..PlanConfig::default() };
        let err = plan(&conversation, &config, &Chars4).unwrap_err();
        assert_eq!(err, NoCut::KeepTurns(2));
    }

    #[test]
    fn an_opaque_summary_in_the_head_is_kept_once() {
        let mut conversation = long_session(4, 3);
        let compaction = json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "E"});
        conversation.messages[5].content.push(Block::Other(compaction.clone()));
        let plan =
            check(&conversation, PlanConfig { keep_turns: Some(1), max_tail_tokens: None, ..PlanConfig::default() });
        assert!(plan.cut.index > 5);
        let kept = |blocks: &[Block]| blocks.iter().filter(|block| is_opaque_summary(block)).count();
        assert_eq!(kept(&plan.pinned), 1);
        assert_eq!(plan.pinned.last(), Some(&Block::Other(compaction)), "after the first request");
        let out = assemble(&conversation, Some("summary"), &plan.pinned, plan.tail(&conversation));
        assert_eq!(out.messages.iter().map(|message| kept(&message.content)).sum::<usize>(), 1);
        // The next compaction keeps it again, from the pinned part of the summary message.
        let mut grown = out.clone();
        grown.messages.extend(long_session(2, 3).messages);
        let again = check(&grown, PlanConfig { keep_turns: Some(1), max_tail_tokens: None, ..PlanConfig::default() });
        assert_eq!(kept(&again.pinned), 1);
    }

    #[test]
    fn a_previous_summary_is_folded_in() {
        let conversation = long_session(3, 4);
        let first =
            check(&conversation, PlanConfig { keep_turns: Some(1), max_tail_tokens: None, ..PlanConfig::default() });
        let compacted = assemble(&conversation, Some("old summary"), &first.pinned, first.tail(&conversation));
        let grown = {
            let mut grown = compacted.clone();
            grown.messages.extend(long_session(2, 3).messages);
            grown
        };
        let second = check(&grown, PlanConfig { keep_turns: Some(1), max_tail_tokens: None, ..PlanConfig::default() });
        assert_eq!(second.previous_summary.as_deref(), Some("old summary"));
        assert_eq!(second.pinned, conversation.messages[0].content);
        // The old summary message's own user turn is folded as the head's first message.
        assert_eq!(second.head[0].content, conversation.messages[first.cut.index].content);
    }
}
