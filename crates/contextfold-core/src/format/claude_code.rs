//! Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`): read only.
//!
//! A log is one JSON record a line. Only `user` and `assistant` records carry conversation;
//! their `message` is an Anthropic message. The reader rebuilds the request those records
//! stand for, and never fails on a bad line: it skips it and says so in a note. The design
//! choice is to reconstruct, not to interpret: blocks are kept as logged, and what the log
//! itself broke (lost lines, unanswered calls) is left to [`crate::repair()`], whose fixes
//! become notes too.
//!
//! Rules, in order:
//! - Blank lines and `//` comment lines are ignored. A line that is not valid JSON, not an
//!   object, or a user/assistant record whose `message` is malformed is skipped with a note
//!   naming its 1-based line number.
//! - Records of other types (`summary`, `file-history-snapshot`, `system`, `progress`,
//!   `queue-operation`, …) are skipped, counted in one note.
//! - A record whose `uuid` was already seen is a duplicate and is skipped. A resumed session
//!   re-logs its history under new uuids but with the original timestamps (and sometimes split
//!   differently), so a block that a record of the same type already logged with the same
//!   `timestamp` is dropped too, and a record left with no blocks is skipped.
//! - Sidechain records (`isSidechain: true`, a subagent's turns) are skipped, unless the log
//!   holds nothing else (a subagent's own `agent-*.jsonl`), in which case they are the
//!   conversation.
//! - Claude Code logs one API response as several assistant records, one block each, with
//!   the same `message.id`; they are merged into one message, blocks in log order, even when
//!   tool results were logged between them. Messages carry only `role` and `content`
//!   (`model`, `usage`, `id`, … are log metadata, not part of a request).
//! - Consecutive user records (tool results, interruptions, the user's next words) merge
//!   into one user message, and every user message has its tool_result blocks moved first.
//!   A record whose `message.role` is `system` (a mid-conversation system message) is a
//!   system message of its own; [`crate::repair()`] checks where it stands.
//!   Assistant records with model `<synthetic>` (the CLI's own notices) are kept as text.
//! - Finally [`crate::repair()`] runs; each fix it applies is appended as a note. Typical
//!   fixes for a damaged log: two assistant responses left adjacent by a lost user line are
//!   merged, and a tool call whose result line was lost gets an error result saying so.

use super::FormatError;
use crate::conversation::{Block, Conversation, Location, Message, Role};
use crate::format::describe;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

/// At most this many per-line notes are kept; the rest are counted in one closing note, so
/// a file of junk does not produce a note per line.
const MAX_LINE_NOTES: usize = 100;

/// How many non-comment lines [`looks_like_log`] looks at.
const DETECT_LINES: usize = 20;

/// Whether `text` looks like a JSON Lines Claude Code log: one of its first non-comment
/// lines is a Claude Code record.
pub fn looks_like_log(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .take(DETECT_LINES)
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .any(|value| looks_like_record(&value))
}

/// Whether `value` is one Claude Code log record: an object with a string `type` and one of
/// the keys that records carry (`uuid`, `sessionId`, `leafUuid` for summaries, `messageId`
/// for file-history snapshots).
pub fn looks_like_record(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str).is_some()
        && ["uuid", "sessionId", "leafUuid", "messageId"].iter().any(|key| value.get(key).is_some())
}

