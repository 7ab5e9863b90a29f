//! Readers and writers for the conversation formats we accept, and autodetection.
//!
//! Every reader parses the text into a `serde_json::Value` once (so syntax errors carry a
//! line and column, and say in words what is wrong), detects the format from that value
//! ([`detect`]), and then maps it onto [`Conversation`] (so shape errors carry a message and
//! block index). Lone UTF-16 surrogate escapes are read as U+FFFD, with a note. Writers
//! restore the input's layout: a bare array stays an array, and say what the target format
//! could not carry ([`lost`]).

mod anthropic;
pub mod claude_code;
mod detect;
pub mod lost;
pub mod openai;
pub mod responses;
mod surrogates;

use crate::conversation::{Conversation, ModelError};
use lost::Loss;
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;

/// A conversation format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

/// A format name that is not `anthropic`, `openai`, `responses` or `claude-code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}` (expected anthropic, openai, responses or claude-code)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> Result<Format, UnknownFormat> {
        match name {
            "anthropic" => Ok(Format::Anthropic),
            "openai" => Ok(Format::OpenAi),
            "responses" => Ok(Format::Responses),
            "claude-code" => Ok(Format::ClaudeCode),
            other => Err(UnknownFormat(other.to_owned())),
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

    /// Adds `span` to the last message's entries, when a reader merges a message into the one
    /// before it after reading.
    pub(crate) fn extend_last(&mut self, span: std::ops::Range<usize>) {
        match self.messages.last_mut() {
            Some(last) => last.end = span.end,
            None => self.messages.push(span),
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
    /// What the model could not keep of the input (OpenAI fields it has no place for).
    pub lost: Vec<Loss>,
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
        /// What is wrong, in words.
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
    /// Wraps a serde_json error, keeping its position and saying what is wrong in words.
    pub fn json(err: &serde_json::Error) -> FormatError {
        FormatError::Json { line: err.line(), column: err.column(), message: explain_json(err) }
    }
}

/// serde_json's description of a syntax error, without its position, said as what is wrong.
pub(crate) fn explain_json(err: &serde_json::Error) -> String {
    let message = err.to_string();
    // serde_json appends " at line L column C"; we print the position ourselves.
    let message = message.rfind(" at line ").map_or(message.as_str(), |end| &message[..end]);
    let said = match message {
        "EOF while parsing a list" => "the text ends inside a list (a `[` is never closed; is the file cut short?)",
        "EOF while parsing an object" => {
            "the text ends inside an object (a `{` is never closed; is the file cut short?)"
        }
        "EOF while parsing a string" => {
            "the text ends inside a string (a `\"` is never closed; is the file cut short?)"
        }
        "EOF while parsing a value" => "the text ends where a value should be (is the file empty or cut short?)",
        "expected value" => "a JSON value (object, list, string, number, true, false or null) should be here",
        "expected ident" => "a word here is not true, false or null",
        "expected `:`" => "a `:` should follow the object key",
        "expected `,` or `]`" => "a `,` or `]` should follow the list item",
        "expected `,` or `}`" => "a `,` or `}` should follow the object member",
        "key must be a string" => "an object key must be a string in double quotes",
        "trailing comma" => "a comma stands before a closing bracket",
        "trailing characters" => {
            "more text follows the JSON value (only one value may be given; JSON Lines are read as a Claude Code log)"
        }
        "invalid escape" => {
            "a string holds a backslash escape JSON does not have (a \\u escape takes four hex digits; a backslash itself is \\\\)"
        }
        "invalid number" => "a number is malformed",
        "number out of range" => "a number is too large to read",
        "invalid unicode code point" => "a \\u escape names no Unicode character",
        "unexpected end of hex escape" => "a \\u escape is cut short (it takes four hex digits)",
        "recursion limit exceeded" => "the JSON nests deeper than 128 levels",
        "control character (\\u0000-\\u001F) found while parsing a string" => {
            "a string holds a raw control character (write a line break as \\n and a tab as \\t)"
        }
        other => return other.to_string(),
    };
    said.to_string()
}

/// Guesses the format of `text` from its content: a single JSON value is Responses when it
/// has `input` or `instructions` and no `messages`, or items no other format has
/// ([`responses::looks_like_responses`]); else Anthropic or OpenAI, decided from markers
/// only one format has before role names (a top-level `system`, OpenAI-only fields, typed
/// Anthropic blocks, then `tool`/`developer` roles or a leading `system` message). Several
/// JSON objects one a line are a Claude Code log.
pub fn detect(text: &str) -> Result<Format, FormatError> {
    let text = strip_bom(text);
    let (text, _) = surrogates::replace_lone_surrogates(text);
    Ok(read_json(&text, None)?.0)
}

fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Parses `text` once: its format (given, or detected) and its JSON value (`None` for a
/// Claude Code log, which is read line by line).
fn read_json(text: &str, format: Option<Format>) -> Result<(Format, Option<Value>), FormatError> {
    if format == Some(Format::ClaudeCode) {
        return Ok((Format::ClaudeCode, None));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => Ok((format.unwrap_or_else(|| detect::detect_value(&value)), Some(value))),
        Err(_) if format.is_none() && claude_code::looks_like_log(text) => Ok((Format::ClaudeCode, None)),
        Err(err) => Err(FormatError::json(&err)),
    }
}

/// Reads `text` as `format`, or as the detected format when `format` is `None`.
pub fn parse(text: &str, format: Option<Format>) -> Result<Parsed, FormatError> {
    let text = strip_bom(text);
    let (text, surrogates) = surrogates::replace_lone_surrogates(text);
    let mut notes = Vec::new();
    if surrogates > 0 {
        notes.push(format!(
            "read {surrogates} lone UTF-16 surrogate escape(s) (half of a `\\ud83d\\ude00` pair, cut apart) as U+FFFD"
        ));
    }
    let (format, value) = read_json(&text, format)?;
    let (conversation, layout, lost) = match (format, value) {
        (Format::OpenAi, Some(value)) => {
            let layout = if value.is_array() { Layout::Array } else { Layout::Object };
            let (conversation, lost) = openai::read(value)?;
            (conversation, layout, lost)
        }
        (Format::Anthropic, Some(value)) => {
            let layout = if value.is_array() { Layout::Array } else { Layout::Object };
            (Conversation::from_value(value)?, layout, Vec::new())
        }
        (Format::Responses, Some(value)) => {
            let layout = if value.is_array() { Layout::Array } else { Layout::Object };
            (responses::from_value(value)?, layout, Vec::new())
        }
        _ => {
            let (conversation, log_notes) = claude_code::parse(&text)?;
            notes.extend(log_notes);
            (conversation, Layout::Object, Vec::new())
        }
    };
    Ok(Parsed { conversation, format, layout, notes, lost })
}

/// Writes `conversation` as `format` in `layout`, as a JSON value.
///
/// A conversation read as Responses and written in another format is first made
/// [`responses::portable`].
pub fn to_value(conversation: &Conversation, format: Format, layout: Layout) -> Result<Value, FormatError> {
    to_value_with_losses(conversation, format, layout).map(|(value, _)| value)
}

/// [`to_value`], with what `format` could not carry (nothing for Anthropic, which is the
/// model's own shape; a bare array also leaves out the top-level fields).
pub fn to_value_with_losses(
    conversation: &Conversation,
    format: Format,
    layout: Layout,
) -> Result<(Value, Vec<Loss>), FormatError> {
    let portable;
    let conversation = if format != Format::Responses && responses::is_native(conversation) {
        portable = responses::portable(conversation);
        &portable
    } else {
        conversation
    };
    let (value, lost) = match format {
        Format::Anthropic => (conversation.to_value(), Vec::new()),
        Format::OpenAi => openai::write(conversation),
        Format::Responses => (responses::to_value(conversation), Vec::new()),
        Format::ClaudeCode => return Err(FormatError::ReadOnly(format)),
    };
    let list = if format == Format::Responses { "input" } else { "messages" };
    let value = match (layout, value) {
        (Layout::Array, Value::Object(mut map)) => map.remove(list).unwrap_or(Value::Array(Vec::new())),
        (_, value) => value,
    };
    Ok((value, lost))
}

/// Writes `conversation` as pretty-printed JSON text, ending in a newline.
pub fn write(conversation: &Conversation, format: Format, layout: Layout) -> Result<String, FormatError> {
    write_with_losses(conversation, format, layout).map(|(text, _)| text)
}

/// [`write`], with what `format` could not carry.
pub fn write_with_losses(
    conversation: &Conversation,
    format: Format,
    layout: Layout,
) -> Result<(String, Vec<Loss>), FormatError> {
    let (value, lost) = to_value_with_losses(conversation, format, layout)?;
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    Ok((text, lost))
}

/// An Anthropic custom tool `{name, description, input_schema, …}` as the fields of an
/// OpenAI function, added to `function`: `input_schema` becomes `parameters`, `type` and
/// `cache_control` go, the rest stays. `None` when `tool` is not such a tool (a server tool,
/// or one without a name or schema), which the writers pass on as it is.
pub(crate) fn tool_as_function(tool: &Value, mut function: Map<String, Value>) -> Option<Map<String, Value>> {
    let map = tool.as_object()?;
    let custom = matches!(map.get("type").and_then(Value::as_str), None | Some("custom"));
    if !custom || !map.get("name").is_some_and(Value::is_string) || !map.contains_key("input_schema") {
        return None;
    }
    for (key, value) in map {
        match key.as_str() {
            "type" | "cache_control" => {}
            "input_schema" => {
                function.insert("parameters".into(), value.clone());
            }
            _ => {
                function.insert(key.clone(), value.clone());
            }
        }
    }
    Some(function)
}

/// What kind of JSON value `value` is, with its article ("a string"), for error messages.
pub(crate) fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Role;

    #[test]
    fn format_names_round_trip_and_others_are_named() {
        for format in [Format::Anthropic, Format::OpenAi, Format::Responses, Format::ClaudeCode] {
            assert_eq!(format.name().parse(), Ok(format));
        }
        let err = "Anthropic".parse::<Format>().unwrap_err();
        assert_eq!(err, UnknownFormat("Anthropic".into()));
        assert_eq!(
            err.to_string(),
            "unknown format `Anthropic` (expected anthropic, openai, responses or claude-code)"
        );
    }

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
        assert_eq!(
            err.to_string(),
            "invalid JSON at line 2, column 16: a JSON value (object, list, string, number, true, false or null) should be here"
        );
        let err = parse("{\"messages\": [", None).unwrap_err();
        assert_eq!(err.to_string(), "invalid JSON at line 1, column 14: the text ends inside a list (a `[` is never closed; is the file cut short?)");
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
    fn spans_follow_later_system_messages_kept_or_read_as_user_text() {
        let chat = serde_json::json!([
            {"role": "user", "content": "hi"}, {"role": "developer", "content": "mode changed"},
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"},
            {"role": "system", "content": "between two user messages"}, {"role": "user", "content": "more"}
        ]);
        let (conversation, spans) = openai::from_value_spanned(chat).unwrap();
        assert_eq!(conversation.messages[1].role, Role::System);
        assert_eq!(spans, Spans { system: 0, messages: vec![0..1, 1..2, 2..3, 3..6] });
        let responses = serde_json::json!({"input": [
            {"type": "message", "role": "developer", "content": "p"},
            {"type": "message", "role": "user", "content": "q"},
            {"type": "message", "role": "developer", "content": "between two user messages"},
            {"type": "message", "role": "user", "content": "r"},
            {"type": "message", "role": "system", "content": "kept"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "t"}]},
            {"type": "message", "role": "user", "content": "s"}
        ]});
        let (conversation, spans) = responses::from_value_spanned(responses).unwrap();
        let roles: Vec<Role> = conversation.messages.iter().map(|message| message.role).collect();
        assert_eq!(roles, [Role::User, Role::System, Role::Assistant, Role::User]);
        assert_eq!(spans, Spans { system: 1, messages: vec![1..4, 4..5, 5..6, 6..7] });
    }

    #[test]
    fn array_layout_is_kept() {
        let parsed = parse(r#"[{"role": "user", "content": "a"}]"#, None).unwrap();
        assert_eq!(parsed.layout, Layout::Array);
        let value = to_value(&parsed.conversation, Format::Anthropic, parsed.layout).unwrap();
        assert_eq!(value, serde_json::json!([{"role": "user", "content": "a"}]));
    }
}
