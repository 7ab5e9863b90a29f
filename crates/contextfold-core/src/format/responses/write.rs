//! The conversation model back to Responses items: skeletons filled from their blocks,
//! default shapes for blocks without one.

use super::items::{InputStyle, CALLS};
use super::read::{file_source, image_source, parse_arguments};
use super::{Layout, LAYOUT_KEY};
use crate::conversation::{Block, Conversation, Media, Role, System, ToolResult, ToolResultContent, ToolUse};
use crate::format::tool_as_function;
use serde_json::{json, Map, Value};

/// The written items, and for every message block the index of the item it is part of.
pub(super) struct Written {
    /// The items, in order.
    pub items: Vec<Value>,
    /// `positions[message][block]`: the item index of that block (`None` for a dropped block).
    pub positions: Vec<Vec<Option<usize>>>,
    /// The system prompt written as `instructions`, if any.
    pub instructions: Option<String>,
    /// The input was a string and still is one text.
    pub string_input: Option<String>,
}

pub(super) fn write(conversation: &Conversation) -> Value {
    let written = items(conversation);
    let order: Vec<String> = conversation
        .extra
        .get(LAYOUT_KEY)
        .and_then(|layout| layout.get("order"))
        .and_then(Value::as_array)
        .map(|keys| keys.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_else(|| ["instructions", "input", "tools"].map(String::from).to_vec());
    let native = super::is_native(conversation);
    let input = match written.string_input {
        Some(text) => Value::String(text),
        None => Value::Array(written.items),
    };
    let mut fields: Vec<(&str, Option<Value>)> = vec![
        ("instructions", written.instructions.map(Value::String)),
        ("input", Some(input)),
        (
            "tools",
            conversation.tools.as_ref().map(|tools| {
                Value::Array(if native { tools.clone() } else { tools.iter().map(tool_from_anthropic).collect() })
            }),
        ),
    ];
    let mut map = Map::new();
    for key in &order {
        if let Some((_, value)) = fields.iter_mut().find(|(name, _)| *name == key.as_str()) {
            if let Some(value) = value.take() {
                map.insert(key.clone(), value);
            }
        } else if let Some(value) = conversation.extra.get(key) {
            map.insert(key.clone(), value.clone());
        }
    }
    for (key, value) in fields {
        if let Some(value) = value {
            map.insert(key.into(), value);
        }
    }
    for (key, value) in &conversation.extra {
        if key != LAYOUT_KEY && !map.contains_key(key) {
            map.insert(key.clone(), value.clone());
        }
    }
    Value::Object(map)
}

pub(super) fn items(conversation: &Conversation) -> Written {
    let mut writer = Writer::default();
    let mut instructions: Vec<String> = Vec::new();
    match &conversation.system {
        None => {}
        Some(System::Text(text)) => instructions.push(text.clone()),
        Some(System::Blocks(blocks)) => {
            for block in blocks {
                let layout = layout_of(block);
                match (block, &layout) {
                    // The instructions, or a system prompt from another format.
                    (Block::Text(text), Some(Layout { instructions: true, .. }) | None) => {
                        instructions.push(text.text.clone())
                    }
                    // A leading system or developer message item.
                    _ => {
                        writer.block(block, Role::User);
                    }
                }
            }
            writer.flush();
        }
    }
    let mut positions = Vec::with_capacity(conversation.messages.len());
    for message in &conversation.messages {
        let mut blocks = Vec::with_capacity(message.content.len());
        for block in &message.content {
            blocks.push(writer.block(block, message.role));
        }
        writer.flush();
        positions.push(blocks);
    }
    let string_input = match conversation.messages.as_slice() {
        [message] => match message.content.as_slice() {
            [block @ Block::Text(text)] if layout_of(block).is_some_and(|layout| layout.string_input) => {
                Some(text.text.clone())
            }
            _ => None,
        },
        _ => None,
    };
    Written {
        items: writer.items,
        positions,
        instructions: (!instructions.is_empty()).then(|| instructions.join("\n\n")),
        string_input,
    }
}

/// A content part of the message item being built.
enum Piece {
    /// A text with the part skeleton it came from, if any.
    Text(String, Option<Map<String, Value>>),
    /// A part as written.
    Part(Value),
}

/// A message item being built from consecutive part blocks.
struct Open {
    role: Role,
    skeleton: Map<String, Value>,
    pieces: Vec<Piece>,
}

#[derive(Default)]
struct Writer {
    items: Vec<Value>,
    open: Option<Open>,
}

impl Writer {
    /// Writes one block of a message of `role`; returns the index of the item holding it.
    fn block(&mut self, block: &Block, role: Role) -> Option<usize> {
        let layout = layout_of(block);
        let part = match block {
            Block::Text(text) => {
                let skeleton = layout.as_ref().and_then(|layout| layout.part.as_ref()).and_then(Value::as_object);
                Some(Piece::Text(text.text.clone(), skeleton.cloned()))
            }
            Block::Image(media) => Some(Piece::Part(image_part(media, layout.as_ref()))),
            Block::Document(media) => Some(Piece::Part(file_part(media, layout.as_ref()))),
            Block::Other(value) if layout.as_ref().is_some_and(|layout| layout.part.is_some()) => {
                Some(Piece::Part(without_layout(value)))
            }
            _ => None,
        };
        if let Some(piece) = part {
            let item_skeleton = layout.as_ref().and_then(|layout| layout.item.clone());
            let continues = item_skeleton.is_none()
                && layout.as_ref().is_some_and(|layout| layout.part.is_some())
                && self.open.as_ref().is_some_and(|open| open.role == role);
            if !continues {
                self.flush();
                let skeleton = item_skeleton.unwrap_or_else(|| default_message(role));
                self.open = Some(Open { role, skeleton, pieces: Vec::new() });
            }
            if let Some(open) = &mut self.open {
                open.pieces.push(piece);
            }
            return Some(self.items.len());
        }
        self.flush();
        let item = match block {
            Block::ToolUse(tool_use) => call_item(tool_use, layout),
            Block::ToolResult(result) => output_item(result, layout),
            Block::Thinking(thinking) => {
                // Reasoning from another provider cannot be sent: only OpenAI's own items.
                let mut item = layout.and_then(|layout| layout.item)?;
                if let (Some(slot), Some(signature)) = (item.get_mut("encrypted_content"), &thinking.signature) {
                    *slot = Value::String(signature.clone());
                }
                Value::Object(item)
            }
            Block::RedactedThinking(_) => return None,
            Block::Other(value) => without_layout(value),
            Block::Text(_) | Block::Image(_) | Block::Document(_) => unreachable!("parts are handled above"),
        };
        self.items.push(item);
        Some(self.items.len() - 1)
    }

    /// Closes the message item being built.
    fn flush(&mut self) {
        let Some(Open { role, mut skeleton, pieces }) = self.open.take() else {
            return;
        };
        let string_content = skeleton.get("content").is_some_and(Value::is_string);
        let content = match pieces.as_slice() {
            [Piece::Text(text, None)] if string_content => Value::String(text.clone()),
            _ => Value::Array(pieces.into_iter().map(|piece| piece_value(piece, role)).collect()),
        };
        skeleton.insert("content".into(), content);
        self.items.push(Value::Object(skeleton));
    }
}

fn piece_value(piece: Piece, role: Role) -> Value {
    match piece {
        Piece::Text(text, Some(mut skeleton)) => {
            skeleton.insert("text".into(), Value::String(text));
            Value::Object(skeleton)
        }
        Piece::Text(text, None) => json!({"type": text_type(role), "text": text}),
        Piece::Part(part) => part,
    }
}

fn text_type(role: Role) -> &'static str {
    match role {
        // A mid-conversation system message is a `system` message item of input text.
        Role::User | Role::System => "input_text",
        Role::Assistant => "output_text",
    }
}

