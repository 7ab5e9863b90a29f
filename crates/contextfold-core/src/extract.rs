//! Deterministic facts from a span of messages: what the user asked, which files were read
//! and changed, which commands ran and how they ended, which errors appeared and whether a
//! later step fixed them, and the last stated next step.
//!
//! Facts feed the offline summary, the check that an LLM summary kept what matters, and the
//! `extract_recall` probes of replay. Everything is derived from the tool presets in
//! [`crate::tools`] and from plain text patterns ([`crate::text`]), so the same messages
//! always give the same facts. The independent probes ([`crate::probe::raw`]) read failures
//! separately on purpose: they judge what a summary built from these facts kept, so they
//! may not share its code.

use crate::conversation::{Block, Message, Role, ToolUse};
use crate::harness::authored_text;
use crate::summary::SUMMARY_PREFIX;
pub use crate::text::Outcome;
use crate::text::{clip_chars, error_line, first_line, outcome, strip_list_marker};
use crate::tools::{classify, shell_changes, Action, ActionKind, Preset};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

/// Everything [`extract`] found.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Facts {
    /// Every user-authored text, in order.
    pub user_asks: Vec<Ask>,
    /// Files read, each once, in order of their last read.
    pub files_read: Vec<FileRead>,
    /// Files created or modified, one entry per change.
    pub files_changed: Vec<FileChange>,
    /// Shell commands and how they ended.
    pub commands: Vec<CommandRun>,
    /// Errors seen, and whether a later step fixed them.
    pub errors: Vec<ErrorSeen>,
    /// The assistant's statements of a decision or a finding.
    pub decisions: Vec<String>,
    /// The last stated plan or next step.
    pub next_step: Option<String>,
    /// The last assistant text, whitespace folded and cut to [`LAST_TEXT_CHARS`]: where
    /// agents say what they found or are about to do.
    pub last_assistant_text: Option<String>,
}

/// How much of the last assistant text [`Facts::last_assistant_text`] keeps.
pub const LAST_TEXT_CHARS: usize = 300;

/// A user's own words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ask {
    /// Index of the message within the span.
    pub message: usize,
    /// The text.
    pub text: String,
}

/// A file that was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileRead {
    /// Its path.
    pub path: String,
    /// The tool used.
    pub tool: String,
    /// Index of the last read.
    pub message: usize,
}

/// A change to a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Its path.
    pub path: String,
    /// The tool used.
    pub tool: String,
    /// Created (written whole) or edited.
    pub kind: ActionKind,
    /// One line on what changed.
    pub what: String,
    /// Index of the message with the call.
    pub message: usize,
    /// Whether the call deleted the file.
    pub deleted: bool,
}

/// A shell command that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandRun {
    /// The command (its first line).
    pub command: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Index of the message with the call.
    pub message: usize,
}

/// An error a tool reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorSeen {
    /// The tool.
    pub tool: String,
    /// The command, file or pattern it acted on.
    pub target: Option<String>,
    /// The most telling line of the error.
    pub first_line: String,
    /// Index of the message with the result.
    pub message: usize,
    /// Whether a later call of the same tool on the same target succeeded.
    pub fixed: bool,
}

