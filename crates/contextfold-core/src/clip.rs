//! Clipping: a tool output larger than any budget keeps its first and last lines, with a
//! marker in the middle that says what was cut and how to get it back.
//!
//! Clipping works on whole lines where it can (a single huge line is cut at a character
//! boundary, never inside a UTF-8 character); one-line JSON is pretty-printed first so its
//! structure survives in the kept lines. It only ever reads as much of the output as it
//! keeps, plus a bounded prefix to tell whether the output is over the limit, so a 10 MB
//! output clips in milliseconds. A clipped output is under its limit, so clipping again
//! changes nothing.

use crate::conversation::{Block, Conversation, ToolResultContent, ToolUse};
use crate::hash::payload_ref;
use crate::tokens::{count_block, TokenCounter};
use crate::tools::{classify, ActionKind, Preset};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

/// How every clip marker starts.
pub const CLIP_PREFIX: &str = "[contextfold: clipped ";

/// The smallest limit clipping accepts: below it the marker alone would not fit.
pub const MIN_CLIP_TOKENS: u64 = 96;

/// How to clip.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClipConfig {
    /// Clip tool outputs over this many tokens (at least [`MIN_CLIP_TOKENS`]).
    pub max_tokens: u64,
    /// The share of the kept tokens taken from the start of the output (the rest from its end).
    pub head_ratio: f64,
    /// Tell the model it can fetch the full output with the recall tool.
    pub recall_tool: bool,
    /// Which tool names to recognise, for the restore hint.
    pub preset: Preset,
}

impl ClipConfig {
    /// Clips outputs over `max_tokens`, keeping 60% of the kept part from the start.
    pub fn new(max_tokens: u64) -> ClipConfig {
        ClipConfig {
            max_tokens: max_tokens.max(MIN_CLIP_TOKENS),
            head_ratio: 0.6,
            recall_tool: false,
            preset: Preset::Auto,
        }
    }
}

/// One clipped payload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Clipped {
    /// The ref of the full payload.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The tool that produced it.
    pub tool: String,
    /// Index of the message.
    pub message: usize,
    /// Index of the block.
    pub block: usize,
    /// Tokens of the block before clipping.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// The full payload (a string or a block list).
    #[serde(skip)]
    pub payload: Value,
}

/// The line-level result of clipping a text.
struct Kept<'a> {
    head: &'a str,
    tail: &'a str,
    cut_lines: usize,
    cut_bytes: usize,
}

/// Whether `text` holds more than `max` tokens, reading at most a bounded prefix when it does.
fn is_over(text: &str, max: u64, counter: &dyn TokenCounter) -> bool {
    // A prefix that is already over decides without reading the rest.
    let probe = text.floor_char_boundary(usize::try_from(max.saturating_mul(16)).unwrap_or(usize::MAX).min(text.len()));
    if counter.count_text(&text[..probe]) > max {
        return true;
    }
    probe < text.len() && counter.count_text(text) > max
}

/// The longest prefix of `text` (whole lines where possible) holding at most `budget` tokens.
fn take_head<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let mut end = 0;
    let mut used = 0;
    for line in text.split_inclusive('\n') {
        let tokens = counter.count_text(line);
        if used + tokens > budget {
            if end == 0 {
                // A first line too long on its own: cut it by characters.
                return cut_prefix(line, budget, counter);
            }
            break;
        }
        used += tokens;
        end += line.len();
    }
    &text[..end]
}

/// The longest suffix of `text` (whole lines where possible) holding at most `budget` tokens.
fn take_tail<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let mut start = text.len();
    let mut used = 0;
    for line in text.rsplit_terminator('\n') {
        let with_newline = (line.len() + 1).min(start);
        let piece = &text[start - with_newline..start];
        let tokens = counter.count_text(piece);
        if used + tokens > budget {
            if start == text.len() {
                return cut_suffix(piece, budget, counter);
            }
            break;
        }
        used += tokens;
        start -= with_newline;
    }
    &text[start..]
}

fn cut_prefix<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let mut end =
        text.floor_char_boundary(usize::try_from(budget.saturating_mul(4)).unwrap_or(usize::MAX).min(text.len()));
    while end > 0 && counter.count_text(&text[..end]) > budget {
        end = text.floor_char_boundary(end * 3 / 4);
    }
    &text[..end]
}

