//! `POST /v1/messages` (and `count_tokens`): the `messages` of a Messages request, read into
//! the model message by message (only those new since the conversation's last request), and
//! compacted on the shared path.

use crate::app::App;
use crate::body::{join_messages, RequestBody};
use crate::compaction::{Incoming, Wire};
use crate::error::ProxyError;
use crate::log::RequestLog;
use crate::parsed::{read_message, BodyHistory, ParsedHistory, Read, Unreadable};
use crate::prepare::{compact, open, untouched, Opened, Outbound};
use crate::received::Received;
use crate::session::identify;
use crate::usage::Dialect;
use axum::http::request::Parts;
use contextfold_core::Message;
use serde_json::Value;
use std::borrow::Cow;

/// The Messages API's `messages`: one entry a message; the rewritten ones lose their cache
/// breakpoints.
pub struct MessagesWire<'r> {
    /// The client's messages as it wrote them.
    pub raw: &'r [&'r str],
}

impl Wire for MessagesWire<'_> {
    fn join(&self, rewritten: &[&Message], from: usize) -> String {
        let rewritten = rewritten.iter().map(|message| {
            let mut value = message.to_value();
            strip_cache_control(&mut value);
            Cow::Owned(value.to_string())
        });
        let verbatim = self.raw[from.min(self.raw.len())..].iter().map(|raw| Cow::Borrowed(*raw));
        join_messages(rewritten.chain(verbatim))
    }

    fn dialect(&self) -> Dialect {
        Dialect::Anthropic
    }
}

/// The body to send for a Messages request (the client's bytes, or with its `messages`
/// compacted), and what to learn from its answer.
pub async fn body(app: &App, parts: &Parts, received: Received, log: &mut RequestLog) -> Result<Outbound, ProxyError> {
    let bytes = received.bytes().clone();
    let body = match open(app, parts, &received, log, "messages") {
        Ok(Opened::Read(body)) => body,
        Ok(Opened::Send(prepared)) => return Ok(prepared),
        Err(err) => return Err(ProxyError::bad_request(err.to_string())),
    };
    let unreadable = |why: Unreadable| match why {
        Unreadable::Body(err) => Err(ProxyError::bad_request(err.to_string())),
        Unreadable::Message(note) => Ok(format!("the compaction cannot read it: {note}")),
    };
    let preamble = match app.preambles.read(body.raw("system"), body.raw("tools")) {
        Ok(preamble) => preamble,
        Err(why) => {
            body.checked_from(0).map_err(|err| ProxyError::bad_request(err.to_string()))?;
            return Ok(untouched(app, log, &format!("the compaction cannot read it: {why}"), bytes));
        }
    };
    // The conversation is known by its first message; the rest is read once it is found.
    let first = match (!body.entries().is_empty()).then(|| read_message(&body, 0)).transpose() {
        Ok(first) => first,
        Err(why) => return Ok(untouched(app, log, &unreadable(why)?, bytes)),
    };
    let identity =
        identify(&parts.headers, body.value("metadata").as_ref(), preamble.system.as_deref(), first.as_slice());
    let held = app.parsed.slot(identity.conversation);
    let mut held = held.lock().await;
    let Read { body: parsed, from, new, chain, server_compacted } =
        match held.get_or_insert_with(ParsedHistory::default).read(body) {
            Ok(read) => read,
            Err(why) => return Ok(untouched(app, log, &unreadable(why)?, bytes)),
        };
    if let Some(why) = server_side_compaction(&parsed, server_compacted) {
        return Ok(untouched(app, log, why, bytes));
    }
    let betas = parts
        .headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    let model = parsed.value("model");
    let wire = MessagesWire { raw: parsed.raw_messages() };
    let history = BodyHistory::new(parsed.raw_messages(), chain, from, new);
    let request = Incoming {
        history: &history,
        wire: &wire,
        system: preamble.system.as_deref(),
        tools: preamble.tools.as_deref().map(Vec::as_slice),
        model: model.as_ref().and_then(Value::as_str),
        betas: &betas,
    };
    Ok(compact(app, identity, request, &parsed, bytes.clone(), log).await)
}

/// Why the client's own server-side compaction means contextfold steps aside, if it does:
/// a `compaction` block in the history (the server already folded it), or a
/// `context_management` edit that compacts.
fn server_side_compaction(parsed: &RequestBody<'_>, server_compacted: bool) -> Option<&'static str> {
    if server_compacted {
        return Some("the history holds the server's compaction block");
    }
    let edits = parsed.value("context_management").and_then(|value| value.get("edits").cloned());
    let compacts = edits.as_ref().and_then(Value::as_array).is_some_and(|edits| {
        edits
            .iter()
            .any(|edit| edit.get("type").and_then(Value::as_str).is_some_and(|kind| kind.starts_with("compact")))
    });
    compacts.then_some("the client asks the server to compact (context_management)")
}

/// Removes `cache_control` from a message's blocks, and from the blocks of its tool results.
fn strip_cache_control(message: &mut Value) {
    fn strip_blocks(blocks: &mut Value) {
        let Some(blocks) = blocks.as_array_mut() else { return };
        for block in blocks.iter_mut().filter_map(Value::as_object_mut) {
            block.remove("cache_control");
            if let Some(inner) = block.get_mut("content") {
                strip_blocks(inner);
            }
        }
    }
    if let Some(content) = message.get_mut("content") {
        strip_blocks(content);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn breakpoints_go_from_every_block() {
        let mut message = json!({"role": "user", "content": [
            {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_result", "tool_use_id": "t", "cache_control": {"type": "ephemeral"},
             "content": [{"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]}
        ]});
        strip_cache_control(&mut message);
        assert!(!message.to_string().contains("cache_control"), "{message}");
        let mut plain = json!({"role": "user", "content": "hi"});
        strip_cache_control(&mut plain);
        assert_eq!(plain, json!({"role": "user", "content": "hi"}));
    }
}
