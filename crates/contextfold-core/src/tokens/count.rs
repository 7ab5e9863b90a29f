//! Prices the structure of a conversation: blocks, messages, the system prompt and tool
//! definitions, on top of a [`TokenCounter`]'s text counts.
//!
//! Design choice: the framing a provider adds around each message and block is not public
//! and differs between providers, so it is priced with small documented constants that are
//! the same for every counter. Only what the model reads is counted: text, tool names and
//! arguments, results, thinking. Ids, signatures and fields such as `cache_control` are
//! not counted (their framing cost is part of [`BLOCK_OVERHEAD`]).

use super::media::{document_tokens, image_tokens};
use super::{count_json, TokenCounter};
use crate::conversation::{Block, Conversation, Message, System, ToolResultContent};
use serde_json::Value;

/// Tokens added per message for its role and the separators around it.
pub const MESSAGE_OVERHEAD: u64 = 4;

/// Tokens added per content block (its type marker and separators; for a tool call or
/// result, this also stands for the id).
pub const BLOCK_OVERHEAD: u64 = 3;

/// Tokens added for the system prompt's framing, when there is one.
pub const SYSTEM_OVERHEAD: u64 = 4;

/// Tokens added per tool definition, on top of its compact JSON.
pub const TOOL_DEFINITION_OVERHEAD: u64 = 4;

/// A `redacted_thinking` block's opaque `data` counts one token per this many bytes
/// (rounded up): the payload is encrypted, so its real cost is unknowable; base64 text
/// tokenizes at roughly this rate.
pub const REDACTED_THINKING_BYTES_PER_TOKEN: u64 = 4;

/// The tokens of one content block, its [`BLOCK_OVERHEAD`] included.
///
/// - text and thinking: their text (a thinking block's signature is not counted);
/// - tool_use: the tool name plus the compact JSON of its input;
/// - tool_result: its text, or the sum of its nested blocks;
/// - redacted_thinking: `data` bytes / [`REDACTED_THINKING_BYTES_PER_TOKEN`];
/// - image and document: see [`image_tokens`] and [`document_tokens`];
/// - any other block: its compact JSON.
pub fn count_block(counter: &dyn TokenCounter, block: &Block) -> u64 {
    let payload = match block {
        Block::Text(text) => counter.count_text(&text.text),
        Block::ToolUse(tool_use) => counter.count_text(&tool_use.name) + count_json(counter, &tool_use.input),
        Block::ToolResult(result) => match &result.content {
            None => 0,
            Some(ToolResultContent::Text(text)) => counter.count_text(text),
            Some(ToolResultContent::Blocks(blocks)) => blocks.iter().map(|inner| count_block(counter, inner)).sum(),
        },
        Block::Thinking(thinking) => counter.count_text(&thinking.thinking),
        Block::RedactedThinking(redacted) => (redacted.data.len() as u64).div_ceil(REDACTED_THINKING_BYTES_PER_TOKEN),
        Block::Image(media) => image_tokens(&media.source),
        Block::Document(media) => document_tokens(counter, media),
        Block::Other(value) => count_json(counter, value),
    };
    BLOCK_OVERHEAD + payload
}

/// The tokens of one message: [`MESSAGE_OVERHEAD`] plus its blocks.
pub fn count_message(counter: &dyn TokenCounter, message: &Message) -> u64 {
    MESSAGE_OVERHEAD + message.content.iter().map(|block| count_block(counter, block)).sum::<u64>()
}

/// The tokens of a run of messages.
pub fn count_messages(counter: &dyn TokenCounter, messages: &[Message]) -> u64 {
    messages.iter().map(|message| count_message(counter, message)).sum()
}

/// The tokens of a system prompt: [`SYSTEM_OVERHEAD`] plus its text or blocks. An empty
/// string prompt counts as absent (zero).
pub fn count_system(counter: &dyn TokenCounter, system: &System) -> u64 {
    match system {
        System::Text(text) if text.is_empty() => 0,
        System::Text(text) => SYSTEM_OVERHEAD + counter.count_text(text),
        System::Blocks(blocks) => SYSTEM_OVERHEAD + blocks.iter().map(|block| count_block(counter, block)).sum::<u64>(),
    }
}

/// The tokens of tool definitions: each one's compact JSON plus
/// [`TOOL_DEFINITION_OVERHEAD`].
pub fn count_tools(counter: &dyn TokenCounter, tools: &[Value]) -> u64 {
    tools.iter().map(|tool| TOOL_DEFINITION_OVERHEAD + count_json(counter, tool)).sum()
}

/// The tokens of a whole request: system prompt, tool definitions and messages. Other
/// top-level fields (`model`, `max_tokens`, …) are not shown to the model and count zero.
pub fn count_conversation(counter: &dyn TokenCounter, conversation: &Conversation) -> u64 {
    conversation.system.as_ref().map_or(0, |system| count_system(counter, system))
        + conversation.tools.as_deref().map_or(0, |tools| count_tools(counter, tools))
        + count_messages(counter, &conversation.messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Conversation;
    use crate::tokens::Chars4;
    use serde_json::json;

    fn conversation(value: Value) -> Conversation {
        Conversation::from_value(value).expect("a valid test conversation")
    }

    #[test]
    fn blocks_are_priced_as_documented() {
        let conv = conversation(json!({
            "system": "12345678",
            "tools": [{"name": "Read"}],
            "messages": [
                {"role": "user", "content": "abcd"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "abcdefgh", "signature": "s".repeat(400)},
                    {"type": "redacted_thinking", "data": "x".repeat(9)},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "ls"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [
                        {"type": "text", "text": "abcdabcd"}
                    ]},
                    {"type": "server_tool_use", "id": "s", "name": "x", "input": {}}
                ]}
            ]
        }));
        let c = &Chars4;
        let system = SYSTEM_OVERHEAD + 2;
        let tools = TOOL_DEFINITION_OVERHEAD + 4; // {"name":"Read"} is 15 bytes
        let first = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + 1;
        // thinking 2, redacted 9/4 -> 3, tool_use "Bash" 1 + {"c":"ls"} (10 bytes) 3.
        let second = MESSAGE_OVERHEAD + 3 * BLOCK_OVERHEAD + 2 + 3 + 1 + 3;
        // The result's inner text block has its own overhead; the other block is 56 bytes.
        let other = json!({"type": "server_tool_use", "id": "s", "name": "x", "input": {}});
        let other_tokens = (other.to_string().len() as u64).div_ceil(4);
        let third = MESSAGE_OVERHEAD + 2 * BLOCK_OVERHEAD + BLOCK_OVERHEAD + 2 + other_tokens;
        assert_eq!(count_system(c, conv.system.as_ref().unwrap()), system);
        assert_eq!(count_tools(c, conv.tools.as_deref().unwrap()), tools);
        assert_eq!(count_message(c, &conv.messages[0]), first);
        assert_eq!(count_message(c, &conv.messages[1]), second);
        assert_eq!(count_message(c, &conv.messages[2]), third);
        assert_eq!(count_conversation(c, &conv), system + tools + first + second + third);
    }

    #[test]
    fn empty_conversation_counts_zero() {
        assert_eq!(count_conversation(&Chars4, &Conversation::default()), 0);
        let conv = conversation(json!({"system": "", "messages": []}));
        assert_eq!(count_conversation(&Chars4, &conv), 0);
    }
}
