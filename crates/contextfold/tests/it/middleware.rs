//! The middleware under concurrency, its failures, its confirmation hook, its configuration
//! builder, and its snapshots: a restored middleware sends what the original would have.

use crate::common::{corpus_dir, corpus_files, session};
use contextfold::compactor::{CompactError, Compactor, ConfigError, Strategy};
use contextfold::core::{Conversation, HistoryChain, Message, Role};
use contextfold::event::{Event, Trigger};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig, MiddlewareState, PrepareError, StateError};
use contextfold::policy::{Confirm, Threshold};
use contextfold::summarize::{BoxFuture, SummarizeError, Summarizer, Summary, SummaryRequest, Usage};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A summarizer that takes its time (so that concurrent calls overlap) and counts its calls.
#[derive(Default)]
struct Slow {
    calls: AtomicUsize,
}

impl Summarizer for Slow {
    fn id(&self) -> String {
        "slow/v1".into()
    }

    fn input_budget(&self) -> u64 {
        100_000
    }

    fn summarize<'a>(&'a self, _request: &'a SummaryRequest) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            Ok(Summary { text: format!("Summary {call}: the user asked to fix modules."), usage: Usage::default() })
        })
    }
}

pub(crate) fn json(messages: &[Message]) -> Vec<Value> {
    messages.iter().map(Message::to_value).collect()
}

#[test]
fn concurrent_prepares_for_one_conversation_compact_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let slow = Arc::new(Slow::default());
    let mut config = MiddlewareConfig::new(8_000, 1_000);
    config.compact.strategy = Strategy::Summarize;
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let seen = events.clone();
    let middleware = Arc::new(
        CompactionMiddleware::new(Compactor::new(slow.clone()), config)
            .with_policy(Arc::new(Threshold::Fraction(0.8)))
            .with_observer(Arc::new(move |event: &Event| seen.lock().unwrap().push(event.clone()))),
    );
    let history = Arc::new(session(6, 4, 30).messages);
    let prepared = runtime.block_on(async {
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..32 {
            let (middleware, history) = (middleware.clone(), history.clone());
            calls.spawn(async move { middleware.prepare(&history, &[]).await });
        }
        let mut prepared = Vec::new();
        while let Some(done) = calls.join_next().await {
            prepared.push(done.expect("no task panics"));
        }
        prepared
    });
    let compacted: Vec<_> = prepared.iter().filter(|prepared| prepared.event.is_some()).collect();
    assert_eq!(compacted.len(), 1, "exactly one of 32 concurrent calls compacts");
    assert_eq!(slow.calls.load(Ordering::SeqCst), 1, "one summary");
    assert_eq!(events.lock().unwrap().len(), 1);
    // Every call sends the same compacted request: none saw a half-updated state.
    let sent = json(&compacted[0].messages());
    assert!(sent.len() < history.len());
    for each in &prepared {
        assert_eq!(json(&each.messages()), sent);
        assert!(each.error.is_none(), "{:?}", each.error);
    }
    let state = runtime.block_on(middleware.snapshot());
    assert_eq!(json(state.working()), sent);
}

#[test]
fn a_failed_compaction_is_returned_and_reported_and_the_history_is_sent_as_it_is() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut config = MiddlewareConfig::new(8_000, 1_000);
    // A configuration that cannot work makes every compaction fail.
    config.compact.max_chunks = 0;
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let seen = events.clone();
    let middleware = CompactionMiddleware::new(Compactor::default(), config)
        .with_policy(Arc::new(Threshold::Fraction(0.5)))
        .with_observer(Arc::new(move |event: &Event| seen.lock().unwrap().push(event.clone())));
    let history = session(6, 4, 30).messages;
    let prepared = runtime.block_on(middleware.prepare(&history, &[]));
    assert!(prepared.event.is_none());
    match &prepared.error {
        Some(PrepareError::Compaction(CompactError::Config(ConfigError::ZeroChunks))) => {}
        other => panic!("expected the compaction's error, got {other:?}"),
    }
    assert_eq!(json(&prepared.messages()), json(&history), "sent as it is");
    let events = events.lock().unwrap();
    match events.as_slice() {
        [Event::Failed(failed)] => {
            assert_eq!(failed.trigger, Trigger::Auto);
            assert!(failed.error.contains("max_chunks"), "{}", failed.error);
            let wire = serde_json::to_value(&events[0]).unwrap();
            assert_eq!(wire["event"], "failed");
        }
        other => panic!("expected one failure event, got {other:?}"),
    }
}

