//! `contextfold ui`: the dashboard served for a store with no proxy running, read-only, on
//! loopback only.

use crate::common::{contextfold_in, fixture, scratch};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `contextfold ui`, killed when dropped.
struct Ui {
    child: Child,
    addr: String,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `contextfold ui --store STORE` in `dir` on a free port; waits for its line.
fn ui(dir: &std::path::Path, store: &str) -> Ui {
    let mut child = Command::new(env!("CARGO_BIN_EXE_contextfold"))
        .args(["ui", "--listen", "127.0.0.1:0", "--store", store])
        .current_dir(dir)
        .env_remove("CONTEXTFOLD_STORE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("a start-up line");
    let addr = line
        .trim()
        .rsplit_once("http://")
        .and_then(|(_, rest)| rest.strip_suffix("/ui"))
        .unwrap_or_else(|| panic!("the line says where: {line}"))
        .to_string();
    Ui { child, addr }
}

/// GETs `path`; returns the status code, the head and the body.
fn get(addr: &str, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("an answer");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok()).expect("a status");
    (status, head.to_ascii_lowercase(), body.to_string())
}

#[test]
fn ui_serves_the_dashboard_of_a_store_with_no_proxy() {
    let dir = scratch("ui-cli", "serves");
    std::fs::copy(fixture("tests/fixtures/swe-style.json"), dir.join("session.json")).expect("the fixture");
    let evicted = contextfold_in(Some(&dir), &["evict", "--json", "--store", "store.db", "session.json"], b"");
    assert_eq!(evicted.code, 0, "{}", evicted.stderr);
    let report: Value = serde_json::from_str(&evicted.stdout).expect("the report");
    let reference = report["items"][0]["ref"].as_str().expect("an evicted payload").to_string();
    let listed = contextfold_in(Some(&dir), &["sessions", "--json", "--store", "store.db"], b"");
    let session: Value = serde_json::from_str(listed.stdout.trim()).expect("one session");
    let recalled = contextfold_in(Some(&dir), &["recall", "--store", "store.db", &reference], b"");

    let served = ui(&dir, "store.db");
    let (status, head, page) = get(&served.addr, "/ui");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html") && page.contains("/ui/app.js"), "{head}");
    assert_eq!(get(&served.addr, "/").0, 303, "/ leads to /ui");
    let (status, _, body) = get(&served.addr, "/ui/api/sessions");
    assert_eq!(status, 200, "{body}");
    let sessions: Value = serde_json::from_str(&body).expect("JSON");
    let shown = &sessions["sessions"][0];
    assert_eq!((&shown["id"], &shown["name"]), (&session["id"], &session["name"]));
    assert_eq!((&shown["messages"], &shown["payloads"]), (&session["messages"], &session["payloads"]));
    assert_eq!(shown["compactions"], 1, "the eviction's report");
    let (status, _, body) = get(&served.addr, &format!("/ui/api/payload?ref={reference}"));
    assert_eq!(status, 200, "{body}");
    let payload: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(payload["text"].as_str(), Some(recalled.stdout.as_str()), "the payload as recall prints it");
    let (status, _, body) = get(&served.addr, "/ui/api/session?id=nope");
    assert_eq!(status, 404);
    assert!(body.contains("no session `nope`"), "{body}");
    assert!(std::fs::read_dir(&dir).unwrap().count() <= 4, "read-only: nothing but the store's own files");
}

#[test]
fn ui_stops_on_sigterm_and_refuses_what_it_cannot_serve() {
    let dir = scratch("ui-cli", "refuses");
    std::fs::copy(fixture("tests/fixtures/swe-style.json"), dir.join("session.json")).expect("the fixture");
    assert_eq!(contextfold_in(Some(&dir), &["evict", "--store", "store.db", "session.json"], b"").code, 0);
    let mut served = ui(&dir, "store.db");
    let pid = served.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(status) = served.child.try_wait().expect("waits") {
            break status.code();
        }
        assert!(Instant::now() < deadline, "contextfold ui stops on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));

    let remote = contextfold_in(Some(&dir), &["ui", "--listen", "0.0.0.0:0", "--store", "store.db"], b"");
    assert_eq!(remote.code, 2);
    assert!(remote.stderr.contains("loopback"), "{}", remote.stderr);
    let missing = contextfold_in(Some(&dir), &["ui", "--listen", "127.0.0.1:0", "--store", "nothing.db"], b"");
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("nothing.db"), "{}", missing.stderr);
    assert!(!dir.join("nothing.db").exists(), "no store is created");
    let help = contextfold_in(Some(&dir), &["ui", "--help"], b"");
    for flag in ["--store <PATH|URL>", "--listen <ADDR>", "127.0.0.1:8788", "loopback"] {
        assert!(help.stdout.contains(flag), "ui --help lacks {flag}:\n{}", help.stdout);
    }
}