/// Extracts the facts of `messages` with the tool names of `preset`.
pub fn extract(messages: &[Message], preset: Preset) -> Facts {
    let mut facts = Facts::default();
    let mut calls: HashMap<&str, (&ToolUse, Action, usize)> = HashMap::new();
    // (tool, target) of each failure still open, with its index in `facts.errors`.
    let mut open_errors: Vec<(String, Option<String>, usize)> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        for block in &message.content {
            match block {
                Block::Text(text) if message.role == Role::User => {
                    // A summary is folded by the plan, never asked again; harness text is
                    // not the user's.
                    let before_summary = text.text.split(SUMMARY_PREFIX).next().unwrap_or("");
                    if let Some(ask) = authored_text(before_summary) {
                        if !facts.user_asks.iter().any(|seen| seen.text == ask) {
                            facts.user_asks.push(Ask { message: index, text: ask });
                        }
                    }
                }
                // A mid-conversation system message stays where it is, verbatim: it is
                // neither a decision nor what the assistant said last.
                Block::Text(_) if message.role == Role::System => {}
                Block::Text(text) => {
                    facts.decisions.extend(decisions(&text.text));
                    if let Some(step) = next_step(&text.text) {
                        facts.next_step = Some(step);
                    }
                    let folded = text.text.split_whitespace().collect::<Vec<_>>().join(" ");
                    if !folded.is_empty() {
                        facts.last_assistant_text = Some(clip_chars(&folded, LAST_TEXT_CHARS));
                    }
                }
                Block::ToolUse(tool_use) => {
                    let action = classify(preset, &tool_use.name, &tool_use.input);
                    let shell = shell_command(tool_use);
                    match (action.kind, &action.target) {
                        (ActionKind::FileRead, Some(path)) => facts.files_read.push(FileRead {
                            path: path.clone(),
                            tool: tool_use.name.clone(),
                            message: index,
                        }),
                        (kind, Some(path)) if kind.changes_file() && shell.is_none() => {
                            facts.files_changed.push(FileChange {
                                path: path.clone(),
                                tool: tool_use.name.clone(),
                                kind,
                                what: what_changed(tool_use, kind),
                                message: index,
                                deleted: false,
                            })
                        }
                        (ActionKind::Shell, _) => facts.commands.push(CommandRun {
                            command: first_line(&command_text(tool_use), 200),
                            outcome: Outcome::Unknown,
                            message: index,
                        }),
                        _ => {}
                    }
                    // A shell command may change many files, in any of its steps.
                    for change in shell.as_deref().map(shell_changes).unwrap_or_default() {
                        let verb = if change.deleted {
                            "deleted"
                        } else if change.kind == ActionKind::FileEdit {
                            "edited"
                        } else {
                            "written"
                        };
                        facts.files_changed.push(FileChange {
                            path: change.path,
                            tool: tool_use.name.clone(),
                            kind: change.kind,
                            what: format!("{verb} by `{}`", change.step),
                            message: index,
                            deleted: change.deleted,
                        });
                    }
                    calls.insert(&tool_use.id, (tool_use, action, facts.commands.len()));
                }
                Block::ToolResult(result) => {
                    let Some((tool_use, action, command_slot)) = calls.get(result.tool_use_id.as_str()) else {
                        continue;
                    };
                    let outcome = outcome(result);
                    if action.kind == ActionKind::Shell {
                        if let Some(command) = command_slot.checked_sub(1).and_then(|slot| facts.commands.get_mut(slot))
                        {
                            command.outcome = outcome;
                        }
                    }
                    let key = (tool_use.name.clone(), error_key(action));
                    match outcome {
                        Outcome::Failed(_) => {
                            // Earlier failures of the same step stay open: a later success
                            // fixes them all.
                            open_errors.push((key.0.clone(), key.1.clone(), facts.errors.len()));
                            facts.errors.push(ErrorSeen {
                                tool: key.0,
                                target: action.target.clone(),
                                first_line: error_line(&result.text()),
                                message: index,
                                fixed: false,
                            });
                        }
                        Outcome::Ok => {
                            open_errors.retain(|(tool, target, slot)| {
                                let same = (tool, target) == (&key.0, &key.1);
                                if same {
                                    if let Some(error) = facts.errors.get_mut(*slot) {
                                        error.fixed = true;
                                    }
                                }
                                !same
                            });
                        }
                        Outcome::Unknown => {}
                    }
                }
                _ => {}
            }
        }
    }
    // Each file once, at its last read.
    let mut seen = std::collections::HashSet::new();
    facts.files_read.reverse();
    facts.files_read.retain(|read| seen.insert(read.path.clone()));
    facts.files_read.reverse();
    facts
}

/// What identifies "the same step" when deciding whether a later success fixed an error:
/// the target, except that shell commands match by the program they run (any test runner
/// counts as the same), so `pytest tests/a.py` is fixed by a later passing `python -m pytest`.
pub fn error_key(action: &Action) -> Option<String> {
    if action.kind != ActionKind::Shell {
        return action.target.clone();
    }
    let step = crate::tools::main_step(action.target.as_deref().unwrap_or(""));
    let words: Vec<&str> = step.split('|').next().unwrap_or(step).split_whitespace().collect();
    const TEST_RUNNERS: [&str; 9] =
        ["pytest", "runtests", "tox", "jest", "vitest", "unittest", "nose", "rspec", "phpunit"];
    let runs_tests = words.iter().any(|word| TEST_RUNNERS.iter().any(|runner| word.contains(runner)))
        || matches!(words.as_slice(), [tool, "test", ..] if ["cargo", "go", "npm", "yarn", "pnpm", "make", "mvn", "gradle", "bin/test"].contains(tool));
    if runs_tests {
        return Some("tests".to_string());
    }
    words.first().map(|program| program.to_string())
}

