//! Repairs what can be repaired without inventing content.
//!
//! Each step fixes one class of [`Rule`] and records what it did as a [`Fix`]. Nothing a
//! person or a tool wrote is dropped: an orphan tool_result becomes a text block carrying its
//! text, a misplaced block becomes text, and a lost tool result is stood in for by an error
//! result that says it was lost. The only content added is such explicit markers.
//!
//! A mid-conversation system message is never moved: adjacent ones merge into one, and one
//! where the API allows none (first, after an assistant message, before a user message, or
//! holding more than text) becomes a user message with the same blocks, which then merges
//! with its neighbours like any user message.

use crate::conversation::{Block, ContentShape, Conversation, Extra, Message, Role, ToolResult, ToolResultContent};
use crate::validate::{is_misplaced, system_misplacement, Rule};
use std::collections::HashSet;
use std::fmt;

/// The text of the tool_result that stands in for a result that was never recorded.
pub const LOST_RESULT: &str = "[contextfold: the result of this tool call was lost]";

/// The text of the user message put before a conversation that starts with the assistant.
pub const CONVERSATION_START: &str = "[contextfold: conversation start]";

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
///
/// Afterwards [`crate::validate()`] accepts the conversation, unless it has no messages at
/// all (there is nothing to repair from) or a tool call's `input` is not an object (only
/// its author knows what it should have been).
pub fn repair(conversation: &mut Conversation) -> Vec<Fix> {
    let mut fixes = Vec::new();
    let messages = &mut conversation.messages;
    remove_empty_text(messages, &mut fixes);
    demote_non_text_system(messages, &mut fixes);
    rewrite_misplaced(messages, &mut fixes);
    remove_empty_messages(messages, &mut fixes);
    merge_same_role(messages, &mut fixes);
    // A demoted system message may leave two user messages side by side.
    if demote_misplaced_system(messages, &mut fixes) {
        merge_same_role(messages, &mut fixes);
    }
    start_with_user(messages, &mut fixes);
    rename_duplicate_ids(messages, &mut fixes);
    pair_results(messages, &mut fixes);
    results_first(messages, &mut fixes);
    fixes
}

fn fix(fixes: &mut Vec<Fix>, rule: Rule, message: usize, text: String) {
    fixes.push(Fix { rule, message, text });
}

fn remove_empty_text(messages: &mut [Message], fixes: &mut Vec<Fix>) {
    for (index, message) in messages.iter_mut().enumerate() {
        let before = message.content.len();
        message.content.retain(|block| !matches!(block, Block::Text(text) if text.text.trim().is_empty()));
        let removed = before - message.content.len();
        if removed > 0 {
            message.shape = ContentShape::Blocks;
            fix(fixes, Rule::EmptyText, index, format!("removed {removed} empty text block(s)"));
        }
    }
}

/// The text a misplaced or orphaned block is kept as.
fn as_text(block: &Block) -> String {
    match block {
        Block::ToolUse(tool_use) => format!(
            "[tool_use {} ({}): {}]",
            tool_use.name,
            tool_use.id,
            serde_json::to_string(&tool_use.input).unwrap_or_default()
        ),
        Block::ToolResult(result) => {
            let marker = if result.is_error() { " (error)" } else { "" };
            format!("[tool_result for {}{marker}] {}", result.tool_use_id, result.text())
        }
        Block::Thinking(thinking) => format!("[thinking] {}", thinking.thinking),
        Block::RedactedThinking(_) => "[redacted thinking]".to_string(),
        other => format!("[{}]", other.kind()),
    }
}

/// Turns `block` into text, keeping any images of a tool_result beside it.
fn to_text_blocks(block: Block) -> Vec<Block> {
    let text = Block::text(as_text(&block));
    match block {
        Block::ToolResult(ToolResult { content: Some(ToolResultContent::Blocks(inner)), .. }) => {
            std::iter::once(text).chain(inner.into_iter().filter(|inner| !matches!(inner, Block::Text(_)))).collect()
        }
        _ => vec![text],
    }
}

/// A system message holding more than text becomes a user message: its images or tool
/// blocks are then kept (or turned into text) as a user message's would be.
fn demote_non_text_system(messages: &mut [Message], fixes: &mut Vec<Fix>) {
    for (index, message) in messages.iter_mut().enumerate() {
        if message.role != Role::System {
            continue;
        }
        if let Some(block) = message.content.iter().find(|block| !matches!(block, Block::Text(_))) {
            let why = format!(
                "turned a system message holding a {} block into a user message (system messages hold text only)",
                block.kind()
            );
            message.role = Role::User;
            fix(fixes, Rule::SystemPlacement, index, why);
        }
    }
}

