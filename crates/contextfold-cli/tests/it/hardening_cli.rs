//! Regression tests of what a careless or hostile user broke, one test per defect, named
//! after it: budgets that hold nothing, an LLM summary over its budget, lossy conversion
//! said nothing, unbounded input, no progress on long work,
//! validation gaps, lone surrogates, a conversation repair empties, reading commands that
//! wrote, errors said several times, search's exit codes, and format detection misled by
//! role names.

use crate::common::{
    arg, contextfold, contextfold_in, contextfold_with_stdin, fixture, json, notice, openai_once, scratch, Run, Scratch,
};
use serde_json::{json as value, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const SESSION: &str = "examples/session.json";

fn dir(test: &str) -> Scratch {
    scratch("hardening-cli", test)
}

/// Checks a failure: exit 2, one line on standard error, holding each of `needles` once.
fn fails_once(run: &Run, needles: &[&str]) {
    assert_eq!(run.code, 2, "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line: {}", run.stderr);
    for needle in needles {
        assert_eq!(run.stderr.matches(needle).count(), 1, "{needle:?} once in {}", run.stderr);
    }
}

fn write(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec(value).expect("JSON")).expect("write");
}

/// `compact`'s budgets that hold nothing are usage errors of `plan` and `replay` too: they
/// planned "a budget of 0" and replayed every call as an overflow.
#[test]
fn hardening_1_plan_and_replay_refuse_budgets_that_hold_nothing() {
    let session = fixture(SESSION);
    for (args, says) in [
        (&["plan", "--budget", "0"][..], "a budget of 0 tokens"),
        (&["plan", "--window", "0"], "a window of 0 tokens"),
        (
            &["plan", "--window", "20k", "--reserve", "30k"],
            "reserve of 30000 tokens leaves nothing of the 20000-token window",
        ),
        (&["replay", "--window", "0"], "a window of 0 tokens"),
        (
            &["replay", "--window", "20k", "--reserve", "30k"],
            "reserve of 30000 tokens leaves nothing of the 20000-token window",
        ),
        // replay's default reserve is 4,000: a window of 3,000 needs a smaller one.
        (&["replay", "--window", "16k,3000"], "reserve of 4000 tokens leaves nothing of the 3000-token window"),
    ] {
        let mut words = args.to_vec();
        words.insert(1, &session);
        let run = contextfold(&words);
        fails_once(&run, &[says]);
        assert!(run.stdout.is_empty(), "{words:?}: {}", run.stdout);
    }
    let run = contextfold(&["replay", &session, "--window", "3000", "--reserve", "500", "--strategies", "none"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// An LLM server that ignores `max_tokens` (about 780,000 tokens of summary here; 5 million
/// in the report) made `compact --budget 2000` write the whole answer with exit 0: the
/// summary is cut to its budget, the report says so, and the result keeps the budget.
#[test]
fn hardening_3_an_llm_summary_over_its_budget_is_cut_to_it() {
    let dir = dir("llm-summary");
    let huge: String =
        (0..60_000).map(|line| format!("- fact {line}: the parser in src/parse.rs was fixed\n")).collect();
    let (url, server) = openai_once(&huge);
    let out = dir.join("out.json");
    let report = json(&[
        "compact",
        &fixture(SESSION),
        "--budget",
        "2000",
        "--tokenizer",
        "estimate",
        "--summarizer",
        "openai:x",
        "--base-url",
        &url,
        "--max-retries",
        "0",
        "--json",
        "-o",
        &arg(&out),
    ]);
    server.join().expect("the server answered one request");
    assert_eq!(report["summarizer"].as_str().map(|id| id.starts_with("openai:x")), Some(true), "{report}");
    let notes = report["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|note| note.as_str().is_some_and(|note| note.contains("was over its budget of 1000 tokens"))),
        "{report}"
    );
    assert!(report["summary_tokens"].as_u64().is_some_and(|tokens| (1..=1_300).contains(&tokens)), "{report}");
    assert!(report["tokens_after"].as_u64().is_some_and(|tokens| tokens <= 2_000), "{report}");
    let written = std::fs::read_to_string(&out).expect("written");
    assert!(written.len() < 40_000 && written.contains("- fact 0: the parser"), "{} bytes", written.len());
    assert_eq!(contextfold(&["validate", &arg(&out)]).code, 0);
}

/// An Anthropic request with what OpenAI cannot carry: signatures, an error flag.
fn lossy_request() -> Value {
    value!({"system": "sys", "messages": [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "first", "signature": "sig-1"},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "error", "is_error": true}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "again", "signature": "sig-2"}, {"type": "text", "text": "It failed."}]}
    ]})
}

