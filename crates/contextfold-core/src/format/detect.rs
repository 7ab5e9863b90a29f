//! Which format a JSON value is, decided from markers only one format can have.
//!
//! A Responses request (`input` or `instructions` and no `messages`, or items only it has)
//! is told apart first ([`super::responses::looks_like_responses`]). Between Anthropic and
//! OpenAI Chat, role names decide last: a `system` role is Anthropic too (a
//! mid-conversation system message), and `user`/`assistant` read the same in both. So the
//! markers are weighed in this order, the first that is present deciding:
//!
//! 1. A top-level `system` field, or a tool definition with an `input_schema`: Anthropic
//!    (an OpenAI request carries its system prompt as a message).
//! 2. Fields only OpenAI messages have (`tool_calls`, `tool_call_id`, `function_call`,
//!    `reasoning_content`, an assistant `content: null`), OpenAI-only content parts
//!    (`image_url`, `input_audio`, `refusal`), function tool definitions or `functions`:
//!    OpenAI. These come before Anthropic blocks because an OpenAI request written by
//!    contextfold passes blocks it has no form for through in Anthropic shape, while an
//!    Anthropic request never holds OpenAI fields.
//! 3. Typed Anthropic content blocks (`tool_use`, `tool_result`, `thinking`, an `image` with
//!    a `source`, `document`, server tool blocks, …): Anthropic.
//! 4. Role names: `tool`, `function` or `developer`, or a `system` message first (the
//!    Anthropic rules never allow one there): OpenAI.
//! 5. Otherwise Anthropic: plain user/assistant text reads the same in both.
//!
//! `max_tokens` decides nothing: Anthropic requires it, but OpenAI accepts it too.

use super::{claude_code, responses, Format};
use serde_json::{Map, Value};

/// Content block types only the Anthropic format has.
const ANTHROPIC_BLOCKS: &[&str] = &[
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "compaction",
];

/// Message fields only OpenAI messages have.
const OPENAI_FIELDS: &[&str] = &["tool_calls", "tool_call_id", "function_call", "reasoning_content"];

/// Content part types only OpenAI has.
const OPENAI_PARTS: &[&str] = &["image_url", "input_audio", "refusal"];

/// The format of one parsed JSON value.
pub(super) fn detect_value(value: &Value) -> Format {
    if responses::looks_like_responses(value) {
        return Format::Responses;
    }
    let (top, messages) = match value {
        Value::Array(messages) => (None, messages),
        Value::Object(map) => match map.get("messages").and_then(Value::as_array) {
            Some(messages) => (Some(map), messages),
            // A lone Claude Code record is one JSON object with a `type` and a `uuid` or `sessionId`.
            None if claude_code::looks_like_record(value) => return Format::ClaudeCode,
            None => return Format::Anthropic,
        },
        _ => return Format::Anthropic,
    };
    let tools = top.and_then(|top| top.get("tools")).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if top.is_some_and(|top| top.contains_key("system")) || tools.iter().any(|tool| tool.get("input_schema").is_some())
    {
        return Format::Anthropic;
    }
    let openai_tools = tools.iter().any(|tool| tool.get("function").is_some_and(Value::is_object))
        || top.is_some_and(|top| top.contains_key("functions"));
    if openai_tools || messages.iter().any(has_openai_fields) {
        return Format::OpenAi;
    }
    if messages.iter().any(has_anthropic_blocks) {
        return Format::Anthropic;
    }
    let role = |message: &Value| message.get("role").and_then(Value::as_str).map(str::to_string);
    let openai_role =
        messages.iter().any(|message| matches!(role(message).as_deref(), Some("tool" | "function" | "developer")));
    if openai_role || messages.first().and_then(role).as_deref() == Some("system") {
        return Format::OpenAi;
    }
    Format::Anthropic
}

/// The typed parts or blocks of a message's `content`, when it is a list.
fn parts(message: &Value) -> impl Iterator<Item = &Map<String, Value>> {
    let list = message.get("content").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    list.iter().filter_map(Value::as_object)
}

fn kind(part: &Map<String, Value>) -> Option<&str> {
    part.get("type").and_then(Value::as_str)
}

fn has_openai_fields(message: &Value) -> bool {
    OPENAI_FIELDS.iter().any(|key| message.get(key).is_some())
        || (message.get("role").and_then(Value::as_str) == Some("assistant")
            && message.get("content") == Some(&Value::Null))
        || parts(message).any(|part| kind(part).is_some_and(|kind| OPENAI_PARTS.contains(&kind)))
}

fn has_anthropic_blocks(message: &Value) -> bool {
    parts(message).any(|part| match kind(part) {
        Some("image") => part.contains_key("source"),
        Some(kind) => ANTHROPIC_BLOCKS.contains(&kind),
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detect(value: Value) -> Format {
        detect_value(&value)
    }

    #[test]
    fn an_anthropic_body_with_a_mid_conversation_system_message_is_anthropic() {
        let body = json!({
            "model": "claude-opus-4-8", "max_tokens": 1000,
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": [
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
                {"role": "system", "content": "Plan mode is on."},
                {"role": "assistant", "content": "ok"}
            ]
        });
        assert_eq!(detect(body.clone()), Format::Anthropic);
        let mut bare = body;
        bare.as_object_mut().map(|map| map.remove("system"));
        assert_eq!(detect(bare["messages"].clone()), Format::Anthropic, "typed blocks decide before role names");
    }

    #[test]
    fn each_marker_decides() {
        let text = |role: &str| json!({"role": role, "content": "x"});
        assert_eq!(detect(json!([text("user")])), Format::Anthropic);
        assert_eq!(detect(json!([text("system"), text("user")])), Format::OpenAi, "a leading system message");
        assert_eq!(detect(json!([text("user"), text("system")])), Format::Anthropic);
        assert_eq!(detect(json!([text("developer")])), Format::OpenAi);
        assert_eq!(
            detect(json!([text("user"), {"role": "tool", "tool_call_id": "c", "content": "x"}])),
            Format::OpenAi
        );
        assert_eq!(detect(json!([{"role": "assistant", "content": null}])), Format::OpenAi);
        assert_eq!(
            detect(json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}])),
            Format::OpenAi
        );
        assert_eq!(
            detect(json!([{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}])),
            Format::Anthropic
        );
        // An OpenAI request may carry an Anthropic block passed through; its tool_calls decide.
        assert_eq!(
            detect(json!([
                {"role": "user", "content": [{"type": "document", "source": {"type": "text", "data": "d"}}]},
                {"role": "assistant", "content": null, "tool_calls": []}
            ])),
            Format::OpenAi
        );
        assert_eq!(detect(json!({"system": "s", "messages": [text("system")]})), Format::Anthropic);
        assert_eq!(
            detect(json!({"tools": [{"name": "a", "input_schema": {}}], "messages": [text("system")]})),
            Format::Anthropic
        );
        assert_eq!(
            detect(json!({"tools": [{"type": "function", "function": {"name": "a"}}], "messages": [text("user")]})),
            Format::OpenAi
        );
        assert_eq!(detect(json!({"max_tokens": 5, "messages": [text("system"), text("user")]})), Format::OpenAi);
        assert_eq!(detect(json!({"type": "user", "uuid": "u"})), Format::ClaudeCode);
        assert_eq!(detect(json!(3)), Format::Anthropic);
    }
}
