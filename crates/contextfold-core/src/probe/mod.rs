//! Recall probes: facts of folded-away messages, and whether the next request still has them.
//!
//! Two sets. The headline, [`independent_probes`] ([`raw`]), is read straight from the raw
//! blocks with rules of its own, so a fact the summarizer drops still counts against it: the
//! first request, the opening of every later user-authored text, every path a tool call
//! wrote, the telling line of every failed output, and the opening of the last assistant
//! text. The second, [`probes`], comes from [`extract`](crate::extract) facts, the same facts
//! the extractive summary is built from (`extract_recall` in replay): the first request, each
//! later ask, each file changed, each error no later step fixed, and the last stated next
//! step, cut to their first 120 characters at a word boundary.
//!
//! A probe is recalled when its normalized text ([`normalize`]: lowercase, whitespace
//! folded, double quotes, backticks and asterisks dropped) occurs in the normalized text of
//! the next request the model sees: system prompt, summary, pointers, tool calls and the
//! verbatim tail.

pub mod raw;
pub mod written;

pub use raw::{folded_probes, independent_probes, MessageProbes, ProbeReader};
pub use written::written_paths;

use crate::check::normalize;
use crate::conversation::{Block, Conversation, Message, ToolResultContent};
use crate::extract::Facts;
use serde::Serialize;

/// What a probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProbeKind {
    /// The user's first request.
    FirstRequest,
    /// A later user ask.
    UserAsk,
    /// A file created or modified.
    FileChanged,
    /// An error no later step fixed.
    UnresolvedError,
    /// The last stated next step.
    NextStep,
    /// The telling line of a failed tool output, fixed later or not.
    Error,
    /// The opening of the last assistant text.
    LastAssistant,
}

impl ProbeKind {
    /// The kinds of [`independent_probes`], in report order.
    pub const INDEPENDENT: [ProbeKind; 5] = [
        ProbeKind::FirstRequest,
        ProbeKind::UserAsk,
        ProbeKind::FileChanged,
        ProbeKind::Error,
        ProbeKind::LastAssistant,
    ];

    /// The kinds of the extract-based [`probes`], in report order.
    pub const EXTRACT: [ProbeKind; 5] = [
        ProbeKind::FirstRequest,
        ProbeKind::UserAsk,
        ProbeKind::FileChanged,
        ProbeKind::UnresolvedError,
        ProbeKind::NextStep,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::FirstRequest => "first_request",
            ProbeKind::UserAsk => "user_ask",
            ProbeKind::FileChanged => "file_changed",
            ProbeKind::UnresolvedError => "unresolved_error",
            ProbeKind::NextStep => "next_step",
            ProbeKind::Error => "error",
            ProbeKind::LastAssistant => "last_assistant",
        }
    }
}

/// One fact to look for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// What it checks.
    pub kind: ProbeKind,
    /// The normalized text that must be present.
    pub text: String,
}

/// The most characters of a probe's text.
pub const PROBE_CHARS: usize = 120;

/// `text` normalized and cut to [`PROBE_CHARS`] characters at a word boundary.
pub fn probe_text(text: &str) -> String {
    let normalized = normalize(text);
    if normalized.chars().count() <= PROBE_CHARS {
        return normalized;
    }
    let cut = normalized.char_indices().nth(PROBE_CHARS).map_or(normalized.len(), |(at, _)| at);
    let head = &normalized[..cut];
    head.rfind(' ').map_or(head, |space| &head[..space]).to_string()
}

/// The probes of `facts`. `first_is_conversation_start` says whether the first ask in the
/// facts is the conversation's first request.
pub fn probes(facts: &Facts, first_is_conversation_start: bool) -> Vec<Probe> {
    let mut probes = Vec::new();
    let mut push = |kind, text: &str| {
        let text = probe_text(text);
        if text.len() >= 3 && !probes.iter().any(|probe: &Probe| probe.text == text) {
            probes.push(Probe { kind, text });
        }
    };
    for (index, ask) in facts.user_asks.iter().enumerate() {
        let kind = if index == 0 && first_is_conversation_start { ProbeKind::FirstRequest } else { ProbeKind::UserAsk };
        push(kind, &ask.text);
    }
    for change in &facts.files_changed {
        push(ProbeKind::FileChanged, &change.path);
    }
    for error in facts.errors.iter().filter(|error| !error.fixed) {
        push(ProbeKind::UnresolvedError, &error.first_line);
    }
    if let Some(step) = &facts.next_step {
        push(ProbeKind::NextStep, step);
    }
    probes
}

