//! Independent probes: facts read straight from the raw blocks of folded messages, with
//! rules of their own, never through [`crate::extract`] or [`crate::handoff`] (a metric may
//! not be computed by the code it judges).
//!
//! - **first request**: the first user-authored text of the conversation, its first
//!   [`PROBE_CHARS`](super::PROBE_CHARS) normalized characters;
//! - **user ask**: the opening ([`OPENING_CHARS`] normalized characters) of every later
//!   user-authored text block; harness and meta text ([`crate::harness`]) is not the user's;
//! - **file changed**: every path a tool call created or modified ([`written_paths`]);
//! - **error**: the first telling line of every failed tool output (error flag or a non-zero
//!   exit code): for a Python traceback its exception line, else the first line naming an
//!   error, else the first line of output; its first [`ERROR_CHARS`] normalized characters;
//! - **last assistant**: the opening of the last assistant text of the folded messages.

use super::written::written_paths;
use super::{Probe, ProbeKind};
use crate::check::normalize;
use crate::conversation::{Block, Message, Role, ToolResult};
use crate::harness::authored_text;
use std::collections::HashSet;

/// How many normalized characters of a text's opening a probe holds.
pub const OPENING_CHARS: usize = 60;

/// How many normalized characters of an error's telling line a probe holds.
pub const ERROR_CHARS: usize = 80;

/// The probes of one message, as [`ProbeReader::read`] finds them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageProbes {
    /// Its probes, in order.
    pub probes: Vec<Probe>,
    /// The opening of its last assistant text: a last-assistant probe when no later folded
    /// message has one.
    pub assistant_opening: Option<String>,
}

/// Reads a conversation's messages in order: the probes of each depend on what came before
/// (which text is the first request, which call a result answers).
#[derive(Debug, Default)]
pub struct ProbeReader {
    first_seen: bool,
    calls: HashSet<String>,
}

impl ProbeReader {
    /// The probes of `message`, the next message of the conversation.
    pub fn read(&mut self, message: &Message) -> MessageProbes {
        let mut out = MessageProbes::default();
        for block in &message.content {
            match block {
                Block::Text(text) if message.role == Role::User => {
                    let Some(authored) = authored_text(&text.text) else { continue };
                    if !std::mem::replace(&mut self.first_seen, true) {
                        out.probes.push(Probe { kind: ProbeKind::FirstRequest, text: super::probe_text(&authored) });
                    } else {
                        out.probes.push(Probe { kind: ProbeKind::UserAsk, text: opening(&authored, OPENING_CHARS) });
                    }
                }
                Block::Text(text) if message.role == Role::Assistant && !text.text.trim().is_empty() => {
                    out.assistant_opening = Some(opening(&text.text, OPENING_CHARS));
                }
                Block::ToolUse(tool_use) => {
                    self.calls.insert(tool_use.id.clone());
                    for path in written_paths(&tool_use.name, &tool_use.input) {
                        out.probes.push(Probe { kind: ProbeKind::FileChanged, text: normalize(&path) });
                    }
                }
                Block::ToolResult(result) if self.calls.contains(&result.tool_use_id) => {
                    if let Some(line) = failure_line(result) {
                        out.probes.push(Probe { kind: ProbeKind::Error, text: opening(&line, ERROR_CHARS) });
                    }
                }
                _ => {}
            }
        }
        out.probes.retain(|probe| probe.text.chars().count() >= 3);
        out
    }
}

/// The probes of the folded messages of a conversation, from the probes of every message
/// ([`ProbeReader`], in order) and which of them are folded: each text once, and the
/// opening of the last folded assistant text.
pub fn folded_probes<'a>(messages: impl IntoIterator<Item = (&'a MessageProbes, bool)>) -> Vec<Probe> {
    let mut probes: Vec<Probe> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut last_assistant = None;
    for (message, folded) in messages {
        if !folded {
            continue;
        }
        for probe in &message.probes {
            if seen.insert(&probe.text) {
                probes.push(probe.clone());
            }
        }
        last_assistant = message.assistant_opening.as_deref().or(last_assistant);
    }
    if let Some(text) = last_assistant.filter(|text| text.chars().count() >= 3 && !seen.contains(text)) {
        probes.push(Probe { kind: ProbeKind::LastAssistant, text: text.to_string() });
    }
    probes
}

