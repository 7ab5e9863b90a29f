//! Mid-conversation system messages through the compactor: whatever is evicted, folded or
//! clipped, the result is valid, starts with a user message, and holds every system message
//! of the input verbatim and in order (those of the tail where they were).

use crate::common::{runtime, session};
use contextfold::compactor::{CompactConfig, Compactor, Strategy, Target, Undersized};
use contextfold::core::tokens::{count_conversation, Tokenizer};
use contextfold::core::{validate, Block, Conversation, Message, Role};
use proptest::prelude::*;

/// `conversation` with a system message after each user message `picks` selects (one that
/// an assistant message follows, or the last), numbered in order.
fn with_system_messages(conversation: &Conversation, picks: &[bool]) -> Conversation {
    let mut out = conversation.clone();
    let mut messages = Vec::new();
    let mut number = 0;
    let last = conversation.messages.len() - 1;
    for (index, message) in conversation.messages.iter().enumerate() {
        messages.push(message.clone());
        let allowed =
            message.role == Role::User && (index == last || conversation.messages[index + 1].role == Role::Assistant);
        if allowed && picks.get(index % picks.len().max(1)).copied().unwrap_or(false) {
            number += 1;
            messages.push(Message::text(Role::System, format!("System note {number}: keep the public API.")));
        }
    }
    out.messages = messages;
    out
}

fn system_texts(conversation: &Conversation) -> Vec<String> {
    conversation
        .messages
        .iter()
        .filter(|message| message.role == Role::System)
        .flat_map(|message| message.content.iter().filter_map(Block::as_text).map(str::to_string))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_system_messages_verbatim_and_the_output_valid(
        turns in 1usize..6,
        cycles in 1usize..5,
        picks in prop::collection::vec(any::<bool>(), 1..8),
        share in 0.1f64..0.9,
        strategy in prop_oneof![Just(Strategy::Auto), Just(Strategy::Summarize), Just(Strategy::Evict)],
    ) {
        let conversation = with_system_messages(&session(turns, cycles, 30), &picks);
        prop_assert!(validate(&conversation).is_empty(), "{:?}", validate(&conversation));
        let counter = Tokenizer::Chars4.counter();
        let total = count_conversation(counter, &conversation);
        let config = CompactConfig {
            target: Target::Budget((total as f64 * share) as u64),
            strategy,
            // A share of a small session may be below what any summary needs: compact to
            // the smallest workable target then (the property holds at any target).
            undersized: Undersized::Raise,
            ..CompactConfig::default()
        };
        let compacted = runtime()
            .block_on(Compactor::default().with_counter(std::sync::Arc::new(counter)).compact(&conversation, &config))
            .map_err(|err| TestCaseError::fail(err.to_string()))?;
        let out = &compacted.conversation;
        prop_assert!(validate(out).is_empty(), "{:?}", validate(out));
        prop_assert_eq!(out.messages[0].role, Role::User);
        prop_assert_eq!(system_texts(out), system_texts(&conversation));
        // No system message's text went into the summary or any other message.
        for message in out.messages.iter().filter(|message| message.role != Role::System) {
            for text in message.content.iter().filter_map(Block::as_text) {
                prop_assert!(!text.contains("System note"), "a system message was folded: {}", text);
            }
        }
    }
}

/// `conversation` summarized to a fifth of its tokens (counted as characters over four).
fn summarized_to_a_fifth(conversation: &Conversation) -> contextfold::compactor::Compacted {
    let counter = Tokenizer::Chars4.counter();
    let total = count_conversation(counter, conversation);
    let config =
        CompactConfig { target: Target::Budget(total / 5), strategy: Strategy::Summarize, ..CompactConfig::default() };
    runtime()
        .block_on(Compactor::default().with_counter(std::sync::Arc::new(counter)).compact(conversation, &config))
        .expect("compacts")
}

#[test]
fn a_head_system_message_is_kept_after_the_summary() {
    let conversation = with_system_messages(&session(4, 3, 40), &[true, false]);
    let first = system_texts(&conversation);
    assert!(first.len() >= 2, "{first:?}");
    let compacted = summarized_to_a_fifth(&conversation);
    let out = &compacted.conversation;
    assert!(compacted.report.messages_folded > 0, "{:?}", compacted.report);
    assert!(validate(out).is_empty(), "{:?}", validate(out));
    assert_eq!(out.messages[1].role, Role::System, "right after the summary message");
    assert_eq!(system_texts(out), first);
}

/// A harness that repeats the same reminder after many turns: the copies in the folded head
/// are dropped but the newest, and the report counts them.
#[test]
fn identical_reminders_are_kept_once_and_counted() {
    let mut conversation = session(6, 3, 40);
    let mut messages = Vec::new();
    let last = conversation.messages.len() - 1;
    for (index, message) in conversation.messages.iter().enumerate() {
        messages.push(message.clone());
        if message.role == Role::User && index < last && conversation.messages[index + 1].role == Role::Assistant {
            messages.push(Message::text(Role::System, "Reminder: keep the public API."));
        }
    }
    let copies = messages.iter().filter(|message| message.role == Role::System).count();
    assert!(copies >= 4, "{copies}");
    conversation.messages = messages;
    let compacted = summarized_to_a_fifth(&conversation);
    let kept = system_texts(&compacted.conversation).len();
    assert!(kept >= 1 && kept < copies, "{kept} of {copies}");
    assert_eq!(compacted.report.reminders_folded, copies - kept, "{:?}", compacted.report);
    assert!(validate(&compacted.conversation).is_empty());
    let json = serde_json::to_value(&compacted.report).expect("JSON");
    assert_eq!(json["reminders_folded"], copies - kept);
}
