//! The recall tool: the model's way back into the cold layer.
//!
//! [`recall_tool_definition`] is the tool to offer in a request; [`handle_recall`] answers a
//! call of it from a [`SessionStore`]. An answer never holds more than [`MAX_RECALL_CHARS`]
//! characters, so a recall cannot overflow the window it was meant to spare: a bigger payload
//! comes back one page per call, cut after a line end when one is near, and its pages put
//! together are the payload byte for byte. Bad input is an error result that tells the model
//! what to send instead, never a panic.
//!
//! An MCP client pages by lines instead ([`recall_lines`]) and searches every session
//! ([`search_sessions`]); both keep the same bound and read payloads the same way.

use super::{Hit, HitLocation, SessionId, SessionStore, StoreError};
use contextfold_core::conversation::{Block, ToolResult, ToolResultContent};
use contextfold_core::format::Format;
use contextfold_core::text::clip_chars;
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::HashMap;
use std::ops::Range;

/// The tool's name, as pointers and the summary's recall note spell it.
pub const RECALL_TOOL_NAME: &str = "context_recall";

/// The most characters one answer holds (about 8k tokens): a page and its header.
pub const MAX_RECALL_CHARS: usize = 32_000;

/// The most characters of payload on one page; the rest of [`MAX_RECALL_CHARS`] is the header's.
const PAGE_CHARS: usize = MAX_RECALL_CHARS - 2_000;

/// Search hits shown per page of an answer to a query.
pub const HITS_PER_PAGE: usize = 10;

/// The most search hits a query pages through; a query matching more should be narrower.
const MAX_HITS: usize = 50;

/// The most characters of one hit's snippet.
const SNIPPET_CHARS: usize = 400;

const DESCRIPTION: &str = "Restore content that was removed from this conversation to save context. \
Pointers such as `[contextfold: offloaded … ref cf-…]` and `[contextfold: clipped … ref cf-…]` name a ref: \
pass it as `ref` to get the original output back exactly. Or pass `query` (words that must all appear) to search \
the full earlier conversation, including the turns folded into the summary. Long answers come in pages; \
pass `page` to read on.";

/// The input schema: `ref` or `query`, and an optional `page`.
fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "ref": {
                "type": "string",
                "description": "The ref of a removed output, exactly as its pointer shows it (cf-…)."
            },
            "query": {
                "type": "string",
                "description": "Words to search for in the full earlier conversation; all must appear."
            },
            "page": {
                "type": "integer",
                "minimum": 1,
                "description": "The page of a long answer to return, from 1 (the default)."
            }
        }
    })
}

/// The recall tool's definition for a request in `format`: Anthropic's
/// `{name, description, input_schema}`, OpenAI Chat's `{type: "function", function: {…}}`,
/// or the Responses API's flat `{type: "function", name, description, parameters}`. A
/// Claude Code log is Anthropic's.
pub fn recall_tool_definition(format: Format) -> Value {
    match format.writable() {
        Format::OpenAi => json!({
            "type": "function",
            "function": {"name": RECALL_TOOL_NAME, "description": DESCRIPTION, "parameters": input_schema()}
        }),
        Format::Responses => json!({
            "type": "function",
            "name": RECALL_TOOL_NAME,
            "description": DESCRIPTION,
            "parameters": input_schema()
        }),
        _ => json!({"name": RECALL_TOOL_NAME, "description": DESCRIPTION, "input_schema": input_schema()}),
    }
}

/// A call of the recall tool, read from its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecallRequest {
    /// A removed payload by its ref.
    Ref {
        /// The ref (`cf-…`).
        reference: String,
        /// The page, from 1.
        page: usize,
    },
    /// A full-text search of the session.
    Query {
        /// The words to search for.
        query: String,
        /// The page, from 1.
        page: usize,
    },
}

