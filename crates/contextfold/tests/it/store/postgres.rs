//! What only the PostgreSQL store has: a schema of its own in a shared database, versions
//! that replicas starting together migrate once, errors that name the server and never a
//! password, callers in any thread or runtime, a bounded pool, long texts indexed in chunks,
//! and search results equal to the SQLite store's.

use super::backend::{with_database, TestDatabase};
use contextfold::core::{Message, Role};
use contextfold::store::{
    HitLocation, Payload, PostgresOptions, PostgresStore, PostgresUrl, SessionStore, StoreError,
    POSTGRES_SCHEMA_VERSION,
};
use std::sync::Arc;

/// The test database, or `None` (after a notice) without a server.
fn database(test: &str) -> Option<TestDatabase> {
    TestDatabase::create(test)
}

/// The password of a URL, if it has one.
fn password(url: &str) -> Option<String> {
    let authority = url.split_once("://")?.1.split(['/', '?']).next()?;
    let credentials = authority.rsplit_once('@')?.0;
    credentials.split_once(':').map(|(_, password)| password.to_string()).filter(|password| !password.is_empty())
}

fn payload(session: &str, reference: &str, value: serde_json::Value) -> Payload {
    Payload {
        reference: reference.into(),
        session: session.into(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: None,
        tokens: 1,
        message: 0,
        block: 0,
        payload: value,
    }
}

#[test]
fn a_newer_schema_is_refused() {
    let Some(db) = database("newer") else { return };
    drop(PostgresStore::open(&db.url).expect("open"));
    db.execute(&format!("UPDATE contextfold.schema_version SET version = {}", POSTGRES_SCHEMA_VERSION + 1));
    for err in [
        PostgresStore::open(&db.url).expect_err("refused"),
        PostgresStore::open_existing(&db.url).expect_err("refused"),
    ] {
        assert!(
            matches!(err, StoreError::NewerSchema { found, .. } if found == POSTGRES_SCHEMA_VERSION + 1),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains("newer contextfold") && message.contains(&format!("/{}", db.name)), "{message}");
        assert!(password(&db.url).is_none_or(|password| !message.contains(&password)), "{message}");
    }
}

#[test]
fn a_version_1_store_gains_the_state_table_and_keeps_its_sessions() {
    use contextfold::store::{Put, StateStore};
    let Some(db) = database("state-migration") else { return };
    let store = PostgresStore::open(&db.url).expect("open");
    let session = store.create_session("before the states").expect("create");
    drop(store);
    db.execute(
        "DROP TABLE contextfold.calls; DROP TABLE contextfold.states; ALTER TABLE contextfold.sessions DROP COLUMN updated; \
         UPDATE contextfold.schema_version SET version = 1",
    );
    let store = PostgresStore::open(&db.url).expect("migrated");
    assert_eq!(
        db.query_text("SELECT version::text FROM contextfold.schema_version"),
        Some(POSTGRES_SCHEMA_VERSION.to_string())
    );
    assert!(store.sessions().expect("sessions").iter().any(|info| info.id == session));
    assert_eq!(store.put_state("k", 0, b"v").expect("put"), Put::Written(1));
}

#[test]
fn another_programs_schema_is_refused_and_left_alone() {
    let Some(db) = database("foreign") else { return };
    db.execute("CREATE SCHEMA contextfold; CREATE TABLE contextfold.users (name text); INSERT INTO contextfold.users VALUES ('ada');");
    for err in [
        PostgresStore::open(&db.url).expect_err("refused"),
        PostgresStore::open_existing(&db.url).expect_err("refused"),
    ] {
        assert!(matches!(err, StoreError::ForeignSchema { .. }), "{err:?}");
        assert!(err.to_string().contains("belongs to another program"), "{err}");
    }
    assert_eq!(db.query_text("SELECT string_agg(name, ',') FROM contextfold.users").as_deref(), Some("ada"));
    let tables = db.query_text("SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'contextfold'");
    assert_eq!(tables.as_deref(), Some("users"), "nothing was added");
}

#[test]
fn other_tables_in_the_database_are_left_alone() {
    let Some(db) = database("neighbours") else { return };
    db.execute("CREATE TABLE public.sessions (id text); INSERT INTO public.sessions VALUES ('theirs');");
    let store = PostgresStore::open(&db.url).expect("open");
    let session = store.create_session("ours").expect("create");
    assert_eq!(store.sessions().expect("sessions").len(), 1);
    assert!(store.delete_session(&session).expect("delete"));
    assert_eq!(db.query_text("SELECT string_agg(id, ',') FROM public.sessions").as_deref(), Some("theirs"));
}

#[test]
fn open_existing_creates_nothing() {
    let Some(db) = database("existing") else { return };
    let err = PostgresStore::open_existing(&db.url).expect_err("no store yet");
    assert!(matches!(err, StoreError::Missing { .. }), "{err:?}");
    assert!(err.to_string().starts_with("no store at postgres://"), "{err}");
    let schemas = db.query_text("SELECT count(*)::text FROM pg_namespace WHERE nspname = 'contextfold'");
    assert_eq!(schemas.as_deref(), Some("0"), "no schema was created");
    PostgresStore::open(&db.url).expect("create");
    PostgresStore::open_existing(&db.url).expect("an existing store opens");
}

/// Replicas starting at once on an empty database: one migrates, all open.
#[test]
fn openers_at_once_migrate_once() {
    let Some(db) = database("migrate") else { return };
    std::thread::scope(|scope| {
        let openers: Vec<_> = (0..6).map(|_| scope.spawn(|| PostgresStore::open(&db.url).map(drop))).collect();
        for opener in openers {
            opener.join().expect("the opener finishes").expect("every opener opens the store");
        }
    });
    let versions = db.query_text("SELECT string_agg(version::text, ',') FROM contextfold.schema_version");
    assert_eq!(versions, Some(POSTGRES_SCHEMA_VERSION.to_string()));
}

/// Every failure names the server and database, says what to do, and never shows the password.
#[test]
fn errors_name_the_server_never_the_password() {
    let Some(db) = database("errors") else { return };
    let secret = "n0t-the-Passw0rd";
    let with_password = |url: &str, password: &str| -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (credentials, host) = authority.rsplit_once('@').unwrap_or(("", authority));
        let user = credentials.split(':').next().filter(|user| !user.is_empty()).unwrap_or("postgres");
        format!("{scheme}://{user}:{password}@{host}{path}")
    };
    let free_port =
        std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("its address").port();
    let cases = [
        (with_password(&db.url, secret), "password authentication failed", "check the user and password"),
        (with_database(&db.url, "cf_no_such_database"), "does not exist", "create the database"),
        (
            format!("postgres://ada:{secret}@127.0.0.1:{free_port}/agents"),
            "error connecting",
            "check that the server is running",
        ),
        (format!("{}{}sslmode=require", db.url, if db.url.contains('?') { '&' } else { '?' }), "TLS", ""),
        (format!("postgres://ada:{secret}@127.0.0.1:notaport/agents"), "not a valid PostgreSQL URL", ""),
    ];
    let real = password(&db.url);
    for (url, says, hint) in cases {
        let err = match PostgresStore::open(&url) {
            Err(err) => err.to_string(),
            Ok(_) if says.contains("password") => {
                crate::common::notice("the test server trusts every password; its rejection is not tested");
                continue;
            }
            Ok(_) => panic!("{url} opens"),
        };
        assert!(err.contains(says) && err.contains(hint), "{url}: {err}");
        assert!(!err.contains(secret) && real.as_ref().is_none_or(|real| !err.contains(real)), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        if !says.contains("valid") {
            let shown = PostgresUrl::parse(&url).expect("a URL").to_string();
            assert!(err.contains(&shown) && shown.contains('/'), "{err} names {shown}");
        }
    }
}

/// The store works from a plain thread, inside a current-thread or a multi-threaded runtime
/// (in a task and in `spawn_blocking`), and may be dropped inside async code.
#[test]
fn callers_in_any_thread_or_runtime() {
    let Some(db) = database("callers") else { return };
    let store: Arc<dyn SessionStore> = Arc::new(PostgresStore::open(&db.url).expect("open"));
    let work = |store: &dyn SessionStore, name: &str| {
        let session = store.create_session(name).expect("create");
        store.append_messages(&session, &[Message::text(Role::User, format!("from {name}"))]).expect("append");
        assert_eq!(store.export(&session).expect("export").len(), 1);
    };
    let plain = store.clone();
    std::thread::spawn(move || work(plain.as_ref(), "plain thread")).join().expect("a plain thread");

    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    current.block_on(async {
        work(store.as_ref(), "current-thread runtime");
        let inner = store.clone();
        tokio::task::spawn_blocking(move || work(inner.as_ref(), "current-thread spawn_blocking"))
            .await
            .expect("joins");
    });

    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    multi.block_on(async {
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let inner = store.clone();
                tokio::spawn(async move { work(inner.as_ref(), &format!("multi-thread task {i}")) })
            })
            .collect();
        for task in tasks {
            task.await.expect("the task finishes");
        }
        let inner = store.clone();
        tokio::task::spawn_blocking(move || work(inner.as_ref(), "multi-thread spawn_blocking")).await.expect("joins");
        let owned = Arc::new(PostgresStore::open(&db.url).expect("open"));
        work(owned.as_ref(), "dropped in a task");
        drop(owned);
    });
    assert_eq!(store.sessions().expect("sessions").len(), 9);
}

