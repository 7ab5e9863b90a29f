//! The middleware's state between calls, and its serializable snapshot.
//!
//! A [`MiddlewareState`] holds everything a middleware decides from: the working copy, the
//! full text of a summary it holds shortened, how much of the caller's history it covers
//! (and that history's last fingerprint), the policy's counters and the calibration. Token
//! counts are not in it: they follow from the messages and are counted again on restore.
//! So a middleware restored from a snapshot (in another process, on another replica) sends
//! for the next request exactly what the original would have sent.
//!
//! Which history it covers is named by the chain link of its covered prefix
//! ([`HistoryChain`](contextfold_core::HistoryChain)), so a history continues it only when every
//! covered message is the one it was built from.
//!
//! The working copy is the last compaction's output followed by the caller's messages since,
//! as they were ingested. A snapshot holds only the first part and where in the caller's
//! history the second begins: the rest is the caller's to send again, and the restored
//! middleware ingests it again from the next request's history. So a snapshot's size follows
//! what compactions made, not the length of the conversation, and a conversation that never
//! compacted snapshots to a few counters.

use contextfold_core::tokens::TokenLedger;
use contextfold_core::{ContentShape, Message};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The version of the snapshot format this build writes and reads. Versions 1 and 2 named
/// the covered history by its last message alone, which cannot tell a history that changed
/// before it: they are refused ([`StateError::Version`]), and the conversation starts afresh.
pub const STATE_VERSION: u32 = 3;

/// What the middleware keeps between calls.
pub(super) struct State {
    /// How many messages of the caller's history the working copy covers.
    pub(super) source_len: usize,
    /// The chain link of the covered messages, to see that a history continues them.
    pub(super) source_chain: u64,
    /// The working copy: the history as it is sent (compacted, evicted, clipped).
    pub(super) working: Arc<Vec<Message>>,
    /// How many leading messages of the working copy a compaction made; the rest is the
    /// caller's history from `compacted_source` on, as ingested.
    pub(super) compacted: usize,
    /// Where in the caller's history the ingested rest of the working copy begins.
    pub(super) compacted_source: usize,
    /// Counts of the working copy.
    pub(super) ledger: TokenLedger<'static>,
    pub(super) turns_since: usize,
    pub(super) tokens_at_compaction: u64,
    pub(super) consecutive: usize,
    pub(super) calls: usize,
    /// The full text of the summary the working copy holds shortened, to fold from next time.
    pub(super) full_summary: Option<String>,
    /// How many messages of the caller's history the store's session log holds
    /// ([`Compactor::with_session_log`](crate::Compactor::with_session_log)).
    pub(super) logged: usize,
    /// Names the messages compactions made (`working[..compacted]`): new each time they
    /// change, and unique in the process ([`next_made`]).
    pub(super) made: u64,
}

/// A number no state of this process has had: the name of the messages a compaction, a reset
/// or a restore has just made.
pub(super) fn next_made() -> u64 {
    static MADE: AtomicU64 = AtomicU64::new(1);
    MADE.fetch_add(1, Ordering::Relaxed)
}

/// The provider's count of input tokens against ours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Calibration {
    /// Provider-reported input tokens over our estimate, smoothed.
    pub(super) ratio: f64,
    /// Our estimate of the last request.
    pub(super) last_estimate: u64,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration { ratio: 1.0, last_estimate: 0 }
    }
}

/// A snapshot of a middleware's whole state, from
/// [`CompactionMiddleware::snapshot`](super::CompactionMiddleware::snapshot), for
/// [`CompactionMiddleware::restore`](super::CompactionMiddleware::restore).
///
/// Serialized (with serde, e.g. as JSON), it is self-contained: messages are kept in Anthropic
/// form with their content shape, fingerprints as hexadecimal text, and the calibration as the
/// shortest decimal text that reads back as the same `f64`, so a snapshot written and read
/// back restores exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MiddlewareState {
    version: u32,
    source_len: usize,
    /// The chain link of the covered messages (absent before version 3).
    #[serde(default, with = "hex_u64")]
    source_chain: u64,
    /// The last covered message's fingerprint (before version 3), read only to refuse such a
    /// snapshot by its version.
    #[serde(default, skip_serializing)]
    source_last: Option<String>,
    /// The working copy's messages a compaction made.
    #[serde(with = "messages")]
    working: Vec<Message>,
    /// Where in the caller's history the rest of the working copy begins (absent in version 1).
    #[serde(default)]
    history_from: usize,
    full_summary: Option<String>,
    turns_since: usize,
    tokens_at_compaction: u64,
    consecutive: usize,
    calls: usize,
    #[serde(with = "exact_f64")]
    calibration: f64,
    last_estimate: u64,
    /// How many messages the store's session log holds (absent before it was kept: written
    /// again from the start, each message in its place).
    #[serde(default)]
    logged: usize,
}

impl State {
    /// Whether the working copy still lacks caller's messages it covers (from
    /// `compacted_source` to `source_len`): so it is after a restore, until the next history
    /// brings them back.
    pub(super) fn lacks_history(&self) -> bool {
        self.working.len() - self.compacted < self.source_len - self.compacted_source
    }
}

