//! End-to-end tests of `contextfold compact` over the repository's own fixtures: outputs that
//! validate and fit the budget, the `--json` report, several files and directories, the
//! output format, summarizer fallbacks and the exit codes. No test reaches the network.
//!
//! Most runs use `--tokenizer estimate`: the exact BPE is slow to start in a debug build, and
//! the numbers checked here only need to agree with `count --tokenizer estimate`.

use crate::common::{contextfold, fixture, root, scratch, Run, Scratch};
use serde_json::Value;
use std::path::Path;

/// A fresh directory of this test's own (tests run in parallel), removed when it passes.
fn temp_dir(test: &str) -> Scratch {
    scratch("compact-cli", test)
}

fn path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The single `--json` report on stdout.
fn report(run: &Run) -> Value {
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {}", run.stdout);
    serde_json::from_str(lines[0]).expect("the report is JSON")
}

fn estimate(file: &Path) -> u64 {
    let run = contextfold(&["count", "--tokenizer", "estimate", &path(file)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout.trim().parse().expect("a number")
}

const SESSION: &str = "examples/session.json";
const SWE: &str = "tests/fixtures/swe-style.json";

#[test]
fn compacts_the_example_session_to_a_valid_file_within_budget() {
    let dir = temp_dir("budget");
    let out = dir.join("out.json");
    let before = estimate(&root().join(SESSION));
    assert!(before > 3_000, "the premise: the session is over the budget ({before})");
    let run =
        contextfold(&["compact", "--tokenizer", "estimate", "--budget", "3000", "-o", &path(&out), &fixture(SESSION)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("tokens (target 3,000"), "a summary line: {}", run.stdout);
    let validated = contextfold(&["validate", &path(&out)]);
    assert_eq!(validated.code, 0, "{}{}", validated.stdout, validated.stderr);
    let after = estimate(&out);
    assert!(after <= 3_000, "{after} tokens");
    assert!(after < before);
    // The system prompt and the other request fields are kept.
    let original: Value = serde_json::from_str(&std::fs::read_to_string(fixture(SESSION)).unwrap()).unwrap();
    let compacted: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for field in ["model", "max_tokens", "system", "tools"] {
        assert_eq!(compacted[field], original[field], "{field}");
    }
}

#[test]
fn json_report_has_the_documented_fields() {
    let dir = temp_dir("json");
    let out = dir.join("out.json");
    let run = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--budget",
        "3000",
        "--json",
        "-o",
        &path(&out),
        &fixture(SESSION),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = report(&run);
    for key in [
        "file",
        "output",
        "tokens_before",
        "tokens_after",
        "target_tokens",
        "strategy_used",
        "summary_tokens",
        "offloaded",
        "items",
        "clipped",
        "fallbacks",
        "summarizer",
        "summarizer_calls",
        "cache_hit",
        "notes",
        "valid",
    ] {
        assert!(report.get(key).is_some(), "missing {key}: {report}");
    }
    assert_eq!(report["valid"], true);
    assert_eq!(report["target_tokens"], 3_000);
    assert_eq!(report["cache_hit"], false);
    assert_eq!(report["fallbacks"], Value::Array(Vec::new()));
    assert_eq!(report["summarizer"], "extractive/v1");
    assert_eq!(report["tokens_after"].as_u64(), Some(estimate(&out)), "the report counts what was written");
    assert!(report["tokens_before"].as_u64() > report["tokens_after"].as_u64());
    let strategy = report["strategy_used"].as_str().expect("a string");
    assert!(strategy.contains("summarize"), "{strategy}");
    assert!(report["summary_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
    assert_eq!(report["summarizer_calls"], 1);
    let items = report["items"].as_array().expect("an array");
    assert_eq!(report["offloaded"].as_u64(), Some(items.len() as u64));
    if strategy.contains("evict") {
        assert!(!items.is_empty());
    }
    for item in items {
        assert!(item["ref"].as_str().is_some_and(|reference| !reference.is_empty()), "items[].ref: {item}");
    }
}

#[test]
fn dry_run_writes_nothing() {
    let dir = temp_dir("dry-run");
    let out = dir.join("out.json");
    let run = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--budget",
        "3000",
        "--dry-run",
        "-o",
        &path(&out),
        &fixture(SESSION),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!out.exists(), "--dry-run wrote {}", out.display());
    assert!(run.stdout.contains("tokens (target 3,000"), "the report is still shown: {}", run.stdout);
    let json = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--budget",
        "3000",
        "--dry-run",
        "--json",
        &fixture(SESSION),
    ]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let report = report(&json);
    assert!(report.get("output").is_none(), "no output with --dry-run: {report}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the directory stays empty");
}

#[test]
fn window_reserve_and_target_set_the_target() {
    let run = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--window",
        "20000",
        "--reserve",
        "4000",
        "--target",
        "0.25",
        "--dry-run",
        "--json",
        &fixture(SESSION),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = report(&run);
    // A quarter of the room the system prompt and tools (392 tokens) leave of the 16,000
    // usable, plus them: 392 + 0.25 × 15,608.
    assert_eq!(report["target_tokens"], 4_294);
    assert!(report["tokens_after"].as_u64().is_some_and(|tokens| tokens <= 4_294), "{report}");
    // Without a budget or window, the target is half the input.
    let run = contextfold(&["compact", "--tokenizer", "estimate", "--dry-run", "--json", &fixture(SESSION)]);
    let report = self::report(&run);
    assert_eq!(report["target_tokens"].as_u64(), report["tokens_before"].as_u64().map(|tokens| tokens / 2));
    // --budget and --window exclude each other.
    let run = contextfold(&["compact", "--budget", "3000", "--window", "20000", &fixture(SESSION)]);
    assert_eq!(run.code, 2);
}

#[test]
fn several_files_need_an_out_dir() {
    let run =
        contextfold(&["compact", "--tokenizer", "estimate", "--budget", "3000", &fixture(SESSION), &fixture(SWE)]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("--out-dir"), "{}", run.stderr);
    assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
    // -o takes one file.
    let dir = temp_dir("several-o");
    let run = contextfold(&[
        "compact",
        "--budget",
        "3000",
        "-o",
        &path(&dir.join("x.json")),
        &fixture(SESSION),
        &fixture(SWE),
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--out-dir"), "{}", run.stderr);
}

/// Checks a `compact --out-dir` run over the session and the SWE fixture.
fn check_out_dir(run: &Run, out_dir: &Path) {
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut written: Vec<String> = std::fs::read_dir(out_dir)
        .expect("the output directory exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["session.json", "swe-style.json"]);
    for name in &written {
        let file = out_dir.join(name);
        assert_eq!(contextfold(&["validate", &path(&file)]).code, 0, "{name} validates");
        assert!(estimate(&file) <= 3_000, "{name} fits");
    }
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("file"), "a table header: {}", run.stdout);
    assert!(lines.iter().any(|line| line.starts_with("2 files")), "a total line: {}", run.stdout);
    assert!(
        lines.iter().any(|line| line.contains("session.json")) && lines.iter().any(|line| line.contains("swe-style"))
    );
}

#[test]
fn several_files_go_to_the_out_dir_with_a_table() {
    let dir = temp_dir("out-dir");
    let out_dir = dir.join("out");
    let run = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--budget",
        "3000",
        "--out-dir",
        &path(&out_dir),
        &fixture(SESSION),
        &fixture(SWE),
    ]);
    check_out_dir(&run, &out_dir);
}

#[test]
fn a_directory_argument_compacts_its_conversation_files() {
    let dir = temp_dir("directory");
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::copy(fixture(SESSION), input.join("session.json")).unwrap();
    std::fs::copy(fixture(SWE), input.join("swe-style.json")).unwrap();
    // Neither is a conversation: the manifest and other files are skipped.
    std::fs::write(input.join("manifest.json"), "{\"sessions\": []}").unwrap();
    std::fs::write(input.join("notes.txt"), "not a conversation").unwrap();
    let out_dir = dir.join("out");
    let run = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--budget",
        "3000",
        "--out-dir",
        &path(&out_dir),
        &path(&input),
    ]);
    check_out_dir(&run, &out_dir);
    // An empty directory is an error that names it.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let run = contextfold(&["compact", "--out-dir", &path(&out_dir), &path(&empty)]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains(&path(&empty)), "{}", run.stderr);
}

#[test]
fn the_output_has_the_input_format() {
    let dir = temp_dir("format");
    let openai = dir.join("session.openai.json");
    let run = contextfold(&["convert", &fixture(SESSION), "--to", "openai", "-o", &path(&openai)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = dir.join("out.json");
    let run =
        contextfold(&["compact", "--tokenizer", "estimate", "--budget", "3000", "-o", &path(&out), &path(&openai)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("JSON");
    let messages = value["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], "system", "OpenAI keeps the system prompt as a message");
    assert!(value.get("system").is_none(), "no Anthropic `system` field");
    assert!(messages.iter().any(|message| message["role"] == "tool"), "tool results as `tool` messages");
    let blocks = messages.iter().flat_map(|message| message["content"].as_array().cloned().unwrap_or_default());
    assert!(blocks.clone().all(|block| block["type"] != "tool_use" && block["type"] != "tool_result"));
    assert_eq!(contextfold(&["validate", &path(&out)]).code, 0);
    assert!(estimate(&out) <= 3_000);
    // Written as Anthropic, for comparison: the same conversation.
    let anthropic = dir.join("back.json");
    let run = contextfold(&["convert", &path(&out), "--to", "anthropic", "-o", &path(&anthropic)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&anthropic).unwrap()).unwrap();
    assert!(back["messages"][0]["content"].to_string().contains("[contextfold: summary of the earlier conversation]"));
}

#[test]
fn anthropic_without_a_key_falls_back_under_auto_and_fails_under_summarize() {
    let dir = temp_dir("anthropic");
    let out = dir.join("out.json");
    let args = |strategy: &'static str| {
        vec![
            "compact".to_string(),
            "--tokenizer".into(),
            "estimate".into(),
            "--budget".into(),
            "3000".into(),
            "--summarizer".into(),
            "anthropic".into(),
            "--strategy".into(),
            strategy.into(),
            "-o".into(),
            path(&out),
            fixture(SESSION),
        ]
    };
    let auto = args("auto");
    let run = contextfold(&auto.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("ANTHROPIC_API_KEY"), "{}", run.stderr);
    assert!(run.stderr.contains("warning"), "{}", run.stderr);
    assert!(run.stderr.contains("extractive"), "{}", run.stderr);
    assert_eq!(contextfold(&["validate", &path(&out)]).code, 0);
    std::fs::remove_file(&out).unwrap();

    let summarize = args("summarize");
    let run = contextfold(&summarize.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("ANTHROPIC_API_KEY"), "{}", run.stderr);
    assert!(!out.exists(), "nothing is written when the summarizer cannot run");
}

/// A local port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds a port");
    listener.local_addr().expect("an address").port()
}

#[test]
fn an_unreachable_openai_server_falls_back_to_extractive_under_auto() {
    let base_url = format!("http://127.0.0.1:{}/v1", closed_port());
    let run = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--budget",
        "3000",
        "--summarizer",
        "openai",
        "--base-url",
        &base_url,
        "--max-retries",
        "0",
        "--strategy",
        "auto",
        "--dry-run",
        "--json",
        &fixture(SESSION),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = report(&run);
    let fallbacks = report["fallbacks"].as_array().expect("fallbacks");
    assert_eq!(fallbacks.len(), 1, "{report}");
    assert_eq!(fallbacks[0]["to"], "extractive/v1");
    assert!(fallbacks[0]["from"].as_str().is_some_and(|from| from.starts_with("openai")), "{}", fallbacks[0]);
    let reason = fallbacks[0]["reason"].as_str().expect("a reason");
    assert!(reason.contains("cannot reach") && reason.contains(&base_url), "{reason}");
    assert_eq!(report["summarizer"], "extractive/v1");
    assert_eq!(report["valid"], true);
    assert!(report["tokens_after"].as_u64().is_some_and(|tokens| tokens <= 3_000));
}

#[test]
fn an_unknown_summarizer_is_a_usage_error() {
    for strategy in ["summarize", "auto"] {
        let run = contextfold(&[
            "compact",
            "--tokenizer",
            "estimate",
            "--budget",
            "3000",
            "--summarizer",
            "bogus",
            "--strategy",
            strategy,
            "--dry-run",
            &fixture(SESSION),
        ]);
        assert_eq!(run.code, 2, "--strategy {strategy}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("unknown summarizer `bogus`"), "{}", run.stderr);
    }
}

#[test]
fn an_unknown_strategy_is_a_usage_error() {
    let run = contextfold(&["compact", "--strategy", "bogus", &fixture(SESSION)]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("bogus"), "{}", run.stderr);
    assert!(run.stderr.contains("auto, evict or summarize"), "{}", run.stderr);
}

#[test]
fn a_malformed_file_is_an_input_error_naming_it() {
    let bad = fixture("tests/fixtures/malformed/bad-json.json");
    let run = contextfold(&["compact", "--tokenizer", "estimate", "--budget", "3000", "--dry-run", &bad]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("bad-json.json"), "{}", run.stderr);
    assert!(run.stderr.contains("invalid JSON at line 4, column 3"), "{}", run.stderr);
    // With good files alongside, the good ones are still compacted, and the run exits 2.
    let dir = temp_dir("malformed");
    let out_dir = dir.join("out");
    let run = contextfold(&[
        "compact",
        "--tokenizer",
        "estimate",
        "--budget",
        "3000",
        "--out-dir",
        &path(&out_dir),
        &fixture(SESSION),
        &bad,
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("bad-json.json"), "{}", run.stderr);
    assert!(out_dir.join("session.json").exists());
    assert!(!out_dir.join("bad-json.json").exists());
}

/// Below the smallest budget that holds a summary and the newest turn, `compact` exits 2
/// naming that budget instead of folding the conversation into an empty summary; at that
/// budget it works.
#[test]
fn a_budget_too_small_for_any_summary_exits_2_naming_the_smallest_workable_budget() {
    let session = fixture(SESSION);
    let run = contextfold(&["compact", &session, "--budget", "300", "--tokenizer", "estimate", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "nothing is written: {}", run.stdout);
    assert_eq!(run.stderr.lines().count(), 1, "one sentence: {}", run.stderr);
    let (_, rest) = run.stderr.split_once("the smallest workable target is ").expect(&run.stderr);
    let smallest: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
    assert!(smallest > 300, "{}", run.stderr);
    assert!(run.stderr.contains("examples/session.json"), "names the file: {}", run.stderr);
    let works =
        contextfold(&["compact", &session, "--budget", &smallest.to_string(), "--tokenizer", "estimate", "--json"]);
    assert_eq!(works.code, 0, "{}", works.stderr);
    let report = report(&works);
    assert!(report["summary_tokens"].as_u64().unwrap() > 0, "{report}");
    assert!(report["tokens_after"].as_u64().unwrap() <= smallest, "{report}");
}

/// A budget or window of 0, or a reserve at or above the window, is a usage error.
#[test]
fn zero_budgets_windows_and_reserves_over_the_window_are_usage_errors() {
    let session = fixture(SESSION);
    for (args, says) in [
        (&["--budget", "0"][..], "a budget of 0 tokens"),
        (&["--window", "0"][..], "a window of 0 tokens"),
        (
            &["--window", "20k", "--reserve", "30k"][..],
            "reserve of 30000 tokens leaves nothing of the 20000-token window",
        ),
        (&["--window", "20k", "--reserve", "20k"][..], "reserve of 20000 tokens leaves nothing"),
        (&["--window", "20k", "--target", "0"][..], "must be a fraction above 0"),
    ] {
        let mut all = vec!["compact", session.as_str(), "--json"];
        all.extend_from_slice(args);
        let run = contextfold(&all);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
    }
}
