//! A working day behind the proxy, compressed: a client shaped like Claude Code (a ~70 KB
//! system prompt and 24 tools, a cache breakpoint on its newest block, `<system-reminder>`
//! blocks and `role: "system"` reminders after tool results, a tool loop whose outputs vary
//! in size, streaming every other call, its own history never compacted) makes thousands of
//! calls through `serve --store`.
//!
//! Asserted, within one run: no request is refused; every request sent upstream validates;
//! the newest tool output reaches the upstream whole; the store holds each message the client
//! sent once (its rows are the distinct messages) and exports the client's last history; the
//! proxy's added latency over the last calls stays within a stated ratio of the first calls,
//! though the client's body grew many times over; and the process's resident memory stays
//! under a stated bound. The mock upstream lets go of each body once it is checked.
//!
//! The added latency of a call is its round trip through the proxy less the round trip of the
//! same bytes sent straight to an upstream that answers at once (paired, interleaved); the
//! ends of the run are compared by their lower quartiles, which other tests running beside
//! this one disturb least.

use crate::common::{client, config, notice, proxy};
use crate::mock::{canned, Mock, Recorded, Reply};
use crate::stored::scratch;
use bytes::Bytes;
use contextfold::core::hash::payload_ref;
use contextfold::store::{SessionStore, SqliteStore, StoreLocation};
use contextfold_test_support::removed_blocks_are_in_the_log;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The calls whose added latency is compared at each end of the run.
const SAMPLE: usize = 100;

/// A client shaped like Claude Code, keeping its history only as the text it sends (so that
/// a call costs the client what is new, and its memory is one copy of the history).
struct Client {
    /// Everything before the messages: model, system prompt, tools, `"messages":[`.
    head: String,
    /// The messages but the newest, each serialized, joined by commas.
    older: String,
    /// The newest message (it carries the breakpoint, which moves).
    newest: Value,
    /// How many messages it holds.
    messages: usize,
    /// The newest tool output.
    last_output: Option<String>,
    /// Calls made.
    calls: usize,
    /// Output sizes cycle through this range, in bytes.
    output: (usize, usize),
}

impl Client {
    fn new(output: (usize, usize)) -> Client {
        let system: String = (0..900)
            .map(|line| format!("Rule {line}: read a file before editing it; keep changes small and tested.\n"))
            .collect();
        let tools: Vec<Value> = (0..24)
            .map(|tool| {
                json!({"name": format!("Tool{tool}"), "description": "Runs the given command in a shell and returns its output; use it for builds, tests and logs. ".repeat(4),
                    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}})
            })
            .collect();
        let head = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "tools": tools})
        .to_string();
        let head = format!("{},\"messages\":[", head.trim_end_matches('}'));
        let first = json!({"role": "user", "content": [{"type": "text", "text": "Build the wombat service and keep its logs."}]});
        Client { head, older: String::new(), newest: first, messages: 1, last_output: None, calls: 0, output }
    }

    /// The next request's body, shared by the calls that send it.
    fn body(&self, stream: bool) -> Bytes {
        let mut newest = self.newest.clone();
        if let Some(block) = newest["content"].as_array_mut().and_then(|blocks| blocks.last_mut()) {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        let comma = if self.older.is_empty() { "" } else { "," };
        Bytes::from(format!("{}{}{comma}{newest}],\"stream\":{stream}}}", self.head, self.older))
    }

    fn push(&mut self, message: Value) {
        let previous = std::mem::replace(&mut self.newest, message);
        if !self.older.is_empty() {
            self.older.push(',');
        }
        self.older += &previous.to_string();
        self.messages += 1;
    }

    /// Its first `count` messages, read back from the text it sends.
    fn history(&self, count: usize) -> Vec<Value> {
        let comma = if self.older.is_empty() { "" } else { "," };
        let all: Vec<Value> =
            serde_json::from_str(&format!("[{}{comma}{}]", self.older, self.newest)).expect("the client's history");
        all.into_iter().take(count).collect()
    }

    /// The output of tool call `id`: numbered lines, its size cycling through the range.
    fn output(&self, id: &str) -> String {
        let (low, high) = self.output;
        let size = low + (self.calls * 7919) % (high - low + 1);
        let mut out = String::with_capacity(size + 80);
        let mut line = 0;
        while out.len() < size {
            out += &format!("{id} line {line}: compiled wombat::module_{line} in {}ms\n", line % 97);
            line += 1;
        }
        out
    }

    /// Appends the answer and, for its tool call, the result and Claude Code's reminders.
    fn answered(&mut self, content: Value) {
        let tool = content.as_array().and_then(|blocks| blocks.iter().find(|block| block["type"] == "tool_use"));
        let id = tool.and_then(|tool| tool["id"].as_str()).map(str::to_string);
        self.push(json!({"role": "assistant", "content": content}));
        self.calls += 1;
        let Some(id) = id else { return };
        let output = self.output(&id);
        let mut result = vec![json!({"type": "tool_result", "tool_use_id": id, "content": output})];
        self.last_output = Some(output);
        if self.calls.is_multiple_of(3) {
            result.push(json!({"type": "text", "text": "<system-reminder>The task tools have not been used recently. Consider them.</system-reminder>"}));
        }
        self.push(json!({"role": "user", "content": result}));
        if self.calls.is_multiple_of(5) {
            // As Claude Code sends them: last, before the model's turn.
            self.push(json!({"role": "system", "content": "Note: a file you read earlier was modified by the user."}));
        }
    }
}