/// Why a recall tool input was refused; each message is a sentence for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecallInputError {
    /// A string input that is not JSON.
    #[error("the input is not a JSON object ({0}); send {{\"ref\": \"cf-…\"}}")]
    NotJson(String),
    /// An input that is not an object.
    #[error("the input must be an object with `ref` or `query`")]
    NotObject,
    /// `ref` or `query` holding only white space.
    #[error("`{0}` is empty")]
    Empty(&'static str),
    /// `ref` or `query` holding something else than a string (shown as JSON).
    #[error("`{key}` must be a string, not {value}")]
    NotText {
        /// The field.
        key: &'static str,
        /// Its value, as JSON.
        value: String,
    },
    /// A page that is not a whole number from 1 (shown as JSON).
    #[error("`page` must be a whole number from 1, not {0}")]
    BadPage(String),
    /// Both `ref` and `query`.
    #[error("give either `ref` or `query`, not both")]
    Both,
    /// Neither `ref` nor `query`.
    #[error("give `ref` (a cf-… ref from a pointer) or `query` (words to search for)")]
    Neither,
}

impl RecallRequest {
    /// Reads a call's input: an object, or (as OpenAI sends `arguments`) its JSON text.
    pub fn parse(input: &Value) -> Result<RecallRequest, RecallInputError> {
        let parsed;
        let input = match input {
            Value::String(text) => {
                parsed =
                    serde_json::from_str::<Value>(text).map_err(|err| RecallInputError::NotJson(err.to_string()))?;
                &parsed
            }
            other => other,
        };
        let Value::Object(fields) = input else {
            return Err(RecallInputError::NotObject);
        };
        let text = |key: &'static str| -> Result<Option<String>, RecallInputError> {
            match fields.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) if text.trim().is_empty() => Err(RecallInputError::Empty(key)),
                Some(Value::String(text)) => Ok(Some(text.trim().to_string())),
                Some(other) => Err(RecallInputError::NotText { key, value: other.to_string() }),
            }
        };
        let page = match fields.get("page") {
            None | Some(Value::Null) => 1,
            Some(value) => {
                let number = match value {
                    Value::Number(number) => number.as_u64(),
                    Value::String(text) => text.trim().parse::<u64>().ok(),
                    _ => None,
                };
                match number.and_then(|number| usize::try_from(number).ok()) {
                    Some(page) if page >= 1 => page,
                    _ => return Err(RecallInputError::BadPage(value.to_string())),
                }
            }
        };
        match (text("ref")?, text("query")?) {
            (Some(reference), None) => Ok(RecallRequest::Ref { reference, page }),
            (None, Some(query)) => Ok(RecallRequest::Query { query, page }),
            (Some(_), Some(_)) => Err(RecallInputError::Both),
            (None, None) => Err(RecallInputError::Neither),
        }
    }
}

/// The answer to a call of the recall tool: the tool_result's text and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallOutput {
    /// The text for the model, at most [`MAX_RECALL_CHARS`] characters.
    pub content: String,
    /// Whether the call failed (bad input, unknown ref, page out of range, store failure).
    pub is_error: bool,
}

impl RecallOutput {
    fn ok(content: String) -> RecallOutput {
        RecallOutput { content, is_error: false }
    }

    /// An error answer; the message is clipped so even a long one stays within the bound.
    pub(crate) fn error(message: &str) -> RecallOutput {
        RecallOutput::failed(RECALL_TOOL_NAME, message)
    }

    /// An error answer of `what` (a tool, or `search`), clipped as [`RecallOutput::error`].
    fn failed(what: &str, message: &str) -> RecallOutput {
        RecallOutput { content: clip_chars(&format!("{what} failed: {message}"), 2_000), is_error: true }
    }

    /// The tool_result block answering the call `tool_use_id`.
    pub fn to_block(&self, tool_use_id: &str) -> Block {
        Block::ToolResult(ToolResult {
            tool_use_id: tool_use_id.to_string(),
            content: Some(ToolResultContent::Text(self.content.clone())),
            is_error: self.is_error.then_some(true),
            extra: Default::default(),
        })
    }
}

/// Answers a call of the recall tool with `input` in `session` of `store`.
pub fn handle_recall(store: &dyn SessionStore, session: &str, input: &Value) -> RecallOutput {
    match RecallRequest::parse(input) {
        Ok(RecallRequest::Ref { reference, page }) => recall_ref(store, &reference, page),
        Ok(RecallRequest::Query { query, page }) => recall_query(store, session, &query, page),
        Err(err) => RecallOutput::error(&err.to_string()),
    }
}

