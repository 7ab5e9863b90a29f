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
//!   `system`/`developer` message later in the conversation has no Anthropic equivalent: its
//!   text becomes a user text block, verbatim.
//! - User content: a string is one text block; `text` parts are text blocks (other fields of
//!   the part, such as `cache_control`, are kept); `image_url` parts are image blocks (a
//!   `data:…;base64,` URL becomes a `base64` source, any other URL a `url` source; `detail` is
//!   dropped); `refusal` parts are kept whole as [`Block::Other`]; any other part is read as an
//!   Anthropic block (so what the writer passed through comes back).
//! - Assistant: `reasoning_content` becomes an unsigned thinking block, placed first; `content`
//!   becomes text blocks (an empty string is no block); `tool_calls` become tool_use blocks.
//!   `arguments` is parsed as JSON; an empty string is `{}`; text that is not valid JSON is
//!   kept as a JSON string value. Legacy `function_call` becomes a tool_use with the id
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
//! - Block-level extras other than a text block's (e.g. `cache_control` on a tool_result) are
//!   dropped. Top-level extras are written back unchanged, and so are message-level extras,
//!   except on a user message that holds only tool results (its `tool` messages have no place
//!   for them).

use super::{FormatError, Spans};
use crate::conversation::{
    Block, ContentShape, Conversation, Extra, Location, Media, Message, ModelError, Role, System, Text, Thinking,
    ToolResult, ToolResultContent, ToolUse,
};
use serde_json::{json, Map, Value};

/// Whether these messages use OpenAI-only roles, fields or content parts.
pub fn looks_like_openai(messages: &[Value]) -> bool {
    messages.iter().any(|message| {
        let role = message.get("role").and_then(Value::as_str);
        matches!(role, Some("system" | "developer" | "tool" | "function"))
            || ["tool_calls", "tool_call_id", "function_call", "reasoning_content"]
                .iter()
                .any(|key| message.get(key).is_some())
            || (role == Some("assistant") && message.get("content") == Some(&Value::Null))
            || message.get("content").and_then(Value::as_array).is_some_and(|parts| {
                parts.iter().any(|part| {
                    matches!(part.get("type").and_then(Value::as_str), Some("image_url" | "input_audio" | "refusal"))
                })
            })
    })
}

/// Reads an OpenAI request (object or bare array of messages).
///
/// Errors name the index of the offending message in the input.
pub fn from_value(value: Value) -> Result<Conversation, FormatError> {
    from_value_spanned(value).map(|(conversation, _)| conversation)
}

/// [`from_value`], and which of the input's messages each message was read from (runs of
/// one side merge into one message; the leading system/developer messages are the system
/// prompt).
pub fn from_value_spanned(value: Value) -> Result<(Conversation, Spans), FormatError> {
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
    let conversation = Conversation {
        system: (!reader.system.is_empty()).then(|| System::Text(reader.system.join("\n\n"))),
        messages: reader.messages,
        tools,
        extra,
    };
    Ok((conversation, spans))
}

/// Writes an OpenAI request object: `messages` (system first), `tools`, then every other
/// top-level field unchanged.
pub fn to_value(conversation: &Conversation) -> Value {
    let mut messages = Vec::with_capacity(conversation.messages.len() + 1);
    if let Some(system) = &conversation.system {
        messages.push(json!({"role": "system", "content": system.text()}));
    }
    for message in &conversation.messages {
        match message.role {
            Role::User => write_user(message, &mut messages),
            Role::Assistant => messages.push(write_assistant(message)),
        }
    }
    let mut map = Map::new();
    map.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = &conversation.tools {
        map.insert("tools".into(), Value::Array(tools.iter().map(tool_to_openai).collect()));
    }
    for (key, value) in &conversation.extra {
        map.insert(key.clone(), value.clone());
    }
    Value::Object(map)
}

fn error(location: Location, message: impl Into<String>) -> FormatError {
    FormatError::Model(ModelError { location, message: message.into() })
}

