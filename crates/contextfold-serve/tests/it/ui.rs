//! The dashboard at `/ui`: its JSON API over a proxy's store, the escaping of stored text,
//! the token rule (header, `?token=` once, then the cookie), the loopback rule, `/ui` never
//! reaching the upstream, and the page itself in headless Chromium
//! (`tests/browser/dashboard.mjs`), checked against what the store holds as the library
//! reads it.
//!
//! `.ci/setup.d/60-browser.sh` installs the browser and `playwright-core` and exports where
//! they are; without them the browser test skips with a notice, or fails when `CI` is set.

use crate::common::{agent_script, client, config, notice, proxy, Agent, Running};
use crate::mock::Mock;
use crate::stored::{scratch, Scratch};
use contextfold::store::{HitLocation, Payload, SessionStore, SqliteStore, StoreLocation};
use contextfold_serve::ServeConfig;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A word only the second tool output holds, which is evicted later.
const WORD: &str = "xylophonist";
/// Markup in that output, which the dashboard must show as text.
const MARKUP: &str = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">";
/// The calls of the scripted conversation.
const CALLS: usize = 16;
/// A proxy token.
const TOKEN: &str = "ui-test-token-0123456789";

/// A proxy with a SQLite store that a scripted conversation of [`CALLS`] calls went
/// through, compacting at least twice.
struct Conversation {
    mock: Mock,
    proxy: Running,
    path: PathBuf,
    /// The store's directory, removed with the conversation.
    _dir: Scratch,
}

async fn conversation(test: &str, token: Option<&str>) -> Conversation {
    let dir = scratch(test);
    let path = dir.join("proxy.db");
    let mock = Mock::start(agent_script(10_000)).await;
    let store = Some(StoreLocation::File(path.clone()));
    let auth_token = token.map(str::to_string);
    // The scenario needs an output evicted behind a pointer, not folded into the summary,
    // which a target of 0.3 of the window gives it.
    let proxy = proxy(ServeConfig { store, auth_token, target: 0.3, ..config(&mock.url()) }).await;
    let client = client();
    let mut agent = Agent::new("dash", "tidy the parser");
    agent.output_chars = 7_000;
    if let Some(token) = token {
        agent.headers = vec![("x-contextfold-token".into(), token.into())];
    }
    for step in 0..CALLS {
        agent.step(&client, &proxy.url).await;
        if step == 1 {
            let result = &mut agent.messages.last_mut().expect("a result")["content"][0]["content"];
            *result = format!("{}\n{WORD} {MARKUP}\n", result.as_str().expect("text")).into();
        }
    }
    let compactions = proxy.stats.compactions();
    assert!(compactions >= 2, "the conversation compacts at least twice (got {compactions})");
    // The call records are written after each answer, off the request's path.
    let store = read(&path);
    let session = store.sessions().expect("sessions")[0].id.clone();
    for _ in 0..100 {
        if store.calls(&session).expect("calls").len() == CALLS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.calls(&session).expect("calls").len(), CALLS, "a record per call");
    Conversation { mock, proxy, path, _dir: dir }
}

/// The store as the library reads it, beside the proxy.
fn read(path: &Path) -> std::sync::Arc<dyn SessionStore> {
    StoreLocation::File(path.to_path_buf()).open_read_only().expect("the proxy's store")
}

/// What `contextfold recall` prints for a payload.
fn recalled(payload: &Value) -> String {
    payload.as_str().map_or_else(|| payload.to_string(), str::to_string)
}

/// The ref and compaction (by index) of the evicted output that holds [`WORD`].
fn evicted_word(store: &dyn SessionStore, session: &str) -> (usize, String) {
    for (index, report) in store.reports(session).expect("reports").iter().enumerate() {
        for item in report["items"].as_array().into_iter().flatten() {
            let reference = item["ref"].as_str().expect("a ref");
            if store.recall(reference).expect("recall").is_some_and(|payload| recalled(&payload).contains(WORD)) {
                return (index, reference.to_string());
            }
        }
    }
    panic!("the output holding {WORD} was evicted");
}

