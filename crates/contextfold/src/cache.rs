//! The summary cache: a second compaction of the same prefix costs no summarizer call.
//!
//! Keys are a stable hash of the head (canonical JSON), the previous summary, the
//! instructions and the summarizer id. The default is a small in-memory LRU; a store can
//! implement [`SummaryCache`] to keep summaries across processes.

use contextfold_core::hash::{canonical_json, StableHasher};
use contextfold_core::prompt::Instructions;
use contextfold_core::Message;
use std::collections::HashMap;
use std::sync::Mutex;

/// Somewhere to keep summaries by key.
pub trait SummaryCache: Send + Sync {
    /// The summary stored under `key`.
    fn get(&self, key: &str) -> Option<String>;
    /// Stores `summary` under `key`.
    fn put(&self, key: &str, summary: &str);
}

/// The cache key of summarizing `head` on top of `previous` with `summarizer_id`, in at
/// most `summary_tokens` tokens.
pub fn cache_key(
    head: &[Message],
    previous: Option<&str>,
    instructions: &Instructions,
    summary_tokens: u64,
    summarizer_id: &str,
) -> String {
    let mut hasher = StableHasher::default();
    hasher.write(summarizer_id.as_bytes());
    hasher.write(&summary_tokens.to_le_bytes());
    hasher.write(previous.unwrap_or("").as_bytes());
    hasher.write(instructions.language.as_deref().unwrap_or("").as_bytes());
    hasher.write(instructions.focus.as_deref().unwrap_or("").as_bytes());
    for message in head {
        hasher.write(canonical_json(&message.to_value()).as_bytes());
    }
    format!("{summarizer_id}#{:016x}", hasher.finish())
}

/// An in-memory cache holding the most recently used summaries.
#[derive(Debug)]
pub struct LruCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

/// Summaries by key with the tick of their last use, and the clock.
#[derive(Debug, Default)]
struct Entries {
    summaries: HashMap<String, (String, u64)>,
    clock: u64,
}

impl LruCache {
    /// A cache of at most `capacity` summaries.
    pub fn new(capacity: usize) -> LruCache {
        LruCache { capacity: capacity.max(1), entries: Mutex::new(Entries::default()) }
    }
}

impl Default for LruCache {
    /// 64 summaries.
    fn default() -> Self {
        LruCache::new(64)
    }
}

impl SummaryCache for LruCache {
    fn get(&self, key: &str) -> Option<String> {
        let mut guard = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Entries { summaries, clock } = &mut *guard;
        *clock += 1;
        let entry = summaries.get_mut(key)?;
        entry.1 = *clock;
        Some(entry.0.clone())
    }

    fn put(&self, key: &str, summary: &str) {
        let mut guard = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Entries { summaries, clock } = &mut *guard;
        *clock += 1;
        if summaries.len() >= self.capacity && !summaries.contains_key(key) {
            if let Some(oldest) = summaries.iter().min_by_key(|(_, (_, used))| *used).map(|(key, _)| key.clone()) {
                summaries.remove(&oldest);
            }
        }
        summaries.insert(key.to_string(), (summary.to_string(), *clock));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextfold_core::Role;

    #[test]
    fn evicts_the_least_recently_used() {
        let cache = LruCache::new(2);
        cache.put("a", "1");
        cache.put("b", "2");
        assert_eq!(cache.get("a").as_deref(), Some("1"));
        cache.put("c", "3");
        assert_eq!(cache.get("b"), None);
        assert_eq!(cache.get("a").as_deref(), Some("1"));
        assert_eq!(cache.get("c").as_deref(), Some("3"));
    }

    #[test]
    fn keys_depend_on_everything_that_shapes_the_summary() {
        let head = [Message::text(Role::User, "hi")];
        let base = cache_key(&head, None, &Instructions::default(), 100, "x");
        assert_eq!(base, cache_key(&head, None, &Instructions::default(), 100, "x"));
        assert_ne!(base, cache_key(&head, Some("p"), &Instructions::default(), 100, "x"));
        assert_ne!(base, cache_key(&head, None, &Instructions::default(), 100, "y"));
        assert_ne!(base, cache_key(&head, None, &Instructions::default(), 200, "x"));
        assert_ne!(base, cache_key(&[Message::text(Role::User, "ho")], None, &Instructions::default(), 100, "x"));
    }
}
