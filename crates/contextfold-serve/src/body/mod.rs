//! The request body, read once: its top-level fields as raw JSON text.
//!
//! Every field but the conversation's list (`messages`, or the Responses API's `input`) is
//! forwarded as the client wrote it, so the body is never parsed into a value and written
//! back. The raw text of each field is a slice of the body, which tells where the list
//! starts and ends: a compacted body is the client's bytes with only that span replaced
//! ([`RequestBody::splice`]).
//!
//! A body is first split by structure ([`crate::split`]), its fields checked by the parser and
//! its entries left [`Unchecked`]: the caller checks the entries it has not seen before (a
//! conversation's next request repeats the last one's byte for byte), and a body whose
//! split or check fails is read again by the full parser, so that it is refused as it would
//! have been without the shortcut, with the same error.

use crate::known::{entry_key, EntryKey, KnownEntry, KnownList, Shared};
mod parser;

use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::Arc;

/// Why a request body cannot be read (the proxy answers 400 and forwards nothing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Not UTF-8.
    #[error("the request body is not UTF-8 text (byte {0}); send the request as JSON")]
    NotUtf8(usize),
    /// Not JSON.
    #[error("the request body is not valid JSON (line {line}, column {column}: {message}); send the request as JSON")]
    NotJson {
        /// The line of the error, from 1.
        line: usize,
        /// The column of the error, from 1.
        column: usize,
        /// What the parser found.
        message: String,
    },
    /// Not an object.
    #[error("the request body must be a JSON object with a `{0}` array")]
    NotAnObject(&'static str),
    /// The list (`messages`, `input`) is missing, repeated or not an array.
    #[error("the request body's `{0}` {1}; send one `{0}` array")]
    List(&'static str, &'static str),
}

impl BodyError {
    pub(super) fn json(err: &serde_json::Error) -> BodyError {
        let message = err.to_string();
        // serde_json appends " at line L column C"; the location has fields of its own.
        let message = message.split(" at line ").next().unwrap_or(&message).to_string();
        BodyError::NotJson { line: err.line(), column: err.column(), message }
    }
}

/// A request body that carries a conversation, as the client sent it.
#[derive(Debug)]
pub struct RequestBody<'a> {
    text: &'a str,
    /// Every top-level field but the list.
    fields: Vec<(String, &'a RawValue)>,
    /// The list's entries, each valid JSON.
    messages: Vec<&'a str>,
    /// The key of each entry's text.
    keys: Vec<EntryKey>,
    /// Where the list lies in the body, in bytes.
    span: (usize, usize),
    /// How much of the list repeats the conversation's last, whose hashes it reuses.
    shared: Option<Shared>,
}

impl<'a> RequestBody<'a> {
    /// Reads `bytes`: a JSON object whose `messages` (exactly one) is an array.
    #[cfg(test)]
    pub fn parse(bytes: &'a [u8]) -> Result<RequestBody<'a>, BodyError> {
        RequestBody::parse_list(bytes, "messages")
    }

    /// Reads `bytes`: a JSON object whose field `list` (exactly one) is an array, every byte
    /// checked by the parser. The body is read in one pass, the list's entries split out as
    /// it goes.
    #[cfg(test)]
    pub fn parse_list(bytes: &'a [u8], list: &'static str) -> Result<RequestBody<'a>, BodyError> {
        let text = std::str::from_utf8(bytes).map_err(|err| BodyError::NotUtf8(err.valid_up_to()))?;
        RequestBody::parse_text(text, list)
    }

