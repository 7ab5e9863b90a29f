//! The HTTP summarizers against a local mock server (never the network): the requests
//! they send, the answers they read, when they retry, and that the key never shows.
#![cfg(feature = "http")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{leaked, secret_session};
use contextfold::compactor::{CompactConfig, Compactor, Strategy, Target};
use contextfold::core::prompt::{summary_prompt, Instructions, PROMPT_VERSION};
use contextfold::redact::Redactor;
use contextfold::summarize::http::{Anthropic, AnthropicBuilder, OpenAiCompatible, OpenAiCompatibleBuilder};
use contextfold::summarize::{SummarizeError, Summarizer, SummaryRequest, Usage};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const KEY: &str = "sk-test-7f3a9c1e5b2d";

fn request() -> SummaryRequest {
    SummaryRequest {
        transcript: "[user]\nfix the parser in src/parse.rs\n[assistant]\ndone\n".into(),
        previous: Some("## Goal\n- fix the parser".into()),
        instructions: Instructions { language: Some("German".into()), focus: None },
        max_summary_tokens: 1000,
        ..Default::default()
    }
}

/// An Anthropic summarizer for `server`, with short waits so retries are quick.
fn anthropic(server: &MockServer) -> AnthropicBuilder {
    Anthropic::builder()
        .api_key(KEY)
        .base_url(server.uri())
        .retry_backoff(Duration::from_millis(5))
        .timeout(Duration::from_secs(5))
}

/// An OpenAI-compatible summarizer for `server`'s `/v1`, without a key.
fn openai(server: &MockServer) -> OpenAiCompatibleBuilder {
    OpenAiCompatible::builder()
        .base_url(format!("{}/v1", server.uri()))
        .retry_backoff(Duration::from_millis(5))
        .timeout(Duration::from_secs(5))
}

fn anthropic_answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 321, "output_tokens": 45},
    }))
}

fn openai_answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 210, "completion_tokens": 30, "total_tokens": 240},
    }))
}

fn anthropic_error(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({"type": "error", "error": {"type": kind, "message": message}}))
}

async fn received(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.expect("request recording is on")
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.get(name).map(|value| value.to_str().expect("ASCII header"))
}

fn body(request: &Request) -> Value {
    request.body_json().expect("a JSON body")
}

/// The error's `Display` and `Debug` text, for checks that must hold for both.
fn shown(err: &SummarizeError) -> String {
    format!("{err}\n{err:?}")
}

#[tokio::test]
async fn anthropic_sends_the_core_prompt_as_a_messages_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(anthropic_answer("## Goal\n- fix the parser\n"))
        .mount(&server)
        .await;
    let summarizer = anthropic(&server).model("claude-test").build().unwrap();
    assert_eq!(summarizer.id(), format!("anthropic:claude-test/{PROMPT_VERSION}"));
    assert_eq!(summarizer.input_budget(), 150_000);

    let summary = summarizer.summarize(&request()).await.unwrap();
    assert_eq!(summary.text, "## Goal\n- fix the parser");
    assert_eq!(summary.usage, Usage { input_tokens: 321, output_tokens: 45 });

    let requests = received(&server).await;
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.url.path(), "/v1/messages");
    assert_eq!(header(sent, "x-api-key"), Some(KEY));
    assert_eq!(header(sent, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(sent, "content-type"), Some("application/json"));
    assert_eq!(header(sent, "authorization"), None);
    let request = request();
    let prompt = summary_prompt(&request.transcript, request.previous.as_deref(), &request.instructions);
    assert!(prompt.system.contains("Write the summary in German."));
    assert_eq!(
        body(sent),
        json!({
            "model": "claude-test",
            "max_tokens": 1000,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
        })
    );
}

