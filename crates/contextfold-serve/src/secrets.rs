//! Secrets kept out of a conversation's stored state.
//!
//! The state record holds the messages as the middleware sends them, so that another replica
//! sends the same bytes, and those hold whatever keys and tokens the client's history holds.
//! Before a record is stored, every secret the redactor finds in one of its strings is
//! masked as `[REDACTED:<kind>]`, and a [`Hole`] says where the mask is and where in the
//! client's request the secret was found: a message (by index) or the frame (its system
//! prompt and tools), a string in it and a byte range. A replica reading the record back
//! takes each secret from the same place in the request it serves, whose history starts with
//! the same messages, and so sends what the writer sent, byte for byte. Only places are
//! stored, never a secret or anything computed from one. A secret found nowhere in the
//! request stays masked.

use contextfold::middleware::History;
use contextfold::redact::Redactor;
use contextfold_core::hash::hash_bytes;
use contextfold_core::{Conversation, System};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

/// A masked secret in a stored record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hole {
    /// The string holding the mask, as a JSON pointer into the record.
    pub at: String,
    /// Where the mask starts in that string, in bytes.
    pub offset: usize,
    /// The mask's length in bytes.
    pub len: usize,
    /// Where the secret is in the client's request; `None` when it was found nowhere.
    pub from: Option<Place>,
}

/// A place in a request where a secret is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Place {
    /// The message's index, or `None` for the frame (system prompt and tools).
    pub message: Option<usize>,
    /// The string, as a JSON pointer into the message (or frame).
    pub path: String,
    /// The secret's byte range in that string.
    pub start: usize,
    /// The end of the range.
    pub end: usize,
}

/// The parts of a request secrets are taken from.
#[derive(Clone, Copy)]
pub struct Sources<'r> {
    /// The client's messages, read where a secret is looked for.
    pub messages: &'r dyn History,
    /// Its system prompt.
    pub system: Option<&'r System>,
    /// Its tool definitions.
    pub tools: Option<&'r [Value]>,
}

/// Where this conversation's secrets were found, remembered in memory (never stored), so that
/// a record is sealed without searching the history again for a secret seen before; and
/// which strings of each part of the last record held none, so that only new strings are
/// searched (a record repeats most of the previous one's).
#[derive(Debug, Default)]
pub struct Secrets {
    known: HashMap<String, Place>,
    /// By the part's JSON pointer: the hash and length of each string that held no secret.
    clean: HashMap<String, HashSet<(u64, usize)>>,
}

impl Secrets {
    /// Masks every secret in the strings of `part`, the value at the JSON pointer `at` of a
    /// record (`""`: the whole record); returns the holes, each with where its secret is in
    /// `request` (or in a request seen before). The strings found clean are remembered for
    /// the next sealing of the same part.
    pub fn seal_part(&mut self, part: &mut Value, at: &str, request: Option<Sources<'_>>) -> Vec<Hole> {
        let redactor = Redactor::default();
        let mut search = request.map(Search::new);
        let mut holes = Vec::new();
        let before = self.clean.remove(at).unwrap_or_default();
        let mut clean = HashSet::new();
        visit_strings(part, &mut at.to_string(), &mut |at, text| {
            let seen = (hash_bytes(text.as_bytes()), text.len());
            if before.contains(&seen) {
                clean.insert(seen);
                return;
            }
            let findings = redactor.find(text);
            if findings.is_empty() {
                clean.insert(seen);
                return;
            }
            let mut masked = String::with_capacity(text.len());
            let mut end = 0;
            for finding in findings {
                let secret = &text[finding.range.clone()];
                // A place seen before, if the request still holds the secret there (a client
                // that edited its history may have moved it).
                let known = self.known.get(secret).filter(|place| match search.as_mut() {
                    Some(search) => search.at(place).as_deref() == Some(secret),
                    None => true,
                });
                let from = match known {
                    Some(place) => Some(place.clone()),
                    None => search.as_mut().and_then(|search| search.find(secret)),
                };
                if let Some(place) = &from {
                    self.known.insert(secret.to_string(), place.clone());
                }
                masked.push_str(&text[end..finding.range.start]);
                let mask = format!("[REDACTED:{}]", finding.kind.name());
                holes.push(Hole { at: at.to_string(), offset: masked.len(), len: mask.len(), from });
                masked.push_str(&mask);
                end = finding.range.end;
            }
            masked.push_str(&text[end..]);
            *text = masked;
        });
        self.clean.insert(at.to_string(), clean);
        holes
    }

