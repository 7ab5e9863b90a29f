//! Where a conversation's tokens go: by role, block type and tool, and its largest tool results.
//!
//! One pass over the messages with one [`TokenCounter`]; the result serializes to the
//! `--json` shape of `contextfold stats`.

use crate::conversation::{Block, Conversation, Role};
use crate::text::first_line;
use crate::tokens::{count_block, count_system, count_tools, TokenCounter, MESSAGE_OVERHEAD};
use crate::validate::{validate, warnings, Problem};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// How many of the largest tool results [`Stats`] lists.
pub const LARGEST_RESULTS: usize = 10;

/// The shape of a conversation and where its tokens go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// Number of messages.
    pub messages: usize,
    /// Number of user turns: user messages with authored content (not only tool results).
    pub turns: usize,
    /// Number of tool calls.
    pub tool_calls: usize,
    /// Tool calls by tool name.
    pub tool_calls_by_tool: BTreeMap<String, usize>,
    /// Token counts.
    pub tokens: TokenBreakdown,
    /// The largest tool results, largest first.
    pub largest_tool_results: Vec<LargeResult>,
    /// The counter used.
    pub tokenizer: String,
    /// Whether the conversation breaks no provider rule.
    pub valid: bool,
    /// The rules it breaks.
    pub problems: Vec<ProblemView>,
    /// What the API may reject although the conversation is valid ([`crate::validate::warnings`]).
    pub warnings: Vec<ProblemView>,
}

/// Token counts of a conversation: `system`, `tools` and `by_role` are parts that add up
/// to `total`, framing included; `by_block` and `by_tool` count block content only.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct TokenBreakdown {
    /// The whole request: system prompt, tool definitions and messages.
    pub total: u64,
    /// The system prompt, with its framing.
    pub system: u64,
    /// The tool definitions, with their framing.
    pub tools: u64,
    /// Messages by role (`user`, `assistant`), with their framing.
    pub by_role: BTreeMap<String, u64>,
    /// Message content by block type (`text`, `tool_use`, `tool_result`, …).
    pub by_block: BTreeMap<String, u64>,
    /// tool_use and tool_result blocks by tool name.
    pub by_tool: BTreeMap<String, u64>,
}

/// One large tool result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LargeResult {
    /// Index of the message holding it.
    pub message: usize,
    /// Index of the block within the message.
    pub block: usize,
    /// The tool that produced it (`?` when its call is not found).
    pub tool: String,
    /// Its tokens.
    pub tokens: u64,
    /// Whether it is flagged as an error.
    pub is_error: bool,
    /// Its first line, cut to 80 characters.
    pub preview: String,
}

/// A validation problem as printed in `--json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProblemView {
    /// The rule id, e.g. `dangling-use`.
    pub rule: &'static str,
    /// Index of the message.
    pub message: usize,
    /// Index of the block, when one block is at fault.
    pub block: Option<usize>,
    /// What is wrong.
    pub text: String,
}

impl From<&Problem> for ProblemView {
    fn from(problem: &Problem) -> ProblemView {
        ProblemView {
            rule: problem.rule.id(),
            message: problem.message,
            block: problem.block,
            text: problem.text.clone(),
        }
    }
}

