//! Safe cut points: where a conversation may be split into a head to fold and a tail to keep.
//!
//! A cut before message `i` is safe when the tail `messages[i..]` needs nothing from the
//! head: no tool_result in the tail answers a tool_use in the head, no parallel batch is
//! split (cuts fall between whole messages), and when the current tool loop carries signed
//! thinking, the tail starts with a step that carries its own: a cut inside that loop falls
//! before its first thinking-led assistant message, or before a later one that opens with
//! its own thinking (interleaved thinking, one block per step). The provider asks that the
//! last assistant turn start with its thinking; a summary before the tail makes the tail's
//! first step that turn's start, and every step the tail keeps is sent whole, signature and
//! all. Two kinds of cut qualify:
//!
//! - a **turn start**: a user message with authored content and no tool results;
//! - a **tool cycle**: an assistant message right after a user message that answers every
//!   call of the assistant message before it. This is what makes a single user turn with
//!   hundreds of tool calls compactable.
//!
//! A tail never starts with a mid-conversation system message: one between the answering
//! user message and the next assistant message goes with the head, where
//! [`crate::plan::Plan::assemble`] keeps it verbatim right before that assistant message.
//!
//! Only Anthropic's thinking binds a loop. OpenAI reasoning items (thinking blocks read from
//! the Responses format) do not: the Responses API takes a loop cut between two steps, and
//! each reasoning item stays with the call it precedes, in one message.

use crate::conversation::{Block, Message, Role};
use serde::Serialize;
use std::collections::HashSet;

/// What kind of place a cut falls at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundaryKind {
    /// Before a user message that starts a new turn.
    TurnStart,
    /// Before an assistant message that continues a tool loop whose calls are all answered.
    ToolCycle,
}

impl BoundaryKind {
    /// The name printed by the CLI: `turn_start` or `tool_cycle`.
    pub fn name(self) -> &'static str {
        match self {
            BoundaryKind::TurnStart => "turn_start",
            BoundaryKind::ToolCycle => "tool_cycle",
        }
    }
}

/// A safe cut: the head is `messages[..index]`, the tail `messages[index..]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Boundary {
    /// Index of the first tail message.
    pub index: usize,
    /// The kind of cut.
    pub kind: BoundaryKind,
}

fn has_results(message: &Message) -> bool {
    message.content.iter().any(|block| matches!(block, Block::ToolResult(_)))
}

/// Whether `block` is Anthropic's signed thinking (an OpenAI reasoning item, read from the
/// Responses format, binds no loop).
fn is_signed_thinking(block: &Block) -> bool {
    match block {
        Block::Thinking(thinking) => !thinking.extra.contains_key(crate::format::responses::LAYOUT_KEY),
        Block::RedactedThinking(_) => true,
        _ => false,
    }
}

fn has_thinking(message: &Message) -> bool {
    message.content.iter().any(is_signed_thinking)
}

/// Whether `message` opens with its own signed thinking: with interleaved thinking, each step
/// of a loop does, and a tail that starts there carries the thinking its first step needs.
fn starts_with_thinking(message: &Message) -> bool {
    message.content.first().is_some_and(is_signed_thinking)
}

