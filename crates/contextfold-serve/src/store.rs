//! The proxy's store: opened once at start-up, and called only off the async runtime's
//! threads, since every store call is synchronous (a SQLite transaction, or round trips to a
//! PostgreSQL server).
//!
//! Each conversation gets a session of its own in the store, where its compactions keep the
//! client's history, every payload a pointer or clip marker names, the summaries and the
//! reports, so `contextfold sessions`, `recall` and `search` work on the proxy's store as on
//! the one `compact --store` writes.
//!
//! A store that fails (a database that went away) does not stop the proxy: requests go on
//! from what memory holds, and the failure is logged when it starts and then at most once a
//! minute while it lasts, not once per request; the first call that works again says so, at
//! most once a minute too (a store that fails and works by turns is not a log flood).

use contextfold::store::{
    off_runtime, ConversationStore, Put, SessionId, SessionStore, StateLock, StoreError, StoreLocation, StoredState,
};
use prometheus_client::metrics::counter::Counter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a store that keeps failing is logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The store behind the proxy.
#[derive(Clone)]
pub struct ProxyStore {
    location: StoreLocation,
    store: Arc<dyn ConversationStore>,
    health: Arc<Health>,
}

/// The store's failures since it last worked, and what of them was logged when.
#[derive(Debug, Default)]
struct Health {
    failures: AtomicU64,
    /// Every failure, for the metrics.
    errors: Counter,
    logged: Mutex<Logged>,
}

/// When the store was last said to fail and to work again, and whether a failure was said
/// since it was last said to work: a store that fails and works by turns is logged at most
/// once a minute each way.
#[derive(Debug, Default)]
struct Logged {
    failing: Option<Instant>,
    working: Option<Instant>,
    failure_said: bool,
}

impl Health {
    fn failed(&self, doing: &str, error: &str) {
        self.errors.inc();
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let mut logged = self.logged.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if logged.failing.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            logged.failing = Some(Instant::now());
            logged.failure_said = true;
            tracing::warn!(
                error,
                failures,
                "contextfold serve: the store failed {doing}; requests go on from memory and their state is not \
                 stored until it works again (logged at most once a minute)"
            );
        }
    }

    fn worked(&self) {
        if self.failures.load(Ordering::Relaxed) == 0 {
            return;
        }
        let failures = self.failures.swap(0, Ordering::Relaxed);
        let mut logged = self.logged.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if failures > 0 && logged.failure_said && logged.working.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            logged.working = Some(Instant::now());
            logged.failure_said = false;
            tracing::info!(failures, "contextfold serve: the store works again");
        }
    }
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
    /// Opens (creating when missing) the store at `location`, on a blocking thread; its
    /// failures are added to `errors`.
    pub async fn open(location: StoreLocation, errors: Counter) -> Result<ProxyStore, OpenError> {
        #[cfg(target_os = "linux")]
        if matches!(location, StoreLocation::File(_)) {
            crate::shm_fault::install();
        }
        let opening = location.clone();
        let opened = off_runtime(move || opening.open_conversations()).await;
        match opened {
            Ok(store) => {
                let health = Health { errors, ..Health::default() };
                Ok(ProxyStore { location, store, health: Arc::new(health) })
            }
            Err(err) => Err(OpenError { message: named(&location, &err) }),
        }
    }

    /// Where the store is, as messages show it (a URL without its password).
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// The store itself, for a compactor to keep its compactions in.
    pub fn sessions(&self) -> Arc<dyn SessionStore> {
        self.store.clone()
    }

    /// Creates a session named `name` for a new conversation.
    pub async fn create_session(&self, name: String) -> Result<SessionId, StoreError> {
        let store = self.store.clone();
        self.noted("creating a conversation's session", off_runtime(move || store.create_session(&name)).await)
    }

    /// Deletes a session made for a conversation another replica had started first.
    pub async fn delete_session(&self, session: SessionId) -> Result<bool, StoreError> {
        let store = self.store.clone();
        self.noted("deleting a session", off_runtime(move || store.delete_session(&session)).await)
    }

    /// Deletes the sessions (and conversation states) not written since `before` (seconds
    /// since the Unix epoch); returns how many sessions.
    pub async fn prune(&self, before: u64) -> Result<usize, StoreError> {
        let store = self.store.clone();
        let pruned = off_runtime(move || store.prune(before).map(|deleted| deleted.len())).await;
        self.noted("deleting old sessions", pruned)
    }

    /// Takes conversation `key`'s lock, waiting for any other replica that holds it.
    pub async fn lock(&self, key: &str) -> Result<StateLock, StoreError> {
        let (store, key) = (self.store.clone(), key.to_string());
        self.noted("taking a conversation's lock", off_runtime(move || store.lock_state(&key)).await)
    }

    /// The version of conversation `key`'s stored state (0: none).
    pub async fn version(&self, key: &str) -> Result<u64, StoreError> {
        let (store, key) = (self.store.clone(), key.to_string());
        self.noted("reading a conversation's state version", off_runtime(move || store.state_version(&key)).await)
    }

    /// Conversation `key`'s stored state.
    pub async fn load(&self, key: &str) -> Result<Option<StoredState>, StoreError> {
        let (store, key) = (self.store.clone(), key.to_string());
        self.noted("reading a conversation's state", off_runtime(move || store.state(&key)).await)
    }

    /// Writes conversation `key`'s state over version `expected`.
    pub async fn save(&self, key: &str, expected: u64, bytes: Vec<u8>) -> Result<Put, StoreError> {
        let (store, key) = (self.store.clone(), key.to_string());
        self.noted("writing a conversation's state", off_runtime(move || store.put_state(&key, expected, &bytes)).await)
    }

    /// Records a model call of `session`.
    pub async fn put_call(&self, session: SessionId, call: serde_json::Value) -> Result<(), StoreError> {
        let store = self.store.clone();
        self.noted("recording a call", off_runtime(move || store.put_call(&session, &call)).await)
    }

    /// Whether the store answers a trivial query (the version of a key no conversation has).
    pub async fn answers(&self) -> Result<(), StoreError> {
        let store = self.store.clone();
        let answered = off_runtime(move || store.state_version("contextfold-ready-probe")).await;
        self.noted("answering the readiness probe", answered).map(|_| ())
    }

    /// `result`, its failure logged (at most once a minute while the store fails).
    fn noted<T>(&self, doing: &str, result: Result<T, StoreError>) -> Result<T, StoreError> {
        #[cfg(target_os = "linux")]
        if crate::shm_fault::take_recovered() > 0 {
            tracing::warn!(
                "contextfold serve: the store's shared-memory file was truncated by another program and was grown back ({})",
                self.location
            );
        }
        match &result {
            Ok(_) => self.health.worked(),
            Err(err) => self.health.failed(doing, &named(&self.location, err)),
        }
        result
    }
}

/// `err` as a sentence that names the store once.
pub fn named(location: &StoreLocation, err: &StoreError) -> String {
    match err {
        // These do not name the store themselves.
        StoreError::UnknownSession(_) | StoreError::Invalid(_) | StoreError::Corrupt(_) | StoreError::Interrupted => {
            format!("store {location}: {err}")
        }
        err => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_store_that_fails_and_works_by_turns_is_logged_once_each_way() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, || {
            let health = Health::default();
            for _ in 0..50 {
                health.failed("writing", "disk full");
                health.failed("writing", "disk full");
                health.worked();
            }
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches("the store failed").count(), 1, "{text}");
        assert_eq!(text.matches("the store works again").count(), 1, "{text}");
    }
}