fn cut_suffix<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let want = usize::try_from(budget.saturating_mul(4)).unwrap_or(usize::MAX).min(text.len());
    let mut start = text.ceil_char_boundary(text.len() - want);
    while start < text.len() && counter.count_text(&text[start..]) > budget {
        start = text.ceil_char_boundary(start + ((text.len() - start) / 4).max(1));
    }
    &text[start..]
}

fn keep<'a>(text: &'a str, head_budget: u64, tail_budget: u64, counter: &dyn TokenCounter) -> Kept<'a> {
    let head = take_head(text, head_budget, counter);
    let rest = &text[head.len()..];
    let tail = take_tail(rest, tail_budget, counter);
    let middle = &rest[..rest.len() - tail.len()];
    Kept { head, tail, cut_lines: middle.lines().count(), cut_bytes: middle.len() }
}

fn short_bytes(bytes: usize) -> String {
    match bytes {
        0..=9_999 => format!("{bytes} bytes"),
        10_000..=9_999_999 => format!("{:.0} kB", bytes as f64 / 1000.0),
        _ => format!("{:.1} MB", bytes as f64 / 1_000_000.0),
    }
}

fn hint(kind: ActionKind, recall_tool: bool) -> &'static str {
    if recall_tool {
        return "call context_recall with this ref for the full output";
    }
    match kind {
        ActionKind::FileRead => "re-read the file (or a line range of it) for the rest",
        ActionKind::Search => "narrow the search for the rest",
        ActionKind::WebFetch => "fetch the URL again for the rest",
        _ => "re-run the command with narrower output for the rest",
    }
}

/// Clips `text` to at most `config.max_tokens` tokens; `None` when it is already within.
pub fn clip_text(
    text: &str,
    config: &ClipConfig,
    kind: ActionKind,
    reference: &str,
    counter: &dyn TokenCounter,
) -> Option<String> {
    let max = config.max_tokens.max(MIN_CLIP_TOKENS);
    if !is_over(text, max, counter) {
        return None;
    }
    // One-line JSON is easier to keep in part once it has lines.
    let pretty;
    let source = if !text.trim_end().contains('\n') && text.trim_start().starts_with(['{', '[']) {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => {
                pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
                pretty.as_str()
            }
            Err(_) => text,
        }
    } else {
        text
    };
    let marker = |kept: &Kept| {
        format!(
            "{CLIP_PREFIX}{} lines ({}) from the middle of this output — {}; ref {reference}]",
            kept.cut_lines,
            short_bytes(kept.cut_bytes),
            hint(kind, config.recall_tool)
        )
    };
    // Room for the kept lines: the limit less a generous marker allowance, shrunk until the
    // whole fits (token counts of joined pieces can differ slightly from their sum).
    let mut room = max.saturating_sub(
        counter.count_text(&marker(&Kept { head: "", tail: "", cut_lines: usize::MAX, cut_bytes: usize::MAX })) + 8,
    );
    loop {
        let head_budget = (room as f64 * config.head_ratio.clamp(0.0, 1.0)) as u64;
        let kept = keep(source, head_budget, room - head_budget, counter);
        let mut out = String::with_capacity(kept.head.len() + kept.tail.len() + 200);
        out.push_str(kept.head);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&marker(&kept));
        if !kept.tail.is_empty() {
            out.push('\n');
            out.push_str(kept.tail);
        }
        if counter.count_text(&out) <= max || room == 0 {
            return Some(out);
        }
        room = room * 3 / 4;
    }
}

