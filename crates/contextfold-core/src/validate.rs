//! The provider's rules for a request, checked with exact locations.
//!
//! [`validate`] never stops at the first problem: it returns every problem it finds, each
//! with its rule, message index, block index and a sentence a person can act on.
//! [`warnings`] lists what the API may reject but a conversation can still carry (block
//! types it does not know), so that a warning never makes a conversation invalid.
//!
//! Mid-conversation system messages (`role: "system"` inside `messages`) follow the API's
//! placement rules: never first, right after a user message (or an assistant message that
//! ends in a server tool use), followed by an assistant message or last, never next to
//! another system message, and text only. Roles alternate between the user and assistant
//! messages around them.

use crate::conversation::{Block, Conversation, Message, Role, ToolResult, ToolResultContent};
use crate::format::describe;
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
    /// A mid-conversation system message is where the API allows none: first, not after a
    /// user message, not before an assistant message, or next to another system message.
    SystemPlacement,
    /// A tool_use's `input` is not a JSON object (say OpenAI `arguments` that are not JSON).
    InputNotObject,
    /// A block of a type the API does not know; a warning (see [`warnings`]).
    UnknownBlock,
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
            Rule::SystemPlacement => "misplaced-system",
            Rule::InputNotObject => "input-not-object",
            Rule::UnknownBlock => "unknown-block",
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
    if first.role == Role::Assistant {
        problems.push(problem(Rule::FirstNotUser, 0, None, "the first message must be from the user".into()));
    }
    let mut seen_ids: HashMap<&str, usize> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        let is_final = index + 1 == messages.len();
        if message.role == Role::System {
            if let Some(why) = system_misplacement(messages, index) {
                problems.push(problem(Rule::SystemPlacement, index, None, why));
            }
        }
        // Around a system message its placement rules decide; they imply alternation.
        let beside_system = index > 0 && [messages[index - 1].role, message.role].contains(&Role::System);
        if index > 0 && !beside_system && messages[index - 1].role == message.role {
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

/// Why the system message at `index` breaks the API's placement rules, or `None` where it
/// may stand: after a user message (or an assistant message whose last block is a server
/// tool use and that makes no tool call), before an assistant message or last, and never
/// next to another system message.
pub(crate) fn system_misplacement(messages: &[Message], index: usize) -> Option<String> {
    let Some(previous) = index.checked_sub(1).map(|previous| &messages[previous]) else {
        return Some("a system message cannot be the first message; put it in the top-level `system`".into());
    };
    let after = index - 1;
    match previous.role {
        Role::System => {
            return Some(format!("two system messages in a row (messages {after} and {index}); merge them into one"))
        }
        Role::Assistant if previous.has_tool_use() => {
            return Some(format!(
                "a system message cannot come between the tool calls of message {after} and their results"
            ))
        }
        Role::Assistant if previous.content.last().is_none_or(|block| block.kind() != "server_tool_use") => {
            return Some(format!("a system message must follow a user message, not the assistant message {after}"))
        }
        _ => {}
    }
    match messages.get(index + 1) {
        Some(next) if next.role == Role::User => Some(format!(
            "a system message must be followed by an assistant message, not the user message {}",
            index + 1
        )),
        _ => None,
    }
}

/// The block types the Messages API knows in a request, besides the modelled ones
/// (`refusal` is an OpenAI part the OpenAI reader keeps as it is).
const KNOWN_BLOCKS: &[&str] = &[
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "compaction",
    "refusal",
];

/// What the API may reject although the conversation is valid by [`validate`]: blocks of a
/// type it does not know (a newer API's, or a typo), with their place.
pub fn warnings(conversation: &Conversation) -> Vec<Problem> {
    let mut warnings = Vec::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        for (position, block) in message.content.iter().enumerate() {
            let inner = match block {
                Block::ToolResult(ToolResult { content: Some(ToolResultContent::Blocks(blocks)), .. }) => {
                    blocks.as_slice()
                }
                _ => &[],
            };
            for block in std::iter::once(block).chain(inner) {
                if let Block::Other(_) = block {
                    let kind = block.kind();
                    if !KNOWN_BLOCKS.contains(&kind) {
                        warnings.push(problem(
                            Rule::UnknownBlock,
                            index,
                            Some(position),
                            format!("the API does not know blocks of type `{kind}` and may reject the request"),
                        ));
                    }
                }
            }
        }
    }
    warnings
}

