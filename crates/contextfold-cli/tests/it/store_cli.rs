//! End-to-end tests of the store commands: `compact --store` and `evict --store` keep what
//! they remove; `recall`, `search` and `sessions` give it back; secrets are masked unless
//! `--no-redact`; every bad input is a one-line error naming the file, with exit 2, and
//! leaves files as they were. The corpus round trip checks every payload and every history.

use crate::common;

use crate::common::{arg, contextfold, contextfold_in, fixture, json, json_lines, openai_once, scratch, Run, Scratch};
use contextfold::core::hash::payload_ref;
use serde_json::Value;
use std::path::{Path, PathBuf};

const SESSION: &str = "examples/session.json";

fn dir(test: &str) -> Scratch {
    scratch("store-cli", test)
}

/// Checks a failure: exit 2, one line on standard error that mentions each of `needles`.
fn fails(run: &Run, needles: &[&str]) {
    assert_eq!(run.code, 2, "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line: {}", run.stderr);
    for needle in needles {
        assert!(run.stderr.contains(needle), "{needle:?} not in {}", run.stderr);
    }
}

/// Compacts the example session into `store` at a budget small enough to evict, summarize
/// and clip; returns the `--json` report.
fn compact_example(store: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["compact", SESSION, "--budget", "2000", "--tokenizer", "estimate", "--json"];
    let store = arg(store);
    args.extend(["--store", &store]);
    args.extend(extra);
    let example = fixture(SESSION);
    args[1] = &example;
    json(&args)
}

/// The refs of a report: its evicted items, then its clipped outputs.
fn refs(report: &Value) -> Vec<(String, usize, usize)> {
    ["items", "clipped"]
        .iter()
        .flat_map(|key| report[*key].as_array().cloned().unwrap_or_default())
        .map(|item| {
            let at = |field: &str| item[field].as_u64().expect("an index") as usize;
            (item["ref"].as_str().expect("a ref").to_string(), at("message"), at("block"))
        })
        .collect()
}

/// Recalls `reference` and reads it back as the payload value (a string, or its JSON).
fn recall(store: &Path, reference: &str) -> Value {
    let run = contextfold(&["recall", reference, "--store", &arg(store)]);
    assert_eq!(run.code, 0, "recall {reference}: {}", run.stderr);
    if run.stdout.starts_with('[') {
        if let Ok(value) = serde_json::from_str::<Value>(&run.stdout) {
            if payload_ref(&value) == reference {
                return value;
            }
        }
    }
    Value::String(run.stdout)
}

fn sessions(store: &Path) -> Vec<Value> {
    json_lines(&["sessions", "--json", "--store", &arg(store)])
}

fn export(store: &Path, session: &str) -> String {
    let run = contextfold(&["sessions", "export", session, "--store", &arg(store)]);
    assert_eq!(run.code, 0, "export {session}: {}", run.stderr);
    run.stdout
}

#[test]
fn compact_store_keeps_history_payloads_and_summary() {
    let dir = dir("compact");
    let store = dir.join("store.db");
    let report = compact_example(&store, &["--no-redact"]);
    let session = report["session"].as_str().expect("the report names the session").to_string();
    let input: Value = serde_json::from_str(&std::fs::read_to_string(fixture(SESSION)).unwrap()).unwrap();
    let refs = refs(&report);
    assert!(refs.len() > 3, "the budget evicts: {report}");
    for (reference, message, block) in &refs {
        let original = &input["messages"][*message]["content"][*block]["content"];
        assert_eq!(&recall(&store, reference), original, "{reference}");
    }
    let listed = sessions(&store);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], session.as_str());
    assert_eq!(listed[0]["name"], "session.json");
    assert_eq!(listed[0]["format"], "anthropic");
    assert_eq!(listed[0]["messages"].as_u64(), Some(input["messages"].as_array().unwrap().len() as u64));
    assert_eq!(listed[0]["payloads"].as_u64(), Some(refs.len() as u64));
    assert!(listed[0]["created"].as_u64().is_some_and(|created| created > 1_600_000_000));
    // The export is the input as the CLI writes it.
    let converted = contextfold(&["convert", &fixture(SESSION), "--to", "anthropic"]);
    assert_eq!(export(&store, &session), converted.stdout);
    // The text listing names the session, its counts and format.
    let text = contextfold(&["sessions", "--store", &arg(&store)]).stdout;
    assert!(text.starts_with("id ") && text.contains(&session) && text.contains("anthropic"), "{text}");
}

