//! OpenAI Chat Completions requests: read them into the Anthropic-shaped model and write
//! them back.
//!
//! The model is Anthropic's, so this module is a translation, and a translation loses what
//! one side cannot say. The design choice is to keep every tool call's id, name, input and
//! result pairing exact in both directions, and to let the rest degrade in documented ways:
//!
//! Reading (`from_value`):
//! - Leading `system`/`developer` messages become [`System::Text`], several joined by blank
//!   lines (the `developer`/`system` distinction and any `name` are dropped). A
//!   `system`/`developer` message later in the conversation is a mid-conversation system
//!   message ([`Role::System`], its `name` and other fields kept); one where the Anthropic
//!   rules allow none (say between two user messages) is read as user text, verbatim.
//! - User content: a string is one text block; `text` parts are text blocks (other fields of
//!   the part, such as `cache_control`, are kept); `image_url` parts are image blocks (a
//!   `data:…;base64,` URL becomes a `base64` source, any other URL a `url` source; `detail` is
//!   dropped); `refusal` parts are kept whole as [`Block::Other`]; any other part is read as an
//!   Anthropic block (so what the writer passed through comes back).
//! - Assistant: `reasoning_content` becomes an unsigned thinking block, placed first; `content`
//!   becomes text blocks (an empty string is no block); `tool_calls` become tool_use blocks.
//!   `arguments` is parsed as JSON; an empty string is `{}`; text that is not valid JSON is
//!   kept as a JSON string value, which [`crate::validate()`] reports (`input-not-object`):
//!   written back to OpenAI it is the same text, but the Anthropic format has no place for it. Legacy `function_call` becomes a tool_use with the id
//!   `call_legacy_<message index>`, answered by the next `function` message.
//! - `tool` messages become tool_result blocks (`name` and other fields are dropped). Runs of
//!   messages of one role merge into one message (tool results first, then the user's own
//!   blocks), so a run of tool messages and the user message after it become one user message
//!   and roles alternate.
//! - Tool definitions `{type: function, function: {name, description, parameters, …}}` become
//!   `{name, description, input_schema, …}` (a missing `parameters` becomes an empty object
//!   schema); legacy `functions` are added to them. Other tools and every other top-level field
//!   are kept unchanged (they are not translated: `tool_choice` keeps its OpenAI shape).
//!   Other message fields are kept in the message's `extra`.
//!
//! Writing (`to_value`):
//! - The system prompt is the first message, role `system` (system blocks' text joined by
//!   blank lines; their `cache_control` is dropped).
//! - A user message's tool_result blocks become `tool` messages, one per result, in order,
//!   before the rest of the message. Their `content` is the result's text (text blocks joined
//!   by newlines). OpenAI has no `is_error`, so the flag is lost (the text usually says what
//!   failed). Images and other non-text blocks inside a tool_result move to the user message
//!   that follows, as parts, ahead of the message's own blocks.
//! - User blocks: one plain text block is a string; otherwise parts (text, `image_url` with a
//!   data URL or URL); blocks OpenAI cannot carry (documents, file-id images, unknown blocks)
//!   are passed through in Anthropic shape, best effort.
//! - Assistant: text blocks are `content` (a string for one plain text block, parts for more,
//!   `null` when there are only tool calls); tool_use blocks are `tool_calls` with `arguments`
//!   the compact JSON of `input` (a string `input` is written as is); thinking blocks are
//!   `reasoning_content`, joined by blank lines, with their signatures dropped;
//!   redacted_thinking blocks are dropped. The order of text relative to tool calls is lost.
//! - A mid-conversation system message is a `system` message at its place (a string for one
//!   plain text block, else text parts).
//! - Block-level extras other than a text block's (e.g. `cache_control` on a tool_result) are
//!   dropped. Top-level extras are written back unchanged, and so are message-level extras,
//!   except on a user message that holds only tool results (its `tool` messages have no place
//!   for them).
//!
//! What each direction drops is counted as it is dropped ([`read`], [`write`]); the
//! counts are [`Loss`](super::lost::Loss)es, so a conversion can say what it lost.

use super::{FormatError, Spans};
use crate::conversation::{Conversation, Location, ModelError};
use serde_json::{json, Map, Value};

mod read;
#[cfg(test)]
mod tests;
mod write;

pub use read::read;
pub use write::write;

/// Reads an OpenAI request (object or bare array of messages).
///
/// Errors name the index of the offending message in the input. [`read`] also says what
/// the model could not keep.
pub fn from_value(value: Value) -> Result<Conversation, FormatError> {
    read(value).map(|(conversation, _)| conversation)
}

/// [`from_value`], and which of the input's messages each message was read from (runs of
/// one side merge into one message; the leading system/developer messages are the system
/// prompt).
pub fn from_value_spanned(value: Value) -> Result<(Conversation, Spans), FormatError> {
    read::read_spanned(value).map(|(conversation, spans, _)| (conversation, spans))
}

/// Writes an OpenAI request object: `messages` (system first), `tools`, then every other
/// top-level field unchanged. [`write`] also says what OpenAI could not carry.
pub fn to_value(conversation: &Conversation) -> Value {
    write(conversation).0
}

fn error(location: Location, message: impl Into<String>) -> FormatError {
    FormatError::Model(ModelError { location, message: message.into() })
}

fn at(message: usize) -> Location {
    Location { message: Some(message), ..Location::default() }
}

fn tool_from_openai(tool: Value) -> Value {
    let is_function = tool.get("type").and_then(Value::as_str) == Some("function");
    match tool.get("function") {
        Some(function) if is_function && function.get("name").is_some_and(Value::is_string) => {
            function_to_tool(function)
        }
        _ => tool,
    }
}

/// `{name, description, parameters, …}` as an Anthropic tool `{name, description, input_schema, …}`.
fn function_to_tool(function: &Value) -> Value {
    let Some(function) = function.as_object() else {
        return function.clone();
    };
    let mut tool = Map::new();
    for (key, value) in function {
        match key.as_str() {
            "parameters" => tool.insert("input_schema".into(), value.clone()),
            _ => tool.insert(key.clone(), value.clone()),
        };
    }
    tool.entry("input_schema").or_insert_with(|| json!({"type": "object", "properties": {}}));
    Value::Object(tool)
}
