//! Conversation state in the PostgreSQL store's `states` table, and the advisory lock that
//! serialises one conversation's writers across every process that shares the database.
//!
//! The lock is a session-level `pg_advisory_lock` on a connection of its own pool, held for
//! as long as the [`StateLock`] lives; dropping it unlocks on the store's runtime and only
//! then gives the connection back, and a connection whose unlock fails is closed instead
//! (PostgreSQL frees the locks of a closed session), so no pooled connection ever holds one.
//! A process that dies frees its locks with its connections.

use super::{Put, StateLock, StateStore, StoredState};
use crate::store::postgres::Failure;
use crate::store::{now_secs, PostgresStore, StoreError};
use deadpool_postgres::{Client, Object};

/// The advisory lock key of a state key (one 64-bit lock space; the migration lock's key is
/// the only other one taken).
fn lock_key(key: &str) -> i64 {
    let hash = contextfold_core::hash::StableHasher::default().write(b"state-lock").write(key.as_bytes()).finish();
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// A held advisory lock: unlocked, and its connection given back, when dropped.
struct Held {
    client: Option<Client>,
    key: i64,
    runtime: tokio::runtime::Handle,
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else { return };
        let key = self.key;
        self.runtime.spawn(async move {
            let unlocked = client.query_one("SELECT pg_advisory_unlock($1)", &[&key]).await;
            if !matches!(unlocked.map(|row| row.get::<_, bool>(0)), Ok(true)) {
                // Closing the session frees whatever it holds.
                drop(Object::take(client));
            }
        });
    }
}

impl StateStore for PostgresStore {
    fn state_version(&self, key: &str) -> Result<u64, StoreError> {
        self.read(async |client| {
            let row = client.query_opt("SELECT version FROM contextfold.states WHERE key = $1", &[&key]).await?;
            Ok(row.map_or(0, |row| row.get::<_, i64>(0) as u64))
        })
    }

    fn state(&self, key: &str) -> Result<Option<StoredState>, StoreError> {
        self.read(async |client| {
            let row = client.query_opt("SELECT version, state FROM contextfold.states WHERE key = $1", &[&key]).await?;
            Ok(row.map(|row| StoredState { version: row.get::<_, i64>(0) as u64, bytes: row.get(1) }))
        })
    }

    fn put_state(&self, key: &str, expected: u64, bytes: &[u8]) -> Result<Put, StoreError> {
        let (expected, next) = (expected as i64, expected as i64 + 1);
        let now = now_secs() as i64;
        self.write(async |transaction| {
            // The row's lock makes the check and the write one step for concurrent writers.
            let written = if expected == 0 {
                transaction
                    .execute(
                        "INSERT INTO contextfold.states (key, version, state, updated) VALUES ($1, 1, $2, $3) \
                         ON CONFLICT (key) DO NOTHING",
                        &[&key, &bytes, &now],
                    )
                    .await?
            } else {
                transaction
                    .execute(
                        "UPDATE contextfold.states SET version = $3, state = $4, updated = $5 \
                         WHERE key = $1 AND version = $2",
                        &[&key, &expected, &next, &bytes, &now],
                    )
                    .await?
            };
            if written == 1 {
                return Ok(Put::Written(next as u64));
            }
            let row = transaction.query_opt("SELECT version FROM contextfold.states WHERE key = $1", &[&key]).await?;
            Ok(Put::Moved(row.map_or(0, |row| row.get::<_, i64>(0) as u64)))
        })
    }

    fn delete_state(&self, key: &str) -> Result<bool, StoreError> {
        self.write(async |transaction| {
            Ok(transaction.execute("DELETE FROM contextfold.states WHERE key = $1", &[&key]).await? > 0)
        })
    }

    fn lock_state(&self, key: &str) -> Result<StateLock, StoreError> {
        let key = lock_key(key);
        let client = self.driver.run(async {
            let client = self.locks.get().await.map_err(|err| self.pool_error(err))?;
            match client.execute("SELECT pg_advisory_lock($1)", &[&key]).await {
                Ok(_) => Ok(client),
                Err(err) => Err(self.failure(Failure::Db(err))),
            }
        })?;
        Ok(StateLock::held(Held { client: Some(client), key, runtime: self.driver.handle().clone() }))
    }
}
