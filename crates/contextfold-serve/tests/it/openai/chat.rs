//! Chat Completions through the proxy: streams relayed chunk by chunk, a tool loop that
//! compacts with every request valid, the system and developer messages and every other
//! field the client's, a prefix that holds between compactions, and conversations that keep
//! to themselves.

use super::agents::{agent_name, assemble_chat_stream, chat_script, extends, raw_list, ChatAgent};
use super::{canned, openai_config};
use crate::common::{client, fields, notice, proxy};
use crate::mock::{Frame, Mock};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const PATH: &str = "/v1/chat/completions";

fn streaming_body() -> String {
    json!({"model": "gpt-4.1", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "stream please"}]})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_arrive_intact_and_reassemble() {
    let calls = [
        canned::chat::call("call_1", "read_file", &json!({"path": "/src/ünï.rs", "limit": 200})),
        canned::chat::call("call_2", "run", &json!({"cmd": "cargo test -- --nocapture"})),
    ];
    let streams = [
        canned::chat::text_stream("plain text with ünïcode ✓ and more words", true),
        canned::chat::text_stream("no usage chunk", false),
        canned::chat::tool_calls_stream(&calls, true, 1_234),
        canned::chat::error_mid_stream(),
    ];
    for (index, frames) in streams.into_iter().enumerate() {
        let paced: Vec<Frame> =
            frames.iter().flat_map(|frame| [frame.clone(), Frame::Pause(Duration::from_millis(2))]).collect();
        let reply = canned::sse(paced);
        let expected = reply.bytes();
        let mock = Mock::start(move |_| reply.clone()).await;
        let proxy = proxy(openai_config(&mock)).await;
        let response = client().post(format!("{}{PATH}", proxy.url)).body(streaming_body()).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream; charset=utf-8");
        let text = response.text().await.unwrap();
        assert_eq!(text, expected, "stream {index} is the upstream's, byte for byte");
        match index {
            0 => {
                assert_eq!(assemble_chat_stream(&text)["content"], "plain text with ünïcode ✓ and more words");
                assert!(text.contains("\"prompt_tokens\":1200"), "the usage chunk is relayed");
            }
            2 => {
                let message = assemble_chat_stream(&text);
                assert_eq!(message["tool_calls"], json!(calls), "the parallel calls' fragments join up");
            }
            3 => assert!(text.contains("server_error") && !text.contains("[DONE]")),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_chunk_reaches_the_client_before_the_upstream_sends_the_next() {
    let gate = Arc::new(Notify::new());
    let first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n".to_string();
    let done = "data: [DONE]\n\n".to_string();
    let frames = vec![Frame::Data(first.clone()), Frame::Gate(gate.clone()), Frame::Data(done.clone())];
    let mock = Mock::start(move |_| canned::sse(frames.clone())).await;
    let proxy = proxy(openai_config(&mock)).await;
    let mut response = client().post(format!("{}{PATH}", proxy.url)).body(streaming_body()).send().await.unwrap();
    let mut received = String::new();
    while received.len() < first.len() {
        let chunk = tokio::time::timeout(Duration::from_secs(5), response.chunk())
            .await
            .expect("the first chunk arrives while the upstream holds the rest")
            .unwrap()
            .expect("more of the stream");
        received.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    gate.notify_one();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), response.chunk()).await.unwrap().unwrap() {
        received.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(received, first + &done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_midway_reaches_the_client_cut() {
    let frames: Vec<Frame> = canned::chat::text_stream("a b c d e f g h i j k l m n o p q r", true)
        .into_iter()
        .take(4)
        .flat_map(|frame| [frame, Frame::Pause(Duration::from_millis(20))])
        .collect();
    let reply = canned::sse(frames).cut();
    let sent = reply.bytes();
    let mock = Mock::start(move |_| reply.clone()).await;
    let proxy = proxy(openai_config(&mock)).await;
    let mut response = client().post(format!("{}{PATH}", proxy.url)).body(streaming_body()).send().await.unwrap();
    let mut received = Vec::new();
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), response.chunk()).await.expect("the stream ends") {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => break Ok(()),
            Err(err) => break Err(err),
        }
    };
    assert_eq!(String::from_utf8(received).unwrap(), sent);
    assert!(end.is_err(), "the client sees a broken response, not a whole one");
}

/// Plays `calls` calls of one Chat agent (streaming every other call) and checks every
/// request the upstream received; returns the compactions.
async fn long_conversation(calls: usize) -> u64 {
    let mock = Mock::start(chat_script(100_000)).await;
    let proxy = proxy(openai_config(&mock)).await;
    let client = client();
    let mut agent = ChatAgent::new("chatty", "port the parser");
    agent.output_chars = 1_500;
    let mut sent = Vec::new();
    for call in 0..calls {
        agent.stream = call % 2 == 1;
        let message = agent.step(&client, &proxy.url).await;
        assert_eq!(message["tool_calls"].as_array().map(Vec::len), Some(2), "call {call}");
        sent.push(agent.last_body.clone());
    }
    let received = mock.requests_at(PATH);
    assert_eq!(received.len(), calls);
    let (mut rewrites, mut client_bytes, mut upstream_bytes) = (0, 0, 0);
    let mut previous: Option<Vec<String>> = None;
    for (call, (request, client_body)) in received.iter().zip(&sent).enumerate() {
        let upstream = fields(&request.body);
        let original = fields(client_body.as_bytes());
        assert_eq!(upstream.keys().collect::<Vec<_>>(), original.keys().collect::<Vec<_>>());
        for (key, value) in &original {
            if key != "messages" {
                assert_eq!(upstream[key].get(), value.get(), "call {call}: `{key}` is the client's text");
            }
        }
        let messages = raw_list(&request.body, "messages");
        let client_messages = raw_list(client_body.as_bytes(), "messages");
        assert_eq!(
            messages[..2],
            client_messages[..2],
            "call {call}: the system and developer messages are the client's"
        );
        assert_eq!(messages.last(), client_messages.last(), "call {call}: the newest message is the client's");
        if let Some(previous) = &previous {
            if !extends(previous, &messages) {
                rewrites += 1;
            }
        }
        previous = Some(messages);
        client_bytes += client_body.len();
        upstream_bytes += request.body.len();
    }
    let compactions = proxy.stats.compactions();
    assert!(compactions >= 2, "a long tool loop in a 24k window compacts (got {compactions})");
    assert_eq!(rewrites, compactions as usize, "the prefix changes at a compaction and at no other call");
    assert_eq!(proxy.stats.untouched(), 0, "{}", crate::common::logs());
    assert_eq!(mock.assert_all_valid_at(PATH), calls);
    notice(&format!(
        "chat completions, {calls} calls: {compactions} compactions, each the only prefix change; {upstream_bytes} of the client's {client_bytes} bytes sent ({:.1}% saved)",
        100.0 * (1.0 - upstream_bytes as f64 / client_bytes as f64)
    ));
    compactions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_tool_loop_compacts_and_keeps_its_prefix_between_compactions() {
    long_conversation(200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_conversations_at_once_keep_to_themselves() {
    const AGENTS: usize = 50;
    const STEPS: usize = 9;
    let mock = Mock::start(chat_script(1_000)).await;
    let proxy = proxy(openai_config(&mock)).await;
    let names: Vec<String> = (0..AGENTS).map(|index| format!("chat-{index:02}")).collect();
    let mut tasks = Vec::new();
    for (index, name) in names.iter().cloned().enumerate() {
        let url = proxy.url.clone();
        tasks.push(tokio::spawn(async move {
            let client = client();
            let mut agent = ChatAgent::new(&name, "port the module");
            agent.stream = index % 2 == 0;
            // Some name their session by `prompt_cache_key`, the others by nothing at all.
            if index % 3 == 0 {
                agent.cache_key = None;
            }
            for step in 0..STEPS {
                let message = agent.step(&client, &url).await;
                let id = message["tool_calls"][0]["id"].as_str().unwrap_or_default().to_string();
                assert_eq!(id, format!("call_{step:03}_0_{name}"), "{name} got another conversation's answer");
            }
        }));
    }
    for task in tasks {
        task.await.expect("every conversation finishes");
    }
    let received = mock.requests_at(PATH);
    assert_eq!(received.len(), AGENTS * STEPS);
    for request in &received {
        let body = request.json();
        let own = agent_name(body["messages"].as_array().unwrap());
        let text = String::from_utf8_lossy(&request.body);
        let others = names.iter().filter(|name| **name != own && text.contains(&format!("{name} "))).count();
        assert_eq!(others, 0, "a request of {own} holds nothing of another conversation");
    }
    assert!(proxy.stats.compactions() >= AGENTS as u64, "each compacted (got {})", proxy.stats.compactions());
    assert_eq!(proxy.stats.conversations(), AGENTS as u64);
    assert_eq!(mock.assert_all_valid_at(PATH), AGENTS * STEPS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_keyed_by_header_then_prompt_cache_key_then_user() {
    let mock = Mock::start(chat_script(1_000)).await;
    let proxy = proxy(openai_config(&mock)).await;
    let client = client();
    let body = |key: Option<&str>, user: Option<&str>| {
        let mut body = json!({"model": "gpt-4.1", "messages": [{"role": "user", "content": "[keyed] go"}]});
        if let Some(key) = key {
            body["prompt_cache_key"] = json!(key);
        }
        if let Some(user) = user {
            body["user"] = json!(user);
        }
        body.to_string()
    };
    let send = |body: String, header: Option<&'static str>| {
        let mut request = client.post(format!("{}{PATH}", proxy.url)).body(body);
        if let Some(session) = header {
            request = request.header("x-contextfold-session", session);
        }
        request.send()
    };
    send(body(Some("pck-1"), Some("u-1")), Some("hdr-1")).await.unwrap();
    send(body(Some("pck-1"), Some("u-1")), None).await.unwrap();
    send(body(None, Some("u-1")), None).await.unwrap();
    send(body(None, None), None).await.unwrap();
    let logs = crate::common::logs();
    let ours: Vec<&str> = logs.lines().filter(|line| line.contains("POST /v1/chat/completions session=")).collect();
    for session in ["session=hdr-1 ", "session=pck-1 ", "session=u-1 ", "session=h"] {
        assert!(ours.iter().any(|line| line.contains(session)), "{session} in {ours:#?}");
    }
    assert_eq!(proxy.stats.conversations(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_compaction_cannot_read_or_may_not_touch_goes_out_as_it_came() {
    let mock =
        Mock::start(|_| canned::chat::completion(json!({"role": "assistant", "content": "ok"}), "stop", 5)).await;
    let proxy = proxy(openai_config(&mock)).await;
    let bodies = [
        r#"{"model":"m","messages":[{"role":"critic","content":"a"}]}"#,
        r#"{"model":"m","messages":[{"role":"tool","content":"no id"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":42}]}"#,
    ];
    for body in bodies {
        let response = client().post(format!("{}{PATH}", proxy.url)).body(body).send().await.unwrap();
        assert_eq!(response.status(), 200, "{body}");
    }
    let off = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    client().post(format!("{}{PATH}", proxy.url)).header("x-contextfold", "off").body(off).send().await.unwrap();
    let seen: Vec<String> =
        mock.requests().iter().map(|request| String::from_utf8_lossy(&request.body).into_owned()).collect();
    assert_eq!(seen, [&bodies[..], &[off]].concat(), "each went out as it came");
    assert_eq!(proxy.stats.untouched(), 4);
}
