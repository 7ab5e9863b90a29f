//! Conversation state in the SQLite store's `states` table. A write is one immediate
//! transaction, so writers in other processes take turns on the file's write lock and the
//! compare-and-swap sees every version they wrote.

use super::{Put, StateLock, StateStore, StoredState};
use crate::store::{now_secs, SqliteStore, StoreError};
use rusqlite::{params, OptionalExtension};

impl StateStore for SqliteStore {
    fn state_version(&self, key: &str) -> Result<u64, StoreError> {
        let connection = self.lock();
        let version: Option<i64> = connection
            .prepare_cached("SELECT version FROM states WHERE key = ?1")
            .and_then(|mut statement| statement.query_row([key], |row| row.get(0)).optional())
            .map_err(|err| self.sql(err))?;
        Ok(version.map_or(0, |version| version as u64))
    }

    fn state(&self, key: &str) -> Result<Option<StoredState>, StoreError> {
        let connection = self.lock();
        connection
            .prepare_cached("SELECT version, state FROM states WHERE key = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([key], |row| {
                        Ok(StoredState { version: row.get::<_, i64>(0)? as u64, bytes: row.get(1)? })
                    })
                    .optional()
            })
            .map_err(|err| self.sql(err))
    }

    fn put_state(&self, key: &str, expected: u64, bytes: &[u8]) -> Result<Put, StoreError> {
        self.write(|transaction| {
            let sql = |err| self.sql(err);
            let current: Option<i64> = transaction
                .prepare_cached("SELECT version FROM states WHERE key = ?1")
                .and_then(|mut statement| statement.query_row([key], |row| row.get(0)).optional())
                .map_err(sql)?;
            let current = current.map_or(0, |version| version as u64);
            if current != expected {
                return Ok(Put::Moved(current));
            }
            let next = expected + 1;
            transaction
                .prepare_cached(
                    "INSERT INTO states (key, version, state, updated) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (key) DO UPDATE SET version = excluded.version, state = excluded.state, \
                     updated = excluded.updated",
                )
                .and_then(|mut statement| statement.execute(params![key, next as i64, bytes, now_secs() as i64]))
                .map_err(sql)?;
            Ok(Put::Written(next))
        })
    }

    fn delete_state(&self, key: &str) -> Result<bool, StoreError> {
        self.write(|transaction| {
            let deleted =
                transaction.execute("DELETE FROM states WHERE key = ?1", [key]).map_err(|err| self.sql(err))?;
            Ok(deleted > 0)
        })
    }

    fn lock_state(&self, _key: &str) -> Result<StateLock, StoreError> {
        // Writers on one machine take turns on the file's lock; the swap does the rest.
        Ok(StateLock::none())
    }
}