    /// [`RequestBody::parse_list`] of text, every byte of it checked by the parser.
    fn parse_text(text: &'a str, list: &'static str) -> Result<RequestBody<'a>, BodyError> {
        let parser::Parsed { fields, messages, span } = parser::read(text, list)?;
        let keys = messages.iter().map(|entry| entry_key(entry)).collect();
        Ok(RequestBody { text, fields, messages, keys, span, shared: None })
    }

    /// Whether the client asked for a stream (`"stream": true`).
    pub fn streams(&self) -> bool {
        self.raw("stream").is_some_and(|raw| raw.trim() == "true")
    }

    /// The raw text of the top-level field `key`, when present.
    pub fn raw(&self, key: &str) -> Option<&'a str> {
        self.fields.iter().find(|(name, _)| name == key).map(|(_, raw)| raw.get())
    }

    /// The field `key` as a value, when present and valid.
    pub fn value(&self, key: &str) -> Option<Value> {
        self.raw(key).and_then(|raw| serde_json::from_str(raw).ok())
    }

    /// The raw text of each message (each entry of the list), in order.
    pub fn raw_messages(&self) -> &[&'a str] {
        &self.messages
    }

    /// The entries of the list as values.
    pub fn entries(&self) -> Vec<Value> {
        // Every entry was checked; it is valid JSON.
        self.messages.iter().map(|raw| serde_json::from_str(raw).unwrap_or(Value::Null)).collect()
    }

    /// The list as a [`KnownList`], for the next request that repeats it; `None` for an
    /// empty list, or one longer than a known list's offsets reach (4 GiB).
    pub fn known_list(&self) -> Option<KnownList> {
        if self.messages.is_empty() {
            return None;
        }
        let (start, end) = self.span;
        let from_start = |entry: &str| entry.as_ptr() as usize - self.text.as_ptr() as usize - start;
        // Sized exactly: a conversation keeps it until its next request.
        let mut entries = Vec::with_capacity(self.messages.len());
        for (entry, &key) in self.messages.iter().zip(&self.keys) {
            entries.push(KnownEntry::new((from_start(entry), from_start(entry) + entry.len()), key)?);
        }
        let list = self.text.as_bytes().get(start..end).unwrap_or_default();
        Some(KnownList::new(list, entries, self.shared.as_ref()))
    }

    /// The body with the list replaced by `messages_json` and every other byte kept.
    pub fn splice(&self, messages_json: &str) -> String {
        let (start, end) = self.span;
        let mut out = String::with_capacity(self.text.len() - (end - start) + messages_json.len());
        out.push_str(&self.text[..start]);
        out.push_str(messages_json);
        out.push_str(&self.text[end..]);
        out
    }
}

/// A body split by structure: its fields checked, its list's entries not yet (see the module
/// doc). [`Unchecked::check`] or [`Unchecked::check_from`] makes it a [`RequestBody`].
#[derive(Debug)]
pub struct Unchecked<'a> {
    body: RequestBody<'a>,
    list: &'static str,
    /// How many of the first entries are known to be JSON: byte for byte those of a list
    /// checked before, or all of them when the full parser read the body.
    known: usize,
}

impl<'a> Unchecked<'a> {
    /// Reads `bytes`: a JSON object whose field `list` (exactly one) is an array, its entries
    /// split out but not checked. `known` gives the list checked before that starts with the
    /// same entry, whose shared entries are neither scanned nor checked again. A body the
    /// split cannot read is read by the full parser.
    #[cfg(test)]
    pub fn read(
        bytes: &'a [u8],
        list: &'static str,
        known: impl FnOnce(&str) -> Option<Arc<KnownList>>,
    ) -> Result<Unchecked<'a>, BodyError> {
        let text = std::str::from_utf8(bytes).map_err(|err| BodyError::NotUtf8(err.valid_up_to()))?;
        Unchecked::read_text(text, list, known)
    }

    /// [`Unchecked::read`] of text (the proxy checks a body's bytes as they arrive, see
    /// [`crate::received`]).
    pub fn read_text(
        text: &'a str,
        list: &'static str,
        known: impl FnOnce(&str) -> Option<Arc<KnownList>>,
    ) -> Result<Unchecked<'a>, BodyError> {
        if let Some((body, known)) = split(text, list, known) {
            return Ok(Unchecked { body, list, known });
        }
        let body = RequestBody::parse_text(text, list)?;
        Ok(Unchecked { known: body.messages.len(), body, list })
    }

    /// The text of each entry of the list, in order; not checked to be JSON.
    pub fn entries(&self) -> &[&'a str] {
        &self.body.messages
    }

    /// The key of each entry's text, in order.
    pub fn keys(&self) -> &[EntryKey] {
        &self.body.keys
    }

    /// Whether the client asked for a stream (`"stream": true`).
    pub fn streams(&self) -> bool {
        self.body.streams()
    }

    /// The field `key` as a value, when present and valid.
    pub fn value(&self, key: &str) -> Option<Value> {
        self.body.value(key)
    }

    /// The raw text of the top-level field `key`, when present.
    pub fn raw(&self, key: &str) -> Option<&'a str> {
        self.body.raw(key)
    }

    /// The body, every entry checked.
    pub fn check(self) -> Result<RequestBody<'a>, BodyError> {
        self.check_from(0)
    }

    /// The body, its entries from `index` on checked: the caller has read the ones before
    /// it as JSON (or knows their text to be one it read before).
    pub fn check_from(self, index: usize) -> Result<RequestBody<'a>, BodyError> {
        self.checked_from(index)?;
        Ok(self.body)
    }

    /// Checks the entries from `index` on; the full parser's error when one is not JSON.
    pub fn checked_from(&self, index: usize) -> Result<(), BodyError> {
        let mut rest = self.body.messages.iter().skip(index.max(self.known));
        if rest.all(|entry| serde_json::from_str::<IgnoredAny>(entry).is_ok()) {
            return Ok(());
        }
        Err(self.refusal().unwrap_or(BodyError::NotAnObject(self.list)))
    }

    /// Why the body is refused, read by the full parser; `None` when the parser reads it
    /// (an entry the caller could not read is JSON after all).
    pub fn refusal(&self) -> Option<BodyError> {
        RequestBody::parse_text(self.body.text, self.list).err()
    }
}

