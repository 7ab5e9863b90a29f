//! The session store: round trips (history and every removed payload come back exactly),
//! deduplication, search, deletion, schema and file checks, concurrent writers, and the
//! corpus. The checks are written once over `&dyn SessionStore` and run on both stores.

use contextfold::compactor::{CompactConfig, CompactionReport, Compactor, Target};
use contextfold::core::{Conversation, Message, Role};
use contextfold::store::{HitLocation, MemoryStore, Payload, SessionStore, Summary};
use contextfold::summarize::Usage;
use std::path::Path;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/session.json");

fn load(path: &Path) -> Conversation {
    contextfold::input::load(path, None).unwrap_or_else(|err| panic!("{err}")).conversation
}

fn compact(conversation: &Conversation, budget: u64) -> CompactionReport {
    let config = CompactConfig { target: Target::Budget(budget), ..CompactConfig::default() };
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    runtime.block_on(Compactor::default().compact(conversation, &config)).expect("compaction succeeds").report
}

/// Stores `conversation`, compacts it at `budget`, stores what the compaction removed in one
/// transaction, and checks that the history and every payload come back exactly.
fn round_trip(store: &dyn SessionStore, name: &str, conversation: &Conversation, budget: u64) -> usize {
    let session = store.create_session(name).expect("create");
    let appended = store.append_messages(&session, &conversation.messages).expect("append");
    assert_eq!(appended.stored, conversation.messages.len());
    assert_eq!(store.export(&session).expect("export"), conversation.messages, "{name}: export differs");

    let report = compact(conversation, budget);
    let payloads = Payload::from_report(&session, &report);
    let summary = Summary {
        head_hash: "head".into(),
        summarizer: "extractive".into(),
        text: "a summary".into(),
        usage: Usage { input_tokens: 10, output_tokens: 2 },
    };
    let report_json = serde_json::to_value(&report).expect("the report serializes");
    let again = store
        .persist_compaction(&session, &conversation.messages, &payloads, Some(&summary), &report_json)
        .expect("persist");
    assert_eq!((again.stored, again.skipped), (0, conversation.messages.len()), "{name}: history stored twice");
    for payload in &payloads {
        let recalled = store.recall(&payload.reference).expect("recall").expect("the payload is stored");
        assert_eq!(recalled, payload.payload, "{name}: {} differs", payload.reference);
        assert_eq!(
            serde_json::to_string(&recalled).unwrap(),
            serde_json::to_string(&payload.payload).unwrap(),
            "{name}: {} is not byte-identical",
            payload.reference
        );
        assert_eq!(payload.reference, contextfold::core::hash::payload_ref(&payload.payload));
    }
    assert_eq!(store.export(&session).expect("export"), conversation.messages);
    assert_eq!(store.summaries(&session).expect("summaries"), vec![summary]);
    assert_eq!(store.reports(&session).expect("reports"), vec![report_json]);
    let info = store.sessions().expect("sessions").into_iter().find(|info| info.id == session).expect("listed");
    assert_eq!(info.name, name);
    assert_eq!(info.messages, conversation.messages.len());
    let distinct: std::collections::BTreeSet<&str> = payloads.iter().map(|p| p.reference.as_str()).collect();
    assert_eq!(info.payloads, distinct.len());
    payloads.len()
}

fn example_round_trip(store: &dyn SessionStore) {
    let conversation = load(Path::new(EXAMPLE));
    let payloads = round_trip(store, "examples/session.json", &conversation, 2000);
    assert!(payloads > 0, "a 2000-token budget removes something from the example");
}

