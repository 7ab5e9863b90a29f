//! Conversation state in the store, as users run `contextfold serve`: a proxy stopped
//! mid-conversation and started again on the same store sends the same requests an
//! uninterrupted one sends, and two replicas sharing one PostgreSQL database, taking a
//! conversation's calls in turns at random, send what a single replica sends: the same
//! pointers and summaries, each conversation's its own, and the secrets of the client's
//! history, which the store never holds.
//!
//! A scripted upstream on 127.0.0.1 answers each agent with a tool call per turn (picked by
//! the number of assistant messages in the request) and records every body it receives.
//! It reports no usage, so no estimate is calibrated: a calibration is written back after
//! its answer and may reach another replica only after that replica's next request, which
//! would make the comparison depend on timing.

use crate::serve_cli::{post_body, read_message, serve, Served};
use crate::store_postgres_cli::Database;
use contextfold::core::summary::SUMMARY_PREFIX;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the upstream received: each body by agent and turn.
type Received = Arc<Mutex<BTreeMap<(String, usize), String>>>;

/// The scripted upstream.
pub(crate) struct Scripted {
    pub(crate) url: String,
    received: Received,
}

impl Scripted {
    pub(crate) fn start() -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let received: Received = Arc::default();
        let kept = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || answer(stream, &kept));
            }
        });
        Scripted { url, received }
    }

    pub(crate) fn take(&self) -> BTreeMap<(String, usize), String> {
        std::mem::take(&mut *self.received.lock().unwrap())
    }
}

/// The agent's name in a request: its session, in `metadata.user_id`.
fn agent(body: &Value) -> String {
    let user = body["metadata"]["user_id"].as_str().unwrap_or("");
    user.rsplit("_session_").next().unwrap_or("").to_string()
}

fn answer(mut stream: TcpStream, kept: &Mutex<BTreeMap<(String, usize), String>>) {
    let Some((_, body)) = read_message(&mut stream) else { return };
    let text = String::from_utf8_lossy(&body).into_owned();
    let request: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let name = agent(&request);
    let turn = request["messages"].as_array().map_or(0, |messages| {
        // Turns the client took: its own assistant messages (a summary is in a user one).
        messages.iter().filter(|message| message["role"] == "assistant").count()
    });
    kept.lock().unwrap().insert((name.clone(), request["x_turn"].as_u64().unwrap_or(turn as u64) as usize), text);
    let reply = json!({"id": format!("msg_{name}_{turn}"), "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "stop_reason": "tool_use", "usage": {"input_tokens": 0, "output_tokens": 9},
        "content": [{"type": "text", "text": format!("[{name}] reading")},
                    {"type": "tool_use", "id": format!("toolu_{name}_{turn:03}"), "name": "Read",
                     "input": {"file_path": format!("/src/{name}/f{}.rs", turn % 4)}}]})
    .to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    );
}

/// One agent's side of a conversation.
pub(crate) struct Client {
    name: String,
    messages: Vec<Value>,
    pub(crate) turn: usize,
}

impl Client {
    pub(crate) fn new(name: &str) -> Client {
        let task = json!({"role": "user", "content": format!("[{name}] map the module {name} and fix its bug")});
        Client { name: name.to_string(), messages: vec![task], turn: 0 }
    }

    /// The next request's body; `x_turn` tells the upstream which call it is.
    pub(crate) fn body(&self) -> String {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 512, "x_turn": self.turn,
            "system": [{"type": "text", "text": "You are a careful coding agent."}],
            "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}],
            "metadata": {"user_id": format!("user_1_account_2_session_{}", self.name)},
            "messages": self.messages})
        .to_string()
    }

    /// Sends the next request to the proxy at `addr` and takes its answer into the history.
    pub(crate) fn step(&mut self, addr: &str) {
        let (status, answer) = post_body(addr, &self.body());
        assert_eq!(status, "HTTP/1.1 200 OK", "{}: {answer}", self.name);
        self.take(&answer);
    }

    /// [`Client::step`], or why the proxy gave no answer (the history unchanged then).
    pub(crate) fn try_step(&mut self, addr: &str) -> Result<(), String> {
        let (status, answer) = try_post(addr, &self.body())?;
        if status != "HTTP/1.1 200 OK" {
            return Err(format!("{}: {status}: {answer}", self.name));
        }
        self.take(&answer);
        Ok(())
    }

    /// Takes the proxy's `answer` into the history, with the tool's output.
    fn take(&mut self, answer: &str) {
        let answer: Value = serde_json::from_str(answer).expect("a JSON answer");
        let id = answer["content"][1]["id"].as_str().expect("a tool call").to_string();
        let mut output: String = (0..40)
            .map(|line| format!("{} {id} {line}: let value_{line} = compute({line}); // {}\n", self.name, self.turn))
            .collect();
        if self.turn % 5 == 2 {
            // The tool printed the environment.
            output += &secrets(&self.name).join("\n");
        }
        self.messages.push(json!({"role": "assistant", "content": answer["content"]}));
        self.messages
            .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}));
        self.turn += 1;
    }
}

