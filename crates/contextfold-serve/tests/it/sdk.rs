//! The official SDKs through the proxy: a tool loop in Python (`anthropic`) and in Node
//! (`@anthropic-ai/sdk`), streaming and not, long enough to compact in a small window. Each
//! SDK must parse every answer as the mock sent it, the mock must receive only valid
//! requests, some of them compacted, and `count_tokens` must count what would be sent.

use crate::clients::{installed, newest_result_number, run, script, without_nulls, NODE_MODULES, PYTHON};
use crate::common::{config, notice, proxy};
use crate::mock::{canned, Mock, Recorded, Reply};
use serde_json::{json, Value};
use std::time::Duration;

/// Tasks the client asks for, one after another.
const TASKS: usize = 6;
/// Replies per task: three `Read` calls, then an answer that ends the turn.
const STEPS_PER_TASK: usize = 4;
/// Characters of each file the client reads.
const OUTPUT_CHARS: usize = 3_000;
/// How long a client may take for the whole loop.
const LIMIT: Duration = Duration::from_secs(180);

/// The script's step a request is at: the one after the call its newest tool result
/// answers, or the first of the task its newest message asks for (`task K: …`).
fn step_of(body: &Value) -> usize {
    if let Some(number) = newest_result_number(body) {
        return number + 1;
    }
    let newest = body["messages"].as_array().and_then(|messages| messages.last()).cloned().unwrap_or_default();
    let text = newest["content"].as_str().map(str::to_string).unwrap_or_default();
    let task = text.strip_prefix("task ").and_then(|rest| rest.split(':').next()?.parse::<usize>().ok());
    task.unwrap_or(0) * STEPS_PER_TASK
}

/// The content and stop reason of the reply at `step`: signed thinking at the start of a
/// task, a line of text naming the step, and a `Read` call, or at the end of a task an answer.
fn reply(step: usize) -> (Value, &'static str) {
    let (task, within) = (step / STEPS_PER_TASK, step % STEPS_PER_TASK);
    if within == STEPS_PER_TASK - 1 {
        let text = format!("step {step}: task {task} is done; its files read cleanly — ünïcode ✓.");
        return (json!([{"type": "text", "text": text}]), "end_turn");
    }
    let mut content = Vec::new();
    if within == 0 {
        content.push(json!({"type": "thinking", "thinking": format!("Task {task} needs its files read first."),
            "signature": format!("EqQBCgIYAhIM{step:03}gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds")}));
    }
    content.push(json!({"type": "text", "text": format!("step {step}: reading file {within} of task {task}")}));
    content.push(json!({"type": "tool_use", "id": format!("toolu_{step:03}"), "name": "Read",
        "input": {"file_path": format!("/src/task_{task}/file_{within}.rs")}}));
    (Value::Array(content), "tool_use")
}

/// The mock's script: a reply by step, streamed when asked; `count_tokens` answered with a
/// token per three bytes of the request, as the usage of every reply says.
fn answer(request: &Recorded) -> Reply {
    let tokens = request.body.len() as u64 / 3;
    if request.uri.starts_with("/v1/messages/count_tokens") {
        return Reply::json(json!({"input_tokens": tokens}));
    }
    let body = request.json();
    let step = step_of(&body);
    let (content, stop_reason) = reply(step);
    if body["stream"] == true {
        Reply::sse(canned::message_stream(&format!("msg_{step:03}"), &content, stop_reason, tokens))
    } else {
        canned::message_with_usage(content, stop_reason, tokens)
    }
}

/// Runs the tool loop of `sdk` (the command made for the proxy's URL) and checks it.
async fn tool_loop(sdk: &str, command: impl FnOnce(&str) -> tokio::process::Command) {
    let mock = Mock::start(answer).await;
    let proxy = proxy(config(&mock.url())).await;
    let finished = run(command(&proxy.url), LIMIT).await;
    let lines = finished.json_lines();
    let (calls, count) = lines.split_at(lines.len().saturating_sub(1));
    assert_eq!(
        calls.len(),
        TASKS * STEPS_PER_TASK,
        "{sdk}: one line per call:\n{}\n{}",
        finished.stdout,
        finished.stderr
    );

    // The SDK parsed every answer as the mock sent it, streamed or whole.
    for (step, line) in calls.iter().enumerate() {
        assert_eq!(line["call"], step);
        assert_eq!(line["stream"], step % 2 == 0);
        let (content, stop_reason) = reply(step);
        assert_eq!(line["stop_reason"], stop_reason, "{sdk} call {step}");
        assert_eq!(without_nulls(&line["content"]), content, "{sdk} call {step}: the parsed content");
    }

    let requests = mock.messages_requests();
    assert_eq!(mock.assert_all_valid(), calls.len() + 1, "{sdk}: every request is valid, count_tokens included");
    let (messages, counted) = requests.split_at(calls.len());
    let mut compacted = 0;
    for (step, (request, line)) in messages.iter().zip(calls).enumerate() {
        let body = request.json();
        assert_eq!(step_of(&body), step, "{sdk}: request {step} reaches the upstream as step {step}");
        assert_eq!(body["stream"] == true, step % 2 == 0, "{sdk} call {step}: streamed as the client asked");
        let sent = body["messages"].as_array().map_or(0, Vec::len);
        let client_sent = line["sent"].as_u64().unwrap() as usize;
        if sent < client_sent || String::from_utf8_lossy(&request.body).contains("[contextfold: ") {
            compacted += 1;
        }
    }
    assert!(proxy.stats.compactions() >= 1, "{sdk}: the loop compacts in a 24k window:\n{}", crate::common::logs());
    assert!(compacted >= 1, "{sdk}: the upstream received compacted requests");

    // count_tokens counted the compacted messages, and the client saw that count.
    let [counted] = counted else { panic!("{sdk}: one count_tokens request, got {}", counted.len()) };
    assert!(counted.uri.starts_with("/v1/messages/count_tokens"));
    let client_sent = count[0]["sent"].as_u64().unwrap() as usize;
    let upstream_sent = counted.json()["messages"].as_array().map_or(0, Vec::len);
    let marked = String::from_utf8_lossy(&counted.body).contains("[contextfold: ");
    assert!(
        upstream_sent < client_sent || marked,
        "{sdk}: count_tokens went with the client's {client_sent} messages as they were"
    );
    assert_eq!(count[0]["count_tokens"], counted.body.len() / 3, "{sdk}: the client sees the upstream's count");
    notice(&format!(
        "{sdk}: {} calls through the proxy ({} streamed), {} compactions, {compacted} compacted requests; count_tokens sent {upstream_sent} of {client_sent} messages",
        calls.len(),
        calls.len().div_ceil(2),
        proxy.stats.compactions()
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_runs_a_tool_loop_through_the_proxy() {
    let Some(python) = installed(PYTHON, "the anthropic Python SDK") else { return };
    tool_loop("python anthropic", |url| {
        let mut command = tokio::process::Command::new(python);
        command.arg(script("tool_loop.py")).arg(url).arg(TASKS.to_string()).arg(OUTPUT_CHARS.to_string());
        command
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_sdk_runs_a_tool_loop_through_the_proxy() {
    let Some(node_modules) = installed(NODE_MODULES, "@anthropic-ai/sdk for Node") else { return };
    tool_loop("node @anthropic-ai/sdk", |url| {
        let mut command = tokio::process::Command::new("node");
        command
            .arg(script("tool_loop.cjs"))
            .arg(node_modules)
            .arg(url)
            .arg(TASKS.to_string())
            .arg(OUTPUT_CHARS.to_string());
        command
    })
    .await;
}
