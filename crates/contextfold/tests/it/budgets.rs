//! Budgets at the edge: too small for any summary, and big enough for the first request.

use crate::common::{corpus_dir, corpus_files, session};
use contextfold::compactor::{CompactConfig, CompactError, Compactor, Target};
use contextfold::core::format;
use contextfold::core::summary::split_summary;
use contextfold::core::tokens::Tokenizer;
use contextfold::core::{Conversation, Message, Role};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
use serde_json::json;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn compact(conversation: &Conversation, budget: u64) -> Result<contextfold::compactor::Compacted, CompactError> {
    let config = CompactConfig { target: Target::Budget(budget), ..CompactConfig::default() };
    runtime().block_on(Compactor::default().compact(conversation, &config))
}

/// The summary text at the start of `conversation`, if any.
fn summary_of(conversation: &Conversation) -> Option<String> {
    conversation.messages.first().and_then(split_summary).map(|split| split.summary)
}

#[test]
fn a_budget_too_small_for_any_summary_fails_naming_the_smallest_workable_budget() {
    let conversation = session(4, 4, 30);
    let smallest = match compact(&conversation, 150) {
        Err(CompactError::TooSmall { target: 150, smallest, preamble, summary, tail }) => {
            assert_eq!(smallest, preamble + summary + tail);
            smallest
        }
        other => panic!("expected TooSmall, got {other:?}"),
    };
    let err = compact(&conversation, smallest - 1).unwrap_err();
    assert!(err.to_string().contains(&format!("the smallest workable target is {smallest} tokens")), "{err}");
    // At the smallest workable budget the head is folded into a summary that holds something.
    let out = compact(&conversation, smallest).expect("the smallest workable budget works");
    assert!(out.report.messages_folded > 0);
    assert!(out.report.summary_tokens > 0, "{:?}", out.report);
    assert!(summary_of(&out.conversation).is_some_and(|text| !text.trim().is_empty()));
    assert!(out.report.tokens_after <= smallest, "{} > {smallest}", out.report.tokens_after);
}

#[test]
fn below_the_smallest_workable_budget_the_middleware_keeps_what_fits_and_says_so() {
    let history = session(4, 4, 30).messages;
    // 30% of a 500-token window (less 50 reserved) is too small for any summary.
    let config = MiddlewareConfig::new(500, 50);
    let middleware = CompactionMiddleware::new(Compactor::default(), config);
    let prepared = runtime().block_on(middleware.prepare(&history, &[]));
    let event = prepared.event.expect("the overflow compacts");
    assert!(prepared.error.is_none(), "{:?}", prepared.error);
    let raised =
        |note: &String| note.contains("too small for a summary") || note.contains("to keep the newest turn whole");
    assert!(event.notes.iter().any(raised), "{event:?}");
    assert!(event.summary_tokens > 0 && event.messages_folded > 0, "{event:?}");
    assert!(event.target_tokens > 135, "the raised target is reported: {}", event.target_tokens);
}

#[test]
fn no_corpus_session_is_folded_into_an_empty_summary() {
    let Some(dir) = corpus_dir() else { return };
    let compactor = Compactor::default().with_counter(Tokenizer::Estimate.shared());
    let (mut folded, mut refused) = (0, 0);
    for path in corpus_files(&dir) {
        let conversation = format::parse(&std::fs::read_to_string(&path).unwrap(), None).unwrap().conversation;
        for budget in [300, 600, 1_000, 2_000] {
            let config = CompactConfig { target: Target::Budget(budget), ..CompactConfig::default() };
            match runtime().block_on(compactor.compact(&conversation, &config)) {
                Err(CompactError::TooSmall { smallest, .. }) => {
                    assert!(smallest > budget);
                    // The smallest workable budget works.
                    let config = CompactConfig { target: Target::Budget(smallest), ..CompactConfig::default() };
                    let out = runtime().block_on(compactor.compact(&conversation, &config)).unwrap();
                    assert!(
                        out.report.tokens_after <= smallest,
                        "{} at its smallest workable budget {smallest}: {:?}",
                        path.display(),
                        out.report
                    );
                    refused += 1;
                }
                Err(err) => panic!("{}: {err}", path.display()),
                Ok(out) if out.report.messages_folded > 0 => {
                    let summary = summary_of(&out.conversation).unwrap_or_default();
                    assert!(!summary.trim().is_empty(), "{} at {budget}: an empty summary", path.display());
                    assert!(out.report.summary_tokens > 0);
                    folded += 1;
                }
                Ok(_) => {}
            }
        }
    }
    assert!(folded > 50 && refused > 10, "{folded} folded, {refused} refused");
}

