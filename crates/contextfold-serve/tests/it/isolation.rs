//! Isolation: a request continues a conversation's state only when every message it shares
//! with that state is the one the state was built from. Two runs of one task (same system
//! prompt, first message, length and last message), a rewound and regrown history, an edited
//! older message and two users with the same history each get what is theirs, never another
//! branch's summary or messages; through every API, and in the store.

use crate::common::{client, config, proxy, Running};
use crate::mock::{canned, Mock, Recorded, Reply};
use crate::openai::canned::{chat, responses};
use crate::stored::scratch;
use contextfold::store::{SessionStore, SqliteStore, StoreLocation};
use contextfold_serve::ServeConfig;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};

/// The body of a list of `{role, content}` messages in one API's shape.
type BodyOf = fn(&[Value]) -> Value;

/// The three conversation APIs: path, and the body of a list of messages.
const APIS: [(&str, BodyOf); 3] = [
    ("/v1/messages", |messages| json!({"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": messages})),
    ("/v1/chat/completions", |messages| json!({"model": "gpt-4.1", "messages": messages})),
    ("/v1/responses", |messages| json!({"model": "gpt-5", "store": false, "input": messages})),
];

/// Answers every API with a short text.
fn answer(request: &Recorded) -> Reply {
    if request.uri.contains("/chat/completions") {
        chat::completion(json!({"role": "assistant", "content": "ok"}), "stop", 100)
    } else if request.uri.contains("/responses") {
        responses::whole(&[responses::message("msg_1", "ok")], 100)
    } else {
        canned::message(json!([{"type": "text", "text": "ok"}]), "end_turn")
    }
}

/// The reproduction's history of `who`: the same first message, length and last two messages
/// for everyone, private words in between.
fn history(who: &str) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": "Hello"})];
    for i in 0..20 {
        messages.push(json!({"role": "assistant", "content": format!("{who} reply {i} {}", "x ".repeat(1200))}));
        messages.push(json!({"role": "user", "content": format!("{who} private {i} {}", "y ".repeat(1200))}));
    }
    messages.push(json!({"role": "assistant", "content": "Anything else?"}));
    messages.push(json!({"role": "user", "content": "continue"}));
    messages
}

/// A proxy as in the reproduction (`--window 20000 --reserve 4000`), the OpenAI APIs to the
/// same mock.
async fn reproduction_proxy(mock: &Mock, store: Option<StoreLocation>) -> Running {
    let config = ServeConfig {
        window: Some(20_000),
        reserve: 4_000,
        upstream_openai: format!("{}/v1", mock.url()),
        store,
        ..config(&mock.url())
    };
    proxy(config).await
}

