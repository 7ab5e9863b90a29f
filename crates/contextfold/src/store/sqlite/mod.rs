//! A session store in one SQLite file: WAL journal, a busy timeout for concurrent writers,
//! `PRAGMA user_version` migrations, and an FTS5 index over message and payload text whose
//! session column is indexed too, so a search within one session costs what its matches cost.
//!
//! Writers wait for each other twice over: SQLite's busy timeout, and a retry of the steps
//! that report "busy" without waiting on it (switching to WAL while another process opens
//! the file, a write lock taken while another process recovers the WAL).
//!
//! Readers change nothing: [`SqliteStore::open_read_only`] opens the file read-only, never
//! switches its journal or migrates it (an older schema is an error that says to upgrade),
//! and works on a read-only file system. A damaged file is reported as such
//! ([`StoreError::Corrupt`]), whatever SQLite or a column read tripped over.

mod file;
mod schema;
mod shm;
mod writes;

use super::{
    compaction_writes, decode_json, encode_json, hits, message_from_stored, new_session_id, now_secs, Appended, At,
    CompactionWrite, Hit, HitLocation, Payload, SessionId, SessionInfo, SessionStore, StoreError, Summary,
};
use crate::summarize::Usage;
use contextfold_core::Message;
use file::{begin_immediate, check_file, connect_read_only, create_private, retry_busy, sql_error, BUSY_TIMEOUT};
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction};
pub use schema::SCHEMA_VERSION;
use schema::{check_ours, migrate, Create};
use serde_json::Value;
pub use shm::note_grown_back;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use writes::touch;

/// A [`SessionStore`] in a SQLite file. Several processes may open the same file; writers
/// wait for each other up to the busy timeout (5 s).
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    connection: Mutex<Connection>,
    shm: shm::ShmGuard,
}

/// The connection closes after this runs, checkpointing the WAL into the file: a
/// shared-memory file truncated since its last use is grown back first, so that the close
/// leaves a store other processes can open (a truncated one fails to open read-only).
impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.shm.check();
    }
}

impl SqliteStore {
    /// Opens the store at `path`, creating it (and its directory) when missing, readable and
    /// writable by its owner only, and bringing its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        create_private(&path)?;
        SqliteStore::connect(path, Create::Yes)
    }

    /// Opens the store at `path` only if it exists and is a contextfold store, read-write and
    /// brought up to date: a writer must not leave a new file behind a mistyped path, nor turn
    /// an empty file into a store.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        check_file(&path)?;
        SqliteStore::connect(path, Create::No)
    }

    /// Opens an existing store for reading only: nothing in the file or beside it is changed
    /// (no journal switch, no migration), so it works on a read-only file system and beside
    /// a running writer. A store of an older schema is refused with
    /// [`StoreError::OlderSchema`]; [`SqliteStore::open_existing`] upgrades it. Writes
    /// through the returned store fail.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        check_file(&path)?;
        let connection = match connect_read_only(&path, false) {
            // Without write access to its directory, SQLite cannot make the shared-memory file
            // a WAL store needs; a read-only file system holds no writer, so read it as
            // immutable.
            Err(err) if matches!(err.sqlite_error_code(), Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly)) => {
                connect_read_only(&path, true)
            }
            other => other,
        }
        .map_err(|source| sql_error(&path, source))?;
        let version = check_ours(&connection, &path, Create::No)?;
        if version < SCHEMA_VERSION {
            return Err(StoreError::OlderSchema { path, found: version, known: SCHEMA_VERSION });
        }
        Ok(SqliteStore { shm: shm::ShmGuard::new(&path), path, connection: Mutex::new(connection) })
    }

    /// Connects, checks that the file is ours before changing anything in it, and migrates.
    fn connect(path: PathBuf, create: Create) -> Result<SqliteStore, StoreError> {
        let sql = |source| sql_error(&path, source);
        let mut flags =
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create == Create::Yes {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let connection = Connection::open_with_flags(&path, flags).map_err(sql)?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        check_ours(&connection, &path, create)?;
        retry_busy(|| connection.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))).map_err(sql)?;
        connection.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;").map_err(sql)?;
        migrate(&connection, &path)?;
        Ok(SqliteStore { shm: shm::ShmGuard::new(&path), path, connection: Mutex::new(connection) })
    }

    /// The file of the store.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(in crate::store) fn lock(&self) -> MutexGuard<'_, Connection> {
        let connection = self.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.shm.check();
        connection
    }

    pub(in crate::store) fn sql(&self, source: rusqlite::Error) -> StoreError {
        sql_error(&self.path, source)
    }

    /// Runs `work` in one immediate (write-locking) transaction, committed when it succeeds
    /// and no truncation of the shared-memory file landed in it (see the `shm` module).
    pub(in crate::store) fn write<T>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // The mutex keeps transactions on this connection from nesting; taking it checks the
        // shared-memory file.
        let connection = self.lock();
        let mark = self.shm.mark();
        let transaction = begin_immediate(&connection).map_err(|err| self.sql(err))?;
        let value = work(&transaction)?;
        if self.shm.truncated_since(mark) {
            // Dropped, so rolled back: its commit would write a header over a zeroed index.
            return Err(StoreError::Invalid(format!(
                "the shared-memory file of {} was truncated during a write, which was rolled back",
                self.path.display()
            )));
        }
        transaction.commit().map_err(|err| self.sql(err))?;
        if self.shm.truncated_since(mark) {
            self.shm.invalidate_index();
        }
        Ok(value)
    }
}

