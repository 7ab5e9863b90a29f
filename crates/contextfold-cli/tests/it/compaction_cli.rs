//! End-to-end tests of `contextfold plan`, `evict` and `render` over the repository's own
//! fixtures: the documented `--json` fields, the consistency of their numbers, and the exit
//! codes.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The fixtures every test runs on.
const SESSIONS: [&str; 2] = ["examples/session.json", "tests/fixtures/swe-style.json"];

/// The presets `--preset` accepts.
const PRESETS: [&str; 6] = ["auto", "claude-code", "codex", "openhands", "swe-agent", "generic"];

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("contextfold-compaction-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn read_json(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("readable")).expect("JSON")
}

/// The messages of a request object or a bare array.
fn messages(value: &Value) -> &Vec<Value> {
    value.get("messages").unwrap_or(value).as_array().expect("a messages array")
}

/// Blocks per message (a string `content` is one block).
fn block_counts(value: &Value) -> Vec<usize> {
    messages(value)
        .iter()
        .map(|message| match &message["content"] {
            Value::Array(blocks) => blocks.len(),
            _ => 1,
        })
        .collect()
}

fn u64_at(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no number at {pointer} in {value}"))
}

#[test]
fn plan_json_has_the_documented_fields_and_they_add_up() {
    for (file, budget) in [("examples/session.json", "2000"), ("tests/fixtures/swe-style.json", "150")] {
        let path = fixture(file);
        let total_messages = messages(&read_json(&path)).len() as u64;
        let plan = json(&[
            "plan",
            "--json",
            "--tokenizer",
            "estimate",
            "--max-tail-tokens",
            budget,
            "--min-progress",
            "0",
            &path,
        ]);
        assert!(plan["file"].as_str().is_some_and(|name| name.ends_with(file)), "{plan}");
        let index = u64_at(&plan, "/cut/index");
        assert!(
            matches!(plan["cut"]["kind"].as_str(), Some("turn_start" | "tool_cycle")),
            "{file}: {}",
            plan["cut"]["kind"]
        );
        let (head, tail, pinned, total) = (
            u64_at(&plan, "/head_tokens"),
            u64_at(&plan, "/tail_tokens"),
            u64_at(&plan, "/pinned_tokens"),
            u64_at(&plan, "/message_tokens"),
        );
        let parts = u64_at(&plan, "/system_tokens") + u64_at(&plan, "/tools_tokens") + total;
        assert_eq!(u64_at(&plan, "/total_tokens"), parts, "{file}: the total is system + tools + messages");
        assert!(index > 0 && index < total_messages, "{file}: cut {index} of {total_messages}");
        assert_eq!(u64_at(&plan, "/tail_messages"), total_messages - index, "{file}");
        // The pinned first request is neither head nor tail.
        assert_eq!(u64_at(&plan, "/head_messages") + 1, index, "{file}");
        assert!(pinned > 0, "{file}: the first request is pinned by default");
        assert_eq!(head + tail + pinned, total, "{file}: head + tail + pinned first request");
        let max_tail = u64_at(&plan, "/max_tail_tokens");
        assert!(max_tail <= budget.parse().unwrap(), "{file}: tail budget {max_tail} over --max-tail-tokens {budget}");
        assert!(tail <= max_tail, "{file}: tail of {tail} over its budget of {max_tail}");
        assert_eq!(plan["notes"], Value::Array(Vec::new()), "{file}");
        assert_eq!(plan["previous_summary"], false);

        // The plan's eviction preview is what `evict` with its defaults does.
        let evict = json(&["evict", "--json", "--tokenizer", "estimate", &path]);
        assert_eq!(
            u64_at(&plan, "/evict/tokens_freed"),
            u64_at(&evict, "/tokens_before") - u64_at(&evict, "/tokens_after"),
            "{file}"
        );
        assert_eq!(plan["evict"]["offloaded"], evict["offloaded"], "{file}");
        assert_eq!(plan["evict"]["by_reason"], evict["by_reason"], "{file}");

        // The text report says the same.
        let text = contextfold(&[
            "plan",
            "--tokenizer",
            "estimate",
            "--max-tail-tokens",
            budget,
            "--min-progress",
            "0",
            &path,
        ]);
        assert_eq!(text.code, 0, "{}", text.stderr);
        let kind = plan["cut"]["kind"].as_str().unwrap().replace('_', " ");
        assert!(text.stdout.contains(&format!("  cut before message {index} ({kind})\n")), "{}", text.stdout);
        assert!(text.stdout.contains(&format!("  tail: {} messages, ", total_messages - index)), "{}", text.stdout);
        assert!(text.stdout.contains("  pinned first request: "), "{}", text.stdout);
        assert!(text.stdout.contains("  eviction would free "), "{}", text.stdout);
    }
}

