//! The middleware reading the caller's history only where it needs it ([`History`]): it sends
//! what it sends when given every message, reads only the new messages on a call that
//! continues the last without compacting and only the originals it folds on one that
//! compacts, and a history it cannot read goes out as the working copy was, with the error,
//! and the next call starts afresh.

use crate::common::session;
use crate::middleware::{call_points, json};
use contextfold::compactor::Compactor;
use contextfold::core::{HistoryChain, Message};
use contextfold::middleware::{CompactionMiddleware, History, HistoryError, MiddlewareConfig, PrepareError, Whole};
use contextfold::store::{MemoryStore, SessionStore};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// A history that records where each read started, and fails for reads before `unreadable`.
struct Watched<'a> {
    whole: Whole<'a>,
    reads: Mutex<Vec<usize>>,
    unreadable: usize,
}

impl<'a> Watched<'a> {
    fn new(messages: &'a [Message], chain: &'a HistoryChain, unreadable: usize) -> Watched<'a> {
        Watched { whole: Whole::new(messages, chain), reads: Mutex::default(), unreadable }
    }

    /// The first message any read asked for.
    fn earliest(&self) -> Option<usize> {
        self.reads.lock().unwrap().iter().copied().min()
    }
}

impl History for Watched<'_> {
    fn len(&self) -> usize {
        self.whole.len()
    }

    fn chain(&self) -> &HistoryChain {
        self.whole.chain()
    }

    fn messages_from(&self, from: usize) -> Result<Cow<'_, [Message]>, HistoryError> {
        self.reads.lock().unwrap().push(from);
        if from < self.unreadable {
            return Err(HistoryError { index: from, why: "not at hand".into() });
        }
        self.whole.messages_from(from)
    }
}

/// A middleware keeping its compactions and the session's log in `store`.
fn logging(store: &Arc<MemoryStore>, window: u64) -> CompactionMiddleware {
    let session = store.create_session("lazy").expect("a session");
    let compactor = Compactor::default().with_store(store.clone(), session).with_session_log();
    CompactionMiddleware::new(compactor, MiddlewareConfig::new(window, window / 8))
}

#[test]
fn reading_only_where_it_needs_sends_what_reading_everything_sends() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(9, 3, 40).messages;
    let (eager_store, lazy_store) = (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()));
    let (eager, lazy) = (logging(&eager_store, 7_000), logging(&lazy_store, 7_000));
    let (mut compactions, mut last) = (0, 0);
    for end in call_points(&history) {
        let messages = &history[..end];
        let chain = HistoryChain::of(messages);
        let watched = Watched::new(messages, &chain, 0);
        let a = runtime.block_on(eager.prepare(messages, &[]));
        let b = runtime.block_on(lazy.prepare_history(&watched, &[]));
        assert_eq!(json(&a.messages()), json(&b.messages()), "call at {end}");
        assert_eq!((a.request_tokens, a.unchanged_tail), (b.request_tokens, b.unchanged_tail), "call at {end}");
        assert!(b.error.is_none(), "{:?}", b.error);
        if b.event.is_none() {
            assert_eq!(watched.earliest(), Some(last), "a call at {end} without a compaction reads only what is new");
        }
        compactions += usize::from(b.event.is_some());
        last = end;
    }
    assert!(compactions >= 2, "{compactions} compactions");
    let (eager_session, lazy_session) = (&eager_store.sessions().unwrap()[0].id, &lazy_store.sessions().unwrap()[0].id);
    assert_eq!(json(&eager_store.export(eager_session).unwrap()), json(&lazy_store.export(lazy_session).unwrap()));
    assert_eq!(lazy_store.export(lazy_session).unwrap().len(), last, "the log holds each message once");
}

