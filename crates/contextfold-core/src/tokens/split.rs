//! The pre-tokenizers of `o200k_base` and `cl100k_base`, exactly: text into the pieces
//! that BPE encodes one by one.
//!
//! Design choice: each split pattern is matched by hand, one alternative after another in
//! the pattern's order with the choices its backtracking would make, instead of by a regex:
//! building the reference regex costs about 6 ms at start-up and splitting with it about
//! 25 ns a byte, where this needs nothing built and walks ASCII text a byte at a time. The
//! Unicode classes come from regex-syntax's tables, laid out by the build script; tests
//! compare every piece with the reference regexes'. The patterns, for reference:
//!
//! ```text
//! o200k:  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//!        |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//!        |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! cl100k: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+
//!        |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```

/// Which vocabulary's split pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pattern {
    /// `o200k_base`'s: words split before an upper-case run, contractions kept with them.
    O200k,
    /// `cl100k_base`'s: letter runs, contractions on their own.
    Cl100k,
}

/// A character's class, as the pattern tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// `\p{Lu}`, `\p{Lt}`.
    Upper,
    /// `\p{Ll}`.
    Lower,
    /// `\p{Lm}`, `\p{Lo}`: in both the pattern's upper and lower sets.
    Caseless,
    /// `\p{M}`: in both sets too, but no letter.
    Mark,
    /// `\p{N}`.
    Number,
    /// `\s` (Unicode White_Space).
    Space,
    /// Anything else.
    Other,
}

include!(concat!(env!("OUT_DIR"), "/classes.rs"));

/// The classes of the ASCII characters, read from the same ranges.
const ASCII: [Class; 128] = {
    let mut table = [Class::Other; 128];
    let mut index = 0;
    while index < RANGES.len() && RANGES[index].0 < 128 {
        let (first, last, class) = RANGES[index];
        let mut c = first;
        while c <= last && c < 128 {
            table[c as usize] = class;
            c += 1;
        }
        index += 1;
    }
    table
};

fn class(c: char) -> Class {
    if c.is_ascii() {
        return ASCII[c as usize];
    }
    let c = u32::from(c);
    match RANGES.binary_search_by(|&(first, last, _)| {
        if last < c {
            std::cmp::Ordering::Less
        } else if first > c {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(index) => RANGES[index].2,
        Err(_) => Class::Other,
    }
}

/// The pieces of `text` under `pattern`, in order; they join back into `text`.
pub(super) fn pieces(pattern: Pattern, text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let cursor = Cursor { text };
        let end = match pattern {
            Pattern::O200k => cursor.o200k_piece_end(start),
            Pattern::Cl100k => cursor.cl100k_piece_end(start),
        };
        let piece = text.get(start..end)?;
        start = end;
        Some(piece)
    })
}

/// Reads `text` a character at a time; every position it is given is a char boundary.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    text: &'a str,
}

