//! Where a store is, as a user writes it: a SQLite file path, or a `postgres://` URL.
//!
//! Its `Display` is what messages show: the path, or the URL without its password.

use super::{ConversationStore, SessionStore, StoreError};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A store's place: a file (the SQLite store) or a PostgreSQL database.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(Box<super::PostgresUrl>),
}

impl StoreLocation {
    /// Reads `text`: a URL starting with `postgres://` or `postgresql://`, or else a path.
    pub fn parse(text: &str) -> Result<StoreLocation, StoreError> {
        if !is_postgres_url(text) {
            return Ok(StoreLocation::File(PathBuf::from(text)));
        }
        #[cfg(feature = "postgres")]
        return super::PostgresUrl::parse(text).map(|url| StoreLocation::Postgres(Box::new(url)));
        #[cfg(not(feature = "postgres"))]
        Err(StoreError::NotBuiltIn { store: "PostgreSQL", feature: "postgres" })
    }

    /// Opens the store, creating it when missing.
    pub fn open(&self) -> Result<Arc<dyn SessionStore>, StoreError> {
        self.connect(Access::Create)
    }

    /// Opens the store, creating it when missing, with its conversation state (a proxy's).
    pub fn open_conversations(&self) -> Result<Arc<dyn ConversationStore>, StoreError> {
        match self {
            #[cfg(feature = "sqlite")]
            StoreLocation::File(path) => Ok(Arc::new(super::SqliteStore::open(path)?)),
            #[cfg(not(feature = "sqlite"))]
            StoreLocation::File(_) => Err(StoreError::NotBuiltIn { store: "SQLite", feature: "sqlite" }),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => {
                Ok(Arc::new(super::PostgresStore::open_url(url, super::PostgresOptions::default())?))
            }
        }
    }

    /// Opens the store only if it exists, and brings its schema up to date: a writer that
    /// must not leave a new store behind a mistyped path.
    pub fn open_existing(&self) -> Result<Arc<dyn SessionStore>, StoreError> {
        self.connect(Access::Existing)
    }

    /// Opens an existing store for reading only: nothing is created, migrated or written
    /// (an older schema is [`StoreError::OlderSchema`]), so readers work on a read-only file
    /// system or with a database role that may only read.
    pub fn open_read_only(&self) -> Result<Arc<dyn SessionStore>, StoreError> {
        self.connect(Access::ReadOnly)
    }

    /// The schema version this build writes to a store at this location, `None` when this
    /// build has no such store.
    pub fn schema_version(&self) -> Option<i64> {
        match self {
            #[cfg(feature = "sqlite")]
            StoreLocation::File(_) => Some(super::SCHEMA_VERSION),
            #[cfg(not(feature = "sqlite"))]
            StoreLocation::File(_) => None,
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(_) => Some(super::POSTGRES_SCHEMA_VERSION),
        }
    }

    fn connect(&self, access: Access) -> Result<Arc<dyn SessionStore>, StoreError> {
        match self {
            #[cfg(feature = "sqlite")]
            StoreLocation::File(path) => Ok(Arc::new(match access {
                Access::Create => super::SqliteStore::open(path)?,
                Access::Existing => super::SqliteStore::open_existing(path)?,
                Access::ReadOnly => super::SqliteStore::open_read_only(path)?,
            })),
            #[cfg(not(feature = "sqlite"))]
            StoreLocation::File(_) => {
                let _ = access;
                Err(StoreError::NotBuiltIn { store: "SQLite", feature: "sqlite" })
            }
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => {
                let options = super::PostgresOptions::default();
                Ok(Arc::new(match access {
                    Access::Create => super::PostgresStore::open_url(url, options)?,
                    Access::Existing => super::PostgresStore::open_existing_url(url, options)?,
                    Access::ReadOnly => super::PostgresStore::open_read_only_url(url, options)?,
                }))
            }
        }
    }
}

/// What opening a store may do to it.
#[derive(Debug, Clone, Copy)]
enum Access {
    /// Create it when missing; migrate an older schema.
    Create,
    /// Only an existing store; migrate an older schema.
    Existing,
    /// Only an existing store of this build's schema, never changed.
    ReadOnly,
}

/// Whether `text` is a PostgreSQL URL rather than a file path.
pub(crate) fn is_postgres_url(text: &str) -> bool {
    let scheme = text.get(..13).unwrap_or(text).to_ascii_lowercase();
    scheme.starts_with("postgres://") || scheme.starts_with("postgresql://")
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::File(path) => write!(f, "{}", path.display()),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => write!(f, "{url}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_urls() {
        let file = StoreLocation::parse("data/store.db").unwrap();
        assert!(matches!(&file, StoreLocation::File(path) if path == &PathBuf::from("data/store.db")));
        assert_eq!(file.to_string(), "data/store.db");
        // A file may be called anything that is not a URL.
        assert!(matches!(StoreLocation::parse("postgres.db").unwrap(), StoreLocation::File(_)));
        assert!(is_postgres_url("PostgreSQL://x/y") && !is_postgres_url("store.db") && !is_postgres_url("é"));
        #[cfg(feature = "postgres")]
        {
            let url = StoreLocation::parse("postgresql://ada:pw-secret@db.example.com/agents").unwrap();
            assert!(matches!(url, StoreLocation::Postgres(_)));
            assert_eq!(url.to_string(), "postgres://ada@db.example.com:5432/agents");
            assert!(!format!("{url:?}").contains("pw-secret"));
        }
        #[cfg(not(feature = "postgres"))]
        assert!(matches!(StoreLocation::parse("postgres://h/d"), Err(StoreError::NotBuiltIn { .. })));
    }
}