/// A system message where the API allows none becomes a user message (see
/// [`crate::validate::Rule::SystemPlacement`]). Says whether it changed any.
fn demote_misplaced_system(messages: &mut [Message], fixes: &mut Vec<Fix>) -> bool {
    let mut changed = false;
    for index in 0..messages.len() {
        if messages[index].role != Role::System {
            continue;
        }
        if system_misplacement(messages, index).is_some() {
            messages[index].role = Role::User;
            changed = true;
            fix(
                fixes,
                Rule::SystemPlacement,
                index,
                "turned a system message where the API allows none into a user message".into(),
            );
        }
    }
    changed
}

/// Appends `message`'s blocks and missing fields to `into`.
fn absorb(into: &mut Message, message: Message) {
    into.content.extend(message.content);
    into.shape = ContentShape::Blocks;
    for (key, value) in message.extra {
        into.extra.entry(key).or_insert(value);
    }
}

fn rewrite_misplaced(messages: &mut [Message], fixes: &mut Vec<Fix>) {
    for (index, message) in messages.iter_mut().enumerate() {
        let role = message.role;
        let misplaced = |block: &Block| is_misplaced(role, block);
        if !message.content.iter().any(misplaced) {
            continue;
        }
        let mut content = Vec::with_capacity(message.content.len());
        for block in std::mem::take(&mut message.content) {
            if misplaced(&block) {
                fix(
                    fixes,
                    Rule::MisplacedBlock,
                    index,
                    format!("turned a {} block in a {} message into text", block.kind(), role.as_str()),
                );
                content.extend(to_text_blocks(block));
            } else {
                content.push(block);
            }
        }
        message.content = content;
        message.shape = ContentShape::Blocks;
    }
}

fn remove_empty_messages(messages: &mut Vec<Message>, fixes: &mut Vec<Fix>) {
    let last = messages.len().saturating_sub(1);
    let mut index = 0;
    let mut original = 0;
    messages.retain(|message| {
        let keep = !message.content.is_empty() || (original == last && message.role == Role::Assistant);
        if !keep {
            fix(fixes, Rule::EmptyContent, index, format!("removed an empty {} message", message.role.as_str()));
        } else {
            index += 1;
        }
        original += 1;
        keep
    });
}

fn merge_same_role(messages: &mut Vec<Message>, fixes: &mut Vec<Fix>) {
    let mut merged: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages.drain(..) {
        let last = merged.len().saturating_sub(1);
        match merged.last_mut() {
            Some(previous) if previous.role == message.role => {
                let rule = if message.role == Role::System { Rule::SystemPlacement } else { Rule::Alternation };
                fix(fixes, rule, last, format!("merged the next {} message into this one", message.role.as_str()));
                absorb(previous, message);
            }
            _ => merged.push(message),
        }
    }
    *messages = merged;
}

fn start_with_user(messages: &mut Vec<Message>, fixes: &mut Vec<Fix>) {
    if messages.first().is_some_and(|first| first.role == Role::Assistant) {
        messages.insert(0, Message::text(Role::User, CONVERSATION_START));
        fix(fixes, Rule::FirstNotUser, 0, "added a marker user message before the first assistant message".into());
    }
}

fn rename_duplicate_ids(messages: &mut [Message], fixes: &mut Vec<Fix>) {
    let mut seen: HashSet<String> = HashSet::new();
    for index in 0..messages.len() {
        let mut renamed: Vec<(String, String)> = Vec::new();
        for block in &mut messages[index].content {
            let Block::ToolUse(tool_use) = block else { continue };
            if seen.insert(tool_use.id.clone()) {
                continue;
            }
            let new_id = (2..)
                .map(|counter| format!("{}_{counter}", tool_use.id))
                .find(|candidate| !seen.contains(candidate))
                .unwrap_or_default();
            seen.insert(new_id.clone());
            fix(
                fixes,
                Rule::DuplicateId,
                index,
                format!("renamed the reused tool_use id `{}` to `{new_id}`", tool_use.id),
            );
            renamed.push((std::mem::replace(&mut tool_use.id, new_id.clone()), new_id));
        }
        // The answer in the next message follows its call's new id.
        let Some(next) = messages.get_mut(index + 1) else { continue };
        let mut taken: HashSet<usize> = HashSet::new();
        for (old, new) in renamed {
            let answer = next.content.iter_mut().enumerate().find_map(|(position, block)| match block {
                Block::ToolResult(result) if result.tool_use_id == old && !taken.contains(&position) => {
                    Some((position, result))
                }
                _ => None,
            });
            if let Some((position, result)) = answer {
                taken.insert(position);
                result.tool_use_id = new;
            }
        }
    }
}

