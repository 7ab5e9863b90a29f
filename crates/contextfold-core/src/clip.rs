//! Clipping: a tool output larger than any budget keeps its first and last lines, with a
//! marker in the middle that says what was cut (lines, tokens, bytes), names the ref of the
//! full output and says how to get it back. The marker of a failed output whose telling
//! error line was cut holds that line, so what went wrong stays in sight.
//!
//! Clipping works on whole lines where it can (a single huge line is cut at a character
//! boundary, never inside a UTF-8 character). One-line JSON is shown pretty-printed so its
//! structure survives in the kept lines: only its two ends are lexed and printed (the
//! `json` module), so a 10 MB document clips without being parsed. Clipping reads only what
//! it keeps, plus bounded prefixes and samples (to tell whether the output is over the
//! limit, and to estimate the tokens cut), and one byte scan for the lines cut, so a 10 MB
//! output clips in milliseconds. A clipped output is within its limit, so clipping again
//! changes nothing.

use crate::conversation::{Block, Conversation, ToolResultContent, ToolUse};
use crate::hash::payload_ref;
use crate::text::{error_line, outcome, Outcome};
use crate::tokens::{count_block, TokenCounter, BLOCK_OVERHEAD};
use crate::tools::{classify, ActionKind, Preset};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

mod json;
mod marker;

use marker::{marker, Cut};

/// How every clip marker starts.
pub const CLIP_PREFIX: &str = "[contextfold: clipped ";

/// The ref of the original an output clipped once names in its marker; `None` when it has no
/// marker, or more than one (an output that quotes others').
pub fn clipped_original_ref(text: &str) -> Option<&str> {
    let mut markers = text.lines().filter(|line| line.starts_with(CLIP_PREFIX));
    let (marker, None) = (markers.next()?, markers.next()) else { return None };
    let reference = marker.strip_suffix(']')?.rsplit_once("; ref ")?.1;
    let hex = reference.strip_prefix("cf-")?;
    (!hex.is_empty() && hex.bytes().all(|byte| byte.is_ascii_hexdigit())).then_some(reference)
}

/// The smallest limit clipping accepts: below it the marker alone would not fit.
pub const MIN_CLIP_TOKENS: u64 = 96;

/// How to clip.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClipConfig {
    /// Clip tool outputs over this many tokens (at least [`MIN_CLIP_TOKENS`]).
    pub max_tokens: u64,
    /// The share of the kept tokens taken from the start of the output (the rest from its end).
    pub head_ratio: f64,
    /// The name of the recall tool the model has, as in
    /// [`EvictConfig::recall_tool`](crate::evict::EvictConfig::recall_tool): the marker tells
    /// the model to fetch the full output with it, and that tool's own answers are never
    /// clipped.
    pub recall_tool: Option<String>,
    /// Which tool names to recognise, for the restore hint.
    pub preset: Preset,
}

