//! The dashboard at `/ui`: a single page, embedded in the binary, that shows what a store
//! holds (sessions, each conversation's calls and compactions, a removed payload by its ref,
//! search), and the JSON API it reads ([`api`]).
//!
//! One [`Dashboard`] serves both `contextfold serve` (the proxy answers `/ui` itself and
//! never forwards it) and `contextfold ui` (the same page on a store with no proxy running,
//! through [`serve`]). The page is plain HTML, CSS and JavaScript compiled in with
//! `include_str!`: nothing is fetched from elsewhere, so it works on a machine with no
//! network, and the content security policy forbids anything but the page's own files.
//!
//! Access: a dashboard without a token answers only requests addressed to a loopback name
//! (`Host: 127.0.0.1`, `localhost`, `[::1]`), so a web page cannot reach it by pointing a
//! name of its own at 127.0.0.1 (DNS rebinding). With the proxy token set, the page and its
//! API need it, as `/metrics` does (`x-contextfold-token` or `Proxy-Authorization: Bearer`;
//! the static files, which hold no data, do not); a browser, which cannot send a header, opens `/ui?token=TOKEN` once and gets the token
//! back in an HttpOnly, SameSite=Strict cookie for `/ui`, then a redirect to `/ui`, so the
//! token leaves the address bar. Every API call is a GET that changes nothing.
//! Like `/health` and `/metrics`, the dashboard's requests write no log line.

mod api;

use crate::headers::has_token;
use crate::server::{serve as serve_router, Limits};
use api::ApiError;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use contextfold::store::SessionStore;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// The page, its script and its style, compiled into the binary.
const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");
/// The page's icon, so that a browser never asks the proxy for `/favicon.ico` (which it would
/// forward upstream).
const FAVICON_SVG: &str = include_str!("assets/favicon.svg");

/// The cookie that carries the token for a browser.
pub const COOKIE: &str = "contextfold_ui";

/// Only the page's own files, no inline script, no frame: stored text that slipped into
/// markup could still run nothing.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; \
                      base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The dashboard: a store (none for a proxy run with `--no-store`) and who may see it.
#[derive(Clone)]
pub struct Dashboard {
    store: Option<Arc<dyn SessionStore>>,
    token: Option<String>,
    any_host: bool,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("store", &self.store.is_some())
            .field("token", &self.token.as_ref().map(|_| "[set]"))
            .field("any_host", &self.any_host)
            .finish()
    }
}

/// One API call, to run on the blocking pool.
type Call = Box<dyn FnOnce(&dyn SessionStore) -> Result<Value, ApiError> + Send>;

/// Why a request may not see the dashboard.
enum Refused {
    /// Addressed to a name that is not loopback's.
    Host,
    /// The token is required and was not given.
    Token,
}

impl Dashboard {
    /// The dashboard of `store`, for loopback clients without a token (`contextfold ui`).
    pub fn new(store: Arc<dyn SessionStore>) -> Dashboard {
        Dashboard { store: Some(store), token: None, any_host: false }
    }

    /// The proxy's dashboard: its store, its token, and whether it listens beyond loopback
    /// (then any `Host` is accepted, the token guarding it).
    pub(crate) fn for_proxy(store: Option<Arc<dyn SessionStore>>, token: Option<String>, any_host: bool) -> Dashboard {
        Dashboard { store, token, any_host }
    }

    /// Whether a request to `path` is the dashboard's.
    pub fn serves(path: &str) -> bool {
        path == "/ui" || path.starts_with("/ui/")
    }

    /// Answers a request for one of the dashboard's paths.
    pub async fn answer(&self, parts: &Parts) -> Response {
        if parts.method != Method::GET && parts.method != Method::HEAD {
            let mut response = error(StatusCode::METHOD_NOT_ALLOWED, "the dashboard answers GET only");
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return response;
        }
        let path = parts.uri.path();
        // The files compiled into the binary hold no data: the token guards the page and
        // its API, and a page refused for want of it still has its style and icon.
        let file = match path {
            "/ui/app.js" => Some((APP_JS, "text/javascript; charset=utf-8")),
            "/ui/style.css" => Some((STYLE_CSS, "text/css; charset=utf-8")),
            "/ui/favicon.svg" => Some((FAVICON_SVG, "image/svg+xml")),
            _ => None,
        };
        let page = matches!(path, "/ui" | "/ui/");
        match self.admit(&parts.headers) {
            Ok(()) => {}
            Err(Refused::Token) if file.is_some() => {}
            Err(Refused::Token) if page => match (&self.token, param(&parts.uri, "token")) {
                (Some(token), Some(given)) if bool::from(given.as_bytes().ct_eq(token.as_bytes())) => {
                    return with_cookie(token)
                }
                _ => return refused_page(),
            },
            Err(Refused::Token) => {
                return error(
                    StatusCode::UNAUTHORIZED,
                    "the dashboard needs the proxy token: open /ui?token=TOKEN once, or send x-contextfold-token",
                )
            }
            Err(Refused::Host) => {
                return error(
                    StatusCode::FORBIDDEN,
                    "the dashboard answers only requests addressed to 127.0.0.1, localhost or [::1]",
                )
            }
        }
        if let Some((body, kind)) = file {
            return asset(StatusCode::OK, body, kind);
        }
        match path {
            "/ui" | "/ui/" if self.store.is_none() => {
                asset(StatusCode::NOT_FOUND, NO_STORE_HTML, "text/html; charset=utf-8")
            }
            "/ui" | "/ui/" => asset(StatusCode::OK, INDEX_HTML, "text/html; charset=utf-8"),
            _ => match path.strip_prefix("/ui/api/") {
                Some(call) => self.api(call, &parts.uri).await,
                None => error(StatusCode::NOT_FOUND, "the dashboard has no such page; open /ui"),
            },
        }
    }