fn default_message(role: Role) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("type".into(), json!("message"));
    map.insert("role".into(), json!(role.as_str()));
    map.insert("content".into(), Value::Array(Vec::new()));
    map
}

/// The layout a block keeps, if it was read from the Responses format.
pub(super) fn layout_of(block: &Block) -> Option<Layout> {
    let extra = match block {
        Block::Text(text) => &text.extra,
        Block::ToolUse(tool_use) => &tool_use.extra,
        Block::ToolResult(result) => &result.extra,
        Block::Thinking(thinking) => &thinking.extra,
        Block::RedactedThinking(redacted) => &redacted.extra,
        Block::Image(media) | Block::Document(media) => &media.extra,
        Block::Other(value) => return Layout::from_value(value.get(LAYOUT_KEY)),
    };
    Layout::from_value(extra.get(LAYOUT_KEY))
}

fn without_layout(value: &Value) -> Value {
    let mut value = value.clone();
    if let Value::Object(map) = &mut value {
        map.remove(LAYOUT_KEY);
    }
    value
}

fn call_item(tool_use: &ToolUse, layout: Option<Layout>) -> Value {
    let Some(mut item) = layout.and_then(|layout| layout.item) else {
        return json!({
            "type": "function_call",
            "call_id": tool_use.id,
            "name": tool_use.name,
            "arguments": arguments_text(&tool_use.input),
        });
    };
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("function_call").to_string();
    let call = CALLS.iter().find(|call| call.kind == kind).unwrap_or(&CALLS[0]);
    let id_field = super::read::id_field(&kind, &item);
    item.insert(id_field.into(), Value::String(tool_use.id.clone()));
    if call.fixed_name.is_none() {
        item.insert("name".into(), Value::String(tool_use.name.clone()));
    }
    // A call read without input has `{}`: written back without it while it still has none.
    let absent = !item.contains_key(call.input_field) && tool_use.input == json!({});
    let input = match call.input {
        _ if absent => None,
        InputStyle::JsonText => match item.get(call.input_field) {
            // The original text while it still says the same.
            Some(Value::String(original)) if parse_arguments(original) == tool_use.input => None,
            Some(original) if !original.is_string() && *original == tool_use.input => None,
            _ => Some(Value::String(arguments_text(&tool_use.input))),
        },
        InputStyle::FreeText if item.get(call.input_field).is_some_and(|original| *original == tool_use.input) => None,
        InputStyle::FreeText => Some(match &tool_use.input {
            Value::String(text) => Value::String(text.clone()),
            Value::Object(map) if map.len() == 1 && map.get("input").is_some_and(Value::is_string) => {
                map["input"].clone()
            }
            other => Value::String(other.to_string()),
        }),
        InputStyle::Value => Some(tool_use.input.clone()),
    };
    if let Some(input) = input {
        item.insert(call.input_field.into(), input);
    }
    Value::Object(item)
}