#[test]
fn without_store_compact_and_evict_are_unchanged() {
    let dir = dir("unchanged");
    let example = fixture(SESSION);
    let (plain, stored) = (arg(&dir.join("plain.json")), arg(&dir.join("stored.json")));
    let store = arg(&dir.join("s.db"));
    let base = ["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "--json", "-o"];
    let without = contextfold_in(Some(&dir), &[&base[..], &[&plain]].concat(), b"");
    let with = contextfold_in(Some(&dir), &[&base[..], &[&stored, "--store", &store]].concat(), b"");
    assert_eq!((without.code, with.code), (0, 0), "{}{}", without.stderr, with.stderr);
    assert_eq!(std::fs::read(&plain).unwrap(), std::fs::read(&stored).unwrap(), "the store changes no output");
    assert!(!without.stdout.contains("\"session\""), "{}", without.stdout);
    assert!(!dir.join(".contextfold").exists(), "no store without --store");
    let evict = contextfold_in(Some(&dir), &["evict", &example, "--keep", "1", "-o", &plain], b"");
    assert_eq!(evict.code, 0, "{}", evict.stderr);
    assert!(!evict.stderr.contains("stored as session") && !dir.join(".contextfold").exists(), "{}", evict.stderr);
}

#[test]
fn store_without_a_path_is_in_the_working_directory() {
    let dir = dir("default");
    let example = fixture(SESSION);
    // `--store` last, so it takes no value.
    let args = ["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "--json", "--store"];
    let run = contextfold_in(Some(&dir), &args, b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(dir.join(".contextfold/store.db").is_file());
    let listed = contextfold_in(Some(&dir), &["sessions", "--json"], b"");
    assert_eq!(listed.stdout.lines().count(), 1, "{}", listed.stdout);
}

#[test]
fn evict_store_keeps_the_history_before_eviction() {
    let dir = dir("evict");
    let store = dir.join("s.db");
    let example = fixture(SESSION);
    let report = json(&["evict", &example, "--keep", "1", "--json", "--store", &arg(&store), "--no-redact"]);
    let session = report["session"].as_str().expect("a session");
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&example).unwrap()).unwrap();
    let refs = refs(&report);
    assert!(!refs.is_empty());
    for (reference, message, block) in &refs {
        assert_eq!(&recall(&store, reference), &input["messages"][*message]["content"][*block]["content"]);
    }
    assert_eq!(export(&store, session), contextfold(&["convert", &example, "--to", "anthropic"]).stdout);
}

#[test]
fn session_appends_to_an_existing_session() {
    let dir = dir("append");
    let store = dir.join("s.db");
    let first = compact_example(&store, &[]);
    let session = first["session"].as_str().unwrap();
    let stored = sessions(&store)[0]["messages"].clone();
    let second = compact_example(&store, &["--session", session]);
    assert_eq!(second["session"], session);
    let listed = sessions(&store);
    assert_eq!(listed.len(), 1, "no new session");
    assert_eq!(listed[0]["messages"], stored, "the same history is stored once");
    let unknown = contextfold(&[
        "compact",
        &fixture(SESSION),
        "--budget",
        "2000",
        "--tokenizer",
        "estimate",
        "--json",
        "--store",
        &arg(&store),
        "--session",
        "s-none",
    ]);
    fails(&unknown, &["s-none", &arg(&store)]);
    assert_eq!(sessions(&store).len(), 1);
}

/// Realistic fake secrets (built, so that no scanner flags this file): an AWS access key id,
/// a GitHub token, a password and a line of a PEM private key.
fn secrets() -> [String; 4] {
    [
        format!("AKIA{}", "Z7Q2".repeat(4)),
        format!("ghp_{}", "a1B2c3D4e5F6".repeat(3)),
        "s3cr3t-Pa55w0rd!".to_string(),
        format!("MIIEpAIBAAKCAQEA{}", "u8Rk2Lq9Zx4Wm7Tn".repeat(3)),
    ]
}

/// The secrets `text` holds.
fn leaked(text: &str) -> Vec<String> {
    secrets().into_iter().filter(|secret| text.contains(secret.as_str())).collect()
}

/// A conversation holding [`secrets`]: in a tool output (an `.env` and a key file), in the
/// first request, and in a later request that a summary quotes.
fn secret_session(dir: &Path) -> PathBuf {
    let [aws, github, password, pem] = secrets();
    let env = format!(
        "DB_PASSWORD={password}\nAWS_ACCESS_KEY_ID={aws}\nGITHUB_TOKEN={github}\n\
         -----BEGIN RSA PRIVATE KEY-----\n{pem}\n{pem}\n-----END RSA PRIVATE KEY-----\n"
    );
    let filler: String = (0..200).map(|i| format!("line {i} of the configuration notes\n")).collect();
    let conversation = serde_json::json!({"messages": [
        {"role": "user", "content": "Check the deploy config, my token is ".to_string() + &github},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": ".env"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": env + &filler}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "deploy.yml\n.env"}]},
        {"role": "assistant", "content": "The config looks fine."},
        {"role": "user", "content": format!("Deploy it with the key {aws} and:\nDB_PASSWORD={password}\nthen report back.")},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "./deploy.sh"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": filler.clone()}]},
        {"role": "assistant", "content": "Deployed."},
        {"role": "user", "content": "Thanks. Now write the release notes."},
        {"role": "assistant", "content": "Release notes written to NOTES.md."}
    ]});
    let path = dir.join("secrets.json");
    std::fs::write(&path, serde_json::to_string_pretty(&conversation).unwrap()).unwrap();
    path
}