/// The content of an answer: a JSON message, or the blocks a stream carried.
fn content_of(text: &str) -> Value {
    if let Ok(message) = serde_json::from_str::<Value>(text) {
        return message["content"].clone();
    }
    let mut blocks: Vec<Value> = Vec::new();
    let mut inputs: Vec<String> = Vec::new();
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let event: Value = serde_json::from_str(data).expect("an event");
        match event["type"].as_str() {
            Some("content_block_start") => {
                blocks.push(event["content_block"].clone());
                inputs.push(String::new());
            }
            Some("content_block_delta") => {
                let (block, input) = (blocks.last_mut().expect("a block"), inputs.last_mut().expect("a block"));
                match event["delta"]["type"].as_str() {
                    Some("text_delta") => {
                        let text = format!(
                            "{}{}",
                            block["text"].as_str().unwrap_or_default(),
                            event["delta"]["text"].as_str().unwrap_or_default()
                        );
                        block["text"] = text.into();
                    }
                    Some("input_json_delta") => *input += event["delta"]["partial_json"].as_str().unwrap_or_default(),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    for (block, input) in blocks.iter_mut().zip(inputs) {
        if block["type"] == "tool_use" && !input.is_empty() {
            block["input"] = serde_json::from_str(&input).expect("the tool input");
        }
    }
    Value::Array(blocks)
}

/// The upstream's script: a few words and a Bash call, numbered by a counter; streamed when
/// asked, counted in `streamed`.
fn script(calls: Arc<AtomicUsize>, streamed: Arc<AtomicUsize>) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |request| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        let content = json!([
            {"type": "text", "text": format!("Step {call}: building the next module.")},
            {"type": "tool_use", "id": format!("toolu_{call:05}"), "name": "Tool3", "input": {"command": format!("make module_{call}")}}
        ]);
        let input_tokens = request.body.len() as u64 / 4;
        // Found in the bytes as sent, not parsed: a real upstream's parse is not timed here.
        if memchr::memmem::find(&request.body, br#""stream":true"#).is_some() {
            streamed.fetch_add(1, Ordering::SeqCst);
            Reply::sse(canned::message_stream(&format!("msg_{call:05}"), &content, "tool_use", input_tokens))
        } else {
            canned::message_with_usage(content, "tool_use", input_tokens)
        }
    }
}

/// An upstream that reads the body, keeps nothing and answers at once: the direct path.
async fn null_upstream() -> String {
    use axum::serve::ListenerExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let answer = json!({"id": "msg_direct", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string();
    let router = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let answer = answer.clone();
        async move {
            drop(body);
            ([("content-type", "application/json")], answer)
        }
    });
    let router = router.layer(axum::extract::DefaultBodyLimit::disable());
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

/// The resident memory of this process, in MiB, once the allocator has handed back the free
/// heap it keeps for the next large body (`allocator`): what the process holds, not what it
/// keeps spare in each of its arenas (up to 64 MB each, which tests running beside this one
/// multiply).
fn rss_mib() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? / 1024)
}