/// Reads a log into a conversation, with notes on what was skipped or repaired.
///
/// Fails only when no user or assistant record with content could be read.
pub fn parse(text: &str) -> Result<(Conversation, Vec<String>), FormatError> {
    let mut scan = Scan::default();
    for (index, line) in text.lines().enumerate() {
        scan.line(index + 1, line);
    }
    let Scan { records, mut notes, skipped_kinds, duplicates, hidden_notes, relogged_records, relogged_blocks, .. } =
        scan;
    if hidden_notes > 0 {
        notes.push(format!("{hidden_notes} more lines were skipped (not listed)"));
    }
    if !skipped_kinds.is_empty() {
        let kinds: Vec<String> = skipped_kinds.iter().map(|(kind, count)| format!("{count} `{kind}`")).collect();
        notes.push(format!("skipped records that are not messages: {}", kinds.join(", ")));
    }
    if duplicates > 0 {
        notes.push(format!("skipped {duplicates} duplicate records (a `uuid` seen before)"));
    }
    let mut relogged = Vec::new();
    if relogged_records > 0 {
        relogged.push(format!("skipped {relogged_records} re-logged records"));
    }
    if relogged_blocks > 0 {
        relogged.push(format!("dropped {relogged_blocks} re-logged blocks of other records"));
    }
    if !relogged.is_empty() {
        notes.push(format!(
            "{} (blocks logged before with the same timestamp: a resumed session repeats its history)",
            relogged.join(" and ")
        ));
    }
    let main = records.iter().filter(|record| !record.sidechain).count();
    let sidechain = records.len() - main;
    let keep_sidechain = main == 0;
    if sidechain > 0 {
        notes.push(if keep_sidechain {
            format!("the log holds only sidechain (subagent) records; read its {sidechain} records as the conversation")
        } else {
            format!("skipped {sidechain} sidechain (subagent) records")
        });
    }
    let messages = build(records.into_iter().filter(|record| record.sidechain == keep_sidechain));
    if messages.is_empty() {
        return Err(FormatError::Unrecognized("the Claude Code log has no user or assistant records".into()));
    }
    let mut conversation = Conversation { messages, ..Conversation::default() };
    notes.extend(crate::repair::repair(&mut conversation).iter().map(ToString::to_string));
    if conversation.messages.is_empty() {
        // Repair removes messages that are empty or only whitespace.
        return Err(FormatError::Unrecognized(
            "the Claude Code log has no user or assistant records with content".into(),
        ));
    }
    Ok((conversation, notes))
}

/// One user or assistant record, read.
struct Record {
    role: Role,
    /// `message.id` of an assistant record: the API response it belongs to.
    response: Option<String>,
    content: Vec<Block>,
    sidechain: bool,
}

/// What reading the lines found.
#[derive(Default)]
struct Scan {
    records: Vec<Record>,
    notes: Vec<String>,
    /// Per-line notes not kept because of [`MAX_LINE_NOTES`].
    hidden_notes: usize,
    skipped_kinds: BTreeMap<String, usize>,
    /// Every `uuid` seen.
    uuids: HashSet<String>,
    duplicates: usize,
    /// `type`, `timestamp` and compact JSON of every block logged so far.
    logged: HashSet<(Role, String, String)>,
    /// Records skipped because every block was logged before with the same timestamp.
    relogged_records: usize,
    /// Blocks dropped from records that also had new blocks.
    relogged_blocks: usize,
}

impl Scan {
    fn skip(&mut self, number: usize, why: String) {
        if self.notes.len() < MAX_LINE_NOTES {
            self.notes.push(format!("line {number}: skipped: {why}"));
        } else {
            self.hidden_notes += 1;
        }
    }

    fn line(&mut self, number: usize, line: &str) {
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") {
            return;
        }
        let record = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(record)) => record,
            Ok(other) => {
                let why = format!("expected a JSON object, found {}", describe(&other));
                return self.skip(number, why);
            }
            Err(err) => return self.skip(number, json_error(&err)),
        };
        let role = match record.get("type").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some(kind) => {
                *self.skipped_kinds.entry(kind.to_string()).or_default() += 1;
                return;
            }
            None => return self.skip(number, "the record has no string `type`".into()),
        };
        if let Some(uuid) = record.get("uuid").and_then(Value::as_str) {
            if !self.uuids.insert(uuid.to_string()) {
                self.duplicates += 1;
                return;
            }
        }
        let timestamp = record.get("timestamp").and_then(Value::as_str).map(str::to_string);
        let mut read = match read_message(role, record) {
            Ok(read) => read,
            Err(why) => return self.skip(number, why),
        };
        if let Some(timestamp) = timestamp {
            if self.drop_relogged(&mut read, timestamp) {
                return;
            }
        }
        self.records.push(read);
    }

    /// Drops the blocks of `read` that a record of its type logged before with the same
    /// timestamp; says whether the whole record is such a repeat.
    fn drop_relogged(&mut self, read: &mut Record, timestamp: String) -> bool {
        let logged = read.content.len();
        let keys: Vec<_> =
            read.content.iter().map(|block| (read.role, timestamp.clone(), block.to_value().to_string())).collect();
        let fresh: Vec<Block> = std::mem::take(&mut read.content)
            .into_iter()
            .zip(&keys)
            .filter(|(_, key)| !self.logged.contains(*key))
            .map(|(block, _)| block)
            .collect();
        self.logged.extend(keys);
        if logged > 0 && fresh.is_empty() {
            self.relogged_records += 1;
            return true;
        }
        self.relogged_blocks += logged - fresh.len();
        read.content = fresh;
        false
    }
}

