//! A history's identity, prefix by prefix: a chain of message digests.
//!
//! Link `i` hashes link `i - 1` with message `i`'s digest, so one value names a whole prefix
//! of a history: two histories share the link at `n` only when they share each of their first
//! `n` messages (up to an XXH3 collision). A caller that keeps the chain of the history it
//! sent last extends it by the new messages alone, so checking that a request continues an
//! earlier one costs what is new, not the history. The digest of a message is its content
//! ([`message_fingerprint`]) and every other field of it and of its blocks but the cache
//! breakpoints (`cache_control`), which a client moves from call to call.

use crate::conversation::{Block, Extra, Message, ToolResultContent};
use crate::hash::{canonical_json, message_fingerprint, StableHasher};

/// The link that names the empty prefix.
const ROOT: u64 = 0x6366_2d63_6861_696e;

/// Makes room in `items` for `more`, with at most an eighth to spare: for what a long-lived
/// owner grows a few items at a time (a conversation's per-message keys, held for hours),
/// where doubling would leave up to half of it unused. Growing this way still copies each
/// item a bounded number of times on average.
pub fn reserve_tight<T>(items: &mut Vec<T>, more: usize) {
    if items.capacity() - items.len() < more {
        items.reserve_exact(more + (items.len() + more) / 8);
    }
}

/// The chain of a history's messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryChain {
    links: Vec<u64>,
}

impl HistoryChain {
    /// The chain of `messages`.
    pub fn of(messages: &[Message]) -> HistoryChain {
        let mut chain = HistoryChain { links: Vec::with_capacity(messages.len()) };
        messages.iter().for_each(|message| chain.push(message));
        chain
    }

    /// Extends the chain by `message`.
    pub fn push(&mut self, message: &Message) {
        let previous = self.links.last().copied().unwrap_or(ROOT);
        self.links.push(StableHasher::default().write(&previous.to_le_bytes()).write(&digest(message)).finish());
    }

    /// Makes room for `more` links, as [`reserve_tight`] does.
    pub fn reserve_tight(&mut self, more: usize) {
        reserve_tight(&mut self.links, more);
    }

    /// Keeps the links of the first `len` messages.
    pub fn truncate(&mut self, len: usize) {
        self.links.truncate(len);
    }

    /// How many messages it covers.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether it covers no message.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// The link that names the first `len` messages; `None` past the end.
    pub fn prefix(&self, len: usize) -> Option<u64> {
        match len {
            0 => Some(ROOT),
            len => self.links.get(len - 1).copied(),
        }
    }

    /// The link that names the whole history.
    pub fn last(&self) -> u64 {
        self.links.last().copied().unwrap_or(ROOT)
    }
}

/// What identifies `message` in a chain: its content and every other field but the cache
/// breakpoints.
fn digest(message: &Message) -> [u8; 8] {
    let mut hasher = StableHasher::default();
    hasher.write(&message_fingerprint(message).to_le_bytes());
    write_extra(&mut hasher, &message.extra);
    write_blocks(&mut hasher, &message.content);
    hasher.finish().to_le_bytes()
}

fn write_blocks(hasher: &mut StableHasher, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Text(text) => write_extra(hasher, &text.extra),
            Block::ToolUse(tool_use) => write_extra(hasher, &tool_use.extra),
            Block::ToolResult(result) => {
                write_extra(hasher, &result.extra);
                if let Some(ToolResultContent::Blocks(inner)) = &result.content {
                    write_blocks(hasher, inner);
                }
            }
            Block::Thinking(thinking) => {
                hasher.write(thinking.signature.as_deref().unwrap_or_default().as_bytes());
                write_extra(hasher, &thinking.extra);
            }
            Block::RedactedThinking(redacted) => {
                hasher.write(redacted.data.as_bytes());
                write_extra(hasher, &redacted.extra);
            }
            // The fingerprint holds the whole block.
            Block::Image(_) | Block::Document(_) | Block::Other(_) => {}
        }
    }
}

fn write_extra(hasher: &mut StableHasher, extra: &Extra) {
    let mut kept = extra.iter().filter(|(key, _)| key.as_str() != "cache_control").peekable();
    if kept.peek().is_none() {
        hasher.write(b"");
        return;
    }
    let map: serde_json::Map<String, serde_json::Value> =
        kept.map(|(key, value)| (key.clone(), value.clone())).collect();
    hasher.write(canonical_json(&serde_json::Value::Object(map)).as_bytes());
}

