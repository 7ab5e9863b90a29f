//! The WAL's shared-memory file (`<store>-shm`), which SQLite maps into memory. A process that
//! touches a page of it after another program truncated it is killed by SIGBUS, with nothing
//! logged. So before each use of a connection the file's size is checked, and a file that
//! shrank is grown back to the size it had: its pages read as zeros, from which SQLite rebuilds
//! the index from the WAL, as when a store is first opened. A store tampered with then fails
//! or recovers; it does not stop the process.
//!
//! What this cannot cover is a truncation during the few microseconds between the check and
//! SQLite's use of the page.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Watches the shared-memory file of one store.
#[derive(Debug)]
pub(super) struct ShmGuard {
    path: PathBuf,
    /// The largest size the file was seen at.
    seen: AtomicU64,
}

impl ShmGuard {
    /// The guard of the store at `store`.
    pub(super) fn new(store: &Path) -> ShmGuard {
        let mut path = store.as_os_str().to_owned();
        path.push("-shm");
        ShmGuard { path: PathBuf::from(path), seen: AtomicU64::new(0) }
    }

    /// Grows the file back when it is smaller than it was. A file that is gone needs nothing
    /// (the mapping outlives it), and one that cannot be written to is left as it is.
    pub(super) fn check(&self) {
        let Ok(size) = std::fs::metadata(&self.path).map(|metadata| metadata.len()) else { return };
        let seen = self.seen.fetch_max(size, Ordering::Relaxed);
        if size >= seen {
            return;
        }
        let grown = std::fs::OpenOptions::new().write(true).open(&self.path).and_then(|file| file.set_len(seen));
        match grown {
            Ok(()) => tracing::warn!(
                path = %self.path.display(),
                "the store's shared-memory file was truncated by another program; grown back to {seen} bytes"
            ),
            Err(err) => tracing::warn!(
                path = %self.path.display(),
                error = %err,
                "the store's shared-memory file was truncated by another program and cannot be grown back"
            ),
        }
    }
}