fn at(message: usize) -> Location {
    Location { message: Some(message), ..Location::default() }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The state of reading one message list.
#[derive(Default)]
struct Reader {
    /// Texts of the leading system/developer messages.
    system: Vec<String>,
    messages: Vec<Message>,
    /// The id given to the last legacy `function_call` that no `function` message answered.
    pending_function: Option<String>,
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
                let text = plain_text(map.remove("content"), &role, location)?;
                if self.messages.is_empty() {
                    self.system.push(text);
                } else {
                    self.push(Message::new(Role::User, vec![Block::text(text)]));
                }
            }
            "user" => {
                let (content, shape) = match map.remove("content") {
                    Some(Value::String(text)) => (vec![Block::text(text)], ContentShape::Text),
                    Some(Value::Array(parts)) => (parts_to_blocks(parts, location)?, ContentShape::Blocks),
                    Some(other) => {
                        return Err(error(
                            location,
                            format!("`content` must be a string or an array of parts, found {}", describe(&other)),
                        ))
                    }
                    None => return Err(error(location, "the user message has no `content`")),
                };
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
                let result = tool_result(tool_use_id, map.remove("content"), location)?;
                self.push(Message::new(Role::User, vec![Block::ToolResult(result)]));
            }
            "function" => {
                let Some(tool_use_id) = self.pending_function.take() else {
                    return Err(error(location, "a legacy `function` message answers no earlier `function_call`"));
                };
                let result = tool_result(tool_use_id, map.remove("content"), location)?;
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
            Some(Value::Array(parts)) => content.extend(parts_to_blocks(parts, location)?),
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

    /// Appends `message`, merging it into the last message when both have the same role.
    fn push(&mut self, message: Message) {
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
            }
            _ => self.messages.push(message),
        }
    }
}

/// The text of a system or developer message: a string, or text parts joined by newlines.
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

fn parts_to_blocks(parts: Vec<Value>, location: Location) -> Result<Vec<Block>, FormatError> {
    parts
        .into_iter()
        .enumerate()
        .map(|(position, part)| part_to_block(part, Location { block: Some(position), ..location }))
        .collect()
}

fn part_to_block(part: Value, location: Location) -> Result<Block, FormatError> {
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
            let url = match map.get("image_url") {
                Some(Value::String(url)) => Some(url.as_str()),
                Some(Value::Object(image)) => image.get("url").and_then(Value::as_str),
                _ => None,
            };
            let Some(url) = url else {
                return Err(error(location, "an image_url part needs `image_url.url`"));
            };
            Ok(Block::Image(Media { source: image_source(url), extra: Extra::new() }))
        }
        Some("refusal") => Ok(Block::Other(Value::Object(map))),
        // Anything else is read as an Anthropic block: the writer passes those through.
        _ => Ok(Block::from_value(Value::Object(map), location)?),
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

fn tool_result(tool_use_id: String, content: Option<Value>, location: Location) -> Result<ToolResult, FormatError> {
    let content = match content {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(ToolResultContent::Text(text)),
        Some(Value::Array(parts)) => Some(ToolResultContent::Blocks(parts_to_blocks(parts, location)?)),
        Some(other) => {
            return Err(error(
                location,
                format!("a tool message's `content` must be a string or an array of parts, found {}", describe(&other)),
            ))
        }
    };
    Ok(ToolResult { tool_use_id, content, is_error: None, extra: Extra::new() })
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
/// JSON string.
fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
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

fn tool_to_openai(tool: &Value) -> Value {
    let Some(map) = tool.as_object() else {
        return tool.clone();
    };
    let custom = matches!(map.get("type").and_then(Value::as_str), None | Some("custom"));
    if !custom || !map.get("name").is_some_and(Value::is_string) || !map.contains_key("input_schema") {
        // Server tools (web search, …) have no OpenAI form: passed through.
        return tool.clone();
    }
    let mut function = Map::new();
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
    json!({"type": "function", "function": function})
}

fn write_user(message: &Message, out: &mut Vec<Value>) {
    let mut carried = Vec::new();
    let mut own = Vec::new();
    for block in &message.content {
        match block {
            Block::ToolResult(result) => {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": result.tool_use_id,
                    "content": result.text(),
                }));
                if let Some(ToolResultContent::Blocks(blocks)) = &result.content {
                    carried.extend(blocks.iter().filter(|block| !matches!(block, Block::Text(_))).map(block_to_part));
                }
            }
            other => own.push(other),
        }
    }
    let content = match own.as_slice() {
        [] if carried.is_empty() => return,
        [Block::Text(text)] if carried.is_empty() && text.extra.is_empty() => Value::String(text.text.clone()),
        _ => {
            carried.extend(own.into_iter().map(block_to_part));
            Value::Array(carried)
        }
    };
    let mut map = Map::new();
    map.insert("role".into(), Value::String("user".into()));
    map.insert("content".into(), content);
    extend(&mut map, &message.extra);
    out.push(Value::Object(map));
}