#[test]
fn the_store_gets_secrets_masked_unless_no_redact() {
    let dir = dir("redact");
    let input = secret_session(&dir);
    for (store, extra, masked) in [("masked.db", None, true), ("plain.db", Some("--no-redact"), false)] {
        let store = dir.join(store);
        let out = dir.join("out.json");
        let mut args = vec!["evict", input.to_str().unwrap(), "--keep", "0", "--json", "-o", out.to_str().unwrap()];
        let store_arg = arg(&store);
        args.extend(["--store", &store_arg]);
        args.extend(extra);
        let report = json(&args);
        let (reference, _, _) = refs(&report).into_iter().next().expect("the .env output is evicted");
        let recalled = recall(&store, &reference).as_str().unwrap().to_string();
        let exported = export(&store, report["session"].as_str().unwrap());
        assert_eq!(leaked(&exported).len(), if masked { 0 } else { 4 }, "{exported}");
        assert_eq!(recalled.contains("s3cr3t-Pa55w0rd!"), !masked, "{recalled}");
        if masked {
            assert!(recalled.starts_with("DB_PASSWORD=[REDACTED:secret]\nAWS_ACCESS_KEY_ID=[REDACTED:"), "{recalled}");
            assert!(exported.contains("my token is [REDACTED:github-token]"), "{exported}");
        }
        // Redaction is for the store only: the written conversation keeps the user's text.
        assert!(std::fs::read_to_string(&out).unwrap().contains("my token is ghp_"));
    }
}

/// The text of the summary in the conversation file `path`, if it has one.
fn written_summary(path: &Path) -> Option<String> {
    let value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let conversation = contextfold::core::Conversation::from_value(value).unwrap();
    conversation.messages.iter().find_map(contextfold::core::summary::split_summary).map(|split| split.summary)
}

/// Every file of the store (the database and its journal), as text.
fn store_bytes(store: &Path) -> String {
    ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::read(format!("{}{suffix}", store.display())).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .collect()
}

