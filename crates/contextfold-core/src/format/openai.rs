//! OpenAI Chat Completions: read and write.

use super::FormatError;
use crate::conversation::Conversation;
use serde_json::Value;

/// Whether these messages use OpenAI-only roles or fields.
pub fn looks_like_openai(messages: &[Value]) -> bool {
    messages.iter().any(|message| {
        matches!(
            message.get("role").and_then(Value::as_str),
            Some("system" | "developer" | "tool")
        ) || message.get("tool_calls").is_some()
            || message.get("tool_call_id").is_some()
    })
}

/// Reads an OpenAI request (object or bare array of messages).
pub fn from_value(_value: Value) -> Result<Conversation, FormatError> {
    Err(FormatError::Unrecognized("openai reader not written yet".into()))
}

/// Writes an OpenAI request object.
pub fn to_value(_conversation: &Conversation) -> Value {
    Value::Null
}