/// Sixteen writers over a pool of two connections all get their turn; the pool opens no more.
#[test]
fn a_small_pool_makes_callers_wait_and_stays_bounded() {
    let Some(db) = database("pool") else { return };
    let url = PostgresUrl::parse(&db.url).expect("a URL");
    let store = PostgresStore::open_url(&url, PostgresOptions::default().max_connections(2)).expect("open");
    std::thread::scope(|scope| {
        for writer in 0..16 {
            let store = &store;
            scope.spawn(move || {
                let session = store.create_session(&format!("writer {writer}")).expect("create");
                for i in 0..10 {
                    store.push_messages(&session, &[Message::text(Role::User, format!("{i}"))]).expect("push");
                }
            });
        }
    });
    let sessions = store.sessions().expect("sessions");
    assert_eq!(sessions.len(), 16);
    assert!(sessions.iter().all(|info| info.messages == 10), "{sessions:?}");
    let connections = db.query_text(&format!(
        "SELECT count(*)::text FROM pg_stat_activity WHERE datname = '{}' AND application_name = 'contextfold'",
        db.name
    ));
    let connections: usize = connections.and_then(|count| count.parse().ok()).expect("a count");
    assert!((1..=2).contains(&connections), "{connections} connections");
}

/// A payload longer than one index chunk is found once, by a word at its end, and a word
/// split by punctuation is found by its parts; NUL characters are kept and searchable around.
#[test]
fn long_texts_and_odd_characters() {
    let Some(db) = database("chunks") else { return };
    let store = PostgresStore::open(&db.url).expect("open");
    let session = store.create_session("long").expect("create");
    let mut log: String = (0..12_000).map(|i| format!("{i:05} compiling crate number {i}\n")).collect();
    log.push_str("error: quetzalcoatl failed in src/lib.rs\n");
    // Words past PostgreSQL's longest (2,046 bytes) are left out of the index, not refused.
    log.push_str(&format!("{} {}\n", "x".repeat(2_046), "y".repeat(2_047)));
    assert!(log.len() > 300_000);
    let long = serde_json::json!(log);
    let odd = serde_json::json!("before\u{0}after \u{E000}wombat\u{E001}");
    store.put_payload(&payload(&session, "cf-long", long.clone())).expect("put");
    store.put_payload(&payload(&session, "cf-odd", odd.clone())).expect("put");
    assert_eq!(store.recall("cf-long").expect("recall"), Some(long));
    assert_eq!(store.recall("cf-odd").expect("recall"), Some(odd));

    let hits = store.search(Some(&session), "quetzalcoatl", 10).expect("search");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].location, HitLocation::Payload("cf-long".into()));
    assert!(hits[0].snippet.contains("[quetzalcoatl]") && hits[0].snippet.starts_with('…'), "{hits:?}");
    let hits = store.search(None, "compiling", 50).expect("search");
    assert_eq!(hits.len(), 1, "one hit per payload, whatever its chunks: {hits:?}");
    let hits = store.search(None, "lib.rs", 10).expect("search");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].snippet.contains("src/[lib].[rs]"), "{hits:?}");
    let hits = store.search(None, "wombat after", 10).expect("search");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].snippet.contains("[after]") && hits[0].snippet.contains("[wombat]"), "{hits:?}");
}