impl Cursor<'_> {
    /// The character at `at`, its class and the position after it.
    #[inline]
    fn at(self, at: usize) -> Option<(char, Class, usize)> {
        let byte = *self.text.as_bytes().get(at)?;
        if byte.is_ascii() {
            return Some((char::from(byte), ASCII[usize::from(byte)], at + 1));
        }
        let c = self.text.get(at..)?.chars().next()?;
        Some((c, class(c), at + c.len_utf8()))
    }

    /// The end of the run of characters from `at` whose class passes `keep`.
    fn run(self, mut at: usize, keep: impl Fn(Class) -> bool) -> usize {
        while let Some((_, class, next)) = self.at(at) {
            if !keep(class) {
                break;
            }
            at = next;
        }
        at
    }

    /// The position after `[^\r\n\p{L}\p{N}]` at `start`, if that matches there.
    fn after_prefix(self, start: usize) -> Option<usize> {
        let (c, class, next) = self.at(start)?;
        (matches!(class, Class::Mark | Class::Space | Class::Other) && c != '\r' && c != '\n').then_some(next)
    }

    /// The end of the `o200k` piece that starts at `start` (< the text's length): the first
    /// alternative of the pattern that matches there. The optional prefix is taken first.
    fn o200k_piece_end(self, start: usize) -> usize {
        let prefixed = self.after_prefix(start);
        let word = prefixed
            .and_then(|at| self.lower_tail(at))
            .or_else(|| self.lower_tail(start))
            .or_else(|| prefixed.and_then(|at| self.upper_head(at)))
            .or_else(|| self.upper_head(start));
        match word {
            Some(end) => self.contraction_end(end),
            None => self.rest_end(start, &['\r', '\n', '/']),
        }
    }

    /// The end of the `cl100k` piece that starts at `start` (< the text's length).
    fn cl100k_piece_end(self, start: usize) -> usize {
        let contraction = self.contraction_end(start);
        if contraction > start {
            return contraction;
        }
        let letters = |at: usize| {
            let end = self.run(at, |class| matches!(class, Class::Upper | Class::Lower | Class::Caseless));
            (end > at).then_some(end)
        };
        match self.after_prefix(start).and_then(letters).or_else(|| letters(start)) {
            Some(end) => end,
            None => self.rest_end(start, &['\r', '\n']),
        }
    }

    /// The alternatives both patterns share, after the words:
    /// `\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[<after_punctuation>]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    fn rest_end(self, start: usize, after_punctuation: &[char]) -> usize {
        let Some((first, first_class, after_first)) = self.at(start) else { return self.text.len() };
        match first_class {
            Class::Number => {
                let mut end = after_first;
                for _ in 0..2 {
                    match self.at(end) {
                        Some((_, Class::Number, next)) => end = next,
                        _ => break,
                    }
                }
                end
            }
            Class::Mark | Class::Other => self.punctuation_end(after_first, after_punctuation),
            _ if first == ' ' && matches!(self.at(after_first), Some((_, Class::Mark | Class::Other, _))) => {
                self.punctuation_end(after_first, after_punctuation)
            }
            _ => self.space_end(start),
        }
    }

    /// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` from `at`: the upper run
    /// taken whole when a lower-case letter follows it, else given back to just after its
    /// last character of both sets.
    fn lower_tail(self, mut at: usize) -> Option<usize> {
        let mut after_both = None;
        loop {
            match self.at(at) {
                Some((_, Class::Upper, next)) => at = next,
                Some((_, Class::Caseless | Class::Mark, next)) => {
                    at = next;
                    after_both = Some(next);
                }
                Some((_, Class::Lower, _)) => return Some(self.run(at, in_lower_set)),
                _ => return after_both,
            }
        }
    }

    /// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` from `at`.
    fn upper_head(self, at: usize) -> Option<usize> {
        let end = self.run(at, in_upper_set);
        (end > at).then(|| self.run(end, in_lower_set))
    }

    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `at`.
    fn contraction_end(self, at: usize) -> usize {
        let letter = |at: usize| self.at(at).and_then(|(c, _, next)| Some((fold(c)?, next)));
        let Some(('\'', _, after_quote)) = self.at(at) else { return at };
        match letter(after_quote) {
            Some((b's' | b't' | b'm' | b'd', next)) => next,
            Some((first @ (b'r' | b'v' | b'l'), next)) => match letter(next) {
                Some((second, end)) if second == if first == b'l' { b'l' } else { b'e' } => end,
                _ => at,
            },
            _ => at,
        }
    }

    /// `[^\s\p{L}\p{N}]+[<after>]*` whose first character ends at `at`.
    fn punctuation_end(self, at: usize, after: &[char]) -> usize {
        let mut end = self.run(at, |class| matches!(class, Class::Mark | Class::Other));
        while let Some((c, _, next)) = self.at(end) {
            if !after.contains(&c) {
                break;
            }
            end = next;
        }
        end
    }

    /// `\s*[\r\n]+|\s+(?!\S)|\s+` from `start`, where a white space character is.
    fn space_end(self, start: usize) -> usize {
        let (mut end, mut last_newline_end, mut last_start) = (start, None, start);
        while let Some((c, Class::Space, next)) = self.at(end) {
            if c == '\r' || c == '\n' {
                last_newline_end = Some(next);
            }
            last_start = end;
            end = next;
        }
        match last_newline_end {
            Some(newline_end) => newline_end,
            None if end == self.text.len() || last_start == start => end,
            None => last_start,
        }
    }
}

fn in_upper_set(class: Class) -> bool {
    matches!(class, Class::Upper | Class::Caseless | Class::Mark)
}

fn in_lower_set(class: Class) -> bool {
    matches!(class, Class::Lower | Class::Caseless | Class::Mark)
}

