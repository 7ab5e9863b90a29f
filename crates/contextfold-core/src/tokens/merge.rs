//! tiktoken's byte-pair merge, counting only: how many tokens one pre-tokenizer piece
//! becomes.
//!
//! Design choice: the rule is tiktoken's (a piece that is a token is one token; otherwise
//! start from single bytes and merge, again and again, the adjacent pair whose joined bytes
//! have the lowest rank, the leftmost of equals), but the lowest pair comes from a binary
//! heap over a linked list of parts instead of a scan of them all, so a piece of `n` bytes
//! costs O(n log n), never O(n²): one piece can be a whole file's worth of letters. Stale
//! heap entries are skipped when popped: a part's pair only ever grows to longer bytes, so
//! a (rank, part) entry is current exactly when that part's pair still has that rank.
//! Short pieces, the most, merge by scanning their few pairs, as tiktoken does: a scan of
//! at most [`SCAN_MAX_BYTES`] parts costs less than setting up the heap.

use super::vocabulary::Vocabulary;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// No pair: the part is the last, or it was merged into the part before it, or its pair's
/// bytes are no token.
const NONE: u32 = u32::MAX;

/// Pieces of at most this many bytes merge by a scan over arrays on the stack.
const SCAN_MAX_BYTES: usize = 16;

/// Buffers reused from one piece to the next, so that counting allocates only when a piece
/// is longer than any before it.
#[derive(Default)]
pub(super) struct Merger {
    heap: BinaryHeap<Reverse<(u32, usize)>>,
    /// Per byte position: the start of the next part, for the start of a part.
    next: Vec<usize>,
    /// Per byte position: the start of the previous part, for the start of a part.
    prev: Vec<usize>,
    /// Per byte position: the rank of the part starting there joined with the next one.
    pair: Vec<u32>,
}

impl Merger {
    /// The number of tokens `piece` encodes to with `vocabulary`.
    pub(super) fn count(&mut self, vocabulary: &Vocabulary, piece: &[u8]) -> usize {
        if piece.len() <= 1 || vocabulary.rank(piece).is_some() {
            return piece.len().min(1);
        }
        if piece.len() <= SCAN_MAX_BYTES {
            return count_by_scan(vocabulary, piece);
        }
        self.count_by_heap(vocabulary, piece)
    }

    /// The merge of `piece` (of two bytes or more) with the lowest pair from a heap.
    fn count_by_heap(&mut self, vocabulary: &Vocabulary, piece: &[u8]) -> usize {
        let len = piece.len();
        let rank = |from: usize, to: usize| vocabulary.rank(&piece[from..to]).unwrap_or(NONE);
        self.heap.clear();
        self.next.clear();
        self.next.extend(1..=len);
        self.prev.clear();
        self.prev.extend((0..len).map(|at| at.wrapping_sub(1)));
        self.pair.clear();
        self.pair.extend((0..len).map(|at| if at + 2 <= len { rank(at, at + 2) } else { NONE }));
        let pairs = self.pair.iter().enumerate().filter(|&(_, &rank)| rank != NONE);
        self.heap.extend(pairs.map(|(at, &rank)| Reverse((rank, at))));
        let mut parts = len;
        while let Some(Reverse((pair_rank, left))) = self.heap.pop() {
            if self.pair[left] != pair_rank {
                continue;
            }
            // Join `left` and the part after it, `right`; `after` starts the part after both.
            let right = self.next[left];
            let after = self.next[right];
            self.next[left] = after;
            self.pair[right] = NONE;
            if after < len {
                self.prev[after] = left;
            }
            parts -= 1;
            self.pair[left] = if after < len { rank(left, self.next[after]) } else { NONE };
            self.push(left);
            if left > 0 {
                let before = self.prev[left];
                self.pair[before] = rank(before, after);
                self.push(before);
            }
        }
        parts
    }

    fn push(&mut self, at: usize) {
        let rank = self.pair[at];
        if rank != NONE {
            self.heap.push(Reverse((rank, at)));
        }
    }
}

/// The merge of `piece` (of 2 to [`SCAN_MAX_BYTES`] bytes) with the lowest pair found by a
/// scan, the leftmost of equals.
fn count_by_scan(vocabulary: &Vocabulary, piece: &[u8]) -> usize {
    let rank = |from: usize, to: usize| vocabulary.rank(&piece[from..to]).unwrap_or(NONE);
    let mut parts = piece.len();
    // `starts[part]` is where a part starts (`starts[parts]` is the end); `pairs[part]`, the
    // rank of that part joined with the next.
    let mut starts = [0; SCAN_MAX_BYTES + 1];
    let mut pairs = [NONE; SCAN_MAX_BYTES];
    for (at, start) in starts.iter_mut().enumerate().take(parts + 1) {
        *start = at;
    }
    for (at, pair) in pairs.iter_mut().enumerate().take(parts - 1) {
        *pair = rank(at, at + 2);
    }
    loop {
        let (mut lowest, mut at) = (NONE, 0);
        for (part, &pair) in pairs[..parts - 1].iter().enumerate() {
            if pair < lowest {
                (lowest, at) = (pair, part);
            }
        }
        if lowest == NONE {
            return parts;
        }
        // Join parts `at` and `at + 1`: the start of the second and its pair go.
        starts.copy_within(at + 2..=parts, at + 1);
        pairs.copy_within(at + 2..parts, at + 1);
        parts -= 1;
        pairs[at] = if at + 1 < parts { rank(starts[at], starts[at + 2]) } else { NONE };
        if at > 0 {
            pairs[at - 1] = rank(starts[at - 1], starts[at + 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::vocabulary::{CL100K, O200K};
    use super::*;

    #[test]
    fn counts_as_tiktoken_merges() {
        let mut merger = Merger::default();
        for (vocabulary, reference) in [(&O200K, bpe_openai::o200k_base()), (&CL100K, bpe_openai::cl100k_base())] {
            let reference = &reference.bpe;
            for piece in ["", "a", " the", "Hello", "antidisestablishmentarianism", " 🦀🦀🦀", "\u{301}\u{301}"] {
                assert_eq!(merger.count(vocabulary, piece.as_bytes()), reference.count(piece.as_bytes()), "{piece:?}");
            }
            // One piece of many repeated bytes: pairs of equal rank merge leftmost first.
            for len in [2, 3, 7, 16, 17, 64, 1000] {
                let piece = "a".repeat(len);
                assert_eq!(merger.count(vocabulary, piece.as_bytes()), reference.count(piece.as_bytes()), "{len} a's");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// The scan and the heap merge alike, on any bytes (text or not) of scannable length,
        /// and on runs of few characters, where pairs of equal rank (ties) are common.
        #[test]
        fn scan_and_heap_count_alike(piece in proptest::collection::vec(proptest::prelude::any::<u8>(), 2..=SCAN_MAX_BYTES),
                                     text in "\\PC{1,5}",
                                     run in "[ab]{2,16}|[ =*#-]{2,16}|[0-9]{2,16}|(ab|ba|aab| a|é){1,5}") {
            let mut merger = Merger::default();
            for vocabulary in [&O200K, &CL100K] {
                for bytes in [&piece[..], text.as_bytes(), run.as_bytes()] {
                    if bytes.len() >= 2 && bytes.len() <= SCAN_MAX_BYTES {
                        proptest::prop_assert_eq!(count_by_scan(vocabulary, bytes), merger.count_by_heap(vocabulary, bytes));
                    }
                }
            }
        }
    }
}
