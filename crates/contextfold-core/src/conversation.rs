//! The conversation model: a provider-neutral, lossless view of an Anthropic Messages request.
//!
//! Every type keeps the fields it does not model in an `extra` map, and a message keeps the
//! shape of its `content` (a string or a list of blocks), so that reading and then writing a
//! request gives back the same JSON. Conversion to and from `serde_json::Value` is explicit
//! ([`Conversation::from_value`], [`Conversation::to_value`]) because input errors must name the
//! message and block they come from.

use serde_json::{Map, Value};

/// A JSON object holding the fields a type does not model.
pub type Extra = Map<String, Value>;

/// A whole request: system prompt, messages, tool definitions and everything else.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    /// The system prompt, absent when the request has none.
    pub system: Option<System>,
    /// The messages, oldest first.
    pub messages: Vec<Message>,
    /// Tool definitions, kept as the provider's JSON.
    pub tools: Option<Vec<Value>>,
    /// Every other top-level field (`model`, `max_tokens`, `metadata`, …).
    pub extra: Extra,
}

/// A system prompt: a plain string, or text blocks (which may carry `cache_control`).
#[derive(Debug, Clone, PartialEq)]
pub enum System {
    /// `"system": "…"`.
    Text(String),
    /// `"system": [{"type": "text", …}, …]`.
    Blocks(Vec<Block>),
}

impl System {
    /// The system prompt's text, blocks joined by blank lines.
    pub fn text(&self) -> String {
        match self {
            System::Text(text) => text.clone(),
            System::Blocks(blocks) => blocks.iter().filter_map(Block::as_text).collect::<Vec<_>>().join("\n\n"),
        }
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The user, or the harness speaking for it (tool results travel in user messages).
    User,
    /// The model.
    Assistant,
    /// The harness giving instructions partway through the conversation (a mid-conversation
    /// system message): text only, between a user message and the assistant's answer, and
    /// in force from there on. The system prompt before every message is
    /// [`Conversation::system`], not a message.
    System,
}

impl Role {
    /// The wire name: `user`, `assistant` or `system`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
}

/// How a message's `content` was written, so a writer can restore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentShape {
    /// A list of blocks.
    #[default]
    Blocks,
    /// A plain string; written back as a string while the content is still one plain text block.
    Text,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its content blocks (a string `content` is one text block).
    pub content: Vec<Block>,
    /// How `content` was written in the input.
    pub shape: ContentShape,
    /// Every other field of the message object.
    pub extra: Extra,
}

impl Message {
    /// A message with the given blocks.
    pub fn new(role: Role, content: Vec<Block>) -> Message {
        Message { role, content, shape: ContentShape::Blocks, extra: Extra::new() }
    }

    /// A message holding one text block.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message::new(role, vec![Block::text(text)])
    }

    /// The ids of the tool calls this message makes, in order.
    pub fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|block| match block {
            Block::ToolUse(tool_use) => Some(tool_use.id.as_str()),
            _ => None,
        })
    }

    /// Whether the message holds a tool_use block.
    pub fn has_tool_use(&self) -> bool {
        self.tool_use_ids().next().is_some()
    }

    /// Whether this user message carries something a person wrote (text, an image, a
    /// document), rather than only tool results.
    pub fn is_authored(&self) -> bool {
        self.role == Role::User && self.content.iter().any(|block| !matches!(block, Block::ToolResult(_)))
    }
}

/// A content block. Types we do not model are kept whole in [`Block::Other`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Block {
    /// `{"type": "text"}`.
    Text(Text),
    /// `{"type": "tool_use"}`: the model calls a tool.
    ToolUse(ToolUse),
    /// `{"type": "tool_result"}`: the answer to a tool call.
    ToolResult(ToolResult),
    /// `{"type": "thinking"}`: signed extended thinking.
    Thinking(Thinking),
    /// `{"type": "redacted_thinking"}`: encrypted thinking.
    RedactedThinking(RedactedThinking),
    /// `{"type": "image"}`.
    Image(Media),
    /// `{"type": "document"}`.
    Document(Media),
    /// Any other block, kept as it came.
    Other(Value),
}

/// A text block.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    /// The text.
    pub text: String,
    /// Other fields (`cache_control`, `citations`, …).
    pub extra: Extra,
}

/// A tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// The call id its result must name.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON.
    pub input: Value,
    /// Other fields.
    pub extra: Extra,
}

