//! Repairs what can be repaired without inventing content.

use crate::conversation::Conversation;
use crate::validate::Rule;
use std::fmt;

/// One change `repair` made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// The rule the change satisfies.
    pub rule: Rule,
    /// Index of the message changed, in the conversation as it was at that step.
    pub message: usize,
    /// What was done, as a sentence.
    pub text: String,
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "message {}: {} [{}]", self.message, self.text, self.rule)
    }
}

/// Repairs `conversation` in place and returns the fixes applied, in order.
pub fn repair(_conversation: &mut Conversation) -> Vec<Fix> {
    Vec::new()
}