/// The same sessions in SQLite and PostgreSQL: every query finds the same messages and
/// payloads, with snippets marking a match.
#[cfg(feature = "sqlite")]
#[test]
fn search_finds_what_the_sqlite_store_finds() {
    let Some(db) = database("parity") else { return };
    let sqlite = super::Backend::sqlite("parity");
    let stores: [Arc<dyn SessionStore>; 2] = [sqlite.open(), Arc::new(PostgresStore::open(&db.url).expect("open"))];
    let conversation = super::load(std::path::Path::new(super::EXAMPLE));
    let texts = [
        "Please fix the flaky Zanzibar test in billing/tests/test_invoice.py",
        "cargo test -p billing failed: assertion `left == right` at src/lib.rs:42",
        "Zanzibar is fixed; the CI run is green again (re-run #1234).",
    ];
    for store in &stores {
        for name in ["example", "notes"] {
            let session = store.create_session(name).expect("create");
            if name == "example" {
                store.append_messages(&session, &conversation.messages).expect("append");
            } else {
                let messages: Vec<Message> = texts.iter().map(|text| Message::text(Role::User, *text)).collect();
                store.append_messages(&session, &messages).expect("append");
                store.put_payload(&payload(&session, "cf-notes", serde_json::json!(texts.join("\n")))).expect("put");
            }
        }
    }
    let names = |store: &dyn SessionStore| -> std::collections::HashMap<String, String> {
        store.sessions().expect("sessions").into_iter().map(|info| (info.id, info.name)).collect()
    };
    let queries = [
        "zanzibar",
        "ZANZIBAR fixed",
        "lib.rs",
        "test",
        "cargo test",
        "re-run",
        "1234",
        "billing",
        "src",
        "nothing-like-this",
    ];
    let mut found = 0;
    for query in queries {
        let results: Vec<Vec<(String, String)>> = stores
            .iter()
            .map(|store| {
                let names = names(store.as_ref());
                let mut hits: Vec<(String, String)> = store
                    .search(None, query, 100)
                    .expect("search")
                    .into_iter()
                    .inspect(|hit| assert!(hit.snippet.contains('[') && hit.snippet.contains(']'), "{query}: {hit:?}"))
                    .map(|hit| (names[&hit.session].clone(), format!("{:?}", hit.location)))
                    .collect();
                hits.sort();
                hits
            })
            .collect();
        assert_eq!(results[0], results[1], "{query}: SQLite and PostgreSQL differ");
        found += results[0].len();
    }
    assert!(found > 10, "the queries find something: {found}");
}
