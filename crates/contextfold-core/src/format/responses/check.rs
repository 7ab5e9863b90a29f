//! The Responses API's rules on top of [`validate`]: every problem names its input item.

use super::write::{items, layout_of};
use crate::conversation::{Block, Conversation, Role};
use crate::validate::{validate, Problem, Rule};

/// Checks `conversation` as a Responses request: every rule of [`validate`], plus the
/// Responses API's own: a call in the last message needs its output too, and a `reasoning`
/// item must be followed by the item it produced. Each problem's text ends with the index
/// of the input item at fault, as the writer numbers them.
pub fn check(conversation: &Conversation) -> Vec<Problem> {
    let written = items(conversation);
    let mut problems = validate(conversation);
    let messages = &conversation.messages;
    if let Some(last) = messages.last().filter(|last| last.role == Role::Assistant) {
        for (position, block) in last.content.iter().enumerate() {
            if let Block::ToolUse(tool_use) = block {
                problems.push(Problem {
                    rule: Rule::DanglingUse,
                    message: messages.len() - 1,
                    block: Some(position),
                    text: format!(
                        "call `{}` ({}) has no output; the Responses API needs one for every call, the last included",
                        tool_use.id, tool_use.name
                    ),
                });
            }
        }
    }
    for (index, message) in messages.iter().enumerate() {
        for (position, block) in message.content.iter().enumerate() {
            let reasoning = matches!(block, Block::Thinking(_)) && layout_of(block).is_some();
            let followed = message.content[position + 1..].iter().any(|next| !matches!(next, Block::Thinking(_)));
            if reasoning && !followed {
                problems.push(Problem {
                    rule: Rule::LoneReasoning,
                    message: index,
                    block: Some(position),
                    text: "a reasoning item must be followed by the message or call it produced".into(),
                });
            }
        }
    }
    for problem in &mut problems {
        let item = problem
            .block
            .and_then(|block| written.positions.get(problem.message)?.get(block).copied().flatten())
            .or_else(|| written.positions.get(problem.message)?.iter().flatten().next().copied());
        if let Some(item) = item {
            problem.text.push_str(&format!(" (input item {item})"));
        }
    }
    problems
}
