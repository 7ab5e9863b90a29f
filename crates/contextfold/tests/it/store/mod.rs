//! The session store suite: round trips (history and every removed payload come back
//! exactly), deduplication, search, deletion, metadata, the recall tool, reopening,
//! concurrent writers, compactions kept by the compactor and the middleware, and the corpus.
//!
//! Each check is written once over a [`Backend`] and runs on every store (memory, SQLite,
//! PostgreSQL), each test on a fresh store of its own, so the stores cannot drift apart.
//! What only one store has (files, schemas, servers) is tested in its own module.

mod backend;
mod hits;
mod log;
mod persist;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
mod state;

pub use backend::Backend;

use contextfold::compactor::{CompactConfig, CompactError, CompactionReport, Compactor, Target};
use contextfold::core::{Conversation, Message, Role};
use contextfold::store::{
    handle_recall, recall_lines, recall_tool_definition, search_answer, search_sessions, HitLocation, Lines, Payload,
    SessionStore, Summary, MAX_RECALL_CHARS, RECALL_TOOL_NAME,
};
use contextfold::summarize::Usage;
use serde_json::json;
use std::path::{Path, PathBuf};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/session.json");

fn load(path: &Path) -> Conversation {
    contextfold::input::load(path, None).unwrap_or_else(|err| panic!("{err}")).conversation
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a runtime")
}

fn budget_config(budget: u64) -> CompactConfig {
    CompactConfig { target: Target::Budget(budget), ..CompactConfig::default() }
}

fn compact(conversation: &Conversation, budget: u64) -> CompactionReport {
    runtime()
        .block_on(Compactor::default().compact(conversation, &budget_config(budget)))
        .expect("compaction succeeds")
        .report
}

/// Stores `conversation`, compacts it at `budget`, stores what the compaction removed in one
/// transaction, and checks that the history and every payload come back exactly.
fn round_trip(store: &dyn SessionStore, name: &str, conversation: &Conversation, budget: u64) -> usize {
    let session = store.create_session(name).expect("create");
    let appended = store.append_messages(&session, &conversation.messages).expect("append");
    assert_eq!(appended.stored, conversation.messages.len());
    assert_eq!(store.export(&session).expect("export"), conversation.messages, "{name}: export differs");

    let report = compact(conversation, budget);
    let payloads = report.payloads(&session);
    let summary = Summary {
        head_hash: "head".into(),
        summarizer: "extractive".into(),
        text: "a summary".into(),
        usage: Usage { input_tokens: 10, output_tokens: 2 },
    };
    let report_json = serde_json::to_value(&report).expect("the report serializes");
    let again = store
        .persist_compaction(&session, &conversation.messages, &payloads, Some(&summary), &report_json)
        .expect("persist");
    assert_eq!((again.stored, again.skipped), (0, conversation.messages.len()), "{name}: history stored twice");
    for payload in &payloads {
        let recalled = store.recall(&payload.reference).expect("recall").expect("the payload is stored");
        assert_eq!(recalled, payload.payload, "{name}: {} differs", payload.reference);
        assert_eq!(
            serde_json::to_string(&recalled).unwrap(),
            serde_json::to_string(&payload.payload).unwrap(),
            "{name}: {} is not byte-identical",
            payload.reference
        );
        assert_eq!(payload.reference, contextfold::core::hash::payload_ref(&payload.payload));
    }
    assert_eq!(store.export(&session).expect("export"), conversation.messages);
    assert_eq!(store.summaries(&session).expect("summaries"), vec![summary]);
    assert_eq!(store.reports(&session).expect("reports"), vec![report_json]);
    let info = store.sessions().expect("sessions").into_iter().find(|info| info.id == session).expect("listed");
    assert_eq!(info.name, name);
    assert_eq!(info.messages, conversation.messages.len());
    let distinct: std::collections::BTreeSet<&str> = payloads.iter().map(|p| p.reference.as_str()).collect();
    assert_eq!(info.payloads, distinct.len());
    payloads.len()
}

fn example_round_trip(backend: &Backend) {
    let store = &*backend.open();
    let conversation = load(Path::new(EXAMPLE));
    let payloads = round_trip(store, "examples/session.json", &conversation, 2000);
    assert!(payloads > 0, "a 2000-token budget removes something from the example");
}

