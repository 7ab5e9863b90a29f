//! The proxy's own endpoints: `/metrics` agrees with the log lines and with the savings
//! totals after a conversation that compacts, `/health` and `/ready` never reach the
//! upstream, `/ready` says 503 once the store stops answering, and only `/metrics` needs the
//! proxy token.

use crate::common::{agent_script, client, config, logs, notice, proxy, Agent};
use crate::mock::{Mock, Recorded, Reply};
use crate::stored::scratch;
use contextfold::replay::Price;
use contextfold::store::StoreLocation;
use contextfold_serve::ServeConfig;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROXY_TOKEN: &str = "cf-metrics-token-4Rt8Kp3Ns6Yb1Zm5Cd0FgHq2Lx9Vw";

/// Each sample of a Prometheus text answer, by its name and labels as written.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample is `series value`");
            (series.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// `/metrics` of the proxy at `url`, read with the token when one is given.
async fn scrape(url: &str, token: Option<&str>) -> BTreeMap<String, f64> {
    let mut request = client().get(format!("{url}/metrics"));
    if let Some(token) = token {
        request = request.header("x-contextfold-token", token);
    }
    let response = request.send().await.expect("the proxy answers");
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    samples(&response.text().await.unwrap())
}

/// The sum of the samples whose series starts with `prefix`.
fn total(samples: &BTreeMap<String, f64>, prefix: &str) -> f64 {
    samples.iter().filter(|(series, _)| series.starts_with(prefix)).map(|(_, value)| value).sum()
}

/// One request's log line, as the test reads it back.
#[derive(Debug)]
struct Logged {
    action: String,
    preamble: u64,
    tokens: Option<(u64, u64)>,
    status: u16,
    model: Option<String>,
}

/// The text log lines of session `session`, read word by word: `METHOD PATH key=value…
/// [preamble=N] [stream] [tokens A → B] ACTION [(note)] status N in …`.
fn logged(session: &str) -> Vec<Logged> {
    let marker = format!(" session={session} ");
    let mut lines = Vec::new();
    for line in logs().lines().filter(|line| line.contains(&marker)) {
        let text = &line[line.find("contextfold_serve: ").expect("a proxy line") + "contextfold_serve: ".len()..];
        let mut words = text.split(' ').skip(2);
        let (mut model, mut tokens, mut preamble) = (None, None, 0);
        let action = loop {
            let word = words.next().expect("an action");
            if let Some(name) = word.strip_prefix("model=") {
                model = Some(name.to_string());
            } else if let Some(tokens) = word.strip_prefix("preamble=") {
                preamble = tokens.parse().expect("a count");
            } else if word == "tokens" {
                let before: u64 = words.next().unwrap().parse().unwrap();
                assert_eq!(words.next(), Some("→"), "{line}");
                tokens = Some((before, words.next().unwrap().parse().unwrap()));
            } else if !word.contains('=') && word != "stream" {
                break word.to_string();
            }
        };
        let status = text.rsplit_once(" status ").expect("a status").1.split(' ').next().unwrap().parse().unwrap();
        lines.push(Logged { action, preamble, tokens, status, model });
    }
    lines
}

/// Answers Messages requests as an agent's model, and anything else with an empty list.
fn upstream(request: &Recorded) -> Reply {
    if request.uri.starts_with("/v1/messages") {
        agent_script(10_000)(request)
    } else {
        Reply::json(json!({"data": []}))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_say_what_the_log_lines_and_the_totals_say() {
    let mock = Mock::start(upstream).await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let session = "metrics-agent-7f3a";
    let mut agent = Agent::new("metered", "refactor the parser");
    agent.session = Some(session.into());
    for step in 0..28 {
        // One call with compaction turned off: forwarded untouched.
        if step == 3 {
            agent.headers.push(("x-contextfold".into(), "off".into()));
        }
        agent.step(&client, &proxy.url).await;
        agent.headers.clear();
    }
    let models = client.get(format!("{}/v1/models", proxy.url)).header("x-api-key", "k").send().await.unwrap();
    assert_eq!(models.status(), 200);
    models.bytes().await.unwrap();
    let refused = client.post(format!("{}/v1/chat/completions", proxy.url)).body("{not json").send().await.unwrap();
    let refused_status = refused.status().as_u16();
    assert!(refused.status().is_client_error(), "{refused_status}");
    refused.bytes().await.unwrap();
    let requests = 28 + 2;

    // A line (and its metrics) is written as its answer ends, just after the client has it.
    // The call sent with compaction off is forwarded before its session is read: its line
    // names none, and it is counted from the script, as are the two others.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (metrics, lines) = loop {
        let metrics = scrape(&proxy.url, None).await;
        let lines = logged(session);
        let counted = total(&metrics, "contextfold_requests_total") as usize;
        if (counted == requests && lines.len() == 27) || Instant::now() > deadline {
            break (metrics, lines);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(lines.len(), 27, "{}", logs());
    let mut by_action = BTreeMap::<String, usize>::new();
    for line in &lines {
        assert_eq!(line.status, 200, "{line:?}");
        *by_action.entry(line.action.clone()).or_default() += 1;
    }
    assert!(by_action.get("compacted").is_some_and(|&n| n >= 1), "the conversation compacts: {by_action:?}");
    let mut expected = by_action.clone();
    for action in ["untouched", "forwarded"] {
        assert!(!by_action.contains_key(action), "{by_action:?}");
        expected.insert(action.to_string(), 1);
    }
    for (action, count) in &expected {
        let series = format!("contextfold_requests_total{{api=\"anthropic\",action=\"{action}\",status=\"200\"}}");
        assert_eq!(metrics.get(&series).copied(), Some(*count as f64), "{series}: {metrics:?}");
    }
    let refused =
        format!("contextfold_requests_total{{api=\"openai\",action=\"refused\",status=\"{refused_status}\"}}");
    assert_eq!(metrics.get(&refused).copied(), Some(1.0), "{metrics:?}");
    assert_eq!(total(&metrics, "contextfold_requests_total") as usize, requests, "{metrics:?}");
    let compactions = by_action["compacted"] as f64;
    assert_eq!(total(&metrics, "contextfold_compactions_total"), compactions);
    assert!(metrics.keys().any(|key| key.starts_with("contextfold_compactions_total{steps=\"")), "{metrics:?}");
    assert_eq!(proxy.stats.compactions() as f64, compactions);

    // Tokens and costs, from the log lines by the documented cache model.
    let (family, price) = Price::of_model("claude-sonnet-4-5").expect("a priced model");
    let (mut received, mut sent, mut without, mut with) = (0, 0, 0.0, 0.0);
    let mut previous: Option<(u64, u64)> = None;
    for line in &lines {
        assert_eq!(line.model.as_deref(), Some("claude-sonnet-4-5"));
        let (tokens_in, tokens_out) = line.tokens.expect("a call's line has its tokens");
        let read_in = previous.map_or(0, |(before, _)| before.min(tokens_in));
        let read_out = match previous {
            Some((_, before)) if line.action != "compacted" => before.min(tokens_out),
            // The system prompt and tools in front of the compacted messages stay cached.
            Some((_, before)) => line.preamble.min(before).min(tokens_out),
            None => 0,
        };
        let cost = |read: u64, write: u64| (read as f64 * 0.1 + write as f64 * 1.25) * price.input / 1e6;
        without += cost(read_in, tokens_in - read_in);
        with += cost(read_out, tokens_out - read_out);
        (received, sent) = (received + tokens_in, sent + tokens_out);
        previous = Some((tokens_in, tokens_out));
    }
    assert_eq!(metrics["contextfold_tokens_received_total"], received as f64);
    assert_eq!(metrics["contextfold_tokens_sent_total"], sent as f64);
    assert!(sent < received, "the compaction saved tokens: {sent} of {received}");
    let cost_without = metrics["contextfold_estimated_input_cost_dollars_total{with_contextfold=\"false\"}"];
    let cost_with = metrics["contextfold_estimated_input_cost_dollars_total{with_contextfold=\"true\"}"];
    assert!((cost_without - without).abs() < 1e-9, "{cost_without} vs {without}");
    assert!((cost_with - with).abs() < 1e-9, "{cost_with} vs {with}");
    assert!(cost_with < cost_without);
    let totals = proxy.stats.savings().totals();
    assert_eq!((totals.calls, totals.compactions), (27, by_action["compacted"] as u64));
    assert_eq!((totals.tokens_received, totals.tokens_sent), (received, sent));
    assert_eq!((totals.cost_without, totals.cost_with), (cost_without, cost_with), "the metrics are the totals");
    assert_eq!(totals.families, [family]);

    // The upstream's own counts, read from each answer of the conversation's calls (the one
    // forwarded untouched, the fourth, is not read): a token per three bytes in, 42 out.
    let bodies: Vec<usize> = mock.messages_requests().iter().map(|request| request.body.len()).collect();
    assert_eq!(bodies.len(), 28);
    let input: usize = bodies.iter().enumerate().filter(|(step, _)| *step != 3).map(|(_, len)| len / 3).sum();
    let kind = |kind: &str| metrics[&format!("contextfold_upstream_tokens_total{{kind=\"{kind}\"}}")];
    assert_eq!(kind("input"), input as f64, "{metrics:?}");
    assert_eq!(kind("output"), 42.0 * 27.0);
    assert_eq!((kind("cache_read"), kind("cache_write")), (0.0, 0.0));

    // Latency: every request that went upstream, every answer relayed; the refused one is in
    // neither.
    let upstream_requests = mock.requests().len();
    assert_eq!(upstream_requests, requests - 1);
    assert_eq!(metrics["contextfold_added_latency_seconds_count"], upstream_requests as f64);
    assert_eq!(metrics["contextfold_added_latency_seconds_bucket{le=\"+Inf\"}"], upstream_requests as f64);
    assert_eq!(metrics["contextfold_first_byte_seconds_count"], upstream_requests as f64);
    assert!(metrics["contextfold_added_latency_seconds_sum"] > 0.0);
    assert_eq!(metrics["contextfold_store_errors_total"], 0.0);
    assert_eq!(metrics["contextfold_conversations_held"], 1.0);
    // What splits the conversation's next request and knows its messages: hashes and
    // offsets, a few dozen bytes a message, never a copy of the history's text.
    let held = metrics["contextfold_bytes_held"];
    let body: Value = serde_json::from_str(&agent.body(false)).unwrap();
    let count = body["messages"].as_array().unwrap().len() as f64;
    let text = body["messages"].to_string().len() as f64;
    assert!(held >= count * 24.0 && held <= count * 96.0, "{held} bytes for {count} messages");
    assert!(held < text / 4.0, "{held} bytes for {text} bytes of messages");
    notice(&format!(
        "/metrics after {requests} requests ({by_action:?} in the conversation's lines): {}",
        totals.line()
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_ready_never_go_upstream_and_only_metrics_needs_the_token() {
    let mock = Mock::start(upstream).await;
    let dir = scratch("metrics-ready");
    let store = Some(StoreLocation::File(dir.join("proxy.db")));
    let proxy = proxy(ServeConfig { auth_token: Some(PROXY_TOKEN.into()), store, ..config(&mock.url()) }).await;
    let client = client();
    for (path, body) in [("/health", json!({"status": "ok"})), ("/ready", json!({"status": "ready"}))] {
        let response = client.get(format!("{}{path}", proxy.url)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path} needs no token");
        assert_eq!(response.json::<Value>().await.unwrap(), body, "{path}");
        let head = client.head(format!("{}{path}", proxy.url)).send().await.unwrap();
        assert_eq!(head.status(), 200, "HEAD {path}");
        let post = client.post(format!("{}{path}", proxy.url)).send().await.unwrap();
        assert_eq!(post.status(), 405, "POST {path}");
    }
    for token in [None, Some("wrong-token-of-some-length")] {
        let mut request = client.get(format!("{}/metrics", proxy.url));
        if let Some(token) = token {
            request = request.header("x-contextfold-token", token);
        }
        assert_eq!(request.send().await.unwrap().status(), 401, "{token:?}");
    }
    let metrics = scrape(&proxy.url, Some(PROXY_TOKEN)).await;
    let bearer = client
        .get(format!("{}/metrics", proxy.url))
        .header("proxy-authorization", format!("Bearer {PROXY_TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
    assert!(mock.requests().is_empty(), "the upstream saw none of them");
    assert_eq!(total(&metrics, "contextfold_requests_total"), 0.0, "the endpoints are not counted: {metrics:?}");
    assert_eq!(metrics["contextfold_store_errors_total"], 0.0);
}

/// A TCP relay on 127.0.0.1 to `target`, that [`Relay::stop`] closes with every connection.
struct Relay {
    addr: std::net::SocketAddr,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Relay {
    async fn start(target: String) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tasks = Arc::new(Mutex::new(Vec::new()));
        let spawned = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let pipe = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                spawned.lock().unwrap().push(pipe);
            }
        });
        tasks.lock().unwrap().push(accept);
        Relay { addr, tasks }
    }

    /// Closes the listener and every connection.
    fn stop(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_503_once_the_store_stops_answering() {
    const SERVER: &str = "CONTEXTFOLD_TEST_POSTGRES_URL";
    let Some(url) = std::env::var(SERVER).ok().filter(|url| !url.is_empty()) else {
        assert!(std::env::var_os("CI").is_none(), "CI is set but {SERVER} is not");
        notice(&format!("skipped: no PostgreSQL server to stop answering (set {SERVER})"));
        return;
    };
    // The store reaches the database through a relay the test can cut.
    let mut url = reqwest::Url::parse(&url).expect("a URL");
    let target = format!("{}:{}", url.host_str().expect("a host"), url.port().unwrap_or(5432));
    let relay = Relay::start(target).await;
    url.set_host(Some("127.0.0.1")).unwrap();
    url.set_port(Some(relay.addr.port())).unwrap();
    let store = Some(StoreLocation::parse(url.as_str()).expect("a store URL"));
    let mock = Mock::start(upstream).await;
    let proxy = proxy(ServeConfig { store, ..config(&mock.url()) }).await;
    let ready = client().get(format!("{}/ready", proxy.url)).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    relay.stop();
    let ready = client().get(format!("{}/ready", proxy.url)).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(body["status"], "unavailable", "{body}");
    assert!(body["reason"].as_str().is_some_and(|reason| reason.contains("store")), "{body}");
    let health = client().get(format!("{}/health", proxy.url)).send().await.unwrap();
    assert_eq!(health.status(), 200, "the process still serves");
    assert!(mock.requests().is_empty(), "the upstream saw none of them");
    // A probe that timed out is counted once the store call fails (the pool's wait at most).
    let deadline = Instant::now() + Duration::from_secs(45);
    let errors = loop {
        let errors = scrape(&proxy.url, None).await["contextfold_store_errors_total"];
        if errors >= 1.0 || Instant::now() > deadline {
            break errors;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(errors >= 1.0, "the store's failure is counted");
}
