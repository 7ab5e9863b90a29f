//! The provider's rules for a request, checked with exact locations.
//!
//! [`validate`] never stops at the first problem: it returns every problem it finds, each
//! with its rule, message index, block index and a sentence a person can act on.

use crate::conversation::{Block, Conversation, Message, Role};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// A rule of the Messages API that a conversation can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// The request has no messages.
    NoMessages,
    /// The first message is not from the user.
    FirstNotUser,
    /// Two consecutive messages have the same role.
    Alternation,
    /// A message other than the final assistant message has no content.
    EmptyContent,
    /// A text block is empty or only whitespace.
    EmptyText,
    /// A block appears in a role that cannot carry it (tool_use or thinking from the user,
    /// tool_result from the assistant).
    MisplacedBlock,
    /// A tool_result does not answer a tool_use of the immediately preceding assistant message.
    OrphanResult,
    /// A tool_use id is answered twice in one message.
    DuplicateResult,
    /// A tool_result comes after another kind of block in its user message.
    ResultNotFirst,
    /// A tool_use (not in the final assistant message) has no tool_result in the next message.
    DanglingUse,
    /// Two tool_use blocks share an id.
    DuplicateId,
    /// A Responses `reasoning` item is not followed by the item it produced (a message or a
    /// call of the same response).
    LoneReasoning,
}

impl Rule {
    /// The rule's stable id, as printed and in `--json`.
    pub fn id(self) -> &'static str {
        match self {
            Rule::NoMessages => "no-messages",
            Rule::FirstNotUser => "first-not-user",
            Rule::Alternation => "alternation",
            Rule::EmptyContent => "empty-content",
            Rule::EmptyText => "empty-text",
            Rule::MisplacedBlock => "misplaced-block",
            Rule::OrphanResult => "orphan-result",
            Rule::DuplicateResult => "duplicate-result",
            Rule::ResultNotFirst => "result-not-first",
            Rule::DanglingUse => "dangling-use",
            Rule::DuplicateId => "duplicate-id",
            Rule::LoneReasoning => "lone-reasoning",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One broken rule, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The rule broken.
    pub rule: Rule,
    /// Index of the message (0 for request-level problems).
    pub message: usize,
    /// Index of the block within the message, when one block is at fault.
    pub block: Option<usize>,
    /// What is wrong, as a sentence.
    pub text: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.block {
            Some(block) => write!(f, "message {}, block {}: {} [{}]", self.message, block, self.text, self.rule),
            None => write!(f, "message {}: {} [{}]", self.message, self.text, self.rule),
        }
    }
}

/// Checks `conversation` against the provider's rules and returns every problem found.
pub fn validate(conversation: &Conversation) -> Vec<Problem> {
    let mut problems = Vec::new();
    let messages = &conversation.messages;
    let Some(first) = messages.first() else {
        problems.push(problem(Rule::NoMessages, 0, None, "the request has no messages".into()));
        return problems;
    };
    if first.role != Role::User {
        problems.push(problem(Rule::FirstNotUser, 0, None, "the first message must be from the user".into()));
    }
    let mut seen_ids: HashMap<&str, usize> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        let is_final = index + 1 == messages.len();
        if index > 0 && messages[index - 1].role == message.role {
            problems.push(problem(
                Rule::Alternation,
                index,
                None,
                format!(
                    "two {} messages in a row (messages {} and {index}); roles must alternate",
                    message.role.as_str(),
                    index - 1
                ),
            ));
        }
        if message.content.is_empty() && !(is_final && message.role == Role::Assistant) {
            problems.push(problem(Rule::EmptyContent, index, None, "the message has no content".into()));
        }
        check_blocks(message, index, &mut seen_ids, &mut problems);
        if message.role == Role::User {
            let previous = index.checked_sub(1).map(|previous| &messages[previous]);
            check_results(message, index, previous, &mut problems);
        }
        if message.role == Role::Assistant && !is_final {
            check_answered(message, index, &messages[index + 1], &mut problems);
        }
    }
    problems
}

fn problem(rule: Rule, message: usize, block: Option<usize>, text: String) -> Problem {
    Problem { rule, message, block, text }
}

fn check_blocks<'a>(
    message: &'a Message,
    index: usize,
    seen_ids: &mut HashMap<&'a str, usize>,
    problems: &mut Vec<Problem>,
) {
    for (position, block) in message.content.iter().enumerate() {
        let misplaced = matches!(
            (message.role, block),
            (Role::User, Block::ToolUse(_) | Block::Thinking(_) | Block::RedactedThinking(_))
                | (Role::Assistant, Block::ToolResult(_))
        );
        if misplaced {
            problems.push(problem(
                Rule::MisplacedBlock,
                index,
                Some(position),
                format!("a {} block cannot appear in a {} message", block.kind(), message.role.as_str()),
            ));
        }
        match block {
            Block::Text(text) if text.text.trim().is_empty() => problems.push(problem(
                Rule::EmptyText,
                index,
                Some(position),
                "text blocks must contain non-whitespace text".into(),
            )),
            Block::ToolUse(tool_use) => {
                if let Some(first) = seen_ids.insert(&tool_use.id, index) {
                    problems.push(problem(
                        Rule::DuplicateId,
                        index,
                        Some(position),
                        format!("tool_use id `{}` was already used in message {first}", tool_use.id),
                    ));
                }
            }
            _ => {}
        }
    }
}

