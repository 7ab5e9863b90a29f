//! Responses input items to the conversation model, each block keeping its item's skeleton.

use super::items::{CallKind, InputStyle, ASSISTANT_ITEMS, CALLS, OUTPUTS, USER_ITEMS};
use super::{Layout, LAYOUT_KEY};
use crate::conversation::{
    Block, ContentShape, Conversation, Extra, Media, Message, Role, System, Text, Thinking, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::format::{describe, FormatError, Spans};
use crate::validate::system_misplacement;
use serde_json::{json, Map, Value};

/// Which message an item belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    User,
    Assistant,
    /// A later system or developer message: a mid-conversation system message where the
    /// rules allow one ([`Reader::place_system_messages`]), else user text.
    System,
    /// Whichever message comes before it.
    Either,
}

pub(super) fn read(value: Value) -> Result<(Conversation, Spans), FormatError> {
    let mut extra = Extra::new();
    let mut order = Vec::new();
    let mut instructions = None;
    let mut tools = None;
    let input = match value {
        Value::Array(items) => Input::Items(items),
        Value::Object(map) => {
            let mut input = None;
            for (key, value) in map {
                order.push(Value::String(key.clone()));
                match (key.as_str(), value) {
                    ("input", Value::Array(items)) => input = Some(Input::Items(items)),
                    ("input", Value::String(text)) => input = Some(Input::Text(text)),
                    ("input", other) => {
                        return Err(top(format!("`input` must be an array or a string, found {}", describe(&other))))
                    }
                    ("instructions", Value::String(text)) => instructions = Some(text),
                    ("tools", Value::Array(list)) => tools = Some(list),
                    ("tools", other) => {
                        return Err(top(format!("`tools` must be an array, found {}", describe(&other))))
                    }
                    (_, value) => {
                        extra.insert(key, value);
                    }
                }
            }
            input.ok_or_else(|| top("the object has no `input` array".into()))?
        }
        other => {
            return Err(top(format!(
                "expected a Responses request object or an array of input items, found {}",
                describe(&other)
            )))
        }
    };
    extra.insert(LAYOUT_KEY.into(), json!({"order": order}));
    let mut reader = Reader { leading: true, ..Reader::default() };
    let mut spans = Spans::default();
    match input {
        Input::Text(text) => {
            let layout = Layout { string_input: true, ..Layout::default() };
            reader.messages.push(Message {
                role: Role::User,
                content: vec![text_block(text, &layout)],
                shape: ContentShape::Text,
                extra: Extra::new(),
            });
        }
        Input::Items(items) => {
            for (index, item) in items.into_iter().enumerate() {
                reader.item(index, item)?;
                spans.record(index, reader.messages.len());
            }
            reader.place_system_messages(&mut spans);
        }
    }
    let system = match (instructions, reader.system.is_empty()) {
        (None, true) => None,
        (Some(text), true) => Some(System::Text(text)),
        (instructions, false) => {
            let mut blocks = Vec::with_capacity(reader.system.len() + 1);
            if let Some(text) = instructions {
                blocks.push(text_block(text, &Layout { instructions: true, ..Layout::default() }));
            }
            blocks.append(&mut reader.system);
            Some(System::Blocks(blocks))
        }
    };
    Ok((Conversation { system, messages: reader.messages, tools, extra }, spans))
}

enum Input {
    Items(Vec<Value>),
    Text(String),
}

#[derive(Default)]
struct Reader {
    /// Blocks of the leading system/developer messages.
    system: Vec<Block>,
    messages: Vec<Message>,
    /// No item other than a system/developer message has been read yet.
    leading: bool,
}

