//! Eviction: stale tool output becomes a typed pointer that says how to get it back.
//!
//! **Invariant:** eviction never removes a block (invariant 3): it swaps a tool_result's
//! payload (or a large tool-call argument) for one line of text naming the tool, its target,
//! the size removed, the reason, how to restore it, and a stable `ref` (a content hash) under
//! which a store can keep the original. The removed payloads travel in the [`EvictReport`],
//! so a caller can store them. (Dropping old thinking blocks removes blocks, so it is a step
//! of its own: [`crate::thinking`].)
//!
//! Relevance first: a file read superseded by a later read of the same file and range, a
//! read made stale by a later write or edit of the file, and an output repeated verbatim
//! later go before anything else. Then the oldest outputs go, outside the working set of
//! the most recent results. Outputs in the final message (the ones the model is about to
//! read) are never evicted.

//!
//! Three parts: `select` decides what goes and in which order, `pointer` writes the line
//! that stands in for a payload, and `apply` plans each offload, stops at the target and
//! swaps the blocks.

mod apply;
mod pointer;
mod select;

pub use pointer::{pointer, short_tokens, Pointed};

use crate::conversation::{Block, Conversation, ToolResult, ToolResultContent};
use crate::tokens::{TokenCounter, TokenLedger};
use crate::tools::{ActionKind, Preset};
use apply::{count_blocks, evict_counted};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// How every pointer starts; text starting with it is never evicted again.
pub const POINTER_PREFIX: &str = "[contextfold: offloaded ";

/// What to evict. The [`Default`] keeps the 5 most recent results, evicts only payloads of
/// at least 64 tokens, and has no target (it evicts every candidate).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvictConfig {
    /// Which tool names to recognise.
    pub preset: Preset,
    /// Keep the N most recent tool results (the working set) from age-based eviction.
    pub keep_recent: Option<usize>,
    /// Keep the most recent results holding up to K tokens from age-based eviction.
    pub keep_recent_tokens: Option<u64>,
    /// Evict nothing unless at least this many tokens are freed: one prompt-cache rewrite
    /// must pay for itself.
    pub clear_at_least: Option<u64>,
    /// Stop once the conversation holds at most this many tokens.
    pub target_tokens: Option<u64>,
    /// Paths whose latest read is never evicted.
    pub pinned_paths: Vec<String>,
    /// Tools whose results are never evicted.
    pub exclude_tools: Vec<String>,
    /// Payloads smaller than this are left alone: the pointer would save little.
    pub min_payload_tokens: u64,
    /// Clear string arguments of tool calls (e.g. the content of a Write) above this many
    /// tokens, except in the final assistant message.
    pub clear_inputs_over: Option<u64>,
    /// The name of the recall tool the model has (`context_recall`, or the name its client
    /// gives an MCP tool, such as `mcp__contextfold__context_recall`): pointers tell the model
    /// to restore a payload by calling it with the ref instead of re-running the payload's
    /// tool. Only set when the model has that tool and a store keeps the payloads; `None` by
    /// default. A pointer's text is decided when it is written, so a later change of name
    /// leaves the pointers already sent as they are.
    pub recall_tool: Option<String>,
}

impl Default for EvictConfig {
    fn default() -> Self {
        EvictConfig {
            preset: Preset::Auto,
            keep_recent: Some(5),
            keep_recent_tokens: None,
            clear_at_least: None,
            target_tokens: None,
            pinned_paths: Vec::new(),
            exclude_tools: Vec::new(),
            min_payload_tokens: 64,
            clear_inputs_over: None,
            recall_tool: None,
        }
    }
}

/// Why a payload was evicted. Reasons order by [`Reason::name`], so a report's
/// [`EvictReport::by_reason`] lists them alphabetically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// The same file and range was read again later.
    Superseded,
    /// The file was written or edited after this read.
    Stale,
    /// The same output appears again later.
    Duplicate,
    /// Older than the working set.
    Age,
    /// A large tool-call argument.
    Input,
}