fn dedup(backend: &Backend) {
    let store = &*backend.open();
    let conversation = load(Path::new(EXAMPLE));
    let session = store.create_session("dedup").expect("create");
    store.append_messages(&session, &conversation.messages[..3]).expect("append");
    let second = store.append_messages(&session, &conversation.messages).expect("append");
    assert_eq!((second.skipped, second.stored), (3, conversation.messages.len() - 3));
    let third = store.append_messages(&session, &conversation.messages).expect("append");
    assert_eq!((third.stored, third.total), (0, conversation.messages.len()));
    assert_eq!(store.export(&session).expect("export"), conversation.messages);
    // Pushing always appends.
    let pushed = store.push_messages(&session, &conversation.messages[..1]).expect("push");
    assert_eq!(pushed.total, conversation.messages.len() + 1);
    // The same payload twice is stored once.
    let payload = Payload {
        reference: "cf-test".into(),
        session: session.clone(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: None,
        tokens: 3,
        message: 0,
        block: 0,
        payload: serde_json::json!("out"),
    };
    assert!(store.put_payload(&payload).expect("put"));
    assert!(!store.put_payload(&payload).expect("put"));
    let info = store.sessions().expect("sessions").into_iter().find(|info| info.id == session).expect("listed");
    assert_eq!(info.payloads, 1);
}

fn search_and_delete(backend: &Backend) {
    let store = &*backend.open();
    let session = store.create_session("search").expect("create");
    let other = store.create_session("other").expect("create");
    let messages = vec![
        Message::text(Role::User, "Please fix the flaky Zanzibar test in billing"),
        Message::text(Role::Assistant, "Looking at it now."),
    ];
    store.append_messages(&session, &messages).expect("append");
    store.append_messages(&other, &[Message::text(Role::User, "zanzibar elsewhere")]).expect("append");
    let payload = Payload {
        reference: "cf-output".into(),
        session: session.clone(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: Some("cargo test".into()),
        tokens: 20,
        message: 1,
        block: 0,
        payload: serde_json::json!([{"type": "text", "text": "thread 'main' panicked: quetzalcoatl overflow"}]),
    };
    store.put_payload(&payload).expect("put");

    let hits = store.search(Some(&session), "zanzibar", 10).expect("search");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].location, HitLocation::Message(0));
    assert!(hits[0].snippet.contains("[Zanzibar]"), "{hits:?}");
    assert_eq!(store.search(None, "zanzibar", 10).expect("search").len(), 2);
    assert_eq!(store.search(None, "zanzibar", 1).expect("search").len(), 1);

    let hits = store.search(None, "Quetzalcoatl", 10).expect("search");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].location, HitLocation::Payload("cf-output".into()));
    assert_eq!(hits[0].session, session);
    assert!(hits[0].snippet.contains("[quetzalcoatl]"), "{hits:?}");
    assert!(store.search(None, "quetzalcoatl zanzibar", 10).expect("search").is_empty());

    assert!(store.delete_session(&session).expect("delete"));
    assert!(!store.delete_session(&session).expect("delete"));
    assert!(store.recall("cf-output").expect("recall").is_none());
    assert!(store.search(None, "quetzalcoatl", 10).expect("search").is_empty());
    assert_eq!(store.search(None, "zanzibar", 10).expect("search").len(), 1);
    assert!(store.export(&session).is_err());
    assert!(store.sessions().expect("sessions").iter().all(|info| info.id != session));
}

/// Floats, nested JSON and odd strings come back exactly; a failed compaction stores nothing.
/// An output removed from a message is stored twice, in the log and as a payload, and found
/// once: as the payload, at the better rank of the two; a session without the payload keeps
/// its own hit.
fn a_removed_output_is_found_once(backend: &Backend) {
    let store = &*backend.open();
    let output = "the wombat build failed at step nine";
    let history = Conversation::from_value(json!([
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}]},
        {"role": "assistant", "content": "The wombat build is next."}
    ]))
    .expect("a conversation")
    .messages;
    let session = store.create_session("removed").expect("create");
    let other = store.create_session("kept").expect("create");
    store.append_messages(&session, &history).expect("append");
    store.append_messages(&other, &history).expect("append");
    let payload = Payload {
        reference: "cf-wombat".into(),
        session: session.clone(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: Some("make".into()),
        tokens: 9,
        // The compactor's index, not the log's: the text is what tells.
        message: 0,
        block: 0,
        payload: json!(output),
    };
    store.put_payload(&payload).expect("put");

    let hits = store.search(Some(&session), "wombat", 10).expect("search");
    let locations: Vec<&HitLocation> = hits.iter().map(|hit| &hit.location).collect();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(locations.contains(&&HitLocation::Payload("cf-wombat".into())), "{hits:?}");
    assert!(locations.contains(&&HitLocation::Message(3)), "{hits:?}");
    assert_eq!(store.search(Some(&session), "failed nine", 10).expect("search").len(), 1);
    assert_eq!(store.search(Some(&session), "wombat", 1).expect("search").len(), 1);

    let everywhere = store.search(None, "failed nine", 10).expect("search");
    assert_eq!(everywhere.len(), 2, "{everywhere:?}");
    assert!(everywhere.iter().any(|hit| hit.session == other && hit.location == HitLocation::Message(2)));
    assert!(everywhere
        .iter()
        .any(|hit| hit.session == session && hit.location == HitLocation::Payload("cf-wombat".into())));
}

