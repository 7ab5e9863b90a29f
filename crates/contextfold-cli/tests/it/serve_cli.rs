//! `contextfold serve` as a user runs it: the start-up lines, a log line per request, a
//! drain and exit 0 on SIGTERM or Ctrl-C, and the addresses it refuses.

use crate::common::contextfold;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An upstream on 127.0.0.1 that answers every request with a small JSON message after
/// `delay`, recording each request line.
struct Upstream {
    addr: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start(delay: Duration) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("an address").to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || answer(stream, delay, &seen));
            }
        });
        Upstream { addr, requests }
    }
}

fn answer(mut stream: TcpStream, delay: Duration, seen: &Mutex<Vec<String>>) {
    let Some((head, _body)) = read_message(&mut stream) else { return };
    seen.lock().unwrap().push(head.lines().next().unwrap_or_default().to_string());
    std::thread::sleep(delay);
    let body = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}"#;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Reads one HTTP/1.1 message with a Content-Length body: its head and body.
fn read_message(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
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
struct Served {
    child: Child,
    stdout: Vec<String>,
    stderr: mpsc::Receiver<String>,
    addr: String,
}

fn serve(upstream: &str) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_contextfold"))
        .args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream, "--upstream-openai"])
        .arg(format!("{upstream}/v1"))
        .args(["--tokenizer", "estimate"])
        .env_remove("CONTEXTFOLD_AUTH_TOKEN")
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
    fn stop(&mut self, signal: &str) -> i32 {
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
    fn stderr(&self) -> Vec<String> {
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
    let body = r#"{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}"#;
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
    let mut served = serve(&upstream_url);
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
    assert!(stderr.last().is_some_and(|line| line.contains("stopped")), "{stderr:?}");
    assert!(TcpStream::connect(&served.addr).is_err(), "nothing listens after the exit");
}

#[test]
fn serve_exits_0_on_ctrl_c() {
    let upstream = Upstream::start(Duration::ZERO);
    let mut served = serve(&format!("http://{}", upstream.addr));
    assert_eq!(post(&served.addr).0, "HTTP/1.1 200 OK");
    assert_eq!(served.stop("-INT"), 0);
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
