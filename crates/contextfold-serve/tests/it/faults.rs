//! Faults: the upstream's errors reach the client as the upstream sent them; a stream that
//! breaks off reaches the client broken, never as a fabricated success; an upstream that is
//! down or silent gets an error in the API's shape naming it; a client that leaves cancels
//! the upstream request; bad bodies are refused and nothing is forwarded.

use crate::common::{client, config, proxy, FAKE_API_KEY};
use crate::mock::{canned, Frame, Mock, Outcome, Reply};
use serde_json::{json, Value};
use std::time::Duration;

fn body(stream: bool) -> String {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": stream,
        "messages": [{"role": "user", "content": "hello"}]})
    .to_string()
}

/// Asserts `text` is an error in the API's shape and returns its type and message.
fn api_error(text: &str) -> (String, String) {
    let value: Value = serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}): {text}"));
    assert_eq!(value["type"], "error", "{text}");
    (value["error"]["type"].as_str().unwrap().to_string(), value["error"]["message"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_are_relayed_as_sent() {
    let replies = [
        Reply::Json {
            status: 429,
            headers: vec![("retry-after".into(), "17".into()), ("anthropic-ratelimit-tokens-reset".into(), "2026-01-01T00:00:17Z".into())],
            body: r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#.into(),
        },
        Reply::error(500, "api_error", "Internal server error"),
        Reply::error(529, "overloaded_error", "Overloaded"),
        Reply::error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
    ];
    for reply in replies {
        let (status, headers) = match &reply {
            Reply::Json { status, headers, .. } => (*status, headers.clone()),
            _ => unreachable!(),
        };
        let expected = reply.bytes();
        let mock = Mock::start(move |_| reply.clone()).await;
        let proxy = proxy(config(&mock.url())).await;
        for stream in [false, true] {
            let response = client().post(format!("{}/v1/messages", proxy.url)).body(body(stream)).send().await.unwrap();
            assert_eq!(response.status().as_u16(), status);
            for (name, value) in &headers {
                assert_eq!(response.headers()[name.as_str()], value.as_str());
            }
            assert_eq!(response.text().await.unwrap(), expected);
        }
        assert_eq!(mock.requests().len(), 2, "the proxy retries nothing: retries are the client's");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_midway_reaches_the_client_cut() {
    // Paced, so the upstream's headers and first events are out before it breaks off.
    let frames: Vec<Frame> = canned::text_stream("a b c d e f g h i j k l m n o p")
        .into_iter()
        .take(5)
        .flat_map(|frame| [frame, Frame::Pause(Duration::from_millis(20))])
        .collect();
    let reply = Reply::sse(frames).cut();
    let sent = reply.bytes();
    let mock = Mock::start(move |_| reply.clone()).await;
    let proxy = proxy(config(&mock.url())).await;
    let mut response = client().post(format!("{}/v1/messages", proxy.url)).body(body(true)).send().await.unwrap();
    assert_eq!(response.status(), 200, "the upstream had answered 200 before it broke off");
    let mut received = Vec::new();
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), response.chunk()).await.expect("the stream ends") {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => break Ok(()),
            Err(err) => break Err(err),
        }
    };
    assert_eq!(String::from_utf8(received).unwrap(), sent, "the client has what arrived");
    assert!(end.is_err(), "the client sees a broken response, not a whole one");
    assert_eq!(mock.requests()[0].outcome(), Outcome::Cut);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_stream_is_cut_after_the_idle_timeout() {
    let mut frames = canned::text_stream("one two three");
    // Silent for an hour: only the idle timeout ends the stream before that.
    frames.insert(2, Frame::Pause(Duration::from_secs(3600)));
    let mock = Mock::start(move |_| Reply::sse(frames.clone())).await;
    let proxy =
        proxy(contextfold_serve::ServeConfig { idle_timeout: Duration::from_millis(300), ..config(&mock.url()) }).await;
    let response = client().post(format!("{}/v1/messages", proxy.url)).body(body(true)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let outcome = tokio::time::timeout(Duration::from_secs(600), response.text()).await.expect("the stream is cut");
    assert!(outcome.is_err(), "a stream cut for silence is not a whole answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_never_answers_gets_a_504_naming_it() {
    let mock = Mock::start(|_| Reply::Hang).await;
    let proxy =
        proxy(contextfold_serve::ServeConfig { upstream_timeout: Duration::from_millis(300), ..config(&mock.url()) })
            .await;
    let response = client().post(format!("{}/v1/messages", proxy.url)).body(body(false)).send().await.unwrap();
    assert_eq!(response.status(), 504);
    let (kind, message) = api_error(&response.text().await.unwrap());
    assert_eq!(kind, "api_error");
    assert!(message.contains(&mock.url()), "{message}");
    assert!(message.contains("--upstream-timeout"), "{message}");
    // The proxy gave up on the request: the upstream sees it go.
    wait_for(|| mock.requests()[0].outcome() == Outcome::Cancelled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_gets_a_502_naming_it() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let upstream = format!("http://{closed}");
    let proxy = proxy(config(&upstream)).await;
    for (method, path) in [("POST", "/v1/messages"), ("GET", "/v1/models"), ("HEAD", "/")] {
        let response = client()
            .request(method.parse().unwrap(), format!("{}{path}?key={FAKE_API_KEY}", proxy.url))
            .header("x-api-key", FAKE_API_KEY)
            .body(if method == "POST" { body(false) } else { String::new() })
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 502, "{method} {path}");
        if method != "HEAD" {
            let (kind, message) = api_error(&response.text().await.unwrap());
            assert_eq!(kind, "api_error");
            assert!(message.contains(&upstream), "{message}");
            assert!(!message.contains(FAKE_API_KEY), "{message}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_midstream_cancels_the_upstream_request() {
    let mut frames = canned::text_stream("first");
    // 50 s of pings: a proxy that kept reading after the client left would still be at it.
    for index in 0..2_000 {
        frames.push(Frame::Pause(Duration::from_millis(25)));
        frames.push(canned::event("ping", &json!({"type": "ping", "n": index})));
    }
    let mock = Mock::start(move |_| Reply::sse(frames.clone())).await;
    let proxy = proxy(config(&mock.url())).await;
    let mut response = client().post(format!("{}/v1/messages", proxy.url)).body(body(true)).send().await.unwrap();
    let first = response.chunk().await.unwrap().expect("a first chunk");
    assert!(!first.is_empty());
    drop(response);
    wait_for(|| mock.requests()[0].outcome() == Outcome::Cancelled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_a_400_and_nothing_is_forwarded() {
    let mock = Mock::start(|_| canned::message(json!([{"type": "text", "text": "never"}]), "end_turn")).await;
    let proxy = proxy(config(&mock.url())).await;
    for (bad, says) in [
        ("{\"model\": \"m\", \"messages\": [", "line 1, column"),
        ("not json at all", "not valid JSON"),
        ("[{\"role\": \"user\", \"content\": \"hi\"}]", "JSON object"),
        ("{\"model\": \"m\"}", "`messages` is missing"),
        ("{\"messages\": {\"role\": \"user\"}}", "must be an array"),
        ("{\"messages\": [], \"messages\": []}", "appears twice"),
        ("", "not valid JSON"),
    ] {
        for path in ["/v1/messages", "/v1/messages/count_tokens"] {
            let response = client().post(format!("{}{path}", proxy.url)).body(bad).send().await.unwrap();
            assert_eq!(response.status(), 400, "{bad}");
            let (kind, message) = api_error(&response.text().await.unwrap());
            assert_eq!(kind, "invalid_request_error");
            assert!(message.contains(says), "{bad}: {message}");
        }
    }
    let invalid_utf8 =
        client().post(format!("{}/v1/messages", proxy.url)).body(vec![b'{', 0xff, b'}']).send().await.unwrap();
    assert_eq!(invalid_utf8.status(), 400);
    let (_, message) = api_error(&invalid_utf8.text().await.unwrap());
    assert!(message.contains("not UTF-8 text (byte 1)"), "{message}");
    assert!(mock.requests().is_empty(), "nothing was forwarded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_whose_characters_are_cut_between_pieces_is_read_as_text() {
    let mock = Mock::start(|_| canned::message(json!([{"type": "text", "text": "ok"}]), "end_turn")).await;
    let proxy = proxy(config(&mock.url())).await;
    let body = json!({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "caf\u{e9} \u{1F600} ".repeat(50)}]})
        .to_string()
        .into_bytes();
    // Pieces of 7 bytes cut through two- and four-byte characters.
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> = body.chunks(7).map(|piece| Ok(piece.to_vec())).collect();
    let response = client()
        .post(format!("{}/v1/messages", proxy.url))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(pieces)))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(mock.requests()[0].body[..], body[..], "forwarded byte for byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_get_a_413_and_nothing_is_forwarded() {
    let mock = Mock::start(|_| canned::message(json!([]), "end_turn")).await;
    let proxy = proxy(contextfold_serve::ServeConfig { max_body: 4_096, ..config(&mock.url()) }).await;
    let big = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(5_000)}]}).to_string();
    let response = client().post(format!("{}/v1/messages", proxy.url)).body(big.clone()).send().await.unwrap();
    assert_eq!(response.status(), 413);
    let (kind, message) = api_error(&response.text().await.unwrap());
    assert_eq!(kind, "request_too_large");
    assert!(message.contains("4096") && message.contains("--max-body"), "{message}");
    // Without a Content-Length (a chunked upload) too.
    let chunks: Vec<Result<String, std::io::Error>> =
        big.as_bytes().chunks(1_000).map(|c| Ok(String::from_utf8_lossy(c).into_owned())).collect();
    let streamed = client()
        .post(format!("{}/v1/anything", proxy.url))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 413);
    assert!(mock.requests().is_empty());
    // At the limit it goes through.
    let fits = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(100)}]}).to_string();
    assert_eq!(client().post(format!("{}/v1/messages", proxy.url)).body(fits).send().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_the_compaction_cannot_read_are_forwarded_untouched() {
    let mock = Mock::start(|_| canned::message(json!([{"type": "text", "text": "ok"}]), "end_turn")).await;
    let proxy = proxy(config(&mock.url())).await;
    // A mid-conversation system message, a message without content, an unknown block.
    let bodies = [
        r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"system","content":"be brief"},{"role":"user","content":"b"}]}"#,
        r#"{"model":"m","messages":[{"role":"user"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":[{"type":"future_block","data":1}]}]}"#,
        r#"{"model":"m","system":42,"messages":[{"role":"user","content":"hi"}]}"#,
    ];
    for body in bodies {
        let response = client().post(format!("{}/v1/messages", proxy.url)).body(body).send().await.unwrap();
        assert_eq!(response.status(), 200, "{body}");
    }
    let seen: Vec<String> =
        mock.requests().iter().map(|request| String::from_utf8_lossy(&request.body).into_owned()).collect();
    assert_eq!(seen, bodies, "each went out as it came");
}

/// Waits (at most 10 s) until `done` holds.
async fn wait_for(done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "gave up waiting");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