/// Reads the `message` of a user or assistant record.
fn read_message(role: Role, mut record: Map<String, Value>) -> Result<Record, String> {
    let sidechain = record.get("isSidechain") == Some(&Value::Bool(true));
    let Some(Value::Object(mut message)) = record.remove("message") else {
        return Err(format!("the {} record has no `message` object", role.as_str()));
    };
    // A mid-conversation system message the harness sent rides in a user record.
    let role = if message.get("role").and_then(Value::as_str) == Some("system") { Role::System } else { role };
    let content = match message.remove("content") {
        Some(Value::String(text)) => vec![Block::text(text)],
        Some(Value::Array(blocks)) => blocks
            .into_iter()
            .enumerate()
            .map(|(block, value)| {
                let location = Location { block: Some(block), ..Location::default() };
                Block::from_value(value, location)
            })
            .collect::<Result<_, _>>()
            .map_err(|err| err.to_string())?,
        Some(other) => {
            return Err(format!("the message's `content` must be a string or an array, found {}", describe(&other)))
        }
        None => return Err("the message has no `content`".into()),
    };
    let response = match (role, message.remove("id")) {
        (Role::Assistant, Some(Value::String(id))) => Some(id),
        _ => None,
    };
    Ok(Record { role, response, content, sidechain })
}

/// Groups records into messages: assistant records of one response into one message,
/// consecutive user records into one message with tool results first.
fn build(records: impl Iterator<Item = Record>) -> Vec<Message> {
    let mut messages: Vec<Message> = Vec::new();
    // The index and response id of the latest assistant message.
    let mut latest: Option<(usize, Option<String>)> = None;
    for record in records {
        match record.role {
            Role::Assistant => match &latest {
                Some((index, Some(id))) if record.response.as_ref() == Some(id) => {
                    if let Some(message) = messages.get_mut(*index) {
                        message.content.extend(record.content);
                    }
                }
                _ => {
                    latest = Some((messages.len(), record.response));
                    messages.push(Message::new(Role::Assistant, record.content));
                }
            },
            role @ (Role::User | Role::System) => match messages.last_mut() {
                Some(last) if last.role == role => last.content.extend(record.content),
                _ => messages.push(Message::new(role, record.content)),
            },
        }
    }
    for message in messages.iter_mut().filter(|message| message.role == Role::User) {
        let (mut results, rest): (Vec<Block>, Vec<Block>) =
            std::mem::take(&mut message.content).into_iter().partition(|block| matches!(block, Block::ToolResult(_)));
        results.extend(rest);
        message.content = results;
    }
    messages
}

