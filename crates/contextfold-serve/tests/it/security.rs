//! Security: loopback unless told otherwise, and then only with a token checked on every
//! request; the upstream is fixed (no open relay); keys and tokens are forwarded but never
//! logged or put in an error.

use crate::common::{agent_script, client, config, logs, proxy, Agent, FAKE_API_KEY, FAKE_OAUTH};
use crate::mock::Mock;
use contextfold_serve::{ConfigError, LogFormat, Proxy, ServeConfig, ServeError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PROXY_TOKEN: &str = "cf-proxy-token-7Hq2Lx9Vw4Rt8Kp3Ns6Yb1Zm5Cd0Fg";

#[tokio::test]
async fn other_addresses_need_allow_remote_and_a_token() {
    for listen in ["0.0.0.0:0", "[::]:0", "192.0.2.10:8787"] {
        let listen = listen.parse().unwrap();
        // Refused before anything is bound.
        let refused = Proxy::bind(ServeConfig { listen, ..ServeConfig::default() }).await;
        assert!(matches!(refused, Err(ServeError::Config(ConfigError::RemoteNotAllowed(_)))));
        let no_token = ServeConfig { listen, allow_remote: true, ..ServeConfig::default() };
        assert_eq!(no_token.check(), Err(ConfigError::RemoteWithoutToken(listen)));
        let message = no_token.check().unwrap_err().to_string();
        assert!(message.contains("--auth-token") && message.contains("CONTEXTFOLD_AUTH_TOKEN"), "{message}");
        let allowed = ServeConfig { auth_token: Some(PROXY_TOKEN.into()), ..no_token };
        assert_eq!(allowed.check(), Ok(()));
    }
    let empty = ServeConfig { auth_token: Some(String::new()), ..ServeConfig::default() };
    assert_eq!(empty.check(), Err(ConfigError::EmptyToken));
    let relay = ServeConfig { upstream: "https://user:sk-ant-api03-leak@api.example".into(), ..ServeConfig::default() };
    let err = relay.check().unwrap_err().to_string();
    assert!(!err.contains("sk-ant-api03-leak"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_needs_the_token_and_the_token_stays_here() {
    let mock = Mock::start(agent_script(10)).await;
    let proxy = proxy(ServeConfig { auth_token: Some(PROXY_TOKEN.into()), ..config(&mock.url()) }).await;
    let client = client();
    let body = Agent::new("guarded", "hello").body(false);
    for (name, value) in [
        (None, None),
        (Some("x-contextfold-token"), Some("wrong-token")),
        (Some("x-contextfold-token"), Some(&PROXY_TOKEN[..PROXY_TOKEN.len() - 1])),
        (Some("proxy-authorization"), Some("Basic Y2Y6dG9rZW4=")),
        (Some("authorization"), Some(&*format!("Bearer {PROXY_TOKEN}"))),
    ] {
        for (method, path) in [("POST", "/v1/messages"), ("HEAD", "/"), ("GET", "/v1/models")] {
            let mut request =
                client.request(method.parse().unwrap(), format!("{}{path}", proxy.url)).body(body.clone());
            if let (Some(name), Some(value)) = (name, value) {
                request = request.header(name, value);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{method} {path} with {name:?}");
            if method != "HEAD" {
                let text = response.text().await.unwrap();
                assert!(text.contains("authentication_error"), "{text}");
                assert!(!text.contains(PROXY_TOKEN));
            }
        }
    }
    assert!(mock.requests().is_empty(), "nothing went upstream without the token");
    for (name, value) in
        [("x-contextfold-token", PROXY_TOKEN.to_string()), ("proxy-authorization", format!("Bearer {PROXY_TOKEN}"))]
    {
        let response = client
            .post(format!("{}/v1/messages", proxy.url))
            .header(name, value)
            .header("x-api-key", FAKE_API_KEY)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    for request in mock.requests() {
        assert_eq!(request.header("x-api-key"), Some(FAKE_API_KEY), "the client's key goes upstream");
        assert!(request.header("x-contextfold-token").is_none() && request.header("proxy-authorization").is_none());
        assert!(!format!("{:?}", request.headers).contains(PROXY_TOKEN), "the proxy token never leaves the proxy");
    }
}

/// Sends `head` (a request line and headers) over a raw connection; returns the response.
async fn raw_request(addr: &str, head: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_to_end(&mut response)).await;
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_cannot_name_another_host() {
    let mock = Mock::start(agent_script(10)).await;
    let proxy = proxy(config(&mock.url())).await;
    let addr = proxy.url.trim_start_matches("http://").to_string();
    for target in ["http://example.invalid/v1/models", "//example.invalid/v1/models"] {
        let response =
            raw_request(&addr, &format!("GET {target} HTTP/1.1\r\nHost: example.invalid\r\nConnection: close\r\n\r\n"))
                .await;
        assert!(response.starts_with("HTTP/1.1 200"), "{target}: {response}");
    }
    let paths: Vec<String> = mock.requests().iter().map(|request| request.uri.clone()).collect();
    assert_eq!(paths, ["/v1/models", "//example.invalid/v1/models"], "both went to the configured upstream");
    for request in mock.requests() {
        assert_eq!(request.header("host"), Some(mock.addr.to_string().as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_or_token_reaches_a_log_line_or_an_error() {
    let secret_query = "sk-ant-api03-QueryQueryQueryQueryQueryQueryQueryQueryQueryQueryQueryQuery-QQQQQQ";
    let mock = Mock::start(agent_script(1_000)).await;
    for format in [LogFormat::Text, LogFormat::Json] {
        let proxy =
            proxy(ServeConfig { auth_token: Some(PROXY_TOKEN.into()), log_format: format, ..config(&mock.url()) })
                .await;
        let client = client();
        let mut agent = Agent::new(&format!("secretive-{format:?}"), "deploy with the key");
        for _ in 0..12 {
            let body = agent.body(false);
            let response = client
                .post(format!("{}/v1/messages?beta=true&key={secret_query}", proxy.url))
                .header("x-contextfold-token", PROXY_TOKEN)
                .header("x-api-key", FAKE_API_KEY)
                .header("authorization", format!("Bearer {FAKE_OAUTH}"))
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            let answer: serde_json::Value = response.json().await.unwrap();
            agent.push(answer["content"].clone());
        }
        // Refusals and failures log too.
        let wrong = client
            .post(format!("{}/v1/messages", proxy.url))
            .header("x-contextfold-token", FAKE_API_KEY)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401);
        let bad = client
            .post(format!("{}/v1/messages?key={secret_query}", proxy.url))
            .header("x-contextfold-token", PROXY_TOKEN)
            .body(format!("{{\"messages\": [\"{FAKE_API_KEY}\""))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        assert!(!bad.text().await.unwrap().contains(FAKE_API_KEY));
        assert!(proxy.stats.compactions() >= 1);
    }
    let down = proxy(ServeConfig { auth_token: Some(PROXY_TOKEN.into()), ..config("http://127.0.0.1:9") }).await;
    let failed = client()
        .get(format!("{}/v1/models?key={secret_query}", down.url))
        .header("x-contextfold-token", PROXY_TOKEN)
        .header("x-api-key", FAKE_API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(failed.status(), 502);
    let error = failed.text().await.unwrap();
    let logs = logs();
    assert!(logs.contains("POST /v1/messages") && logs.contains("GET /v1/models"), "the requests were logged");
    for secret in [FAKE_API_KEY, FAKE_OAUTH, PROXY_TOKEN, secret_query, "sk-ant-"] {
        assert!(!logs.contains(secret), "a log line holds {secret}");
        assert!(!error.contains(secret), "an error holds {secret}");
    }
}
