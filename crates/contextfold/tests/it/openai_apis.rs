//! Scripted 200-call agent conversations in OpenAI's two request formats (Responses with
//! reasoning items, Chat Completions with parallel tool calls), each request read, prepared
//! by the middleware and written back as a proxy does: every request sent is valid, and
//! between two compactions each one extends the previous one item for item, so the
//! provider's prompt cache keeps its prefix. The tokens saved are printed.

use contextfold::compactor::Compactor;
use contextfold::core::format::{self, responses, Format, Layout};
use contextfold::core::tokens::{count_conversation, Tokenizer};
use contextfold::core::{validate, Conversation};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
use serde_json::{json, Value};

const CALLS: usize = 200;
const WINDOW: u64 = 32_000;
const RESERVE: u64 = 4_000;

/// A file's text as a tool prints it: `lines` numbered lines that differ per file.
fn output(step: usize, lines: usize) -> String {
    (1..=lines)
        .map(|line| format!("{line:>4}  let value_{step}_{line} = compute({line}, \"src/m{}.rs\");\n", step % 13))
        .collect()
}

fn lines_for(step: usize) -> usize {
    8 + (step * 37) % 60
}

/// What the agent does at `step`: a new user task every 25 steps, a tool call otherwise.
fn is_task(step: usize) -> bool {
    step.is_multiple_of(25)
}

/// The Responses items that the client appends before call `step`.
fn responses_items(step: usize) -> Vec<Value> {
    if is_task(step) {
        let mut items = Vec::new();
        if step > 0 {
            items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("Task {} is done: the tests pass.", step / 25)}]}));
        }
        items.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("Task {}: fix the failing test in src/m{}.rs and keep the API.", step / 25 + 1, step % 13)}]}));
        return items;
    }
    let id = format!("call_{step}");
    vec![
        json!({"type": "reasoning", "id": format!("rs_{step}"), "summary": [{"type": "summary_text", "text": format!("Reading src/m{}.rs next.", step % 13)}], "encrypted_content": format!("gAAAAB{step:08}")}),
        json!({"type": "function_call", "name": "exec_command", "arguments": json!({"cmd": format!("sed -n '1,{}p' src/m{}.rs", lines_for(step), step % 13)}).to_string(), "call_id": id}),
        json!({"type": "function_call_output", "call_id": id, "output": output(step, lines_for(step))}),
    ]
}

/// The Chat messages that the client appends before call `step` (two parallel calls a step).
fn chat_messages(step: usize) -> Vec<Value> {
    if is_task(step) {
        let mut messages = Vec::new();
        if step > 0 {
            messages
                .push(json!({"role": "assistant", "content": format!("Task {} is done: the tests pass.", step / 25)}));
        }
        messages.push(json!({"role": "user", "content": format!("Task {}: fix the failing test in src/m{}.rs and keep the API.", step / 25 + 1, step % 13)}));
        return messages;
    }
    let call = |n: usize| json!({"id": format!("call_{step}_{n}"), "type": "function", "function": {"name": "read_file", "arguments": json!({"path": format!("src/m{}.rs", (step + n) % 13)}).to_string()}});
    vec![
        json!({"role": "assistant", "content": null, "tool_calls": [call(0), call(1)]}),
        json!({"role": "tool", "tool_call_id": format!("call_{step}_0"), "content": output(step, lines_for(step) / 2)}),
        json!({"role": "tool", "tool_call_id": format!("call_{step}_1"), "content": output(step + 1, lines_for(step + 1) / 2)}),
    ]
}

struct Totals {
    compactions: usize,
    sent_tokens: u64,
    full_tokens: u64,
    /// Calls whose request did not extend the previous one without a compaction between.
    prefix_breaks: usize,
    /// Items (or messages) of the previous request that the next one repeats unchanged.
    reused: usize,
    previous_total: usize,
}

