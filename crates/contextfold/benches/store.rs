//! Benchmarks of the session stores holding the whole corpus (or, without it, the
//! repository's example session repeated): what an agent pays to keep and get back its cold
//! layer, in a SQLite file and (with the feature `postgres` and a server named by
//! `CONTEXTFOLD_BENCH_POSTGRES_URL` or `CONTEXTFOLD_TEST_POSTGRES_URL`) in PostgreSQL, on the
//! same data: each session is compacted once, and every store keeps the same compactions.
//!
//! Per store (`sqlite/…`, `postgres/…`):
//! - `append/batch`: a whole session's history in one call (one transaction), per message;
//! - `append/one_by_one`: the same history one message per call, as a chatty caller would;
//! - `recall`: one payload by ref, cycling through every ref of the store; the p50/p99 over
//!   all refs (direct and through the recall tool) are measured once and printed;
//! - `search`: full-text queries over every session, and within one (p50/p99 printed too).

use contextfold::compactor::{CompactConfig, Compactor, Target, Undersized};
use contextfold::core::{Conversation, Message};
use contextfold::store::{handle_recall, Payload, SessionStore, SqliteStore, Summary};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::Value;
use std::hint::black_box;
use std::path::{Path, PathBuf};
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

/// One session's compaction at 8,000 tokens: what a store keeps of it.
struct Kept {
    name: String,
    messages: Vec<Message>,
    payloads: Vec<Payload>,
    summary: Option<Summary>,
    report: Value,
}

fn compactions(sessions: &[(String, Conversation)]) -> Vec<Kept> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    // A session whose newest turn alone is over the budget is compacted to what it needs.
    let config =
        CompactConfig { target: Target::Budget(8_000), undersized: Undersized::Raise, ..CompactConfig::default() };
    sessions
        .iter()
        .map(|(name, conversation)| {
            let compacted = runtime.block_on(Compactor::default().compact(conversation, &config)).expect("compaction");
            Kept {
                name: name.clone(),
                messages: conversation.messages.clone(),
                // The session id is set when the compaction is stored.
                payloads: compacted.report.payloads(""),
                summary: compacted.summary,
                report: serde_json::to_value(&compacted.report).expect("a report"),
            }
        })
        .collect()
}

