//! The session store: round trips (history and every removed payload come back exactly),
//! deduplication, search, deletion, schema and file checks, concurrent writers, and the
//! corpus. The checks are written once over `&dyn SessionStore` and run on both stores.

use contextfold::compactor::{CompactConfig, CompactError, CompactionReport, Compactor, Step, Strategy, Target};
use contextfold::core::clip::CLIP_PREFIX;
use contextfold::core::hash::payload_ref;
use contextfold::core::summary::RECALL_NOTE;
use contextfold::core::{Block, Conversation, Message, Role, ToolResultContent};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig, PrepareError};
use contextfold::store::{
    handle_recall, recall_tool_definition, HitLocation, MemoryStore, Payload, SessionStore, Summary, MAX_RECALL_CHARS,
    RECALL_TOOL_NAME,
};
use contextfold::summarize::Usage;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/session.json");

fn load(path: &Path) -> Conversation {
    contextfold::input::load(path, None).unwrap_or_else(|err| panic!("{err}")).conversation
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a runtime")
}

fn budget_config(budget: u64) -> CompactConfig {
    CompactConfig { target: Target::Budget(budget), ..CompactConfig::default() }
}

fn compact(conversation: &Conversation, budget: u64) -> CompactionReport {
    runtime()
        .block_on(Compactor::default().compact(conversation, &budget_config(budget)))
        .expect("compaction succeeds")
        .report
}