/// The lower quartile: the pace of a call when the machine is not busy with other tests.
fn lower_quartile(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 4]
}

/// One soak at a time: each measures a pace, which another would disturb.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether the newest tool result of `client` reached the upstream in `body` whole.
fn newest_output_whole(client: &Client, body: &[u8]) -> bool {
    let Some(output) = client.last_output.as_deref() else {
        return true;
    };
    let sent: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let found = sent["messages"].as_array().into_iter().flatten().rev().find_map(|message| {
        message["content"]
            .as_array()?
            .iter()
            .find(|block| block["type"] == "tool_result")
            .map(|block| block["content"].clone())
    });
    found.as_ref().and_then(Value::as_str) == Some(output)
}

/// Runs `calls` calls at `window` with outputs of `output` bytes, and checks the added
/// latency's growth against `ratio_bound` and the resident memory against `rss_bound` MiB.
/// Returns how many payloads the compactions removed (each checked to name its place in the
/// log).
async fn soak(window: u64, calls: usize, output: (usize, usize), ratio_bound: f64, rss_bound: u64) -> usize {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = scratch(&format!("soak-{window}"));
    let path = dir.join("store.db");
    let (counter, streamed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mock = Mock::start(script(counter.clone(), streamed.clone())).await;
    let direct = null_upstream().await;
    let settings = contextfold_serve::ServeConfig {
        window: Some(window),
        reserve: 4_000,
        store: Some(StoreLocation::File(path.clone())),
        ..config(&mock.url())
    };
    let proxy = proxy(settings).await;
    let http = client();
    let mut agent = Client::new(output);
    let (mut first, mut last) = (Vec::new(), Vec::new());
    let (mut clipped, mut sent_len) = (0, 0);
    let started = Instant::now();
    for call in 0..calls {
        let stream = call % 2 == 1;
        let body = agent.body(stream);
        sent_len = agent.messages;
        let sampled = call < SAMPLE || call >= calls - SAMPLE;
        let send = |url: String, body: Bytes| {
            http.post(url)
                .header("x-api-key", "sk-ant-api03-soak")
                .header("anthropic-version", "2023-06-01")
                .header("x-claude-code-session-id", "soak-session")
                .body(body)
                .send()
        };
        let direct_time = if sampled {
            let at = Instant::now();
            let response = send(format!("{direct}/v1/messages"), body.clone()).await.expect("direct");
            response.bytes().await.expect("a direct answer");
            Some(at.elapsed())
        } else {
            None
        };
        let at = Instant::now();
        let response = send(format!("{}/v1/messages?beta=true", proxy.url), body).await.expect("the proxy answers");
        let status = response.status();
        let text = response.text().await.expect("an answer");
        let proxied = at.elapsed();
        assert_eq!(status, 200, "call {call} was refused: {text}");
        if let Some(direct_time) = direct_time {
            let added = proxied.as_secs_f64() - direct_time.as_secs_f64();
            if call < SAMPLE { &mut first } else { &mut last }.push(added * 1e3);
        }
        let received = mock.messages_requests();
        if !newest_output_whole(&agent, &received.last().expect("forwarded").body) {
            clipped += 1;
        }
        mock.forget_last_body();
        agent.answered(content_of(&text));
    }
    let elapsed = started.elapsed();
    let rss = rss_mib();
    let last_body = agent.body(false).len();
    let compactions = proxy.stats.compactions();
    proxy.stop().await.expect("the proxy stops cleanly");

    let forwarded = mock.assert_all_valid();
    assert_eq!(forwarded, calls, "every call reached the upstream once");
    assert_eq!(streamed.load(Ordering::SeqCst), calls / 2, "every other call was streamed");
    assert_eq!(clipped, 0, "the newest tool output reached the upstream whole at every call");

    // The store is the session log: each message once, the client's last history exported.
    let store = SqliteStore::open_existing(&path).expect("the proxy's store");
    let sessions = store.sessions().expect("sessions");
    let rows: usize = sessions.iter().map(|session| session.messages).sum();
    let sent = &agent.history(sent_len);
    assert_eq!(sessions.len(), 1, "one conversation, one stored session: {sessions:?}");
    assert_eq!(rows, sent.len(), "the store holds each message the client sent once");
    let exported: Vec<Value> = store.export(&sessions[0].id).expect("export").iter().map(|m| m.to_value()).collect();
    let plain = |messages: &[Value]| -> Vec<Value> {
        messages.iter().map(|message| strip_breakpoints(message.clone())).collect()
    };
    assert!(plain(&exported) == plain(sent), "the export is the client's last history");
    // Each removed payload is named by its place in the log: the block it came from.
    let reports = store.reports(&sessions[0].id).expect("reports");
    let placed = removed_blocks_are_in_the_log(&reports, &exported, payload_ref);
    // An early output, evicted long ago, is found once (as the payload its ref recalls).
    let found = store.search(Some(&sessions[0].id), "toolu_00005 line 3", 10).expect("search");
    assert_eq!(found.len(), 1, "one hit per stored text: {found:?}");

    // The store's size on disk, its write-ahead log included.
    let stored_bytes: u64 = ["store.db", "store.db-wal"]
        .iter()
        .filter_map(|name| std::fs::metadata(dir.join(name)).ok())
        .map(|metadata| metadata.len())
        .sum();
    let (early, late) = (lower_quartile(first), lower_quartile(last));
    let ratio = late / early.max(0.05);
    notice(&format!(
        "soak at {window} tokens: {calls} calls in {:.0} s, {compactions} compactions, last client body {:.1} MB, \
         {} stored rows, {placed} removed payloads in place ({:.1} MB stored, {:.2} MB per 1,000 calls); added latency (lower quartile) {early:.2} ms over the first {SAMPLE} calls, {late:.2} ms over the last \
         {SAMPLE} (ratio {ratio:.2}); resident memory {} MiB",
        elapsed.as_secs_f64(),
        last_body as f64 / 1e6,
        rows,
        stored_bytes as f64 / 1e6,
        stored_bytes as f64 / 1e6 * 1_000.0 / calls as f64,
        rss.map_or("unknown".to_string(), |rss| rss.to_string()),
    ));
    assert!(compactions >= 1, "the proxy compacted");
    assert!(ratio <= ratio_bound, "added latency grew {ratio:.2}× (bound {ratio_bound}×): {early:.2} → {late:.2} ms");
    if let Some(rss) = rss {
        assert!(rss <= rss_bound, "resident memory {rss} MiB is over {rss_bound} MiB");
    }
    placed
}

/// `message` without cache breakpoints (the client moves them from call to call).
fn strip_breakpoints(mut message: Value) -> Value {
    if let Some(blocks) = message["content"].as_array_mut() {
        for block in blocks {
            if let Some(block) = block.as_object_mut() {
                block.remove("cache_control");
            }
        }
    }
    message
}

// 2,000 calls with outputs of 5–20 KB at each window: the client's body reaches 26 MB, which
// the proxy compacts at almost every call in a 30k window and about every 16 calls at 200k.
// The whole process (client, mock upstream and proxy), its spare heap handed back, stays
// well under the bound. Beside other tests, both the pace and the memory measure them too
// (a ratio of 1.57 and 441 MiB in one such run): the soak runs alone, when asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a pace and memory measure: run alone, `cargo test -p contextfold-serve --test it -- --ignored --test-threads=1 soak::`"]
async fn a_long_claude_code_session_at_30k_keeps_one_log_and_its_pace() {
    soak(30_000, 2_000, (5_000, 20_000), 1.5, 512).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a pace and memory measure: run alone, `cargo test -p contextfold-serve --test it -- --ignored --test-threads=1 soak::`"]
async fn a_long_claude_code_session_at_200k_keeps_one_log_and_its_pace() {
    let removed = soak(200_000, 2_000, (5_000, 20_000), 1.5, 512).await;
    assert!(removed > 0, "a long session at 200k evicts outputs");
}
