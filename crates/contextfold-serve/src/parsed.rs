//! A conversation's messages read into the model once, and never held.
//!
//! Each request of a conversation repeats its history byte for byte and adds a message or
//! two, so reading every message into the model again on every call would cost the whole
//! history each time. A hash of each message's raw text, by position, says which messages
//! are as the last request had them; only the others are read. A message whose text is one
//! read before is also known to be JSON, so only the others are checked ([`Unchecked`]).
//! The history's [`HistoryChain`] is kept the same way, so which conversation state a
//! request continues is known from its new messages alone. The messages themselves are not
//! kept: the middleware holds what it sends, and reads an older message again from the
//! request's text only when it needs it ([`BodyHistory`]), so what a conversation holds
//! between requests is a few hashes a message, not a copy of the client's history.

use crate::body::{BodyError, RequestBody, Unchecked};
use crate::known::EntryKey;
use contextfold::middleware::{History, HistoryError};
use contextfold_core::chain::reserve_tight;
use contextfold_core::{Block, HistoryChain, Message};
use serde_json::Value;
use std::borrow::Cow;

/// What is known of a conversation's last request: the key of each message's text, and
/// their chain.
#[derive(Debug, Default)]
pub struct ParsedHistory {
    /// The key of each message's raw text.
    keys: Vec<EntryKey>,
    /// The chain of the messages.
    chain: HistoryChain,
    /// The first message holding the server's `compaction` block, if one does.
    first_compaction: Option<usize>,
}

/// A request's messages, read.
#[derive(Debug)]
pub struct Read<'a, 'h> {
    /// The body, checked.
    pub body: RequestBody<'a>,
    /// The first message not as the last request had it: those before were read then.
    pub from: usize,
    /// The messages from `from` on, read into the model.
    pub new: Vec<Message>,
    /// The chain of all the messages.
    pub chain: &'h HistoryChain,
    /// Whether one of them holds the server's `compaction` block (the server folded the
    /// history before it).
    pub server_compacted: bool,
}

/// Why a request's messages are not read.
#[derive(Debug, Clone, PartialEq)]
pub enum Unreadable {
    /// The body is not JSON: it is refused, and nothing is forwarded.
    Body(BodyError),
    /// A message is JSON but not one the model reads: the body goes out as it came, with this
    /// note, which names where and never quotes the message.
    Message(String),
}

impl ParsedHistory {
    /// The bytes it holds: a key and a chain link a message.
    pub fn held_bytes(&self) -> u64 {
        (self.keys.len() * std::mem::size_of::<EntryKey>() + self.chain.len() * std::mem::size_of::<u64>()) as u64
    }

    /// `body`'s messages that are not as the last request had them, read into the model, and
    /// the body, checked.
    pub fn read<'a>(&mut self, body: Unchecked<'a>) -> Result<Read<'a, '_>, Unreadable> {
        let keys = body.keys();
        let same = self.keys.iter().zip(keys).take_while(|(held, new)| held == new).count();
        self.keys.truncate(same);
        self.chain.truncate(same);
        self.first_compaction = self.first_compaction.filter(|&index| index < same);
        let mut new = Vec::with_capacity(keys.len() - same);
        reserve_tight(&mut self.keys, keys.len() - same);
        self.chain.reserve_tight(keys.len() - same);
        for (index, key) in keys.iter().enumerate().skip(same) {
            let message = read_message(&body, index)?;
            if self.first_compaction.is_none() && holds_compaction(&message) {
                self.first_compaction = Some(index);
            }
            self.chain.push(&message);
            self.keys.push(*key);
            new.push(message);
        }
        let count = keys.len();
        let body = body.check_from(count).map_err(Unreadable::Body)?;
        let server_compacted = self.first_compaction.is_some();
        Ok(Read { body, from: same, new, chain: &self.chain, server_compacted })
    }
}