/// A session whose first request is long (about 800 tokens) and whose turns are many.
fn long_first_request() -> Conversation {
    let ask: String =
        (0..60).map(|line| format!("Requirement {line}: the parser must accept input form {line}. ")).collect();
    let mut value = session(6, 4, 30).to_value();
    value["messages"][0] = json!({"role": "user", "content": ask});
    Conversation::from_value(value).unwrap()
}

#[test]
fn the_first_request_is_kept_when_it_fits() {
    let conversation = long_first_request();
    let first: &Message = &conversation.messages[0];
    let first_tokens = contextfold::core::count_message(Tokenizer::Estimate.counter(), first);
    assert!((600..1_200).contains(&first_tokens), "{first_tokens}");
    for budget in [3_000, 4_000, 6_000, 8_000] {
        let out = compact(&conversation, budget).unwrap();
        let notes = &out.report.notes;
        assert!(!notes.iter().any(|note| note.contains("first request is too big")), "{budget}: {notes:?}");
        let kept = &out.conversation.messages[0];
        assert_eq!(kept.role, Role::User);
        assert_eq!(kept.content[0], first.content[0], "{budget}: the first request is kept verbatim");
        assert!(out.report.tokens_after <= budget, "{budget}: {}", out.report.tokens_after);
    }
}

#[test]
fn a_first_request_that_does_not_fit_is_folded_and_said_so() {
    let conversation = long_first_request();
    // Too small to keep ~800 tokens of request beside the newest turn and half the
    // summary's budget (250 tokens).
    let out = compact(&conversation, 1_000).unwrap();
    assert!(out.report.notes.iter().any(|note| note.contains("first request is too big")), "{:?}", out.report.notes);
}

/// [`session`] ending in a call whose output (about 3,500 tokens) is the newest turn: no cut
/// can fold it, clipping can shorten it.
fn big_newest_output() -> Conversation {
    let mut value = session(6, 4, 30).to_value();
    let output: String = (0..300).map(|line| format!("test_{line} ... FAILED: assertion {line} != 0\n")).collect();
    let messages = value["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "user", "content": "Now run the whole test suite."}));
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "big", "name": "Bash", "input": {"command": "pytest"}}
    ]}));
    messages
        .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "big", "content": output}]}));
    Conversation::from_value(value).unwrap()
}

/// Regression (a 16-token first request was folded as "too big" whenever the newest turn
/// held a big tool output, which clipping then shortened anyway): the first request is kept
/// beside the newest turn as clipping leaves it, at several budgets.
#[test]
fn hardening_2_a_small_first_request_is_kept_beside_a_big_newest_output() {
    let conversation = big_newest_output();
    let first = &conversation.messages[0];
    let last = conversation.messages.last().unwrap();
    let newest = contextfold::core::count_message(Tokenizer::Estimate.counter(), last);
    assert!(newest > 3_000, "{newest}");
    for budget in [2_000, 3_000, 4_000, 6_000] {
        let out = compact(&conversation, budget).unwrap();
        let notes = &out.report.notes;
        assert!(!notes.iter().any(|note| note.contains("first request is too big")), "{budget}: {notes:?}");
        assert_eq!(out.conversation.messages[0].content[0], first.content[0], "{budget}: kept verbatim");
        assert!(out.report.messages_folded > 0, "{budget}: {:?}", out.report.notes);
        assert!(out.report.tokens_after <= budget, "{budget}: {}", out.report.tokens_after);
    }
}

/// The corpus sessions of the report: a 27-message SWE-agent session with an 818-token
/// request, and a Claude Code session whose 7-token request was folded at 3,000 and 4,000.
#[test]
fn hardening_2_corpus_first_requests_are_kept_where_they_fit() {
    let Some(dir) = corpus_dir() else { return };
    for (name, budgets) in [
        ("sweagent__replay__marshmallow-code__marshmallow-1867__function_calling__marshmallow-code__marshmallow-1867.json", &[3_000, 4_000, 6_000, 8_000][..]),
        ("claudecode-mclaude__3af9b1a7-6512-4883-ad18-320658ced099.json", &[2_000, 3_000, 4_000, 8_000]),
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let conversation = format::parse(&text, None).unwrap().conversation;
        let compactor = Compactor::default();
        for &budget in budgets {
            let config = CompactConfig { target: Target::Budget(budget), ..CompactConfig::default() };
            let out = runtime().block_on(compactor.compact(&conversation, &config)).unwrap();
            let notes = &out.report.notes;
            assert!(!notes.iter().any(|note| note.contains("first request is too big")), "{name} at {budget}: {notes:?}");
            assert_eq!(out.conversation.messages[0].content[0], conversation.messages[0].content[0], "{name} at {budget}");
            assert!(out.report.tokens_after <= budget, "{name} at {budget}: {}", out.report.tokens_after);
        }
    }
}
