//! Where OpenAI requests go and what reaches them: the OpenAI upstream, byte for byte when
//! nothing is compacted; the upstream's errors as it sent them; the proxy's own errors in
//! OpenAI's shape.

use super::agents::FAKE_OPENAI_KEY;
use super::{canned, openai_config};
use crate::common::{client, proxy};
use crate::mock::{Mock, Reply};
use contextfold_serve::ServeConfig;
use serde_json::{json, Value};
use std::time::Duration;

/// Bodies with odd spacing, escapes and numbers that a re-serialization would change.
const CHAT_BODY: &str = "{ \"model\":\"gpt-4.1\" ,\n \"messages\": [ {\"role\":\"developer\",\"content\":\"caf\\u00e9 \\/\"}, {\"content\": \"hello\\nthere\", \"role\": \"user\"} ],\n \"temperature\": 1.0, \"top_p\": 1e0, \"x_unknown\": {\"z\": [1,2,3], \"a\": null}, \"prompt_cache_key\": \"k-1\"\n}\n";
const RESPONSES_BODY: &str = "{\"model\":\"gpt-5\", \"instructions\" : \"Be terse.\\u0021\",\n \"input\": [ {\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\\u00e9\"}]} ],\n \"store\": false, \"max_output_tokens\": 1.0e3, \"x_unknown\": [null]}";

