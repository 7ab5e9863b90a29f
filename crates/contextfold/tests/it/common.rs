//! Test data shared by the integration tests: a coding session, and one holding secrets.
#![allow(dead_code)]

use contextfold::core::Conversation;
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

/// The folder of shared test data: `CONTEXTFOLD_TEST_SHARED`, or `../shared` beside the
/// repository. CI points the variable at a missing folder to run the tests that read it as
/// on a fresh clone.
pub fn shared_dir() -> std::path::PathBuf {
    std::env::var_os("CONTEXTFOLD_TEST_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// `relative` in the [shared folder](shared_dir), or `None` after a visible notice when it is
/// absent. With `CI` set, a missing one fails the test instead. The test that asks is added
/// to the file `CONTEXTFOLD_TEST_SHARED_READERS` names, so CI knows which tests to run again
/// without the folder.
pub fn shared(relative: &str) -> Option<std::path::PathBuf> {
    if let Some(readers) = std::env::var_os("CONTEXTFOLD_TEST_SHARED_READERS") {
        use std::io::Write;
        // The harness names each test's thread after the test.
        let line = format!("{}\n", std::thread::current().name().unwrap_or("unnamed"));
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(readers).expect("the readers file");
        file.write_all(line.as_bytes()).expect("the readers file takes a line");
    }
    let path = shared_dir().join(relative);
    if path.exists() {
        return Some(path);
    }
    assert!(std::env::var_os("CI").is_none(), "CI is set but {} is missing", path.display());
    notice(&format!("skipped: {} is absent", path.display()));
    None
}

/// The shared corpus of real sessions, or `None` after a visible notice (see [`shared`]).
pub fn corpus_dir() -> Option<std::path::PathBuf> {
    shared("corpus")
}

/// The corpus's sessions in `dir` (its `.json` files but the manifest), sorted.
pub fn corpus_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the corpus lists")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json") && !path.ends_with("manifest.json"))
        .collect();
    files.sort();
    files
}

/// Writes `text` to standard error past the test harness's capture, so a skip is seen.
pub fn notice(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "notice: {text}");
}

/// A single-threaded runtime for driving async calls from a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}
