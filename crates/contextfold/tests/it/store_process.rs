//! The SQLite store across processes: a compaction killed at a random point leaves all of it
//! or none of it, and two processes appending to one session lose nothing.
//!
//! The children are this test binary run again (`--exact <test> --nocapture`) with [`ROLE`]
//! naming what they do; each test starts by checking whether it is the child.
#![cfg(feature = "sqlite")]

use contextfold::compactor::{CompactConfig, Compactor, Target};
use contextfold::core::{count_conversation, Conversation, Message, Role, Tokenizer};
use contextfold::store::{SessionStore, SqliteStore, RECALL_TOOL_NAME};
use contextfold_test_support::Scratch;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Set in a child: what it does.
const ROLE: &str = "CONTEXTFOLD_TEST_ROLE";
/// Set in a child: the store file.
const STORE: &str = "CONTEXTFOLD_TEST_STORE";
/// Set in an appending child: the session and the writer's number.
const SESSION: &str = "CONTEXTFOLD_TEST_SESSION";
const WRITER: &str = "CONTEXTFOLD_TEST_WRITER";

/// The role of this process, when it is a child.
fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for a child"))
}

/// This test binary, run as the child `role` of the test `test`.
fn spawn(test: &str, role: &str, envs: &[(&str, &str)]) -> Child {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command.args(["--exact", &format!("store_process::{test}"), "--nocapture", "--test-threads=1"]).env(ROLE, role);
    for (name, value) in envs {
        command.env(name, value);
    }
    command.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("the child starts")
}

/// A fresh directory under the system temp dir, removed when the test passes.
fn temp_dir(name: &str) -> Scratch {
    Scratch::new(name)
}

/// The largest corpus session, or (printing why) a synthetic one of about the same size.
fn big_conversation() -> Conversation {
    let corpus = crate::common::corpus_dir();
    let largest = corpus.as_deref().and_then(|corpus| std::fs::read_dir(corpus).ok()).and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .filter(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.ends_with(".json") && name != "manifest.json"
            })
            .max_by_key(|entry| entry.metadata().map(|meta| meta.len()).unwrap_or(0))
    });
    if let Some(entry) = largest {
        return contextfold::input::load(&entry.path(), None).unwrap_or_else(|err| panic!("{err}")).conversation;
    }
    crate::common::notice("using a synthetic session of about the size of the corpus's largest");
    let mut messages = Vec::new();
    for turn in 0..120 {
        let id = format!("call{turn}");
        let output: String =
            (0..60).map(|line| format!("turn {turn} line {line}: building crate part{line}\n")).collect();
        messages.push(json!({"role": "user", "content": format!("step {turn}: build it again")}));
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("cargo build -p part{turn}")}}]}));
        messages
            .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}));
        messages.push(json!({"role": "assistant", "content": format!("Step {turn} built.")}));
    }
    Conversation::from_value(Value::Array(messages)).expect("a valid session")
}

/// The child of [`killed_compactions_are_all_or_none`]: compacts the conversation into a new
/// session of the store, again and again, printing a line after each until killed.
fn compact_forever() {
    let store = Arc::new(SqliteStore::open(env(STORE)).expect("open"));
    let conversation = big_conversation();
    let tokens = count_conversation(Tokenizer::Estimate.counter(), &conversation);
    let mut config = CompactConfig { target: Target::Budget(tokens / 5), ..CompactConfig::default() };
    config.evict.recall_tool = Some(RECALL_TOOL_NAME.into());
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let compactor = Compactor::default();
    for round in 0.. {
        let started = Instant::now();
        let session = store.create_session(&format!("round {round}")).expect("create");
        let compactor = compactor.clone().with_store(store.clone(), session);
        runtime.block_on(compactor.compact(&conversation, &config)).expect("compaction succeeds");
        println!("stored {round} in {} ms", started.elapsed().as_millis());
    }
}

/// Checks the store after a kill: intact, and each session holds a whole compaction or
/// nothing. Returns (whole, empty) session counts.
fn check_all_or_none(path: &Path, messages: usize) -> (usize, usize) {
    let store = SqliteStore::open(path).expect("the store opens after a kill");
    let connection = rusqlite::Connection::open(path).expect("open");
    let integrity: String = connection.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("check");
    assert_eq!(integrity, "ok");
    let count = |sql: &str, session: &str| -> usize {
        connection.query_row(sql, [session], |row| row.get::<_, i64>(0)).expect("count") as usize
    };
    let (mut whole, mut empty) = (0, 0);
    for info in store.sessions().expect("sessions") {
        let id = info.id.as_str();
        let reports = store.reports(id).expect("reports");
        let summaries = store.summaries(id).expect("summaries");
        let indexed = count("SELECT COUNT(*) FROM search WHERE session = ?1", id);
        match reports.as_slice() {
            [] => {
                assert_eq!((info.messages, info.payloads, summaries.len(), indexed), (0, 0, 0, 0), "{id}: a part");
                empty += 1;
            }
            [report] => {
                let refs: BTreeSet<String> = ["items", "clipped"]
                    .iter()
                    .flat_map(|key| report[key].as_array().cloned().unwrap_or_default())
                    .filter_map(|item| item["ref"].as_str().map(str::to_string))
                    .collect();
                assert!(!refs.is_empty(), "{id}: the compaction removed something");
                let mut statement = connection.prepare("SELECT ref FROM payloads WHERE session = ?1").expect("sql");
                let stored: BTreeSet<String> = statement
                    .query_map([id], |row| row.get(0))
                    .expect("payloads")
                    .collect::<Result<_, _>>()
                    .expect("payloads");
                assert_eq!(stored, refs, "{id}: every payload of the report, and no other");
                assert_eq!(info.messages, messages, "{id}: the whole history");
                let summarized = report["strategy_used"].as_str().unwrap_or_default().contains("summarize");
                assert_eq!(summaries.len(), usize::from(summarized), "{id}: its summary");
                assert_eq!(indexed, messages + refs.len(), "{id}: the search index");
                whole += 1;
            }
            _ => panic!("{id}: {} reports for one compaction", reports.len()),
        }
    }
    (whole, empty)
}

