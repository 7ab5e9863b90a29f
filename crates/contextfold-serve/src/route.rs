//! Which API a request speaks, and whether it carries a conversation to compact.
//!
//! One proxy serves Anthropic and OpenAI clients at once, each forwarded to its own upstream.
//! The path decides: `/v1/messages` is Anthropic's, `/v1/chat/completions`, `/v1/responses`
//! and OpenAI's other endpoints are OpenAI's. A path both APIs have (`/v1/models`,
//! `/v1/files`, `/v1/batches`) is OpenAI's when the request carries an `Authorization` header
//! and no Anthropic one (`anthropic-version`, `x-api-key`: Anthropic's SDKs send the first on
//! every request, even with a bearer token); any other path is Anthropic's, as it was before
//! the proxy spoke OpenAI.

use axum::http::{header, HeaderMap, Method};

/// The API a request is for: where it goes, and the shape of the proxy's own errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// The Anthropic Messages API (`--upstream`).
    Anthropic,
    /// The OpenAI API (`--upstream-openai`).
    OpenAi,
}

impl Api {
    /// The API as log lines and metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAi => "openai",
        }
    }
}

/// What the proxy does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /v1/messages` or `/v1/messages/count_tokens`: compact `messages`.
    Messages,
    /// `POST /v1/chat/completions`: compact `messages`.
    ChatCompletions,
    /// `POST /v1/responses`: compact the `input` items.
    Responses,
    /// Anything else: forwarded as it came.
    Forward(Api),
}

/// Paths only OpenAI's API has (each with what lies below it).
const OPENAI_PATHS: &[&str] = &[
    "/v1/chat",
    "/v1/responses",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/moderations",
    "/v1/images",
    "/v1/audio",
    "/v1/assistants",
    "/v1/threads",
    "/v1/vector_stores",
    "/v1/fine_tuning",
    "/v1/uploads",
    "/v1/conversations",
    "/v1/realtime",
    "/v1/containers",
    "/v1/evals",
];

/// Paths both APIs have.
const SHARED_PATHS: &[&str] = &["/v1/models", "/v1/files", "/v1/batches"];

impl Route {
    /// The route of a request with this method, path and headers.
    pub fn of(method: &Method, path: &str, headers: &HeaderMap) -> Route {
        let post = method == Method::POST;
        match path {
            "/v1/messages" | "/v1/messages/count_tokens" if post => return Route::Messages,
            "/v1/chat/completions" if post => return Route::ChatCompletions,
            "/v1/responses" if post => return Route::Responses,
            _ => {}
        }
        let anthropic_headers = headers.contains_key("anthropic-version") || headers.contains_key("x-api-key");
        let openai_auth = headers.contains_key(header::AUTHORIZATION) && !anthropic_headers;
        let openai = OPENAI_PATHS.iter().any(|prefix| is_under(path, prefix))
            || (openai_auth && SHARED_PATHS.iter().any(|prefix| is_under(path, prefix)));
        Route::Forward(if openai { Api::OpenAi } else { Api::Anthropic })
    }

    /// The API of the route.
    pub fn api(self) -> Api {
        match self {
            Route::Messages => Api::Anthropic,
            Route::ChatCompletions | Route::Responses => Api::OpenAi,
            Route::Forward(api) => api,
        }
    }
}

/// Why `path` is not forwarded, if it is not: a `.` or `..` segment, written plainly or
/// percent-encoded, would be resolved by the upstream's URL and reach past its base path (or
/// around the route that compacts); an encoded `/` or `\\` hides a segment the same way.
pub fn unsafe_path(path: &str) -> Option<&'static str> {
    for segment in path.split('/') {
        let lower = segment.to_ascii_lowercase();
        if lower.contains("%2f") || lower.contains("%5c") || segment.contains('\\') {
            return Some("a segment holds an encoded `/` or a `\\`");
        }
        if matches!(lower.replace("%2e", ".").as_str(), "." | "..") {
            return Some("it has a `.` or `..` segment; send the path it stands for");
        }
    }
    None
}

/// Whether `path` is `prefix` or below it.
fn is_under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn dot_segments_plain_or_encoded_are_refused() {
        for path in [
            "/../admin",
            "/%2e%2e/admin",
            "/v1/x/../messages",
            "/v1/./messages",
            "/%2E./x",
            "/v1/.%2e",
            "/a%2f..%2fb",
            "/a%5C..",
            "/a\\..\\b",
            "/..",
        ] {
            assert!(unsafe_path(path).is_some(), "{path}");
        }
        for path in ["/", "/v1/messages", "/v1/messages/count_tokens", "/v1/files/file-..abc", "/a/.b/c..", "/%2e%2ex"]
        {
            assert_eq!(unsafe_path(path), None, "{path}");
        }
    }

    #[test]
    fn paths_and_headers_pick_the_api() {
        let none = HeaderMap::new();
        let mut bearer = HeaderMap::new();
        bearer.insert("authorization", HeaderValue::from_static("Bearer sk-proj-x"));
        let mut anthropic = bearer.clone();
        anthropic.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        let route = |method: Method, path: &str, headers: &HeaderMap| Route::of(&method, path, headers);
        assert_eq!(route(Method::POST, "/v1/messages", &none), Route::Messages);
        assert_eq!(route(Method::POST, "/v1/messages/count_tokens", &none), Route::Messages);
        assert_eq!(route(Method::POST, "/v1/chat/completions", &none), Route::ChatCompletions);
        assert_eq!(route(Method::POST, "/v1/responses", &none), Route::Responses);
        assert_eq!(route(Method::POST, "/v1/responses/compact", &none), Route::Forward(Api::OpenAi));
        assert_eq!(route(Method::GET, "/v1/responses/resp_1", &none), Route::Forward(Api::OpenAi));
        assert_eq!(route(Method::GET, "/v1/chat/completions", &none), Route::Forward(Api::OpenAi));
        assert_eq!(route(Method::GET, "/v1/models", &bearer), Route::Forward(Api::OpenAi));
        assert_eq!(route(Method::GET, "/v1/models/gpt-5", &bearer), Route::Forward(Api::OpenAi));
        assert_eq!(route(Method::GET, "/v1/models", &anthropic), Route::Forward(Api::Anthropic));
        assert_eq!(route(Method::GET, "/v1/models", &none), Route::Forward(Api::Anthropic));
        assert_eq!(route(Method::GET, "/v1/responsesx", &none), Route::Forward(Api::Anthropic));
        assert_eq!(route(Method::HEAD, "/", &none), Route::Forward(Api::Anthropic));
        assert_eq!(route(Method::POST, "/v1/messages/batches", &none), Route::Forward(Api::Anthropic));
    }
}
