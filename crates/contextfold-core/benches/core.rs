//! Benchmarks of the core: exact versus estimated token counting, memoised counting of a
//! growing conversation, the read → validate → count pipeline on a large session, and
//! compaction (plan with memoised counts, evict, re-plan after one more message).

// Tests and benches read fixtures from disk; the library itself stays free of I/O.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use contextfold_core::evict::{evict, evict_with_ledger, EvictConfig};
use contextfold_core::plan::{plan_with_counts, PlanConfig};
use contextfold_core::tokens::{count_conversation, count_messages, Estimate, Memoized, TokenCounter, TokenLedger};
use contextfold_core::{format, validate, Conversation};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;

/// The largest corpus session (639 messages), then a fallback inside the repository.
const SESSIONS: [&str; 2] = [
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/claudecode-mclaude__c76e5be5-ffd2-4901-a935-885527c83a61.json"
    ),
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/session.json"),
];

fn session() -> Option<(String, Conversation)> {
    for path in SESSIONS {
        if let Ok(text) = std::fs::read_to_string(path) {
            let parsed = format::parse(&text, None).expect("the bench session parses");
            return Some((text, parsed.conversation));
        }
    }
    println!("SKIP core benches: none of {SESSIONS:?} exists");
    None
}

fn counters() -> Vec<&'static dyn TokenCounter> {
    use contextfold_core::tokens::Tokenizer;
    let mut counters: Vec<&'static dyn TokenCounter> =
        Tokenizer::ALL.iter().map(|tokenizer| tokenizer.counter()).collect();
    counters.push(&BpeOpenAi);
    counters
}

/// `o200k` through bpe-openai, the reference the exact counter is checked against, for
/// comparison (its vocabulary loaded before the measurement).
struct BpeOpenAi;

impl TokenCounter for BpeOpenAi {
    fn name(&self) -> &'static str {
        "o200k-bpe-openai"
    }

    fn count_text(&self, text: &str) -> u64 {
        bpe_openai::o200k_base().count(text) as u64
    }
}

