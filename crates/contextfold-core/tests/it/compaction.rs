//! Compaction end to end: eviction, planning, assembly and rendering, checked as properties
//! over random valid conversations and over every session of the shared corpus.
//!
//! The properties are the invariants of `DESIGN.md`: what we emit is valid for the
//! provider, a tool call is never split from its result, signed thinking of the current
//! loop stays, eviction never removes a block, and the same input gives the same output.
//! Corpus tests print a notice and return when `../shared/corpus` is absent; they print one
//! summary line per budget, and the eviction measurement prints its shares, so
//! `cargo test --test compaction -- --nocapture` shows the numbers.

// The core's clippy.toml forbids file I/O; reading the corpus is what these tests are for.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use contextfold_core::evict::{evict, is_evicted, EvictConfig, EvictReport, Reason};
use contextfold_core::plan::{plan, NoCut, PinFirst, Plan, PlanConfig};
use contextfold_core::render::{render, render_chunks};
use contextfold_core::summary::assemble;
use contextfold_core::tokens::{
    count_block, count_conversation, count_message, Chars4, Estimate, TokenCounter, Tokenizer,
};
use contextfold_core::tools::{classify, normalize_path, ActionKind, Preset};
use contextfold_core::{format, repair, validate, Block, Conversation, Message, Role};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;

// ---------------------------------------------------------------------------------------
// A generator of valid conversations.
// ---------------------------------------------------------------------------------------

/// Paths the generated tools act on; two spellings of `src/lib.rs` must count as one file.
const FILES: [&str; 5] = ["src/lib.rs", "./src/lib.rs", "src/main.rs", "/repo/app.py", "tests/test_app.py"];

/// Shell commands whose output is one of a few variants, so repeats happen.
const COMMANDS: [&str; 4] = ["cd /repo && python -m pytest -q", "python run.py", "ls -la", "git status"];

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    /// `Read {file_path}`.
    Read,
    /// `Read {file_path, offset, limit}`.
    ReadRange,
    /// `Bash cat file`.
    Cat,
    /// `Bash sed -n 'a,bp' file`.
    SedN,
    /// `Edit {file_path, old_string, new_string}`.
    Edit,
    /// `Bash sed -i … file`.
    SedI,
    /// A shell command.
    Shell,
    /// `Grep {pattern}`.
    Grep,
    /// `Write {file_path, content}` with a large argument.
    Write,
    /// A tool no preset knows.
    Other,
}

const OPS: [Op; 10] =
    [Op::Read, Op::ReadRange, Op::Cat, Op::SedN, Op::Edit, Op::SedI, Op::Shell, Op::Grep, Op::Write, Op::Other];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Payload {
    /// `"content": "…"`.
    Text,
    /// `"content": [text]`.
    Blocks,
    /// `"content": [text, image]`.
    BlocksImage,
    /// `"content": "Error: …", "is_error": true`.
    Error,
    /// No `content` field.
    Absent,
}

#[derive(Debug, Clone)]
struct Call {
    op: Op,
    file: usize,
    lines: usize,
    payload: Payload,
    variant: u8,
}

#[derive(Debug, Clone)]
struct Cycle {
    calls: Vec<Call>,
    thinking: bool,
    text: bool,
    /// The user message with the results also carries a text block (an interruption note).
    user_note: bool,
    /// A mid-conversation system message follows the results.
    system_note: bool,
}

#[derive(Debug, Clone)]
struct Turn {
    image: bool,
    /// A mid-conversation system message follows the user's ask.
    system_note: bool,
    cycles: Vec<Cycle>,
    final_thinking: bool,
}

#[derive(Debug, Clone)]
enum Ending {
    /// The last turn ends with an assistant text.
    AssistantText,
    /// The final assistant message calls tools that are not answered yet.
    Dangling(Vec<Call>, bool),
    /// The conversation ends with the results of one more cycle (a request about to go out).
    UserResults(Cycle),
    /// A new user turn, not answered yet.
    UserText,
}

#[derive(Debug, Clone)]
struct Spec {
    system: bool,
    turns: Vec<Turn>,
    ending: Ending,
}

fn call_strategy() -> impl Strategy<Value = Call> {
    let payload = prop_oneof![
        6 => Just(Payload::Text),
        2 => Just(Payload::Blocks),
        1 => Just(Payload::BlocksImage),
        1 => Just(Payload::Error),
        1 => Just(Payload::Absent),
    ];
    (0..OPS.len(), 0..FILES.len(), 1usize..120, payload, 0u8..3).prop_map(|(op, file, lines, payload, variant)| Call {
        op: OPS[op],
        file,
        lines,
        payload,
        variant,
    })
}

fn cycle_strategy() -> impl Strategy<Value = Cycle> {
    (
        prop::collection::vec(call_strategy(), 1..=4),
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(calls, thinking, text, user_note, system_note)| Cycle {
            calls,
            thinking,
            text,
            user_note,
            system_note,
        })
}

fn turn_strategy() -> impl Strategy<Value = Turn> {
    let cycles = prop_oneof![
        5 => prop::collection::vec(cycle_strategy(), 0..6),
        // A long single turn: many tool cycles and no user text in between.
        1 => prop::collection::vec(cycle_strategy(), 10..40),
    ];
    (prop::bool::weighted(0.2), prop::bool::weighted(0.15), cycles, any::<bool>())
        .prop_map(|(image, system_note, cycles, final_thinking)| Turn { image, system_note, cycles, final_thinking })
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    let ending = prop_oneof![
        3 => Just(Ending::AssistantText),
        2 => (prop::collection::vec(call_strategy(), 1..=4), any::<bool>()).prop_map(|(calls, thinking)| Ending::Dangling(calls, thinking)),
        2 => cycle_strategy().prop_map(Ending::UserResults),
        1 => Just(Ending::UserText),
    ];
    (any::<bool>(), prop::collection::vec(turn_strategy(), 1..5), ending).prop_map(|(system, turns, ending)| Spec {
        system,
        turns,
        ending,
    })
}

/// Turns a [`Spec`] into a conversation, keeping per-file versions so that re-reads of an
/// unchanged file repeat their output and reads after an edit differ.
struct Builder {
    messages: Vec<Value>,
    next_id: usize,
    versions: HashMap<String, usize>,
}

