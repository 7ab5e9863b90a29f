//! The proxy's `/mcp`: the recall tools over MCP's streamable HTTP transport, driven by the
//! official MCP Python SDK (`tests/clients/mcp/recall.py`), in both protocol eras: the tools
//! listed, a stored output recalled byte for byte, whole and by lines, a search, the errors
//! as tool errors; answered by the proxy from its store behind its token, never forwarded.

use crate::common::{client, config, notice, proxy};
use crate::mock::{Mock, Reply};
use contextfold::store::{Payload, StoreLocation};
use contextfold_core::hash::payload_ref;
use contextfold_core::{Message, Role};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The Python of the MCP SDK's virtualenv, or `None` after a visible notice (with `CI` set,
/// a failure instead).
fn mcp_python() -> Option<PathBuf> {
    let python = std::env::var_os("CONTEXTFOLD_MCP_PYTHON").map(PathBuf::from).filter(|path| path.exists());
    if python.is_none() {
        let why = "the MCP Python SDK is not installed (CONTEXTFOLD_MCP_PYTHON names nothing); \
                   `source .ci/setup.d/25-mcp-client.sh` installs it";
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        notice(&format!("skipped: {why}"));
    }
    python
}

/// Runs the SDK client against `url` with the proxy `token` and `calls`; returns what it
/// printed: `{tools, results}`.
async fn mcp_client(python: &PathBuf, url: &str, token: &str, mode: &str, calls: &Value) -> Value {
    use tokio::io::AsyncWriteExt;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/mcp/recall.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args(["--mode", mode, "--url", url, "--token", token])
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(calls.to_string().as_bytes()).await.expect("the calls are sent");
    drop(stdin);
    let output = child.wait_with_output().await.expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the MCP client failed: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|err| panic!("not JSON ({err}): {stdout}"))
}

/// A store holding a large output, a short one and a message, in a session of its own.
fn stored(path: &std::path::Path) -> (String, String) {
    let store = StoreLocation::File(path.to_path_buf()).open().expect("a store");
    let session = store.create_session("agent").expect("a session");
    let big: String = (0..3_000).map(|i| format!("{i:04} test case wombat_{i} passed\n")).collect();
    let small = "FAILED tests/test_tax.py::test_rounding - AssertionError: 0.1 != 0.10000001\n".to_string();
    for (index, text) in [&big, &small].into_iter().enumerate() {
        let payload = json!(text);
        store
            .put_payload(&Payload {
                reference: payload_ref(&payload),
                session: session.clone(),
                tool: "Bash".into(),
                kind: "shell".into(),
                target: Some("pytest".into()),
                tokens: 1,
                message: index,
                block: 0,
                payload,
            })
            .expect("stored");
    }
    store.append_messages(&session, &[Message::text(Role::User, "Why does test_rounding fail?")]).expect("stored");
    (big, small)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_recalls_from_the_proxys_store_at_mcp_behind_its_token() {
    let Some(python) = mcp_python() else { return };
    let dir = std::env::temp_dir().join(format!("contextfold-serve-mcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    let (big, small) = stored(&path);
    let (big_ref, small_ref) = (payload_ref(&json!(big)), payload_ref(&json!(small)));
    let mock = Mock::start(|_| Reply::json(json!({}))).await;
    let mut settings = config(&mock.url());
    settings.store = Some(StoreLocation::File(path));
    settings.auth_token = Some("proxy-token-0123456789".into());
    let proxy = proxy(settings).await;
    let url = format!("{}/mcp", proxy.url);

    let mut calls = vec![
        json!({"tool": "context_recall", "arguments": {"ref": small_ref}}),
        json!({"tool": "context_recall", "arguments": {"ref": big_ref, "offset": 2998}}),
        json!({"tool": "context_search", "arguments": {"query": "test_rounding"}}),
        json!({"tool": "context_recall", "arguments": {"ref": "cf-000000000000"}}),
        json!({"tool": "context_search", "arguments": {"query": "wombat", "session": "no-such-session"}}),
    ];
    let pages: Vec<usize> = (0..3_000).step_by(800).collect();
    calls.extend(pages.iter().map(
        |&offset| json!({"tool": "context_recall", "arguments": {"ref": big_ref, "offset": offset, "limit": 800}}),
    ));
    let mut seconds = Vec::new();
    for mode in ["legacy", "auto"] {
        let out = mcp_client(&python, &url, "proxy-token-0123456789", mode, &Value::Array(calls.clone())).await;
        let names: Vec<&str> =
            out["tools"].as_array().unwrap().iter().filter_map(|tool| tool["name"].as_str()).collect();
        assert_eq!(names, ["context_recall", "context_search"], "{mode}");
        let results = out["results"].as_array().unwrap();
        let text = |i: usize| results[i]["text"].as_str().unwrap().to_string();
        let error = |i: usize| results[i]["is_error"] == true;
        assert_eq!((text(0), error(0)), (small.clone(), false), "{mode}: exactly as stored");
        assert_eq!(
            text(1),
            format!("[{big_ref}: lines 2999-3000 of 3000; the end]\n2998 test case wombat_2998 passed\n2999 test case wombat_2999 passed\n")
        );
        let search = text(2);
        assert!(search.starts_with("2 matches for \"test_rounding\", newest first:\n"), "{search}");
        assert!(
            search.contains(&format!("output {small_ref} (call context_recall")) && search.contains(", message 0: ")
        );
        assert!(error(3) && text(3).contains("no output is stored under ref `cf-000000000000`"), "{}", text(3));
        assert!(
            error(4)
                && text(4)
                    == "search failed: there is no session `no-such-session`; leave `session` out to search them all"
        );
        let whole: String =
            (0..pages.len()).map(|page| text(5 + page).split_once('\n').unwrap().1.to_string()).collect();
        assert!(whole == big, "{mode}: the parts put together are the output byte for byte");
        seconds.extend(results.iter().filter_map(|result| result["seconds"].as_f64()));
    }
    seconds.sort_by(f64::total_cmp);
    notice(&format!(
        "/mcp (streamable HTTP): {} tool calls, median {:.2} ms, slowest {:.2} ms",
        seconds.len(),
        seconds[seconds.len() / 2] * 1e3,
        seconds[seconds.len() - 1] * 1e3
    ));

    // Without the token: the proxy's 401, like every request.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let refused = client()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("an answer");
    assert_eq!(refused.status(), 401);
    assert!(mock.requests().is_empty(), "/mcp is answered by the proxy, never forwarded");
    assert!(crate::common::logs().contains("POST /mcp"), "each call has its log line");
    proxy.stop().await.expect("the proxy stops");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_store_mcp_says_so() {
    let mock = Mock::start(|_| Reply::json(json!({}))).await;
    let proxy = proxy(config(&mock.url())).await;
    let answer = client().post(format!("{}/mcp", proxy.url)).body("{}").send().await.expect("an answer");
    assert_eq!(answer.status(), 404);
    let body: Value = answer.json().await.expect("JSON");
    assert_eq!(
        body["error"]["message"],
        "contextfold serve runs without a store (--no-store), so /mcp has nothing to recall"
    );
    assert!(mock.requests().is_empty(), "never forwarded");
}
