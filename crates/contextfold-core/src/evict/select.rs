//! Selection: which tool outputs (and large tool-call arguments) go, and in which order.
//!
//! Relevance first (superseded and stale reads, repeated outputs), then age outside the
//! working set, then large arguments. A pinned path's latest read is never chosen; a hot
//! path's latest read (read again after an eviction) is kept from age-based eviction.

use super::{is_evicted, EvictConfig, Reason};
use crate::conversation::{Block, Conversation, Message, Role, ToolResult, ToolResultContent, ToolUse};
use crate::hash::StableHasher;
use crate::tools::{classify, Action, ActionKind};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// A block's place: its message and its position in the message.
type Place = (usize, usize);

/// One block chosen for eviction.
pub(super) struct Choice {
    pub(super) message: usize,
    pub(super) block: usize,
    pub(super) reason: Reason,
    pub(super) tool: String,
    pub(super) action: Action,
}

/// A tool result with what is known about it.
struct Candidate<'a> {
    message: usize,
    block: usize,
    tool: &'a ToolUse,
    action: Action,
    tokens: u64,
    text_hash: u64,
}

impl Candidate<'_> {
    fn place(&self) -> Place {
        (self.message, self.block)
    }

    fn choice(&self, reason: Reason) -> Choice {
        Choice {
            message: self.message,
            block: self.block,
            reason,
            tool: self.tool.name.clone(),
            action: self.action.clone(),
        }
    }

    fn is_read_of(&self, path: &str) -> bool {
        self.action.kind == ActionKind::FileRead && self.action.target.as_deref() == Some(path)
    }
}

/// What one reading of the messages finds.
struct Scan<'a> {
    /// The tool results that may go, oldest first, at least `min_payload_tokens` each.
    candidates: Vec<Candidate<'a>>,
    /// Every tool call, with the index of its message.
    actions: Vec<(usize, Action)>,
    /// Where a file's read was already evicted: a later read of it makes the path hot.
    evicted_reads: Vec<(usize, String)>,
}

/// The order in which to evict, relevance first, then oldest; and the hot paths pinned.
pub(super) fn choose(
    conversation: &Conversation,
    config: &EvictConfig,
    counts: &[Vec<u64>],
) -> (Vec<Choice>, Vec<String>) {
    let Scan { candidates, actions, evicted_reads } = scan(&conversation.messages, config, counts);
    let hot = hot_paths(&candidates, &evicted_reads);
    // Pinned paths keep their latest read; hot ones keep it from age-based eviction.
    let pinned: Vec<String> = config.pinned_paths.iter().map(|path| crate::tools::normalize_path(path)).collect();
    let protected = latest_reads(&candidates, &pinned);
    let hot_reads = latest_reads(&candidates, &hot);

    let mut order = Vec::new();
    let mut chosen: HashSet<Place> = HashSet::new();
    for (i, candidate) in candidates.iter().enumerate() {
        if protected.contains(&candidate.place()) {
            continue;
        }
        if let Some(reason) = relevance(candidate, &candidates[i + 1..], &actions) {
            order.push(candidate.choice(reason));
            chosen.insert(candidate.place());
        }
    }
    let working = working_set(&candidates, config);
    for candidate in &candidates {
        let key = candidate.place();
        if !chosen.contains(&key) && !working.contains(&key) && !protected.contains(&key) && !hot_reads.contains(&key) {
            order.push(candidate.choice(Reason::Age));
        }
    }
    if let Some(over) = config.clear_inputs_over {
        order.extend(large_inputs(&conversation.messages, config, counts, over));
    }
    (order, hot)
}

/// Reads the messages once: the candidates, the calls, and the reads already evicted.
fn scan<'a>(messages: &'a [Message], config: &EvictConfig, counts: &[Vec<u64>]) -> Scan<'a> {
    let calls: HashMap<&str, &ToolUse> = messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolUse(tool_use) => Some((tool_use.id.as_str(), tool_use)),
            _ => None,
        })
        .collect();
    // The newest results are what the model reads next: in the last message, or the last
    // one before a trailing mid-conversation system message.
    let last = messages.iter().rposition(|message| message.role != Role::System).unwrap_or(0);
    let mut scan = Scan { candidates: Vec::new(), actions: Vec::new(), evicted_reads: Vec::new() };
    for (index, message) in messages.iter().enumerate() {
        for (position, block) in message.content.iter().enumerate() {
            match block {
                Block::ToolUse(tool_use) => {
                    scan.actions.push((index, classify(config.preset, &tool_use.name, &tool_use.input)))
                }
                Block::ToolResult(result) if is_evicted(result) => {
                    let action = calls
                        .get(result.tool_use_id.as_str())
                        .map(|tool| classify(config.preset, &tool.name, &tool.input));
                    if let Some(Action { kind: ActionKind::FileRead, target: Some(path), .. }) = action {
                        scan.evicted_reads.push((index, path));
                    }
                }
                Block::ToolResult(result) if index != last => {
                    let Some(tool) = calls.get(result.tool_use_id.as_str()).copied() else { continue };
                    if config.exclude_tools.contains(&tool.name) {
                        continue;
                    }
                    scan.candidates.push(Candidate {
                        message: index,
                        block: position,
                        tool,
                        action: classify(config.preset, &tool.name, &tool.input),
                        tokens: counts[index][position],
                        text_hash: text_hash(result),
                    });
                }
                _ => {}
            }
        }
    }
    scan.candidates.retain(|candidate| candidate.tokens >= config.min_payload_tokens);
    scan
}