fn write_assistant(message: &Message) -> Value {
    let mut reasoning = Vec::new();
    let mut content = Vec::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            Block::Thinking(thinking) => reasoning.push(thinking.thinking.as_str()),
            Block::RedactedThinking(_) => {}
            Block::ToolUse(tool_use) => calls.push(json!({
                "id": tool_use.id,
                "type": "function",
                "function": {"name": tool_use.name, "arguments": arguments(&tool_use.input)},
            })),
            other => content.push(other),
        }
    }
    let content = match content.as_slice() {
        [] if calls.is_empty() => Value::String(String::new()),
        [] => Value::Null,
        [Block::Text(text)] if text.extra.is_empty() => Value::String(text.text.clone()),
        blocks => Value::Array(blocks.iter().map(|block| block_to_part(block)).collect()),
    };
    let mut map = Map::new();
    map.insert("role".into(), Value::String("assistant".into()));
    map.insert("content".into(), content);
    if !reasoning.is_empty() {
        map.insert("reasoning_content".into(), Value::String(reasoning.join("\n\n")));
    }
    if !calls.is_empty() {
        map.insert("tool_calls".into(), Value::Array(calls));
    }
    extend(&mut map, &message.extra);
    Value::Object(map)
}

/// A tool call's `arguments`: compact JSON, or the text itself when the input is a string
/// (which is how the reader keeps arguments that are not JSON).
fn arguments(input: &Value) -> String {
    match input {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// One block as an OpenAI content part; blocks OpenAI cannot carry pass through as they are.
fn block_to_part(block: &Block) -> Value {
    match block {
        Block::Text(text) => {
            let mut map = Map::new();
            map.insert("type".into(), Value::String("text".into()));
            map.insert("text".into(), Value::String(text.text.clone()));
            extend(&mut map, &text.extra);
            Value::Object(map)
        }
        Block::Image(media) => match image_url(&media.source) {
            Some(url) => json!({"type": "image_url", "image_url": {"url": url}}),
            None => block.to_value(),
        },
        other => other.to_value(),
    }
}

/// The URL for an Anthropic image source: a data URL for base64 data, or the URL itself.
fn image_url(source: &Value) -> Option<String> {
    let field = |key: &str| source.get(key).and_then(Value::as_str);
    match field("type")? {
        "base64" => Some(format!("data:{};base64,{}", field("media_type")?, field("data")?)),
        "url" => field("url").map(str::to_string),
        _ => None,
    }
}

fn extend(map: &mut Map<String, Value>, extra: &Extra) {
    for (key, value) in extra {
        map.entry(key.clone()).or_insert_with(|| value.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate;

    fn read(value: Value) -> Conversation {
        from_value(value).expect("reads")
    }

    #[test]
    fn leading_system_messages_join_and_later_ones_become_user_text() {
        let conversation = read(json!([
            {"role": "system", "content": "one"},
            {"role": "developer", "content": [{"type": "text", "text": "two"}]},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "mode changed"},
            {"role": "user", "content": "go on"}
        ]));
        assert_eq!(conversation.system, Some(System::Text("one\n\ntwo".into())));
        assert_eq!(conversation.messages.len(), 3);
        let texts: Vec<_> = conversation.messages[2].content.iter().filter_map(Block::as_text).collect();
        assert_eq!(texts, ["mode changed", "go on"]);
        assert!(validate(&conversation).is_empty());
    }

    #[test]
    fn tool_messages_and_following_user_message_merge_results_first() {
        let conversation = read(json!([
            {"role": "user", "content": "read a and b"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "read", "arguments": ""}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "A"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "B"}]},
            {"role": "user", "content": "thanks"}
        ]));
        assert_eq!(conversation.messages.len(), 3);
        let kinds: Vec<_> = conversation.messages[2].content.iter().map(Block::kind).collect();
        assert_eq!(kinds, ["tool_result", "tool_result", "text"]);
        let Block::ToolUse(second) = &conversation.messages[1].content[1] else {
            panic!("expected a tool_use");
        };
        assert_eq!(second.input, json!({}), "empty arguments read as an empty object");
        assert!(validate(&conversation).is_empty());
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_as_a_string_and_written_back_verbatim() {
        let conversation = read(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{not json"}}
            ]}
        ]));
        let Block::ToolUse(call) = &conversation.messages[1].content[0] else {
            panic!("expected a tool_use first (empty content is no block)");
        };
        assert_eq!(call.input, json!("{not json"));
        let written = to_value(&conversation);
        assert_eq!(written["messages"][1]["tool_calls"][0]["function"]["arguments"], json!("{not json"));
        assert_eq!(written["messages"][1]["content"], Value::Null);
    }

    #[test]
    fn reasoning_content_becomes_leading_unsigned_thinking() {
        let conversation = read(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "answer", "reasoning_content": "because"}
        ]));
        let content = &conversation.messages[1].content;
        assert!(matches!(&content[0], Block::Thinking(t) if t.thinking == "because" && t.signature.is_none()));
        assert_eq!(content[1].as_text(), Some("answer"));
    }

    #[test]
    fn image_urls_map_to_sources_and_back() {
        let conversation = read(json!([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
        ]}]));
        let sources: Vec<_> = conversation.messages[0]
            .content
            .iter()
            .map(|block| match block {
                Block::Image(media) => media.source.clone(),
                other => panic!("expected an image, found {other:?}"),
            })
            .collect();
        assert_eq!(
            sources,
            [
                json!({"type": "base64", "media_type": "image/png", "data": "AAAA"}),
                json!({"type": "url", "url": "https://example.com/a.png"}),
            ]
        );
        let written = to_value(&conversation);
        assert_eq!(
            written["messages"][0]["content"][0],
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
        );
        assert_eq!(written["messages"][0]["content"][1]["image_url"]["url"], json!("https://example.com/a.png"));
    }

    #[test]
    fn tool_results_become_tool_messages_before_the_rest_and_images_follow() {
        let conversation = Conversation::from_value(json!({"system": [{"type": "text", "text": "sys"}], "messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "xx"},
                {"type": "text", "text": "shooting"},
                {"type": "tool_use", "id": "t1", "name": "shot", "input": {"a": 1}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": [
                    {"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QQ=="}}
                ]},
                {"type": "text", "text": "and?"}
            ]}
        ]}))
        .unwrap();
        let written = to_value(&conversation);
        assert_eq!(
            written["messages"],
            json!([
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": "shooting", "reasoning_content": "hm", "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "shot", "arguments": "{\"a\":1}"}}
                ]},
                {"role": "tool", "tool_call_id": "t1", "content": "line 1\nline 2"},
                {"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QQ=="}},
                    {"type": "text", "text": "and?"}
                ]}
            ])
        );
        let back = from_value(written).unwrap();
        assert_eq!(back.messages.len(), 3);
        let kinds: Vec<_> = back.messages[2].content.iter().map(Block::kind).collect();
        assert_eq!(kinds, ["tool_result", "image", "text"]);
        assert!(validate(&back).is_empty());
    }

    #[test]
    fn tools_convert_both_ways() {
        let openai = json!([
            {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object"}, "strict": true}},
            {"type": "function", "function": {"name": "now"}}
        ]);
        let conversation = read(json!({"model": "m", "tool_choice": "auto", "messages": [], "tools": openai}));
        assert_eq!(
            conversation.tools,
            Some(vec![
                json!({"name": "read", "description": "Read a file", "input_schema": {"type": "object"}, "strict": true}),
                json!({"name": "now", "input_schema": {"type": "object", "properties": {}}}),
            ])
        );
        assert_eq!(conversation.extra.get("tool_choice"), Some(&json!("auto")));
        let written = to_value(&conversation);
        assert_eq!(written["tools"][0], openai[0]);
        assert_eq!(written["tools"][1]["function"]["parameters"], json!({"type": "object", "properties": {}}));
        assert_eq!(written["model"], json!("m"));
    }

    #[test]
    fn legacy_function_calls_pair_with_function_messages() {
        let conversation = read(json!({"functions": [{"name": "f", "parameters": {"type": "object"}}], "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
            {"role": "function", "name": "f", "content": "done"}
        ]}));
        assert!(validate(&conversation).is_empty());
        assert_eq!(conversation.messages[1].tool_use_ids().collect::<Vec<_>>(), ["call_legacy_1"]);
        assert_eq!(conversation.tools.as_ref().map(Vec::len), Some(1));
        let err =
            from_value(json!([{"role": "user", "content": "x"}, {"role": "function", "name": "f", "content": "y"}]))
                .unwrap_err();
        assert_eq!(err.to_string(), "message 1: a legacy `function` message answers no earlier `function_call`");
    }

    #[test]
    fn errors_name_the_message() {
        let err =
            from_value(json!([{"role": "user", "content": "x"}, {"role": "critic", "content": "y"}])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message 1: unknown role `critic` (expected system, developer, user, assistant or tool)"
        );
        let err = from_value(json!([{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}])).unwrap_err();
        assert_eq!(err.to_string(), "message 1: the tool message has no `tool_call_id`");
        let err = from_value(json!([{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {}}]}])).unwrap_err();
        assert_eq!(err.to_string(), "message 0, block 0: tool call 0 needs a string `name`");
        let err = from_value(json!([{"role": "user", "content": [{"type": "image_url"}]}])).unwrap_err();
        assert_eq!(err.to_string(), "message 0, block 0: an image_url part needs `image_url.url`");
        assert!(from_value(json!("text")).is_err());
    }

    #[test]
    fn detection_sees_openai_only_features() {
        assert!(looks_like_openai(&[json!({"role": "assistant", "content": null})]));
        assert!(looks_like_openai(&[
            json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]})
        ]));
        assert!(!looks_like_openai(&[json!({"role": "user", "content": [{"type": "text", "text": "t"}]})]));
    }
}