/// A request's history as the middleware reads it: the messages new since the conversation's
/// last request, read; an older one read again from the request's text when it is asked for
/// (the same text was read before, so it reads again).
pub struct BodyHistory<'h> {
    raw: &'h [&'h str],
    chain: &'h HistoryChain,
    from: usize,
    new: Vec<Message>,
}

impl<'h> BodyHistory<'h> {
    /// The history of the messages `raw`, whose chain is `chain`, read from `from` on as `new`.
    pub fn new(raw: &'h [&'h str], chain: &'h HistoryChain, from: usize, new: Vec<Message>) -> BodyHistory<'h> {
        BodyHistory { raw, chain, from, new }
    }

    /// Message `index`, read from its text.
    fn read(&self, index: usize) -> Result<Message, HistoryError> {
        let unread = |why: String| HistoryError { index, why };
        let raw =
            self.raw.get(index).ok_or_else(|| unread(format!("the request holds {} messages", self.raw.len())))?;
        let value: Value = serde_json::from_str(raw).map_err(|err| unread(err.to_string()))?;
        Message::from_value(value, index).map_err(|err| unread(cannot_read(&err.location)))
    }
}

impl History for BodyHistory<'_> {
    fn len(&self) -> usize {
        self.raw.len()
    }

    fn chain(&self) -> &HistoryChain {
        self.chain
    }

    fn messages_from(&self, from: usize) -> Result<Cow<'_, [Message]>, HistoryError> {
        if from >= self.from {
            return Ok(Cow::Borrowed(self.new.get(from - self.from..).unwrap_or(&[])));
        }
        let mut messages = (from..self.from).map(|index| self.read(index)).collect::<Result<Vec<_>, _>>()?;
        messages.extend(self.new.iter().cloned());
        Ok(Cow::Owned(messages))
    }

    fn message(&self, index: usize) -> Result<Cow<'_, Message>, HistoryError> {
        match index.checked_sub(self.from) {
            Some(at) => self
                .new
                .get(at)
                .map(Cow::Borrowed)
                .ok_or_else(|| HistoryError { index, why: format!("the request holds {} messages", self.raw.len()) }),
            None => self.read(index).map(Cow::Owned),
        }
    }
}

/// Whether `message` holds the server's `compaction` block.
fn holds_compaction(message: &Message) -> bool {
    message.content.iter().any(|block| match block {
        Block::Other(value) => value.get("type").and_then(Value::as_str) == Some("compaction"),
        _ => false,
    })
}

/// Message `index` of `body`, read into the model. When it is not one the model reads, the
/// rest of the body is checked first: a body that is not JSON is refused, whatever else.
pub fn read_message(body: &Unchecked<'_>, index: usize) -> Result<Message, Unreadable> {
    let raw = body.entries().get(index).copied().unwrap_or("null");
    let value: Value = match serde_json::from_str(raw) {
        Ok(value) => value,
        Err(_) => {
            return Err(match body.refusal() {
                Some(refused) => Unreadable::Body(refused),
                // JSON to the parser, but no value: a lone surrogate escape, a number past f64.
                None => Unreadable::Message(format!(
                    "message {index} holds JSON the compaction cannot hold as a value (a lone surrogate escape or a \
                     number out of range)"
                )),
            });
        }
    };
    Message::from_value(value, index).map_err(|err| match body.checked_from(index + 1) {
        Ok(()) => Unreadable::Message(cannot_read(&err.location)),
        Err(refused) => Unreadable::Body(refused),
    })
}

