//! Whole-process timings of the `contextfold` binary: what a person waits for, start-up
//! (loading an exact tokenizer's vocabulary) included.
//!
//! Runs each command many times and prints the fastest and the median wall time; the
//! fastest is the best estimate of the cost on an idle machine. Two sessions of a little
//! over 1 MB: the repository's example repeated (tool ids renamed), whose texts repeat, and
//! the largest sessions of the shared corpus joined (`../shared/corpus`, when present), whose
//! texts mostly do not.
//!
//! `cargo bench -p contextfold-cli --bench startup [-- RUNS]`; `CONTEXTFOLD_BENCH_BIN=PATH`
//! times another build of the binary instead (an older one, to compare).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The example session repeated until its JSON holds at least `bytes` bytes.
fn session(bytes: usize) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("examples/session.json")).expect("the example reads");
    let mut example: Value = serde_json::from_str(&text).expect("the example is JSON");
    let messages = example["messages"].as_array().cloned().expect("the example has messages");
    let mut all = Vec::new();
    for copy in 0.. {
        for message in &messages {
            let mut message = message.clone();
            for block in message["content"].as_array_mut().into_iter().flatten() {
                for key in ["id", "tool_use_id"] {
                    if let Some(id) = block.get(key).and_then(Value::as_str).map(|id| format!("{id}_{copy}")) {
                        block[key] = Value::String(id);
                    }
                }
            }
            all.push(message);
        }
        example["messages"] = Value::Array(all.clone());
        if example.to_string().len() >= bytes {
            break;
        }
    }
    example
}

/// The largest sessions of the shared corpus joined until their JSON holds at least `bytes`
/// bytes, or `None` without the corpus. A session that would start with the role the joined
/// ones end with starts one message later, so that roles still alternate.
fn corpus_session(bytes: usize) -> Option<Value> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort_by_key(|path| std::cmp::Reverse(std::fs::metadata(path).map_or(0, |meta| meta.len())));
    let mut joined: Option<Value> = None;
    for file in files {
        let session: Value = serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()?;
        let Some(messages) = session["messages"].as_array().cloned() else { continue };
        let Some(into) = joined.as_mut() else {
            joined = Some(session);
            continue;
        };
        let all = into["messages"].as_array_mut()?;
        let last_role = all.last().map(|message| message["role"].clone());
        let skip = usize::from(messages.first().map(|message| message["role"].clone()) == last_role);
        all.extend(messages.into_iter().skip(skip));
        if into.to_string().len() >= bytes {
            break;
        }
    }
    joined
}

/// The fastest and the median of `runs` runs of `binary args…`.
fn time(binary: &Path, args: &[&str], runs: usize) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let status = Command::new(binary)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("the binary runs");
            assert!(status.success(), "{args:?} failed");
            started.elapsed()
        })
        .collect();
    times.sort();
    (times[0], times[runs / 2])
}

fn main() {
    let runs = std::env::args().skip(1).find_map(|arg| arg.parse::<usize>().ok()).unwrap_or(30);
    let binary = std::env::var_os("CONTEXTFOLD_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_contextfold")), PathBuf::from);
    let dir: PathBuf = std::env::temp_dir().join(format!("contextfold-startup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let session_path = dir.join("session-1mb.json");
    let session = session(1_000_000).to_string();
    std::fs::write(&session_path, &session).expect("the session writes");
    let corpus_path = dir.join("corpus-1mb.json");
    let corpus = corpus_session(1_000_000).map(|corpus| corpus.to_string());
    match &corpus {
        Some(corpus) => std::fs::write(&corpus_path, corpus).expect("the corpus session writes"),
        None => println!("(no shared corpus beside the repository: its session is left out)"),
    }
    let word = dir.join("word.txt");
    std::fs::write(&word, "word\n").expect("the word writes");
    let (session_arg, word_arg) = (session_path.to_string_lossy(), word.to_string_lossy());
    let corpus_arg = corpus_path.to_string_lossy();
    println!("{}", binary.display());
    println!(
        "{runs} runs each; example session {} bytes, corpus session {} bytes",
        session.len(),
        corpus.as_ref().map_or(0, String::len)
    );
    let mut commands = vec![
        ("count --text (one word, o200k)", vec!["count", "--text", &word_arg]),
        ("count (1 MB session, o200k)", vec!["count", &session_arg]),
        ("evict (1 MB session, o200k)", vec!["evict", &session_arg, "-o", "/dev/null"]),
        ("evict (1 MB session, estimate)", vec!["evict", &session_arg, "-o", "/dev/null", "--tokenizer", "estimate"]),
        ("validate (1 MB session, no counts)", vec!["validate", &session_arg]),
    ];
    if corpus.is_some() {
        commands.extend([
            ("count (1 MB corpus session, o200k)", vec!["count", &corpus_arg]),
            ("evict (1 MB corpus session, o200k)", vec!["evict", &corpus_arg, "-o", "/dev/null"]),
            (
                "evict (1 MB corpus session, estimate)",
                vec!["evict", &corpus_arg, "-o", "/dev/null", "--tokenizer", "estimate"],
            ),
            ("validate (1 MB corpus session)", vec!["validate", &corpus_arg]),
        ]);
    }
    for (name, args) in commands {
        let (fastest, median) = time(&binary, &args, runs);
        println!("{name:<40} fastest {:>7.1} ms   median {:>7.1} ms", ms(fastest), ms(median));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
