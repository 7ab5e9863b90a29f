//! Which headers cross the proxy, and the proxy's own: its token and its per-request switch.
//!
//! End-to-end headers (`x-api-key`, `authorization`, `anthropic-version`, `anthropic-beta`,
//! everything unknown) pass unchanged both ways. Hop-by-hop headers (RFC 9110, 7.6.1: the
//! `Connection` family, `Transfer-Encoding`, `Upgrade`, and any header `Connection` names)
//! belong to one connection and are dropped, as are `Host` and `Content-Length`, which the
//! next hop sets itself. Headers addressed to the proxy (`x-contextfold*`,
//! `Proxy-Authorization`) never reach the upstream.

use axum::http::{header, HeaderMap, HeaderName};
use subtle::ConstantTimeEq;

/// The header that carries the proxy token.
pub const TOKEN_HEADER: &str = "x-contextfold-token";
/// The header that turns compaction off for one request: `x-contextfold: off`.
pub const SWITCH_HEADER: &str = "x-contextfold";
/// The header that names the session.
pub const SESSION_HEADER: &str = "x-contextfold-session";

/// Headers that belong to one connection (RFC 9110, 7.6.1), lower-case.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
];

/// Whether `name` must not be forwarded in either direction, given the message's headers.
fn is_hop_by_hop(name: &HeaderName, headers: &HeaderMap) -> bool {
    HOP_BY_HOP.contains(&name.as_str())
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|listed| listed.split(',').any(|token| token.trim().eq_ignore_ascii_case(name.as_str())))
}

/// The request headers to send upstream.
pub fn upstream_request(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let own = name.as_str().starts_with(SWITCH_HEADER);
        let next_hop = matches!(name.as_str(), "host" | "content-length" | "expect");
        if !own && !next_hop && !is_hop_by_hop(name, headers) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The response headers to send the client.
pub fn client_response(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !is_hop_by_hop(name, headers) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Whether the client turned compaction off for this request.
pub fn compaction_off(headers: &HeaderMap) -> bool {
    headers
        .get(SWITCH_HEADER)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| matches!(value.trim().to_ascii_lowercase().as_str(), "off" | "0" | "false" | "no"))
}

/// Whether the host `name` (no port, no brackets) names this machine: `localhost` or a
/// loopback address.
pub fn is_loopback_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `headers` carry `token`, compared in constant time.
pub fn has_token(headers: &HeaderMap, token: &str) -> bool {
    let offered = headers.get(TOKEN_HEADER).map(|value| value.as_bytes()).or_else(|| {
        headers.get(header::PROXY_AUTHORIZATION).and_then(|value| {
            let value = value.as_bytes();
            let scheme = b"bearer ";
            (value.len() > scheme.len() && value[..scheme.len()].eq_ignore_ascii_case(scheme))
                .then(|| &value[scheme.len()..])
        })
    });
    // Every header is compared, so the time does not tell which one was missing.
    offered.is_some_and(|offered| bool::from(offered.ct_eq(token.as_bytes())))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// A header map of `pairs`, for tests.
    pub(crate) fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn hop_by_hop_and_own_headers_stay() {
        let request = headers(&[
            ("host", "127.0.0.1:8787"),
            ("connection", "keep-alive, x-trace"),
            ("x-trace", "1"),
            ("keep-alive", "timeout=5"),
            ("content-length", "12"),
            ("x-api-key", "sk-ant-api03-abc"),
            ("anthropic-beta", "a"),
            ("anthropic-beta", "b"),
            ("x-contextfold", "off"),
            ("x-contextfold-token", "t"),
            ("proxy-authorization", "Bearer t"),
        ]);
        let sent = upstream_request(&request);
        let names: Vec<&str> = sent.keys().map(|name| name.as_str()).collect();
        assert_eq!(names, ["x-api-key", "anthropic-beta"]);
        assert_eq!(sent.get_all("anthropic-beta").iter().count(), 2);
        let response = headers(&[("transfer-encoding", "chunked"), ("retry-after", "7"), ("content-type", "x")]);
        assert_eq!(
            client_response(&response).keys().map(|name| name.as_str()).collect::<Vec<_>>(),
            ["retry-after", "content-type"]
        );
    }

    #[test]
    fn tokens_and_switches() {
        assert!(has_token(&headers(&[("x-contextfold-token", "s3cret")]), "s3cret"));
        assert!(has_token(&headers(&[("proxy-authorization", "Bearer s3cret")]), "s3cret"));
        assert!(!has_token(&headers(&[("proxy-authorization", "Basic s3cret")]), "s3cret"));
        assert!(!has_token(&headers(&[("x-contextfold-token", "s3cre")]), "s3cret"));
        assert!(!has_token(&headers(&[("authorization", "Bearer s3cret")]), "s3cret"));
        assert!(compaction_off(&headers(&[("x-contextfold", "Off")])));
        assert!(!compaction_off(&headers(&[("x-contextfold", "on")])));
        assert!(!compaction_off(&HeaderMap::new()));
    }
}
