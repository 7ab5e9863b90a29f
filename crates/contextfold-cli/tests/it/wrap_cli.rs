//! `contextfold wrap`: the agent's exit status passes through, the proxy is gone afterwards,
//! the savings line matches the proxy's log; and the real Claude Code CLI, headless through
//! `wrap claude` against a scripted upstream, recalls an output the proxy evicted with the
//! `contextfold mcp` tool wrap registered, getting back the output byte for byte; and the real
//! Codex CLI, through `wrap codex exec`, does the same from its `exec` tool's JavaScript.

use crate::common::{arg, notice, scratch};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the scripted upstream received.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    body: Value,
}

/// A scripted upstream on 127.0.0.1: every request is recorded; the script answers the ones
/// it knows with a stream of server-sent events, and the others get `{}`.
struct Upstream {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Upstream {
    fn start(script: impl Fn(&Received) -> Option<String> + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let kept = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                // Answer like a real server: no Nagle delay on the last small write.
                let _ = stream.set_nodelay(true);
                let (kept, script) = (kept.clone(), script.clone());
                std::thread::spawn(move || answer(stream, &kept, script.as_ref()));
            }
        });
        Upstream { url, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Reads one request from `stream`, records it, and writes the script's answer.
fn answer(stream: TcpStream, kept: &Mutex<Vec<Received>>, script: &dyn Fn(&Received) -> Option<String>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or_default().to_string(), parts.next().unwrap_or_default().to_string());
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request = Received { method, path, body: serde_json::from_slice(&body).unwrap_or(Value::Null) };
    kept.lock().unwrap().push(request.clone());
    let scripted = if request.method == "POST" { script(&request) } else { None };
    let (content_type, payload) = match scripted {
        Some(events) => ("text/event-stream", events),
        None => ("application/json", "{}".to_string()),
    };
    let mut stream = reader.into_inner();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        payload.len()
    );
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(payload.as_bytes()));
}

/// A streamed Messages answer holding `content`.
fn message_stream(content: &[Value], stop_reason: &str, input_tokens: u64) -> String {
    // Each answer its own id, as the API gives: Claude Code merges the blocks of one id.
    static ANSWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = format!("msg_wrap_{}", ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    );
    for (index, block) in content.iter().enumerate() {
        let (start, delta) = match block["type"].as_str() {
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
            _ => (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": block["text"]})),
        };
        out += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        out += &event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta}));
        out += &event("content_block_stop", json!({"type": "content_block_stop", "index": index}));
    }
    out += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    );
    out + &event("message_stop", json!({"type": "message_stop"}))
}

/// Runs `contextfold wrap args…` in `dir`, at most `limit`, with a clean environment.
fn wrap(dir: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_contextfold"));
    command
        .arg("wrap")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let child = command.spawn().expect("contextfold starts");
    let pid = child.id().to_string();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    match finished.recv_timeout(limit) {
        Ok(out) => out.expect("wrap ran"),
        Err(_) => {
            // Stop it, and show what it said before it hung.
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            let out = finished.recv().expect("wrap was stopped").expect("wrap ran");
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            panic!("wrap did not finish within {limit:?}\nstdout: {stdout}\nstderr: {stderr}");
        }
    }
}

/// The proxy's address, from the line wrap writes when it starts.
fn proxy_address(stderr: &str) -> String {
    let line = stderr.lines().find(|line| line.starts_with("contextfold wrap: the proxy listens on http://"));
    line.and_then(|line| line.rsplit("http://").next()).expect("the proxy's address").to_string()
}

