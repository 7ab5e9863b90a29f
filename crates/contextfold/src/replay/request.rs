//! The request of the current call, kept up to date from each step's change, so a call costs
//! what changed rather than the length of the session.
//!
//! Each message is kept with its fingerprint and its blocks as (content hash, tokens); token
//! totals are prefix sums. A step keeps a prefix of the previous request and appends the
//! rest, so only the appended messages are hashed and counted, and the cache prefix is
//! found by comparing the blocks after the kept prefix until the first that differs. The
//! file reads the request still shows, or shows only as a placeholder, are kept the same way,
//! for counting re-reads after eviction.

use contextfold_core::evict::is_evicted;
use contextfold_core::hash::{canonical_json, hash_bytes, message_fingerprint};
use contextfold_core::tokens::{count_block, TokenCounter};
use contextfold_core::tools::{classify, ActionKind, Preset};
use contextfold_core::{Block, Message, ToolResult, ToolResultContent};
use std::collections::HashMap;

/// Per-block token counts, memoised by content hash: requests share most blocks.
pub(crate) struct BlockCounts<'a> {
    counter: &'a dyn TokenCounter,
    memo: HashMap<u64, u64>,
}

impl<'a> BlockCounts<'a> {
    pub(crate) fn new(counter: &'a dyn TokenCounter) -> BlockCounts<'a> {
        BlockCounts { counter, memo: HashMap::new() }
    }

    /// The (hash, tokens) of every block of `message`, role included in the hash.
    pub(crate) fn message(&mut self, message: &Message) -> Vec<(u64, u64)> {
        message
            .content
            .iter()
            .map(|block| {
                let hash =
                    hash_bytes(format!("{}:{}", message.role.as_str(), canonical_json(&block.to_value())).as_bytes());
                let tokens = *self.memo.entry(hash).or_insert_with(|| count_block(self.counter, block));
                (hash, tokens)
            })
            .collect()
    }

    /// The tokens of `message`.
    pub(crate) fn tokens(&mut self, message: &Message) -> u64 {
        self.message(message).iter().map(|(_, tokens)| tokens).sum()
    }
}

/// Whether a tool result's payload was replaced by a pointer or a placeholder.
fn is_cleared(result: &ToolResult) -> bool {
    is_evicted(result)
        || matches!(&result.content, Some(ToolResultContent::Text(text))
            if text == "[tool result cleared]" || text.starts_with("[Old environment output ("))
}

/// The current request.
#[derive(Default)]
pub(crate) struct Request {
    /// Its messages.
    pub(crate) messages: Vec<Message>,
    /// Per message, (hash, tokens) of each block.
    blocks: Vec<Vec<(u64, u64)>>,
    /// Per message, its fingerprint.
    pub(crate) prints: Vec<u64>,
    /// `prefix[i]` = tokens of `messages[..i]`.
    prefix: Vec<u64>,
    /// Per message, the file reads its results show: (path, shown whole).
    reads: Vec<Vec<(String, bool)>>,
    /// Per message, the ids of its file-read calls.
    read_calls: Vec<Vec<String>>,
    /// The path of every file-read call in the request, by call id.
    read_paths: HashMap<String, String>,
    /// Per path, (reads shown whole, reads shown as a placeholder).
    read_state: HashMap<String, (usize, usize)>,
}

impl Request {
    /// Keeps the first `kept` messages and appends `appended`; returns the tokens of the
    /// longest block prefix the new request shares with the old one.
    pub(crate) fn apply(&mut self, kept: usize, appended: Vec<Message>, counts: &mut BlockCounts) -> u64 {
        if self.prefix.is_empty() {
            self.prefix.push(0);
        }
        let kept = kept.min(self.messages.len());
        let new_blocks: Vec<Vec<(u64, u64)>> = appended.iter().map(|message| counts.message(message)).collect();
        let old_rest = self.blocks[kept..].iter().flatten();
        let shared = self.prefix[kept]
            + old_rest
                .zip(new_blocks.iter().flatten())
                .take_while(|(old, new)| old.0 == new.0)
                .map(|(old, _)| old.1)
                .sum::<u64>();
        while self.messages.len() > kept {
            self.pop();
        }
        for (message, blocks) in appended.into_iter().zip(new_blocks) {
            self.push(message, blocks);
        }
        shared
    }

    /// Tokens of the messages.
    pub(crate) fn tokens(&self) -> u64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Whether a read of `path` now would be a re-read of output the request no longer shows:
    /// an earlier read of it is there as a placeholder, and none is shown whole.
    pub(crate) fn rereads_evicted(&self, path: &str) -> bool {
        self.read_state.get(path).is_some_and(|(shown, cleared)| *shown == 0 && *cleared > 0)
    }

    fn push(&mut self, message: Message, blocks: Vec<(u64, u64)>) {
        let mut reads = Vec::new();
        let mut calls = Vec::new();
        for block in &message.content {
            match block {
                Block::ToolUse(tool_use) => {
                    let action = classify(Preset::Auto, &tool_use.name, &tool_use.input);
                    if let (ActionKind::FileRead, Some(path)) = (action.kind, action.target) {
                        self.read_paths.insert(tool_use.id.clone(), path);
                        calls.push(tool_use.id.clone());
                    }
                }
                Block::ToolResult(result) => {
                    if let Some(path) = self.read_paths.get(&result.tool_use_id) {
                        let shown = !is_cleared(result);
                        let state = self.read_state.entry(path.clone()).or_default();
                        if shown {
                            state.0 += 1;
                        } else {
                            state.1 += 1;
                        }
                        reads.push((path.clone(), shown));
                    }
                }
                _ => {}
            }
        }
        let tokens: u64 = blocks.iter().map(|(_, tokens)| tokens).sum();
        self.prefix.push(self.tokens() + tokens);
        self.prints.push(message_fingerprint(&message));
        self.blocks.push(blocks);
        self.reads.push(reads);
        self.read_calls.push(calls);
        self.messages.push(message);
    }

    fn pop(&mut self) {
        self.messages.pop();
        self.blocks.pop();
        self.prints.pop();
        self.prefix.pop();
        for (path, shown) in self.reads.pop().unwrap_or_default() {
            if let Some(state) = self.read_state.get_mut(&path) {
                if shown {
                    state.0 = state.0.saturating_sub(1);
                } else {
                    state.1 = state.1.saturating_sub(1);
                }
            }
        }
        for id in self.read_calls.pop().unwrap_or_default() {
            self.read_paths.remove(&id);
        }
    }
}

/// The paths `message` (a recorded assistant message) reads with its tool calls.
pub(crate) fn paths_read(message: &Message) -> Vec<String> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            Block::ToolUse(tool_use) => {
                let action = classify(Preset::Auto, &tool_use.name, &tool_use.input);
                (action.kind == ActionKind::FileRead).then_some(action.target).flatten()
            }
            _ => None,
        })
        .collect()
}
