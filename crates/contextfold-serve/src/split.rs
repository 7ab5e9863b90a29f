//! A JSON object split into its top-level fields, and an array into its entries, by
//! structure alone: quotes, escapes and brackets, without checking what lies between them.
//!
//! Design choice: a conversation's next request repeats its history byte for byte, and a
//! full parser checks every byte of it again on every call (about half of what the proxy
//! adds to a request). Finding where each entry starts and ends needs only the structure,
//! and a string's body is skipped with `memchr`. What the split does not check is checked
//! by the caller: each field by a parser, and each entry either by a parser or because its
//! text is byte for byte one read before. No crate splits without checking, which is the
//! point here, and the split is a few dozen lines.
//!
//! The split answers `None` whenever the structure is not a JSON object's (or array's); the
//! caller then reads the text with a full parser, which also says where it is wrong. The
//! slices it returns start and end at ASCII bytes, so they lie on character boundaries.

use crate::known::{KnownList, Shared};
use memchr::memchr2;
use std::sync::Arc;

/// One top-level field of an object: its key as written (quotes and escapes included) and
/// its value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// The key, quotes included.
    pub key: &'a str,
    /// The value, without the whitespace around it.
    pub value: &'a str,
}

/// An object's fields, and the entries of the one array it holds under a given key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object<'a> {
    /// Every field but the array, in order.
    pub fields: Vec<Field<'a>>,
    /// The array's text, from its `[` to its `]`.
    pub list: &'a str,
    /// The array's entries, in order, each without the whitespace around it.
    pub entries: Vec<&'a str>,
    /// How many of the first entries are a known list's (see [`array_at`]), and that list.
    pub known: Option<Shared>,
}

/// The object `text` holds (whitespace around it allowed), its field keyed `list` (written
/// without escapes) split into entries as the object is read; `None` when its structure is
/// not an object's, or that field is not there exactly once or is not an array. `known`
/// gives the list read before that starts with the same first entry, if there is one.
pub fn object_with_list<'a>(
    text: &'a str,
    list: &str,
    known: impl FnOnce(&str) -> Option<Arc<KnownList>>,
) -> Option<Object<'a>> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    let (mut fields, mut found, mut known) = (Vec::new(), None, Some(known));
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, at)?;
        let key = text.get(at..key_end)?;
        let colon = skip_space(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        let start = skip_space(bytes, colon + 1);
        let end = if key.get(1..key.len() - 1) == Some(list) {
            if found.is_some() {
                return None;
            }
            let (entries, end, same) = array_at(bytes, text, start, known.take()?)?;
            found = Some((text.get(start..end)?, entries, same));
            end
        } else {
            let end = value_end(bytes, start)?;
            fields.push(Field { key, value: text.get(start..end)? });
            end
        };
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b'}') if skip_space(bytes, at + 1) == bytes.len() => break,
            _ => return None,
        }
    }
    let (list, entries, known) = found?;
    Some(Object { fields, list, entries, known })
}

/// The entries of the array `text` is (no whitespace around it), in order, each without the
/// whitespace around it; `None` when its structure is not an array's.
#[cfg(test)]
pub fn array_entries(text: &str) -> Option<Vec<&str>> {
    array_at(text.as_bytes(), text, 0, |_| None).and_then(|(entries, end, _)| (end == text.len()).then_some(entries))
}

