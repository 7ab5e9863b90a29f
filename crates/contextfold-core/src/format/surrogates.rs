//! Lone UTF-16 surrogate escapes in JSON text, replaced so the text can be read.
//!
//! JSON escapes characters outside the Basic Multilingual Plane as two `\uXXXX` escapes, a
//! high and a low surrogate. Programs that cut a string between the two (Node does, and
//! Claude Code logs carry the result) leave a lone half, which serde_json rightly refuses:
//! it names no character. Rather than lose the whole file, each lone half is rewritten as
//! `\uFFFD` (U+FFFD REPLACEMENT CHARACTER) before parsing, and the reader notes how many.
//! The replacement has the same length as what it replaces, so every line and column a
//! later error names is still right.

use std::borrow::Cow;

/// The escape written in place of a lone surrogate.
const REPLACEMENT: &[u8; 6] = b"\\uFFFD";

/// `text` with every lone surrogate escape replaced by `\uFFFD`, and how many there were.
///
/// A backslash escape is read as JSON reads it: `\\` is one escaped backslash, so the `u`
/// in `\\u` starts no escape. Outside strings a backslash is a syntax error whether or not
/// it is replaced, so the scan needs no string tracking.
pub(crate) fn replace_lone_surrogates(text: &str) -> (Cow<'_, str>, usize) {
    let bytes = text.as_bytes();
    let mut out: Option<Vec<u8>> = None;
    let mut replaced = 0;
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&byte| byte == b'\\') {
        let start = at + offset;
        match unit_at(bytes, start) {
            Some(0xD800..=0xDBFF) if unit_at(bytes, start + 6).is_some_and(is_low) => at = start + 12,
            Some(unit) if (0xD800..=0xDFFF).contains(&unit) => {
                let buffer = out.get_or_insert_with(|| bytes.to_vec());
                buffer[start..start + 6].copy_from_slice(REPLACEMENT);
                replaced += 1;
                at = start + 6;
            }
            Some(_) => at = start + 6,
            // Any other escape is two bytes (`\\`, `\"`, `\n`, …); a lone trailing backslash ends it.
            None => at = (start + 2).min(bytes.len()),
        }
    }
    match out {
        // Only ASCII escapes changed, so the bytes are still UTF-8.
        Some(buffer) => (Cow::Owned(String::from_utf8(buffer).unwrap_or_else(|_| text.to_string())), replaced),
        None => (Cow::Borrowed(text), 0),
    }
}

fn is_low(unit: u16) -> bool {
    (0xDC00..=0xDFFF).contains(&unit)
}

/// The code unit of a `\uXXXX` escape starting at `at`, if one does.
fn unit_at(bytes: &[u8], at: usize) -> Option<u16> {
    let escape = bytes.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replace(text: &str) -> (String, usize) {
        let (out, count) = replace_lone_surrogates(text);
        (out.into_owned(), count)
    }

    #[test]
    fn lone_halves_become_replacement_characters_and_pairs_stay() {
        assert_eq!(replace(r#""a\ud83d b""#), (r#""a\uFFFD b""#.into(), 1));
        assert_eq!(replace(r#""\ude00""#), (r#""\uFFFD""#.into(), 1));
        assert_eq!(replace(r#""\ud83d\ude00""#), (r#""\ud83d\ude00""#.into(), 0));
        assert_eq!(replace(r#""\ud83d\ud83d\ude00""#), (r#""\uFFFD\ud83d\ude00""#.into(), 1));
        assert_eq!(replace(r#""\\ud83d""#), (r#""\\ud83d""#.into(), 0), "an escaped backslash starts no escape");
        assert_eq!(replace(r#""\\\ud83d""#), (r#""\\\uFFFD""#.into(), 1));
        assert_eq!(replace(r#""\u00e9 \n \ud83d""#), (r#""\u00e9 \n \uFFFD""#.into(), 1));
        assert_eq!(replace("\"é\\ud83d\\"), ("\"é\\uFFFD\\".into(), 1));
        assert_eq!(replace(r#""\ud8""#), (r#""\ud8""#.into(), 0), "a cut-short escape is left to the parser");
    }

    #[test]
    fn replaced_text_parses_and_keeps_its_length() {
        let text = "{\"messages\": [\n{\"role\": \"user\", \"content\": \"x \\ud83d y \\udfff\"}]}";
        let (out, count) = replace_lone_surrogates(text);
        assert_eq!((out.len(), count), (text.len(), 2));
        let value: serde_json::Value = serde_json::from_str(&out).expect("parses");
        assert_eq!(value["messages"][0]["content"], "x \u{fffd} y \u{fffd}");
    }

    proptest::proptest! {
        /// Any escape soup becomes text serde_json reads whenever the original's only fault
        /// was lone surrogates, and the length never changes.
        #[test]
        fn never_changes_the_length(units in proptest::collection::vec(0xD700u16..0xE100, 0..8), plain in "[a-z\\\\]{0,4}") {
            let escapes: String = units.iter().map(|unit| format!("\\u{unit:04x}")).collect();
            let text = format!("\"{escapes}{}\"", plain.replace('\\', "\\\\"));
            let (out, _) = replace_lone_surrogates(&text);
            proptest::prop_assert_eq!(out.len(), text.len());
            proptest::prop_assert!(serde_json::from_str::<String>(&out).is_ok(), "{}", out);
        }
    }
}