#[test]
fn plan_keep_turns_keeps_the_last_turn() {
    let path = fixture("examples/session.json");
    let session = read_json(&path);
    let last_turn = messages(&session)
        .iter()
        .rposition(|message| {
            message["role"] == "user"
                && match &message["content"] {
                    Value::String(_) => true,
                    Value::Array(blocks) => blocks.iter().all(|block| block["type"] != "tool_result"),
                    _ => false,
                }
        })
        .expect("a user turn");
    // The earliest cut that keeps the last turn and whose tail fits compact's tail budget.
    let plan = json(&["plan", "--json", "--tokenizer", "estimate", "--keep-turns", "1", &path]);
    assert!(u64_at(&plan, "/cut/index") <= last_turn as u64, "{plan}");
    assert!(u64_at(&plan, "/tail_tokens") <= u64_at(&plan, "/max_tail_tokens"), "{plan}");
}

#[test]
fn plan_without_a_cut_says_why() {
    for file in SESSIONS {
        // Within its budget, compact cuts nothing, and plan says so.
        let plan = json(&["plan", "--json", "--tokenizer", "estimate", "--budget", "1m", &fixture(file)]);
        assert_eq!(plan["cut"], Value::Null, "{file}: {plan}");
        assert!(
            plan["reason"].as_str().is_some_and(|reason| reason.ends_with("are within the budget of 1,000,000")),
            "{plan}"
        );
        assert!(plan["evict"]["tokens_freed"].is_u64(), "{plan}");
        let plan = json(&["plan", "--json", "--tokenizer", "estimate", "--keep-turns", "100", &fixture(file)]);
        assert!(plan["reason"].as_str().is_some_and(|reason| reason.contains("leaves nothing to fold")), "{plan}");
        let text = contextfold(&["plan", "--tokenizer", "estimate", "--budget", "1m", &fixture(file)]);
        assert_eq!(text.code, 0);
        assert!(text.stdout.contains("\n  no cut: "), "{}", text.stdout);
    }
    // A tail budget of one token cannot be met: the plan says so in a note.
    let plan = json(&[
        "plan",
        "--json",
        "--tokenizer",
        "estimate",
        "--keep-tokens",
        "1",
        "--min-progress",
        "0",
        &fixture("examples/session.json"),
    ]);
    let notes = plan["notes"].as_array().expect("notes");
    assert!(notes.iter().any(|note| note.as_str().is_some_and(|note| note.contains("over the budget of 1"))), "{plan}");
}