/// A tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub tool_use_id: String,
    /// The payload, absent when the request omits it.
    pub content: Option<ToolResultContent>,
    /// `is_error`, absent when the request omits it.
    pub is_error: Option<bool>,
    /// Other fields.
    pub extra: Extra,
}

impl ToolResult {
    /// Whether the result is flagged as an error.
    pub fn is_error(&self) -> bool {
        self.is_error == Some(true)
    }

    /// The payload's text: the string, or its text blocks joined by newlines.
    pub fn text(&self) -> String {
        match &self.content {
            None => String::new(),
            Some(ToolResultContent::Text(text)) => text.clone(),
            Some(ToolResultContent::Blocks(blocks)) => {
                blocks.iter().filter_map(Block::as_text).collect::<Vec<_>>().join("\n")
            }
        }
    }
}

/// A tool result's payload.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResultContent {
    /// `"content": "…"`.
    Text(String),
    /// `"content": [blocks]` (text and images).
    Blocks(Vec<Block>),
}

/// Signed thinking. Never edited: kept whole or dropped with its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Thinking {
    /// The thinking text.
    pub thinking: String,
    /// The signature, absent in some logs.
    pub signature: Option<String>,
    /// Other fields.
    pub extra: Extra,
}

/// Encrypted thinking.
#[derive(Debug, Clone, PartialEq)]
pub struct RedactedThinking {
    /// The opaque payload.
    pub data: String,
    /// Other fields.
    pub extra: Extra,
}

/// An image or document block: its `source` is kept as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Media {
    /// `source` (base64 data, a URL, a file id, or text for documents).
    pub source: Value,
    /// Other fields (`title`, `cache_control`, …).
    pub extra: Extra,
}

impl Block {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(Text { text: text.into(), extra: Extra::new() })
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Block::Text(text) => Some(&text.text),
            _ => None,
        }
    }

    /// The wire `type` of the block.
    pub fn kind(&self) -> &str {
        match self {
            Block::Text(_) => "text",
            Block::ToolUse(_) => "tool_use",
            Block::ToolResult(_) => "tool_result",
            Block::Thinking(_) => "thinking",
            Block::RedactedThinking(_) => "redacted_thinking",
            Block::Image(_) => "image",
            Block::Document(_) => "document",
            Block::Other(value) => value.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }
}

