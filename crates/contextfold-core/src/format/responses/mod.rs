//! OpenAI Responses API requests (`POST /v1/responses`): read their `input` items into the
//! conversation model and write them back, losslessly.
//!
//! The Responses API sends history as a flat list of items (`message`, `function_call`,
//! `function_call_output`, `reasoning`, …) where the model has alternating messages of
//! blocks. The design choice is that reading and then writing gives back the same JSON,
//! key order included, for every item type, known or not: each block keeps the item it came
//! from as a *skeleton* (the item's JSON with the values the model holds replaced by `null`)
//! under the reserved key [`LAYOUT_KEY`] of its `extra`. The writer fills the skeleton from
//! the block, so an edited block (an evicted output, a clipped text) is written in its
//! item's own shape, and a block without a skeleton (a summary, a block from another
//! format) gets the default shape. Everything Responses-only lives under that one key, so
//! [`portable`] removes it before the conversation is written in another format.
//!
//! Reading (`from_value`):
//! - `instructions` (a string) is the system prompt. Leading `system`/`developer` message
//!   items join it as system blocks, so they are never folded.
//! - Consecutive items of one side make one message: user, system and developer messages
//!   and tool outputs are the user's side; assistant messages, reasoning and tool calls the
//!   assistant's. Items of neither side (`compaction`, unknown types) join the message
//!   before them. Blocks are never reordered.
//! - `message` content: a string is one text block; `input_text`/`output_text` parts are
//!   text blocks, `input_image` parts images, `input_file` parts documents, other parts
//!   are kept whole as [`Block::Other`].
//! - `function_call`, `custom_tool_call`, `local_shell_call`, `shell_call`,
//!   `apply_patch_call` and `computer_call` are tool_use blocks whose id is the `call_id`;
//!   their `*_output` items are tool_result blocks answering it. A function call's
//!   `arguments` are parsed as JSON (and written back as the original text while unchanged);
//!   a custom tool's free-text `input` becomes `{"input": text}`; the other calls' `action`
//!   (or `operation`) is the input. An output that is a string or a list of content parts
//!   is the result's content; any other output is kept in the skeleton, untouched.
//! - `reasoning` items are thinking blocks: the summary text is the thinking (what is
//!   counted), the opaque `encrypted_content` the signature. A reasoning item stays in the
//!   assistant message of the call or message it precedes, so no cut separates them.
//! - Every other item (`compaction`, `web_search_call`, `mcp_call`, …) is kept whole as a
//!   [`Block::Other`]; a `compaction` block is never folded ([`crate::plan`] keeps it).
//!
//! Writing (`to_value`): the items in order, the top-level fields in their input order.
//! Blocks without a skeleton: text is an `input_text` (user) or `output_text` (assistant)
//! message, tool_use a `function_call`, tool_result a `function_call_output`; thinking
//! without a skeleton (from another provider) and redacted thinking are dropped, since
//! the Responses API accepts only its own reasoning items. Block extras other than the
//! skeleton are not written.

mod check;
mod items;
mod read;
mod write;

pub use check::check;

use super::{FormatError, Spans};
use crate::conversation::{Block, Conversation, System, ToolResultContent};
use serde_json::{Map, Value};

/// The reserved `extra` key holding what the Responses format needs to write a block (or
/// the request) back in its own shape.
pub const LAYOUT_KEY: &str = "_contextfold_responses";

/// Item types that mark a JSON value as Responses input: no other format we read has them.
const ITEM_TYPES: &[&str] = &[
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "computer_call",
    "computer_call_output",
    "reasoning",
    "compaction",
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "item_reference",
];

/// Content part types of Responses messages.
const PART_TYPES: &[&str] = &["input_text", "output_text", "input_image", "input_file", "input_audio"];

/// Whether `value` is a Responses request (an object with `input` or `instructions` and no
/// `messages`) or a list of Responses items (an item `type` or content part no other format
/// uses).
pub fn looks_like_responses(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            !map.contains_key("messages") && (map.contains_key("input") || map.contains_key("instructions"))
        }
        Value::Array(items) => items.iter().any(is_responses_item),
        _ => false,
    }
}

fn is_responses_item(item: &Value) -> bool {
    let kind = item.get("type").and_then(Value::as_str);
    if kind.is_some_and(|kind| ITEM_TYPES.contains(&kind)) {
        return true;
    }
    let parts = item.get("content").and_then(Value::as_array);
    let has_parts = parts.is_some_and(|parts| {
        parts.iter().any(|part| part.get("type").and_then(Value::as_str).is_some_and(|kind| PART_TYPES.contains(&kind)))
    });
    has_parts || (kind == Some("message") && item.get("role").is_some())
}

