//! The caller's history as the middleware reads it: its length and [`HistoryChain`] always,
//! its messages only from where it needs them.
//!
//! A call that continues the last one needs only the messages new since then; the older ones
//! are read again only to start a conversation afresh, to fold payloads an earlier pass
//! replaced, or to store the history with a compaction. So a caller that holds its history
//! in another form (a proxy holds the client's request body, not its messages read into the
//! model) reads each message only when it is asked for, and need not keep them all.

use crate::compactor::replaced;
use contextfold_core::{Block, HistoryChain, Message};
use std::borrow::Cow;
use std::collections::HashSet;

/// A history the middleware reads from where it needs.
pub trait History: Sync {
    /// How many messages it holds.
    fn len(&self) -> usize;

    /// Whether it holds none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chain of its messages (of all [`len`](History::len) of them).
    fn chain(&self) -> &HistoryChain;

    /// Its messages from `from` on (none when `from` is past the end).
    fn messages_from(&self, from: usize) -> Result<Cow<'_, [Message]>, HistoryError>;

    /// Its message `index`.
    fn message(&self, index: usize) -> Result<Cow<'_, Message>, HistoryError> {
        let message = match self.messages_from(index)? {
            Cow::Borrowed(messages) => messages.first().map(Cow::Borrowed),
            Cow::Owned(messages) => messages.into_iter().next().map(Cow::Owned),
        };
        message.ok_or_else(|| HistoryError { index, why: format!("the history holds {} messages", self.len()) })
    }
}

/// Messages a [`History`] could not give: the request is sent as it came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the caller's history could not be read from message {index}: {why}")]
pub struct HistoryError {
    /// The first message that could not be read.
    pub index: usize,
    /// Why.
    pub why: String,
}

/// A history whose messages are all in memory.
#[derive(Debug, Clone, Copy)]
pub struct Whole<'a> {
    messages: &'a [Message],
    chain: &'a HistoryChain,
}

impl<'a> Whole<'a> {
    /// `messages`, whose chain is `chain`. The chain must cover exactly `messages`.
    pub fn new(messages: &'a [Message], chain: &'a HistoryChain) -> Whole<'a> {
        Whole { messages, chain }
    }
}

impl History for Whole<'_> {
    fn len(&self) -> usize {
        self.messages.len()
    }

    fn chain(&self) -> &HistoryChain {
        self.chain
    }

    fn messages_from(&self, from: usize) -> Result<Cow<'_, [Message]>, HistoryError> {
        Ok(Cow::Borrowed(self.messages.get(from..).unwrap_or(&[])))
    }
}

/// The messages of `history` that hold the originals of the tool results `ids` names (the
/// newest of each, not itself replaced), in order. They are read from the newest back until
/// each is found: a working copy holds the newest part of the history, so this reads about
/// as far back as it reaches, and all of it only when an original is not there at all.
pub(crate) fn originals_of(history: &dyn History, mut ids: HashSet<&str>) -> Result<Vec<Message>, HistoryError> {
    let mut found = Vec::new();
    for index in (0..history.len()).rev() {
        if ids.is_empty() {
            break;
        }
        let message = history.message(index)?;
        let mut holds = false;
        for block in &message.content {
            if let Block::ToolResult(result) = block {
                holds |= !replaced(result) && ids.remove(result.tool_use_id.as_str());
            }
        }
        if holds {
            found.push(message.into_owned());
        }
    }
    found.reverse();
    Ok(found)
}
