//! The compactor and the middleware with a store: what each compaction removed is kept
//! and recallable, over every store.

use super::{recall_all, runtime, Backend};
use contextfold::compactor::{CompactConfig, CompactError, Compactor, Step, Strategy, Target};
use contextfold::core::clip::CLIP_PREFIX;
use contextfold::core::hash::payload_ref;
use contextfold::core::summary::{recall_note, RECALL_NOTE_PREFIX};
use contextfold::core::{Block, Conversation, Message, ToolResultContent};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig, PrepareError};
use contextfold::store::SessionStore;
use contextfold::store::RECALL_TOOL_NAME;
use serde_json::{json, Value};
use std::collections::HashMap;

/// A coding session of `turns` turns, each a shell call with an output of `lines` lines;
/// every fourth output is ten times longer.
fn synthetic(turns: usize, lines: usize) -> Vec<Message> {
    let mut messages = Vec::new();
    for turn in 0..turns {
        let id = format!("call{turn}");
        let size = if turn % 4 == 3 { lines * 10 } else { lines };
        let output: String =
            (0..size).map(|line| format!("turn {turn} line {line}: test_{line} passed in 0.{line}s\n")).collect();
        messages.push(json!({"role": "user", "content": format!("step {turn}: run the tests again")}));
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("pytest -k part{turn}")}}]}));
        messages
            .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}));
        messages.push(json!({"role": "assistant", "content": format!("Turn {turn} is done.")}));
    }
    Conversation::from_value(Value::Array(messages)).expect("a valid session").messages
}

/// The payloads of `messages`' tool results by their ref.
fn originals(messages: &[Message]) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for block in messages.iter().flat_map(|message| &message.content) {
        let Block::ToolResult(result) = block else { continue };
        let payload = match &result.content {
            Some(ToolResultContent::Text(text)) => Value::String(text.clone()),
            Some(ToolResultContent::Blocks(blocks)) => Value::Array(blocks.iter().map(Block::to_value).collect()),
            None => continue,
        };
        out.insert(payload_ref(&payload), payload);
    }
    out
}

/// The refs of every payload a stored report names.
fn report_refs(report: &Value) -> Vec<String> {
    ["items", "clipped"]
        .iter()
        .flat_map(|key| report[key].as_array().cloned().unwrap_or_default())
        .filter_map(|item| item["ref"].as_str().map(str::to_string))
        .collect()
}

/// Every ref of every stored report recalls its original: one of `originals`, or a clipped
/// text whose own marker names an original.
fn check_recalls(store: &dyn SessionStore, session: &str, originals: &HashMap<String, Value>) -> usize {
    let mut checked = 0;
    for report in store.reports(session).expect("reports") {
        for reference in report_refs(&report) {
            let recalled = store.recall(&reference).expect("recall").unwrap_or_else(|| panic!("{reference} is stored"));
            assert_eq!(payload_ref(&recalled), reference, "{reference} holds its own payload");
            match originals.get(&reference) {
                Some(original) => assert_eq!(&recalled, original, "{reference}"),
                None => {
                    // An output clipped on ingest and evicted later: its marker names the original.
                    let text = recalled.as_str().unwrap_or_default();
                    let marker = text.find(CLIP_PREFIX).unwrap_or_else(|| panic!("{reference} is no original"));
                    let inner = text[marker..].split("ref ").nth(1).and_then(|rest| rest.get(..15)).unwrap_or("");
                    assert_eq!(store.recall(inner).expect("recall").as_ref(), originals.get(inner), "{inner}");
                }
            }
            if let Value::String(text) = &recalled {
                assert_eq!(&recall_all(store, session, &reference).0, text, "the tool gives {reference} back");
            }
            checked += 1;
        }
    }
    checked
}

