//! Replay over the repository's example session: strategies stay valid, the cache model
//! adds up, and `none` is the baseline.

use contextfold::compactor::Compactor;
use contextfold::core::tokens::{count_conversation, TokenCounter, Tokenizer};
use contextfold::core::{validate, Conversation, Role};
use contextfold::replay::strategies::{strategy, Setting, STRATEGIES};
use contextfold::replay::{replay, replay_with, InvalidPrice, Price, ReplayConfig, ReplayError};
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
    let counter = Tokenizer::Estimate.shared();
    ReplayConfig {
        window,
        reserve: 500,
        strategies: STRATEGIES.iter().map(|name| name.to_string()).collect(),
        price: Price::parse("sonnet").unwrap(),
        cache,
        counter: counter.clone(),
        compactor: Compactor::default().with_counter(counter),
        trigger: 0.8,
        target: 0.3,
        progress: None,
    }
}

#[test]
fn every_strategy_sends_valid_requests() {
    let conversation = example();
    let counter = Tokenizer::Estimate.shared();
    let setting = Setting {
        window: 3_000,
        reserve: 500,
        system: conversation.system.clone(),
        tools: conversation.tools.clone(),
        counter: counter.clone(),
        compactor: Compactor::default().with_counter(counter),
        trigger: 0.8,
        target: 0.3,
    };
    let calls: Vec<usize> = (1..conversation.messages.len())
        .filter(|&index| conversation.messages[index].role == Role::Assistant)
        .collect();
    for name in STRATEGIES {
        let mut strategy = strategy(name, &setting).expect("a known strategy");
        let mut compacted = 0;
        let mut messages = Vec::new();
        for &call in &calls {
            let step = runtime().block_on(strategy.step(&conversation.messages[..call]));
            assert!(step.kept <= messages.len(), "{name} keeps more messages than it sent");
            messages.truncate(step.kept);
            messages.extend(step.appended);
            if name == "none" {
                assert_eq!(messages, conversation.messages[..call], "none sends the history as recorded");
            }
            let request = Conversation { messages: messages.clone(), ..Conversation::default() };
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
    assert_eq!(Price::parse("cheap"), Err(InvalidPrice("cheap".into())));
    assert_eq!(Price::parse("-1,2"), Err(InvalidPrice("-1,2".into())));
    assert_eq!(Price::parse("1,"), Err(InvalidPrice("1,".into())));
    assert_eq!(
        InvalidPrice("cheap".into()).to_string(),
        "`cheap` is not a price: use sonnet, haiku, opus or IN,OUT (dollars per million tokens)"
    );
}

#[test]
fn an_unknown_strategy_is_named() {
    let mut config = config(4_000, true);
    config.strategies = vec!["none".into(), "fold-everything".into()];
    let err = runtime().block_on(replay(&example(), &config)).unwrap_err();
    assert!(matches!(&err, ReplayError::UnknownStrategy(name) if name == "fold-everything"), "{err:?}");
    assert!(err.to_string().starts_with("unknown strategy `fold-everything` (expected one of none,"), "{err}");
}

#[test]
fn a_failing_call_handler_stops_the_replay_at_its_call() {
    let mut config = config(4_000, true);
    config.strategies = vec!["contextfold".into()];
    let mut seen = 0;
    let err = runtime()
        .block_on(replay_with(&example(), &config, &mut |call| {
            seen += 1;
            if seen == 2 {
                return Err(format!("disk full at call {}", call.i).into());
            }
            Ok(())
        }))
        .unwrap_err();
    let ReplayError::Call { strategy, call, source } = &err else { panic!("{err:?}") };
    assert_eq!((strategy.as_str(), seen), ("contextfold", 2));
    assert_eq!(source.to_string(), format!("disk full at call {call}"));
    assert_eq!(std::error::Error::source(&err).map(ToString::to_string), Some(source.to_string()));
}

/// A step's change (messages kept, messages appended) rebuilds exactly the request the
/// middleware prepares for the same history.
#[test]
fn step_changes_rebuild_the_requests_sent() {
    use contextfold::compactor::Target;
    use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
    let conversation = example();
    let counter = Tokenizer::Estimate.shared();
    let setting = Setting {
        window: 3_000,
        reserve: 500,
        system: conversation.system.clone(),
        tools: conversation.tools.clone(),
        counter: counter.clone(),
        compactor: Compactor::default().with_counter(counter),
        trigger: 0.8,
        target: 0.3,
    };
    let mut config = MiddlewareConfig::new(setting.window, setting.reserve);
    config.system = setting.system.clone();
    config.tools = setting.tools.clone();
    config.compact.target =
        Target::Window { window: setting.window, reserve: setting.reserve, fraction: setting.target };
    let middleware = CompactionMiddleware::new(setting.compactor.clone(), config);
    let mut strategy = strategy("contextfold", &setting).unwrap();
    let mut messages = Vec::new();
    let mut compactions = 0;
    for call in (1..conversation.messages.len()).filter(|&i| conversation.messages[i].role == Role::Assistant) {
        let history = &conversation.messages[..call];
        let step = runtime().block_on(strategy.step(history));
        messages.truncate(step.kept);
        messages.extend(step.appended);
        compactions += usize::from(step.compacted);
        let prepared = runtime().block_on(middleware.prepare(history, &[]));
        assert_eq!(messages, prepared.messages(), "call {call}");
    }
    assert!(compactions > 1, "the window is small enough to compact more than once");
}

/// Regression (replay's summarizer accounting depended on the order of `--strategies`: the
/// strategies shared one summary cache): every strategy is replayed as if it ran alone.
#[test]
fn strategy_order_does_not_change_results() {
    let conversation = example();
    let names = ["contextfold-threshold", "contextfold-summarize", "contextfold", "langchain", "codex"];
    let run = |names: Vec<&str>| {
        let mut config = config(3_000, true);
        config.strategies = names.iter().map(|name| name.to_string()).collect();
        let mut results = runtime().block_on(replay(&conversation, &config)).unwrap();
        results.iter_mut().for_each(|result| result.cost_vs_none = 0.0);
        results.sort_by(|a, b| a.strategy.cmp(&b.strategy));
        results
    };
    let forward = run(names.to_vec());
    let backward = run(names.iter().rev().copied().collect());
    assert_eq!(forward, backward);
    let summarize = forward.iter().find(|result| result.strategy == "contextfold-summarize").unwrap();
    assert!(summarize.summarizer_calls > 0, "summaries are paid for by the strategy that writes them");
}

/// Regression (no sign of life on long replays): the library reports every call replayed,
/// which the CLI turns into a progress bar on a terminal.
#[test]
fn progress_counts_every_call_replayed() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let conversation = example();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut config = config(3_000, true);
    let seen = calls.clone();
    config.progress = Some(Arc::new(move || {
        seen.fetch_add(1, Ordering::Relaxed);
    }));
    let results = runtime().block_on(replay(&conversation, &config)).unwrap();
    let steps: usize = results.iter().map(|result| result.steps).sum();
    assert_eq!(calls.load(Ordering::Relaxed), steps);
}

/// A counter of the caller's, built at run time, is shared rather than leaked: replay counts
/// with it (a heavier counter makes heavier requests) and keeps no share of it afterwards.
#[test]
fn a_counter_built_at_run_time_is_used_and_released() {
    struct PerWord(u64);
    impl TokenCounter for PerWord {
        fn name(&self) -> &'static str {
            "per-word"
        }
        fn count_text(&self, text: &str) -> u64 {
            text.split_whitespace().count() as u64 * self.0
        }
    }
    let conversation = example();
    let peak = |per_word: u64| {
        let counter: Arc<dyn TokenCounter> = Arc::new(PerWord(per_word));
        let mut config = config(100_000, true);
        config.strategies = vec!["none".into(), "truncate".into()];
        config.counter = Arc::clone(&counter);
        config.compactor = Compactor::default().with_counter(Arc::clone(&counter));
        let results = runtime().block_on(replay(&conversation, &config)).unwrap();
        drop(config);
        assert_eq!(Arc::strong_count(&counter), 1, "replay let go of the counter");
        results[0].peak_request_tokens
    };
    let (light, heavy) = (peak(1), peak(3));
    assert!(light > 0);
    assert!(heavy > light * 2, "three tokens a word ({heavy}) against one ({light})");
}