/// Plays `CALLS` calls of a conversation in `format`, growing by `append(step)` each call.
fn play(format: Format, mut request: Value, list: &str, append: fn(usize) -> Vec<Value>) -> Totals {
    let counter = Tokenizer::Estimate.counter();
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let first = format::parse(&request.to_string(), Some(format)).expect("reads").conversation;
    let mut config = MiddlewareConfig::new(WINDOW, RESERVE);
    config.system = first.system.clone();
    config.tools = first.tools.clone();
    let middleware = CompactionMiddleware::new(Compactor::default().with_counter(Tokenizer::Estimate.shared()), config);
    let mut totals =
        Totals { compactions: 0, sent_tokens: 0, full_tokens: 0, prefix_breaks: 0, reused: 0, previous_total: 0 };
    let mut previous: Vec<String> = Vec::new();
    for step in 0..CALLS {
        request[list].as_array_mut().expect("a list").extend(append(step));
        let parsed = format::parse(&request.to_string(), Some(format)).expect("reads").conversation;
        totals.full_tokens += count_conversation(counter, &parsed);
        let prepared = runtime.block_on(middleware.prepare(&parsed.messages, &[]));
        let sent = Conversation { messages: prepared.messages(), ..parsed };
        let written = format::to_value(&sent, format, Layout::Object).expect("writes");
        // What goes out reads back valid.
        let back = format::parse(&written.to_string(), Some(format)).expect("the request sent reads back").conversation;
        let problems = if format == Format::Responses { responses::check(&back) } else { validate(&back) };
        assert!(problems.is_empty(), "{format} call {step}: {problems:#?}");
        totals.sent_tokens += count_conversation(counter, &back);
        let items: Vec<String> = written[list].as_array().expect("a list").iter().map(Value::to_string).collect();
        let shared = previous.iter().zip(&items).take_while(|(before, after)| before == after).count();
        totals.reused += shared;
        totals.previous_total += previous.len();
        match prepared.event {
            Some(_) => totals.compactions += 1,
            None if shared < previous.len() => totals.prefix_breaks += 1,
            None => {}
        }
        previous = items;
    }
    totals
}

fn report(name: &str, totals: &Totals) {
    let saved = 1.0 - totals.sent_tokens as f64 / totals.full_tokens as f64;
    let reused = totals.reused as f64 / totals.previous_total.max(1) as f64;
    println!(
        "{name}: {CALLS} calls, {} compactions, tokens sent {} of {} ({:.1}% saved), prefix reused {:.1}% of items, {} prefix breaks outside compactions",
        totals.compactions,
        totals.sent_tokens,
        totals.full_tokens,
        saved * 100.0,
        reused * 100.0,
        totals.prefix_breaks
    );
}

#[test]
fn a_200_call_responses_conversation_stays_valid_and_keeps_its_prefix() {
    let request = json!({
        "model": "gpt-5-codex",
        "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are a coding agent. Run the tests before you finish."}]}],
        "tools": [{"type": "function", "name": "exec_command", "description": "Runs a command.", "strict": false, "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "session-1"
    });
    let totals = play(Format::Responses, request, "input", responses_items);
    report("responses", &totals);
    assert_eq!(totals.prefix_breaks, 0, "between compactions every request extends the previous one");
    assert!(totals.compactions >= 2, "the conversation outgrows the window: {} compactions", totals.compactions);
    assert!(totals.sent_tokens * 2 < totals.full_tokens, "{} of {}", totals.sent_tokens, totals.full_tokens);
}

#[test]
fn a_200_call_chat_conversation_stays_valid_and_keeps_its_prefix() {
    let request = json!({
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": "You are a coding agent. Run the tests before you finish."}],
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
        "stream": true,
        "stream_options": {"include_usage": true}
    });
    let totals = play(Format::OpenAi, request, "messages", chat_messages);
    report("chat completions", &totals);
    assert_eq!(totals.prefix_breaks, 0, "between compactions every request extends the previous one");
    assert!(totals.compactions >= 2, "the conversation outgrows the window: {} compactions", totals.compactions);
    assert!(totals.sent_tokens * 2 < totals.full_tokens, "{} of {}", totals.sent_tokens, totals.full_tokens);
}
