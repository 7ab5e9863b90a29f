//! The request path: check the token, read the body, compact the messages of a Messages
//! request, forward, relay.
//!
//! One handler serves every method and path, so the proxy itself never answers 405 (and
//! `HEAD /`, which clients use to see whether the API is up, goes upstream like the rest).
//! `POST /v1/messages` and `POST /v1/messages/count_tokens` have their messages compacted;
//! everything else is forwarded as it came.

use crate::body::RequestBody;
use crate::compaction::{self, ConversationState, Outcome, Request, Settings};
use crate::config::LogFormat;
use crate::conversations::Conversations;
use crate::error::ProxyError;
use crate::forward::Upstream;
use crate::headers::{compaction_off, has_token, upstream_request};
use crate::log::{Action, RequestLog};
use crate::relay::relay;
use crate::session::identify;
use crate::usage::OnUsage;
use crate::Stats;
use axum::body::Body;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{header, Method};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use contextfold_core::{Block, Conversation, Message};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// What every request shares.
pub struct App {
    /// Where requests go.
    pub upstream: Upstream,
    /// How conversations are compacted.
    pub settings: Settings,
    /// Each conversation's state.
    pub conversations: Conversations<ConversationState>,
    /// The proxy token, when one is required.
    pub token: Option<String>,
    /// The largest body accepted.
    pub max_body: usize,
    /// How long a stream may stay silent.
    pub idle_timeout: Duration,
    /// How log lines are written.
    pub log_format: LogFormat,
    /// Counts, for tests and the operator.
    pub stats: Arc<Stats>,
}

/// Serves one request.
pub async fn handle(State(app): State<Arc<App>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut log = RequestLog::new(app.log_format, parts.method.as_str(), parts.uri.path());
    app.stats.count_request();
    if let Some(token) = &app.token {
        if !has_token(&parts.headers, token) {
            return answer(log, ProxyError::unauthorized());
        }
    }
    let bytes = match read_body(body, app.max_body).await {
        Ok(bytes) => bytes,
        Err(err) => return answer(log, err),
    };
    let (body, on_usage) = if is_messages_route(&parts) {
        match messages_body(&app, &parts, bytes, &mut log).await {
            Ok(prepared) => prepared,
            Err(err) => return answer(log, err),
        }
    } else {
        (bytes, None)
    };
    let path_and_query = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    match app.upstream.send(parts.method.clone(), path_and_query, upstream_request(&parts.headers), body).await {
        Ok(response) => relay(response, app.idle_timeout, log, on_usage),
        Err(err) => answer(log, err),
    }
}

/// The proxy's own answer, logged.
fn answer(mut log: RequestLog, err: ProxyError) -> Response {
    log.status = err.status.as_u16();
    if log.action != Action::Untouched {
        log.action = Action::Refused;
    }
    log.note.get_or_insert_with(|| err.message.clone());
    log.emit("complete");
    err.into_response()
}

/// The body, up to `limit` bytes (413 past it).
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ProxyError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => Err(ProxyError::too_large(limit)),
        Err(_) => Err(ProxyError::bad_request("the request body could not be read; send it again")),
    }
}

fn is_messages_route(parts: &Parts) -> bool {
    parts.method == Method::POST && matches!(parts.uri.path(), "/v1/messages" | "/v1/messages/count_tokens")
}