#[tokio::test]
async fn the_lower_nonzero_token_limit_is_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(anthropic_answer("ok")).mount(&server).await;
    let summarizer = anthropic(&server).max_tokens(2000).build().unwrap();
    for (requested, sent) in [(0, 2000), (500, 500), (9000, 2000)] {
        let request = SummaryRequest { max_summary_tokens: requested, ..request() };
        summarizer.summarize(&request).await.unwrap();
        let requests = received(&server).await;
        let last = requests.last().unwrap();
        assert_eq!(body(last)["max_tokens"], json!(sent), "requested {requested}");
        assert_eq!(body(last)["model"], json!("claude-haiku-4-5"));
    }
}

#[tokio::test]
async fn openai_sends_a_chat_completions_request_with_a_bearer_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(openai_answer("  ## Goal\n- fix the parser  "))
        .mount(&server)
        .await;
    let summarizer = openai(&server).api_key(KEY).model("local-model").max_tokens(800).build().unwrap();
    assert_eq!(summarizer.id(), format!("openai:local-model/{PROMPT_VERSION}"));

    let summary = summarizer.summarize(&request()).await.unwrap();
    assert_eq!(summary.text, "## Goal\n- fix the parser");
    assert_eq!(summary.usage, Usage { input_tokens: 210, output_tokens: 30 });

    let requests = received(&server).await;
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.url.path(), "/v1/chat/completions");
    assert_eq!(header(sent, "authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(header(sent, "content-type"), Some("application/json"));
    assert_eq!(header(sent, "x-api-key"), None);
    let request = request();
    let prompt = summary_prompt(&request.transcript, request.previous.as_deref(), &request.instructions);
    assert_eq!(
        body(sent),
        json!({
            "model": "local-model",
            "max_tokens": 800,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
        })
    );
}

#[tokio::test]
async fn openai_without_a_key_sends_no_authorization_and_reads_missing_usage_as_zero() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "content": "summary"}}],
        })))
        .mount(&server)
        .await;
    let summarizer = openai(&server).build().unwrap();
    assert_eq!(summarizer.id(), format!("openai:gpt-4o-mini/{PROMPT_VERSION}"));
    let summary = summarizer.summarize(&request()).await.unwrap();
    assert_eq!(summary.text, "summary");
    assert_eq!(summary.usage, Usage::default());
    let requests = received(&server).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(header(&requests[0], "authorization"), None);
}

#[tokio::test]
async fn anthropic_retries_an_overloaded_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(anthropic_error(529, "overloaded_error", "Overloaded"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(anthropic_answer("after retry")).mount(&server).await;
    let summary = anthropic(&server).build().unwrap().summarize(&request()).await.unwrap();
    assert_eq!(summary.text, "after retry");
    let requests = received(&server).await;
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body, "a retry resends the same body");
}

#[tokio::test]
async fn retry_after_zero_beats_a_long_backoff() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(openai_answer("after 429")).mount(&server).await;
    // Without the server's retry-after, the first retry would wait 5 to 10 s.
    let logs = Captured::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let summarizer = openai(&server).retry_backoff(Duration::from_secs(10)).build().unwrap();
    let summary = summarizer.summarize(&request()).await.unwrap();
    assert!(logs.text().contains("wait_ms=0 "), "the retry waits as the server says: {}", logs.text());
    assert_eq!(summary.text, "after 429");
    assert_eq!(received(&server).await.len(), 2);
}

#[tokio::test]
async fn retry_after_one_second_is_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(anthropic_error(429, "rate_limit_error", "slow down").insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(anthropic_answer("waited")).mount(&server).await;
    let logs = Captured::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let summarizer = anthropic(&server).retry_backoff(Duration::from_secs(10)).build().unwrap();
    let summary = summarizer.summarize(&request()).await.unwrap();
    assert!(logs.text().contains("wait_ms=1000 "), "the retry waits as the server says: {}", logs.text());
    assert_eq!(summary.text, "waited");
    assert_eq!(received(&server).await.len(), 2);
}