/// Where in a conversation an input error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Location {
    /// Index of the message, when the error is inside one.
    pub message: Option<usize>,
    /// Index of the block within the message.
    pub block: Option<usize>,
    /// Index of the block within a tool_result's content.
    pub inner: Option<usize>,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(message) = self.message {
            parts.push(format!("message {message}"));
        }
        if let Some(block) = self.block {
            parts.push(format!("block {block}"));
        }
        if let Some(inner) = self.inner {
            parts.push(format!("content block {inner}"));
        }
        if parts.is_empty() {
            f.write_str("top level")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A value that does not have the shape of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct ModelError {
    /// Where the bad value is.
    pub location: Location,
    /// What is wrong with it, as a sentence fragment.
    pub message: String,
}

impl ModelError {
    fn at(location: Location, message: impl Into<String>) -> ModelError {
        ModelError { location, message: message.into() }
    }
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

/// The fields of an object left once the modelled ones are taken: an empty map when none
/// are, so that a message read from JSON holds no spare room in each block (the parsed
/// object's table would be kept, empty, in every block).
fn leftover(map: Extra) -> Extra {
    if map.is_empty() {
        Extra::new()
    } else {
        map
    }
}

fn take_string(map: &mut Extra, key: &str, kind: &str, location: Location) -> Result<String, ModelError> {
    match map.remove(key) {
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(ModelError::at(
            location,
            format!("{kind} block's `{key}` must be a string, found {}", describe(&other)),
        )),
        None => Err(ModelError::at(location, format!("{kind} block is missing the required field `{key}`"))),
    }
}

fn take_optional_string(
    map: &mut Extra,
    key: &str,
    kind: &str,
    location: Location,
) -> Result<Option<String>, ModelError> {
    if !map.contains_key(key) {
        return Ok(None);
    }
    take_string(map, key, kind, location).map(Some)
}

impl Conversation {
    /// Reads an Anthropic Messages request: a full request body, `{system, messages, tools}`,
    /// or a bare array of messages.
    pub fn from_value(value: Value) -> Result<Conversation, ModelError> {
        match value {
            Value::Array(messages) => {
                Ok(Conversation { messages: messages_from_values(messages)?, ..Conversation::default() })
            }
            Value::Object(mut map) => {
                let messages = match map.remove("messages") {
                    Some(Value::Array(messages)) => messages_from_values(messages)?,
                    Some(other) => {
                        return Err(ModelError::at(
                            Location::default(),
                            format!("`messages` must be an array, found {}", describe(&other)),
                        ))
                    }
                    None => return Err(ModelError::at(Location::default(), "the object has no `messages` array")),
                };
                let system = match map.remove("system") {
                    None => None,
                    Some(Value::String(text)) => Some(System::Text(text)),
                    Some(Value::Array(blocks)) => Some(System::Blocks(
                        blocks
                            .into_iter()
                            .enumerate()
                            .map(|(index, block)| {
                                Block::from_value(block, Location { block: Some(index), ..Location::default() })
                            })
                            .collect::<Result<_, _>>()
                            .map_err(|err| ModelError::at(err.location, format!("in `system`: {}", err.message)))?,
                    )),
                    Some(other) => {
                        return Err(ModelError::at(
                            Location::default(),
                            format!("`system` must be a string or an array of blocks, found {}", describe(&other)),
                        ))
                    }
                };
                let tools = match map.remove("tools") {
                    None => None,
                    Some(Value::Array(tools)) => Some(tools),
                    Some(other) => {
                        return Err(ModelError::at(
                            Location::default(),
                            format!("`tools` must be an array, found {}", describe(&other)),
                        ))
                    }
                };
                Ok(Conversation { system, messages, tools, extra: leftover(map) })
            }
            other => Err(ModelError::at(
                Location::default(),
                format!("expected a request object or an array of messages, found {}", describe(&other)),
            )),
        }
    }

    /// Writes the conversation as an Anthropic request object.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        if let Some(system) = &self.system {
            let value = match system {
                System::Text(text) => Value::String(text.clone()),
                System::Blocks(blocks) => Value::Array(blocks.iter().map(Block::to_value).collect()),
            };
            map.insert("system".into(), value);
        }
        map.insert("messages".into(), Value::Array(self.messages.iter().map(Message::to_value).collect()));
        if let Some(tools) = &self.tools {
            map.insert("tools".into(), Value::Array(tools.clone()));
        }
        for (key, value) in &self.extra {
            map.insert(key.clone(), value.clone());
        }
        Value::Object(map)
    }
}

fn messages_from_values(values: Vec<Value>) -> Result<Vec<Message>, ModelError> {
    values.into_iter().enumerate().map(|(index, value)| Message::from_value(value, index)).collect()
}

impl Message {
    /// Reads one Anthropic message; `index` is its position, for error locations.
    pub fn from_value(value: Value, index: usize) -> Result<Message, ModelError> {
        let location = Location { message: Some(index), ..Location::default() };
        let Value::Object(mut map) = value else {
            return Err(ModelError::at(location, format!("a message must be an object, found {}", describe(&value))));
        };
        let role = match map.remove("role") {
            Some(Value::String(role)) => match role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "system" => Role::System,
                other => {
                    return Err(ModelError::at(
                        location,
                        format!("unknown role `{other}` (expected `user`, `assistant` or `system`)"),
                    ))
                }
            },
            Some(other) => {
                return Err(ModelError::at(location, format!("`role` must be a string, found {}", describe(&other))))
            }
            None => return Err(ModelError::at(location, "the message has no `role`")),
        };
        let (content, shape) = match map.remove("content") {
            Some(Value::String(text)) => (vec![Block::text(text)], ContentShape::Text),
            Some(Value::Array(blocks)) => (
                blocks
                    .into_iter()
                    .enumerate()
                    .map(|(block, value)| Block::from_value(value, Location { block: Some(block), ..location }))
                    .collect::<Result<_, _>>()?,
                ContentShape::Blocks,
            ),
            Some(other) => {
                return Err(ModelError::at(
                    location,
                    format!("`content` must be a string or an array of blocks, found {}", describe(&other)),
                ))
            }
            None => return Err(ModelError::at(location, "the message has no `content`")),
        };
        Ok(Message { role, content, shape, extra: leftover(map) })
    }

    /// Writes the message in Anthropic form, restoring a string `content` where it can.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("role".into(), Value::String(self.role.as_str().into()));
        let content = match (self.shape, self.content.as_slice()) {
            (ContentShape::Text, [Block::Text(text)]) if text.extra.is_empty() => Value::String(text.text.clone()),
            _ => Value::Array(self.content.iter().map(Block::to_value).collect()),
        };
        map.insert("content".into(), content);
        for (key, value) in &self.extra {
            map.insert(key.clone(), value.clone());
        }
        Value::Object(map)
    }
}

