//! Budgets at the edge: too small for any summary, and big enough for the first request.

use crate::common::{corpus_dir, session};
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
    let smallest = match compact(&conversation, 300) {
        Err(CompactError::TooSmall { target: 300, smallest, preamble, summary, tail }) => {
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
    // 30% of a 1,000-token window (less 100 reserved) is too small for any summary.
    let config = MiddlewareConfig::new(1_000, 100);
    let middleware = CompactionMiddleware::new(Compactor::default(), config);
    let prepared = runtime().block_on(middleware.prepare(&history, &[]));
    let event = prepared.event.expect("the overflow compacts");
    assert!(prepared.error.is_none(), "{:?}", prepared.error);
    assert!(event.notes.iter().any(|note| note.contains("too small for a summary")), "{event:?}");
    assert!(event.summary_tokens > 0 && event.messages_folded > 0, "{event:?}");
    assert!(event.target_tokens > 270, "the raised target is reported: {}", event.target_tokens);
}

#[test]
fn no_corpus_session_is_folded_into_an_empty_summary() {
    let Some(dir) = corpus_dir() else { return };
    let compactor = Compactor::default().with_counter(Tokenizer::Estimate.shared());
    let (mut folded, mut refused) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "json") || path.ends_with("manifest.json") {
            continue;
        }
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
    // Too small to keep ~800 tokens of request beside a summary and the newest turn.
    let out = compact(&conversation, 1_500).unwrap();
    assert!(out.report.notes.iter().any(|note| note.contains("first request is too big")), "{:?}", out.report.notes);
}
