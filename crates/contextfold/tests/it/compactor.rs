//! The compactor and the middleware, driven by scripted summarizers: no network.

use crate::common::{leaked, secret_session, secrets, session};
use contextfold::compactor::{ClipLimit, CompactConfig, CompactError, Compacted, Compactor, Step, Strategy, Target};
use contextfold::core::summary::{is_summary_message, split_summary};
use contextfold::core::tokens::{count_conversation, Tokenizer};
use contextfold::core::{validate, Conversation, Message, Role};
use contextfold::event::{Event, Trigger};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
use contextfold::policy::{All, Off, RateLimit, Threshold};
use contextfold::redact::Redactor;
use contextfold::store::{MemoryStore, SessionStore};
use contextfold::summarize::{BoxFuture, SummarizeError, Summarizer, Summary, SummaryRequest, Usage};
use serde_json::json;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// A summarizer that answers from a script and records what it was asked.
#[derive(Default)]
struct Scripted {
    answers: Mutex<VecDeque<Result<String, u16>>>,
    requests: Mutex<Vec<SummaryRequest>>,
    budget: u64,
}

impl Scripted {
    fn new(answers: Vec<Result<&str, u16>>) -> Arc<Scripted> {
        Arc::new(Scripted {
            answers: Mutex::new(answers.into_iter().map(|answer| answer.map(str::to_string)).collect()),
            requests: Mutex::new(Vec::new()),
            budget: 100_000,
        })
    }

    fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

impl Summarizer for Scripted {
    fn id(&self) -> String {
        "scripted/v1".into()
    }

    fn input_budget(&self) -> u64 {
        self.budget
    }

    fn summarize<'a>(&'a self, request: &'a SummaryRequest) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        self.requests.lock().unwrap().push(request.clone());
        let answer = self.answers.lock().unwrap().pop_front().unwrap_or(Err(500));
        Box::pin(async move {
            match answer {
                Ok(text) => Ok(Summary { text, usage: Usage { input_tokens: 100, output_tokens: 10 } }),
                Err(status) => {
                    Err(SummarizeError::Status { provider: "Scripted", status, message: "scripted failure".into() })
                }
            }
        })
    }
}