impl Reason {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Superseded => "superseded",
            Reason::Stale => "stale",
            Reason::Duplicate => "duplicate",
            Reason::Age => "age",
            Reason::Input => "input",
        }
    }

    fn phrase(self) -> &'static str {
        match self {
            Reason::Superseded => "superseded by a later read",
            Reason::Stale => "stale: the file changed later",
            Reason::Duplicate => "the same output appears later",
            Reason::Age => "older output",
            Reason::Input => "large tool argument",
        }
    }
}

impl Ord for Reason {
    fn cmp(&self, other: &Reason) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for Reason {
    fn partial_cmp(&self, other: &Reason) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One evicted payload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offload {
    /// The stable reference of the payload.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The tool that produced it.
    pub tool: String,
    /// What the tool did.
    pub kind: ActionKind,
    /// The file, pattern, command or URL.
    pub target: Option<String>,
    /// Index of the message.
    pub message: usize,
    /// Index of the block.
    pub block: usize,
    /// Tokens of the block before.
    pub tokens: u64,
    /// Tokens freed (before minus the pointer).
    pub freed: u64,
    /// Why it went.
    pub reason: Reason,
    /// The removed payload: a string, a block list, or (for [`Reason::Input`]) the input.
    #[serde(skip)]
    pub payload: Value,
    /// The block that replaces the original.
    #[serde(skip)]
    pub replacement: Block,
}

/// What [`evict`] did.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct EvictReport {
    /// Tokens of the conversation before.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// Number of payloads offloaded.
    pub offloaded: usize,
    /// Offloads by reason.
    pub by_reason: BTreeMap<Reason, usize>,
    /// Each offload.
    pub items: Vec<Offload>,
    /// Why nothing was evicted, when candidates existed but a threshold was not met.
    pub skipped: Option<String>,
    /// Hot paths, pinned automatically: files read again after an earlier read was evicted
    /// (by an earlier pass, or read twice, so this pass evicts the earlier read first), whose
    /// latest read is kept past the working set.
    pub pinned: Vec<String>,
}

/// Evicts stale tool output from `conversation` in place.
pub fn evict(conversation: &mut Conversation, config: &EvictConfig, counter: &dyn TokenCounter) -> EvictReport {
    // Every block is counted once; the sum is the conversation's count.
    let counts = conversation.messages.iter().map(|message| count_blocks(counter, message)).collect();
    evict_counted(conversation, config, counter, counts)
}

/// [`evict`] with the block counts of a ledger synced to `conversation`, so that a caller
/// who counts every request anyway does not count it twice. A message whose blocks the
/// ledger does not know (it was not synced, or the message changed shape) is counted.
pub fn evict_with_ledger(conversation: &mut Conversation, config: &EvictConfig, ledger: &TokenLedger) -> EvictReport {
    let counter = ledger.counter();
    let counts = (conversation.messages.iter().enumerate())
        .map(|(index, message)| match ledger.block_tokens(index) {
            Some(blocks) if blocks.len() == message.content.len() => blocks.to_vec(),
            _ => count_blocks(counter, message),
        })
        .collect();
    evict_counted(conversation, config, counter, counts)
}

/// Whether a tool_result's payload is already a contextfold pointer or marker.
pub fn is_evicted(result: &ToolResult) -> bool {
    match &result.content {
        Some(ToolResultContent::Text(text)) => text.starts_with("[contextfold: "),
        _ => false,
    }
}

/// String arguments at least this long are cleared by [`EvictConfig::clear_inputs_over`].
pub const CLEARED_INPUT_BYTES: usize = 400;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{count_block, count_conversation, Chars4};
    use crate::validate::validate;
    use serde_json::json;