fn exact_and_atomic(backend: &Backend) {
    let store = &*backend.open();
    let session = store.create_session("exact").expect("create");
    let value = serde_json::json!([
        {"type": "text", "text": "line one\nline \"two\"\t\u{0}é😀"},
        {"type": "tool_result", "z": 1, "a": [226.868409, 0.1, 1e-300, -0.0, 12345678901234567890u64, -5]}
    ]);
    for payload in [value.clone(), serde_json::json!(""), serde_json::json!("  plain string \n")] {
        let reference = contextfold::core::hash::payload_ref(&payload);
        let stored = Payload {
            reference: reference.clone(),
            session: session.clone(),
            tool: "Bash".into(),
            kind: "shell".into(),
            target: None,
            tokens: 1,
            message: 0,
            block: 0,
            payload: payload.clone(),
        };
        store.put_payload(&stored).expect("put");
        let recalled = store.recall(&reference).expect("recall").expect("stored");
        assert_eq!(serde_json::to_string(&recalled).unwrap(), serde_json::to_string(&payload).unwrap());
    }
    assert_eq!(store.recall("cf-missing").expect("recall"), None);
    store.put_report(&session, &serde_json::json!({"duration_ms": 226.868409})).expect("report");
    assert_eq!(store.reports(&session).expect("reports"), vec![serde_json::json!({"duration_ms": 226.868409})]);

    // A payload of another session fails the whole compaction: nothing of it is stored.
    let other = store.create_session("other").expect("create");
    let foreign = Payload {
        reference: "cf-foreign".into(),
        session: other,
        tool: "Read".into(),
        kind: "file_read".into(),
        target: None,
        tokens: 1,
        message: 0,
        block: 0,
        payload: serde_json::json!("x"),
    };
    let messages = [Message::text(Role::User, "hello")];
    let summary = Summary { head_hash: "h".into(), summarizer: "s".into(), text: "t".into(), usage: Usage::default() };
    let result = store.persist_compaction(&session, &messages, &[foreign], Some(&summary), &serde_json::json!({}));
    assert!(result.is_err());
    assert!(store.export(&session).expect("export").is_empty());
    assert!(store.summaries(&session).expect("summaries").is_empty());
    assert_eq!(store.reports(&session).expect("reports").len(), 1);
    assert_eq!(store.recall("cf-foreign").expect("recall"), None);
    assert!(store.persist_compaction("no-such-session", &messages, &[], None, &serde_json::json!({})).is_err());
}

/// Session metadata is kept per session, replaced whole, and comes back exactly.
fn meta(backend: &Backend) {
    let store = &*backend.open();
    let session = store.create_session("meta").expect("create");
    assert_eq!(store.session_meta(&session).expect("meta"), None);
    let first = serde_json::json!({"format": "openai", "frame": {"model": "m", "temperature": 0.7}});
    store.set_session_meta(&session, &first).expect("set");
    assert_eq!(store.session_meta(&session).expect("meta"), Some(first));
    let second = serde_json::json!({"format": "anthropic"});
    store.set_session_meta(&session, &second).expect("set");
    assert_eq!(store.session_meta(&session).expect("meta"), Some(second));
    assert!(store.set_session_meta("no-such-session", &serde_json::json!({})).is_err());
    assert!(store.session_meta("no-such-session").is_err());
}