#[test]
fn the_agents_exit_status_passes_through_and_the_proxy_is_gone_afterwards() {
    let dir = scratch("wrap", "status");
    for (script, code) in [("exit 7", 7), ("kill -TERM $$", 128 + 15), ("test -n \"$ANTHROPIC_BASE_URL\"", 0)] {
        let out =
            wrap(&dir, &["--no-store", "--program", "/bin/sh", "claude", "-c", script], &[], Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{script}: {stderr}");
        assert!(stderr.contains("contextfold wrap: 0 calls, 0 compactions; 0 tokens received, 0 sent"), "{stderr}");
        let addr = proxy_address(&stderr);
        assert!(TcpStream::connect(&addr).is_err(), "nothing listens on {addr} once wrap has exited");
    }
    // The agent sees the proxy's address and the MCP server's registration.
    let out =
        wrap(&dir, &["--store", "s.db", "--program", "/bin/echo", "claude", "-p", "hi"], &[], Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let store = arg(&dir.join("s.db"));
    assert!(stdout.starts_with("-p hi --mcp-config {\"mcpServers\":{\"contextfold\":"), "{stdout}");
    assert!(stdout.contains(&format!("\"args\":[\"mcp\",\"--store\",\"{store}\"]")), "{stdout}");
    assert!(stdout
        .trim_end()
        .ends_with("--allowedTools mcp__contextfold__context_recall,mcp__contextfold__context_search"));
    let missing =
        wrap(&dir, &["--no-store", "--program", "/nonexistent/claude", "claude"], &[], Duration::from_secs(60));
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr)
        .contains("cannot run /nonexistent/claude (give its path with --program)"));
}

/// Steps of `seq` output the script asks for before giving up on a compaction.
const MAX_STEPS: usize = 30;

/// What the scripted upstream saw of the recall: the evicted output as Claude Code first sent
/// it, the ref and the tool name the model was shown, and the tool result of the recall.
#[derive(Default)]
struct Recall {
    original: Option<Value>,
    pointer: Option<String>,
    tool: Option<String>,
    reference: Option<String>,
    result: Option<Value>,
}

impl Recall {
    /// Notes the first command's output (`output`, whose text is `text`) as the agent sent it:
    /// the first time, the original; once it comes as a pointer or marker, its text and ref.
    fn saw_first_output(&mut self, output: &Value, text: &str) {
        match (&self.original, text.split_once("; ref cf-")) {
            (None, _) => self.original = Some(output.clone()),
            (Some(_), Some((pointer, reference))) => {
                self.pointer = Some(pointer.to_string());
                let hex: String = reference.chars().take_while(char::is_ascii_hexdigit).collect();
                self.reference = Some(format!("cf-{hex}"));
            }
            _ => {}
        }
    }
}

/// The tool_result answering `id` in the newest user message of `body`.
fn result_of<'b>(body: &'b Value, id: &str) -> Option<&'b Value> {
    body["messages"]
        .as_array()?
        .iter()
        .flat_map(|message| message["content"].as_array().into_iter().flatten())
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == id)
}

/// The text of a tool_result's content: a string, or its text blocks joined by line ends.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|block| block["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn recall_script(state: &Mutex<Recall>, request: &Received) -> (Vec<Value>, &'static str) {
    let body = &request.body;
    let tools: Vec<&str> =
        body["tools"].as_array().into_iter().flatten().filter_map(|tool| tool["name"].as_str()).collect();
    if tools.is_empty() {
        return (vec![json!({"type": "text", "text": "ok"})], "end_turn");
    }
    let mut state = state.lock().unwrap();
    if let Some(result) = result_of(body, "toolu_recall") {
        state.result = Some(result["content"].clone());
        return (vec![json!({"type": "text", "text": "Recalled; all done."})], "end_turn");
    }
    let steps = body["messages"].as_array().map_or(0, |messages| messages.len() / 2);
    if let Some(first) = result_of(body, "toolu_seq_00") {
        state.saw_first_output(&first["content"], &result_text(&first["content"]));
    }
    let recall_tool = tools.iter().find(|name| name.ends_with("__context_recall")).map(|name| name.to_string());
    if let (Some(reference), Some(tool)) = (state.reference.clone(), recall_tool) {
        state.tool = Some(tool.clone());
        let call = json!({"type": "tool_use", "id": "toolu_recall", "name": tool, "input": {"ref": reference}});
        return (vec![json!({"type": "text", "text": "I need that log again."}), call], "tool_use");
    }
    if steps > MAX_STEPS {
        return (vec![json!({"type": "text", "text": "No compaction came; giving up."})], "end_turn");
    }
    let command = format!("seq -f 'step {steps} line %g of the wombat build log, all fine so far' 1 300");
    let call = json!({"type": "tool_use", "id": format!("toolu_seq_{steps:02}"), "name": "Bash",
        "input": {"command": command, "description": "Print the build log"}});
    (vec![json!({"type": "text", "text": format!("Step {steps}.")}), call], "tool_use")
}

