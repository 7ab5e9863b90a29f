//! What the proxy costs a client, measured against a local upstream that answers at once:
//!
//! - **latency**: a 600-message coding-agent conversation (about 50k tokens, no compaction
//!   needed in the default 200k window), its next call (two messages new) and its first call
//!   (a conversation the proxy has not seen: every message read and counted), each sent
//!   directly and through the proxy, interleaved, as p50/p99 of both and of the paired
//!   difference;
//! - **time to the first streamed byte** of the same next call, streamed;
//! - **throughput**: 50 conversations at once, each making calls as its history grows, in
//!   requests per second, directly and through the proxy (default window: no compaction;
//!   and a 24k window, where the conversations compact);
//! - **memory per idle conversation held**: the growth of the live heap (a counting
//!   allocator) after conversations of 40 and of 400 messages have each made one call, and
//!   after conversations of 3,000 messages in a 24k window have each made 11 calls as they
//!   grew (against the compacted request they send), once with the command line's caches
//!   shared by all conversations (token counts, summaries) and once without them, which
//!   leaves out what those bounded caches keep of each conversation;
//! - **stores and replicas** (`-- stores`): what keeping each conversation's state in the
//!   store adds to a request (its lock, the version check, the state written back; on a
//!   replica that did not serve the conversation's previous call, the state read and
//!   restored), p50/p99 over a direct call, with no store, a SQLite file and PostgreSQL
//!   (`CONTEXTFOLD_BENCH_POSTGRES_URL` or `CONTEXTFOLD_TEST_POSTGRES_URL`; the bench writes
//!   its conversations into that database), with one replica and with two sharing the store
//!   (calls alternating between them, no stickiness); and requests per second with 50
//!   conversations at once.
//!
//! Run: `cargo bench -p contextfold-serve --bench proxy` (about a minute), `-- latency` for
//! the latency alone, `-- memory` for the memory alone, `-- memory-long` for two
//! conversations of 100,000 messages (about 53 MB a request) without the shared caches,
//! `-- stores` for the stores alone, or `-- profile` for the CPU time of next calls, direct
//! and through the proxy (also to run under a profiler). Everything runs in this process on
//! 127.0.0.1: the client, the proxies (two replicas are two proxies with a store each) and the
//! upstream share the machine.

#[path = "support/measure.rs"]
mod measure;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use contextfold::cache::LruCache;
use contextfold::compactor::Compactor;
use contextfold::store::StoreLocation;
use contextfold_core::tokens::Tokenizer;
use contextfold_serve::{Proxy, ServeConfig};
use measure::{cpu_time, percentiles};
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The size of the last body the upstream received.
static LAST_UPSTREAM_BODY: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Conversations measured for latency.
const SAMPLES: usize = 300;
/// Messages of the latency conversation.
const MESSAGES: usize = 600;
/// Conversations at once for throughput.
const CONCURRENT: usize = 50;
/// Calls each of them makes.
const CALLS_EACH: usize = 30;

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let upstream = upstream().await;
        println!("contextfold serve benchmark ({} cores)", std::thread::available_parallelism().map_or(1, |n| n.get()));
        if std::env::args().any(|arg| arg == "stores") {
            stores(&upstream).await;
            return;
        }
        if std::env::args().any(|arg| arg == "profile") {
            profile(&upstream).await;
            return;
        }
        if std::env::args().any(|arg| arg == "memory-long") {
            memory_compacted(&upstream, 100_000, 2, Caches::Off).await;
            return;
        }
        if std::env::args().any(|arg| arg == "memory") {
            memory(&upstream, 40, 900).await;
            memory(&upstream, 400, 100).await;
            memory_compacted(&upstream, 3_000, 20, Caches::Shared).await;
            memory_compacted(&upstream, 3_000, 20, Caches::Off).await;
            return;
        }
        latency(&upstream).await;
        if std::env::args().any(|arg| arg == "latency") {
            return;
        }
        throughput(&upstream, None, "default window, no compaction").await;
        throughput(&upstream, Some(24_000), "24k window, compacting").await;
        memory(&upstream, 40, 900).await;
        memory(&upstream, 400, 100).await;
        memory_compacted(&upstream, 3_000, 20, Caches::Shared).await;
        memory_compacted(&upstream, 3_000, 20, Caches::Off).await;
    });
}

