//! Replay checks its probes incrementally (a check folds only the messages whose fingerprint
//! came or went); these tests check every compaction again from scratch, with the probe
//! functions of the core over the whole folded history, and want the same tallies.

use crate::common::corpus_dir;
use contextfold::compactor::Compactor;
use contextfold::core::extract::extract;
use contextfold::core::hash::message_fingerprint;
use contextfold::core::probe::{folded_probes, is_recalled, probes, request_text, Probe, ProbeReader};
use contextfold::core::tokens::{TokenCounter, Tokenizer};
use contextfold::core::tools::Preset;
use contextfold::core::{Conversation, Message};
use contextfold::replay::strategies::STRATEGIES;
use contextfold::replay::{replay_with, Price, ReplayConfig, StrategyResult};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

type ByKind = BTreeMap<String, (usize, usize)>;

fn config(window: u64) -> ReplayConfig {
    let counter: Arc<dyn TokenCounter> = Arc::new(Tokenizer::Estimate.memoized());
    ReplayConfig {
        window,
        reserve: 500,
        strategies: STRATEGIES.iter().map(|name| name.to_string()).collect(),
        price: Price::parse("sonnet").unwrap(),
        cache: true,
        counter: counter.clone(),
        compactor: Compactor::default().with_counter(counter),
        trigger: 0.8,
        target: 0.3,
        progress: None,
    }
}

