//! The list each conversation sent last, as offsets and hashes, so that the split of its
//! next request skips what repeats it byte for byte ([`crate::split`]).
//!
//! Design choice: a list is found by a hash of its first entry's text, the first thing the
//! split reads of it. Which conversation a request belongs to is not known yet then: that
//! needs fields a client may write after the list. Another conversation's list that starts
//! with the same entry costs nothing but speed, since what is skipped is only what hashes as
//! a list that was read and checked.
//!
//! The list's bytes are not kept: a client's history can be hundreds of megabytes, sent again
//! on every call. What is kept is each entry's span and key, and the hash of each stretch of
//! about [`STRETCH`] bytes between entry starts. The next list's bytes are hashed over the
//! same stretches, one pass at memory speed, and a stretch that differs is narrowed down to
//! its entries by their keys. The hashes are 64-bit XXH3 ([`contextfold_core::hash`]), the
//! same trust the parse of each conversation's messages already puts in its entries' keys.

use crate::conversations::Conversations;
use contextfold_core::hash::{hash_bytes, StableHasher};
use std::sync::Arc;

/// What tells one entry's text from another's: its hash and length.
pub type EntryKey = (u64, usize);

/// The key of an entry's text.
pub fn entry_key(text: &str) -> EntryKey {
    bytes_key(text.as_bytes())
}

fn bytes_key(bytes: &[u8]) -> EntryKey {
    (StableHasher::default().write(bytes).finish(), bytes.len())
}

/// About how many bytes a stretch holds: large enough that hashing runs at memory speed,
/// small enough that narrowing a stretch that differs down to its entries costs little.
#[cfg(not(test))]
const STRETCH: usize = 64 * 1024;
/// Short in unit tests, whose lists are short, so that they span several stretches.
#[cfg(test)]
const STRETCH: usize = 24;

/// An entry of a known list: where it lies, from the list's `[`, and its text's hash (its
/// key's length is its span's). Sixteen bytes, kept for every message of every conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownEntry {
    start: u32,
    end: u32,
    hash: u64,
}

impl KnownEntry {
    /// The entry at `span` whose text has `key`; `None` past 4 GiB from the list's start.
    pub fn new(span: (usize, usize), key: EntryKey) -> Option<KnownEntry> {
        debug_assert_eq!(span.1 - span.0, key.1, "a key's length is its text's");
        Some(KnownEntry { start: u32::try_from(span.0).ok()?, end: u32::try_from(span.1).ok()?, hash: key.0 })
    }

    /// Its start and end, from the list's `[`.
    pub fn span(&self) -> (usize, usize) {
        (self.start as usize, self.end as usize)
    }

    /// Its text's key.
    pub fn key(&self) -> EntryKey {
        (self.hash, self.end.saturating_sub(self.start) as usize)
    }
}

/// The bytes of a known list from where the stretch before ends (or the list's `[`) to where
/// entry `next` starts, by their hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stretch {
    next: usize,
    hash: u64,
}

/// A list read and checked before: its entries and the hashes of its stretches.
#[derive(Debug, PartialEq, Eq)]
pub struct KnownList {
    entries: Vec<KnownEntry>,
    stretches: Vec<Stretch>,
}

/// How much of a list is a known list's: its first `entries` entries (each followed by the
/// separator the known one had), the first `stretches` stretches of the known list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shared {
    /// How many first entries are the known list's.
    pub entries: usize,
    /// How many of its stretches the list repeats whole.
    pub stretches: usize,
    /// The known list.
    pub list: Arc<KnownList>,
}

impl KnownList {
    /// The list `list` (its bytes from its `[`), with `entries`; `shared` says how much of it
    /// repeats a known list, whose stretches are taken rather than hashed again.
    pub fn new(list: &[u8], entries: Vec<KnownEntry>, shared: Option<&Shared>) -> KnownList {
        let mut stretches = shared.map_or(Vec::new(), |shared| shared.list.stretches[..shared.stretches].to_vec());
        let end = |stretches: &[Stretch]| stretches.last().map_or(0, |last| entry_start(&entries, last.next));
        // A short last stretch (where a list ended) is hashed again with what follows it.
        if let Some(last) = stretches.pop() {
            if entry_start(&entries, last.next) - end(&stretches) >= STRETCH {
                stretches.push(last);
            }
        }
        let (mut next, mut from) = (stretches.last().map_or(0, |last| last.next), end(&stretches));
        while next + 1 < entries.len() {
            next += 1;
            let to = entries[next].span().0;
            if to - from >= STRETCH || next + 1 == entries.len() {
                stretches.push(Stretch { next, hash: hash_bytes(list.get(from..to).unwrap_or_default()) });
                from = to;
            }
        }
        KnownList { entries, stretches }
    }

    /// Its entries, in order.
    pub fn entries(&self) -> &[KnownEntry] {
        &self.entries
    }

    /// How many of `list`'s first entries (its bytes from its `[`) are this list's: those
    /// that end, with their separator, where the next of this list starts, every byte before
    /// that as it was. The last entry is never among them: the list may have ended after it.
    pub fn shared(self: &Arc<KnownList>, list: &[u8]) -> Shared {
        let mut shared = Shared { entries: 0, stretches: 0, list: self.clone() };
        let mut from = 0;
        for stretch in &self.stretches {
            let to = self.entries[stretch.next].span().0;
            // As for an entry, the next one must start where it did.
            let starts = list.get(to).is_some_and(opens_value);
            if starts && list.get(from..to).is_some_and(|bytes| hash_bytes(bytes) == stretch.hash) {
                (shared.entries, shared.stretches, from) = (stretch.next, shared.stretches + 1, to);
                continue;
            }
            // The stretch differs: its entries are taken while each is as it was.
            while shared.entries < stretch.next && self.entry_repeats(list, shared.entries) {
                shared.entries += 1;
            }
            break;
        }
        shared
    }

