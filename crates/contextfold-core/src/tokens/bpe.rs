//! Exact BPE counts with OpenAI's `o200k_base` and `cl100k_base` vocabularies.
//!
//! Design choice: our own encoder over tables laid out at compile time and read in place
//! ([`vocabulary`](super::vocabulary), [`split`], [`merge`](super::merge)), so a process
//! counts its first text as fast as its last: no vocabulary to load, no regex to build
//! (bpe-openai, whose vocabularies the build script reads, deserializes 32 MB before its
//! first o200k count, about 80 ms). Counts follow `encode_ordinary`:
//! text that looks like a special token (`<|endoftext|>`) counts as ordinary text, as it
//! would in a user's message; they are the same as tiktoken's on every line of the
//! reference fixtures. Both pre-tokenizers run in linear time, so no input (a run of a
//! million spaces included) can make them fail.
//!
//! Each piece is encoded every time it is met: a piece that is a token (most are) costs
//! one hash lookup, so remembering pieces per thread costs more than it saves (`count` of
//! a 700 kB session: a median of 51–52 ms of CPU without such a cache, 55–56 ms with it).

use super::merge::Merger;
use super::split::{self, Pattern};
use super::vocabulary::{Vocabulary, CL100K, O200K};
use super::TokenCounter;
use std::cell::RefCell;

thread_local! {
    /// The merge's buffers, one set per thread, reused from piece to piece.
    static MERGER: RefCell<Merger> = RefCell::default();
}

/// The count of `text`: the sum of its pieces' under `pattern`.
fn count(pattern: Pattern, vocabulary: &Vocabulary, text: &str) -> u64 {
    MERGER.with_borrow_mut(|merger| {
        split::pieces(pattern, text).map(|piece| merger.count(vocabulary, piece.as_bytes()) as u64).sum()
    })
}

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
        count(Pattern::O200k, &O200K, text)
    }
}

impl TokenCounter for Cl100k {
    fn name(&self) -> &'static str {
        "cl100k"
    }

    fn count_text(&self, text: &str) -> u64 {
        count(Pattern::Cl100k, &CL100K, text)
    }
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
    fn counts_are_bpe_openais() {
        let text = "fn main() {\n    println!(\"héllo\");\n}\n    \n\t// 12345 ünïcödé 🦀🦀 done.\n";
        for _ in 0..3 {
            assert_eq!(O200k.count_text(text), bpe_openai::o200k_base().count(text) as u64);
            assert_eq!(Cl100k.count_text(text), bpe_openai::cl100k_base().count(text) as u64);
        }
        let long_piece = "x".repeat(200);
        assert_eq!(O200k.count_text(&long_piece), bpe_openai::o200k_base().count(&*long_piece) as u64);
        assert_eq!(Cl100k.count_text(&long_piece), bpe_openai::cl100k_base().count(&*long_piece) as u64);
    }

    #[test]
    fn huge_runs_are_counted_whole() {
        // tiktoken-rs's backtracking pre-tokenizer failed on runs of about a million spaces.
        let spaces = O200k.count_text(&format!("a{}b", " ".repeat(1 << 20)));
        assert!(spaces > 1_000, "{spaces}");
        assert!(O200k.count_text(&"a".repeat(1 << 20)) > 1_000);
        assert!(Cl100k.count_text(&"\u{301}".repeat(1 << 16)) > 0, "combining marks alone");
    }
}
