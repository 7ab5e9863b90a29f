//! Test data shared by the integration tests: a coding session, and one holding secrets.
#![allow(dead_code)]

use contextfold::core::Conversation;
pub use contextfold_test_support::{corpus_dir, corpus_files, notice};
use serde_json::json;

/// A coding session: `turns` user turns, each with `cycles` tool calls of `lines` output lines.
pub fn session(turns: usize, cycles: usize, lines: usize) -> Conversation {
    let mut messages = Vec::new();
    let mut id = 0;
    for turn in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Request {turn}: please fix module {turn}, and don't touch the public API.")}));
        for cycle in 0..cycles {
            id += 1;
            let output: String = (0..lines)
                .map(|line| {
                    format!("module{turn}/file{cycle}.py:{line}: def function_{line}(arg): return arg * {line}\n")
                })
                .collect();
            messages.push(json!({"role": "assistant", "content": [
                {"type": "text", "text": format!("Reading file {cycle} of module {turn}.")},
                {"type": "tool_use", "id": format!("t{id}"), "name": "Read", "input": {"file_path": format!("module{turn}/file{cycle}.py")}}
            ]}));
            messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{id}"), "content": output}]}));
        }
        id += 1;
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{id}"), "name": "Edit", "input": {"file_path": format!("module{turn}/file0.py"), "old_string": "a", "new_string": "b"}}
        ]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{id}"), "content": "ok"}]}));
        messages
            .push(json!({"role": "assistant", "content": format!("Fixed module {turn}. Next I will run the tests.")}));
    }
    Conversation::from_value(json!({"system": "You are a coding agent.", "model": "m", "messages": messages})).unwrap()
}

/// Realistic fake secrets, built rather than written out so that no scanner flags this file:
/// an AWS access key id, a GitHub token, a line of a PEM private key, a database password.
pub fn secrets() -> [String; 4] {
    [
        format!("AKIA{}", "Q7ZX4M2P".repeat(2)),
        format!("ghp_{}", "x9Yb2Kq7Lm4N".repeat(3)),
        format!("MIIEowIBAAKCAQEA{}", "7c3kQ9vR2xW8pL5n".repeat(3)),
        "Tr0ub4dor&3-horse-staple".to_string(),
    ]
}

/// [`session`] (of at least two turns) with the [`secrets`] in its head: an `.env` with a key
/// read by the first tool call, and the GitHub token in the second request, which summaries quote.
pub fn secret_session(turns: usize, cycles: usize, lines: usize) -> Conversation {
    let [aws, github, pem, password] = secrets();
    let mut conversation = session(turns, cycles, lines);
    let env = format!(
        "DB_PASSWORD={password}\nAWS_ACCESS_KEY_ID={aws}\n-----BEGIN RSA PRIVATE KEY-----\n{pem}\n{pem}\n-----END RSA PRIVATE KEY-----\n"
    );
    let mut value = conversation.to_value();
    value["messages"][2]["content"][0]["content"] = json!(env);
    let second = 1 + 2 * cycles + 3;
    value["messages"][second]["content"] = json!(format!("Request 1: deploy module 1 with the token {github}."));
    conversation = Conversation::from_value(value).unwrap();
    conversation
}

/// The secrets `text` holds.
pub fn leaked(text: &str) -> Vec<String> {
    secrets().into_iter().filter(|secret| text.contains(secret.as_str())).collect()
}

/// A single-threaded runtime for driving async calls from a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}