/// Calls are kept per session, oldest first, exactly (floats too), go with their session,
/// and a call of no session is refused.
fn calls(backend: &Backend) {
    let store = &*backend.open();
    let session = store.create_session("calls").expect("create");
    let other = store.create_session("other").expect("create");
    assert!(store.calls(&session).expect("calls").is_empty());
    let first = json!({"at": 1, "action": "unchanged", "tokens_received": 10, "cost": 0.1 + 0.2});
    let second = json!({"at": 2, "action": "compacted", "tokens_received": 900, "tokens_sent": 300});
    store.put_call(&session, &first).expect("call");
    store.put_call(&other, &json!({"at": 3})).expect("call");
    store.put_call(&session, &second).expect("call");
    assert_eq!(store.calls(&session).expect("calls"), vec![first, second]);
    assert!(store.put_call("no-such-session", &json!({})).is_err());
    assert!(store.delete_session(&session).expect("delete"));
    assert!(store.calls(&session).map(|calls| calls.is_empty()).unwrap_or(true));
    assert_eq!(store.calls(&other).expect("calls"), vec![json!({"at": 3})]);
}

/// A payload stored in `session` under its own ref.
fn put(store: &dyn SessionStore, session: &str, payload: serde_json::Value) -> String {
    let reference = contextfold::core::hash::payload_ref(&payload);
    let stored = Payload {
        reference: reference.clone(),
        session: session.to_string(),
        tool: "Bash".into(),
        kind: "shell".into(),
        target: None,
        tokens: 1,
        message: 0,
        block: 0,
        payload,
    };
    store.put_payload(&stored).expect("put");
    reference
}

/// Calls the recall tool with `input` until the last page, checking each page's header and
/// size, and returns the pages' bodies put together.
fn recall_all(store: &dyn SessionStore, session: &str, reference: &str) -> (String, usize) {
    let first = handle_recall(store, session, &serde_json::json!({"ref": reference}));
    assert!(!first.is_error, "{}", first.content);
    let Some(header) = first.content.strip_prefix("[page 1/") else { return (first.content, 1) };
    let pages: usize = header.split('/').next().and_then(|n| n.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    let mut whole = String::new();
    for page in 1..=pages {
        let out = handle_recall(store, session, &serde_json::json!({"ref": reference, "page": page}));
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.chars().count() <= MAX_RECALL_CHARS, "page {page} is too big");
        let (header, body) = out.content.split_once('\n').expect("a header line");
        assert!(header.starts_with(&format!("[page {page}/{pages} of {reference}; ")), "{header}");
        if page < pages {
            assert!(header.contains(&format!("call {RECALL_TOOL_NAME} with ref {reference} and page={}", page + 1)));
        }
        whole.push_str(body);
    }
    (whole, pages)
}

/// The recall tool: huge payloads come back in bounded pages that reassemble exactly; bad
/// input, unknown refs and pages out of range are error results; queries find snippets.
fn recall_tool(backend: &Backend) {
    let store = &*backend.open();
    let session = store.create_session("recall").expect("create");
    let lines: String = (0..40_000).map(|i| format!("{i:05} line of a very long build log é😀\n")).collect();
    let reference = put(store, &session, serde_json::json!(lines.clone()));
    let (whole, pages) = recall_all(store, &session, &reference);
    assert!(pages > 20, "{pages} pages");
    assert_eq!(whole, lines, "the pages reassemble to the payload byte for byte");

    // One line longer than a page is cut on character boundaries.
    let line = "é".repeat(100_000);
    let reference = put(store, &session, serde_json::json!(line.clone()));
    assert_eq!(recall_all(store, &session, &reference), (line, 4));

    // A small block list comes back whole, text blocks as they are.
    let blocks = serde_json::json!([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]);
    let reference = put(store, &session, blocks);
    assert_eq!(recall_all(store, &session, &reference), ("first\nsecond".to_string(), 1));

    let unknown = handle_recall(store, &session, &serde_json::json!({"ref": "cf-000000000000"}));
    assert!(unknown.is_error && unknown.content.contains("cf-000000000000"), "{}", unknown.content);
    let out_of_range = handle_recall(store, &session, &serde_json::json!({"ref": reference, "page": 2}));
    assert!(out_of_range.is_error && out_of_range.content.contains("page 2 is out of range"), "{out_of_range:?}");
    for bad in [serde_json::json!({}), serde_json::json!(null), serde_json::json!({"ref": "x", "query": "y"})] {
        let out = handle_recall(store, &session, &bad);
        assert!(out.is_error, "{bad}: {}", out.content);
        assert!(out.content.starts_with(&format!("{RECALL_TOOL_NAME} failed: ")), "{}", out.content);
    }

    store
        .append_messages(&session, &[Message::text(Role::User, "the flaky Zanzibar test fails again")])
        .expect("append");
    let found = handle_recall(store, &session, &serde_json::json!({"query": "zanzibar"}));
    assert!(!found.is_error);
    assert!(found.content.contains("- message 0: ") && found.content.contains("[Zanzibar]"), "{}", found.content);
    let none = handle_recall(store, &session, &serde_json::json!({"query": "quetzalcoatl"}));
    assert!(!none.is_error && none.content.starts_with("no matches"), "{}", none.content);
    for i in 0..25 {
        store.push_messages(&session, &[Message::text(Role::User, format!("wombat sighting {i}"))]).expect("push");
    }
    let first = handle_recall(store, &session, &serde_json::json!({"query": "wombat"}));
    assert!(first.content.starts_with("25 matches for \"wombat\" [page 1/3; "), "{}", first.content);
    assert_eq!(first.content.lines().count(), 11);
    let last = handle_recall(store, &session, &serde_json::json!({"query": "wombat", "page": 3}));
    assert_eq!(last.content.lines().count(), 6, "{}", last.content);
    assert!(handle_recall(store, &session, &serde_json::json!({"query": "wombat", "page": 4})).is_error);
}

