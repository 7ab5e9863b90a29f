//! Large requests: one whose body takes seconds to read and compact never holds up another.
//! A small request sent while two 30 MB ones are being prepared is answered first; the order
//! is what is checked, not a time.

use crate::common::{client, config, proxy};
use crate::mock::{canned, Mock};
use serde_json::json;
use std::time::Duration;

/// A Messages body of about 30 MB: a long history of `who`.
fn large_body(who: &str) -> String {
    let filler = format!("{who} wrote this line of the log, and many more like it. ").repeat(170);
    let mut messages = vec![json!({"role": "user", "content": format!("{who}: start")})];
    for turn in 0..1_500 {
        messages.push(json!({"role": "assistant", "content": format!("{who} answer {turn}: {filler}")}));
        messages.push(json!({"role": "user", "content": format!("{who} request {turn}: {filler}")}));
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": messages}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_request_is_answered_while_two_large_ones_are_prepared() {
    let mock = Mock::start(|_| canned::message(json!([{"type": "text", "text": "ok"}]), "end_turn")).await;
    let proxy = proxy(config(&mock.url())).await;
    let mut large = Vec::new();
    for who in ["LARGE-A", "LARGE-B"] {
        let body = large_body(who);
        assert!(body.len() > 28_000_000 && body.len() < 32 * 1024 * 1024, "{}", body.len());
        let url = format!("{}/v1/messages", proxy.url);
        large.push(tokio::spawn(async move { client().post(url).body(body).send().await.map(|r| r.status()) }));
    }
    // Both bodies are in and being prepared (or waiting for their turn).
    let mut waited = 0;
    while proxy.stats.preparing() < 2 {
        assert!(waited < 12_000, "the large requests never reached their preparation");
        tokio::time::sleep(Duration::from_millis(5)).await;
        waited += 1;
    }
    let small = json!({"model": "claude-sonnet-4-5", "max_tokens": 50,
        "messages": [{"role": "user", "content": "a small question"}]});
    let answer = client().post(format!("{}/v1/messages", proxy.url)).body(small.to_string()).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let received = mock.requests();
    assert!(
        large.iter().all(|task| !task.is_finished()) && received.len() == 1,
        "the small request is answered before either large one ({} went upstream first)",
        received.len()
    );
    assert!(String::from_utf8_lossy(&received[0].body).contains("a small question"));
    for task in large {
        assert_eq!(task.await.unwrap().unwrap(), 200);
    }
    assert_eq!(mock.assert_all_valid(), 3);
}
