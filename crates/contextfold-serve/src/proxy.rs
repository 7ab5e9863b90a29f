//! The request path: check the token, read the body, compact the conversation of a request
//! that carries one, forward to the request's API's upstream, relay.
//!
//! One handler serves every method and path, so the proxy itself never answers 405 (and
//! `HEAD /`, which clients use to see whether the API is up, goes upstream like the rest).
//! [`Route`] decides the API and whether there is a conversation to compact:
//! `POST /v1/messages` and `/v1/messages/count_tokens` here, Chat Completions and the
//! Responses API in [`crate::openai`]; everything else is forwarded as it came.

use crate::background::Background;
use crate::body::RequestBody;
use crate::compaction::{ConversationState, MessagesWire, Request, Settings};
use crate::config::LogFormat;
use crate::conversations::Conversations;
use crate::error::ProxyError;
use crate::forward::Upstream;
use crate::headers::{has_token, upstream_request};
use crate::known::KnownLists;
use crate::log::{Action, RequestLog};
use crate::parsed::{read_message, ParsedHistory, Read, Unreadable};
use crate::preamble::Preambles;
use crate::prepare::{compact, open, untouched, Opened, Prepared};
use crate::relay::relay;
use crate::route::{Api, Route};
use crate::session::identify;
use crate::store::ProxyStore;
use crate::Stats;
use axum::body::Body;
use axum::extract::State;
use axum::http::request::Parts;
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// What every request shares.
pub struct App {
    /// Where Anthropic requests go.
    pub upstream: Upstream,
    /// Where OpenAI requests go.
    pub openai: Upstream,
    /// How conversations are compacted.
    pub settings: Settings,
    /// Each conversation's state.
    pub conversations: Conversations<ConversationState>,
    /// Each Messages conversation's last messages, read into the model.
    pub parsed: Conversations<ParsedHistory>,
    /// Each conversation's last list, for the split of its next request.
    pub known: KnownLists,
    /// The system prompts and tools read lately.
    pub preambles: Preambles,
    /// Where each conversation's compactions are kept, when anywhere.
    pub store: Option<ProxyStore>,
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
    /// What answers write back after their requests, awaited at shutdown.
    pub background: Background,
}

/// Serves one request.
pub async fn handle(State(app): State<Arc<App>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let route = Route::of(&parts.method, parts.uri.path(), &parts.headers);
    let api = route.api();
    let mut log = RequestLog::new(app.log_format, parts.method.as_str(), parts.uri.path());
    app.stats.count_request();
    if let Some(token) = &app.token {
        if !has_token(&parts.headers, token) {
            return answer(log, ProxyError::unauthorized(), api);
        }
    }
    let bytes = match read_body(body, app.max_body).await {
        Ok(bytes) => bytes,
        Err(err) => return answer(log, err, api),
    };
    let prepared = match route {
        Route::Messages => messages_body(&app, &parts, bytes, &mut log).await,
        Route::ChatCompletions => crate::openai::chat::body(&app, &parts, bytes, &mut log).await,
        Route::Responses => crate::openai::responses::body(&app, &parts, bytes, &mut log).await,
        Route::Forward(_) => Ok((bytes, None)),
    };
    let (body, observer) = match prepared {
        Ok(prepared) => prepared,
        Err(err) => return answer(log, err, api),
    };
    let upstream = match api {
        Api::Anthropic => &app.upstream,
        Api::OpenAi => &app.openai,
    };
    let path_and_query = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    match upstream.send(parts.method.clone(), path_and_query, upstream_request(&parts.headers), body).await {
        Ok(response) => relay(response, app.idle_timeout, log, observer),
        Err(err) => answer(log, err, api),
    }
}

/// The proxy's own answer, logged, in `api`'s error shape.
fn answer(mut log: RequestLog, err: ProxyError, api: Api) -> Response {
    log.status = err.status.as_u16();
    if log.action != Action::Untouched {
        log.action = Action::Refused;
    }
    log.note.get_or_insert_with(|| err.message.clone());
    log.emit("complete");
    err.response_for(api)
}

/// The body, up to `limit` bytes (413 past it).
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ProxyError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => Err(ProxyError::too_large(limit)),
        Err(_) => Err(ProxyError::bad_request("the request body could not be read; send it again")),
    }
}

/// The body to send for a Messages request (the client's bytes, or with its `messages`
/// compacted), and what to learn from its answer.
async fn messages_body(app: &App, parts: &Parts, bytes: Bytes, log: &mut RequestLog) -> Result<Prepared, ProxyError> {
    let body = match open(app, parts, &bytes, log, "messages") {
        Ok(Opened::Read(body)) => body,
        Ok(Opened::Send(prepared)) => return Ok(prepared),
        Err(err) => return Err(ProxyError::bad_request(err.to_string())),
    };
    let unreadable = |why: Unreadable| match why {
        Unreadable::Body(err) => Err(ProxyError::bad_request(err.to_string())),
        Unreadable::Message(err) => Ok(format!("the compaction cannot read it: {err}")),
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
    let Read { body: parsed, messages, server_compacted } =
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
    let request = Request {
        messages,
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
