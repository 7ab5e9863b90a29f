//! Benchmarks of the SQLite session store holding the whole corpus (or, without it, the
//! repository's example session repeated): what an agent pays to keep and get back its cold
//! layer.
//!
//! - `append/batch`: a whole session's history in one call (one transaction), per message;
//! - `append/one_by_one`: the same history one message per call, as a chatty caller would;
//! - `recall`: one payload by ref, cycling through every ref of the store; the p50/p99 over
//!   all refs (direct and through the recall tool) are measured once and printed;
//! - `search`: full-text queries over every session, and within one.

use contextfold::compactor::{CompactConfig, Compactor, Target};
use contextfold::core::{Conversation, Message};
use contextfold::store::{handle_recall, SessionStore, SqliteStore};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus");
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/session.json");

/// Queries from common to rare.
const QUERIES: &[&str] = &["error", "cargo test", "TypeError", "def test", "import json", "permission denied"];

/// Every corpus session, or the example session twenty times.
fn sessions() -> Vec<(String, Conversation)> {
    let load = |path: &Path| contextfold::input::load(path, None).expect("the bench session loads").conversation;
    let mut files: Vec<PathBuf> = std::fs::read_dir(CORPUS)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| {
                    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or("");
                    (name.ends_with(".json") || name.ends_with(".json.gz")) && name != "manifest.json"
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    if files.is_empty() {
        println!("notice: no corpus at {CORPUS}; repeating {EXAMPLE} twenty times");
        let example = load(Path::new(EXAMPLE));
        return (0..20).map(|i| (format!("example {i}"), example.clone())).collect();
    }
    files.iter().map(|path| (path.file_name().unwrap_or_default().to_string_lossy().into_owned(), load(path))).collect()
}

/// A store holding every session, each compacted once with its payloads kept; its refs.
fn filled_store(dir: &Path, sessions: &[(String, Conversation)]) -> (Arc<SqliteStore>, Vec<(String, String)>) {
    let store = Arc::new(SqliteStore::open(dir.join("store.db")).expect("open"));
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let config = CompactConfig { target: Target::Budget(8_000), ..CompactConfig::default() };
    let mut refs = Vec::new();
    for (name, conversation) in sessions {
        let session = store.create_session(name).expect("create");
        let compactor = Compactor::default().with_store(store.clone(), session.clone());
        let report = runtime.block_on(compactor.compact(conversation, &config)).expect("compaction").report;
        refs.extend(report.items.iter().map(|item| (session.clone(), item.reference.clone())));
        refs.extend(report.clipped.iter().map(|item| (session.clone(), item.reference.clone())));
    }
    (store, refs)
}

/// Times `work` once per item and prints the p50, p99 and max.
fn percentiles<T>(what: &str, items: &[T], mut work: impl FnMut(&T)) {
    let mut times: Vec<Duration> = items
        .iter()
        .map(|item| {
            let started = Instant::now();
            work(item);
            started.elapsed()
        })
        .collect();
    times.sort();
    let at = |share: f64| times[((times.len() - 1) as f64 * share).round() as usize];
    println!(
        "{what}: n={} p50={:.1?} p99={:.1?} max={:.1?}",
        times.len(),
        at(0.50),
        at(0.99),
        times.last().copied().unwrap_or_default()
    );
}

fn benches(c: &mut Criterion) {
    let sessions = sessions();
    let dir = std::env::temp_dir().join(format!("contextfold-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let started = Instant::now();
    let (store, refs) = filled_store(&dir, &sessions);
    let messages: usize = sessions.iter().map(|(_, conversation)| conversation.messages.len()).sum();
    let bytes = std::fs::metadata(dir.join("store.db")).map(|meta| meta.len()).unwrap_or(0);
    println!(
        "store: {} sessions, {messages} messages, {} payloads, {:.1} MB, filled in {:.1?}",
        sessions.len(),
        refs.len(),
        bytes as f64 / 1e6,
        started.elapsed()
    );
    assert!(!refs.is_empty(), "the compactions removed payloads");

    percentiles("recall (direct)", &refs, |(_, reference)| {
        black_box(store.recall(reference).expect("recall").expect("stored"));
    });
    percentiles("recall (tool, page 1)", &refs, |(session, reference)| {
        let out = handle_recall(store.as_ref(), session, &serde_json::json!({"ref": reference}));
        assert!(!out.is_error, "{}", out.content);
        black_box(out);
    });
    let queries: Vec<&str> = QUERIES.iter().copied().cycle().take(QUERIES.len() * 20).collect();
    percentiles("search (all sessions, 10 hits)", &queries, |query| {
        black_box(store.search(None, query, 10).expect("search"));
    });

    // The largest session is the one appended.
    let largest: &[Message] =
        &sessions.iter().max_by_key(|(_, conversation)| conversation.messages.len()).expect("a session").1.messages;
    let mut group = c.benchmark_group("append");
    group.throughput(Throughput::Elements(largest.len() as u64));
    group.sample_size(10);
    group.bench_function("batch", |b| {
        b.iter_batched(
            || store.create_session("append").expect("create"),
            |session| store.append_messages(&session, largest).expect("append"),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("one_by_one", |b| {
        b.iter_batched(
            || store.create_session("append").expect("create"),
            |session| {
                for message in largest {
                    store.push_messages(&session, std::slice::from_ref(message)).expect("push");
                }
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    let mut next = 0;
    c.bench_function("recall", |b| {
        b.iter(|| {
            next = (next + 1) % refs.len();
            black_box(store.recall(&refs[next].1).expect("recall"))
        })
    });
    let mut group = c.benchmark_group("search");
    for query in ["error", "permission denied"] {
        group.bench_function(format!("all/{query}"), |b| b.iter(|| store.search(None, query, 10).expect("search")));
    }
    let (session, _) = &refs[0];
    group.bench_function("one_session/error", |b| b.iter(|| store.search(Some(session), "error", 10).expect("search")));
    group.finish();

    drop(store);
    std::fs::remove_dir_all(dir).ok();
}

criterion_group!(store, benches);
criterion_main!(store);