/// A call's `arguments` text: compact JSON, or the text itself for a string input.
fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn output_item(result: &ToolResult, layout: Option<Layout>) -> Value {
    let output = match &result.content {
        None => None,
        Some(ToolResultContent::Text(text)) => Some(Value::String(text.clone())),
        Some(ToolResultContent::Blocks(blocks)) => Some(Value::Array(
            blocks
                .iter()
                .filter_map(|block| {
                    let layout = layout_of(block);
                    let part_skeleton =
                        layout.as_ref().and_then(|layout| layout.part.as_ref()).and_then(Value::as_object).cloned();
                    match block {
                        Block::Text(text) => {
                            Some(piece_value(Piece::Text(text.text.clone(), part_skeleton), Role::User))
                        }
                        Block::Image(media) => Some(image_part(media, layout.as_ref())),
                        Block::Document(media) => Some(file_part(media, layout.as_ref())),
                        Block::Other(value) => Some(without_layout(value)),
                        _ => None,
                    }
                })
                .collect(),
        )),
    };
    let Some(mut item) = layout.and_then(|layout| layout.item) else {
        return json!({
            "type": "function_call_output",
            "call_id": result.tool_use_id,
            "output": output.unwrap_or_else(|| Value::String(String::new())),
        });
    };
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("function_call_output").to_string();
    let id_field = super::read::id_field(&kind, &item);
    item.insert(id_field.into(), Value::String(result.tool_use_id.clone()));
    // Without content, the output the skeleton kept is written as it came.
    if let Some(output) = output {
        item.insert("output".into(), output);
    }
    Value::Object(item)
}