fn dedup(store: &dyn SessionStore) {
    let conversation = load(Path::new(EXAMPLE));
    let session = store.create_session("dedup").expect("create");
    store.append_messages(&session, &conversation.messages[..3]).expect("append");
    let second = store.append_messages(&session, &conversation.messages).expect("append");
    assert_eq!((second.skipped, second.stored), (3, conversation.messages.len() - 3));
    let third = store.append_messages(&session, &conversation.messages).expect("append");
    assert_eq!((third.stored, third.total), (0, conversation.messages.len()));
    assert_eq!(store.export(&session).expect("export"), conversation.messages);
    // Pushing always appends.
    let pushed = store.push_messages(&session, &conversation.messages[..1]).expect("push");
    assert_eq!(pushed.total, conversation.messages.len() + 1);
    // The same payload twice is stored once.
    let payload = Payload {
        reference: "cf-test".into(),
        session: session.clone(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: None,
        tokens: 3,
        message: 0,
        block: 0,
        payload: serde_json::json!("out"),
    };
    assert!(store.put_payload(&payload).expect("put"));
    assert!(!store.put_payload(&payload).expect("put"));
    let info = store.sessions().expect("sessions").into_iter().find(|info| info.id == session).expect("listed");
    assert_eq!(info.payloads, 1);
}

fn search_and_delete(store: &dyn SessionStore) {
    let session = store.create_session("search").expect("create");
    let other = store.create_session("other").expect("create");
    let messages = vec![
        Message::text(Role::User, "Please fix the flaky Zanzibar test in billing"),
        Message::text(Role::Assistant, "Looking at it now."),
    ];
    store.append_messages(&session, &messages).expect("append");
    store.append_messages(&other, &[Message::text(Role::User, "zanzibar elsewhere")]).expect("append");
    let payload = Payload {
        reference: "cf-output".into(),
        session: session.clone(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: Some("cargo test".into()),
        tokens: 20,
        message: 1,
        block: 0,
        payload: serde_json::json!([{"type": "text", "text": "thread 'main' panicked: quetzalcoatl overflow"}]),
    };
    store.put_payload(&payload).expect("put");

    let hits = store.search(Some(&session), "zanzibar", 10).expect("search");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].location, HitLocation::Message(0));
    assert!(hits[0].snippet.contains("[Zanzibar]"), "{hits:?}");
    assert_eq!(store.search(None, "zanzibar", 10).expect("search").len(), 2);
    assert_eq!(store.search(None, "zanzibar", 1).expect("search").len(), 1);

    let hits = store.search(None, "Quetzalcoatl", 10).expect("search");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].location, HitLocation::Payload("cf-output".into()));
    assert_eq!(hits[0].session, session);
    assert!(hits[0].snippet.contains("[quetzalcoatl]"), "{hits:?}");
    assert!(store.search(None, "quetzalcoatl zanzibar", 10).expect("search").is_empty());

    assert!(store.delete_session(&session).expect("delete"));
    assert!(!store.delete_session(&session).expect("delete"));
    assert!(store.recall("cf-output").expect("recall").is_none());
    assert!(store.search(None, "quetzalcoatl", 10).expect("search").is_empty());
    assert_eq!(store.search(None, "zanzibar", 10).expect("search").len(), 1);
    assert!(store.export(&session).is_err());
    assert!(store.sessions().expect("sessions").iter().all(|info| info.id != session));
}

/// Floats, nested JSON and odd strings come back exactly; a failed compaction stores nothing.
fn exact_and_atomic(store: &dyn SessionStore) {
    let session = store.create_session("exact").expect("create");
    let value = serde_json::json!([
        {"type": "text", "text": "line one\nline \"two\"\t\u{0}é😀"},
        {"type": "tool_result", "z": 1, "a": [226.868409, 0.1, 1e-300, -0.0, 12345678901234567890u64, -5]}
    ]);
    for payload in [value.clone(), serde_json::json!(""), serde_json::json!("  plain string \n")] {
        let reference = contextfold::core::hash::payload_ref(&payload);
        let stored = Payload {
            reference: reference.clone(),
            session: session.clone(),
            tool: "Bash".into(),
            kind: "shell".into(),
            target: None,
            tokens: 1,
            message: 0,
            block: 0,
            payload: payload.clone(),
        };
        store.put_payload(&stored).expect("put");
        let recalled = store.recall(&reference).expect("recall").expect("stored");
        assert_eq!(serde_json::to_string(&recalled).unwrap(), serde_json::to_string(&payload).unwrap());
    }
    assert_eq!(store.recall("cf-missing").expect("recall"), None);
    store.put_report(&session, &serde_json::json!({"duration_ms": 226.868409})).expect("report");
    assert_eq!(store.reports(&session).expect("reports"), vec![serde_json::json!({"duration_ms": 226.868409})]);

    // A payload of another session fails the whole compaction: nothing of it is stored.
    let other = store.create_session("other").expect("create");
    let foreign = Payload {
        reference: "cf-foreign".into(),
        session: other,
        tool: "Read".into(),
        kind: "file_read".into(),
        target: None,
        tokens: 1,
        message: 0,
        block: 0,
        payload: serde_json::json!("x"),
    };
    let messages = [Message::text(Role::User, "hello")];
    let summary = Summary { head_hash: "h".into(), summarizer: "s".into(), text: "t".into(), usage: Usage::default() };
    let result = store.persist_compaction(&session, &messages, &[foreign], Some(&summary), &serde_json::json!({}));
    assert!(result.is_err());
    assert!(store.export(&session).expect("export").is_empty());
    assert!(store.summaries(&session).expect("summaries").is_empty());
    assert_eq!(store.reports(&session).expect("reports").len(), 1);
    assert_eq!(store.recall("cf-foreign").expect("recall"), None);
    assert!(store.persist_compaction("no-such-session", &messages, &[], None, &serde_json::json!({})).is_err());
}

