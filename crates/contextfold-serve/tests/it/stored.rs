//! The store behind the proxy: each conversation's compactions are kept in a session of its
//! own (the client's history, every payload a pointer names, the summaries and reports), so
//! every ref the upstream was shown can be recalled; secrets are masked in what is stored
//! (the conversation's state record too, whose secrets a restarted proxy takes back from the
//! next request), and no key, in a header or a body, reaches the store's files or a log line.

use crate::common::{
    agent_script, agent_script_counting, client, config, logs, proxy, raw_messages, Agent, FAKE_API_KEY, FAKE_OAUTH,
};
use crate::mock::Mock;
use contextfold::compactor::Compactor;
use contextfold::compactor::Strategy;
use contextfold::core::hash::payload_ref;
use contextfold::redact::Redactor;
use contextfold::store::{SessionStore, SqliteStore, StoreLocation};
pub use contextfold_test_support::Scratch;
use serde_json::Value;
use std::collections::BTreeSet;

/// A fresh directory for one test, removed when it passes.
pub fn scratch(test: &str) -> Scratch {
    Scratch::new(&format!("serve-{test}"))
}

/// The `cf-` refs in `text`.
pub fn refs(text: &str) -> BTreeSet<String> {
    text.match_indices("cf-")
        .filter_map(|(at, _)| text.get(at..at + 15))
        .filter(|found| found[3..].bytes().all(|byte| byte.is_ascii_hexdigit()))
        .map(str::to_string)
        .collect()
}

/// Secrets as a tool's output might show them.
const AWS_KEY: &str = "AKIAZ7QW3ER5TY8UI2OP";
const GITHUB_TOKEN: &str = "ghp_Zq8vN2xK7pL4mR9tW1yB6cF3hJ5dG0sA8eU2";
/// Credentials a client sends in headers of its own.
const GOOGLE_KEY: &str = "AIzaSyD3kX9vQ2mL7pR4tW8yB1cF6hJ0dG5sA3e";
const CUSTOM_TOKEN: &str = "tok_live_9f8e7d6c5b4a39281706f5e4d3c2b1a0";