fn tokens(conversation: &Conversation) -> u64 {
    count_conversation(Tokenizer::Estimate.counter(), conversation)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn auto_evicts_first_and_summarizes_only_when_needed() {
    let conversation = session(4, 6, 40);
    let before = tokens(&conversation);
    let compactor = Compactor::default();
    // A mild target: eviction alone reaches it.
    let mild = CompactConfig { target: Target::Budget(before * 7 / 10), ..CompactConfig::default() };
    let out = runtime().block_on(compactor.compact(&conversation, &mild)).unwrap();
    assert_eq!(out.report.strategy_used.to_string(), "evict");
    assert!(out.report.tokens_after <= before * 7 / 10);
    assert_eq!(out.report.summarizer_calls, 0);
    assert!(validate(&out.conversation).is_empty());
    // A tight target: eviction is not enough, the head is summarized.
    let tight = CompactConfig { target: Target::Budget(2_000), ..CompactConfig::default() };
    let out = runtime().block_on(compactor.compact(&conversation, &tight)).unwrap();
    assert!(out.report.strategy_used.contains(Step::Summarize), "{}", out.report.strategy_used);
    assert!(out.report.tokens_after <= 2_000, "{}", out.report.tokens_after);
    assert!(out.report.valid && validate(&out.conversation).is_empty());
    assert_eq!(out.conversation.system, conversation.system, "system prompt verbatim");
    assert_eq!(out.conversation.extra["model"], "m");
    let summary = split_summary(&out.conversation.messages[0]).expect("a summary message first");
    let pinned: Vec<&str> = summary.pinned.iter().filter_map(|block| block.as_text()).collect();
    assert_eq!(
        pinned,
        ["Request 0: please fix module 0, and don't touch the public API."],
        "the first request is pinned"
    );
    assert!(
        summary.summary.contains("Request 1: please fix module 1"),
        "later requests are summarized: {}",
        summary.summary
    );
    assert!(!summary.summary.contains("First request:"), "the pinned request is not relabelled");
    assert!(summary.summary.contains("module0/file0.py"), "files changed survive");
    // The caller's conversation is untouched.
    assert_eq!(tokens(&conversation), before);
}

#[test]
fn a_conversation_within_target_is_left_alone() {
    let conversation = session(1, 1, 3);
    let config = CompactConfig { target: Target::Budget(1_000_000), ..CompactConfig::default() };
    let out = runtime().block_on(Compactor::default().compact(&conversation, &config)).unwrap();
    assert_eq!(out.report.strategy_used.to_string(), "none");
    assert_eq!(out.conversation, conversation);
}

#[test]
fn llm_summary_is_checked_and_falls_back_to_extractive() {
    let conversation = session(3, 4, 30);
    let config =
        CompactConfig { target: Target::Budget(1_500), strategy: Strategy::Summarize, ..CompactConfig::default() };

    // An LLM summary that forgets the changed files gets them appended.
    let scripted = Scripted::new(vec![Ok("## Objective and user requests\n- fix modules")]);
    let compactor = Compactor::new(scripted.clone());
    let out = runtime().block_on(compactor.compact(&conversation, &config)).unwrap();
    assert_eq!(scripted.calls(), 1);
    assert!(out.report.missing_facts > 0);
    let summary = split_summary(&out.conversation.messages[0]).unwrap().summary;
    assert!(summary.contains("## Preserved facts"));
    assert!(summary.contains("module0/file0.py"));
    let request = scripted.requests.lock().unwrap()[0].clone();
    assert!(request.transcript.contains("<tool_output>"), "the transcript fences tool output");
    assert_eq!(out.report.summarizer_usage, Usage { input_tokens: 100, output_tokens: 10 });

    // A second compaction of the same prefix costs no call.
    let again = runtime().block_on(compactor.compact(&conversation, &config)).unwrap();
    assert!(again.report.cache_hit);
    assert_eq!(scripted.calls(), 1);
    assert_eq!(again.conversation, out.conversation);

    // A failing LLM falls back to the extractive summary, recorded with its reason.
    let failing = Scripted::new(vec![Err(529)]);
    let out = runtime().block_on(Compactor::new(failing.clone()).compact(&conversation, &config)).unwrap();
    assert_eq!(out.report.fallbacks.len(), 1, "{:?}", out.report.fallbacks);
    assert_eq!(out.report.fallbacks[0].from(), "scripted/v1");
    assert_eq!(out.report.fallbacks[0].to(), "extractive/v1");
    assert!(out.report.fallbacks[0].reason().contains("529"));
    assert!(validate(&out.conversation).is_empty());
    assert!(split_summary(&out.conversation.messages[0]).unwrap().summary.contains("## Objective and user requests"));
}

/// A provider's `compaction` item in the head is kept before the summary whatever is folded;
/// it is not the first request, so a folded first request is still the summarizer's to keep.
#[test]
fn a_pinned_compaction_item_alone_does_not_count_as_the_pinned_first_request() {
    let mut conversation = session(3, 4, 30);
    let compaction = json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "E"});
    conversation.messages[2].content.push(contextfold::core::Block::Other(compaction));
    let mut config =
        CompactConfig { target: Target::Budget(1_500), strategy: Strategy::Summarize, ..CompactConfig::default() };
    config.plan.pin_first = contextfold::core::plan::PinFirst::Folded;
    let scripted = Scripted::new(vec![Ok("## Objective and user requests\n- Request 0: fix module 0")]);
    let out = runtime().block_on(Compactor::new(scripted.clone()).compact(&conversation, &config)).unwrap();
    let split = split_summary(&out.conversation.messages[0]).expect("a summary");
    assert_eq!(split.pinned.len(), 1, "only the compaction item is kept before the summary");
    let request = scripted.requests.lock().unwrap()[0].clone();
    assert!(!request.first_request_pinned, "the first request was folded, so the summary must keep it");
}

