//! The Claude Code CLI through the proxy, headless, against the scripted upstream: it runs
//! real tool calls (a shell command that writes a file, a read, an edit, a write) in a
//! temporary working directory until the proxy compacts, then a few more, then the script
//! ends the turn; the run must end in success, with the files on disk as the tools left them.
//!
//! What Claude Code sends is checked as well: `HEAD /` first, then only streaming
//! `POST /v1/messages?beta=true`, its headers, the keys of its bodies, and, with its default
//! model, `role: "system"` messages inside `messages`.

use crate::clients::{installed, newest_result_number, run, CLAUDE};
use crate::common::{extends, notice, proxy, raw_messages};
use crate::mock::{canned, Mock, Recorded, Reply};
use contextfold_core::{validate, Conversation};
use contextfold_test_support::Scratch;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Steps the script runs at most (it ends sooner, once the proxy has compacted).
const MAX_STEPS: usize = 48;
/// Steps run after the first compacted request, before the script ends the turn.
const AFTER_COMPACTION: usize = 3;
/// Lines of each data file the shell command writes (about 8k tokens when read back).
const LINES: usize = 400;
/// How long the whole run may take.
const LIMIT: Duration = Duration::from_secs(300);

/// The scripted upstream: which step each request is at, and the step of the first request
/// that arrived compacted.
struct Script {
    dir: PathBuf,
    compacted_at: Mutex<Option<usize>>,
}

impl Script {
    /// The tool call of `step`: in cycles of four, a shell command writing a data file, a
    /// read of it, an edit of its line 7, and a note written beside it.
    fn tool_call(&self, step: usize) -> Value {
        let cycle = step / 4;
        let data = self.dir.join(format!("data_{cycle}.txt"));
        let (name, input) = match step % 4 {
            0 => (
                "Bash",
                json!({"command": format!(
                    "seq -f 'data {cycle} line %g: the quick brown fox jumps over the lazy dog' 1 {LINES} > data_{cycle}.txt && wc -l data_{cycle}.txt"),
                    "description": "Write a data file"}),
            ),
            1 => ("Read", json!({"file_path": data})),
            2 => (
                "Edit",
                json!({"file_path": data, "old_string": format!("data {cycle} line 7:"),
                    "new_string": format!("data {cycle} LINE 7:")}),
            ),
            _ => (
                "Write",
                json!({"file_path": self.dir.join(format!("notes_{cycle}.md")),
                    "content": format!("cycle {cycle}: data_{cycle}.txt has {LINES} lines; line 7 is upper-cased.\n")}),
            ),
        };
        json!({"type": "tool_use", "id": format!("toolu_cc_{step:03}"), "name": name, "input": input})
    }

    fn answer(&self, request: &Recorded) -> Reply {
        if !request.uri.starts_with("/v1/messages") {
            return Reply::json(json!({}));
        }
        let body = request.json();
        let step = newest_result_number(&body).map_or(0, |number| number + 1);
        let (content, stop_reason) = if body["tools"].as_array().is_none_or(Vec::is_empty) {
            // A side request of the client's own (none is expected with nonessential traffic off).
            (json!([{"type": "text", "text": "ok"}]), "end_turn")
        } else {
            if String::from_utf8_lossy(&request.body).contains("[contextfold: ") {
                self.compacted_at.lock().unwrap().get_or_insert(step);
            }
            let done = self.compacted_at.lock().unwrap().is_some_and(|at| step >= at + AFTER_COMPACTION);
            if done || step >= MAX_STEPS {
                (json!([{"type": "text", "text": format!("step {step}: all done.")}]), "end_turn")
            } else {
                let text = json!({"type": "text", "text": format!("step {step}: next, a tool call.")});
                (json!([text, self.tool_call(step)]), "tool_use")
            }
        };
        let tokens = request.body.len() as u64 / 4;
        if body["stream"] == true {
            Reply::sse(canned::message_stream(&format!("msg_cc_{step:03}"), &content, stop_reason, tokens))
        } else {
            canned::message_with_usage(content, stop_reason, tokens)
        }
    }
}

/// One headless run of Claude Code through a proxy: what the upstream received, the run's
/// result, and the working directory it left.
struct Run {
    mock: Mock,
    requests: Vec<Arc<Recorded>>,
    result: Value,
    compactions: u64,
    untouched: u64,
    work: Scratch,
    _home: Scratch,
}