    /// Whether the headers may see the dashboard: the token (header or cookie) when one is
    /// set; else a loopback `Host`, unless any is accepted (a page elsewhere cannot know the
    /// token, so only a dashboard without one needs the name checked).
    fn admit(&self, headers: &HeaderMap) -> Result<(), Refused> {
        match &self.token {
            Some(token) if !has_token(headers, token) && !has_cookie(headers, token) => Err(Refused::Token),
            Some(_) => Ok(()),
            None if !self.any_host && !loopback_host(headers) => Err(Refused::Host),
            None => Ok(()),
        }
    }

    /// One call of the JSON API, run on the blocking pool (store calls are synchronous).
    async fn api(&self, call: &str, uri: &Uri) -> Response {
        let Some(store) = self.store.clone() else {
            return error(StatusCode::NOT_FOUND, "the dashboard needs a store: run contextfold serve with --store");
        };
        let text = |name: &str| param(uri, name).unwrap_or_default();
        let work: Call = match call {
            "sessions" => Box::new(api::sessions),
            "session" => {
                let id = text("id");
                Box::new(move |store: &dyn SessionStore| api::session(store, &id))
            }
            "payload" => {
                let reference = text("ref");
                Box::new(move |store: &dyn SessionStore| api::payload(store, &reference))
            }
            "search" => {
                let (query, session) = (text("q"), param(uri, "session").filter(|id| !id.is_empty()));
                Box::new(move |store: &dyn SessionStore| api::search(store, &query, session.as_deref()))
            }
            _ => return error(StatusCode::NOT_FOUND, "the dashboard's API has no such call"),
        };
        match tokio::task::spawn_blocking(move || work(store.as_ref())).await {
            Ok(Ok(value)) => json_response(StatusCode::OK, &value),
            Ok(Err(ApiError::BadRequest(why))) => error(StatusCode::BAD_REQUEST, &why),
            Ok(Err(ApiError::NotFound(why))) => error(StatusCode::NOT_FOUND, &why),
            Ok(Err(ApiError::Store(why))) => error(StatusCode::INTERNAL_SERVER_ERROR, &why),
            Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the store call did not finish"),
        }
    }

    /// The dashboard as a router of its own (for `contextfold ui`): `/` leads to `/ui`.
    pub fn router(self) -> axum::Router {
        axum::Router::new().fallback(standalone).with_state(self)
    }
}

/// Serves `dashboard` on `listener` until `shutdown` resolves (`contextfold ui`).
pub async fn serve(listener: tokio::net::TcpListener, dashboard: Dashboard, shutdown: impl Future<Output = ()>) {
    let limits = Limits { header_timeout: Duration::from_secs(30), max_connections: 64 };
    serve_router(listener, dashboard.router(), limits, shutdown).await;
}

/// A request to `contextfold ui`'s own server.
async fn standalone(State(dashboard): State<Dashboard>, request: axum::extract::Request) -> Response {
    let (parts, _) = request.into_parts();
    if Dashboard::serves(parts.uri.path()) {
        return dashboard.answer(&parts).await;
    }
    if parts.uri.path() == "/" {
        let mut response = StatusCode::SEE_OTHER.into_response();
        response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/ui"));
        return response;
    }
    error(StatusCode::NOT_FOUND, "contextfold ui serves the dashboard at /ui")
}

/// What `/ui` says when the proxy runs without a store.
const NO_STORE_HTML: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>contextfold</title>\
<link rel=\"icon\" href=\"/ui/favicon.svg\"><link rel=\"stylesheet\" href=\"/ui/style.css\"></head><body><main><h1>contextfold</h1>\
<p class=\"notice\">The dashboard needs a store: this proxy runs without one (<code>--no-store</code>). \
Start <code>contextfold serve --store PATH</code>, or open a store with <code>contextfold ui --store PATH</code>.</p>\
</main></body></html>";

