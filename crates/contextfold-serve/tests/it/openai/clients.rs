//! Real clients through the proxy, each against the scripted mock upstream: the official
//! `openai` SDKs for Python and Node (Chat Completions and Responses, streaming and not) in a
//! tool loop long enough to compact, and Codex CLI (`codex exec`), which runs the mock's
//! commands for real until the proxy compacts its conversation.
//!
//! The clients come from `.ci/setup.d/40-openai-clients.sh`, which exports where they are.
//! A client that is not there is skipped with a visible notice, or fails the test under CI.

use super::agents::{chat_script, responses_script};
use super::{canned, openai_config};
use crate::common::{notice, proxy, Running};
use crate::mock::{Mock, Recorded, Reply};
use contextfold_serve::ServeConfig;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Turns of the SDK loops: enough to compact in the tests' 24k window.
const TURNS: usize = 14;

/// The path in variable `name`, or `None` after a notice (a failure under CI).
fn installed(name: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(name).map(PathBuf::from).filter(|path| path.exists()) {
        Some(path) => Some(path),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but {what} is not installed ({name} is unset or wrong)"
            );
            notice(&format!("skipped: {what} is not installed (run .ci/setup.d/40-openai-clients.sh and set {name})"));
            None
        }
    }
}

/// The repository's client scripts.
fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/openai")
}