/// The lines of a payload from `offset` on, answer by answer, put back together, and the
/// number of answers; each answer's header gives the total and the next offset.
fn recall_by_lines(store: &dyn SessionStore, reference: &str, limit: Option<usize>) -> (String, usize) {
    let (mut whole, mut answers, mut offset) = (String::new(), 0, 0);
    loop {
        let out = recall_lines(store, reference, Lines { offset, limit });
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.chars().count() <= MAX_RECALL_CHARS);
        answers += 1;
        let (header, body) = out.content.split_once('\n').expect("a header line");
        assert!(header.starts_with(&format!("[{reference}: lines {}-", offset + 1)), "{header}");
        whole.push_str(body);
        match header.split_once("pass offset=") {
            Some((_, next)) => offset = next.trim_end_matches(" for more]").parse().expect("an offset"),
            None => {
                assert!(header.ends_with("; the end]"), "{header}");
                return (whole, answers);
            }
        }
    }
}

/// Recall by lines: a payload that fits comes back exactly as stored; a large one in answers
/// bounded by the limit and by [`MAX_RECALL_CHARS`], each with the total line count, that put
/// together are the payload byte for byte; an offset past the end and an unknown ref are
/// errors. Search answers newest first, across sessions or in one.
fn recall_lines_and_search(backend: &Backend) {
    let store = &*backend.open();
    let older = store.create_session("older").expect("create");
    let small = "error: linker `cc` not found\n  = note: No such file\n";
    let reference = put(store, &older, serde_json::json!(small));
    let out = recall_lines(store, &reference, Lines::default());
    assert_eq!((out.content.as_str(), out.is_error), (small, false), "a payload that fits comes back as it is");
    let second = recall_lines(store, &reference, Lines { offset: 1, limit: Some(5) });
    assert_eq!(second.content, format!("[{reference}: lines 2-2 of 2; the end]\n  = note: No such file\n"));

    let log: String = (0..20_000).map(|i| format!("{i:05} line of a very long build log é😀\n")).collect();
    let reference = put(store, &older, serde_json::json!(log.clone()));
    let (whole, answers) = recall_by_lines(store, &reference, None);
    assert_eq!(whole, log, "the answers put together are the payload byte for byte");
    assert!(answers > 10, "{answers} answers");
    assert_eq!(recall_by_lines(store, &reference, Some(7_000)), (log.clone(), answers), "the bound still holds");
    let (whole, answers) = recall_by_lines(store, &reference, Some(500));
    assert_eq!((whole == log, answers), (true, 40));
    let header = recall_lines(store, &reference, Lines { offset: 100, limit: Some(20) }).content;
    assert!(header.starts_with(&format!("[{reference}: lines 101-120 of 20000; pass offset=120 for more]\n00100 ")));
    let past = recall_lines(store, &reference, Lines { offset: 20_000, limit: None });
    assert!(past.is_error && past.content.contains("offset 20000 is past the end"), "{}", past.content);
    // A line longer than an answer is cut, and the header says so.
    let reference = put(store, &older, serde_json::json!("é".repeat(40_000)));
    let cut = recall_lines(store, &reference, Lines::default());
    assert!(
        cut.content.contains("line 1 is longer than one answer holds")
            && cut.content.chars().count() <= MAX_RECALL_CHARS
    );
    let unknown = recall_lines(store, "cf-000000000000", Lines::default());
    assert!(unknown.is_error && unknown.content.contains("no output is stored under ref `cf-000000000000`"));

    store.append_messages(&older, &[Message::text(Role::User, "the Zanzibar build broke")]).expect("append");
    let newer = store.create_session("newer").expect("create");
    let messages: Vec<Message> =
        (0..3).map(|i| Message::text(Role::User, format!("Zanzibar again, take {i}"))).collect();
    store.append_messages(&newer, &messages).expect("append");
    let hits = search_sessions(store, None, "zanzibar", 10).expect("search");
    let order: Vec<(String, HitLocation)> = hits.into_iter().map(|hit| (hit.session, hit.location)).collect();
    let at = |session: &str, position| (session.to_string(), HitLocation::Message(position));
    assert_eq!(order, [at(&newer, 2), at(&newer, 1), at(&newer, 0), at(&older, 0)], "newest first");
    assert_eq!(search_sessions(store, Some(&older), "zanzibar", 10).expect("search").len(), 1);
    assert_eq!(search_sessions(store, None, "zanzibar", 2).expect("search").len(), 2);
    let answer = search_answer(store, None, "zanzibar", 10, "recall it by this ref");
    assert!(answer.content.starts_with("4 matches for \"zanzibar\", newest first:\n"), "{}", answer.content);
    assert!(answer.content.contains(&format!("- session {newer}, message 2: ")), "{}", answer.content);
    let unknown = search_answer(store, Some("no-such-session"), "zanzibar", 10, "");
    assert!(unknown.is_error && unknown.content.contains("there is no session `no-such-session`"), "{unknown:?}");
}

