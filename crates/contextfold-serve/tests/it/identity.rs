//! What the proxy does not change: a request that needs no compaction reaches the upstream
//! with the client's exact bytes, headers and query; a response reaches the client with the
//! upstream's exact status, headers and bytes; every path and method is forwarded.

use crate::common::{client, config, proxy, FAKE_API_KEY};
use crate::mock::{canned, Mock, Reply};
use serde_json::json;

/// A body with odd spacing, escapes, key order and numbers that a re-serialization would change.
const ODD_BODY: &str = "{\n  \"max_tokens\":  1024 ,\"model\":\"claude-sonnet-4-5\",\n  \"system\": [ {\"type\":\"text\",\"text\":\"caf\\u00e9 \\/ \\ud83d\\ude00\", \"cache_control\":{\"type\":\"ephemeral\"}} ],\n  \"messages\": [ {\"content\": \"hello\\nthere\", \"role\": \"user\"} ],\n  \"temperature\": 1.0, \"top_k\": 1e1, \"unknown_field\": {\"z\": [1,2,3], \"a\": null}\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_compaction_arrives_byte_for_byte() {
    let mock = Mock::start(|_| canned::message(json!([{"type": "text", "text": "hi"}]), "end_turn")).await;
    let proxy = proxy(config(&mock.url())).await;
    let response = client()
        .post(format!("{}/v1/messages?beta=true", proxy.url))
        .header("x-api-key", FAKE_API_KEY)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .header("anthropic-beta", "context-management-2025-06-27")
        .header("x-custom-thing", "kept")
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "dropped")
        .header("x-contextfold-session", "s-1")
        .header("content-type", "application/json")
        .body(ODD_BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let seen = &requests[0];
    assert_eq!(seen.uri, "/v1/messages?beta=true");
    assert_eq!(seen.body.as_ref(), ODD_BODY.as_bytes(), "the body is the client's, byte for byte");
    assert_eq!(seen.header("x-api-key"), Some(FAKE_API_KEY));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    let betas: Vec<&str> = seen.headers.get_all("anthropic-beta").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(betas, ["interleaved-thinking-2025-05-14", "context-management-2025-06-27"]);
    assert_eq!(seen.header("x-custom-thing"), Some("kept"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.header("x-hop"), None, "a header named in Connection is hop-by-hop");
    assert_eq!(seen.header("x-contextfold-session"), None, "the proxy's own headers stay with it");
    assert_eq!(seen.header("content-length").map(str::to_string), Some(ODD_BODY.len().to_string()));
    assert_eq!(mock.assert_all_valid(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_arrive_as_the_upstream_sent_them() {
    let stream = Reply::sse(canned::text_stream("The answer is forty-two, as always."));
    let expected_stream = stream.bytes();
    let whole = Reply::Json {
        status: 200,
        headers: vec![
            ("request-id".into(), "req_011".into()),
            ("anthropic-ratelimit-requests-remaining".into(), "49".into()),
        ],
        body: "{\"id\":\"msg_1\",  \"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"caf\\u00e9\"}]}"
            .into(),
    };
    let expected_whole = whole.bytes();
    let mock =
        Mock::start(move |request| if request.json()["stream"] == true { stream.clone() } else { whole.clone() }).await;
    let proxy = proxy(config(&mock.url())).await;
    let body = |stream: bool| {
        json!({"model": "m", "max_tokens": 10, "stream": stream, "messages": [{"role": "user", "content": "q"}]})
            .to_string()
    };

    let streamed = client().post(format!("{}/v1/messages", proxy.url)).body(body(true)).send().await.unwrap();
    assert_eq!(streamed.status(), 200);
    assert_eq!(streamed.headers()["content-type"], "text/event-stream; charset=utf-8");
    assert_eq!(streamed.headers()["request-id"], "req_mock_stream");
    assert_eq!(streamed.text().await.unwrap(), expected_stream, "the stream is the upstream's, byte for byte");

    let answered = client().post(format!("{}/v1/messages", proxy.url)).body(body(false)).send().await.unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.headers()["request-id"], "req_011");
    assert_eq!(answered.headers()["anthropic-ratelimit-requests-remaining"], "49");
    assert_eq!(answered.text().await.unwrap(), expected_whole);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_and_method_is_forwarded_and_none_is_405() {
    let mock = Mock::start(|request| {
        let body = json!({"path": request.uri, "method": request.method.as_str(), "got": String::from_utf8_lossy(&request.body)});
        Reply::Json { status: 200, headers: vec![("x-upstream".into(), "yes".into())], body: body.to_string() }
    })
    .await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let head = client.head(format!("{}/", proxy.url)).header("x-api-key", FAKE_API_KEY).send().await.unwrap();
    assert_eq!(head.status(), 200, "HEAD / is answered by the upstream");
    assert_eq!(head.headers()["x-upstream"], "yes");
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/v1/models?limit=5"),
        ("GET", "/v1/messages"),
        ("HEAD", "/v1/models"),
        ("DELETE", "/v1/files/file_01"),
        ("PUT", "/v1/anything"),
        ("OPTIONS", "/v1/messages"),
    ] {
        let response = client
            .request(method.parse().unwrap(), format!("{}{path}", proxy.url))
            .header("x-api-key", FAKE_API_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{method} {path}");
        if method != "HEAD" {
            let answer: serde_json::Value = response.json().await.unwrap();
            assert_eq!(answer["path"], path, "{method} {path}");
            assert_eq!(answer["method"], method);
        }
    }
    // count_tokens goes through the compaction path and is forwarded too.
    let count = client
        .post(format!("{}/v1/messages/count_tokens?beta=true", proxy.url))
        .header("x-api-key", FAKE_API_KEY)
        .body(r#"{"model":"m","messages":[{"role":"user","content":"how long?"}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(count.status(), 200);
    let answer: serde_json::Value = count.json().await.unwrap();
    assert_eq!(answer["path"], "/v1/messages/count_tokens?beta=true");
    assert_eq!(answer["got"], r#"{"model":"m","messages":[{"role":"user","content":"how long?"}]}"#);
    assert!(mock.requests().iter().all(|request| request.header("x-api-key") == Some(FAKE_API_KEY)));
}
