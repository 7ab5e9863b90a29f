//! `contextfold mcp` as an agent's MCP client sees it, driven by the official MCP Python SDK
//! (`tests/clients/mcp/recall.py`, pinned by `.ci/setup.d/25-mcp-client.sh`): the tools it
//! lists, a ref written by `compact --store` recalled byte for byte, a large output read by
//! lines, a search, and the errors (an unknown ref, bad arguments, no store yet), each a tool
//! error the server survives. Both protocol eras: the initialize handshake and discovery.

use crate::common::{arg, notice, root, scratch};
use contextfold::core::hash::payload_ref;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Lines of the large output: more than one answer holds.
const BIG_LINES: usize = 3_000;

/// The Python of the MCP SDK's virtualenv, or `None` after a visible notice (with `CI` set,
/// a failure instead).
pub(crate) fn mcp_python() -> Option<PathBuf> {
    let python = std::env::var_os("CONTEXTFOLD_MCP_PYTHON").map(PathBuf::from).filter(|path| path.exists());
    if python.is_none() {
        let why = "the MCP Python SDK is not installed (CONTEXTFOLD_MCP_PYTHON names nothing); \
                   `source .ci/setup.d/25-mcp-client.sh` installs it";
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        notice(&format!("skipped: {why}"));
    }
    python
}

/// Runs the SDK client against `server` (its arguments after `--url` or `--command`) with
/// `calls`; returns what it printed: `{tools, results}`.
pub(crate) fn mcp_client(python: &Path, server: &[String], mode: &str, calls: &Value) -> Value {
    let mut child = Command::new(python)
        .arg(root().join("tests/clients/mcp/recall.py"))
        .args(["--mode", mode])
        .args(server)
        .env_remove("CONTEXTFOLD_STORE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    child.stdin.take().expect("stdin").write_all(calls.to_string().as_bytes()).expect("the calls are sent");
    let output = child.wait_with_output().expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the MCP client failed: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|err| panic!("not JSON ({err}): {stdout}"))
}

/// A conversation whose oldest outputs compaction removes: a large build log, then shorter
/// outputs; returns it with the large log and one short output.
pub(crate) fn conversation() -> (Value, String, String) {
    let big: String = (0..BIG_LINES).map(|i| format!("{i:04} compiling crate wombat-{i} (release) ok\n")).collect();
    let small = "error[E0425]: cannot find value `x` in this scope\n --> src/main.rs:3:5\n".repeat(60);
    let mut messages = vec![json!({"role": "user", "content": "Build the workspace and fix what fails."})];
    let outputs =
        [big.clone(), small.clone()].into_iter().chain((0..6).map(|i| format!("step {i} fine\n").repeat(200)));
    for (i, output) in outputs.enumerate() {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Step {i}.")},
            {"type": "tool_use", "id": format!("toolu_{i:02}"), "name": "Bash", "input": {"command": format!("cargo build -p part{i}")}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i:02}"), "content": output}
        ]}));
    }
    messages.push(json!({"role": "assistant", "content": "All parts build."}));
    (json!({"model": "claude-sonnet-4-5", "messages": messages}), big, small)
}

