//! Replay over the repository's example session: strategies stay valid, the cache model
//! adds up, and `none` is the baseline.

use contextfold::compactor::Compactor;
use contextfold::core::tokens::{count_conversation, Tokenizer};
use contextfold::core::{validate, Conversation, Role};
use contextfold::replay::strategies::{strategy, Setting, STRATEGIES};
use contextfold::replay::{replay, Price, ReplayConfig};
use std::path::Path;
use std::sync::Arc;

fn example() -> Conversation {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/session.json");
    contextfold::input::load(&path, None).expect("the example loads").conversation
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn config(window: u64, cache: bool) -> ReplayConfig {
    let counter = Tokenizer::Estimate.counter();
    ReplayConfig {
        window,
        reserve: 500,
        strategies: STRATEGIES.iter().map(|name| name.to_string()).collect(),
        price: Price::parse("sonnet").unwrap(),
        cache,
        counter,
        compactor: Compactor::default().with_counter(Arc::new(counter)),
        trigger: 0.8,
        target: 0.3,
    }
}

#[test]
fn every_strategy_sends_valid_requests() {
    let conversation = example();
    let counter = Tokenizer::Estimate.counter();
    let setting = Setting {
        window: 3_000,
        reserve: 500,
        system: conversation.system.clone(),
        tools: conversation.tools.clone(),
        counter,
        compactor: Compactor::default().with_counter(Arc::new(counter)),
        trigger: 0.8,
        target: 0.3,
    };
    let calls: Vec<usize> = (1..conversation.messages.len())
        .filter(|&index| conversation.messages[index].role == Role::Assistant)
        .collect();
    for name in STRATEGIES {
        let mut strategy = strategy(name, &setting).expect("a known strategy");
        let mut compacted = 0;
        for &call in &calls {
            let step = runtime().block_on(strategy.step(&conversation.messages[..call]));
            let request = Conversation { messages: step.messages, ..Conversation::default() };
            assert_eq!(validate(&request), Vec::new(), "{name} at call {call}");
            compacted += usize::from(step.compacted);
        }
        if name == "none" {
            assert_eq!(compacted, 0);
        } else {
            assert!(compacted > 0, "{name} never acted on a 6k-token session in a 3k window");
        }
    }
    assert!(strategy("bogus", &setting).is_none());
}

#[test]
fn the_cache_model_adds_up() {
    let conversation = example();
    let results = runtime().block_on(replay(&conversation, &config(100_000, true))).unwrap();
    let calls = conversation.messages.iter().skip(1).filter(|message| message.role == Role::Assistant).count();
    for result in &results {
        assert_eq!(result.steps, calls, "{}", result.strategy);
        assert_eq!(result.cache_read_tokens + result.cache_write_tokens, result.input_tokens, "{}", result.strategy);
    }
    let none = results.iter().find(|result| result.strategy == "none").unwrap();
    assert_eq!(none.cost_vs_none, 1.0);
    assert_eq!(none.compactions, 0);
    // Append-only requests: each call reads the whole previous request from the cache.
    let expected_reads: u64 = none.request_tokens[..none.request_tokens.len() - 1].iter().sum();
    assert_eq!(none.cache_read_tokens, expected_reads);
    assert_eq!(none.peak_request_tokens, *none.request_tokens.last().unwrap());
    let full = count_conversation(Tokenizer::Estimate.counter(), &conversation);
    assert!(none.peak_request_tokens <= full, "the last request is the whole history but the last answer");
    // In a window this large nobody compacts, so every strategy costs what `none` costs;
    // only observation masking acts by age, not size.
    for result in results.iter().filter(|result| result.strategy != "mask-10") {
        assert_eq!(result.compactions, 0, "{}", result.strategy);
        assert!((result.cost_usd - none.cost_usd).abs() < 1e-9, "{}", result.strategy);
    }
}

#[test]
fn without_cache_input_is_billed_in_full() {
    let conversation = example();
    let cached = runtime().block_on(replay(&conversation, &config(100_000, true))).unwrap();
    let uncached = runtime().block_on(replay(&conversation, &config(100_000, false))).unwrap();
    let (cached, uncached) = (&cached[0], &uncached[0]);
    assert_eq!(uncached.cache_read_tokens, 0);
    let price = Price::parse("sonnet").unwrap();
    let expected = (uncached.input_tokens as f64 * price.input + uncached.output_tokens as f64 * price.output) / 1e6;
    assert!((uncached.cost_usd - expected).abs() < 1e-9);
    assert!(cached.cost_usd < uncached.cost_usd, "caching an append-only history pays");
}

#[test]
fn a_small_window_is_compacted_and_probes_are_checked() {
    let conversation = example();
    let results = runtime().block_on(replay(&conversation, &config(4_000, true))).unwrap();
    let none = results.iter().find(|result| result.strategy == "none").unwrap();
    let ours = results.iter().find(|result| result.strategy == "contextfold").unwrap();
    assert!(none.overflow_steps > 0);
    assert!(ours.compactions > 0);
    assert!(ours.peak_request_tokens < none.peak_request_tokens);
    assert!(ours.probes > 0);
    assert!(ours.probe_recall > 0.0 && ours.probe_recall <= 1.0);
}

#[test]
fn prices() {
    assert_eq!(Price::parse("haiku").unwrap(), Price { input: 1.0, output: 5.0 });
    assert_eq!(Price::parse("2.5, 10").unwrap(), Price { input: 2.5, output: 10.0 });
    assert!(Price::parse("cheap").is_err());
    assert!(Price::parse("-1,2").is_err());
}