/// Posts the Messages request `body` to the proxy at `addr`: the status line and body, or why
/// there is none (the connection refused, or closed without an answer).
pub(crate) fn try_post(addr: &str, body: &str) -> Result<(String, String), String> {
    let mut stream = TcpStream::connect(addr).map_err(|err| format!("connecting to {addr}: {err}"))?;
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(120)));
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\nx-api-key: sk-ant-api03-cli-test\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|err| format!("sending to {addr}: {err}"))?;
    let (head, body) = read_message(&mut stream).ok_or_else(|| format!("{addr} closed without an answer"))?;
    Ok((head.lines().next().unwrap_or_default().to_string(), String::from_utf8_lossy(&body).into_owned()))
}

/// Fake credentials as conversation `name`'s tool output shows them.
fn secrets(name: &str) -> [String; 3] {
    [
        format!("GITHUB_TOKEN=ghp_{name}Zq8vN2xK7pL4mR9tW1yB6cF3hJ5dG0sA8eU2"),
        format!("export AWS_SECRET_ACCESS_KEY=\"{name}wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKE\""),
        format!("curl -H 'Authorization: Bearer sk-ant-oat01-{name}Hk3Lm9Np2Qr5St8Uv1Wx4Yz7Ab0Cd3Ef6'"),
    ]
}

/// The secret value of each of [`secrets`].
fn secret_values(name: &str) -> Vec<String> {
    secrets(name)
        .iter()
        .map(|line| line.rsplit(['=', ' ']).next().unwrap().trim_matches(['"', '\'']).to_string())
        .collect()
}

/// Every text the store's tables hold in the database at `url` (the state records decoded).
pub(crate) fn table_texts(url: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connects");
        let connection = tokio::spawn(connection);
        let tables = client
            .query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'contextfold'", &[])
            .await
            .expect("the tables");
        let mut text = String::new();
        for table in tables {
            let table: String = table.get(0);
            let rows =
                client.query(&format!("SELECT t::text FROM contextfold.{table} AS t"), &[]).await.expect("the rows");
            text.extend(rows.iter().map(|row| row.get::<_, String>(0)));
        }
        let states =
            client.query("SELECT convert_from(state, 'UTF8') FROM contextfold.states", &[]).await.expect("the states");
        text.extend(states.iter().map(|row| row.get::<_, String>(0)));
        drop(client);
        let _ = connection.await;
        text
    })
}

/// The texts of the summary blocks in a request body.
fn summaries(body: &str) -> Vec<String> {
    let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let mut found = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if let Some(text) = block["text"].as_str().filter(|text| text.starts_with(SUMMARY_PREFIX)) {
                found.push(text.to_string());
            }
        }
    }
    found
}

/// A deterministic choice of replica per call (xorshift).
pub(crate) fn choices(seed: u64, count: usize, replicas: usize) -> Vec<usize> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % replicas as u64) as usize
        })
        .collect()
}

/// Runs `clients` for `turns` more calls each, all at once, call `i` of client `c` going to
/// `pick(c, i)`'s address.
pub(crate) fn run(clients: &mut [Client], turns: usize, addrs: &[String], pick: impl Fn(usize, usize) -> usize + Sync) {
    std::thread::scope(|scope| {
        for (index, client) in clients.iter_mut().enumerate() {
            let pick = &pick;
            scope.spawn(move || {
                for _ in 0..turns {
                    let addr = &addrs[pick(index, client.turn)];
                    client.step(addr);
                }
            });
        }
    });
}