impl Block {
    /// Reads one block; `location` names it in errors.
    pub fn from_value(value: Value, location: Location) -> Result<Block, ModelError> {
        let Value::Object(mut map) = value else {
            return Err(ModelError::at(
                location,
                format!("a content block must be an object, found {}", describe(&value)),
            ));
        };
        let kind = match map.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(other) => {
                return Err(ModelError::at(
                    location,
                    format!("a block's `type` must be a string, found {}", describe(other)),
                ))
            }
            None => return Err(ModelError::at(location, "the block has no `type`")),
        };
        let block = match kind.as_str() {
            "text" => {
                map.remove("type");
                Block::Text(Text { text: take_string(&mut map, "text", "text", location)?, extra: leftover(map) })
            }
            "tool_use" => {
                map.remove("type");
                let id = take_string(&mut map, "id", "tool_use", location)?;
                let name = take_string(&mut map, "name", "tool_use", location)?;
                let input = map
                    .remove("input")
                    .ok_or_else(|| ModelError::at(location, "tool_use block is missing the required field `input`"))?;
                Block::ToolUse(ToolUse { id, name, input, extra: leftover(map) })
            }
            "tool_result" => {
                map.remove("type");
                let tool_use_id = take_string(&mut map, "tool_use_id", "tool_result", location)?;
                let content = match map.remove("content") {
                    None => None,
                    Some(Value::String(text)) => Some(ToolResultContent::Text(text)),
                    Some(Value::Array(blocks)) => Some(ToolResultContent::Blocks(
                        blocks
                            .into_iter()
                            .enumerate()
                            .map(|(inner, value)| Block::from_value(value, Location { inner: Some(inner), ..location }))
                            .collect::<Result<_, _>>()?,
                    )),
                    Some(other) => {
                        return Err(ModelError::at(
                            location,
                            format!("tool_result `content` must be a string or an array, found {}", describe(&other)),
                        ))
                    }
                };
                let is_error = match map.remove("is_error") {
                    None => None,
                    Some(Value::Bool(flag)) => Some(flag),
                    Some(other) => {
                        return Err(ModelError::at(
                            location,
                            format!("tool_result `is_error` must be a boolean, found {}", describe(&other)),
                        ))
                    }
                };
                Block::ToolResult(ToolResult { tool_use_id, content, is_error, extra: leftover(map) })
            }
            "thinking" => {
                map.remove("type");
                Block::Thinking(Thinking {
                    thinking: take_string(&mut map, "thinking", "thinking", location)?,
                    signature: take_optional_string(&mut map, "signature", "thinking", location)?,
                    extra: leftover(map),
                })
            }
            "redacted_thinking" => {
                map.remove("type");
                Block::RedactedThinking(RedactedThinking {
                    data: take_string(&mut map, "data", "redacted_thinking", location)?,
                    extra: leftover(map),
                })
            }
            "image" | "document" => {
                map.remove("type");
                let source = map.remove("source").ok_or_else(|| {
                    ModelError::at(location, format!("{kind} block is missing the required field `source`"))
                })?;
                let media = Media { source, extra: leftover(map) };
                if kind == "image" {
                    Block::Image(media)
                } else {
                    Block::Document(media)
                }
            }
            _ => Block::Other(Value::Object(map)),
        };
        Ok(block)
    }

    /// Writes the block in Anthropic form.
    pub fn to_value(&self) -> Value {
        fn object(kind: &str, fields: Vec<(&str, Value)>, extra: &Extra) -> Value {
            let mut map = Map::with_capacity(fields.len() + extra.len() + 1);
            map.insert("type".into(), Value::String(kind.into()));
            for (key, value) in fields {
                map.insert(key.into(), value);
            }
            for (key, value) in extra {
                map.insert(key.clone(), value.clone());
            }
            Value::Object(map)
        }
        match self {
            Block::Text(text) => object("text", vec![("text", Value::String(text.text.clone()))], &text.extra),
            Block::ToolUse(tool_use) => object(
                "tool_use",
                vec![
                    ("id", Value::String(tool_use.id.clone())),
                    ("name", Value::String(tool_use.name.clone())),
                    ("input", tool_use.input.clone()),
                ],
                &tool_use.extra,
            ),
            Block::ToolResult(result) => {
                let mut fields = vec![("tool_use_id", Value::String(result.tool_use_id.clone()))];
                match &result.content {
                    None => {}
                    Some(ToolResultContent::Text(text)) => fields.push(("content", Value::String(text.clone()))),
                    Some(ToolResultContent::Blocks(blocks)) => {
                        fields.push(("content", Value::Array(blocks.iter().map(Block::to_value).collect())))
                    }
                }
                if let Some(flag) = result.is_error {
                    fields.push(("is_error", Value::Bool(flag)));
                }
                object("tool_result", fields, &result.extra)
            }
            Block::Thinking(thinking) => {
                let mut fields = vec![("thinking", Value::String(thinking.thinking.clone()))];
                if let Some(signature) = &thinking.signature {
                    fields.push(("signature", Value::String(signature.clone())));
                }
                object("thinking", fields, &thinking.extra)
            }
            Block::RedactedThinking(redacted) => {
                object("redacted_thinking", vec![("data", Value::String(redacted.data.clone()))], &redacted.extra)
            }
            Block::Image(media) => object("image", vec![("source", media.source.clone())], &media.extra),
            Block::Document(media) => object("document", vec![("source", media.source.clone())], &media.extra),
            Block::Other(value) => value.clone(),
        }
    }
}

