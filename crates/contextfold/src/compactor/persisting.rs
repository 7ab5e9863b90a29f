//! Persisting a compaction: the history it saw (unless the session's log keeps it), each payload it removed, its summary and its
//! report, in one transaction of the store (see [`Compactor::with_store`]), written through
//! [`StoredCompaction::write`], off the async runtime's threads.

use super::report::{Compacted, CompactionReport};
use super::{CompactError, Compactor};
use crate::store::{off_runtime, Origin, Payload, SessionId, SessionStore, StoreError, StoredCompaction};
use contextfold_core::chain::strip_cache_breakpoints;
use contextfold_core::Message;
use std::sync::Arc;

/// Where a compactor keeps what it removes.
#[derive(Clone)]
pub(super) struct Persistence {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) session: SessionId,
    /// Where the conversation came from, kept as the session's metadata.
    pub(super) origin: Option<Origin>,
    /// Whether the history is the session's log, written as it grows
    /// ([`Compactor::with_session_log`]) rather than with each compaction.
    pub(super) log: bool,
}

impl CompactionReport {
    /// Every payload this compaction removed, as `session` of a store keeps them: its evicted
    /// items, then its clipped outputs.
    pub fn payloads(&self, session: &str) -> Vec<Payload> {
        Payload::removed(session, &self.items, &self.clipped)
    }
}

impl Compactor {
    /// Whether the caller's history is written to the session's log as it grows
    /// ([`Compactor::with_session_log`]).
    pub(crate) fn logs_history(&self) -> bool {
        self.persistence.as_ref().is_some_and(|persistence| persistence.log)
    }

    /// Whether a stored compaction holds the caller's whole history (a store without the
    /// session's log): [`persist`](Compactor::persist) reads all of it.
    pub(crate) fn stores_history_with_compactions(&self) -> bool {
        self.persistence.as_ref().is_some_and(|persistence| !persistence.log)
    }

    /// Writes `messages` as the session's history from position `from` on
    /// ([`SessionStore::log_messages`]), without their cache breakpoints and with their
    /// secrets masked; nothing without a store.
    pub(crate) async fn log_history(&self, from: usize, messages: &[Message]) -> Result<(), StoreError> {
        let Some(persistence) = &self.persistence else { return Ok(()) };
        let mut messages = messages.to_vec();
        for message in &mut messages {
            strip_cache_breakpoints(message);
            if let Some(redactor) = &self.redactor {
                redactor.redact_message(message);
            }
        }
        let (store, session) = (persistence.store.clone(), persistence.session.clone());
        off_runtime(move || store.log_messages(&session, from, &messages).map(drop)).await
    }

    /// Stores `compacted` with `history`, the messages as the caller has them (which may differ
    /// from the compactor's input, e.g. the middleware's working copy), when a store is set.
    pub(crate) async fn persist(&self, history: &[Message], compacted: Compacted) -> Result<Compacted, CompactError> {
        let Some(persistence) = &self.persistence else { return Ok(compacted) };
        let session = persistence.session.clone();
        let stored = match serde_json::to_value(&compacted.report) {
            Ok(report) => StoredCompaction {
                history: if persistence.log { Vec::new() } else { history.to_vec() },
                origin: persistence.origin.clone(),
                payloads: compacted.report.payloads(&session),
                summary: compacted.summary.clone(),
                report,
            },
            Err(err) => {
                let source = StoreError::Invalid(format!("the report does not serialize: {err}"));
                return Err(CompactError::Store { source, compacted: Box::new(compacted) });
            }
        };
        let (store, redactor) = (persistence.store.clone(), self.redactor.clone());
        match off_runtime(move || stored.write(store.as_ref(), &session, redactor.as_ref())).await {
            Ok(_) => Ok(compacted),
            Err(source) => Err(CompactError::Store { source, compacted: Box::new(compacted) }),
        }
    }
}