/// Regression (super-linear replay: 10 s at 10k messages, 79 s at 20k, 495 s at 40k with
/// `none`): a step hands over what changed, not the whole request, so the work per call does
/// not grow with the session. The timing is measured by `cargo bench --bench replay`.
#[test]
fn replay_steps_hand_over_only_what_changed() {
    use contextfold::core::Message;
    let counter = Tokenizer::Estimate.shared();
    let handed_over = |length: usize, name: &str| {
        let messages: Vec<Message> = (0..length)
            .map(|index| {
                let role = if index % 2 == 0 { Role::User } else { Role::Assistant };
                Message::text(role, format!("message {index} of the session"))
            })
            .collect();
        let setting = Setting {
            window: 16_000,
            reserve: 4_000,
            system: None,
            tools: None,
            counter: counter.clone(),
            compactor: Compactor::default().with_counter(counter.clone()),
            trigger: 0.8,
            target: 0.3,
        };
        let mut strategy = strategy(name, &setting).unwrap();
        let mut total = 0;
        for call in (1..length).filter(|&index| messages[index].role == Role::Assistant) {
            total += runtime().block_on(strategy.step(&messages[..call])).appended.len();
        }
        total
    };
    // `none` hands over each new message once: 2,000 messages, 1,000 calls, 1,999 messages.
    assert_eq!(handed_over(2_000, "none"), 1_999);
    // Doubling the session about doubles what every strategy hands over (compactions start
    // only once the window fills, so a little more); a whole request per call would
    // quadruple it.
    for name in ["none", "contextfold", "mask-10", "anthropic-clear", "truncate"] {
        let (short, long) = (handed_over(1_000, name), handed_over(2_000, name));
        assert!(long <= short * 5 / 2, "{name}: {short} messages for 1,000, {long} for 2,000");
    }
}

/// The checking part kept in the repository is exactly the corpus's sessions the rule puts
/// there: a session added to the corpus is listed, or this fails.
#[test]
fn the_corpus_checking_part_is_the_one_kept_in_the_repository() {
    use contextfold::replay::held_back::Part;
    let Some(dir) = crate::common::corpus_dir() else { return };
    let listed =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/corpus-checking.txt"))
            .expect("the list is in the repository");
    let listed: Vec<&str> = listed.lines().filter(|line| !line.starts_with('#') && !line.is_empty()).collect();
    let mut checking: Vec<String> = crate::common::corpus_files(&dir)
        .into_iter()
        .filter(|file| Part::of(file) == Part::Checking)
        .filter_map(|file| Some(file.file_name()?.to_str()?.to_string()))
        .collect();
    checking.sort();
    assert_eq!(checking, listed);
}