fn pair_results(messages: &mut [Message], fixes: &mut Vec<Fix>) {
    for index in 0..messages.len() {
        if messages[index].role != Role::User {
            continue;
        }
        let calls: Vec<String> = match index.checked_sub(1).map(|previous| &messages[previous]) {
            Some(previous) if previous.role == Role::Assistant => previous.tool_use_ids().map(str::to_string).collect(),
            _ => Vec::new(),
        };
        let message = &mut messages[index];
        let mut answered: HashSet<String> = HashSet::new();
        let mut content = Vec::with_capacity(message.content.len() + calls.len());
        for block in std::mem::take(&mut message.content) {
            match block {
                Block::ToolResult(result)
                    if calls.contains(&result.tool_use_id) && !answered.contains(&result.tool_use_id) =>
                {
                    answered.insert(result.tool_use_id.clone());
                    content.push(Block::ToolResult(result));
                }
                Block::ToolResult(result) => {
                    let rule =
                        if answered.contains(&result.tool_use_id) { Rule::DuplicateResult } else { Rule::OrphanResult };
                    fix(
                        fixes,
                        rule,
                        index,
                        format!("kept the unmatched tool_result for `{}` as text", result.tool_use_id),
                    );
                    content.extend(to_text_blocks(Block::ToolResult(result)));
                }
                other => content.push(other),
            }
        }
        for id in calls.iter().filter(|id| !answered.contains(*id)) {
            fix(
                fixes,
                Rule::DanglingUse,
                index,
                format!("added an error tool_result for `{id}`, whose result was lost"),
            );
            content.push(lost_result(id));
        }
        message.content = content;
    }
}

fn lost_result(id: &str) -> Block {
    Block::ToolResult(ToolResult {
        tool_use_id: id.to_string(),
        content: Some(ToolResultContent::Text(LOST_RESULT.to_string())),
        is_error: Some(true),
        extra: Extra::new(),
    })
}

