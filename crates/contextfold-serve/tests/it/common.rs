//! Helpers shared by the proxy's tests: a running proxy, an HTTP client, an agent that
//! talks through the proxy the way a coding agent does, and a log capture.
#![allow(dead_code)]

use crate::mock::{canned, script_turn, Recorded, Reply};
use contextfold_serve::{Proxy, ServeConfig, ServeError, Stats};
pub use contextfold_test_support::{corpus_dir, corpus_files, notice};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A proxy serving on 127.0.0.1; stops (and drains) when dropped or [`Running::stop`]ped.
pub struct Running {
    /// Its base URL.
    pub url: String,
    /// What it did.
    pub stats: Arc<Stats>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Running {
    /// Stops accepting, waits for the requests in flight, and returns how it ended.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("running");
        tokio::time::timeout(Duration::from_secs(10), task).await.expect("the proxy drains in time").expect("joins")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A configuration forwarding to `upstream`, listening on a free loopback port, with a
/// small window so that conversations of a few dozen calls compact.
pub fn config(upstream: &str) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        upstream: upstream.to_string(),
        window: Some(24_000),
        reserve: 2_000,
        upstream_timeout: Duration::from_secs(10),
        ..ServeConfig::default()
    }
}

/// Starts a proxy with `config`.
pub async fn proxy(config: ServeConfig) -> Running {
    capture_logs();
    let proxy = Proxy::bind(config).await.expect("the proxy binds");
    let url = format!("http://{}", proxy.local_addr());
    let stats = proxy.stats();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(proxy.run(async {
        let _ = stopped.await;
    }));
    Running { url, stats, stop: Some(stop), task: Some(task) }
}

/// An HTTP client that never goes through a proxy from the environment.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().expect("a client")
}

/// Every log line written so far by this test binary.
pub fn logs() -> String {
    String::from_utf8_lossy(&LOGS.get_or_init(Default::default).lock().unwrap()).into_owned()
}

static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

/// Sends every `tracing` event of the test binary into [`logs`].
pub fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let buffer = LOGS.get_or_init(Default::default).clone();
        let writer = move || Capture(buffer.clone());
        let _ = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .try_init();
    });
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A coding agent's conversation: a system prompt with a billing line that changes on every
/// call (as Claude Code's does), tools, and a history that grows by a tool call and its
/// result per call.
pub struct Agent {
    /// Its name, in every message, so that leaks between conversations show.
    pub name: String,
    /// The session header it sends, when any.
    pub session: Option<String>,
    /// The history.
    pub messages: Vec<Value>,
    /// Whether it puts a cache breakpoint on its newest block, as Claude Code does.
    pub breakpoints: bool,
    /// Characters of each tool result.
    pub output_chars: usize,
    /// The body of the last request sent.
    pub last_body: String,
    /// Headers it sends beside its key and version (a client's own credentials, say).
    pub headers: Vec<(String, String)>,
    calls: usize,
}

impl Agent {
    /// An agent named `name` whose first request asks for `task`.
    pub fn new(name: &str, task: &str) -> Agent {
        Agent {
            name: name.to_string(),
            session: None,
            messages: vec![json!({"role": "user", "content": format!("[{name}] {task}")})],
            breakpoints: false,
            output_chars: 6_000,
            last_body: String::new(),
            headers: Vec::new(),
            calls: 0,
        }
    }

    /// The system prompt of call `call`.
    pub fn system(&self) -> Value {
        json!([
            {"type": "text", "text": format!("x-anthropic-billing-header: cc_version=2.1.0; cch={:05};", self.calls)},
            {"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": format!("You work for {}.", self.name)}
        ])
    }

    /// The tool definitions.
    pub fn tools() -> Value {
        json!([
            {"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
            {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
             "cache_control": {"type": "ephemeral"}}
        ])
    }

    /// The body of the next request.
    pub fn body(&self, stream: bool) -> String {
        let mut messages = self.messages.clone();
        if self.breakpoints {
            if let Some(last) = messages.last_mut() {
                set_breakpoint(last);
            }
        }
        let body = json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": self.system(),
            "tools": Agent::tools(),
            "messages": messages,
            "metadata": {"user_id": format!("user_0f_account_1a_session_{}", self.name)},
            "stream": stream,
            "thinking": {"type": "adaptive"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        });
        body.to_string()
    }

    /// Sends the next request through `proxy` and appends the answer (and, for a tool call,
    /// its result) to the history. Returns the answer's content.
    pub async fn step(&mut self, client: &reqwest::Client, proxy: &str) -> Value {
        self.last_body = self.body(false);
        let mut request = client
            .post(format!("{proxy}/v1/messages?beta=true"))
            .header("x-api-key", FAKE_API_KEY)
            .header("anthropic-version", "2023-06-01")
            .body(self.last_body.clone());
        if let Some(session) = &self.session {
            request = request.header("x-claude-code-session-id", session.as_str());
        }
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send().await.expect("the proxy answers");
        let status = response.status();
        let text = response.text().await.expect("a body");
        assert_eq!(status, 200, "{}: {text}", self.name);
        let answer: Value = serde_json::from_str(&text).expect("a JSON answer");
        self.calls += 1;
        self.push(answer["content"].clone());
        answer["content"].clone()
    }

