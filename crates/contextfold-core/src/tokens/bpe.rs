//! Exact BPE counts with OpenAI's `o200k_base` and `cl100k_base` vocabularies.
//!
//! Design choice: `o200k_base`, the default, is counted by our own encoder over tables laid
//! out at compile time and read in place ([`vocabulary`](super::vocabulary), [`split`],
//! [`merge`](super::merge)), so a process counts its first text as fast as its last: no
//! vocabulary to load, no regex to build. `cl100k_base` is counted by `bpe-openai`, whose
//! vocabulary is deserialized on first use. Counts follow `encode_ordinary`:
//! text that looks like a special token (`<|endoftext|>`) counts as ordinary text, as it
//! would in a user's message; they are the same as tiktoken's on every line of the
//! reference fixtures. Both pre-tokenizers run in linear time, so no input (a run of a
//! million spaces included) can make them fail.
//!
//! Text is counted a pre-tokenizer piece at a time, and the count of each short piece is
//! remembered per thread ([`PieceCounts`]): agent sessions repeat the same words, paths and
//! punctuation so often that most pieces are a lookup instead of an encoding.

use super::merge::Merger;
use super::vocabulary::O200K;
use super::{split, TokenCounter};
use std::cell::RefCell;
use std::collections::HashMap;
use xxhash_rust::xxh3::Xxh3Builder;

/// Pieces longer than this are encoded every time: they are rare, and keeping them would
/// cost more memory than it saves.
const MAX_PIECE_BYTES: usize = 32;

/// A thread's cache starts over when it holds this many pieces (a few MB), so that a
/// long-running program's memory stays bounded.
const MAX_PIECES: usize = 1 << 16;

/// The counts of the pieces one thread has encoded with one vocabulary.
#[derive(Default)]
struct PieceCounts {
    counts: HashMap<Box<str>, u32, Xxh3Builder>,
}

impl PieceCounts {
    /// The count of `piece`, looked up when it is short (and added on a miss), else `encode`d.
    fn count(&mut self, piece: &str, encode: impl FnOnce(&str) -> usize) -> u64 {
        if piece.len() > MAX_PIECE_BYTES {
            return encode(piece) as u64;
        }
        if let Some(&count) = self.counts.get(piece) {
            return u64::from(count);
        }
        let count = encode(piece);
        if self.counts.len() >= MAX_PIECES {
            self.counts.clear();
        }
        // A piece of at most MAX_PIECE_BYTES bytes has at most that many tokens.
        self.counts.insert(piece.into(), count as u32);
        count as u64
    }
}

thread_local! {
    static O200K_STATE: RefCell<(PieceCounts, Merger)> = RefCell::default();
    static CL100K_PIECES: RefCell<PieceCounts> = RefCell::default();
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
        O200K_STATE.with_borrow_mut(|(pieces, merger)| {
            split::pieces(text).map(|piece| pieces.count(piece, |piece| merger.count(&O200K, piece.as_bytes()))).sum()
        })
    }
}

impl TokenCounter for Cl100k {
    fn name(&self) -> &'static str {
        "cl100k"
    }

    fn count_text(&self, text: &str) -> u64 {
        let tokenizer = bpe_openai::cl100k_base();
        CL100K_PIECES.with_borrow_mut(|pieces| {
            tokenizer.split(text).map(|piece| pieces.count(piece, |piece| tokenizer.bpe.count(piece.as_bytes()))).sum()
        })
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
    fn remembered_pieces_count_as_encoded_ones() {
        let text = "fn main() {\n    println!(\"héllo\");\n}\n    \n\t// 12345 ünïcödé 🦀🦀 done.\n";
        for _ in 0..3 {
            assert_eq!(O200k.count_text(text), bpe_openai::o200k_base().count(text) as u64);
            assert_eq!(Cl100k.count_text(text), bpe_openai::cl100k_base().count(text) as u64);
        }
        let long_piece = "x".repeat(MAX_PIECE_BYTES * 4);
        assert_eq!(O200k.count_text(&long_piece), bpe_openai::o200k_base().count(&*long_piece) as u64);
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
