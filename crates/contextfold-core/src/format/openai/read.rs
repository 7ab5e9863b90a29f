//! Reading an OpenAI Chat Completions request into the model (the rules are in the
//! [parent module](super)), counting what the model has no place for.

use super::{at, error, function_to_tool, tool_from_openai};
use crate::conversation::{
    Block, ContentShape, Conversation, Extra, Location, Media, Message, Role, System, Text, Thinking, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::format::lost::{Loss, LossKind, Losses};
use crate::format::{describe, FormatError, Spans};
use crate::validate::system_misplacement;
use serde_json::{json, Value};

/// Reads an OpenAI request (object or bare array of messages), with what it could not keep.
pub fn read(value: Value) -> Result<(Conversation, Vec<Loss>), FormatError> {
    read_spanned(value).map(|(conversation, _, lost)| (conversation, lost))
}

/// [`read`], and which of the input's messages each message was read from.
pub(super) fn read_spanned(value: Value) -> Result<(Conversation, Spans, Vec<Loss>), FormatError> {
    let (messages, mut extra) = match value {
        Value::Array(messages) => (messages, Extra::new()),
        Value::Object(mut map) => match map.remove("messages") {
            Some(Value::Array(messages)) => (messages, map),
            Some(other) => {
                return Err(error(
                    Location::default(),
                    format!("`messages` must be an array, found {}", describe(&other)),
                ))
            }
            None => return Err(error(Location::default(), "the object has no `messages` array")),
        },
        other => {
            return Err(error(
                Location::default(),
                format!("expected a request object or an array of messages, found {}", describe(&other)),
            ))
        }
    };
    let mut tools = match extra.remove("tools") {
        None => None,
        Some(Value::Array(tools)) => Some(tools.into_iter().map(tool_from_openai).collect::<Vec<_>>()),
        Some(other) => {
            return Err(error(Location::default(), format!("`tools` must be an array, found {}", describe(&other))))
        }
    };
    if let Some(Value::Array(functions)) = extra.get("functions") {
        let converted = functions.iter().map(function_to_tool);
        tools.get_or_insert_with(Vec::new).extend(converted);
        extra.remove("functions");
    }
    let mut reader = Reader::default();
    let mut spans = Spans::default();
    for (index, message) in messages.into_iter().enumerate() {
        reader.message(index, message)?;
        spans.record(index, reader.messages.len());
    }
    reader.place_system_messages(&mut spans);
    let conversation = Conversation {
        system: (!reader.system.is_empty()).then(|| System::Text(reader.system.join("\n\n"))),
        messages: reader.messages,
        tools,
        extra,
    };
    Ok((conversation, spans, reader.lost.into_vec()))
}

/// What [`Reader::push`] did with a message.
enum Pushed {
    /// It joined the last message, of the same role.
    Merged,
    /// It is a message of its own.
    New,
}

/// The state of reading one message list.
#[derive(Default)]
struct Reader {
    /// Texts of the leading system/developer messages.
    system: Vec<String>,
    messages: Vec<Message>,
    /// The id given to the last legacy `function_call` that no `function` message answered.
    pending_function: Option<String>,
    lost: Losses,
}

impl Reader {
    fn message(&mut self, index: usize, value: Value) -> Result<(), FormatError> {
        let location = at(index);
        let Value::Object(mut map) = value else {
            return Err(error(location, format!("a message must be an object, found {}", describe(&value))));
        };
        let role = match map.remove("role") {
            Some(Value::String(role)) => role,
            Some(other) => return Err(error(location, format!("`role` must be a string, found {}", describe(&other)))),
            None => return Err(error(location, "the message has no `role`")),
        };
        match role.as_str() {
            "system" | "developer" => {
                self.lost.add_if(role == "developer", LossKind::DeveloperRole);
                if self.messages.is_empty() {
                    self.system.push(plain_text(map.remove("content"), &role, location)?);
                    self.lost.add_if(!map.is_empty(), LossKind::SystemMessageFields);
                } else {
                    let (content, shape) = self.content(map.remove("content"), &role, location)?;
                    self.push(Message { role: Role::System, content, shape, extra: map });
                }
            }
            "user" => {
                let (content, shape) = self.content(map.remove("content"), "user", location)?;
                self.push(Message { role: Role::User, content, shape, extra: map });
            }
            "assistant" => {
                let message = self.assistant(index, map)?;
                self.push(message);
            }
            "tool" => {
                let tool_use_id = match map.remove("tool_call_id") {
                    Some(Value::String(id)) => id,
                    Some(other) => {
                        return Err(error(
                            location,
                            format!("`tool_call_id` must be a string, found {}", describe(&other)),
                        ))
                    }
                    None => return Err(error(location, "the tool message has no `tool_call_id`")),
                };
                let result = self.tool_result(tool_use_id, map.remove("content"), location)?;
                self.lost.add_if(!map.is_empty(), LossKind::ToolMessageFields);
                self.push(Message::new(Role::User, vec![Block::ToolResult(result)]));
            }
            "function" => {
                let Some(tool_use_id) = self.pending_function.take() else {
                    return Err(error(location, "a legacy `function` message answers no earlier `function_call`"));
                };
                let result = self.tool_result(tool_use_id, map.remove("content"), location)?;
                // Its `name` repeats the call's.
                map.remove("name");
                self.lost.add_if(!map.is_empty(), LossKind::ToolMessageFields);
                self.push(Message::new(Role::User, vec![Block::ToolResult(result)]));
            }
            other => {
                return Err(error(
                    location,
                    format!("unknown role `{other}` (expected system, developer, user, assistant or tool)"),
                ))
            }
        }
        Ok(())
    }

    /// The content of a user or later system message: a string is one text block.
    fn content(
        &mut self,
        content: Option<Value>,
        role: &str,
        location: Location,
    ) -> Result<(Vec<Block>, ContentShape), FormatError> {
        match content {
            Some(Value::String(text)) => Ok((vec![Block::text(text)], ContentShape::Text)),
            Some(Value::Array(parts)) => Ok((self.parts_to_blocks(parts, location)?, ContentShape::Blocks)),
            Some(other) => Err(error(
                location,
                format!("`content` must be a string or an array of parts, found {}", describe(&other)),
            )),
            None => Err(error(location, format!("the {role} message has no `content`"))),
        }
    }

    fn assistant(&mut self, index: usize, mut map: Extra) -> Result<Message, FormatError> {
        let location = at(index);
        let mut content = Vec::new();
        match map.remove("reasoning_content") {
            None | Some(Value::Null) => {}
            Some(Value::String(thinking)) => {
                content.push(Block::Thinking(Thinking { thinking, signature: None, extra: Extra::new() }))
            }
            Some(other) => {
                return Err(error(
                    location,
                    format!("`reasoning_content` must be a string, found {}", describe(&other)),
                ))
            }
        }
        let mut shape = ContentShape::Blocks;
        match map.remove("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) if text.is_empty() => {}
            Some(Value::String(text)) => {
                shape = ContentShape::Text;
                content.push(Block::text(text));
            }
            Some(Value::Array(parts)) => content.extend(self.parts_to_blocks(parts, location)?),
            Some(other) => {
                return Err(error(
                    location,
                    format!("`content` must be a string, null or an array of parts, found {}", describe(&other)),
                ))
            }
        }
        match map.remove("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(calls)) => {
                for (position, call) in calls.into_iter().enumerate() {
                    content.push(Block::ToolUse(tool_call(call, position, location)?));
                }
            }
            Some(other) => {
                return Err(error(location, format!("`tool_calls` must be an array, found {}", describe(&other))))
            }
        }
        match map.remove("function_call") {
            None | Some(Value::Null) => {}
            Some(Value::Object(function)) => {
                let id = format!("call_legacy_{index}");
                let (name, input) = function_fields(function, "`function_call`", location)?;
                self.pending_function = Some(id.clone());
                content.push(Block::ToolUse(ToolUse { id, name, input, extra: Extra::new() }));
            }
            Some(other) => {
                return Err(error(location, format!("`function_call` must be an object, found {}", describe(&other))))
            }
        }
        if content.len() != 1 {
            shape = ContentShape::Blocks;
        }
        Ok(Message { role: Role::Assistant, content, shape, extra: map })
    }

    /// Reads a later system message that the Anthropic rules allow nowhere where it stands
    /// (say between two user messages) as the user text it merges into.
    fn place_system_messages(&mut self, spans: &mut Spans) {
        let mut messages = std::mem::take(&mut self.messages);
        for index in 0..messages.len() {
            if messages[index].role == Role::System && system_misplacement(&messages, index).is_some() {
                messages[index].role = Role::User;
                self.lost.add(LossKind::SystemAsUser);
            }
        }
        let read = std::mem::take(&mut spans.messages);
        debug_assert_eq!(read.len(), messages.len(), "one span a message");
        for (message, span) in messages.into_iter().zip(read) {
            match self.push(message) {
                Pushed::Merged => spans.extend_last(span),
                Pushed::New => spans.messages.push(span),
            }
        }
    }

    /// Appends `message`, merging it into the last message when both have the same role.
    fn push(&mut self, message: Message) -> Pushed {
        match self.messages.last_mut() {
            Some(last) if last.role == message.role => {
                last.content.extend(message.content);
                last.shape = ContentShape::Blocks;
                for (key, value) in message.extra {
                    last.extra.entry(key).or_insert(value);
                }
                if last.role == Role::User {
                    // Tool results must lead their user message; keep each group's order.
                    let (mut blocks, rest): (Vec<Block>, Vec<Block>) = std::mem::take(&mut last.content)
                        .into_iter()
                        .partition(|block| matches!(block, Block::ToolResult(_)));
                    blocks.extend(rest);
                    last.content = blocks;
                }
                Pushed::Merged
            }
            _ => {
                self.messages.push(message);
                Pushed::New
            }
        }
    }

    fn parts_to_blocks(&mut self, parts: Vec<Value>, location: Location) -> Result<Vec<Block>, FormatError> {
        parts
            .into_iter()
            .enumerate()
            .map(|(position, part)| self.part_to_block(part, Location { block: Some(position), ..location }))
            .collect()
    }

    fn part_to_block(&mut self, part: Value, location: Location) -> Result<Block, FormatError> {
        let Value::Object(mut map) = part else {
            return Err(error(location, format!("a content part must be an object, found {}", describe(&part))));
        };
        match map.get("type").and_then(Value::as_str) {
            Some("text") => {
                map.remove("type");
                let text = match map.remove("text") {
                    Some(Value::String(text)) => text,
                    _ => return Err(error(location, "a text part needs a string `text`")),
                };
                Ok(Block::Text(Text { text, extra: map }))
            }
            Some("image_url") => {
                let (url, detail) = match map.get("image_url") {
                    Some(Value::String(url)) => (Some(url.as_str()), false),
                    Some(Value::Object(image)) => {
                        (image.get("url").and_then(Value::as_str), image.contains_key("detail"))
                    }
                    _ => (None, false),
                };
                let Some(url) = url else {
                    return Err(error(location, "an image_url part needs `image_url.url`"));
                };
                self.lost.add_if(detail, LossKind::ImageDetail);
                Ok(Block::Image(Media { source: image_source(url), extra: Extra::new() }))
            }
            Some("refusal") => Ok(Block::Other(Value::Object(map))),
            // Anything else is read as an Anthropic block: the writer passes those through.
            _ => Ok(Block::from_value(Value::Object(map), location)?),
        }
    }

    fn tool_result(
        &mut self,
        tool_use_id: String,
        content: Option<Value>,
        location: Location,
    ) -> Result<ToolResult, FormatError> {
        let content = match content {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(ToolResultContent::Text(text)),
            Some(Value::Array(parts)) => Some(ToolResultContent::Blocks(self.parts_to_blocks(parts, location)?)),
            Some(other) => {
                return Err(error(
                    location,
                    format!(
                        "a tool message's `content` must be a string or an array of parts, found {}",
                        describe(&other)
                    ),
                ))
            }
        };
        Ok(ToolResult { tool_use_id, content, is_error: None, extra: Extra::new() })
    }
}