#[test]
fn the_confirmation_hook_is_asked_and_may_decline() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let declining = Confirm::new(move |_input| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { false }
    });
    let history = session(6, 4, 30).messages;
    // A window the session fits, so that no overflow forces the compaction, and a target
    // it does not, so that the compaction has something to do.
    let config = MiddlewareConfig::builder(200_000, 8_000).target(0.01).build().unwrap();
    let middleware = CompactionMiddleware::new(Compactor::default(), config.clone())
        .with_policy(Arc::new(Threshold::Absolute(1)))
        .with_confirmation(declining);
    let prepared = runtime.block_on(middleware.prepare(&history, &[]));
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(prepared.event.is_none());
    assert_eq!(prepared.skipped.as_deref(), Some("the confirmation callback declined"));

    let agreeing = CompactionMiddleware::new(Compactor::default(), config)
        .with_policy(Arc::new(Threshold::Absolute(1)))
        .with_confirmation(Confirm::new(|_input| async { true }));
    assert!(runtime.block_on(agreeing.prepare(&history, &[])).event.is_some());
}

/// A policy that compacts a history already within the target: the compactor has nothing
/// to do, so nothing changes (no event, no rewritten prefix, the provider's cache kept).
#[test]
fn a_compaction_that_would_change_nothing_leaves_the_prefix_as_it_was() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(6, 4, 30).messages;
    let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(200_000, 8_000))
        .with_policy(Arc::new(Threshold::Absolute(1)));
    for end in [history.len() - 4, history.len()] {
        let prepared = runtime.block_on(middleware.prepare(&history[..end], &[]));
        assert!(prepared.event.is_none(), "{:?}", prepared.event);
        assert!(prepared.error.is_none(), "{:?}", prepared.error);
        assert_eq!(
            prepared.skipped.as_deref(),
            Some("the compaction found nothing to do: the history is within its target")
        );
        assert_eq!(json(&prepared.messages()), json(&history[..end]), "the history goes out as it is");
    }
}

#[test]
fn the_config_builder_refuses_what_cannot_work() {
    assert_eq!(MiddlewareConfig::builder(0, 0).build(), Err(ConfigError::ZeroWindow));
    assert_eq!(
        MiddlewareConfig::builder(20_000, 30_000).build(),
        Err(ConfigError::ReserveNotBelowWindow { reserve: 30_000, window: 20_000 })
    );
    assert!(matches!(MiddlewareConfig::builder(20_000, 2_000).target(1.2).build(), Err(ConfigError::Fraction { .. })));
    let config = MiddlewareConfig::builder(200_000, 16_000)
        .target(0.4)
        .system(contextfold::core::System::Text("You are a coding agent.".into()))
        .tools(vec![serde_json::json!({"name": "Read", "input_schema": {"type": "object"}})])
        .clip_on_ingest(8_000)
        .build()
        .unwrap();
    assert_eq!(config.usable_window(), 184_000);
    assert_eq!(config.compact.target.tokens(0), 73_600);
    assert_eq!(config.clip_on_ingest, Some(8_000));
}

/// Drives `original` through `history`'s calls up to `split`, snapshots it (through JSON),
/// restores a second middleware from the snapshot, and checks that both send the same
/// requests for the calls after it. Returns how many of those compacted.
fn restored_sends_the_same(history: &[Message], config: MiddlewareConfig, split: usize, calls: &[usize]) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let original = CompactionMiddleware::new(Compactor::default(), config.clone());
    let mut at = 0;
    for &end in calls.iter().take_while(|&&end| end <= split) {
        let prepared = runtime.block_on(original.prepare(&history[..end], &[]));
        original.observe_usage(prepared.request_tokens * 11 / 10);
        at = end;
    }
    let text = serde_json::to_string(&runtime.block_on(original.snapshot())).unwrap();
    let state: MiddlewareState = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string(&state).unwrap(), text, "a snapshot reads back as it was written");
    let restored = CompactionMiddleware::restore(Compactor::default(), config, state).unwrap();
    let mut compactions = 0;
    for &end in calls.iter().filter(|&&end| end > at) {
        let a = runtime.block_on(original.prepare(&history[..end], &[]));
        let b = runtime.block_on(restored.prepare(&history[..end], &[]));
        assert_eq!(json(&a.messages()), json(&b.messages()), "call at {end} after a snapshot at {at}");
        assert_eq!(a.event.is_some(), b.event.is_some());
        assert_eq!(a.request_tokens, b.request_tokens);
        compactions += usize::from(a.event.is_some());
        original.observe_usage(a.request_tokens * 9 / 10);
        restored.observe_usage(b.request_tokens * 9 / 10);
    }
    compactions
}

