//! What the proxy costs a call of a long session: a client whose history is 1, 5 and 20 MB
//! (a day's work; the proxy compacts it into the model's window) sends its next calls, each
//! about 10 KB longer than the one before, directly and through the proxy, interleaved. For
//! each size: the time to the whole answer (p50, p99, and of the paired difference) and the
//! CPU time per call, direct and through the proxy (all threads of this process: client,
//! proxy and upstream share it, so the difference is the proxy's).
//!
//! Then the same through a proxy with a 30k window, where about every third call compacts
//! (the request reached the window again): the added time of the calls that compacted and
//! of those that did not, told apart by the body the upstream received shrinking. A
//! compaction's cost should follow the window, not the client's history.
//!
//! Run: `cargo bench -p contextfold-serve --bench large_bodies` (about two minutes), or
//! `-- profile` for 20 MB calls through the proxy alone, their bodies all written first, to
//! run under a profiler.
//! Everything runs in this process on 127.0.0.1. The bodies are written before the clock
//! runs.

#[path = "support/measure.rs"]
mod measure;

use bytes::Bytes;
use contextfold::compactor::Compactor;
use contextfold_core::tokens::Tokenizer;
use contextfold_serve::{Proxy, ServeConfig};
use measure::{cpu_time, percentiles};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The size of the last body the upstream received.
static LAST_UPSTREAM_BODY: AtomicUsize = AtomicUsize::new(0);

/// Next calls measured at each size, after two unmeasured ones.
const CALLS: usize = 24;

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let upstream = upstream().await;
        if std::env::args().any(|arg| arg == "profile") {
            return profile(&proxy(&upstream, None).await).await;
        }
        let (proxy, compacting) = (proxy(&upstream, None).await, proxy(&upstream, Some(30_000)).await);
        println!(
            "contextfold serve, large bodies ({} cores)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        for (id, megabytes) in [1, 5, 20].into_iter().enumerate() {
            measure(&upstream, &proxy, id, megabytes, false).await;
        }
        println!("in a 30k window:");
        for (id, megabytes) in [1, 5, 20].into_iter().enumerate() {
            measure(&upstream, &compacting, 10 + id, megabytes, true).await;
        }
    });
}

/// An upstream that reads the whole body and answers a small message at once, its sockets
/// without Nagle's delay.
async fn upstream() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let router = axum::Router::new().fallback(|request: axum::extract::Request| async move {
        use http_body_util::BodyExt;
        if let Ok(body) = request.into_body().collect().await {
            LAST_UPSTREAM_BODY.store(body.to_bytes().len(), Ordering::Relaxed);
        }
        let body = json!({"id": "msg_l", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}});
        let mut response = axum::response::Response::new(axum::body::Body::from(body.to_string()));
        response.headers_mut().insert("content-type", "application/json".parse().unwrap());
        response
    });
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

/// A proxy in front of `upstream` with the command line's defaults, in `window` (the model's
/// when `None`).
async fn proxy(upstream: &str, window: Option<u64>) -> String {
    let config = ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: upstream.to_string(),
        window,
        compactor: Compactor::default().with_counter(std::sync::Arc::new(Tokenizer::O200k.memoized())),
        ..ServeConfig::default()
    };
    let proxy = Proxy::bind(config).await.expect("the proxy binds");
    let url = format!("http://{}", proxy.local_addr());
    tokio::spawn(proxy.run(std::future::pending()));
    url
}

/// Step `step` of conversation `id`: a shell call and its output of about 10 KB.
fn step(id: usize, step: usize) -> [Value; 2] {
    let call = format!("toolu_{id}_{step}");
    let output: String = (0..160)
        .map(|line| {
            format!("{line:>4} conversation {id} step {step}: fn item_{line}(input: &str) -> Ast {{ parse(input) }}\n")
        })
        .collect();
    [
        json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Step {step}: next I run the tests of module {step}.")},
            {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": format!("cargo test -p m{step}")}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": output}]}),
    ]
}

/// The request body of `messages`.
fn body(messages: &[Value]) -> Bytes {
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
        "messages": messages});
    Bytes::from(body.to_string())
}

async fn send(client: &reqwest::Client, base: &str, id: usize, body: Bytes) -> Duration {
    let started = Instant::now();
    let response = client
        .post(format!("{base}/v1/messages"))
        .header("x-api-key", "sk-ant-bench-0123456789")
        .header("x-contextfold-session", format!("large-{id}"))
        .body(body)
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    response.bytes().await.expect("the body");
    started.elapsed()
}

