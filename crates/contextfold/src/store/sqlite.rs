//! A session store in one SQLite file: WAL journal, a busy timeout for concurrent writers,
//! `PRAGMA user_version` migrations, and an FTS5 index over message and payload text whose
//! session column is indexed too, so a search within one session costs what its matches cost.
//!
//! Writers wait for each other twice over: SQLite's busy timeout, and a retry of the steps
//! that report "busy" without waiting on it (switching to WAL while another process opens
//! the file, a write lock taken while another process recovers the WAL).

use super::{
    aligned_prefix, check_payload_sessions, decode_json, encode_json, message_from_stored, message_hash, message_text,
    new_session_id, now_secs, searchable_text, shape_name, Appended, Hit, HitLocation, Payload, SessionId, SessionInfo,
    SessionStore, StoreError, Summary,
};
use crate::summarize::Usage;
use contextfold_core::Message;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The migrations, in order; migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
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
    "CREATE TABLE states (key TEXT PRIMARY KEY, version INTEGER NOT NULL, state BLOB NOT NULL, updated INTEGER NOT NULL);",
];

/// How long a writer waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a busy store is retried beyond SQLite's own busy timeout.
const BUSY_RETRY_FOR: Duration = Duration::from_secs(10);

/// Whether `err` says another connection holds the lock.
fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(err.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Runs `attempt` until it is not refused as busy, for up to [`BUSY_RETRY_FOR`], with growing
/// pauses (jittered, so two waiting processes do not retry in step).
fn retry_busy<T>(mut attempt: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + BUSY_RETRY_FOR;
    let mut pause = Duration::from_millis(1);
    loop {
        match attempt() {
            Err(err) if is_busy(&err) && Instant::now() < deadline => {
                std::thread::sleep(pause + Duration::from_micros(fastrand::u64(..1_000)));
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// Begins an immediate (write-locking) transaction, retrying while the store is busy.
fn begin_immediate(connection: &Connection) -> rusqlite::Result<Transaction<'_>> {
    retry_busy(|| Transaction::new_unchecked(connection, TransactionBehavior::Immediate))
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Whether opening may create the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Create {
    Yes,
    No,
}

/// A [`SessionStore`] in a SQLite file. Several processes may open the same file; writers
/// wait for each other up to the busy timeout (5 s).
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    connection: Mutex<Connection>,
}

impl SqliteStore {
    /// Opens the store at `path`, creating it (and its directory) when missing, readable and
    /// writable by its owner only, and bringing its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        create_private(&path)?;
        SqliteStore::connect(path, Create::Yes)
    }

    /// Opens the store at `path` only if it exists and is a contextfold store: readers must
    /// not leave a new file behind a mistyped path, nor turn an empty file into a store.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        match std::fs::metadata(&path) {
            Ok(_) => SqliteStore::connect(path, Create::No),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing { path }),
            Err(source) => Err(StoreError::Io { path, source }),
        }
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
        let version: i64 =
            retry_busy(|| connection.query_row("PRAGMA user_version", [], |row| row.get(0))).map_err(sql)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema { path, found: version, known: SCHEMA_VERSION });
        }
        let tables: i64 =
            connection.query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| row.get(0)).map_err(sql)?;
        let ours: bool = connection
            .query_row("SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'", [], |row| {
                row.get(0)
            })
            .map_err(sql)?;
        match version {
            0 if tables > 0 => return Err(StoreError::Foreign { path }),
            0 if create == Create::No => return Err(StoreError::NotAStore { path }),
            1.. if !ours => return Err(StoreError::Foreign { path }),
            _ => {}
        }
        retry_busy(|| connection.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))).map_err(sql)?;
        connection.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;").map_err(sql)?;
        migrate(&connection, &path)?;
        Ok(SqliteStore { path, connection: Mutex::new(connection) })
    }

    /// The file of the store.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn sql(&self, source: rusqlite::Error) -> StoreError {
        sql_error(&self.path, source)
    }

    /// Runs `work` in one immediate (write-locking) transaction, committed when it succeeds.
    pub(super) fn write<T>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // The mutex keeps transactions on this connection from nesting.
        let connection = self.lock();
        let transaction = begin_immediate(&connection).map_err(|err| self.sql(err))?;
        let value = work(&transaction)?;
        transaction.commit().map_err(|err| self.sql(err))?;
        Ok(value)
    }

    fn check_session(&self, transaction: &Transaction<'_>, session: &str) -> Result<(), StoreError> {
        let found = transaction
            .query_row("SELECT 1 FROM sessions WHERE id = ?1", [session], |_| Ok(()))
            .optional()
            .map_err(|err| self.sql(err))?;
        found.ok_or_else(|| StoreError::UnknownSession(session.to_string()))
    }

    fn append_in(
        &self,
        transaction: &Transaction<'_>,
        session: &str,
        messages: &[Message],
        align: bool,
    ) -> Result<Appended, StoreError> {
        self.check_session(transaction, session)?;
        let sql = |err| self.sql(err);
        let incoming: Vec<String> = messages.iter().map(message_hash).collect();
        // Aligning reads the stored hashes; a plain push needs only the next sequence number,
        // so appending one message at a time does not cost the whole history each time.
        let (skipped, mut sequence) = if align {
            let mut statement =
                transaction.prepare_cached("SELECT hash FROM messages WHERE session = ?1 ORDER BY seq").map_err(sql)?;
            let rows = statement.query_map([session], |row| row.get(0)).map_err(sql)?;
            let stored: Vec<String> = rows.collect::<Result<_, _>>().map_err(sql)?;
            (aligned_prefix(&stored, &incoming), stored.len())
        } else {
            let next: i64 = transaction
                .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE session = ?1")
                .and_then(|mut statement| statement.query_row([session], |row| row.get(0)))
                .map_err(sql)?;
            (0, to_usize(next))
        };
        for (message, hash) in messages.iter().zip(&incoming).skip(skipped) {
            let json = encode_json(&message.to_value());
            transaction
                .prepare_cached("INSERT INTO messages (session, seq, hash, shape, json) VALUES (?1, ?2, ?3, ?4, ?5)")
                .and_then(|mut statement| {
                    statement.execute(params![session, sequence as i64, hash, shape_name(message), json])
                })
                .map_err(sql)?;
            index(transaction, session, "message", &sequence.to_string(), &message_text(message)).map_err(sql)?;
            sequence += 1;
        }
        Ok(Appended { stored: messages.len() - skipped, skipped, total: sequence })
    }

    fn put_payload_in(&self, transaction: &Transaction<'_>, payload: &Payload) -> Result<bool, StoreError> {
        self.check_session(transaction, &payload.session)?;
        let sql = |err| self.sql(err);
        let json = encode_json(&payload.payload);
        let inserted = transaction
            .prepare_cached(
                "INSERT OR IGNORE INTO payloads (session, ref, tool, kind, target, tokens, message, block, payload) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    payload.session,
                    payload.reference,
                    payload.tool,
                    payload.kind,
                    payload.target,
                    payload.tokens as i64,
                    payload.message as i64,
                    payload.block as i64,
                    json
                ])
            })
            .map_err(sql)?;
        if inserted > 0 {
            index(transaction, &payload.session, "payload", &payload.reference, &searchable_text(&payload.payload))
                .map_err(sql)?;
        }
        Ok(inserted > 0)
    }

    fn put_summary_in(
        &self,
        transaction: &Transaction<'_>,
        session: &str,
        summary: &Summary,
    ) -> Result<(), StoreError> {
        self.check_session(transaction, session)?;
        transaction
            .execute(
                "INSERT OR REPLACE INTO summaries \
                 (session, head_hash, summarizer, text, input_tokens, output_tokens, created) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    session,
                    summary.head_hash,
                    summary.summarizer,
                    summary.text,
                    summary.usage.input_tokens as i64,
                    summary.usage.output_tokens as i64,
                    now_secs() as i64
                ],
            )
            .map_err(|err| self.sql(err))?;
        Ok(())
    }

    fn put_report_in(&self, transaction: &Transaction<'_>, session: &str, report: &Value) -> Result<(), StoreError> {
        self.check_session(transaction, session)?;
        transaction
            .execute(
                "INSERT INTO reports (session, json, created) VALUES (?1, ?2, ?3)",
                params![session, encode_json(report), now_secs() as i64],
            )
            .map_err(|err| self.sql(err))?;
        Ok(())
    }
}

