//! The two ends of one-line JSON, pretty-printed without parsing the middle.
//!
//! Design choice: a clip keeps only the start and the end of an output, so only those are
//! lexed: forward from the first byte, backward from the last, each for a bounded span, and
//! each checked against the JSON grammar as far as it reads (a one-line log that merely
//! starts with `[` fails within its first tokens). Tokens are printed as they appear in the
//! input (numbers and escapes are never reformatted), in the layout of
//! `serde_json::to_string_pretty`: two-space indent, `"key": value`, `[]` and `{}` for empty
//! containers. Reading backward works because the document ends outside any string at depth
//! zero: a quote closes a string, and a quote inside a string is escaped by an odd run of
//! backslashes.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `{` or `[`.
    Open(u8),
    /// `}` or `]`.
    Close(u8),
    Comma,
    Colon,
    /// A string, quotes included.
    Str,
    /// A number, `true`, `false` or `null`.
    Scalar,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    start: usize,
    end: usize,
    kind: Kind,
}

/// The input is not JSON (as far as it was read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NotJson;

/// One end of a JSON text, pretty-printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct End {
    /// The pretty-printed lines, each ending in `\n` but the last.
    pub(super) text: String,
    /// One entry per line of `text`: for the head, where the line ends in the input (where
    /// the input continues after it); for the tail, where the line starts in the input.
    pub(super) offsets: Vec<usize>,
    /// Whether `text` holds the whole document.
    pub(super) complete: bool,
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_scalar_byte(byte: u8) -> bool {
    !is_space(byte) && !matches!(byte, b'{' | b'}' | b'[' | b']' | b',' | b':' | b'"')
}

/// Whether `bytes` is a number, `true`, `false` or `null` (numbers checked loosely).
fn valid_scalar(bytes: &[u8]) -> bool {
    match bytes {
        b"true" | b"false" | b"null" => true,
        [first, ..] => {
            (first.is_ascii_digit() || *first == b'-')
                && bytes.iter().all(|byte| byte.is_ascii_digit() || matches!(byte, b'-' | b'+' | b'.' | b'e' | b'E'))
        }
        [] => false,
    }
}

fn punct(byte: u8) -> Option<Kind> {
    Some(match byte {
        b'{' | b'[' => Kind::Open(byte),
        b'}' | b']' => Kind::Close(byte),
        b',' => Kind::Comma,
        b':' => Kind::Colon,
        _ => return None,
    })
}

fn opener(close: u8) -> u8 {
    if close == b'}' {
        b'{'
    } else {
        b'['
    }
}

/// The token starting at or after `pos`, or `None` at the end of the input.
fn next_token(bytes: &[u8], mut pos: usize) -> Result<Option<Token>, NotJson> {
    while pos < bytes.len() && is_space(bytes[pos]) {
        pos += 1;
    }
    let Some(&byte) = bytes.get(pos) else { return Ok(None) };
    if let Some(kind) = punct(byte) {
        return Ok(Some(Token { start: pos, end: pos + 1, kind }));
    }
    if byte == b'"' {
        let mut at = pos + 1;
        while at < bytes.len() {
            match bytes[at] {
                b'\\' => at += 2,
                b'"' => return Ok(Some(Token { start: pos, end: at + 1, kind: Kind::Str })),
                _ => at += 1,
            }
        }
        return Err(NotJson);
    }
    let end = bytes[pos..].iter().position(|&byte| !is_scalar_byte(byte)).map_or(bytes.len(), |len| pos + len);
    if !valid_scalar(&bytes[pos..end]) {
        return Err(NotJson);
    }
    Ok(Some(Token { start: pos, end, kind: Kind::Scalar }))
}