/// Stores `conversation`, compacts it at `budget`, stores what the compaction removed in one
/// transaction, and checks that the history and every payload come back exactly.
fn round_trip(store: &dyn SessionStore, name: &str, conversation: &Conversation, budget: u64) -> usize {
    let session = store.create_session(name).expect("create");
    let appended = store.append_messages(&session, &conversation.messages).expect("append");
    assert_eq!(appended.stored, conversation.messages.len());
    assert_eq!(store.export(&session).expect("export"), conversation.messages, "{name}: export differs");

    let report = compact(conversation, budget);
    let payloads: Vec<Payload> = (report.items.iter().map(|item| Payload::from_offload(&session, item)))
        .chain(report.clipped.iter().map(|item| Payload::from_clipped(&session, item)))
        .collect();
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

/// A payload stored in `session` under its own ref.
fn put(store: &dyn SessionStore, session: &str, payload: serde_json::Value) -> String {
    let reference = contextfold::core::hash::payload_ref(&payload);
    let stored = Payload {
        reference: reference.clone(),
        session: session.to_string(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: None,
        tokens: 1,
        message: 0,
        block: 0,
        payload,
    };
    store.put_payload(&stored).expect("put");
    reference
}

/// Calls the recall tool with `input` until the last page, checking each page's header and
/// size, and returns the pages' bodies put together.
fn recall_all(store: &dyn SessionStore, session: &str, reference: &str) -> (String, usize) {
    let first = handle_recall(store, session, &serde_json::json!({"ref": reference}));
    assert!(!first.is_error, "{}", first.content);
    let Some(header) = first.content.strip_prefix("[page 1/") else { return (first.content, 1) };
    let pages: usize = header.split('/').next().and_then(|n| n.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    let mut whole = String::new();
    for page in 1..=pages {
        let out = handle_recall(store, session, &serde_json::json!({"ref": reference, "page": page}));
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.chars().count() <= MAX_RECALL_CHARS, "page {page} is too big");
        let (header, body) = out.content.split_once('\n').expect("a header line");
        assert!(header.starts_with(&format!("[page {page}/{pages} of {reference}; ")), "{header}");
        if page < pages {
            assert!(header.contains(&format!("call {RECALL_TOOL_NAME} with ref {reference} and page={}", page + 1)));
        }
        whole.push_str(body);
    }
    (whole, pages)
}

/// The recall tool: huge payloads come back in bounded pages that reassemble exactly; bad
/// input, unknown refs and pages out of range are error results; queries find snippets.
fn recall_tool(store: &dyn SessionStore) {
    let session = store.create_session("recall").expect("create");
    let lines: String = (0..40_000).map(|i| format!("{i:05} line of a very long build log é😀\n")).collect();
    let reference = put(store, &session, serde_json::json!(lines.clone()));
    let (whole, pages) = recall_all(store, &session, &reference);
    assert!(pages > 20, "{pages} pages");
    assert_eq!(whole, lines, "the pages reassemble to the payload byte for byte");

    // One line longer than a page is cut on character boundaries.
    let line = "é".repeat(100_000);
    let reference = put(store, &session, serde_json::json!(line.clone()));
    assert_eq!(recall_all(store, &session, &reference), (line, 4));

    // A small block list comes back whole, text blocks as they are.
    let blocks = serde_json::json!([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]);
    let reference = put(store, &session, blocks);
    assert_eq!(recall_all(store, &session, &reference), ("first\nsecond".to_string(), 1));

    let unknown = handle_recall(store, &session, &serde_json::json!({"ref": "cf-000000000000"}));
    assert!(unknown.is_error && unknown.content.contains("cf-000000000000"), "{}", unknown.content);
    let out_of_range = handle_recall(store, &session, &serde_json::json!({"ref": reference, "page": 2}));
    assert!(out_of_range.is_error && out_of_range.content.contains("page 2 is out of range"), "{out_of_range:?}");
    for bad in [serde_json::json!({}), serde_json::json!(null), serde_json::json!({"ref": "x", "query": "y"})] {
        let out = handle_recall(store, &session, &bad);
        assert!(out.is_error, "{bad}: {}", out.content);
        assert!(out.content.starts_with(&format!("{RECALL_TOOL_NAME} failed: ")), "{}", out.content);
    }

    store
        .append_messages(&session, &[Message::text(Role::User, "the flaky Zanzibar test fails again")])
        .expect("append");
    let found = handle_recall(store, &session, &serde_json::json!({"query": "zanzibar"}));
    assert!(!found.is_error);
    assert!(found.content.contains("- message 0: ") && found.content.contains("[Zanzibar]"), "{}", found.content);
    let none = handle_recall(store, &session, &serde_json::json!({"query": "quetzalcoatl"}));
    assert!(!none.is_error && none.content.starts_with("no matches"), "{}", none.content);
    for i in 0..25 {
        store.push_messages(&session, &[Message::text(Role::User, format!("wombat sighting {i}"))]).expect("push");
    }
    let first = handle_recall(store, &session, &serde_json::json!({"query": "wombat"}));
    assert!(first.content.starts_with("25 matches for \"wombat\" [page 1/3; "), "{}", first.content);
    assert_eq!(first.content.lines().count(), 11);
    let last = handle_recall(store, &session, &serde_json::json!({"query": "wombat", "page": 3}));
    assert_eq!(last.content.lines().count(), 6, "{}", last.content);
    assert!(handle_recall(store, &session, &serde_json::json!({"query": "wombat", "page": 4})).is_error);
}

#[test]
fn memory_store() {
    meta(&MemoryStore::new());
    example_round_trip(&MemoryStore::new());
    dedup(&MemoryStore::new());
    search_and_delete(&MemoryStore::new());
    exact_and_atomic(&MemoryStore::new());
    recall_tool(&MemoryStore::new());
}

#[test]
fn recall_tool_definitions() {
    use contextfold::core::format::{to_value, Format, Layout};
    let anthropic = recall_tool_definition(Format::Anthropic);
    assert_eq!(anthropic["name"], RECALL_TOOL_NAME);
    assert!(anthropic["description"].as_str().is_some_and(|text| text.contains("ref")));
    let properties = &anthropic["input_schema"]["properties"];
    assert_eq!(
        (properties["ref"]["type"].as_str(), properties["query"]["type"].as_str()),
        (Some("string"), Some("string"))
    );
    assert_eq!(properties["page"]["type"], "integer");
    assert_eq!(recall_tool_definition(Format::ClaudeCode), anthropic);

    let openai = recall_tool_definition(Format::OpenAi);
    assert_eq!(openai["type"], "function");
    assert_eq!(openai["function"]["name"], RECALL_TOOL_NAME);
    // The OpenAI form is what the OpenAI writer makes of the Anthropic one.
    let conversation = Conversation { tools: Some(vec![anthropic]), ..Conversation::default() };
    let written = to_value(&conversation, Format::OpenAi, Layout::Object).expect("writes");
    assert_eq!(written["tools"][0], openai);
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use contextfold::store::{Hit, SqliteStore, StoreError, SCHEMA_VERSION};
    use std::path::PathBuf;

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
        recall_tool(&SqliteStore::open(&path).expect("open"));
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
                 DROP TABLE search; ALTER TABLE old RENAME TO search; PRAGMA user_version = 2;",
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
        let Some(dir) = crate::common::corpus_dir() else { return };
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
            // At 8k, or at the smallest workable budget when the newest turn takes more.
            let budget = match runtime().block_on(Compactor::default().compact(&conversation, &budget_config(8_000))) {
                Err(CompactError::TooSmall { smallest, .. }) => smallest,
                _ => 8_000,
            };
            payloads += round_trip(&store, &name, &conversation, budget);
        }
        println!("corpus: {} sessions, {payloads} payloads recalled", files.len().min(10));
        std::fs::remove_dir_all(temp).ok();
    }
}

