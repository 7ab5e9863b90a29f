//! Exact BPE counts with OpenAI's `o200k_base` and `cl100k_base` vocabularies.
//!
//! Design choice: counts use `encode_ordinary` semantics, so text that looks like a special
//! token (`<|endoftext|>`) counts as ordinary text, as it would in a user's message. Each
//! vocabulary is built once per process ([`OnceLock`]) on first use.

use super::TokenCounter;
use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

/// The longest whitespace run handed to the tokenizer in one piece.
///
/// tiktoken's pre-tokenizer (a backtracking regex) fails on a whitespace run of about a
/// million characters. Longer runs are cut into pieces of this size and counted piece by
/// piece, which may differ from the exact count by a token per cut; no real text has such
/// runs, but a count must never panic on input.
const MAX_WHITESPACE_RUN: usize = 256 * 1024;

/// Exact token counts with the `o200k_base` vocabulary (GPT-4o, o-series and later).
#[derive(Debug, Clone, Copy, Default)]
pub struct O200k;

/// Exact token counts with the `cl100k_base` vocabulary (GPT-4, GPT-3.5).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cl100k;

impl TokenCounter for O200k {
    fn name(&self) -> &'static str {
        "o200k"
    }

    fn count_text(&self, text: &str) -> u64 {
        static BPE: OnceLock<CoreBPE> = OnceLock::new();
        let bpe = BPE.get_or_init(|| {
            // The vocabulary is compiled into tiktoken-rs; failing to load it is a build
            // defect, not an input error.
            tiktoken_rs::o200k_base().expect("the embedded o200k_base vocabulary loads")
        });
        count_with(bpe, text)
    }
}

impl TokenCounter for Cl100k {
    fn name(&self) -> &'static str {
        "cl100k"
    }

    fn count_text(&self, text: &str) -> u64 {
        static BPE: OnceLock<CoreBPE> = OnceLock::new();
        let bpe = BPE.get_or_init(|| {
            // As above: the vocabulary is embedded, so this cannot fail on user input.
            tiktoken_rs::cl100k_base().expect("the embedded cl100k_base vocabulary loads")
        });
        count_with(bpe, text)
    }
}

fn count_with(bpe: &CoreBPE, text: &str) -> u64 {
    safe_segments(text).map(|segment| bpe.encode_ordinary(segment).len() as u64).sum()
}

/// Splits `text` so that no segment holds a whitespace run longer than
/// [`MAX_WHITESPACE_RUN`] bytes. Almost every text is one segment.
fn safe_segments(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut run = 0usize;
        let mut cut = rest.len();
        for (index, ch) in rest.char_indices() {
            if ch.is_whitespace() {
                run += ch.len_utf8();
                if run > MAX_WHITESPACE_RUN {
                    cut = index;
                    break;
                }
            } else {
                run = 0;
            }
        }
        let (head, tail) = rest.split_at(cut);
        rest = tail;
        Some(head)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_counts() {
        assert_eq!(O200k.count_text(""), 0);
        assert_eq!(O200k.count_text("héllo wörld"), 5);
        assert_eq!(Cl100k.count_text("héllo wörld"), 6);
        assert_eq!(O200k.count_text("<|endoftext|> special-looking text"), 10);
    }

    #[test]
    fn huge_whitespace_runs_do_not_panic() {
        let text = format!("a{}b", " ".repeat(MAX_WHITESPACE_RUN * 4 + 3));
        let segments: Vec<&str> = safe_segments(&text).collect();
        assert_eq!(segments.concat(), text);
        assert!(segments.len() >= 4);
        let count = O200k.count_text(&text);
        assert!(count > 0);
    }

    #[test]
    fn ordinary_text_is_one_segment() {
        let text = "fn main() {\n    println!(\"hi\");\n}\n";
        assert_eq!(safe_segments(text).collect::<Vec<_>>(), vec![text]);
    }
}