#[test]
fn heads_too_big_for_one_request_go_in_a_bounded_number_of_chunks() {
    let conversation = session(6, 6, 60);
    let scripted = Arc::new(Scripted {
        answers: Mutex::new((0..20).map(|i| Ok(format!("summary after chunk {i}"))).collect()),
        requests: Mutex::new(Vec::new()),
        budget: 1_500,
    });
    let config = CompactConfig {
        target: Target::Budget(2_500),
        strategy: Strategy::Summarize,
        max_chunks: 4,
        ..CompactConfig::default()
    };
    let out = runtime().block_on(Compactor::new(scripted.clone()).compact(&conversation, &config)).unwrap();
    let calls = scripted.calls();
    assert!((2..=4).contains(&calls), "{calls} calls");
    let requests = scripted.requests.lock().unwrap();
    assert!(requests.iter().all(|request| Tokenizer::Estimate.counter().count_text(&request.transcript) <= 1_500));
    // Each chunk updates the summary of the chunks before it.
    assert_eq!(requests[1].previous.as_deref(), Some("summary after chunk 0"));
    assert!(validate(&out.conversation).is_empty());
}

#[test]
fn repeated_compaction_folds_the_previous_summary_in() {
    let compactor = Compactor::default();
    let config = CompactConfig { target: Target::Budget(2_000), ..CompactConfig::default() };
    let first = runtime().block_on(compactor.compact(&session(3, 4, 30), &config)).unwrap().conversation;
    let mut grown = first.clone();
    grown.messages.extend(session(3, 4, 30).messages.into_iter().map(|mut message| {
        // Fresh ids for the appended turns.
        for block in &mut message.content {
            if let contextfold::core::Block::ToolUse(tool_use) = block {
                tool_use.id.push_str("_b");
            }
            if let contextfold::core::Block::ToolResult(result) = block {
                result.tool_use_id.push_str("_b");
            }
        }
        message
    }));
    // Two user messages in a row where the sessions join: repair merges them.
    let second = runtime().block_on(compactor.compact(&grown, &config)).unwrap();
    assert!(validate(&second.conversation).is_empty());
    let summaries = second.conversation.messages.iter().filter(|message| is_summary_message(message)).count();
    assert_eq!(summaries, 1, "one summary, not a summary of summaries");
    let split = split_summary(&second.conversation.messages[0]).unwrap();
    assert_eq!(split.pinned.len(), 1, "the first request stays pinned");
    assert_eq!(split.summary.matches("First request:").count(), 0);
    assert!(
        split.summary.contains("Request 1: please fix module 1"),
        "the old summary is folded in: {}",
        split.summary
    );
}

#[test]
fn the_newest_huge_output_is_clipped_to_meet_the_budget() {
    let mut conversation = session(1, 2, 10);
    let huge: String = (0..50_000).map(|line| format!("diff line {line}\n")).collect();
    let n = conversation.messages.len();
    conversation.messages.push(Message::text(Role::User, "show me the diff"));
    conversation.messages.push(Message::new(
        Role::Assistant,
        vec![contextfold::core::Block::ToolUse(contextfold::core::ToolUse {
            id: "big".into(),
            name: "Bash".into(),
            input: json!({"command": "git diff"}),
            extra: Default::default(),
        })],
    ));
    conversation.messages.push(
        Conversation::from_value(
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "big", "content": huge}]}]),
        )
        .unwrap()
        .messages
        .remove(0),
    );
    assert_eq!(conversation.messages.len(), n + 3);
    let config = CompactConfig { target: Target::Budget(8_000), ..CompactConfig::default() };
    let out = runtime().block_on(Compactor::default().compact(&conversation, &config)).unwrap();
    assert!(out.report.tokens_after <= 8_000, "{}", out.report.tokens_after);
    assert_eq!(out.report.clipped.len(), 1);
    assert_eq!(out.report.clipped[0].tool, "Bash");
    assert!((out.report.strategy_used.last() == Some(Step::Clip)));
    assert!(validate(&out.conversation).is_empty());
    // Without clipping, no result holds the newest output in the budget: it is refused,
    // naming the smallest budget that holds it.
    let off = CompactConfig { max_tool_output: ClipLimit::Off, ..config };
    match runtime().block_on(Compactor::default().compact(&conversation, &off)) {
        Err(CompactError::TooSmall { smallest, tail, .. }) => assert!(smallest > tail && tail > 8_000, "{tail}"),
        other => panic!("expected TooSmall, got {:?}", other.map(|out| out.report.tokens_after)),
    }
}

