//! The session log: a growing history written as it grows, each message once, whatever cache
//! breakpoints it carried; a history that changed is written again from where it changed; old
//! sessions pruned by when they were last written.

use super::{runtime, Backend};
use contextfold::compactor::Compactor;
use contextfold::core::hash::payload_ref;
use contextfold::core::{Conversation, Message, Role};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
use contextfold::store::HitLocation;
use contextfold_test_support::removed_blocks_are_in_the_log;
use serde_json::{json, Value};

fn text(role: Role, words: &str) -> Message {
    Message::text(role, words)
}

pub(super) fn log_writes_from_a_position(backend: &Backend) {
    let store = &*backend.open();
    let session = store.create_session("log").expect("create");
    let first = [text(Role::User, "alpha wombat"), text(Role::Assistant, "beta"), text(Role::User, "gamma")];
    let appended = store.log_messages(&session, 0, &first).expect("log");
    assert_eq!((appended.stored, appended.total), (3, 3));
    let more = [text(Role::Assistant, "delta"), text(Role::User, "epsilon")];
    assert_eq!(store.log_messages(&session, 3, &more).expect("log").total, 5);
    let mut history: Vec<Message> = first.iter().chain(&more).cloned().collect();
    assert_eq!(store.export(&session).expect("export"), history);
    // Written again from 1: what was there is replaced, search included.
    let changed = [text(Role::Assistant, "zeta quokka"), text(Role::User, "eta")];
    assert_eq!(store.log_messages(&session, 1, &changed).expect("log").total, 3);
    history.truncate(1);
    history.extend(changed.iter().cloned());
    assert_eq!(store.export(&session).expect("export"), history);
    assert!(store.search(Some(&session), "delta", 10).expect("search").is_empty(), "replaced text is not found");
    let hits = store.search(Some(&session), "quokka", 10).expect("search");
    assert_eq!(hits.iter().map(|hit| &hit.location).collect::<Vec<_>>(), [&HitLocation::Message(1)]);
    assert_eq!(store.search(Some(&session), "wombat", 10).expect("search").len(), 1, "kept text is found once");
    // A gap is refused, and nothing changes.
    let err = store.log_messages(&session, 7, &changed).expect_err("a gap");
    assert!(err.to_string().contains("position 7"), "{err}");
    assert_eq!(store.export(&session).expect("export"), history);
    assert!(store.log_messages("no-such-session", 0, &changed).is_err());
}

pub(super) fn prune_deletes_what_was_not_written_since(backend: &Backend) {
    let store = &*backend.open();
    let old = store.create_session("old").expect("create");
    let new = store.create_session("new").expect("create");
    store.log_messages(&new, 0, &[text(Role::User, "kept")]).expect("log");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("a clock").as_secs();
    assert!(store.prune(now - 3_600).expect("prune").is_empty(), "nothing is an hour old");
    let deleted = store.prune(now + 3_600).expect("prune");
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    assert!(deleted.contains(&old) && deleted.contains(&new));
    assert!(store.sessions().expect("sessions").is_empty());
    assert!(store.search(None, "kept", 10).expect("search").is_empty());
}

/// A Claude-Code-like history: each call adds a tool call and its result and moves the cache
/// breakpoint to the newest block.
fn calls(turns: usize) -> Vec<Vec<Message>> {
    let mut plain: Vec<Value> = vec![json!({"role": "user", "content": "fix the build"})];
    let mut requests = Vec::new();
    for turn in 0..turns {
        let output: String =
            (0..60).map(|line| format!("turn {turn} line {line}: compiling crate_{line} for build{turn}\n")).collect();
        plain.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{turn}"), "name": "Bash", "input": {"command": "cargo build"}}]}));
        plain.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{turn}"), "content": output}]}));
        let mut sent = plain.clone();
        if let Some(block) = sent.last_mut().and_then(|message| message["content"].as_array_mut()?.last_mut()) {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        requests.push(Conversation::from_value(Value::Array(sent)).expect("valid").messages);
    }
    requests
}

pub(super) fn middleware_logs_each_message_once(backend: &Backend) {
    let store = backend.open();
    let session = store.create_session("middleware log").expect("create");
    let compactor = Compactor::default().with_store(store.clone(), session.clone()).with_session_log();
    let middleware = CompactionMiddleware::new(compactor, MiddlewareConfig::new(6_000, 1_000));
    let requests = calls(40);
    let mut compactions = 0;
    for history in &requests {
        let prepared = runtime().block_on(middleware.prepare(history, &[]));
        assert!(prepared.error.is_none(), "{:?}", prepared.error);
        compactions += usize::from(prepared.event.is_some());
    }
    assert!(compactions >= 2, "{compactions} compactions");
    let last = requests.last().expect("calls");
    let exported = store.export(&session).expect("export");
    assert_eq!(exported.len(), last.len(), "one row per message");
    let expected: Vec<Value> = (last.iter().map(Message::to_value))
        .map(|value| {
            serde_json::from_str(&value.to_string().replace(r#","cache_control":{"type":"ephemeral"}"#, "")).unwrap()
        })
        .collect();
    assert_eq!(
        exported.iter().map(Message::to_value).collect::<Vec<_>>(),
        expected,
        "the latest history, breakpoints aside"
    );
    let reports = store.reports(&session).expect("reports");
    assert_eq!(reports.len(), compactions);
    removed_blocks_are_in_the_log(&reports, &exported.iter().map(Message::to_value).collect::<Vec<_>>(), payload_ref);
    assert_eq!(store.search(Some(&session), "build7", 50).expect("search").len(), 1, "one hit per stored text");
}

/// Outputs evicted over many compactions, most of them kept whole by an earlier one, are
/// stored under their place in the log, as are the reports that name them.
pub(super) fn removed_payloads_name_their_place_in_the_log(backend: &Backend) {
    let store = backend.open();
    let session = store.create_session("placed").expect("create");
    let compactor = Compactor::default().with_store(store.clone(), session.clone()).with_session_log();
    let middleware = CompactionMiddleware::new(compactor, MiddlewareConfig::new(16_000, 1_000));
    let requests = calls(90);
    let mut compactions = 0;
    for history in &requests {
        let prepared = runtime().block_on(middleware.prepare(history, &[]));
        assert!(prepared.error.is_none(), "{:?}", prepared.error);
        compactions += usize::from(prepared.event.is_some());
    }
    let reports = store.reports(&session).expect("reports");
    let log: Vec<Value> = store.export(&session).expect("export").iter().map(Message::to_value).collect();
    let placed = removed_blocks_are_in_the_log(&reports, &log, payload_ref);
    assert!(compactions >= 3 && placed >= 40, "{placed} removed payloads in {compactions} compactions");
}
