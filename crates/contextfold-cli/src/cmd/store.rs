//! The store as the commands use it: opening it with errors that name the file, and
//! recording what `compact --store` and `evict --store` removed.

use crate::args::PersistArgs;
use anyhow::bail;
use contextfold::redact::Redactor;
use contextfold::store::{record, Compaction, Destination, SessionId, SqliteStore, StoreError};
use std::path::{Path, PathBuf};

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
