//! Splits text into the pieces that `o200k_base`'s pre-tokenizer would make, without a
//! regex and without a vocabulary, so that [`Estimate`](super::Estimate) only has to guess
//! how many tokens each piece becomes.
//!
//! Design choice: a hand-written, single-pass emulation of the o200k split pattern
//! (words with an optional one-character prefix split at case changes, digits in groups of
//! up to three, punctuation runs with trailing newlines, whitespace runs that leave their
//! last space to the next word). It is exact for ASCII text and close for the rest; the
//! estimator only needs it to be close.

/// A character class, as the split pattern sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `\p{Lu}` / `\p{Lt}`.
    Upper,
    /// `\p{Ll}`.
    Lower,
    /// Other letters (`\p{Lo}`, `\p{Lm}`): they count as upper and lower case alike.
    Caseless,
    /// `\p{N}`.
    Digit,
    /// `\r` or `\n`.
    Newline,
    /// A plain space.
    Space,
    /// Other whitespace (tab, form feed, no-break space, …).
    OtherSpace,
    /// Anything else: punctuation, symbols, emoji, control characters.
    Punct,
}

impl Class {
    fn is_letter(self) -> bool {
        matches!(self, Class::Upper | Class::Lower | Class::Caseless)
    }

    fn is_space(self) -> bool {
        matches!(self, Class::Newline | Class::Space | Class::OtherSpace)
    }
}

const ASCII: [Class; 128] = {
    let mut table = [Class::Punct; 128];
    let mut byte = 0;
    while byte < 128 {
        table[byte] = match byte as u8 {
            b'A'..=b'Z' => Class::Upper,
            b'a'..=b'z' => Class::Lower,
            b'0'..=b'9' => Class::Digit,
            b'\n' | b'\r' => Class::Newline,
            b' ' => Class::Space,
            b'\t' | 0x0B | 0x0C => Class::OtherSpace,
            _ => Class::Punct,
        };
        byte += 1;
    }
    table
};

const UPPER: u8 = 1;
const LOWER: u8 = 2;
const VOWEL: u8 = 4;

/// Letter flags of each byte: ASCII capitals, lower case and vowels.
const LETTER: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 128 {
        let b = byte as u8;
        let mut flags = 0;
        if b.is_ascii_uppercase() {
            flags |= UPPER;
        }
        if b.is_ascii_lowercase() {
            flags |= LOWER;
        }
        if matches!(b | 0x20, b'a' | b'e' | b'i' | b'o' | b'u') && b.is_ascii_alphabetic() {
            flags |= VOWEL;
        }
        table[byte] = flags;
        byte += 1;
    }
    table
};

/// The class and UTF-8 length of the character at byte `at`, or `None` at the end.
#[inline(always)]
fn class_at(text: &str, at: usize) -> Option<(Class, usize)> {
    let byte = *text.as_bytes().get(at)?;
    if byte < 0x80 {
        return Some((ASCII[usize::from(byte)], 1));
    }
    let ch = text.get(at..)?.chars().next()?;
    let class = if ch.is_whitespace() {
        Class::OtherSpace
    } else if ch.is_alphabetic() {
        if ch.is_uppercase() {
            Class::Upper
        } else if ch.is_lowercase() {
            Class::Lower
        } else {
            Class::Caseless
        }
    } else if ch.is_numeric() {
        Class::Digit
    } else {
        Class::Punct
    };
    Some((class, ch.len_utf8()))
}

/// What precedes a word's letters (in the same piece, or just before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prefix {
    /// Nothing: the word starts the text, a line, or follows a punctuation run.
    None = 0,
    /// A space or other (non-newline) whitespace.
    Space = 1,
    /// A punctuation character not listed below.
    Punct = 2,
    /// A backslash: usually a JSON or shell escape such as `\n`, which is its own token.
    Escape = 3,
    /// A dot (`.join`, `.py`).
    Dot = 4,
    /// An underscore (`_name`).
    Underscore = 5,
    /// A slash (`/usr`).
    Slash = 6,
    /// Nothing, but the word follows digits: part of a hash, an id or a hex number.
    AfterDigit = 7,
}

impl Prefix {
    /// How many prefixes there are.
    pub(crate) const COUNT: usize = 8;

    fn of_punct(byte: u8) -> Prefix {
        match byte {
            b'\\' => Prefix::Escape,
            b'.' => Prefix::Dot,
            b'_' => Prefix::Underscore,
            b'/' => Prefix::Slash,
            _ => Prefix::Punct,
        }
    }
}

/// The case pattern of a word's letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// All lower case (`word`).
    Lower = 0,
    /// One capital, then lower case (`Word`).
    Capital = 1,
    /// All capitals (`WORD`).
    Upper = 2,
    /// Several capitals then lower case (`HTTPServer`).
    Mixed = 3,
}

