//! The conversations the proxy holds state for: a bounded map, least recently used first out.
//!
//! Each conversation's state sits behind its own async lock, so the requests of one
//! conversation are prepared one at a time, in the order they arrive (the lock is fair),
//! while different conversations run in parallel. The map's own lock is held only to find
//! or insert a slot. A slot dropped from the map while a request holds it stays valid for
//! that request; the next request of that conversation starts a fresh state.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::Mutex as AsyncMutex;

/// One conversation's state, created by its first request.
pub type Slot<T> = Arc<AsyncMutex<Option<T>>>;

struct Entry<T> {
    slot: Slot<T>,
    used: u64,
}

struct Lru<T> {
    entries: HashMap<u64, Entry<T>>,
    by_use: BTreeMap<u64, u64>,
    clock: u64,
}

/// Conversation states by key, at most `capacity` of them.
pub struct Conversations<T> {
    capacity: usize,
    inner: Mutex<Lru<T>>,
}

impl<T> Conversations<T> {
    /// Room for `capacity` conversations (at least one).
    pub fn new(capacity: usize) -> Conversations<T> {
        Conversations {
            capacity: capacity.max(1),
            inner: Mutex::new(Lru { entries: HashMap::new(), by_use: BTreeMap::new(), clock: 0 }),
        }
    }

    /// The slot of conversation `key`, made most recently used; a new, empty one when the
    /// conversation is not held (dropping the least recently used when full).
    pub fn slot(&self, key: u64) -> Slot<T> {
        let mut lru = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        lru.clock += 1;
        let now = lru.clock;
        if let Some(entry) = lru.entries.get_mut(&key) {
            let before = std::mem::replace(&mut entry.used, now);
            let slot = entry.slot.clone();
            lru.by_use.remove(&before);
            lru.by_use.insert(now, key);
            return slot;
        }
        while lru.entries.len() >= self.capacity {
            let Some((_, oldest)) = lru.by_use.pop_first() else { break };
            lru.entries.remove(&oldest);
        }
        let slot: Slot<T> = Arc::new(AsyncMutex::new(None));
        lru.entries.insert(key, Entry { slot: slot.clone(), used: now });
        lru.by_use.insert(now, key);
        slot
    }

    /// How many conversations are held.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entries.len()
    }

    /// The sum of `measure` over the states held, skipping those a request holds now.
    pub fn sum(&self, measure: impl Fn(&T) -> u64) -> u64 {
        let slots: Vec<Slot<T>> = {
            let lru = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            lru.entries.values().map(|entry| entry.slot.clone()).collect()
        };
        slots.iter().filter_map(|slot| slot.try_lock().ok()?.as_ref().map(&measure)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_least_recently_used_goes_first() {
        let conversations: Conversations<u32> = Conversations::new(2);
        *conversations.slot(1).lock().await = Some(1);
        *conversations.slot(2).lock().await = Some(2);
        // 1 is used again, so 2 is the one dropped for 3.
        assert_eq!(*conversations.slot(1).lock().await, Some(1));
        *conversations.slot(3).lock().await = Some(3);
        assert_eq!(conversations.len(), 2);
        assert_eq!(*conversations.slot(1).lock().await, Some(1));
        assert_eq!(*conversations.slot(3).lock().await, Some(3));
        assert_eq!(*conversations.slot(2).lock().await, None, "2 was dropped and starts fresh");
        assert_eq!(conversations.len(), 2);
    }

    #[tokio::test]
    async fn a_held_slot_outlives_its_eviction() {
        let conversations: Conversations<u32> = Conversations::new(1);
        let held = conversations.slot(1);
        let mut guard = held.lock().await;
        *guard = Some(7);
        conversations.slot(2);
        assert_eq!(*guard, Some(7));
        drop(guard);
        assert_eq!(*conversations.slot(1).lock().await, None);
    }
}