    /// Puts back into `record` each secret of `holes` that `request` holds at its place,
    /// remembering where it was.
    pub fn unseal(&mut self, record: &mut Value, holes: &[Hole], request: Sources<'_>) {
        let mut search = Search::new(request);
        // Right to left within a string, so the offsets still before hold.
        let mut ordered: Vec<&Hole> = holes.iter().collect();
        ordered.sort_by(|a, b| (&a.at, b.offset).cmp(&(&b.at, a.offset)));
        for hole in ordered {
            let Some(place) = &hole.from else { continue };
            let Some(secret) = search.at(place) else { continue };
            let Some(Value::String(text)) = record.pointer_mut(&hole.at) else { continue };
            let range = hole.offset..hole.offset + hole.len;
            let is_mask = text.get(range.clone()).is_some_and(|mask| mask.starts_with("[REDACTED:"));
            if is_mask {
                text.replace_range(range, &secret);
                self.known.insert(secret, place.clone());
            }
        }
    }
}

/// The frame of `system` and `tools`: the request without its messages, as a record
/// stores it and as secrets are found in it.
pub fn frame(system: Option<&System>, tools: Option<&[Value]>) -> Value {
    Conversation { system: system.cloned(), tools: tools.map(<[Value]>::to_vec), ..Conversation::default() }.to_value()
}

/// A request's strings, each part turned into JSON once, when first searched.
struct Search<'r> {
    request: Sources<'r>,
    frame: Option<Value>,
    messages: HashMap<usize, Value>,
}

impl<'r> Search<'r> {
    fn new(request: Sources<'r>) -> Search<'r> {
        Search { request, frame: None, messages: HashMap::new() }
    }

    fn frame(&mut self) -> &Value {
        let request = self.request;
        self.frame.get_or_insert_with(|| frame(request.system, request.tools))
    }

    fn message(&mut self, index: usize) -> Option<&Value> {
        let messages = self.request.messages;
        match self.messages.entry(index) {
            Entry::Occupied(entry) => Some(entry.into_mut()),
            Entry::Vacant(entry) => Some(entry.insert(messages.message(index).ok()?.to_value())),
        }
    }

    /// Where `secret` is: in the frame, else in the newest message that holds it.
    fn find(&mut self, secret: &str) -> Option<Place> {
        if let Some((path, start)) = find_in(self.frame(), secret) {
            return Some(Place { message: None, path, start, end: start + secret.len() });
        }
        for index in (0..self.request.messages.len()).rev() {
            let Some(value) = self.message(index) else { continue };
            if let Some((path, start)) = find_in(value, secret) {
                return Some(Place { message: Some(index), path, start, end: start + secret.len() });
            }
        }
        None
    }

    /// The text at `place`, when the request has it.
    fn at(&mut self, place: &Place) -> Option<String> {
        let part = match place.message {
            Some(index) => self.message(index)?,
            None => self.frame(),
        };
        part.pointer(&place.path)?.as_str()?.get(place.start..place.end).map(str::to_string)
    }
}

/// The first string of `value` holding `secret`: its JSON pointer and the secret's offset.
fn find_in(value: &Value, secret: &str) -> Option<(String, usize)> {
    match value {
        Value::String(text) => text.find(secret).map(|start| (String::new(), start)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, item)| find_in(item, secret).map(|(path, start)| (format!("/{index}{path}"), start))),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            find_in(item, secret).map(|(path, start)| (format!("/{}{path}", escape(key)), start))
        }),
        _ => None,
    }
}