/// One piece of pre-tokenized text, with what the estimator needs to price it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece {
    /// ASCII letters, possibly with a one-character prefix and a contraction (`'s`).
    Word {
        /// What precedes the letters.
        prefix: Prefix,
        /// The case pattern.
        shape: Shape,
        /// How many letters.
        letters: usize,
        /// Whether a contraction (`'s`, `'ll`, …) follows in the same piece.
        contraction: bool,
        /// Whether fewer than a quarter of the letters are vowels (`aeiou`): a hint of an
        /// abbreviation, an id or base64 rather than a word.
        sparse: bool,
    },
    /// A word with non-ASCII letters.
    Foreign {
        /// Letters of two UTF-8 bytes (Latin, Greek, Cyrillic, Arabic, Hebrew, …).
        narrow: usize,
        /// Letters of three or more bytes (CJK, Indic, …).
        wide: usize,
        /// ASCII letters.
        ascii: usize,
    },
    /// One to three digits.
    Digits,
    /// A run of ASCII punctuation (and trailing newlines or slashes).
    Punct {
        /// Its length in bytes, prefix and suffix included.
        len: usize,
        /// Whether it starts with a space.
        spaced: bool,
        /// Whether it is one character repeated (`-----`, `====`).
        uniform: bool,
    },
    /// A run of punctuation or symbols with non-ASCII characters (emoji, arrows, boxes).
    Symbols {
        /// Characters of two, three and four UTF-8 bytes.
        wide: [usize; 3],
        /// Characters equal to the one before (`────`).
        repeats: usize,
        /// ASCII bytes.
        ascii: usize,
    },
    /// Whitespace ending with a newline.
    Newlines {
        /// Its length in bytes.
        len: usize,
    },
    /// Whitespace without a newline.
    Spaces {
        /// Its length in bytes.
        len: usize,
    },
}

/// Calls `visit` with each piece of `text` and its byte range, in order.
pub(crate) fn for_each_piece(text: &str, mut visit: impl FnMut(Piece, std::ops::Range<usize>)) {
    let mut at = 0;
    let mut after_digit = false;
    while let Some((class, len)) = class_at(text, at) {
        let (end, piece) = match class {
            Class::Upper | Class::Lower | Class::Caseless if after_digit => word(text, at, Prefix::AfterDigit),
            Class::Upper | Class::Lower | Class::Caseless => word(text, at, Prefix::None),
            Class::Digit => digits(text, at),
            Class::Punct | Class::Space | Class::OtherSpace | Class::Newline => {
                let next = class_at(text, at + len).map(|(class, _)| class);
                let next_is_letter = next.is_some_and(Class::is_letter);
                match class {
                    Class::Punct if next_is_letter => {
                        let byte = text.as_bytes().get(at).copied().unwrap_or(0);
                        word(text, at + len, Prefix::of_punct(byte))
                    }
                    Class::Space | Class::OtherSpace if next_is_letter => word(text, at + len, Prefix::Space),
                    Class::Punct => punct(text, at, at, false),
                    Class::Space if next == Some(Class::Punct) => punct(text, at, at + 1, true),
                    _ => whitespace(text, at),
                }
            }
        };
        after_digit = piece == Piece::Digits;
        visit(piece, at..end);
        at = end;
    }
}

/// `[\p{Lu}…]*[\p{Ll}…]+` or `[\p{Lu}…]+[\p{Ll}…]*`, then an optional contraction.
fn word(text: &str, letters_at: usize, prefix: Prefix) -> (usize, Piece) {
    let bytes = text.as_bytes();
    let mut at = letters_at;
    let (mut upper, mut lower, mut narrow, mut wide, mut vowels) = (0, 0, 0, 0, 0);
    // Capitals (and caseless letters), then lower case (and caseless letters). ASCII runs
    // are scanned by table; anything else goes through `class_at`.
    for (phase, flag) in [(Class::Upper, UPPER), (Class::Lower, LOWER)] {
        loop {
            let start = at;
            while let Some(&byte) = bytes.get(at) {
                let info = LETTER[usize::from(byte)];
                if info & flag == 0 {
                    break;
                }
                vowels += usize::from(info & VOWEL != 0);
                at += 1;
            }
            if phase == Class::Upper {
                upper += at - start;
            } else {
                lower += at - start;
            }
            if bytes.get(at).is_none_or(|&byte| byte < 0x80) {
                break;
            }
            match class_at(text, at) {
                Some((class, len)) if class == phase || class == Class::Caseless => {
                    if len == 2 {
                        narrow += 1;
                    } else {
                        wide += 1;
                    }
                    at += len;
                }
                _ => break,
            }
        }
    }
    let ascii = upper + lower;
    let contraction = contraction_len(bytes.get(at..).unwrap_or_default());
    let end = at + contraction;
    let piece = if narrow + wide > 0 {
        Piece::Foreign { narrow, wide, ascii }
    } else {
        let shape = match (upper, lower) {
            (0, _) => Shape::Lower,
            (_, 0) => Shape::Upper,
            (1, _) => Shape::Capital,
            _ => Shape::Mixed,
        };
        Piece::Word {
            prefix,
            shape,
            letters: ascii,
            contraction: contraction > 0,
            sparse: ascii >= 2 && vowels * 4 < ascii,
        }
    };
    (end, piece)
}