#[tokio::test]
async fn an_unauthorized_answer_is_not_retried_and_names_status_and_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(anthropic_error(401, "authentication_error", "invalid x-api-key"))
        .mount(&server)
        .await;
    let err = anthropic(&server).build().unwrap().summarize(&request()).await.unwrap_err();
    assert_eq!(received(&server).await.len(), 1);
    match &err {
        SummarizeError::Status { provider, status, message } => {
            assert_eq!((*provider, *status), ("Anthropic", 401));
            assert_eq!(message, "authentication_error: invalid x-api-key");
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    assert_eq!(err.to_string(), "Anthropic answered 401: authentication_error: invalid x-api-key");
}

#[tokio::test]
async fn other_client_errors_are_not_retried() {
    for status in [400, 403, 404, 422] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(status).set_body_json(json!({"error": {"message": format!("bad {status}")}})),
            )
            .mount(&server)
            .await;
        let err = openai(&server).build().unwrap().summarize(&request()).await.unwrap_err();
        assert_eq!(received(&server).await.len(), 1, "status {status}");
        assert!(matches!(err, SummarizeError::Status { status: got, .. } if got == status), "{err:?}");
        assert!(err.to_string().contains(&format!("{status}: bad {status}")), "{err}");
    }
}

#[tokio::test]
async fn gives_up_after_max_retries_with_the_last_status() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("upstream unavailable"))
        .mount(&server)
        .await;
    let err = openai(&server).max_retries(2).build().unwrap().summarize(&request()).await.unwrap_err();
    assert_eq!(received(&server).await.len(), 3, "one attempt and two retries");
    assert_eq!(err.to_string(), "OpenAI-compatible server answered 503: upstream unavailable");
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(anthropic_answer("too late").set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let summarizer = anthropic(&server).timeout(Duration::from_millis(200)).max_retries(0).build().unwrap();
    // Without the timeout the answer would come, late but whole.
    let err = summarizer.summarize(&request()).await.unwrap_err();
    assert!(matches!(err, SummarizeError::Timeout { provider: "Anthropic", .. }), "{err:?}");
    assert_eq!(received(&server).await.len(), 1);
}

#[tokio::test]
async fn a_timeout_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(openai_answer("too late").set_delay(Duration::from_secs(3)))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(openai_answer("in time")).mount(&server).await;
    let summarizer = openai(&server).timeout(Duration::from_millis(300)).max_retries(1).build().unwrap();
    let summary = summarizer.summarize(&request()).await.unwrap();
    assert_eq!(summary.text, "in time");
    assert_eq!(received(&server).await.len(), 2);
}

#[tokio::test]
async fn a_closed_port_is_unreachable_after_retries() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{port}");
    let summarizer = Anthropic::builder()
        .api_key(KEY)
        .base_url(&base)
        .max_retries(1)
        .retry_backoff(Duration::from_millis(5))
        .build()
        .unwrap();
    let err = summarizer.summarize(&request()).await.unwrap_err();
    match &err {
        SummarizeError::Unreachable { provider, url, .. } => {
            assert_eq!((*provider, url.as_str()), ("Anthropic", base.as_str()));
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_success_is_malformed() {
    let cases = [
        ResponseTemplate::new(200).set_body_string("<html>gateway page</html>"),
        ResponseTemplate::new(200).set_body_json(json!({"content": [], "usage": {"input_tokens": 1}})),
        ResponseTemplate::new(200).set_body_json(json!({"content": [{"type": "tool_use", "id": "t", "name": "x"}]})),
    ];
    for answer in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST")).respond_with(answer).mount(&server).await;
        let err = anthropic(&server).build().unwrap().summarize(&request()).await.unwrap_err();
        assert!(matches!(err, SummarizeError::Malformed { provider: "Anthropic", .. }), "{err:?}");
        assert_eq!(received(&server).await.len(), 1, "a malformed answer is not retried");
    }
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"choices": [{"message": {"content": null}}]})))
        .mount(&server)
        .await;
    let err = openai(&server).build().unwrap().summarize(&request()).await.unwrap_err();
    assert!(matches!(err, SummarizeError::Malformed { .. }), "{err:?}");
}