pub(crate) const FLAGS: &[&str] = &["--window", "12k", "--reserve", "1k", "--log-format", "json"];

pub(crate) fn start(dir: &Path, upstream: &str, store: &str, extra: &[&str]) -> Served {
    let mut flags = FLAGS.to_vec();
    flags.extend(["--store", store]);
    flags.extend(extra);
    serve(dir, upstream, &flags)
}

/// Log lines of `served` that say a request was compacted.
pub(crate) fn compactions(lines: &[String]) -> usize {
    lines.iter().filter(|line| line.contains("\"action\":\"compacted\"")).count()
}

/// Checks that `got` is `expected`, body for body.
pub(crate) fn same_requests(
    expected: &BTreeMap<(String, usize), String>,
    got: &BTreeMap<(String, usize), String>,
    what: &str,
) {
    assert_eq!(expected.len(), got.len(), "{what}: as many requests");
    let differing: Vec<&(String, usize)> = expected.keys().filter(|key| expected.get(*key) != got.get(*key)).collect();
    assert!(
        differing.is_empty(),
        "{what}: {} of {} requests differ, first {:?}",
        differing.len(),
        expected.len(),
        differing.first()
    );
}

#[test]
fn a_restarted_proxy_sends_what_an_uninterrupted_one_sends() {
    const TURNS: usize = 36;
    let upstream = Scripted::start();
    let dir = crate::common::scratch("serve-state", "restart");
    let names = ["ada", "brian"];
    let mut straight: Vec<Client> = names.iter().map(|name| Client::new(name)).collect();
    let mut once = start(&dir, &upstream.url, "straight.db", &[]);
    run(&mut straight, TURNS, std::slice::from_ref(&once.addr), |_, _| 0);
    assert_eq!(once.stop("-TERM"), 0);
    let uninterrupted = upstream.take();
    let compacted = compactions(&once.stderr());
    assert!(compacted >= 2 * names.len(), "each conversation compacts twice (got {compacted})");

    let mut resumed: Vec<Client> = names.iter().map(|name| Client::new(name)).collect();
    let mut first = start(&dir, &upstream.url, "restarted.db", &[]);
    run(&mut resumed, TURNS / 2, std::slice::from_ref(&first.addr), |_, _| 0);
    assert_eq!(first.stop("-TERM"), 0);
    let before = compactions(&first.stderr());
    let mut second = start(&dir, &upstream.url, "restarted.db", &[]);
    run(&mut resumed, TURNS - TURNS / 2, std::slice::from_ref(&second.addr), |_, _| 0);
    assert_eq!(second.stop("-TERM"), 0);
    let after = compactions(&second.stderr());
    assert!(before >= 1 && after >= 1, "compactions before ({before}) and after ({after}) the restart");
    let got = upstream.take();
    same_requests(&uninterrupted, &got, "after a restart");
    let sent: String = got.values().cloned().collect();
    let store = contextfold::store::SqliteStore::open_existing(dir.join("restarted.db")).expect("the store");
    use contextfold::store::SessionStore;
    let refs: std::collections::BTreeSet<&str> =
        sent.match_indices("ref cf-").map(|(at, _)| &sent[at + 4..at + 19]).collect();
    for reference in refs {
        assert!(store.recall(reference).expect("recall").is_some(), "{reference} is recallable after the restart");
    }
    assert_eq!(
        store.sessions().expect("sessions").len(),
        names.len(),
        "the restarted proxy went on in the same sessions"
    );
}

