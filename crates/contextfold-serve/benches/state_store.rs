//! What keeping conversation state in the store adds to each proxied request: the version
//! check before it is prepared and the compare-and-swap write after, each run off the async
//! runtime's threads (`spawn_blocking`) as the proxy runs them, in a SQLite file and (with a
//! server named by `CONTEXTFOLD_BENCH_POSTGRES_URL` or `CONTEXTFOLD_TEST_POSTGRES_URL`) in
//! PostgreSQL; with several replicas, PostgreSQL's per-conversation advisory lock too.
//!
//! The state is a conversation's serialized middleware snapshot; its size grows with the
//! working copy, so it is measured at 20 KB (a young conversation), 200 KB (a compacted one
//! in a 200k window) and 800 KB. Each request of one conversation: check the version, write
//! the next one. p50 and p99 over `CALLS` requests are printed.
//!
//! `cargo bench -p contextfold-serve --bench state_store [-- CALLS]`

use contextfold::store::{ConversationStore, Put, StoreLocation};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The p-th percentile of sorted `times`.
fn percentile(times: &[Duration], p: f64) -> Duration {
    times[((times.len() - 1) as f64 * p).round() as usize]
}

fn show(times: &mut [Duration]) -> String {
    times.sort();
    format!("p50 {:>8.3} ms, p99 {:>8.3} ms", ms(percentile(times, 0.5)), ms(percentile(times, 0.99)))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The state of one conversation at request `call`: `size` bytes of JSON-like text.
fn state(size: usize, call: usize) -> Vec<u8> {
    let mut bytes = format!("{{\"call\":{call},\"working\":\"").into_bytes();
    while bytes.len() < size {
        bytes.extend_from_slice(b"fn step() -> Result<(), Error> { work() } ");
    }
    bytes
}

struct Times {
    check: Vec<Duration>,
    write: Vec<Duration>,
    lock: Vec<Duration>,
    total: Vec<Duration>,
}

async fn run(store: Arc<dyn ConversationStore>, key: &str, size: usize, calls: usize) -> Times {
    let mut times = Times { check: Vec::new(), write: Vec::new(), lock: Vec::new(), total: Vec::new() };
    for call in 0..calls {
        let started = Instant::now();
        let (states, name) = (store.clone(), key.to_string());
        let lock = tokio::task::spawn_blocking(move || states.lock_state(&name)).await.unwrap().unwrap();
        let locked = Instant::now();
        let (states, name) = (store.clone(), key.to_string());
        let version = tokio::task::spawn_blocking(move || states.state_version(&name)).await.unwrap().unwrap();
        let checked = Instant::now();
        let (states, name, bytes) = (store.clone(), key.to_string(), state(size, call));
        let put = tokio::task::spawn_blocking(move || states.put_state(&name, version, &bytes)).await.unwrap().unwrap();
        assert!(matches!(put, Put::Written(_)));
        let written = Instant::now();
        drop(lock);
        times.lock.push(locked - started);
        times.check.push(checked - locked);
        times.write.push(written - checked);
        times.total.push(written - started);
    }
    times
}

fn main() {
    let calls: usize = std::env::args().skip(1).find_map(|arg| arg.parse().ok()).unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = std::env::temp_dir().join(format!("contextfold-state-bench-{}", std::process::id()));
    let mut stores = vec![("sqlite", StoreLocation::File(dir.join("store.db")))];
    let url = std::env::var("CONTEXTFOLD_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("CONTEXTFOLD_TEST_POSTGRES_URL"))
        .ok()
        .filter(|url| !url.is_empty());
    match url.map(|url| StoreLocation::parse(&url)) {
        Some(Ok(location)) => stores.push(("postgres", location)),
        Some(Err(err)) => println!("notice: the PostgreSQL URL is not usable: {err}"),
        None => println!("notice: no PostgreSQL server named; SQLite only"),
    }
    println!("{calls} requests of one conversation per line: lock, version check, write of the next state");
    for (name, location) in stores {
        let store = location.open_conversations().expect("the bench store opens");
        for size in [20_000, 200_000, 800_000] {
            let key = format!("bench-{size}-{}", std::process::id());
            runtime.block_on(run(store.clone(), &key, size.min(20_000), 20));
            let mut times = runtime.block_on(run(store.clone(), &key, size, calls));
            println!(
                "{name:>8} {:>4} KB  check {}   write {}   lock {}   all {}",
                size / 1000,
                show(&mut times.check),
                show(&mut times.write),
                show(&mut times.lock),
                show(&mut times.total)
            );
            let _ = store.delete_state(&key);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