fn grow(history: &mut Vec<Message>, turn: usize) {
    let source = session(turn + 1, 3, 40);
    let start = history.len();
    history.extend(source.messages[start..].iter().cloned());
}

#[test]
fn middleware_keeps_the_caller_history_and_stable_decisions() {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let seen = events.clone();
    let mut config = MiddlewareConfig::new(6_000, 1_000);
    config.system = session(1, 1, 1).system;
    let middleware = CompactionMiddleware::new(Compactor::default(), config)
        .with_observer(Arc::new(move |event: &Event| seen.lock().unwrap().push(event.clone())));
    let mut history: Vec<Message> = Vec::new();
    let mut previous: Option<Vec<Message>> = None;
    let mut compactions = 0;
    for turn in 0..8 {
        grow(&mut history, turn);
        let prepared = runtime().block_on(middleware.prepare(&history, &[]));
        if prepared.event.is_some() {
            // The compaction changed what is sent; the caller's history is the one it grew.
            assert_ne!(prepared.messages(), history, "turn {turn}");
        }
        let request = Conversation { messages: prepared.messages(), ..Conversation::default() };
        assert!(validate(&request).is_empty());
        assert!(prepared.request_tokens <= 5_000 || prepared.event.is_none(), "{}", prepared.request_tokens);
        match (&prepared.event, &previous) {
            (None, Some(previous)) => {
                // Without a compaction, the request extends the previous one unchanged.
                assert_eq!(&prepared.messages()[..previous.len()], previous.as_slice(), "turn {turn}");
            }
            (Some(event), _) => {
                compactions += 1;
                assert_ne!(event.trigger, Trigger::Manual);
            }
            _ => {}
        }
        previous = Some(prepared.messages());
    }
    assert!(compactions >= 1);
    let events = events.lock().unwrap();
    assert_eq!(events.len(), compactions);
    assert!(events.iter().all(|event| matches!(event, Event::Compacted(_))), "{events:?}");
}

#[test]
fn overflow_compacts_even_when_the_policy_declines_unless_off() {
    let history = session(4, 4, 40).messages;
    let config = MiddlewareConfig::new(4_000, 500);
    let never = Arc::new(All(vec![Arc::new(Threshold::Off), Arc::new(RateLimit::default())]));
    let middleware = CompactionMiddleware::new(Compactor::default(), config.clone()).with_policy(never);
    let prepared = runtime().block_on(middleware.prepare(&history, &[]));
    assert_eq!(prepared.event.as_ref().map(|event| event.trigger), Some(Trigger::Overflow));
    assert!(prepared.request_tokens <= 3_500, "{}", prepared.request_tokens);

    let off = CompactionMiddleware::new(Compactor::default(), config).with_policy(Arc::new(Off));
    let prepared = runtime().block_on(off.prepare(&history, &[]));
    assert!(prepared.event.is_none(), "off means off");
    assert_eq!(prepared.messages(), history);
}

#[test]
fn calibration_follows_reported_usage() {
    let history = session(2, 2, 10).messages;
    let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(1_000_000, 1_000));
    let first = runtime().block_on(middleware.prepare(&history, &[]));
    middleware.observe_usage(first.request_tokens * 2);
    let second = runtime().block_on(middleware.prepare(&history, &[]));
    assert!(
        second.request_tokens > first.request_tokens * 14 / 10,
        "{} vs {}",
        second.request_tokens,
        first.request_tokens
    );
}

#[test]
fn pending_input_counts_toward_the_request() {
    let history = session(1, 2, 10).messages;
    let pending = [Message::text(Role::User, "x".repeat(4_000))];
    let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(1_000_000, 1_000));
    let without = runtime().block_on(middleware.prepare(&history, &[])).request_tokens;
    let with = runtime().block_on(middleware.prepare(&history, &pending));
    assert!(with.request_tokens > without + 400);
    assert_eq!(with.messages().last(), pending.last());
}

/// Everything a summarizer was given, as one text.
fn sent(request: &SummaryRequest) -> String {
    let head: Vec<_> = request.head.iter().map(|message| message.to_value().to_string()).collect();
    format!("{}\n{:?}\n{}", request.transcript, request.previous, head.join("\n"))
}

