//! The cold layer: a session store that keeps the original history, offloaded payloads,
//! summaries and compaction reports, so anything compaction removed can be recalled.
//!
//! [`SessionStore`] is the interface; [`MemoryStore`] keeps everything in memory,
//! [`SqliteStore`] (feature `sqlite`, on by default) in one SQLite file with full-text search,
//! and `PostgresStore` (feature `postgres`) in a PostgreSQL database that several processes
//! or machines share. [`StoreLocation`] reads a path or a `postgres://` URL.
//! The model reads it back through the recall tool ([`recall_tool_definition`], [`handle_recall`]).
//!
//! The methods are synchronous: each is one short transaction (local, or a few round trips
//! to a PostgreSQL server). Async callers that cannot afford to block may run them in
//! `tokio::task::spawn_blocking`.

mod location;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod recall_tool;
mod record;
#[cfg(feature = "sqlite")]
mod sqlite;
mod state;

pub use location::StoreLocation;
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore, PostgresUrl, POSTGRES_SCHEMA_VERSION};
pub use recall_tool::{
    handle_recall, recall_lines, recall_tool_definition, search_answer, search_sessions, Lines, RecallInputError,
    RecallOutput, RecallRequest, HITS_PER_PAGE, MAX_RECALL_CHARS, RECALL_TOOL_NAME,
};
pub use record::{Origin, StoredCompaction};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SCHEMA_VERSION};
pub use state::{ConversationStore, Put, StateLock, StateStore, StoredState};

use crate::summarize::Usage;
use contextfold_core::clip::Clipped;
use contextfold_core::evict::Offload;
use contextfold_core::hash::{canonical_json, StableHasher};
use contextfold_core::{ContentShape, Message};
use serde_json::Value;
use std::path::PathBuf;

/// A session's id: an opaque string chosen by the store.
pub type SessionId = String;

/// A payload removed from the conversation (evicted or clipped), kept for recall.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// Its stable reference (`cf-…`, see [`contextfold_core::hash::payload_ref`]).
    pub reference: String,
    /// The session it came from.
    pub session: SessionId,
    /// The tool that produced it.
    pub tool: String,
    /// What the tool did (`file_read`, `shell`, …), or `clipped` for a clipped output.
    pub kind: String,
    /// The file, pattern, command or URL, when known.
    pub target: Option<String>,
    /// Its tokens before it was removed.
    pub tokens: u64,
    /// Index of its message in the compacted conversation's input.
    pub message: usize,
    /// Index of its block in that message.
    pub block: usize,
    /// The payload itself: a string or a block list, exactly as it was.
    pub payload: Value,
}

impl Payload {
    /// The payload of an evicted block.
    pub fn from_offload(session: &str, item: &Offload) -> Payload {
        let kind = match serde_json::to_value(item.kind) {
            Ok(Value::String(kind)) => kind,
            _ => format!("{:?}", item.kind),
        };
        Payload {
            reference: item.reference.clone(),
            session: session.to_string(),
            tool: item.tool.clone(),
            kind,
            target: item.target.clone(),
            tokens: item.tokens,
            message: item.message,
            block: item.block,
            payload: item.payload.clone(),
        }
    }

    /// The full payload of a clipped block.
    pub fn from_clipped(session: &str, item: &Clipped) -> Payload {
        Payload {
            reference: item.reference.clone(),
            session: session.to_string(),
            tool: item.tool.clone(),
            kind: "clipped".to_string(),
            target: None,
            tokens: item.tokens_before,
            message: item.message,
            block: item.block,
            payload: item.payload.clone(),
        }
    }
}

/// A summary of a conversation head.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The hash of what it summarizes, the previous summary and the folded messages
    /// ([`head_hash`]), whoever summarized them.
    pub head_hash: String,
    /// The summarizer that wrote it.
    pub summarizer: String,
    /// The summary text.
    pub text: String,
    /// Tokens the summarizer used.
    pub usage: Usage,
}