/// A coding session of `turns` turns, each a shell call with an output of `lines` lines;
/// every fourth output is ten times longer.
fn synthetic(turns: usize, lines: usize) -> Vec<Message> {
    let mut messages = Vec::new();
    for turn in 0..turns {
        let id = format!("call{turn}");
        let size = if turn % 4 == 3 { lines * 10 } else { lines };
        let output: String =
            (0..size).map(|line| format!("turn {turn} line {line}: test_{line} passed in 0.{line}s\n")).collect();
        messages.push(json!({"role": "user", "content": format!("step {turn}: run the tests again")}));
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("pytest -k part{turn}")}}]}));
        messages
            .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}));
        messages.push(json!({"role": "assistant", "content": format!("Turn {turn} is done.")}));
    }
    Conversation::from_value(Value::Array(messages)).expect("a valid session").messages
}

/// The payloads of `messages`' tool results by their ref.
fn originals(messages: &[Message]) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for block in messages.iter().flat_map(|message| &message.content) {
        let Block::ToolResult(result) = block else { continue };
        let payload = match &result.content {
            Some(ToolResultContent::Text(text)) => Value::String(text.clone()),
            Some(ToolResultContent::Blocks(blocks)) => Value::Array(blocks.iter().map(Block::to_value).collect()),
            None => continue,
        };
        out.insert(payload_ref(&payload), payload);
    }
    out
}

/// The refs of every payload a stored report names.
fn report_refs(report: &Value) -> Vec<String> {
    ["items", "clipped"]
        .iter()
        .flat_map(|key| report[key].as_array().cloned().unwrap_or_default())
        .filter_map(|item| item["ref"].as_str().map(str::to_string))
        .collect()
}

/// Every ref of every stored report recalls its original: one of `originals`, or a clipped
/// text whose own marker names an original.
fn check_recalls(store: &dyn SessionStore, session: &str, originals: &HashMap<String, Value>) -> usize {
    let mut checked = 0;
    for report in store.reports(session).expect("reports") {
        for reference in report_refs(&report) {
            let recalled = store.recall(&reference).expect("recall").unwrap_or_else(|| panic!("{reference} is stored"));
            assert_eq!(payload_ref(&recalled), reference, "{reference} holds its own payload");
            match originals.get(&reference) {
                Some(original) => assert_eq!(&recalled, original, "{reference}"),
                None => {
                    // An output clipped on ingest and evicted later: its marker names the original.
                    let text = recalled.as_str().unwrap_or_default();
                    let marker = text.find(CLIP_PREFIX).unwrap_or_else(|| panic!("{reference} is no original"));
                    let inner = text[marker..].split("ref ").nth(1).and_then(|rest| rest.get(..15)).unwrap_or("");
                    assert_eq!(store.recall(inner).expect("recall").as_ref(), originals.get(inner), "{inner}");
                }
            }
            if let Value::String(text) = &recalled {
                assert_eq!(&recall_all(store, session, &reference).0, text, "the tool gives {reference} back");
            }
            checked += 1;
        }
    }
    checked
}

/// The compactor with a store keeps the history, each payload, the summary and the report;
/// pointers and the summary name the recall tool.
fn compactor_persists(store: Arc<dyn SessionStore>) {
    let messages = synthetic(12, 30);
    let conversation = Conversation { messages: messages.clone(), ..Conversation::default() };
    let session = store.create_session("compactor").expect("create");
    let mut config = CompactConfig { target: Target::Budget(3_000), ..CompactConfig::default() };
    config.evict.recall_tool = true;
    let compactor = Compactor::default().with_store(store.clone(), session.clone());
    let compacted = runtime().block_on(compactor.compact(&conversation, &config)).expect("compaction succeeds");
    let report = &compacted.report;
    assert!(report.strategy_used.contains(Step::Summarize) && report.offloaded > 0, "{}", report.strategy_used);

    assert_eq!(store.export(&session).expect("export"), messages, "the original history is stored");
    assert_eq!(check_recalls(store.as_ref(), &session, &originals(&messages)), report.offloaded + report.clipped.len());
    assert_eq!(store.reports(&session).expect("reports"), vec![serde_json::to_value(report).expect("json")]);
    let summary = compacted.summary.clone().expect("a summary");
    assert_eq!(store.summaries(&session).expect("summaries"), vec![summary.clone()]);
    assert_eq!(summary.summarizer, "extractive/v1");
    assert!(!summary.text.contains(RECALL_NOTE));

    let first = compacted.conversation.messages[0].content.iter().filter_map(Block::as_text).collect::<String>();
    assert!(first.contains(RECALL_NOTE) && first.contains(summary.text.trim_end()), "{first}");
    // A second compaction of the same history stores a second report, not the history again;
    // each of its pointers names the tool.
    let config = CompactConfig { strategy: Strategy::Evict, ..config };
    let evicted = runtime().block_on(compactor.compact(&conversation, &config)).expect("compaction succeeds");
    assert_eq!(store.export(&session).expect("export"), messages);
    assert_eq!(store.reports(&session).expect("reports").len(), 2);
    let sent = serde_json::to_string(&evicted.conversation.to_value()).expect("json");
    let pointers = sent.matches("[contextfold: offloaded ").count();
    assert!(pointers > 0, "{sent}");
    assert_eq!(sent.matches("call context_recall with this ref to restore; ref cf-").count(), pointers);
    assert!(check_recalls(store.as_ref(), &session, &originals(&messages)) > pointers);

    // Without the recall tool the pointers keep their usual text.
    let plain = Compactor::default().with_store(store.clone(), session.clone());
    let config = CompactConfig { evict: CompactConfig::default().evict, ..config };
    let out = runtime().block_on(plain.compact(&conversation, &config)).expect("compaction succeeds");
    let sent = serde_json::to_string(&out.conversation.to_value()).expect("json");
    assert!(!sent.contains("context_recall") && sent.contains("re-run the command to restore"));

    // A store that cannot keep the compaction fails it loudly, with the compaction.
    let broken = Compactor::default().with_store(store.clone(), "no-such-session");
    match runtime().block_on(broken.compact(&conversation, &config)) {
        Err(CompactError::Store { source, compacted }) => {
            assert!(source.to_string().contains("no-such-session"), "{source}");
            assert_eq!(compacted.conversation, out.conversation);
        }
        other => panic!("expected a store error, got {other:?}"),
    }
}