/// An upstream that reads the body and answers at once: a small message, or with the
/// header `x-bench-stream` an SSE stream whose first event goes out at once and the rest
/// 2 ms later.
async fn upstream() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let router = axum::Router::new().fallback(|request: axum::extract::Request| async move {
        use http_body_util::BodyExt;
        let stream = request.headers().contains_key("x-bench-stream");
        if let Ok(body) = request.into_body().collect().await {
            LAST_UPSTREAM_BODY.store(body.to_bytes().len(), Ordering::Relaxed);
        }
        if stream {
            let first = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n";
            let rest = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
            let frames = futures_util::stream::unfold(0, move |index| async move {
                match index {
                    0 => Some((Ok::<_, std::io::Error>(Bytes::from_static(first.as_bytes())), 1)),
                    1 => {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        Some((Ok(Bytes::from_static(rest.as_bytes())), 2))
                    }
                    _ => None,
                }
            });
            let mut response = Response::new(Body::from_stream(frames));
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            response
        } else {
            let body = json!({"id": "msg_b", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 1, "output_tokens": 1}});
            let mut response = Response::new(Body::from(body.to_string()));
            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
            response
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

/// A proxy in front of `upstream`, with `window` (the model's when `None`).
async fn proxy(upstream: &str, window: Option<u64>) -> String {
    proxy_with(upstream, window, None).await
}

/// [`proxy`], keeping conversations in the store at `store`.
async fn proxy_with(upstream: &str, window: Option<u64>, store: Option<StoreLocation>) -> String {
    proxy_with_caches(upstream, window, store, Caches::Shared).await
}

/// The caches all of a proxy's conversations share.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Caches {
    /// The command line's defaults: exact o200k counts memoised for the whole process
    /// (bounded at 2^18 texts), and the compactor's summaries (the last 64).
    Shared,
    /// Exact o200k counts not remembered, and room for one summary: what a conversation
    /// holds by itself.
    Off,
}

/// [`proxy_with`], with the shared caches `caches` says.
async fn proxy_with_caches(
    upstream: &str,
    window: Option<u64>,
    store: Option<StoreLocation>,
    caches: Caches,
) -> String {
    let compactor = match caches {
        Caches::Shared => Compactor::default().with_counter(std::sync::Arc::new(Tokenizer::O200k.memoized())),
        Caches::Off => Compactor::default()
            .with_counter(std::sync::Arc::new(Tokenizer::O200k.counter()))
            .with_cache(std::sync::Arc::new(LruCache::new(1))),
    };
    let config = ServeConfig {
        store,
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: upstream.to_string(),
        window,
        reserve: if window.is_some() { 2_000 } else { contextfold_serve::config::DEFAULT_RESERVE },
        compactor,
        ..ServeConfig::default()
    };
    let proxy = Proxy::bind(config).await.expect("the proxy binds");
    let url = format!("http://{}", proxy.local_addr());
    tokio::spawn(proxy.run(std::future::pending()));
    url
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().expect("a client")
}

/// The first `count` messages of conversation `id`: a task, then tool calls (a read or a
/// command) and their outputs of 300 to 900 characters, every text naming the conversation
/// so that no two conversations share a text the token counter has seen.
fn conversation(id: usize, count: usize) -> Vec<Value> {
    let mut messages =
        vec![json!({"role": "user", "content": format!("[conversation {id}] port the parser to the new AST")})];
    let mut step = 0;
    while messages.len() < count {
        let call = format!("toolu_{id}_{step}");
        let (name, input) = if step % 3 == 2 {
            ("Bash", json!({"command": format!("cargo test -p parser --test it step_{step}")}))
        } else {
            ("Read", json!({"file_path": format!("/src/conversation_{id}/module_{step}.rs")}))
        };
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Conversation {id}, step {step}: next I look at module {step}.")},
            {"type": "tool_use", "id": call, "name": name, "input": input}]}));
        let lines = 5 + step % 11;
        let output: String = (0..lines)
            .map(|line| {
                format!("{line:>4}  fn item_{id}_{step}_{line}(input: &str) -> Result<Ast, Error> {{ parse(input) }}\n")
            })
            .collect();
        messages.push(
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": output}]}),
        );
        step += 1;
    }
    messages.truncate(count);
    messages
}