/// What is wrong with a one-line record, with the column instead of "line 1".
fn json_error(err: &serde_json::Error) -> String {
    format!("invalid JSON at column {}: {}", err.column(), super::explain_json(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate;

    fn record(kind: &str, uuid: &str, message: Value) -> String {
        serde_json::json!({"type": kind, "uuid": uuid, "sessionId": "s", "message": message}).to_string()
    }

    fn assistant(uuid: &str, id: &str, block: Value) -> String {
        record("assistant", uuid, serde_json::json!({"role": "assistant", "id": id, "model": "m", "content": [block]}))
    }

    fn user(uuid: &str, content: Value) -> String {
        record("user", uuid, serde_json::json!({"role": "user", "content": content}))
    }

    fn kinds(message: &Message) -> Vec<&str> {
        message.content.iter().map(Block::kind).collect()
    }

    #[test]
    fn split_response_merges_even_across_interleaved_results() {
        let log = [
            user("u1", "go".into()),
            assistant("a1", "msg_1", serde_json::json!({"type": "tool_use", "id": "t1", "name": "A", "input": {}})),
            user("u2", serde_json::json!([{"type": "tool_result", "tool_use_id": "t1", "content": "1"}])),
            assistant("a2", "msg_1", serde_json::json!({"type": "tool_use", "id": "t2", "name": "B", "input": {}})),
            user("u3", serde_json::json!([{"type": "text", "text": "hurry"}])),
            user("u4", serde_json::json!([{"type": "tool_result", "tool_use_id": "t2", "content": "2"}])),
            assistant("a3", "msg_2", serde_json::json!({"type": "text", "text": "done"})),
        ]
        .join("\n");
        let (conversation, notes) = parse(&log).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(conversation.messages.len(), 4);
        assert_eq!(kinds(&conversation.messages[1]), ["tool_use", "tool_use"]);
        assert_eq!(kinds(&conversation.messages[2]), ["tool_result", "tool_result", "text"]);
        assert!(conversation.messages.iter().all(|message| message.extra.is_empty()));
        assert!(validate(&conversation).is_empty());
    }

    #[test]
    fn duplicates_sidechains_and_other_records_are_skipped_with_notes() {
        let sidechain = serde_json::json!({"type": "user", "uuid": "s1", "isSidechain": true,
            "message": {"role": "user", "content": "subagent task"}})
        .to_string();
        let log = [
            "// comment".to_string(),
            r#"{"type":"summary","summary":"s","leafUuid":"x"}"#.to_string(),
            user("u1", "hello".into()),
            user("u1", "hello".into()),
            sidechain,
            assistant("a1", "msg_1", serde_json::json!({"type": "text", "text": "hi"})),
            "{\"type\":\"user\",".to_string(),
            "[1, 2]".to_string(),
        ]
        .join("\n");
        let (conversation, notes) = parse(&log).unwrap();
        assert_eq!(conversation.messages.len(), 2);
        assert_eq!(
            notes,
            [
                "line 7: skipped: invalid JSON at column 15: the text ends where a value should be (is the file empty or cut short?)",
                "line 8: skipped: expected a JSON object, found an array",
                "skipped records that are not messages: 1 `summary`",
                "skipped 1 duplicate records (a `uuid` seen before)",
                "skipped 1 sidechain (subagent) records",
            ]
        );
    }

    #[test]
    fn a_resumed_sessions_relogged_history_is_dropped() {
        let at = |kind: &str, uuid: &str, timestamp: &str, content: Value| {
            serde_json::json!({"type": kind, "uuid": uuid, "timestamp": timestamp,
                "message": {"role": kind, "id": "msg_1", "content": content}})
            .to_string()
        };
        let text = |text: &str| serde_json::json!({"type": "text", "text": text});
        let log = [
            at("user", "u1", "t1", serde_json::json!([text("context"), text("do it")])),
            at("assistant", "a1", "t2", serde_json::json!([text("done")])),
            // The resumed copy: new uuids, the same timestamps, the user record split in two.
            at("user", "u1b", "t1", serde_json::json!([text("context")])),
            at("user", "u1c", "t1", serde_json::json!([text("do it")])),
            at("assistant", "a1b", "t2", serde_json::json!([text("done")])),
            // New turns, one repeating old text at a new time, one record half old.
            at("user", "u2", "t3", serde_json::json!([text("do it")])),
            at("user", "u3", "t1", serde_json::json!([text("context"), text("new")])),
        ]
        .join("\n");
        let (conversation, notes) = parse(&log).unwrap();
        let texts: Vec<Vec<&str>> = conversation
            .messages
            .iter()
            .map(|message| message.content.iter().filter_map(Block::as_text).collect())
            .collect();
        assert_eq!(texts, [vec!["context", "do it"], vec!["done"], vec!["do it", "new"]]);
        assert_eq!(
            notes,
            ["skipped 3 re-logged records and dropped 1 re-logged blocks of other records (blocks logged \
             before with the same timestamp: a resumed session repeats its history)"]
        );
    }

    #[test]
    fn a_system_message_in_a_user_record_stays_a_system_message_where_it_was() {
        let system =
            |uuid: &str, text: &str| record("user", uuid, serde_json::json!({"role": "system", "content": text}));
        let log = [
            user("u1", "go".into()),
            system("s1", "Plan mode is active."),
            assistant("a1", "msg_1", serde_json::json!({"type": "tool_use", "id": "t1", "name": "A", "input": {}})),
            user("u2", serde_json::json!([{"type": "tool_result", "tool_use_id": "t1", "content": "1"}])),
            system("s2", "Plan mode is off."),
            assistant("a2", "msg_2", serde_json::json!({"type": "text", "text": "done"})),
        ]
        .join("\n");
        let (conversation, notes) = parse(&log).unwrap();
        let roles: Vec<Role> = conversation.messages.iter().map(|message| message.role).collect();
        assert_eq!(roles, [Role::User, Role::System, Role::Assistant, Role::User, Role::System, Role::Assistant]);
        assert_eq!(conversation.messages[4].content[0].as_text(), Some("Plan mode is off."));
        assert!(notes.is_empty(), "{notes:?}");
        assert!(validate(&conversation).is_empty(), "{:?}", validate(&conversation));
    }

    #[test]
    fn a_subagent_log_is_read_from_its_sidechain_records() {
        let log = serde_json::json!({"type": "user", "uuid": "s1", "isSidechain": true,
            "message": {"role": "user", "content": "task"}})
        .to_string();
        let (conversation, notes) = parse(&log).unwrap();
        assert_eq!(conversation.messages.len(), 1);
        assert_eq!(notes.len(), 1, "{notes:?}");
    }

    #[test]
    fn logs_without_messages_are_unrecognized_and_junk_never_panics() {
        for text in [
            "",
            "// only a comment\n",
            "\u{0}\u{1}garbage\n\u{fffd}",
            "{}\n[]\n\"x\"\n",
            "{\"type\":\"user\",\"uuid\":\"u\",\"message\":{\"content\":[{\"type\":\"text\"}]}}",
        ] {
            let err = parse(text).unwrap_err();
            assert!(matches!(err, FormatError::Unrecognized(_)), "{err:?}");
        }
        for text in [user("u1", serde_json::json!([])), user("u1", "  \n ".into())] {
            let err = parse(&text).unwrap_err();
            assert_eq!(err.to_string(), "the Claude Code log has no user or assistant records with content");
        }
        let junk: String = (0..500).map(|n| format!("junk {n}\n")).collect();
        let mut with_message = junk.clone();
        with_message.push_str(&user("u1", "hi".into()));
        let (_, notes) = parse(&with_message).unwrap();
        assert_eq!(notes.len(), MAX_LINE_NOTES + 1);
        assert_eq!(notes.last().map(String::as_str), Some("400 more lines were skipped (not listed)"));
    }

    #[test]
    fn a_bad_block_skips_its_record_with_the_block_named() {
        let log = [user("u1", "hi".into()), user("u2", serde_json::json!([{"type": "tool_result"}]))].join("\n");
        let (_, notes) = parse(&log).unwrap();
        assert_eq!(notes, ["line 2: skipped: block 0: tool_result block is missing the required field `tool_use_id`"]);
    }

    #[test]
    fn detection_reads_past_snapshot_records_and_comments() {
        let log = "// a comment\n{\"type\":\"file-history-snapshot\",\"messageId\":\"m\",\"snapshot\":{}}\nnot json\n";
        assert!(looks_like_log(log));
        assert!(!looks_like_log("{\"a\": 1}\n{\"b\": 2}\n"));
    }

    proptest::proptest! {
        /// Any text, however broken, gives notes or an error, never a panic; and what is
        /// read is never empty.
        #[test]
        fn never_panics_on_any_text(text in "\\PC*") {
            if let Ok((conversation, _)) = parse(&text) {
                proptest::prop_assert!(!conversation.messages.is_empty());
            }
        }

        /// A real-shaped log with bytes cut out of it still reads without a panic.
        #[test]
        fn never_panics_on_a_mangled_log(cuts in proptest::collection::vec((0usize..2000, 1usize..40), 0..6)) {
            let mut bytes = [
                user("u1", "go".into()),
                assistant("a1", "msg_1", serde_json::json!({"type": "tool_use", "id": "t1", "name": "A", "input": {"x": [1, 2]}})),
                assistant("a2", "msg_1", serde_json::json!({"type": "tool_use", "id": "t2", "name": "B", "input": {}})),
                user("u2", serde_json::json!([{"type": "tool_result", "tool_use_id": "t1", "content": "one"}])),
                user("u3", serde_json::json!([{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}]}])),
                assistant("a3", "msg_2", serde_json::json!({"type": "text", "text": "done"})),
            ]
            .join("\n")
            .into_bytes();
            for (at, len) in cuts {
                let at = at % (bytes.len() + 1);
                let end = (at + len).min(bytes.len());
                bytes.drain(at..end);
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Ok((conversation, _)) = parse(&text) {
                proptest::prop_assert!(!conversation.messages.is_empty());
            }
        }
    }
}