/// Runs `program` with `args` in a clean environment (no proxy, no OpenAI variables), at most
/// `limit`; returns its standard output, panicking with its standard error when it fails.
async fn run(mut command: tokio::process::Command, limit: Duration, what: &str) -> String {
    for variable in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        command.env_remove(variable);
    }
    for (variable, _) in std::env::vars().filter(|(name, _)| name.starts_with("OPENAI_") || name.starts_with("CODEX_"))
    {
        command.env_remove(variable);
    }
    command.env("NO_PROXY", "127.0.0.1,localhost").stdin(std::process::Stdio::null()).kill_on_drop(true);
    let output = tokio::time::timeout(limit, command.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
        .unwrap_or_else(|err| panic!("{what} did not start: {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Checks what a loop of `turns` tool calls left: its summary line, the requests the mock
/// received at `path` (all valid), and that the proxy compacted.
fn check_loop(stdout: &str, name: &str, path: &str, mock: &Mock, proxy: &Running, what: &str) {
    let summary: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())
        .unwrap_or_else(|err| panic!("{what} printed no summary ({err}): {stdout}"));
    assert_eq!(summary["turns"], TURNS, "{what}: {summary}");
    assert_eq!(summary["final"], format!("[{name}] done after {TURNS} turns"), "{what}");
    assert_eq!(mock.assert_all_valid_at(path), TURNS + 1, "{what}: every request reached the upstream valid");
    assert!(proxy.stats.compactions() >= 1, "{what}: the proxy compacted ({})", crate::common::logs());
    assert_eq!(proxy.stats.untouched(), 0, "{what}");
}

/// The mock for both APIs' scripts.
fn sdk_script(request: &Recorded) -> Reply {
    if request.uri.starts_with("/v1/responses") {
        responses_script(TURNS)(request)
    } else {
        chat_script(TURNS)(request)
    }
}

/// The API, mode and path of each loop.
const LOOPS: [(&str, &str, &str); 4] = [
    ("chat", "whole", "/v1/chat/completions"),
    ("chat", "stream", "/v1/chat/completions"),
    ("responses", "whole", "/v1/responses"),
    ("responses", "stream", "/v1/responses"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_compacts_in_a_tool_loop() {
    let Some(python) = installed("CONTEXTFOLD_OPENAI_PYTHON", "the openai Python SDK") else { return };
    for (api, mode, path) in LOOPS {
        let mock = Mock::start(sdk_script).await;
        let proxy = proxy(openai_config(&mock)).await;
        let name = format!("py-{api}-{mode}");
        let mut command = tokio::process::Command::new(&python);
        command.arg(scripts().join("tool_loop.py")).arg(format!("{}/v1", proxy.url)).args([api, mode, &name, "3000"]);
        let what = format!("the Python SDK ({api}, {mode})");
        let stdout = run(command, Duration::from_secs(120), &what).await;
        check_loop(&stdout, &name, path, &mock, &proxy, &what);
        notice(&format!("{what}: {} compactions in {} requests", proxy.stats.compactions(), TURNS + 1));
        assert!(mock
            .requests()
            .iter()
            .all(|request| request.header("user-agent").is_some_and(|agent| agent.starts_with("OpenAI/Python"))));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_sdk_compacts_in_a_tool_loop() {
    let Some(modules) = installed("CONTEXTFOLD_OPENAI_NODE_MODULES", "openai for Node") else { return };
    for (api, mode, path) in LOOPS {
        let mock = Mock::start(sdk_script).await;
        let proxy = proxy(openai_config(&mock)).await;
        let name = format!("node-{api}-{mode}");
        let mut command = tokio::process::Command::new("node");
        command
            .env("NODE_PATH", &modules)
            .arg(scripts().join("tool_loop.cjs"))
            .arg(format!("{}/v1", proxy.url))
            .args([api, mode, &name, "3000"]);
        let what = format!("the Node SDK ({api}, {mode})");
        let stdout = run(command, Duration::from_secs(120), &what).await;
        check_loop(&stdout, &name, path, &mock, &proxy, &what);
        notice(&format!("{what}: {} compactions in {} requests", proxy.stats.compactions(), TURNS + 1));
    }
}

/// Codex's turns: an `exec_command` that prints lines a turn, then a closing message.
const CODEX_TURNS: usize = 24;

/// What the mock answers Codex for `turns` turns: a reasoning item and a command to run a
/// turn, streamed, then a closing message. Turn `t` prints `lines(t)` lines.
fn codex_script(turns: usize, lines: fn(usize) -> usize) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |request| {
        if !request.uri.starts_with("/v1/responses") || request.uri.starts_with("/v1/responses/") {
            return Reply::Json { status: 404, headers: vec![], body: json!({"error": {"message": "not scripted", "type": "invalid_request_error", "param": null, "code": null}}).to_string() };
        }
        let body = request.json();
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let turn = input
            .iter()
            .filter(|item| item["type"] == "function_call")
            .filter_map(|item| {
                item["call_id"].as_str()?.strip_prefix("call_")?.split('_').next()?.parse::<usize>().ok()
            })
            .max()
            .map_or(0, |turn| turn + 1);
        let output = if turn >= turns {
            vec![canned::responses::message(&format!("msg_{turn}"), "All files are listed.")]
        } else {
            let cmd =
                format!("seq -f 'turn {turn} line %g: the quick brown fox jumps over the lazy dog' 1 {}", lines(turn));
            vec![
                canned::responses::reasoning(&format!("rs_{turn:03}"), &format!("Listing part {turn}.")),
                canned::responses::function_call(
                    &format!("fc_{turn:03}"),
                    &format!("call_{turn:03}_codex"),
                    "exec_command",
                    &json!({"cmd": cmd}),
                ),
            ]
        };
        canned::sse(canned::responses::stream(&output, request.body.len() as u64 / 4))
    }
}

/// Runs `codex exec` against `proxy` to its end; returns what it printed.
async fn run_codex(codex: &Path, proxy: &Running) -> String {
    let home = std::env::temp_dir().join(format!(
        "contextfold-codex-{}-{}",
        std::process::id(),
        proxy.url.rsplit(':').next().unwrap_or("0")
    ));
    let work = home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = format!(
        "model = \"gpt-5\"\nmodel_provider = \"contextfold\"\n\n[model_providers.contextfold]\nname = \"contextfold\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"CONTEXTFOLD_TEST_KEY\"\n",
        proxy.url
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    let mut command = tokio::process::Command::new(codex);
    command
        .env("HOME", &home)
        .env("CODEX_HOME", &home)
        .env("CONTEXTFOLD_TEST_KEY", "sk-test-not-a-real-key")
        .args(["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C"])
        .arg(&work)
        .arg("List the numbers, part by part.");
    let stdout = run(command, Duration::from_secs(300), "codex exec").await;
    let _ = std::fs::remove_dir_all(&home);
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_cli_runs_its_commands_until_the_proxy_compacts() {
    let Some(codex) = installed("CONTEXTFOLD_CODEX", "Codex CLI") else { return };
    let mock = Mock::start(codex_script(CODEX_TURNS, |_| 100)).await;
    let proxy = proxy(ServeConfig { window: Some(48_000), ..openai_config(&mock) }).await;
    let stdout = run_codex(&codex, &proxy).await;
    assert!(stdout.contains("All files are listed."), "{stdout}");
    let requests = mock.requests_at("/v1/responses");
    assert_eq!(requests.len(), CODEX_TURNS + 1, "one request a turn");
    mock.assert_all_valid_at("/v1/responses");
    // Codex ran the commands: the outputs it sent back hold their lines.
    let last = requests.last().unwrap().json();
    let outputs: Vec<&Value> =
        last["input"].as_array().unwrap().iter().filter(|item| item["type"] == "function_call_output").collect();
    let newest = outputs.last().map(|item| item["output"].to_string()).unwrap_or_default();
    assert!(newest.contains(&format!("turn {} line 100: the quick brown fox", CODEX_TURNS - 1)), "{newest}");
    assert!(proxy.stats.compactions() >= 1, "the proxy compacted Codex's conversation: {}", crate::common::logs());
    assert_eq!(proxy.stats.untouched(), 0, "{}", crate::common::logs());
    notice(&format!(
        "codex exec: {} requests, {} compactions, {} resent; the last {} bytes upstream",
        requests.len(),
        proxy.stats.compactions(),
        proxy.stats.resent(),
        requests.last().map_or(0, |request| request.body.len())
    ));
}

/// Turns of the long Codex session.
const LONG_TURNS: usize = 100;

/// The lines turn `turn` of the long session prints: 60 to 300 (4–19 KB).
fn long_lines(turn: usize) -> usize {
    60 + (turn * 7919) % 241
}

/// The text of the newest `function_call_output` of a Responses request, and its turn.
fn newest_output(body: &Value) -> Option<(usize, String)> {
    let item = body["input"].as_array()?.iter().rev().find(|item| item["type"] == "function_call_output")?;
    let turn = item["call_id"].as_str()?.strip_prefix("call_")?.split('_').next()?.parse().ok()?;
    Some((turn, item["output"].to_string()))
}

/// `codex exec` for 100 turns through `serve --store` in a 48k window: every request valid,
/// the newest output whole at every turn, the store one session holding each call and output
/// once, in order, with a record of each call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_for_100_turns_through_the_store_keeps_one_log_and_every_newest_output() {
    use contextfold::store::{SessionStore, SqliteStore, StoreLocation};
    let Some(codex) = installed("CONTEXTFOLD_CODEX", "Codex CLI") else { return };
    let dir = crate::stored::scratch("codex-long");
    let path = dir.join("store.db");
    let mock = Mock::start(codex_script(LONG_TURNS, long_lines)).await;
    let settings =
        ServeConfig { window: Some(48_000), store: Some(StoreLocation::File(path.clone())), ..openai_config(&mock) };
    let proxy = proxy(settings).await;
    let started = std::time::Instant::now();
    let stdout = run_codex(&codex, &proxy).await;
    let elapsed = started.elapsed();
    assert!(stdout.contains("All files are listed."), "{stdout}");
    let compactions = proxy.stats.compactions();
    let stats = proxy.stats.clone();
    proxy.stop().await.expect("the proxy stops cleanly");
    let requests = mock.requests_at("/v1/responses");
    assert_eq!(requests.len(), LONG_TURNS + 1, "one request a turn");
    assert_eq!(mock.assert_all_valid_at("/v1/responses"), requests.len());
    assert!(compactions >= 3, "the proxy compacted again and again ({compactions})");
    let mut checked = 0;
    for request in &requests {
        let Some((turn, text)) = newest_output(&request.json()) else { continue };
        let first = format!("turn {turn} line 1: the quick brown fox");
        let last = format!("turn {turn} line {}: the quick brown fox", long_lines(turn));
        assert!(!text.contains("[contextfold"), "turn {turn}'s output was cut: {text:.300}");
        assert!(text.contains(&first) && text.contains(&last), "turn {turn}: {text:.300}");
        checked += 1;
    }
    assert_eq!(checked, LONG_TURNS, "each turn's request carried its newest output");

    let store = SqliteStore::open_existing(&path).expect("the proxy's store");
    let sessions = store.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1, "one conversation, one session: {sessions:?}");
    let exported = store.export(&sessions[0].id).expect("export");
    let (calls, results) = crate::claude_code::tool_ids(&exported);
    let expected: Vec<String> = (0..LONG_TURNS).map(|turn| format!("call_{turn:03}_codex")).collect();
    assert_eq!(calls, expected, "each call stored once, in order");
    assert_eq!(results, expected, "each output stored once, in order");
    assert_eq!(store.calls(&sessions[0].id).expect("calls").len(), requests.len(), "a record per call");
    notice(&format!(
        "codex exec, long session: {} requests in {:.0} s, {compactions} compactions, {} stored messages; \
         the newest output whole at all {LONG_TURNS} turns; {}",
        requests.len(),
        elapsed.as_secs_f64(),
        exported.len(),
        stats.savings().totals().line(),
    ));
}