/// The body to send for a Messages request (the client's bytes, or with its `messages`
/// compacted), and what to do with the provider's count of its input tokens.
async fn messages_body(
    app: &App,
    parts: &Parts,
    bytes: Bytes,
    log: &mut RequestLog,
) -> Result<(Bytes, Option<OnUsage>), ProxyError> {
    if parts.headers.get(header::CONTENT_ENCODING).is_some_and(|encoding| encoding != "identity") {
        return Ok(unobserved(untouched(app, log, "the body is compressed", bytes)));
    }
    let parsed = RequestBody::parse(&bytes).map_err(|err| ProxyError::bad_request(err.to_string()))?;
    log.stream = parsed.raw("stream").is_some_and(|raw| raw.trim() == "true");
    if compaction_off(&parts.headers) {
        return Ok(unobserved(untouched(app, log, "x-contextfold: off", bytes)));
    }
    let messages = match parsed.messages() {
        Ok(messages) => messages,
        Err(err) => {
            let note = format!("the compaction cannot read it: {err}");
            return Ok(unobserved(untouched(app, log, &note, bytes)));
        }
    };
    let preamble = match read_preamble(&parsed) {
        Ok(preamble) => preamble,
        Err(why) => {
            let note = format!("the compaction cannot read it: {why}");
            return Ok(unobserved(untouched(app, log, &note, bytes)));
        }
    };
    if let Some(why) = server_side_compaction(&parsed, &messages) {
        return Ok(unobserved(untouched(app, log, why, bytes)));
    }
    let identity = identify(&parts.headers, parsed.value("metadata").as_ref(), preamble.system.as_ref(), &messages);
    log.session = Some(identity.session.clone());
    log.conversation = Some(identity.short_conversation());
    let betas = parts
        .headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    let model = parsed.value("model");
    let request = Request {
        messages: &messages,
        raw_messages: parsed.raw_messages(),
        system: preamble.system.as_ref(),
        tools: preamble.tools.as_deref(),
        model: model.as_ref().and_then(Value::as_str),
        betas: &betas,
    };
    let slot = app.conversations.slot(identity.conversation);
    app.stats.set_conversations(app.conversations.len());
    let (outcome, call) = {
        let mut state = slot.lock().await;
        let outcome = compaction::prepare(&mut state, &app.settings, &request).await;
        (outcome, state.as_ref().map_or(0, ConversationState::calls))
    };
    let observe: OnUsage = Box::new(move |tokens| {
        tokio::spawn(async move {
            if let Some(state) = slot.lock().await.as_ref() {
                state.observe_usage(call, tokens);
            }
        });
    });
    let body = match outcome {
        Outcome::Unchanged { tokens, skipped } => {
            log.tokens_in = Some(tokens);
            log.tokens_out = Some(tokens);
            log.action = Action::Unchanged;
            log.note = skipped;
            app.stats.count(Action::Unchanged);
            bytes
        }
        Outcome::Rewritten { messages, tokens_before, tokens_after, compaction } => {
            log.tokens_in = Some(tokens_before);
            log.tokens_out = Some(tokens_after);
            log.action = if compaction.is_some() { Action::Compacted } else { Action::Resent };
            app.stats.count(log.action);
            log.note = compaction;
            Bytes::from(parsed.splice(&messages))
        }
        Outcome::Refused { why } => {
            let note = format!("the compacted request would break a rule: {why}");
            return Ok(unobserved(untouched(app, log, &note, bytes)));
        }
    };
    Ok((body, Some(observe)))
}

/// A body sent without calibrating anything by its answer.
fn unobserved(bytes: Bytes) -> (Bytes, Option<OnUsage>) {
    (bytes, None)
}

/// Records that `bytes` go out as they came, and why.
fn untouched(app: &App, log: &mut RequestLog, why: &str, bytes: Bytes) -> Bytes {
    app.stats.count(Action::Untouched);
    log.action = Action::Untouched;
    log.note = Some(why.to_string());
    bytes
}

/// The system prompt and tools, read into the model.
fn read_preamble(parsed: &RequestBody<'_>) -> Result<Conversation, String> {
    let mut preamble = serde_json::Map::new();
    for key in ["system", "tools"] {
        if let Some(value) = parsed.value(key) {
            preamble.insert(key.to_string(), value);
        }
    }
    preamble.insert("messages".to_string(), Value::Array(Vec::new()));
    Conversation::from_value(Value::Object(preamble)).map_err(|err| err.to_string())
}

/// Why the client's own server-side compaction means contextfold steps aside, if it does:
/// a `compaction` block in the history (the server already folded it), or a
/// `context_management` edit that compacts.
fn server_side_compaction(parsed: &RequestBody<'_>, messages: &[Message]) -> Option<&'static str> {
    let has_block = messages.iter().flat_map(|message| &message.content).any(|block| match block {
        Block::Other(value) => value.get("type").and_then(Value::as_str) == Some("compaction"),
        _ => false,
    });
    if has_block {
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