#[test]
fn compact_store_leaves_no_secret_in_the_store_or_the_summary() {
    let dir = dir("redact-compact");
    let input = secret_session(&dir);
    let compact = |store: &Path, out: &Path, extra: &[&str]| {
        let (input, store, out) = (arg(&input), arg(store), arg(out));
        let mut args = vec![
            "compact",
            &input,
            "--budget",
            "600",
            "--tokenizer",
            "estimate",
            "--json",
            "-o",
            &out,
            "--store",
            &store,
        ];
        args.extend(extra);
        json(&args)
    };
    let (plain, masked) = (dir.join("plain.db"), dir.join("masked.db"));
    let (plain_out, masked_out) = (dir.join("plain.json"), dir.join("masked.json"));
    let unredacted = compact(&plain, &plain_out, &["--no-redact"]);
    assert_eq!(leaked(&store_bytes(&plain)).len(), 4, "with --no-redact the store keeps them");
    assert!(!leaked(&written_summary(&plain_out).expect("a summary")).is_empty(), "the summary quotes a request");
    assert!(unredacted.get("secrets_redacted").is_none(), "{unredacted}");

    let report = compact(&masked, &masked_out, &[]);
    assert!(report["secrets_redacted"].as_u64().is_some_and(|count| count > 0), "{report}");
    assert_eq!(leaked(&store_bytes(&masked)), Vec::<String>::new(), "the store files hold no secret");
    let session = report["session"].as_str().expect("a session");
    assert_eq!(leaked(&export(&masked, session)), Vec::<String>::new());
    for (reference, _, _) in refs(&report) {
        assert_eq!(leaked(&recall(&masked, &reference).to_string()), Vec::<String>::new(), "{reference}");
    }
    let summary = written_summary(&masked_out).expect("a summary");
    assert_eq!(leaked(&summary), Vec::<String>::new(), "{summary}");
    assert!(summary.contains("[REDACTED:"), "{summary}");
}

#[test]
fn an_llm_summarizer_is_sent_masks_unless_no_redact() {
    let dir = dir("redact-llm");
    let input = arg(&secret_session(&dir));
    for (extra, masked) in [(None, true), (Some("--no-redact"), false)] {
        let (url, server) = openai_once("## Objective and user requests\n- deploy");
        let mut args = vec![
            "compact",
            &input,
            "--budget",
            "600",
            "--tokenizer",
            "estimate",
            "--summarizer",
            "openai:test",
            "--base-url",
            &url,
            "--max-retries",
            "0",
            "--strategy",
            "summarize",
            "--json",
            "--dry-run",
        ];
        args.extend(extra);
        let report = json(&args);
        let sent = server.join().expect("the server read one request");
        assert!(report["summarizer"].as_str().is_some_and(|id| id.starts_with("openai")), "{report}");
        assert_eq!(leaked(&sent).is_empty(), masked, "{extra:?}: {sent}");
        assert_eq!(sent.contains("[REDACTED:aws-access-key-id]"), masked, "{sent}");
    }
}

