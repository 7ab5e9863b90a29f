//! End to end: a session whose last tool result is 2 MB, through `contextfold compact` (and
//! `evict --max-tool-output`), then `validate` and `count` on what was written.

use contextfold::core::format;
use contextfold::core::hash::payload_ref;
use contextfold::core::tokens::{count_block, Tokenizer, BLOCK_OVERHEAD};
use contextfold::core::Block;
use serde_json::{json, Value};
use std::path::PathBuf;

use crate::common::contextfold;

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("contextfold-oversized-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// About `size` bytes of `git diff` output.
fn diff_output(size: usize) -> String {
    let mut text = String::with_capacity(size + 200);
    let mut hunk = 0;
    while text.len() < size {
        text.push_str(&format!(
            "diff --git a/src/module_{hunk}.rs b/src/module_{hunk}.rs\n--- a/src/module_{hunk}.rs\n\
             +++ b/src/module_{hunk}.rs\n@@ -{hunk},3 +{hunk},4 @@\n-    let value = compute({hunk});\n\
             +    let value = compute_checked({hunk})?;\n+    debug!(value);\n"
        ));
        hunk += 1;
    }
    text
}

/// Writes a few turns of a coding session ending in a `git diff` of `diff_bytes`; returns
/// the file and the diff.
fn write_session(name: &str, diff_bytes: usize) -> (String, String) {
    let mut messages = Vec::new();
    for turn in 0..3 {
        messages.push(json!({"role": "user", "content": format!("Turn {turn}: fix module {turn}.")}));
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("read{turn}"), "name": "Read", "input": {"file_path": format!("src/module_{turn}.rs")}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("read{turn}"), "content": "pub fn run() -> u32 { 42 }\n".repeat(150)}
        ]}));
        messages.push(json!({"role": "assistant", "content": format!("Module {turn} is fixed.")}));
    }
    messages.push(json!({"role": "user", "content": "Show me the diff."}));
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "diff", "name": "Bash", "input": {"command": "git diff"}}
    ]}));
    let diff = diff_output(diff_bytes);
    messages
        .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "diff", "content": diff}]}));
    let path = temp_dir().join(name);
    let session = json!({"model": "claude-sonnet-4-5", "system": "You are a coding agent.", "messages": messages});
    std::fs::write(&path, session.to_string()).expect("writes the session");
    (path.to_string_lossy().into_owned(), diff)
}

fn out_path(name: &str) -> String {
    temp_dir().join(name).to_string_lossy().into_owned()
}

/// The estimated tokens of every tool_result block in the conversation file `path`.
fn result_tokens(path: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(path).expect("the output file");
    let parsed = format::parse(&text, None).expect("the output parses");
    let counter = Tokenizer::Estimate.counter();
    parsed
        .conversation
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter(|block| matches!(block, Block::ToolResult(_)))
        .map(|block| count_block(counter, block))
        .collect()
}

fn count(path: &str) -> u64 {
    let run = contextfold(&["count", "--tokenizer", "estimate", path]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout.trim().parse().expect("a number")
}

fn assert_valid(path: &str) {
    let run = contextfold(&["validate", path]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

#[test]
fn compact_clips_a_2mb_last_result_to_fit_the_budget() {
    let (input, diff) = write_session("session.json", 2_000_000);
    let out = out_path("compacted.json");
    let run = contextfold(&["compact", &input, "--budget", "8000", "--tokenizer", "estimate", "-o", &out, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: Value = serde_json::from_str(run.stdout.trim()).expect("one JSON report");
    let clipped = &report["clipped"][0];
    assert_eq!(clipped["ref"], payload_ref(&Value::String(diff)).as_str(), "{report}");
    assert_eq!(clipped["tool"], "Bash");
    let (before, after) = (clipped["tokens_before"].as_u64().unwrap(), clipped["tokens_after"].as_u64().unwrap());
    assert!(before > 400_000 && after < 8_000 && after > 0, "{before} -> {after}");
    assert!(report["strategy_used"].as_str().unwrap().ends_with("clip"), "{report}");

    assert_valid(&out);
    let tokens = count(&out);
    assert!(tokens <= 8_000, "{tokens}");
    assert_eq!(tokens, report["tokens_after"].as_u64().unwrap());
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("[contextfold: clipped "));
}

#[test]
fn compact_max_tool_output_limits_every_result() {
    let (input, _) = write_session("session-max.json", 2_000_000);
    let out = out_path("compacted-max.json");
    let run = contextfold(&[
        "compact",
        &input,
        "--budget",
        "8000",
        "--max-tool-output",
        "300",
        "--tokenizer",
        "estimate",
        "-o",
        &out,
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_valid(&out);
    let tokens = result_tokens(&out);
    assert!(!tokens.is_empty());
    assert!(tokens.iter().all(|&tokens| tokens <= 300 + BLOCK_OVERHEAD), "{tokens:?}");
    assert!(count(&out) <= 8_000);
}

#[test]
fn evict_with_max_tool_output_reports_what_it_clipped() {
    let (input, diff) = write_session("session-evict.json", 2_000_000);
    let out = out_path("evicted.json");
    let run =
        contextfold(&["evict", &input, "--max-tool-output", "500", "--tokenizer", "estimate", "-o", &out, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: Value = serde_json::from_str(run.stdout.trim()).expect("one JSON report");
    let clipped = report["clipped"].as_array().expect("a clipped list");
    let diff_ref = payload_ref(&Value::String(diff));
    assert!(clipped.iter().any(|item| item["ref"] == diff_ref.as_str() && item["tool"] == "Bash"), "{report}");
    assert_valid(&out);
    assert!(result_tokens(&out).iter().all(|&tokens| tokens <= 500 + BLOCK_OVERHEAD));
    assert_eq!(count(&out), report["tokens_after"].as_u64().unwrap(), "{report}");
}
