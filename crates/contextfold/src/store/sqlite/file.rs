//! Opening the file: busy retries, read-only and immutable connections, owner-only
//! creation, and SQLite's errors as [`StoreError`]s that say what happened.

use crate::store::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a writer waits for another process's write lock before giving up.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a busy store is retried beyond SQLite's own busy timeout.
const BUSY_RETRY_FOR: Duration = Duration::from_secs(10);

/// Whether `err` says another connection holds the lock.
pub(super) fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(err.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Runs `attempt` until it is not refused as busy, for up to [`BUSY_RETRY_FOR`], with growing
/// pauses (jittered, so two waiting processes do not retry in step).
pub(super) fn retry_busy<T>(mut attempt: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
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
pub(super) fn begin_immediate(connection: &Connection) -> rusqlite::Result<Transaction<'_>> {
    retry_busy(|| Transaction::new_unchecked(connection, TransactionBehavior::Immediate))
}

/// Fails unless `path` is a file: a missing path or a directory is said as such.
pub(super) fn check_file(path: &Path) -> Result<(), StoreError> {
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_dir() => Err(StoreError::IsDirectory { path: path.to_path_buf() }),
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing { path: path.to_path_buf() }),
        Err(source) => Err(StoreError::Io { path: path.to_path_buf(), source }),
    }
}

/// A read-only connection to `path`; `immutable` also skips locking and the WAL (for a file
/// on a read-only file system).
pub(super) fn connect_read_only(path: &Path, immutable: bool) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = if immutable {
        Connection::open_with_flags(format!("file:{}?immutable=1", uri_path(path)), flags)?
    } else {
        Connection::open_with_flags(path, flags)?
    };
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // Opening is lazy: read the header now, so a file SQLite cannot read fails here.
    retry_busy(|| connection.query_row("PRAGMA user_version", [], |row| row.get::<_, i64>(0)))?;
    Ok(connection)
}

/// `path` as the path of a `file:` URI: every byte but unreserved ones and `/` escaped.
pub(super) fn uri_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(byte as char),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// Creates `path` (and its directory) with owner-only permissions when it does not exist.
pub(super) fn create_private(path: &Path) -> Result<(), StoreError> {
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

pub(super) fn sql_error(path: &Path, source: rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    // A value that cannot be read back is as much damage as a page SQLite finds broken.
    if let rusqlite::Error::Utf8Error(..)
    | rusqlite::Error::FromSqlConversionFailure(..)
    | rusqlite::Error::InvalidColumnType(..)
    | rusqlite::Error::IntegralValueOutOfRange(..) = source
    {
        return StoreError::Corrupt(format!("a stored value cannot be read ({source})"));
    }
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::NotAStore { path },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt(format!("SQLite found a broken page ({source})")),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked { path, waited: BUSY_TIMEOUT },
        _ => StoreError::Sqlite { path, source },
    }
}