#[test]
fn hardening_4_convert_says_what_it_lost() {
    let dir = dir("convert-lost");
    let input = dir.join("in.json");
    write(&input, &lossy_request());
    let out = dir.join("out.json");
    let run = contextfold(&["convert", &arg(&input), "--to", "openai", "-o", &arg(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lost: Vec<&str> = run.stderr.lines().filter(|line| line.contains(": lost: ")).collect();
    assert_eq!(
        lost.iter().map(|line| line.split(": lost: ").nth(1).unwrap_or_default()).collect::<Vec<_>>(),
        [
            "2 thinking signatures (OpenAI has no field for them)",
            "1 is_error flag of tool results (OpenAI tool messages have none)"
        ],
        "{}",
        run.stderr
    );
    let report = json(&["convert", &arg(&input), "--to", "openai", "-o", &arg(&out), "--json"]);
    assert_eq!((report["from"].as_str(), report["to"].as_str()), (Some("anthropic"), Some("openai")));
    let kinds: Vec<(&str, u64)> = report["lost"]
        .as_array()
        .expect("lost")
        .iter()
        .map(|loss| (loss["kind"].as_str().unwrap_or_default(), loss["count"].as_u64().unwrap_or_default()))
        .collect();
    assert_eq!(kinds, [("thinking_signature", 2), ("error_flag", 1)]);
    assert!(report["lost"][0]["text"].as_str().is_some_and(|text| text.starts_with("2 thinking signatures")));
    // Back to Anthropic, nothing more is lost; Anthropic to Anthropic loses nothing.
    let back = json(&["convert", &arg(&out), "--to", "anthropic", "-o", &arg(&dir.join("back.json")), "--json"]);
    assert_eq!(back["lost"], value!([]));
    let run = contextfold(&["convert", &arg(&input), "--to", "anthropic", "-o", &arg(&dir.join("same.json"))]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    // The report needs the conversation to go elsewhere.
    fails_once(&contextfold(&["convert", &arg(&input), "--to", "openai", "--json"]), &["-o FILE"]);
    // A real Claude Code session loses hundreds of signatures and some error flags, counted.
    let Some(corpus) = crate::common::corpus_dir() else { return };
    let session = corpus.join("claudecode-mclaude__95f81cf4-2300-4739-9018-2d0ff510912a.json");
    let report = json(&["convert", &arg(&session), "--to", "openai", "-o", &arg(&out), "--json"]);
    let count = |kind: &str| {
        report["lost"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|loss| loss["kind"] == kind)
            .map(|loss| loss["count"].clone())
    };
    let source: Value = serde_json::from_str(&std::fs::read_to_string(&session).expect("read")).expect("JSON");
    let blocks = || {
        source["messages"].as_array().into_iter().flatten().flat_map(|m| m["content"].as_array().into_iter().flatten())
    };
    let signatures = blocks().filter(|block| block["type"] == "thinking" && block.get("signature").is_some()).count();
    let errors = blocks().filter(|block| block["is_error"] == true).count();
    assert!(signatures > 0 && errors > 0);
    assert_eq!(count("thinking_signature"), Some(value!(signatures)));
    assert_eq!(count("error_flag"), Some(value!(errors)));
}

/// A gzip member of `size` zero bytes, repeated `times`: `size * times` bytes once inflated
/// from a file a thousandth of that.
fn zero_bomb(size: usize, times: usize) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&vec![0u8; size]).expect("compress");
    let member = encoder.finish().expect("compress");
    member.repeat(times)
}

#[test]
fn hardening_5_inputs_are_read_bounded_gzip_files_and_stdin() {
    let dir = dir("bounded");
    // 512 MB of zeros in about 500 KB: refused at the default limit of 256 MB, not read whole.
    let bomb = dir.join("z.json.gz");
    std::fs::write(&bomb, zero_bomb(1 << 20, 512)).expect("write");
    for command in ["count", "stats", "validate"] {
        fails_once(
            &contextfold(&[command, &arg(&bomb)]),
            &["z.json.gz: the input holds more than 256000000 bytes once decompressed", "--max-input-bytes"],
        );
    }
    let run = contextfold(&["count", &arg(&bomb), "--max-input-bytes", "1m"]);
    fails_once(&run, &["more than 1000000 bytes once decompressed"]);
    // The same limit for a plain file and for standard input.
    let example = fixture(SESSION);
    let size = std::fs::metadata(&example).expect("metadata").len();
    let limit = (size - 1).to_string();
    fails_once(
        &contextfold(&["count", &example, "--max-input-bytes", &limit]),
        &[&format!("more than {limit} bytes, the limit")],
    );
    let text = std::fs::read(&example).expect("read");
    let run = contextfold_with_stdin(&["count", "-", "--max-input-bytes", &limit], &text);
    fails_once(&run, &["<stdin>: the input holds more than"]);
    let run = contextfold_with_stdin(&["count", "-", "--max-input-bytes", &size.to_string()], &text);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The limit is a usage error below 1, and documented.
    assert_eq!(contextfold(&["count", &example, "--max-input-bytes", "0"]).code, 2);
    let help = contextfold(&["stats", "--help"]).stdout;
    assert!(help.contains("--max-input-bytes <BYTES>") && help.contains("[default: 256m]"), "{help}");
}

/// Runs `contextfold args…` under a pseudo-terminal (util-linux `script`), with the progress
/// delay set to `delay_ms`; returns the terminal's transcript, or `None` when `script` is
/// missing (a visible notice; a failure under CI).
fn on_a_terminal(args: &[&str], delay_ms: &str) -> Option<String> {
    let line = std::iter::once(env!("CARGO_BIN_EXE_contextfold"))
        .chain(args.iter().copied())
        .map(|word| format!("'{}'", word.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let output = match Command::new("script")
        .args(["-qec", &format!("{line} > /dev/null"), "/dev/null"])
        .env("CONTEXTFOLD_PROGRESS_AFTER_MS", delay_ms)
        .output()
    {
        Ok(output) => output,
        Err(err) => {
            assert!(std::env::var_os("CI").is_none(), "CI is set but `script` cannot run: {err}");
            notice(&format!("skipped: no pseudo-terminal (`script`: {err})"));
            return None;
        }
    };
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stdout));
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn hardening_7_long_single_file_work_shows_progress_on_a_terminal() {
    // With no delay the bar shows at once and is drawn again as each phase begins, so the
    // phases are seen however quickly the work goes.
    let dir = dir("progress");
    let big = dir.join("big.json");
    let messages: Vec<Value> = (0..200)
        .map(|n| {
            let role = if n % 2 == 0 { "user" } else { "assistant" };
            value!({"role": role, "content": format!("message {n}: {}", "some words of text ".repeat(25))})
        })
        .collect();
    write(&big, &value!({ "messages": messages }));
    let path = arg(&big);
    for (words, phase) in [
        (vec!["stats", &path], "counting tokens"),
        (vec!["count", &path], "counting tokens"),
        (vec!["validate", &path], "parsing"),
        (vec!["convert", &path, "--to", "openai", "-o", "/dev/null"], "parsing"),
    ] {
        let Some(screen) = on_a_terminal(&words, "0") else { return };
        assert!(screen.contains("big.json: "), "{words:?}: {screen:?}");
        assert!(screen.contains(phase), "{words:?}: {screen:?}");
    }
    // Work done before the delay prints no bar (a day: no run takes that long), and neither
    // does work whose standard error is not a terminal.
    let example = fixture(SESSION);
    let Some(screen) = on_a_terminal(&["count", &example, "--tokenizer", "chars4"], "86400000") else { return };
    assert!(!screen.contains("session.json"), "{screen:?}");
    let run = contextfold(&["stats", &path, "--tokenizer", "chars4"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
}

#[test]
fn hardening_10_validation_gaps() {
    let dir = dir("validation");
    // OpenAI arguments that are not JSON: validate says so; convert --to anthropic refuses.
    let calls = dir.join("calls.json");
    write(
        &calls,
        &value!([
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{not json"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a b"}
        ]),
    );
    let run = contextfold(&["validate", &arg(&calls)]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("[input-not-object]"), "{}", run.stdout);
    let out = dir.join("out.json");
    let run = contextfold(&["convert", &arg(&calls), "--to", "anthropic", "-o", &arg(&out)]);
    fails_once(&run, &["tool call `c1` (sh) has arguments that are not JSON (`{not json`)", "convert to openai"]);
    assert!(!out.exists(), "nothing is written");
    assert_eq!(contextfold(&["convert", &arg(&calls), "--to", "openai", "-o", &arg(&out)]).code, 0);
    // An unknown block type is a warning: still valid, exit 0, in --json as `warnings`.
    let unknown = dir.join("unknown.json");
    write(
        &unknown,
        &value!([{"role": "user", "content": [{"type": "txt", "text": "typo"}, {"type": "text", "text": "hi"}]}]),
    );
    let run = contextfold(&["validate", &arg(&unknown)]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout.contains("warning: message 0, block 0: the API does not know blocks of type `txt`"),
        "{}",
        run.stdout
    );
    let report = json(&["validate", &arg(&unknown), "--json"]);
    assert_eq!(
        (report["valid"].as_bool(), report["warnings"][0]["rule"].as_str()),
        (Some(true), Some("unknown-block"))
    );
    assert_eq!(json(&["stats", &arg(&unknown), "--json"])["warnings"][0]["rule"], "unknown-block");
}

#[test]
fn hardening_11_a_lone_surrogate_is_read_with_a_note_and_a_rejection_says_what_is_wrong() {
    let dir = dir("surrogates");
    let file = dir.join("lone.json");
    std::fs::write(&file, br#"{"messages": [{"role": "user", "content": "cut \ud83d here"}]}"#).expect("write");
    let report = json(&["stats", &arg(&file), "--json"]);
    assert_eq!((report["messages"].as_u64(), report["valid"].as_bool()), (Some(1), Some(true)));
    assert!(report["notes"][0].as_str().is_some_and(|note| note.contains("1 lone UTF-16 surrogate")), "{report}");
    let run = contextfold(&["convert", &arg(&file), "--to", "anthropic"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("cut \u{fffd} here") && run.stderr.contains("note: read 1 lone"), "{}", run.stderr);
    let bad = dir.join("bad.json");
    std::fs::write(&bad, br#"{"messages": [{"role": "user", "content": "x \u12"}]}"#).expect("write");
    fails_once(&contextfold(&["count", &arg(&bad)]), &["bad.json: invalid JSON at line 1, column", "four hex digits"]);
}

#[test]
fn hardening_20_stats_reads_an_anthropic_body_with_a_system_message_whole() {
    let dir = dir("detection");
    let body = dir.join("body.json");
    write(
        &body,
        &value!({"model": "claude-opus-4-8", "max_tokens": 32000,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc"}, {"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]},
            {"role": "system", "content": "Plan mode is active."},
            {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]}
        ]}),
    );
    let report = json(&["stats", &arg(&body), "--json"]);
    assert_eq!((report["format"].as_str(), report["messages"].as_u64()), (Some("anthropic"), Some(5)), "{report}");
    assert!(report["tokens"]["system"].as_u64().is_some_and(|tokens| tokens > 0), "{report}");
    assert!(report["tokens"]["by_role"]["system"].as_u64().is_some_and(|tokens| tokens > 0), "{report}");
    assert_eq!(report["valid"], true, "{report}");
}

#[test]
fn hardening_12_a_conversation_repair_empties_is_an_input_error() {
    for input in [
        &b"[{\"role\":\"user\",\"content\":[]}]"[..],
        b"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\" \"}]}]",
    ] {
        let run = contextfold_with_stdin(&["compact", "-"], input);
        fails_once(&run, &["<stdin>: the conversation has nothing to compact: every message is empty"]);
        assert!(!run.stderr.contains("bug"), "{}", run.stderr);
    }
}

/// A store written by `compact --store` in `dir`, and the id of its session.
fn a_store(dir: &Path) -> (PathBuf, String) {
    let (store, session, _) = a_store_with_ref(dir);
    (store, session)
}

/// [`a_store`], and the ref of one payload it holds.
fn a_store_with_ref(dir: &Path) -> (PathBuf, String, String) {
    let store = dir.join("store.db");
    let report = json(&[
        "compact",
        &fixture(SESSION),
        "--budget",
        "2000",
        "--json",
        "--store",
        &arg(&store),
        "-o",
        &arg(&dir.join("out.json")),
    ]);
    let reference = report["items"][0]["ref"].as_str().expect("an evicted payload").to_string();
    (store, report["session"].as_str().expect("a session").to_string(), reference)
}

/// The reading commands, each with the words it needs.
fn reading_commands(store: &Path, session: &str, reference: &str) -> Vec<Vec<String>> {
    let store = arg(store);
    [
        vec!["sessions", "--store", &store],
        vec!["recall", reference, "--store", &store],
        vec!["search", "rounding", "--store", &store],
        vec!["search", "rounding", "--session", session, "--store", &store],
        vec!["sessions", "export", session, "--store", &store],
    ]
    .into_iter()
    .map(|words| words.into_iter().map(str::to_string).collect())
    .collect()
}

#[test]
fn hardening_14_reading_commands_open_the_store_read_only_and_never_migrate() {
    let dir = dir("read-only");
    let (store, session, reference) = a_store_with_ref(&dir);
    let before = std::fs::read(&store).expect("read");
    for words in reading_commands(&store, &session, &reference) {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let run = contextfold(&words);
        assert_eq!(run.code, 0, "{words:?}: {}", run.stderr);
    }
    assert_eq!(std::fs::read(&store).expect("read"), before, "reading changed the store");
    // A store of an older schema: reading commands say to upgrade and leave it as it was.
    let connection = rusqlite::Connection::open(&store).expect("open");
    // Schema 4 is schema 6 without the calls and the sessions' `updated` column.
    connection
        .execute_batch("DROP TABLE calls; ALTER TABLE sessions DROP COLUMN updated; PRAGMA user_version = 4;")
        .expect("downgrade");
    drop(connection);
    let old = std::fs::read(&store).expect("read");
    for words in reading_commands(&store, &session, &reference) {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let says = format!("has schema 4 and this build reads schema {}", contextfold::store::SCHEMA_VERSION);
        fails_once(&contextfold(&words), &[&says, "sessions upgrade --store"]);
    }
    assert_eq!(std::fs::read(&store).expect("read"), old, "a reader migrated the store");
    let run = contextfold(&["sessions", "upgrade", "--store", &arg(&store)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(contextfold(&["sessions", "--store", &arg(&store)]).code, 0);
    // On a read-only file system (a tmpfs remounted read-only in a private namespace).
    let mount = dir.join("ro");
    std::fs::create_dir_all(&mount).expect("mkdir");
    let script = format!(
        "mount -t tmpfs none '{m}' && cp '{s}' '{m}/store.db' && mount -o remount,ro '{m}' && \
         '{b}' sessions --store '{m}/store.db' && '{b}' search rounding --store '{m}/store.db' && \
         '{b}' sessions export {session} --store '{m}/store.db' > /dev/null && \
         '{b}' recall {reference} --store '{m}/store.db' > '{o}'",
        m = mount.display(),
        s = store.display(),
        b = env!("CARGO_BIN_EXE_contextfold"),
        o = dir.join("recalled.txt").display(),
    );
    match Command::new("unshare").args(["-rm", "sh", "-c", &script]).output() {
        Ok(output) if output.status.success() => {
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(stdout.contains(&session) && stdout.contains("[rounding]"), "{stdout}");
            let recalled = std::fs::read_to_string(dir.join("recalled.txt")).expect("recall wrote");
            assert!(!recalled.is_empty(), "recall gave the payload back");
        }
        Ok(output) if String::from_utf8_lossy(&output.stderr).contains("contextfold") => {
            panic!("on a read-only file system: {}", String::from_utf8_lossy(&output.stderr))
        }
        other => {
            assert!(std::env::var_os("CI").is_none(), "CI is set but no read-only mount could be made: {other:?}");
            notice(&format!("skipped: no read-only mount (unshare: {other:?})"));
        }
    }
}

#[test]
fn hardening_15_each_error_is_said_once_naming_the_path_and_what_to_do() {
    let run = contextfold_with_stdin(&["count", "-"], b"42");
    fails_once(&run, &["<stdin>: top level: expected a request object or an array of messages, found a number"]);
    let dir = dir("errors");
    for command in [&["sessions"][..], &["search", "x"], &["recall", "cf-1"]] {
        let mut words = command.to_vec();
        let store = arg(&dir);
        words.extend(["--store", &store]);
        fails_once(&contextfold(&words), &[&format!("{store} is a directory, not a store file")]);
    }
    fails_once(&contextfold(&["count", &arg(&dir.join("missing.json"))]), &["missing.json: no such file or directory"]);
    // A damaged store: a stored text with a byte no longer UTF-8, and a page of garbage.
    let (store, session) = a_store(&dir);
    let mut bytes = std::fs::read(&store).expect("read");
    let found: Vec<usize> = (0..bytes.len() - 9).filter(|&at| &bytes[at..at + 9] == b"ROUND_HAL").collect();
    assert!(!found.is_empty(), "a stored text to damage");
    for at in found {
        bytes[at] = 0xFF;
    }
    let flipped = dir.join("flipped.db");
    std::fs::write(&flipped, &bytes).expect("write");
    let run = contextfold(&["sessions", "export", &session, "--store", &arg(&flipped)]);
    fails_once(&run, &[&format!("the store {} is damaged: ", arg(&flipped)), "PRAGMA integrity_check"]);
    for page in (4096 * 3..bytes.len()).step_by(4096) {
        for byte in &mut bytes[page + 100..page + 4000] {
            *byte ^= 0x5A;
        }
    }
    let garbage = dir.join("garbage.db");
    std::fs::write(&garbage, &bytes).expect("write");
    // The commands that read the damaged tables say so (a damaged full-text index can go
    // unnoticed by SQLite: a search may then just find less).
    for words in [vec!["sessions"], vec!["sessions", "export", session.as_str()]] {
        let mut words = words;
        let store = arg(&garbage);
        words.extend(["--store", &store]);
        fails_once(&contextfold(&words), &["is damaged: ", "PRAGMA integrity_check"]);
    }
}

#[test]
fn hardening_16_search_an_unknown_session_or_a_zero_limit_is_an_error() {
    let dir = dir("search");
    let (store, session) = a_store(&dir);
    let store = arg(&store);
    fails_once(
        &contextfold(&["search", "rounding", "--session", "nosuch", "--store", &store]),
        &["no session `nosuch` in store"],
    );
    let run = contextfold(&["search", "rounding", "--limit", "0", "--store", &store]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("the limit must be at least 1"), "{}", run.stderr);
    // A known session with no match is no error.
    let run = contextfold_in(Some(&dir), &["search", "zanzibar", "--session", &session, "--store", &store], b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("no matches"), "{}", run.stderr);
}