/// The agent the variable `variable` names, or `None` after a visible notice (with `CI` set,
/// a failure) saying that `setup` installs it.
fn installed(variable: &str, agent: &str, setup: &str) -> Option<PathBuf> {
    let path = std::env::var_os(variable).map(PathBuf::from).filter(|path| path.exists());
    if path.is_none() {
        let why = format!("{agent} is not installed ({variable} names nothing); `source {setup}` installs it");
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        notice(&format!("skipped: {why}"));
    }
    path
}

#[test]
fn claude_code_recalls_an_evicted_output_through_wrap_byte_for_byte() {
    let Some(claude) = installed("CONTEXTFOLD_CLAUDE", "Claude Code", ".ci/setup.d/20-anthropic-clients.sh") else {
        return;
    };
    let dir = scratch("wrap", "claude");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let state = Arc::new(Mutex::new(Recall::default()));
    let upstream = Upstream::start({
        let state = state.clone();
        move |request| {
            let (content, stop) = recall_script(&state, request);
            let input_tokens = request.body.to_string().len() as u64 / 4;
            request.path.starts_with("/v1/messages").then(|| message_stream(&content, stop, input_tokens))
        }
    });
    let log = dir.join("log.jsonl");
    let (store, log_arg, home_arg) = (arg(&dir.join("s.db")), arg(&log), arg(&home));
    let claude_arg = arg(&claude);
    let args = [
        "--upstream",
        &upstream.url,
        "--store",
        &store,
        "--window",
        "80k",
        "--reserve",
        "8k",
        "--strategy",
        "evict",
        "--log",
        &log_arg,
        "--log-format",
        "json",
        "--program",
        &claude_arg,
        "claude",
        "-p",
        "Build, then look at the first log again.",
        "--output-format",
        "json",
        "--model",
        "claude-sonnet-4-5",
    ];
    let env = [
        ("HOME", home_arg.as_str()),
        ("ANTHROPIC_API_KEY", "test-key"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("CLAUDE_CODE_MAX_RETRIES", "1"),
        ("IS_SANDBOX", "1"),
    ];
    let out = wrap(&dir, &args, &env, Duration::from_secs(300));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "Claude Code's exit status\nstdout: {stdout}\nstderr: {stderr}");
    let state = state.lock().unwrap();
    let tool =
        state.tool.clone().unwrap_or_else(|| panic!("no recall was asked for\nstdout: {stdout}\nstderr: {stderr}"));
    assert_eq!(tool, "mcp__contextfold__context_recall");
    let pointer = state.pointer.clone().expect("the output was evicted");
    // A pointer (`… — call TOOL with this ref to restore`) or a clip marker (`… for the full output`).
    assert!(pointer.contains(&format!(" — call {tool} with this ref ")), "the marker names the tool: {pointer}");
    let original = result_text(state.original.as_ref().expect("the output as first sent"));
    assert!(original.contains("step 0 line 300 of the wombat build log"), "{original}");
    let result = state.result.as_ref().unwrap_or_else(|| panic!("Claude Code sent no recall result: {stdout}"));
    assert!(result_text(result) == original, "the recall is the output byte for byte: {result}");
    assert!(stdout.contains("\"is_error\":false") || stdout.contains("\"subtype\":\"success\""), "{stdout}");

    // The savings line is the log's sums.
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|line: &Value| line["message"] == "request")
        .collect();
    let calls: Vec<&Value> = lines
        .iter()
        .filter(|line| {
            ["unchanged", "compacted", "resent", "untouched"].contains(&line["action"].as_str().unwrap_or_default())
                && line["status"] == 200
                && !line["path"].as_str().unwrap_or_default().ends_with("/count_tokens")
                && line["tokens_in"].is_u64()
        })
        .collect();
    let sum = |field: &str| calls.iter().map(|line| line[field].as_u64().unwrap()).sum::<u64>();
    let compactions = calls.iter().filter(|line| line["action"] == "compacted").count();
    assert!(compactions >= 1, "the proxy compacted");
    let expected = format!(
        "contextfold wrap: {} calls, {compactions} compactions; {} tokens received, {} sent; estimated input cost $",
        calls.len(),
        sum("tokens_in"),
        sum("tokens_out")
    );
    assert!(stderr.contains(&expected), "{expected}\n{stderr}");
    assert!(lines.iter().any(|line| line["action"] == "compacted"));
    let addr = proxy_address(&stderr);
    assert!(TcpStream::connect(&addr).is_err(), "the proxy is gone");
    let received = upstream.received();
    notice(&format!(
        "wrap claude: {} upstream requests, {} calls, {compactions} compactions; {}",
        received.len(),
        calls.len(),
        stderr.lines().last().unwrap_or_default()
    ));
}