/// The note of a message the model cannot read at `location`: where, never what (a request's
/// text does not reach the log).
pub fn cannot_read(location: &impl std::fmt::Display) -> String {
    format!("{location} is not in a shape the compaction reads (`contextfold validate` on the request says why)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn body(texts: &[String]) -> String {
        format!("{{\"messages\":[{}]}}", texts.join(","))
    }

    fn fresh(texts: &[String]) -> Result<Vec<Message>, contextfold_core::ModelError> {
        texts
            .iter()
            .enumerate()
            .map(|(index, text)| Message::from_value(serde_json::from_str(text).unwrap(), index))
            .collect()
    }

    /// Every message of `text` as the middleware reads them, and what the read left parsed.
    fn read(held: &mut ParsedHistory, text: &str) -> Result<Vec<Message>, Unreadable> {
        let body = Unchecked::read(text.as_bytes(), "messages", |_| None).map_err(Unreadable::Body)?;
        let Read { body, from, new, chain, .. } = held.read(body)?;
        assert_eq!(chain.len(), body.raw_messages().len());
        let history = BodyHistory::new(body.raw_messages(), chain, from, new);
        let whole = history.messages_from(0).expect("the history reads").into_owned();
        assert_eq!(whole.last(), history.message(history.len().saturating_sub(1)).ok().as_deref());
        assert_eq!(HistoryChain::of(&whole).last(), chain.last());
        Ok(whole)
    }

    fn message(role: &str, text: &str) -> String {
        serde_json::json!({"role": role, "content": [{"type": "text", "text": text}]}).to_string()
    }

    #[test]
    fn a_bad_message_is_refused_by_index_and_the_next_request_is_read_whole() {
        let mut held = ParsedHistory::default();
        let good = vec![message("user", "a"), message("assistant", "b")];
        let mut bad = good.clone();
        bad.push(r#"{"role":"user"}"#.to_string());
        let Err(Unreadable::Message(note)) = read(&mut held, &body(&bad)) else { panic!("read") };
        assert!(note.starts_with("message 2 "), "{note}");
        let mut next = good.clone();
        next.push(message("user", "c"));
        assert_eq!(read(&mut held, &body(&next)).unwrap(), fresh(&next).unwrap());
    }

    #[test]
    fn a_message_that_is_not_json_is_refused_as_the_parser_would_refuse_it() {
        let mut held = ParsedHistory::default();
        let good = vec![message("user", "a"), message("assistant", "b")];
        assert_eq!(read(&mut held, &body(&good)).unwrap(), fresh(&good).unwrap());
        let parser = |text: &str| RequestBody::parse(text.as_bytes()).unwrap_err();
        // Not JSON after the messages held, and after a message the model cannot read.
        for tail in [r#"{"role":"user","content":"\x"}"#, "{\"role\":\"user\",\"content\":\"\u{1}\"}"] {
            let mut next = good.clone();
            next.push(tail.to_string());
            let text = body(&next);
            assert_eq!(read(&mut held, &text), Err(Unreadable::Body(parser(&text))), "{text}");
            next.insert(2, r#"{"role":"user"}"#.to_string());
            let text = body(&next);
            assert_eq!(read(&mut held, &text), Err(Unreadable::Body(parser(&text))), "{text}");
        }
        // The held messages are still what they were.
        assert_eq!(read(&mut held, &body(&good)).unwrap(), fresh(&good).unwrap());
    }

    proptest! {
        /// Whatever a conversation's requests do to its history (grow it, edit or drop a
        /// message, start over), each is read as if it were read afresh.
        #[test]
        fn reusing_earlier_reads_never_changes_what_is_read(
            requests in prop::collection::vec(prop::collection::vec((any::<bool>(), "[ab ]{0,3}"), 0..6), 1..8)
        ) {
            let mut held = ParsedHistory::default();
            let mut history: Vec<String> = Vec::new();
            for edits in requests {
                for (grow, text) in edits {
                    let role = if history.len().is_multiple_of(2) { "user" } else { "assistant" };
                    if grow || history.is_empty() {
                        history.push(message(role, &text));
                    } else {
                        let at = text.len() % history.len();
                        history[at] = message(if at.is_multiple_of(2) { "user" } else { "assistant" }, &text);
                        history.truncate(at + 1 + text.len() % 2);
                    }
                }
                prop_assert_eq!(read(&mut held, &body(&history)).unwrap(), fresh(&history).unwrap());
            }
        }
    }
}
