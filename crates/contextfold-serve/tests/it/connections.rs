//! Connections and paths, as a careless or hostile client uses them: headers trickled a byte
//! at a time, keep-alive connections left idle, more connections than the proxy may hold,
//! dot segments that would climb out of the upstream's base path, a 100-continue body over
//! the limit, an `identity` encoding, a token too weak to guard anything.

use crate::common::{client, config, proxy, Agent};
use crate::mock::{canned, Mock};
use contextfold_serve::{ConfigError, Proxy, ServeConfig};
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn ok_mock() -> impl Fn(&crate::mock::Recorded) -> crate::mock::Reply + Send + Sync + 'static {
    |_| canned::message(json!([{"type": "text", "text": "ok"}]), "end_turn")
}

/// Reads until the server closes the connection (or 20 s pass: then it is held open).
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buffer = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read).await.is_ok()
}

fn address(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_trickled_a_byte_at_a_time_are_cut_off() {
    let mock = Mock::start(ok_mock()).await;
    let proxy = proxy(ServeConfig { header_timeout: Duration::from_secs(1), ..config(&mock.url()) }).await;
    let mut stream = TcpStream::connect(address(&proxy.url)).await.unwrap();
    let trickle = async {
        for byte in b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter() {
            if stream.write_all(&[*byte]).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    };
    // Twenty seconds of trickling is far past the one-second limit: the proxy closes first.
    let cut = trickle.await || closed_by_server(&mut stream).await;
    assert!(cut, "a client that never finishes its headers is let go");
    assert!(mock.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed() {
    let mock = Mock::start(ok_mock()).await;
    let proxy = proxy(ServeConfig { header_timeout: Duration::from_secs(1), ..config(&mock.url()) }).await;
    let mut stream = TcpStream::connect(address(&proxy.url)).await.unwrap();
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    assert!(closed_by_server(&mut stream).await, "the connection, idle after its answer, is closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_bound_new_connections_wait_their_turn() {
    let mock = Mock::start(ok_mock()).await;
    let config = ServeConfig { max_connections: 2, header_timeout: Duration::from_secs(60), ..config(&mock.url()) };
    let proxy = proxy(config).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(address(&proxy.url)).await.unwrap());
    }
    // The two held connections send nothing; a third client waits to be accepted.
    let url = proxy.url.clone();
    let waiting = tokio::spawn(async move {
        let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
        client().post(format!("{url}/v1/messages")).body(body.to_string()).send().await.map(|r| r.status())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished() && mock.requests().is_empty(), "the third connection is not served yet");
    drop(held);
    assert_eq!(waiting.await.unwrap().unwrap(), 200, "served once a connection closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_never_reach_past_the_upstreams_base_path() {
    let mock = Mock::start(ok_mock()).await;
    let proxy = proxy(config(&format!("{}/base", mock.url()))).await;
    let mut stream = TcpStream::connect(address(&proxy.url)).await.unwrap();
    for path in ["/../admin", "/%2e%2e/admin", "/v1/x/../messages", "/v1/%2E/messages", "/v1%2f..%2fadmin"] {
        // Sent raw: an HTTP client library would resolve the dots itself.
        let request = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 400", "{path}");
        let mut rest = vec![0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut rest)).await;
    }
    assert!(mock.requests().is_empty(), "nothing went upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_continue_body_over_the_limit_gets_413_not_a_go_ahead() {
    let mock = Mock::start(ok_mock()).await;
    let proxy = proxy(ServeConfig { max_body: 1_000, ..config(&mock.url()) }).await;
    let mut stream = TcpStream::connect(address(&proxy.url)).await.unwrap();
    let head = "POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut status = [0u8; 12];
    stream.read_exact(&mut status).await.unwrap();
    assert_eq!(&status, b"HTTP/1.1 413", "the limit is answered before any body is asked for");
    assert!(mock.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_encoded_body_is_compacted_like_any_other() {
    let mock = Mock::start(crate::common::agent_script(1_000)).await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let mut agent = Agent::new("identity", "tidy up");
    agent.headers = vec![("content-encoding".into(), "Identity".into())];
    for _ in 0..14 {
        agent.step(&client, &proxy.url).await;
    }
    assert!(proxy.stats.compactions() >= 1, "the body was read, not passed on as compressed");
    assert_eq!(proxy.stats.untouched(), 0);
}

#[tokio::test]
async fn a_token_too_short_or_with_spaces_is_refused_at_start() {
    for token in [" ", "x", "short-token", "a token with spaces", "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t"] {
        let config = ServeConfig { auth_token: Some(token.into()), ..ServeConfig::default() };
        let Err(err) = Proxy::bind(config).await else { panic!("{token:?} was accepted") };
        assert!(matches!(err, contextfold_serve::ServeError::Config(ConfigError::WeakToken(_))), "{token:?}: {err}");
        assert!(err.to_string().contains("at least 16"), "{err}");
    }
    let config = ServeConfig {
        auth_token: Some("9f8e7d6c5b4a39281706f5e4".into()),
        listen: "127.0.0.1:0".parse().unwrap(),
        ..ServeConfig::default()
    };
    assert!(Proxy::bind(config).await.is_ok());
}