fn recall_ref(store: &dyn SessionStore, reference: &str, page: usize) -> RecallOutput {
    let payload = match find_payload(store, reference) {
        Ok(payload) => payload,
        Err(output) => return output,
    };
    let text = payload_text(&payload);
    let pages = pages(&text);
    let Some(range) = pages.get(page - 1) else {
        return RecallOutput::error(&format!("page {page} is out of range: {reference} has {} page(s)", pages.len()));
    };
    if pages.len() == 1 {
        return RecallOutput::ok(text);
    }
    let next = if page < pages.len() {
        format!("call {RECALL_TOOL_NAME} with ref {reference} and page={} for more", page + 1)
    } else {
        "the end".to_string()
    };
    RecallOutput::ok(format!("[page {page}/{} of {reference}; {next}]\n{}", pages.len(), &text[range.clone()]))
}

fn recall_query(store: &dyn SessionStore, session: &str, query: &str, page: usize) -> RecallOutput {
    let hits = match store.search(Some(session), query, MAX_HITS) {
        Ok(hits) => hits,
        Err(err) => return RecallOutput::error(&err.to_string()),
    };
    if hits.is_empty() {
        return RecallOutput::ok(format!("no matches for \"{}\" in the earlier conversation", clip_chars(query, 200)));
    }
    let pages = hits.len().div_ceil(HITS_PER_PAGE);
    let Some(shown) = hits.chunks(HITS_PER_PAGE).nth(page - 1) else {
        return RecallOutput::error(&format!("page {page} is out of range: the matches fill {pages} page(s)"));
    };
    let query = clip_chars(query, 200);
    let more = if hits.len() == MAX_HITS { " (the first ones; narrow the query for others)" } else { "" };
    let mut out = format!("{} for \"{query}\"{more}", matches(hits.len()));
    if pages > 1 {
        out.push_str(&format!(" [page {page}/{pages}"));
        if page < pages {
            out.push_str(&format!("; call {RECALL_TOOL_NAME} with this query and page={} for more", page + 1));
        }
        out.push(']');
    }
    out.push_str(":\n");
    let hint = format!("call {RECALL_TOOL_NAME} with this ref for all of it");
    for hit in shown {
        out.push_str(&hit_line(hit, None, &hint));
    }
    RecallOutput::ok(out)
}

/// One line per hit: where it is (in `session`, when given), and its snippet on one line;
/// `hint` says how to get a payload whole.
fn hit_line(hit: &Hit, session: Option<&str>, hint: &str) -> String {
    let snippet = clip_chars(&hit.snippet.split_whitespace().collect::<Vec<_>>().join(" "), SNIPPET_CHARS);
    let session = session.map(|session| format!("session {session}, ")).unwrap_or_default();
    match &hit.location {
        HitLocation::Message(position) => format!("- {session}message {position}: {snippet}\n"),
        HitLocation::Payload(reference) => format!("- {session}output {reference} ({hint}): {snippet}\n"),
    }
}

/// Which lines of a payload to return: from line `offset` (counting from 0), at most `limit`
/// of them (all that fit in one answer when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lines {
    /// The first line, counting from 0.
    pub offset: usize,
    /// The most lines.
    pub limit: Option<usize>,
}

/// The payload stored under `reference`, or the lines of it `lines` asks for.
///
/// Asked for whole (offset 0, no limit) and within [`MAX_RECALL_CHARS`], the answer is the
/// payload's text exactly, nothing added. Otherwise it is a header line
/// (`[cf-…: lines 1-800 of 5000; …]`, with the total line count and the offset to pass next)
/// and the lines, whole, up to the bound: the lines of successive answers put together are
/// the payload byte for byte. A line longer than the bound is cut, and its header says so.
pub fn recall_lines(store: &dyn SessionStore, reference: &str, lines: Lines) -> RecallOutput {
    let payload = match find_payload(store, reference) {
        Ok(payload) => payload,
        Err(output) => return output,
    };
    let text = payload_text(&payload);
    let whole = lines.offset == 0 && lines.limit.is_none();
    if whole && text.chars().count() <= PAGE_CHARS {
        return RecallOutput::ok(text);
    }
    let all: Vec<&str> = text.split_inclusive('\n').collect();
    let total = all.len();
    if lines.offset >= total && !(total == 0 && lines.offset == 0) {
        return RecallOutput::error(&format!(
            "offset {} is past the end: {reference} has {total} line(s), the last at offset {}",
            lines.offset,
            total.saturating_sub(1)
        ));
    }
    let wanted = all.iter().skip(lines.offset).take(lines.limit.unwrap_or(usize::MAX));
    let (mut body, mut chars, mut taken, mut cut) = (String::new(), 0, 0, false);
    for line in wanted {
        let size = line.chars().count();
        if chars + size > PAGE_CHARS {
            if taken == 0 {
                body = clip_prefix(line, PAGE_CHARS).to_string();
                taken = 1;
                cut = true;
            }
            break;
        }
        body.push_str(line);
        chars += size;
        taken += 1;
    }
    let end = lines.offset + taken;
    let next = if cut {
        format!(
            "line {} is longer than one answer holds: its first {PAGE_CHARS} characters are shown; \
             pass offset={end} for the lines after it",
            lines.offset + 1
        )
    } else if end < total {
        format!("pass offset={end} for more")
    } else {
        "the end".to_string()
    };
    let shown = if taken == 0 { "no lines".to_string() } else { format!("lines {}-{end}", lines.offset + 1) };
    RecallOutput::ok(format!("[{reference}: {shown} of {total}; {next}]\n{body}"))
}

