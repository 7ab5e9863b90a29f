//! `POST /v1/responses`: the `input` items of a Responses API request, compacted.
//!
//! Only a request that carries its history as an `input` array (the stateless way, as Codex
//! CLI sends it with `store: false`) has anything to compact. One that continues a response
//! the server holds (`previous_response_id`, or a `conversation`) is forwarded untouched,
//! and so is one whose `input` is a single string.

use crate::app::App;
use crate::body::BodyError;
use crate::compaction::Wire;
use crate::error::ProxyError;
use crate::log::RequestLog;
use crate::prepare::{open, untouched, Opened, Outbound};
use crate::received::Received;
use crate::usage::Dialect;
use axum::http::request::Parts;
use contextfold_core::format::{responses, Spans};
use contextfold_core::{Conversation, Message, Problem};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Responses `input`: a message of the model is a run of items of one side (a reasoning item
/// stays with the call it precedes); the rewritten ones keep their items' shapes.
struct ResponsesWire<'r> {
    raw: &'r [&'r str],
    spans: &'r Spans,
}

impl Wire for ResponsesWire<'_> {
    fn join(&self, rewritten: &[&Message], from: usize) -> String {
        let conversation = Conversation { messages: super::openai::owned(rewritten), ..Conversation::default() };
        super::openai::join(self.raw, self.spans, responses::items(&conversation), from)
    }

    fn problems(&self, conversation: &Conversation) -> Vec<Problem> {
        responses::check(conversation)
    }

    fn dialect(&self) -> Dialect {
        Dialect::Responses
    }
}

/// The fields that say the server holds the history.
#[derive(Deserialize)]
struct ServerState {
    previous_response_id: Option<Value>,
    conversation: Option<Value>,
    stream: Option<Value>,
}

impl ServerState {
    /// Why the request is the server's to manage, if it is.
    fn holds_history(&self) -> Option<&'static str> {
        let set = |value: &Option<Value>| value.as_ref().is_some_and(|value| !value.is_null());
        if set(&self.previous_response_id) {
            Some("previous_response_id: the server holds the history")
        } else if set(&self.conversation) {
            Some("conversation: the server holds the history")
        } else {
            None
        }
    }
}

/// The body to send for a Responses request, and what to learn from its answer.
pub async fn body(app: &App, parts: &Parts, received: Received, log: &mut RequestLog) -> Result<Outbound, ProxyError> {
    let bytes = received.bytes().clone();
    let parsed = match open(app, parts, &received, log, "input") {
        Ok(Opened::Read(body)) => body.check().map_err(|err| ProxyError::bad_request(err.to_string()))?,
        Ok(Opened::Send(prepared)) => return Ok(prepared),
        Err(err @ BodyError::List(..)) => {
            // No `input` array: a string, or history the server holds.
            let state: Option<ServerState> = serde_json::from_slice(&bytes).ok();
            log.stream = state.as_ref().is_some_and(|state| state.stream == Some(Value::Bool(true)));
            let why = state.as_ref().and_then(ServerState::holds_history).map_or_else(
                || format!("nothing to compact: {err}").replace("; send one `input` array", ""),
                str::to_string,
            );
            return Ok(untouched(app, log, &why, bytes));
        }
        Err(err) => return Err(ProxyError::bad_request(err.to_string())),
    };
    let state = ServerState {
        previous_response_id: parsed.value("previous_response_id"),
        conversation: parsed.value("conversation"),
        stream: None,
    };
    if let Some(why) = state.holds_history() {
        return Ok(untouched(app, log, why, bytes));
    }
    let mut request = Map::new();
    if let Some(instructions) = parsed.value("instructions").filter(Value::is_string) {
        request.insert("instructions".into(), instructions);
    }
    request.insert("input".into(), Value::Array(parsed.entries()));
    let (conversation, spans) = match responses::from_value_spanned(Value::Object(request)) {
        Ok(read) => read,
        Err(err) => return Ok(untouched(app, log, &super::openai::cannot_read(&err), bytes)),
    };
    let wire = ResponsesWire { raw: parsed.raw_messages(), spans: &spans };
    Ok(super::openai::compact_read(app, parts, &parsed, &conversation, &wire, bytes.clone(), log).await)
}