impl ClipConfig {
    /// Clips outputs over `max_tokens`, keeping 60% of the kept part from the start.
    pub fn new(max_tokens: u64) -> ClipConfig {
        ClipConfig {
            max_tokens: max_tokens.max(MIN_CLIP_TOKENS),
            head_ratio: 0.6,
            recall_tool: None,
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

/// What clipping reads its lines from.
enum Shape {
    /// The text itself.
    Text,
    /// One-line JSON small enough to print whole, pretty-printed.
    Pretty(String),
    /// The pretty-printed ends of one-line JSON too big to print whole.
    Ends(json::End, json::End),
}

/// The kept ends of a text and the part cut between them.
struct Kept<'a> {
    head: &'a str,
    tail: &'a str,
    /// The part cut, as in the input (for JSON ends, the original one-line text).
    middle: &'a str,
    /// Whether `head` and `tail` are pretty-printed JSON.
    pretty: bool,
}

/// Whether `text` holds more than `max` tokens, reading at most a bounded prefix when it does.
fn is_over(text: &str, max: u64, counter: &dyn TokenCounter) -> bool {
    within(text, max, counter).is_none()
}

/// The tokens of `text` when at most `max`; `None` when over, reading at most a bounded
/// prefix of a long text (a prefix that is already over decides; a short one usually does).
fn within(text: &str, max: u64, counter: &dyn TokenCounter) -> Option<u64> {
    for bytes_per_token in [6, 16] {
        let probe = text.floor_char_boundary(bytes_for(max.saturating_add(1), bytes_per_token).min(text.len()));
        let tokens = counter.count_text(&text[..probe]);
        if tokens > max {
            return None;
        }
        if probe == text.len() {
            return Some(tokens);
        }
    }
    Some(counter.count_text(text)).filter(|&tokens| tokens <= max)
}

/// `tokens * bytes_per_token` as a byte length.
fn bytes_for(tokens: u64, bytes_per_token: u64) -> usize {
    usize::try_from(tokens.saturating_mul(bytes_per_token)).unwrap_or(usize::MAX)
}

/// The longest prefix of `text` (whole lines where possible) holding at most `budget` tokens.
fn take_head<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let mut end = 0;
    let mut used = 0;
    for line in text.split_inclusive('\n') {
        let Some(tokens) = within(line, budget - used, counter) else {
            if end == 0 {
                // A first line too long on its own: cut it by characters.
                return cut_prefix(line, budget, counter);
            }
            break;
        };
        used += tokens;
        end += line.len();
    }
    &text[..end]
}

/// The longest suffix of `text` (whole lines where possible) holding at most `budget` tokens.
fn take_tail<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let mut start = text.len();
    let mut used = 0;
    while start > 0 {
        // The line ending at `start`, with its newline.
        let search = if text[..start].ends_with('\n') { start - 1 } else { start };
        let line_start = text[..search].rfind('\n').map_or(0, |newline| newline + 1);
        let line = &text[line_start..start];
        let Some(tokens) = within(line, budget - used, counter) else {
            if start == text.len() {
                return cut_suffix(line, budget, counter);
            }
            break;
        };
        used += tokens;
        start = line_start;
    }
    &text[start..]
}

fn cut_prefix<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let mut end = text.floor_char_boundary(bytes_for(budget, 4).min(text.len()));
    while end > 0 && counter.count_text(&text[..end]) > budget {
        end = text.floor_char_boundary(end * 3 / 4);
    }
    &text[..end]
}

fn cut_suffix<'a>(text: &'a str, budget: u64, counter: &dyn TokenCounter) -> &'a str {
    let want = bytes_for(budget, 4).min(text.len());
    let mut start = text.ceil_char_boundary(text.len() - want);
    while start < text.len() && counter.count_text(&text[start..]) > budget {
        start = text.ceil_char_boundary(start + ((text.len() - start) / 4).max(1));
    }
    &text[start..]
}

/// The newlines in `text`. Counted in chunks of at most 255 bytes into a `u8`, which the
/// compiler vectorises: several times faster on a 10 MB output than a plain filter and count.
fn newlines(text: &str) -> usize {
    text.as_bytes()
        .chunks(255)
        .map(|chunk| usize::from(chunk.iter().fold(0u8, |count, &byte| count + u8::from(byte == b'\n'))))
        .sum()
}

/// Whether `text` is one line of what looks like a JSON object or array.
fn one_line_json(text: &str) -> bool {
    let text = text.trim();
    ((text.starts_with('{') && text.ends_with('}')) || (text.starts_with('[') && text.ends_with(']')))
        && !text.contains('\n')
}

/// How to read one-line JSON for these budgets; `None` when it is not JSON after all.
fn json_shape(text: &str, head_budget: u64, tail_budget: u64, counter: &dyn TokenCounter) -> Option<Shape> {
    let mut span = bytes_for(head_budget.max(tail_budget), 16).max(1024);
    loop {
        let head = json::head(text, span).ok()?;
        if head.complete {
            return Some(Shape::Pretty(head.text));
        }
        let tail = json::tail(text, span).ok()?;
        if head.offsets.last() > tail.offsets.first() {
            // The ends meet: print the whole document.
            span = usize::MAX;
            continue;
        }
        // Each end must hold more than its budget, or the kept part would stop short of it.
        if take_head(&head.text, head_budget, counter).len() < head.text.len()
            && take_tail(&tail.text, tail_budget, counter).len() < tail.text.len()
        {
            return Some(Shape::Ends(head, tail));
        }
        span = span.saturating_mul(2);
    }
}