/// The command line of a shell tool call; `None` for other tools (editors take a
/// `command` argument too).
fn shell_command(tool_use: &ToolUse) -> Option<String> {
    let name = tool_use.name.to_ascii_lowercase();
    if name.contains("edit") || name.contains("patch") {
        return None;
    }
    match tool_use.input.get("command").or_else(|| tool_use.input.get("cmd")) {
        Some(Value::String(_) | Value::Array(_)) => Some(command_text(tool_use)),
        _ => None,
    }
}

fn command_text(tool_use: &ToolUse) -> String {
    match tool_use.input.get("command").or_else(|| tool_use.input.get("cmd")) {
        Some(Value::String(command)) => command.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
        _ => tool_use.input.to_string(),
    }
}

fn what_changed(tool_use: &ToolUse, kind: ActionKind) -> String {
    let input = &tool_use.input;
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    if let (Some(old), Some(new)) = (text("old_string").or(text("old_str")), text("new_string").or(text("new_str"))) {
        // Show the first non-blank line that differs, not a shared or a blank one.
        let (old_lines, new_lines): (Vec<&str>, Vec<&str>) = (
            old.lines().filter(|line| !line.trim().is_empty()).collect(),
            new.lines().filter(|line| !line.trim().is_empty()).collect(),
        );
        let same = old_lines.iter().zip(&new_lines).take_while(|(a, b)| a.trim() == b.trim()).count();
        return match (old_lines.get(same), new_lines.get(same)) {
            (None, Some(new_line)) => format!("added `{}`", first_line(new_line, 80)),
            (Some(old_line), None) => format!("removed `{}`", first_line(old_line, 80)),
            (Some(old_line), Some(new_line)) => {
                format!("replaced `{}` with `{}`", first_line(old_line, 60), first_line(new_line, 60))
            }
            (None, None) => "changed white space".to_string(),
        };
    }
    if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        return format!("{} edits", edits.len());
    }
    if let Some(content) = text("content").or(text("file_text")) {
        return format!("wrote {} lines", content.lines().count());
    }
    let command = command_text(tool_use);
    match kind {
        ActionKind::FileWrite => format!("created by `{}`", first_line(&command, 80)),
        _ => format!("edited by `{}`", first_line(&command, 80)),
    }
}

/// The sentences of `text`: split after `.`, `!` or `?` followed by white space, and at
/// line ends, so `0.16` and `Invoice.total()` stay whole.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next_is_space = chars.peek().is_none_or(|(_, next)| next.is_whitespace());
        if c == '\n' || (matches!(c, '.' | '!' | '?') && next_is_space) {
            let end = at + c.len_utf8();
            pieces.push(&text[start..end]);
            start = end;
        }
    }
    pieces.push(&text[start..]);
    pieces.into_iter().map(str::trim).filter(|sentence| sentence.len() > 3)
}

/// `text` without its fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Whether a sentence asks or guesses rather than states, or is code.
fn is_question_or_code(sentence: &str) -> bool {
    const HEDGES: [&str; 8] = ["maybe", "perhaps", "i wonder", "what if", "why ", "could it", "is it ", "might be"];
    const CODE: [&str; 9] = ["#", "//", ">>>", "$ ", "def ", "import ", "from ", "class ", "return "];
    let lower = sentence.trim().to_lowercase();
    lower.ends_with('?')
        || HEDGES.iter().any(|hedge| lower.starts_with(hedge))
        || CODE.iter().any(|code| lower.starts_with(code))
        || lower.contains(" = ")
        || lower.contains("==")
}

fn decisions(text: &str) -> Vec<String> {
    const CUES: [&str; 8] =
        ["decided", "instead of", "root cause", "the fix is", "the problem is", "the issue is", "because", "turns out"];
    sentences(&prose(text))
        .filter(|sentence| {
            let lower = sentence.to_lowercase();
            CUES.iter().any(|cue| lower.contains(cue)) && !is_question_or_code(sentence)
        })
        .map(|sentence| clip_chars(strip_list_marker(sentence), 240))
        .collect()
}

