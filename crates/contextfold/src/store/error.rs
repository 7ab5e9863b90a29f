//! The store's error type: every way a store call fails, each naming the store (its file or
//! its URL without the password) and what to do, and the checks that produce the call errors.

#[cfg(feature = "postgres")]
use super::postgres;
use super::Payload;
use std::path::PathBuf;

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file is not a SQLite database.
    #[error("{} is not a contextfold store (not a SQLite database)", .path.display())]
    NotAStore {
        /// The file.
        path: PathBuf,
    },
    /// The store uses a schema this build does not know.
    #[error(
        "store {} was written by a newer contextfold (schema {found}, this build knows {known}); upgrade contextfold",
        .path.display()
    )]
    NewerSchema {
        /// The file, or a PostgreSQL store's URL without its password.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The store was written by an older contextfold and a reader may not upgrade it.
    #[error(
        "store {} has schema {found} and this build reads schema {known}; upgrade it with `contextfold sessions upgrade --store {}` (reading commands never change a store)",
        .path.display(), .path.display()
    )]
    OlderSchema {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The version this build reads.
        known: i64,
    },
    /// The path names a directory.
    #[error("{} is a directory, not a store file; give the store's file (such as {}/store.db)", .path.display(), .path.display())]
    IsDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// The file is a SQLite database of another program.
    #[error("{} is a SQLite database of another program, not a contextfold store", .path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
    },
    /// There is no store at the path, and the caller asked not to create one.
    #[error("no store at {}", .path.display())]
    Missing {
        /// The file, or a PostgreSQL store's URL without its password.
        path: PathBuf,
    },
    /// Another process held the store's write lock for longer than the busy timeout.
    #[error("store {} is locked by another process (gave up after {} s)", .path.display(), .waited.as_secs())]
    Locked {
        /// The file.
        path: PathBuf,
        /// How long we waited.
        waited: std::time::Duration,
    },
    /// The file or its directory could not be created or read.
    #[error("cannot open store {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The session does not exist.
    #[error("no session `{0}` in the store")]
    UnknownSession(String),
    /// The call was inconsistent (a payload of another session in a compaction).
    #[error("invalid store call: {0}")]
    Invalid(String),
    /// A stored value could not be read back (a damaged store).
    #[error("damaged store: {0}")]
    Corrupt(String),
    /// The runtime shut down before the store call ran; nothing was written.
    #[error("the store call was interrupted: the async runtime shut down before it ran")]
    Interrupted,
    /// A store location names no store this build has.
    #[error("this contextfold has no {store} store (build it with the cargo feature `{feature}`)")]
    NotBuiltIn {
        /// Which store.
        store: &'static str,
        /// The feature that adds it.
        feature: &'static str,
    },
    /// A PostgreSQL store URL that cannot be used; the message never repeats the URL.
    #[cfg(feature = "postgres")]
    #[error("the store URL is not a valid PostgreSQL URL: {0}")]
    BadUrl(String),
    /// The database has a `contextfold` schema that is not a contextfold store.
    #[cfg(feature = "postgres")]
    #[error("store {server}: the database's schema `contextfold` belongs to another program; use another database")]
    ForeignSchema {
        /// The store's URL without its password.
        server: String,
    },
    /// PostgreSQL failed, or could not be reached.
    #[cfg(feature = "postgres")]
    #[error("store {server}: {}", postgres::describe(.cause))]
    Postgres {
        /// The store's URL without its password.
        server: String,
        /// The cause, told in full by this error's message (so it is not its `source`).
        cause: tokio_postgres::Error,
    },
    /// Every connection of the pool stayed busy for longer than the pool's wait.
    #[cfg(feature = "postgres")]
    #[error(
        "store {server}: all {connections} connections stayed busy for {} s; try again, or allow more connections",
        .waited.as_secs()
    )]
    PoolTimeout {
        /// The store's URL without its password.
        server: String,
        /// How long we waited.
        waited: std::time::Duration,
        /// The pool's size.
        connections: usize,
    },
    /// SQLite failed.
    #[cfg(feature = "sqlite")]
    #[error("store {}: {source}", .path.display())]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
}

/// The error of a log write that would leave a gap.
pub(crate) fn log_gap(session: &str, from: usize, stored: usize) -> StoreError {
    StoreError::Invalid(format!(
        "session {session} holds {stored} messages: its history cannot be written from position {from}"
    ))
}

/// Checks that every payload of a compaction belongs to its session.
pub(crate) fn check_payload_sessions(session: &str, payloads: &[Payload]) -> Result<(), StoreError> {
    match payloads.iter().find(|payload| payload.session != session) {
        Some(other) => Err(StoreError::Invalid(format!(
            "payload {} belongs to session `{}`, not `{session}`",
            other.reference, other.session
        ))),
        None => Ok(()),
    }
}
