//! Eviction on its own, without summarizing: evict stale tool output, clear old thinking,
//! clip what is still too large, recount, and say what a store keeps of it.
//!
//! [`evict_conversation`] is the one place this chain runs; callers map their settings into
//! an [`EvictOptions`] and print or store the [`EvictionReport`] it returns. Clearing
//! thinking removes blocks, so it comes after eviction (whose report names blocks by
//! position); the counts are taken again only when a later step changed something.

use crate::store::{Origin, Payload, StoredCompaction};
use contextfold_core::clip::{clip, ClipConfig, Clipped};
use contextfold_core::evict::{evict, EvictConfig, EvictReport, Offload, Reason};
use contextfold_core::thinking::clear_thinking;
use contextfold_core::tokens::{count_conversation, TokenCounter};
use contextfold_core::{Conversation, Message};
use serde::Serialize;
use std::collections::BTreeMap;

/// What [`evict_conversation`] does.
#[derive(Debug, Clone, Default)]
pub struct EvictOptions {
    /// What to evict.
    pub evict: EvictConfig,
    /// Keep the thinking blocks of this many recent assistant turns and clear the older
    /// ones; `None` keeps them all.
    pub keep_thinking_turns: Option<usize>,
    /// Clip tool outputs still over a limit after eviction; `None` clips nothing.
    pub clip: Option<ClipConfig>,
}

/// What an eviction did: the eviction report, the thinking blocks cleared and the outputs
/// clipped. Its JSON is `contextfold evict --json`'s report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvictionReport {
    /// Tokens of the conversation before.
    pub tokens_before: u64,
    /// Tokens after every step.
    pub tokens_after: u64,
    /// Number of payloads offloaded.
    pub offloaded: usize,
    /// Offloads by reason.
    pub by_reason: BTreeMap<Reason, usize>,
    /// Each offload.
    pub items: Vec<Offload>,
    /// Thinking blocks cleared.
    pub thinking_cleared: usize,
    /// Why nothing was evicted, when candidates existed but a threshold was not met.
    pub skipped: Option<String>,
    /// Hot paths, pinned automatically (see [`EvictReport::pinned`]).
    pub pinned: Vec<String>,
    /// Each output clipped.
    pub clipped: Vec<Clipped>,
    /// The store's session the eviction was kept in, once it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl EvictionReport {
    fn new(evicted: EvictReport, thinking_cleared: usize, clipped: Vec<Clipped>) -> EvictionReport {
        let EvictReport { tokens_before, tokens_after, offloaded, by_reason, items, skipped, pinned, .. } = evicted;
        EvictionReport {
            tokens_before,
            tokens_after,
            offloaded,
            by_reason,
            items,
            thinking_cleared,
            skipped,
            pinned,
            clipped,
            session: None,
        }
    }

    /// What a store keeps of this eviction in `session`: `history` (the conversation as it
    /// came in), every payload removed and this report, with the conversation's origin.
    pub fn stored(
        &self,
        session: &str,
        history: Vec<Message>,
        origin: Option<Origin>,
    ) -> Result<StoredCompaction, serde_json::Error> {
        Ok(StoredCompaction {
            origin,
            history,
            payloads: Payload::removed(session, &self.items, &self.clipped),
            summary: None,
            report: serde_json::to_value(self)?,
        })
    }
}

/// Evicts, clears thinking and clips `conversation` in place as `options` asks, counting
/// with `counter`.
pub fn evict_conversation(
    conversation: &mut Conversation,
    options: &EvictOptions,
    counter: &dyn TokenCounter,
) -> EvictionReport {
    let mut report = evict(conversation, &options.evict, counter);
    let thinking_cleared =
        options.keep_thinking_turns.map_or(0, |turns| clear_thinking(&mut conversation.messages, turns));
    if thinking_cleared > 0 {
        report.tokens_after = count_conversation(counter, conversation);
    }
    let clipped = match &options.clip {
        Some(config) => {
            let clipped = clip(conversation, config, counter);
            if !clipped.is_empty() {
                report.tokens_after = count_conversation(counter, conversation);
            }
            clipped
        }
        None => Vec::new(),
    };
    EvictionReport::new(report, thinking_cleared, clipped)
}