/// The token ending at or before `end`, or `None` at the start of the input.
fn previous_token(bytes: &[u8], mut end: usize) -> Result<Option<Token>, NotJson> {
    while end > 0 && is_space(bytes[end - 1]) {
        end -= 1;
    }
    if end == 0 {
        return Ok(None);
    }
    let byte = bytes[end - 1];
    if let Some(kind) = punct(byte) {
        return Ok(Some(Token { start: end - 1, end, kind }));
    }
    let escaped = |quote: usize| bytes[..quote].iter().rev().take_while(|&&byte| byte == b'\\').count() % 2 == 1;
    if byte == b'"' {
        if escaped(end - 1) {
            return Err(NotJson);
        }
        let mut search = end - 1;
        while let Some(quote) = bytes[..search].iter().rposition(|&byte| byte == b'"') {
            if !escaped(quote) {
                return Ok(Some(Token { start: quote, end, kind: Kind::Str }));
            }
            search = quote;
        }
        return Err(NotJson);
    }
    let start = bytes[..end].iter().rposition(|&byte| !is_scalar_byte(byte)).map_or(0, |at| at + 1);
    if !valid_scalar(&bytes[start..end]) {
        return Err(NotJson);
    }
    Ok(Some(Token { start, end, kind: Kind::Scalar }))
}

/// What the forward reader expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ahead {
    Value,
    ValueOrClose,
    Key,
    KeyOrClose,
    Colon,
    CommaOrClose,
    Done,
}

/// Checks `token` against the grammar, reading forward.
fn step_forward(expect: Ahead, token: Token, stack: &mut Vec<u8>) -> Result<Ahead, NotJson> {
    let after_value = |stack: &Vec<u8>| match stack.last() {
        None => Ahead::Done,
        Some(_) => Ahead::CommaOrClose,
    };
    let close = |stack: &mut Vec<u8>, byte: u8| {
        if stack.last() == Some(&opener(byte)) {
            stack.pop();
            Ok(after_value(stack))
        } else {
            Err(NotJson)
        }
    };
    match (expect, token.kind) {
        (Ahead::Value | Ahead::ValueOrClose, Kind::Open(byte)) => {
            stack.push(byte);
            Ok(if byte == b'[' { Ahead::ValueOrClose } else { Ahead::KeyOrClose })
        }
        (Ahead::Value | Ahead::ValueOrClose, Kind::Str | Kind::Scalar) => Ok(after_value(stack)),
        (Ahead::ValueOrClose, Kind::Close(b']')) | (Ahead::KeyOrClose, Kind::Close(b'}')) => {
            close(stack, token_byte(token))
        }
        (Ahead::Key | Ahead::KeyOrClose, Kind::Str) => Ok(Ahead::Colon),
        (Ahead::Colon, Kind::Colon) => Ok(Ahead::Value),
        (Ahead::CommaOrClose, Kind::Comma) => Ok(if stack.last() == Some(&b'[') { Ahead::Value } else { Ahead::Key }),
        (Ahead::CommaOrClose, Kind::Close(byte)) => close(stack, byte),
        _ => Err(NotJson),
    }
}

fn token_byte(token: Token) -> u8 {
    match token.kind {
        Kind::Open(byte) | Kind::Close(byte) => byte,
        _ => 0,
    }
}

/// What the backward reader expects next (the token before the ones read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behind {
    /// The document's closing bracket.
    Last,
    /// The end of a value, or the opener of the innermost container (empty, or its first value read).
    ValueOrOpen,
    /// The end of a value.
    Value,
    /// In an array after a value: `,` or `[`.
    ArraySeparator,
    /// In an object after a value: `:`.
    Colon,
    /// In an object after `:`: the key.
    Key,
    /// In an object after a key: `,` or `{`.
    ObjectSeparator,
    Done,
}

