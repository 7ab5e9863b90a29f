//! The store as the commands use it: opening it with errors that name the file, and
//! recording what `compact --store` and `evict --store` removed.

use crate::args::PersistArgs;
use anyhow::bail;
use contextfold::redact::Redactor;
use contextfold::store::{SessionId, SessionStore, SqliteStore, StoreError, StoredCompaction};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `err` as a one-line error that names the store file.
pub fn error(path: &Path, err: StoreError) -> anyhow::Error {
    match err {
        // These do not name the file themselves.
        StoreError::UnknownSession(_) | StoreError::Invalid(_) | StoreError::Corrupt(_) => {
            anyhow::Error::new(err).context(format!("store {}", path.display()))
        }
        err => err.into(),
    }
}

/// Opens an existing store for a reading command; a missing file stays missing.
pub fn open_existing(path: &Path) -> anyhow::Result<SqliteStore> {
    SqliteStore::open_existing(path).map_err(|err| error(path, err))
}

/// Where and how a writing command records what it removed.
pub struct Persist {
    path: PathBuf,
    store: Arc<SqliteStore>,
    session: Option<String>,
    redactor: Option<Redactor>,
}

impl PersistArgs {
    /// Opens (creating) the store when `--store` was given; `files` is the number of inputs.
    pub fn open(&self, files: usize) -> anyhow::Result<Option<Persist>> {
        let Some(path) = &self.store else {
            return Ok(None);
        };
        if self.session.is_some() && files > 1 {
            bail!("--session appends one conversation to a session (got {files} input files)");
        }
        let store = SqliteStore::open(path).map_err(|err| error(path, err))?;
        let redactor = self.redactor(false);
        Ok(Some(Persist { path: path.clone(), store: Arc::new(store), session: self.session.clone(), redactor }))
    }
}

impl PersistArgs {
    /// The redactor for what leaves the process: on unless `--no-redact`, when there is a
    /// store or the summarizer is an LLM behind an API.
    pub fn redactor(&self, llm: bool) -> Option<Redactor> {
        (!self.no_redact && (self.store.is_some() || llm)).then(Redactor::default)
    }
}

/// The session a command records one input in.
pub struct Recording {
    /// Its id.
    pub session: SessionId,
    /// Whether it was made for this input (and is deleted again when recording fails).
    created: bool,
}

impl Persist {
    /// The store, for a compactor to keep its compaction in.
    pub fn store(&self) -> Arc<dyn SessionStore> {
        self.store.clone()
    }

    /// The session `file` is recorded in: `--session`, or a new one named after the file.
    pub fn session_for(&self, file: &Path) -> anyhow::Result<Recording> {
        if let Some(id) = &self.session {
            return Ok(Recording { session: id.clone(), created: false });
        }
        let name = match file.file_name() {
            Some(name) => name.to_string_lossy().into_owned(),
            None => contextfold::input::Shown(file.to_path_buf()).to_string(),
        };
        let session = self.store.create_session(&name).map_err(|err| error(&self.path, err))?;
        Ok(Recording { session, created: true })
    }

    /// Writes `stored` into the recording's session (the way a compactor with a store does).
    pub fn keep(&self, recording: &Recording, stored: StoredCompaction) -> anyhow::Result<()> {
        let written = stored.write(self.store.as_ref(), &recording.session, self.redactor.as_ref());
        written.map(drop).map_err(|err| self.failed(recording, err))
    }

    /// `err` naming the store, after deleting the session made for the failed recording so
    /// that a failure leaves nothing behind.
    pub fn failed(&self, recording: &Recording, err: StoreError) -> anyhow::Error {
        self.forget(recording);
        error(&self.path, err)
    }

    /// Deletes the session made for a recording that failed (a session given with
    /// `--session` stays).
    pub fn forget(&self, recording: &Recording) {
        if recording.created {
            // Best effort: the error that matters is the one that made us forget.
            let _ = self.store.delete_session(&recording.session);
        }
    }
}
