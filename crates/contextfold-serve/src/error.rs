//! The proxy's own answers, in the error shape of the client's API, so its SDK reads them as
//! it reads the API's: Anthropic's `{"type":"error","error":{"type":…,"message":…}}`, or
//! OpenAI's `{"error":{"message":…,"type":…,"param":null,"code":…}}`.

use crate::route::Api;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A request the proxy answers itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The API's error type (`invalid_request_error`, `api_error`, …).
    pub kind: &'static str,
    /// A short code naming the case, for OpenAI's `code` field.
    pub code: &'static str,
    /// One sentence: what went wrong and what to do.
    pub message: String,
}

impl ProxyError {
    /// 400: the body cannot be read.
    pub fn bad_request(message: impl Into<String>) -> ProxyError {
        ProxyError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            code: "invalid_body",
            message: message.into(),
        }
    }

    /// 400: a path the proxy does not forward (`why` says what is wrong with it).
    pub fn bad_path(why: &str) -> ProxyError {
        ProxyError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            code: "invalid_path",
            message: format!("contextfold serve refuses this path: {why}"),
        }
    }

    /// 401: the proxy token is missing or wrong.
    pub fn unauthorized() -> ProxyError {
        ProxyError {
            status: StatusCode::UNAUTHORIZED,
            kind: "authentication_error",
            code: "proxy_token_required",
            message: "contextfold serve needs its proxy token on every request: send it as `x-contextfold-token: TOKEN` or `Proxy-Authorization: Bearer TOKEN`".into(),
        }
    }

    /// 413: the body is over `--max-body`.
    pub fn too_large(limit: usize) -> ProxyError {
        ProxyError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            kind: "request_too_large",
            code: "request_too_large",
            message: format!("the request body is over contextfold serve's limit of {limit} bytes (--max-body)"),
        }
    }

    /// 502: the upstream could not be reached.
    pub fn unreachable(upstream: &str, why: &str) -> ProxyError {
        ProxyError {
            status: StatusCode::BAD_GATEWAY,
            kind: "api_error",
            code: "upstream_unreachable",
            message: format!("contextfold serve could not reach the upstream {upstream}: {why}"),
        }
    }

    /// 504: the upstream did not answer in time.
    pub fn timeout(upstream: &str, seconds: f64) -> ProxyError {
        ProxyError {
            status: StatusCode::GATEWAY_TIMEOUT,
            kind: "api_error",
            code: "upstream_timeout",
            message: format!(
                "the upstream {upstream} did not answer within {seconds} s (contextfold serve's --upstream-timeout)"
            ),
        }
    }
}

impl ProxyError {
    /// The answer, in `api`'s error shape.
    pub fn response_for(self, api: Api) -> Response {
        let body = match api {
            Api::Anthropic => json!({"type": "error", "error": {"type": self.kind, "message": self.message}}),
            Api::OpenAi => {
                json!({"error": {"message": self.message, "type": self.kind, "param": null, "code": self.code}})
            }
        };
        let mut response = (self.status, body.to_string()).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}
