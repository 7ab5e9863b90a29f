//! What OpenAI's two conversation APIs share: Chat Completions (`messages`) and the Responses
//! API (`input` items), each read with its format of `contextfold-core` and compacted on the
//! shared path ([`crate::prepare`]).
//!
//! The design choice is the same as for Anthropic's `messages`: the list is the only field
//! that may change, and within it every entry of a message the compaction kept goes out as
//! the client wrote it. The format's reader says which entries each message came from
//! ([`Spans`]): the leading system/developer entries (the Chat reader joins them into one
//! system prompt) are spliced through untouched, the messages the compaction rewrote are
//! written by the format's writer, and the rest are the client's own text.

use crate::app::App;
use crate::body::{join_messages, RequestBody};
use crate::compaction::{Incoming, Wire};
use crate::log::RequestLog;
use crate::prepare::{compact, Outbound};
use crate::session::{identify_openai, Identity};
use axum::http::request::Parts;
use bytes::Bytes;
use contextfold::middleware::Whole;
use contextfold_core::format::{FormatError, Spans};
use contextfold_core::{Conversation, HistoryChain, Message, System};
use serde_json::Value;
use std::borrow::Cow;

/// The identity of an OpenAI request: the session header, `prompt_cache_key`, `user`,
/// `safety_identifier`, else a hash of the system prompt and the first message.
fn identity(parts: &Parts, parsed: &RequestBody<'_>, system: Option<&System>, messages: &[Message]) -> Identity {
    let named = ["prompt_cache_key", "user", "safety_identifier"].map(|key| parsed.value(key));
    identify_openai(&parts.headers, &named, system, messages)
}

/// Compacts a conversation read from an OpenAI body on the shared path: the tools, model and
/// identity come from the body, `wire` writes the list back in the API's shape.
pub async fn compact_read(
    app: &App,
    parts: &Parts,
    parsed: &RequestBody<'_>,
    conversation: &Conversation,
    wire: &dyn Wire,
    bytes: Bytes,
    log: &mut RequestLog,
) -> Outbound {
    let tools = parsed.value("tools").and_then(|tools| tools.as_array().cloned());
    let identity = identity(parts, parsed, conversation.system.as_ref(), &conversation.messages);
    let model = parsed.value("model");
    let chain = HistoryChain::of(&conversation.messages);
    let history = Whole::new(&conversation.messages, &chain);
    let request = Incoming {
        history: &history,
        wire,
        system: conversation.system.as_ref(),
        tools: tools.as_deref(),
        model: model.as_ref().and_then(Value::as_str),
        betas: "",
    };
    compact(app, identity, request, parsed, bytes, log).await
}

/// The note of a list the format cannot read: where, never what (a request's text does not
/// reach the log).
pub fn cannot_read(err: &FormatError) -> String {
    let place = match err {
        FormatError::Model(err) => crate::parsed::cannot_read(&err.location),
        FormatError::Item { index, .. } => crate::parsed::cannot_read(&format!("input item {index}")),
        _ => "it is not in a shape the compaction reads".to_string(),
    };
    format!("the compaction cannot read it: {place}")
}

/// The list to send: the client's leading system entries, `written` (the rewritten messages'
/// entries), then the client's entries of its messages from `from` on.
pub fn join(raw: &[&str], spans: &Spans, written: Vec<Value>, from: usize) -> String {
    let lead = raw[..spans.system.min(raw.len())].iter().map(|raw| Cow::Borrowed(*raw));
    let written = written.into_iter().map(|entry| Cow::Owned(entry.to_string()));
    let start = spans.messages.get(from).map_or(raw.len(), |span| span.start.min(raw.len()));
    let verbatim = raw[start..].iter().map(|raw| Cow::Borrowed(*raw));
    join_messages(lead.chain(written).chain(verbatim))
}

/// The messages as owned values, for a writer.
pub fn owned(messages: &[&Message]) -> Vec<Message> {
    messages.iter().map(|message| (*message).clone()).collect()
}