/// One stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Its id.
    pub id: SessionId,
    /// The name or source it was created with.
    pub name: String,
    /// Messages stored.
    pub messages: usize,
    /// Payloads stored.
    pub payloads: usize,
    /// When it was created, in seconds since the Unix epoch.
    pub created: u64,
}

/// What [`SessionStore::append_messages`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Appended {
    /// Messages stored.
    pub stored: usize,
    /// Messages skipped because the same message is already stored at the same sequence.
    pub skipped: usize,
    /// The session's message count afterwards.
    pub total: usize,
}

/// Where a search hit is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HitLocation {
    /// A message, by its sequence number (its position in the stored history).
    Message(usize),
    /// A payload, by its reference.
    Payload(String),
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The session it is in.
    pub session: SessionId,
    /// The message or payload it is in.
    pub location: HitLocation,
    /// The matching text around the match; the match itself is marked `[`…`]`.
    pub snippet: String,
}

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file is not a SQLite database.
    #[error("{} is not a contextfold store (not a SQLite database)", .path.display())]
    NotAStore {
        /// The file.
        path: PathBuf,
    },
    /// The store uses a schema this build does not know.
    #[error(
        "store {} was written by a newer contextfold (schema {found}, this build knows {known}); upgrade contextfold",
        .path.display()
    )]
    NewerSchema {
        /// The file, or a PostgreSQL store's URL without its password.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The store was written by an older contextfold and a reader may not upgrade it.
    #[error(
        "store {} has schema {found} and this build reads schema {known}; upgrade it with `contextfold sessions upgrade --store {}` (reading commands never change a store)",
        .path.display(), .path.display()
    )]
    OlderSchema {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The version this build reads.
        known: i64,
    },
    /// The path names a directory.
    #[error("{} is a directory, not a store file; give the store's file (such as {}/store.db)", .path.display(), .path.display())]
    IsDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// The file is a SQLite database of another program.
    #[error("{} is a SQLite database of another program, not a contextfold store", .path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
    },
    /// There is no store at the path, and the caller asked not to create one.
    #[error("no store at {}", .path.display())]
    Missing {
        /// The file, or a PostgreSQL store's URL without its password.
        path: PathBuf,
    },
    /// Another process held the store's write lock for longer than the busy timeout.
    #[error("store {} is locked by another process (gave up after {} s)", .path.display(), .waited.as_secs())]
    Locked {
        /// The file.
        path: PathBuf,
        /// How long we waited.
        waited: std::time::Duration,
    },
    /// The file or its directory could not be created or read.
    #[error("cannot open store {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The session does not exist.
    #[error("no session `{0}` in the store")]
    UnknownSession(String),
    /// The call was inconsistent (a payload of another session in a compaction).
    #[error("invalid store call: {0}")]
    Invalid(String),
    /// A stored value could not be read back (a damaged store).
    #[error("damaged store: {0}")]
    Corrupt(String),
    /// The runtime shut down before the store call ran; nothing was written.
    #[error("the store call was interrupted: the async runtime shut down before it ran")]
    Interrupted,
    /// A store location names no store this build has.
    #[error("this contextfold has no {store} store (build it with the cargo feature `{feature}`)")]
    NotBuiltIn {
        /// Which store.
        store: &'static str,
        /// The feature that adds it.
        feature: &'static str,
    },
    /// A PostgreSQL store URL that cannot be used; the message never repeats the URL.
    #[cfg(feature = "postgres")]
    #[error("the store URL is not a valid PostgreSQL URL: {0}")]
    BadUrl(String),
    /// The database has a `contextfold` schema that is not a contextfold store.
    #[cfg(feature = "postgres")]
    #[error("store {server}: the database's schema `contextfold` belongs to another program; use another database")]
    ForeignSchema {
        /// The store's URL without its password.
        server: String,
    },
    /// PostgreSQL failed, or could not be reached.
    #[cfg(feature = "postgres")]
    #[error("store {server}: {}", postgres::describe(.cause))]
    Postgres {
        /// The store's URL without its password.
        server: String,
        /// The cause, told in full by this error's message (so it is not its `source`).
        cause: tokio_postgres::Error,
    },
    /// Every connection of the pool stayed busy for longer than the pool's wait.
    #[cfg(feature = "postgres")]
    #[error(
        "store {server}: all {connections} connections stayed busy for {} s; try again, or allow more connections",
        .waited.as_secs()
    )]
    PoolTimeout {
        /// The store's URL without its password.
        server: String,
        /// How long we waited.
        waited: std::time::Duration,
        /// The pool's size.
        connections: usize,
    },
    /// SQLite failed.
    #[cfg(feature = "sqlite")]
    #[error("store {}: {source}", .path.display())]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
}

