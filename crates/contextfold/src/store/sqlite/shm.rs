//! The WAL's shared-memory file (`<store>-shm`), which SQLite maps into memory. A process that
//! touches a page of it after another program truncated it is killed by SIGBUS, with nothing
//! logged. So before each use of a connection the file's size is checked, and a file that
//! shrank is grown back to the size it had: its pages read as zeros, from which SQLite rebuilds
//! the index from the WAL, as when a store is first opened. A store tampered with then fails
//! or recovers; it does not stop the process.
//!
//! What the check cannot cover is a truncation between it and SQLite's use of the page; a
//! process that handles SIGBUS on the mapping grows the file back there and says so with
//! [`note_grown_back`].
//!
//! A write transaction that a truncation lands in is what damages a store: its commit would
//! write a valid index header over index pages that now read as zeros, and later readers,
//! trusting the header, would miss pages of the WAL. So `SqliteStore::write` rolls back a
//! transaction a truncation landed in before its commit, and invalidates the header after a
//! commit one landed in, so that the next use rebuilds the index from the WAL.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// How many times this process found each shared-memory file truncated and grew it back, by
/// the store's path: every handle on one file counts in the same place, so a write sees a
/// truncation another handle grew back, and a truncation of another store's file is not its.
static GROWN_BACK: LazyLock<Mutex<HashMap<PathBuf, Arc<AtomicU64>>>> = LazyLock::new(Default::default);

/// How many times a SIGBUS handler of this process grew a shared-memory file back; it cannot
/// say which file, so a write counts each one as landing in its own.
static SIGNALLED: AtomicU64 = AtomicU64::new(0);

/// The two copies of the WAL index's header, at the start of the file: when both read as
/// zeros, SQLite rebuilds the index from the WAL before it next reads.
const INDEX_HEADER: usize = 96;

/// Says that a shared-memory file was found truncated and grown back outside the guard (by a
/// SIGBUS handler); only an atomic increment, so it may be called from a signal handler.
pub fn note_grown_back() {
    SIGNALLED.fetch_add(1, Ordering::Relaxed);
}

/// Watches the shared-memory file of one store.
#[derive(Debug)]
pub(super) struct ShmGuard {
    path: PathBuf,
    /// The largest size the file was seen at.
    seen: AtomicU64,
    /// How many times the file was grown back (shared by every guard of the same store).
    grown: Arc<AtomicU64>,
}

/// The truncations found before a write, to compare with those found after
/// ([`ShmGuard::truncated_since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    grown: u64,
    signalled: u64,
}