/// An object key as a JSON pointer segment.
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Calls `visit` with the JSON pointer and text of every string in `value` (object keys
/// aside), in document order.
fn visit_strings(value: &mut Value, path: &mut String, visit: &mut impl FnMut(&str, &mut String)) {
    let len = path.len();
    match value {
        Value::String(text) => visit(path, text),
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                path.push('/');
                path.push_str(&index.to_string());
                visit_strings(item, path, visit);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                path.push('/');
                path.push_str(&escape(key));
                visit_strings(item, path, visit);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextfold::middleware::Whole;
    use contextfold_core::{HistoryChain, Message};
    use serde_json::json;

    const KEY: &str = "sk-ant-api03-Zq8vN2xK7pL4mR9tW1yB6cF3hJ5dG0sA8eU2iO7kM4nQ1rT6vX9zC3bV5wY8uI0pE2a-AbCdEfAA";
    const AWS: &str = "AKIAZ7QW3ER5TY8UI2OP";

    fn message(value: Value) -> Message {
        Message::from_value(value, 0).unwrap()
    }

    /// `messages` as a history that lives as long as the test.
    fn held(messages: &[Message]) -> &'static dyn History {
        let messages: &'static [Message] = Box::leak(messages.to_vec().into_boxed_slice());
        let chain = Box::leak(Box::new(HistoryChain::of(messages)));
        Box::leak(Box::new(Whole::new(messages, chain)))
    }

    #[test]
    fn sealed_records_hold_no_secret_and_unseal_to_the_same_bytes() {
        let history = vec![
            message(json!({"role": "user", "content": "deploy it"})),
            message(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": format!("ANTHROPIC_API_KEY={KEY}\nkey {AWS} and {AWS}\n")}]})),
        ];
        let system = System::Text(format!("export AWS_ACCESS_KEY_ID={AWS}"));
        let request = Sources { messages: held(&history), system: Some(&system), tools: None };
        // A record quoting the history whole, a clipped part of a key, and a literal mask.
        let clipped = &KEY[..40];
        let original = json!({"working": [history[1].to_value(), {"text": format!("cut: {clipped}… [REDACTED:jwt]")}],
            "frame": {"system": format!("export AWS_ACCESS_KEY_ID={AWS}")}});
        let mut record = original.clone();
        let mut secrets = Secrets::default();
        let holes = secrets.seal_part(&mut record, "", Some(request));
        // Sealed again (the strings without secrets remembered), it comes out the same.
        let mut again = original.clone();
        assert_eq!(secrets.seal_part(&mut again, "", Some(request)), holes);
        assert_eq!(again, record);
        let stored = serde_json::to_string(&(&record, &holes)).unwrap();
        for secret in [KEY, AWS, clipped] {
            assert!(!stored.contains(secret), "{stored}");
        }
        assert_eq!(holes.len(), 5, "{holes:?}");
        assert!(holes.iter().all(|hole| hole.from.is_some()), "{holes:?}");
        assert!(stored.contains("[REDACTED:jwt]"), "a mask the text already had stays a mask");

        // Another process, with the next request: the same history and one message more.
        let mut next = history.clone();
        next.push(message(json!({"role": "assistant", "content": "done"})));
        let request = Sources { messages: held(&next), system: Some(&system), tools: None };
        let mut read: Value = serde_json::from_str::<(Value, Vec<Hole>)>(&stored).unwrap().0;
        Secrets::default().unseal(&mut read, &holes, request);
        assert_eq!(read, original);
    }

    #[test]
    fn a_place_seen_before_is_checked_against_the_request() {
        let first = vec![message(json!({"role": "user", "content": format!("key {AWS}")}))];
        let mut secrets = Secrets::default();
        let mut record = json!({"text": format!("saw {AWS}")});
        let holes =
            secrets.seal_part(&mut record, "", Some(Sources { messages: held(&first), system: None, tools: None }));
        assert_eq!(holes[0].from.as_ref().and_then(|place| place.message), Some(0));
        // The client rewrote its history: the key is now in its second message only.
        let edited = vec![
            message(json!({"role": "user", "content": "start over"})),
            message(json!({"role": "user", "content": format!("the key: {AWS}")})),
        ];
        let mut record = json!({"text": format!("saw {AWS}")});
        let holes =
            secrets.seal_part(&mut record, "", Some(Sources { messages: held(&edited), system: None, tools: None }));
        let place = holes[0].from.clone().expect("found");
        assert_eq!((place.message, place.start), (Some(1), 9));
    }

    #[test]
    fn a_secret_the_request_does_not_hold_stays_masked() {
        let mut record = json!({"note": format!("token ghp_Zq8vN2xK7pL4mR9tW1yB6cF3hJ5dG0sA8eU2")});
        let holes = Secrets::default().seal_part(&mut record, "", None);
        assert_eq!(holes.len(), 1);
        assert_eq!(holes[0].from, None);
        assert_eq!(record["note"], "token [REDACTED:github-token]");
        let history = vec![message(json!({"role": "user", "content": "hello"}))];
        let mut read = record.clone();
        Secrets::default().unseal(&mut read, &holes, Sources { messages: held(&history), system: None, tools: None });
        assert_eq!(read, record);
    }

    #[test]
    fn holes_that_do_not_fit_are_left_alone() {
        let history = vec![message(json!({"role": "user", "content": format!("key {AWS}")}))];
        let request = Sources { messages: held(&history), system: None, tools: None };
        let place = Place { message: Some(0), path: "/content".into(), start: 4, end: 24 };
        let bad = [
            Hole { at: "/missing".into(), offset: 0, len: 3, from: Some(place.clone()) },
            Hole { at: "/text".into(), offset: 2, len: 200, from: Some(place.clone()) },
            Hole { at: "/text".into(), offset: 1, len: 2, from: Some(place.clone()) },
            Hole { at: "/text".into(), offset: 0, len: 5, from: Some(Place { message: Some(9), ..place.clone() }) },
            Hole { at: "/text".into(), offset: 0, len: 5, from: Some(Place { end: 99, ..place.clone() }) },
        ];
        let mut record = json!({"text": "ü [REDACTED:x]"});
        Secrets::default().unseal(&mut record, &bad, request);
        assert_eq!(record, json!({"text": "ü [REDACTED:x]"}));
    }
}
