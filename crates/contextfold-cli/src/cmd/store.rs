//! The store as the commands use it: where it is (`--store`, `CONTEXTFOLD_STORE_URL`, the
//! default file), opening it with errors that name it, and recording what `compact --store`
//! and `evict --store` removed.

use crate::args::{PersistArgs, StoreArgs, DEFAULT_STORE, STORE_VARIABLE};
use anyhow::bail;
use contextfold::redact::Redactor;
use contextfold::store::{SessionId, SessionStore, StoreError, StoreLocation, StoredCompaction};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The store `given` names, else the one `CONTEXTFOLD_STORE_URL` names, else the default file.
pub fn location(given: Option<&Path>) -> anyhow::Result<StoreLocation> {
    let text: OsString = match given {
        Some(path) => path.as_os_str().to_owned(),
        None => std::env::var_os(STORE_VARIABLE).filter(|value| !value.is_empty()).unwrap_or(DEFAULT_STORE.into()),
    };
    match text.to_str() {
        Some(text) => Ok(StoreLocation::parse(text)?),
        // Not UTF-8, so not a URL.
        None => Ok(StoreLocation::File(PathBuf::from(text))),
    }
}

/// `err` as one sentence that names the store and, where it helps, what to do.
pub fn error(location: &StoreLocation, err: StoreError) -> anyhow::Error {
    match err {
        StoreError::Corrupt(detail) => match location {
            StoreLocation::File(path) => anyhow::anyhow!(
                "the store {location} is damaged: {detail}; check it with `sqlite3 {} \"PRAGMA integrity_check\"` \
                 and restore it from a copy",
                path.display()
            ),
            _ => anyhow::anyhow!("the store {location} is damaged: {detail}; restore it from a backup"),
        },
        StoreError::UnknownSession(id) => {
            anyhow::anyhow!(
                "no session `{id}` in store {location} (`contextfold sessions --store {location}` lists them)"
            )
        }
        StoreError::Invalid(detail) => anyhow::anyhow!("store {location}: {detail}"),
        // Said once: rusqlite's error restates SQLite's message with its code as its source.
        StoreError::Sqlite { source, .. } => anyhow::anyhow!("store {location}: SQLite failed: {source}"),
        err => err.into(),
    }
}

impl StoreArgs {
    /// Opens the existing store for a reading command: read-only, never created or migrated.
    pub fn open_read_only(&self) -> anyhow::Result<(StoreLocation, Arc<dyn SessionStore>)> {
        let location = location(self.store.as_deref())?;
        let store = location.open_read_only().map_err(|err| error(&location, err))?;
        Ok((location, store))
    }

    /// Opens the existing store for a command that changes it (and upgrades its schema).
    pub fn open_existing(&self) -> anyhow::Result<(StoreLocation, Arc<dyn SessionStore>)> {
        let location = location(self.store.as_deref())?;
        let store = location.open_existing().map_err(|err| error(&location, err))?;
        Ok((location, store))
    }
}

/// Where and how a writing command records what it removed.
pub struct Persist {
    location: StoreLocation,
    store: Arc<dyn SessionStore>,
    session: Option<String>,
    redactor: Option<Redactor>,
}

impl PersistArgs {
    /// Opens (creating) the store when `--store` was given; `files` is the number of inputs.
    pub fn open(&self, files: usize) -> anyhow::Result<Option<Persist>> {
        let Some(given) = &self.store else {
            return Ok(None);
        };
        if self.session.is_some() && files > 1 {
            bail!("--session appends one conversation to a session (got {files} input files)");
        }
        let location = location(given.as_deref())?;
        let store = location.open().map_err(|err| error(&location, err))?;
        let redactor = self.redactor(false);
        Ok(Some(Persist { location, store, session: self.session.clone(), redactor }))
    }
}

impl PersistArgs {
    /// The recall tool pointers name: `context_recall` with `--recall-tool`.
    pub fn recall_tool_name(&self) -> Option<String> {
        self.recall_tool.then(|| contextfold::store::RECALL_TOOL_NAME.to_string())
    }

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
        let session = self.store.create_session(&name).map_err(|err| error(&self.location, err))?;
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
        error(&self.location, err)
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
