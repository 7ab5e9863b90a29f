//! The request path: check the token, read the body, compact the conversation of a request
//! that carries one, forward to the request's API's upstream, relay.
//!
//! One handler serves every method and path, so the proxy itself never answers 405 (and
//! `HEAD /`, which clients use to see whether the API is up, goes upstream like the rest).
//! [`Route`] decides the API and whether there is a conversation to compact:
//! `POST /v1/messages` (and `count_tokens`), Chat Completions and the Responses API are read
//! by their [`crate::api`] module (a large body on the [`crate::workers`] pool); everything else
//! is forwarded as it came. The proxy's own endpoints ([`crate::endpoints`]) and the dashboard
//! ([`crate::ui`]) are answered before anything else.

use crate::api;
use crate::app::App;
use crate::error::ProxyError;
use crate::headers::{has_token, upstream_request};
use crate::log::{Action, RequestLog};
use crate::received::Received;
use crate::relay::relay;
use crate::route::{unsafe_path, Api, Route};
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use std::sync::Arc;

/// Serves one request.
pub async fn handle(State(app): State<Arc<App>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    if let Some(own) = crate::endpoints::Own::of(parts.uri.path()) {
        return crate::endpoints::answer(&app, own, &parts).await;
    }
    if crate::ui::Dashboard::serves(parts.uri.path()) {
        return app.ui.answer(&parts).await;
    }
    let route = Route::of(&parts.method, parts.uri.path(), &parts.headers);
    let api = route.api();
    let mut log = RequestLog::new(app.log_format, parts.method.as_str(), parts.uri.path());
    log.api = api;
    log.tally = Some(app.stats.clone());
    app.stats.count_request();
    if let Some(token) = &app.token {
        if !has_token(&parts.headers, token) {
            return answer(log, ProxyError::unauthorized(), api);
        }
    }
    if let Some(why) = unsafe_path(parts.uri.path()) {
        return answer(log, ProxyError::bad_path(why), api);
    }
    if crate::mcp::Endpoint::serves(parts.uri.path()) {
        return app.mcp.answer(axum::extract::Request::from_parts(parts, body), log).await;
    }
    // Refused before the body is read: a client that asked `Expect: 100-continue` gets the
    // 413 rather than a go-ahead.
    if declared_length(&parts.headers).is_some_and(|length| length > app.max_body as u64) {
        return answer(log, ProxyError::too_large(app.max_body), api);
    }
    let received = match Received::read(body, app.max_body, declared_length(&parts.headers)).await {
        Ok(received) => received,
        Err(err) => return answer(log, err, api),
    };
    let size = received.bytes().len();
    let (prepared, mut log, parts) = match route {
        Route::Forward(_) => (Ok((received.into_bytes(), None)), log, parts),
        route => {
            // Reading, counting and compacting a large body takes the CPU: done apart.
            let shared = app.clone();
            let work = async move {
                let mut log = log;
                let prepared = api::body(&shared, route, &parts, received, &mut log).await;
                (prepared, log, parts)
            };
            app.workers.run(size, work).await
        }
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
    log.forwarding();
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

/// The body's length as its `Content-Length` declares it.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}