impl Reader {
    fn item(&mut self, index: usize, item: Value) -> Result<(), FormatError> {
        let Value::Object(map) = item else {
            return Err(item_error(index, format!("an input item must be an object, found {}", describe(&item))));
        };
        let kind = match map.get("type") {
            None => None,
            Some(Value::String(kind)) => Some(kind.clone()),
            Some(other) => {
                return Err(item_error(index, format!("`type` must be a string, found {}", describe(other))));
            }
        };
        match kind.as_deref() {
            Some("message") => self.message(index, map),
            None if map.contains_key("role") => self.message(index, map),
            None => Err(item_error(index, "the item has no `type`".into())),
            Some("reasoning") => {
                let block = reasoning(map);
                self.push(Side::Assistant, vec![block]);
                Ok(())
            }
            Some(kind) => {
                if let Some(call) = super::read::CALLS.iter().find(|call| call.kind == kind) {
                    let block = tool_use(index, call, map)?;
                    self.push(Side::Assistant, vec![block]);
                } else if OUTPUTS.contains(&kind) {
                    let block = tool_result(index, kind, map)?;
                    self.push(Side::User, vec![block]);
                } else {
                    let side = if ASSISTANT_ITEMS.contains(&kind) {
                        Side::Assistant
                    } else if USER_ITEMS.contains(&kind) {
                        Side::User
                    } else {
                        Side::Either
                    };
                    self.push(side, vec![Block::Other(Value::Object(map))]);
                }
                Ok(())
            }
        }
    }

    fn message(&mut self, index: usize, mut map: Map<String, Value>) -> Result<(), FormatError> {
        let role = match map.get("role") {
            Some(Value::String(role)) => role.clone(),
            Some(other) => {
                return Err(item_error(index, format!("`role` must be a string, found {}", describe(other))))
            }
            None => return Err(item_error(index, "the message has no `role`".into())),
        };
        let side = match role.as_str() {
            "user" => Side::User,
            "system" | "developer" => Side::System,
            "assistant" => Side::Assistant,
            other => {
                return Err(item_error(
                    index,
                    format!("unknown role `{other}` (expected user, assistant, system or developer)"),
                ))
            }
        };
        let content = match map.get_mut("content").map(std::mem::take) {
            Some(content) => content,
            None => return Err(item_error(index, "the message has no `content`".into())),
        };
        let blocks = match content {
            Value::String(text) => {
                // The placeholder's type records that the content was a string.
                map.insert("content".into(), Value::String(String::new()));
                vec![text_block(text, &Layout { item: Some(map), ..Layout::default() })]
            }
            Value::Array(parts) => {
                map.insert("content".into(), Value::Array(Vec::new()));
                let mut blocks = Vec::with_capacity(parts.len());
                let mut skeleton = Some(map);
                for (position, part) in parts.into_iter().enumerate() {
                    blocks.push(content_part(index, position, part, skeleton.take())?);
                }
                if let Some(map) = skeleton {
                    // No parts: the item is kept whole so that it is written back.
                    let mut map = map;
                    map.insert("content".into(), Value::Array(Vec::new()));
                    blocks.push(Block::Other(Value::Object(map)));
                }
                blocks
            }
            other => {
                return Err(item_error(
                    index,
                    format!("`content` must be a string or an array of parts, found {}", describe(&other)),
                ))
            }
        };
        if self.leading && matches!(role.as_str(), "system" | "developer") {
            self.system.extend(blocks);
        } else {
            self.push(side, blocks);
        }
        Ok(())
    }

    /// Reads a later system or developer message that the Anthropic rules allow nowhere where
    /// it stands (say between two user messages) as user text, merged with its neighbours;
    /// its item is written back the same either way.
    /// `spans` follow the merges.
    fn place_system_messages(&mut self, spans: &mut Spans) {
        let mut messages = std::mem::take(&mut self.messages);
        for index in 0..messages.len() {
            if messages[index].role == Role::System && system_misplacement(&messages, index).is_some() {
                messages[index].role = Role::User;
            }
        }
        let read = std::mem::take(&mut spans.messages);
        debug_assert_eq!(read.len(), messages.len(), "one span a message");
        for (message, span) in messages.into_iter().zip(read) {
            match self.messages.last_mut() {
                Some(last) if last.role == message.role => {
                    last.content.extend(message.content);
                    spans.extend_last(span);
                }
                _ => {
                    self.messages.push(message);
                    spans.messages.push(span);
                }
            }
        }
    }

    /// Appends blocks of one item to the message of its side.
    fn push(&mut self, side: Side, blocks: Vec<Block>) {
        self.leading = false;
        let role = match (side, self.messages.last()) {
            (Side::User, _) => Role::User,
            (Side::Assistant, _) => Role::Assistant,
            (Side::System, _) => Role::System,
            (Side::Either, Some(last)) if last.role == Role::System => Role::User,
            (Side::Either, Some(last)) => last.role,
            (Side::Either, None) => Role::User,
        };
        match self.messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => self.messages.push(Message::new(role, blocks)),
        }
    }
}