#[test]
fn with_a_redactor_no_secret_reaches_the_summarizer_or_the_summary() {
    let conversation = secret_session(3, 4, 30);
    let config =
        CompactConfig { target: Target::Budget(1_500), strategy: Strategy::Summarize, ..CompactConfig::default() };
    let [aws, ..] = secrets();

    // Without a redactor every secret goes out: the redactor is what keeps them in.
    let plain = Scripted::new(vec![Ok("## Objective and user requests\n- fix modules")]);
    runtime().block_on(Compactor::new(plain.clone()).compact(&conversation, &config)).unwrap();
    assert_eq!(leaked(&sent(&plain.requests.lock().unwrap()[0])).len(), 4);

    // An LLM that writes a secret anyway (pieced together, or remembered): the summary is checked.
    let echo = format!("## Objective and user requests\n- deploy with key {aws}");
    let scripted = Scripted::new(vec![Ok(echo.as_str())]);
    let compactor = Compactor::new(scripted.clone()).with_redactor(Redactor::new());
    let out = runtime().block_on(compactor.compact(&conversation, &config)).unwrap();
    let request = sent(&scripted.requests.lock().unwrap()[0]);
    assert_eq!(leaked(&request), Vec::<String>::new(), "{request}");
    for mask in ["aws-access-key-id", "github-token", "private-key", "secret"] {
        assert!(request.contains(&format!("[REDACTED:{mask}]")), "{mask} in {request}");
    }
    let summary = split_summary(&out.conversation.messages[0]).unwrap().summary;
    assert_eq!(leaked(&summary), Vec::<String>::new(), "{summary}");
    assert!(summary.contains("deploy with key [REDACTED:aws-access-key-id]"), "{summary}");
    assert_eq!(out.report.secrets_redacted, 5, "four in the head, one in the summary");
    assert!(out.report.notes.iter().any(|note| note.contains("the summary held 1 secret")), "{:?}", out.report.notes);
    assert_eq!(serde_json::to_value(&out.report).unwrap()["secrets_redacted"], 5);

    // The extractive summarizer, with and without.
    let extractive = |compactor: Compactor| {
        let out = runtime().block_on(compactor.compact(&conversation, &config)).unwrap();
        (split_summary(&out.conversation.messages[0]).unwrap().summary, out.report)
    };
    let (summary, report) = extractive(Compactor::default());
    assert!(!leaked(&summary).is_empty(), "the extractive summary quotes the head: {summary}");
    assert!(serde_json::to_value(&report).unwrap().get("secrets_redacted").is_none(), "absent when 0");
    let (summary, report) = extractive(Compactor::default().with_redactor(Redactor::new()));
    assert_eq!(leaked(&summary), Vec::<String>::new(), "{summary}");
    assert_eq!(report.secrets_redacted, 4);
}

#[test]
fn with_a_redactor_and_a_store_nothing_stored_holds_a_secret() {
    let conversation = secret_session(3, 4, 30);
    let config = CompactConfig { target: Target::Budget(1_500), ..CompactConfig::default() };
    let compact = |redactor: Option<Redactor>| {
        let store = Arc::new(MemoryStore::new());
        let session = store.create_session("secrets").unwrap();
        let mut compactor = Compactor::default().with_store(store.clone(), session.clone());
        if let Some(redactor) = redactor {
            compactor = compactor.with_redactor(redactor);
        }
        let out = runtime().block_on(compactor.compact(&conversation, &config)).unwrap();
        assert!(out.report.strategy_used.contains(Step::Evict), "{}", out.report.strategy_used);
        let mut stored: Vec<String> =
            store.export(&session).unwrap().iter().map(|message| message.to_value().to_string()).collect();
        stored.extend(store.summaries(&session).unwrap().into_iter().map(|summary| summary.text));
        stored.extend(store.reports(&session).unwrap().iter().map(ToString::to_string));
        for item in &out.report.items {
            stored.push(store.recall(&item.reference).unwrap().expect("stored").to_string());
        }
        stored.join("\n")
    };
    assert_eq!(leaked(&compact(None)).len(), 4, "the store keeps the history as it came");
    let stored = compact(Some(Redactor::new()));
    assert_eq!(leaked(&stored), Vec::<String>::new(), "{stored}");
    assert!(stored.contains("DB_PASSWORD=[REDACTED:secret]"));
}

