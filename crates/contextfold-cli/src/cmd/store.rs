//! The store as the commands use it: where it is (`--store`, `CONTEXTFOLD_STORE_URL`, the
//! default file), opening it with errors that name it, and recording what `compact --store`
//! and `evict --store` removed.

use crate::args::{PersistArgs, StoreArgs, DEFAULT_STORE, STORE_VARIABLE};
use anyhow::bail;
use contextfold::redact::Redactor;
use contextfold::store::{record, Compaction, Destination, SessionId, SessionStore, StoreError, StoreLocation};
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
        record(self.store.as_ref(), destination, compaction, self.redactor.as_ref())
            .map_err(|err| error(&self.location, err))
    }
}
