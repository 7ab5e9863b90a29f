//! The store's schema: its migrations, the check that a file is a contextfold store before
//! anything in it changes, and bringing an older one up to date.

use super::file::{begin_immediate, retry_busy, sql_error};
use crate::store::StoreError;
use rusqlite::Connection;
use std::path::Path;

/// The migrations, in order; migration `i` brings the schema to version `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created INTEGER NOT NULL
);
CREATE TABLE messages (
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    shape TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE TABLE payloads (
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    ref TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT,
    tokens INTEGER NOT NULL,
    message INTEGER NOT NULL,
    block INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (session, ref)
);
CREATE INDEX payloads_ref ON payloads(ref);
CREATE TABLE summaries (
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    head_hash TEXT NOT NULL,
    summarizer TEXT NOT NULL,
    text TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (session, head_hash, summarizer)
);
CREATE TABLE reports (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    json TEXT NOT NULL,
    created INTEGER NOT NULL
);
CREATE VIRTUAL TABLE search USING fts5(session UNINDEXED, kind UNINDEXED, key UNINDEXED, body);
"#,
    // 2: the session's metadata (a JSON object), e.g. what rebuilds its conversation.
    "ALTER TABLE sessions ADD COLUMN meta TEXT;",
    // 3: the session id is indexed, so a search within one session is an FTS5 column filter
    // instead of a look-up of every match's row in every session. Its weight in the rank is
    // 0, so hits rank by their text alone, as before.
    r#"
CREATE VIRTUAL TABLE search_v3 USING fts5(session, kind UNINDEXED, key UNINDEXED, body);
INSERT INTO search_v3 (rowid, session, kind, key, body) SELECT rowid, session, kind, key, body FROM search;
INSERT INTO search_v3 (search_v3, rank) VALUES ('rank', 'bm25(0.0, 0.0, 0.0, 1.0)');
DROP TABLE search;
ALTER TABLE search_v3 RENAME TO search;
"#,
    // 4: conversation state, one versioned value per key (see `store::state`).
    "CREATE TABLE IF NOT EXISTS states (key TEXT PRIMARY KEY, version INTEGER NOT NULL, state BLOB NOT NULL, updated INTEGER NOT NULL);",
    // 5: when a session was last written, so old ones can be pruned (`NULL`: at creation).
    "ALTER TABLE sessions ADD COLUMN updated INTEGER;",
    // 6: the model calls of a session, one JSON object each (see `SessionStore::put_call`).
    r#"
CREATE TABLE calls (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    json TEXT NOT NULL,
    created INTEGER NOT NULL
);
CREATE INDEX calls_session ON calls(session, id);
"#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Whether opening may create the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Create {
    /// Opening may create the store.
    Yes,
    /// The store must exist.
    No,
}

/// Checks, before anything in it changes, that the file is a contextfold store this build
/// can read (an empty file only when `create` allows making it one); returns its schema
/// version.
pub(super) fn check_ours(connection: &Connection, path: &Path, create: Create) -> Result<i64, StoreError> {
    let sql = |source| sql_error(path, source);
    let path = path.to_path_buf();
    let version: i64 = retry_busy(|| connection.query_row("PRAGMA user_version", [], |row| row.get(0))).map_err(sql)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { path, found: version, known: SCHEMA_VERSION });
    }
    let tables: i64 = connection.query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| row.get(0)).map_err(sql)?;
    let ours: bool = connection
        .query_row("SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'", [], |row| {
            row.get(0)
        })
        .map_err(sql)?;
    match version {
        0 if tables > 0 => Err(StoreError::Foreign { path }),
        0 if create == Create::No => Err(StoreError::NotAStore { path }),
        1.. if !ours => Err(StoreError::Foreign { path }),
        _ => Ok(version),
    }
}

/// Applies the migrations the file has not seen, each in its own transaction.
pub(super) fn migrate(connection: &Connection, path: &Path) -> Result<(), StoreError> {
    let sql = |source| sql_error(path, source);
    // A store that is up to date needs no write lock: readers must not wait for writers.
    let version: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(sql)?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    loop {
        let transaction = begin_immediate(connection).map_err(sql)?;
        // Read again under the write lock: another process may have migrated meanwhile.
        let version: i64 = transaction.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(sql)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema { path: path.to_path_buf(), found: version, known: SCHEMA_VERSION });
        }
        let Some(migration) = usize::try_from(version).ok().and_then(|version| MIGRATIONS.get(version)) else {
            drop(transaction);
            // The schema goes into the file itself, not only the WAL: a store whose WAL is
            // later lost (a shared-memory file truncated under SQLite) is still a store.
            // Another connection reading may keep the checkpoint partial; that is fine.
            let _ = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            return Ok(());
        };
        transaction.execute_batch(migration).map_err(sql)?;
        transaction.pragma_update(None, "user_version", version + 1).map_err(sql)?;
        transaction.commit().map_err(sql)?;
    }
}