/// A summary at the start, then one tool loop led by signed thinking that cannot be cut: the
/// only room left for the summary is what the loop leaves under the limit.
fn summary_then_signed_loop() -> Conversation {
    use contextfold::core::extract::{Ask, Facts};
    use contextfold::core::handoff::{handoff, FirstRequest};
    use contextfold::core::summary::summary_block;
    let asks = (0..80).map(|i| Ask { message: i, text: format!("Request {i}: update module_{i} and its tests") });
    let facts = Facts { user_asks: asks.collect(), ..Facts::default() };
    let summary = handoff(&facts, None, FirstRequest::InFacts, 100_000, Tokenizer::Estimate.counter());
    let mut messages = vec![json!({"role": "user", "content": [
        summary_block(&summary).to_value(),
        {"type": "text", "text": "Keep going."}
    ]})];
    for step in 0..12 {
        let mut content = vec![
            json!({"type": "tool_use", "id": format!("t{step}"), "name": "Bash", "input": {"command": format!("make step{step}")}}),
        ];
        if step == 0 {
            content.insert(0, json!({"type": "thinking", "thinking": "Plan the steps.", "signature": "c2lnbmVk"}));
        }
        messages.push(json!({"role": "assistant", "content": content}));
        let output = format!("step {step} output line\n").repeat(40);
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{step}"), "content": output}]}));
    }
    Conversation::from_value(json!({"messages": messages})).expect("valid")
}

#[test]
fn a_limit_shrinks_the_summary_so_the_request_fits() {
    let conversation = summary_then_signed_loop();
    let counter = Tokenizer::Estimate.counter();
    let loop_tokens = count_conversation(
        counter,
        &Conversation { messages: conversation.messages[1..].to_vec(), ..conversation.clone() },
    );
    let limit = loop_tokens + 500;
    let compactor = Compactor::default();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let config = CompactConfig {
        target: Target::Budget(limit),
        evict: contextfold::core::evict::EvictConfig { keep_recent: Some(100), ..Default::default() },
        max_tool_output: ClipLimit::Off,
        ..CompactConfig::default()
    };
    // Without a limit the summary keeps its usual budget and the result is over.
    let free = runtime.block_on(compactor.compact(&conversation, &config)).expect("compacts");
    assert!(free.report.tokens_after > limit, "{} <= {limit}", free.report.tokens_after);
    let capped = CompactConfig { limit: Some(limit), ..config };
    let out = runtime.block_on(compactor.compact(&conversation, &capped)).expect("compacts");
    assert!(out.report.tokens_after <= limit, "{} > {limit}", out.report.tokens_after);
    assert!(validate(&out.conversation).is_empty());
    assert!(is_summary_message(&out.conversation.messages[0]));
}

#[test]
fn a_summary_squeezed_by_a_tail_that_cannot_be_cut_is_handed_back_whole() {
    // Forty turns to fold, then a loop led by signed thinking that no cut may split.
    let looped = summary_then_signed_loop();
    let mut messages = Vec::new();
    for i in 0..40 {
        messages.push(Message::text(Role::User, format!("Request {i}: update module_{i} and its tests")));
        messages.push(Message::text(Role::Assistant, format!("Done {i}.")));
    }
    messages.push(Message::text(Role::User, "Keep going."));
    messages.extend(looped.messages[1..].iter().cloned());
    let conversation = Conversation { messages, ..Conversation::default() };
    assert!(validate(&conversation).is_empty());
    let kept = Conversation { messages: looped.messages[1..].to_vec(), ..Conversation::default() };
    let (out, limit) = compact_in_room(&conversation, &kept, 300);
    assert!(out.report.tokens_after <= limit, "{} > {limit}", out.report.tokens_after);
    let sent = split_summary(&out.conversation.messages[0]).expect("a summary").summary;
    assert!(!sent.contains("\"Request 20: "), "the summary gave way:\n{sent}");
    // What the room left out is not lost: the full summary, which the middleware restores
    // before the next fold, holds every request.
    let full = out.full_summary.expect("the full summary is handed back");
    assert!((1..40).all(|i| full.contains(&format!("Request {i}: update module_{i}"))), "{full}");
    assert!(out.report.strategy_used.contains(Step::ShrinkSummary), "{}", out.report.strategy_used);
}

