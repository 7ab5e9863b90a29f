//! Benchmarks of `CompactionMiddleware::prepare` when nothing needs compacting: the cost an
//! agent pays before every LLM call. The middleware memoises token counts, so a call should
//! cost the new messages only; the target is under 200 µs on a 600-message history.
//!
//! Two cases, both on a middleware that has already seen the 600-message history once:
//! - `same_600`: the same history again (no growth);
//! - `grown_by_one`: the history grown by one message (a fresh, warmed middleware per
//!   iteration, so every measured call really syncs one new message);
//! - `clone_600_reference`: a plain copy of the 600 messages, for comparison, since the
//!   prepared request owns its messages.

use contextfold::compactor::Compactor;
use contextfold::core::format;
use contextfold::core::tokens::Tokenizer;
use contextfold::core::Message;
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;

/// The largest corpus session (639 messages).
const LARGEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/claudecode-mclaude__c76e5be5-ffd2-4901-a935-885527c83a61.json"
);
/// The fallback inside the repository (44 messages, repeated).
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/session.json");

const HISTORY: usize = 600;

/// 601 messages: a 600-message history and the one message it grows by.
fn messages() -> Vec<Message> {
    let read = |path: &str| {
        let text = std::fs::read_to_string(path).ok()?;
        Some(format::parse(&text, None).expect("the bench session parses").conversation.messages)
    };
    if let Some(messages) = read(LARGEST).filter(|messages| messages.len() > HISTORY) {
        return messages[..=HISTORY].to_vec();
    }
    println!("notice: {LARGEST} is missing; repeating the turns of {EXAMPLE} to reach {} messages", HISTORY + 1);
    let example = read(EXAMPLE).expect("examples/session.json parses");
    // The example starts with a user message and ends with an assistant one, so repeating it
    // keeps the roles alternating.
    example.iter().cycle().take(HISTORY + 1).cloned().collect()
}

fn middleware() -> CompactionMiddleware {
    // A 10M-token window: the policy never asks for a compaction.
    CompactionMiddleware::new(
        Compactor::default().with_counter(Tokenizer::Estimate.shared()),
        MiddlewareConfig::new(10_000_000, 16_000),
    )
}

fn benches(c: &mut Criterion) {
    let messages = messages();
    let (history, grown) = (&messages[..HISTORY], &messages[..]);
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");

    let mut group = c.benchmark_group("prepare");
    group.sample_size(50);

    let warm = middleware();
    let first = runtime.block_on(warm.prepare(history, &[]));
    assert!(first.event.is_none() && first.skipped.is_some(), "no compaction with a 10M window");
    group.bench_function("same_600", |b| {
        b.iter(|| runtime.block_on(warm.prepare(black_box(history), &[])));
    });

    group.bench_function("grown_by_one", |b| {
        b.iter_batched(
            || {
                let fresh = middleware();
                runtime.block_on(fresh.prepare(history, &[]));
                fresh
            },
            // The middleware and the prepared request are returned, so their drops are not timed.
            |fresh| {
                let prepared = runtime.block_on(fresh.prepare(black_box(grown), &[]));
                (fresh, prepared)
            },
            BatchSize::PerIteration,
        );
    });
    // For reference: a deep copy of the 600 messages, which every `Prepared` carries.
    group.bench_function("clone_600_reference", |b| b.iter(|| black_box(history).to_vec()));
    group.finish();
}

criterion_group!(middleware_benches, benches);
criterion_main!(middleware_benches);