    /// Appends an assistant message with `content`, and results for its tool calls.
    pub fn push(&mut self, content: Value) {
        let results: Vec<Value> = content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == "tool_use")
            .map(|block| {
                let id = block["id"].as_str().unwrap_or_default();
                json!({"type": "tool_result", "tool_use_id": id, "content": tool_output(&self.name, id, self.output_chars)})
            })
            .collect();
        self.messages.push(json!({"role": "assistant", "content": content}));
        if !results.is_empty() {
            self.messages.push(json!({"role": "user", "content": results}));
        }
    }
}

/// Marks the last block of `message` as a cache breakpoint.
pub fn set_breakpoint(message: &mut Value) {
    if let Some(text) = message["content"].as_str().map(str::to_string) {
        message["content"] = json!([{"type": "text", "text": text}]);
    }
    if let Some(block) = message["content"].as_array_mut().and_then(|blocks| blocks.last_mut()) {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
}

/// A tool's output: numbered lines naming the agent, `chars` long.
pub fn tool_output(agent: &str, id: &str, chars: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    while out.len() < chars {
        out += &format!("{agent} {id} line {line}: fn step_{line}() -> Result<(), Error> {{ work({line}) }}\n");
        line += 1;
    }
    out
}

/// A script for agents: call `Read` on a file named after the agent and the turn, until
/// `turns` assistant messages, then answer in text naming the agent. Its usage counts a
/// token per three bytes of the request, about what a tokenizer finds in these bodies.
pub fn agent_script(turns: usize) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    agent_script_counting(turns, 1.0 / 3.0)
}

/// [`agent_script`], reporting `tokens_per_byte` of the request as its input tokens.
pub fn agent_script_counting(
    turns: usize,
    tokens_per_byte: f64,
) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |request| {
        let input_tokens = (request.body.len() as f64 * tokens_per_byte) as u64;
        let turn = script_turn(request);
        let body = request.json();
        let name = agent_name(&body);
        if turn >= turns {
            let done = json!([{"type": "text", "text": format!("[{name}] done after {turn} turns")}]);
            return canned::message_with_usage(done, "end_turn", input_tokens);
        }
        canned::message_with_usage(
            json!([
                {"type": "text", "text": format!("[{name}] reading file {turn}")},
                {"type": "tool_use", "id": format!("toolu_{name}_{turn:03}"), "name": "Read",
                 "input": {"file_path": format!("/src/{name}/file_{turn}.rs")}}
            ]),
            "tool_use",
            input_tokens,
        )
    }
}

/// The agent's name from its first message (`[name] task`).
pub fn agent_name(body: &Value) -> String {
    let first = &body["messages"][0]["content"];
    let text =
        first.as_str().map(str::to_string).unwrap_or_else(|| first[0]["text"].as_str().unwrap_or_default().to_string());
    text.trim_start_matches('[').split(']').next().unwrap_or_default().to_string()
}

/// A realistic-looking fake Anthropic API key.
pub const FAKE_API_KEY: &str =
    "sk-ant-api03-Zq8vN2xK7pL4mR9tW1yB6cF3hJ5dG0sA8eU2iO7kM4nQ1rT6vX9zC3bV5wY8uI0pE2aS4dF6gH8jK1lZ3xC5vB7nM9qW-AbCdEfAA";
/// A realistic-looking fake OAuth token.
pub const FAKE_OAUTH: &str = "sk-ant-oat01-Hk3Lm9Np2Qr5St8Uv1Wx4Yz7Ab0Cd3Ef6Gh9Ij2Kl5Mn8Op1Qr4St7Uv0Wx3Yz6-AAAAAA";

/// The top-level fields of a body, as raw text.
pub fn fields(body: &[u8]) -> BTreeMap<String, &RawValue> {
    serde_json::from_slice(body).expect("a JSON object")
}

/// The raw text of each message of a body.
pub fn raw_messages(body: &[u8]) -> Vec<String> {
    let messages: Vec<&RawValue> = serde_json::from_str(fields(body)["messages"].get()).expect("an array");
    messages.iter().map(|raw| raw.get().to_string()).collect()
}

/// A message's JSON without cache breakpoints.
pub fn without_breakpoints(raw: &str) -> Value {
    let mut value: Value = serde_json::from_str(raw).unwrap();
    if let Some(blocks) = value["content"].as_array_mut() {
        for block in blocks.iter_mut().filter_map(Value::as_object_mut) {
            block.remove("cache_control");
        }
        // A lone text block with no breakpoint is what a string content was.
        if let [block] = blocks.as_slice() {
            if block.as_object().is_some_and(|fields| fields.len() == 2) && block["type"] == "text" {
                value["content"] = block["text"].clone();
            }
        }
    }
    value
}

/// Whether `next` starts with `previous`: every message the same text, but for the newest
/// one of `previous`, whose breakpoint the client may have moved (compared without it).
pub fn extends(previous: &[String], next: &[String]) -> bool {
    next.len() > previous.len()
        && previous.iter().zip(next).enumerate().all(|(index, (before, after))| {
            before == after
                || (index + 1 == previous.len() && without_breakpoints(before) == without_breakpoints(after))
        })
}
