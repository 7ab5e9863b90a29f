//! One tool output bigger than any budget: the compactor clips it (the newest included), the
//! middleware clips it on ingest or compacts on overflow. No network.

use contextfold::compactor::{CompactConfig, Compactor, Step, Target};
use contextfold::core::clip::CLIP_PREFIX;
use contextfold::core::hash::payload_ref;
use contextfold::core::tokens::{count_block, count_conversation, count_messages, Tokenizer, BLOCK_OVERHEAD};
use contextfold::core::{validate, Block, Conversation, Message};
use contextfold::event::Trigger;
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
use contextfold::policy::{All, RateLimit, Threshold};
use serde_json::{json, Value};
use std::sync::Arc;

/// About `size` bytes of `git diff` output.
fn diff_output(size: usize) -> String {
    let mut text = String::with_capacity(size + 200);
    let mut hunk = 0;
    while text.len() < size {
        text.push_str(&format!(
            "diff --git a/src/module_{hunk}.rs b/src/module_{hunk}.rs\nindex 3f2a1b{hunk:04x}..9c8d7e{hunk:04x} 100644\n\
             --- a/src/module_{hunk}.rs\n+++ b/src/module_{hunk}.rs\n@@ -{hunk},7 +{hunk},9 @@ impl Module{hunk} {{\n\
             \x20    fn run(&self) -> Result<()> {{\n-        let value = self.compute({hunk})?;\n\
             +        let value = self.compute_checked({hunk})?;\n+        tracing::debug!(value, \"computed\");\n\
             \x20        Ok(())\n"
        ));
        hunk += 1;
    }
    text
}

/// A few turns of a coding session, then a `git diff` whose result is `diff_bytes` long: the
/// last message.
fn session(diff_bytes: usize) -> (Vec<Value>, String) {
    let mut messages = Vec::new();
    for turn in 0..3 {
        messages
            .push(json!({"role": "user", "content": format!("Turn {turn}: fix the failing test in module {turn}.")}));
        for (step, (tool, input, output)) in [
            ("Read", json!({"file_path": format!("src/module_{turn}.rs")}), "fn run() {}\n".repeat(60)),
            ("Bash", json!({"command": "cargo test"}), "test module::works ... ok\n".repeat(40)),
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("t{turn}_{step}");
            messages.push(json!({"role": "assistant", "content": [
                {"type": "text", "text": format!("Step {step} of turn {turn}.")},
                {"type": "tool_use", "id": id, "name": tool, "input": input}
            ]}));
            messages.push(
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}),
            );
        }
        messages.push(json!({"role": "assistant", "content": format!("Module {turn} is fixed.")}));
    }
    messages.push(json!({"role": "user", "content": "Show me what changed."}));
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "diff", "name": "Bash", "input": {"command": "git diff"}}
    ]}));
    let diff = diff_output(diff_bytes);
    messages
        .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "diff", "content": diff}]}));
    (messages, diff)
}

fn conversation(messages: Vec<Value>) -> Conversation {
    Conversation::from_value(json!({"system": "You are a coding agent.", "messages": messages})).unwrap()
}

