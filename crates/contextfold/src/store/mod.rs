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

mod codec;
mod error;
mod hits;
mod location;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod recall_tool;
mod record;
#[cfg(feature = "sqlite")]
mod sqlite;
mod state;

pub use codec::message_hash;
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(unused_imports))]
pub(crate) use codec::{decode_json, encode_json, message_from_stored, message_text, searchable_text, shape_name};
pub use error::StoreError;
pub(crate) use error::{check_payload_sessions, log_gap};
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
pub use sqlite::{note_grown_back as note_shm_grown_back, SqliteStore, SCHEMA_VERSION};
pub use state::{ConversationStore, Put, StateLock, StateStore, StoredState};

use crate::summarize::Usage;
use contextfold_core::clip::Clipped;
use contextfold_core::evict::Offload;
use contextfold_core::hash::StableHasher;
use contextfold_core::Message;
use serde_json::Value;

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
    /// Index of its message: in the caller's history, the session's log, when a middleware
    /// (or the proxy) removed it; in the compacted conversation otherwise.
    pub message: usize,
    /// Index of its block in that message, as the caller sent it.
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

    /// Every payload an eviction or compaction removed, as `session` keeps them: the evicted
    /// `items`, then the `clipped` outputs.
    pub fn removed(session: &str, items: &[Offload], clipped: &[Clipped]) -> Vec<Payload> {
        (items.iter().map(|item| Payload::from_offload(session, item)))
            .chain(clipped.iter().map(|item| Payload::from_clipped(session, item)))
            .collect()
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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

    /// The stored message at `position` of the session's history, as JSON; `None` past its
    /// end.
    fn message_json(&self, session: &str, position: usize) -> Result<Option<Value>, StoreError> {
        Ok(self.export(session)?.get(position).map(Message::to_value))
    }

    /// Messages and payloads matching the words of `query` (all of them, any case), in one
    /// session or all, at most `limit`, best first. Each stored text is one hit: a payload
    /// found in the message it was removed from too is found once, as the payload.
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

/// One write of [`SessionStore::persist_compaction`]; [`compaction_writes`] gives them in
/// the order every store makes them, in one transaction.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CompactionWrite<'a> {
    /// The history, stored as by [`SessionStore::append_messages`].
    History(&'a [Message]),
    /// A removed payload.
    Payload(&'a Payload),
    /// The summary written.
    Summary(&'a Summary),
    /// The compaction's report.
    Report(&'a Value),
    /// The session's time of last update.
    Touch,
}

/// The writes that store a compaction of `session`: its history, payloads, summary, report,
/// then the session's time of update; an error when a payload is another session's.
pub(crate) fn compaction_writes<'a>(
    session: &str,
    messages: &'a [Message],
    payloads: &'a [Payload],
    summary: Option<&'a Summary>,
    report: &'a Value,
) -> Result<Vec<CompactionWrite<'a>>, StoreError> {
    check_payload_sessions(session, payloads)?;
    let mut writes = vec![CompactionWrite::History(messages)];
    writes.extend(payloads.iter().map(CompactionWrite::Payload));
    writes.extend(summary.map(CompactionWrite::Summary));
    writes.push(CompactionWrite::Report(report));
    writes.push(CompactionWrite::Touch);
    Ok(writes)
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