fn results_first(messages: &mut [Message], fixes: &mut Vec<Fix>) {
    for (index, message) in messages.iter_mut().enumerate() {
        let is_result = |block: &Block| matches!(block, Block::ToolResult(_));
        let first_other = message.content.iter().position(|block| !is_result(block));
        let misordered = first_other.is_some_and(|first| message.content[first..].iter().any(is_result));
        if misordered {
            let (mut results, others): (Vec<Block>, Vec<Block>) =
                std::mem::take(&mut message.content).into_iter().partition(is_result);
            results.extend(others);
            message.content = results;
            message.shape = ContentShape::Blocks;
            fix(fixes, Rule::ResultNotFirst, index, "moved tool_result blocks to the front".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// Repairs `messages` and returns the fixed messages as JSON and the rules fixed.
    fn check(messages: Value) -> (Value, Vec<&'static str>) {
        let mut conversation = Conversation::from_value(messages).expect("parses");
        let fixes = repair(&mut conversation);
        assert_eq!(validate(&conversation), Vec::new(), "repair left problems");
        let rules = fixes.iter().map(|fix| fix.rule.id()).collect();
        let Value::Object(mut value) = conversation.to_value() else { unreachable!() };
        (value.remove("messages").unwrap_or_default(), rules)
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}})
    }

    fn result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "out"})
    }

    #[test]
    fn a_lost_result_gets_an_error_stand_in() {
        let (messages, rules) = check(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [call("a"), call("b")]},
            {"role": "user", "content": [result("a")]}
        ]));
        assert_eq!(rules, ["dangling-use"]);
        assert_eq!(
            messages[2]["content"][1],
            json!({"type": "tool_result", "tool_use_id": "b", "content": LOST_RESULT, "is_error": true})
        );
    }

    #[test]
    fn an_orphan_result_becomes_text() {
        let (messages, rules) = check(json!([
            {"role": "user", "content": [result("zz"), {"type": "text", "text": "hi"}]}
        ]));
        assert_eq!(rules, ["orphan-result"]);
        assert_eq!(messages[0]["content"][0], json!({"type": "text", "text": "[tool_result for zz] out"}));
    }

    #[test]
    fn same_role_messages_merge_and_results_move_first() {
        let (messages, rules) = check(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": [{"type": "text", "text": "also"}]},
            {"role": "user", "content": [result("a")]}
        ]));
        assert_eq!(rules, ["alternation", "result-not-first"]);
        assert_eq!(messages[2]["content"][0]["type"], "tool_result");
        assert_eq!(messages[2]["content"][1]["text"], "also");
    }

    #[test]
    fn reused_ids_are_renamed_with_their_answers() {
        let (messages, rules) = check(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": [result("a")]},
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": [result("a")]}
        ]));
        assert_eq!(rules, ["duplicate-id"]);
        assert_eq!(messages[3]["content"][0]["id"], "a_2");
        assert_eq!(messages[4]["content"][0]["tool_use_id"], "a_2");
    }

    #[test]
    fn a_leading_assistant_message_gets_a_marker_before_it() {
        let (messages, rules) = check(json!([{"role": "assistant", "content": "hello"}]));
        assert_eq!(rules, ["first-not-user"]);
        assert_eq!(messages[0]["content"][0]["text"], CONVERSATION_START);
    }

    #[test]
    fn empty_blocks_and_messages_go() {
        let (messages, rules) = check(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "text", "text": " "}]},
            {"role": "user", "content": "more"}
        ]));
        assert_eq!(rules, ["empty-text", "empty-content", "alternation"]);
        assert_eq!(messages.as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn system_messages_stay_where_the_api_allows_them_and_merge_or_become_user_text_elsewhere() {
        let system = |text: &str| json!({"role": "system", "content": text});
        let (messages, rules) = check(json!([
            {"role": "user", "content": "go"},
            system("a"),
            system("b"),
            {"role": "assistant", "content": "ok"},
            system("after an assistant"),
            {"role": "user", "content": "more"},
            system("kept last")
        ]));
        assert_eq!(rules, ["misplaced-system", "misplaced-system", "alternation"]);
        assert_eq!(
            messages,
            json!([
                {"role": "user", "content": "go"},
                {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "text", "text": "after an assistant"}, {"type": "text", "text": "more"}]},
                system("kept last")
            ])
        );
        let (messages, rules) = check(json!([
            system("first"),
            {"role": "user", "content": "go"},
            {"role": "system", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]},
            {"role": "assistant", "content": "ok"}
        ]));
        assert_eq!(rules, ["misplaced-system", "alternation", "misplaced-system", "alternation"]);
        assert_eq!(messages[0]["content"].as_array().map(Vec::len), Some(3));
        assert_eq!(messages[0]["role"], "user");
    }

    #[test]
    fn a_valid_conversation_is_left_alone() {
        let input = json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": [result("a")]},
            {"role": "assistant", "content": [call("b")]}
        ]);
        let (messages, rules) = check(input.clone());
        assert!(rules.is_empty());
        assert_eq!(messages, input);
    }

    fn any_block() -> impl Strategy<Value = Value> {
        let id = prop_oneof![Just("a"), Just("b"), Just("c"), Just("d")];
        prop_oneof![
            prop_oneof![Just(""), Just(" "), Just("text")].prop_map(|text| json!({"type": "text", "text": text})),
            id.clone().prop_map(call),
            (id, any::<bool>()).prop_map(|(id, error)| json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": "r"}, {"type": "image", "source": {"type": "url", "url": "u"}}], "is_error": error})),
            Just(json!({"type": "thinking", "thinking": "t", "signature": "s"})),
            Just(json!({"type": "image", "source": {"type": "url", "url": "u"}})),
        ]
    }

    fn any_messages() -> impl Strategy<Value = Value> {
        let role = prop_oneof![3 => Just("user"), 3 => Just("assistant"), 1 => Just("system")];
        prop::collection::vec((role, prop::collection::vec(any_block(), 0..4)), 1..10).prop_map(|messages| {
            Value::Array(
                messages.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect(),
            )
        })
    }

    proptest! {
        #[test]
        fn repair_always_yields_a_valid_conversation(messages in any_messages()) {
            let mut conversation = Conversation::from_value(messages).expect("parses");
            let fixes = repair(&mut conversation);
            let problems = validate(&conversation);
            // Messages that held nothing at all leave nothing to repair from.
            if conversation.messages.is_empty() {
                prop_assert_eq!(problems.len(), 1);
                return Ok(());
            }
            prop_assert!(problems.is_empty(), "{problems:?} after {fixes:?}");
            // Repairing a repaired conversation changes nothing.
            prop_assert_eq!(repair(&mut conversation), Vec::new());
        }
    }
}
