//! `POST /v1/chat/completions`: the `messages` of a Chat Completions request, compacted.

use crate::compaction::{Request, Wire};
use crate::error::ProxyError;
use crate::log::RequestLog;
use crate::prepare::{compact, open, untouched, Opened, Prepared};
use crate::proxy::App;
use crate::usage::Dialect;
use axum::http::request::Parts;
use bytes::Bytes;
use contextfold_core::format::{openai, Spans};
use contextfold_core::{Conversation, Message};
use serde_json::value::RawValue;
use serde_json::Value;

/// Chat `messages`: a message of the model is a run of entries (an assistant message, or tool
/// messages and the user message after them).
struct ChatWire<'r> {
    raw: &'r [&'r RawValue],
    spans: &'r Spans,
}

impl Wire for ChatWire<'_> {
    fn join(&self, rewritten: &[&Message], from: usize) -> String {
        let conversation = Conversation { messages: super::owned(rewritten), ..Conversation::default() };
        let written = match openai::to_value(&conversation) {
            Value::Object(mut map) => match map.remove("messages") {
                Some(Value::Array(entries)) => entries,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        super::join(self.raw, self.spans, written, from)
    }
}

/// The body to send for a Chat Completions request, and what to learn from its answer.
pub async fn body(app: &App, parts: &Parts, bytes: Bytes, log: &mut RequestLog) -> Result<Prepared, ProxyError> {
    let parsed = match open(app, parts, &bytes, log, "messages") {
        Ok(Opened::Read(parsed)) => parsed,
        Ok(Opened::Send(prepared)) => return Ok(prepared),
        Err(err) => return Err(ProxyError::bad_request(err.to_string())),
    };
    let (conversation, spans) = match openai::from_value_spanned(Value::Array(parsed.entries())) {
        Ok(read) => read,
        Err(err) => return Ok(untouched(app, log, &format!("the compaction cannot read it: {err}"), bytes)),
    };
    let tools = parsed.value("tools").and_then(|tools| tools.as_array().cloned());
    let identity = super::identity(parts, &parsed, conversation.system.as_ref(), &conversation.messages);
    let model = parsed.value("model");
    let wire = ChatWire { raw: parsed.raw_messages(), spans: &spans };
    let request = Request {
        messages: &conversation.messages,
        wire: &wire,
        system: conversation.system.as_ref(),
        tools: tools.as_deref(),
        model: model.as_ref().and_then(Value::as_str),
        betas: "",
    };
    Ok(compact(app, identity, request, &parsed, bytes.clone(), Dialect::Chat, log).await)
}