#[test]
fn a_restored_middleware_reads_back_only_what_its_snapshot_left_out() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(8, 3, 40).messages;
    let config = MiddlewareConfig::new(7_000, 900);
    let original = CompactionMiddleware::new(Compactor::default(), config.clone());
    let calls = call_points(&history);
    let mut split = None;
    for (at, &end) in calls.iter().enumerate() {
        let prepared = runtime.block_on(original.prepare(&history[..end], &[]));
        if prepared.event.is_some() && at + 2 < calls.len() {
            split = Some(at);
            break;
        }
    }
    let split = split.expect("a compaction before the last calls");
    let state = runtime.block_on(original.snapshot());
    let from = state.history_from();
    let restored = CompactionMiddleware::restore(Compactor::default(), config, state).unwrap();
    for (index, &end) in calls.iter().enumerate().skip(split + 1) {
        let messages = &history[..end];
        let chain = HistoryChain::of(messages);
        let watched = Watched::new(messages, &chain, 0);
        let a = runtime.block_on(original.prepare(messages, &[]));
        let b = runtime.block_on(restored.prepare_history(&watched, &[]));
        assert_eq!(json(&a.messages()), json(&b.messages()), "call at {end}");
        if index == split + 1 {
            assert_eq!(watched.earliest(), Some(from), "the first call after a restore reads from the snapshot's end");
        }
    }
}

#[test]
fn a_history_it_cannot_read_goes_out_as_the_working_copy_was_and_the_next_call_starts_afresh() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(4, 2, 10).messages;
    let calls = call_points(&history);
    let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(200_000, 8_000));
    let first = &history[..calls[1]];
    let sent = runtime.block_on(middleware.prepare(first, &[])).messages();

    // A history that cannot give its new messages.
    let next = &history[..calls[2]];
    let chain = HistoryChain::of(next);
    let broken = Watched::new(next, &chain, next.len());
    let prepared = runtime.block_on(middleware.prepare_history(&broken, &[]));
    let Some(PrepareError::History(error)) = &prepared.error else { panic!("{:?}", prepared.error) };
    assert_eq!(error.index, first.len());
    assert!(error.to_string().contains(&format!("message {}", first.len())), "{error}");
    assert_eq!(json(&prepared.messages()), json(&sent), "the working copy as it was");

    // The next call reads every message again, and sends what a new middleware would.
    let whole = Watched::new(next, &chain, 0);
    let again = runtime.block_on(middleware.prepare_history(&whole, &[]));
    assert_eq!(whole.earliest(), Some(0));
    let fresh = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(200_000, 8_000));
    assert_eq!(json(&again.messages()), json(&runtime.block_on(fresh.prepare(next, &[])).messages()));
    assert!(again.error.is_none());
}

/// A compaction that folds payloads an earlier pass replaced reads back only the messages
/// that hold their originals, which lie in the part of the history the working copy covers,
/// not the whole history: over a session, the folds read each message about once, where
/// reading the whole history at each fold reads it once per fold.
#[test]
fn a_fold_reads_back_only_the_messages_whose_payloads_it_restores() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(30, 3, 40).messages;
    // Outputs clipped as they enter: the working copy holds replaced payloads at every fold.
    let config = MiddlewareConfig { clip_on_ingest: Some(300), ..MiddlewareConfig::new(7_000, 875) };
    let middleware = CompactionMiddleware::new(Compactor::default(), config.clone());
    let eager = CompactionMiddleware::new(Compactor::default(), config);
    let (mut folds, mut read_back) = (0, 0);
    for end in call_points(&history) {
        let messages = &history[..end];
        let chain = HistoryChain::of(messages);
        let watched = Watched::new(messages, &chain, 0);
        let prepared = runtime.block_on(middleware.prepare_history(&watched, &[]));
        let whole = runtime.block_on(eager.prepare(messages, &[]));
        assert_eq!(json(&prepared.messages()), json(&whole.messages()), "call at {end}");
        if prepared.event.is_some() {
            folds += 1;
            read_back += end - watched.earliest().expect("a fold reads the new messages at least");
        }
    }
    assert!(folds >= 10, "{folds} folds");
    assert!(read_back <= 2 * history.len(), "{folds} folds read {read_back} messages of {}", history.len());
}
