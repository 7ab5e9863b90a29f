//! `POST /v1/chat/completions`: the `messages` of a Chat Completions request, compacted.

use crate::app::App;
use crate::compaction::Wire;
use crate::error::ProxyError;
use crate::log::RequestLog;
use crate::prepare::{open, untouched, Opened, Outbound};
use crate::received::Received;
use crate::usage::Dialect;
use axum::http::request::Parts;
use contextfold_core::format::{openai, Spans};
use contextfold_core::{Conversation, Message};
use serde_json::Value;

/// Chat `messages`: a message of the model is a run of entries (an assistant message, or tool
/// messages and the user message after them).
struct ChatWire<'r> {
    raw: &'r [&'r str],
    spans: &'r Spans,
}

impl Wire for ChatWire<'_> {
    fn join(&self, rewritten: &[&Message], from: usize) -> String {
        let conversation = Conversation { messages: super::openai::owned(rewritten), ..Conversation::default() };
        let written = match openai::to_value(&conversation) {
            Value::Object(mut map) => match map.remove("messages") {
                Some(Value::Array(entries)) => entries,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        super::openai::join(self.raw, self.spans, written, from)
    }

    fn dialect(&self) -> Dialect {
        Dialect::Chat
    }
}

/// The body to send for a Chat Completions request, and what to learn from its answer.
pub async fn body(app: &App, parts: &Parts, received: Received, log: &mut RequestLog) -> Result<Outbound, ProxyError> {
    let bytes = received.bytes().clone();
    let parsed = match open(app, parts, &received, log, "messages") {
        Ok(Opened::Read(body)) => body.check().map_err(|err| ProxyError::bad_request(err.to_string()))?,
        Ok(Opened::Send(prepared)) => return Ok(prepared),
        Err(err) => return Err(ProxyError::bad_request(err.to_string())),
    };
    let (conversation, spans) = match openai::from_value_spanned(Value::Array(parsed.entries())) {
        Ok(read) => read,
        Err(err) => return Ok(untouched(app, log, &super::openai::cannot_read(&err), bytes)),
    };
    let wire = ChatWire { raw: parsed.raw_messages(), spans: &spans };
    Ok(super::openai::compact_read(app, parts, &parsed, &conversation, &wire, bytes.clone(), log).await)
}