#[test]
fn evict_json_has_the_documented_fields_and_they_add_up() {
    for file in SESSIONS {
        let report = json(&["evict", "--json", "--tokenizer", "estimate", "--keep", "0", &fixture(file)]);
        let (before, after) = (u64_at(&report, "/tokens_before"), u64_at(&report, "/tokens_after"));
        let items = report["items"].as_array().expect("items");
        assert!(!items.is_empty(), "{file}: something is evictable with --keep 0");
        assert_eq!(u64_at(&report, "/offloaded"), items.len() as u64, "{file}");
        let by_reason = report["by_reason"].as_object().expect("by_reason");
        assert_eq!(by_reason.values().filter_map(Value::as_u64).sum::<u64>(), items.len() as u64, "{file}");
        let mut freed = 0;
        for item in items {
            assert!(item["ref"].as_str().is_some_and(|reference| reference.starts_with("cf-")), "{item}");
            assert!(item["tool"].as_str().is_some_and(|tool| !tool.is_empty()), "{item}");
            assert!(
                matches!(
                    item["kind"].as_str(),
                    Some("file_read" | "file_write" | "file_edit" | "search" | "shell" | "web_fetch" | "other")
                ),
                "{item}"
            );
            let reason = item["reason"].as_str().expect("a reason");
            assert!(matches!(reason, "superseded" | "stale" | "duplicate" | "age" | "input"), "{item}");
            assert!(by_reason.contains_key(reason), "{item}");
            let (tokens, item_freed) = (u64_at(item, "/tokens"), u64_at(item, "/freed"));
            assert!(item_freed > 0 && item_freed < tokens, "{item}");
            freed += item_freed;
        }
        assert_eq!(before - after, freed, "{file}: freed tokens add up");
        assert_eq!(report["thinking_cleared"], 0);
        assert_eq!(report["skipped"], Value::Null);
    }
    // A threshold that cannot be met evicts nothing and says why.
    let report = json(&[
        "evict",
        "--json",
        "--tokenizer",
        "estimate",
        "--keep",
        "0",
        "--clear-at-least",
        "1000000",
        &fixture("examples/session.json"),
    ]);
    assert_eq!(report["offloaded"], 0);
    assert_eq!(report["tokens_before"], report["tokens_after"]);
    assert!(
        report["skipped"].as_str().is_some_and(|why| why.contains("less than the minimum of 1,000,000")),
        "{report}"
    );
    // Excluding the tool of every offload leaves none of its results evicted.
    let report = json(&[
        "evict",
        "--json",
        "--tokenizer",
        "estimate",
        "--keep",
        "0",
        "--exclude-tool",
        "Read",
        &fixture("examples/session.json"),
    ]);
    let items = report["items"].as_array().expect("items");
    assert!(!items.is_empty());
    assert!(items.iter().all(|item| item["tool"] != "Read"), "{report}");
}