/// The first `chars` characters of `text`.
fn clip_prefix(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or(text, |(at, _)| &text[..at])
}

/// The payload under `reference`, or the error answer saying why there is none.
fn find_payload(store: &dyn SessionStore, reference: &str) -> Result<Value, RecallOutput> {
    match store.recall(reference) {
        Ok(Some(payload)) => Ok(payload),
        Ok(None) => Err(RecallOutput::error(&format!(
            "no output is stored under ref `{}`; pass a ref exactly as a pointer shows it, or search for it",
            clip_chars(reference, 80)
        ))),
        Err(err) => Err(RecallOutput::error(&err.to_string())),
    }
}

/// Search hits for `query` in `session` (or every session), newest first, at most `limit`:
/// the newest session first; in a session, its stored outputs (what pointers name) first,
/// then its messages from the latest. The store ranks the matches; the best
/// [`MAX_HITS`] of them are put in this order.
pub fn search_sessions(
    store: &dyn SessionStore,
    session: Option<&str>,
    query: &str,
    limit: usize,
) -> Result<Vec<Hit>, StoreError> {
    let mut hits = store.search(session, query, MAX_HITS.max(limit))?;
    let age: HashMap<SessionId, usize> =
        store.sessions()?.into_iter().enumerate().map(|(age, info)| (info.id, age)).collect();
    hits.sort_by_key(|hit| {
        let position = match hit.location {
            HitLocation::Payload(_) => usize::MAX,
            HitLocation::Message(position) => position,
        };
        Reverse((age.get(&hit.session).copied().unwrap_or(0), position))
    });
    hits.truncate(limit);
    Ok(hits)
}

/// The answer to a search of `session` (or every session) for `query`: one line per hit,
/// newest first ([`search_sessions`]), each with its session and where it is; a payload's
/// line says `hint` (how to recall it). Within [`MAX_RECALL_CHARS`].
pub fn search_answer(
    store: &dyn SessionStore,
    session: Option<&str>,
    query: &str,
    limit: usize,
    hint: &str,
) -> RecallOutput {
    if let Some(session) = session {
        match store.session_meta(session) {
            Err(StoreError::UnknownSession(_)) => {
                return RecallOutput::failed(
                    "search",
                    &format!(
                        "there is no session `{}`; leave `session` out to search them all",
                        clip_chars(session, 80)
                    ),
                )
            }
            Err(err) => return RecallOutput::failed("search", &err.to_string()),
            Ok(_) => {}
        }
    }
    let hits = match search_sessions(store, session, query, limit) {
        Ok(hits) => hits,
        Err(err) => return RecallOutput::failed("search", &err.to_string()),
    };
    let query = clip_chars(query, 200);
    if hits.is_empty() {
        return RecallOutput::ok(format!("no matches for \"{query}\""));
    }
    let mut out = format!("{} for \"{query}\", newest first:\n", matches(hits.len()));
    for hit in &hits {
        let line = hit_line(hit, Some(&hit.session), hint);
        if out.chars().count() + line.chars().count() > MAX_RECALL_CHARS {
            out.push_str("[the rest left out: narrow the query or lower `limit`]\n");
            break;
        }
        out.push_str(&line);
    }
    RecallOutput::ok(out)
}