/// Reads a Responses request object, or a bare array of input items.
///
/// Errors name the index of the offending item in `input`.
pub fn from_value(value: Value) -> Result<Conversation, FormatError> {
    read::read(value).map(|(conversation, _)| conversation)
}

/// [`from_value`], and which input items each message was read from (the leading
/// system/developer messages are the system prompt). Empty when `input` is a string.
pub fn from_value_spanned(value: Value) -> Result<(Conversation, Spans), FormatError> {
    read::read(value)
}

/// Writes a Responses request object: the top-level fields in their input order, with
/// `input` rebuilt from the messages and `instructions` from the system prompt.
pub fn to_value(conversation: &Conversation) -> Value {
    write::write(conversation)
}

/// The items [`to_value`] writes for `conversation`, in order.
pub fn items(conversation: &Conversation) -> Vec<Value> {
    write::items(conversation).items
}

/// Whether `conversation` was read from the Responses format (it carries item skeletons).
pub fn is_native(conversation: &Conversation) -> bool {
    conversation.extra.contains_key(LAYOUT_KEY)
}

/// `conversation` without anything Responses-only, to be written in another format: the
/// skeletons are removed, reasoning signatures (OpenAI's encrypted content means nothing
/// elsewhere) dropped, and function tool definitions `{type: function, name, parameters}`
/// become `{name, description, input_schema}`. Other tools and top-level fields are kept
/// as they are.
pub fn portable(conversation: &Conversation) -> Conversation {
    let mut conversation = conversation.clone();
    conversation.extra.remove(LAYOUT_KEY);
    if let Some(System::Blocks(blocks)) = &mut conversation.system {
        blocks.iter_mut().for_each(strip_block);
    }
    for message in &mut conversation.messages {
        message.content.iter_mut().for_each(strip_block);
    }
    if let Some(tools) = &mut conversation.tools {
        for tool in tools.iter_mut() {
            *tool = write::tool_to_anthropic(tool);
        }
    }
    conversation
}

fn strip_block(block: &mut Block) {
    match block {
        Block::Text(text) => drop(text.extra.remove(LAYOUT_KEY)),
        Block::ToolUse(tool_use) => drop(tool_use.extra.remove(LAYOUT_KEY)),
        Block::ToolResult(result) => {
            result.extra.remove(LAYOUT_KEY);
            if let Some(ToolResultContent::Blocks(blocks)) = &mut result.content {
                blocks.iter_mut().for_each(strip_block);
            }
        }
        Block::Thinking(thinking) => {
            if thinking.extra.remove(LAYOUT_KEY).is_some() {
                thinking.signature = None;
            }
        }
        Block::RedactedThinking(redacted) => drop(redacted.extra.remove(LAYOUT_KEY)),
        Block::Image(media) | Block::Document(media) => drop(media.extra.remove(LAYOUT_KEY)),
        Block::Other(Value::Object(map)) => drop(map.remove(LAYOUT_KEY)),
        Block::Other(_) => {}
    }
}

/// The layout a block keeps under [`LAYOUT_KEY`]: the skeleton of the item it starts, and,
/// for a content part, the skeleton of the part.
#[derive(Debug, Clone, Default, PartialEq)]
struct Layout {
    /// The item's JSON with modelled values replaced by `null`; present on the first block
    /// of an item.
    item: Option<Map<String, Value>>,
    /// The content part's JSON with its text (or source) replaced; `Some(Value::Bool(true))`
    /// for a part kept whole in a [`Block::Other`].
    part: Option<Value>,
    /// The block is the system prompt given as `instructions`.
    instructions: bool,
    /// The block is the whole `input`, given as a string.
    string_input: bool,
}

impl Layout {
    fn to_value(&self) -> Value {
        let mut map = Map::new();
        if let Some(item) = &self.item {
            map.insert("item".into(), Value::Object(item.clone()));
        }
        if let Some(part) = &self.part {
            map.insert("part".into(), part.clone());
        }
        if self.instructions {
            map.insert("instructions".into(), Value::Bool(true));
        }
        if self.string_input {
            map.insert("string_input".into(), Value::Bool(true));
        }
        Value::Object(map)
    }

    fn from_value(value: Option<&Value>) -> Option<Layout> {
        let map = value?.as_object()?;
        Some(Layout {
            item: map.get("item").and_then(Value::as_object).cloned(),
            part: map.get("part").cloned(),
            instructions: map.get("instructions") == Some(&Value::Bool(true)),
            string_input: map.get("string_input") == Some(&Value::Bool(true)),
        })
    }
}

#[cfg(test)]
mod tests;