/// `text` read by structure (see [`Unchecked`]): `None` unless it is an object whose
/// fields are valid JSON and whose `list` is one array, which the full parser is left to
/// refuse with its error.
fn split<'a>(
    text: &'a str,
    list: &str,
    known: impl FnOnce(&str) -> Option<Arc<KnownList>>,
) -> Option<(RequestBody<'a>, usize)> {
    let object = crate::split::object_with_list(text, list, known)?;
    let mut fields = Vec::with_capacity(object.fields.len());
    for field in object.fields {
        let key: String = serde_json::from_str(field.key).ok()?;
        if key == list {
            // The list's name written with escapes: the parser reads such a body.
            return None;
        }
        fields.push((key, serde_json::from_str::<&RawValue>(field.value).ok()?));
    }
    let start = object.list.as_ptr() as usize - text.as_ptr() as usize;
    let known = object.known.as_ref().map_or(0, |shared| shared.entries);
    // The keys of the known entries are the known list's; only the others are hashed.
    let shared = object.known.as_ref().map_or(&[][..], |shared| &shared.list.entries()[..known]);
    let keys = shared.iter().map(|entry| entry.key());
    let keys = keys.chain(object.entries[known..].iter().map(|entry| entry_key(entry))).collect();
    let span = (start, start + object.list.len());
    let body = RequestBody { text, fields, messages: object.entries, keys, span, shared: object.known };
    Some((body, known))
}