/// Asserts `text` is an error in OpenAI's shape; returns its type, code and message.
pub fn openai_error(text: &str) -> (String, String, String) {
    let value: Value = serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}): {text}"));
    let error = &value["error"];
    assert!(error["param"].is_null() && value.get("type").is_none(), "{text}");
    let field = |key: &str| error[key].as_str().unwrap_or_else(|| panic!("no {key}: {text}")).to_string();
    (field("type"), field("code"), field("message"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_compaction_reach_the_openai_upstream_byte_for_byte() {
    let mock = Mock::start(|request| {
        if request.uri.starts_with("/v1/responses") {
            canned::responses::whole(&[canned::responses::message("msg_1", "hi")], 10)
        } else {
            canned::chat::completion(json!({"role": "assistant", "content": "hi"}), "stop", 10)
        }
    })
    .await;
    let proxy = proxy(openai_config(&mock)).await;
    for (path, body) in [("/v1/chat/completions", CHAT_BODY), ("/v1/responses", RESPONSES_BODY)] {
        let response = client()
            .post(format!("{}{path}?api-version=1", proxy.url))
            .bearer_auth(FAKE_OPENAI_KEY)
            .header("openai-organization", "org-1")
            .header("x-contextfold-session", "s-1")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["x-request-id"], "req_openai");
        let seen = mock.requests().pop().unwrap();
        assert_eq!(seen.uri, format!("{path}?api-version=1"), "the OpenAI upstream's {path}");
        assert_eq!(seen.body.as_ref(), body.as_bytes(), "{path}: the client's bytes");
        assert_eq!(seen.header("authorization").map(str::to_string), Some(format!("Bearer {FAKE_OPENAI_KEY}")));
        assert_eq!(seen.header("openai-organization"), Some("org-1"));
        assert_eq!(seen.header("x-contextfold-session"), None, "the proxy's own headers stay with it");
        assert_eq!(mock.assert_all_valid_at(path), 1);
    }
    assert_eq!(proxy.stats.unchanged(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_paths_go_to_their_api_untouched() {
    let mock = Mock::start(|request| {
        let body = json!({"path": request.uri, "got": String::from_utf8_lossy(&request.body)});
        Reply::Json { status: 200, headers: vec![], body: body.to_string() }
    })
    .await;
    let proxy = proxy(openai_config(&mock)).await;
    let client = client();
    let compact_body =
        r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"x"}],"instructions":"y"}"#;
    for (method, path, anthropic, body, arrives) in [
        ("GET", "/v1/models", false, "", "/v1/models"),
        ("GET", "/v1/models/gpt-5", false, "", "/v1/models/gpt-5"),
        ("GET", "/v1/models", true, "", "/anthropic/v1/models"),
        ("POST", "/v1/responses/compact", false, compact_body, "/v1/responses/compact"),
        ("GET", "/v1/responses/resp_1?include=x", false, "", "/v1/responses/resp_1?include=x"),
        ("POST", "/v1/embeddings", false, r#"{"input":"a"}"#, "/v1/embeddings"),
        ("POST", "/v1/messages/batches", false, "{}", "/anthropic/v1/messages/batches"),
    ] {
        let mut request = client.request(method.parse().unwrap(), format!("{}{path}", proxy.url)).body(body);
        request = if anthropic {
            request.header("anthropic-version", "2023-06-01").header("x-api-key", "sk-ant-x")
        } else {
            request.bearer_auth(FAKE_OPENAI_KEY)
        };
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{method} {path}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["path"], arrives, "{method} {path}");
        assert_eq!(answer["got"], body, "{method} {path} is forwarded as it came");
    }
    assert_eq!(proxy.stats.compactions() + proxy.stats.unchanged(), 0, "none of them is compacted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_are_relayed_as_sent() {
    let replies = [
        Reply::Json {
            status: 429,
            headers: vec![("retry-after".into(), "7".into()), ("x-ratelimit-remaining-tokens".into(), "0".into())],
            body: json!({"error": {"message": "Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 30000.", "type": "tokens", "param": null, "code": "rate_limit_exceeded"}}).to_string(),
        },
        canned::error(500, "server_error", None, "The server had an error while processing your request."),
        canned::error(400, "invalid_request_error", Some("context_length_exceeded"), "This model's maximum context length is 128000 tokens."),
        canned::error(401, "invalid_request_error", Some("invalid_api_key"), "Incorrect API key provided: sk-proj-****."),
    ];
    for reply in replies {
        let (status, headers) = match &reply {
            Reply::Json { status, headers, .. } => (*status, headers.clone()),
            _ => unreachable!(),
        };
        let expected = reply.bytes();
        let mock = Mock::start(move |_| reply.clone()).await;
        let proxy = proxy(openai_config(&mock)).await;
        for (path, body) in [("/v1/chat/completions", CHAT_BODY), ("/v1/responses", RESPONSES_BODY)] {
            let response = client().post(format!("{}{path}", proxy.url)).body(body).send().await.unwrap();
            assert_eq!(response.status().as_u16(), status);
            for (name, value) in &headers {
                assert_eq!(response.headers()[name.as_str()], value.as_str());
            }
            assert_eq!(response.text().await.unwrap(), expected);
        }
        assert_eq!(mock.requests().len(), 2, "the proxy retries nothing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxys_own_errors_are_in_openais_shape() {
    let mock =
        Mock::start(|_| canned::chat::completion(json!({"role": "assistant", "content": "never"}), "stop", 1)).await;
    let proxy = proxy(openai_config(&mock)).await;
    for (path, bad, says) in [
        ("/v1/chat/completions", "{\"model\": \"gpt-4.1\", \"messages\": [", "line 1, column"),
        ("/v1/chat/completions", "not json", "not valid JSON"),
        ("/v1/chat/completions", "[]", "JSON object with a `messages` array"),
        ("/v1/chat/completions", "{\"model\": \"gpt-4.1\"}", "`messages` is missing"),
        ("/v1/chat/completions", "{\"messages\": {}}", "`messages` must be an array"),
        ("/v1/responses", "{\"input\": [", "line 1, column"),
        ("/v1/responses", "\"input\"", "JSON object with a `input` array"),
        ("/v1/responses", "", "not valid JSON"),
    ] {
        let response = client().post(format!("{}{path}", proxy.url)).body(bad).send().await.unwrap();
        assert_eq!(response.status(), 400, "{path} {bad}");
        let (kind, code, message) = openai_error(&response.text().await.unwrap());
        assert_eq!((kind.as_str(), code.as_str()), ("invalid_request_error", "invalid_body"), "{bad}");
        assert!(message.contains(says), "{bad}: {message}");
    }
    assert!(mock.requests().is_empty(), "nothing was forwarded");

    let guarded =
        proxy_with(ServeConfig { auth_token: Some("s3cret-0123456789abcdef".into()), ..openai_config(&mock) }).await;
    let response = client().post(format!("{}/v1/chat/completions", guarded.url)).body(CHAT_BODY).send().await.unwrap();
    assert_eq!(response.status(), 401);
    let (kind, code, _) = openai_error(&response.text().await.unwrap());
    assert_eq!((kind.as_str(), code.as_str()), ("authentication_error", "proxy_token_required"));
    let models = client().get(format!("{}/v1/models", guarded.url)).bearer_auth(FAKE_OPENAI_KEY).send().await.unwrap();
    assert_eq!(models.status(), 401);
    openai_error(&models.text().await.unwrap());

    let small = proxy_with(ServeConfig { max_body: 64, ..openai_config(&mock) }).await;
    let response = client().post(format!("{}/v1/responses", small.url)).body(RESPONSES_BODY).send().await.unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(openai_error(&response.text().await.unwrap()).1, "request_too_large");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let down = proxy_with(ServeConfig { upstream_openai: format!("http://{closed}/v1"), ..openai_config(&mock) }).await;
    let response = client().post(format!("{}/v1/chat/completions", down.url)).body(CHAT_BODY).send().await.unwrap();
    assert_eq!(response.status(), 502);
    let (kind, code, message) = openai_error(&response.text().await.unwrap());
    assert_eq!((kind.as_str(), code.as_str()), ("api_error", "upstream_unreachable"));
    assert!(message.contains(&format!("http://{closed}/v1")), "{message}");

    let hang = Mock::start(|_| Reply::Hang).await;
    let slow = proxy_with(ServeConfig { upstream_timeout: Duration::from_millis(300), ..openai_config(&hang) }).await;
    let response = client().post(format!("{}/v1/responses", slow.url)).body(RESPONSES_BODY).send().await.unwrap();
    assert_eq!(response.status(), 504);
    assert_eq!(openai_error(&response.text().await.unwrap()).1, "upstream_timeout");
}

async fn proxy_with(config: ServeConfig) -> crate::common::Running {
    proxy(config).await
}
