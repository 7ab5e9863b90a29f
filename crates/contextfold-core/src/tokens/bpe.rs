//! Exact BPE counts with OpenAI's `o200k_base` and `cl100k_base` vocabularies.
//!
//! Design choice: the encoder is `bpe-openai`, whose tables are built when the crate is
//! compiled, so a vocabulary is ready after a deserialization of a few milliseconds instead
//! of the hundred or more that building one from its token list takes; it runs only when a
//! count is first asked for, once per process. Its pre-tokenizer is a linear-time regex,
//! so no input (a run of a million spaces included) can make it fail. Counts follow
//! `encode_ordinary`: text that looks like a special token (`<|endoftext|>`) counts as
//! ordinary text, as it would in a user's message; they are the same as tiktoken's on every
//! line of the reference fixtures.

use super::TokenCounter;

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
        bpe_openai::o200k_base().count(text) as u64
    }
}

impl TokenCounter for Cl100k {
    fn name(&self) -> &'static str {
        "cl100k"
    }

    fn count_text(&self, text: &str) -> u64 {
        bpe_openai::cl100k_base().count(text) as u64
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
    fn huge_runs_are_counted_whole() {
        // tiktoken-rs's backtracking pre-tokenizer failed on runs of about a million spaces.
        let spaces = O200k.count_text(&format!("a{}b", " ".repeat(1 << 20)));
        assert!(spaces > 1_000, "{spaces}");
        assert!(O200k.count_text(&"a".repeat(1 << 20)) > 1_000);
        assert!(Cl100k.count_text(&"\u{301}".repeat(1 << 16)) > 0, "combining marks alone");
    }
}
