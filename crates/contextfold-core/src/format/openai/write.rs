//! Writing the model as an OpenAI Chat Completions request (the rules are in the
//! [parent module](super)), counting what OpenAI has no place for.

use crate::conversation::{Block, ContentShape, Conversation, Extra, Message, Role, System, ToolResultContent};
use crate::format::lost::{Loss, LossKind, Losses};
use crate::format::tool_as_function;
use serde_json::{json, Map, Value};

/// Writes an OpenAI request object, with what it could not carry.
pub fn write(conversation: &Conversation) -> (Value, Vec<Loss>) {
    let mut writer = Writer::default();
    let mut messages = Vec::with_capacity(conversation.messages.len() + 1);
    if let Some(system) = &conversation.system {
        if let System::Blocks(blocks) = system {
            writer.lost.add_many(LossKind::SystemBlocks, if blocks.len() > 1 { blocks.len() } else { 0 });
            for block in blocks {
                writer.block_fields(block);
            }
        }
        messages.push(json!({"role": "system", "content": system.text()}));
    }
    for message in &conversation.messages {
        match message.role {
            Role::User => writer.user(message, &mut messages),
            Role::Assistant => messages.push(writer.assistant(message)),
            Role::System => messages.push(writer.system(message)),
        }
    }
    let mut map = Map::new();
    map.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = &conversation.tools {
        map.insert("tools".into(), Value::Array(tools.iter().map(|tool| writer.tool(tool)).collect()));
    }
    for (key, value) in &conversation.extra {
        map.insert(key.clone(), value.clone());
    }
    (Value::Object(map), writer.lost.into_vec())
}

#[derive(Default)]
struct Writer {
    lost: Losses,
}

impl Writer {
    /// Counts the fields a block loses when its OpenAI form has no place for them.
    fn block_fields(&mut self, block: &Block) {
        let dropped = match block {
            // A text part keeps its fields.
            Block::Text(_) | Block::Other(_) | Block::Document(_) => false,
            Block::ToolUse(tool_use) => !tool_use.extra.is_empty(),
            Block::ToolResult(result) => !result.extra.is_empty(),
            Block::Thinking(thinking) => !thinking.extra.is_empty(),
            Block::RedactedThinking(_) => false,
            Block::Image(media) => image_url(&media.source).is_some() && !media.extra.is_empty(),
        };
        self.lost.add_if(dropped, LossKind::BlockFields);
    }

    fn user(&mut self, message: &Message, out: &mut Vec<Value>) {
        let mut carried = Vec::new();
        let mut own = Vec::new();
        for block in &message.content {
            match block {
                Block::ToolResult(result) => {
                    self.block_fields(block);
                    self.lost.add_if(result.is_error(), LossKind::ErrorFlag);
                    out.push(json!({
                        "role": "tool",
                        "tool_call_id": result.tool_use_id,
                        "content": result.text(),
                    }));
                    if let Some(ToolResultContent::Blocks(blocks)) = &result.content {
                        let texts = blocks.iter().filter(|block| matches!(block, Block::Text(_))).count();
                        let joined = texts > 1
                            || blocks.iter().any(|block| matches!(block, Block::Text(text) if !text.extra.is_empty()));
                        self.lost.add_if(joined, LossKind::ResultBlocksJoined);
                        for inner in blocks.iter().filter(|block| !matches!(block, Block::Text(_))) {
                            self.lost.add(LossKind::ResultMediaMoved);
                            carried.push(self.part(inner));
                        }
                    }
                }
                other => own.push(other),
            }
        }
        let content = match own.as_slice() {
            [] if carried.is_empty() => {
                self.lost.add_if(!message.extra.is_empty(), LossKind::MessageFields);
                self.lost.add_if(message.content.is_empty(), LossKind::EmptyUserMessage);
                return;
            }
            [Block::Text(text)] if carried.is_empty() && text.extra.is_empty() => Value::String(text.text.clone()),
            _ => {
                carried.extend(own.into_iter().map(|block| self.part(block)));
                Value::Array(carried)
            }
        };
        let mut map = Map::new();
        map.insert("role".into(), Value::String("user".into()));
        map.insert("content".into(), content);
        extend(&mut map, &message.extra);
        out.push(Value::Object(map));
    }

    fn assistant(&mut self, message: &Message) -> Value {
        let mut reasoning = Vec::new();
        let mut content = Vec::new();
        let mut calls = Vec::new();
        let mut text_after_call = false;
        for block in &message.content {
            self.block_fields(block);
            match block {
                Block::Thinking(thinking) => {
                    self.lost.add_if(thinking.signature.is_some(), LossKind::ThinkingSignature);
                    reasoning.push(thinking.thinking.as_str());
                }
                Block::RedactedThinking(_) => self.lost.add(LossKind::RedactedThinking),
                Block::ToolUse(tool_use) => calls.push(json!({
                    "id": tool_use.id,
                    "type": "function",
                    "function": {"name": tool_use.name, "arguments": arguments(&tool_use.input)},
                })),
                other => {
                    text_after_call |= !calls.is_empty();
                    content.push(other);
                }
            }
        }
        self.lost.add_if(reasoning.len() > 1, LossKind::ThinkingJoined);
        self.lost.add_if(text_after_call, LossKind::ToolCallOrder);
        let content = match content.as_slice() {
            [] if calls.is_empty() => Value::String(String::new()),
            [] => Value::Null,
            [Block::Text(text)] if text.extra.is_empty() => Value::String(text.text.clone()),
            blocks => Value::Array(blocks.iter().map(|block| self.part(block)).collect()),
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

    /// A mid-conversation system message: a string while it is one plain text block.
    fn system(&mut self, message: &Message) -> Value {
        let content = match (message.shape, message.content.as_slice()) {
            (ContentShape::Text, [Block::Text(text)]) if text.extra.is_empty() => Value::String(text.text.clone()),
            (_, blocks) => Value::Array(blocks.iter().map(|block| self.part(block)).collect()),
        };
        let mut map = Map::new();
        map.insert("role".into(), Value::String("system".into()));
        map.insert("content".into(), content);
        extend(&mut map, &message.extra);
        Value::Object(map)
    }

    /// One block as an OpenAI content part; blocks OpenAI cannot carry pass through as they are.
    fn part(&mut self, block: &Block) -> Value {
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
                None => {
                    self.lost.add(LossKind::PassedThrough);
                    block.to_value()
                }
            },
            Block::Other(value) if value.get("type").and_then(Value::as_str) == Some("refusal") => value.clone(),
            other => {
                self.lost.add(LossKind::PassedThrough);
                other.to_value()
            }
        }
    }

    /// A tool definition in OpenAI form: `{type: function, function: {name, description,
    /// parameters, …}}`; server tools (web search, …) have none and pass through.
    fn tool(&mut self, tool: &Value) -> Value {
        let Some(function) = tool_as_function(tool, Map::new()) else {
            return tool.clone();
        };
        self.lost.add_if(tool.get("cache_control").is_some(), LossKind::ToolDefinitionFields);
        json!({"type": "function", "function": function})
    }
}

/// A tool call's `arguments`: compact JSON, or the text itself when the input is a string
/// (which is how the reader keeps arguments that are not JSON).
fn arguments(input: &Value) -> String {
    match input {
        Value::String(text) => text.clone(),
        other => other.to_string(),
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