impl Builder {
    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("toolu_{:04}", self.next_id)
    }

    fn file_text(&self, file: &str, from: usize, lines: usize) -> String {
        let version = self.versions.get(&normalize_path(file)).copied().unwrap_or(0);
        (from..from + lines)
            .map(|line| format!("{file} v{version} line {line}: let value = compute({line});\n"))
            .collect()
    }

    fn input(call: &Call) -> (&'static str, Value) {
        let file = FILES[call.file];
        match call.op {
            Op::Read => ("Read", json!({"file_path": file})),
            Op::ReadRange => {
                ("Read", json!({"file_path": file, "offset": 10 * usize::from(call.variant), "limit": 40}))
            }
            Op::Cat => ("Bash", json!({"command": format!("cat {file}")})),
            Op::SedN => {
                ("Bash", json!({"command": format!("sed -n '1,{}p' {file}", 20 * (usize::from(call.variant) + 1))}))
            }
            Op::Edit => ("Edit", json!({"file_path": file, "old_string": "compute", "new_string": "evaluate"})),
            Op::SedI => ("Bash", json!({"command": format!("sed -i 's/compute/evaluate/' {file}")})),
            Op::Shell => ("Bash", json!({"command": COMMANDS[call.file % COMMANDS.len()]})),
            Op::Grep => ("Grep", json!({"pattern": format!("fn item_{}", call.variant), "path": "src"})),
            Op::Write => ("Write", json!({"file_path": file, "content": "fn generated() {}\n".repeat(call.lines)})),
            Op::Other => ("TodoWrite", json!({"todos": [{"content": "check the tests", "status": "pending"}]})),
        }
    }

    /// The output of `call`, applying its effect on file versions.
    fn output(&mut self, call: &Call) -> String {
        let file = FILES[call.file];
        match call.op {
            Op::Read | Op::Cat => self.file_text(file, 1, call.lines),
            Op::ReadRange => self.file_text(file, 10 * usize::from(call.variant), 40),
            Op::SedN => self.file_text(file, 1, 20 * (usize::from(call.variant) + 1)),
            Op::Edit | Op::SedI | Op::Write => {
                *self.versions.entry(normalize_path(file)).or_default() += 1;
                format!("The file {file} has been updated.")
            }
            // The output depends on the command and the variant only, so repeats happen.
            Op::Shell => (0..5 + 20 * usize::from(call.variant))
                .map(|line| format!("{} output {} line {line}\n", COMMANDS[call.file % COMMANDS.len()], call.variant))
                .collect(),
            Op::Grep => (0..call.lines)
                .map(|line| format!("src/m{line}.rs:{}: fn item_{}()\n", line * 7, call.variant))
                .collect(),
            Op::Other => "Todos have been modified successfully.".to_string(),
        }
    }

    fn assistant(&mut self, thinking: bool, text: Option<&str>, calls: &[Call]) -> Vec<String> {
        let mut content = Vec::new();
        if thinking {
            content.push(json!({"type": "thinking", "thinking": format!("Let me think about step {}.", self.next_id), "signature": "EqQBCkgIARABGAIiQ…sig"}));
            if self.next_id % 4 == 3 {
                content.push(
                    json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}),
                );
            }
        }
        if let Some(text) = text {
            content.push(json!({"type": "text", "text": text}));
        }
        let mut ids = Vec::new();
        for call in calls {
            let id = self.id();
            let (name, input) = Builder::input(call);
            content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
            ids.push(id);
        }
        if content.is_empty() {
            content.push(json!({"type": "text", "text": "Continuing."}));
        }
        self.messages.push(json!({"role": "assistant", "content": content}));
        ids
    }

    fn results(&mut self, ids: &[String], calls: &[Call], note: bool) {
        let mut content = Vec::new();
        for (id, call) in ids.iter().zip(calls) {
            let text = self.output(call);
            let mut result = json!({"type": "tool_result", "tool_use_id": id});
            match call.payload {
                Payload::Text => result["content"] = json!(text),
                Payload::Blocks => result["content"] = json!([{"type": "text", "text": text}]),
                Payload::BlocksImage => {
                    result["content"] = json!([
                        {"type": "text", "text": text},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
                    ])
                }
                Payload::Error => {
                    result["content"] = json!(format!("Error: exit code 1\n{text}"));
                    result["is_error"] = json!(true);
                }
                Payload::Absent => {}
            }
            content.push(result);
        }
        if note {
            content.push(json!({"type": "text", "text": "[Request interrupted by user for tool use]"}));
        }
        self.messages.push(json!({"role": "user", "content": content}));
    }

    fn cycle(&mut self, cycle: &Cycle) {
        let text = cycle.text.then_some("I'll look at the code next.");
        let ids = self.assistant(cycle.thinking, text, &cycle.calls);
        self.results(&ids, &cycle.calls, cycle.user_note);
        if cycle.system_note {
            self.system_note();
        }
    }

    /// A mid-conversation system message, numbered so that each one can be found again.
    fn system_note(&mut self) {
        self.next_id += 1;
        let text = format!("System note {}: run the tests before you finish.", self.next_id);
        self.messages.push(json!({"role": "system", "content": text}));
    }
}

fn build(spec: &Spec) -> Conversation {
    let mut builder = Builder { messages: Vec::new(), next_id: 0, versions: HashMap::new() };
    for (index, turn) in spec.turns.iter().enumerate() {
        let ask = format!("Request {index}: please fix the failing test in src/lib.rs and explain the cause.");
        if turn.image {
            builder.messages.push(json!({"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                {"type": "text", "text": ask}
            ]}));
        } else {
            builder.messages.push(json!({"role": "user", "content": ask}));
        }
        if turn.system_note {
            builder.system_note();
        }
        for cycle in &turn.cycles {
            builder.cycle(cycle);
        }
        let last = index + 1 == spec.turns.len();
        match (&spec.ending, last) {
            (Ending::Dangling(calls, thinking), true) => {
                builder.assistant(*thinking, Some("Now I'll run these."), calls);
            }
            (Ending::UserResults(cycle), true) => builder.cycle(cycle),
            _ => {
                builder.assistant(turn.final_thinking, Some(&format!("Done with request {index}.")), &[]);
            }
        }
    }
    if matches!(spec.ending, Ending::UserText) {
        builder.messages.push(json!({"role": "user", "content": "Thanks. Now update the docs."}));
    }
    let mut request = json!({"model": "claude-sonnet-4-5", "max_tokens": 8192, "messages": builder.messages});
    if spec.system {
        request["system"] = json!("You are a careful coding agent.");
        request["tools"] = json!([{"name": "Read", "input_schema": {"type": "object"}}]);
    }
    Conversation::from_value(request).expect("the generator writes well-formed requests")
}

pub(crate) fn conversation_strategy() -> impl Strategy<Value = Conversation> {
    spec_strategy().prop_map(|spec| build(&spec))
}

