//! The Responses API through the proxy: typed events relayed as they arrive, a Codex-style
//! stateless tool loop that compacts with every request valid (reasoning items with their
//! calls, OpenAI's own compaction items kept), `instructions`, the developer messages and
//! every other field the client's, a prefix that holds between compactions; and what is the
//! server's to manage (`previous_response_id`) forwarded untouched, and said so.

use super::agents::{completed_output, extends, raw_list, responses_script, ResponsesAgent};
use super::{canned, openai_config};
use crate::common::{client, fields, logs, notice, proxy};
use crate::mock::{Frame, Mock};
use serde_json::json;
use std::time::Duration;

const PATH: &str = "/v1/responses";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_intact_as_they_come() {
    let output = [
        canned::responses::reasoning("rs_1", "Look at the failing test first."),
        canned::responses::function_call("fc_1", "call_1", "exec_command", &json!({"cmd": "cargo test -p ünï"})),
    ];
    let streams = [
        canned::responses::stream(&output, 900),
        canned::responses::stream(&[canned::responses::message("msg_1", "Done ✓")], 950),
        canned::responses::failed_mid_stream(),
    ];
    for (index, frames) in streams.into_iter().enumerate() {
        let paced: Vec<Frame> =
            frames.iter().flat_map(|frame| [frame.clone(), Frame::Pause(Duration::from_millis(2))]).collect();
        let reply = canned::sse(paced);
        let expected = reply.bytes();
        let mock = Mock::start(move |_| reply.clone()).await;
        let proxy = proxy(openai_config(&mock)).await;
        let body =
            json!({"model": "gpt-5", "stream": true, "input": [{"type": "message", "role": "user", "content": "go"}]});
        let response = client().post(format!("{}{PATH}", proxy.url)).body(body.to_string()).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert_eq!(text, expected, "stream {index} is the upstream's, byte for byte");
        match index {
            0 => assert_eq!(completed_output(&text), output, "the reasoning item keeps its encrypted content"),
            2 => assert!(text.contains("event: response.failed") && !text.contains("response.completed")),
            _ => {}
        }
    }
}

/// Plays `calls` calls of one Responses agent (streaming all but every third) and checks
/// every request the upstream received.
async fn long_conversation(calls: usize) {
    let mock = Mock::start(responses_script(100_000)).await;
    let proxy = proxy(openai_config(&mock)).await;
    let client = client();
    let mut agent = ResponsesAgent::new("codexy", "fix the failing test");
    let mut sent = Vec::new();
    for call in 0..calls {
        agent.stream = call % 3 != 0;
        let output = agent.step(&client, &proxy.url).await;
        sent.push(agent.last_body.clone());
        assert_eq!(output.len(), 2, "call {call}: a reasoning item and a call");
        if call == 5 {
            // OpenAI's own compaction, as a client that used /v1/responses/compact keeps it.
            agent.input.push(json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-compacted"}));
        }
    }
    let received = mock.requests_at(PATH);
    assert_eq!(received.len(), calls);
    let (mut rewrites, mut client_bytes, mut upstream_bytes) = (0, 0, 0);
    let mut previous: Option<Vec<String>> = None;
    for (call, (request, client_body)) in received.iter().zip(&sent).enumerate() {
        let upstream = fields(&request.body);
        let original = fields(client_body.as_bytes());
        for (key, value) in &original {
            if key != "input" {
                assert_eq!(upstream[key].get(), value.get(), "call {call}: `{key}` is the client's text");
            }
        }
        let items = raw_list(&request.body, "input");
        let client_items = raw_list(client_body.as_bytes(), "input");
        assert_eq!(items[0], client_items[0], "call {call}: the developer message is the client's");
        assert_eq!(items.last(), client_items.last(), "call {call}: the newest item is the client's");
        if call > 6 {
            assert!(
                items.iter().any(|item| item.contains("gAAAAB-compacted")),
                "call {call}: the compaction item is kept"
            );
        }
        if let Some(previous) = &previous {
            if !extends(previous, &items) {
                rewrites += 1;
            }
        }
        previous = Some(items);
        client_bytes += client_body.len();
        upstream_bytes += request.body.len();
    }
    let compactions = proxy.stats.compactions();
    assert!(compactions >= 2, "a long tool loop in a 24k window compacts (got {compactions})");
    assert_eq!(rewrites, compactions as usize, "the prefix changes at a compaction and at no other call");
    assert_eq!(proxy.stats.untouched(), 0, "{}", logs());
    assert_eq!(mock.assert_all_valid_at(PATH), calls);
    notice(&format!(
        "responses, {calls} calls: {compactions} compactions, each the only prefix change; {upstream_bytes} of the client's {client_bytes} bytes sent ({:.1}% saved)",
        100.0 * (1.0 - upstream_bytes as f64 / client_bytes as f64)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_codex_style_loop_compacts_and_keeps_its_prefix_between_compactions() {
    long_conversation(200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_server_holds_or_the_compaction_cannot_read_goes_out_as_it_came() {
    let mock = Mock::start(|_| canned::responses::whole(&[canned::responses::message("msg_1", "ok")], 5)).await;
    let proxy = proxy(openai_config(&mock)).await;
    let bodies = [
        r#"{"model":"gpt-5","previous_response_id":"resp_123","input":[{"type":"function_call_output","call_id":"c1","output":"done"}],"stream":true}"#,
        r#"{"model":"gpt-5","previous_response_id":"resp_123","input":"and now?"}"#,
        r#"{"model":"gpt-5","conversation":"conv_9","input":[{"type":"message","role":"user","content":"more"}]}"#,
        r#"{"model":"gpt-5","input":"a single string"}"#,
        r#"{"model":"gpt-5","prompt":{"id":"pmpt_1"}}"#,
        r#"{"model":"gpt-5","input":[{"type":"message","role":"critic","content":"?"}]}"#,
        r#"{"model":"gpt-5","input":[{"type":"function_call_output","call_id":"c1","output":"orphan"}]}"#,
    ];
    for body in bodies {
        let response = client().post(format!("{}{PATH}", proxy.url)).body(body).send().await.unwrap();
        assert_eq!(response.status(), 200, "{body}");
    }
    let compact = r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"x"}]}"#;
    client().post(format!("{}{PATH}/compact", proxy.url)).body(compact).send().await.unwrap();
    let seen: Vec<String> =
        mock.requests().iter().map(|request| String::from_utf8_lossy(&request.body).into_owned()).collect();
    assert_eq!(seen, [&bodies[..], &[compact]].concat(), "each went out as it came");
    assert_eq!(mock.requests().last().unwrap().uri, "/v1/responses/compact");
    let logs = logs();
    let held: Vec<&str> =
        logs.lines().filter(|line| line.contains("previous_response_id: the server holds the history")).collect();
    assert!(held.len() >= 2 && held.iter().all(|line| line.contains(" untouched (previous_response_id")), "{held:#?}");
    assert!(held.iter().any(|line| line.contains(" stream ")), "the log line says it streamed: {held:#?}");
    assert!(logs.contains("conversation: the server holds the history"), "{logs}");
    // The last (orphan output) is read but has nothing to compact: it goes out unchanged.
    assert_eq!(proxy.stats.untouched(), 6);
}