/// Checks `token` against the grammar, reading backward.
fn step_backward(expect: Behind, token: Token, stack: &mut Vec<u8>) -> Result<Behind, NotJson> {
    let after_value = |stack: &Vec<u8>| match stack.last() {
        None => Behind::Done,
        Some(b'[') => Behind::ArraySeparator,
        Some(_) => Behind::Colon,
    };
    let open = |stack: &mut Vec<u8>, byte: u8| {
        if stack.last() == Some(&byte) {
            stack.pop();
            Ok(after_value(stack))
        } else {
            Err(NotJson)
        }
    };
    match (expect, token.kind) {
        (Behind::Last | Behind::Value | Behind::ValueOrOpen, Kind::Close(byte)) => {
            stack.push(opener(byte));
            Ok(Behind::ValueOrOpen)
        }
        (Behind::Value | Behind::ValueOrOpen, Kind::Str | Kind::Scalar) => Ok(after_value(stack)),
        // An empty container (`ValueOrOpen`), or one whose first value was read.
        (Behind::ValueOrOpen | Behind::ArraySeparator, Kind::Open(b'[')) => open(stack, b'['),
        (Behind::ValueOrOpen | Behind::ObjectSeparator, Kind::Open(b'{')) => open(stack, b'{'),
        (Behind::ArraySeparator | Behind::ObjectSeparator, Kind::Comma) => Ok(Behind::Value),
        (Behind::Colon, Kind::Colon) => Ok(Behind::Key),
        (Behind::Key, Kind::Str) => Ok(Behind::ObjectSeparator),
        _ => Err(NotJson),
    }
}

/// Prints `tokens` (consecutive in `text`) in the pretty layout, the first at `depth`;
/// calls `line` with the input offset of each token that starts a new line.
fn print(text: &str, tokens: &[Token], mut depth: usize, out: &mut String, mut line: impl FnMut(usize)) {
    let mut previous: Option<Kind> = None;
    for token in tokens {
        if matches!(token.kind, Kind::Close(_)) {
            depth = depth.saturating_sub(1);
        }
        match (previous, token.kind) {
            (Some(Kind::Open(_)), Kind::Close(_)) | (None, _) => {}
            (Some(Kind::Open(_) | Kind::Comma), _) | (Some(_), Kind::Close(_)) => {
                out.push('\n');
                for _ in 0..depth {
                    out.push_str("  ");
                }
                line(token.start);
            }
            (Some(Kind::Colon), _) => out.push(' '),
            (Some(_), _) => {}
        }
        out.push_str(&text[token.start..token.end]);
        if matches!(token.kind, Kind::Open(_)) {
            depth += 1;
        }
        previous = Some(token.kind);
    }
}

/// The start of `text` pretty-printed: tokens starting in its first `span` bytes, cut back to
/// the last whole line (unless there is one line only). `complete` when the whole document
/// was read, checked and printed.
pub(super) fn head(text: &str, span: usize) -> Result<End, NotJson> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let (mut pos, mut expect, mut stack) = (0, Ahead::Value, Vec::new());
    let complete = loop {
        let Some(token) = next_token(bytes, pos)? else {
            pos = text.len();
            break true;
        };
        if token.start >= span && expect != Ahead::Done {
            break false;
        }
        if tokens.is_empty() && !matches!(token.kind, Kind::Open(_)) {
            return Err(NotJson);
        }
        expect = step_forward(expect, token, &mut stack)?;
        tokens.push(token);
        pos = token.end;
    };
    if complete && expect != Ahead::Done {
        return Err(NotJson);
    }
    let mut out = String::new();
    let mut offsets = Vec::new();
    print(text, &tokens, 0, &mut out, |start| offsets.push(start));
    // `offsets` holds where lines 1.. start, so where lines ..n-1 end.
    match out.rfind('\n') {
        // The last line may continue past the span: keep whole lines only.
        Some(newline) if !complete => out.truncate(newline),
        _ => offsets.push(pos),
    }
    Ok(End { text: out, offsets, complete })
}

