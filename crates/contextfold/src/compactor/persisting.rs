//! Persisting a compaction: the history it saw, each payload it removed, its summary and its
//! report, in one transaction of the store (see [`Compactor::with_store`]), written through
//! [`StoredCompaction::write`], off the async runtime's threads.

use super::report::{Compacted, CompactionReport};
use super::{CompactError, Compactor};
use crate::store::{off_runtime, Origin, Payload, SessionId, SessionStore, StoreError, StoredCompaction};
use contextfold_core::Message;
use std::sync::Arc;

/// Where a compactor keeps what it removes.
#[derive(Clone)]
pub(super) struct Persistence {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) session: SessionId,
    /// Where the conversation came from, kept as the session's metadata.
    pub(super) origin: Option<Origin>,
}

impl CompactionReport {
    /// Every payload this compaction removed, as `session` of a store keeps them: its evicted
    /// items, then its clipped outputs.
    pub fn payloads(&self, session: &str) -> Vec<Payload> {
        (self.items.iter().map(|item| Payload::from_offload(session, item)))
            .chain(self.clipped.iter().map(|item| Payload::from_clipped(session, item)))
            .collect()
    }
}

impl Compactor {
    /// Stores `compacted` with `history`, the messages as the caller has them (which may differ
    /// from the compactor's input, e.g. the middleware's working copy), when a store is set.
    pub(crate) async fn persist(&self, history: &[Message], compacted: Compacted) -> Result<Compacted, CompactError> {
        let Some(persistence) = &self.persistence else { return Ok(compacted) };
        let session = persistence.session.clone();
        let stored = match serde_json::to_value(&compacted.report) {
            Ok(report) => StoredCompaction {
                history: history.to_vec(),
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
