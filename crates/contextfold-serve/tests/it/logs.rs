//! The log lines: never a request's text (a key where a role should be, a newline that would
//! forge a line, a role of megabytes), a line for every request that went upstream even when
//! its client left before the answer, `complete` for answers without a body, and notes that
//! say what happened.

use crate::common::{client, config, logs, proxy};
use crate::mock::{canned, Mock, Reply};
use contextfold_serve::ServeConfig;
use serde_json::json;
use std::time::Duration;

/// The log lines that name `marker`, once there is one (a line is written as its answer ends).
async fn wait_for(marker: &str) -> Vec<String> {
    for _ in 0..2_000 {
        let lines = lines_with(marker);
        if !lines.is_empty() {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no line names {marker}:\n{}", logs());
}

/// The log lines that name `marker`.
fn lines_with(marker: &str) -> Vec<String> {
    logs().lines().filter(|line| line.contains(marker)).map(str::to_string).collect()
}

fn ok() -> Reply {
    canned::message(json!([{"type": "text", "text": "ok"}]), "end_turn")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_text_never_reaches_the_log() {
    let mock = Mock::start(|_| ok()).await;
    let proxy = proxy(config(&mock.url())).await;
    let role = format!("sk-ant-api03-LOGLEAKKEY\nPOST /forged-line status 200{}", "r".repeat(5_000_000));
    let body = json!({"model": "model-log-role", "max_tokens": 5, "messages": [
        {"role": "user", "content": "hi"}, {"role": role, "content": "x"}]});
    let response = client()
        .post(format!("{}/v1/messages", proxy.url))
        .header("x-contextfold-session", "log-role")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = logs();
    assert!(!text.contains("LOGLEAKKEY"), "the role's text is not logged");
    assert!(!text.lines().any(|line| line.starts_with("POST /forged-line")), "no line is forged");
    let lines = wait_for("model-log-role").await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("untouched (the compaction cannot read it: message 1"), "{}", lines[0]);
    assert!(lines[0].len() < 2_000, "the line is bounded: {} bytes", lines[0].len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_before_the_answer_still_gets_its_line() {
    let mock = Mock::start(|_| Reply::Hang).await;
    let proxy = proxy(config(&mock.url())).await;
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    let sent = client()
        .post(format!("{}/v1/messages", proxy.url))
        .header("x-contextfold-session", "log-leaver")
        .timeout(Duration::from_millis(500))
        .body(body.to_string())
        .send()
        .await;
    assert!(sent.is_err(), "the client gave up");
    assert_eq!(mock.requests().len(), 1, "the request went upstream");
    let line = &wait_for("session=log-leaver").await[0];
    assert!(line.contains("client closed before the answer"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_a_body_end_complete() {
    let mock = Mock::start(|request| {
        if request.uri.starts_with("/moved") {
            Reply::Json { status: 307, headers: vec![("location".into(), "/elsewhere".into())], body: String::new() }
        } else {
            Reply::Json { status: 200, headers: vec![], body: "{\"up\":true}".into() }
        }
    })
    .await;
    let proxy = proxy(config(&mock.url())).await;
    let head = client().head(format!("{}/log-head-probe", proxy.url)).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let not_following =
        reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let moved = not_following.get(format!("{}/moved/log-probe", proxy.url)).send().await.unwrap();
    assert_eq!(moved.status(), 307);
    for marker in ["HEAD /log-head-probe", "GET /moved/log-probe"] {
        let line = &wait_for(marker).await[0];
        assert!(!line.contains("client closed"), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_json_cannot_hold_is_named_as_such() {
    let mock = Mock::start(|_| ok()).await;
    let proxy = proxy(config(&mock.url())).await;
    for (model, block) in [
        ("model-log-surrogate", r#"{"type": "text", "text": "broken \ud800 half"}"#),
        ("model-log-huge-number", r#"{"type": "tool_use", "id": "t1", "name": "n", "input": {"x": 1e999}}"#),
    ] {
        let body = format!(
            r#"{{"model": "{model}", "max_tokens": 5, "messages": [{{"role": "user", "content": "hi"}}, {{"role": "assistant", "content": [{block}]}}]}}"#
        );
        let response = client().post(format!("{}/v1/messages", proxy.url)).body(body).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let line = &wait_for(model).await[0];
        assert!(line.contains("lone surrogate escape or a number out of range"), "{line}");
        assert!(!line.contains("found null"), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_nothing_can_bring_under_the_window_says_so() {
    let mock = Mock::start(|_| ok()).await;
    let proxy = proxy(ServeConfig { window: Some(20_000), reserve: 4_000, ..config(&mock.url()) }).await;
    let huge = "every word of this request counts ".repeat(40_000);
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": huge}]});
    let response = client()
        .post(format!("{}/v1/messages", proxy.url))
        .header("x-contextfold-session", "log-huge")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let line = &wait_for("session=log-huge").await[0];
    assert!(!line.contains("within its target"), "{line}");
    assert!(line.contains("over the usable window of 16000"), "{line}");
}