/// Session metadata is kept per session, replaced whole, and comes back exactly.
fn meta(store: &dyn SessionStore) {
    let session = store.create_session("meta").expect("create");
    assert_eq!(store.session_meta(&session).expect("meta"), None);
    let first = serde_json::json!({"format": "openai", "frame": {"model": "m", "temperature": 0.7}});
    store.set_session_meta(&session, &first).expect("set");
    assert_eq!(store.session_meta(&session).expect("meta"), Some(first));
    let second = serde_json::json!({"format": "anthropic"});
    store.set_session_meta(&session, &second).expect("set");
    assert_eq!(store.session_meta(&session).expect("meta"), Some(second));
    assert!(store.set_session_meta("no-such-session", &serde_json::json!({})).is_err());
    assert!(store.session_meta("no-such-session").is_err());
}

#[test]
fn memory_store() {
    meta(&MemoryStore::new());
    example_round_trip(&MemoryStore::new());
    dedup(&MemoryStore::new());
    search_and_delete(&MemoryStore::new());
    exact_and_atomic(&MemoryStore::new());
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use contextfold::store::{SqliteStore, StoreError, SCHEMA_VERSION};
    use std::path::PathBuf;

    const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus");

    /// A fresh directory under the system temp dir.
    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("contextfold-store-{name}-{}-{}", std::process::id(), fastrand::u64(..)));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        dir
    }

    #[test]
    fn round_trip_dedup_search_delete() {
        let dir = temp_dir("sqlite");
        let path = dir.join("nested/store.db");
        example_round_trip(&SqliteStore::open(&path).expect("open"));
        dedup(&SqliteStore::open(&path).expect("open"));
        search_and_delete(&SqliteStore::open(&path).expect("open"));
        exact_and_atomic(&SqliteStore::open(&path).expect("open"));
        meta(&SqliteStore::open(&path).expect("open"));
        // Reopening sees what was stored.
        let store = SqliteStore::open(&path).expect("reopen");
        assert!(store.sessions().expect("sessions").iter().any(|info| info.name == "examples/session.json"));
        std::fs::remove_dir_all(dir).ok();
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
        for err in
            [SqliteStore::open(&path).expect_err("refused"), SqliteStore::open_existing(&path).expect_err("refused")]
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
        connection.execute_batch("ALTER TABLE sessions DROP COLUMN meta; PRAGMA user_version = 1;").expect("downgrade");
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

    #[test]
    fn two_writers() {
        let dir = temp_dir("writers");
        let path = dir.join("store.db");
        let session = SqliteStore::open(&path).expect("open").create_session("shared").expect("create");
        const EACH: usize = 50;
        let threads: Vec<_> = (0..2)
            .map(|writer| {
                let path = path.clone();
                let session = session.clone();
                std::thread::spawn(move || {
                    let store = SqliteStore::open(&path).expect("open");
                    for i in 0..EACH {
                        let message = Message::text(Role::User, format!("writer {writer} message {i}"));
                        store.push_messages(&session, &[message]).expect("append");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("the writer finishes");
        }
        let messages = SqliteStore::open(&path).expect("open").export(&session).expect("export");
        assert_eq!(messages.len(), 2 * EACH);
        for writer in 0..2 {
            let mine: Vec<String> = messages
                .iter()
                .map(|message| message.to_value()["content"][0]["text"].as_str().unwrap_or_default().to_string())
                .filter(|text| text.starts_with(&format!("writer {writer} ")))
                .collect();
            let expected: Vec<String> = (0..EACH).map(|i| format!("writer {writer} message {i}")).collect();
            assert_eq!(mine, expected, "writer {writer}'s messages are all stored, in order");
        }
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn corpus() {
        let dir = Path::new(CORPUS);
        if !dir.is_dir() {
            println!("skipped: corpus not found at {}", dir.display());
            return;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("the corpus directory is readable")
            .map(|entry| entry.expect("an entry").path())
            .filter(|path| {
                let name = path.file_name().and_then(|name| name.to_str()).unwrap_or("");
                (name.ends_with(".json") || name.ends_with(".json.gz")) && name != "manifest.json"
            })
            .collect();
        files.sort();
        let temp = temp_dir("corpus");
        let store = SqliteStore::open(temp.join("store.db")).expect("open");
        let mut payloads = 0;
        for file in files.iter().take(10) {
            let conversation = load(file);
            let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
            payloads += round_trip(&store, &name, &conversation, 8000);
        }
        println!("corpus: {} sessions, {payloads} payloads recalled", files.len().min(10));
        std::fs::remove_dir_all(temp).ok();
    }
}