fn text_block(text: String, layout: &Layout) -> Block {
    let mut extra = Extra::new();
    extra.insert(LAYOUT_KEY.into(), layout.to_value());
    Block::Text(Text { text, extra })
}

/// One content part as a block; `item` is the message's skeleton, on its first part.
fn content_part(
    index: usize,
    position: usize,
    part: Value,
    item: Option<Map<String, Value>>,
) -> Result<Block, FormatError> {
    let Value::Object(mut map) = part else {
        return Err(item_error(index, format!("content part {position} must be an object, found {}", describe(&part))));
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut layout = Layout { item, ..Layout::default() };
    let extra = |layout: &Layout| {
        let mut extra = Extra::new();
        extra.insert(LAYOUT_KEY.into(), layout.to_value());
        extra
    };
    let block = match (kind.as_str(), map.get("text")) {
        ("input_text" | "output_text", Some(Value::String(_))) => {
            let Some(Value::String(text)) = map.insert("text".into(), Value::Null) else {
                unreachable!("matched a string `text` above")
            };
            layout.part = Some(Value::Object(map));
            Block::Text(Text { text, extra: extra(&layout) })
        }
        ("input_image", _) => match image_source(&map) {
            Some(source) => {
                layout.part = Some(Value::Object(map));
                Block::Image(Media { source, extra: extra(&layout) })
            }
            None => other_part(map, layout),
        },
        ("input_file", _) => match file_source(&map) {
            Some(source) => {
                layout.part = Some(Value::Object(map));
                Block::Document(Media { source, extra: extra(&layout) })
            }
            None => other_part(map, layout),
        },
        _ => other_part(map, layout),
    };
    Ok(block)
}

/// A part kept whole, marked as a part so that the writer puts it back in its message.
fn other_part(mut map: Map<String, Value>, mut layout: Layout) -> Block {
    layout.part = Some(Value::Bool(true));
    map.insert(LAYOUT_KEY.into(), layout.to_value());
    Block::Other(Value::Object(map))
}

/// The Anthropic-style image source of an `input_image` part.
pub(super) fn image_source(part: &Map<String, Value>) -> Option<Value> {
    if let Some(url) = part.get("image_url").and_then(Value::as_str) {
        return Some(url_source(url));
    }
    part.get("file_id").and_then(Value::as_str).map(|id| json!({"type": "file", "file_id": id}))
}

/// The Anthropic-style document source of an `input_file` part.
pub(super) fn file_source(part: &Map<String, Value>) -> Option<Value> {
    if let Some(data) = part.get("file_data").and_then(Value::as_str) {
        return Some(url_source(data));
    }
    if let Some(url) = part.get("file_url").and_then(Value::as_str) {
        return Some(json!({"type": "url", "url": url}));
    }
    part.get("file_id").and_then(Value::as_str).map(|id| json!({"type": "file", "file_id": id}))
}

/// A data URL as a base64 source, any other URL as a url source.
fn url_source(url: &str) -> Value {
    match url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,")) {
        Some((media_type, data)) => json!({"type": "base64", "media_type": media_type, "data": data}),
        None => json!({"type": "url", "url": url}),
    }
}

fn reasoning(mut map: Map<String, Value>) -> Block {
    let texts = |key: &str| -> Vec<String> {
        map.get(key)
            .and_then(Value::as_array)
            .map(|parts| {
                parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).map(String::from).collect()
            })
            .unwrap_or_default()
    };
    let mut thinking = texts("summary");
    if thinking.is_empty() {
        thinking = texts("content");
    }
    let signature = match map.get("encrypted_content") {
        Some(Value::String(_)) => match map.insert("encrypted_content".into(), Value::Null) {
            Some(Value::String(content)) => Some(content),
            _ => None,
        },
        _ => None,
    };
    let layout = Layout { item: Some(map), ..Layout::default() };
    let mut extra = Extra::new();
    extra.insert(LAYOUT_KEY.into(), layout.to_value());
    Block::Thinking(Thinking { thinking: thinking.join("\n\n"), signature, extra })
}

