//! The real Claude Code CLI for a long session through `serve --store`: 200 tool calls, each
//! a shell command whose output is 5–20 KB, in a 60k window where its system prompt and 24
//! tools (about 28k tokens) leave little room, so the proxy compacts many times.
//!
//! What must hold after it: the run ends in success; every request the upstream received
//! validates; the newest tool output reached the model whole at every step; the store holds
//! the client's history once, in order (each tool call and result once, the export valid),
//! and a record of each call.

use crate::claude_code::{claude_command, tool_ids};
use crate::clients::{installed, newest_result_number, run, CLAUDE};
use crate::common::{notice, proxy};
use crate::mock::{canned, Mock, Recorded, Reply};
use contextfold::store::{SessionStore, SqliteStore, StoreLocation};
use contextfold_core::{validate, Conversation};
use contextfold_test_support::Scratch;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The tool calls the script asks for; the turn then ends.
const STEPS: usize = 200;
/// How long the whole run may take.
const LIMIT: Duration = Duration::from_secs(480);

/// The lines step `step`'s command prints: 80 to 330 lines of about 60 bytes (5–20 KB).
fn lines(step: usize) -> usize {
    80 + (step * 7919) % 251
}

/// One line of step `step`'s output.
fn line(step: usize, number: usize) -> String {
    format!("step {step} line {number}: the quick brown fox jumps over the lazy dog")
}

/// The scripted model: a shell command at each step until [`STEPS`], then the turn's end.
fn answer(request: &Recorded) -> Reply {
    if !request.uri.starts_with("/v1/messages") {
        return Reply::json(json!({}));
    }
    let body = request.json();
    let step = newest_result_number(&body).map_or(0, |number| number + 1);
    let (content, stop_reason) = if step >= STEPS || body["tools"].as_array().is_none_or(Vec::is_empty) {
        (json!([{"type": "text", "text": format!("step {step}: all done.")}]), "end_turn")
    } else {
        let command =
            format!("seq -f 'step {step} line %g: the quick brown fox jumps over the lazy dog' 1 {}", lines(step));
        let call = json!({"type": "tool_use", "id": format!("toolu_long_{step:03}"), "name": "Bash",
                          "input": {"command": command, "description": "Print a long listing"}});
        (json!([{"type": "text", "text": format!("step {step}: next listing.")}, call]), "tool_use")
    };
    let tokens = request.body.len() as u64 / 4;
    Reply::sse(canned::message_stream(&format!("msg_long_{step:03}"), &content, stop_reason, tokens))
}

/// The text of the newest tool result of a request's body, and the step it answers.
fn newest_output(body: &Value) -> Option<(usize, String)> {
    let step = newest_result_number(body)?;
    let newest = body["messages"].as_array()?.iter().rev().find(|message| message["role"] == "user")?;
    let block = newest["content"].as_array()?.iter().rev().find(|block| block["type"] == "tool_result")?;
    let text = match &block["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|part| part["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    };
    Some((step, text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_for_200_calls_through_the_store_keeps_one_log_and_every_newest_output() {
    let Some(claude) = installed(CLAUDE, "the Claude Code CLI") else { return };
    let home = Scratch::new("claude-long-home");
    let work = Scratch::new("claude-long-work");
    let store_dir = Scratch::new("claude-long-store");
    let path = store_dir.path().join("store.db");
    let mock = Mock::start(answer).await;
    let mut settings = crate::common::config(&mock.url());
    settings.window = Some(60_000);
    settings.reserve = 8_000;
    settings.store = Some(StoreLocation::File(path.clone()));
    let proxy = proxy(settings).await;
    let mut command = claude_command(&claude, home.path(), work.path(), &proxy.url);
    command
        .args(["-p", "Print the listings one after another.", "--model", "claude-sonnet-4-5"])
        .args(["--output-format", "json", "--allowedTools", "Bash", "--dangerously-skip-permissions"])
        .args(["--max-turns", &(STEPS + 10).to_string()]);
    let started = Instant::now();
    let finished = run(command, LIMIT).await;
    let elapsed = started.elapsed();
    let result = finished.json_lines().into_iter().find(|line| line["type"] == "result").expect("a result");
    assert_eq!(result["subtype"], "success", "{result}");
    let compactions = proxy.stats.compactions();
    let stats = proxy.stats.clone();
    proxy.stop().await.expect("the proxy stops cleanly");

    let requests = mock.messages_requests();
    assert_eq!(mock.assert_all_valid(), requests.len(), "every forwarded request validates");
    assert!(requests.len() > STEPS, "{} requests", requests.len());
    assert!(compactions >= 3, "the proxy compacted again and again ({compactions})");
    // The newest output reached the model whole: its first and last lines, no marker.
    let mut checked = 0;
    for request in &requests {
        let Some((step, text)) = newest_output(&request.json()) else { continue };
        assert!(!text.contains("[contextfold"), "step {step}'s output was cut: {text:.300}");
        assert!(text.contains(&line(step, 1)) && text.contains(&line(step, lines(step))), "step {step}: {text:.300}");
        checked += 1;
    }
    assert_eq!(checked, STEPS, "each step's request carried its newest output");

    // The store is the session log: one session, each tool call and result once, in order.
    let store = SqliteStore::open_existing(&path).expect("the proxy's store");
    let sessions = store.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1, "one conversation, one session: {sessions:?}");
    let session = &sessions[0];
    let exported = store.export(&session.id).expect("export");
    let conversation = Conversation { messages: exported.clone(), ..Conversation::default() };
    assert!(validate(&conversation).is_empty(), "the export validates: {:?}", validate(&conversation));
    let (calls, results) = tool_ids(&exported);
    let expected: Vec<String> = (0..STEPS).map(|step| format!("toolu_long_{step:03}")).collect();
    assert_eq!(calls, expected, "each tool call stored once, in order");
    assert_eq!(results, expected, "each tool result stored once, in order");
    assert_eq!(session.messages, exported.len());
    let recorded = store.calls(&session.id).expect("calls");
    assert_eq!(recorded.len(), requests.len(), "a record per call");
    notice(&format!(
        "Claude Code, long session: {} requests in {:.0} s, {compactions} compactions, {} stored messages, \
         store {:.1} MB; the newest output whole at all {STEPS} steps; {}",
        requests.len(),
        elapsed.as_secs_f64(),
        exported.len(),
        std::fs::metadata(&path).map_or(0, |metadata| metadata.len()) as f64 / 1e6,
        stats.savings().totals().line(),
    ));
}
