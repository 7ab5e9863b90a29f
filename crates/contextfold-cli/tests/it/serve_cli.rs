//! `contextfold serve` as a user runs it: the start-up lines, a log line per request, a
//! drain and exit 0 on SIGTERM or Ctrl-C, and the addresses it refuses.

use crate::common::{contextfold, scratch};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An upstream on 127.0.0.1 that answers every request with a small JSON message after
/// `delay`, recording each request line.
struct Upstream {
    addr: String,
    requests: Arc<Mutex<Vec<String>>>,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start(delay: Duration) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("an address").to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (seen, kept) = (requests.clone(), bodies.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (seen, kept) = (seen.clone(), kept.clone());
                std::thread::spawn(move || answer(stream, delay, &seen, &kept));
            }
        });
        Upstream { addr, requests, bodies }
    }
}

fn answer(mut stream: TcpStream, delay: Duration, seen: &Mutex<Vec<String>>, kept: &Mutex<Vec<String>>) {
    let Some((head, body)) = read_message(&mut stream) else { return };
    seen.lock().unwrap().push(head.lines().next().unwrap_or_default().to_string());
    kept.lock().unwrap().push(String::from_utf8_lossy(&body).into_owned());
    std::thread::sleep(delay);
    let body = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}"#;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Reads one HTTP/1.1 message with a Content-Length body: its head and body.
pub fn read_message(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).into_owned();
            let length = head
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase().strip_prefix("content-length:").map(|n| n.trim().to_string())
                })
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            while data.len() < end + 4 + length {
                let read = stream.read(&mut buffer).ok()?;
                if read == 0 {
                    return None;
                }
                data.extend_from_slice(&buffer[..read]);
            }
            return Some((head, data[end + 4..end + 4 + length].to_vec()));
        }
        let read = stream.read(&mut buffer).ok()?;
        if read == 0 {
            return None;
        }
        data.extend_from_slice(&buffer[..read]);
    }
}

/// A running `contextfold serve` and the lines it printed at start-up.
pub struct Served {
    child: Child,
    stdout: Vec<String>,
    stderr: mpsc::Receiver<String>,
    pub addr: String,
}

/// Starts `contextfold serve` in `dir` (where its default store goes) forwarding to
/// `upstream`, with `extra` flags.
pub fn serve(dir: &Path, upstream: &str, extra: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_contextfold"))
        .args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream, "--upstream-openai"])
        .arg(format!("{upstream}/v1"))
        .args(["--tokenizer", "estimate"])
        .args(extra)
        .current_dir(dir)
        .env_remove("CONTEXTFOLD_AUTH_TOKEN")
        .env_remove("CONTEXTFOLD_STORE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let (lines, stdout_lines) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let (errors, stderr) = mpsc::channel();
    let stderr_pipe = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
            let _ = errors.send(line);
        }
    });
    let stdout: Vec<String> =
        (0..3).map(|_| stdout_lines.recv_timeout(Duration::from_secs(30)).expect("a start-up line")).collect();
    let addr = stdout[1].strip_prefix("export ANTHROPIC_BASE_URL=http://").expect("the export line").to_string();
    Served { child, stdout, stderr, addr }
}