/// The headers of a client with credentials of every kind.
fn credential_headers() -> Vec<(String, String)> {
    [
        ("authorization", format!("Bearer {FAKE_OAUTH}")),
        ("x-goog-api-key", GOOGLE_KEY.to_string()),
        ("x-upstream-token", CUSTOM_TOKEN.to_string()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect()
}

/// Adds the environment, keys and all, beside the newest tool result of `agent`, as a note
/// of the user's that no eviction removes.
fn note_secrets(agent: &mut Agent) {
    let content = agent.messages.last_mut().and_then(|message| message["content"].as_array_mut()).expect("a result");
    let note = format!("my environment:\nANTHROPIC_API_KEY={FAKE_API_KEY}\nAWS_ACCESS_KEY_ID={AWS_KEY}\n");
    content.push(serde_json::json!({"type": "text", "text": note}));
}

/// Adds the environment, keys and all, to the newest tool result of `agent`.
fn show_secrets(agent: &mut Agent) {
    let result = &mut agent.messages.last_mut().expect("a result")["content"][0]["content"];
    let shown = format!(
        "{}\nANTHROPIC_API_KEY={FAKE_API_KEY}\nAWS_ACCESS_KEY_ID={AWS_KEY}\nGITHUB_TOKEN={GITHUB_TOKEN}\nAuthorization: Bearer {FAKE_OAUTH}\n",
        result.as_str().expect("text")
    );
    *result = shown.into();
}

/// Every byte of the files in `dir` (a SQLite store: its database, journal and WAL).
fn file_bytes(dir: &std::path::Path) -> String {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the store's files") {
        files.extend(std::fs::read(entry.expect("an entry").path()).expect("readable"));
    }
    String::from_utf8_lossy(&files).into_owned()
}

/// Checks that none of the client's secrets is in `text`.
fn no_secret_in(text: &str, what: &str) {
    for secret in [FAKE_API_KEY, FAKE_OAUTH, AWS_KEY, GITHUB_TOKEN, GOOGLE_KEY, CUSTOM_TOKEN] {
        let tell = &secret[..secret.len().min(24)];
        assert!(!text.contains(tell), "no secret reaches {what} ({tell}…)");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicted_payloads_are_stored_and_every_ref_sent_is_recallable() {
    let (refs, summaries) = stored_conversation(Strategy::Evict).await;
    assert!(refs > 0, "pointers were sent");
    assert_eq!(summaries, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_are_stored() {
    let (_, summaries) = stored_conversation(Strategy::Auto).await;
    assert!(summaries > 0, "the summaries are kept");
}

/// Runs a conversation that compacts, with secrets in its tool outputs, through a proxy with
/// a store, and checks what the store holds; returns the refs sent and the summaries stored.
async fn stored_conversation(strategy: Strategy) -> (usize, usize) {
    let dir = scratch(&format!("stored-{strategy:?}"));
    let path = dir.join("proxy.db");
    let mock = Mock::start(agent_script(10_000)).await;
    let store = Some(StoreLocation::File(path.clone()));
    // As `contextfold serve` does with a store.
    let compactor = Compactor::default().with_redactor(Redactor::default());
    let proxy = proxy(contextfold_serve::ServeConfig { store, strategy, compactor, ..config(&mock.url()) }).await;
    let client = client();
    let mut agent = Agent::new("keeper", "audit the credentials module");
    agent.headers = credential_headers();
    for step in 0..40 {
        agent.step(&client, &proxy.url).await;
        if step % 5 == 0 {
            show_secrets(&mut agent);
        }
    }
    let compactions = proxy.stats.compactions();
    assert!(compactions >= 2, "the conversation compacts (got {compactions})");
    let stats = proxy.stats.clone();
    proxy.stop().await.expect("stops");
    let totals = stats.savings().totals();
    let sent: String =
        mock.messages_requests().iter().map(|request| String::from_utf8_lossy(&request.body).into_owned()).collect();
    let sent_refs = refs(&sent);

    let store = SqliteStore::open_existing(&path).expect("the proxy's store");
    let sessions = store.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1, "one conversation, one session: {sessions:?}");
    let session = &sessions[0];
    assert!(session.name.starts_with("serve keeper "), "named after the session: {}", session.name);
    assert!(session.messages >= 60, "the client's history is stored: {session:?}");
    for reference in &sent_refs {
        let payload = store
            .recall(reference)
            .expect("recall")
            .unwrap_or_else(|| panic!("{reference} is stored; log:\n{}", logs()));
        assert!(payload.to_string().contains("keeper"), "{reference}: the agent's output");
    }
    assert_eq!(store.reports(&session.id).expect("reports").len() as u64, compactions, "a report per compaction");
    // A record per call, as its log line said: the tally read back from the store is the proxy's.
    let calls = store.calls(&session.id).expect("calls");
    assert_eq!(calls.len(), 40, "a record per call");
    let mut recorded = contextfold_serve::savings::Totals::default();
    for call in &calls {
        assert!(contextfold_serve::savings::add_record(&mut recorded, &session.id, call), "{call}");
    }
    let served = totals;
    assert_eq!((recorded.calls, recorded.compactions), (40, compactions));
    assert_eq!((recorded.tokens_received, recorded.tokens_sent), (served.tokens_received, served.tokens_sent));
    assert!(served.cost_without > served.cost_with && served.cost_with > 0.0, "{served:?}");
    assert!((recorded.cost_without - served.cost_without).abs() < 1e-9, "{recorded:?} {served:?}");
    assert!((recorded.cost_with - served.cost_with).abs() < 1e-9, "{recorded:?} {served:?}");
    assert!(calls.iter().all(|call| call["window"] == 24_000 && call["status"] == 200), "{calls:?}");
    let summaries = store.summaries(&session.id).expect("summaries").len();
    let hits = store.search(Some(&session.id), "keeper line", 5).expect("search");
    assert!(!hits.is_empty(), "the stored history is searchable");
    let exported = serde_json::to_string(
        &store.export(&session.id).expect("export").iter().map(|m| m.to_value()).collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(exported.contains("[REDACTED:"), "the secrets in the history were masked");
    let mut kept = exported;
    for reference in &sent_refs {
        kept += &store.recall(reference).unwrap().map(|payload| payload.to_string()).unwrap_or_default();
    }
    kept += &format!("{:?}{:?}", store.summaries(&session.id).unwrap(), store.reports(&session.id).unwrap());
    kept += &format!("{:?}", store.search(None, "REDACTED", 1000).unwrap());
    drop(store);
    let files = file_bytes(&dir);
    assert!(files.contains("keeper toolu_keeper_0"), "the files are the store's, readable as text");
    assert!(files.contains("[REDACTED:"), "the masks are in the files");
    no_secret_in(&kept, "the stored sessions");
    no_secret_in(&files, "the store's files (the conversation's state record included)");
    no_secret_in(&logs(), "a log line");
    assert!(sent.contains(AWS_KEY), "the client's own messages still go upstream as it wrote them");
    (sent_refs.len(), summaries)
}

/// An output too big for the window is clipped when it arrives and evicted later: every ref
/// the upstream was shown, the eviction pointer's too, recalls the output as the client sent
/// it, in one hop (never the clipped text with a second ref in it).
#[tokio::test]
async fn every_ref_recalls_the_original_even_of_an_output_clipped_then_evicted() {
    let dir = scratch("clipped-then-evicted");
    let path = dir.join("proxy.db");
    let mock = Mock::start(agent_script(10_000)).await;
    let store = Some(StoreLocation::File(path.clone()));
    let proxy =
        proxy(contextfold_serve::ServeConfig { store, strategy: Strategy::Evict, target: 0.3, ..config(&mock.url()) })
            .await;
    let client = client();
    let mut agent = Agent::new("clipper", "read the generated parser");
    let mut huge = String::new();
    for step in 0..30 {
        // The third output is far bigger than the whole window.
        agent.output_chars = if step == 2 { 120_000 } else { 2_000 };
        agent.step(&client, &proxy.url).await;
        if step == 2 {
            let result = &agent.messages.last().expect("a result")["content"][0]["content"];
            huge = result.as_str().expect("text").to_string();
        }
    }
    proxy.stop().await.expect("stops");
    let sent: Vec<String> =
        mock.messages_requests().iter().map(|request| String::from_utf8_lossy(&request.body).into_owned()).collect();
    // The big output's clip marker names the ref of the output as the client sent it.
    let huge_ref = payload_ref(&Value::String(huge.clone()));
    let clipped_huge = |body: &str| {
        body.match_indices("[contextfold: clipped ")
            .any(|(at, _)| body[at..].split("ref cf-").nth(1).is_some_and(|rest| rest.starts_with(&huge_ref[3..])))
    };
    assert!(sent.iter().any(|body| clipped_huge(body)), "the big output was clipped");
    let evicted_later = sent.iter().rev().take(5).all(|body| !clipped_huge(body) && body.contains(&huge_ref));
    assert!(evicted_later, "the clipped output was evicted later, its pointer naming the original's ref");
    let store = SqliteStore::open_existing(&path).expect("the proxy's store");
    let mut originals = 0;
    for reference in refs(&sent.concat()) {
        let payload = store.recall(&reference).expect("recall").unwrap_or_else(|| panic!("{reference} is stored"));
        let text = payload.as_str().map(str::to_string).unwrap_or_else(|| payload.to_string());
        assert!(!text.contains("[contextfold: clipped "), "{reference} recalls the clipped text, not the original");
        originals += usize::from(text == huge);
    }
    assert!(originals >= 1, "the big output is recalled whole");
}

#[tokio::test]
async fn a_store_that_cannot_be_opened_stops_the_start_naming_it() {
    let dir = scratch("unopenable");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "plain notes, not a database\n".repeat(100)).unwrap();
    let config = contextfold_serve::ServeConfig {
        store: Some(StoreLocation::File(notes.clone())),
        ..config("http://127.0.0.1:9")
    };
    let err = match contextfold_serve::Proxy::bind(config).await {
        Err(err) => err.to_string(),
        Ok(_) => panic!("a text file is no store"),
    };
    assert!(err.contains(&notes.display().to_string()) && err.contains("--no-store"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "plain notes, not a database\n".repeat(100), "left as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_proxy_sends_the_secrets_its_store_never_held() {
    const CALLS: usize = 30;
    let dir = scratch("restart-secrets");
    // No usage reported: a calibration written after an answer would race the next request.
    let (mock, again) =
        (Mock::start(agent_script_counting(10_000, 0.0)).await, Mock::start(agent_script_counting(10_000, 0.0)).await);
    let start = |file: &str, upstream: &Mock| {
        let store = Some(StoreLocation::File(dir.join(file)));
        let compactor = Compactor::default().with_redactor(Redactor::default());
        proxy(contextfold_serve::ServeConfig { store, strategy: Strategy::Evict, compactor, ..config(&upstream.url()) })
    };
    let client = client();
    let converse = async |agent: &mut Agent, url: &str, calls: usize| {
        for _ in 0..calls {
            agent.step(&client, url).await;
            if agent.messages.len() % 4 == 3 {
                note_secrets(agent);
            }
        }
    };
    let bodies = |mock: &Mock| -> Vec<Vec<u8>> {
        mock.messages_requests().iter().map(|request| request.body.to_vec()).collect()
    };

    let mut straight = Agent::new("vault", "rotate the keys");
    let once = start("straight.db", &mock).await;
    converse(&mut straight, &once.url, CALLS).await;
    once.stop().await.expect("stops");
    let uninterrupted = bodies(&mock);

    let mut resumed = Agent::new("vault", "rotate the keys");
    let first = start("restarted.db", &again).await;
    converse(&mut resumed, &first.url, CALLS / 2).await;
    let before = first.stats.compactions();
    first.stop().await.expect("stops");
    let second = start("restarted.db", &again).await;
    converse(&mut resumed, &second.url, CALLS - CALLS / 2).await;
    let after = second.stats.compactions();
    second.stop().await.expect("stops");
    assert!(before >= 1 && after >= 1, "compactions before ({before}) and after ({after}) the restart");
    let restarted = bodies(&again);
    assert_eq!(restarted.len(), uninterrupted.len());
    for (call, (expected, got)) in uninterrupted.iter().zip(&restarted).enumerate() {
        assert!(expected == got, "call {call} differs after the restart");
    }
    // The secrets went out in the rewritten part (before a pointer) after the restart too: the
    // user's notes stay where eviction leaves pointers around them.
    let rewritten_secret = restarted[CALLS / 2..].iter().any(|body| {
        let messages = raw_messages(body);
        let pointer = messages.iter().rposition(|message| message.contains("cf-"));
        let secret = messages.iter().position(|message| message.contains(AWS_KEY));
        matches!((secret, pointer), (Some(secret), Some(pointer)) if secret < pointer)
    });
    assert!(rewritten_secret, "a compacted request after the restart holds a secret the store did not");
    no_secret_in(&file_bytes(&dir), "the store's files");
}

/// A conversation's stored state that can no longer be read (a damaged record) is written over
/// from memory: the conversation goes on in its one session, and its state is stored again,
/// instead of each request starting a new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_state_that_cannot_be_read_is_written_over_from_memory() {
    let dir = scratch("unreadable-state");
    let path = dir.join("proxy.db");
    let mock = Mock::start(agent_script(40)).await;
    let store = Some(StoreLocation::File(path.clone()));
    let running = proxy(contextfold_serve::ServeConfig { store, ..config(&mock.url()) }).await;
    let client = client();
    let mut agent = Agent::new("ledger", "balance the books");
    for _ in 0..3 {
        agent.step(&client, &running.url).await;
    }
    let damage = rusqlite::Connection::open(&path).expect("the store opens");
    let damaged = damage.execute("UPDATE states SET state = 42, version = version + 1", []);
    assert_eq!(damaged.expect("the record is damaged"), 1, "one conversation");
    for _ in 0..5 {
        agent.step(&client, &running.url).await;
    }
    running.stop().await.expect("stops");
    assert_eq!(mock.messages_requests().len(), 8, "every request went upstream");
    let store = SqliteStore::open_read_only(&path).expect("the store reads");
    let sessions = store.sessions().expect("its sessions");
    assert_eq!(sessions.len(), 1, "one session, not one per request: {sessions:?}");
    let stored: (String, i64) = damage
        .query_row("SELECT typeof(state), version FROM states", [], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("the record");
    assert_eq!(stored.0, "blob", "written again");
    assert!(stored.1 >= 9, "written at every request after the damage: version {}", stored.1);
}
