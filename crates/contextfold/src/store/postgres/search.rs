//! Full-text search in PostgreSQL as the SQLite store does it: every word of the query
//! required, any case, no stemming, snippets of about 16 words with the match in `[`…`]` and
//! `…` where the text goes on.
//!
//! Words are runs of letters and digits, lowercased, as SQLite's `unicode61` tokenizer has
//! them; PostgreSQL's own parser would keep `src/lib.rs` or `a@b.io` as one token that `lib`
//! does not find. So the store builds each `tsvector` itself ([`tsvector`], also far faster
//! than `to_tsvector` on long tool output), a query word with punctuation is the phrase of
//! its parts ([`websearch_query`]), and `ts_headline` cuts its snippet from the text with
//! every other character made a space ([`WORDS`]), which [`snippet`] maps back, character
//! for character, to the original.
//!
//! A `tsvector` counts word positions only up to 16,383, and `ts_headline` reads its whole
//! text, so a long text is indexed in chunks of at most [`CHUNK_BYTES`], cut between lines
//! where it can be; a search returns each message or payload once, by its best chunk. (All
//! words of a query must then occur in one chunk of a long payload.)

use std::collections::HashMap;

/// The longest text indexed as one row.
pub(super) const CHUNK_BYTES: usize = 16 * 1024;

/// Marks a match in `ts_headline`'s output before it becomes `[`…`]`: characters of a
/// private-use area, removed from the indexed text, so any bracket in the text stays a
/// bracket and the ends of the snippet can be compared with the text's.
const START: char = '\u{E000}';
const STOP: char = '\u{E001}';

/// The SQL expression of the text `body` as `ts_headline` reads it: each character that is
/// not a letter or digit made a space, so its words are [`tsvector`]'s.
pub(super) const WORDS: &str = "regexp_replace(body, '[^[:alnum:]]', ' ', 'g')";

/// PostgreSQL's limits: the last position it records, positions kept per word, and the
/// longest word (longer ones are left out of the index, as `to_tsvector` leaves them).
const MAX_POSITION: usize = 16_383;
const MAX_POSITIONS: usize = 256;
const MAX_WORD_BYTES: usize = 2_046;

/// The `tsvector` of `text`, as its input syntax: each lowercased word with its positions.
pub(super) fn tsvector(text: &str) -> String {
    let mut words: HashMap<String, Vec<usize>> = HashMap::new();
    let mut order = Vec::new();
    let runs = text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty());
    for (position, word) in runs.enumerate() {
        let word = word.to_lowercase();
        if word.len() > MAX_WORD_BYTES {
            continue;
        }
        let positions = words.entry(word).or_insert_with_key(|word| {
            order.push(word.clone());
            Vec::new()
        });
        let position = (position + 1).min(MAX_POSITION);
        if positions.len() < MAX_POSITIONS && positions.last() != Some(&position) {
            positions.push(position);
        }
    }
    let mut out = String::new();
    for word in order {
        let positions: Vec<String> = words[&word].iter().map(usize::to_string).collect();
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&format!("'{}':{}", word.replace('\\', "\\\\").replace('\'', "''"), positions.join(",")));
    }
    out
}

/// The `ts_headline` options: one fragment of up to 16 words around the match.
pub(super) fn headline_options() -> String {
    format!("StartSel={START}, StopSel={STOP}, MaxWords=16, MinWords=8, ShortWord=0, MaxFragments=1")
}

/// `query` as `websearch_to_tsquery` input: each whitespace-separated word quoted, so all
/// are required and none is an operator (`or`, `-`), its punctuation made spaces (a phrase
/// of its parts); `None` when there is no word.
pub(super) fn websearch_query(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|word| word.chars().map(|c| if c.is_alphanumeric() { c } else { ' ' }).collect::<String>())
        .filter(|word| !word.trim().is_empty())
        .map(|word| format!("\"{}\"", word.trim()))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The text to index: what PostgreSQL text cannot hold (NUL) and the snippet markers become
/// spaces.
pub(super) fn indexable(text: &str) -> String {
    text.replace(['\0', START, STOP], " ")
}

/// `text` in chunks of at most [`CHUNK_BYTES`], each ending at a line break (or a space)
/// when one is in its second half, and always on a character boundary.
pub(super) fn chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > CHUNK_BYTES {
        let mut end = CHUNK_BYTES;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let window = &rest[..end];
        let cut = window
            .rfind('\n')
            .or_else(|| window.rfind(' '))
            .filter(|&at| at >= CHUNK_BYTES / 2)
            .map_or(end, |at| at + 1);
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out.push(rest);
    out
}