/// The text of a leading system or developer message: a string, or text parts joined by
/// newlines.
fn plain_text(content: Option<Value>, role: &str, location: Location) -> Result<String, FormatError> {
    match content {
        Some(Value::String(text)) => Ok(text),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (position, part) in parts.iter().enumerate() {
                match part.get("text").and_then(Value::as_str) {
                    Some(text) => texts.push(text),
                    None => {
                        return Err(error(
                            Location { block: Some(position), ..location },
                            format!("a {role} message's content parts must be text parts"),
                        ))
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        Some(other) => Err(error(
            location,
            format!("`content` must be a string or an array of text parts, found {}", describe(&other)),
        )),
        None => Err(error(location, format!("the {role} message has no `content`"))),
    }
}

/// The Anthropic image source for an OpenAI image URL.
fn image_source(url: &str) -> Value {
    let base64 = url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,"));
    match base64 {
        Some((media_type, data)) => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        None => json!({"type": "url", "url": url}),
    }
}

fn tool_call(call: Value, position: usize, location: Location) -> Result<ToolUse, FormatError> {
    let location = Location { block: Some(position), ..location };
    let what = format!("tool call {position}");
    let Value::Object(mut call) = call else {
        return Err(error(location, format!("{what} must be an object, found {}", describe(&call))));
    };
    match call.get("type").and_then(Value::as_str) {
        None | Some("function") => {}
        Some(other) => {
            return Err(error(location, format!("{what} has type `{other}`; only `function` tool calls can be read")))
        }
    }
    let id = match call.remove("id") {
        Some(Value::String(id)) => id,
        _ => return Err(error(location, format!("{what} needs a string `id`"))),
    };
    let Some(Value::Object(function)) = call.remove("function") else {
        return Err(error(location, format!("{what} needs a `function` object")));
    };
    let (name, input) = function_fields(function, &what, location)?;
    Ok(ToolUse { id, name, input, extra: Extra::new() })
}

/// The name and parsed arguments of a `function` (or legacy `function_call`) object.
fn function_fields(mut function: Extra, what: &str, location: Location) -> Result<(String, Value), FormatError> {
    let name = match function.remove("name") {
        Some(Value::String(name)) => name,
        _ => return Err(error(location, format!("{what} needs a string `name`"))),
    };
    let input = match function.remove("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(text)) => parse_arguments(&text),
        // Some providers send the arguments as an object already.
        Some(other) => other,
    };
    Ok((name, input))
}

/// Parses a tool call's `arguments`: empty text is `{}`, text that is not JSON is kept as a
/// JSON string (which [`crate::validate()`] reports, since the Anthropic format needs an
/// object).
fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}