fn evict_config_strategy() -> impl Strategy<Value = EvictConfig> {
    let preset =
        prop_oneof![Just(Preset::Auto), Just(Preset::ClaudeCode), Just(Preset::SweAgent), Just(Preset::Generic)];
    (
        preset,
        prop::option::of(0usize..8),
        prop::option::of(0u64..6_000),
        prop::option::of(0u64..20_000),
        prop::option::of(0u64..60_000),
        0u64..200,
        prop::collection::vec(0..FILES.len(), 0..3),
        prop::collection::vec(prop::sample::select(vec!["Read", "Bash", "Grep", "Edit"]), 0..2),
        prop::option::of(0u64..600),
    )
        .prop_map(
            |(
                preset,
                keep_recent,
                keep_recent_tokens,
                clear_at_least,
                target_tokens,
                min_payload_tokens,
                pinned,
                exclude,
                clear_inputs_over,
            )| {
                EvictConfig {
                    preset,
                    keep_recent,
                    keep_recent_tokens,
                    clear_at_least,
                    target_tokens,
                    pinned_paths: pinned.into_iter().map(|file| FILES[file].to_string()).collect(),
                    exclude_tools: exclude.into_iter().map(str::to_string).collect(),
                    min_payload_tokens,
                    clear_inputs_over,
                    recall_tool: None,
                }
            },
        )
}

fn plan_config_strategy() -> impl Strategy<Value = PlanConfig> {
    (
        prop::option::of(0usize..4),
        prop::option::of(prop_oneof![3 => 0u64..3_000, 1 => 0u64..20_000]),
        prop::option::of(prop_oneof![3 => 0u64..6_000, 1 => 0u64..50_000]),
        any::<bool>(),
        0.0f64..0.9,
    )
        .prop_map(|(keep_turns, min_tail_tokens, max_tail_tokens, pin, min_progress)| PlanConfig {
            keep_turns,
            min_tail_tokens,
            max_tail_tokens,
            pin_first: if pin { PinFirst::Pinned } else { PinFirst::Folded },
            min_progress,
        })
}

/// The vocabulary-free counters (BPE is too slow for property tests in debug builds).
fn tokenizer_strategy() -> impl Strategy<Value = Tokenizer> {
    prop_oneof![Just(Tokenizer::Chars4), Just(Tokenizer::Estimate)]
}

// ---------------------------------------------------------------------------------------
// Checks shared by the property and the corpus tests.
// ---------------------------------------------------------------------------------------

fn block_counts(conversation: &Conversation) -> Vec<usize> {
    conversation.messages.iter().map(|message| message.content.len()).collect()
}

fn thinking_blocks(conversation: &Conversation) -> Vec<(usize, usize, Block)> {
    let mut found = Vec::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        for (position, block) in message.content.iter().enumerate() {
            if matches!(block, Block::Thinking(_) | Block::RedactedThinking(_)) {
                found.push((index, position, block.clone()));
            }
        }
    }
    found
}

fn is_turn_start(message: &Message) -> bool {
    message.role == Role::User
        && !message.content.is_empty()
        && !message.content.iter().any(|block| matches!(block, Block::ToolResult(_)))
}