fn messages(values: Vec<Value>) -> Vec<Message> {
    conversation(values).messages
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// The text of the result answering the `git diff` call in `messages`.
fn diff_result(messages: &[Message]) -> (&Block, String) {
    messages
        .iter()
        .flat_map(|message| &message.content)
        .find_map(|block| match block {
            Block::ToolResult(result) if result.tool_use_id == "diff" => Some((block, result.text())),
            _ => None,
        })
        .expect("the diff result")
}

#[test]
fn a_2mb_last_tool_result_is_clipped_to_fit_the_budget() {
    let (values, diff) = session(2_000_000);
    let original = conversation(values);
    let compactor = Compactor::default();
    let config = CompactConfig { target: Target::Budget(8_000), ..CompactConfig::default() };
    let compacted = runtime().block_on(compactor.compact(&original, &config)).expect("a compaction");
    let (conversation, report) = (&compacted.conversation, &compacted.report);
    assert!(validate(conversation).is_empty());
    let tokens = count_conversation(compactor.counter(), conversation);
    assert!(tokens <= 8_000, "{tokens} tokens: {:?}", report.notes);
    assert_eq!(report.tokens_after, tokens);
    assert!((report.strategy_used.last() == Some(Step::Clip)), "{}", report.strategy_used);

    let item = report.clipped.iter().find(|item| item.tool == "Bash" && item.tokens_before > 100_000);
    let item = item.unwrap_or_else(|| panic!("the diff is reported: {:?}", report.clipped));
    assert_eq!(item.reference, payload_ref(&Value::String(diff.clone())));
    assert!(item.tokens_after < 8_000 && item.tokens_after < item.tokens_before);
    // The newest result stays the last message, clipped, with its first and last lines.
    let (block, text) = diff_result(conversation.messages.last().map(std::slice::from_ref).unwrap());
    assert_eq!(count_block(compactor.counter(), block), item.tokens_after);
    assert!(text.starts_with("diff --git a/src/module_0.rs b/src/module_0.rs\n"), "{}", &text[..200]);
    assert!(text.ends_with("         Ok(())\n"), "whole last lines");
    assert!(text.contains(CLIP_PREFIX) && text.contains(&format!("ref {}]", item.reference)), "{text}");
    assert!(text.contains("re-run the command"), "{text}");
}

#[test]
fn clip_on_ingest_keeps_a_huge_output_out_of_the_working_copy() {
    let config = MiddlewareConfig { clip_on_ingest: Some(1_000), ..MiddlewareConfig::new(200_000, 8_000) };
    let middleware = CompactionMiddleware::new(Compactor::default(), config);
    let counter = Tokenizer::Estimate.counter();
    let (values, diff) = session(2_000_000);
    let history = messages(values);

    let prepared = runtime().block_on(middleware.prepare(&history, &[]));
    let (block, text) = diff_result(&history);
    assert_eq!(text, diff, "the caller still holds the whole output");
    assert!(count_block(counter, block) > 400_000);

    let sent = prepared.messages();
    let (block, text) = diff_result(&sent);
    assert!(count_block(counter, block) <= 1_000 + BLOCK_OVERHEAD, "{}", count_block(counter, block));
    assert!(text.contains(CLIP_PREFIX), "{text}");
    assert!(text.len() < 10_000);
    assert_eq!(prepared.messages().len(), history.len());
    assert!(validate(&Conversation { messages: prepared.messages(), ..Conversation::default() }).is_empty());
    assert!(prepared.event.is_none(), "clipped on ingest, the request fits without compacting");
    assert!(prepared.request_tokens < 20_000, "{}", prepared.request_tokens);

    // The next call extends the same working copy: the output stays clipped.
    let mut grown = history.clone();
    grown.extend(messages(vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": "The diff renames compute to compute_checked."}),
        json!({"role": "user", "content": "Thanks."}),
    ]));
    let next = runtime().block_on(middleware.prepare(&grown, &[]));
    assert_eq!(&next.messages()[..prepared.messages().len()], prepared.messages().as_slice());
}

#[test]
fn without_clip_on_ingest_an_overflowing_request_is_compacted_to_fit() {
    let config = MiddlewareConfig::new(32_000, 4_000);
    // A policy that declines: only the overflow can start a compaction.
    let never = Arc::new(All(vec![Arc::new(Threshold::Off), Arc::new(RateLimit::default())]));
    let middleware = CompactionMiddleware::new(Compactor::default(), config).with_policy(never);
    let counter = Tokenizer::Estimate.counter();
    let (values, _) = session(2_000_000);
    let history = messages(values);
    assert!(count_messages(counter, &history) > 400_000);

    let prepared = runtime().block_on(middleware.prepare(&history, &[]));
    let event = prepared.event.as_ref().expect("a compaction");
    assert_eq!(event.trigger, Trigger::Overflow);
    assert!(event.strategy.contains(Step::Clip), "{}", event.strategy);
    assert!(prepared.request_tokens <= 28_000, "{}", prepared.request_tokens);
    assert!(count_messages(counter, &prepared.messages()) <= 28_000);
    assert!(validate(&Conversation { messages: prepared.messages(), ..Conversation::default() }).is_empty());
    let sent = prepared.messages();
    let (_, text) = diff_result(&sent);
    assert!(text.contains(CLIP_PREFIX));
}

/// FIXME(middleware): `clip_on_ingest` clips what enters the history, but a huge tool result
/// passed as the pending input is sent whole, and an overflow compaction cannot help (it
/// compacts the history only). This asserts today's behaviour; flip it when pending input
/// is clipped too.
#[test]
fn a_huge_output_in_the_pending_input_is_clipped_on_ingest() {
    let config = MiddlewareConfig { clip_on_ingest: Some(1_000), ..MiddlewareConfig::new(200_000, 8_000) };
    let middleware = CompactionMiddleware::new(Compactor::default(), config);
    let (values, diff) = session(2_000_000);
    let mut history = messages(values);
    let pending = vec![history.pop().expect("the diff result")];
    let prepared = runtime().block_on(middleware.prepare(&history, &pending));
    let sent = prepared.messages();
    let (_, text) = diff_result(&sent);
    assert_ne!(text, diff, "the pending result is clipped");
    assert!(text.contains("[contextfold: clipped "));
    assert!(prepared.request_tokens <= 192_000, "the request fits the window: {}", prepared.request_tokens);
}
