//! The proxy's store: opened once at start-up, and called only off the async runtime's
//! threads, since every store call is synchronous (a SQLite transaction, or round trips to a
//! PostgreSQL server).
//!
//! Each conversation gets a session of its own in the store, where its compactions keep the
//! client's history, every payload a pointer or clip marker names, the summaries and the
//! reports, so `contextfold sessions`, `recall` and `search` work on the proxy's store as on
//! the one `compact --store` writes.

use contextfold::store::{SessionId, SessionStore, StoreError, StoreLocation};
use std::sync::Arc;

/// The store behind the proxy.
#[derive(Clone)]
pub struct ProxyStore {
    location: StoreLocation,
    sessions: Arc<dyn SessionStore>,
}

impl std::fmt::Debug for ProxyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyStore").field("location", &self.location.to_string()).finish()
    }
}

/// A store that could not be opened, as one sentence naming it.
#[derive(Debug, thiserror::Error)]
#[error("{message}; give --store another path or URL, or --no-store to keep state in memory only")]
pub struct OpenError {
    message: String,
}

impl ProxyStore {
    /// Opens (creating when missing) the store at `location`, on a blocking thread.
    pub async fn open(location: StoreLocation) -> Result<ProxyStore, OpenError> {
        let opening = location.clone();
        let opened = off_runtime(move || opening.open()).await;
        match opened {
            Ok(sessions) => Ok(ProxyStore { location, sessions }),
            Err(err) => Err(OpenError { message: named(&location, &err) }),
        }
    }

    /// Where the store is, as messages show it (a URL without its password).
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// The store itself, for a compactor to keep its compactions in.
    pub fn sessions(&self) -> Arc<dyn SessionStore> {
        self.sessions.clone()
    }

    /// Creates a session named `name` for a new conversation.
    pub async fn create_session(&self, name: String) -> Result<SessionId, StoreError> {
        let sessions = self.sessions.clone();
        off_runtime(move || sessions.create_session(&name)).await
    }
}

/// Runs the synchronous store `call` on a blocking thread (directly when there is no runtime).
pub async fn off_runtime<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return call() };
    match runtime.spawn_blocking(call).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => Err(StoreError::Invalid(format!("the store call was cancelled: {err}"))),
    }
}

/// `err` as a sentence that names the store once.
pub fn named(location: &StoreLocation, err: &StoreError) -> String {
    match err {
        // These do not name the store themselves.
        StoreError::UnknownSession(_) | StoreError::Invalid(_) | StoreError::Corrupt(_) => {
            format!("store {location}: {err}")
        }
        err => err.to_string(),
    }
}