/// The probes of `folded`, a span of a conversation read on its own.
/// `first_is_conversation_start` says whether it starts with the conversation's first message.
pub fn independent_probes(folded: &[Message], first_is_conversation_start: bool) -> Vec<Probe> {
    let mut reader = ProbeReader { first_seen: !first_is_conversation_start, ..ProbeReader::default() };
    let read: Vec<MessageProbes> = folded.iter().map(|message| reader.read(message)).collect();
    folded_probes(read.iter().map(|probes| (probes, true)))
}

/// The first `chars` characters of `text` normalized, without a trailing space.
fn opening(text: &str, chars: usize) -> String {
    let normalized = normalize(text);
    let end = normalized.char_indices().nth(chars).map_or(normalized.len(), |(at, _)| at);
    normalized[..end].trim_end().to_string()
}

/// The exit code an agent printed with a tool's output, if any.
fn exit_code(text: &str) -> Option<i64> {
    let after = |marker: &str| -> Option<i64> {
        let at = text.find(marker)? + marker.len();
        let rest = text[at..].trim_start_matches([' ', ':']);
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    after("<returncode>")
        .or_else(|| after("[Command finished with exit code"))
        .or_else(|| text.trim_start().starts_with("Exit code").then(|| after("Exit code")).flatten())
}

/// The telling line of a failed output; `None` when the call succeeded.
fn failure_line(result: &ToolResult) -> Option<String> {
    let text = result.text();
    let failed = match exit_code(&text) {
        Some(code) => code != 0,
        None => result.is_error(),
    };
    if !failed {
        return None;
    }
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty() && !is_wrapper(line)).collect();
    // The exception line: the first line after the traceback's header at the left margin
    // (frames and code are indented).
    let mut after_header =
        text.lines().skip_while(|line| !line.trim_start().starts_with("Traceback (most recent call last)")).skip(1);
    if let Some(line) = after_header.find(|line| !line.trim().is_empty() && !line.starts_with(char::is_whitespace)) {
        return Some(line.trim().to_string());
    }
    const CUES: [&str; 12] = [
        "error",
        "Error",
        "ERROR",
        "FAILED",
        "failed",
        "fatal",
        "panicked",
        "Exception",
        "No such file",
        "not found",
        "denied",
        "cannot",
    ];
    let telling = lines.iter().find(|line| CUES.iter().any(|cue| line.contains(cue)));
    telling.or(lines.first()).map(|line| line.to_string())
}

/// Lines an agent's harness wraps output in: `<returncode>1</returncode>`, `<output>`,
/// `Exit code 1`.
fn is_wrapper(line: &str) -> bool {
    line.starts_with("<returncode>")
        || line.starts_with("<output")
        || line.starts_with("</output")
        || line.starts_with("[Command finished with exit code")
        || (line.starts_with("Exit code") && line.len() <= 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Conversation;
    use serde_json::json;

    #[test]
    fn probes_from_raw_blocks() {
        let messages = Conversation::from_value(json!([
            {"role": "user", "content": "Fix the rounding bug in billing/invoice.py."},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I found the cause: round() is banker's rounding. I will switch to quantize."},
                {"type": "tool_use", "id": "1", "name": "bash", "input": {"command": "git init && echo x > README.md && pytest -q"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "1", "content": "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"a.py\", line 1\n    x()\nValueError: bad value\n</output>"},
                {"type": "text", "text": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."}
            ]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "2", "name": "Bash", "input": {"command": "make"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "2", "content": "Exit code 2\ncc main.c\nmain.c:3: error: expected ';'", "is_error": true},
                {"type": "text", "text": "<system-reminder>note</system-reminder>Also add a regression test for negative totals, please, with a long explanation here."}
            ]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "3", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "3", "content": "ok", "is_error": false}]}
        ]))
        .unwrap()
        .messages;
        let probes: Vec<(ProbeKind, String)> =
            independent_probes(&messages, true).into_iter().map(|probe| (probe.kind, probe.text)).collect();
        assert_eq!(
            probes,
            [
                (ProbeKind::FirstRequest, "fix the rounding bug in billing/invoice.py.".to_string()),
                (ProbeKind::FileChanged, "readme.md".to_string()),
                (ProbeKind::Error, "valueerror: bad value".to_string()),
                (ProbeKind::Error, "main.c:3: error: expected ';'".to_string()),
                (ProbeKind::UserAsk, "also add a regression test for negative totals, please, with".to_string()),
                (ProbeKind::LastAssistant, "i found the cause: round() is banker's rounding. i will swit".to_string()),
            ]
        );
        // A span that does not start the conversation has no first request.
        let later = independent_probes(&messages[1..], false);
        assert!(later.iter().all(|probe| probe.kind != ProbeKind::FirstRequest));
    }
}
