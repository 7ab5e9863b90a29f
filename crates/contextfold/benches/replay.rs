//! Replay must stay linear in a session's length: a call costs what changed, not the length
//! of the history. Sessions of 10k, 20k and 40k alternating tiny messages (a user line, an
//! assistant line) are replayed at a 16k window with `none` (the whole history every call)
//! and `contextfold` (the default middleware, compacting often); linear means the time per
//! message stays flat as the session doubles.

use contextfold::compactor::Compactor;
use contextfold::core::tokens::{TokenCounter, Tokenizer};
use contextfold::core::{Conversation, Message, Role};
use contextfold::replay::{replay, Price, ReplayConfig};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

fn session(messages: usize) -> Conversation {
    let messages = (0..messages)
        .map(|index| {
            let role = if index % 2 == 0 { Role::User } else { Role::Assistant };
            Message::text(role, format!("message {index} of the session"))
        })
        .collect();
    Conversation { messages, ..Conversation::default() }
}

fn config(strategy: &str) -> ReplayConfig {
    let counter: Arc<dyn TokenCounter> = Arc::new(Tokenizer::Estimate.memoized());
    ReplayConfig {
        window: 16_000,
        reserve: 4_000,
        strategies: vec![strategy.to_string()],
        price: Price::parse("sonnet").expect("a preset"),
        cache: true,
        counter: counter.clone(),
        compactor: Compactor::default().with_counter(counter),
        trigger: 0.8,
        target: 0.3,
        progress: None,
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let mut group = c.benchmark_group("replay");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(10));
    for strategy in ["none", "contextfold"] {
        for messages in [10_000, 20_000, 40_000] {
            let conversation = session(messages);
            let config = config(strategy);
            group.throughput(Throughput::Elements(messages as u64));
            group.bench_with_input(BenchmarkId::new(strategy, messages), &conversation, |b, conversation| {
                b.iter(|| black_box(runtime.block_on(replay(conversation, &config)).expect("replays")))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