/// The middleware with a store keeps the caller's history (not its working copy), each
/// payload of each compaction, and each output it clipped on ingest.
fn middleware_persists(store: Arc<dyn SessionStore>) {
    let session = store.create_session("middleware").expect("create");
    let mut config = MiddlewareConfig::new(8_000, 1_000);
    config.compact.evict.recall_tool = true;
    config.clip_on_ingest = Some(1_500);
    let middleware = CompactionMiddleware::new(Compactor::default().with_store(store.clone(), session.clone()), config);
    let all = synthetic(24, 20);
    let mut events = 0;
    let mut stored_len = 0;
    for turn in 1..=24 {
        let history = &all[..turn * 4 - 1];
        let prepared = runtime().block_on(middleware.prepare(history, &all[turn * 4 - 1..turn * 4]));
        assert!(prepared.error.is_none(), "{:?}", prepared.error);
        if let Some(event) = &prepared.event {
            assert_eq!(event.store_error, None);
            events += 1;
            stored_len = history.len();
        }
    }
    assert!(events >= 2, "{events} compactions");
    assert_eq!(store.reports(&session).expect("reports").len(), events);
    assert_eq!(store.export(&session).expect("export"), all[..stored_len], "the caller's history is stored");
    let checked = check_recalls(store.as_ref(), &session, &originals(&all));
    assert!(checked > 0);
    // The outputs clipped on ingest are stored as they are clipped.
    let long = &all[4 * 23 + 2];
    let reference = originals(std::slice::from_ref(long)).into_keys().next().expect("an output");
    assert!(store.recall(&reference).expect("recall").is_some(), "the last long output, clipped on ingest");

    let now = runtime().block_on(middleware.compact_now(&all));
    assert!(now.error.is_none(), "{:?}", now.error);
    assert_eq!(now.event.and_then(|event| event.store_error), None);
    assert_eq!(store.export(&session).expect("export"), all);

    // A store that cannot keep a compaction: the compaction is sent, and the event says so.
    let broken = CompactionMiddleware::new(
        Compactor::default().with_store(store.clone(), "no-such-session"),
        MiddlewareConfig::new(8_000, 1_000),
    );
    let now = runtime().block_on(broken.compact_now(&all));
    let error = now.event.expect("an event").store_error.expect("a store error");
    assert!(error.contains("no-such-session"), "{error}");
    assert!(matches!(now.error, Some(PrepareError::Store(_))), "{:?}", now.error);
    assert!(now.history.len() < all.len());
}

#[test]
fn memory_store_persists_compactions() {
    compactor_persists(Arc::new(MemoryStore::new()));
    middleware_persists(Arc::new(MemoryStore::new()));
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_store_persists_compactions() {
    let dir = std::env::temp_dir().join(format!("contextfold-persist-{}-{}", std::process::id(), fastrand::u64(..)));
    let store = Arc::new(contextfold::store::SqliteStore::open(dir.join("store.db")).expect("open"));
    compactor_persists(store.clone());
    middleware_persists(store);
    std::fs::remove_dir_all(dir).ok();
}