async fn run_claude(claude: &Path, model: Option<&str>) -> Run {
    let home = Scratch::new("claude-home");
    let work = Scratch::new("claude-work");
    let script = Arc::new(Script { dir: work.path().to_path_buf(), compacted_at: Mutex::new(None) });
    let mock = Mock::start({
        let script = script.clone();
        move |request| script.answer(request)
    })
    .await;
    // Claude Code's system prompt and 24 tools alone are about 28k tokens.
    let mut settings = crate::common::config(&mock.url());
    settings.window = Some(100_000);
    settings.reserve = 8_000;
    let proxy = proxy(settings).await;
    let mut command = claude_command(claude, home.path(), work.path(), &proxy.url);
    command.args(["-p", "Generate data files, read them, edit them, and take notes."]).args([
        "--output-format",
        "json",
        "--allowedTools",
        "Bash,Read,Edit,Write",
        "--dangerously-skip-permissions",
    ]);
    if let Some(model) = model {
        command.args(["--model", model]);
    }
    let finished = run(command, LIMIT).await;
    let result: Value = finished.json_lines().into_iter().find(|line| line["type"] == "result").unwrap_or_else(|| {
        panic!("Claude Code printed no result:\nstdout:\n{}\nstderr:\n{}", finished.stdout, finished.stderr)
    });
    let requests = mock.requests();
    Run {
        compactions: proxy.stats.compactions(),
        untouched: proxy.stats.untouched(),
        mock,
        requests,
        result,
        work,
        _home: home,
    }
}

impl Run {
    /// The Messages requests, in the order they arrived.
    fn loop_requests(&self) -> Vec<&Arc<Recorded>> {
        self.requests.iter().filter(|request| request.uri.starts_with("/v1/messages")).collect()
    }

    /// Checks the run ended in success, the tools did their work, and what Claude Code sent
    /// is what the proxy's documentation describes.
    fn check(&self) {
        assert_eq!(self.result["subtype"], "success", "{}", self.result);
        assert_eq!(self.result["is_error"], false, "{}", self.result);
        assert!(self.result["result"].as_str().is_some_and(|text| text.ends_with("all done.")), "{}", self.result);
        let steps =
            self.loop_requests().last().map_or(0, |request| newest_result_number(&request.json()).map_or(0, |n| n + 1));
        assert!(steps >= 8, "at least two cycles of tool calls ran (steps: {steps})");
        for request in self.loop_requests() {
            let body = request.json();
            let newest =
                body["messages"].as_array().and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"));
            for block in newest.and_then(|message| message["content"].as_array()).into_iter().flatten() {
                assert!(block["is_error"] != true, "a tool failed: {block}");
            }
        }
        for cycle in 0..steps / 4 {
            let data = std::fs::read_to_string(self.work.path().join(format!("data_{cycle}.txt")))
                .expect("the shell wrote it");
            assert_eq!(data.lines().count(), LINES);
            assert!(
                data.contains(&format!("data {cycle} LINE 7:")) && !data.contains(&format!("data {cycle} line 7:")),
                "the edit of data_{cycle}.txt applied"
            );
            assert!(self.work.path().join(format!("notes_{cycle}.md")).exists(), "notes_{cycle}.md was written");
        }
        self.check_what_it_sends();
    }

    fn check_what_it_sends(&self) {
        let first = &self.requests[0];
        assert_eq!((first.method.as_str(), first.uri.as_str()), ("HEAD", "/"), "HEAD / comes first");
        let loop_requests = self.loop_requests();
        assert_eq!(loop_requests.len() + 1, self.requests.len(), "nothing but HEAD / and Messages requests");
        let session = loop_requests[0].header("x-claude-code-session-id").expect("a session header").to_string();
        for request in &loop_requests {
            assert_eq!(request.method, "POST");
            assert_eq!(request.uri, "/v1/messages?beta=true");
            assert_eq!(request.header("x-api-key"), Some("test-key"));
            assert!(request.header("anthropic-version").is_some());
            assert!(request.header("anthropic-beta").is_some_and(|betas| betas.contains("claude-code-20250219")));
            assert_eq!(request.header("x-claude-code-session-id"), Some(session.as_str()));
            let body = request.json();
            assert_eq!(body["stream"], true, "only streaming requests");
            for key in
                ["model", "messages", "system", "tools", "metadata", "max_tokens", "thinking", "context_management"]
            {
                assert!(body.get(key).is_some(), "the body has `{key}`");
            }
            let system = body["system"].as_array().expect("system blocks");
            assert_eq!(system.len(), 3);
            assert!(system[0]["text"].as_str().is_some_and(|text| text.starts_with("x-anthropic-billing-header")));
            let tools = body["tools"].as_array().map_or(0, Vec::len);
            assert!((12..=24).contains(&tools), "{tools} tools");
            let user_id: Value =
                serde_json::from_str(body["metadata"]["user_id"].as_str().expect("a user id")).expect("JSON");
            assert_eq!(user_id["session_id"], session.as_str());
            assert!(body["context_management"].to_string().contains("clear_thinking_20251015"));
        }
        let last = loop_requests.last().expect("requests").json();
        let newest = last["messages"].as_array().and_then(|messages| messages.last()).cloned().unwrap_or_default();
        let results_marked = newest["content"].as_array().is_some_and(|blocks| {
            blocks.iter().any(|b| b["type"] == "tool_result" && b.get("cache_control").is_some())
        });
        assert!(results_marked, "the newest tool result carries a cache breakpoint: {newest}");
        let keys: Vec<String> = last.as_object().unwrap().keys().cloned().collect();
        notice(&format!(
            "Claude Code ({}): {} requests, session {session}; body keys {keys:?}; thinking {}; anthropic-beta {}; tools with cache_control: {}",
            last["model"].as_str().unwrap_or_default(),
            loop_requests.len(),
            last["thinking"],
            loop_requests[0].header("anthropic-beta").unwrap_or_default(),
            last["tools"].as_array().unwrap().iter().filter(|tool| tool.get("cache_control").is_some()).count(),
        ));
    }
}

