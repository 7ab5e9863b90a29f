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

use memchr::memchr2;

/// One top-level field of an object: its key as written (quotes and escapes included) and
/// its value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// The key, quotes included.
    pub key: &'a str,
    /// The value, without the whitespace around it.
    pub value: &'a str,
}

/// The fields of the object `text` holds (whitespace around it allowed), in order; `None`
/// when its structure is not an object's.
pub fn object_fields(text: &str) -> Option<Vec<Field<'_>>> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    let mut fields = Vec::new();
    if bytes.get(at) == Some(&b'}') {
        return (skip_space(bytes, at + 1) == bytes.len()).then_some(fields);
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, at)?;
        let colon = skip_space(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        let start = skip_space(bytes, colon + 1);
        let end = value_end(bytes, start)?;
        fields.push(Field { key: text.get(at..key_end)?, value: text.get(start..end)? });
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b'}') => return (skip_space(bytes, at + 1) == bytes.len()).then_some(fields),
            _ => return None,
        }
    }
}

/// The entries of the array `text` is (no whitespace around it), in order, each without the
/// whitespace around it; `None` when its structure is not an array's.
pub fn array_entries(text: &str) -> Option<Vec<&str>> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'[') {
        return None;
    }
    let mut at = skip_space(bytes, 1);
    let mut entries = Vec::new();
    if bytes.get(at) == Some(&b']') {
        return (at + 1 == bytes.len()).then_some(entries);
    }
    loop {
        let end = value_end(bytes, at)?;
        entries.push(text.get(at..end)?);
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b']') => return (at + 1 == bytes.len()).then_some(entries),
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
    at += 1;
    loop {
        at += memchr2(b'"', b'\\', bytes.get(at..)?)?;
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
        let fields = object_fields(text).unwrap();
        assert_eq!(
            fields,
            vec![
                Field { key: "\"a\"", value: "[1, {\"b\":\"]}\\\"\"}]" },
                Field { key: "\"c\\\"\"", value: "\"x\"" },
                Field { key: "\"d\"", value: "-1.5e3" },
            ]
        );
        assert_eq!(array_entries(fields[0].value).unwrap(), vec!["1", "{\"b\":\"]}\\\"\"}"]);
        assert_eq!(array_entries("[ ]").unwrap(), Vec::<&str>::new());
        assert_eq!(object_fields("{}").unwrap(), vec![]);
    }

    #[test]
    fn what_is_not_an_object_or_array_is_refused() {
        for text in [
            "", "[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x", "{\"a\":\"x}", "{\"a\":1 \"b\":2}",
            "{\"a\":[1}", "{\"a\":\"\\",
        ] {
            assert_eq!(object_fields(text), None, "{text}");
        }
        for text in ["", " []", "[1,]", "[,1]", "[1 2]", "[1", "[\"é]", "[1] "] {
            assert_eq!(array_entries(text), None, "{text}");
        }
    }
}