/// The calls of a session: one before each assistant message.
pub(crate) fn call_points(messages: &[Message]) -> Vec<usize> {
    (1..messages.len()).filter(|&end| messages[end].role == contextfold::core::Role::Assistant).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn a_restored_middleware_sends_what_the_original_would(turns in 3usize..8, lines in 10usize..60, split in 0usize..40, window in 4usize..12) {
        let history = session(turns, 3, lines).messages;
        let calls = call_points(&history);
        let split = calls[split % calls.len()];
        let window = window as u64 * 1_000;
        restored_sends_the_same(&history, MiddlewareConfig::new(window, window / 8), split, &calls);
    }

    #[test]
    fn a_restored_middleware_clipping_on_ingest_sends_what_the_original_would(turns in 3usize..7, lines in 20usize..80, split in 0usize..30) {
        let history = session(turns, 3, lines).messages;
        let calls = call_points(&history);
        let split = calls[split % calls.len()];
        let mut config = MiddlewareConfig::new(9_000, 1_000);
        config.clip_on_ingest = Some(300);
        restored_sends_the_same(&history, config, split, &calls);
    }
}

/// A snapshot holds what compactions made, not the caller's messages since: a conversation
/// that never compacted snapshots to its counters, however long it is.
#[test]
fn a_snapshot_holds_only_what_a_compaction_made() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(8, 4, 40).messages;
    let calls = call_points(&history);
    let roomy = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(1_000_000, 8_000));
    for &end in &calls {
        runtime.block_on(roomy.prepare(&history[..end], &[]));
    }
    let state = runtime.block_on(roomy.snapshot());
    assert!(state.working().is_empty());
    assert_eq!((state.history_from(), state.source_len()), (0, calls[calls.len() - 1]));
    let text = serde_json::to_string(&state).unwrap();
    assert!(text.len() < 400, "{} bytes: {text}", text.len());
    // With compactions, it holds the last one's output and where the history goes on.
    let tight = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(12_000, 1_500));
    let mut last = None;
    for &end in &calls {
        let prepared = runtime.block_on(tight.prepare(&history[..end], &[]));
        if prepared.event.is_some() {
            last = Some((end, prepared.history.len()));
        }
    }
    let (at, made) = last.expect("the tight window compacts");
    let state = runtime.block_on(tight.snapshot());
    assert_eq!((state.history_from(), state.working().len()), (at, made));
    assert!(at < calls[calls.len() - 1], "calls after the last compaction are left out: {at}");
}

/// A snapshot since a known number leaves out exactly the messages that number names: the
/// number changes when a compaction, or a history that starts afresh, makes new ones, and
/// everything else is the whole snapshot's.
#[test]
fn a_snapshot_since_a_known_number_leaves_out_the_messages_it_names() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(8, 4, 40).messages;
    let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(12_000, 1_500));
    // The messages the number names, as a whole snapshot writes them.
    let (mut known, mut named) = (None, Value::Null);
    let (mut compactions, mut changes) = (0, 0);
    for end in call_points(&history) {
        let prepared = runtime.block_on(middleware.prepare(&history[..end], &[]));
        let whole = serde_json::to_value(runtime.block_on(middleware.snapshot())).unwrap();
        let (since, number) = runtime.block_on(middleware.snapshot_since(known));
        compactions += usize::from(prepared.event.is_some());
        if Some(number) == known {
            assert!(prepared.event.is_none(), "a compaction at {end} kept the number");
            assert!(since.working().is_empty(), "the known messages are left out at {end}");
            assert_eq!(whole["working"], named, "the number names the same messages at {end}");
        } else {
            assert!(known.is_none() || prepared.event.is_some(), "the number changed at {end} without a compaction");
            (known, named) = (Some(number), whole["working"].clone());
            changes += 1;
        }
        let mut rest = serde_json::to_value(&since).unwrap();
        if since.working().is_empty() {
            rest["working"] = named.clone();
        }
        assert_eq!(rest, whole, "the snapshot since {known:?} at {end}, its messages put back");
    }
    assert!(compactions > 1 && changes == compactions + 1, "{compactions} compactions, {changes} numbers");
    // Another history starts afresh: its (empty) compacted messages get a number of their own.
    let other = session(3, 2, 10).messages;
    runtime.block_on(middleware.prepare(&other[..call_points(&other)[0]], &[]));
    let (since, number) = runtime.block_on(middleware.snapshot_since(known));
    assert_ne!(Some(number), known);
    assert!(since.working().is_empty() && since.history_from() == 0);
}