#[test]
fn a_missing_key_is_reported_at_build() {
    for builder in [Anthropic::builder(), Anthropic::builder().api_key("   ")] {
        match builder.build() {
            Err(SummarizeError::MissingKey { provider, variable }) => {
                assert_eq!((provider, variable), ("Anthropic", "ANTHROPIC_API_KEY"));
            }
            other => panic!("expected a missing key, got {other:?}"),
        }
    }
    let err = Anthropic::builder().build().unwrap_err();
    assert_eq!(err.to_string(), "no API key for Anthropic: set ANTHROPIC_API_KEY");
    // Local OpenAI-compatible servers need no key.
    assert!(OpenAiCompatible::builder().build().is_ok());
}

#[test]
fn settings_that_cannot_work_are_rejected_at_build() {
    let bad = [
        Anthropic::builder().api_key(KEY).base_url("api.anthropic.com").build().unwrap_err(),
        Anthropic::builder().api_key(KEY).base_url("ftp://example.com").build().unwrap_err(),
        Anthropic::builder().api_key(KEY).max_tokens(0).build().unwrap_err(),
        Anthropic::builder().api_key(KEY).timeout(Duration::ZERO).build().unwrap_err(),
        OpenAiCompatible::builder().api_key("line\nbreak").build().unwrap_err(),
    ];
    for err in bad {
        assert!(matches!(err, SummarizeError::Config { .. }), "{err:?}");
    }
    let err = OpenAiCompatible::builder().base_url("localhost:8080").build().unwrap_err();
    assert!(err.to_string().contains("`localhost:8080`"), "{err}");
}

#[tokio::test]
async fn the_key_never_shows_in_errors_or_debug_output() {
    let server = MockServer::start().await;
    // A server that quotes the key back, as some do in authentication errors.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "error": {"message": format!("Incorrect API key provided: {KEY}."), "type": "invalid_request_error"},
        })))
        .mount(&server)
        .await;
    let builder = openai(&server).api_key(KEY);
    assert!(!format!("{builder:?}").contains(KEY), "{builder:?}");
    let summarizer = builder.build().unwrap();
    assert!(!format!("{summarizer:?}").contains(KEY), "{summarizer:?}");
    assert!(format!("{summarizer:?}").contains("[redacted]"), "{summarizer:?}");
    let err = summarizer.summarize(&request()).await.unwrap_err();
    assert!(!shown(&err).contains(KEY), "{}", shown(&err));
    assert!(err.to_string().contains("Incorrect API key provided: [redacted]."), "{err}");

    let anthropic = Anthropic::builder().api_key(KEY).build().unwrap();
    assert!(!format!("{anthropic:?} {:?}", Anthropic::builder().api_key(KEY)).contains(KEY));

    // A key pasted into the base URL is redacted from the unreachable error too.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = Anthropic::builder()
        .api_key(KEY)
        .base_url(format!("http://127.0.0.1:{port}/{KEY}"))
        .max_retries(0)
        .build()
        .unwrap()
        .summarize(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, SummarizeError::Unreachable { .. }), "{err:?}");
    assert!(!shown(&err).contains(KEY), "{}", shown(&err));
    // And from a configuration error that quotes the base URL.
    let err = Anthropic::builder().api_key(KEY).base_url(format!("nonsense/{KEY}")).build().unwrap_err();
    assert!(!shown(&err).contains(KEY), "{}", shown(&err));
}

/// Collects every log event's fields as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<String>>);

