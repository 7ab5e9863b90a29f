//! The stores the shared store suite runs on, each test on a fresh one of its own: memory,
//! a SQLite file in a temporary directory, and a PostgreSQL database created for the test on
//! the server `CONTEXTFOLD_TEST_POSTGRES_URL` names (and dropped after it).
#![allow(dead_code)]

use contextfold::store::{MemoryStore, SessionStore, StateStore};
use contextfold_test_support::Scratch;
use std::path::PathBuf;
use std::sync::Arc;

/// Names the PostgreSQL server the tests use.
pub const POSTGRES_URL: &str = "CONTEXTFOLD_TEST_POSTGRES_URL";

/// One fresh store, which [`Backend::open`] opens as often as a test likes.
pub enum Backend {
    Memory(Arc<MemoryStore>),
    #[cfg(feature = "sqlite")]
    Sqlite {
        /// The store's directory, removed with the backend.
        _dir: Scratch,
        path: PathBuf,
    },
    #[cfg(feature = "postgres")]
    Postgres(TestDatabase),
}

impl Backend {
    pub fn memory() -> Backend {
        Backend::Memory(Arc::new(MemoryStore::new()))
    }

    #[cfg(feature = "sqlite")]
    pub fn sqlite(test: &str) -> Backend {
        let dir = Scratch::new(&format!("store-{test}"));
        let path = dir.join("nested/store.db");
        Backend::Sqlite { _dir: dir, path }
    }

    /// A fresh database, or `None` after a visible notice when no server is configured.
    #[cfg(feature = "postgres")]
    pub fn postgres(test: &str) -> Option<Backend> {
        TestDatabase::create(test).map(Backend::Postgres)
    }

    /// The store, opened again (a new connection or file handle; the same store in memory).
    pub fn open(&self) -> Arc<dyn SessionStore> {
        match self {
            Backend::Memory(store) => store.clone(),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite { path, .. } => Arc::new(contextfold::store::SqliteStore::open(path).expect("open")),
            #[cfg(feature = "postgres")]
            Backend::Postgres(database) => {
                Arc::new(contextfold::store::PostgresStore::open(&database.url).expect("open the PostgreSQL store"))
            }
        }
    }
}

impl Backend {
    /// The store's conversation state, opened again as [`Backend::open`] opens the store.
    pub fn open_states(&self) -> Arc<dyn StateStore> {
        match self {
            Backend::Memory(store) => store.clone(),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite { path, .. } => Arc::new(contextfold::store::SqliteStore::open(path).expect("open")),
            #[cfg(feature = "postgres")]
            Backend::Postgres(database) => {
                Arc::new(contextfold::store::PostgresStore::open(&database.url).expect("open the PostgreSQL store"))
            }
        }
    }
}

/// The server's URL, or `None` after a visible notice; with `CI` set, a missing server fails.
pub fn postgres_url() -> Option<String> {
    match std::env::var(POSTGRES_URL) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but {POSTGRES_URL} is not (.ci/setup.d/30-postgres.sh starts a server and sets it)"
            );
            crate::common::notice(&format!(
                "skipped: no PostgreSQL server for the store tests (set {POSTGRES_URL}=postgres://user:password@host:port/db)"
            ));
            None
        }
    }
}

/// `url` with its database replaced by `database`.
pub fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map(|at| &tail[at..]).unwrap_or("");
    format!("{scheme}://{authority}/{database}{query}")
}

/// A database of one test's own, dropped with it.
#[cfg(feature = "postgres")]
pub struct TestDatabase {
    /// The URL of the server's own database.
    pub admin: String,
    /// The test database's name.
    pub name: String,
    /// Its URL.
    pub url: String,
}

#[cfg(feature = "postgres")]
impl TestDatabase {
    pub fn create(test: &str) -> Option<TestDatabase> {
        let admin = postgres_url()?;
        let tag: String = test.chars().filter(char::is_ascii_alphanumeric).take(30).collect();
        let name = format!("cf_{}_{}_{:x}", tag.to_lowercase(), std::process::id(), fastrand::u32(..));
        sql(&admin, &format!("CREATE DATABASE {name}"));
        let url = with_database(&admin, &name);
        Some(TestDatabase { admin, name, url })
    }

    /// Runs `statements` in the test database.
    pub fn execute(&self, statements: &str) {
        sql(&self.url, statements);
    }

    /// The first column of the first row of `query` in the test database, as text.
    pub fn query_text(&self, query: &str) -> Option<String> {
        with_client(&self.url, async |client| {
            client.query_opt(query, &[]).await.expect("the query runs").map(|row| row.get::<_, String>(0))
        })
    }
}

#[cfg(feature = "postgres")]
impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Best effort: a failed drop must not turn a failing test into an abort.
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let admin = self.admin.clone();
        let _ = std::thread::spawn(move || sql(&admin, &drop)).join();
    }
}

/// Runs `statements` (simple protocol, one implicit transaction) at `url`.
#[cfg(feature = "postgres")]
pub fn sql(url: &str, statements: &str) {
    with_client(url, async |client| {
        client.batch_execute(statements).await.unwrap_or_else(|err| panic!("{statements}: {err:?}"))
    })
}

/// Runs `work` with a plain connection to `url`, on a runtime of its own.
#[cfg(feature = "postgres")]
pub fn with_client<T>(url: &str, work: impl AsyncFnOnce(&tokio_postgres::Client) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|err| panic!("cannot reach the PostgreSQL server of {POSTGRES_URL}: {err}"));
        let connection = tokio::spawn(connection);
        let out = work(&client).await;
        drop(client);
        let _ = connection.await;
        out
    })
}