#[test]
fn recall_tool_definitions() {
    use contextfold::core::format::{to_value, Format, Layout};
    let anthropic = recall_tool_definition(Format::Anthropic);
    assert_eq!(anthropic["name"], RECALL_TOOL_NAME);
    assert!(anthropic["description"].as_str().is_some_and(|text| text.contains("ref")));
    let properties = &anthropic["input_schema"]["properties"];
    assert_eq!(
        (properties["ref"]["type"].as_str(), properties["query"]["type"].as_str()),
        (Some("string"), Some("string"))
    );
    assert_eq!(properties["page"]["type"], "integer");
    assert_eq!(recall_tool_definition(Format::ClaudeCode), anthropic);

    let openai = recall_tool_definition(Format::OpenAi);
    assert_eq!(openai["type"], "function");
    assert_eq!(openai["function"]["name"], RECALL_TOOL_NAME);
    // The OpenAI form is what the OpenAI writer makes of the Anthropic one.
    let conversation = Conversation { tools: Some(vec![anthropic]), ..Conversation::default() };
    let written = to_value(&conversation, Format::OpenAi, Layout::Object).expect("writes");
    assert_eq!(written["tools"][0], openai);
    // So is the Responses form of the Responses writer.
    let responses = recall_tool_definition(Format::Responses);
    assert_eq!((&responses["type"], &responses["name"]), (&json!("function"), &json!(RECALL_TOOL_NAME)));
    let written = to_value(&conversation, Format::Responses, Layout::Object).expect("writes");
    assert_eq!(written["tools"][0], responses);
}

/// A store opened again sees everything stored before.
fn reopen(backend: &Backend) {
    let conversation = load(Path::new(EXAMPLE));
    let session = {
        let store = backend.open();
        let session = store.create_session("kept").expect("create");
        store.append_messages(&session, &conversation.messages).expect("append");
        store.set_session_meta(&session, &serde_json::json!({"format": "anthropic"})).expect("meta");
        session
    };
    let store = backend.open();
    assert!(store.sessions().expect("sessions").iter().any(|info| info.id == session && info.name == "kept"));
    assert_eq!(store.export(&session).expect("export"), conversation.messages);
    assert_eq!(store.session_meta(&session).expect("meta"), Some(serde_json::json!({"format": "anthropic"})));
}