impl Captured {
    /// Everything logged so far, one event a line.
    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

impl tracing::field::Visit for Captured {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let mut text = self.0.lock().unwrap();
        text.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl tracing::Subscriber for Captured {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        span.record(&mut self.clone());
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut self.clone());
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        event.record(&mut self.clone());
        self.0.lock().unwrap().push('\n');
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn the_key_never_shows_in_logs() {
    let logs = Captured::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(anthropic_error(500, "api_error", &format!("internal error for key {KEY}")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(anthropic_answer("fine")).mount(&server).await;
    anthropic(&server).build().unwrap().summarize(&request()).await.unwrap();
    assert_eq!(received(&server).await.len(), 2);
    let logs = logs.0.lock().unwrap().clone();
    assert!(logs.contains("retrying"), "the retry is logged: {logs}");
    assert!(logs.contains("[redacted]"), "{logs}");
    assert!(!logs.contains(KEY), "{logs}");
}

/// Compacts a conversation holding secrets with `summarizer` behind `server`, redacting or
/// not; returns the bodies the server received, as text.
async fn bodies_sent(server: &MockServer, summarizer: Arc<dyn Summarizer>, redact: bool) -> String {
    let mut compactor = Compactor::new(summarizer);
    if redact {
        compactor = compactor.with_redactor(Redactor::new());
    }
    let config =
        CompactConfig { target: Target::Budget(1_500), strategy: Strategy::Summarize, ..CompactConfig::default() };
    let out = compactor.compact(&secret_session(3, 4, 30), &config).await.unwrap();
    assert!(out.report.fallbacks.is_empty(), "{:?}", out.report.fallbacks);
    let bodies: Vec<String> = received(server).await.iter().map(|request| body(request).to_string()).collect();
    server.reset().await;
    bodies.join("\n")
}

#[tokio::test]
async fn with_a_redactor_the_llm_request_holds_masks_not_secrets() {
    let server = MockServer::start().await;
    let anthropic: Arc<dyn Summarizer> = Arc::new(anthropic(&server).build().unwrap());
    let openai: Arc<dyn Summarizer> = Arc::new(openai(&server).build().unwrap());
    for (name, summarizer) in [("anthropic", anthropic), ("openai", openai)] {
        let answer = if name == "anthropic" { anthropic_answer("## Goal\n- deploy") } else { openai_answer("## Goal") };
        Mock::given(method("POST")).respond_with(answer.clone()).mount(&server).await;
        let plain = bodies_sent(&server, summarizer.clone(), false).await;
        assert_eq!(leaked(&plain).len(), 4, "{name}: without a redactor the secrets go out");
        Mock::given(method("POST")).respond_with(answer).mount(&server).await;
        let redacted = bodies_sent(&server, summarizer, true).await;
        assert_eq!(leaked(&redacted), Vec::<String>::new(), "{name}: {redacted}");
        for mask in ["aws-access-key-id", "github-token", "private-key", "secret"] {
            assert!(redacted.contains(&format!("[REDACTED:{mask}]")), "{name}: {mask} in {redacted}");
        }
    }
}

/// A server that ignores `max_tokens`: its summary is cut to the summary's budget and the
/// report says so, instead of the result holding half a million tokens.
#[tokio::test]
async fn an_llm_summary_over_its_budget_is_cut_to_it() {
    let server = MockServer::start().await;
    let huge: String =
        (0..60_000).map(|line| format!("- fact {line}: the parser in src/parse.rs was fixed\n")).collect();
    Mock::given(method("POST")).respond_with(openai_answer(&huge)).mount(&server).await;
    let summarizer: Arc<dyn Summarizer> = Arc::new(openai(&server).build().unwrap());
    let conversation = crate::common::session(6, 4, 30);
    let config =
        CompactConfig { target: Target::Budget(2_000), strategy: Strategy::Summarize, ..CompactConfig::default() };
    let out = Compactor::new(summarizer).compact(&conversation, &config).await.unwrap();
    let report = &out.report;
    assert!(report.fallbacks.is_empty(), "{:?}", report.fallbacks);
    assert!(report.notes.iter().any(|note| note.contains("over its budget of 1000 tokens")), "{:?}", report.notes);
    // The budget, and the facts the artifact check appends.
    assert!(report.summary_tokens <= 1_300, "{}", report.summary_tokens);
    assert!(report.tokens_after <= 4_000, "{}", report.tokens_after);
    let summary = out.summary.expect("a summary").text;
    assert!(summary.starts_with("- fact 0: the parser"), "the summary's start is kept");
}
