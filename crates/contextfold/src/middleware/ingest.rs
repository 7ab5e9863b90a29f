//! Ingest: how the caller's history enters the working copy. New messages are appended (their
//! large tool outputs clipped when `clip_on_ingest` is set, the full outputs stored), anything
//! that does not continue the copy starts it over, and the store's session log is kept up to
//! date.

use super::state::State;
use super::{CompactionMiddleware, History, HistoryError};
use crate::store::{off_runtime, Payload, StoreError};
use contextfold_core::clip::{clip, ClipConfig, Clipped};
use contextfold_core::{Conversation, Message, Role};
use std::sync::Arc;

impl CompactionMiddleware {
    /// Brings the working copy up to date with `history`: appends what is new when it
    /// continues the messages the working copy covers, every one of them as it was, or starts
    /// over. Reads the history only from where it needs to. Returns why the store failed, if
    /// it did, or which message could not be read (the state is then as it was).
    pub(super) async fn sync(
        &self,
        state: &mut State,
        history: &dyn History,
    ) -> Result<Option<StoreError>, HistoryError> {
        let chain = history.chain();
        let extends = state.source_len > 0 && chain.prefix(state.source_len) == Some(state.source_chain);
        // Where the messages it reads start: what a snapshot left out, what is new, and what
        // the store's log lacks.
        let mut from = if extends { state.source_len } else { 0 };
        if extends && state.lacks_history() {
            from = from.min(state.compacted_source);
        }
        if self.compactor.logs_history() {
            from = from.min(state.logged);
        }
        let read = history.messages_from(from)?;
        if read.len() != history.len().saturating_sub(from) {
            let why = format!("{} messages were given where {} follow", read.len(), history.len().saturating_sub(from));
            return Err(HistoryError { index: from, why });
        }
        let since = |index: usize| read.get(index.saturating_sub(from)..).unwrap_or(&[]);
        if extends && state.lacks_history() {
            // What a snapshot leaves out, ingested as the first time (its clipped outputs
            // were stored then).
            let left_out = &since(state.compacted_source)[..state.source_len - state.compacted_source];
            let (rest, _) = self.clip_incoming(left_out.to_vec());
            Arc::make_mut(&mut state.working).extend(rest);
        }
        let new = if extends {
            since(state.source_len)
        } else {
            state.working = Arc::new(Vec::new());
            state.compacted = 0;
            state.made = super::state::next_made();
            state.compacted_source = 0;
            state.full_summary = None;
            state.turns_since = 0;
            state.logged = 0;
            &read[..]
        };
        let (added, store_error) = self.clip_ingested(new.to_vec(), history.len() - new.len()).await;
        state.turns_since += added.iter().filter(|message| message.role == Role::User && message.is_authored()).count();
        if !added.is_empty() {
            Arc::make_mut(&mut state.working).extend(added);
        }
        state.source_len = history.len();
        state.source_chain = chain.last();
        if extends {
            state.ledger.sync(&state.working);
        } else {
            state.ledger.resync(&state.working);
        }
        let unlogged = since(state.logged);
        Ok(store_error.or(self.log(state, unlogged).await))
    }

    /// Writes `unlogged`, the messages of the caller's history from `state.logged` on, to the
    /// store's session log, when the compactor keeps one: the new ones, on a call that
    /// continues the last. On failure the log is written again from the start next time (each
    /// message in its place, so nothing is stored twice).
    async fn log(&self, state: &mut State, unlogged: &[Message]) -> Option<StoreError> {
        if !self.compactor.logs_history() || unlogged.is_empty() {
            return None;
        }
        match self.compactor.log_history(state.logged, unlogged).await {
            Ok(()) => {
                state.logged = state.source_len;
                None
            }
            Err(error) => {
                tracing::warn!(error = %error, "contextfold could not write the history to the store's session log");
                state.logged = 0;
                Some(error)
            }
        }
    }

    /// `messages`, the caller's history from position `offset` on, with tool outputs over
    /// `clip_on_ingest` clipped (unchanged when it is off; the full outputs are stored under
    /// their place in the history), and why the store failed to keep them, if it did.
    pub(super) async fn clip_ingested(
        &self,
        messages: Vec<Message>,
        offset: usize,
    ) -> (Vec<Message>, Option<StoreError>) {
        let (messages, mut clipped) = self.clip_incoming(messages);
        clipped.iter_mut().for_each(|item| item.message += offset);
        let error = self.store_clipped(clipped).await;
        (messages, error)
    }

    /// `messages` with tool outputs over `clip_on_ingest` clipped, and what was clipped (by
    /// index in `messages`).
    pub(super) fn clip_incoming(&self, messages: Vec<Message>) -> (Vec<Message>, Vec<Clipped>) {
        let Some(limit) = self.config.clip_on_ingest else { return (messages, Vec::new()) };
        let mut incoming = Conversation { messages, ..Conversation::default() };
        let config = ClipConfig {
            preset: self.config.compact.evict.preset,
            recall_tool: self.recall_tool(),
            ..ClipConfig::new(limit)
        };
        let clipped = clip(&mut incoming, &config, self.compactor.counter());
        (incoming.messages, clipped)
    }

    /// Stores the full outputs of `clipped`, when a store is set; returns why it failed.
    async fn store_clipped(&self, clipped: Vec<Clipped>) -> Option<StoreError> {
        let (store, session) = self.compactor.store()?;
        if clipped.is_empty() {
            return None;
        }
        let payloads: Vec<Payload> = clipped.iter().map(|item| Payload::from_clipped(session, item)).collect();
        let stored = off_runtime(move || payloads.iter().try_for_each(|payload| store.put_payload(payload).map(drop)));
        let error = stored.await.err()?;
        tracing::warn!(error = %error, "contextfold could not store a clipped output");
        Some(error)
    }
}