/// Next calls of a conversation of `megabytes`, direct and through the proxy; `by_compaction`
/// reports the calls that compacted apart from the others.
async fn measure(upstream: &str, proxy: &str, id: usize, megabytes: usize, by_compaction: bool) {
    let client = reqwest::Client::builder().no_proxy().tcp_nodelay(true).build().expect("a client");
    let mut messages = vec![json!({"role": "user", "content": format!("[conversation {id}] port the parser")})];
    let mut steps = 0;
    while body(&messages).len() < megabytes * 1_000_000 {
        messages.extend(step(id, steps));
        steps += 1;
    }
    let ms = |duration: Duration| duration.as_secs_f64() * 1e3;
    let (mut direct, mut proxied, mut cpu) = (Vec::new(), Vec::new(), [Duration::ZERO; 2]);
    // Whether each measured call compacted, and the body the upstream last got through the proxy.
    let (mut compacted, mut sent) = (Vec::new(), usize::MAX);
    for call in 0..CALLS + 2 {
        messages.extend(step(id, steps));
        steps += 1;
        let body = body(&messages);
        let measured = call >= 2;
        // Alternate which goes first, so neither is always second on a warm connection.
        let order = if call % 2 == 0 { [upstream, proxy] } else { [proxy, upstream] };
        for base in order {
            let before = cpu_time();
            let took = send(&client, base, id, body.clone()).await;
            if base == proxy {
                let now = LAST_UPSTREAM_BODY.load(Ordering::Relaxed);
                if measured {
                    compacted.push(now < sent);
                }
                sent = now;
            }
            if measured {
                let which = usize::from(base == proxy);
                cpu[which] += cpu_time() - before;
                if which == 1 { &mut proxied } else { &mut direct }.push(ms(took));
            }
        }
    }
    let mut added: Vec<f64> = proxied.iter().zip(&direct).map(|(p, d)| p - d).collect();
    if by_compaction {
        let (mut did, mut did_not): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
        for (added, compacted) in added.iter().zip(&compacted) {
            if *compacted { &mut did } else { &mut did_not }.push(*added);
        }
        let (c50, c99) = percentiles(&mut did);
        let (n50, n99) = percentiles(&mut did_not);
        println!(
            "{megabytes:>2} MB ({} messages): {} calls compacted, added p50 {c50:6.2} ms p99 {c99:6.2} ms | {} did not, \
             added p50 {n50:6.2} ms p99 {n99:6.2} ms",
            messages.len(),
            did.len(),
            did_not.len()
        );
        return;
    }
    let (d50, d99) = percentiles(&mut direct);
    let (p50, p99) = percentiles(&mut proxied);
    let (a50, a99) = percentiles(&mut added);
    let per_call = |spent: Duration| spent.as_secs_f64() * 1e3 / CALLS as f64;
    println!(
        "{megabytes:>2} MB ({} messages, +10 KB a call): direct p50 {d50:7.2} ms p99 {d99:7.2} ms | proxy p50 {p50:7.2} ms \
         p99 {p99:7.2} ms | added p50 {a50:6.2} ms p99 {a99:6.2} ms | CPU a call: direct {:.2} ms, proxy {:.2} ms, added {:.2} ms",
        messages.len(),
        per_call(cpu[0]),
        per_call(cpu[1]),
        per_call(cpu[1]) - per_call(cpu[0]),
    );
}

/// 20 MB calls through the proxy alone: every body is written before the first is sent, so a
/// profile started a few seconds in (`perf record -D`) sees only the calls.
async fn profile(proxy: &str) {
    const PROFILED: usize = 60;
    let client = reqwest::Client::builder().no_proxy().tcp_nodelay(true).build().expect("a client");
    // The messages array's text grows by appending, so writing a body is one copy of it.
    let (mut joined, mut steps) =
        (json!({"role": "user", "content": "[conversation 20] port the parser"}).to_string(), 0);
    let empty = body(&[]);
    let (head, tail) = std::str::from_utf8(&empty).expect("JSON").split_once("[]").expect("a messages array");
    let mut bodies = Vec::new();
    while bodies.len() < PROFILED {
        for message in step(20, steps) {
            joined.push(',');
            joined.push_str(&message.to_string());
        }
        steps += 1;
        if joined.len() >= 20_000_000 {
            // Sized exactly, as a body the client read in would be.
            let mut body = String::with_capacity(head.len() + joined.len() + tail.len() + 2);
            for part in [head, "[", &joined, "]", tail] {
                body.push_str(part);
            }
            bodies.push(Bytes::from(body));
        }
    }
    send(&client, proxy, 20, bodies[0].clone()).await;
    println!("profile: {PROFILED} calls of 20 MB through the proxy from now");
    let (started, before) = (Instant::now(), cpu_time());
    for body in &bodies[1..] {
        send(&client, proxy, 20, body.clone()).await;
    }
    let calls = (PROFILED - 1) as f64;
    println!(
        "profile: {:.2} ms and {:.2} ms of CPU a call (client, proxy and upstream)",
        started.elapsed().as_secs_f64() * 1e3 / calls,
        (cpu_time() - before).as_secs_f64() * 1e3 / calls
    );
}