    /// Whether entry `index` of `list` and the separator after it are as they were (and, for
    /// the first, the list's opening), the bytes before them being as they were.
    fn entry_repeats(&self, list: &[u8], index: usize) -> bool {
        let entry = self.entries[index];
        let (start, end) = entry.span();
        let opened = index > 0 || list.get(..start).is_some_and(|gap| is_gap(gap, b'['));
        let next = entry_start(&self.entries, index + 1);
        // The separator ends where the next entry starts, as a scan would find it.
        let after = list.get(end..next).filter(|_| list.get(next).is_some_and(opens_value));
        let text = list.get(start..end);
        opened && after.is_some_and(|gap| is_gap(gap, b',')) && text.is_some_and(|text| bytes_key(text) == entry.key())
    }

    /// The bytes it holds.
    pub fn held_bytes(&self) -> u64 {
        (self.entries.len() * std::mem::size_of::<KnownEntry>() + self.stretches.len() * std::mem::size_of::<Stretch>())
            as u64
    }
}

/// Where entry `index` starts (0 for none).
fn entry_start(entries: &[KnownEntry], index: usize) -> usize {
    entries.get(index).map_or(0, |entry| entry.span().0)
}

/// Whether `gap` is JSON whitespace around exactly one `mark` (`[` opening a list, `,`
/// between its entries).
fn is_gap(gap: &[u8], mark: u8) -> bool {
    let at = gap.iter().position(|byte| !is_space(byte));
    at.is_some_and(|at| gap[at] == mark && gap[at + 1..].iter().all(is_space))
}

/// Whether a JSON value can start with `byte`.
fn opens_value(byte: &u8) -> bool {
    matches!(byte, b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
}

fn is_space(byte: &u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
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

    /// The bytes the lists hold, less those being replaced now.
    pub fn bytes_held(&self) -> u64 {
        self.lists.sum(|list| list.held_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of `texts` with `gaps[i]` before entry `i` (after the `[` for the first).
    fn list(texts: &[&str], gaps: &[&str]) -> (String, Vec<KnownEntry>) {
        let mut out = String::from("[");
        let mut entries = Vec::new();
        for (index, text) in texts.iter().enumerate() {
            out.push_str(gaps.get(index).copied().unwrap_or(if index == 0 { "" } else { "," }));
            entries.push(KnownEntry::new((out.len(), out.len() + text.len()), entry_key(text)).unwrap());
            out.push_str(text);
        }
        out.push(']');
        (out, entries)
    }

    fn texts(count: usize) -> Vec<String> {
        (0..count).map(|index| format!("{{\"n\":{index},\"pad\":\"{}\"}}", "x".repeat(index % 7))).collect()
    }

    fn known(texts: &[&str], gaps: &[&str]) -> Arc<KnownList> {
        let (bytes, entries) = list(texts, gaps);
        Arc::new(KnownList::new(bytes.as_bytes(), entries, None))
    }

    #[test]
    fn an_entry_takes_sixteen_bytes_and_one_past_four_gib_is_not_kept() {
        assert_eq!(std::mem::size_of::<KnownEntry>(), 16);
        let entry = KnownEntry::new((3, 10), (42, 7)).unwrap();
        assert_eq!((entry.span(), entry.key()), ((3, 10), (42, 7)));
        let far = u32::MAX as usize + 1;
        assert_eq!(KnownEntry::new((far, far + 2), (1, 2)), None);
    }

    #[test]
    fn a_grown_list_shares_every_entry_but_the_last_and_its_stretches() {
        let all = texts(12);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let before = known(&all[..8], &[]);
        assert!(before.stretches.len() > 2, "{:?}", before.stretches);
        let (next, entries) = list(&all, &[]);
        let shared = before.shared(next.as_bytes());
        assert_eq!((shared.entries, shared.stretches), (7, before.stretches.len()));
        // The next list takes those stretches and hashes only what follows them.
        let after = Arc::new(KnownList::new(next.as_bytes(), entries, Some(&shared)));
        assert_eq!(after.entries, known(&all, &[]).entries);
        assert_eq!(after.stretches[..shared.stretches - 1], before.stretches[..shared.stretches - 1]);
        assert_eq!(after.shared(next.as_bytes()).entries, 11);
    }

    #[test]
    fn a_changed_separator_or_entry_ends_what_is_shared() {
        let all = texts(10);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let before = known(&all, &[]);
        let shared = |gaps: &[&str], texts: &[&str]| before.shared(list(texts, gaps).0.as_bytes()).entries;
        assert_eq!(shared(&[], &all), 9);
        assert_eq!(shared(&["", ",", ", ", " ,\n"], &all), 1, "spacing is a change of bytes: entry 2 on is scanned");
        assert_eq!(shared(&[" \n"], &all), 0);
        for gap in [":", ",,", "", " ", "]", "x"] {
            assert_eq!(shared(&["", ",", ",", gap], &all), 2, "{gap:?}");
        }
        let mut edited = all.clone();
        edited[5] = "{\"n\":5,\"pad\":\"y\"}";
        assert_eq!(shared(&[], &edited), 5);
        assert_eq!(shared(&[], &all[..4]), 3, "a shorter list");
        assert_eq!(shared(&[], &all[..1]), 0);
    }

    #[test]
    fn gaps() {
        assert!(is_gap(b",", b','));
        assert!(is_gap(b" \n,\t ", b','));
        assert!(is_gap(b"[ ", b'['));
        for gap in [&b""[..], b" ", b",,", b", ,", b"x", b"[", b", x"] {
            assert!(!is_gap(gap, b','), "{gap:?}");
        }
    }
}