fn keep<'a>(
    shape: &'a Shape,
    text: &'a str,
    head_budget: u64,
    tail_budget: u64,
    counter: &dyn TokenCounter,
) -> Kept<'a> {
    let (source, pretty) = match shape {
        Shape::Text => (text, false),
        Shape::Pretty(pretty) => (pretty.as_str(), true),
        Shape::Ends(head_end, tail_end) => {
            let head = take_head(&head_end.text, head_budget, counter);
            let tail = take_tail(&tail_end.text, tail_budget, counter);
            // Where the kept lines end and start in the input.
            let whole_lines = head.matches('\n').count();
            let from = match whole_lines {
                _ if head.len() == head_end.text.len() => head_end.offsets.last().copied().unwrap_or(0),
                0 => head.len().min(head_end.offsets.first().copied().unwrap_or(0)),
                lines => head_end.offsets[lines - 1],
            };
            let tail_lines = if tail.is_empty() { 0 } else { tail.matches('\n').count() + 1 };
            let to = match tail_end.offsets.len().checked_sub(tail_lines) {
                Some(line) if tail_lines > 0 => tail_end.offsets[line],
                _ => text.len(),
            }
            .max(from);
            return Kept { head, tail, middle: &text[from..to], pretty: true };
        }
    };
    let head = take_head(source, head_budget, counter);
    let rest = &source[head.len()..];
    let tail = take_tail(rest, tail_budget, counter);
    Kept { head, tail, middle: &rest[..rest.len() - tail.len()], pretty }
}

/// The tokens of `text`, counted when it is small and extrapolated from its two ends when
/// not; `true` when counted.
fn tokens_of(text: &str, counter: &dyn TokenCounter) -> (u64, bool) {
    const SAMPLE: usize = 4 * 1024;
    if text.len() <= 2 * SAMPLE {
        return (counter.count_text(text), true);
    }
    let first = &text[..text.floor_char_boundary(SAMPLE)];
    let last = &text[text.ceil_char_boundary(text.len() - SAMPLE)..];
    let sampled = counter.count_text(first) + counter.count_text(last);
    let estimate = u128::from(sampled) * text.len() as u128 / (first.len() + last.len()) as u128;
    (u64::try_from(estimate).unwrap_or(u64::MAX), false)
}

/// Clips `text` to at most `config.max_tokens` tokens (never less than [`MIN_CLIP_TOKENS`]):
/// its first and last lines, `config.head_ratio` of the kept tokens from the start, with a
/// marker between them; `None` when it is already within.
///
/// The same input gives the same output, byte for byte, and the output clips to `None`.
pub fn clip_text(
    text: &str,
    config: &ClipConfig,
    kind: ActionKind,
    reference: &str,
    counter: &dyn TokenCounter,
) -> Option<String> {
    clip_failed_text(text, None, config, kind, reference, counter)
}