/// Every tool_result of `tail` answers a tool_use earlier in `tail`.
fn check_tail_keeps_pairs(tail: &[Message]) -> Result<(), String> {
    let mut calls = HashSet::new();
    for (index, message) in tail.iter().enumerate() {
        for block in &message.content {
            match block {
                Block::ToolUse(tool_use) => {
                    calls.insert(tool_use.id.as_str());
                }
                Block::ToolResult(result) if !calls.contains(result.tool_use_id.as_str()) => {
                    return Err(format!(
                        "tail message {index} answers `{}`, a call left in the head",
                        result.tool_use_id
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Index of the first assistant message with thinking in the current tool loop (the loop
/// started by the last user turn), computed here independently of `boundary`.
fn first_thinking_of_current_loop(messages: &[Message]) -> Option<usize> {
    let loop_start = messages.iter().rposition(is_turn_start).unwrap_or(0);
    (loop_start..messages.len()).find(|&index| {
        messages[index].role == Role::Assistant
            && messages[index]
                .content
                .iter()
                .any(|block| matches!(block, Block::Thinking(_) | Block::RedactedThinking(_)))
    })
}

/// Whether `message` is an assistant message whose first block is signed thinking (a step of
/// a loop with interleaved thinking, which a tail may start with).
fn opens_with_thinking(message: &Message) -> bool {
    message.role == Role::Assistant
        && matches!(message.content.first(), Some(Block::Thinking(_) | Block::RedactedThinking(_)))
}

/// The tool results `evict` may consider: outside the final message, not already a pointer,
/// not of an excluded tool, and at least `min_payload_tokens` big; oldest first.
fn candidates(
    conversation: &Conversation,
    config: &EvictConfig,
    counter: &dyn TokenCounter,
) -> Vec<(usize, usize, ActionKind, Option<String>)> {
    let calls: HashMap<&str, (&str, &Value)> = conversation
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolUse(tool_use) => Some((tool_use.id.as_str(), (tool_use.name.as_str(), &tool_use.input))),
            _ => None,
        })
        .collect();
    let last = conversation.messages.len().saturating_sub(1);
    let mut found = Vec::new();
    for (index, message) in conversation.messages.iter().enumerate().take(last) {
        for (position, block) in message.content.iter().enumerate() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            let Some(&(name, input)) = calls.get(result.tool_use_id.as_str()) else {
                continue;
            };
            if is_evicted(result)
                || config.exclude_tools.iter().any(|tool| tool == name)
                || count_block(counter, block) < config.min_payload_tokens
            {
                continue;
            }
            let action = classify(config.preset, name, input);
            found.push((index, position, action.kind, action.target));
        }
    }
    found
}

/// Every invariant of one eviction of a valid conversation.
fn check_evict(
    original: &Conversation,
    config: &EvictConfig,
    counter: &dyn TokenCounter,
) -> Result<(Conversation, EvictReport), String> {
    let mut evicted = original.clone();
    let report = evict(&mut evicted, config, counter);

    let problems = validate(&evicted);
    if !problems.is_empty() {
        return Err(format!("evicted conversation is invalid: {problems:?}"));
    }
    if block_counts(&evicted) != block_counts(original) {
        return Err("eviction changed the number of blocks of a message".into());
    }
    if thinking_blocks(&evicted) != thinking_blocks(original) {
        return Err("eviction edited a thinking block".into());
    }
    // The final assistant message and everything after it are what the model reads next.
    if let Some(last_assistant) = original.messages.iter().rposition(|message| message.role == Role::Assistant) {
        if evicted.messages[last_assistant..] != original.messages[last_assistant..] {
            return Err(format!("eviction touched the final assistant message {last_assistant} or what follows it"));
        }
    }
    if (evicted.system.as_ref(), evicted.tools.as_ref(), &evicted.extra)
        != (original.system.as_ref(), original.tools.as_ref(), &original.extra)
    {
        return Err("eviction touched the system prompt, tools or request fields".into());
    }
    let tokens_after = count_conversation(counter, &evicted);
    if report.tokens_before != count_conversation(counter, original) || report.tokens_after != tokens_after {
        return Err(format!(
            "report says {} → {}, the conversations count {} → {tokens_after}",
            report.tokens_before,
            report.tokens_after,
            count_conversation(counter, original)
        ));
    }
    if report.offloaded != report.items.len() || report.by_reason.values().sum::<usize>() != report.items.len() {
        return Err("the report's counts disagree with its items".into());
    }
    let freed: u64 = report.items.iter().map(|item| item.freed).sum();
    if report.tokens_before - freed != report.tokens_after {
        return Err("freed tokens do not add up".into());
    }
    if let Some(threshold) = config.clear_at_least {
        if report.offloaded > 0 && freed < threshold {
            return Err(format!("freed {freed} < clear_at_least {threshold}"));
        }
    }
    if report.skipped.is_some() && (report.offloaded > 0 || evicted != *original) {
        return Err("a skipped eviction changed something".into());
    }
    if let (Some(target), Some(last)) = (config.target_tokens, report.items.last()) {
        // It stops as soon as the target is met: without its last offload it was still over.
        if report.tokens_after + last.freed <= target {
            return Err(format!(
                "evicted past the target {target}: {} + {} freed by the last",
                report.tokens_after, last.freed
            ));
        }
    }
    let candidates = candidates(original, config, counter);
    let rank: HashMap<(usize, usize), usize> =
        candidates.iter().rev().enumerate().map(|(rank, (message, block, _, _))| ((*message, *block), rank)).collect();
    let mut seen = HashSet::new();
    for item in &report.items {
        if !seen.insert((item.message, item.block)) {
            return Err(format!("block {}:{} offloaded twice", item.message, item.block));
        }
        let block = &original.messages[item.message].content[item.block];
        let replaced = &evicted.messages[item.message].content[item.block];
        if item.tokens != count_block(counter, block)
            || item.freed == 0
            || item.tokens - item.freed != count_block(counter, replaced)
        {
            return Err(format!("offload {}:{} has wrong token counts", item.message, item.block));
        }
        match (item.reason, block, replaced) {
            (Reason::Input, Block::ToolUse(before), Block::ToolUse(after)) => {
                if before.id != after.id || before.name != after.name {
                    return Err("clearing an input changed the call's id or name".into());
                }
            }
            (Reason::Input, _, _) => return Err("an input offload is not a tool_use".into()),
            (_, Block::ToolResult(before), Block::ToolResult(after)) => {
                if before.tool_use_id != after.tool_use_id || before.is_error != after.is_error {
                    return Err("a pointer changed the result's id or error flag".into());
                }
                if !is_evicted(after) || !after.text().contains(&item.reference) {
                    return Err(format!(
                        "offload {}:{} is not a pointer naming its ref: {}",
                        item.message,
                        item.block,
                        after.text()
                    ));
                }
                let Some(&item_rank) = rank.get(&(item.message, item.block)) else {
                    return Err(format!(
                        "offload {}:{} is no candidate (too small, excluded or final)",
                        item.message, item.block
                    ));
                };
                if item.reason == Reason::Age && config.keep_recent.is_some_and(|keep| item_rank < keep) {
                    return Err(format!(
                        "age evicted {}:{}, one of the {:?} most recent",
                        item.message, item.block, config.keep_recent
                    ));
                }
                if matches!(item.reason, Reason::Superseded | Reason::Stale) && item.kind != ActionKind::FileRead {
                    return Err(format!("{} offload of a {}", item.reason.name(), item.kind.name()));
                }
            }
            _ => return Err(format!("offload {}:{} of a {} block", item.message, item.block, block.kind())),
        }
    }
    // The latest read of a pinned path is never evicted.
    for path in &config.pinned_paths {
        let path = normalize_path(path);
        let latest = candidates
            .iter()
            .rev()
            .find(|(_, _, kind, target)| *kind == ActionKind::FileRead && target.as_deref() == Some(path.as_str()));
        if let Some((message, block, _, _)) = latest {
            if seen.contains(&(*message, *block)) {
                return Err(format!("evicted the latest read of pinned {path} at {message}:{block}"));
            }
        }
    }
    Ok((evicted, report))
}

/// Every invariant of a plan and of the conversation assembled from it.
fn check_plan(
    conversation: &Conversation,
    config: &PlanConfig,
    plan: &Plan,
    counter: &dyn TokenCounter,
) -> Result<Conversation, String> {
    let messages = &conversation.messages;
    if plan.cut.index == 0 || plan.cut.index >= messages.len() {
        return Err(format!("cut {} outside 1..{}", plan.cut.index, messages.len()));
    }
    let tail = plan.tail(conversation);
    check_tail_keeps_pairs(tail)?;
    if let Some(first) = first_thinking_of_current_loop(messages) {
        if plan.cut.index > first && !opens_with_thinking(&messages[plan.cut.index]) {
            return Err(format!(
                "cut {} drops the current loop's first thinking message {first}, and the tail's first step has none of its own",
                plan.cut.index
            ));
        }
    }
    let counts: Vec<u64> = messages.iter().map(|message| count_message(counter, message)).collect();
    let tail_tokens: u64 = counts[plan.cut.index..].iter().sum();
    let first_pinned = !plan.pinned.is_empty() && plan.previous_summary.is_none();
    let pinned_message = if first_pinned { counts[0] } else { 0 };
    // The head's system messages are kept verbatim, not folded.
    let kept: u64 =
        (1..plan.cut.index).filter(|&index| messages[index].role == Role::System).map(|index| counts[index]).sum();
    if plan.tail_tokens != tail_tokens
        || plan.total_tokens != counts.iter().sum::<u64>()
        || plan.head_tokens + plan.tail_tokens + pinned_message + kept != plan.total_tokens
    {
        return Err(format!(
            "token accounting: head {} + tail {} (counted {tail_tokens}) + pinned message {pinned_message} + kept system {kept} != total {}",
            plan.head_tokens, plan.tail_tokens, plan.total_tokens
        ));
    }
    let over_budget = plan.notes.iter().any(|note| note.contains("over the budget"));
    let overridden = plan.notes.iter().any(|note| note.contains("overrides"));
    if let Some(max) = config.max_tail_tokens {
        if !over_budget && plan.tail_tokens > max {
            return Err(format!("tail of {} tokens over the budget of {max}, with no note", plan.tail_tokens));
        }
    }
    if !overridden {
        if let Some(turns) = config.keep_turns.filter(|&turns| turns > 0) {
            let kept = tail.iter().filter(|message| is_turn_start(message)).count();
            if kept < turns {
                return Err(format!("the tail keeps {kept} turns, {turns} asked for"));
            }
        }
        if let Some(min) = config.min_tail_tokens {
            if plan.tail_tokens < min {
                return Err(format!("the tail holds {} tokens, at least {min} asked for", plan.tail_tokens));
            }
        }
    }
    if (plan.head_tokens as f64) < config.min_progress * plan.total_tokens as f64 {
        return Err("the head is smaller than min_progress".into());
    }
    if tail.first().is_some_and(|first| first.role == Role::System) {
        return Err(format!("the tail starts with a system message (cut {:?})", plan.cut));
    }
    let assembled = plan.assemble(conversation, Some("s"));
    let problems = validate(&assembled);
    if !problems.is_empty() {
        return Err(format!("assembled conversation is invalid (cut {:?}): {problems:?}", plan.cut));
    }
    check_system_messages_kept(conversation, &assembled, plan.cut.index)?;
    if assembled.system != conversation.system
        || assembled.tools != conversation.tools
        || assembled.extra != conversation.extra
    {
        return Err("assemble lost the system prompt, tools or request fields".into());
    }
    Ok(assembled)
}

/// The texts of the system messages of `messages`, in order.
fn system_texts(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .filter(|message| message.role == Role::System)
        .flat_map(|message| message.content.iter().filter_map(Block::as_text))
        .collect()
}

/// Every system message of `input` is in `output` verbatim and in order (an identical repeat
/// once, the newest), never first; those of the tail are where they were (counted from the
/// end), byte for byte.
fn check_system_messages_kept(input: &Conversation, output: &Conversation, cut: usize) -> Result<(), String> {
    if output.messages.first().is_some_and(|first| first.role == Role::System) {
        return Err("the output starts with a system message".into());
    }
    // An identical repeat may be kept once, the newest.
    let newest_of_each = |texts: Vec<&str>| -> Vec<String> {
        let mut kept: Vec<String> = Vec::new();
        for text in texts.into_iter().rev() {
            if !kept.iter().any(|seen| seen == text) {
                kept.push(text.to_string());
            }
        }
        kept.reverse();
        kept
    };
    let before = newest_of_each(system_texts(&input.messages));
    let after = newest_of_each(system_texts(&output.messages));
    if before != after {
        return Err(format!("system messages changed: {before:?} became {after:?}"));
    }
    // Counted from the end, the output is the tail from its second message on (its first
    // merges with the summary message); the head's system messages may join the tail's own
    // second message, ahead of its blocks.
    let tail = &input.messages[cut..];
    let end = &output.messages[output.messages.len() - tail.len()..];
    for (offset, (kept, original)) in end.iter().zip(tail).enumerate().skip(1) {
        let same = kept == original
            || (offset == 1 && original.role == Role::System && kept.content.ends_with(&original.content));
        if !same {
            return Err(format!("the tail's message {} changed", cut + offset));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Properties over random conversations.
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn generated_conversations_are_valid(conversation in conversation_strategy()) {
        let problems = validate(&conversation);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        // The generator covers what it claims to, now and then.
        prop_assert_eq!(conversation.messages[0].role, Role::User);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Replay asks for the last cut of every prefix in one pass; it must agree with
    /// `boundaries` of each prefix.
    #[test]
    fn last_cuts_match_the_boundaries_of_every_prefix(conversation in conversation_strategy()) {
        let messages = &conversation.messages;
        let cuts = contextfold_core::boundary::last_cuts(messages);
        prop_assert_eq!(cuts.len(), messages.len() + 1);
        for (end, cut) in cuts.iter().enumerate() {
            let expected = contextfold_core::boundary::boundaries(&messages[..end]).last().map(|cut| cut.index);
            prop_assert_eq!(*cut, expected, "prefix of {} messages", end);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn evict_keeps_every_invariant(
        conversation in conversation_strategy(),
        config in evict_config_strategy(),
        tokenizer in tokenizer_strategy(),
    ) {
        let counter = tokenizer.counter();
        let (once, report) = match check_evict(&conversation, &config, counter) {
            Ok(done) => done,
            Err(message) => return Err(TestCaseError::fail(message)),
        };
        // Deterministic: the same input and config give the same output and report.
        let mut again = conversation.clone();
        let report_again = evict(&mut again, &config, counter);
        prop_assert_eq!(&again, &once);
        prop_assert_eq!(&report_again, &report);
        // Evicting the evicted conversation never offloads a pointer again.
        let (twice, second) = match check_evict(&once, &config, counter) {
            Ok(done) => done,
            Err(message) => return Err(TestCaseError::fail(format!("second pass: {message}"))),
        };
        for item in &second.items {
            match &once.messages[item.message].content[item.block] {
                Block::ToolResult(result) => prop_assert!(!is_evicted(result), "re-offloaded pointer at {}:{}", item.message, item.block),
                Block::ToolUse(tool_use) => prop_assert!(
                    !tool_use.input.to_string().contains("[contextfold: offloaded"),
                    "re-cleared input at {}:{}", item.message, item.block
                ),
                other => prop_assert!(false, "offload of a {} block", other.kind()),
            }
        }
        if config.target_tokens.is_none() && config.clear_at_least.is_none() {
            // With no stopping rule the first pass took every candidate it had reason to,
            // so nothing evicted by relevance remains to be found.
            prop_assert!(
                second.items.iter().all(|item| item.reason == Reason::Age || item.reason == Reason::Input),
                "second pass found relevance offloads the first missed: {:?}",
                second.items.iter().map(|item| (item.message, item.block, item.reason)).collect::<Vec<_>>()
            );
        }
        prop_assert_eq!(block_counts(&twice), block_counts(&conversation));
    }

    #[test]
    fn plan_and_assemble_keep_every_invariant(
        conversation in conversation_strategy(),
        config in plan_config_strategy(),
        tokenizer in tokenizer_strategy(),
    ) {
        let counter = tokenizer.counter();
        match plan(&conversation, &config, counter) {
            Ok(planned) => {
                if let Err(message) = check_plan(&conversation, &config, &planned, counter) {
                    return Err(TestCaseError::fail(message));
                }
                // Planning the evicted conversation is just as safe.
                let mut evicted = conversation.clone();
                evict(&mut evicted, &EvictConfig { keep_recent: Some(2), ..EvictConfig::default() }, counter);
                if let Ok(replanned) = plan(&evicted, &config, counter) {
                    if let Err(message) = check_plan(&evicted, &config, &replanned, counter) {
                        return Err(TestCaseError::fail(format!("after eviction: {message}")));
                    }
                }
            }
            Err(NoCut::Fits { tokens, max_tail_tokens }) => prop_assert!(tokens <= max_tail_tokens),
            Err(NoCut::TooLittle { head_tokens, total_tokens, min_progress }) => {
                prop_assert!((head_tokens as f64) < min_progress * total_tokens as f64 || head_tokens == 0);
            }
            Err(_) => {}
        }
    }

    #[test]
    fn a_summary_of_a_summary_stays_valid(
        conversation in conversation_strategy(),
        config in plan_config_strategy(),
        more in conversation_strategy(),
    ) {
        // Compact, let the conversation grow, compact again: the old summary is folded in.
        let Ok(first) = plan(&conversation, &config, &Chars4) else { return Ok(()) };
        let compacted = first.assemble(&conversation, Some("first summary"));
        prop_assume!(compacted.messages.last().is_some_and(|last| last.role == Role::Assistant && !last.has_tool_use()));
        let mut grown = compacted.clone();
        grown.messages.extend(more.messages.iter().cloned().map(|mut message| {
            // Keep ids unique across the two halves.
            for block in &mut message.content {
                match block {
                    Block::ToolUse(tool_use) => tool_use.id.push_str("_b"),
                    Block::ToolResult(result) => result.tool_use_id.push_str("_b"),
                    _ => {}
                }
            }
            message
        }));
        prop_assert!(validate(&grown).is_empty(), "{:?}", validate(&grown));
        if let Ok(second) = plan(&grown, &config, &Chars4) {
            prop_assert_eq!(second.previous_summary.as_deref(), Some("first summary"));
            if let Err(message) = check_plan(&grown, &config, &second, &Chars4) {
                return Err(TestCaseError::fail(message));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn render_fits_its_budget(
        conversation in conversation_strategy(),
        budgets in prop::collection::vec(prop_oneof![0u64..200, 0u64..50_000], 3),
        chunk_budget in 50u64..8_000,
        split in 0.0f64..1.0,
    ) {
        let messages = &conversation.messages;
        let head = &messages[..((messages.len() as f64 * split) as usize).max(1)];
        for counter in [&Chars4 as &dyn TokenCounter, &Estimate] {
            for &budget in &budgets {
                let text = render(head, budget, counter);
                prop_assert!(counter.count_text(&text) <= budget, "{}: {} > {budget}", counter.name(), counter.count_text(&text));
            }
            let chunks = render_chunks(head, chunk_budget, counter);
            prop_assert!(!chunks.is_empty());
            for chunk in &chunks {
                prop_assert!(counter.count_text(chunk) <= chunk_budget, "{}: chunk of {} > {chunk_budget}", counter.name(), counter.count_text(chunk));
            }
        }
    }
}

/// The generator and the configs reach the cases the properties are about: without this, a
/// generator that degenerated (say, never a plan, never a stale read) would pass vacuously.
#[test]
fn the_generator_reaches_the_interesting_cases() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut note = |what: &'static str, yes: bool| *seen.entry(what).or_default() += usize::from(yes);
    for _ in 0..200 {
        let conversation = conversation_strategy().new_tree(&mut runner).expect("a tree").current();
        let plan_config = plan_config_strategy().new_tree(&mut runner).expect("a tree").current();
        let messages = &conversation.messages;
        let last = messages.last().expect("messages");
        note("ends with a dangling call", last.role == Role::Assistant && last.has_tool_use());
        note("ends with results", last.role == Role::User && !is_turn_start(last));
        note("thinking in the current loop", first_thinking_of_current_loop(messages).is_some());
        note("a parallel batch", messages.iter().any(|message| message.tool_use_ids().count() > 1));
        note("a system message", messages.iter().any(|message| message.role == Role::System));
        note("a single turn of 40+ messages", {
            let starts: Vec<usize> =
                (0..messages.len()).filter(|&index| is_turn_start(&messages[index])).chain([messages.len()]).collect();
            starts.windows(2).any(|pair| pair[1] - pair[0] > 40)
        });
        let mut evicted = conversation.clone();
        let report = evict(
            &mut evicted,
            &EvictConfig {
                keep_recent: Some(1),
                min_payload_tokens: 0,
                clear_inputs_over: Some(50),
                ..EvictConfig::default()
            },
            &Estimate,
        );
        for reason in [Reason::Superseded, Reason::Stale, Reason::Duplicate, Reason::Age, Reason::Input] {
            note(reason.name(), report.items.iter().any(|item| item.reason == reason));
        }
        match plan(&conversation, &plan_config, &Estimate) {
            Ok(planned) => {
                note("plan", true);
                note("plan cut at a tool cycle", planned.cut.kind.name() == "tool_cycle");
                note("plan cut at a turn start", planned.cut.kind.name() == "turn_start");
                note("plan keeps a head system message", planned.kept_system(&conversation).next().is_some());
                note(
                    "plan keeps a tail system message",
                    planned.tail(&conversation).iter().any(|message| message.role == Role::System),
                );
                note("plan over budget", planned.notes.iter().any(|note| note.contains("over the budget")));
                note(
                    "plan cut at the loop's thinking",
                    first_thinking_of_current_loop(messages).is_some_and(|first| planned.cut.index >= first)
                        && opens_with_thinking(&messages[planned.cut.index]),
                );
            }
            Err(_) => note("no plan", true),
        }
    }
    println!("generator coverage over 200 samples: {seen:?}");
    for (what, count) in &seen {
        assert!(*count >= 3, "the generator reached `{what}` only {count} times in 200: {seen:?}");
    }
}

/// The checks themselves reject what they exist to reject.
#[test]
fn the_checks_catch_broken_plans_and_evictions() {
    let call = |op: Op, file: usize| Call { op, file, lines: 60, payload: Payload::Text, variant: 0 };
    let cycle =
        |thinking: bool, calls: Vec<Call>| Cycle { calls, thinking, text: false, user_note: false, system_note: false };
    let conversation = build(&Spec {
        system: false,
        turns: vec![Turn {
            image: false,
            system_note: false,
            cycles: vec![
                cycle(false, vec![call(Op::Read, 0), call(Op::Cat, 2)]),
                cycle(true, vec![call(Op::Read, 1)]),
                cycle(false, vec![call(Op::Shell, 0)]),
            ],
            final_thinking: false,
        }],
        ending: Ending::AssistantText,
    });
    let config = PlanConfig { max_tail_tokens: None, keep_turns: None, min_progress: 0.0, ..PlanConfig::default() };
    let good = plan(&conversation, &config, &Chars4).expect("a plan");
    check_plan(&conversation, &config, &good, &Chars4).expect("the real plan passes");
    // A cut between a call and its result, and a cut past the loop's thinking (message 3).
    for (index, expected) in [(2, "a call left in the head"), (5, "first thinking message 3")] {
        let mut broken = good.clone();
        broken.cut.index = index;
        let err = check_plan(&conversation, &config, &broken, &Chars4).expect_err("a broken cut is caught");
        assert!(err.contains(expected), "cut {index}: {err}");
    }
    // An "eviction" that removed a block, or that touched the final message.
    let mut removed = conversation.clone();
    removed.messages[2].content.pop();
    assert!(validate(&removed).iter().any(|problem| problem.rule.id() == "dangling-use"));
    assert_ne!(block_counts(&removed), block_counts(&conversation));
    assert!(check_tail_keeps_pairs(&conversation.messages[2..]).is_err());
    assert!(check_tail_keeps_pairs(&conversation.messages[3..]).is_ok());
    // A head system message folded into the summary (plain `assemble`) is caught.
    let mut with_system = conversation.clone();
    with_system.messages.insert(1, Message::text(Role::System, "plan mode"));
    let planned = plan(&with_system, &config, &Chars4).expect("a plan");
    assert!(planned.cut.index > 1);
    let folded = assemble(&with_system, Some("s"), &planned.pinned, planned.tail(&with_system));
    let err = check_system_messages_kept(&with_system, &folded, planned.cut.index).expect_err("caught");
    assert!(err.contains("system messages changed"), "{err}");
    check_system_messages_kept(&with_system, &planned.assemble(&with_system, Some("s")), planned.cut.index)
        .expect("the plan keeps it");
}

/// A fixed scenario the generator makes often: the current loop has thinking from its second
/// cycle on; a tight budget must still start the tail with a step that carries its own.
#[test]
fn the_current_loops_thinking_survives_a_tight_budget() {
    let call = |file: usize| Call { op: Op::Read, file, lines: 100, payload: Payload::Text, variant: 0 };
    let cycle = |thinking: bool, file: usize| Cycle {
        calls: vec![call(file), call(file + 1)],
        thinking,
        text: false,
        user_note: false,
        system_note: false,
    };
    let spec = Spec {
        system: false,
        turns: vec![
            Turn { image: false, system_note: false, cycles: vec![cycle(false, 0); 3], final_thinking: true },
            Turn {
                image: false,
                system_note: false,
                cycles: vec![cycle(false, 2), cycle(true, 0), cycle(false, 1), cycle(true, 3), cycle(false, 2)],
                final_thinking: false,
            },
        ],
        ending: Ending::UserResults(cycle(true, 0)),
    };
    let conversation = build(&spec);
    assert!(validate(&conversation).is_empty());
    let messages = &conversation.messages;
    let first = first_thinking_of_current_loop(messages).expect("the loop has thinking");
    let newest_own = (first..messages.len()).rev().find(|&index| opens_with_thinking(&messages[index]));
    let config = PlanConfig { max_tail_tokens: Some(1_000), ..PlanConfig::default() };
    let plan = plan(&conversation, &config, &Estimate).expect("a plan");
    assert!(newest_own > Some(first), "the loop's later steps think too");
    assert_eq!(
        Some(plan.cut.index),
        newest_own,
        "the smallest safe tail starts at the loop's newest step with thinking of its own"
    );
    assert!(plan.notes.iter().any(|note| note.contains("over the budget")), "{:?}", plan.notes);
    check_plan(&conversation, &config, &plan, &Estimate).unwrap();
}

// ---------------------------------------------------------------------------------------
// The shared corpus.
// ---------------------------------------------------------------------------------------

/// Every corpus session as (file name, conversation), or `None` with a notice.
fn corpus() -> Option<Vec<(String, Conversation)>> {
    let dir = crate::common::corpus_dir()?;
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("the corpus directory is readable")
        .map(|entry| entry.expect("a readable directory entry").path())
        .collect();
    paths.sort();
    let mut sessions = Vec::new();
    for path in paths {
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default().to_string();
        if name == "manifest.json" {
            continue;
        }
        let text = if name.ends_with(".json.gz") {
            let mut text = String::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("a readable corpus file"))
                .read_to_string(&mut text)
                .expect("a gzip-compressed UTF-8 session");
            text
        } else if name.ends_with(".json") {
            std::fs::read_to_string(&path).expect("a readable UTF-8 session")
        } else {
            continue;
        };
        let parsed = format::parse(&text, None).unwrap_or_else(|err| panic!("{name}: {err}"));
        sessions.push((name, parsed.conversation));
    }
    assert!(!sessions.is_empty(), "the corpus directory holds no sessions");
    Some(sessions)
}

/// The agent family of a corpus file: its name up to the first `-` or `_`.
fn family(name: &str) -> &str {
    name.split(['-', '_']).next().unwrap_or(name)
}

fn problem_keys(conversation: &Conversation) -> Vec<(String, usize, Option<usize>)> {
    validate(conversation)
        .into_iter()
        .map(|problem| (problem.rule.id().to_string(), problem.message, problem.block))
        .collect()
}

#[test]
fn corpus_evict_and_plan_stay_valid_at_every_budget() {
    let Some(sessions) = corpus() else { return };
    let counter = &Estimate;
    // Sessions the source left invalid are repaired first, and eviction of the unrepaired
    // form must not add a problem.
    let mut repaired = 0;
    let sessions: Vec<(String, Conversation)> = sessions
        .into_iter()
        .map(|(name, conversation)| {
            let before = problem_keys(&conversation);
            if before.is_empty() {
                return (name, conversation);
            }
            let mut evicted = conversation.clone();
            evict(
                &mut evicted,
                &EvictConfig { keep_recent: Some(0), min_payload_tokens: 0, ..EvictConfig::default() },
                counter,
            );
            assert_eq!(problem_keys(&evicted), before, "{name}: eviction changed the problems of an invalid session");
            let mut fixed = conversation;
            let fixes = repair(&mut fixed);
            assert!(validate(&fixed).is_empty(), "{name}: repair left {:?}", validate(&fixed));
            println!("{name}: {} problem(s) before any change, repaired by {} fix(es)", before.len(), fixes.len());
            repaired += 1;
            (name, fixed)
        })
        .collect();
    println!("corpus: {} sessions, {repaired} repaired first", sessions.len());

    for budget in [8_000u64, 16_000, 32_000] {
        let evict_config = EvictConfig { target_tokens: Some(budget), keep_recent: Some(3), ..EvictConfig::default() };
        let plan_config = PlanConfig { max_tail_tokens: Some(budget), ..PlanConfig::default() };
        let (mut planned, mut over_budget, mut tail_sum, mut freed_sum) = (0usize, 0usize, 0u64, 0u64);
        let mut no_cut: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut failures = Vec::new();
        for (name, conversation) in &sessions {
            match check_evict(conversation, &evict_config, counter) {
                Ok((_, report)) => freed_sum += report.tokens_before - report.tokens_after,
                Err(message) => failures.push(format!("{name} evict@{budget}: {message}")),
            }
            match plan(conversation, &plan_config, counter) {
                Ok(plan) => {
                    planned += 1;
                    tail_sum += plan.tail_tokens;
                    if plan
                        .notes
                        .iter()
                        .any(|note| note.contains("smallest safe tail") && note.contains("over the budget"))
                    {
                        over_budget += 1;
                    }
                    if let Err(message) = check_plan(conversation, &plan_config, &plan, counter) {
                        failures.push(format!("{name} plan@{budget}: {message}"));
                    }
                }
                Err(reason) => {
                    let kind = match reason {
                        NoCut::NoBoundary => "no boundary",
                        NoCut::KeepTurns(_) => "keep turns",
                        NoCut::KeepTokens(_) => "keep tokens",
                        NoCut::Fits { .. } => "fits",
                        NoCut::TooLittle { .. } => "too little",
                        _ => "other",
                    };
                    *no_cut.entry(kind).or_default() += 1;
                }
            }
        }
        assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
        let mean = if planned > 0 { tail_sum / planned as u64 } else { 0 };
        println!(
            "budget {budget}: {planned}/{} sessions planned, mean tail {mean} tokens, {over_budget} with the smallest safe tail over budget; no cut: {no_cut:?}; eviction freed {freed_sum} tokens in all",
            sessions.len()
        );
        assert!(planned > 0, "no session planned at budget {budget}");
    }
}

/// Shares of tool_result tokens, for one group of sessions.
#[derive(Default)]
struct Shares {
    sessions: usize,
    all: u64,
    by_reason: BTreeMap<&'static str, u64>,
    file_reads: u64,
    file_reads_by_reason: BTreeMap<&'static str, u64>,
}

impl Shares {
    fn line(&self, label: &str) -> String {
        let percent = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                100.0 * part as f64 / whole as f64
            }
        };
        let get = |map: &BTreeMap<&'static str, u64>, reason: &str| map.get(reason).copied().unwrap_or(0);
        let relevance = |map: &BTreeMap<&'static str, u64>| {
            ["superseded", "stale", "duplicate"].iter().map(|reason| get(map, reason)).sum::<u64>()
        };
        format!(
            "{label:<14} {:>3} sessions, tool_result tokens {:>9}: superseded {:5.1}%  stale {:5.1}%  duplicate {:5.1}%  = {:5.1}% (age {:5.1}%) | file reads {:>9} ({:4.1}% of results): superseded {:5.1}%  stale {:5.1}%  duplicate {:5.1}%  = {:5.1}%",
            self.sessions,
            self.all,
            percent(get(&self.by_reason, "superseded"), self.all),
            percent(get(&self.by_reason, "stale"), self.all),
            percent(get(&self.by_reason, "duplicate"), self.all),
            percent(relevance(&self.by_reason), self.all),
            percent(get(&self.by_reason, "age"), self.all),
            self.file_reads,
            percent(self.file_reads, self.all),
            percent(get(&self.file_reads_by_reason, "superseded"), self.file_reads),
            percent(get(&self.file_reads_by_reason, "stale"), self.file_reads),
            percent(get(&self.file_reads_by_reason, "duplicate"), self.file_reads),
            percent(relevance(&self.file_reads_by_reason), self.file_reads),
        )
    }
}

/// What share of tool output eviction finds superseded, stale or duplicated, by agent family
/// and among file reads. Prints the measurement; asserts only that the accounting adds up.
#[test]
fn corpus_measurement_of_stale_tool_output() {
    let Some(sessions) = corpus() else { return };
    #[cfg(feature = "bpe")]
    let counter = contextfold_core::tokens::Tokenizer::O200k.counter();
    #[cfg(not(feature = "bpe"))]
    let counter: &dyn TokenCounter = &Estimate;
    let config = EvictConfig { keep_recent: Some(0), min_payload_tokens: 0, ..EvictConfig::default() };
    let mut total = Shares::default();
    let mut families: BTreeMap<String, Shares> = BTreeMap::new();
    for (name, conversation) in &sessions {
        let calls: HashMap<&str, (&str, &Value)> = conversation
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .filter_map(|block| match block {
                Block::ToolUse(tool_use) => Some((tool_use.id.as_str(), (tool_use.name.as_str(), &tool_use.input))),
                _ => None,
            })
            .collect();
        let (mut all, mut file_reads) = (0u64, 0u64);
        for block in conversation.messages.iter().flat_map(|message| &message.content) {
            let Block::ToolResult(result) = block else {
                continue;
            };
            let tokens = count_block(counter, block);
            all += tokens;
            let kind =
                calls.get(result.tool_use_id.as_str()).map(|(name, input)| classify(config.preset, name, input).kind);
            if kind == Some(ActionKind::FileRead) {
                file_reads += tokens;
            }
        }
        let mut evicted = conversation.clone();
        let report = evict(&mut evicted, &config, counter);
        let offloaded: u64 =
            report.items.iter().filter(|item| item.reason != Reason::Input).map(|item| item.tokens).sum();
        assert!(offloaded <= all, "{name}: offloaded {offloaded} of {all} tool_result tokens");
        for shares in [&mut total, families.entry(family(name).to_string()).or_default()] {
            shares.sessions += 1;
            shares.all += all;
            shares.file_reads += file_reads;
            for item in &report.items {
                *shares.by_reason.entry(item.reason.name()).or_default() += item.tokens;
                if item.kind == ActionKind::FileRead {
                    *shares.file_reads_by_reason.entry(item.reason.name()).or_default() += item.tokens;
                }
            }
        }
        // Every result is either kept or offloaded once.
        let kept: u64 = evicted
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .filter(|block| matches!(block, Block::ToolResult(result) if !is_evicted(result)))
            .map(|block| count_block(counter, block))
            .sum();
        assert_eq!(kept + offloaded, all, "{name}: kept {kept} + offloaded {offloaded}");
    }
    println!("stale tool output in the corpus (tokenizer {}, keep_recent 0, min_payload 0):", counter.name());
    println!("{}", total.line("all"));
    for (family, shares) in &families {
        println!("{}", shares.line(family));
    }
    assert!(total.all > 0);
}

// ---------------------------------------------------------------------------------------
// Regressions.
// ---------------------------------------------------------------------------------------

/// Two screenshots with the same caption but different images are not the same output:
/// evicting the first as a "duplicate" would drop an image the conversation has only once.
#[test]
fn different_images_with_the_same_text_are_no_duplicates() {
    // Headers of two different 800×600 PNGs (about 640 tokens each).
    let (first, second) = (
        "iVBORw0KGgoAAAANSUhEUgAAAyAAAAJYCAYAAACadoJwQUFBQQ==",
        "iVBORw0KGgoAAAANSUhEUgAAAyAAAAJYCAYAAACadoJwQkJCQg==",
    );
    let image =
        |data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
    let screenshot = |id: &str| json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "browser_take_screenshot", "input": {}}]});
    let mut conversation = Conversation::from_value(json!([
        {"role": "user", "content": "compare the two pages"},
        screenshot("a"),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "Took a screenshot"}, image(first)]}]},
        screenshot("b"),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "Took a screenshot"}, image(second)]}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "Read", "input": {"file_path": "x.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": [image(first)]}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "d", "name": "Read", "input": {"file_path": "y.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "d", "content": [image(second)]}]},
        {"role": "assistant", "content": "The pages differ."}
    ]))
    .unwrap();
    let config = EvictConfig { keep_recent: Some(100), min_payload_tokens: 0, ..EvictConfig::default() };
    let report = evict(&mut conversation, &config, &Estimate);
    let duplicates: Vec<(usize, &str)> = report
        .items
        .iter()
        .filter(|item| item.reason == Reason::Duplicate)
        .map(|item| (item.message, item.tool.as_str()))
        .collect();
    assert_eq!(duplicates, [], "results whose images differ were evicted as duplicates");
}