fn check_blocks<'a>(
    message: &'a Message,
    index: usize,
    seen_ids: &mut HashMap<&'a str, usize>,
    problems: &mut Vec<Problem>,
) {
    for (position, block) in message.content.iter().enumerate() {
        let misplaced = is_misplaced(message.role, block);
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
                if !tool_use.input.is_object() {
                    problems.push(problem(
                        Rule::InputNotObject,
                        index,
                        Some(position),
                        format!(
                            "tool_use `{}` ({}) has an `input` that is {}, not a JSON object{}",
                            tool_use.id,
                            tool_use.name,
                            describe(&tool_use.input),
                            if tool_use.input.is_string() { " (tool call arguments that are not JSON?)" } else { "" }
                        ),
                    ));
                }
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

/// Whether `block` cannot appear in a message of `role`: tool calls and thinking come from the
/// assistant, tool results from the user, and system messages hold text only.
pub(crate) fn is_misplaced(role: Role, block: &Block) -> bool {
    match role {
        Role::User => matches!(block, Block::ToolUse(_) | Block::Thinking(_) | Block::RedactedThinking(_)),
        Role::Assistant => matches!(block, Block::ToolResult(_)),
        Role::System => !matches!(block, Block::Text(_)),
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

    #[test]
    fn system_messages_where_the_api_allows_them_are_valid() {
        let system = |text: &str| json!({"role": "system", "content": text});
        assert!(check(json!([
            {"role": "user", "content": "go"},
            system("be terse"),
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": [result("a")]},
            {"role": "system", "content": [{"type": "text", "text": "plan mode", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]},
            system("after a server tool use"),
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"},
            system("last")
        ]))
        .is_empty());
    }

    #[test]
    fn misplaced_system_messages_are_reported_once_each() {
        let system = |text: &str| json!({"role": "system", "content": text});
        let user = |text: &str| json!({"role": "user", "content": text});
        let assistant = |text: &str| json!({"role": "assistant", "content": text});
        assert_eq!(check(json!([system("first"), assistant("a")])), [("misplaced-system".into(), 0, None)]);
        assert_eq!(
            check(json!([user("u"), system("s"), system("t"), assistant("a")])),
            [("misplaced-system".into(), 2, None)]
        );
        assert_eq!(
            check(json!([user("u"), assistant("a"), system("after an assistant")])),
            [("misplaced-system".into(), 2, None)]
        );
        assert_eq!(
            check(json!([user("u"), system("before a user"), user("v")])),
            [("misplaced-system".into(), 1, None)]
        );
        // Between a call and its result it also leaves the call unanswered and the result orphaned.
        assert_eq!(
            check(
                json!([user("u"), {"role": "assistant", "content": [call("a")]}, system("s"), {"role": "user", "content": [result("a")]}])
            ),
            [
                ("dangling-use".into(), 1, Some(0)),
                ("misplaced-system".into(), 2, None),
                ("orphan-result".into(), 3, Some(0))
            ]
        );
        assert_eq!(
            check(
                json!([user("u"), {"role": "system", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}])
            ),
            [("misplaced-block".into(), 1, Some(0))]
        );
    }

    #[test]
    fn a_tool_input_that_is_not_an_object_is_invalid() {
        let found = check(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "sh", "input": "{not json"}]},
            {"role": "user", "content": [result("a")]}
        ]));
        assert_eq!(found, [("input-not-object".into(), 1, Some(0))]);
        let conversation = Conversation::from_value(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "sh", "input": [1]}]}
        ]))
        .unwrap();
        assert_eq!(
            validate(&conversation)[0].to_string(),
            "message 1, block 0: tool_use `a` (sh) has an `input` that is an array, not a JSON object [input-not-object]"
        );
    }

    #[test]
    fn unknown_block_types_warn_without_making_the_request_invalid() {
        let conversation = Conversation::from_value(json!([
            {"role": "user", "content": [{"type": "txt", "text": "typo"}, {"type": "search_result", "source": "s", "title": "t", "content": []}]},
            {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}, {"type": "web_search_tool_result", "tool_use_id": "s", "content": []}, {"type": "hologram"}]}
        ]))
        .unwrap();
        assert!(validate(&conversation).is_empty());
        let found: Vec<String> = warnings(&conversation).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "message 0, block 0: the API does not know blocks of type `txt` and may reject the request [unknown-block]",
                "message 1, block 2: the API does not know blocks of type `hologram` and may reject the request [unknown-block]"
            ]
        );
    }
}