#[test]
fn evict_output_is_valid_with_the_same_blocks() {
    let dir = temp_dir();
    for file in SESSIONS {
        let input = fixture(file);
        let out = dir.join(Path::new(file).file_name().unwrap());
        let out = out.to_string_lossy().into_owned();
        let run = contextfold(&[
            "evict",
            "--keep",
            "0",
            "--clear-inputs-over",
            "20",
            "--tokenizer",
            "o200k",
            "-o",
            &out,
            &input,
        ]);
        assert_eq!(run.code, 0, "{file}: {}", run.stderr);
        assert!(run.stderr.contains(": evicted "), "{file}: the report goes to stderr: {}", run.stderr);
        assert_eq!(run.stdout, "", "{file}: with -o nothing goes to stdout");

        let validate = contextfold(&["validate", &out]);
        assert_eq!(validate.code, 0, "{file}: {}{}", validate.stdout, validate.stderr);
        let (original, evicted) = (read_json(&input), read_json(&out));
        assert_eq!(block_counts(&evicted), block_counts(&original), "{file}: eviction removes no block");
        assert_eq!(original.is_array(), evicted.is_array(), "{file}: the layout is kept");
        assert_ne!(original, evicted, "{file}: something was evicted");
        assert!(std::fs::read_to_string(&out).unwrap().contains("[contextfold: offloaded "), "{file}");

        // The written conversation counts what the report said it would.
        let report =
            json(&["evict", "--json", "--keep", "0", "--clear-inputs-over", "20", "--tokenizer", "o200k", &input]);
        let count = contextfold(&["count", "--tokenizer", "o200k", &out]);
        assert_eq!(count.code, 0, "{}", count.stderr);
        assert_eq!(count.stdout.trim().parse::<u64>().expect("a number"), u64_at(&report, "/tokens_after"), "{file}");

        // Evicting the output again finds no pointer to offload twice.
        let again =
            json(&["evict", "--json", "--keep", "0", "--clear-inputs-over", "20", "--tokenizer", "o200k", &out]);
        let refs: Vec<&Value> = report["items"].as_array().unwrap().iter().map(|item| &item["ref"]).collect();
        for item in again["items"].as_array().unwrap() {
            assert!(!refs.contains(&&item["ref"]), "{file}: re-offloaded {item}");
        }
    }
    // Without -o and --json, the evicted conversation goes to stdout.
    let run = contextfold(&["evict", &fixture("tests/fixtures/swe-style.json")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let value: Value = serde_json::from_str(&run.stdout).expect("stdout is the conversation");
    assert_eq!(block_counts(&value), block_counts(&read_json(&fixture("tests/fixtures/swe-style.json"))));
}

#[test]
fn every_preset_is_accepted_and_an_unknown_one_is_rejected() {
    for file in SESSIONS {
        for preset in PRESETS {
            let report = json(&[
                "evict",
                "--json",
                "--tokenizer",
                "estimate",
                "--keep",
                "0",
                "--preset",
                preset,
                &fixture(file),
            ]);
            assert!(report["offloaded"].is_u64(), "{preset}: {report}");
        }
    }
    // The agent's own preset recognises its file reads.
    let swe = json(&[
        "evict",
        "--json",
        "--tokenizer",
        "estimate",
        "--keep",
        "100",
        "--preset",
        "swe-agent",
        &fixture("tests/fixtures/swe-style.json"),
    ]);
    assert!(swe["items"].as_array().unwrap().iter().any(|item| item["kind"] == "file_read"), "{swe}");

    for bad in ["bogus", "Claude-Code", ""] {
        let run = contextfold(&["evict", "--json", "--preset", bad, &fixture("examples/session.json")]);
        assert_eq!(run.code, 2, "--preset {bad:?}");
        assert!(run.stderr.contains("--preset"), "{}", run.stderr);
        assert_eq!(run.stdout, "");
    }
    let run = contextfold(&["evict", "--preset", "bogus", &fixture("examples/session.json")]);
    assert!(
        run.stderr.contains("expected auto, claude-code, codex, openhands, swe-agent or generic"),
        "{}",
        run.stderr
    );
}

#[test]
fn render_fits_its_budget_in_o200k_tokens() {
    for file in SESSIONS {
        let mut previous = 0;
        for budget in [0u64, 20, 400, 100_000] {
            let run = contextfold(&["render", "--budget", &budget.to_string(), "--tokenizer", "o200k", &fixture(file)]);
            assert_eq!(run.code, 0, "{file} {budget}: {}", run.stderr);
            let count = contextfold_with_stdin(&["count", "--text", "--tokenizer", "o200k"], run.stdout.as_bytes());
            assert_eq!(count.code, 0, "{}", count.stderr);
            let tokens: u64 = count.stdout.trim().parse().expect("a number");
            assert!(tokens <= budget, "{file}: rendered {tokens} tokens for a budget of {budget}");
            assert!(tokens >= previous, "{file}: a larger budget gave a shorter transcript");
            previous = tokens;
        }
        let full = contextfold(&["render", "--budget", "100000", "--tokenizer", "estimate", &fixture(file)]);
        assert!(full.stdout.starts_with("[user]\n"), "{file}: {}", full.stdout);
        assert!(full.stdout.contains("[tool result: "), "{file}");
        assert!(full.stdout.contains("<tool_output>\n"), "{file}");
    }
}

#[test]
fn bad_inputs_exit_2() {
    let malformed = fixture("tests/fixtures/malformed/bad-json.json");
    let unknown_role = fixture("tests/fixtures/malformed/unknown-role.json");
    for command in ["plan", "evict", "render"] {
        for (path, expected) in [
            (malformed.as_str(), "invalid JSON at line 4, column 3"),
            (unknown_role.as_str(), "unknown role `robot`"),
            ("/nonexistent/session.json", "/nonexistent/session.json"),
        ] {
            let run = contextfold(&[command, path]);
            assert_eq!(run.code, 2, "{command} {path}");
            assert!(run.stderr.contains(expected), "{command} {path}: {}", run.stderr);
            assert_eq!(run.stdout, "", "{command} {path}");
        }
        let run = contextfold_with_stdin(&[command, "-"], b"{\"messages\": 3}");
        assert_eq!(run.code, 2, "{command} on a non-array `messages`");
    }
    let session = fixture("examples/session.json");
    for args in [
        vec!["render", "--budget", "abc", &session],
        vec!["render", "--budget", "-5", &session],
        vec!["plan", "--min-progress", "2", &session],
        vec!["plan", "--keep-turns", "many", &session],
        vec!["evict", "--keep", "-1", &session],
        vec!["evict", "--tokenizer", "gpt2", &session],
        vec!["plan"],
    ] {
        let run = contextfold(&args);
        assert_eq!(run.code, 2, "{args:?}");
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
}
