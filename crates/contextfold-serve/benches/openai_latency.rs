//! The latency the proxy adds to OpenAI requests that need no compaction, for Chat
//! Completions and the Responses API, all on 127.0.0.1.
//!
//! A local upstream answers every request at once with a small fixed answer. One agent's
//! conversation grows by a tool call and its ~2 KB output a request (to about 400 KB at 200
//! calls), in a window large enough that nothing compacts; each request is sent straight to
//! the upstream and through the proxy, alternately, and the wall time of each is taken. The
//! added latency is the proxy's percentile minus the direct one. A warm-up round goes first.
//!
//! `cargo bench -p contextfold-serve --bench openai_latency [-- CALLS]`

use bytes::Bytes;
use contextfold_serve::{Proxy, ServeConfig};
use serde_json::json;
use std::time::{Duration, Instant};

/// A tool's output of about 2 KB.
fn output(step: usize) -> String {
    (0..30)
        .map(|line| format!("{step:>4}:{line:>3}  let value = compute({line}, \"src/m{}.rs\");\n", step % 13))
        .collect()
}

/// The Chat Completions body after `calls` tool calls.
fn chat_body(calls: usize) -> String {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent. Run the tests before you finish."}),
        json!({"role": "user", "content": "Fix the failing test in src/m1.rs."}),
    ];
    for step in 0..calls {
        let id = format!("call_{step}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "read_file", "arguments": json!({"path": format!("src/m{}.rs", step % 13)}).to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output(step)}));
    }
    json!({"model": "gpt-4.1", "messages": messages, "prompt_cache_key": "bench-chat",
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]})
    .to_string()
}

/// The Responses body after `calls` tool calls, as Codex CLI sends it.
fn responses_body(calls: usize) -> String {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Commands run without approval."}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test in src/m1.rs."}]}),
    ];
    for step in 0..calls {
        let id = format!("call_{step}");
        input.push(json!({"type": "reasoning", "id": format!("rs_{step}"), "summary": [{"type": "summary_text", "text": "Reading on."}], "encrypted_content": format!("gAAAAB{step:08}")}));
        input.push(json!({"type": "function_call", "name": "exec_command", "call_id": id, "arguments": json!({"cmd": format!("cat src/m{}.rs", step % 13)}).to_string()}));
        input.push(json!({"type": "function_call_output", "call_id": id, "output": output(step)}));
    }
    json!({"model": "gpt-5-codex", "instructions": "You are a coding agent.", "input": input, "store": false,
        "prompt_cache_key": "bench-responses", "include": ["reasoning.encrypted_content"]})
    .to_string()
}

/// An upstream that answers everything at once.
async fn upstream() -> String {
    let answer = json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "ok"}}], "usage": {"prompt_tokens": 1000, "completion_tokens": 1}});
    let answer = Bytes::from(answer.to_string());
    let router = axum::Router::new().fallback(move || {
        let answer = answer.clone();
        async move { ([("content-type", "application/json")], answer) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

fn percentile(sorted: &[Duration], share: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * share).round() as usize]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

async fn send(client: &reqwest::Client, url: &str, body: &str) -> Duration {
    let started = Instant::now();
    let response = client.post(url).header("content-type", "application/json").body(body.to_string()).send().await;
    let response = response.expect("answered");
    assert_eq!(response.status(), 200);
    response.bytes().await.expect("a body");
    started.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls: usize = std::env::args().skip(1).find_map(|arg| arg.parse().ok()).unwrap_or(200);
    let upstream = upstream().await;
    let config = ServeConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        upstream: upstream.clone(),
        upstream_openai: format!("{upstream}/v1"),
        window: Some(10_000_000),
        ..ServeConfig::default()
    };
    let proxy = Proxy::bind(config).await.expect("binds");
    let proxied = format!("http://{}", proxy.local_addr());
    let stats = proxy.stats();
    tokio::spawn(proxy.run(std::future::pending()));
    let client = reqwest::Client::builder().no_proxy().build().expect("a client");
    println!("{calls} calls a conversation, growing to the sizes shown; no compaction (window 10M)");
    for (api, path, body) in [
        ("chat completions", "/v1/chat/completions", chat_body as fn(usize) -> String),
        ("responses", "/v1/responses", responses_body),
    ] {
        let bodies: Vec<String> = (0..calls).map(body).collect();
        for body in bodies.iter().step_by(20) {
            send(&client, &format!("{upstream}{path}"), body).await;
            send(&client, &format!("{proxied}{path}"), body).await;
        }
        let (mut direct, mut through) = (Vec::new(), Vec::new());
        for body in &bodies {
            direct.push(send(&client, &format!("{upstream}{path}"), body).await);
            through.push(send(&client, &format!("{proxied}{path}"), body).await);
        }
        direct.sort();
        through.sort();
        let largest = bodies.last().map_or(0, String::len);
        println!(
            "{api:>16}: direct p50 {:.2} ms p99 {:.2} ms; through the proxy p50 {:.2} ms p99 {:.2} ms; added p50 {:.2} ms p99 {:.2} ms (last body {} KB)",
            ms(percentile(&direct, 0.5)),
            ms(percentile(&direct, 0.99)),
            ms(percentile(&through, 0.5)),
            ms(percentile(&through, 0.99)),
            ms(percentile(&through, 0.5).saturating_sub(percentile(&direct, 0.5))),
            ms(percentile(&through, 0.99).saturating_sub(percentile(&direct, 0.99))),
            largest / 1024
        );
    }
    assert_eq!(stats.compactions(), 0, "nothing compacted");
    assert_eq!(stats.untouched(), 0, "every request went through the compaction's path");
}