#[test]
fn recall_tool_names_the_tool_in_pointers_and_summary() {
    let dir = dir("recall-tool");
    let store = arg(&dir.join("s.db"));
    let example = fixture(SESSION);
    let text = |path: &Path| std::fs::read_to_string(path).unwrap();
    for (flag, named) in [(None, false), (Some("--recall-tool"), true)] {
        let out = dir.join("out.json");
        let mut args = vec!["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "--json"];
        let out_arg = arg(&out);
        args.extend(["-o", &out_arg, "--store", &store]);
        args.extend(flag);
        json(&args);
        let written = text(&out);
        assert!(written_summary(&out).is_some(), "the budget summarizes");
        assert_eq!(
            written.contains(&contextfold::core::summary::recall_note("context_recall")),
            named,
            "the summary's note"
        );
        let mut args = vec!["evict", &example, "--keep", "1", "--json", "-o", &out_arg, "--store", &store];
        args.extend(flag);
        json(&args);
        let pointers = text(&out);
        assert!(pointers.contains("[contextfold: offloaded"), "evict leaves pointers");
        assert_eq!(pointers.contains("call context_recall with this ref"), named, "{pointers}");
    }
    let unstored = contextfold(&["compact", &example, "--recall-tool"]);
    assert!(unstored.code == 2 && unstored.stderr.contains("--store"), "{}", unstored.stderr);
    fails(&contextfold(&["evict", &example, "--no-redact"]), &["--no-redact", "--store"]);
}

#[test]
fn search_finds_messages_and_payloads() {
    let dir = dir("search");
    let store = dir.join("s.db");
    let session = compact_example(&store, &[])["session"].as_str().unwrap().to_string();
    let other = compact_example(&store, &[])["session"].as_str().unwrap().to_string();
    let store = arg(&store);
    let hits = json_lines(&["search", "invoice", "--store", &store, "--json", "--limit", "50"]);
    assert!(hits.iter().any(|hit| hit["message"].is_u64()), "message hits");
    assert!(hits.iter().any(|hit| hit["ref"].as_str().is_some_and(|r| r.starts_with("cf-"))), "payload hits");
    assert!(hits.iter().all(|hit| hit["snippet"].as_str().unwrap().to_lowercase().contains("[invoice")), "{hits:?}");
    assert!(hits.iter().any(|hit| hit["session"] == other.as_str()));
    let mine = json_lines(&["search", "invoice", "--session", &session, "--store", &store, "--json"]);
    assert!(!mine.is_empty() && mine.iter().all(|hit| hit["session"] == session.as_str()));
    assert_eq!(json_lines(&["search", "invoice", "--store", &store, "--json", "--limit", "1"]).len(), 1);
    let text = contextfold(&["search", "invoice", "total", "--store", &store, "--limit", "3"]);
    assert_eq!(text.code, 0);
    assert_eq!(text.stdout.lines().count(), 3, "{}", text.stdout);
    assert!(text.stdout.lines().all(|line| line.starts_with('s') && line.contains(": ")), "{}", text.stdout);
    let none = contextfold(&["search", "zzqqxxnotthere", "--store", &store]);
    assert_eq!((none.code, none.stdout.as_str()), (0, ""));
}

#[test]
fn sessions_rm_deletes_everything_of_a_session() {
    let dir = dir("rm");
    let store = dir.join("s.db");
    let report = compact_example(&store, &[]);
    let session = report["session"].as_str().unwrap();
    let (reference, _, _) = refs(&report).into_iter().next().unwrap();
    let run = contextfold(&["sessions", "rm", session, "--store", &arg(&store)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(sessions(&store).is_empty());
    fails(&contextfold(&["recall", &reference, "--store", &arg(&store)]), &[&reference, &arg(&store)]);
    fails(&contextfold(&["sessions", "rm", session, "--store", &arg(&store)]), &[session, &arg(&store)]);
    fails(&contextfold(&["sessions", "export", session, "--store", &arg(&store)]), &[session, &arg(&store)]);
}

#[test]
fn bad_stores_are_one_line_errors_that_change_nothing() {
    let dir = dir("bad");
    let missing = dir.join("nowhere/store.db");
    let text = dir.join("notes.txt");
    std::fs::write(&text, "just some notes, long enough to look like a header of something\n".repeat(30)).unwrap();
    let foreign = dir.join("app.db");
    let connection = rusqlite::Connection::open(&foreign).unwrap();
    connection.execute_batch("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');").unwrap();
    drop(connection);
    let damaged = dir.join("damaged.db");
    compact_example(&damaged, &[]);
    let bytes = std::fs::read(&damaged).unwrap();
    std::fs::write(&damaged, &bytes[..bytes.len() / 3]).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("damaged.db{suffix}")));
    }

    for (store, needle) in [
        (&missing, "no store at"),
        (&text, "not a contextfold store"),
        (&foreign, "another program"),
        (&damaged, "malformed"),
    ] {
        let before = std::fs::read(store).ok();
        let path = arg(store);
        for args in [
            vec!["recall", "cf-0123456789ab", "--store", &path],
            vec!["search", "invoice", "--store", &path],
            vec!["sessions", "--store", &path],
            vec!["sessions", "export", "s1", "--store", &path],
            vec!["sessions", "rm", "s1", "--store", &path],
        ] {
            fails(&contextfold(&args), &[needle, &path]);
        }
        if store != &missing {
            let example = fixture(SESSION);
            fails(&contextfold(&["compact", &example, "--json", "--store", &path]), &[needle, &path]);
            fails(&contextfold(&["evict", &example, "--json", "--store", &path]), &[needle, &path]);
        }
        assert_eq!(std::fs::read(store).ok(), before, "{path} is unchanged");
    }
    assert!(!dir.join("nowhere").exists(), "reading commands create nothing");

    // Usage errors.
    let example = fixture(SESSION);
    let store = arg(&dir.join("s.db"));
    fails(&contextfold(&["compact", &example, "--dry-run", "--store", &store]), &["--dry-run"]);
    let corpus = fixture("examples");
    let several = contextfold(&["compact", &example, &corpus, "--json", "--store", &store, "--session", "s1"]);
    fails(&several, &["--session"]);
}