/// The recall calls checked against `store`: the short output whole, the large one whole (a
/// first part) and by lines, a search, an unknown ref and bad arguments.
pub(crate) fn check_recalls(python: &Path, server: &[String], big: &str, small: &str) -> Vec<f64> {
    let (big_ref, small_ref) = (payload_ref(&json!(big)), payload_ref(&json!(small)));
    let mut calls = vec![
        json!({"tool": "context_recall", "arguments": {"ref": small_ref}}),
        json!({"tool": "context_recall", "arguments": {"ref": big_ref}}),
        json!({"tool": "context_recall", "arguments": {"ref": big_ref, "offset": 10, "limit": 2}}),
        json!({"tool": "context_search", "arguments": {"query": "wombat-2999"}}),
        json!({"tool": "context_recall", "arguments": {"ref": "cf-000000000000"}}),
        json!({"tool": "context_recall", "arguments": {"offset": 1}}),
        json!({"tool": "context_search", "arguments": {"query": "wombat", "limit": 500}}),
    ];
    let pages: Vec<usize> = (0..BIG_LINES).step_by(500).collect();
    calls.extend(pages.iter().map(
        |&offset| json!({"tool": "context_recall", "arguments": {"ref": big_ref, "offset": offset, "limit": 500}}),
    ));
    let mut seconds = Vec::new();
    for mode in ["legacy", "auto"] {
        let out = mcp_client(python, server, mode, &Value::Array(calls.clone()));
        let names: Vec<&str> =
            out["tools"].as_array().unwrap().iter().filter_map(|tool| tool["name"].as_str()).collect();
        assert_eq!(names, ["context_recall", "context_search"], "{mode}");
        assert!(out["tools"][0]["description"].as_str().unwrap().contains("ref cf-…"), "{mode}: when to use it");
        assert_eq!(out["tools"][0]["input_schema"]["required"], json!(["ref"]));
        let results = out["results"].as_array().unwrap();
        let text = |i: usize| results[i]["text"].as_str().unwrap().to_string();
        let error = |i: usize| results[i]["is_error"] == true;
        assert_eq!(
            (text(0), error(0), &results[0]["blocks"]),
            (small.to_string(), false, &json!(1)),
            "{mode}: exactly as stored"
        );
        let (header, first) = text(1).split_once('\n').map(|(a, b)| (a.to_string(), b.to_string())).unwrap();
        let shown = first.lines().count();
        assert!(shown > 100 && shown < BIG_LINES, "{mode}: {header}");
        assert_eq!(header, format!("[{big_ref}: lines 1-{shown} of {BIG_LINES}; pass offset={shown} for more]"));
        assert!(big.starts_with(&first));
        assert_eq!(
            text(2),
            format!("[{big_ref}: lines 11-12 of {BIG_LINES}; pass offset=12 for more]\n0010 compiling crate wombat-10 (release) ok\n0011 compiling crate wombat-11 (release) ok\n")
        );
        assert!(
            !error(3)
                && text(3).contains(&format!("output {big_ref} (call context_recall with this ref for all of it)")),
            "{}",
            text(3)
        );
        // The stored output, found once: the message of the history that held it has the
        // same text, and the output's ref stands for both.
        let lines: Vec<String> = text(3).lines().map(str::to_string).collect();
        assert_eq!(lines.len(), 2, "{}", text(3));
        assert_eq!(lines[0], "1 match for \"wombat-2999\", newest first:");
        assert!(lines[1].contains(&format!(", output {big_ref} (")), "{}", text(3));
        assert!(
            error(4) && text(4).starts_with("context_recall failed: no output is stored under ref `cf-000000000000`")
        );
        assert_eq!(
            (error(5), text(5)),
            (true, "context_recall failed: give `ref`, the cf-… ref a pointer shows".into())
        );
        assert_eq!((error(6), text(6)), (true, "context_search failed: `limit` is at most 50, not 500".into()));
        let whole: String =
            (0..pages.len()).map(|page| text(7 + page).split_once('\n').unwrap().1.to_string()).collect();
        assert!(whole == big, "{mode}: the parts put together are the output byte for byte");
        seconds.extend(results.iter().filter_map(|result| result["seconds"].as_f64()));
    }
    seconds
}

#[test]
fn the_sdk_recalls_what_compact_stored_through_contextfold_mcp() {
    let Some(python) = mcp_python() else { return };
    let dir = scratch("mcp", "sdk");
    let (conversation, big, small) = conversation();
    let input = dir.join("in.json");
    std::fs::write(&input, conversation.to_string()).unwrap();
    let store = arg(&dir.join("s.db"));
    let out = arg(&dir.join("out.json"));
    let args = ["compact", &arg(&input), "--budget", "4000", "--tokenizer", "estimate", "--store", &store, "-o", &out];
    let compacted = crate::common::contextfold(&args);
    assert_eq!(compacted.code, 0, "{}", compacted.stderr);
    let written = std::fs::read_to_string(&out).unwrap();
    for payload in [&big, &small] {
        assert!(
            written.contains(&format!("ref {}", payload_ref(&json!(payload)))),
            "compaction removed both: {written}"
        );
    }
    let server = ["--command", env!("CARGO_BIN_EXE_contextfold"), "mcp", "--store", &store].map(String::from);
    let mut seconds = check_recalls(&python, &server, &big, &small);
    seconds.sort_by(f64::total_cmp);
    notice(&format!(
        "contextfold mcp (stdio): {} tool calls, median {:.2} ms, slowest {:.2} ms",
        seconds.len(),
        seconds[seconds.len() / 2] * 1e3,
        seconds[seconds.len() - 1] * 1e3
    ));
}

#[test]
fn a_store_that_is_not_there_yet_is_a_tool_error_not_a_crash() {
    let Some(python) = mcp_python() else { return };
    let dir = scratch("mcp", "no-store");
    let store = arg(&dir.join("later.db"));
    let server = ["--command", env!("CARGO_BIN_EXE_contextfold"), "mcp", "--store", &store].map(String::from);
    let calls = json!([
        {"tool": "context_recall", "arguments": {"ref": "cf-0123456789ab"}},
        {"tool": "context_search", "arguments": {"query": "anything"}}
    ]);
    let out = mcp_client(&python, &server, "legacy", &calls);
    for (result, tool) in out["results"].as_array().unwrap().iter().zip(["context_recall", "context_search"]) {
        let text = result["text"].as_str().unwrap();
        assert!(result["is_error"] == true && text.starts_with(&format!("{tool} failed: the store ")), "{text}");
        assert!(text.contains("later.db") && !text.contains('\n'), "one sentence naming the store: {text}");
    }
    assert!(!Path::new(&store).exists(), "a reading server creates no store");
}