/// A snippet of `body` from `headline`, what `ts_headline` made of its [`WORDS`]: the same
/// characters of the original text, matches in `[`…`]`, `…` before and after when the text
/// goes on.
pub(super) fn snippet(headline: &str, body: &str) -> String {
    let headline = headline.trim_matches(|c: char| c.is_whitespace());
    let plain: Vec<char> = headline.chars().filter(|c| *c != START && *c != STOP).collect();
    let original: Vec<char> = body.chars().collect();
    // Where the fragment is: the same letters and digits, a space wherever the words had one.
    let fits = |at: &usize| {
        original[*at..].len() >= plain.len()
            && plain.iter().zip(&original[*at..]).all(|(word, text)| word == text || *word == ' ')
    };
    let Some(at) = (0..=original.len().saturating_sub(plain.len())).find(fits) else {
        return headline.replace(START, "[").replace(STOP, "]");
    };
    let mut out = String::new();
    if original[..at].iter().any(|c| !c.is_whitespace()) {
        out.push('…');
    }
    let mut position = at;
    for c in headline.chars() {
        match c {
            START => out.push('['),
            STOP => out.push(']'),
            _ => {
                out.push(original[position]);
                position += 1;
            }
        }
    }
    if original[position..].iter().any(|c| !c.is_whitespace()) {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_quote_every_word() {
        assert_eq!(websearch_query("  cargo   test "), Some("\"cargo\" \"test\"".into()));
        assert_eq!(websearch_query("or -x \"y\""), Some("\"or\" \"x\" \"y\"".into()));
        assert_eq!(websearch_query("src/lib.rs é"), Some("\"src lib rs\" \"é\"".into()));
        assert_eq!(websearch_query(" \" "), None);
        assert_eq!(websearch_query(""), None);
    }

    #[test]
    fn tsvectors_hold_lowercased_runs_of_letters_and_digits() {
        assert_eq!(tsvector("See src/lib.rs, see LIB_2 é😀x"), "'see':1,5 'src':2 'lib':3,6 'rs':4 '2':7 'é':8 'x':9");
        assert_eq!(tsvector("it's"), "'it':1 's':2");
        assert_eq!(tsvector(" ,; "), "");
        let long = "a ".repeat(MAX_POSITION + 10);
        let vector = tsvector(&long);
        assert_eq!(vector.matches(',').count(), MAX_POSITIONS - 1, "at most 256 positions");
        let many: String = (0..20_000).map(|i| format!("w{i} x ")).collect();
        assert!(tsvector(&many).ends_with(&format!("'w19999':{MAX_POSITION}")), "positions stop at the last");
        assert_eq!(tsvector(&"y".repeat(MAX_WORD_BYTES + 1)), "");
    }

    #[test]
    fn chunks_cover_the_text_on_boundaries() {
        let text: String = (0..20_000).map(|i| format!("line {i} é😀\n")).collect();
        let parts = chunks(&text);
        assert!(parts.len() > 3);
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|part| part.len() <= CHUNK_BYTES));
        assert!(parts[..parts.len() - 1].iter().all(|part| part.ends_with('\n')));
        // No break at all: cut on a character boundary.
        let solid = "é".repeat(CHUNK_BYTES);
        let parts = chunks(&solid);
        assert_eq!(parts.concat(), solid);
        assert_eq!(chunks("short"), vec!["short"]);
        assert_eq!(chunks(""), vec![""]);
    }

    #[test]
    fn snippets_mark_matches_in_the_original_text_and_cut_ends() {
        let body = "the flaky Zanzibar [test] in src/lib.rs, line 4";
        let headline = format!("flaky {START}Zanzibar{STOP}  test  in src {START}lib{STOP} {START}rs{STOP}");
        assert_eq!(snippet(&headline, body), "…flaky [Zanzibar] [test] in src/[lib].[rs]…");
        let whole = format!(" the flaky {START}Zanzibar{STOP}  test  in src lib rs  line 4\n");
        assert_eq!(snippet(&whole, body), "the flaky [Zanzibar] [test] in src/lib.rs, line 4");
        // A fragment that is not in the text (it never happens) is shown as it came.
        assert_eq!(snippet(&format!("{START}x{STOP}"), "y"), "[x]");
        assert_eq!(indexable("a\0b\u{E000}c"), "a b c");
    }
}
