//! Readers and writers for the conversation formats we accept, and autodetection.
//!
//! Every reader parses the text into a `serde_json::Value` first (so syntax errors carry a
//! line and column) and then maps it onto [`Conversation`] (so shape errors carry a message
//! and block index). Writers restore the input's layout: a bare array stays an array.

pub mod claude_code;
pub mod openai;
pub mod responses;

use crate::conversation::{Conversation, ModelError};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// A conversation format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Anthropic Messages request JSON (a request body, `{system, messages, tools}`, or an
    /// array of messages).
    Anthropic,
    /// OpenAI Chat Completions request JSON (or an array of its messages).
    OpenAi,
    /// OpenAI Responses request JSON (or an array of its input items).
    Responses,
    /// Claude Code session log (JSON Lines); read only.
    ClaudeCode,
}

impl Format {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
            Format::Responses => "responses",
            Format::ClaudeCode => "claude-code",
        }
    }

    /// The format to write a conversation read as `self` in: itself, or Anthropic for a
    /// read-only format.
    pub fn writable(self) -> Format {
        match self {
            Format::ClaudeCode => Format::Anthropic,
            format => format,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Format, String> {
        match name {
            "anthropic" => Ok(Format::Anthropic),
            "openai" => Ok(Format::OpenAi),
            "responses" => Ok(Format::Responses),
            "claude-code" => Ok(Format::ClaudeCode),
            other => Err(format!("unknown format `{other}` (expected anthropic, openai, responses or claude-code)")),
        }
    }
}

/// Whether the input was a request object or a bare array of messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `{"messages": [...], ...}`.
    #[default]
    Object,
    /// `[...]`.
    Array,
}

/// Which entries of a request's list (its `messages`, or its `input` items) each message of
/// the conversation read from it came from, so that a proxy can send the entries of a
/// message it did not change as the client wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spans {
    /// The leading entries read into the system prompt: `0..system`.
    pub system: usize,
    /// For each message, the entries it was read from. The ranges follow one another from
    /// `system` to the end of the list.
    pub messages: Vec<std::ops::Range<usize>>,
}

impl Spans {
    /// Records that entry `index` was read, leaving the reader with `messages` messages:
    /// none means the entry went into the system prompt; otherwise it is part of the last.
    pub(crate) fn record(&mut self, index: usize, messages: usize) {
        match messages {
            0 => self.system = index + 1,
            count if self.messages.len() == count => {
                if let Some(last) = self.messages.last_mut() {
                    last.end = index + 1;
                }
            }
            _ => self.messages.push(index..index + 1),
        }
    }
}

/// A conversation read from text, with what the reader learned about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The conversation.
    pub conversation: Conversation,
    /// The format it was read as.
    pub format: Format,
    /// Its layout, for writing it back the same way.
    pub layout: Layout,
    /// What the reader skipped or changed, one sentence each (e.g. unreadable log lines).
    pub notes: Vec<String>,
}

/// Input that is not a conversation in the expected format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The text is not valid JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_json's description.
        message: String,
    },
    /// The JSON does not have the shape of a conversation.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A Responses input item does not have the shape of one.
    #[error("input item {index}: {message}")]
    Item {
        /// Index of the item in `input`.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The input matches no format we know.
    #[error("{0}")]
    Unrecognized(String),
    /// The format cannot be written.
    #[error("the {0} format can be read but not written; write anthropic, openai or responses")]
    ReadOnly(Format),
}

impl FormatError {
    /// Wraps a serde_json error, keeping its position.
    pub fn json(err: &serde_json::Error) -> FormatError {
        let message = err.to_string();
        // serde_json appends " at line L column C"; we print the position ourselves.
        let message = match message.rfind(" at line ") {
            Some(end) => message[..end].to_string(),
            None => message,
        };
        FormatError::Json { line: err.line(), column: err.column(), message }
    }
}

/// Guesses the format of `text` from its content.
///
/// A single JSON value is OpenAI when its messages use OpenAI-only roles or fields
/// (`system`/`developer`/`tool` roles, `tool_calls`, `tool_call_id`, `image_url` parts),
/// and Anthropic otherwise (plain user/assistant strings read the same in both). It is
/// Responses when it has `input` or `instructions` and no `messages`, or items of types no
/// other format has ([`responses::looks_like_responses`]). Text that is several JSON
/// objects, one a line, is a Claude Code log.
pub fn detect(text: &str) -> Result<Format, FormatError> {
    let text = strip_bom(text);
    match serde_json::from_str::<Value>(text) {
        Ok(value) => Ok(detect_value(&value)),
        Err(err) => {
            if claude_code::looks_like_log(text) {
                Ok(Format::ClaudeCode)
            } else {
                Err(FormatError::json(&err))
            }
        }
    }
}

fn detect_value(value: &Value) -> Format {
    if responses::looks_like_responses(value) {
        return Format::Responses;
    }
    let messages = match value {
        Value::Array(messages) => Some(messages),
        Value::Object(map) => map.get("messages").and_then(Value::as_array),
        _ => None,
    };
    match messages {
        Some(messages) if openai::looks_like_openai(messages) => Format::OpenAi,
        Some(_) => Format::Anthropic,
        // A lone Claude Code record is one JSON object with a `type` and a `uuid` or `sessionId`.
        None if claude_code::looks_like_record(value) => Format::ClaudeCode,
        None => Format::Anthropic,
    }
}

fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Reads `text` as `format`, or as the detected format when `format` is `None`.
pub fn parse(text: &str, format: Option<Format>) -> Result<Parsed, FormatError> {
    let text = strip_bom(text);
    let format = match format {
        Some(format) => format,
        None => detect(text)?,
    };
    if format == Format::ClaudeCode {
        let (conversation, notes) = claude_code::parse(text)?;
        return Ok(Parsed { conversation, format, layout: Layout::Object, notes });
    }
    let value: Value = serde_json::from_str(text).map_err(|err| FormatError::json(&err))?;
    let layout = if value.is_array() { Layout::Array } else { Layout::Object };
    let conversation = match format {
        Format::Anthropic => Conversation::from_value(value)?,
        Format::OpenAi => openai::from_value(value)?,
        Format::Responses => responses::from_value(value)?,
        Format::ClaudeCode => unreachable!("handled above"),
    };
    Ok(Parsed { conversation, format, layout, notes: Vec::new() })
}

/// Writes `conversation` as `format` in `layout`, as a JSON value.
///
/// A conversation read as Responses and written in another format is first made
/// [`responses::portable`].
pub fn to_value(conversation: &Conversation, format: Format, layout: Layout) -> Result<Value, FormatError> {
    let portable;
    let conversation = if format != Format::Responses && responses::is_native(conversation) {
        portable = responses::portable(conversation);
        &portable
    } else {
        conversation
    };
    let value = match format {
        Format::Anthropic => conversation.to_value(),
        Format::OpenAi => openai::to_value(conversation),
        Format::Responses => responses::to_value(conversation),
        Format::ClaudeCode => return Err(FormatError::ReadOnly(format)),
    };
    let list = if format == Format::Responses { "input" } else { "messages" };
    Ok(match (layout, value) {
        (Layout::Array, Value::Object(mut map)) => map.remove(list).unwrap_or(Value::Array(Vec::new())),
        (_, value) => value,
    })
}

/// Writes `conversation` as pretty-printed JSON text, ending in a newline.
pub fn write(conversation: &Conversation, format: Format, layout: Layout) -> Result<String, FormatError> {
    let value = to_value(conversation, format, layout)?;
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_formats() {
        assert_eq!(detect(r#"{"messages": [{"role": "user", "content": "a"}]}"#), Ok(Format::Anthropic));
        assert_eq!(detect(r#"[{"role": "system", "content": "a"}]"#), Ok(Format::OpenAi));
        assert_eq!(
            detect("{\"type\":\"user\",\"uuid\":\"a\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n{\"type\":\"assistant\",\"uuid\":\"b\",\"message\":{\"role\":\"assistant\",\"content\":[]}}\n"),
            Ok(Format::ClaudeCode)
        );
    }

    #[test]
    fn json_errors_have_positions() {
        let err = parse("{\n  \"messages\": [,]\n}", None).unwrap_err();
        assert!(matches!(err, FormatError::Json { line: 2, column: 16, .. }), "{err:?}");
        assert_eq!(err.to_string(), "invalid JSON at line 2, column 16: expected value");
    }

    #[test]
    fn spans_say_which_entries_each_message_came_from() {
        let chat = serde_json::json!([
            {"role": "system", "content": "a"}, {"role": "developer", "content": "b"},
            {"role": "user", "content": "c"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "x"}, {"role": "tool", "tool_call_id": "2", "content": "y"},
            {"role": "user", "content": "d"}, {"role": "assistant", "content": "e"}
        ]);
        let (conversation, spans) = openai::from_value_spanned(chat).unwrap();
        assert_eq!(spans, Spans { system: 2, messages: vec![2..3, 3..4, 4..7, 7..8] });
        assert_eq!(conversation.messages.len(), spans.messages.len());
        let responses = serde_json::json!({"instructions": "i", "input": [
            {"type": "message", "role": "developer", "content": "p"},
            {"type": "message", "role": "user", "content": "q"},
            {"type": "reasoning", "id": "r", "summary": [], "encrypted_content": "e"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "o"},
            {"type": "compaction", "encrypted_content": "z"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "t"}]}
        ]});
        let (conversation, spans) = responses::from_value_spanned(responses).unwrap();
        assert_eq!(spans, Spans { system: 1, messages: vec![1..2, 2..4, 4..6, 6..7] });
        assert_eq!(conversation.messages.len(), spans.messages.len());
        let (_, none) = responses::from_value_spanned(serde_json::json!({"input": "hi"})).unwrap();
        assert_eq!(none, Spans::default());
    }

    #[test]
    fn array_layout_is_kept() {
        let parsed = parse(r#"[{"role": "user", "content": "a"}]"#, None).unwrap();
        assert_eq!(parsed.layout, Layout::Array);
        let value = to_value(&parsed.conversation, Format::Anthropic, parsed.layout).unwrap();
        assert_eq!(value, serde_json::json!([{"role": "user", "content": "a"}]));
    }
}