/// The newest messages a middleware says are the caller's own are exactly the caller's
/// messages, call after call, through compactions (after which none are) and restores.
#[test]
fn the_unchanged_tail_is_the_callers_own() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(8, 4, 40).messages;
    let calls = call_points(&history);
    let config = MiddlewareConfig::new(12_000, 1_500);
    let mut middleware = CompactionMiddleware::new(Compactor::default(), config.clone());
    let (mut compactions, mut longest) = (0, 0);
    for (index, &end) in calls.iter().enumerate() {
        if index == calls.len() / 2 {
            let state = runtime.block_on(middleware.snapshot());
            middleware = CompactionMiddleware::restore(Compactor::default(), config.clone(), state).unwrap();
        }
        let prepared = runtime.block_on(middleware.prepare(&history[..end], &[]));
        let tail = prepared.unchanged_tail;
        assert!(tail <= prepared.history.len().min(end), "at {end}: {tail}");
        assert_eq!(json(&prepared.history[prepared.history.len() - tail..]), json(&history[end - tail..end]));
        if prepared.event.is_some() {
            compactions += 1;
            assert_eq!(tail, 0, "a compaction made every message it sends");
        } else if compactions == 0 {
            assert_eq!(tail, end, "nothing compacted yet: every message is the caller's");
        }
        longest = longest.max(tail);
    }
    assert!(compactions > 1 && longest > 2, "{compactions} compactions, longest tail {longest}");
    let mut clipping = config;
    clipping.clip_on_ingest = Some(100);
    let clips = CompactionMiddleware::new(Compactor::default(), clipping);
    assert_eq!(runtime.block_on(clips.prepare(&history[..calls[2]], &[])).unchanged_tail, 0);
}

/// A snapshot of the format that held the whole working copy (version 1) is still read.
#[test]
fn snapshots_that_named_their_history_by_its_last_message_are_refused_by_version() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(8, 4, 40).messages;
    let config = MiddlewareConfig::new(12_000, 1_500);
    let original = CompactionMiddleware::new(Compactor::default(), config.clone());
    runtime.block_on(original.prepare(&history, &[]));
    let mut value = serde_json::to_value(runtime.block_on(original.snapshot())).unwrap();
    assert_eq!(value["version"], 3);
    let fields = value.as_object_mut().unwrap();
    fields.remove("source_chain");
    fields.insert("source_last".into(), "00000000000000ff".into());
    for version in [1, 2] {
        value["version"] = version.into();
        let state: MiddlewareState = serde_json::from_value(value.clone()).expect("an older snapshot reads");
        let err = CompactionMiddleware::restore(Compactor::default(), config.clone(), state).unwrap_err();
        assert_eq!(err, StateError::Version { found: version, known: 3 });
    }
}

#[test]
fn a_history_that_changed_before_its_newest_messages_starts_afresh() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let history = session(12, 4, 60).messages;
    let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(8_000, 1_000));
    let before = runtime.block_on(middleware.prepare(&history, &[]));
    assert!(before.event.is_some(), "the history compacts");
    // The same length and last message, an older user message edited.
    let mut edited = history.clone();
    let at = (1..history.len() / 2).find(|&at| history[at].is_authored()).expect("an older request");
    edited[at] = Message::text(Role::User, "EDITED: do something else entirely");
    let after = runtime.block_on(middleware.prepare(&edited, &[]));
    assert!(after.event.is_some(), "the edited history is compacted afresh, not resent");
    let fresh = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(8_000, 1_000));
    let expected = runtime.block_on(fresh.prepare(&edited, &[]));
    assert_eq!(json(&after.messages()), json(&expected.messages()), "as a new middleware would send it");
    // Keeping its chain, a caller pays for the new messages only and gets the same.
    let mut chain = HistoryChain::of(&edited);
    let mut grown = edited.clone();
    grown.push(Message::text(Role::Assistant, "done"));
    grown.push(Message::text(Role::User, "next"));
    grown[grown.len() - 2..].iter().for_each(|message| chain.push(message));
    let chained = runtime.block_on(middleware.prepare_with_chain(&grown, &chain, &[]));
    let plain = runtime.block_on(fresh.prepare(&grown, &[]));
    assert_eq!(json(&chained.messages()), json(&plain.messages()));
}