impl ShmGuard {
    /// The guard of the store at `store`.
    pub(super) fn new(store: &Path) -> ShmGuard {
        let mut path = store.as_os_str().to_owned();
        path.push("-shm");
        // The store's file exists once it is open; its canonical path names it however it
        // was reached.
        let file = std::fs::canonicalize(store).unwrap_or_else(|_| store.to_path_buf());
        let mut counts = GROWN_BACK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let grown = counts.entry(file).or_default().clone();
        ShmGuard { path: PathBuf::from(path), seen: AtomicU64::new(0), grown }
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
            Ok(()) => {
                self.grown.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    path = %self.path.display(),
                    "the store's shared-memory file was truncated by another program; grown back to {seen} bytes"
                )
            }
            Err(err) => tracing::warn!(
                path = %self.path.display(),
                error = %err,
                "the store's shared-memory file was truncated by another program and cannot be grown back"
            ),
        }
    }

    /// A mark to pass to [`ShmGuard::truncated_since`]; taken right after a
    /// [`check`](ShmGuard::check), so that it counts every truncation found before.
    pub(super) fn mark(&self) -> Mark {
        Mark { grown: self.grown.load(Ordering::Relaxed), signalled: SIGNALLED.load(Ordering::Relaxed) }
    }

    /// Whether this store's shared-memory file was found truncated since `mark` (checking it
    /// now), or a SIGBUS handler grew back a file that may be it.
    pub(super) fn truncated_since(&self, mark: Mark) -> bool {
        self.check();
        self.mark() != mark
    }

    /// Zeroes the index's header, so that whoever reads next rebuilds the index from the WAL.
    pub(super) fn invalidate_index(&self) {
        let zeroed = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .and_then(|file| file.write_all_at(&[0; INDEX_HEADER], 0));
        match zeroed {
            Ok(()) => tracing::warn!(
                path = %self.path.display(),
                "a write met a truncated shared-memory file; its index is rebuilt from the WAL at the next use"
            ),
            Err(err) => tracing::warn!(
                path = %self.path.display(),
                error = %err,
                "a write met a truncated shared-memory file, whose index could not be reset"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::SqliteStore;
    use crate::store::{SessionStore, StoreError};

    /// A write a truncation lands in is rolled back, saying why; the store goes on, and a
    /// process that opens it afterwards reads what was committed, whole.
    #[test]
    fn a_write_a_truncation_lands_in_is_rolled_back() {
        let dir = std::env::temp_dir().join(format!("contextfold-shm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("store.db");
        let store = SqliteStore::open(&path).unwrap();
        let kept = store.create_session("kept").unwrap();
        let shm = dir.join("store.db-shm");
        let written = store.write(|transaction| {
            transaction.execute("INSERT INTO sessions (id, name, created) VALUES ('lost', 'lost', 0)", []).unwrap();
            std::fs::OpenOptions::new().write(true).open(&shm).and_then(|file| file.set_len(0)).unwrap();
            Ok(())
        });
        let Err(StoreError::Invalid(why)) = written else { panic!("{written:?}") };
        assert!(why.contains("store.db") && why.contains("rolled back"), "{why}");
        let later = store.create_session("later").unwrap();
        let listed = |store: &SqliteStore| -> Vec<String> {
            store.sessions().unwrap().into_iter().map(|session| session.id).collect()
        };
        assert_eq!(listed(&store), [kept.clone(), later.clone()]);
        let reader = SqliteStore::open_read_only(&path).unwrap();
        assert_eq!(listed(&reader), [kept, later]);
        drop((reader, store));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A truncation of another store's file, grown back during a write, is not this store's:
    /// the write commits. One of the same file, grown back by another handle on it, is.
    #[test]
    fn only_a_truncation_of_its_own_file_rolls_a_write_back() {
        let dir = std::env::temp_dir().join(format!("contextfold-shm-own-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ours = SqliteStore::open(dir.join("ours.db")).unwrap();
        let theirs = SqliteStore::open(dir.join("theirs.db")).unwrap();
        let other = SqliteStore::open(dir.join("ours.db")).unwrap();
        theirs.create_session("theirs").unwrap();
        other.sessions().unwrap();
        let truncate = |name: &str| {
            std::fs::OpenOptions::new().write(true).open(dir.join(name)).and_then(|file| file.set_len(0)).unwrap();
        };
        let written = ours.write(|transaction| {
            transaction.execute("INSERT INTO sessions (id, name, created) VALUES ('kept', 'kept', 0)", []).unwrap();
            truncate("theirs.db-shm");
            theirs.sessions().unwrap();
            Ok(())
        });
        assert!(written.is_ok(), "{written:?}");
        let written = ours.write(|transaction| {
            transaction.execute("INSERT INTO sessions (id, name, created) VALUES ('lost', 'lost', 0)", []).unwrap();
            truncate("ours.db-shm");
            // The other handle's check before it uses its connection (SQLite would refuse
            // that read, the index being another connection's to rebuild mid-write).
            other.shm.check();
            Ok(())
        });
        assert!(matches!(written, Err(StoreError::Invalid(_))), "{written:?}");
        let listed: Vec<String> = ours.sessions().unwrap().into_iter().map(|session| session.id).collect();
        assert_eq!(listed, ["kept"]);
        drop((ours, theirs, other));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