/// Removes the cache breakpoints (`cache_control`) from `message`, its blocks and the blocks
/// of its tool results: what a client moves from call to call is not part of the history
/// kept for it (a store keeps each message once, whatever breakpoints it carried).
pub fn strip_cache_breakpoints(message: &mut Message) {
    fn strip(blocks: &mut [Block]) {
        for block in blocks {
            match block {
                Block::Text(text) => drop(text.extra.remove("cache_control")),
                Block::ToolUse(tool_use) => drop(tool_use.extra.remove("cache_control")),
                Block::ToolResult(result) => {
                    result.extra.remove("cache_control");
                    if let Some(ToolResultContent::Blocks(inner)) = &mut result.content {
                        strip(inner);
                    }
                }
                Block::Thinking(thinking) => drop(thinking.extra.remove("cache_control")),
                Block::RedactedThinking(redacted) => drop(redacted.extra.remove("cache_control")),
                Block::Image(media) | Block::Document(media) => drop(media.extra.remove("cache_control")),
                Block::Other(value) => drop(value.as_object_mut().map(|map| map.remove("cache_control"))),
            }
        }
    }
    message.extra.remove("cache_control");
    strip(&mut message.content);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Role;
    use serde_json::json;

    fn message(value: serde_json::Value) -> Message {
        Message::from_value(value, 0).unwrap()
    }

    #[test]
    fn breakpoints_are_stripped_from_messages_blocks_and_tool_results() {
        let breakpoint = json!({"type": "ephemeral"});
        let mut moved = message(json!({"role": "user", "content": [
            {"type": "text", "text": "x", "cache_control": breakpoint},
            {"type": "tool_result", "tool_use_id": "t", "cache_control": breakpoint,
             "content": [{"type": "text", "text": "out", "cache_control": breakpoint}]},
            {"type": "server_tool_thing", "cache_control": breakpoint}
        ]}));
        let plain = message(json!({"role": "user", "content": [
            {"type": "text", "text": "x"},
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "out"}]},
            {"type": "server_tool_thing"}
        ]}));
        assert_ne!(moved, plain);
        strip_cache_breakpoints(&mut moved);
        assert_eq!(moved, plain);
        assert!(!moved.to_value().to_string().contains("cache_control"));
    }

    #[test]
    fn a_prefix_is_named_by_every_message_in_it() {
        let a =
            [Message::text(Role::User, "hi"), Message::text(Role::Assistant, "ALICE"), Message::text(Role::User, "go")];
        let mut b = a.clone();
        b[1] = Message::text(Role::Assistant, "BOB");
        let (chain_a, chain_b) = (HistoryChain::of(&a), HistoryChain::of(&b));
        assert_eq!(chain_a.prefix(0), chain_b.prefix(0));
        assert_eq!(chain_a.prefix(1), chain_b.prefix(1));
        // The last messages agree; the middle one does not, and so no later link does.
        assert_ne!(chain_a.prefix(2), chain_b.prefix(2));
        assert_ne!(chain_a.prefix(3), chain_b.prefix(3));
        assert_eq!(chain_a.prefix(4), None);
        let mut grown = chain_a.clone();
        grown.truncate(1);
        grown.push(&a[1]);
        grown.push(&a[2]);
        assert_eq!(grown, chain_a);
    }

    #[test]
    fn breakpoints_do_not_count_and_other_fields_do() {
        let plain = message(json!({"role": "user", "content": [{"type": "text", "text": "x"}]}));
        let marked = message(
            json!({"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]}),
        );
        let cited = message(json!({"role": "user", "content": [{"type": "text", "text": "x", "citations": [1]}]}));
        let named = message(json!({"role": "user", "name": "bob", "content": [{"type": "text", "text": "x"}]}));
        let last = |message: &Message| HistoryChain::of(std::slice::from_ref(message)).last();
        assert_eq!(last(&plain), last(&marked));
        assert_ne!(last(&plain), last(&cited));
        assert_ne!(last(&plain), last(&named));
    }
}