/// The field naming the call a call or output item belongs to: `call_id`, or `id` for a
/// local shell item without one.
pub(super) fn id_field(kind: &str, map: &Map<String, Value>) -> &'static str {
    if !map.contains_key("call_id") && kind.starts_with("local_shell_call") && map.contains_key("id") {
        "id"
    } else {
        "call_id"
    }
}

fn take_id(index: usize, kind: &str, map: &mut Map<String, Value>) -> Result<String, FormatError> {
    let field = id_field(kind, map);
    match map.insert(field.into(), Value::Null) {
        Some(Value::String(id)) => Ok(id),
        Some(other) => Err(item_error(index, format!("{kind} `{field}` must be a string, found {}", describe(&other)))),
        None => {
            map.remove(field);
            Err(item_error(index, format!("the {kind} item has no `call_id`")))
        }
    }
}

fn tool_use(index: usize, call: &CallKind, mut map: Map<String, Value>) -> Result<Block, FormatError> {
    let id = take_id(index, call.kind, &mut map)?;
    let name = match call.fixed_name {
        Some(name) => name.to_string(),
        None => match map.insert("name".into(), Value::Null) {
            Some(Value::String(name)) => name,
            _ => return Err(item_error(index, format!("the {} item needs a string `name`", call.kind))),
        },
    };
    let input = match (call.input, map.get(call.input_field)) {
        (_, None) => json!({}),
        // The original text stays in the skeleton: written back while the input is unchanged.
        (InputStyle::JsonText, Some(Value::String(text))) => parse_arguments(text),
        (InputStyle::FreeText, Some(Value::String(_))) => match map.insert(call.input_field.into(), Value::Null) {
            Some(Value::String(text)) => json!({ "input": text }),
            _ => unreachable!("matched a string above"),
        },
        // Free text that is not text stays in the skeleton too, written back while unchanged.
        (InputStyle::FreeText | InputStyle::JsonText, Some(other)) => other.clone(),
        (InputStyle::Value, Some(_)) => map.insert(call.input_field.into(), Value::Null).unwrap_or_default(),
    };
    let layout = Layout { item: Some(map), ..Layout::default() };
    let mut extra = Extra::new();
    extra.insert(LAYOUT_KEY.into(), layout.to_value());
    Ok(Block::ToolUse(ToolUse { id, name, input, extra }))
}

/// Parses a call's `arguments`: empty text is `{}`, text that is not JSON stays a string.
pub(super) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn tool_result(index: usize, kind: &str, mut map: Map<String, Value>) -> Result<Block, FormatError> {
    let tool_use_id = take_id(index, kind, &mut map)?;
    let content = match map.get("output") {
        Some(Value::String(_)) => match map.insert("output".into(), Value::Null) {
            Some(Value::String(text)) => Some(ToolResultContent::Text(text)),
            _ => None,
        },
        Some(Value::Array(parts)) if !parts.is_empty() && parts.iter().all(is_content_part) => {
            let Some(Value::Array(parts)) = map.insert("output".into(), Value::Null) else {
                unreachable!("matched an array above")
            };
            let blocks = parts
                .into_iter()
                .enumerate()
                .map(|(position, part)| content_part(index, position, part, None))
                .collect::<Result<Vec<_>, _>>()?;
            Some(ToolResultContent::Blocks(blocks))
        }
        // Any other output is kept in the skeleton as it is.
        _ => None,
    };
    let layout = Layout { item: Some(map), ..Layout::default() };
    let mut extra = Extra::new();
    extra.insert(LAYOUT_KEY.into(), layout.to_value());
    Ok(Block::ToolResult(ToolResult { tool_use_id, content, is_error: None, extra }))
}

fn is_content_part(part: &Value) -> bool {
    part.get("type").and_then(Value::as_str).is_some_and(|kind| super::PART_TYPES.contains(&kind))
}

fn top(message: String) -> FormatError {
    FormatError::Model(crate::conversation::ModelError { location: Default::default(), message })
}

fn item_error(index: usize, message: String) -> FormatError {
    FormatError::Item { index, message }
}