#[test]
fn a_store_locked_past_the_timeout_fails_cleanly() {
    let dir = dir("locked");
    let store = dir.join("s.db");
    compact_example(&store, &[]);
    let holder = rusqlite::Connection::open(&store).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let run = contextfold(&["compact", &fixture(SESSION), "--json", "--store", &arg(&store)]);
    fails(&run, &["locked", &arg(&store)]);
    // Readers still read; after the lock goes, nothing is lost and writers write again.
    assert_eq!(sessions(&store).len(), 1);
    holder.execute_batch("ROLLBACK;").unwrap();
    drop(holder);
    compact_example(&store, &[]);
    assert_eq!(sessions(&store).len(), 2);
}

/// Every corpus session: compacted into one store at 8k tokens, every payload recalled
/// exactly, every history exported as the CLI writes the input.
#[test]
fn corpus_round_trip() {
    let Some(corpus) = common::corpus_dir() else { return };
    let dir = dir("corpus");
    let store = dir.join("s.db");
    let started = std::time::Instant::now();
    let reports = json_lines(&[
        "compact",
        &arg(&corpus),
        "--store",
        &arg(&store),
        "--no-redact",
        "--budget",
        "10000",
        "--tokenizer",
        "estimate",
        "--json",
    ]);
    assert_eq!(reports.len(), 61, "every corpus file compacts");
    let formats: std::collections::HashMap<String, String> = sessions(&store)
        .into_iter()
        .map(|info| (info["id"].as_str().unwrap().to_string(), info["format"].as_str().unwrap().to_string()))
        .collect();
    let mut recalled = 0;
    for report in &reports {
        let file = report["file"].as_str().unwrap();
        let session = report["session"].as_str().unwrap();
        for (reference, _, _) in refs(report) {
            let payload = recall(&store, &reference);
            assert_eq!(payload_ref(&payload), reference, "{file}: {reference} comes back exactly");
            recalled += 1;
        }
        let format = match formats[session].as_str() {
            "claude-code" => "anthropic",
            other => other,
        };
        let converted = contextfold(&["convert", file, "--to", format]);
        assert_eq!(converted.code, 0, "{file}: {}", converted.stderr);
        assert!(export(&store, session) == converted.stdout, "{file}: the export differs from the input");
    }
    println!("corpus: {} sessions, {recalled} payloads recalled in {:?}", reports.len(), started.elapsed());
}

/// Every `cf-` ref in `text`.
fn refs_in(text: &str) -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    for (at, _) in text.match_indices("cf-") {
        let hex = &text[at + 3..];
        let digits = hex.bytes().take_while(u8::is_ascii_hexdigit).count();
        if digits == 12 {
            found.insert(text[at..at + 15].to_string());
        }
    }
    found
}

/// Every ref anywhere in a written conversation (pointers, clip markers, inside a summary)
/// is recallable from the store it was written with: at a roomy budget (many pointers) and
/// at a tight one (outputs clipped; a file whose newest turn cannot fit exits 2 and is
/// skipped). At the tight one most sessions fold into a summary, leaving few pointers.
#[test]
fn every_ref_in_a_written_conversation_is_recallable_from_its_store() {
    let Some(corpus) = common::corpus_dir() else { return };
    for (budget, at_least) in [("16000", 300), ("4000", 5)] {
        let dir = dir(&format!("refs-{budget}"));
        let (store, out) = (dir.join("s.db"), dir.join("out"));
        let run = contextfold(&[
            "compact",
            &arg(&corpus),
            "--store",
            &arg(&store),
            "--out-dir",
            &arg(&out),
            "--budget",
            budget,
            "--json",
        ]);
        assert!(run.code == 0 || run.code == 2, "{}", run.stderr);
        let (mut checked, mut clipped) = (0, 0);
        for entry in std::fs::read_dir(&out).unwrap() {
            let path = entry.unwrap().path();
            let written = std::fs::read_to_string(&path).unwrap();
            clipped += usize::from(written.contains("[contextfold: clipped"));
            for reference in refs_in(&written) {
                let recalled = contextfold(&["recall", &reference, "--store", &arg(&store)]);
                assert_eq!(recalled.code, 0, "{}: {reference} is not recallable: {}", path.display(), recalled.stderr);
                checked += 1;
            }
        }
        assert!(checked >= at_least, "budget {budget}: only {checked} refs");
        assert!(budget != "4000" || clipped > 0, "budget {budget}: no output was clipped");
        println!("budget {budget}: {checked} refs recalled, {clipped} outputs with clip markers");
    }
}
