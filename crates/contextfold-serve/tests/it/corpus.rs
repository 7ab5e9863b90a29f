//! Real sessions through the proxy: recorded coding-agent sessions of the shared corpus are
//! replayed call by call (call i sends the messages before assistant message i, and the mock
//! answers with assistant message i as recorded), several at once through one proxy with a
//! small window. Every request the upstream receives must be valid, carry the client's
//! system prompt, and change its prefix only at a compaction.

use crate::common::{client, config, corpus_dir, extends, fields, notice, proxy, raw_messages};
use crate::mock::{canned, Mock};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The sessions replayed, each with a name: the Claude Code ones of up to 120 messages and the first of each
/// other agent family, so every shape the corpus has goes through.
fn sessions(dir: &std::path::Path) -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the corpus lists")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json") && !path.ends_with("manifest.json"))
        .collect();
    files.sort();
    let mut families = std::collections::HashSet::new();
    let mut chosen = Vec::new();
    for path in files {
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("reads")).expect("JSON");
        let agent = value["agent"].as_str().unwrap_or_default().to_string();
        let messages = value["messages"].as_array().map_or(0, Vec::len);
        let claude_code = agent.starts_with("Claude Code") && messages <= 120;
        if claude_code || families.insert(agent.split(' ').next().unwrap_or_default().to_string()) {
            // A short, plain name: it is also the session id in the proxy's log lines.
            chosen.push((format!("corpus-{:02}", chosen.len()), value));
        }
    }
    chosen
}

/// The body of call `call` of `session`: the messages before its assistant message `call`.
fn call_body(session: &Value, call: usize) -> Option<String> {
    let messages = session["messages"].as_array()?;
    let end = messages.iter().enumerate().filter(|(_, message)| message["role"] == "assistant").nth(call)?.0;
    let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": messages[..end]});
    if let Some(system) = session.get("system").filter(|system| !system.is_null()) {
        body["system"] = system.clone();
    }
    if let Some(tools) = session.get("tools").filter(|tools| !tools.is_null()) {
        body["tools"] = tools.clone();
    }
    Some(body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_sessions_go_through_valid_and_cache_stable() {
    let Some(dir) = corpus_dir() else { return };
    let sessions = Arc::new(sessions(&dir));
    assert!(sessions.len() >= 6, "the corpus has sessions of several agents");
    let by_name: Arc<HashMap<String, Value>> = Arc::new(sessions.iter().cloned().collect());
    let script = {
        let by_name = by_name.clone();
        move |request: &crate::mock::Recorded| {
            let session = &by_name[request.header("x-test-session").expect("a session")];
            let call: usize = request.header("x-test-call").expect("a call").parse().unwrap();
            let answer =
                session["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").nth(call).unwrap();
            // About what a tokenizer counts in these bodies.
            let input_tokens = request.body.len() as u64 / 3;
            canned::message_with_usage(answer["content"].clone(), "end_turn", input_tokens)
        }
    };
    let mock = Mock::start(script).await;
    let mut settings = config(&mock.url());
    settings.window = Some(32_000);
    settings.reserve = 4_000;
    let proxy = proxy(settings).await;
    let mut tasks = Vec::new();
    for (name, session) in sessions.iter().cloned() {
        let url = proxy.url.clone();
        tasks.push(tokio::spawn(async move {
            let client = client();
            let mut sent = Vec::new();
            let mut call = 0;
            while let Some(body) = call_body(&session, call) {
                let response = client
                    .post(format!("{url}/v1/messages"))
                    .header("x-contextfold-session", name.as_str())
                    .header("x-test-session", name.as_str())
                    .header("x-test-call", call.to_string())
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200, "{name} call {call}: {}", response.text().await.unwrap_or_default());
                response.bytes().await.unwrap();
                sent.push(body);
                call += 1;
            }
            (name, sent)
        }));
    }
    let mut sent_by_session = HashMap::new();
    for task in tasks {
        let (name, sent) = task.await.expect("the session goes through");
        sent_by_session.insert(name, sent);
    }
    let calls: usize = sent_by_session.values().map(Vec::len).sum();
    assert_eq!(mock.assert_all_valid(), calls, "every forwarded request is valid");
    let mut rewrites = 0;
    let logs = crate::common::logs();
    for (name, sent) in &sent_by_session {
        let received: Vec<_> = mock
            .messages_requests()
            .into_iter()
            .filter(|request| request.header("x-test-session") == Some(name))
            .collect();
        assert_eq!(received.len(), sent.len());
        // One session's calls are sequential, so its log lines are in call order.
        let lines: Vec<&str> = logs.lines().filter(|line| line.contains(&format!(" session={name} "))).collect();
        assert_eq!(lines.len(), sent.len(), "{name}: one log line per call");
        let mut previous: Option<Vec<String>> = None;
        for (call, (request, body)) in received.iter().zip(sent).enumerate() {
            let (upstream, original) = (fields(&request.body), fields(body.as_bytes()));
            for key in ["system", "tools", "model", "max_tokens"] {
                assert_eq!(
                    upstream.get(key).map(|raw| raw.get()),
                    original.get(key).map(|raw| raw.get()),
                    "{name}: {key}"
                );
            }
            let messages = raw_messages(&request.body);
            if previous.as_ref().is_some_and(|previous| !extends(previous, &messages)) {
                rewrites += 1;
                assert!(
                    lines[call].contains(" compacted ("),
                    "{name} call {call}: the prefix changed without a compaction"
                );
            }
            previous = Some(messages);
        }
    }
    let compactions = proxy.stats.compactions() as usize;
    assert_eq!(
        proxy.stats.untouched(),
        0,
        "every session was readable and compacted validly: {}",
        crate::common::logs()
    );
    assert!(compactions >= sessions.len() / 2, "the sessions compact in a 32k window (got {compactions})");
    // Every prefix change was at a compaction (checked call by call above); a compaction
    // that only clips the newest output leaves the prefix as it was, so there may be fewer.
    assert!(rewrites >= 1 && rewrites <= compactions, "{rewrites} rewrites, {compactions} compactions");
    notice(&format!(
        "{} corpus sessions, {calls} calls through the proxy, {compactions} compactions, {rewrites} prefix changes",
        sessions.len()
    ));
}
