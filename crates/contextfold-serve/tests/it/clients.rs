//! Real clients as child processes: where the CI setup installed them, and how to run one
//! with a bounded time.
//!
//! `.ci/setup.d/20-anthropic-clients.sh` installs the pinned clients and exports where they
//! are. A test whose client is missing skips with a visible notice, or fails when `CI` is set.

use crate::common::notice;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// The virtualenv python with the `anthropic` SDK.
pub const PYTHON: &str = "CONTEXTFOLD_ANTHROPIC_PYTHON";
/// The node_modules holding `@anthropic-ai/sdk`.
pub const NODE_MODULES: &str = "CONTEXTFOLD_ANTHROPIC_NODE_MODULES";
/// The Claude Code CLI's native binary.
pub const CLAUDE: &str = "CONTEXTFOLD_CLAUDE";

/// The path in the variable `var`, when it names something that exists; otherwise `None`
/// after a notice, or a failure with `CI` set.
pub fn installed(var: &str, what: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).filter(|path| path.exists());
    if path.is_none() {
        let why = format!(
            "{what} is not installed ({var} names nothing); `source .ci/setup.d/20-anthropic-clients.sh` installs it"
        );
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        notice(&format!("skipped: {why}"));
    }
    path
}

/// A file of the pinned clients' folder, `tests/clients/anthropic/`.
pub fn script(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/anthropic").join(name)
}

/// What a child process printed.
pub struct Finished {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Finished {
    /// Every line of standard output that is a JSON value.
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }
}

/// Runs `command` to its end, killed after `limit`; fails unless it exits 0.
pub async fn run(mut command: tokio::process::Command, limit: Duration) -> Finished {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let shown = format!("{:?}", command.as_std());
    let child = command.spawn().unwrap_or_else(|err| panic!("{shown} does not start: {err}"));
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{shown} did not finish within {limit:?}"))
        .expect("its output is read");
    let finished = Finished {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        output.status.success(),
        "{shown} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        finished.stdout,
        finished.stderr
    );
    finished
}

/// The number at the end of the id of the newest tool result in the request's newest user
/// message (`toolu_007` → 7), if it answers a call.
///
/// Scripts pick their reply from it: the newest message is the client's own and always sent
/// as the client wrote it, so the choice survives a compaction that folds older turns away,
/// and a retried request gets the same reply.
pub fn newest_result_number(body: &Value) -> Option<usize> {
    let messages = body["messages"].as_array()?;
    let newest = messages.iter().rev().find(|message| message["role"] == "user")?;
    newest["content"].as_array()?.iter().rev().find_map(|block| {
        let id = block["tool_use_id"].as_str().filter(|_| block["type"] == "tool_result")?;
        id.rsplit('_').next()?.parse().ok()
    })
}

/// `value` without the object fields that are null, at every depth.
pub fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, field)| !field.is_null())
                .map(|(key, field)| (key.clone(), without_nulls(field)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}