/// The lower-case ASCII letter that `c` matches case-insensitively, if any.
fn fold(c: char) -> Option<u8> {
    if c.is_ascii_alphabetic() {
        return Some(c.to_ascii_lowercase() as u8);
    }
    FOLDS_TO_ASCII.iter().find(|&&(other, _)| other == c).map(|&(_, letter)| letter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<&str> {
        pieces(Pattern::O200k, text).collect()
    }

    fn split_cl100k(text: &str) -> Vec<&str> {
        pieces(Pattern::Cl100k, text).collect()
    }

    #[test]
    fn splits_as_the_pattern_does() {
        assert_eq!(split("Hello world"), ["Hello", " world"]);
        assert_eq!(split("HTTPServer's  URL\n\n  x"), ["HTTPServer's", " ", " URL", "\n\n", " ", " x"]);
        assert_eq!(split("12345 ab1"), ["123", "45", " ab", "1"]);
        assert_eq!(split("a  \t"), ["a", "  \t"]);
        assert_eq!(split("x = y;\n}\n/// doc"), ["x", " =", " y", ";\n", "}\n///", " doc"]);
        assert_eq!(split("DON'T we'LL"), ["DON'T", " we'LL"]);
        assert_eq!(split("it\u{17f}'\u{17f}"), ["it\u{17f}'\u{17f}"]);
        assert_eq!(split(""), Vec::<&str>::new());
        assert_eq!(split_cl100k("HTTPServer's  URL\n\n  x"), ["HTTPServer", "'s", " ", " URL", "\n\n", " ", " x"]);
        assert_eq!(split_cl100k("x;\n}\n/// e\u{301}"), ["x", ";\n", "}\n", "///", " e", "\u{301}"]);
    }

    /// Text from the characters the pattern tells apart, in runs: letters of every class and
    /// script, digits, contractions (and `ſ`, which `(?i)` takes for `s`), punctuation, marks,
    /// emoji and every kind of white space.
    fn tricky_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let run = prop_oneof![
            "[a-zA-Z]{1,8}",
            "[0-9٠-٩]{1,5}",
            "'([sStTmMdD\u{17f}]|[rRvV][eE]|[lL][lL]|x)",
            "[ \t\r\n\u{b}\u{c}\u{85}\u{a0}\u{2028}\u{3000}]{1,5}",
            "[.,;:!?(){}<>/\\\"'`~@#$%^&*_+=|-]{1,3}",
            "[)};]?[\r\n/]{1,4}",
            "[\u{c0}-\u{24f}\u{1c4}-\u{1cc}]{1,4}",
            "[\u{391}-\u{3c9}\u{410}-\u{44f}\u{5d0}-\u{5ea}]{1,4}",
            "[\u{4e00}-\u{4e10}\u{3041}-\u{3096}\u{2b0}-\u{2c1}]{1,3}",
            "[\u{300}-\u{36f}\u{903}\u{20dd}]{1,3}",
            "[\u{1f600}-\u{1f64f}\u{1f3fb}\u{200d}\u{fe0f}]{1,2}",
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(run, 0..16).prop_map(|runs| runs.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        #[test]
        fn pieces_are_the_reference_regexs(text in tricky_text()) {
            let reference: Vec<&str> = bpe_openai::o200k_base().split(&text).collect();
            proptest::prop_assert_eq!(split(&text), reference);
            let reference: Vec<&str> = bpe_openai::cl100k_base().split(&text).collect();
            proptest::prop_assert_eq!(split_cl100k(&text), reference);
        }

        #[test]
        fn pieces_of_any_text_are_the_reference_regexs(text in "\\PC{0,40}") {
            let reference: Vec<&str> = bpe_openai::o200k_base().split(&text).collect();
            proptest::prop_assert_eq!(split(&text), reference);
            let reference: Vec<&str> = bpe_openai::cl100k_base().split(&text).collect();
            proptest::prop_assert_eq!(split_cl100k(&text), reference);
        }
    }

    #[test]
    fn classes_come_from_the_unicode_tables() {
        assert_eq!(class('A'), Class::Upper);
        assert_eq!(class('ǅ'), Class::Upper, "titlecase");
        assert_eq!(class('ß'), Class::Lower);
        assert_eq!(class('中'), Class::Caseless);
        assert_eq!(class('\u{301}'), Class::Mark);
        assert_eq!(class('٣'), Class::Number);
        assert_eq!(class('\u{3000}'), Class::Space);
        assert_eq!(class('\u{85}'), Class::Space);
        assert_eq!(class('🦀'), Class::Other);
        assert_eq!(class('\u{1f}'), Class::Other, "not White_Space");
    }
}
