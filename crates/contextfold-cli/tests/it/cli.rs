//! End-to-end tests of the `contextfold` binary over the repository's own fixtures.

use crate::common::*;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("contextfold-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn stats_reports_the_example_session() {
    let run = contextfold(&["stats", &fixture("examples/session.json")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("messages 44, user turns 3, tool calls 24"), "{}", run.stdout);
    assert!(run.stdout.contains("largest tool results:"));
    assert!(run.stdout.contains("  valid"));
}

#[test]
fn stats_json_has_the_documented_fields() {
    let run = contextfold(&[
        "stats",
        "--json",
        "--tokenizer",
        "chars4",
        &fixture("examples/session.json"),
        &fixture("tests/fixtures/swe-style.json"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<Value> = run.stdout.lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect();
    assert_eq!(lines.len(), 2);
    let first = &lines[0];
    for key in ["file", "messages", "turns", "tool_calls", "tokenizer", "valid", "problems"] {
        assert!(first.get(key).is_some(), "missing {key}");
    }
    for key in ["total", "by_role", "by_block", "by_tool"] {
        assert!(first["tokens"].get(key).is_some(), "missing tokens.{key}");
    }
    assert_eq!(first["tokenizer"], "chars4");
    assert_eq!(first["messages"], 44);
    assert_eq!(lines[1]["tool_calls"], 5);
    assert_eq!(lines[1]["tokens"]["by_tool"].as_object().map(|tools| tools.len()), Some(1));
}

#[test]
fn validate_accepts_valid_sessions() {
    for file in ["examples/session.json", "tests/fixtures/swe-style.json"] {
        let run = contextfold(&["validate", &fixture(file)]);
        assert_eq!(run.code, 0, "{file}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.ends_with(": valid\n"));
    }
}

#[test]
fn validate_reports_each_broken_rule_and_repair_fixes_it() {
    let dir = temp_dir();
    for (file, rule) in [
        ("dangling-use.json", "dangling-use"),
        ("orphan-result.json", "orphan-result"),
        ("alternation.json", "alternation"),
        ("result-not-first.json", "result-not-first"),
        ("first-not-user.json", "first-not-user"),
        ("empty-text.json", "empty-text"),
        ("duplicate-id.json", "duplicate-id"),
    ] {
        let path = fixture(&format!("tests/fixtures/invalid/{file}"));
        let run = contextfold(&["validate", &path]);
        assert_eq!(run.code, 1, "{file}");
        assert!(run.stdout.contains(&format!("[{rule}]")), "{file}: {}", run.stdout);

        let json = contextfold(&["validate", "--json", &path]);
        let report: Value = serde_json::from_str(json.stdout.trim()).expect("JSON");
        assert_eq!(report["valid"], false);
        assert_eq!(report["problems"][0]["rule"], rule);

        let out = dir.join(file);
        let out = out.to_string_lossy();
        let repaired = contextfold(&["validate", "--repair", "-o", &out, &path]);
        assert_eq!(repaired.code, 0, "{file}: {}", repaired.stdout);
        assert!(repaired.stdout.contains("fixed:"), "{file}: {}", repaired.stdout);
        assert_eq!(contextfold(&["validate", &out]).code, 0, "{file}: repaired output is valid");
    }
}

#[test]
fn repair_to_stdout_keeps_the_report_on_stderr() {
    let run = contextfold(&["validate", "--repair", "-o", "-", &fixture("tests/fixtures/invalid/dangling-use.json")]);
    assert_eq!(run.code, 0);
    let value: Value = serde_json::from_str(&run.stdout).expect("stdout is the conversation");
    assert_eq!(value["messages"][2]["content"][1]["is_error"], true);
    assert!(run.stderr.contains("fixed:"));
}

#[test]
fn malformed_input_is_a_one_line_error_with_exit_2() {
    for (file, expected) in [
        ("bad-json.json", "invalid JSON at line 4, column 3"),
        ("unknown-role.json", "message 1: unknown role `robot`"),
        ("missing-id.json", "message 1, block 0: tool_use block is missing the required field `id`"),
        ("no-messages.json", "no `messages` array"),
        ("binary.json", "not UTF-8 text at line 2, column 118"),
    ] {
        let path = fixture(&format!("tests/fixtures/malformed/{file}"));
        for command in ["stats", "validate", "count"] {
            let run = contextfold(&[command, &path]);
            assert_eq!(run.code, 2, "{command} {file}");
            assert!(run.stderr.contains(file), "{command} {file}: {}", run.stderr);
            assert!(run.stderr.contains(expected), "{command} {file}: {}", run.stderr);
            assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
        }
    }
    let run = contextfold(&["stats", "/nonexistent/session.json"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("/nonexistent/session.json"));
}

#[test]
fn deeply_nested_and_huge_input_does_not_panic() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let run = contextfold_with_stdin(&["stats", "-"], deep.as_bytes());
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("<stdin>"), "{}", run.stderr);

    let big_text = "x".repeat(5 << 20);
    let big = serde_json::json!([{"role": "user", "content": big_text}]).to_string();
    let run = contextfold_with_stdin(&["count", "--tokenizer", "chars4", "-"], big.as_bytes());
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn convert_round_trips_through_openai() {
    let dir = temp_dir();
    let openai = dir.join("session.openai.json");
    let back = dir.join("session.back.json");
    let run =
        contextfold(&["convert", &fixture("examples/session.json"), "--to", "openai", "-o", &openai.to_string_lossy()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let converted: Value = serde_json::from_str(&std::fs::read_to_string(&openai).unwrap()).unwrap();
    assert_eq!(converted["messages"][0]["role"], "system");
    let run = contextfold(&["convert", &openai.to_string_lossy(), "--to", "anthropic", "-o", &back.to_string_lossy()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(contextfold(&["validate", &back.to_string_lossy()]).code, 0);

    let ids = |value: &Value| -> Vec<String> {
        value["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|block| {
                block.get("id").or(block.get("tool_use_id")).and_then(Value::as_str).map(str::to_string)
            })
            .collect()
    };
    let original: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("examples/session.json")).unwrap()).unwrap();
    let returned: Value = serde_json::from_str(&std::fs::read_to_string(&back).unwrap()).unwrap();
    assert_eq!(ids(&original), ids(&returned));
    assert_eq!(ids(&original).len(), 48);
}

#[test]
fn count_counts_sessions_and_text() {
    let run = contextfold(&["count", "--tokenizer", "o200k", &fixture("examples/session.json")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tokens: u64 = run.stdout.trim().parse().expect("a number");
    assert!(tokens > 5_000, "{tokens}");

    let run = contextfold_with_stdin(&["count", "--text", "--tokenizer", "o200k"], b"hello world");
    assert_eq!(run.stdout.trim(), "2");
    let run = contextfold_with_stdin(&["count", "--text", "--tokenizer", "chars4", "-"], b"12345678");
    assert_eq!(run.stdout.trim(), "2");
}

/// `count` and `evict` count a session on two threads through a shared memo; their totals
/// are the library's single-threaded exact count, on the largest sessions of the corpus.
#[test]
fn counts_on_two_threads_are_the_librarys() {
    use contextfold::core::tokens::{count_conversation, Tokenizer};
    let Some(corpus) = corpus_dir() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort_by_key(|path| std::cmp::Reverse(std::fs::metadata(path).unwrap().len()));
    for file in files.iter().take(3) {
        let conversation = contextfold::input::load(file, None).unwrap().conversation;
        let expected = count_conversation(Tokenizer::O200k.counter(), &conversation);
        let name = file.to_string_lossy();
        let count = contextfold(&["count", "--tokenizer", "o200k", &name]);
        assert_eq!(count.code, 0, "{}", count.stderr);
        assert_eq!(count.stdout.trim(), expected.to_string(), "{name}");
        let evict = contextfold(&["evict", "--json", "--tokenizer", "o200k", &name]);
        assert_eq!(evict.code, 0, "{}", evict.stderr);
        let report: Value = serde_json::from_str(&evict.stdout).unwrap();
        assert_eq!(report["tokens_before"], expected, "{name}");
    }
}

#[test]
fn gzip_input_reads_like_plain() {
    let dir = temp_dir();
    let gz = dir.join("session.json.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&std::fs::read(fixture("examples/session.json")).unwrap()).unwrap();
    std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
    let plain = contextfold(&["count", "--tokenizer", "chars4", &fixture("examples/session.json")]);
    let zipped = contextfold(&["count", "--tokenizer", "chars4", &gz.to_string_lossy()]);
    assert_eq!(zipped.code, 0, "{}", zipped.stderr);
    assert_eq!(plain.stdout, zipped.stdout);
}

#[test]
fn help_documents_exit_codes() {
    let run = contextfold(&["--help"]);
    assert!(run.stdout.contains("Exit codes:"));
    for command in ["stats", "validate", "convert", "count"] {
        let run = contextfold(&[command, "--help"]);
        assert!(run.stdout.contains("Exit codes:"), "{command}");
    }
    assert_eq!(contextfold(&["stats"]).code, 2, "usage errors exit 2");
}
