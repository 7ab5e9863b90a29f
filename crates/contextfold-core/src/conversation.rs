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
    pub(crate) fn at(location: Location, message: impl Into<String>) -> ModelError {
        ModelError { location, message: message.into() }
    }
}