/// Two writers, each with its own handle, pushing to one session at once lose nothing and
/// keep each writer's order; a third writes another session meanwhile.
fn two_writers(backend: &Backend) {
    const EACH: usize = 50;
    let session = backend.open().create_session("shared").expect("create");
    let elsewhere = backend.open().create_session("elsewhere").expect("create");
    std::thread::scope(|scope| {
        for writer in 0..2 {
            let session = &session;
            scope.spawn(move || {
                let store = backend.open();
                for i in 0..EACH {
                    let message = Message::text(Role::User, format!("writer {writer} message {i}"));
                    store.push_messages(session, &[message]).expect("append");
                }
            });
        }
        scope.spawn(|| {
            let store = backend.open();
            let messages: Vec<Message> = (0..EACH).map(|i| Message::text(Role::User, format!("other {i}"))).collect();
            store.append_messages(&elsewhere, &messages).expect("append");
        });
    });
    let store = backend.open();
    let messages = store.export(&session).expect("export");
    assert_eq!(messages.len(), 2 * EACH);
    for writer in 0..2 {
        let mine: Vec<String> = messages
            .iter()
            .map(|message| message.to_value()["content"][0]["text"].as_str().unwrap_or_default().to_string())
            .filter(|text| text.starts_with(&format!("writer {writer} ")))
            .collect();
        let expected: Vec<String> = (0..EACH).map(|i| format!("writer {writer} message {i}")).collect();
        assert_eq!(mine, expected, "writer {writer}'s messages are all stored, in order");
    }
    assert_eq!(store.export(&elsewhere).expect("export").len(), EACH);
}

/// The first ten corpus sessions: each history and every payload of a compaction at 8,000
/// tokens come back exactly.
fn corpus(backend: &Backend) {
    let Some(dir) = crate::common::corpus_dir() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the corpus directory is readable")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| {
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or("");
            (name.ends_with(".json") || name.ends_with(".json.gz")) && name != "manifest.json"
        })
        .collect();
    files.sort();
    let store = backend.open();
    let mut payloads = 0;
    for file in files.iter().take(10) {
        let conversation = load(file);
        let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        // At 8k, or at the smallest workable budget when the newest turn takes more.
        let budget = match runtime().block_on(Compactor::default().compact(&conversation, &budget_config(8_000))) {
            Err(CompactError::TooSmall { smallest, .. }) => smallest,
            _ => 8_000,
        };
        payloads += round_trip(store.as_ref(), &name, &conversation, budget);
    }
    println!("corpus: {} sessions, {payloads} payloads recalled", files.len().min(10));
}

/// One test per check and store, named `store::<store>::<check>`.
macro_rules! every_store {
    ($($check:path => $name:ident),* $(,)?) => {
        mod memory {
            $(#[test] fn $name() { $check(&super::Backend::memory()) })*
        }
        #[cfg(feature = "sqlite")]
        mod sqlite_suite {
            $(#[test] fn $name() { $check(&super::Backend::sqlite(stringify!($name))) })*
        }
        #[cfg(feature = "postgres")]
        mod postgres_suite {
            $(#[test] fn $name() {
                if let Some(backend) = super::Backend::postgres(stringify!($name)) { $check(&backend) }
            })*
        }
    };
}

every_store! {
    super::example_round_trip => example_round_trip,
    super::dedup => dedup,
    super::search_and_delete => search_and_delete,
    super::a_removed_output_is_found_once => a_removed_output_is_found_once,
    super::exact_and_atomic => exact_and_atomic,
    super::meta => meta,
    super::calls => calls,
    super::recall_tool => recall_tool,
    super::recall_lines_and_search => recall_lines_and_search,
    super::reopen => reopen,
    super::two_writers => two_writers,
    super::corpus => corpus,
    super::persist::compactor_persists => compactor_persists,
    super::persist::middleware_persists => middleware_persists,
    super::state::state_round_trip => state_round_trip,
    super::state::state_writers_lose_nothing => state_writers_lose_nothing,
    super::state::state_locks => state_locks,
    super::log::log_writes_from_a_position => log_writes_from_a_position,
    super::log::prune_deletes_what_was_not_written_since => prune_deletes_what_was_not_written_since,
    super::log::middleware_logs_each_message_once => middleware_logs_each_message_once,
    super::log::removed_payloads_name_their_place_in_the_log => removed_payloads_name_their_place_in_the_log,
}
