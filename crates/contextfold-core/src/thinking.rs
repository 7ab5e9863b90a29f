//! Clearing thinking: the thinking blocks of finished turns, dropped to save their tokens.
//!
//! This is a step of its own because, unlike eviction (which never removes a block), it
//! removes blocks. The provider allows it: thinking of earlier assistant turns may be left
//! out, but the thinking of the current tool loop must be sent whole, signature included.
//!
//! **Invariant:** only `thinking` and `redacted_thinking` blocks are removed, never one of
//! the current tool loop or of the last `keep_turns` user turns, and never the only blocks of
//! a message (a message is never emptied); every other block keeps its place and content.

use crate::boundary::current_loop_start;
use crate::conversation::{Block, Message, Role};

/// Drops the thinking blocks of assistant messages before the last `keep_turns` user turns
/// (at least one) and outside the current tool loop; returns how many were dropped.
pub fn clear_thinking(messages: &mut [Message], keep_turns: usize) -> usize {
    let loop_start = current_loop_start(messages);
    let turn_starts: Vec<usize> = (0..messages.len())
        .filter(|&index| messages[index].role == Role::User && messages[index].is_authored())
        .collect();
    let keep_from = turn_starts.len().checked_sub(keep_turns.max(1)).map_or(0, |at| turn_starts[at]).min(loop_start);
    let mut cleared = 0;
    for message in &mut messages[..keep_from] {
        if message.role != Role::Assistant {
            continue;
        }
        let others = message.content.iter().filter(|block| !is_thinking(block)).count();
        if others == 0 || others == message.content.len() {
            continue;
        }
        cleared += message.content.len() - others;
        message.content.retain(|block| !is_thinking(block));
    }
    cleared
}

fn is_thinking(block: &Block) -> bool {
    matches!(block, Block::Thinking(_) | Block::RedactedThinking(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Conversation;
    use crate::validate::validate;
    use serde_json::json;

    fn turns() -> Conversation {
        Conversation::from_value(json!([
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "a"}]},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "r"}]},
            {"role": "user", "content": "three"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "b"}]}
        ]))
        .unwrap()
    }

    #[test]
    fn clears_finished_turns_only_and_never_empties_a_message() {
        let mut conversation = turns();
        assert_eq!(clear_thinking(&mut conversation.messages, 1), 1);
        assert_eq!(conversation.messages[1].content.len(), 1, "the first turn's thinking went");
        assert_eq!(conversation.messages[3].content.len(), 1, "a message of thinking alone stays");
        assert_eq!(conversation.messages[5].content.len(), 2, "the current turn is kept whole");
        assert!(validate(&conversation).is_empty());
    }

    #[test]
    fn keeps_the_requested_turns() {
        let mut conversation = turns();
        assert_eq!(clear_thinking(&mut conversation.messages, 3), 0);
        assert_eq!(conversation, turns());
    }
}