/// A hash of a result's text and of its non-text blocks: equal outputs hash equal.
fn text_hash(result: &ToolResult) -> u64 {
    let others = match &result.content {
        Some(ToolResultContent::Blocks(blocks)) => {
            Value::Array(blocks.iter().filter(|inner| inner.as_text().is_none()).map(Block::to_value).collect())
                .to_string()
        }
        _ => String::new(),
    };
    StableHasher::default().write(result.text().as_bytes()).write(others.as_bytes()).finish()
}

/// Hot paths: read again after an earlier read was evicted, by an earlier pass or by this
/// one (of a file read twice, the earlier read goes first: superseded, or older). Their
/// latest read is kept past the working set (age), so the model does not have to read them
/// a third time.
fn hot_paths(candidates: &[Candidate], evicted_reads: &[(usize, String)]) -> Vec<String> {
    let mut reads: HashMap<&str, (usize, usize)> = HashMap::new();
    let file_reads = || {
        candidates
            .iter()
            .filter(|candidate| candidate.action.kind == ActionKind::FileRead)
            .filter_map(|candidate| candidate.action.target.as_deref().map(|path| (candidate.message, path)))
    };
    for (message, path) in file_reads() {
        reads.entry(path).or_insert((message, 0)).1 += 1;
    }
    let mut hot: Vec<String> = Vec::new();
    for (_, path) in file_reads() {
        let (first, count) = reads[path];
        let evicted_before = evicted_reads.iter().any(|(at, evicted)| evicted == path && *at < first);
        if (count > 1 || evicted_before) && !hot.iter().any(|seen| seen == path) {
            hot.push(path.to_string());
        }
    }
    hot
}

/// The places of the latest read of each of `paths`.
fn latest_reads(candidates: &[Candidate], paths: &[String]) -> HashSet<Place> {
    paths
        .iter()
        .filter_map(|path| candidates.iter().rev().find(|candidate| candidate.is_read_of(path)))
        .map(Candidate::place)
        .collect()
}

/// Why a candidate goes whatever its age: a later read of the same file and range (or of
/// the whole file), a later change of the file, or the same output later.
fn relevance(candidate: &Candidate, later: &[Candidate], actions: &[(usize, Action)]) -> Option<Reason> {
    let reason = if candidate.action.kind == ActionKind::FileRead && candidate.action.target.is_some() {
        let superseded = later.iter().any(|other| {
            other.action.kind == ActionKind::FileRead
                && other.action.target == candidate.action.target
                && (other.action.range == candidate.action.range || other.action.range.is_none())
        });
        let stale = actions.iter().any(|(at, action)| {
            *at > candidate.message && action.kind.changes_file() && action.target == candidate.action.target
        });
        if superseded {
            Some(Reason::Superseded)
        } else if stale {
            Some(Reason::Stale)
        } else {
            None
        }
    } else {
        None
    };
    reason.or_else(|| later.iter().any(|other| other.text_hash == candidate.text_hash).then_some(Reason::Duplicate))
}

/// The working set: the most recent results by count and/or tokens.
fn working_set(candidates: &[Candidate], config: &EvictConfig) -> HashSet<Place> {
    let mut working: HashSet<Place> = HashSet::new();
    let mut kept_tokens = 0u64;
    for (rank, candidate) in candidates.iter().rev().enumerate() {
        let by_count = config.keep_recent.is_some_and(|keep| rank < keep);
        let by_tokens = config.keep_recent_tokens.is_some_and(|keep| kept_tokens + candidate.tokens <= keep);
        if by_count || by_tokens {
            working.insert(candidate.place());
            kept_tokens += candidate.tokens;
        } else if config.keep_recent_tokens.is_some() {
            // Past the token window, stop counting it; count-based keeping may still apply.
            kept_tokens = u64::MAX / 2;
        }
    }
    working
}

/// Tool calls whose arguments count more than `over` tokens, outside the last assistant
/// message, not cleared already.
fn large_inputs(messages: &[Message], config: &EvictConfig, counts: &[Vec<u64>], over: u64) -> Vec<Choice> {
    let last_assistant = messages.iter().rposition(|message| message.role == Role::Assistant);
    let mut inputs = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if Some(index) == last_assistant {
            continue;
        }
        for (position, block) in message.content.iter().enumerate() {
            let Block::ToolUse(tool_use) = block else { continue };
            if !input_is_cleared(&tool_use.input) && counts[index][position] > over {
                inputs.push(Choice {
                    message: index,
                    block: position,
                    reason: Reason::Input,
                    tool: tool_use.name.clone(),
                    action: classify(config.preset, &tool_use.name, &tool_use.input),
                });
            }
        }
    }
    inputs
}

fn input_is_cleared(input: &Value) -> bool {
    input.as_object().is_some_and(|map| {
        map.values().any(|value| value.as_str().is_some_and(|text| text.starts_with("[contextfold: ")))
    })
}