#[test]
fn a_restored_middleware_sends_what_the_original_would_over_the_corpus() {
    let Some(dir) = corpus_dir() else { return };
    let files = corpus_files(&dir);
    let mut compactions = 0;
    // Every fourth session keeps the test's time bounded; each is split after a third of its calls.
    for file in files.iter().step_by(4) {
        let text = std::fs::read_to_string(file).unwrap();
        let conversation: Conversation = contextfold::core::format::parse(&text, None).unwrap().conversation;
        let calls = call_points(&conversation.messages);
        if calls.len() < 3 {
            continue;
        }
        let config = MiddlewareConfig::new(16_000, 2_000);
        compactions += restored_sends_the_same(&conversation.messages, config, calls[calls.len() / 3], &calls);
    }
    assert!(compactions > 0, "the restored middlewares compacted too");
}

/// A snapshot taken before any call of a session, written as JSON and restored, sends that
/// call exactly what the middleware that never stopped sends, and ends in the same state
/// (so every later call is the same too). Returns the calls that compacted.
fn restored_at_every_call_sends_the_same(history: &[Message], window: u64) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let config = MiddlewareConfig::new(window, window / 8);
    let original = CompactionMiddleware::new(Compactor::default(), config.clone());
    let mut compactions = 0;
    for end in call_points(history) {
        let text = serde_json::to_string(&runtime.block_on(original.snapshot())).unwrap();
        let state: MiddlewareState = serde_json::from_str(&text).unwrap();
        let restored = CompactionMiddleware::restore(Compactor::default(), config.clone(), state).unwrap();
        let b = runtime.block_on(restored.prepare(&history[..end], &[]));
        let a = runtime.block_on(original.prepare(&history[..end], &[]));
        assert_eq!(json(&a.messages()), json(&b.messages()), "the call at message {end}");
        assert_eq!((a.request_tokens, a.event.is_some()), (b.request_tokens, b.event.is_some()), "at {end}");
        let after = |middleware: &CompactionMiddleware| {
            serde_json::to_string(&runtime.block_on(middleware.snapshot())).unwrap()
        };
        assert_eq!(after(&original), after(&restored), "the state after the call at message {end}");
        compactions += usize::from(a.event.is_some());
        // The provider counts a tenth more than the estimate: the calibration moves.
        original.observe_usage(a.request_tokens * 11 / 10);
    }
    compactions
}

#[test]
fn a_middleware_restored_before_any_call_of_a_corpus_session_sends_the_same_request() {
    let Some(dir) = corpus_dir() else { return };
    let files = corpus_files(&dir);
    let (mut sessions, mut calls, mut compactions) = (0, 0, 0);
    // Every third session, at a window that makes the long ones compact several times.
    for file in files.iter().step_by(3) {
        let text = std::fs::read_to_string(file).unwrap();
        let conversation: Conversation = contextfold::core::format::parse(&text, None).unwrap().conversation;
        sessions += 1;
        calls += call_points(&conversation.messages).len();
        compactions += restored_at_every_call_sends_the_same(&conversation.messages, 24_000);
    }
    println!("{sessions} sessions: restored before each of {calls} calls, {compactions} of which compacted");
    assert!(compactions > 10, "only {compactions} calls compacted");
}

#[test]
fn a_snapshot_of_another_version_or_a_broken_one_is_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(8_000, 1_000));
    let history = session(3, 2, 20).messages;
    runtime.block_on(middleware.prepare(&history, &[]));
    let mut value = serde_json::to_value(runtime.block_on(middleware.snapshot())).unwrap();
    value["version"] = 99.into();
    let state: MiddlewareState = serde_json::from_value(value.clone()).unwrap();
    let err =
        CompactionMiddleware::restore(Compactor::default(), MiddlewareConfig::new(8_000, 1_000), state).unwrap_err();
    assert_eq!(err, StateError::Version { found: 99, known: contextfold::middleware::STATE_VERSION });
    value["version"] = 3.into();
    value["working"] = Value::Array(Vec::new());
    value["history_from"] = 1.into();
    let state: MiddlewareState = serde_json::from_value(value.clone()).unwrap();
    let err =
        CompactionMiddleware::restore(Compactor::default(), MiddlewareConfig::new(8_000, 1_000), state).unwrap_err();
    assert!(matches!(err, StateError::Inconsistent(_)), "{err}");
    value["unknown"] = 1.into();
    assert!(serde_json::from_value::<MiddlewareState>(value).is_err(), "unknown fields are refused");
}
