//! The summary message: its marker, how to find it again, and `assemble`.
//!
//! A compacted conversation starts with one user message holding, in order, the pinned
//! first request (if any), one text block with the summary (marked by [`SUMMARY_PREFIX`]),
//! and, when the kept tail starts with a user turn, that turn's own blocks. The marker makes
//! the layout reversible: [`split_summary`] takes the message apart again, so the next
//! compaction folds the old summary in instead of summarizing a summary blindly.
//!
//! Mid-conversation system messages of the folded head are kept verbatim rather than
//! summarized ([`assemble_keeping`]): an instruction the harness gave stays a system
//! instruction. They follow the summary message as one system message (several are joined,
//! in order, ahead of the tail's own system message when the tail's first turn has one), so
//! they still come before everything they applied to; an identical repeat is kept once, the
//! newest. A system message in the tail is never
//! touched or moved.

use crate::conversation::{Block, ContentShape, Conversation, Message, Role};

/// The first line of every summary block.
pub const SUMMARY_PREFIX: &str = "[contextfold: summary of the earlier conversation]";

/// The text standing in for folded turns when no summary is given.
pub const OMITTED_MARKER: &str = "[contextfold: earlier conversation omitted]";

/// How the recall note starts, whatever tool it names.
pub const RECALL_NOTE_PREFIX: &str =
    "[contextfold: the full earlier conversation and every offloaded output are kept; ";

/// The last paragraph of a summary when the model has the recall tool named `tool`: what
/// compaction removed can be fetched back. [`split_summary`] leaves it out, so a later
/// summary is not asked to summarize it.
pub fn recall_note(tool: &str) -> String {
    format!("{RECALL_NOTE_PREFIX}call {tool} with the ref a pointer shows to restore an output]")
}

/// `summary` with the [`recall_note`] of `tool` as its last paragraph.
pub fn with_recall_note(summary: &str, tool: &str) -> String {
    format!("{}\n\n{}", summary.trim_end(), recall_note(tool))
}

/// `text` without its last paragraph when that is a recall note (of any tool).
fn without_recall_note(text: &str) -> &str {
    match text.rfind(RECALL_NOTE_PREFIX) {
        Some(start) if text.ends_with(']') && !text[start..].contains('\n') && text[..start].ends_with("\n\n") => {
            text[..start].trim_end()
        }
        _ => text,
    }
}

/// A summary block holding `summary` under the marker.
pub fn summary_block(summary: &str) -> Block {
    Block::text(format!("{SUMMARY_PREFIX}\n{}", summary.trim_end()))
}

fn summary_text(block: &Block) -> Option<&str> {
    block
        .as_text()
        .and_then(|text| text.strip_prefix(SUMMARY_PREFIX))
        .map(|rest| rest.strip_prefix('\n').unwrap_or(rest))
        .map(without_recall_note)
}

/// Whether `message` is a user message carrying a contextfold summary (anywhere in it).
pub fn is_summary_message(message: &Message) -> bool {
    split_summary(message).is_some()
}

/// A summary message taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct SummarySplit {
    /// The blocks before the summary: the pinned first request.
    pub pinned: Vec<Block>,
    /// The summary text, without the marker.
    pub summary: String,
    /// The blocks after the summary: the start of the user turn kept with it.
    pub rest: Vec<Block>,
}

/// Takes a summary message apart, or `None` if it holds no summary. The summary is
/// recognised wherever it sits: in a block of its own, or inside a text block that other
/// text (a harness's) was merged into, whose text before the marker then joins `rest`.
pub fn split_summary(message: &Message) -> Option<SummarySplit> {
    if message.role != Role::User {
        return None;
    }
    if let Some(at) = message.content.iter().position(|block| summary_text(block).is_some()) {
        return Some(SummarySplit {
            pinned: message.content[..at].to_vec(),
            summary: summary_text(&message.content[at])?.to_string(),
            rest: message.content[at + 1..].to_vec(),
        });
    }
    let at =
        message.content.iter().position(|block| block.as_text().is_some_and(|text| text.contains(SUMMARY_PREFIX)))?;
    let text = message.content[at].as_text()?;
    let start = text.find(SUMMARY_PREFIX)?;
    let summary = summary_text(&Block::text(&text[start..]))?.to_string();
    let before = text[..start].trim_end();
    let mut rest: Vec<Block> = (!before.is_empty()).then(|| Block::text(before)).into_iter().collect();
    rest.extend(message.content[at + 1..].iter().cloned());
    Some(SummarySplit { pinned: message.content[..at].to_vec(), summary, rest })
}

