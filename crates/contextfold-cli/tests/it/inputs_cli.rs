//! What the commands make of inputs a careless user gives: a broken file's error said once
//! wherever it is printed, a directory's dry run, and a named pipe given as a file.

use crate::common::{arg, contextfold, fixture, notice, scratch, Scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

const SESSION: &str = "examples/session.json";

fn dir(test: &str) -> Scratch {
    scratch("inputs-cli", test)
}

/// A message without a role, and JSON nested past the parser's limit.
fn broken_files(dir: &Path) -> [(PathBuf, &'static str); 2] {
    let roleless = dir.join("manifest.json");
    std::fs::write(&roleless, r#"{"messages": [{"content": "hello"}]}"#).expect("write");
    let nested = dir.join("nested.json");
    std::fs::write(&nested, format!("{}{}", "[".repeat(200), "]".repeat(200))).expect("write");
    [(roleless, "message 0: the message has no `role`"), (nested, "the JSON nests deeper than 128 levels")]
}

#[test]
fn an_input_error_is_said_once_by_every_command() {
    let dir = dir("said-once");
    let session = fixture(SESSION);
    for (file, error) in broken_files(&dir) {
        let file = arg(&file);
        for args in [
            // One file: the error ends the command.
            vec!["stats", file.as_str()],
            vec!["compact", file.as_str(), "--dry-run"],
            // Several: each file's error is printed and the others go on.
            vec!["compact", session.as_str(), file.as_str(), "--dry-run", "--tokenizer", "estimate"],
            vec!["replay", session.as_str(), file.as_str(), "--window", "8000", "--tokenizer", "estimate"],
        ] {
            let run = contextfold(&args);
            assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
            let line = run.stderr.lines().find(|line| line.contains(error)).unwrap_or_default();
            assert!(line.starts_with(&format!("contextfold: {file}: ")), "{args:?}: {}", run.stderr);
            assert!(line.ends_with(error), "{args:?}: {}", run.stderr);
            assert_eq!(run.stderr.matches(error).count(), 1, "{args:?}: {}", run.stderr);
        }
    }
}

#[test]
fn compact_dry_run_of_a_directory_shows_what_it_would_do() {
    let dir = dir("dry-run");
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).expect("mkdir");
    std::fs::copy(fixture(SESSION), inputs.join("session.json")).expect("copy");
    let run = contextfold(&["compact", "--dry-run", &arg(&inputs), "--tokenizer", "estimate"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines.first().is_some_and(|line| line.starts_with("file ")), "a table: {}", run.stdout);
    // The file's row holds the figures a dry run of the file alone reports.
    let alone = contextfold(&["compact", "--dry-run", &arg(&inputs.join("session.json")), "--tokenizer", "estimate"]);
    let figures = alone.stdout.split(": ").nth(1).and_then(|rest| rest.split(" tokens").next()).unwrap_or_default();
    let (before, after) = figures.split_once(" → ").unwrap_or_else(|| panic!("figures: {}", alone.stdout));
    let row = lines.iter().find(|line| line.contains("session.json")).unwrap_or_else(|| panic!("{}", run.stdout));
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(words[1..3], [before, after], "{}", run.stdout);
    assert!(lines.last().is_some_and(|line| line.starts_with("1 file ")), "a total line: {}", run.stdout);
    let written: Vec<_> = std::fs::read_dir(&inputs).expect("lists").collect();
    assert_eq!(written.len(), 1, "a dry run writes nothing");
    // Without --dry-run, a directory's outputs need a directory of their own, one file or more.
    let run = contextfold(&["compact", &arg(&inputs), "--tokenizer", "estimate"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("compacting 1 file needs --out-dir DIR"), "{}", run.stderr);
}

#[test]
fn a_named_pipe_given_as_a_file_is_refused_naming_it() {
    let dir = dir("fifo");
    let fifo = dir.join("pipe.json");
    match Command::new("mkfifo").arg(&fifo).status() {
        Ok(status) => assert!(status.success(), "mkfifo {}", fifo.display()),
        Err(err) => {
            assert!(std::env::var_os("CI").is_none(), "CI is set but `mkfifo` cannot run: {err}");
            return notice(&format!("skipped: no named pipe (`mkfifo`: {err})"));
        }
    }
    // Should the command open the pipe, this writer lets it go on (to read nothing), so a
    // command that waits on the pipe fails this test instead of hanging it.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::OpenOptions::new().write(true).open(fifo).map(drop))
    };
    for command in ["stats", "compact", "validate"] {
        let run = contextfold(&[command, &arg(&fifo)]);
        assert_eq!(run.code, 2, "{command}: {}", run.stderr);
        assert_eq!(
            run.stderr.trim_end(),
            format!(
                "contextfold: {}: not a regular file (a pipe, socket or device); give a file, or `-` to read standard input",
                fifo.display()
            ),
            "{command}"
        );
    }
    // No command opened the pipe: open it here to let the writer go.
    drop(std::fs::File::open(&fifo).expect("the pipe opens once its writer is there"));
    writer.join().expect("the writer ends").expect("the writer opened the pipe");
}
