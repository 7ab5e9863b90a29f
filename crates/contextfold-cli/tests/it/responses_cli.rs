//! End-to-end: a recorded Codex (Responses API) session is measured, checked, converted,
//! compacted and replayed offline, autodetected; the Responses rules name the input item.

use crate::common::{arg, contextfold, fixture, json, scratch};
use serde_json::Value;

const CODEX: &str = "tests/fixtures/codex-responses.json";

#[test]
fn stats_and_validate_read_a_codex_session() {
    let stats = json(&["stats", "--json", "--tokenizer", "estimate", &fixture(CODEX)]);
    assert_eq!(stats["format"], "responses");
    assert_eq!(stats["tool_calls"], 6);
    assert_eq!(stats["tool_calls_by_tool"]["apply_patch"], 1);
    let report = json(&["validate", "--json", &fixture(CODEX)]);
    assert_eq!(report["valid"], true, "{report}");
}

#[test]
fn validate_names_the_input_item_and_the_responses_rules() {
    let dir = scratch("responses", "validate");
    let mut request: Value = serde_json::from_str(&std::fs::read_to_string(fixture(CODEX)).unwrap()).unwrap();
    let input = request["input"].as_array_mut().expect("input items");
    // Drop the output of the last call (item 20) and the call after the first reasoning item,
    // whose output is then an orphan.
    input.truncate(20);
    input.remove(5);
    let file = dir.join("broken.json");
    std::fs::write(&file, serde_json::to_string(&request).unwrap()).unwrap();
    let run = contextfold(&["validate", &arg(&file)]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("(input item 5) [orphan-result]"), "{}", run.stdout);
    assert!(
        run.stdout.contains(
            "a reasoning item must be followed by the message or call it produced (input item 4) [lone-reasoning]"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "tool_use `call_Yc3v9n1Tq7Pa` (shell) has no tool_result in message 12 (input item 17) [dangling-use]"
        ),
        "{}",
        run.stdout
    );
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"input": [{"type": "function_call", "name": "shell", "arguments": "{}"}]}"#).unwrap();
    let run = contextfold(&["validate", &arg(&bad)]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("input item 0: the function_call item has no `call_id`"), "{}", run.stderr);
}

#[test]
fn convert_goes_to_anthropic_and_back_with_every_call() {
    let dir = scratch("responses", "convert");
    let anthropic = dir.join("anthropic.json");
    let back = dir.join("back.json");
    assert_eq!(contextfold(&["convert", &fixture(CODEX), "--to", "anthropic", "-o", &arg(&anthropic)]).code, 0);
    assert_eq!(contextfold(&["convert", &arg(&anthropic), "--to", "responses", "-o", &arg(&back)]).code, 0);
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&anthropic).unwrap()).unwrap();
    assert!(value["messages"].is_array() && value.get("input").is_none());
    let calls = |file: &std::path::Path| {
        json(&["stats", "--json", "--tokenizer", "estimate", &arg(file)])["tool_calls"].clone()
    };
    assert_eq!(calls(&anthropic), 6);
    assert_eq!(calls(&back), 6);
    assert_eq!(json(&["validate", "--json", &arg(&back)])["valid"], true);
}

#[test]
fn compact_writes_a_valid_responses_request() {
    let dir = scratch("responses", "compact");
    let out = dir.join("compacted.json");
    let report =
        json(&["compact", "--json", "--tokenizer", "estimate", "--budget", "600", &fixture(CODEX), "-o", &arg(&out)]);
    assert_eq!(report["valid"], true, "{report}");
    assert!(report["tokens_after"].as_u64() < report["tokens_before"].as_u64(), "{report}");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let items = value["input"].as_array().expect("a Responses request");
    assert_eq!(items[0]["role"], "developer", "the developer message stays first");
    assert!(value["instructions"].as_str().is_some_and(|text| text.starts_with("You are Codex")));
    for key in ["model", "tools", "reasoning", "include", "prompt_cache_key", "store"] {
        assert!(value.get(key).is_some(), "`{key}` is kept");
    }
    assert_eq!(json(&["validate", "--json", &arg(&out)])["valid"], true);
}

#[test]
fn replay_reads_a_codex_session() {
    let run = contextfold(&[
        "replay",
        "--json",
        "--tokenizer",
        "estimate",
        "--window",
        "2k",
        "--reserve",
        "0",
        "--strategies",
        "none,contextfold",
        &fixture(CODEX),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(rows[0]["steps"], 6, "one step per assistant message: {rows}");
}
