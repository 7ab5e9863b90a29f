//! Conversation state in memory, beside the [`MemoryStore`]'s sessions.

use super::{Put, StateLock, StateStore, StoredState};
use crate::store::{MemoryStore, StoreError};
use std::collections::HashMap;
use std::sync::MutexGuard;

impl MemoryStore {
    fn states(&self) -> MutexGuard<'_, HashMap<String, StoredState>> {
        self.states.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl StateStore for MemoryStore {
    fn state_version(&self, key: &str) -> Result<u64, StoreError> {
        Ok(self.states().get(key).map_or(0, |state| state.version))
    }

    fn state(&self, key: &str) -> Result<Option<StoredState>, StoreError> {
        Ok(self.states().get(key).cloned())
    }

    fn put_state(&self, key: &str, expected: u64, bytes: &[u8]) -> Result<Put, StoreError> {
        let mut states = self.states();
        let current = states.get(key).map_or(0, |state| state.version);
        if current != expected {
            return Ok(Put::Moved(current));
        }
        states.insert(key.to_string(), StoredState { version: current + 1, bytes: bytes.to_vec() });
        Ok(Put::Written(current + 1))
    }

    fn delete_state(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.states().remove(key).is_some())
    }

    fn lock_state(&self, _key: &str) -> Result<StateLock, StoreError> {
        // One process: its callers serialise themselves, and the swap catches the rest.
        Ok(StateLock::none())
    }
}