/// Clips every tool_result in `conversation` larger than `config.max_tokens`, the newest
/// included. Images inside a clipped result become placeholders naming the result's ref.
pub fn clip(conversation: &mut Conversation, config: &ClipConfig, counter: &dyn TokenCounter) -> Vec<Clipped> {
    let calls: HashMap<String, ToolUse> = conversation
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolUse(tool_use) => Some((tool_use.id.clone(), tool_use.clone())),
            _ => None,
        })
        .collect();
    let mut clipped = Vec::new();
    for (index, message) in conversation.messages.iter_mut().enumerate() {
        for (position, block) in message.content.iter_mut().enumerate() {
            let tokens_before = count_block(counter, block);
            if tokens_before <= config.max_tokens {
                continue;
            }
            let Block::ToolResult(result) = block else { continue };
            let Some(content) = &result.content else { continue };
            let (tool, kind) = match calls.get(&result.tool_use_id) {
                Some(call) => (call.name.clone(), classify(config.preset, &call.name, &call.input).kind),
                None => ("?".to_string(), ActionKind::Other),
            };
            let payload = match content {
                ToolResultContent::Text(text) => Value::String(text.clone()),
                ToolResultContent::Blocks(blocks) => Value::Array(blocks.iter().map(Block::to_value).collect()),
            };
            let reference = payload_ref(&payload);
            let text = match content {
                ToolResultContent::Text(text) => text.clone(),
                ToolResultContent::Blocks(blocks) => blocks
                    .iter()
                    .map(|inner| match inner.as_text() {
                        Some(text) => text.to_string(),
                        None => format!("[{} removed from this output; ref {reference}]", inner.kind()),
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            let new_text = clip_text(&text, config, kind, &reference, counter).unwrap_or(text);
            result.content = Some(ToolResultContent::Text(new_text));
            let tokens_after = count_block(counter, block);
            clipped.push(Clipped {
                reference,
                tool,
                message: index,
                block: position,
                tokens_before,
                tokens_after,
                payload,
            });
        }
    }
    clipped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Chars4;

    fn config(max: u64) -> ClipConfig {
        ClipConfig::new(max)
    }

    #[test]
    fn keeps_head_and_tail_lines_with_a_marker() {
        let text: String = (0..10_000).map(|line| format!("line {line}\n")).collect();
        let out = clip_text(&text, &config(200), ActionKind::Shell, "cf-1", &Chars4).expect("clipped");
        assert!(Chars4.count_text(&out) <= 200);
        assert!(out.starts_with("line 0\nline 1\n"));
        assert!(out.trim_end().ends_with("line 9999"));
        assert!(out.contains(" lines (") && out.contains("from the middle of this output — re-run the command"));
        assert!(out.contains("ref cf-1]"));
        assert_eq!(clip_text(&out, &config(200), ActionKind::Shell, "cf-1", &Chars4), None, "idempotent");
    }

    #[test]
    fn one_huge_line_is_cut_at_a_character_boundary() {
        let text = "é".repeat(500_000);
        let out = clip_text(&text, &config(150), ActionKind::Other, "cf-2", &Chars4).expect("clipped");
        assert!(Chars4.count_text(&out) <= 150);
        assert!(out.starts_with('é'));
    }

    #[test]
    fn minified_json_is_pretty_printed_first() {
        let items: Vec<Value> = (0..5_000).map(|i| serde_json::json!({"id": i, "name": format!("item {i}")})).collect();
        let text = serde_json::to_string(&items).unwrap();
        let out = clip_text(&text, &config(300), ActionKind::WebFetch, "cf-3", &Chars4).expect("clipped");
        assert!(out.starts_with("[\n  {\n    \"id\": 0,"));
        assert!(out.trim_end().ends_with(']'));
    }

    #[test]
    fn clips_results_in_a_conversation_and_keeps_the_payload() {
        let big: String = (0..5_000).map(|line| format!("out {line}\n")).collect();
        let mut conversation = Conversation::from_value(serde_json::json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {"command": "git diff"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": big}, {"type": "image", "source": {"type": "url", "url": "u"}}]}]}
        ]))
        .unwrap();
        let clipped = clip(&mut conversation, &config(500), &Chars4);
        assert_eq!(clipped.len(), 1);
        assert_eq!(clipped[0].tool, "Bash");
        assert!(clipped[0].tokens_after <= 500 + 10);
        assert!(clipped[0].payload.is_array());
        assert!(crate::validate::validate(&conversation).is_empty());
        let Block::ToolResult(result) = &conversation.messages[2].content[0] else { panic!() };
        assert!(
            result.text().contains("[image removed from this output; ref cf-") || result.text().contains(CLIP_PREFIX)
        );
    }
}