/// `text` as an FTS5 string (a phrase): quoted, so punctuation is not syntax.
pub(super) fn fts_string(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// `query` as an FTS5 query of the body: each word quoted, all required; within `session`
/// when given, as a column filter (the caller checks the exact id again: a phrase of
/// several tokens could match more).
fn fts_query(query: &str, session: Option<&str>) -> Option<String> {
    let words: Vec<String> = query.split_whitespace().map(fts_string).collect();
    if words.is_empty() {
        return None;
    }
    let body = format!("body : ({})", words.join(" "));
    Some(match session {
        Some(session) => format!("session : {} AND {body}", fts_string(session)),
        None => body,
    })
}

pub(super) fn to_usize(value: i64) -> usize {
    usize::try_from(value).unwrap_or(0)
}

impl SessionStore for SqliteStore {
    fn create_session(&self, name: &str) -> Result<SessionId, StoreError> {
        let id = new_session_id();
        self.write(|transaction| {
            transaction
                .execute(
                    "INSERT INTO sessions (id, name, created) VALUES (?1, ?2, ?3)",
                    params![id, name, now_secs() as i64],
                )
                .map_err(|err| self.sql(err))
        })?;
        Ok(id)
    }

    fn append_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError> {
        self.write(|transaction| self.append_in(transaction, session, messages, At::Aligned))
    }

    fn push_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError> {
        self.write(|transaction| self.append_in(transaction, session, messages, At::End))
    }

    fn log_messages(&self, session: &str, from: usize, messages: &[Message]) -> Result<Appended, StoreError> {
        self.write(|transaction| self.append_in(transaction, session, messages, At::Position(from)))
    }

    fn put_payload(&self, payload: &Payload) -> Result<bool, StoreError> {
        self.write(|transaction| self.put_payload_in(transaction, payload))
    }

    fn recall(&self, reference: &str) -> Result<Option<Value>, StoreError> {
        let json: Option<String> = self
            .lock()
            .query_row("SELECT payload FROM payloads WHERE ref = ?1 LIMIT 1", [reference], |row| row.get(0))
            .optional()
            .map_err(|err| self.sql(err))?;
        json.map(|json| decode_json(&json, &format!("payload {reference}"))).transpose()
    }

    fn put_summary(&self, session: &str, summary: &Summary) -> Result<(), StoreError> {
        self.write(|transaction| self.put_summary_in(transaction, session, summary))
    }

    fn summaries(&self, session: &str) -> Result<Vec<Summary>, StoreError> {
        let connection = self.lock();
        let sql = |err| self.sql(err);
        let mut statement = connection
            .prepare(
                "SELECT head_hash, summarizer, text, input_tokens, output_tokens FROM summaries \
                 WHERE session = ?1 ORDER BY created, rowid",
            )
            .map_err(sql)?;
        let rows = statement
            .query_map([session], |row| {
                Ok(Summary {
                    head_hash: row.get(0)?,
                    summarizer: row.get(1)?,
                    text: row.get(2)?,
                    usage: Usage {
                        input_tokens: row.get::<_, i64>(3)?.max(0) as u64,
                        output_tokens: row.get::<_, i64>(4)?.max(0) as u64,
                    },
                })
            })
            .map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)
    }

    fn put_report(&self, session: &str, report: &Value) -> Result<(), StoreError> {
        self.write(|transaction| self.put_report_in(transaction, session, report))
    }

    fn reports(&self, session: &str) -> Result<Vec<Value>, StoreError> {
        let connection = self.lock();
        let sql = |err| self.sql(err);
        let mut statement =
            connection.prepare("SELECT json FROM reports WHERE session = ?1 ORDER BY id").map_err(sql)?;
        let rows = statement.query_map([session], |row| row.get::<_, String>(0)).map_err(sql)?;
        rows.map(|json| {
            let json = json.map_err(sql)?;
            decode_json(&json, "report")
        })
        .collect()
    }

    fn put_call(&self, session: &str, call: &Value) -> Result<(), StoreError> {
        self.write(|transaction| {
            self.check_session(transaction, session)?;
            let sql = |err| self.sql(err);
            transaction
                .prepare_cached("INSERT INTO calls (session, json, created) VALUES (?1, ?2, ?3)")
                .and_then(|mut insert| insert.execute(params![session, encode_json(call), now_secs() as i64]))
                .map_err(sql)?;
            touch(transaction, session).map_err(sql)
        })
    }

    fn calls(&self, session: &str) -> Result<Vec<Value>, StoreError> {
        let connection = self.lock();
        let sql = |err| self.sql(err);
        let mut statement = connection.prepare("SELECT json FROM calls WHERE session = ?1 ORDER BY id").map_err(sql)?;
        let rows = statement.query_map([session], |row| row.get::<_, String>(0)).map_err(sql)?;
        rows.map(|json| decode_json(&json.map_err(sql)?, "call")).collect()
    }

    fn persist_compaction(
        &self,
        session: &str,
        messages: &[Message],
        payloads: &[Payload],
        summary: Option<&Summary>,
        report: &Value,
    ) -> Result<Appended, StoreError> {
        let writes = compaction_writes(session, messages, payloads, summary, report)?;
        self.write(|transaction| {
            let mut appended = Appended::default();
            for write in &writes {
                match *write {
                    CompactionWrite::History(messages) => {
                        appended = self.append_in(transaction, session, messages, At::Aligned)?
                    }
                    CompactionWrite::Payload(payload) => {
                        self.put_payload_in(transaction, payload)?;
                    }
                    CompactionWrite::Summary(summary) => self.put_summary_in(transaction, session, summary)?,
                    CompactionWrite::Report(report) => self.put_report_in(transaction, session, report)?,
                    CompactionWrite::Touch => touch(transaction, session).map_err(|err| self.sql(err))?,
                }
            }
            Ok(appended)
        })
    }

    fn set_session_meta(&self, session: &str, meta: &Value) -> Result<(), StoreError> {
        self.write(|transaction| {
            self.check_session(transaction, session)?;
            transaction
                .execute("UPDATE sessions SET meta = ?2 WHERE id = ?1", params![session, encode_json(meta)])
                .map_err(|err| self.sql(err))?;
            Ok(())
        })
    }

    fn session_meta(&self, session: &str) -> Result<Option<Value>, StoreError> {
        let meta: Option<Option<String>> = self
            .lock()
            .query_row("SELECT meta FROM sessions WHERE id = ?1", [session], |row| row.get(0))
            .optional()
            .map_err(|err| self.sql(err))?;
        match meta {
            None => Err(StoreError::UnknownSession(session.to_string())),
            Some(meta) => meta.map(|json| decode_json(&json, &format!("session {session}"))).transpose(),
        }
    }

    fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let connection = self.lock();
        let sql = |err| self.sql(err);
        let mut statement = connection
            .prepare(
                "SELECT id, name, created, \
                 (SELECT COUNT(*) FROM messages WHERE session = sessions.id), \
                 (SELECT COUNT(*) FROM payloads WHERE session = sessions.id) \
                 FROM sessions ORDER BY created, rowid",
            )
            .map_err(sql)?;
        let rows = statement
            .query_map([], |row| {
                Ok(SessionInfo {
                    id: row.get(0)?,
                    name: row.get(1)?,
                    created: row.get::<_, i64>(2)?.max(0) as u64,
                    messages: to_usize(row.get(3)?),
                    payloads: to_usize(row.get(4)?),
                })
            })
            .map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)
    }

    fn export(&self, session: &str) -> Result<Vec<Message>, StoreError> {
        let connection = self.lock();
        let sql = |err| self.sql(err);
        let exists = connection
            .query_row("SELECT 1 FROM sessions WHERE id = ?1", [session], |_| Ok(()))
            .optional()
            .map_err(sql)?;
        if exists.is_none() {
            return Err(StoreError::UnknownSession(session.to_string()));
        }
        let mut statement =
            connection.prepare("SELECT seq, shape, json FROM messages WHERE session = ?1 ORDER BY seq").map_err(sql)?;
        let rows = statement
            .query_map([session], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?)))
            .map_err(sql)?;
        rows.map(|row| {
            let (sequence, shape, json) = row.map_err(sql)?;
            message_from_stored(&json, &shape, to_usize(sequence))
        })
        .collect()
    }

    fn delete_session(&self, session: &str) -> Result<bool, StoreError> {
        self.write(|transaction| {
            let sql = |err| self.sql(err);
            // The column filter finds the rows without reading every row.
            transaction
                .execute(
                    "DELETE FROM search WHERE search MATCH ?1 AND session = ?2",
                    params![format!("session : {}", fts_string(session)), session],
                )
                .map_err(sql)?;
            // The other tables follow by ON DELETE CASCADE.
            let deleted = transaction.execute("DELETE FROM sessions WHERE id = ?1", [session]).map_err(sql)?;
            Ok(deleted > 0)
        })
    }

    fn prune(&self, before: u64) -> Result<Vec<SessionId>, StoreError> {
        self.write(|transaction| {
            let sql = |err| self.sql(err);
            let mut statement = transaction
                .prepare("SELECT id FROM sessions WHERE COALESCE(updated, created) < ?1 ORDER BY created")
                .map_err(sql)?;
            let rows = statement.query_map([before as i64], |row| row.get(0)).map_err(sql)?;
            let stale: Vec<SessionId> = rows.collect::<Result<_, _>>().map_err(sql)?;
            for session in &stale {
                transaction
                    .execute(
                        "DELETE FROM search WHERE search MATCH ?1 AND session = ?2",
                        params![format!("session : {}", fts_string(session)), session],
                    )
                    .map_err(sql)?;
                transaction.execute("DELETE FROM sessions WHERE id = ?1", [session]).map_err(sql)?;
            }
            transaction.execute("DELETE FROM states WHERE updated < ?1", [before as i64]).map_err(sql)?;
            Ok(stale)
        })
    }

    fn message_json(&self, session: &str, position: usize) -> Result<Option<Value>, StoreError> {
        let Ok(position) = i64::try_from(position) else { return Ok(None) };
        let json: Option<String> = self
            .lock()
            .query_row("SELECT json FROM messages WHERE session = ?1 AND seq = ?2", params![session, position], |row| {
                row.get(0)
            })
            .optional()
            .map_err(|err| self.sql(err))?;
        json.map(|json| decode_json(&json, &format!("message {position}"))).transpose()
    }

    fn search(&self, session: Option<&str>, query: &str, limit: usize) -> Result<Vec<Hit>, StoreError> {
        let Some(query) = fts_query(query, session).filter(|_| limit > 0) else {
            return Ok(Vec::new());
        };
        hits::search(self, limit, |count| self.search_candidates(session, &query, count))
    }
}

impl SqliteStore {
    /// The index's best `limit` matches of FTS query `query`.
    fn search_candidates(&self, session: Option<&str>, query: &str, limit: usize) -> Result<Vec<Hit>, StoreError> {
        let connection = self.lock();
        let sql = |err| self.sql(err);
        let mut statement = connection
            .prepare(
                "SELECT session, kind, key, snippet(search, 3, '[', ']', '…', 16) FROM search \
                 WHERE search MATCH ?1 AND (?2 IS NULL OR session = ?2) ORDER BY rank LIMIT ?3",
            )
            .map_err(sql)?;
        let rows = statement
            .query_map(params![query, session, limit as i64], |row| {
                let kind: String = row.get(1)?;
                let key: String = row.get(2)?;
                let location = if kind == "message" {
                    HitLocation::Message(key.parse().unwrap_or(usize::MAX))
                } else {
                    HitLocation::Payload(key)
                };
                Ok(Hit { session: row.get(0)?, location, snippet: row.get(3)? })
            })
            .map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)
    }
}