/// Sends `messages` to `path` with `key` as the credential; the body the upstream received.
async fn send(proxy: &Running, mock: &Mock, path: &str, messages: &[Value], key: Option<&str>) -> String {
    let body = APIS.iter().find(|(api, _)| *api == path).map(|(_, body)| body(messages)).expect("an API");
    let mut request = client().post(format!("{}{path}", proxy.url)).header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let response = request.body(body.to_string()).send().await.expect("the proxy answers");
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    let received = mock.requests();
    String::from_utf8_lossy(&received.last().expect("a request went upstream").body).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_that_start_and_end_alike_each_send_their_own_history_on_every_api() {
    for (path, _) in APIS {
        let mock = Mock::start(answer).await;
        let proxy = reproduction_proxy(&mock, None).await;
        let alice = send(&proxy, &mock, path, &history("ALICE"), None).await;
        let bob = send(&proxy, &mock, path, &history("BOB"), None).await;
        assert_eq!(proxy.stats.compactions(), 2, "{path}: each run compacts its own history");
        assert_eq!(proxy.stats.resent(), 0, "{path}: nothing is resent");
        assert!(alice.contains("ALICE") && !alice.contains("BOB"), "{path}");
        assert!(bob.contains("BOB private 19"), "{path}: BOB's words arrive");
        assert!(!bob.contains("ALICE"), "{path}: nothing of ALICE's run reaches BOB's request");
        // Each goes on from its own state: the next call of either resends its own compaction.
        let mut next = history("ALICE");
        next.extend([json!({"role": "assistant", "content": "ok"}), json!({"role": "user", "content": "more"})]);
        let alice_next = send(&proxy, &mock, path, &next, None).await;
        assert!(!alice_next.contains("BOB"), "{path}");
        assert_eq!(proxy.stats.compactions() + proxy.stats.resent(), 3, "{path}: ALICE's branch was still held");
        assert_eq!(mock.assert_all_valid_at(path), 3);
    }
}

/// A history of `turns` exchanges whose assistant and user messages carry `tag`, after a
/// shared first message, ending with the same two messages.
fn tagged(tag: &str, from: usize, turns: usize) -> Vec<Value> {
    let mut messages = Vec::new();
    for i in from..from + turns {
        messages.push(json!({"role": "assistant", "content": format!("{tag}-{i} done {}", "z ".repeat(800))}));
        messages
            .push(json!({"role": "user", "content": format!("{tag}-{i}: now fix the module {}", "w ".repeat(800))}));
    }
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewound_and_regrown_history_never_gets_the_abandoned_branch() {
    let mock = Mock::start(answer).await;
    let proxy = reproduction_proxy(&mock, None).await;
    let first = json!({"role": "user", "content": "Hello"});
    let end =
        [json!({"role": "assistant", "content": "Anything else?"}), json!({"role": "user", "content": "continue"})];
    let abandoned: Vec<Value> =
        std::iter::once(first.clone()).chain(tagged("ABANDONED", 0, 18)).chain(end.clone()).collect();
    let sent = send(&proxy, &mock, "/v1/messages", &abandoned, None).await;
    assert!(sent.contains("ABANDONED"), "the branch's summary names its requests");
    // Back to the fifth message, then grown to the same length and last message.
    let mut regrown: Vec<Value> = abandoned[..5].to_vec();
    regrown.extend(tagged("REGROWN", 2, 16));
    regrown.extend(end);
    assert_eq!(regrown.len(), abandoned.len());
    let sent = send(&proxy, &mock, "/v1/messages", &regrown, None).await;
    for gone in 2..18 {
        assert!(!sent.contains(&format!("ABANDONED-{gone}")), "the abandoned branch's message {gone} is not sent");
    }
    assert!(sent.contains("REGROWN-17"));
    mock.assert_all_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_older_message_never_keeps_its_old_text() {
    let mock = Mock::start(answer).await;
    let proxy = reproduction_proxy(&mock, None).await;
    let mut messages: Vec<Value> = std::iter::once(json!({"role": "user", "content": "Hello"}))
        .chain(tagged("STEP", 0, 18))
        .chain([
            json!({"role": "assistant", "content": "Anything else?"}),
            json!({"role": "user", "content": "continue"}),
        ])
        .collect();
    let sent = send(&proxy, &mock, "/v1/messages", &messages, None).await;
    assert!(sent.contains("STEP-1: now fix"), "the summary keeps the request before the edit");
    messages[4] = json!({"role": "user", "content": format!("EDITED-1: now fix the parser {}", "w ".repeat(800))});
    let sent = send(&proxy, &mock, "/v1/messages", &messages, None).await;
    assert!(!sent.contains("STEP-1: now fix"), "the old text of the edited message is gone");
    assert!(sent.contains("EDITED-1"), "the edit is what is summarized");
    mock.assert_all_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_credentials_with_one_history_are_two_conversations() {
    let mock = Mock::start(answer).await;
    let proxy = reproduction_proxy(&mock, None).await;
    let messages = history("SHARED");
    send(&proxy, &mock, "/v1/messages", &messages, Some("sk-ant-api03-first-user-key")).await;
    send(&proxy, &mock, "/v1/messages", &messages, Some("sk-ant-api03-other-user-key")).await;
    assert_eq!(proxy.stats.conversations(), 2, "each user has a state of their own");
    assert_eq!(proxy.stats.compactions(), 2, "neither is the other's resend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_that_start_alike_are_two_store_sessions() {
    let dir = scratch("isolation-store");
    let path = dir.join("proxy.db");
    let mock = Mock::start(answer).await;
    let proxy = reproduction_proxy(&mock, Some(StoreLocation::File(path.clone()))).await;
    for who in ["ALICE", "BOB"] {
        send(&proxy, &mock, "/v1/messages", &history(who), None).await;
    }
    proxy.stop().await.expect("stops");
    let store = SqliteStore::open_existing(&path).expect("the proxy's store");
    let sessions = store.sessions().expect("sessions");
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let mut owners = Vec::new();
    for session in &sessions {
        let exported = store.export(&session.id).expect("exports");
        let text: String = exported.iter().map(|message| message.to_value().to_string()).collect();
        let own: Vec<&str> = ["ALICE", "BOB"].into_iter().filter(|who| text.contains(who)).collect();
        assert_eq!(own.len(), 1, "session {} holds one run: {own:?}", session.id);
        owners.push(own[0]);
    }
    owners.sort();
    assert_eq!(owners, ["ALICE", "BOB"]);
}

/// A history: the shared first message and `shared` exchanges, then `own` exchanges of words
/// only `word` uses, then the two messages everyone ends with.
fn branch(case: u32, shared: &[usize], own: &[usize], word: &str) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": format!("case {case}: start")})];
    let mut push = |size: usize, text: &str, i: usize| {
        messages
            .push(json!({"role": "assistant", "content": format!("{text} {i} {}", format!("{text} ").repeat(size))}));
        messages
            .push(json!({"role": "user", "content": format!("{text} ask {i} {}", format!("{text} ").repeat(size))}));
    };
    shared.iter().enumerate().for_each(|(i, size)| push(*size, "gamma", i));
    own.iter().enumerate().for_each(|(i, size)| push(*size, word, i));
    messages.push(json!({"role": "assistant", "content": "Anything else?"}));
    messages.push(json!({"role": "user", "content": "continue"}));
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_word_of_one_branch_ever_reaches_another_branchs_request() {
    let mock = Mock::start(answer).await;
    let proxy = reproduction_proxy(&mock, None).await;
    let handle = tokio::runtime::Handle::current();
    let sizes = || prop::collection::vec(50usize..1_500, 0..14);
    let strategy = (any::<u32>(), prop::collection::vec(50usize..1_500, 0..6), sizes(), sizes(), any::<bool>());
    let mut runner = TestRunner::new(Config { cases: 24, ..Config::default() });
    let result = runner.run(&strategy, |(case, shared, own_a, own_b, b_first)| {
        tokio::task::block_in_place(|| {
            handle.block_on(async {
                // Each case has words of its own, so earlier cases cannot match.
                let (alpha, beta) = (format!("alpha{case}"), format!("beta{case}"));
                let a = branch(case, &shared, &own_a, &alpha);
                let b = branch(case, &shared, &own_b, &beta);
                let (first, second, foreign) = if b_first { (&b, &a, &beta) } else { (&a, &b, &alpha) };
                let sent_first = send(&proxy, &mock, "/v1/messages", first, None).await;
                let sent_second = send(&proxy, &mock, "/v1/messages", second, None).await;
                let own = if b_first { &alpha } else { &beta };
                prop_assert!(!sent_second.contains(foreign.as_str()), "the first branch's words reached the second");
                prop_assert!(!sent_first.contains(own.as_str()));
                Ok::<(), TestCaseError>(())
            })
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
    assert!(proxy.stats.compactions() >= 8, "the cases compact (got {})", proxy.stats.compactions());
    mock.assert_all_valid();
}