fn image_part(media: &Media, layout: Option<&Layout>) -> Value {
    let original = layout.and_then(|layout| layout.part.as_ref()).and_then(Value::as_object);
    if let Some(part) = original.filter(|part| image_source(part).as_ref() == Some(&media.source)) {
        return Value::Object(part.clone());
    }
    let detail = original.and_then(|part| part.get("detail")).cloned().unwrap_or_else(|| json!("auto"));
    match source_url(&media.source) {
        Some(Source::Url(url)) => json!({"type": "input_image", "image_url": url, "detail": detail}),
        Some(Source::File(id)) => json!({"type": "input_image", "file_id": id, "detail": detail}),
        None => Block::Image(media.clone()).to_value(),
    }
}

fn file_part(media: &Media, layout: Option<&Layout>) -> Value {
    let original = layout.and_then(|layout| layout.part.as_ref()).and_then(Value::as_object);
    if let Some(part) = original.filter(|part| file_source(part).as_ref() == Some(&media.source)) {
        return Value::Object(part.clone());
    }
    let data_url = media.source.get("type").and_then(Value::as_str) == Some("base64");
    match source_url(&media.source) {
        Some(Source::Url(url)) if data_url => json!({"type": "input_file", "file_data": url}),
        Some(Source::Url(url)) => json!({"type": "input_file", "file_url": url}),
        Some(Source::File(id)) => json!({"type": "input_file", "file_id": id}),
        None => match media.source.get("data").and_then(Value::as_str) {
            Some(text) => json!({"type": "input_text", "text": text}),
            None => Block::Document(media.clone()).to_value(),
        },
    }
}

enum Source {
    Url(String),
    File(String),
}

/// An Anthropic-style source as a URL (a data URL for base64 data) or a file id.
fn source_url(source: &Value) -> Option<Source> {
    let field = |key: &str| source.get(key).and_then(Value::as_str);
    match field("type")? {
        "base64" => Some(Source::Url(format!("data:{};base64,{}", field("media_type")?, field("data")?))),
        "url" => field("url").map(|url| Source::Url(url.to_string())),
        "file" => field("file_id").map(|id| Source::File(id.to_string())),
        _ => None,
    }
}

/// An Anthropic tool `{name, description, input_schema}` as a Responses function tool.
fn tool_from_anthropic(tool: &Value) -> Value {
    let mut function = Map::new();
    function.insert("type".into(), json!("function"));
    tool_as_function(tool, function).map_or_else(|| tool.clone(), Value::Object)
}

/// A Responses function tool `{type: function, name, parameters, …}` as an Anthropic tool.
pub(super) fn tool_to_anthropic(tool: &Value) -> Value {
    let Some(map) = tool.as_object() else {
        return tool.clone();
    };
    if map.get("type").and_then(Value::as_str) != Some("function") || !map.get("name").is_some_and(Value::is_string) {
        return tool.clone();
    }
    let mut converted = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "type" => {}
            "parameters" => {
                converted.insert("input_schema".into(), value.clone());
            }
            _ => {
                converted.insert(key.clone(), value.clone());
            }
        }
    }
    converted.entry("input_schema").or_insert_with(|| json!({"type": "object", "properties": {}}));
    Value::Object(converted)
}