/// Whether `answer` answers every tool call of `call`.
fn answers_all(call: &Message, answer: &Message) -> bool {
    let answered: HashSet<&str> = answer
        .content
        .iter()
        .filter_map(|block| match block {
            Block::ToolResult(result) => Some(result.tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    call.tool_use_ids().all(|id| answered.contains(id))
}

/// Whether the assistant message at `index` follows a user message that answers every call
/// of the assistant message before it; a system message between the answer and it does not
/// count. `index` is at least 2.
fn continues_a_cycle(messages: &[Message], index: usize) -> bool {
    let answer_at = index - 1 - usize::from(messages[index - 1].role == Role::System);
    answer_at.checked_sub(1).is_some_and(|call_at| {
        let (call, answer) = (&messages[call_at], &messages[answer_at]);
        call.role == Role::Assistant
            && answer.role == Role::User
            && call.has_tool_use()
            && has_results(answer)
            && answers_all(call, answer)
    })
}

/// Index of the message that starts the current tool loop: the last turn start, or 0.
pub fn current_loop_start(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|message| message.role == Role::User && !has_results(message) && message.is_authored())
        .unwrap_or(0)
}

/// Every safe cut in `messages`, in order, excluding a cut before the first message and
/// after the last (a head or tail that is empty folds nothing or keeps nothing).
pub fn boundaries(messages: &[Message]) -> Vec<Boundary> {
    let loop_start = current_loop_start(messages);
    // In the current loop, a cut must not separate the tail from the loop's signed thinking:
    // it falls before the first thinking-led assistant message of the loop, or before a later
    // one that opens with thinking of its own.
    let first_thinking = messages
        .iter()
        .enumerate()
        .skip(loop_start)
        .find(|(_, message)| message.role == Role::Assistant && has_thinking(message))
        .map(|(index, _)| index);
    let mut cuts = Vec::new();
    for index in 1..messages.len() {
        let message = &messages[index];
        let kind = match message.role {
            Role::User if !has_results(message) && message.is_authored() => BoundaryKind::TurnStart,
            Role::Assistant if index >= 2 => {
                if !continues_a_cycle(messages, index) {
                    continue;
                }
                if first_thinking.is_some_and(|first| index > first) && !starts_with_thinking(message) {
                    continue;
                }
                BoundaryKind::ToolCycle
            }
            _ => continue,
        };
        cuts.push(Boundary { index, kind });
    }
    cuts
}

/// For every prefix `messages[..n]`, the index of its last safe cut (what
/// `boundaries(&messages[..n]).last()` gives), in one pass: `out[n]`, `out.len() ==
/// messages.len() + 1`. Replay asks this for every call of a session.
pub fn last_cuts(messages: &[Message]) -> Vec<Option<usize>> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    out.push(None);
    let mut last = None;
    // The first thinking-led assistant message of the current loop, once seen.
    let mut first_thinking: Option<usize> = None;
    for (index, message) in messages.iter().enumerate() {
        let turn_start = message.role == Role::User && !has_results(message) && message.is_authored();
        if turn_start {
            first_thinking = None;
        } else if message.role == Role::Assistant && has_thinking(message) && first_thinking.is_none() {
            first_thinking = Some(index);
        }
        let tool_cycle = message.role == Role::Assistant
            && index >= 2
            && continues_a_cycle(messages, index)
            && (first_thinking.is_none_or(|first| index <= first) || starts_with_thinking(message));
        if index >= 1 && (turn_start || tool_cycle) {
            last = Some(index);
        }
        out.push(last);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Conversation;
    use serde_json::{json, Value};

    fn messages(value: Value) -> Vec<Message> {
        Conversation::from_value(value).expect("parses").messages
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}})
    }

    fn result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
    }

    fn thinking() -> Value {
        json!({"type": "thinking", "thinking": "hm", "signature": "sig"})
    }

    fn cuts(value: Value) -> Vec<(usize, &'static str)> {
        boundaries(&messages(value)).into_iter().map(|cut| (cut.index, cut.kind.name())).collect()
    }

    #[test]
    fn turn_starts_and_tool_cycles() {
        assert_eq!(
            cuts(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a"), call("b")]},
                {"role": "user", "content": [result("a"), result("b")]},
                {"role": "assistant", "content": [call("c")]},
                {"role": "user", "content": [result("c")]},
                {"role": "assistant", "content": "done"},
                {"role": "user", "content": "next"},
                {"role": "assistant", "content": "ok"}
            ])),
            [(3, "tool_cycle"), (5, "tool_cycle"), (6, "turn_start")]
        );
    }

    #[test]
    fn a_user_message_with_results_and_text_is_no_turn_start() {
        assert_eq!(
            cuts(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a")]},
                {"role": "user", "content": [result("a"), {"type": "text", "text": "also this"}]},
                {"role": "assistant", "content": "ok"}
            ])),
            [(3, "tool_cycle")]
        );
    }

    #[test]
    fn the_current_loop_keeps_its_thinking() {
        let conversation = json!([
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": [thinking(), call("a")]},
            {"role": "user", "content": [result("a")]},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "now"},
            {"role": "assistant", "content": [thinking(), call("b")]},
            {"role": "user", "content": [result("b")]},
            {"role": "assistant", "content": [call("c")]},
            {"role": "user", "content": [result("c")]},
            {"role": "assistant", "content": [{"type": "text", "text": "next"}, thinking(), call("d")]},
            {"role": "user", "content": [result("d")]}
        ]);
        // The earlier turn's cycle (3) is fine; inside the current loop, no cut after
        // message 5, which carries the loop's thinking: 7 has none of its own, and 9 does not
        // open with it.
        assert_eq!(cuts(conversation), [(3, "tool_cycle"), (4, "turn_start")]);
    }

    #[test]
    fn interleaved_thinking_lets_a_loop_be_cut_where_a_step_opens_with_its_own() {
        let conversation = json!([
            {"role": "user", "content": "now"},
            {"role": "assistant", "content": [thinking(), call("b")]},
            {"role": "user", "content": [result("b")]},
            {"role": "assistant", "content": [call("c")]},
            {"role": "user", "content": [result("c")]},
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "r"}, call("d")]},
            {"role": "user", "content": [result("d")]},
            {"role": "assistant", "content": [thinking(), call("e")]},
            {"role": "user", "content": [result("e")]}
        ]);
        // A tail from 5 or 7 starts with a step that carries its own signed thinking, as the
        // provider asks of the last assistant turn; 3 has none.
        assert_eq!(cuts(conversation), [(5, "tool_cycle"), (7, "tool_cycle")]);
    }

    #[test]
    fn a_system_message_between_cycles_goes_with_the_head() {
        assert_eq!(
            cuts(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a")]},
                {"role": "user", "content": [result("a")]},
                {"role": "system", "content": "plan mode"},
                {"role": "assistant", "content": [call("b")]},
                {"role": "user", "content": [result("b")]},
                {"role": "system", "content": "done soon"}
            ])),
            [(4, "tool_cycle")]
        );
    }

    #[test]
    fn openai_reasoning_does_not_bind_the_loop() {
        let reasoning = json!({"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "E"});
        let call = |id: &str| json!({"type": "function_call", "call_id": id, "name": "shell", "arguments": "{}"});
        let output = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "ok"});
        let conversation = crate::format::responses::from_value(json!([
            {"role": "user", "content": "now"},
            reasoning, call("b"), output("b"),
            reasoning, call("c"), output("c"),
            reasoning, call("d"), output("d")
        ]))
        .expect("reads");
        let found: Vec<(usize, &str)> =
            boundaries(&conversation.messages).into_iter().map(|cut| (cut.index, cut.kind.name())).collect();
        assert_eq!(found, [(3, "tool_cycle"), (5, "tool_cycle")]);
    }
}