fn body(id: usize, count: usize, stream: bool) -> String {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": stream,
        "system": [{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
                  {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
        "messages": conversation(id, count)})
    .to_string()
}

/// Sends `body` to `base` (as conversation `id`), returns the time to the whole answer and
/// to its first body byte.
async fn call(client: &reqwest::Client, base: &str, id: usize, body: String, stream: bool) -> (Duration, Duration) {
    let started = Instant::now();
    let mut request =
        client.post(format!("{base}/v1/messages")).header("x-contextfold-session", format!("bench-{id}")).body(body);
    if stream {
        request = request.header("x-bench-stream", "1");
    }
    let mut response = request.send().await.expect("an answer");
    assert_eq!(response.status(), 200);
    let mut first = None;
    while let Some(_chunk) = response.chunk().await.expect("the body") {
        first.get_or_insert_with(|| started.elapsed());
    }
    (started.elapsed(), first.unwrap_or_default())
}

fn report(what: &str, direct: &mut [f64], proxied: &mut [f64]) {
    let mut added: Vec<f64> = proxied.iter().zip(direct.iter()).map(|(p, d)| p - d).collect();
    let (d50, d99) = percentiles(direct);
    let (p50, p99) = percentiles(proxied);
    let (a50, a99) = percentiles(&mut added);
    println!(
        "{what:<44} direct p50 {d50:7.3} ms p99 {d99:7.3} ms | proxy p50 {p50:7.3} ms p99 {p99:7.3} ms | added p50 {a50:6.3} ms p99 {a99:6.3} ms"
    );
}

async fn latency(upstream: &str) {
    let proxy = proxy(upstream, None).await;
    let client = client();
    let ms = |duration: Duration| duration.as_secs_f64() * 1e3;
    let (mut cold, mut cold_direct) = (Vec::new(), Vec::new());
    let (mut next, mut next_direct) = (Vec::new(), Vec::new());
    let (mut first_byte, mut first_byte_direct) = (Vec::new(), Vec::new());
    // A few conversations first, so connections and caches are warm.
    for id in 0..SAMPLES + 10 {
        let measured = id >= 10;
        let first = body(id, MESSAGES - 2, false);
        let direct = call(&client, upstream, id, first.clone(), false).await.0;
        let proxied = call(&client, &proxy, id, first, false).await.0;
        let grown = body(id, MESSAGES, false);
        // Alternate which goes first, so neither is always second on a warm connection.
        let (direct_next, proxied_next) = if id % 2 == 0 {
            let direct = call(&client, upstream, id, grown.clone(), false).await.0;
            (direct, call(&client, &proxy, id, grown, false).await.0)
        } else {
            let proxied = call(&client, &proxy, id, grown.clone(), false).await.0;
            (call(&client, upstream, id, grown, false).await.0, proxied)
        };
        let streamed = body(id, MESSAGES + 2, true);
        let direct_stream = call(&client, upstream, id, streamed.clone(), true).await.1;
        let proxied_stream = call(&client, &proxy, id, streamed, true).await.1;
        if measured {
            cold_direct.push(ms(direct));
            cold.push(ms(proxied));
            next_direct.push(ms(direct_next));
            next.push(ms(proxied_next));
            first_byte_direct.push(ms(direct_stream));
            first_byte.push(ms(proxied_stream));
        }
    }
    let size = body(0, MESSAGES, false).len();
    println!("latency: {SAMPLES} conversations of {MESSAGES} messages ({} KB a request)", size / 1000);
    report("next call (2 new messages), whole answer", &mut next_direct, &mut next);
    report("next call, streamed: first byte", &mut first_byte_direct, &mut first_byte);
    report("first call of a new conversation", &mut cold_direct, &mut cold);
}

/// Next calls alone (`-- profile`), to run under a profiler and to weigh the CPU time the
/// proxy spends on them, which a busy machine does not blur as it blurs latency: three
/// conversations of 150 calls each, two messages longer every call from 600 messages on,
/// sent directly and then through the proxy (each conversation's first call, which reads
/// the whole history, left out of the sums). Twice: with the latency bench's small system
/// prompt and tools, and with a preamble the size of Claude Code's (20 tools of about 3 KB,
/// a 16 KB system prompt whose first block changes on every call). The bodies are written
/// before the clock runs.
async fn profile(upstream: &str) {
    let proxy = proxy(upstream, None).await;
    let client = client();
    for large in [false, true] {
        let calls: Vec<(usize, Vec<String>)> = (0..3)
            .map(|id| {
                let id = id + if large { 10 } else { 0 };
                let bodies = (MESSAGES..MESSAGES + 300).step_by(2).map(|count| {
                    let mut body = body(id, count, false);
                    if large {
                        body = with_large_preamble(&body, count);
                    }
                    body
                });
                (id, bodies.collect())
            })
            .collect();
        let mut cpu = Vec::new();
        for base in [upstream, proxy.as_str()] {
            let mut spent = Duration::ZERO;
            for (id, bodies) in &calls {
                call(&client, base, *id, bodies[0].clone(), false).await;
                let before = cpu_time();
                for body in &bodies[1..] {
                    call(&client, base, *id, body.clone(), false).await;
                }
                spent += cpu_time() - before;
            }
            cpu.push(spent.as_secs_f64() * 1e3 / (calls.len() * 149) as f64);
        }
        let size = calls[0].1[0].len() / 1000;
        let preamble =
            if large { "Claude Code-sized system prompt and tools" } else { "small system prompt and tools" };
        println!(
            "profile, {preamble} ({size} KB at 600 messages): CPU time per next call: direct {:.3} ms, through the proxy {:.3} ms, added {:.3} ms",
            cpu[0],
            cpu[1],
            cpu[1] - cpu[0]
        );
    }
}

/// `body` with a system prompt and tools the size of Claude Code's; the system prompt's
/// first block differs with `call`, as Claude Code's billing line does.
fn with_large_preamble(body: &str, call: usize) -> String {
    let mut body: Value = serde_json::from_str(body).expect("a body");
    let line = "Use the tool only when the task needs it; explain what you change and why, and keep edits small. ";
    let tools: Vec<Value> = (0..20)
        .map(|tool| {
            json!({"name": format!("Tool{tool}"), "description": line.repeat(24), "input_schema": {"type": "object",
                "properties": {"path": {"type": "string", "description": line}, "limit": {"type": "integer"}},
                "required": ["path"]}})
        })
        .collect();
    body["tools"] = Value::Array(tools);
    body["system"] = json!([
        {"type": "text", "text": format!("x-anthropic-billing-header: cc_version=2.1; cch={call:05x};")},
        {"type": "text", "text": line.repeat(160), "cache_control": {"type": "ephemeral"}}]);
    body.to_string()
}

async fn throughput(upstream: &str, window: Option<u64>, what: &str) {
    let proxy = proxy(upstream, window).await;
    for (base, path) in [(upstream.to_string(), "direct"), (proxy, "proxy")] {
        let started = Instant::now();
        let tasks: Vec<_> = (0..CONCURRENT)
            .map(|index| {
                let base = base.clone();
                // Each run its own conversations, so the proxy's second run starts afresh.
                let id = 10_000 + index + if path == "proxy" { CONCURRENT } else { 0 } + window.map_or(0, |_| 1_000);
                tokio::spawn(async move {
                    let client = client();
                    for step in 0..CALLS_EACH {
                        call(&client, &base, id, body(id, 21 + 2 * step, false), false).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a conversation");
        }
        let seconds = started.elapsed().as_secs_f64();
        let requests = CONCURRENT * CALLS_EACH;
        println!(
            "throughput ({what}), {path}: {requests} requests of {CONCURRENT} conversations at once in {seconds:.2} s = {:.0} requests/s",
            requests as f64 / seconds
        );
    }
}

async fn memory(upstream: &str, messages: usize, conversations: usize) {
    let proxy = proxy(upstream, None).await;
    let client = client();
    // A first conversation warms the connection pool, the runtime and the counter.
    call(&client, &proxy, 90_000, body(90_000, messages, false), false).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = LIVE.load(Ordering::Relaxed);
    for index in 0..conversations {
        let id = 100_000 + messages * 10_000 + index;
        call(&client, &proxy, id, body(id, messages, false), false).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let grown = LIVE.load(Ordering::Relaxed) - before;
    let size = body(0, messages, false).len();
    println!(
        "memory: {conversations} idle conversations of {messages} messages ({:.1} KB a request): {:.1} KB of live heap each ({:.2}× the request)",
        size as f64 / 1e3,
        grown as f64 / conversations as f64 / 1e3,
        grown as f64 / conversations as f64 / size as f64
    );
}

/// Memory per idle conversation that compacts: `conversations` conversations of `messages`
/// messages in a 24k window, each grown by 10 calls of two messages, against the compacted
/// request the upstream last received (the client's history is many times bigger). With the
/// shared caches off, what they would keep of each conversation (counts of its texts, its
/// summary) is left out.
async fn memory_compacted(upstream: &str, messages: usize, conversations: usize, caches: Caches) {
    let proxy = proxy_with_caches(upstream, Some(24_000), None, caches).await;
    let client = client();
    let grown = |id: usize, step: usize| body(id, messages - 20 + 2 * step, false);
    for step in 0..=10 {
        call(&client, &proxy, 80_000, grown(80_000, step), false).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = LIVE.load(Ordering::Relaxed);
    let mut sent = 0;
    for index in 0..conversations {
        let id = 200_000 + messages * 10_000 + index;
        for step in 0..=10 {
            call(&client, &proxy, id, grown(id, step), false).await;
        }
        sent += LAST_UPSTREAM_BODY.load(Ordering::Relaxed);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = (LIVE.load(Ordering::Relaxed) - before) as f64 / conversations as f64;
    let (client_body, sent) = (grown(0, 10).len() as f64, sent as f64 / conversations as f64);
    println!(
        "memory, compacting (24k window, {caches:?} caches): {conversations} idle conversations of {messages} messages ({:.0} KB a client request, {:.0} KB a compacted one): {:.0} KB of live heap each ({:.2}× the compacted request, {:.3}× the client's)",
        client_body / 1e3,
        sent / 1e3,
        held / 1e3,
        held / sent,
        held / client_body
    );
}

/// Messages of the conversations the store section measures (about 60 KB a request).
const STORE_MESSAGES: usize = 120;
/// Conversations measured per setup, and measured calls each.
const STORE_CONVERSATIONS: usize = 60;
const STORE_CALLS: usize = 4;

async fn stores(upstream: &str) {
    let dir = std::env::temp_dir().join(format!("contextfold-proxy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let mut setups = vec![("no store", None), ("SQLite", Some(StoreLocation::File(dir.join("store.db"))))];
    let url = std::env::var("CONTEXTFOLD_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("CONTEXTFOLD_TEST_POSTGRES_URL"))
        .ok()
        .filter(|url| !url.is_empty());
    match url.map(|url| StoreLocation::parse(&url)) {
        Some(Ok(location)) => setups.push(("PostgreSQL", Some(location))),
        Some(Err(err)) => println!("notice: the PostgreSQL URL is not usable: {err}"),
        None => println!("notice: no PostgreSQL server named; no store and SQLite only"),
    }
    let size = body(0, STORE_MESSAGES, false).len();
    println!(
        "stores: {STORE_CONVERSATIONS} conversations of {STORE_MESSAGES} messages ({} KB a request), {STORE_CALLS} calls each measured (2 new messages a call)",
        size / 1000
    );
    let http = client();
    let mut first_id = 200_000 + (std::process::id() as usize % 1000) * 10_000;
    for (name, store) in &setups {
        for replicas in [1, 2] {
            if store.is_none() && replicas == 2 {
                continue;
            }
            let mut bases = Vec::new();
            for _ in 0..replicas {
                bases.push(proxy_with(upstream, None, store.clone()).await);
            }
            let (mut direct, mut proxied) = (Vec::new(), Vec::new());
            for id in first_id..first_id + STORE_CONVERSATIONS {
                // Its first call (every message read and counted, the conversation created).
                call(&http, &bases[0], id, body(id, STORE_MESSAGES, false), false).await;
                for step in 1..=STORE_CALLS {
                    let grown = body(id, STORE_MESSAGES + 2 * step, false);
                    let base = &bases[step % replicas];
                    let (d, p) = if step % 2 == 0 {
                        let d = call(&http, upstream, id, grown.clone(), false).await.0;
                        (d, call(&http, base, id, grown, false).await.0)
                    } else {
                        let p = call(&http, base, id, grown.clone(), false).await.0;
                        (call(&http, upstream, id, grown, false).await.0, p)
                    };
                    direct.push(d.as_secs_f64() * 1e3);
                    proxied.push(p.as_secs_f64() * 1e3);
                }
            }
            first_id += STORE_CONVERSATIONS;
            let replicas_named = if replicas == 1 { "1 replica" } else { "2 replicas" };
            report(&format!("{name}, {replicas_named}: next call"), &mut direct, &mut proxied);
            let started = Instant::now();
            let tasks: Vec<_> = (0..CONCURRENT)
                .map(|index| {
                    let (bases, id) = (bases.clone(), first_id + index);
                    tokio::spawn(async move {
                        let client = client();
                        for step in 0..CALLS_EACH {
                            let base = &bases[(index + step) % bases.len()];
                            call(&client, base, id, body(id, 21 + 2 * step, false), false).await;
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("a conversation");
            }
            first_id += CONCURRENT;
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{:<44} {} requests of {CONCURRENT} conversations at once in {seconds:.2} s = {:.0} requests/s",
                format!("{name}, {replicas_named}: throughput"),
                CONCURRENT * CALLS_EACH,
                (CONCURRENT * CALLS_EACH) as f64 / seconds
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
