//! OpenAI's two conversation APIs: Chat Completions (`messages`) and the Responses API
//! (`input` items), each read with its format of `contextfold-core` and compacted on the
//! shared path ([`crate::prepare`]).
//!
//! The design choice is the same as for Anthropic's `messages`: the list is the only field
//! that may change, and within it every entry of a message the compaction kept goes out as
//! the client wrote it. The format's reader says which entries each message came from
//! ([`Spans`]): the leading system/developer entries (the Chat reader joins them into one
//! system prompt) are spliced through untouched, the messages the compaction rewrote are
//! written by the format's writer, and the rest are the client's own text.

pub mod chat;
pub mod responses;

use crate::body::{join_messages, RequestBody};
use crate::session::{identify_openai, Identity};
use axum::http::request::Parts;
use contextfold_core::format::Spans;
use contextfold_core::{Message, System};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// The identity of an OpenAI request: the session header, `prompt_cache_key`, `user`,
/// `safety_identifier`, else a hash of the system prompt and the first message.
fn identity(parts: &Parts, parsed: &RequestBody<'_>, system: Option<&System>, messages: &[Message]) -> Identity {
    let named = ["prompt_cache_key", "user", "safety_identifier"].map(|key| parsed.value(key));
    identify_openai(&parts.headers, &named, system, messages)
}

/// The list to send: the client's leading system entries, `written` (the rewritten messages'
/// entries), then the client's entries of its messages from `from` on.
fn join(raw: &[&RawValue], spans: &Spans, written: Vec<Value>, from: usize) -> String {
    let lead = raw[..spans.system.min(raw.len())].iter().map(|raw| Cow::Borrowed(raw.get()));
    let written = written.into_iter().map(|entry| Cow::Owned(entry.to_string()));
    let start = spans.messages.get(from).map_or(raw.len(), |span| span.start.min(raw.len()));
    let verbatim = raw[start..].iter().map(|raw| Cow::Borrowed(raw.get()));
    join_messages(lead.chain(written).chain(verbatim))
}

/// The messages as owned values, for a writer.
fn owned(messages: &[&Message]) -> Vec<Message> {
    messages.iter().map(|message| (*message).clone()).collect()
}