/// Serializes as the Anthropic JSON of [`Conversation::to_value`].
impl serde::Serialize for Conversation {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&self.to_value(), serializer)
    }
}

/// Serializes as the Anthropic JSON of [`Message::to_value`].
impl serde::Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&self.to_value(), serializer)
    }
}

/// Serializes as the Anthropic JSON of [`Block::to_value`].
impl serde::Serialize for Block {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&self.to_value(), serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: Value) {
        let conversation = Conversation::from_value(value.clone()).expect("parses");
        assert_eq!(conversation.to_value(), value);
    }

    #[test]
    fn unknown_fields_survive() {
        round_trip(json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "metadata": {"user_id": "u1"},
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "text", "text": "hi", "citations": [{"x": 1}]},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}, "cache_control": {"type": "ephemeral"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "x"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}], "is_error": false},
                    {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
                ], "extra_field": true}
            ]
        }));
    }

    #[test]
    fn mid_conversation_system_messages_are_read_and_written_back() {
        round_trip(json!({"system": "base", "messages": [
            {"role": "user", "content": "go"},
            {"role": "system", "content": "from now on, be terse", "cache_control": {"type": "ephemeral"}},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"},
            {"role": "system", "content": [{"type": "text", "text": "mode: plan"}]}
        ]}));
        let conversation = Conversation::from_value(json!([{"role": "system", "content": "x"}])).unwrap();
        assert_eq!(conversation.messages[0].role, Role::System);
    }

    #[test]
    fn bare_array_and_string_content() {
        let value = json!([{"role": "user", "content": "hi"}]);
        let conversation = Conversation::from_value(value).unwrap();
        assert_eq!(conversation.messages[0].shape, ContentShape::Text);
        assert_eq!(conversation.messages[0].to_value(), json!({"role": "user", "content": "hi"}));
    }

    #[test]
    fn errors_name_their_place() {
        let err = Conversation::from_value(json!({"messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "text", "text": "b"}, {"type": "tool_use", "name": "x", "input": {}}]}
        ]}))
        .unwrap_err();
        assert_eq!(err.to_string(), "message 1, block 1: tool_use block is missing the required field `id`");
        let err = Conversation::from_value(json!([{"role": "critic", "content": "a"}])).unwrap_err();
        assert_eq!(err.to_string(), "message 0: unknown role `critic` (expected `user`, `assistant` or `system`)");
        let err = Conversation::from_value(json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text"}]}]}])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message 0, block 0, content block 0: text block is missing the required field `text`"
        );
        assert!(Conversation::from_value(json!(3)).is_err());
        assert!(Conversation::from_value(json!({"messages": {}})).is_err());
    }
}