#[test]
fn killed_compactions_are_all_or_none() {
    if role().as_deref() == Some("compact") {
        return compact_forever();
    }
    let dir = temp_dir("crash");
    let path = dir.join("store.db");
    let messages = big_conversation().messages.len();
    let mut rng = fastrand::Rng::with_seed(0x5eed_c01d);
    let path_text = path.to_string_lossy().into_owned();
    let mut totals = (0, 0);
    for round in 0..6 {
        let mut child = spawn("killed_compactions_are_all_or_none", "compact", &[(STORE, &path_text)]);
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        // The first compaction tells how long one takes; the kill lands within the next two.
        // (The test harness prints its own lines first.)
        let first = lines.by_ref().map_while(Result::ok).find(|line| line.starts_with("stored ")).unwrap_or_default();
        let millis: u64 = first
            .rsplit(" in ")
            .next()
            .and_then(|rest| rest.trim_end_matches(" ms").parse().ok())
            .unwrap_or_else(|| panic!("round {round}: the child printed {first:?}"));
        std::thread::sleep(Duration::from_millis(rng.u64(0..=millis.max(1) * 2)));
        child.kill().expect("the child is killed");
        child.wait().expect("the child ends");
        let (whole, empty) = check_all_or_none(&path, messages);
        println!("round {round}: {whole} whole compactions, {empty} cut short (one takes {millis} ms)");
        totals = (whole, totals.1 + empty);
    }
    assert!(totals.0 >= 6, "each child stored at least one compaction");
    std::fs::remove_dir_all(dir).ok();
}

/// The child of [`two_processes_append_to_one_session`]: appends its messages one call each.
fn append_many() {
    let store = SqliteStore::open(env(STORE)).expect("open");
    let (session, writer) = (env(SESSION), env(WRITER));
    let go = Path::new(&env(STORE)).with_file_name("go");
    while !go.exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..EACH {
        let message = Message::text(Role::User, format!("writer {writer} message {i}"));
        store.push_messages(&session, &[message]).unwrap_or_else(|err| panic!("writer {writer}, message {i}: {err}"));
    }
}

const EACH: usize = 400;

#[test]
fn two_processes_append_to_one_session() {
    if role().as_deref() == Some("append") {
        return append_many();
    }
    let dir = temp_dir("appenders");
    let path = dir.join("store.db");
    let session = SqliteStore::open(&path).expect("open").create_session("shared").expect("create");
    let path_text = path.to_string_lossy().into_owned();
    let children: Vec<Child> = ["0", "1"]
        .iter()
        .map(|writer| {
            let envs = [(STORE, path_text.as_str()), (SESSION, session.as_str()), (WRITER, *writer)];
            spawn("two_processes_append_to_one_session", "append", &envs)
        })
        .collect();
    std::fs::write(dir.join("go"), "").expect("the start signal");
    for mut child in children {
        assert!(child.wait().expect("the child ends").success(), "a writer failed");
    }

    let store = SqliteStore::open(&path).expect("open");
    let messages = store.export(&session).expect("export");
    assert_eq!(messages.len(), 2 * EACH);
    let connection = rusqlite::Connection::open(&path).expect("open");
    let mut statement = connection.prepare("SELECT seq FROM messages WHERE session = ?1 ORDER BY seq").expect("sql");
    let sequence: Vec<i64> =
        statement.query_map([&session], |row| row.get(0)).expect("seq").collect::<Result<_, _>>().expect("seq");
    assert_eq!(sequence, (0..2 * EACH as i64).collect::<Vec<_>>(), "sequence numbers are contiguous");
    let texts: Vec<String> = messages
        .iter()
        .map(|message| message.to_value()["content"][0]["text"].as_str().unwrap_or_default().to_string())
        .collect();
    for writer in 0..2 {
        let mine: Vec<&String> = texts.iter().filter(|text| text.starts_with(&format!("writer {writer} "))).collect();
        let expected: Vec<String> = (0..EACH).map(|i| format!("writer {writer} message {i}")).collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "writer {writer}'s messages, all and in order");
    }
    let interleaved = texts.windows(2).filter(|pair| pair[0][..8] != pair[1][..8]).count();
    println!("the writers' messages interleave {interleaved} times");
    std::fs::remove_dir_all(dir).ok();
}