/// What `/ui` says to a browser without the token.
const TOKEN_HTML: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>contextfold</title>\
<link rel=\"icon\" href=\"/ui/favicon.svg\"><link rel=\"stylesheet\" href=\"/ui/style.css\"></head><body><main><h1>contextfold</h1>\
<p class=\"notice\">This proxy has a token: open <code>/ui?token=TOKEN</code> once; \
the browser then keeps it in a cookie for the dashboard.</p></main></body></html>";

fn refused_page() -> Response {
    asset(StatusCode::UNAUTHORIZED, TOKEN_HTML, "text/html; charset=utf-8")
}

/// The token as a cookie for `/ui`, and a redirect to the page without it in the address.
fn with_cookie(token: &str) -> Response {
    let mut response = asset(StatusCode::SEE_OTHER, "", "text/plain; charset=utf-8");
    let cookie = format!("{COOKIE}={}; Path=/ui; HttpOnly; SameSite=Strict", percent_encode(token));
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/ui"));
    response
}

/// Whether a `Cookie` header carries the token.
fn has_cookie(headers: &HeaderMap, token: &str) -> bool {
    let prefix = format!("{COOKIE}=");
    let mut found = false;
    for value in headers.get_all(header::COOKIE).iter().filter_map(|value| value.to_str().ok()) {
        for pair in value.split(';').map(str::trim) {
            if let Some(given) = pair.strip_prefix(&prefix) {
                found |= bool::from(percent_decode(given).as_bytes().ct_eq(token.as_bytes()));
            }
        }
    }
    found
}

/// Whether the request is addressed to a loopback name (its `Host`, port aside).
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|value| value.to_str().ok()) else { return false };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    crate::headers::is_loopback_name(name)
}

/// The query parameter `name`, decoded (`+` as a space).
fn param(uri: &Uri, name: &str) -> Option<String> {
    form_urlencoded::parse(uri.query()?.as_bytes()).find(|(key, _)| key == name).map(|(_, value)| value.into_owned())
}

/// `%XX` escapes and `+` decoded; what is not UTF-8 becomes U+FFFD.
fn percent_decode(text: &str) -> String {
    percent_decode_str(&text.replace('+', " ")).decode_utf8_lossy().into_owned()
}

/// Every byte but the unreserved ones is escaped in the cookie.
const COOKIE_ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `text` with every byte but the unreserved ones as `%XX`, safe in a cookie.
fn percent_encode(text: &str) -> String {
    utf8_percent_encode(text, COOKIE_ESCAPED).to_string()
}

/// A file of the dashboard (or one of its pages), with the headers every answer has.
fn asset(status: StatusCode, body: &'static str, kind: &'static str) -> Response {
    let mut response = (status, body).into_response();
    secure(response.headers_mut(), kind);
    response
}

/// A JSON answer.
fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    secure(response.headers_mut(), "application/json");
    response
}

/// A JSON error: `{"error": reason}`, the reason one sentence.
fn error(status: StatusCode, reason: &str) -> Response {
    json_response(status, &json!({ "error": reason }))
}

/// The type, no caching (the store changes), no sniffing, no framing, the page's own files
/// only.
fn secure(headers: &mut HeaderMap, kind: &'static str) {
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::tests::headers;

    #[test]
    fn only_loopback_names_are_admitted() {
        for host in ["127.0.0.1:8788", "localhost", "LOCALHOST:1", "[::1]:8788", "127.1.2.3"] {
            assert!(loopback_host(&headers(&[("host", host)])), "{host}");
        }
        for host in ["evil.example:8788", "10.0.0.1", "localhost.evil.example", "[::2]:1", ""] {
            assert!(!loopback_host(&headers(&[("host", host)])), "{host}");
        }
        assert!(!loopback_host(&HeaderMap::new()), "no Host, no answer");
    }

    #[test]
    fn the_cookie_carries_any_token_back() {
        let token = "t0k; en=with/odd+chars é";
        let encoded = percent_encode(token);
        assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)), "{encoded}");
        assert_eq!(percent_decode(&encoded), token);
        let cookie = format!("other=1; {COOKIE}={encoded}");
        let mut map = HeaderMap::new();
        map.insert(header::COOKIE, HeaderValue::from_str(&cookie).unwrap());
        assert!(has_cookie(&map, token));
        assert!(!has_cookie(&map, "t0k"));
    }

    #[test]
    fn query_parameters_are_decoded() {
        let uri: Uri = "/ui/api/search?q=evicted+word%21&session=&bad=%zz%".parse().unwrap();
        assert_eq!(param(&uri, "q").as_deref(), Some("evicted word!"));
        assert_eq!(param(&uri, "session").as_deref(), Some(""));
        assert_eq!(param(&uri, "bad").as_deref(), Some("%zz%"));
        assert_eq!(param(&uri, "missing"), None);
    }
}