fn push_blocks(out: &mut String, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Text(text) => out.push_str(&text.text),
            Block::ToolUse(tool_use) => {
                out.push_str(&tool_use.name);
                out.push(' ');
                out.push_str(&tool_use.input.to_string());
                // String arguments also count as written, unescaped.
                if let Some(fields) = tool_use.input.as_object() {
                    for value in fields.values().filter_map(|value| value.as_str()) {
                        out.push('\n');
                        out.push_str(value);
                    }
                }
            }
            Block::ToolResult(result) => match &result.content {
                Some(ToolResultContent::Text(text)) => out.push_str(text),
                Some(ToolResultContent::Blocks(inner)) => push_blocks(out, inner),
                None => {}
            },
            Block::Thinking(thinking) => out.push_str(&thinking.thinking),
            _ => {}
        }
        out.push('\n');
    }
}

/// The normalized text of a request: what the model can read.
pub fn request_text(system: Option<&str>, messages: &[Message]) -> String {
    let parts = system.map(normalize).into_iter().chain(messages.iter().map(message_text)).collect::<Vec<_>>();
    join_texts(parts.iter().map(String::as_str))
}

/// The normalized text of one message. Joined with [`join_texts`], these give the
/// [`request_text`], so a caller that sees the same messages many times can keep them.
pub fn message_text(message: &Message) -> String {
    let mut out = String::new();
    push_blocks(&mut out, &message.content);
    normalize(&out)
}

/// Normalized texts joined as normalizing their concatenation would: one space between
/// non-empty parts (every part ends in whitespace before normalization).
pub fn join_texts<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for part in parts.into_iter().filter(|part| !part.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

/// The normalized text of a whole conversation.
pub fn conversation_text(conversation: &Conversation) -> String {
    request_text(conversation.system.as_ref().map(|system| system.text()).as_deref(), &conversation.messages)
}

/// Whether `probe` is present in `normalized_request`.
pub fn is_recalled(normalized_request: &str, probe: &Probe) -> bool {
    normalized_request.contains(&probe.text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Role;
    use crate::extract::{Ask, ErrorSeen, FileChange};
    use crate::tools::ActionKind;

    #[test]
    fn probes_from_facts_and_their_recall() {
        let facts = Facts {
            user_asks: vec![
                Ask { message: 0, text: "Fix the **rounding** bug in `billing/invoice.py`.".into() },
                Ask { message: 4, text: "Also add a regression test. ".repeat(20) },
            ],
            files_changed: vec![FileChange {
                path: "billing/invoice.py".into(),
                tool: "Edit".into(),
                kind: ActionKind::FileEdit,
                what: "x".into(),
                message: 2,
                deleted: false,
            }],
            errors: vec![ErrorSeen {
                tool: "Bash".into(),
                target: None,
                first_line: "E AssertionError".into(),
                message: 3,
                fixed: false,
            }],
            next_step: Some("Next I will run the tests.".into()),
            ..Facts::default()
        };
        let probes = probes(&facts, true);
        let kinds: Vec<ProbeKind> = probes.iter().map(|probe| probe.kind).collect();
        assert_eq!(
            kinds,
            [
                ProbeKind::FirstRequest,
                ProbeKind::UserAsk,
                ProbeKind::FileChanged,
                ProbeKind::UnresolvedError,
                ProbeKind::NextStep
            ]
        );
        assert_eq!(probes[0].text, "fix the rounding bug in billing/invoice.py.");
        assert!(probes[1].text.chars().count() <= PROBE_CHARS);
        let request = request_text(
            Some("system"),
            &[Message::text(
                Role::User,
                "- \"Fix the rounding bug in billing/invoice.py.\"\n- edited billing/invoice.py",
            )],
        );
        assert!(is_recalled(&request, &probes[0]));
        assert!(is_recalled(&request, &probes[2]));
        assert!(!is_recalled(&request, &probes[3]));
    }
}