/// `messages` written as one JSON array: each item's text as given, comma-separated.
pub fn join_messages<'t>(items: impl IntoIterator<Item = std::borrow::Cow<'t, str>>) -> String {
    let mut out = String::from("[");
    for (index, item) in items.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn splicing_keeps_every_other_byte() {
        let body = br#"{ "model" :"m",  "system":[{"type":"text","text":"caf\u00e9"}],
            "messages" : [ {"role":"user","content":"hi"} ] , "x": 1.50e3 }"#;
        let parsed = RequestBody::parse(body).unwrap();
        assert_eq!(parsed.raw_messages().len(), 1);
        let split = Unchecked::read(body, "messages", |_| None).unwrap();
        assert_eq!(split.known, 0, "split by structure, not by the parser");
        assert_eq!(split.check().unwrap().span, parsed.span);
        assert_eq!(parsed.raw("system"), Some(r#"[{"type":"text","text":"caf\u00e9"}]"#));
        let spliced = parsed.splice("[]");
        assert_eq!(
            spliced,
            r#"{ "model" :"m",  "system":[{"type":"text","text":"caf\u00e9"}],
            "messages" : [] , "x": 1.50e3 }"#
        );
    }

    #[test]
    fn a_grown_list_is_scanned_from_its_last_known_entry() {
        let message = |n: usize| format!("{{\"role\":\"user\",\"content\":\"{n} \\\"q\\\" [x]\"}}");
        let body = |count: usize| {
            let messages: Vec<String> = (0..count).map(message).collect();
            Bytes::from(format!("{{\"model\":\"m\",\"messages\":[{}],\"stream\":true}}", messages.join(", ")))
        };
        let before = body(5);
        let known = RequestBody::parse_list(&before, "messages").unwrap().known_list().map(Arc::new);
        let after = body(7);
        let split = Unchecked::read(&after, "messages", |first| {
            assert_eq!(first, message(0));
            known.clone()
        })
        .unwrap();
        assert_eq!(split.known, 4, "the last known entry is scanned again: the list ended after it");
        let expected = RequestBody::parse_list(&after, "messages").unwrap();
        assert_eq!(split.check().unwrap().raw_messages(), expected.raw_messages());
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        assert!(matches!(RequestBody::parse(b"{\"messages\": [}"), Err(BodyError::NotJson { line: 1, .. })));
        assert!(matches!(RequestBody::parse(b"[1]"), Err(BodyError::NotAnObject("messages"))));
        assert!(matches!(RequestBody::parse(b"[1"), Err(BodyError::NotJson { .. })));
        assert!(matches!(RequestBody::parse(b"\xff{}"), Err(BodyError::NotUtf8(0))));
        assert_eq!(RequestBody::parse(b"{}").unwrap_err(), BodyError::List("messages", "is missing"));
        assert_eq!(
            RequestBody::parse(br#"{"messages":[],"messages":[]}"#).unwrap_err(),
            BodyError::List("messages", "appears twice")
        );
        assert_eq!(
            RequestBody::parse(br#"{"messages":{}}"#).unwrap_err(),
            BodyError::List("messages", "must be an array")
        );
        let input = RequestBody::parse_list(br#"{"input":[{"type":"message"}],"messages":1}"#, "input").unwrap();
        assert_eq!(input.splice("[]"), r#"{"input":[],"messages":1}"#);
        assert_eq!(
            RequestBody::parse_list(br#"{"input":"hi"}"#, "input").unwrap_err().to_string(),
            "the request body's `input` must be an array; send one `input` array"
        );
        assert!(RequestBody::parse(br#"{"messages":[]} x"#).is_err());
    }

    mod properties {
        use super::super::*;
        use bytes::Bytes;
        use proptest::prelude::*;

        /// JSON values written with arbitrary spacing and escapes.
        fn value() -> impl Strategy<Value = String> {
            let leaf = prop_oneof![
                Just("null".to_string()),
                any::<bool>().prop_map(|b| b.to_string()),
                any::<i64>().prop_map(|n| n.to_string()),
                "[a-z\\u00e9 ]{0,8}".prop_map(|text| serde_json::to_string(&text).unwrap()),
                Just("\"\\u00e9\\n\\/\"".to_string()),
                Just("1.50e3".to_string()),
                Just(r#""]}[{,\\\"""#.to_string()),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[ {} ]", items.join(" ,"))),
                    prop::collection::vec(("[a-z]{1,4}", inner), 0..4).prop_map(|fields| {
                        let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("\"{k}\" :{v}")).collect();
                        format!("{{{}}}", fields.join(","))
                    }),
                ]
            })
        }

        /// A body: some fields, then `messages`, then more fields, spaced at random.
        fn body() -> impl Strategy<Value = String> {
            (
                prop::collection::vec(("[a-l]{1,6}", value()), 0..4),
                prop::collection::vec(value(), 0..4),
                prop::collection::vec(("[n-z]{1,6}", value()), 0..4),
                "[ \n\t]{0,3}",
            )
                .prop_map(|(before, messages, after, space)| {
                    let field = |(key, value): (String, String)| format!("{space}\"{key}\"{space}:{space}{value}");
                    let mut fields: Vec<String> = before.into_iter().map(field).collect();
                    fields.push(format!("\"messages\":{space}[{}]", messages.join(",")));
                    fields.extend(after.into_iter().map(field));
                    format!("{space}{{{}}}{space}", fields.join(","))
                })
        }

        /// What a read body holds (its fields, entries, their keys and the list's span), to
        /// compare two reads.
        /// `prior`'s body with `more` appended to its list and, when `edit` says so, the byte at
        /// that place of the result replaced.
        fn grown(prior: &RequestBody<'_>, more: &[String], edit: Option<(prop::sample::Index, u8)>) -> Vec<u8> {
            let entries = prior
                .raw_messages()
                .iter()
                .copied()
                .map(std::borrow::Cow::Borrowed)
                .chain(more.iter().map(|entry| std::borrow::Cow::Borrowed(entry.as_str())));
            let mut next = prior.splice(&join_messages(entries)).into_bytes();
            if let Some((at, byte)) = edit {
                let at = at.index(next.len());
                next[at] = byte;
            }
            next
        }

        fn seen(body: &RequestBody<'_>) -> String {
            format!("{:?} {:?} {:?} {:?}", body.fields, body.messages, body.keys, body.span)
        }

        proptest! {
            #[test]
            fn splicing_changes_messages_and_nothing_else(body in body()) {
                let parsed = RequestBody::parse(body.as_bytes()).unwrap();
                let same = join_messages(parsed.raw_messages().iter().map(|raw| std::borrow::Cow::Borrowed(*raw)));
                let original: Value = serde_json::from_str(&body).unwrap();
                let respliced: Value = serde_json::from_str(&parsed.splice(&same)).unwrap();
                prop_assert_eq!(respliced, original.clone());
                // Splicing other messages changes them and nothing else.
                let spliced = parsed.splice("[{\"role\":\"user\",\"content\":\"x\"}]");
                let mut expected = original;
                expected["messages"] = serde_json::json!([{"role": "user", "content": "x"}]);
                let spliced_value: Value = serde_json::from_str(&spliced).unwrap();
                prop_assert_eq!(spliced_value, expected);
                let (start, end) = parsed.span;
                prop_assert_eq!(&spliced[..start], &body[..start]);
                prop_assert_eq!(&spliced[spliced.len() - (body.len() - end)..], &body[end..]);
            }

            /// Split by structure and checked, a body reads as the full parser reads it, or is
            /// refused with the parser's error, also when a byte of it is changed.
            #[test]
            fn the_split_reads_what_the_parser_reads(
                body in body(),
                at in any::<prop::sample::Index>(),
                byte in prop::sample::select(b"{}[]\",:\\ 0an\x01\xc3".to_vec()),
            ) {
                let mut changed = body.clone().into_bytes();
                let at = at.index(changed.len());
                changed[at] = byte;
                for bytes in [body.as_bytes(), &changed] {
                    let parser = RequestBody::parse_list(bytes, "messages");
                    let split = Unchecked::read(bytes, "messages", |_| None).and_then(Unchecked::check);
                    prop_assert_eq!(split.as_ref().map(seen), parser.as_ref().map(seen));
                }
            }

            /// A list read before changes nothing that is read, whatever the next body is: the
            /// same list grown, or changed anywhere (a byte of it, or of the rest of the body).
            #[test]
            fn a_known_list_changes_nothing_that_is_read(
                body in body(),
                more in prop::collection::vec(value(), 0..3),
                at in any::<prop::sample::Index>(),
                byte in prop::sample::select(b"{}[]\",:\\ 0an\x01\xc3".to_vec()),
                change in any::<bool>(),
            ) {
                let bytes = Bytes::from(body);
                let prior = RequestBody::parse_list(&bytes, "messages").unwrap();
                let known = prior.known_list().map(Arc::new);
                let next = grown(&prior, &more, change.then_some((at, byte)));
                let parser = RequestBody::parse_list(&next, "messages");
                let split = Unchecked::read(&next, "messages", |_| known.clone()).and_then(Unchecked::check);
                prop_assert_eq!(split.as_ref().map(seen), parser.as_ref().map(seen));
            }

            /// Lists kept one after another, each taking the hashes of the one before that it
            /// repeats, change nothing that is read either.
            #[test]
            fn a_chain_of_known_lists_changes_nothing_that_is_read(
                body in body(),
                rounds in prop::collection::vec(
                    (prop::collection::vec(value(), 0..3), any::<prop::sample::Index>(), prop::sample::select(b"{}[]\",:\\ 0a".to_vec()), any::<bool>()),
                    1..5,
                ),
            ) {
                let mut bytes = body.into_bytes();
                let mut known: Option<Arc<KnownList>> = None;
                for (more, at, byte, change) in rounds {
                    let read = Unchecked::read(&bytes, "messages", |_| known.clone()).and_then(Unchecked::check);
                    let parser = RequestBody::parse_list(&bytes, "messages");
                    prop_assert_eq!(read.as_ref().map(seen), parser.as_ref().map(seen));
                    let Ok(read) = read else { break };
                    known = read.known_list().map(Arc::new).or(known);
                    bytes = grown(&read, &more, change.then_some((at, byte)));
                }
            }

            #[test]
            fn any_bytes_are_read_or_refused_without_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
                let _ = RequestBody::parse(&bytes);
                let _ = Unchecked::read(&bytes, "messages", |_| None).and_then(Unchecked::check);
            }
        }
    }
}