impl MiddlewareState {
    /// The snapshot of `state`; without the messages compactions made unless `with_working`.
    pub(super) fn of(state: &State, calibration: Calibration, with_working: bool) -> MiddlewareState {
        let working = if with_working { &state.working[..state.compacted.min(state.working.len())] } else { &[] };
        MiddlewareState {
            version: STATE_VERSION,
            source_len: state.source_len,
            source_chain: state.source_chain,
            source_last: None,
            working: working.to_vec(),
            history_from: state.compacted_source,
            full_summary: state.full_summary.clone(),
            turns_since: state.turns_since,
            tokens_at_compaction: state.tokens_at_compaction,
            consecutive: state.consecutive,
            calls: state.calls,
            calibration: calibration.ratio,
            last_estimate: calibration.last_estimate,
            logged: state.logged,
        }
    }

    /// The state and calibration it holds, counted with `ledger`; an error when it was written
    /// by another version or does not hold together.
    pub(super) fn into_state(self, mut ledger: TokenLedger<'static>) -> Result<(State, Calibration), StateError> {
        if self.version != STATE_VERSION {
            return Err(StateError::Version { found: self.version, known: STATE_VERSION });
        }
        let history_from = self.history_from;
        if history_from > self.source_len || (history_from == 0) != self.working.is_empty() {
            return Err(StateError::Inconsistent(format!(
                "it covers {} message(s) of the history, {} of them compacted into the {} message(s) it holds",
                self.source_len,
                history_from,
                self.working.len()
            )));
        }
        if !(self.calibration.is_finite() && self.calibration > 0.0) {
            return Err(StateError::Inconsistent(format!(
                "its calibration {} is not a positive number",
                self.calibration
            )));
        }
        ledger.resync(&self.working);
        let state = State {
            source_len: self.source_len,
            source_chain: self.source_chain,
            compacted: self.working.len(),
            compacted_source: history_from,
            working: Arc::new(self.working),
            ledger,
            turns_since: self.turns_since,
            tokens_at_compaction: self.tokens_at_compaction,
            consecutive: self.consecutive,
            calls: self.calls,
            full_summary: self.full_summary,
            logged: self.logged.min(self.source_len),
            made: next_made(),
        };
        Ok((state, Calibration { ratio: self.calibration, last_estimate: self.last_estimate }))
    }

    /// The messages of the working copy a compaction made; the rest of what the middleware
    /// sends is the caller's history from [`history_from`](MiddlewareState::history_from) on.
    pub fn working(&self) -> &[Message] {
        &self.working
    }

    /// Where in the caller's history the rest of the working copy begins.
    pub fn history_from(&self) -> usize {
        self.history_from
    }

    /// How many messages of the caller's history it covers.
    pub fn source_len(&self) -> usize {
        self.source_len
    }

    /// The chain link of the messages it covers: a history continues this state only when its
    /// chain has this link at [`source_len`](MiddlewareState::source_len).
    pub fn source_chain(&self) -> u64 {
        self.source_chain
    }
}

/// A snapshot that cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Written by another version of the format.
    #[error("the middleware snapshot has format version {found}, this build reads version {known}; start the conversation's middleware afresh")]
    Version {
        /// Its version.
        found: u32,
        /// The version this build reads.
        known: u32,
    },
    /// Its parts contradict each other.
    #[error("the middleware snapshot does not hold together: {0}")]
    Inconsistent(String),
}

/// Messages as `{"shape": "text"|"blocks", "message": {…}}`, so a string content comes back
/// as a string and a block list as a block list.
mod messages {
    use super::*;
    use serde_json::Value;

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Stored {
        shape: Shape,
        message: Value,
    }

    #[derive(Serialize, Deserialize, Clone, Copy)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Text,
        Blocks,
    }

    pub fn serialize<S: Serializer>(messages: &[Message], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(messages.iter().map(|message| Stored {
            shape: match message.shape {
                ContentShape::Text => Shape::Text,
                ContentShape::Blocks => Shape::Blocks,
            },
            message: message.to_value(),
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Message>, D::Error> {
        let stored = Vec::<Stored>::deserialize(deserializer)?;
        (stored.into_iter().enumerate())
            .map(|(index, stored)| {
                let mut message = Message::from_value(stored.message, index).map_err(serde::de::Error::custom)?;
                message.shape = match stored.shape {
                    Shape::Text => ContentShape::Text,
                    Shape::Blocks => ContentShape::Blocks,
                };
                Ok(message)
            })
            .collect()
    }
}

/// A `u64` as 16 hexadecimal digits (JSON readers that use doubles would round a number).
mod hex_u64 {
    use super::*;

    pub fn serialize<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{value:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let text = String::deserialize(deserializer)?;
        u64::from_str_radix(&text, 16).map_err(|err| serde::de::Error::custom(format!("`{text}`: {err}")))
    }
}

/// An `f64` as the shortest decimal text that reads back as the same bits (a JSON number
/// may come back one unit in the last place off).
mod exact_f64 {
    use super::*;

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|err| serde::de::Error::custom(format!("`{text}`: {err}")))
    }
}