/// Computes the statistics of `conversation` with `counter`.
pub fn stats(conversation: &Conversation, counter: &dyn TokenCounter) -> Stats {
    // The parts are priced as `count_conversation` prices the whole (framing included), and
    // the total is their sum, so every text is counted once.
    let mut tokens = TokenBreakdown {
        system: conversation.system.as_ref().map_or(0, |system| count_system(counter, system)),
        tools: conversation.tools.as_deref().map_or(0, |tools| count_tools(counter, tools)),
        ..TokenBreakdown::default()
    };
    let mut tool_names: HashMap<&str, &str> = HashMap::new();
    let mut tool_calls_by_tool = BTreeMap::new();
    let mut tool_calls = 0;
    let mut turns = 0;
    let mut largest = Vec::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        if message.role == Role::User && message.is_authored() {
            turns += 1;
        }
        *tokens.by_role.entry(message.role.as_str().to_string()).or_default() += MESSAGE_OVERHEAD;
        for (position, block) in message.content.iter().enumerate() {
            let count = count_block(counter, block);
            *tokens.by_role.entry(message.role.as_str().to_string()).or_default() += count;
            *tokens.by_block.entry(block.kind().to_string()).or_default() += count;
            match block {
                Block::ToolUse(tool_use) => {
                    tool_calls += 1;
                    *tool_calls_by_tool.entry(tool_use.name.clone()).or_default() += 1;
                    tool_names.insert(&tool_use.id, &tool_use.name);
                    *tokens.by_tool.entry(tool_use.name.clone()).or_default() += count;
                }
                Block::ToolResult(result) => {
                    let tool = tool_names.get(result.tool_use_id.as_str()).copied().unwrap_or("?");
                    *tokens.by_tool.entry(tool.to_string()).or_default() += count;
                    largest.push(LargeResult {
                        message: index,
                        block: position,
                        tool: tool.to_string(),
                        tokens: count,
                        is_error: result.is_error(),
                        preview: first_line(&result.text(), 80),
                    });
                }
                _ => {}
            }
        }
    }
    tokens.total = tokens.system + tokens.tools + tokens.by_role.values().sum::<u64>();
    // Largest first; ties keep conversation order, so the output is deterministic.
    largest.sort_by(|a, b| b.tokens.cmp(&a.tokens).then(a.message.cmp(&b.message)));
    largest.truncate(LARGEST_RESULTS);
    let problems: Vec<ProblemView> = validate(conversation).iter().map(ProblemView::from).collect();
    Stats {
        messages: conversation.messages.len(),
        turns,
        tool_calls,
        tool_calls_by_tool,
        tokens,
        largest_tool_results: largest,
        tokenizer: counter.name().to_string(),
        valid: problems.is_empty(),
        problems,
        warnings: warnings(conversation).iter().map(ProblemView::from).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{count_conversation, Chars4};
    use serde_json::json;

    #[test]
    fn counts_by_role_block_and_tool() {
        let conversation = Conversation::from_value(json!({
            "system": "sys",
            "messages": [
                {"role": "user", "content": "read it"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Read", "input": {"file_path": "x"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "line one\nline two"}]},
                {"role": "assistant", "content": "done"}
            ]
        }))
        .unwrap();
        let stats = stats(&conversation, &Chars4);
        assert_eq!((stats.messages, stats.turns, stats.tool_calls), (4, 1, 1));
        assert_eq!(stats.tool_calls_by_tool["Read"], 1);
        assert_eq!(stats.largest_tool_results[0].preview, "line one");
        assert_eq!(stats.largest_tool_results[0].tool, "Read");
        let by_role: u64 = stats.tokens.by_role.values().sum();
        let by_block: u64 = stats.tokens.by_block.values().sum();
        // Roles carry the messages' framing; blocks count content only.
        assert_eq!(by_role, by_block + 4 * MESSAGE_OVERHEAD);
        assert_eq!(
            stats.tokens.by_tool["Read"],
            stats.tokens.by_block["tool_use"] + stats.tokens.by_block["tool_result"]
        );
        assert_eq!(stats.tokens.total, by_role + stats.tokens.system + stats.tokens.tools);
        assert_eq!(stats.tokens.total, count_conversation(&Chars4, &conversation));
        assert!(stats.valid);
    }

    /// Counts as [`Chars4`] does, keeping the bytes it was given.
    #[derive(Default)]
    struct Tally(std::sync::atomic::AtomicU64);

    impl TokenCounter for Tally {
        fn name(&self) -> &'static str {
            "tally"
        }

        fn count_text(&self, text: &str) -> u64 {
            self.0.fetch_add(text.len() as u64, std::sync::atomic::Ordering::Relaxed);
            Chars4.count_text(text)
        }
    }

    #[test]
    fn every_text_is_counted_once() {
        let conversation = Conversation::from_value(json!({
            "system": "be brief",
            "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "read it"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Read", "input": {"file_path": "x"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "line one\nline two"}]}
            ]
        }))
        .unwrap();
        let (whole, parts) = (Tally::default(), Tally::default());
        let total = count_conversation(&whole, &conversation);
        assert_eq!(stats(&conversation, &parts).tokens.total, total);
        let read = |tally: &Tally| tally.0.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(read(&parts), read(&whole), "stats reads each text as often as one count does");
    }
}