fn add(tally: &mut ByKind, text: &str, probes: &[Probe]) {
    for probe in probes {
        let entry = tally.entry(probe.kind.name().to_string()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(is_recalled(text, probe));
    }
}

/// Replays `conversation` and checks every compaction's request from scratch; returns the
/// results and, per strategy, the (independent, extract) tallies by kind found again.
fn replay_and_recheck(
    conversation: &Conversation,
    config: &ReplayConfig,
) -> (Vec<StrategyResult>, Vec<(ByKind, ByKind)>) {
    let mut sent: Vec<(String, usize, Vec<Message>)> = Vec::new();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let results = runtime
        .block_on(replay_with(conversation, config, &mut |call| {
            if call.compacted {
                sent.push((call.strategy.to_string(), call.i, call.messages.to_vec()));
            }
            Ok(())
        }))
        .unwrap();
    let messages = &conversation.messages;
    let prints: Vec<u64> = messages.iter().map(message_fingerprint).collect();
    let mut reader = ProbeReader::default();
    let read: Vec<_> = messages.iter().map(|message| reader.read(message)).collect();
    let system = conversation.system.as_ref().map(|system| system.text());
    let mut tallies: HashMap<String, (ByKind, ByKind)> = HashMap::new();
    for (strategy, call, request) in &sent {
        let kept: HashSet<u64> = request.iter().map(message_fingerprint).collect();
        let folded: Vec<bool> = prints[..*call].iter().map(|print| !kept.contains(print)).collect();
        if !folded.contains(&true) {
            continue;
        }
        let text = request_text(system.as_deref(), request);
        let tally = tallies.entry(strategy.clone()).or_default();
        add(&mut tally.0, &text, &folded_probes(read.iter().zip(folded.iter().copied())));
        let folded_messages: Vec<Message> =
            messages.iter().zip(&folded).filter(|(_, folded)| **folded).map(|(message, _)| message.clone()).collect();
        add(&mut tally.1, &text, &probes(&extract(&folded_messages, Preset::Auto), folded[0]));
    }
    let rechecked = results.iter().map(|result| tallies.remove(&result.strategy).unwrap_or_default()).collect();
    (results, rechecked)
}

fn assert_same_tallies(name: &str, conversation: &Conversation, window: u64) -> usize {
    let (results, rechecked) = replay_and_recheck(conversation, &config(window));
    let mut probes = 0;
    for (result, (independent, extracted)) in results.iter().zip(rechecked) {
        assert_eq!(result.recall_by_kind, independent, "{name} at {window}: {}'s independent probes", result.strategy);
        assert_eq!(
            result.extract_recall_by_kind, extracted,
            "{name} at {window}: {}'s extract probes",
            result.strategy
        );
        assert_eq!(result.probes, independent.values().map(|(checked, _)| checked).sum::<usize>());
        probes += result.probes + result.extract_probes;
    }
    probes
}

/// A tool loop of the kinds of steps `steps` names, with call ids from a small pool when
/// `repeat_ids` (ids used twice make replay check `extract`'s probes from scratch).
fn session(steps: &[u8], repeat_ids: bool) -> Conversation {
    let mut messages = vec![json!({"role": "user", "content": "Fix the failing tests of the invoice module."})];
    for (n, step) in steps.iter().enumerate() {
        let id = format!("t{}", if repeat_ids { n % 3 } else { n });
        let call = |name: &str, input: Value, text: &str| {
            json!({"role": "assistant", "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": id, "name": name, "input": input}
            ]})
        };
        let result = |content: String, is_error: bool, extra: Option<&str>| {
            let mut blocks =
                vec![json!({"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error})];
            if let Some(text) = extra {
                blocks.push(json!({"type": "text", "text": text}));
            }
            json!({"role": "user", "content": blocks})
        };
        let (asked, answered) = match step % 6 {
            0 => (
                call("Bash", json!({"command": format!("pytest tests/test_{}.py", n % 4)}), "Running the tests."),
                result(format!("Exit code 1\nE   AssertionError: total {} != 10", n % 3), true, None),
            ),
            1 => (
                call("Bash", json!({"command": format!("pytest tests/test_{}.py", n % 4)}), "Running them again."),
                result("Exit code 0\n3 passed".to_string(), false, None),
            ),
            2 => (
                call("Write", json!({"file_path": format!("src/f{}.py", n % 5), "content": "x = 1\n"}), "Writing it."),
                result("ok".to_string(), false, None),
            ),
            3 => (
                call("Bash", json!({"command": "ls"}), "I found the cause: rounding. Next I will fix it."),
                result("a\nb".to_string(), false, Some(&format!("Please also check case {}.", n % 5))),
            ),
            4 => (
                call("Bash", json!({"command": "echo hi > notes.txt && cat notes.txt"}), "Let me note it."),
                result("hi".to_string(), false, Some("continue")),
            ),
            _ => (
                call("Read", json!({"file_path": format!("src/f{}.py", n % 5)}), "Reading the module."),
                result((0..120).map(|line| format!("{line:>4}  value_{line} = compute({n})\n")).collect(), false, None),
            ),
        };
        messages.push(asked);
        messages.push(answered);
    }
    messages.push(json!({"role": "assistant", "content": "Done."}));
    Conversation::from_value(Value::Array(messages)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Every strategy's tallies, over tool loops of any shape, equal a from-scratch check.
    #[test]
    fn incremental_checks_equal_checks_from_scratch(steps in prop::collection::vec(0u8..6, 20..90), repeat_ids: bool) {
        let conversation = session(&steps, repeat_ids);
        assert_same_tallies("a tool loop", &conversation, 2_500);
    }
}

/// Identical messages share a fingerprint: one of them carried keeps them all unfolded.
#[test]
fn identical_messages_fold_together() {
    let messages: Vec<Message> = (0..600)
        .map(|index| {
            let role = if index % 2 == 0 { contextfold::core::Role::User } else { contextfold::core::Role::Assistant };
            Message::text(role, if index % 4 < 2 { "yes, go on".to_string() } else { format!("step {}", index % 7) })
        })
        .collect();
    let conversation = Conversation { messages, ..Conversation::default() };
    assert!(assert_same_tallies("repeated messages", &conversation, 1_200) > 0);
}

/// Sessions of every family of the corpus, at two windows.
#[test]
fn incremental_checks_equal_checks_from_scratch_on_the_corpus() {
    let Some(dir) = corpus_dir() else { return };
    let files = [
        "claudecode-mclaude__95f81cf4-2300-4739-9018-2d0ff510912a.json",
        "minisweagent-gemini3pro__psf__requests-1724.json",
        "openhands__output__line2.json",
        "sweagent__gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__pydicom__pydicom-1458.json",
    ];
    for file in files {
        let conversation = contextfold::input::load(&dir.join(file), None).unwrap().conversation;
        for window in [8_000, 16_000] {
            assert!(assert_same_tallies(file, &conversation, window) > 0, "{file} at {window} checks probes");
        }
    }
}