#[test]
fn a_summary_shortened_to_fit_is_restored_whole() {
    use contextfold::compactor::restore_summary;
    let mut conversation = summary_then_signed_loop();
    // The summary alone leads: there is nothing new to fold, only the summary to shorten.
    conversation.messages[0].content.truncate(1);
    let original = split_summary(&conversation.messages[0]).expect("a summary").summary;
    let kept = Conversation { messages: conversation.messages[1..].to_vec(), ..conversation.clone() };
    let (out, limit) = compact_in_room(&conversation, &kept, 500);
    assert!(out.report.tokens_after <= limit, "{} > {limit}", out.report.tokens_after);
    let shortened = split_summary(&out.conversation.messages[0]).expect("a summary").summary;
    assert!(shortened.len() < original.len());
    let full = out.full_summary.expect("the full summary is handed back");
    assert_eq!(full, original);
    let mut messages = out.conversation.messages.clone();
    assert!(restore_summary(&mut messages, &full));
    assert_eq!(split_summary(&messages[0]).expect("a summary").summary, original);
}

#[test]
fn the_middleware_folds_a_shortened_summary_from_its_full_text() {
    let mut history = summary_then_signed_loop().messages;
    history[0].content.truncate(1);
    let full = split_summary(&history[0]).expect("a summary").summary;
    let counter = Tokenizer::Estimate.counter();
    let loop_tokens =
        count_conversation(counter, &Conversation { messages: history[1..].to_vec(), ..Default::default() });
    let scripted = Scripted::new(vec![Ok("## Objective and user requests\n- \"Wrap up.\"")]);
    let compactor = Compactor::new(scripted.clone()).with_counter(Tokenizer::Estimate.shared());
    let mut config = MiddlewareConfig::new(loop_tokens + 600, 0);
    config.compact.evict.keep_recent = Some(100);
    config.compact.max_tool_output = ClipLimit::Off;
    let middleware = CompactionMiddleware::new(compactor, config).with_policy(Arc::new(Threshold::Off));

    // Nothing can be cut: the summary is shortened so the request fits.
    let first = runtime().block_on(middleware.prepare(&history, &[]));
    let event = first.event.as_ref().expect("an overflow compaction");
    assert!(event.strategy.contains(Step::ShrinkSummary), "{event:?}");
    let sent = split_summary(&first.messages()[0]).expect("a summary").summary;
    assert!(sent.len() < full.len());
    assert_eq!(scripted.calls(), 0, "shortening needs no summarizer");

    // A new turn makes the loop foldable: the summarizer is given the full summary back.
    history.push(Message::text(Role::Assistant, "All twelve steps ran."));
    history.push(Message::text(Role::User, "Now wrap up. ".repeat(60)));
    let second = runtime().block_on(middleware.prepare(&history, &[]));
    assert!(second.event.is_some());
    let requests = scripted.requests.lock().unwrap();
    let previous = requests.last().and_then(|request| request.previous.clone()).expect("a previous summary");
    assert_eq!(previous, full, "the summary folded is the full one, not the one sent");
}

/// `conversation` compacted to a budget `room` tokens over what `kept` (the messages that
/// cannot be cut) holds, by estimate, with nothing evicted or clipped; and that budget.
fn compact_in_room(conversation: &Conversation, kept: &Conversation, room: u64) -> (Compacted, u64) {
    let limit = count_conversation(Tokenizer::Estimate.counter(), kept) + room;
    let config = CompactConfig {
        target: Target::Budget(limit),
        limit: Some(limit),
        evict: contextfold::core::evict::EvictConfig { keep_recent: Some(100), ..Default::default() },
        max_tool_output: ClipLimit::Off,
        ..CompactConfig::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    (runtime.block_on(Compactor::default().compact(conversation, &config)).expect("compacts"), limit)
}
