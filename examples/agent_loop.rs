//! An agent loop with contextfold's middleware before each LLM call.
//!
//! The "LLM" is a scripted server on 127.0.0.1 that speaks the Anthropic Messages API: it
//! answers each request with a tool call (run the tests of the next module), and refuses a
//! request over its window the way a real provider does. The agent runs each tool locally
//! (its output is a long test log), appends the result, and every sixth step the user asks
//! for the next module. Over three dozen calls the history grows far past the window; the
//! middleware keeps every request inside it and prints each compaction.
//!
//! Run it with `cargo run -p contextfold --example agent_loop`; `cargo test` runs it too.

use contextfold::{CompactionMiddleware, Compactor, Event, Message, MiddlewareConfig, Role};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The model's window and the tokens kept for its answer.
const WINDOW: u64 = 24_000;
const RESERVE: u64 = 2_000;
/// LLM calls the agent makes.
const STEPS: usize = 36;

/// What a run did, for the test.
#[derive(Debug, Default)]
struct Outcome {
    calls: usize,
    compactions: usize,
    largest_request: u64,
    history_tokens: u64,
}

/// The scripted model: a tool call per request, and a 400 for a request over the window.
struct ScriptedModel {
    calls: AtomicUsize,
    largest: AtomicUsize,
}

impl Respond for ScriptedModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let body: Value = match serde_json::from_slice(&request.body) {
            Ok(body) => body,
            Err(err) => return error(400, &format!("the body is not JSON: {err}")),
        };
        // The provider's count: roughly four bytes a token.
        let input_tokens = (body.to_string().len() / 4) as u64;
        self.largest.fetch_max(input_tokens as usize, Ordering::SeqCst);
        if input_tokens > WINDOW - RESERVE {
            return error(400, &format!("prompt is too long: {input_tokens} tokens > {}", WINDOW - RESERVE));
        }
        let module = call / 6;
        ResponseTemplate::new(200).set_body_json(json!({
            "id": format!("msg_{call}"),
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": format!("Running the tests of module {module}, step {call}.")},
                {"type": "tool_use", "id": format!("toolu_{call}"), "name": "Bash", "input": {"command": format!("pytest tests/module{module} -k step{call}")}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": input_tokens, "output_tokens": 40}
        }))
    }
}

fn error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_json(json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}))
}

/// The local tool: a long test log for `command`.
fn run_tool(command: &str, step: usize) -> String {
    let mut log: String =
        (0..120).map(|line| format!("{command}: test_case_{line} PASSED in 0.{line:02}s [step {step}]\n")).collect();
    log.push_str(&format!("FAILED test_case_7 (step {step}): assert total == 42\n"));
    log
}

async fn run(print: bool) -> Result<Outcome, Box<dyn std::error::Error>> {
    let server = MockServer::start().await;
    let model = Arc::new(ScriptedModel { calls: AtomicUsize::new(0), largest: AtomicUsize::new(0) });
    Mock::given(method("POST")).and(path("/v1/messages")).respond_with(SharedModel(model.clone())).mount(&server).await;

    let system = "You are a coding agent. Run the tests and fix what fails.";
    let tools =
        vec![json!({"name": "Bash", "description": "Run a shell command.", "input_schema": {"type": "object"}})];
    let config = MiddlewareConfig::builder(WINDOW, RESERVE)
        .system(contextfold::System::Text(system.into()))
        .tools(tools.clone())
        .build()?;
    let compactions = Arc::new(Mutex::new(0));
    let seen = compactions.clone();
    let middleware = CompactionMiddleware::new(Compactor::default(), config).with_observer(Arc::new(move |event| {
        if let Event::Compacted(event) = event {
            *seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) += 1;
            if print {
                println!(
                    "compaction ({:?}): {} -> {} tokens by {}; {} messages folded, {} outputs offloaded",
                    event.trigger,
                    event.tokens_before,
                    event.tokens_after,
                    event.strategy,
                    event.messages_folded,
                    event.offloaded
                );
            }
        }
    }));

    let client = reqwest::Client::new();
    let url = format!("{}/v1/messages", server.uri());
    let mut history: Vec<Message> = Vec::new();
    let mut pending = vec![Message::text(Role::User, "Make the test suite of module 0 pass.")];
    for step in 0..STEPS {
        let prepared = middleware.prepare(&history, &pending).await;
        if let Some(error) = &prepared.error {
            return Err(format!("step {step}: {error}").into());
        }
        let body = json!({
            "model": "scripted",
            "max_tokens": RESERVE,
            "system": system,
            "tools": tools,
            "messages": prepared.iter().map(Message::to_value).collect::<Vec<_>>(),
        });
        let response = client.post(&url).json(&body).send().await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        if !status.is_success() {
            return Err(format!("step {step}: the model answered {status}: {}", answer["error"]["message"]).into());
        }
        middleware.observe_usage(answer["usage"]["input_tokens"].as_u64().unwrap_or(0));
        let reply = Message::from_value(json!({"role": "assistant", "content": answer["content"].clone()}), step)?;
        let (id, command) = match &answer["content"][1] {
            call @ Value::Object(_) => {
                (call["id"].as_str().unwrap_or_default(), call["input"]["command"].as_str().unwrap_or_default())
            }
            _ => return Err(format!("step {step}: no tool call in the answer").into()),
        };
        let mut result = vec![json!({"type": "tool_result", "tool_use_id": id, "content": run_tool(command, step)})];
        if step % 6 == 5 {
            result.push(json!({"type": "text", "text": format!("Good. Now module {}.", step / 6 + 1)}));
        }
        history.extend(pending);
        history.push(reply);
        pending = vec![Message::from_value(json!({"role": "user", "content": result}), history.len())?];
    }
    let compactions = *compactions.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let history_tokens = history.iter().map(|message| middleware.count(message)).sum();
    Ok(Outcome {
        calls: model.calls.load(Ordering::SeqCst),
        compactions,
        largest_request: model.largest.load(Ordering::SeqCst) as u64,
        history_tokens,
    })
}

/// Lets the server share the model with the loop, to read its counters afterwards.
struct SharedModel(Arc<ScriptedModel>);

impl Respond for SharedModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let outcome = run(true).await?;
    println!(
        "{} calls, {} compactions; the history holds {} tokens, the largest request {} (window {WINDOW})",
        outcome.calls, outcome.compactions, outcome.history_tokens, outcome.largest_request
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_agent_loop_stays_inside_the_window() {
        let outcome = super::run(false).await.expect("every call succeeds");
        assert_eq!(outcome.calls, super::STEPS);
        assert!(outcome.compactions >= 2, "{outcome:?}");
        assert!(outcome.history_tokens > 2 * super::WINDOW, "the history outgrew the window: {outcome:?}");
        assert!(outcome.largest_request <= super::WINDOW - super::RESERVE, "{outcome:?}");
    }
}
