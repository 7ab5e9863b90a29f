//! Pre-flight: will the next request fit the window?
//!
//! Checked before a call, on the request about to be sent (history plus the pending input),
//! with room left for the model's answer, rather than after the last call's usage.

use crate::conversation::{Conversation, Message};
use crate::tokens::{count_conversation, count_messages, TokenCounter};
use serde::Serialize;

/// The size of the next request against a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Preflight {
    /// Tokens the request would hold: system, tools, history and pending input.
    pub request_tokens: u64,
    /// Tokens kept free for the answer.
    pub output_reserve: u64,
    /// The window.
    pub window: u64,
    /// Whether request plus reserve fit the window.
    pub fits: bool,
    /// Tokens over (positive) or under (zero) the usable window.
    pub overflow: u64,
}

impl Preflight {
    /// Tokens usable for the request: the window minus the reserve.
    pub fn usable(&self) -> u64 {
        self.window.saturating_sub(self.output_reserve)
    }
}

/// Sizes the request `history` + `pending` for a `window` with `output_reserve` kept free.
pub fn preflight(
    history: &Conversation,
    pending: &[Message],
    output_reserve: u64,
    window: u64,
    counter: &dyn TokenCounter,
) -> Preflight {
    let request_tokens = count_conversation(counter, history) + count_messages(counter, pending);
    let usable = window.saturating_sub(output_reserve);
    Preflight {
        request_tokens,
        output_reserve,
        window,
        fits: request_tokens <= usable,
        overflow: request_tokens.saturating_sub(usable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Role;
    use crate::tokens::Chars4;

    #[test]
    fn counts_the_pending_input_and_the_reserve() {
        let history =
            Conversation { messages: vec![Message::text(Role::User, "x".repeat(4_000))], ..Conversation::default() };
        let pending = [Message::text(Role::User, "y".repeat(400))];
        let base = preflight(&history, &[], 0, 10_000, &Chars4).request_tokens;
        let check = preflight(&history, &pending, 500, 1_700, &Chars4);
        assert!(check.request_tokens > base + 99);
        assert_eq!(check.usable(), 1_200);
        assert!(check.fits);
        let tight = preflight(&history, &pending, 1_000, 1_100, &Chars4);
        assert!(!tight.fits);
        assert_eq!(tight.overflow, tight.request_tokens - 100);
    }
}
