//! The store as the commands use it: opening it with errors that name the file, and
//! recording what `compact --store` and `evict --store` removed.

use crate::args::PersistArgs;
use anyhow::bail;
use contextfold::redact::Redactor;
use contextfold::store::{record, Compaction, Destination, SessionId, SqliteStore, StoreError};
use std::path::{Path, PathBuf};

/// `err` as one sentence that names the store file and, where it helps, what to do.
pub fn error(path: &Path, err: StoreError) -> anyhow::Error {
    let path = path.display();
    match err {
        StoreError::Corrupt(detail) => anyhow::anyhow!(
            "the store {path} is damaged: {detail}; check it with `sqlite3 {path} \"PRAGMA integrity_check\"` and \
             restore it from a copy"
        ),
        StoreError::UnknownSession(id) => {
            anyhow::anyhow!("no session `{id}` in store {path} (`contextfold sessions --store {path}` lists them)")
        }
        StoreError::Invalid(detail) => anyhow::anyhow!("store {path}: {detail}"),
        // Said once: rusqlite's error restates SQLite's message with its code as its source.
        StoreError::Sqlite { source, .. } => anyhow::anyhow!("store {path}: SQLite failed: {source}"),
        err => err.into(),
    }
}

/// Opens an existing store for a reading command: read-only, never created or migrated.
pub fn open_read_only(path: &Path) -> anyhow::Result<SqliteStore> {
    SqliteStore::open_read_only(path).map_err(|err| error(path, err))
}

/// Opens an existing store for a command that changes it (and upgrades its schema).
pub fn open_existing(path: &Path) -> anyhow::Result<SqliteStore> {
    SqliteStore::open_existing(path).map_err(|err| error(path, err))
}

/// Where and how a writing command records what it removed.
pub struct Persist {
    path: PathBuf,
    store: SqliteStore,
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
        Ok(Some(Persist { path: path.clone(), store, session: self.session.clone(), redactor }))
    }
}

impl PersistArgs {
    /// The redactor for what leaves the process: on unless `--no-redact`, when there is a
    /// store or the summarizer is an LLM behind an API.
    pub fn redactor(&self, llm: bool) -> Option<Redactor> {
        (!self.no_redact && (self.store.is_some() || llm)).then(Redactor::default)
    }
}

impl Persist {
    /// Records one compaction of `file`: into `--session`, or a new session named after
    /// the file. Returns the session's id.
    pub fn record(&self, file: &Path, compaction: &Compaction<'_>) -> anyhow::Result<SessionId> {
        let name = match file.file_name() {
            Some(name) => name.to_string_lossy().into_owned(),
            None => contextfold::input::Shown(file.to_path_buf()).to_string(),
        };
        let destination = match &self.session {
            Some(id) => Destination::Existing(id),
            None => Destination::New(&name),
        };
        record(&self.store, destination, compaction, self.redactor.as_ref()).map_err(|err| error(&self.path, err))
    }
}