impl Served {
    /// Sends `signal` and waits (at most 10 s) for the exit code.
    pub fn stop(&mut self, signal: &str) -> i32 {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("kill runs");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("waits") {
                return status.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("contextfold serve did not stop on {signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything it wrote to standard error so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Posts a Messages request to the proxy at `addr`; returns the status line and body.
fn post(addr: &str) -> (String, String) {
    post_body(addr, r#"{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}"#)
}

/// Posts the Messages request `body` to the proxy at `addr`; returns the status line and body.
pub fn post_body(addr: &str, body: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connects");
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\nx-api-key: sk-ant-api03-cli-test\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let (head, body) = read_message(&mut stream).expect("an answer");
    (head.lines().next().unwrap_or_default().to_string(), String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn serve_prints_where_it_listens_logs_each_request_and_drains_on_sigterm() {
    let upstream = Upstream::start(Duration::from_millis(600));
    let upstream_url = format!("http://{}", upstream.addr);
    let dir = scratch("serve-cli", "drain");
    let mut served = serve(&dir, &upstream_url, &[]);
    assert_eq!(
        served.stdout[0],
        format!(
            "contextfold serve: listening on http://{}, forwarding to {upstream_url} (OpenAI clients: {upstream_url}/v1)",
            served.addr
        )
    );
    assert_eq!(served.stdout[2], format!("export OPENAI_BASE_URL=http://{}/v1", served.addr));
    let (status, body) = post(&served.addr);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("\"text\":\"hi\""), "{body}");

    // A request in flight when SIGTERM comes is answered before the proxy exits.
    let addr = served.addr.clone();
    let in_flight = std::thread::spawn(move || post(&addr));
    let deadline = Instant::now() + Duration::from_secs(10);
    while upstream.requests.lock().unwrap().len() < 2 {
        assert!(Instant::now() < deadline, "the second request reaches the upstream");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(served.stop("-TERM"), 0, "SIGTERM exits 0");
    let (status, _) = in_flight.join().unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK", "the request in flight was drained, not dropped");
    let stderr = served.stderr();
    let lines: Vec<&String> = stderr.iter().filter(|line| line.contains("POST /v1/messages")).collect();
    assert_eq!(lines.len(), 2, "one log line per request: {stderr:?}");
    assert!(lines.iter().all(|line| line.contains("status 200") && line.contains("unchanged")), "{lines:?}");
    assert!(stderr.iter().all(|line| !line.contains("sk-ant-api03-cli-test")), "no key is logged");
    assert!(
        stderr.last().is_some_and(|line| line.starts_with("contextfold serve: stopped; 2 calls, 0 compactions; ")),
        "the last line says what was saved: {stderr:?}"
    );
    assert!(stderr.iter().any(|line| line.contains("keeping conversations in the store .contextfold/store.db")));
    assert!(dir.join(".contextfold/store.db").is_file(), "the default store is in the working directory");
    assert!(TcpStream::connect(&served.addr).is_err(), "nothing listens after the exit");
}

#[test]
fn serve_exits_0_on_ctrl_c() {
    let upstream = Upstream::start(Duration::ZERO);
    let dir = scratch("serve-cli", "ctrl-c");
    let mut served = serve(&dir, &format!("http://{}", upstream.addr), &["--no-store"]);
    assert_eq!(post(&served.addr).0, "HTTP/1.1 200 OK");
    assert_eq!(served.stop("-INT"), 0);
    assert!(served.stderr().iter().any(|line| line.contains("in memory only")));
    assert!(!dir.join(".contextfold").exists(), "--no-store creates no store");
}

#[test]
fn serve_refuses_other_addresses_without_allow_remote_and_a_token() {
    let run = contextfold(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--allow-remote"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "nothing was bound: {}", run.stdout);
    let run = contextfold(&["serve", "--listen", "0.0.0.0:0", "--allow-remote"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--auth-token") && run.stderr.contains("CONTEXTFOLD_AUTH_TOKEN"), "{}", run.stderr);
    let run = contextfold(&["serve", "--upstream", "ftp://example.invalid"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("http:// or https://"), "{}", run.stderr);
}

#[test]
fn serve_refuses_a_store_it_cannot_open_naming_it() {
    let dir = scratch("serve-cli", "bad-store");
    std::fs::write(dir.join("notes.txt"), "not a database, just notes\n".repeat(200)).unwrap();
    let run =
        crate::common::contextfold_in(Some(&dir), &["serve", "--listen", "127.0.0.1:0", "--store", "notes.txt"], b"");
    assert_eq!(run.code, 2, "{}", run.stderr);
    let error: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(error.len(), 1, "one line: {}", run.stderr);
    assert!(error[0].contains("notes.txt") && error[0].contains("--no-store"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap(), "not a database, just notes\n".repeat(200));
    let url = crate::common::contextfold_in(
        Some(&dir),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "postgres://ada:pw-7Hq2Lx9Vw4@127.0.0.1:1/agents?connect_timeout=2",
        ],
        b"",
    );
    assert_eq!(url.code, 2, "{}", url.stderr);
    assert!(url.stderr.contains("127.0.0.1:1") && !url.stderr.contains("pw-7Hq2Lx9Vw4"), "{}", url.stderr);
}

/// A request whose history of `cycles` tool calls, each reading a long file, overflows a 24k
/// window; one file holds a key.
fn long_history(cycles: usize) -> String {
    let mut messages = vec![serde_json::json!({"role": "user", "content": "survey the zephyrine module"})];
    for cycle in 0..cycles {
        let id = format!("toolu_{cycle:03}");
        messages.push(serde_json::json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": format!("/src/zephyrine_{cycle}.rs")}}
        ]}));
        let mut output: String =
            (0..60).map(|line| format!("fn zephyrine_{cycle}_{line}() -> u32 {{ {line} }}\n")).collect();
        if cycle == 3 {
            output.push_str(&format!("ANTHROPIC_API_KEY={CLI_KEY}\n"));
        }
        messages.push(serde_json::json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output}
        ]}));
    }
    messages.push(serde_json::json!({"role": "assistant", "content": "Read them all."}));
    messages.push(serde_json::json!({"role": "user", "content": "now summarize what you found"}));
    serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages}).to_string()
}

const CLI_KEY: &str = "sk-ant-api03-Qw7Er4Ty1Ui8Op5As2Df9Gh6Jk3Lz0Xc7Vb4Nm1Qw8Er5Ty2Ui9Op6As3Df0Gh7Jk4-LzXcVbAA";

#[test]
fn what_the_proxy_compacts_is_in_its_store_for_sessions_recall_and_search() {
    let upstream = Upstream::start(Duration::ZERO);
    let dir = scratch("serve-cli", "store");
    let flags = ["--window", "24k", "--reserve", "2k", "--strategy", "evict", "--store", "proxy.db"];
    let mut served = serve(&dir, &format!("http://{}", upstream.addr), &flags);
    let (status, _) = post_body(&served.addr, &long_history(60));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(served.stop("-TERM"), 0);
    let stderr = served.stderr();
    assert!(stderr.iter().any(|line| line.contains("compacted")), "the request was compacted: {stderr:?}");
    let sent = upstream.bodies.lock().unwrap().join("\n");
    let refs: std::collections::BTreeSet<&str> =
        sent.match_indices("cf-").map(|(at, _)| &sent[at..at + 15]).filter(|r| r.len() == 15).collect();
    assert!(!refs.is_empty(), "the upstream received pointers: {sent:.400}");
    let in_dir = |args: &[&str]| crate::common::contextfold_in(Some(&dir), args, b"");
    let sessions = in_dir(&["sessions", "--json", "--store", "proxy.db"]);
    assert_eq!(sessions.code, 0, "{}", sessions.stderr);
    let listed: Vec<serde_json::Value> =
        sessions.stdout.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(listed.len(), 1, "one conversation, one session: {}", sessions.stdout);
    assert!(listed[0]["name"].as_str().unwrap().starts_with("serve "), "{}", sessions.stdout);
    assert!(listed[0]["messages"].as_u64().unwrap() >= 120, "the client's history is stored: {}", sessions.stdout);
    for reference in &refs {
        let recalled = in_dir(&["recall", reference, "--store", "proxy.db"]);
        assert_eq!(recalled.code, 0, "{reference} is recallable: {}", recalled.stderr);
        assert!(recalled.stdout.contains("zephyrine"), "{reference}: {}", recalled.stdout);
    }
    let search = in_dir(&["search", "zephyrine_7_12", "--store", "proxy.db"]);
    assert_eq!(search.code, 0, "{}", search.stderr);
    assert!(search.stdout.contains(listed[0]["id"].as_str().unwrap()), "{}", search.stdout);
    let stored = std::fs::read(dir.join("proxy.db")).unwrap();
    let wal = std::fs::read(dir.join("proxy.db-wal")).unwrap_or_default();
    for bytes in [&stored, &wal] {
        assert!(
            !String::from_utf8_lossy(bytes).contains(&CLI_KEY[..40]),
            "the key in the history is masked in the store"
        );
    }
    assert!(stderr.iter().all(|line| !line.contains(&CLI_KEY[..40])), "no key is logged");
}

/// `contextfold report` over the proxy's store says what the proxy said when it stopped: the
/// calls recorded there add up to its shutdown totals; `--since` leaves out older calls.
#[test]
fn report_over_the_proxys_store_says_what_the_proxy_said_at_shutdown() {
    let upstream = Upstream::start(Duration::ZERO);
    let dir = scratch("serve-cli", "report");
    let flags = ["--window", "24k", "--reserve", "2k", "--strategy", "evict", "--store", "proxy.db"];
    let mut served = serve(&dir, &format!("http://{}", upstream.addr), &flags);
    for cycles in [10, 40, 60] {
        let (status, _) = post_body(&served.addr, &long_history(cycles));
        assert_eq!(status, "HTTP/1.1 200 OK");
    }
    assert_eq!(served.stop("-TERM"), 0);
    let stderr = served.stderr();
    let stopped =
        stderr.iter().find_map(|line| line.strip_prefix("contextfold serve: stopped; ")).expect("a last line");
    assert!(stopped.starts_with("3 calls, ") && stopped.contains("estimated input cost $"), "{stopped}");
    let in_dir = |args: &[&str]| crate::common::contextfold_in(Some(&dir), args, b"");

    let report = in_dir(&["report", "--store", "proxy.db"]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert!(report.stdout.contains(&format!("sessions: {stopped}\n")), "{}\nvs {stopped}", report.stdout);

    // A call recorded a day ago counts without --since, not with --since 1h.
    let json = |args: &[&str]| -> serde_json::Value {
        let run = in_dir(args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str(&run.stdout).expect("one JSON object")
    };
    let before = json(&["report", "--json", "--store", "proxy.db"]);
    let sessions = before["sessions"].as_array().expect("sessions");
    let calls: u64 = sessions.iter().map(|session| session["calls"].as_u64().unwrap()).sum();
    assert_eq!((calls, before["total"]["calls"].as_u64()), (3, Some(3)), "{before}");
    let compactions = before["total"]["compactions"].as_u64().unwrap();
    assert!(compactions >= 1, "{before}");
    let store = contextfold::store::SqliteStore::open(dir.join("proxy.db")).expect("the store");
    let session = sessions[0]["id"].as_str().unwrap();
    let day_ago = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 86_400;
    let old = serde_json::json!({"at": day_ago, "model": "claude-sonnet-4-5", "action": "unchanged", "status": 200,
                                 "tokens_received": 1_000, "tokens_sent": 1_000,
                                 "cost_without": 0.003, "cost_with": 0.003});
    contextfold::store::SessionStore::put_call(&store, session, &old).expect("a call");
    drop(store);
    let all = json(&["report", "--json", "--store", "proxy.db"]);
    assert_eq!(all["total"]["calls"], 4);
    let recent = json(&["report", "--json", "--since", "1h", "--store", "proxy.db"]);
    assert_eq!(recent["total"]["calls"], 3);
    assert_eq!(recent["total"]["tokens_received"], before["total"]["tokens_received"]);
    assert!(recent["since"].as_u64().unwrap() > day_ago, "{recent}");

    let missing = in_dir(&["report", "--store", "nothing.db"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(missing.stderr.contains("nothing.db"), "{}", missing.stderr);
}

/// `serve --config FILE` takes every flag from a TOML file; a flag on the command line wins
/// over the file, and the environment too.
#[test]
fn serve_takes_its_flags_from_a_config_file_below_the_environment_and_the_command_line() {
    let upstream = Upstream::start(Duration::ZERO);
    let dir = scratch("serve-cli", "config");
    let file = "# the proxy for the team\nwindow = \"24k\"\nreserve = 2_000\nstrategy = \"evict\"\n\
                store = \"file.db\"\nlog-format = \"json\"\nmax_body = 100000000\nupstream = \"http://127.0.0.1:9\"\n";
    std::fs::write(dir.join("serve.toml"), file).unwrap();
    // `serve` gives --listen and --upstream on the command line: they win over the file's.
    let mut served = serve(&dir, &format!("http://{}", upstream.addr), &["--config", "serve.toml"]);
    let (status, _) = post_body(&served.addr, &long_history(60));
    assert_eq!(status, "HTTP/1.1 200 OK", "the command line's upstream was used");
    assert_eq!(served.stop("-TERM"), 0);
    let stderr = served.stderr().join("\n");
    assert!(stderr.contains("keeping conversations in the store file.db"), "{stderr}");
    let line = stderr.lines().find(|line| line.contains("\"action\"")).expect("a JSON log line");
    let line: serde_json::Value = serde_json::from_str(line).expect("JSON, as the file says");
    assert_eq!(line["action"], "compacted", "the file's 24k window: {line}");

    let mut served =
        serve(&dir, &format!("http://{}", upstream.addr), &["--config", "serve.toml", "--store", "flag.db"]);
    assert_eq!(served.stop("-TERM"), 0);
    assert!(served.stderr().join("\n").contains("in the store flag.db"), "the flag wins");

    // The environment's token wins over the file's: a weak one is refused, naming its length.
    let remote = "listen = \"0.0.0.0:0\"\nallow-remote = true\nauth-token = \"a-file-token-long-enough-0123\"\nno-store = true\n";
    std::fs::write(dir.join("remote.toml"), remote).unwrap();
    let in_dir = |env: &[(&str, &str)]| {
        crate::common::contextfold_env(Some(&dir), &["serve", "--config", "remote.toml"], b"", env)
    };
    let refused = in_dir(&[("CONTEXTFOLD_AUTH_TOKEN", "tiny")]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains('4') && refused.stderr.contains("16"), "the 4-character token: {}", refused.stderr);
}

/// A config file's mistakes are refused before anything starts, each naming the file, the
/// line and column, and what was expected.
#[test]
fn a_bad_config_file_is_refused_naming_where() {
    let dir = scratch("serve-cli", "config-errors");
    let cases: [(&str, &[&str]); 7] = [
        ("listen = \"127.0.0.1:0\"\nwindw = \"24k\"\n", &["bad.toml:2:1", "unknown key `windw`", "window"]),
        ("target = 7\n", &["bad.toml:1:10", "`target`", "between 0 and 1"]),
        ("window = \"lots\"\n", &["bad.toml:1:10", "`window`"]),
        ("allow-remote = \"yes\"\n", &["bad.toml:1:16", "switch", "true"]),
        ("listen = [1, 2]\n", &["bad.toml:1:10", "one value", "array"]),
        ("listen = \n", &["bad.toml:1:10", "not TOML"]),
        ("[server]\nlisten = \"127.0.0.1:0\"\n", &["bad.toml:1:", "`server`"]),
    ];
    for (text, needles) in cases {
        std::fs::write(dir.join("bad.toml"), text).unwrap();
        let run = crate::common::contextfold_in(Some(&dir), &["serve", "--config", "bad.toml"], b"");
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "nothing started: {}", run.stdout);
        assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
        for needle in needles {
            assert!(run.stderr.contains(needle), "{text}: {needle:?} not in {}", run.stderr);
        }
    }
    let missing = crate::common::contextfold_in(Some(&dir), &["serve", "--config", "nowhere.toml"], b"");
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("nowhere.toml"), "{}", missing.stderr);
}

/// Another program truncating the store's shared-memory file mid-run, again and again, does
/// not kill the proxy (SQLite's mapping of it would have died of SIGBUS): it answers every
/// request, logs what happened, stops cleanly, and leaves a store that reads.
#[test]
fn a_store_whose_shared_memory_file_is_truncated_does_not_stop_the_proxy() {
    let upstream = Upstream::start(Duration::ZERO);
    let dir = scratch("serve-cli", "shm");
    let flags = ["--window", "24k", "--reserve", "2k", "--store", "proxy.db"];
    let mut served = serve(&dir, &format!("http://{}", upstream.addr), &flags);
    let (status, _) = post_body(&served.addr, &long_history(5));
    assert_eq!(status, "HTTP/1.1 200 OK");
    // Truncated every millisecond while the proxy writes, so that some truncations land
    // inside SQLite's use of the file.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let truncating = {
        let (stop, shm) = (stop.clone(), dir.join("proxy.db-shm"));
        std::thread::spawn(move || {
            let mut times = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(file) = std::fs::OpenOptions::new().write(true).open(&shm) {
                    times += usize::from(file.set_len(0).is_ok());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            times
        })
    };
    for cycles in (6..60).step_by(3) {
        let (status, _) = post_body(&served.addr, &long_history(cycles));
        assert_eq!(status, "HTTP/1.1 200 OK");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(truncating.join().unwrap() > 10, "the file was truncated again and again");
    assert_eq!(served.stop("-TERM"), 0, "the proxy stops on its signal, not on SIGBUS");
    let stderr = served.stderr().join("\n");
    assert!(stderr.contains("shared-memory file was truncated"), "{stderr}");
    let sessions = crate::common::contextfold_in(Some(&dir), &["sessions", "--json", "--store", "proxy.db"], b"");
    assert_eq!(sessions.code, 0, "{}", sessions.stderr);
    // Each request is a new branch with a session of its own; a write that met a truncated
    // index may have failed (the proxy went on from memory, and said so), but the store reads.
    let stored = sessions.stdout.lines().count();
    assert!((1..=19).contains(&stored), "{}\nthe proxy's log:\n{stderr}", sessions.stdout);
}
