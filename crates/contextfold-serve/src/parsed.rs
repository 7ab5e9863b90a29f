//! A conversation's messages read into the model once.
//!
//! Each request of a conversation repeats its history byte for byte and adds a message or
//! two, so reading every message into the model again on every call would cost the whole
//! history each time. A hash of each message's raw text, by position, says which messages
//! are as the last request had them; only the others are read.

use contextfold_core::hash::StableHasher;
use contextfold_core::{Message, ModelError};
use serde_json::value::RawValue;
use serde_json::Value;

/// The messages of a conversation's last request, read into the model.
#[derive(Debug, Default)]
pub struct ParsedHistory {
    /// The hash and length of each message's raw text.
    keys: Vec<(u64, usize)>,
    messages: Vec<Message>,
}

impl ParsedHistory {
    /// `raw` read into the model, reusing the messages whose text is as it was.
    pub fn read(&mut self, raw: &[&RawValue]) -> Result<&[Message], ModelError> {
        let keys: Vec<(u64, usize)> = raw.iter().map(|raw| key(raw.get())).collect();
        let same = self.keys.iter().zip(&keys).take_while(|(held, new)| held == new).count();
        self.keys.truncate(same);
        self.messages.truncate(same);
        for (index, raw) in raw.iter().enumerate().skip(same) {
            self.messages.push(read_message(raw, index)?);
            self.keys.push(keys[index]);
        }
        Ok(&self.messages)
    }
}

/// Message `index` of a body, read into the model.
pub fn read_message(raw: &RawValue, index: usize) -> Result<Message, ModelError> {
    // The body was parsed once already; the text is valid JSON.
    let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
    Message::from_value(value, index)
}

/// What tells one message's text from another's.
fn key(text: &str) -> (u64, usize) {
    (StableHasher::default().write(text.as_bytes()).finish(), text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(texts: &[String]) -> Vec<Box<RawValue>> {
        texts.iter().map(|text| RawValue::from_string(text.clone()).unwrap()).collect()
    }

    fn fresh(texts: &[String]) -> Result<Vec<Message>, ModelError> {
        raw(texts).iter().enumerate().map(|(index, raw)| read_message(raw, index)).collect()
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
        let boxed = raw(&bad);
        let err = held.read(&boxed.iter().map(AsRef::as_ref).collect::<Vec<_>>()).unwrap_err();
        assert!(err.to_string().contains("message 2"), "{err}");
        let mut next = good.clone();
        next.push(message("user", "c"));
        let boxed = raw(&next);
        assert_eq!(held.read(&boxed.iter().map(AsRef::as_ref).collect::<Vec<_>>()).unwrap(), fresh(&next).unwrap());
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
                let boxed = raw(&history);
                let read = held.read(&boxed.iter().map(AsRef::as_ref).collect::<Vec<_>>()).unwrap().to_vec();
                prop_assert_eq!(read, fresh(&history).unwrap());
            }
        }
    }
}
