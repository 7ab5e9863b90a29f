//! The list each conversation sent last, kept whole, so that the split of its next request
//! skips what repeats it byte for byte ([`crate::split`]).
//!
//! Design choice: a list is found by a hash of its first entry's text, the first thing the
//! split reads of it. Which conversation a request belongs to is not known yet then: that
//! needs fields a client may write after the list. Another conversation's list that starts
//! with the same entry costs nothing but speed, since what is skipped is only what is byte
//! for byte the same as a list that was read and checked.

use crate::conversations::Conversations;
use bytes::Bytes;
use contextfold_core::hash::StableHasher;
use std::sync::Arc;

/// What tells one entry's text from another's: its hash and length.
pub type EntryKey = (u64, usize);

/// The key of an entry's text.
pub fn entry_key(text: &str) -> EntryKey {
    (StableHasher::default().write(text.as_bytes()).finish(), text.len())
}

/// An entry of a known list: where it lies, from the list's `[`, and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownEntry {
    /// Its start and end.
    pub span: (usize, usize),
    /// Its text's key.
    pub key: EntryKey,
}

/// A list read and checked before: the body it came in, where it starts, and its entries.
#[derive(Debug, PartialEq, Eq)]
pub struct KnownList {
    body: Bytes,
    start: usize,
    entries: Vec<KnownEntry>,
}

impl KnownList {
    /// The list of `body` that starts at `start`, with `entries`.
    pub fn new(body: Bytes, start: usize, entries: Vec<KnownEntry>) -> KnownList {
        KnownList { body, start, entries }
    }

    /// The body's bytes from the list's `[` on.
    pub fn bytes(&self) -> &[u8] {
        self.body.get(self.start..).unwrap_or_default()
    }

    /// Its entries, in order.
    pub fn entries(&self) -> &[KnownEntry] {
        &self.entries
    }
}

/// The last list of each conversation, as many as conversations are held.
pub struct KnownLists {
    lists: Conversations<Arc<KnownList>>,
}

impl KnownLists {
    /// Holds at most `capacity` lists, the least recently used dropped first.
    pub fn new(capacity: usize) -> KnownLists {
        KnownLists { lists: Conversations::new(capacity) }
    }

    /// The list last kept whose first entry is `first`, unless another request is keeping one.
    pub fn find(&self, first: &str) -> Option<Arc<KnownList>> {
        self.lists.slot(key(first)).try_lock().ok()?.clone()
    }

    /// The bytes of the bodies held (each conversation's last), less those being replaced now.
    pub fn bytes_held(&self) -> u64 {
        self.lists.sum(|list| list.body.len() as u64)
    }

    /// Keeps `list`, whose first entry is `first`, for the next request that starts so.
    pub fn keep(&self, first: &str, list: KnownList) {
        if let Ok(mut held) = self.lists.slot(key(first)).try_lock() {
            *held = Some(Arc::new(list));
        }
    }
}

fn key(first: &str) -> u64 {
    entry_key(first).0
}