/// The entries of the array that opens at `start`, where it ends, and how many of its first
/// entries are those of the list `known` gives for its first entry (and that list). Those
/// are taken from the known list's spans without a scan: where the bytes from `start` are
/// the known list's ([`KnownList::shared`]), a scan would find what it found, and the scan
/// goes on from the first entry that is not shared.
fn array_at<'a>(
    bytes: &[u8],
    text: &'a str,
    start: usize,
    known: impl FnOnce(&str) -> Option<Arc<KnownList>>,
) -> Option<(Vec<&'a str>, usize, Option<Shared>)> {
    if bytes.get(start) != Some(&b'[') {
        return None;
    }
    let mut at = skip_space(bytes, start + 1);
    let mut entries = Vec::new();
    if bytes.get(at) == Some(&b']') {
        return Some((entries, at + 1, None));
    }
    let mut same = None;
    if let Some(prior) = known(text.get(at..value_end(bytes, at)?)?) {
        let shared = prior.shared(bytes.get(start..)?);
        let spans = prior.entries();
        if shared.entries > 0 {
            for entry in &spans[..shared.entries] {
                let (from, to) = entry.span();
                entries.push(text.get(start + from..start + to)?);
            }
            at = start + spans[shared.entries].span().0;
            same = Some(shared);
        }
    }
    loop {
        let end = value_end(bytes, at)?;
        entries.push(text.get(at..end)?);
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b']') => return Some((entries, at + 1, same)),
            _ => return None,
        }
    }
}

/// The first byte at or after `at` that is not JSON whitespace.
fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Just past the string that opens at `at` (a `"`).
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    /// Most strings of a request (keys, types, ids) are shorter than this: looking at their
    /// bytes one by one is faster than setting up `memchr`.
    const SHORT: usize = 16;
    at += 1;
    loop {
        let rest = bytes.get(at..)?;
        let special = |byte: &u8| matches!(byte, b'"' | b'\\');
        at += match rest.iter().take(SHORT).position(special) {
            Some(found) => found,
            None => SHORT + memchr2(b'"', b'\\', rest.get(SHORT..)?)?,
        };
        if bytes[at] == b'"' {
            return Some(at + 1);
        }
        // A backslash and the byte it escapes; `\u` escapes hold no quote or backslash.
        at += 2;
    }
}

/// Just past the value that starts at `at`: a string, a bracketed object or array (brackets
/// of either kind counted alike; the parser that checks the value tells them apart), or a
/// scalar running to the next delimiter.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match *bytes.get(start)? {
        b'"' => string_end(bytes, start),
        b'{' | b'[' => {
            let (mut at, mut depth) = (start, 0usize);
            loop {
                match *bytes.get(at)? {
                    b'"' => {
                        at = string_end(bytes, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let rest = bytes.get(start..)?;
            let len = rest
                .iter()
                .position(|byte| matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(start + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_entries_are_found_by_structure() {
        let text = " { \"a\" : [1, {\"b\":\"]}\\\"\"}] ,\"c\\\"\":\"x\" , \"d\":-1.5e3}\n";
        let object = object_with_list(text, "a", |_| None).unwrap();
        assert_eq!(
            object.fields,
            vec![Field { key: "\"c\\\"\"", value: "\"x\"" }, Field { key: "\"d\"", value: "-1.5e3" }]
        );
        assert_eq!(object.list, "[1, {\"b\":\"]}\\\"\"}]");
        assert_eq!(object.entries, vec!["1", "{\"b\":\"]}\\\"\"}"]);
        let long = format!("{{\"a\":[\"{}\\\"{}\"]}}", "x".repeat(40), "é".repeat(30));
        assert_eq!(object_with_list(&long, "a", |_| None).unwrap().entries, vec![&long[6..long.len() - 2]]);
        assert_eq!(array_entries("[ ]").unwrap(), Vec::<&str>::new());
        assert_eq!(object_with_list("{\"a\":[]}", "a", |_| None).unwrap().entries, Vec::<&str>::new());
    }

    #[test]
    fn what_is_not_an_object_or_array_is_refused() {
        for text in [
            "",
            "[]",
            "{}",
            "{",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":[],}",
            "{\"a\":[]} x",
            "{\"a\":[\"x]}",
            "{\"b\":1 \"a\":[]}",
            "{\"a\":[1}",
            "{\"a\":[\"\\",
            "{\"a\":1}",
            "{\"a\":[],\"a\":[]}",
            "{\"b\":[]}",
        ] {
            assert_eq!(object_with_list(text, "a", |_| None), None, "{text}");
        }
        for text in ["", " []", "[1,]", "[,1]", "[1 2]", "[1", "[\"é]", "[1] "] {
            assert_eq!(array_entries(text), None, "{text}");
        }
    }
}