/// Claude Code headless in `work`, with `home` for its configuration, through the proxy at
/// `url`: no telemetry, no side traffic, one retry.
pub fn claude_command(claude: &Path, home: &Path, work: &Path, url: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(claude);
    command
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "1")
        // What `--dangerously-skip-permissions` needs when run as root.
        .env("IS_SANDBOX", "1");
    command
}

/// The ids of the tool calls and of the tool results of `messages`, in order.
pub fn tool_ids(messages: &[contextfold_core::Message]) -> (Vec<String>, Vec<String>) {
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    for block in messages.iter().flat_map(|message| &message.content) {
        match block {
            contextfold_core::Block::ToolUse(call) => calls.push(call.id.clone()),
            contextfold_core::Block::ToolResult(result) => results.push(result.tool_use_id.clone()),
            _ => {}
        }
    }
    (calls, results)
}

/// The Messages requests that hold a `role: "system"` message.
fn with_system_messages(requests: &[&Arc<Recorded>]) -> usize {
    let has_system = |request: &Recorded| {
        request.json()["messages"].as_array().is_some_and(|messages| messages.iter().any(|m| m["role"] == "system"))
    };
    requests.iter().filter(|request| has_system(request)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_real_tools_through_the_proxy_until_it_compacts() {
    let Some(claude) = installed(CLAUDE, "the Claude Code CLI") else { return };
    let run = run_claude(&claude, Some("claude-sonnet-4-5")).await;
    run.check();
    let requests = run.loop_requests();
    assert_eq!(with_system_messages(&requests), 0, "Sonnet 4.5 gets no system messages");
    assert_eq!(run.mock.assert_all_valid(), requests.len(), "every forwarded request is valid");
    assert!(run.compactions >= 1, "the proxy compacted:\n{}", crate::common::logs());
    assert_eq!(run.untouched, 0, "{}", crate::common::logs());
    let compacted =
        requests.iter().filter(|request| String::from_utf8_lossy(&request.body).contains("[contextfold: ")).count();
    assert!(compacted > AFTER_COMPACTION, "the run went on with compacted requests ({compacted})");
    // After the compaction, each request starts with the previous one: the cache stays warm.
    let after: Vec<Vec<String>> = requests
        .iter()
        .skip_while(|request| !String::from_utf8_lossy(&request.body).contains("[contextfold: "))
        .map(|request| raw_messages(&request.body))
        .collect();
    for (call, pair) in after.windows(2).enumerate() {
        assert!(extends(&pair[0], &pair[1]), "compacted request {} does not start with the one before", call + 1);
    }
    notice(&format!(
        "Claude Code: {} requests, {} compactions, {compacted} compacted requests, run ended in {}",
        requests.len(),
        run.compactions,
        run.result["subtype"]
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_with_its_default_model_sends_system_messages_the_proxy_keeps() {
    let Some(claude) = installed(CLAUDE, "the Claude Code CLI") else { return };
    let run = run_claude(&claude, None).await;
    run.check();
    let requests = run.loop_requests();
    let holding = with_system_messages(&requests);
    assert!(holding >= 1, "the default model's requests carry role: system messages");
    let readable: Vec<_> = requests
        .iter()
        .filter_map(|request| Conversation::from_value(request.json()).ok().map(|conversation| (request, conversation)))
        .collect();
    for (request, conversation) in &readable {
        assert!(validate(conversation).is_empty(), "request {} is invalid", request.uri);
    }
    if readable.len() == requests.len() {
        // The model reads system messages: the conversation compacts like any other.
        assert!(run.compactions >= 1, "the proxy compacted:\n{}", crate::common::logs());
    } else {
        // The model does not read them: each such request goes upstream as the client sent
        // it, never a rewritten one.
        assert_eq!(readable.len() + holding, requests.len(), "only the requests with system messages are unread");
        assert_eq!(run.untouched as usize, holding, "each is forwarded untouched:\n{}", crate::common::logs());
        notice(&format!("Claude Code (default model): {holding} requests with role: system messages went upstream untouched; the model does not read them"));
    }
}
