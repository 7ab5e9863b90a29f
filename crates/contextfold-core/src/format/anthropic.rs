//! The Anthropic Messages JSON reader and writer of the conversation model:
//! [`Conversation::from_value`] and [`Conversation::to_value`], and the same for a
//! [`Message`] and a [`Block`].
//!
//! Reading takes the modelled fields out of each object and keeps the rest in `extra`, and a
//! message keeps the shape of its `content`, so writing gives back the JSON that was read.
//! Every error names the message and block it comes from ([`Location`]).

use super::describe;
use crate::conversation::{
    Block, ContentShape, Conversation, Extra, Location, Media, Message, ModelError, RedactedThinking, Role, System,
    Text, Thinking, ToolResult, ToolResultContent, ToolUse,
};
use serde_json::{Map, Value};

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
