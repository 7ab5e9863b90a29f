//! A BPE vocabulary read in place from tables the build script laid out: token bytes to
//! rank, with no parsing and no allocation, so that the first count of a process costs what
//! every later one does.
//!
//! Design choice: the tables are plain little-endian `u32` words inside `include_bytes!`
//! data (whose alignment is one byte), read with `u32::from_le_bytes`: no `unsafe`, no
//! dependence on the target's byte order, and a lookup that reads two or three cache lines
//! (a slot, the token's offsets, its bytes).

use xxhash_rust::xxh3::xxh3_64;

/// Marks a free slot of the hash table.
const EMPTY: u32 = u32::MAX;

/// A vocabulary: token bytes in rank order and a hash table from bytes to rank.
pub(super) struct Vocabulary {
    /// `offsets[rank]..offsets[rank + 1]` is where token `rank` lies in `bytes` (`u32`s).
    offsets: &'static [u8],
    /// Every token's bytes, in rank order.
    bytes: &'static [u8],
    /// Open addressing, linear probing: each slot is a rank (or [`EMPTY`]) and the high half
    /// of its bytes' XXH3 hash; the low bits of the hash pick the first slot to look at.
    slots: &'static [u8],
}

/// OpenAI's `o200k_base` (GPT-4o, o-series and later).
pub(super) static O200K: Vocabulary = Vocabulary::new(
    include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.offsets")),
    include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.bytes")),
    include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.slots")),
);

/// OpenAI's `cl100k_base` (GPT-4, GPT-3.5).
pub(super) static CL100K: Vocabulary = Vocabulary::new(
    include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.offsets")),
    include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.bytes")),
    include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.slots")),
);

impl Vocabulary {
    /// Panics (at compile time, for a `static`) on tables that are not laid out as the build
    /// script writes them.
    const fn new(offsets: &'static [u8], bytes: &'static [u8], slots: &'static [u8]) -> Self {
        assert!(
            offsets.len().is_multiple_of(4) && offsets.len() >= 8,
            "offsets are u32 words, one per token and one more"
        );
        assert!(slots.len().is_multiple_of(8) && (slots.len() / 8).is_power_of_two(), "slots are a power of two");
        assert!(slots.len() / 8 > offsets.len() / 4, "the table has free slots, so every probe ends");
        Vocabulary { offsets, bytes, slots }
    }

    /// The number of tokens.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.offsets.len() / 4 - 1
    }

    /// The bytes of token `rank` (empty for a rank out of range).
    pub(super) fn token(&self, rank: u32) -> &'static [u8] {
        let rank = rank as usize;
        let (Some(start), Some(end)) = (word(self.offsets, rank), word(self.offsets, rank + 1)) else {
            return &[];
        };
        self.bytes.get(start as usize..end as usize).unwrap_or(&[])
    }

    /// The rank of the token whose bytes are `bytes`, if there is one.
    #[inline]
    pub(super) fn rank(&self, bytes: &[u8]) -> Option<u32> {
        let hash = xxh3_64(bytes);
        let tag = (hash >> 32) as u32;
        let mask = self.slots.len() / 8 - 1;
        let mut slot = hash as usize & mask;
        loop {
            let rank = word(self.slots, 2 * slot)?;
            if rank == EMPTY {
                return None;
            }
            if word(self.slots, 2 * slot + 1) == Some(tag) && self.token(rank) == bytes {
                return Some(rank);
            }
            slot = (slot + 1) & mask;
        }
    }
}

/// The `index`-th little-endian `u32` of `words`.
#[inline]
fn word(words: &[u8], index: usize) -> Option<u32> {
    let bytes = words.get(4 * index..4 * index + 4)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_token_is_found_at_its_rank() {
        for (vocabulary, tokens) in [(&O200K, 199_998), (&CL100K, 100_256)] {
            assert_eq!(vocabulary.len(), tokens);
            for rank in 0..vocabulary.len() as u32 {
                assert_eq!(vocabulary.rank(vocabulary.token(rank)), Some(rank), "{:?}", vocabulary.token(rank));
            }
        }
    }

    #[test]
    fn ranks_are_bpe_openais_token_ids() {
        for (vocabulary, reference) in [(&O200K, bpe_openai::o200k_base()), (&CL100K, bpe_openai::cl100k_base())] {
            assert_eq!(reference.bpe.num_tokens(), vocabulary.len());
            for rank in (0..vocabulary.len() as u32).step_by(97) {
                assert_eq!(vocabulary.token(rank), reference.bpe.token_bytes(rank));
            }
        }
    }

    #[test]
    fn what_is_no_token_has_no_rank() {
        assert_eq!(O200K.rank(b""), None);
        assert_eq!(O200K.rank(b"xqzvkjwxqzvkjw"), None);
        assert_eq!(O200K.rank(&[0xff, 0xfe, 0xfd, 0xfc]), None);
        assert!(O200K.token(u32::MAX).is_empty());
        // All 256 single bytes are tokens: every piece can be encoded.
        assert!((0..=255u8).all(|byte| O200K.rank(&[byte]).is_some() && CL100K.rank(&[byte]).is_some()));
    }
}