/// A place to keep sessions: their original history, removed payloads, summaries and
/// compaction reports.
///
/// All methods are synchronous (see the [module documentation](self)); every write is
/// atomic: it happens entirely or not at all.
pub trait SessionStore: Send + Sync {
    /// Creates an empty session named `name` (a file name, an agent id, …) and returns its id.
    fn create_session(&self, name: &str) -> Result<SessionId, StoreError>;

    /// Stores `messages` as the session's history from its start, each with its sequence
    /// number (its position) and content hash.
    ///
    /// A message identical to the one already stored at its position is skipped, so
    /// passing the whole, growing conversation on every call stores each message once.
    /// From the first position that differs, the remaining messages are appended after
    /// the stored history, which keeps what was stored; to append new messages without
    /// this alignment, use [`SessionStore::push_messages`].
    fn append_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError>;

    /// Appends `messages` after the stored history, with no deduplication.
    fn push_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError>;

    /// Writes `messages` as the session's history from position `from` on: what was stored
    /// there before is replaced, what comes before is kept. A caller that keeps the log of a
    /// growing history writes from where it last stopped, so each message is stored once and
    /// a write costs only what is new; a history that changed is written again from where it
    /// changed (or from 0). `from` past the stored history is refused, so the log has no gaps.
    fn log_messages(&self, session: &str, from: usize, messages: &[Message]) -> Result<Appended, StoreError>;

    /// Deletes every session last written before `before` (seconds since the Unix epoch),
    /// with everything it holds, and the conversation states last written before then.
    /// Returns the sessions deleted.
    fn prune(&self, before: u64) -> Result<Vec<SessionId>, StoreError>;

    /// Stores a payload; a payload already stored under the same reference for the same
    /// session is kept as it is. Returns whether it was new.
    fn put_payload(&self, payload: &Payload) -> Result<bool, StoreError>;

    /// The payload stored under `reference` (in any session), exactly as it was put.
    fn recall(&self, reference: &str) -> Result<Option<Value>, StoreError>;

    /// Stores a summary of the head with hash `summary.head_hash`; a later summary of the
    /// same head by the same summarizer replaces it.
    fn put_summary(&self, session: &str, summary: &Summary) -> Result<(), StoreError>;

    /// The summaries of a session, oldest first.
    fn summaries(&self, session: &str) -> Result<Vec<Summary>, StoreError>;

    /// Stores a compaction report (the JSON of a [`CompactionReport`](crate::CompactionReport)).
    fn put_report(&self, session: &str, report: &Value) -> Result<(), StoreError>;

    /// The reports of a session, oldest first.
    fn reports(&self, session: &str) -> Result<Vec<Value>, StoreError>;

    /// Records one model call of the session (a JSON object: when, what was received and
    /// sent, what the upstream reported), so what compaction saved can be told later.
    fn put_call(&self, session: &str, call: &Value) -> Result<(), StoreError>;