/// The last sentence of `text` that states a plan or next step.
fn next_step(text: &str) -> Option<String> {
    const CUES: [&str; 8] = ["next", "now ", "let me", "i'll", "i will", "then ", "plan", "todo"];
    sentences(&prose(text))
        .filter(|sentence| {
            let lower = sentence.to_lowercase();
            CUES.iter().any(|cue| lower.contains(cue)) && !is_question_or_code(sentence)
        })
        .last()
        .map(|sentence| clip_chars(strip_list_marker(sentence), 300))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Conversation;
    use serde_json::json;

    fn facts(messages: Value) -> Facts {
        extract(&Conversation::from_value(messages).unwrap().messages, Preset::Auto)
    }

    #[test]
    fn a_system_message_is_neither_the_last_text_nor_a_decision_nor_a_next_step() {
        let facts = facts(json!([
            {"role": "user", "content": "Fix the failing test."},
            {"role": "assistant", "content": "I decided to use Decimal. Next I will run the tests."},
            {"role": "user", "content": "go on"},
            {"role": "system", "content": "We decided to keep the public API. Next, run the linter."}
        ]));
        assert_eq!(facts.last_assistant_text.as_deref(), Some("I decided to use Decimal. Next I will run the tests."));
        assert!(facts.decisions.iter().all(|decision| !decision.contains("public API")), "{:?}", facts.decisions);
        assert!(facts.next_step.as_deref().is_none_or(|step| !step.contains("linter")), "{:?}", facts.next_step);
    }

    #[test]
    fn files_commands_errors_and_asks() {
        let facts = facts(json!([
            {"role": "user", "content": "Fix the failing test in billing. Keep rounding half-up."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "1", "name": "Read", "input": {"file_path": "billing/invoice.py"}},
                {"type": "tool_use", "id": "2", "name": "Bash", "input": {"command": "pytest -q"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "1", "content": "code"},
                {"type": "tool_result", "tool_use_id": "2", "content": "Exit code 1\nE   AssertionError: 0.30 != 0.15\nFAILED tests/test_invoice.py::test_total", "is_error": true}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "The root cause is banker's rounding. Let me switch to quantize."},
                {"type": "tool_use", "id": "3", "name": "Edit", "input": {"file_path": "billing/invoice.py", "old_string": "round(total, 2)", "new_string": "total.quantize(CENT)"}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "3", "content": "ok"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "4", "name": "bash", "input": {"command": "pytest -q"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "4", "content": "<returncode>0</returncode>\n<output>7 passed</output>"}]}
        ]));
        assert_eq!(facts.user_asks[0].text, "Fix the failing test in billing. Keep rounding half-up.");
        assert_eq!(facts.files_read[0].path, "billing/invoice.py");
        assert_eq!(facts.files_changed[0].what, "replaced `round(total, 2)` with `total.quantize(CENT)`");
        assert_eq!(facts.commands[0].outcome, Outcome::Failed(Some(1)));
        assert_eq!(facts.commands[1].outcome, Outcome::Ok);
        assert_eq!(facts.errors.len(), 1);
        assert_eq!(
            facts.errors[0].first_line, "E   AssertionError: 0.30 != 0.15 … FAILED tests/test_invoice.py::test_total",
            "the exception, and the failing test the runner named"
        );
        assert!(!facts.errors[0].fixed, "a different tool name (Bash vs bash) is a different call");
        assert_eq!(facts.decisions, ["The root cause is banker's rounding."]);
        assert_eq!(facts.next_step.as_deref(), Some("Let me switch to quantize."));
    }

    #[test]
    fn a_later_success_fixes_an_error() {
        let facts = facts(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "1", "name": "execute_bash", "input": {"command": "make"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "1", "content": "error: x\n[Command finished with exit code 2]"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "2", "name": "execute_bash", "input": {"command": "make"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "2", "content": "[Command finished with exit code 0]"}]}
        ]));
        assert_eq!(facts.commands[0].outcome, Outcome::Failed(Some(2)));
        assert!(facts.errors[0].fixed);
    }

    #[test]
    fn a_later_success_fixes_every_earlier_failure_of_the_step() {
        let step = |id: &str, output: &str| {
            [
                json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "bash", "input": {"command": "pytest -q"}}]}),
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}),
            ]
        };
        let mut messages = vec![json!({"role": "user", "content": "go"})];
        messages.extend(step("1", "<returncode>1</returncode>\nE   ImportError: no module x"));
        messages.extend(step("2", "<returncode>1</returncode>\nE   AssertionError: 1 != 2"));
        let open = facts(Value::Array(messages.clone()));
        assert_eq!(open.errors.iter().map(|error| error.fixed).collect::<Vec<_>>(), [false, false]);
        messages.extend(step("3", "<returncode>0</returncode>\n3 passed"));
        let fixed = facts(Value::Array(messages));
        assert_eq!(fixed.errors.iter().map(|error| error.fixed).collect::<Vec<_>>(), [true, true]);
    }
}