/// Adds `body` to the full-text index.
fn index(transaction: &Transaction<'_>, session: &str, kind: &str, key: &str, body: &str) -> rusqlite::Result<()> {
    transaction
        .prepare_cached("INSERT INTO search (session, kind, key, body) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![session, kind, key, body])
        .map(drop)
}

/// Creates `path` (and its directory) with owner-only permissions when it does not exist.
fn create_private(path: &Path) -> Result<(), StoreError> {
    let io = |source| StoreError::Io { path: path.to_path_buf(), source };
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(io(err)),
    }
}

fn sql_error(path: &Path, source: rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::NotAStore { path },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked { path, waited: BUSY_TIMEOUT },
        _ => StoreError::Sqlite { path, source },
    }
}

/// Applies the migrations the file has not seen, each in its own transaction.
fn migrate(connection: &Connection, path: &Path) -> Result<(), StoreError> {
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
            return Ok(());
        };
        transaction.execute_batch(migration).map_err(sql)?;
        transaction.pragma_update(None, "user_version", version + 1).map_err(sql)?;
        transaction.commit().map_err(sql)?;
    }
}

/// `text` as an FTS5 string (a phrase): quoted, so punctuation is not syntax.
fn fts_string(text: &str) -> String {
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

fn to_usize(value: i64) -> usize {
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
        self.write(|transaction| self.append_in(transaction, session, messages, true))
    }

    fn push_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError> {
        self.write(|transaction| self.append_in(transaction, session, messages, false))
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

    fn persist_compaction(
        &self,
        session: &str,
        messages: &[Message],
        payloads: &[Payload],
        summary: Option<&Summary>,
        report: &Value,
    ) -> Result<Appended, StoreError> {
        check_payload_sessions(session, payloads)?;
        self.write(|transaction| {
            let appended = self.append_in(transaction, session, messages, true)?;
            for payload in payloads {
                self.put_payload_in(transaction, payload)?;
            }
            if let Some(summary) = summary {
                self.put_summary_in(transaction, session, summary)?;
            }
            self.put_report_in(transaction, session, report)?;
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

    fn search(&self, session: Option<&str>, query: &str, limit: usize) -> Result<Vec<Hit>, StoreError> {
        let Some(query) = fts_query(query, session).filter(|_| limit > 0) else {
            return Ok(Vec::new());
        };
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