/// A streamed Responses API answer holding the items `output`: created, each item done, then
/// completed with a usage that says `input_tokens`.
fn responses_stream(output: &[Value], input_tokens: u64) -> String {
    static ANSWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = format!("resp_wrap_{}", ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let response = |status: &str, output: &[Value]| {
        json!({"id": id, "object": "response", "created_at": 1_767_225_600, "status": status, "model": "gpt-5",
            "output": output, "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input_tokens + 20}})
    };
    let event = |data: Value| format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or_default());
    let mut out = event(json!({"type": "response.created", "response": response("in_progress", &[])}));
    for (index, item) in output.iter().enumerate() {
        out += &event(json!({"type": "response.output_item.added", "output_index": index, "item": item}));
        out += &event(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    }
    out + &event(json!({"type": "response.completed", "response": response("completed", output)}))
}

/// The text of a `function_call_output`'s output: a string (a JSON list of text parts, as
/// an MCP tool's result may come, is read as their texts joined), or its text parts joined.
fn output_text(output: &Value) -> String {
    let parts = |items: &[Value]| items.iter().filter_map(|part| part["text"].as_str()).collect::<Vec<_>>().join("\n");
    match output {
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) if items.iter().all(|part| part["text"].is_string()) => parts(&items),
            _ => text.clone(),
        },
        Value::Array(items) => parts(items),
        _ => String::new(),
    }
}

/// The output Codex sent for `call_id` in `body`.
fn call_output<'b>(body: &'b Value, call_id: &str) -> Option<&'b Value> {
    body["input"]
        .as_array()?
        .iter()
        .find(|item| {
            ["function_call_output", "custom_tool_call_output"].contains(&item["type"].as_str().unwrap_or_default())
                && item["call_id"] == call_id
        })
        .map(|item| &item["output"])
}

