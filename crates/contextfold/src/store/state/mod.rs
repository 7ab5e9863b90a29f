//! Conversation state: one versioned value per key (a proxy's conversation key, say), written
//! by compare-and-swap, so that several processes sharing a store never lose an update.
//!
//! A value's version counts its writes: 0 is no state, the first write makes it 1.
//! [`StateStore::put_state`] writes only over the version the caller read; when another
//! writer moved it first, the caller learns the version it found and reads again.
//! [`StateStore::state_version`] is the cheap check a cache makes before trusting what it
//! holds. [`StateStore::lock_state`] serialises the writers of one key across processes where
//! the store can (PostgreSQL's advisory locks); elsewhere it holds nothing and the
//! compare-and-swap alone keeps updates from being lost (a SQLite file's writers take turns
//! on its write lock).

mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

use super::{SessionStore, StoreError};

/// A key's value and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredState {
    /// How many times it was written.
    pub version: u64,
    /// The value, as its writer serialized it.
    pub bytes: Vec<u8>,
}

/// What a compare-and-swap write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Put {
    /// Written; the key is now at this version.
    Written(u64),
    /// Not written: another writer had moved the key to this version (0: it was deleted).
    Moved(u64),
}

/// Held while one key's state is read, changed and written back; dropping it lets the next
/// writer of that key in.
#[must_use = "the lock is released when dropped"]
pub struct StateLock {
    _held: Option<Box<dyn Send>>,
}

impl std::fmt::Debug for StateLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateLock").field("held", &self._held.is_some()).finish()
    }
}

impl StateLock {
    /// A lock that holds nothing: the store's compare-and-swap is its only guard.
    pub fn none() -> StateLock {
        StateLock { _held: None }
    }

    /// Whether it holds a lock (the store serialises this key's writers across processes).
    pub fn holds(&self) -> bool {
        self._held.is_some()
    }

    /// A lock released when `guard` is dropped.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn held(guard: impl Send + 'static) -> StateLock {
        StateLock { _held: Some(Box::new(guard)) }
    }
}

/// A place to keep versioned state by key. Synchronous, as [`SessionStore`] is.
pub trait StateStore: Send + Sync {
    /// The version of `key`'s state: 0 when there is none.
    fn state_version(&self, key: &str) -> Result<u64, StoreError>;

    /// `key`'s state, `None` when there is none.
    fn state(&self, key: &str) -> Result<Option<StoredState>, StoreError>;

    /// Writes `bytes` as `key`'s state if its version is still `expected` (0: there is none
    /// yet), making it `expected + 1`.
    fn put_state(&self, key: &str, expected: u64, bytes: &[u8]) -> Result<Put, StoreError>;

    /// Deletes `key`'s state; returns whether there was one.
    fn delete_state(&self, key: &str) -> Result<bool, StoreError>;

    /// Waits until no other holder of `key`'s lock (in this process or another) has it, and
    /// takes it. Stores that cannot lock across processes return [`StateLock::none`].
    fn lock_state(&self, key: &str) -> Result<StateLock, StoreError>;
}

/// A store of sessions and of state: what a proxy keeps.
pub trait ConversationStore: SessionStore + StateStore {}

impl<T: SessionStore + StateStore> ConversationStore for T {}