    /// A session of `(tool, input, output)` steps, one tool call per assistant message.
    fn session(steps: &[(&str, Value, String)]) -> Conversation {
        let mut messages = vec![json!({"role": "user", "content": "fix it"})];
        for (i, (tool, input, output)) in steps.iter().enumerate() {
            let id = format!("t{i}");
            messages.push(
                json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": tool, "input": input}]}),
            );
            messages.push(
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}),
            );
        }
        messages.push(json!({"role": "assistant", "content": "done"}));
        Conversation::from_value(Value::Array(messages)).unwrap()
    }

    fn big(tag: &str) -> String {
        (0..40).map(|line| format!("{tag} line {line} of some file content\n")).collect()
    }

    fn read(path: &str) -> Value {
        json!({"file_path": path})
    }

    /// Evicts and returns (message index, reason) of each offload, checking the invariants.
    fn check(conversation: &mut Conversation, config: &EvictConfig) -> Vec<(usize, &'static str)> {
        let blocks_before: Vec<usize> = conversation.messages.iter().map(|message| message.content.len()).collect();
        // A ledger's counts give the same result, whether it knows every message or only some.
        let mut synced = TokenLedger::new(&Chars4);
        synced.sync(&conversation.messages);
        let mut partial = TokenLedger::new(&Chars4);
        partial.sync(&conversation.messages[..conversation.messages.len() / 2]);
        let with_ledgers = [&synced, &partial].map(|ledger| {
            let mut copy = conversation.clone();
            let report = evict_with_ledger(&mut copy, config, ledger);
            (copy, report)
        });
        let report = evict(conversation, config, &Chars4);
        for (copy, ledger_report) in with_ledgers {
            assert_eq!((&copy, &ledger_report), (&*conversation, &report));
        }
        let blocks_after: Vec<usize> = conversation.messages.iter().map(|message| message.content.len()).collect();
        assert_eq!(blocks_before, blocks_after, "eviction never removes a block");
        assert!(validate(conversation).is_empty());
        assert_eq!(report.tokens_after, count_conversation(&Chars4, conversation));
        report.items.iter().map(|item| (item.message, item.reason.name())).collect()
    }

    fn no_age() -> EvictConfig {
        EvictConfig { keep_recent: Some(100), ..EvictConfig::default() }
    }

    #[test]
    fn relevance_reasons() {
        let mut conversation = session(&[
            ("Read", read("a.rs"), big("a1")), // 2: superseded
            ("Read", read("b.rs"), big("b1")), // 4: stale
            ("Edit", json!({"file_path": "b.rs", "old_string": "x", "new_string": "y"}), "ok".into()),
            ("Bash", json!({"command": "pytest"}), big("same")), // 8: duplicate
            ("Read", read("./a.rs"), big("a2")),                 // 10
            ("Bash", json!({"command": "pytest"}), big("same")), // 12
            ("Read", read("c.rs"), big("c")),                    // 14: never (last? no)
        ]);
        assert_eq!(check(&mut conversation, &no_age()), [(2, "superseded"), (4, "stale"), (8, "duplicate")]);
        let pointer = conversation.messages[2].content[0].clone();
        let Block::ToolResult(result) = pointer else { panic!() };
        let text = result.text();
        assert!(text.starts_with("[contextfold: offloaded Read a.rs (40 lines, "), "{text}");
        assert!(text.contains("superseded by a later read) — re-read the file to restore; ref cf-"), "{text}");
        // Already-evicted payloads are never processed again.
        assert_eq!(check(&mut conversation, &no_age()), []);
    }

    #[test]
    fn an_output_clipped_earlier_is_pointed_at_by_its_originals_ref() {
        let clipped = |tag: &str, reference: &str| {
            let long: String = (0..400).map(|line| format!("{tag} line {line} of some file content\n")).collect();
            let config = crate::clip::ClipConfig::new(200);
            crate::clip::clip_text(&long, &config, ActionKind::FileRead, reference, &Chars4).expect("clipped")
        };
        let steps = [("Read", read("a.rs"), clipped("a1", "cf-0123456789ab")), ("Read", read("a.rs"), big("a2"))];
        let mut conversation = session(&steps);
        let report = evict(&mut conversation, &no_age(), &Chars4);
        let item = report.items.first().expect("the clipped output is evicted");
        assert_eq!(item.reference, "cf-0123456789ab", "the original's ref, which recall answers with the original");
        let Block::ToolResult(result) = &conversation.messages[2].content[0] else { panic!() };
        assert!(result.text().ends_with("; ref cf-0123456789ab]"), "{}", result.text());
        // Text quoting two markers is not one clipped output: it gets a ref of its own.
        let two = format!("{}\n{}", clipped("x", "cf-00000000000a"), clipped("y", "cf-00000000000b"));
        assert_eq!(crate::clip::clipped_original_ref(&two), None);
        assert_eq!(crate::clip::clipped_original_ref("[contextfold: clipped 3 lines; ref cf-zz]"), None);
    }

    #[test]
    fn pointers_name_the_recall_tool_when_asked() {
        let steps = [("Read", read("a.rs"), big("a1")), ("Read", read("a.rs"), big("a2"))];
        let conversation = session(&steps);
        for tool in ["context_recall", "mcp__contextfold__context_recall"] {
            let mut conversation = conversation.clone();
            let config = EvictConfig { recall_tool: Some(tool.into()), clear_inputs_over: Some(1), ..no_age() };
            check(&mut conversation, &config);
            let Block::ToolResult(result) = &conversation.messages[2].content[0] else { panic!() };
            let text = result.text();
            let said = format!("superseded by a later read) — call {tool} with this ref to restore; ref cf-");
            assert!(text.contains(&said), "{text}");
        }
    }

    #[test]
    fn age_keeps_the_working_set() {
        let steps: Vec<(&str, Value, String)> =
            (0..8).map(|i| ("Bash", json!({"command": format!("step {i}")}), big(&format!("out{i}")))).collect();
        let mut conversation = session(&steps);
        let config = EvictConfig { keep_recent: Some(3), ..EvictConfig::default() };
        assert_eq!(check(&mut conversation, &config), [(2, "age"), (4, "age"), (6, "age"), (8, "age"), (10, "age")]);

        let mut conversation = session(&steps);
        let one = count_block(&Chars4, &conversation.messages[2].content[0]);
        let config = EvictConfig { keep_recent: None, keep_recent_tokens: Some(one * 2), ..EvictConfig::default() };
        assert_eq!(check(&mut conversation, &config).len(), 6);
    }

    #[test]
    fn thresholds_targets_pins_and_exclusions() {
        let steps: Vec<(&str, Value, String)> = vec![
            ("Read", read("hot.rs"), big("h1")),
            ("Read", read("hot.rs"), big("h2")),
            ("Grep", json!({"pattern": "x"}), big("g")),
            ("Bash", json!({"command": "ls"}), big("l")),
            ("Bash", json!({"command": "ls -la"}), "tiny".into()),
        ];
        let config = EvictConfig {
            keep_recent: Some(0),
            pinned_paths: vec!["hot.rs".into()],
            exclude_tools: vec!["Grep".into()],
            ..EvictConfig::default()
        };
        assert_eq!(check(&mut session(&steps), &config), [(2, "superseded"), (8, "age")]);

        let mut conversation = session(&steps);
        let report = evict(
            &mut conversation,
            &EvictConfig { clear_at_least: Some(1_000_000), keep_recent: Some(0), ..EvictConfig::default() },
            &Chars4,
        );
        assert_eq!(report.offloaded, 0);
        assert!(report.skipped.is_some());
        assert_eq!(conversation, session(&steps));

        let mut conversation = session(&steps);
        let before = count_conversation(&Chars4, &conversation);
        let config = EvictConfig { target_tokens: Some(before - 10), keep_recent: Some(0), ..EvictConfig::default() };
        assert_eq!(check(&mut conversation, &config).len(), 1, "stops once the target is met");
    }

    #[test]
    fn a_file_read_again_after_its_read_was_evicted_is_pinned() {
        let mut steps: Vec<(&str, Value, String)> = vec![("Read", read("hot.rs"), big("h1"))];
        steps.extend((0..4).map(|i| ("Bash", json!({"command": format!("step {i}")}), big(&format!("a{i}")))));
        let config = EvictConfig { keep_recent: Some(2), ..EvictConfig::default() };
        let mut first = session(&steps);
        let report = evict(&mut first, &config, &Chars4);
        assert!(report.items.iter().any(|item| item.target.as_deref() == Some("hot.rs")), "the first read goes by age");
        assert!(report.pinned.is_empty());
        // The model reads the file again, then works on; the new read must not go by age.
        let mut later = first.messages[..first.messages.len() - 1].to_vec();
        let mut more: Vec<(&str, Value, String)> = vec![("Read", read("hot.rs"), big("h2"))];
        more.extend((4..8).map(|i| ("Bash", json!({"command": format!("step {i}")}), big(&format!("b{i}")))));
        let tail = session(&more);
        later.extend(tail.messages[1..].iter().cloned().map(|mut message| {
            for block in &mut message.content {
                match block {
                    Block::ToolUse(call) => call.id.push('b'),
                    Block::ToolResult(result) => result.tool_use_id.push('b'),
                    _ => {}
                }
            }
            message
        }));
        let mut conversation = Conversation { messages: later, ..Conversation::default() };
        assert!(validate(&conversation).is_empty());
        let blocks_before: Vec<usize> = conversation.messages.iter().map(|message| message.content.len()).collect();
        let report = evict(&mut conversation, &config, &Chars4);
        assert_eq!(report.pinned, ["hot.rs"]);
        let second_read = conversation.messages.len() - 10;
        assert!(report.items.iter().all(|item| item.message != second_read), "{:?}", report.items);
        assert!(report.items.iter().any(|item| item.reason == Reason::Age), "others still go by age");
        let blocks_after: Vec<usize> = conversation.messages.iter().map(|message| message.content.len()).collect();
        assert_eq!(blocks_before, blocks_after);
    }

    #[test]
    fn a_file_read_twice_in_one_pass_keeps_its_latest_read() {
        // Two reads of other ranges of one file go out of the working set in the same pass:
        // the earlier goes by age, the latest stays, so a third read finds it.
        let range = |offset: u64| json!({"file_path": "hot.rs", "offset": offset, "limit": 50});
        let mut steps: Vec<(&str, Value, String)> =
            vec![("Read", range(1), big("h1")), ("Read", read("cold.rs"), big("c")), ("Read", range(100), big("h2"))];
        steps.extend((0..4).map(|i| ("Bash", json!({"command": format!("step {i}")}), big(&format!("a{i}")))));
        let mut conversation = session(&steps);
        let report = evict(&mut conversation, &EvictConfig { keep_recent: Some(2), ..EvictConfig::default() }, &Chars4);
        assert_eq!(report.pinned, ["hot.rs"]);
        let evicted: Vec<(usize, Option<&str>)> =
            report.items.iter().map(|item| (item.message, item.target.as_deref())).collect();
        assert!(evicted.contains(&(2, Some("hot.rs"))), "the earlier read goes: {evicted:?}");
        assert!(evicted.contains(&(4, Some("cold.rs"))), "a file read once still goes by age: {evicted:?}");
        assert!(!evicted.iter().any(|(message, _)| *message == 6), "the latest read stays: {evicted:?}");
    }

    #[test]
    fn a_failed_output_s_pointer_keeps_its_error() {
        let mut failing = big("log");
        failing.push_str("E   AssertionError: 0.30 != 0.15\nExit code 1");
        let output = format!("Exit code 1\n{failing}");
        let mut conversation =
            session(&[("Bash", json!({"command": "pytest -q"}), output), ("Bash", json!({"command": "ls"}), big("l"))]);
        evict(&mut conversation, &EvictConfig { keep_recent: Some(0), ..EvictConfig::default() }, &Chars4);
        let Block::ToolResult(result) = &conversation.messages[2].content[0] else { panic!() };
        let text = result.text();
        assert!(text.contains("; failed: E   AssertionError: 0.30 != 0.15) — re-run the command"), "{text}");
    }

    #[test]
    fn large_inputs() {
        let mut conversation = session(&[
            ("Write", json!({"file_path": "new.rs", "content": big("w")}), "created".into()),
            ("Bash", json!({"command": "ls"}), "a".into()),
        ]);
        let config = EvictConfig { clear_inputs_over: Some(100), ..EvictConfig::default() };
        assert_eq!(check(&mut conversation, &config), [(1, "input")]);
        let Block::ToolUse(write) = &conversation.messages[1].content[0] else { panic!() };
        assert_eq!(write.input["file_path"], "new.rs");
        assert!(write.input["content"].as_str().unwrap().starts_with(POINTER_PREFIX));
    }
}
