//! Helpers shared by the end-to-end tests: running the binary, fixtures, scratch directories.
#![allow(dead_code)]

pub use contextfold_test_support::Scratch;
pub use contextfold_test_support::{corpus_dir, notice};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository root, where `examples/` and `tests/fixtures/` live.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file of the repository, as an argument.
pub fn fixture(name: &str) -> String {
    root().join(name).to_string_lossy().into_owned()
}

/// What a run of the binary did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Environment variables that would let a summarizer find a key or a server, or the
/// commands a store.
const PROVIDER_VARIABLES: [&str; 5] =
    ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CONTEXTFOLD_STORE_URL"];

/// Runs `contextfold args…` in `dir` (the test's own when `None`) with `stdin` and without
/// the provider variables, and checks it never panicked.
pub fn contextfold_in(dir: Option<&Path>, args: &[&str], stdin: &[u8]) -> Run {
    contextfold_env(dir, args, stdin, &[])
}

/// [`contextfold_in`] with the variables `env` set.
pub fn contextfold_env(dir: Option<&Path>, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_contextfold"));
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    for variable in PROVIDER_VARIABLES {
        command.env_remove(variable);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("the binary starts");
    child.stdin.take().expect("stdin").write_all(stdin).expect("writes stdin");
    let output = child.wait_with_output().expect("the binary runs");
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(!run.stderr.contains("panicked"), "panic running {args:?}: {}", run.stderr);
    run
}

/// Runs `contextfold args…` with `stdin`.
pub fn contextfold_with_stdin(args: &[&str], stdin: &[u8]) -> Run {
    contextfold_in(None, args, stdin)
}

/// Runs `contextfold args…`.
pub fn contextfold(args: &[&str]) -> Run {
    contextfold_in(None, args, b"")
}

/// Runs a command that must succeed and print JSON Lines; returns its objects.
pub fn json_lines(args: &[&str]) -> Vec<Value> {
    let run = contextfold(args);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    run.stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{args:?}: not JSON ({err}): {line}")))
        .collect()
}

/// Runs a command that must succeed and print one JSON object.
pub fn json(args: &[&str]) -> Value {
    let mut lines = json_lines(args);
    assert_eq!(lines.len(), 1, "{args:?}: one JSON object expected");
    lines.remove(0)
}

/// A fresh directory of one test's own (tests run in parallel, binaries too), removed when
/// the test passes.
pub fn scratch(binary: &str, test: &str) -> Scratch {
    Scratch::new(&format!("{binary}-{test}"))
}

/// A path as an argument.
pub fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs `contextfold args…` with its standard output on a terminal (a pseudo-terminal made by
/// util-linux `script`), as a person at a shell would; `None` after a visible notice when
/// `script` is missing (with `CI` set, that fails instead). Line ends come back as `\n`.
pub fn contextfold_on_terminal(args: &[&str]) -> Option<Run> {
    let script = Path::new("/usr/bin/script");
    if !script.exists() {
        assert!(std::env::var_os("CI").is_none(), "CI is set but {} is missing", script.display());
        notice("skipped a terminal test: /usr/bin/script is absent");
        return None;
    }
    let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
    let line: Vec<String> =
        std::iter::once(env!("CARGO_BIN_EXE_contextfold")).chain(args.iter().copied()).map(quote).collect();
    let mut command = Command::new(script);
    command.args(["-qec", &line.join(" "), "/dev/null"]).stdin(Stdio::null());
    for variable in PROVIDER_VARIABLES {
        command.env_remove(variable);
    }
    let output = command.output().expect("script runs");
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n"),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(!run.stdout.contains("panicked"), "panic running {args:?}: {}", run.stdout);
    Some(run)
}

/// A one-connection OpenAI-compatible server answering `summary`; its thread returns the
/// request body it read.
pub fn openai_once(summary: &str) -> (String, std::thread::JoinHandle<String>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds a port");
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let answer = serde_json::json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": summary}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })
    .to_string();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("a request");
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
            if line.trim().is_empty() {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        )
        .unwrap();
        String::from_utf8(body).unwrap()
    });
    (url, server)
}