/// A payload as text: a string as it is; a block list's text blocks as they are, one after
/// another on their own lines, other blocks as their JSON (base64 media described instead);
/// a tool call's input as pretty JSON.
fn payload_text(payload: &Value) -> String {
    fn block_text(block: &Value) -> String {
        if block.get("type").and_then(Value::as_str) == Some("text") {
            if let Some(text) = block.get("text").and_then(Value::as_str) {
                return text.to_string();
            }
        }
        let source = block.get("source");
        if let Some(data) = source.and_then(|source| source.get("data")).and_then(Value::as_str) {
            let kind = block.get("type").and_then(Value::as_str).unwrap_or("media");
            let media = source.and_then(|source| source.get("media_type")).and_then(Value::as_str).unwrap_or("data");
            return format!("[{kind} block: {media}, {} bytes of base64 not shown]", data.len());
        }
        block.to_string()
    }
    match payload {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().map(block_text).collect::<Vec<_>>().join("\n"),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// The byte ranges of the pages of `text`: at most [`PAGE_CHARS`] characters each, cut after
/// the last line end of a page when it falls in its second half, else at a character
/// boundary. They cover `text` exactly; an empty text is one empty page.
fn pages(text: &str) -> Vec<Range<usize>> {
    let mut pages = Vec::new();
    let mut start = 0;
    loop {
        let rest = &text[start..];
        let Some((hard, _)) = rest.char_indices().nth(PAGE_CHARS) else {
            pages.push(start..text.len());
            return pages;
        };
        let end = match rest[..hard].rfind('\n') {
            Some(newline) if newline + 1 >= hard / 2 => newline + 1,
            _ => hard,
        };
        pages.push(start..start + end);
        start += end;
    }
}

/// "1 match", "2 matches".
fn matches(count: usize) -> String {
    if count == 1 {
        "1 match".to_string()
    } else {
        format!("{count} matches")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_the_text_on_line_or_char_boundaries() {
        assert_eq!(pages(""), vec![0..0]);
        assert_eq!(pages("short"), vec![0..5]);
        let lines: String = (0..5_000).map(|i| format!("line {i} é😀\n")).collect();
        let ranges = pages(&lines);
        assert!(ranges.len() > 1);
        for range in &ranges[..ranges.len() - 1] {
            assert!(lines[range.clone()].ends_with('\n'), "a page ends after a line");
            assert!(lines[range.clone()].chars().count() <= PAGE_CHARS);
        }
        let one_line = "é".repeat(PAGE_CHARS * 2 + 7);
        let ranges = pages(&one_line);
        assert_eq!(
            ranges.iter().map(|range| one_line[range.clone()].chars().count()).collect::<Vec<_>>(),
            [PAGE_CHARS, PAGE_CHARS, 7]
        );
    }

    #[test]
    fn parses_input_leniently_but_not_wrongly() {
        let parse = |value: Value| RecallRequest::parse(&value);
        assert_eq!(parse(json!({"ref": " cf-1 "})), Ok(RecallRequest::Ref { reference: "cf-1".into(), page: 1 }));
        assert_eq!(
            parse(json!("{\"query\": \"panic\", \"page\": \"2\"}")),
            Ok(RecallRequest::Query { query: "panic".into(), page: 2 })
        );
        for (bad, expected) in [
            (json!({}), RecallInputError::Neither),
            (json!([]), RecallInputError::NotObject),
            (json!({"ref": "cf-1", "query": "x"}), RecallInputError::Both),
            (json!({"ref": 7}), RecallInputError::NotText { key: "ref", value: "7".into() }),
            (json!({"ref": "  "}), RecallInputError::Empty("ref")),
            (json!({"ref": "cf-1", "page": 0}), RecallInputError::BadPage("0".into())),
            (json!({"ref": "cf-1", "page": -1}), RecallInputError::BadPage("-1".into())),
            (json!({"ref": "cf-1", "page": 1.5}), RecallInputError::BadPage("1.5".into())),
        ] {
            assert_eq!(parse(bad.clone()), Err(expected), "{bad}");
        }
        let not_json = parse(json!("not json")).unwrap_err();
        assert!(matches!(not_json, RecallInputError::NotJson(_)), "{not_json:?}");
        assert!(not_json.to_string().ends_with(r#"; send {"ref": "cf-…"}"#), "{not_json}");
    }
}