/// The end of `text` pretty-printed: tokens ending in its last `span` bytes, from the first
/// whole line on.
pub(super) fn tail(text: &str, span: usize) -> Result<End, NotJson> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let (mut end, mut expect, mut stack) = (text.len(), Behind::Last, Vec::new());
    let limit = text.len().saturating_sub(span);
    let complete = loop {
        let Some(token) = previous_token(bytes, end)? else {
            break true;
        };
        expect = step_backward(expect, token, &mut stack)?;
        tokens.push(token);
        end = token.start;
        // One token more than the span: the first printed line is dropped below, and the
        // line breaks after it depend on the tokens either side.
        if token.end <= limit {
            break false;
        }
    };
    if complete && expect != Behind::Done {
        return Err(NotJson);
    }
    tokens.reverse();
    // The brackets still open when reading backward enclose the first token read (a closer
    // counts its own bracket, as `print` expects).
    let depth = stack.len();
    let mut out = String::new();
    let mut offsets = vec![tokens.first().map_or(0, |token| token.start)];
    print(text, &tokens, depth, &mut out, |start| offsets.push(start));
    if !complete {
        match out.find('\n') {
            Some(newline) => {
                out.drain(..=newline);
                offsets.remove(0);
            }
            None => return Ok(End { text: String::new(), offsets: vec![text.len()], complete }),
        }
    }
    Ok(End { text: out, offsets, complete })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pretty(value: &serde_json::Value) -> String {
        serde_json::to_string_pretty(value).unwrap()
    }

    #[test]
    fn a_whole_document_prints_like_serde_json() {
        let value = json!({"a": [1, {"b": []}, {}], "c": "x\"y\\", "d": {"e": null, "f": [true, false, -1.5e3]}});
        let text = value.to_string();
        let head = head(&text, usize::MAX).unwrap();
        assert!(head.complete);
        assert_eq!(head.text, pretty(&value));
        let tail = tail(&text, usize::MAX).unwrap();
        assert!(tail.complete);
        assert_eq!(tail.text, pretty(&value));
    }

    #[test]
    fn the_ends_are_lines_of_the_whole() {
        let items: Vec<_> = (0..400)
            .map(|i| json!({"id": i, "name": format!("it\\\"em {i}"), "tags": [], "sub": {"x": [i, {}], "y": {}}}))
            .collect();
        let value = json!({"items": items, "total": 400});
        let text = value.to_string();
        let whole = pretty(&value);
        for span in [1, 7, 100, 1_000, 5_000] {
            let head = head(&text, span).unwrap();
            assert!(!head.complete);
            assert!(whole.starts_with(&head.text), "span {span}: {}", head.text);
            assert_eq!(head.offsets.len(), head.text.lines().count());
            let lines: Vec<&str> = whole.lines().collect();
            // Each head line ends where the next line's first token starts.
            for (line, &end) in head.offsets.iter().enumerate() {
                assert_eq!(lines[line + 1].trim_start().as_bytes()[0], text.as_bytes()[end], "span {span}");
            }
            let tail = tail(&text, span).unwrap();
            assert!(!tail.complete);
            assert!(whole.ends_with(&tail.text), "span {span}: {}", tail.text);
            assert!(tail.text.is_empty() || whole.ends_with(&format!("\n{}", tail.text)), "whole lines");
            assert_eq!(tail.offsets.len(), tail.text.lines().count().max(1));
            let first_tail_line = lines.len() - tail.text.lines().count();
            for (line, &start) in tail.offsets.iter().enumerate().filter(|_| !tail.text.is_empty()) {
                let pretty_line = lines[first_tail_line + line].trim_start();
                assert_eq!(pretty_line.as_bytes()[0], text.as_bytes()[start], "span {span}");
            }
        }
    }

    #[test]
    fn text_that_only_looks_like_json_is_refused() {
        for text in ["[INFO] server started, port 80", "[1 2]", "{\"a\" 1}", "[1,2", "{\"a\":1}}", "[nul]", "[1,]"] {
            let forward = head(text, usize::MAX);
            let backward = tail(text, usize::MAX);
            assert!(forward.is_err() || backward.is_err(), "{text}: {forward:?} {backward:?}");
        }
        assert!(tail("[1,2] x", usize::MAX).is_err());
        assert!(head("[1,2] x", usize::MAX).is_err());
    }
}
