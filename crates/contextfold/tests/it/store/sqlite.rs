//! What only the SQLite store has: a file (private, checked before anything is written to
//! it, never created by readers), FTS5, migrations of older files, and the busy timeout.

use contextfold::core::{Message, Role};
use contextfold::store::{Hit, SessionStore, SqliteStore, StoreError, SCHEMA_VERSION};
use contextfold_test_support::Scratch;

/// A fresh directory under the system temp dir, removed when the test passes.
fn temp_dir(name: &str) -> Scratch {
    Scratch::new(&format!("store-{name}"))
}

#[test]
fn fts5_is_available() {
    let connection = rusqlite::Connection::open_in_memory().expect("open");
    connection.execute_batch("CREATE VIRTUAL TABLE t USING fts5(body);").expect("the bundled SQLite has FTS5");
}

#[test]
fn newer_schema_is_refused() {
    let dir = temp_dir("newer");
    let path = dir.join("store.db");
    drop(SqliteStore::open(&path).expect("open"));
    let connection = rusqlite::Connection::open(&path).expect("open");
    connection.pragma_update(None, "user_version", SCHEMA_VERSION + 1).expect("set version");
    drop(connection);
    let err = SqliteStore::open(&path).expect_err("a newer schema is refused");
    assert!(matches!(err, StoreError::NewerSchema { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("newer contextfold"), "{message}");
    assert!(message.contains(&format!("schema {}", SCHEMA_VERSION + 1)), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn garbage_file_is_refused() {
    let dir = temp_dir("garbage");
    let path = dir.join("notes.txt");
    std::fs::write(&path, "this is not a database, just some text that is long enough to fill a header".repeat(20))
        .expect("write");
    let err = SqliteStore::open(&path).expect_err("a text file is not a store");
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn another_programs_database_is_refused_and_left_alone() {
    let dir = temp_dir("foreign");
    let path = dir.join("app.db");
    let connection = rusqlite::Connection::open(&path).expect("open");
    connection.execute_batch("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');").expect("create");
    drop(connection);
    let before = std::fs::read(&path).expect("read");
    for err in [SqliteStore::open(&path).expect_err("refused"), SqliteStore::open_existing(&path).expect_err("refused")]
    {
        assert!(matches!(err, StoreError::Foreign { .. }), "{err:?}");
        assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    }
    assert_eq!(std::fs::read(&path).expect("read"), before, "the database is unchanged");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn open_existing_creates_nothing() {
    let dir = temp_dir("existing");
    let path = dir.join("missing/store.db");
    let err = SqliteStore::open_existing(&path).expect_err("missing");
    assert!(matches!(err, StoreError::Missing { .. }), "{err:?}");
    assert!(!path.exists() && !dir.join("missing").exists(), "nothing was created");
    let empty = dir.join("empty.db");
    std::fs::write(&empty, "").expect("write");
    let err = SqliteStore::open_existing(&empty).expect_err("an empty file is not a store");
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
    assert_eq!(std::fs::metadata(&empty).expect("metadata").len(), 0);
    SqliteStore::open(dir.join("store.db")).expect("create");
    SqliteStore::open_existing(dir.join("store.db")).expect("an existing store opens");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_version_1_store_is_migrated_with_its_data() {
    let dir = temp_dir("migrate");
    let path = dir.join("store.db");
    let session = {
        let store = SqliteStore::open(&path).expect("open");
        let session = store.create_session("old").expect("create");
        store.append_messages(&session, &[Message::text(Role::User, "kept")]).expect("append");
        session
    };
    // Take the file back to schema 1, as an older build left it.
    let connection = rusqlite::Connection::open(&path).expect("open");
    connection
        .execute_batch("DROP TABLE calls; DROP TABLE states; ALTER TABLE sessions DROP COLUMN meta; ALTER TABLE sessions DROP COLUMN updated; PRAGMA user_version = 1;")
        .expect("downgrade");
    drop(connection);
    let store = SqliteStore::open_existing(&path).expect("migrated");
    assert_eq!(store.export(&session).expect("export"), vec![Message::text(Role::User, "kept")]);
    assert_eq!(store.session_meta(&session).expect("meta"), None);
    let version: i64 = rusqlite::Connection::open(&path)
        .expect("open")
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION);
    std::fs::remove_dir_all(dir).ok();
}

/// Schema 3 indexes the session id for searches within a session: a version 2 store
/// gets its index rebuilt, and finds in each session what it found before.
#[test]
fn a_version_2_store_gets_its_search_index_rebuilt() {
    let dir = temp_dir("migrate-search");
    let path = dir.join("store.db");
    let sessions: Vec<String> = {
        let store = SqliteStore::open(&path).expect("open");
        (0..3)
            .map(|i| {
                let session = store.create_session(&format!("s{i}")).expect("create");
                let messages: Vec<Message> = (0..5)
                    .map(|n| Message::text(Role::User, format!("session {i} message {n} mentions zanzibar {n}")))
                    .collect();
                store.append_messages(&session, &messages).expect("append");
                session
            })
            .collect()
    };
    let searches = |store: &SqliteStore| -> Vec<Vec<Hit>> {
        let mut all: Vec<Vec<Hit>> =
            sessions.iter().map(|session| store.search(Some(session), "zanzibar", 10).expect("search")).collect();
        all.push(store.search(None, "zanzibar", 20).expect("search"));
        all
    };
    let before = searches(&SqliteStore::open_existing(&path).expect("open"));
    assert!(before[..3].iter().all(|hits| hits.len() == 5), "{before:?}");
    // Take the search table back to schema 2: the session id stored, not indexed.
    let connection = rusqlite::Connection::open(&path).expect("open");
    connection
        .execute_batch(
            "CREATE VIRTUAL TABLE old USING fts5(session UNINDEXED, kind UNINDEXED, key UNINDEXED, body);
             INSERT INTO old (rowid, session, kind, key, body) SELECT rowid, session, kind, key, body FROM search;
             DROP TABLE search; ALTER TABLE old RENAME TO search; DROP TABLE states; DROP TABLE calls;
             ALTER TABLE sessions DROP COLUMN updated; PRAGMA user_version = 2;",
        )
        .expect("downgrade");
    drop(connection);
    let store = SqliteStore::open_existing(&path).expect("migrated");
    assert_eq!(searches(&store), before);
    let schema: String = rusqlite::Connection::open(&path)
        .expect("open")
        .query_row("SELECT sql FROM sqlite_master WHERE name = 'search'", [], |row| row.get(0))
        .expect("schema");
    assert!(schema.contains("fts5(session, kind UNINDEXED"), "{schema}");
    assert!(store.delete_session(&sessions[0]).expect("delete"));
    assert!(store.search(Some(&sessions[0]), "zanzibar", 10).expect("search").is_empty());
    assert_eq!(store.search(None, "zanzibar", 20).expect("search").len(), 10, "the others stay");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_writer_locked_out_past_the_timeout_gets_a_clear_error() {
    let dir = temp_dir("locked");
    let path = dir.join("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let session = store.create_session("locked").expect("create");
    let holder = rusqlite::Connection::open(&path).expect("open");
    holder.execute_batch("BEGIN IMMEDIATE;").expect("lock");
    let err = store.create_session("waits").expect_err("the lock is held");
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(err.to_string().contains("locked"), "{err}");
    // Readers are not blocked, and nothing was damaged.
    assert_eq!(store.sessions().expect("sessions").len(), 1);
    holder.execute_batch("ROLLBACK;").expect("unlock");
    store.append_messages(&session, &[Message::text(Role::User, "after")]).expect("writes again");
    std::fs::remove_dir_all(dir).ok();
}

#[cfg(unix)]
#[test]
fn file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("perms");
    let path = dir.join("a/b/store.db");
    let store = SqliteStore::open(&path).expect("open");
    store.create_session("x").expect("create");
    let mode = std::fs::metadata(&path).expect("metadata").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    std::fs::remove_dir_all(dir).ok();
}

/// A store whose shared-memory file another program truncates goes on working: the file is
/// grown back before the connection touches it, where SQLite would have died of SIGBUS (the
/// test process with it).
#[test]
fn a_truncated_shared_memory_file_does_not_kill_the_process() {
    use contextfold::core::{Message, Role};
    let dir = temp_dir("shm");
    let path = dir.join("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let session = store.create_session("shm").expect("create");
    let messages: Vec<Message> =
        (0..200).map(|i| Message::text(Role::User, format!("line {i} {}", "x".repeat(500)))).collect();
    store.append_messages(&session, &messages[..100]).expect("append");
    let shm = dir.join("store.db-shm");
    let size = std::fs::metadata(&shm).expect("a WAL store has its shared-memory file").len();
    assert!(size > 0);
    for _ in 0..3 {
        std::fs::OpenOptions::new().write(true).open(&shm).expect("open").set_len(0).expect("truncate");
        assert_eq!(store.export(&session).expect("read after the truncation").len(), 100);
    }
    store.append_messages(&session, &messages).expect("write after the truncation");
    assert_eq!(store.export(&session).expect("export"), messages);
    assert_eq!(std::fs::metadata(&shm).expect("shm").len(), size, "grown back");
    drop(store);
    let reopened = SqliteStore::open_existing(&path).expect("reopen");
    assert_eq!(reopened.export(&session).expect("export"), messages, "nothing lost");
    std::fs::remove_dir_all(dir).ok();
}
