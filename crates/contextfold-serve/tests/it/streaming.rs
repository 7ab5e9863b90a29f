//! Streams are relayed as they arrive, never buffered and never rebuilt: every kind of
//! event (pings, tool input deltas, server tools, signed thinking, compaction blocks, error
//! events) reaches the client as the upstream sent it.

use crate::common::{client, config, proxy};
use crate::mock::{canned, Frame, Mock, Reply};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

fn streaming_body() -> String {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": "stream please"}]})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_event_reaches_the_client_before_the_upstream_sends_the_second() {
    let gate = Arc::new(Notify::new());
    let first = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n".to_string();
    let second = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string();
    let frames = vec![Frame::Data(first.clone()), Frame::Gate(gate.clone()), Frame::Data(second.clone())];
    let mock = Mock::start(move |_| Reply::sse(frames.clone())).await;
    let proxy = proxy(config(&mock.url())).await;
    let mut response = client().post(format!("{}/v1/messages", proxy.url)).body(streaming_body()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // The upstream sends the second event only once the gate opens, and the gate opens only
    // once the client has the first: a buffering proxy never gets here.
    let mut received = String::new();
    while received.len() < first.len() {
        let chunk = tokio::time::timeout(Duration::from_secs(5), response.chunk())
            .await
            .expect("the first event arrives while the upstream holds the second")
            .unwrap()
            .expect("more of the stream");
        received.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(received, first);
    gate.notify_one();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), response.chunk()).await.unwrap().unwrap() {
        received.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(received, first + &second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_event_arrives_intact() {
    let streams = [
        canned::text_stream("plain text with ünïcode ✓ and more words"),
        canned::tool_stream("toolu_01", "Read", &json!({"file_path": "/src/main.rs", "limit": 200})),
        canned::server_tool_stream(),
        canned::compaction_stream(),
        canned::error_mid_stream(),
    ];
    for frames in streams {
        // Pauses between frames, so each arrives in a chunk of its own.
        let paced: Vec<Frame> =
            frames.iter().flat_map(|frame| [frame.clone(), Frame::Pause(Duration::from_millis(2))]).collect();
        let reply = Reply::sse(paced);
        let expected = reply.bytes();
        let mock = Mock::start(move |_| reply.clone()).await;
        let proxy = proxy(config(&mock.url())).await;
        let response = client().post(format!("{}/v1/messages", proxy.url)).body(streaming_body()).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert_eq!(text, expected);
        for line in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
            serde_json::from_str::<serde_json::Value>(line).expect("every event's data is whole JSON");
        }
    }
}