fn benches(c: &mut Criterion) {
    let Some((text, conversation)) = session() else {
        return;
    };

    let mut group = c.benchmark_group("count_conversation");
    group.sample_size(20);
    for counter in counters() {
        // Build BPE vocabularies outside the measurement.
        counter.count_text("warm up");
        group.bench_function(counter.name(), |b| b.iter(|| count_conversation(counter, black_box(&conversation))));
        // Exact counters remember pieces per thread: on a fresh thread each time, as a
        // command counts a session once.
        group.bench_function(format!("{} (fresh thread)", counter.name()), |b| {
            b.iter(|| std::thread::scope(|scope| scope.spawn(|| count_conversation(counter, &conversation)).join()))
        });
    }
    group.finish();

    // A conversation growing by one message: a ledger that knows 600 messages syncs to 601,
    // against recounting all 601.
    let messages = &conversation.messages[..conversation.messages.len().min(601)];
    let (history, grown) = (&messages[..messages.len() - 1], messages);
    let mut group = c.benchmark_group("grow_by_one");
    for counter in counters().into_iter().filter(|c| matches!(c.name(), "o200k" | "estimate")) {
        let mut ledger = TokenLedger::new(counter);
        ledger.sync(history);
        group.bench_function(format!("ledger_sync/{}", counter.name()), |b| {
            b.iter_batched_ref(|| ledger.clone(), |ledger| ledger.sync(black_box(grown)), BatchSize::SmallInput)
        });
        group.bench_function(format!("full_recount/{}", counter.name()), |b| {
            b.iter(|| count_messages(counter, black_box(grown)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("pipeline");
    group.sample_size(20);
    group.bench_function("parse+validate+count(estimate)", |b| {
        b.iter(|| {
            let parsed = format::parse(black_box(&text), None).expect("parses");
            let problems = validate(&parsed.conversation);
            (problems.len(), count_conversation(&Estimate, &parsed.conversation))
        })
    });
    group.finish();
}

/// The largest corpus session, or the repository's example with a notice.
fn largest_session() -> Option<Conversation> {
    let [largest, fallback] = SESSIONS;
    let text = match std::fs::read_to_string(largest) {
        Ok(text) => text,
        Err(_) => {
            println!("notice: {largest} not found; plan+evict benches use {fallback}");
            std::fs::read_to_string(fallback).ok()?
        }
    };
    Some(format::parse(&text, None).expect("the bench session parses").conversation)
}

/// The messages' counts as a ledger memoises them.
fn ledger_counts(ledger: &TokenLedger<'_>, messages: usize) -> Vec<u64> {
    (0..messages).map(|index| ledger.message_tokens(index).unwrap_or_default()).collect()
}

/// What a caller does on each request of a long session: plan the cut with memoised counts
/// and evict stale tool output from its per-call copy (copied and dropped outside the
/// measurement); then the same after one more message.
fn compaction_benches(c: &mut Criterion) {
    let Some(conversation) = largest_session() else {
        return;
    };
    let counter: &dyn TokenCounter = &Estimate;
    let plan_config = PlanConfig::default();
    let evict_config = EvictConfig::default();
    let messages = &conversation.messages;

    // Counted once, outside the timed loop, as a caller's ledger would have them.
    let mut ledger = TokenLedger::new(counter);
    ledger.sync(messages);
    let counts = ledger_counts(&ledger, messages.len());

    let mut group = c.benchmark_group("compaction");
    group.sample_size(30);
    group.bench_function("plan_with_counts(estimate)", |b| {
        b.iter(|| plan_with_counts(black_box(&conversation), &plan_config, counter, &counts).map(|plan| plan.cut))
    });
    group.bench_function("evict(estimate)", |b| {
        b.iter_batched_ref(
            || conversation.clone(),
            |copy| evict(copy, &evict_config, counter).offloaded,
            BatchSize::LargeInput,
        )
    });
    group.bench_function("plan+evict(estimate)", |b| {
        b.iter_batched_ref(
            || conversation.clone(),
            |copy| {
                let plan = plan_with_counts(copy, &plan_config, counter, &counts).map(|plan| plan.cut);
                let report = evict(copy, &evict_config, counter);
                (plan, report.offloaded)
            },
            BatchSize::LargeInput,
        )
    });

    // What the middleware does: its ledger already counted every block of the request, so
    // plan and evict reuse those counts.
    group.bench_function("plan+evict(ledger counts, estimate)", |b| {
        b.iter_batched_ref(
            || conversation.clone(),
            |copy| {
                let plan = plan_with_counts(copy, &plan_config, counter, &counts).map(|plan| plan.cut);
                let report = evict_with_ledger(copy, &evict_config, &ledger);
                (plan, report.offloaded)
            },
            BatchSize::LargeInput,
        )
    });

    // A long-lived caller counts with a memoised counter: after the first pass, each text is
    // hashed instead of counted again.
    let memo = Memoized::new(Estimate);
    let mut warm = conversation.clone();
    evict(&mut warm, &evict_config, &memo);
    group.bench_function("plan+evict(memoised estimate, warm)", |b| {
        b.iter_batched_ref(
            || conversation.clone(),
            |copy| {
                let plan = plan_with_counts(copy, &plan_config, &memo, &counts).map(|plan| plan.cut);
                let report = evict(copy, &evict_config, &memo);
                (plan, report.offloaded)
            },
            BatchSize::LargeInput,
        )
    });

    // The history grows by one message: sync the ledger (one message to count) and re-plan.
    let (history, grown) = (&messages[..messages.len() - 1], &conversation);
    let mut known = TokenLedger::new(counter);
    known.sync(history);
    group.bench_function("replan_after_one_message(estimate)", |b| {
        b.iter_batched_ref(
            || known.clone(),
            |ledger| {
                ledger.sync(&grown.messages);
                let counts = ledger_counts(ledger, grown.messages.len());
                plan_with_counts(black_box(grown), &plan_config, counter, &counts).map(|plan| plan.cut)
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(core, benches, compaction_benches);
criterion_main!(core);