/// Codex's side of the recall: commands that print a build log until the first one's output
/// comes back as a pointer, then a call of the recall tool with its ref.
fn codex_recall_script(state: &Mutex<Recall>, request: &Received) -> Option<String> {
    if !request.path.ends_with("/responses") {
        return None;
    }
    let body = &request.body;
    let input_tokens = body.to_string().len() as u64 / 4;
    let message = |text: &str| {
        json!({"type": "message", "id": "msg_wrap", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    let mut state = state.lock().unwrap();
    if let Some(result) = call_output(body, "call_recall") {
        state.result = Some(result.clone());
        return Some(responses_stream(&[message("Recalled; all done.")], input_tokens));
    }
    if let Some(first) = call_output(body, "call_seq_00") {
        state.saw_first_output(first, &output_text(first));
    }
    // Codex offers MCP tools as a deferred namespace (`mcp__contextfold`), called from its
    // `exec` tool's JavaScript as `tools.mcp__contextfold__context_recall(…)`.
    let offered = body.to_string().contains("- mcp__contextfold: ");
    if let (Some(reference), true) = (state.reference.clone(), offered) {
        let tool = "mcp__contextfold__context_recall";
        state.tool = Some(tool.to_string());
        let code =
            format!("const result = await tools.{tool}({});\ntext(JSON.stringify(result));", json!({"ref": reference}));
        let call = json!({"type": "custom_tool_call", "id": "ctc_recall", "status": "completed", "call_id": "call_recall",
            "name": "exec", "input": code});
        return Some(responses_stream(&[call], input_tokens));
    }
    let steps = body["input"].as_array().into_iter().flatten().filter(|item| item["type"] == "function_call").count();
    if steps > MAX_STEPS {
        return Some(responses_stream(&[message("No compaction came; giving up.")], input_tokens));
    }
    let cmd = format!("seq -f 'step {steps} line %g of the wombat build log, all fine so far' 1 300");
    let call = json!({"type": "function_call", "id": format!("fc_{steps:02}"), "status": "completed",
        "call_id": format!("call_seq_{steps:02}"), "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string()});
    Some(responses_stream(&[call], input_tokens))
}

#[test]
fn codex_recalls_an_evicted_output_through_wrap_byte_for_byte() {
    let Some(codex) = installed("CONTEXTFOLD_CODEX", "Codex", ".ci/setup.d/40-openai-clients.sh") else { return };
    let dir = scratch("wrap", "codex");
    let (home, work) = (dir.join("home"), dir.join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let state = Arc::new(Mutex::new(Recall::default()));
    let upstream = Upstream::start({
        let state = state.clone();
        move |request| codex_recall_script(&state, request)
    });
    let openai = format!("{}/v1", upstream.url);
    let (store, home_arg, work_arg, codex_arg) = (arg(&dir.join("s.db")), arg(&home), arg(&work), arg(&codex));
    let args = [
        "--upstream-openai",
        &openai,
        "--store",
        &store,
        "--window",
        "40k",
        "--reserve",
        "4k",
        "--strategy",
        "evict",
        "--program",
        &codex_arg,
        "codex",
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-C",
        &work_arg,
        "Build, then look at the first log again.",
    ];
    let env = [("HOME", home_arg.as_str()), ("CODEX_HOME", home_arg.as_str()), ("OPENAI_API_KEY", "sk-test-key")];
    let out = wrap(&dir, &args, &env, Duration::from_secs(300));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "Codex's exit status\nstdout: {stdout}\nstderr: {stderr}");
    let state = state.lock().unwrap();
    let tool = state.tool.clone().unwrap_or_else(|| {
        panic!("no recall was asked for (ref {:?})\nstdout: {stdout}\nstderr: {stderr}", state.reference)
    });
    assert!(tool.ends_with("context_recall") && tool.contains("contextfold"), "{tool}");
    let pointer = state.pointer.clone().expect("the output was evicted");
    assert!(pointer.contains(&format!(" — call {tool} with this ref ")), "the marker names the tool: {pointer}");
    let original = output_text(state.original.as_ref().expect("the output as first sent"));
    assert!(original.contains("step 0 line 300 of the wombat build log"), "{original}");
    let result = state.result.as_ref().unwrap_or_else(|| panic!("Codex sent no recall result: {stdout}\n{stderr}"));
    // `exec` prints what the script gave `text()`: the MCP tool's result as JSON, after a
    // header of its own.
    let printed = output_text(result);
    let json = printed.find('{').map(|start| &printed[start..]).unwrap_or_default();
    let tool_result: Value = serde_json::Deserializer::from_str(json)
        .into_iter()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("the tool's result as JSON: {printed}"));
    assert_ne!(tool_result["isError"], true, "{tool_result}");
    let recalled = output_text(&tool_result["content"]);
    assert!(recalled == original, "the recall is the output byte for byte:\n{recalled}\n---\n{original}");
    assert!(stderr.contains("contextfold wrap: ") && stderr.contains(" compactions; "), "{stderr}");
    notice(&format!(
        "wrap codex: the model saw the recall tool as {tool}; {}",
        stderr.lines().last().unwrap_or_default()
    ));
}