/// The length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, any case) at
/// the start of `rest`, or zero.
fn contraction_len(rest: &[u8]) -> usize {
    let lower = |index: usize| rest.get(index).map(u8::to_ascii_lowercase);
    if rest.first() != Some(&b'\'') {
        return 0;
    }
    match (lower(1), lower(2)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => 2,
        (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => 3,
        _ => 0,
    }
}

/// `\p{N}{1,3}`.
fn digits(text: &str, start: usize) -> (usize, Piece) {
    let mut at = start;
    for _ in 0..3 {
        match class_at(text, at) {
            Some((Class::Digit, len)) => at += len,
            _ => break,
        }
    }
    (at, Piece::Digits)
}

/// ` ?[^\s\p{L}\p{N}]+[\r\n/]*`, whose punctuation starts at `run`.
fn punct(text: &str, start: usize, run: usize, spaced: bool) -> (usize, Piece) {
    let mut at = run;
    let mut wide = [0usize; 3];
    let mut wide_bytes = 0;
    let mut repeats = 0;
    let mut previous = None;
    while let Some((Class::Punct, len)) = class_at(text, at) {
        // A character is identified by its first and last byte and its length: exact for
        // ASCII, and close enough for the repeat count of symbol runs.
        let bytes = text.as_bytes();
        let ch = (bytes.get(at).copied(), bytes.get(at + len - 1).copied(), len);
        if Some(ch) == previous {
            repeats += 1;
        }
        previous = Some(ch);
        if len > 1 {
            wide[len.min(4) - 2] += 1;
            wide_bytes += len;
        }
        at += len;
    }
    let run_end = at;
    while matches!(text.as_bytes().get(at), Some(b'\r' | b'\n' | b'/')) {
        at += 1;
    }
    let piece = if wide_bytes > 0 {
        Piece::Symbols { wide, repeats, ascii: at - start - wide_bytes }
    } else {
        Piece::Punct { len: at - start, spaced, uniform: run_end - run > 1 && repeats + 1 == run_end - run }
    };
    (at, piece)
}

/// `\s*[\r\n]+`, else `\s+(?!\S)`, else `\s+`.
fn whitespace(text: &str, start: usize) -> (usize, Piece) {
    let mut at = start;
    let mut after_newline = None;
    let mut last_start = start;
    let mut chars = 0;
    while let Some((class, len)) = class_at(text, at) {
        if !class.is_space() {
            break;
        }
        last_start = at;
        at += len;
        chars += 1;
        if class == Class::Newline {
            after_newline = Some(at);
        }
    }
    if let Some(end) = after_newline {
        return (end, Piece::Newlines { len: end - start });
    }
    // Leave the last space to the word or punctuation that follows, unless the run is one
    // character long or ends the text.
    let end = if at < text.len() && chars >= 2 { last_start } else { at };
    (end, Piece::Spaces { len: end - start })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_piece(text, |_, range| out.push(text[range].to_owned()));
        assert_eq!(out.concat(), text, "pieces cover the text");
        out
    }

    #[test]
    fn splits_like_o200k() {
        assert_eq!(split("Hello world"), ["Hello", " world"]);
        assert_eq!(split("camelCase HTTPServer ABC"), ["camel", "Case", " HTTPServer", " ABC"]);
        assert_eq!(split("don't it's"), ["don't", " it's"]);
        assert_eq!(split("x1234567"), ["x", "123", "456", "7"]);
        assert_eq!(split("self._settings['a']"), ["self", "._", "settings", "['", "a", "']"]);
        assert_eq!(split("((foo"), ["((", "foo"]);
        assert_eq!(split("f(x);\n    return"), ["f", "(x", ");\n", "   ", " return"]);
        assert_eq!(split("a  \n\n  b"), ["a", "  \n\n", " ", " b"]);
        assert_eq!(split("a \t= 1 "), ["a", " ", "\t", "=", " ", "1", " "]);
        assert_eq!(split("x = {\"k\": 2}"), ["x", " =", " {\"", "k", "\":", " ", "2", "}"]);
        assert_eq!(split("日本語のテキスト"), ["日本語のテキスト"]);
        assert_eq!(split("héllo wörld"), ["héllo", " wörld"]);
        assert_eq!(split("😀🚀 go"), ["😀🚀", " go"]);
        assert_eq!(split(""), Vec::<String>::new());
    }

    #[test]
    fn pieces_are_classified() {
        let mut pieces = Vec::new();
        for_each_piece(" Hello, 42\n\n", |piece, _| pieces.push(piece));
        assert_eq!(
            pieces,
            [
                Piece::Word {
                    prefix: Prefix::Space,
                    shape: Shape::Capital,
                    letters: 5,
                    contraction: false,
                    sparse: false
                },
                Piece::Punct { len: 1, spaced: false, uniform: false },
                Piece::Spaces { len: 1 },
                Piece::Digits,
                Piece::Newlines { len: 2 },
            ]
        );
    }
}