/// [`clip_text`] for an output whose call failed with the telling line `failure`
/// ([`error_line`]): when clipping cuts that line, the marker holds it.
pub fn clip_failed_text(
    text: &str,
    failure: Option<&str>,
    config: &ClipConfig,
    kind: ActionKind,
    reference: &str,
    counter: &dyn TokenCounter,
) -> Option<String> {
    let max = config.max_tokens.max(MIN_CLIP_TOKENS);
    if !is_over(text, max, counter) {
        return None;
    }
    let ratio = if config.head_ratio.is_nan() { 0.6 } else { config.head_ratio.clamp(0.0, 1.0) };
    let split = |room: u64| {
        let head = ((room as f64 * ratio) as u64).min(room);
        (head, room - head)
    };
    // Room for the kept lines: the limit less the widest marker this text can get, shrunk
    // below until the whole fits (the count of joined pieces can differ from their sum).
    let failure = failure.map(str::trim).filter(|line| !line.is_empty());
    let widest =
        Cut { lines: Some(text.len()), tokens: (text.len() as u64, false), bytes: text.len(), pretty: true, failure };
    let widest = marker(&widest, kind, config, reference);
    let mut room = max.saturating_sub(counter.count_text(&widest) + 8);
    let shape = match one_line_json(text) {
        true => {
            let (head, tail) = split(room);
            json_shape(text, head, tail, counter).unwrap_or(Shape::Text)
        }
        false => Shape::Text,
    };
    // Lines are counted once: the kept ends are small, the middle is not.
    let total_newlines = match &shape {
        Shape::Text => newlines(text),
        Shape::Pretty(pretty) => newlines(pretty),
        Shape::Ends(..) => 0,
    };
    loop {
        let (head_budget, tail_budget) = split(room);
        let kept = keep(&shape, text, head_budget, tail_budget, counter);
        let lines = match shape {
            Shape::Ends(..) => None,
            // The head ends a line (or is part of the first); the tail starts one.
            _ => Some(
                total_newlines - newlines(kept.head) - newlines(kept.tail)
                    + usize::from(!kept.middle.is_empty() && !kept.middle.ends_with('\n')),
            ),
        };
        // The telling line goes into the marker only when the kept ends lack it.
        let failure = failure.filter(|line| !kept.head.contains(line) && !kept.tail.contains(line));
        let cut = Cut {
            lines,
            tokens: tokens_of(kept.middle, counter),
            bytes: kept.middle.len(),
            pretty: kept.pretty,
            failure,
        };
        let marker = marker(&cut, kind, config, reference);
        let mut out = String::with_capacity(kept.head.len() + kept.tail.len() + marker.len() + 2);
        out.push_str(kept.head);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&marker);
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

/// Clips every tool_result in `conversation` whose payload is over `config.max_tokens`
/// (its block over the limit plus [`BLOCK_OVERHEAD`]), the newest included. A result made
/// of blocks becomes text: its text blocks joined by newlines, and each other block (an
/// image, a document) a placeholder naming the result's ref. Results within the limit are
/// not touched, so clipping a clipped conversation changes nothing and reports nothing.
pub fn clip(conversation: &mut Conversation, config: &ClipConfig, counter: &dyn TokenCounter) -> Vec<Clipped> {
    let max = config.max_tokens.max(MIN_CLIP_TOKENS);
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
            if !matches!(block, Block::ToolResult(_)) {
                continue;
            }
            let tokens_before = count_block(counter, block);
            if tokens_before <= max + BLOCK_OVERHEAD {
                continue;
            }
            let Block::ToolResult(result) = block else { continue };
            let Some(content) = &result.content else { continue };
            let (tool, kind) = match calls.get(&result.tool_use_id) {
                Some(call) => (call.name.clone(), classify(config.preset, &call.name, &call.input).kind),
                None => ("?".to_string(), ActionKind::Other),
            };
            // The recall tool's answers are bounded by the tool, and clipping one would send
            // the model back for what it just fetched.
            if config.recall_tool.as_deref() == Some(tool.as_str()) {
                continue;
            }
            let payload = match content {
                ToolResultContent::Text(text) => Value::String(text.clone()),
                ToolResultContent::Blocks(blocks) => Value::Array(blocks.iter().map(Block::to_value).collect()),
            };
            let reference = payload_ref(&payload);
            let failure = matches!(outcome(result), Outcome::Failed(_)).then(|| error_line(&result.text()));
            let clip_text = |text: &str| clip_failed_text(text, failure.as_deref(), config, kind, &reference, counter);
            let new_text = match content {
                ToolResultContent::Text(text) => match clip_text(text) {
                    Some(clipped) => clipped,
                    None => continue,
                },
                ToolResultContent::Blocks(blocks) => {
                    let text = blocks
                        .iter()
                        .map(|inner| match inner.as_text() {
                            Some(text) => text.to_string(),
                            None => format!("[{} removed from this output; ref {reference}]", inner.kind()),
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    clip_text(&text).unwrap_or(text)
                }
            };
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
    fn a_failed_output_keeps_its_telling_line_in_the_marker_when_it_is_cut() {
        let mut text: String = (0..400).map(|line| format!("step {line} ok\n")).collect();
        text.push_str("fatal: Host key verification failed.\n");
        text.extend((0..400).map(|line| format!("cleanup {line}\n")));
        let failure = "fatal: Host key verification failed.";
        let out = clip_failed_text(&text, Some(failure), &config(200), ActionKind::Shell, "cf-6", &Chars4).unwrap();
        assert!(Chars4.count_text(&out) <= 200, "{out}");
        let marker = out.lines().find(|line| line.starts_with(CLIP_PREFIX)).unwrap();
        assert!(marker.contains("; failed: fatal: Host key verification failed. — re-run the command"), "{marker}");
        assert_eq!(clip_failed_text(&out, Some(failure), &config(200), ActionKind::Shell, "cf-6", &Chars4), None);
        // A telling line the kept ends show is not said twice.
        let head_failure = "step 0 ok";
        let out =
            clip_failed_text(&text, Some(head_failure), &config(200), ActionKind::Shell, "cf-6", &Chars4).unwrap();
        assert_eq!(out.matches(head_failure).count(), 1, "{out}");
        assert!(!out.contains("; failed:"));
    }

    #[test]
    fn a_failed_result_in_a_conversation_is_clipped_with_its_error_line() {
        let mut output = "Exit code 255\n".to_string();
        output.extend((0..300).map(|line| format!("debug1: reading configuration line {line}\n")));
        output.push_str("Host key verification failed.\n");
        output.extend((0..300).map(|line| format!("debug1: closing {line}\n")));
        let mut conversation = Conversation::from_value(serde_json::json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {"command": "ssh host"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": output, "is_error": true}]}
        ]))
        .unwrap();
        assert_eq!(clip(&mut conversation, &config(300), &Chars4).len(), 1);
        let Block::ToolResult(result) = &conversation.messages[2].content[0] else { panic!() };
        assert!(result.text().contains("; failed: Host key verification failed. —"), "{}", result.text());
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

    #[test]
    fn one_line_json_is_printed_whole_when_small_and_by_its_ends_when_big() {
        let items = |count: usize| {
            let items: Vec<Value> = (0..count).map(|i| serde_json::json!({"id": i, "tags": ["a", "b"]})).collect();
            serde_json::to_string(&items).unwrap()
        };
        let small = items(50);
        assert!(one_line_json(&small));
        assert!(matches!(json_shape(&small, 60, 40, &Chars4), Some(Shape::Pretty(_))));
        let big = items(100_000);
        let Some(Shape::Ends(head, tail)) = json_shape(&big, 60, 40, &Chars4) else { panic!("the ends only") };
        assert!(head.text.len() < 20_000 && tail.text.len() < 20_000);
        // A log line that looks like JSON at both ends is clipped as text.
        let log = format!("[INFO] {} [done]", "x ".repeat(10_000));
        assert!(one_line_json(&log));
        assert!(json_shape(&log, 60, 40, &Chars4).is_none());
        let out = clip_text(&log, &config(100), ActionKind::Shell, "cf-4", &Chars4).unwrap();
        assert!(out.starts_with("[INFO] x x") && !out.contains("pretty-printed"));
    }

    #[test]
    fn the_marker_counts_the_lines_and_tokens_cut() {
        let text: String = (0..1_000).map(|line| format!("{line:04}\n")).collect();
        let out = clip_text(&text, &config(100), ActionKind::FileRead, "cf-5", &Chars4).unwrap();
        let kept = out.lines().filter(|line| !line.starts_with(CLIP_PREFIX)).count();
        let marker = out.lines().find(|line| line.starts_with(CLIP_PREFIX)).unwrap();
        // Chars4 counts five bytes as two tokens, and the middle is counted exactly when small.
        let cut = 1_000 - kept;
        assert_eq!(
            marker,
            format!(
                "{CLIP_PREFIX}{cut} lines ({} tokens, {} bytes) from the middle of this output — \
                 re-read the file (or a line range of it) for the rest; ref cf-5]",
                (cut as u64 * 5).div_ceil(4),
                cut * 5
            )
        );
    }
}