fn check_results(message: &Message, index: usize, previous: Option<&Message>, problems: &mut Vec<Problem>) {
    let calls: HashSet<&str> = match previous {
        Some(previous) if previous.role == Role::Assistant => previous.tool_use_ids().collect(),
        _ => HashSet::new(),
    };
    let mut answered = HashSet::new();
    let mut other_seen = false;
    for (position, block) in message.content.iter().enumerate() {
        let Block::ToolResult(result) = block else {
            other_seen = true;
            continue;
        };
        let id = result.tool_use_id.as_str();
        if !calls.contains(id) {
            problems.push(problem(
                Rule::OrphanResult,
                index,
                Some(position),
                format!("tool_result for `{id}` answers no tool_use in the preceding assistant message"),
            ));
        } else if !answered.insert(id) {
            problems.push(problem(
                Rule::DuplicateResult,
                index,
                Some(position),
                format!("tool_use `{id}` is answered more than once"),
            ));
        }
        if other_seen {
            problems.push(problem(
                Rule::ResultNotFirst,
                index,
                Some(position),
                "tool_result blocks must come before any other block in the message".into(),
            ));
        }
    }
}

fn check_answered(message: &Message, index: usize, next: &Message, problems: &mut Vec<Problem>) {
    let answered: HashSet<&str> = if next.role == Role::User {
        next.content
            .iter()
            .filter_map(|block| match block {
                Block::ToolResult(result) => Some(result.tool_use_id.as_str()),
                _ => None,
            })
            .collect()
    } else {
        HashSet::new()
    };
    for (position, block) in message.content.iter().enumerate() {
        if let Block::ToolUse(tool_use) = block {
            if !answered.contains(tool_use.id.as_str()) {
                problems.push(problem(
                    Rule::DanglingUse,
                    index,
                    Some(position),
                    format!(
                        "tool_use `{}` ({}) has no tool_result in message {}",
                        tool_use.id,
                        tool_use.name,
                        index + 1
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Validates `messages` and returns the rule ids with their locations.
    fn check(messages: Value) -> Vec<(String, usize, Option<usize>)> {
        let conversation = Conversation::from_value(json!({ "messages": messages })).expect("parses");
        validate(&conversation)
            .into_iter()
            .map(|problem| (problem.rule.id().to_string(), problem.message, problem.block))
            .collect()
    }

    fn ids(found: &[(String, usize, Option<usize>)]) -> Vec<&str> {
        found.iter().map(|(id, _, _)| id.as_str()).collect()
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "Read", "input": {}})
    }

    fn result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
    }

    #[test]
    fn a_valid_conversation_has_no_problems() {
        assert!(check(json!([
            {"role": "user", "content": "read a and b"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, call("a"), call("b")]},
            {"role": "user", "content": [result("a"), result("b"), {"type": "text", "text": "thanks"}]},
            {"role": "assistant", "content": [call("c")]}
        ]))
        .is_empty());
    }

    #[test]
    fn each_rule_is_reported_where_it_is_broken() {
        assert_eq!(ids(&check(json!([]))), ["no-messages"]);
        assert_eq!(check(json!([{"role": "assistant", "content": "hi"}])), [("first-not-user".into(), 0, None)]);
        assert_eq!(
            check(json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])),
            [("alternation".into(), 1, None)]
        );
        assert_eq!(
            check(json!([{"role": "user", "content": []}, {"role": "assistant", "content": []}])),
            [("empty-content".into(), 0, None)]
        );
        assert_eq!(
            check(json!([{"role": "user", "content": [{"type": "text", "text": " \n"}]}])),
            [("empty-text".into(), 0, Some(0))]
        );
        assert_eq!(ids(&check(json!([{"role": "user", "content": [call("a")]}]))), ["misplaced-block"]);
        assert_eq!(
            check(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a")]},
                {"role": "user", "content": [result("a"), result("zzz")]}
            ])),
            [("orphan-result".into(), 2, Some(1))]
        );
        assert_eq!(
            ids(&check(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a")]},
                {"role": "user", "content": [result("a"), result("a")]}
            ]))),
            ["duplicate-result"]
        );
        assert_eq!(
            check(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a")]},
                {"role": "user", "content": [{"type": "text", "text": "x"}, result("a")]}
            ])),
            [("result-not-first".into(), 2, Some(1))]
        );
        assert_eq!(
            check(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a"), call("b")]},
                {"role": "user", "content": [result("a")]}
            ])),
            [("dangling-use".into(), 1, Some(1))]
        );
        assert_eq!(
            check(json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a")]},
                {"role": "user", "content": [result("a")]},
                {"role": "assistant", "content": [call("a")]}
            ])),
            [("duplicate-id".into(), 3, Some(0))]
        );
    }

    #[test]
    fn problems_print_as_sentences() {
        let conversation = Conversation::from_value(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": "no result"}
        ]))
        .unwrap();
        assert_eq!(
            validate(&conversation)[0].to_string(),
            "message 1, block 0: tool_use `a` (Read) has no tool_result in message 2 [dangling-use]"
        );
    }
}