    /// The calls of a session, oldest first.
    fn calls(&self, session: &str) -> Result<Vec<Value>, StoreError>;

    /// Everything a compaction produced, in one transaction: the history it compacted
    /// (stored as by [`SessionStore::append_messages`]), the payloads it removed (all of
    /// `session`), its summary and its report. All of it is stored or none.
    fn persist_compaction(
        &self,
        session: &str,
        messages: &[Message],
        payloads: &[Payload],
        summary: Option<&Summary>,
        report: &Value,
    ) -> Result<Appended, StoreError>;

    /// Replaces the session's metadata: what a caller needs besides the messages to rebuild
    /// its conversation (say the input format, the system prompt and the tools).
    fn set_session_meta(&self, session: &str, meta: &Value) -> Result<(), StoreError>;

    /// The session's metadata, `None` when none was set.
    fn session_meta(&self, session: &str) -> Result<Option<Value>, StoreError>;

    /// Every session, oldest first.
    fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;

    /// The session's stored history, in order.
    fn export(&self, session: &str) -> Result<Vec<Message>, StoreError>;

    /// Deletes a session with its messages, payloads, summaries, reports and calls. Returns
    /// whether it existed.
    fn delete_session(&self, session: &str) -> Result<bool, StoreError>;

    /// Messages and payloads matching the words of `query` (all of them, any case), in one
    /// session or all, at most `limit`.
    fn search(&self, session: Option<&str>, query: &str, limit: usize) -> Result<Vec<Hit>, StoreError>;
}

/// Where messages go in a session's stored history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) enum At {
    /// After the messages already stored at the same positions (see
    /// [`SessionStore::append_messages`]).
    Aligned,
    /// After the stored history.
    End,
    /// From this position on, in place of what is stored there.
    Position(usize),
}

/// The error of a log write that would leave a gap.
pub(crate) fn log_gap(session: &str, from: usize, stored: usize) -> StoreError {
    StoreError::Invalid(format!(
        "session {session} holds {stored} messages: its history cannot be written from position {from}"
    ))
}

/// Checks that every payload of a compaction belongs to its session.
pub(crate) fn check_payload_sessions(session: &str, payloads: &[Payload]) -> Result<(), StoreError> {
    match payloads.iter().find(|payload| payload.session != session) {
        Some(other) => Err(StoreError::Invalid(format!(
            "payload {} belongs to session `{}`, not `{session}`",
            other.reference, other.session
        ))),
        None => Ok(()),
    }
}

/// The hash of a summary's input: the summary it updates (if any) and the messages it folds,
/// as the summarizer was given them. Two summaries of the same input share it, so a store
/// keeps the latest of each summarizer ([`SessionStore::put_summary`]).
pub fn head_hash(previous: Option<&str>, head: &[Message]) -> String {
    let mut hasher = StableHasher::default();
    hasher.write(b"head").write(previous.unwrap_or("").as_bytes());
    for message in head {
        hasher.write(message_hash(message).as_bytes());
    }
    format!("{:016x}", hasher.finish())
}

/// Runs a store call off the async runtime's threads (on its blocking pool) when there is a
/// Tokio runtime, inline otherwise, since every store call is synchronous. A panic in the
/// call is resumed here.
pub async fn off_runtime<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return call() };
    match runtime.spawn_blocking(call).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(_) => Err(StoreError::Interrupted),
    }
}

/// The content hash of a message: its JSON (keys sorted) and its content shape.
pub fn message_hash(message: &Message) -> String {
    let shape: &[u8] = match message.shape {
        ContentShape::Blocks => b"blocks",
        ContentShape::Text => b"text",
    };
    let hash = StableHasher::default()
        .write(b"message")
        .write(shape)
        .write(canonical_json(&message.to_value()).as_bytes())
        .finish();
    format!("{hash:016x}")
}