/// GETs `path` from `base`; returns the status, the headers and the body.
async fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, String) {
    let client = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut request = client.get(format!("{base}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the proxy answers");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.expect("a body"))
}

async fn get_json(base: &str, path: &str) -> (u16, Value) {
    let (status, headers, body) = get(base, path, &[]).await;
    assert_eq!(headers["content-type"], "application/json", "{path}");
    (status, serde_json::from_str(&body).unwrap_or_else(|err| panic!("{path}: {err}: {body}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_from_the_store_and_ui_never_reaches_the_upstream() {
    let run = conversation("ui-api", None).await;
    let store = read(&run.path);
    let info = store.sessions().expect("sessions").remove(0);
    let reports = store.reports(&info.id).expect("reports");
    let forwarded = run.mock.requests().len();
    let base = &run.proxy.url;

    let (status, headers, page) = get(base, "/ui", &[]).await;
    assert_eq!((status, headers["content-type"].to_str().unwrap()), (200, "text/html; charset=utf-8"));
    assert!(
        page.contains("/ui/app.js")
            && headers["content-security-policy"].to_str().unwrap().contains("script-src 'self'")
    );
    for asset in ["/ui/app.js", "/ui/style.css"] {
        assert_eq!(get(base, asset, &[]).await.0, 200, "{asset}");
    }
    let (status, listed) = get_json(base, "/ui/api/sessions").await;
    assert_eq!(status, 200);
    let shown = &listed["sessions"][0];
    assert_eq!(shown["id"], info.id.as_str());
    assert_eq!(
        (
            shown["messages"].as_u64(),
            shown["payloads"].as_u64(),
            shown["compactions"].as_u64(),
            shown["calls"].as_u64()
        ),
        (Some(info.messages as u64), Some(info.payloads as u64), Some(reports.len() as u64), Some(CALLS as u64))
    );
    assert!(shown["tokens_received"].as_u64() > shown["tokens_sent"].as_u64(), "it saved: {shown}");

    let (status, detail) = get_json(base, &format!("/ui/api/session?id={}", info.id)).await;
    assert_eq!(status, 200);
    assert_eq!(detail["calls"].as_array().map(Vec::len), Some(CALLS));
    assert_eq!(detail["compactions"].as_array().map(Vec::len), Some(reports.len()));
    assert_eq!(detail["window"].as_u64(), Some(24_000));
    let summaries = store.summaries(&info.id).expect("summaries");
    let first = detail["compactions"].as_array().unwrap().iter().find(|c| !c["summary"].is_null()).expect("a summary");
    assert_eq!(first["summary"].as_str(), Some(summaries[0].text.as_str()));

    let (_, reference) = evicted_word(store.as_ref(), &info.id);
    let (status, found) = get_json(base, &format!("/ui/api/payload?ref={reference}")).await;
    assert_eq!(status, 200);
    let exact = recalled(&store.recall(&reference).unwrap().unwrap());
    assert_eq!(found["text"].as_str(), Some(exact.as_str()), "the payload exactly as recall gives it");
    assert!(exact.contains(MARKUP), "the markup is stored as it was");

    let (status, hits) = get_json(base, &format!("/ui/api/search?q={WORD}")).await;
    assert_eq!(status, 200);
    let expected = store.search(None, WORD, 50).expect("search");
    assert_eq!(hits["hits"].as_array().map(Vec::len), Some(expected.len()));
    assert!(expected.iter().any(|hit| hit.location == HitLocation::Payload(reference.clone())), "{expected:?}");
    assert!(hits["hits"].as_array().unwrap().iter().any(|hit| hit["ref"] == reference.as_str()), "{hits}");

    // Missing things are 404s with a reason; bad requests are 400s.
    for (path, status, names) in [
        ("/ui/api/session?id=nope", 404, "nope"),
        ("/ui/api/payload?ref=cf-000000000000", 404, "cf-000000000000"),
        ("/ui/api/payload", 400, "ref"),
        ("/ui/api/search?q=", 400, "search"),
        ("/ui/api/elsewhere", 404, "no such call"),
    ] {
        let (got, body) = get_json(base, path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(body["error"].as_str().is_some_and(|why| why.contains(names)), "{path}: {body}");
    }
    let posted = client().post(format!("{base}/ui/api/sessions")).send().await.expect("an answer");
    assert_eq!(posted.status(), 405);
    assert_eq!(run.mock.requests().len(), forwarded, "no /ui request reached the upstream");
    run.proxy.stop().await.expect("stops");
}

#[tokio::test]
async fn stored_markup_is_returned_as_data_and_a_foreign_host_is_refused() {
    let dir = scratch("ui-escape");
    let path = dir.join("proxy.db");
    let reference = "cf-00000000c0de";
    let hostile = "</pre><script>alert('stored')</script>&amp; \u{0}";
    {
        let store = SqliteStore::open(&path).expect("a store");
        let session = store.create_session("<b>hostile</b> name").expect("a session");
        let payload = Payload {
            reference: reference.into(),
            session,
            tool: "Bash".into(),
            kind: "shell".into(),
            target: None,
            tokens: 9,
            message: 0,
            block: 0,
            payload: json!(hostile),
        };
        store.put_payload(&payload).expect("stored");
    }
    let mock = Mock::start(agent_script(1)).await;
    let proxy = proxy(ServeConfig { store: Some(StoreLocation::File(path)), ..config(&mock.url()) }).await;
    let (status, headers, body) = get(&proxy.url, &format!("/ui/api/payload?ref={reference}"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let found: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(found["text"].as_str(), Some(hostile), "the text as data, byte for byte");
    let (_, _, listed) = get(&proxy.url, "/ui/api/sessions", &[]).await;
    assert!(listed.contains("\"<b>hostile</b> name\""), "a name is a JSON string: {listed}");
    let (_, _, page) = get(&proxy.url, "/ui", &[]).await;
    assert!(!page.contains("hostile"), "the page holds no stored text; the script writes it as text");
    // Without a token, only loopback names: a page that rebinds its own name is refused.
    let (status, _, _) = get(&proxy.url, "/ui/api/sessions", &[("host", "attacker.example")]).await;
    assert_eq!(status, 403);
    assert_eq!(get(&proxy.url, "/ui/api/sessions", &[("host", "localhost")]).await.0, 200);
    assert!(mock.requests().is_empty(), "nothing went upstream");
}

#[tokio::test]
async fn with_a_token_the_dashboard_needs_it_by_header_or_the_cookie_the_query_sets() {
    let dir = scratch("ui-token");
    let mock = Mock::start(agent_script(1)).await;
    let store = Some(StoreLocation::File(dir.join("proxy.db")));
    let proxy = proxy(ServeConfig { store, auth_token: Some(TOKEN.into()), ..config(&mock.url()) }).await;
    let base = &proxy.url;
    for path in
        ["/ui", "/ui/", "/ui/api/sessions", "/ui/api/payload?ref=cf-000000000000", "/ui?token=not-the-token-at-all"]
    {
        assert_eq!(get(base, path, &[]).await.0, 401, "{path} without the token");
    }
    for path in ["/ui/app.js", "/ui/style.css", "/ui/favicon.svg"] {
        assert_eq!(get(base, path, &[]).await.0, 200, "{path}: the static files hold no data");
    }
    assert_eq!(get(base, "/ui/api/sessions", &[("x-contextfold-token", TOKEN)]).await.0, 200);
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(get(base, "/ui", &[("proxy-authorization", &bearer)]).await.0, 200);

    let (status, headers, _) = get(base, &format!("/ui?token={TOKEN}"), &[]).await;
    assert_eq!(status, 303, "the token is taken once");
    assert_eq!(headers["location"], "/ui", "and leaves the address");
    let cookie = headers["set-cookie"].to_str().unwrap().to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let pair = cookie.split(';').next().unwrap().to_string();
    assert_eq!(get(base, "/ui/api/sessions", &[("cookie", &pair)]).await.0, 200, "the cookie opens the API");
    assert_eq!(get(base, "/ui", &[("cookie", &pair)]).await.0, 200);
    let wrong = format!("{}=not-the-token", pair.split('=').next().unwrap());
    assert_eq!(get(base, "/ui/api/sessions", &[("cookie", &wrong)]).await.0, 401);
    // Behind a token any name may be used (a proxy reached through another host's name).
    let named = [("host", "proxy.internal.example"), ("x-contextfold-token", TOKEN)];
    assert_eq!(get(base, "/ui/api/sessions", &named).await.0, 200);
    assert_eq!(get(base, "/ui/api/sessions", &named[..1]).await.0, 401);
    assert!(mock.requests().is_empty(), "nothing went upstream");
}

#[tokio::test]
async fn without_a_store_ui_says_it_needs_one() {
    let mock = Mock::start(agent_script(1)).await;
    let proxy = proxy(ServeConfig { store: None, ..config(&mock.url()) }).await;
    let (status, headers, page) = get(&proxy.url, "/ui", &[]).await;
    assert_eq!((status, headers["content-type"].to_str().unwrap()), (404, "text/html; charset=utf-8"));
    assert!(page.contains("--store"), "{page}");
    let (status, body) = get_json(&proxy.url, "/ui/api/sessions").await;
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("--store"), "{body}");
    assert!(mock.requests().is_empty(), "nothing went upstream");
}

/// The path in `var`, when it names something that exists; else a notice (a failure with
/// `CI` set).
fn installed(var: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).filter(|path| path.exists());
    if path.is_none() {
        let why = format!("{var} names nothing; `source .ci/setup.d/60-browser.sh` installs the browser");
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        notice(&format!("skipped: the dashboard's browser test: {why}"));
    }
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_browser_shows_what_the_store_holds() {
    let (Some(chromium), Some(playwright)) =
        (installed("CONTEXTFOLD_CHROMIUM"), installed("CONTEXTFOLD_PLAYWRIGHT_NODE_MODULES"))
    else {
        return;
    };
    let run = conversation("ui-browser", Some(TOKEN)).await;
    let forwarded = run.mock.requests().len();
    let store = read(&run.path);
    let info = store.sessions().expect("sessions").remove(0);
    let reports = store.reports(&info.id).expect("reports");
    let calls = store.calls(&info.id).expect("calls");
    // The first compaction that summarized wrote the first summary.
    let summarized = reports.iter().position(|report| report["summary_tokens"].as_u64() > Some(0)).expect("a summary");
    let summary = store.summaries(&info.id).expect("summaries").remove(0).text;
    let (compaction, reference) = evicted_word(store.as_ref(), &info.id);
    let payload = recalled(&store.recall(&reference).expect("recall").expect("stored"));
    let hits: Vec<Value> = (store.search(None, WORD, 50).expect("search").into_iter())
        .map(|hit| match hit.location {
            HitLocation::Payload(reference) => json!({"session": hit.session, "ref": reference}),
            HitLocation::Message(sequence) => json!({"session": hit.session, "message": sequence}),
        })
        .collect();

    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("the screenshots' folder");
    let checks = json!({
        "url": run.proxy.url, "token": TOKEN, "chromium": chromium, "playwright": playwright, "out": out,
        "session": {"id": info.id, "messages": info.messages, "compactions": reports.len(), "payloads": info.payloads,
                    "calls": calls.len()},
        "summary": {"index": summarized, "text": summary},
        "payload": {"compaction": compaction, "ref": reference, "text": payload},
        "search": {"word": WORD, "hits": hits},
    });
    let config = out.join("checks.json");
    std::fs::write(&config, checks.to_string()).expect("written");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/dashboard.mjs");
    let mut node = tokio::process::Command::new("node");
    node.arg(&script).arg(&config).kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(180), node.output())
        .await
        .expect("the browser test ends within 3 minutes")
        .expect("node runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    notice(&format!("the dashboard's screenshots are in {}", out.display()));
    assert!(output.status.success(), "the browser's checks failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("ok search finds"), "every check ran:\n{stdout}");
    for shot in ["1-sessions.png", "2-conversation.png", "3-compaction.png", "4-payload.png", "5-search.png"] {
        assert!(out.join(shot).metadata().is_ok_and(|file| file.len() > 1_000), "{shot} was saved");
    }
    assert_eq!(run.mock.requests().len(), forwarded, "the browser's requests never reached the upstream");
    run.proxy.stop().await.expect("stops");
}