/// Stores every compaction in `store`; returns the (session, ref) of every payload.
fn fill(store: &dyn SessionStore, kept: &[Kept]) -> Vec<(String, String)> {
    let mut refs = Vec::new();
    for compaction in kept {
        let session = store.create_session(&compaction.name).expect("create");
        let payloads: Vec<Payload> =
            compaction.payloads.iter().map(|payload| Payload { session: session.clone(), ..payload.clone() }).collect();
        store
            .persist_compaction(
                &session,
                &compaction.messages,
                &payloads,
                compaction.summary.as_ref(),
                &compaction.report,
            )
            .expect("persist");
        refs.extend(payloads.iter().map(|payload| (session.clone(), payload.reference.clone())));
    }
    refs
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

/// Every measurement of one store, its names under `label/`.
fn bench_store(
    c: &mut Criterion,
    label: &str,
    store: &dyn SessionStore,
    kept: &[Kept],
    sessions: &[(String, Conversation)],
) {
    let started = Instant::now();
    let refs = fill(store, kept);
    let messages: usize = kept.iter().map(|compaction| compaction.messages.len()).sum();
    println!(
        "{label}: {} sessions, {messages} messages, {} payloads, filled in {:.1?}",
        kept.len(),
        refs.len(),
        started.elapsed()
    );
    assert!(!refs.is_empty(), "the compactions removed payloads");

    percentiles(&format!("{label} recall (direct)"), &refs, |(_, reference)| {
        black_box(store.recall(reference).expect("recall").expect("stored"));
    });
    percentiles(&format!("{label} recall (tool, page 1)"), &refs, |(session, reference)| {
        let out = handle_recall(store, session, &serde_json::json!({"ref": reference}));
        assert!(!out.is_error, "{}", out.content);
        black_box(out);
    });
    let queries: Vec<&str> = QUERIES.iter().copied().cycle().take(QUERIES.len() * 20).collect();
    percentiles(&format!("{label} search (all sessions, 10 hits)"), &queries, |query| {
        black_box(store.search(None, query, 10).expect("search"));
    });
    let (session, _) = &refs[0];
    percentiles(&format!("{label} search (one session, 10 hits)"), &queries, |query| {
        black_box(store.search(Some(session), query, 10).expect("search"));
    });

    // The largest session is the one appended.
    let largest: &[Message] =
        &sessions.iter().max_by_key(|(_, conversation)| conversation.messages.len()).expect("a session").1.messages;
    let mut group = c.benchmark_group(format!("{label}/append"));
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
    c.bench_function(&format!("{label}/recall"), |b| {
        b.iter(|| {
            next = (next + 1) % refs.len();
            black_box(store.recall(&refs[next].1).expect("recall"))
        })
    });
    let mut group = c.benchmark_group(format!("{label}/search"));
    for query in ["error", "permission denied"] {
        group.bench_function(format!("all/{query}"), |b| b.iter(|| store.search(None, query, 10).expect("search")));
    }
    group.bench_function("one_session/error", |b| b.iter(|| store.search(Some(session), "error", 10).expect("search")));
    group.finish();
}

fn benches(c: &mut Criterion) {
    let sessions = sessions();
    let started = Instant::now();
    let kept = compactions(&sessions);
    println!("compacted {} sessions in {:.1?}", kept.len(), started.elapsed());

    let dir = std::env::temp_dir().join(format!("contextfold-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let sqlite = SqliteStore::open(dir.join("store.db")).expect("open");
    bench_store(c, "sqlite", &sqlite, &kept, &sessions);
    let bytes = std::fs::metadata(dir.join("store.db")).map(|meta| meta.len()).unwrap_or(0);
    println!("sqlite: {:.1} MB", bytes as f64 / 1e6);
    drop(sqlite);
    std::fs::remove_dir_all(dir).ok();

    #[cfg(feature = "postgres")]
    match postgres::Database::create() {
        Some(database) => {
            let store = contextfold::store::PostgresStore::open(&database.url).expect("open the PostgreSQL store");
            bench_store(c, "postgres", &store, &kept, &sessions);
            println!("postgres: {:.1} MB", database.size() as f64 / 1e6);
        }
        None => println!("notice: no PostgreSQL server (CONTEXTFOLD_BENCH_POSTGRES_URL); only SQLite measured"),
    }
}

/// A database of the bench's own on the server the environment names, dropped after it.
#[cfg(feature = "postgres")]
mod postgres {
    pub struct Database {
        admin: String,
        name: String,
        pub url: String,
    }

    impl Database {
        pub fn create() -> Option<Database> {
            let admin = ["CONTEXTFOLD_BENCH_POSTGRES_URL", "CONTEXTFOLD_TEST_POSTGRES_URL"]
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|url| !url.is_empty()))?;
            let name = format!("cf_bench_{}", std::process::id());
            query(&admin, &format!("CREATE DATABASE {name}"));
            let (scheme, rest) = admin.split_once("://").expect("a URL");
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let url = format!("{scheme}://{}/{name}", &rest[..end]);
            Some(Database { admin, name, url })
        }

        /// The database's size on disk, in bytes.
        pub fn size(&self) -> i64 {
            query(&self.url, "SELECT pg_database_size(current_database())").unwrap_or(0)
        }
    }

    impl Drop for Database {
        fn drop(&mut self) {
            query(&self.admin, &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }

    /// Runs `sql` at `url`; the first column of its first row, when it is a number.
    fn query(url: &str, sql: &str) -> Option<i64> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("the server");
            let connection = tokio::spawn(connection);
            let rows = client.simple_query(sql).await.expect("the statement runs");
            drop(client);
            let _ = connection.await;
            rows.iter().find_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).and_then(|value| value.parse().ok()),
                _ => None,
            })
        })
    }
}

criterion_group!(store, benches);
criterion_main!(store);