#[test]
fn replicas_on_one_postgres_send_what_one_replica_sends() {
    const CONVERSATIONS: usize = 50;
    const TURNS: usize = 24;
    let (Some(single), Some(shared)) = (Database::create("replica_one"), Database::create("replica_two")) else {
        return;
    };
    let upstream = Scripted::start();
    let dir = crate::common::scratch("serve-state", "replicas");
    let names: Vec<String> = (0..CONVERSATIONS).map(|index| format!("c{index:02}")).collect();

    let mut alone: Vec<Client> = names.iter().map(|name| Client::new(name)).collect();
    let mut one = start(&dir, &upstream.url, &single.url, &[]);
    run(&mut alone, TURNS, std::slice::from_ref(&one.addr), |_, _| 0);
    assert_eq!(one.stop("-TERM"), 0);
    let expected = upstream.take();
    let compacted = compactions(&one.stderr());
    assert!(compacted >= CONVERSATIONS, "every conversation compacts (got {compacted})");

    let mut together: Vec<Client> = names.iter().map(|name| Client::new(name)).collect();
    let mut replicas = [start(&dir, &upstream.url, &shared.url, &[]), start(&dir, &upstream.url, &shared.url, &[])];
    let addrs = [replicas[0].addr.clone(), replicas[1].addr.clone()];
    let plan: Vec<Vec<usize>> = (0..CONVERSATIONS).map(|index| choices(index as u64 + 7, TURNS, 2)).collect();
    run(&mut together, TURNS, &addrs, |client, turn| plan[client][turn]);
    let logs: Vec<Vec<String>> = replicas
        .iter_mut()
        .map(|replica| {
            assert_eq!(replica.stop("-TERM"), 0);
            replica.stderr()
        })
        .collect();
    let got = upstream.take();
    assert!(logs.iter().all(|lines| compactions(lines) > 0), "both replicas compacted");
    assert_eq!(compactions(&logs[0]) + compactions(&logs[1]), compacted, "no compaction twice, none missed");
    same_requests(&expected, &got, "two replicas");

    // No conversation's words in another's request, and no summary in two conversations.
    let mut owners: BTreeMap<String, &str> = BTreeMap::new();
    for ((name, turn), body) in &got {
        for other in names.iter().filter(|other| *other != name) {
            assert!(!body.contains(&format!("[{other}]")), "{name}'s call {turn} holds {other}'s words");
        }
        for summary in summaries(body) {
            let owner = *owners.entry(summary).or_insert(name);
            assert_eq!(owner, name, "{name}'s call {turn} holds a summary {owner}'s requests hold");
        }
    }
    let summarized: std::collections::BTreeSet<&str> = owners.values().copied().collect();
    assert!(summarized.len() == CONVERSATIONS, "every conversation was summarized ({} were)", summarized.len());
    // The secrets went upstream as the client sent them, and never into the store.
    let tables = table_texts(&shared.url);
    assert!(tables.contains("[REDACTED:"), "the masks are stored");
    for name in &names {
        for secret in secret_values(name) {
            assert!(got.values().any(|body| body.contains(&secret)), "{name}'s secret {secret} went upstream");
            assert!(!tables.contains(&secret), "{name}'s secret {secret} is in the store");
        }
    }
    // Every ref sent or reported is in the shared store, whichever replica compacted.
    let store = contextfold::store::PostgresStore::open(&shared.url).expect("the shared store");
    use contextfold::store::SessionStore;
    let sessions = store.sessions().expect("sessions");
    assert_eq!(sessions.len(), CONVERSATIONS, "one session per conversation, from either replica");
    let mut reported = String::new();
    let mut reports = 0;
    for session in &sessions {
        let stored = store.reports(&session.id).expect("reports");
        reports += stored.len();
        reported.extend(stored.iter().map(Value::to_string));
    }
    assert_eq!(reports, compacted, "a report per compaction, whichever replica made it");
    let sent: String = got.values().cloned().collect();
    let refs: std::collections::BTreeSet<&str> = [sent.as_str(), reported.as_str()]
        .into_iter()
        .flat_map(|text| text.match_indices("cf-").filter_map(move |(at, _)| text.get(at..at + 15)))
        .filter(|found| found[3..].bytes().all(|byte| byte.is_ascii_hexdigit()))
        .collect();
    assert!(!refs.is_empty(), "outputs were evicted behind refs");
    for reference in &refs {
        assert!(store.recall(reference).expect("recall").is_some(), "{reference} is recallable");
    }
    crate::common::notice(&format!(
        "replicas: {CONVERSATIONS} conversations × {TURNS} calls, {compacted} compactions, {} summaries, {} refs recallable, every request as one replica sent it",
        owners.len(),
        refs.len()
    ));
}