/// Builds the compacted conversation: `template`'s system prompt, tools and other fields
/// verbatim, then one user message with `pinned` and the summary, then `tail`.
///
/// The result satisfies the provider's rules whenever `tail` is the tail of a valid
/// conversation cut at a safe boundary: a tail starting with a user turn has that turn's
/// blocks merged after the summary (roles keep alternating); a tail starting with an
/// assistant message follows the summary message.
pub fn assemble(template: &Conversation, summary: Option<&str>, pinned: &[Block], tail: &[Message]) -> Conversation {
    let mut lead: Vec<Block> = pinned.to_vec();
    match summary {
        Some(summary) => lead.push(summary_block(summary)),
        None if lead.is_empty() && tail.first().is_none_or(|first| first.role == Role::Assistant) => {
            lead.push(Block::text(OMITTED_MARKER));
        }
        None => {}
    }
    let mut messages = Vec::with_capacity(tail.len() + 1);
    let mut tail = tail.iter();
    match tail.clone().next() {
        Some(first) if first.role == Role::User => {
            let mut first = tail.next().cloned().unwrap_or_else(|| Message::new(Role::User, Vec::new()));
            if !lead.is_empty() {
                lead.append(&mut first.content);
                first.content = lead;
                first.shape = ContentShape::Blocks;
            }
            messages.push(first);
        }
        _ => messages.push(Message::new(Role::User, lead)),
    }
    messages.extend(tail.cloned());
    Conversation {
        system: template.system.clone(),
        messages,
        tools: template.tools.clone(),
        extra: template.extra.clone(),
    }
}

