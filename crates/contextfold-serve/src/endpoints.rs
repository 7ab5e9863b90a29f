//! The proxy's own endpoints, answered by the proxy and never forwarded: `/health` (the
//! process serves requests), `/ready` (it can prepare them as configured) and `/metrics`
//! (Prometheus text, [`crate::metrics`]). They write no log line, so scrapes and probes
//! neither fill the log nor count as requests.
//!
//! `/metrics` needs the proxy token when one is set, as every forwarded request does. The
//! probes never do, so that an orchestrator can ask without the secret; they say nothing a
//! client could use (a store's failure is named in the proxy's log, not in the answer).

use crate::app::App;
use crate::error::ProxyError;
use crate::headers::has_token;
use crate::route::Api;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::time::Duration;

/// How long `/ready` waits for the store: a probe that hangs tells the orchestrator nothing.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// One of the proxy's own endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Own {
    /// `/health`: always 200 while the proxy serves.
    Health,
    /// `/ready`: 200 when the store (if any) answers, else 503 with the reason.
    Ready,
    /// `/metrics`: the metrics in the Prometheus text format.
    Metrics,
}

impl Own {
    /// The endpoint at `path`, if it is one of the proxy's own.
    pub fn of(path: &str) -> Option<Own> {
        match path {
            "/health" => Some(Own::Health),
            "/ready" => Some(Own::Ready),
            "/metrics" => Some(Own::Metrics),
            _ => None,
        }
    }
}

/// The answer of `own` to the request `parts` describes.
pub async fn answer(app: &App, own: Own, parts: &Parts) -> Response {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        let mut response = json_answer(StatusCode::METHOD_NOT_ALLOWED, json!({"status": "error", "reason": "use GET"}));
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match own {
        Own::Health => json_answer(StatusCode::OK, json!({"status": "ok"})),
        Own::Ready => ready(app).await,
        Own::Metrics => {
            if app.token.as_deref().is_some_and(|token| !has_token(&parts.headers, token)) {
                return ProxyError::unauthorized().response_for(Api::Anthropic);
            }
            let text = app.stats.metrics().encode(app.conversations.len(), app.bytes_held());
            let mut response = (StatusCode::OK, text).into_response();
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE));
            response
        }
    }
}

/// 200 when the store, if the proxy has one, answers a trivial query within
/// [`READY_TIMEOUT`]; 503 with the reason otherwise. Both upstreams are always configured:
/// the proxy does not start without usable ones.
async fn ready(app: &App) -> Response {
    if let Some(store) = &app.store {
        let reason = match tokio::time::timeout(READY_TIMEOUT, store.answers()).await {
            Ok(Ok(())) => None,
            Ok(Err(_)) => Some("the store does not answer; the proxy's log says why".to_string()),
            Err(_) => Some(format!("the store did not answer within {} s", READY_TIMEOUT.as_secs())),
        };
        if let Some(reason) = reason {
            return json_answer(StatusCode::SERVICE_UNAVAILABLE, json!({"status": "unavailable", "reason": reason}));
        }
    }
    json_answer(StatusCode::OK, json!({"status": "ready"}))
}

/// A JSON answer of the proxy's own.
fn json_answer(status: StatusCode, body: serde_json::Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
