//! A counter that remembers: the same text is counted once.
//!
//! Compaction and replay count the same tool outputs again and again (before and after
//! eviction, in plans, in reports). Wrapping an exact BPE counter in [`Memoized`] turns each
//! repeat into a hash of the text, which is far cheaper than encoding it.

use super::TokenCounter;
use crate::hash::hash_bytes;
use std::collections::HashMap;
use std::sync::Mutex;

/// Texts shorter than this are counted directly: hashing them saves nothing.
const MIN_MEMO_BYTES: usize = 64;

/// The cache starts over when it holds this many counts (about 8 MB), so that a
/// long-running program's memory stays bounded.
const MAX_ENTRIES: usize = 1 << 18;

/// Wraps a counter with a cache of counts by text hash.
pub struct Memoized<C> {
    inner: C,
    counts: Mutex<HashMap<u64, u64>>,
}

impl<C: TokenCounter> Memoized<C> {
    /// Remembers the counts of `inner`.
    pub fn new(inner: C) -> Memoized<C> {
        Memoized { inner, counts: Mutex::new(HashMap::new()) }
    }
}

impl<C> std::fmt::Debug for Memoized<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memoized(..)")
    }
}

impl<C: TokenCounter> TokenCounter for Memoized<C> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn count_text(&self, text: &str) -> u64 {
        if text.len() < MIN_MEMO_BYTES {
            return self.inner.count_text(text);
        }
        let key = hash_bytes(text.as_bytes()) ^ (text.len() as u64).rotate_left(32);
        if let Some(count) = self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(&key) {
            return *count;
        }
        let count = self.inner.count_text(text);
        let mut counts = self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if counts.len() >= MAX_ENTRIES {
            counts.clear();
        }
        counts.insert(key, count);
        count
    }
}

impl<C: TokenCounter + ?Sized> TokenCounter for &C {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn count_text(&self, text: &str) -> u64 {
        (**self).count_text(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Chars4;

    #[test]
    fn same_counts_as_the_inner_counter() {
        let memo = Memoized::new(Chars4);
        let long = "x".repeat(1_000);
        assert_eq!(memo.count_text(&long), Chars4.count_text(&long));
        assert_eq!(memo.count_text(&long), Chars4.count_text(&long));
        assert_eq!(memo.count_text("short"), Chars4.count_text("short"));
        assert_eq!(memo.name(), "chars4");
    }

    #[test]
    fn program_wide_caches_count_like_their_tokenizer() {
        use crate::tokens::Tokenizer;
        let text = "fn main() { println!(\"hello\"); }\n".repeat(20);
        for tokenizer in Tokenizer::ALL {
            let counter = tokenizer.memoized();
            assert_eq!(counter.name(), tokenizer.name());
            assert_eq!(counter.count_text(&text), tokenizer.counter().count_text(&text));
            assert_eq!(counter.count_text(&text), tokenizer.counter().count_text(&text), "a cached count");
        }
    }
}
