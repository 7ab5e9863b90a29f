//! Claude Code session logs (JSON Lines): read only.

use super::FormatError;
use crate::conversation::Conversation;
use serde_json::Value;

/// Whether `text` looks like a JSON Lines Claude Code log.
pub fn looks_like_log(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with("//"))
        .and_then(|line| serde_json::from_str::<Value>(line).ok())
        .is_some_and(|value| looks_like_record(&value))
}

/// Whether `value` is one Claude Code log record.
pub fn looks_like_record(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str).is_some()
        && (value.get("uuid").is_some() || value.get("sessionId").is_some())
}

/// Reads a log into a conversation, with notes on what was skipped or repaired.
pub fn parse(_text: &str) -> Result<(Conversation, Vec<String>), FormatError> {
    Err(FormatError::Unrecognized("claude-code reader not written yet".into()))
}