/// The compactor with a store keeps the history, each payload, the summary and the report;
/// pointers and the summary name the recall tool.
pub(super) fn compactor_persists(backend: &Backend) {
    let store = backend.open();
    let messages = synthetic(12, 30);
    let conversation = Conversation { messages: messages.clone(), ..Conversation::default() };
    let session = store.create_session("compactor").expect("create");
    let mut config = CompactConfig { target: Target::Budget(3_000), ..CompactConfig::default() };
    config.evict.recall_tool = Some(RECALL_TOOL_NAME.into());
    let compactor = Compactor::default().with_store(store.clone(), session.clone());
    let compacted = runtime().block_on(compactor.compact(&conversation, &config)).expect("compaction succeeds");
    let report = &compacted.report;
    assert!(report.strategy_used.contains(Step::Summarize) && report.offloaded > 0, "{}", report.strategy_used);

    assert_eq!(store.export(&session).expect("export"), messages, "the original history is stored");
    assert_eq!(check_recalls(store.as_ref(), &session, &originals(&messages)), report.offloaded + report.clipped.len());
    assert_eq!(store.reports(&session).expect("reports"), vec![serde_json::to_value(report).expect("json")]);
    let summary = compacted.summary.clone().expect("a summary");
    assert_eq!(store.summaries(&session).expect("summaries"), vec![summary.clone()]);
    assert_eq!(summary.summarizer, "extractive/v1");
    assert!(!summary.text.contains(RECALL_NOTE_PREFIX));

    let first = compacted.conversation.messages[0].content.iter().filter_map(Block::as_text).collect::<String>();
    assert!(first.contains(&recall_note(RECALL_TOOL_NAME)) && first.contains(summary.text.trim_end()), "{first}");
    // A second compaction of the same history stores a second report, not the history again;
    // each of its pointers names the tool.
    let config = CompactConfig { strategy: Strategy::Evict, ..config };
    let evicted = runtime().block_on(compactor.compact(&conversation, &config)).expect("compaction succeeds");
    assert_eq!(store.export(&session).expect("export"), messages);
    assert_eq!(store.reports(&session).expect("reports").len(), 2);
    let sent = serde_json::to_string(&evicted.conversation.to_value()).expect("json");
    let pointers = sent.matches("[contextfold: offloaded ").count();
    assert!(pointers > 0, "{sent}");
    assert_eq!(sent.matches("call context_recall with this ref to restore; ref cf-").count(), pointers);
    assert!(check_recalls(store.as_ref(), &session, &originals(&messages)) > pointers);

    // Without the recall tool the pointers keep their usual text.
    let plain = Compactor::default().with_store(store.clone(), session.clone());
    let config = CompactConfig { evict: CompactConfig::default().evict, ..config };
    let out = runtime().block_on(plain.compact(&conversation, &config)).expect("compaction succeeds");
    let sent = serde_json::to_string(&out.conversation.to_value()).expect("json");
    assert!(!sent.contains("context_recall") && sent.contains("re-run the command to restore"));

    // A store that cannot keep the compaction fails it loudly, with the compaction.
    let broken = Compactor::default().with_store(store.clone(), "no-such-session");
    match runtime().block_on(broken.compact(&conversation, &config)) {
        Err(CompactError::Store { source, compacted }) => {
            assert!(source.to_string().contains("no-such-session"), "{source}");
            assert_eq!(compacted.conversation, out.conversation);
        }
        other => panic!("expected a store error, got {other:?}"),
    }
}

/// The middleware with a store keeps the caller's history (not its working copy), each
/// payload of each compaction, and each output it clipped on ingest.
pub(super) fn middleware_persists(backend: &Backend) {
    let store = backend.open();
    let session = store.create_session("middleware").expect("create");
    let mut config = MiddlewareConfig::new(8_000, 1_000);
    config.compact.evict.recall_tool = Some(RECALL_TOOL_NAME.into());
    config.clip_on_ingest = Some(1_500);
    let middleware = CompactionMiddleware::new(Compactor::default().with_store(store.clone(), session.clone()), config);
    let all = synthetic(24, 20);
    let mut events = 0;
    let mut stored_len = 0;
    for turn in 1..=24 {
        let history = &all[..turn * 4 - 1];
        let prepared = runtime().block_on(middleware.prepare(history, &all[turn * 4 - 1..turn * 4]));
        assert!(prepared.error.is_none(), "{:?}", prepared.error);
        if let Some(event) = &prepared.event {
            assert_eq!(event.store_error, None);
            events += 1;
            stored_len = history.len();
        }
    }
    assert!(events >= 2, "{events} compactions");
    assert_eq!(store.reports(&session).expect("reports").len(), events);
    assert_eq!(store.export(&session).expect("export"), all[..stored_len], "the caller's history is stored");
    let checked = check_recalls(store.as_ref(), &session, &originals(&all));
    assert!(checked > 0);
    // The outputs clipped on ingest are stored as they are clipped.
    let long = &all[4 * 23 + 2];
    let reference = originals(std::slice::from_ref(long)).into_keys().next().expect("an output");
    assert!(store.recall(&reference).expect("recall").is_some(), "the last long output, clipped on ingest");

    let now = runtime().block_on(middleware.compact_now(&all));
    assert!(now.error.is_none(), "{:?}", now.error);
    assert_eq!(now.event.and_then(|event| event.store_error), None);
    assert_eq!(store.export(&session).expect("export"), all);

    // A store that cannot keep a compaction: the compaction is sent, and the event says so.
    let broken = CompactionMiddleware::new(
        Compactor::default().with_store(store.clone(), "no-such-session"),
        MiddlewareConfig::new(8_000, 1_000),
    );
    let now = runtime().block_on(broken.compact_now(&all));
    let error = now.event.expect("an event").store_error.expect("a store error");
    assert!(error.contains("no-such-session"), "{error}");
    assert!(matches!(now.error, Some(PrepareError::Store(_))), "{:?}", now.error);
    assert!(now.history.len() < all.len());
}