/// The searchable text of a JSON value: its strings, one a line (object keys left out).
pub(crate) fn searchable_text(value: &Value) -> String {
    fn walk(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(map) => map.values().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

/// The searchable text of a message: the strings of its content.
pub(crate) fn message_text(message: &Message) -> String {
    let content = message.to_value().get("content").cloned().unwrap_or(Value::Null);
    searchable_text(&content)
}

/// Reads back a message stored as its JSON and content shape.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn message_from_stored(json: &str, shape: &str, sequence: usize) -> Result<Message, StoreError> {
    let value = decode_json(json, &format!("message {sequence}"))?;
    let mut message = Message::from_value(value, sequence)
        .map_err(|err| StoreError::Corrupt(format!("message {sequence}: {}", err.message)))?;
    message.shape = if shape == "text" { ContentShape::Text } else { ContentShape::Blocks };
    Ok(message)
}

/// The shape column of a message.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn shape_name(message: &Message) -> &'static str {
    match message.shape {
        ContentShape::Blocks => "blocks",
        ContentShape::Text => "text",
    }
}

/// How many leading `incoming` hashes equal the `stored` ones at the same position.
pub(crate) fn aligned_prefix(stored: &[String], incoming: &[String]) -> usize {
    stored.iter().zip(incoming).take_while(|(a, b)| a == b).count()
}

/// A new session id: the time and some randomness.
pub(crate) fn new_session_id() -> SessionId {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("s{:x}{:06x}", nanos, fastrand::u32(..0x0100_0000))
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// `value` as stored text: its JSON, preceded, when it holds floating-point numbers, by a
/// line `F<bits>,<bits>,…` giving their exact bits in document order.
///
/// serde_json (without its `float_roundtrip` feature) may read a float back one unit in the
/// last place off; the bits make every stored value come back exactly.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn encode_json(value: &Value) -> String {
    fn floats(value: &Value, out: &mut Vec<u64>) {
        match value {
            Value::Number(number) if !number.is_i64() && !number.is_u64() => {
                out.push(number.as_f64().unwrap_or_default().to_bits())
            }
            Value::Array(items) => items.iter().for_each(|item| floats(item, out)),
            Value::Object(map) => map.values().for_each(|item| floats(item, out)),
            _ => {}
        }
    }
    let mut bits = Vec::new();
    floats(value, &mut bits);
    let json = value.to_string();
    if bits.is_empty() {
        return json;
    }
    let bits: Vec<String> = bits.iter().map(u64::to_string).collect();
    format!("F{}\n{json}", bits.join(","))
}

/// Reads text written by [`encode_json`]; `what` names it in errors.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_json(text: &str, what: &str) -> Result<Value, StoreError> {
    fn restore(value: &mut Value, bits: &mut std::slice::Iter<'_, u64>) {
        match value {
            Value::Number(number) if !number.is_i64() && !number.is_u64() => {
                if let Some(exact) = bits.next().and_then(|bits| serde_json::Number::from_f64(f64::from_bits(*bits))) {
                    *number = exact;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| restore(item, bits)),
            Value::Object(map) => map.values_mut().for_each(|item| restore(item, bits)),
            _ => {}
        }
    }
    let corrupt = |detail: String| StoreError::Corrupt(format!("{what}: {detail}"));
    let (bits, json) = match text.strip_prefix('F') {
        Some(rest) => {
            let (line, json) = rest.split_once('\n').ok_or_else(|| corrupt("no JSON after the float line".into()))?;
            let bits = line
                .split(',')
                .map(str::parse::<u64>)
                .collect::<Result<Vec<u64>, _>>()
                .map_err(|err| corrupt(format!("bad float line: {err}")))?;
            (bits, json)
        }
        None => (Vec::new(), text),
    };
    let mut value: Value = serde_json::from_str(json).map_err(|err| corrupt(format!("not JSON: {err}")))?;
    if !bits.is_empty() {
        restore(&mut value, &mut bits.iter());
    }
    Ok(value)
}