/// [`assemble`], keeping the head's mid-conversation system messages `kept` verbatim right
/// after the summary message (see the [module documentation](self)).
pub fn assemble_keeping(
    template: &Conversation,
    summary: Option<&str>,
    pinned: &[Block],
    kept: &[Message],
    tail: &[Message],
) -> Conversation {
    let mut out = assemble(template, summary, pinned, tail);
    let mut kept = kept.iter().filter(|message| message.role == Role::System);
    let Some(mut system) = kept.next().cloned() else {
        return out;
    };
    for message in kept {
        system.content.extend(message.content.iter().cloned());
        system.shape = ContentShape::Blocks;
        for (key, value) in &message.extra {
            system.extra.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    match out.messages.get_mut(1) {
        Some(next) if next.role == Role::System => {
            // The tail's own message is kept whole; the head's copies of its text go.
            let mut head = without_repeats(system.content);
            head.retain(|block| !next.content.contains(block));
            head.append(&mut next.content);
            next.content = head;
            next.shape = ContentShape::Blocks;
        }
        _ => {
            system.content = without_repeats(system.content);
            out.messages.insert(1.min(out.messages.len()), system)
        }
    }
    out
}

/// `blocks` with each identical repeat dropped but its newest: a harness repeats the same
/// reminder after many turns, and a hundred copies of one say no more than the last.
fn without_repeats(blocks: Vec<Block>) -> Vec<Block> {
    let mut kept: Vec<Block> = Vec::with_capacity(blocks.len());
    for block in blocks.into_iter().rev() {
        if !kept.contains(&block) {
            kept.push(block);
        }
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate;
    use serde_json::json;

    fn conversation() -> Conversation {
        Conversation::from_value(json!({
            "system": "sys",
            "model": "m",
            "messages": [
                {"role": "user", "content": "fix the bug"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
                {"role": "assistant", "content": "fixed"},
                {"role": "user", "content": "thanks, now the docs"},
                {"role": "assistant", "content": "on it"}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn assembles_before_a_user_turn_and_splits_back() {
        let conversation = conversation();
        let pinned = conversation.messages[0].content.clone();
        let out = assemble(&conversation, Some("did things"), &pinned, &conversation.messages[4..]);
        assert!(validate(&out).is_empty());
        assert_eq!(out.messages.len(), 2);
        assert_eq!(out.system, conversation.system);
        assert_eq!(out.extra["model"], "m");
        let split = split_summary(&out.messages[0]).expect("a summary");
        assert_eq!(split.pinned, pinned);
        assert_eq!(split.summary, "did things");
        assert_eq!(split.rest, conversation.messages[4].content);
        assert!(is_summary_message(&out.messages[0]));
        assert!(!is_summary_message(&conversation.messages[0]));
    }

    #[test]
    fn assembles_before_an_assistant_message() {
        let conversation = conversation();
        let out = assemble(&conversation, Some("s"), &[], &conversation.messages[3..]);
        assert!(validate(&out).is_empty());
        assert_eq!(out.messages.len(), 4);
        assert_eq!(out.messages[0].content.len(), 1);
        let out = assemble(&conversation, None, &[], &conversation.messages[3..]);
        assert_eq!(out.messages[0].content[0].as_text(), Some(OMITTED_MARKER));
        assert!(validate(&out).is_empty());
    }

    #[test]
    fn a_summary_merged_into_harness_text_is_found() {
        let message = Message::new(
            Role::User,
            vec![Block::text(format!(
                "Please always provide EXACTLY ONE action.\n{SUMMARY_PREFIX}\n## Files read\n- a.py"
            ))],
        );
        let split = split_summary(&message).expect("a summary");
        assert_eq!(split.summary, "## Files read\n- a.py");
        assert_eq!(split.rest[0].as_text(), Some("Please always provide EXACTLY ONE action."));
        assert!(split.pinned.is_empty());
    }

    #[test]
    fn the_recall_note_is_left_out_when_split() {
        let conversation = conversation();
        for tool in ["context_recall", "mcp__cf__context_recall"] {
            let summary = with_recall_note("did things\n", tool);
            let out = assemble(&conversation, Some(&summary), &[], &conversation.messages[4..]);
            let text = out.messages[0].content[0].as_text().unwrap_or_default();
            assert!(text.ends_with(&format!("did things\n\n{}", recall_note(tool))), "{text}");
            assert!(recall_note(tool).contains(&format!("call {tool} with the ref")));
            assert_eq!(split_summary(&out.messages[0]).expect("a summary").summary, "did things");
        }
    }

    #[test]
    fn a_repeated_reminder_is_kept_once_the_newest() {
        let system = |text: &str| Message::text(Role::System, text);
        let conversation = conversation();
        let kept: Vec<Message> =
            (0..100).flat_map(|turn| [system("a file changed"), system(&format!("turn {turn}"))]).collect();
        let out = assemble_keeping(&conversation, Some("s"), &[], &kept[..5], &conversation.messages[3..]);
        assert!(validate(&out).is_empty(), "{:?}", validate(&out));
        let texts: Vec<_> = out.messages[1].content.iter().filter_map(Block::as_text).collect();
        assert_eq!(texts, ["turn 0", "turn 1", "a file changed"]);
        let out = assemble_keeping(&conversation, Some("s"), &[], &kept, &conversation.messages[3..]);
        assert_eq!(out.messages[1].content.len(), 101, "one copy of the reminder and each distinct turn");
    }

    #[test]
    fn head_system_messages_follow_the_summary_verbatim() {
        let system = |text: &str| Message::text(Role::System, text);
        let conversation = conversation();
        let kept = [system("be terse"), system("plan mode")];
        // The tail starts with an assistant message: the kept message sits between.
        let out = assemble_keeping(&conversation, Some("s"), &[], &kept, &conversation.messages[3..]);
        assert!(validate(&out).is_empty(), "{:?}", validate(&out));
        assert_eq!(out.messages[1].role, Role::System);
        let texts: Vec<_> = out.messages[1].content.iter().filter_map(Block::as_text).collect();
        assert_eq!(texts, ["be terse", "plan mode"]);
        // The tail starts with a user turn that has a system message of its own: the kept
        // text goes before it, in the same message.
        let mut tail = conversation.messages[4..].to_vec();
        tail.insert(1, system("tail's own"));
        let out = assemble_keeping(&conversation, Some("s"), &[], &kept[..1], &tail);
        assert!(validate(&out).is_empty(), "{:?}", validate(&out));
        let texts: Vec<_> = out.messages[1].content.iter().filter_map(Block::as_text).collect();
        assert_eq!(texts, ["be terse", "tail's own"]);
        assert_eq!(out.messages.len(), 3);
        // One kept message alone is kept byte for byte; nothing kept changes nothing.
        let out = assemble_keeping(&conversation, Some("s"), &[], &kept[..1], &conversation.messages[3..]);
        assert_eq!(out.messages[1], kept[0]);
        assert_eq!(
            assemble_keeping(&conversation, Some("s"), &[], &[], &conversation.messages[3..]),
            assemble(&conversation, Some("s"), &[], &conversation.messages[3..])
        );
    }
}
