//! Conversations: each gets its own state, whatever runs beside it; an agent and its
//! sub-agents in one session never share a summary; a rewound history starts fresh; the
//! number of conversations held is bounded; a client can turn compaction off per request.

use crate::common::{agent_name, agent_script, client, config, proxy, Agent, FAKE_API_KEY};
use crate::mock::{canned, Mock};
use contextfold_serve::ServeConfig;
use serde_json::{json, Value};

/// The agent names that occur in `body`, among `names`.
fn names_in(body: &[u8], names: &[String]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    names.iter().filter(|name| text.contains(name.as_str())).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_conversations_at_once_keep_to_themselves() {
    const AGENTS: usize = 50;
    const STEPS: usize = 9;
    let mock = Mock::start(agent_script(1_000)).await;
    let proxy = proxy(config(&mock.url())).await;
    let names: Vec<String> = (0..AGENTS).map(|index| format!("agent-{index:02}")).collect();
    let mut tasks = Vec::new();
    for name in names.clone() {
        let url = proxy.url.clone();
        tasks.push(tokio::spawn(async move {
            let client = client();
            let mut agent = Agent::new(&name, "port the module");
            for step in 0..STEPS {
                let answer = agent.step(&client, &url).await;
                let text = answer[0]["text"].as_str().unwrap_or_default().to_string();
                assert_eq!(text, format!("[{name}] reading file {step}"), "{name} got another conversation's answer");
            }
        }));
    }
    for task in tasks {
        task.await.expect("every conversation finishes");
    }
    let received = mock.messages_requests();
    assert_eq!(received.len(), AGENTS * STEPS);
    for request in &received {
        let own = agent_name(&request.json());
        assert_eq!(names_in(&request.body, &names), [own], "a request holds nothing of another conversation");
    }
    assert!(
        proxy.stats.compactions() >= AGENTS as u64,
        "each conversation compacted (got {})",
        proxy.stats.compactions()
    );
    assert_eq!(proxy.stats.conversations(), AGENTS as u64);
    assert_eq!(mock.assert_all_valid(), AGENTS * STEPS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_and_its_sub_agent_in_one_session_never_share_a_summary() {
    let mock = Mock::start(agent_script(1_000)).await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let mut main = Agent::new("main-agent", "build the feature");
    let mut sub = Agent::new("sub-agent", "search the code base");
    for agent in [&mut main, &mut sub] {
        agent.session = Some("cc-session-1".into());
    }
    for _ in 0..12 {
        main.step(&client, &proxy.url).await;
        sub.step(&client, &proxy.url).await;
    }
    assert!(proxy.stats.compactions() >= 2);
    let names = ["main-agent".to_string(), "sub-agent".to_string()];
    for request in mock.messages_requests() {
        let own = agent_name(&request.json());
        assert_eq!(names_in(&request.body, &names), [own]);
    }
    assert_eq!(proxy.stats.conversations(), 2);
    mock.assert_all_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewound_history_starts_a_fresh_state() {
    let mock = Mock::start(agent_script(1_000)).await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let mut agent = Agent::new("rewinder", "write the tests");
    for _ in 0..14 {
        agent.step(&client, &proxy.url).await;
    }
    assert!(proxy.stats.compactions() >= 1, "the conversation compacted before the rewind");
    // The user goes back to the start and asks something else.
    agent.messages.truncate(1);
    agent.messages.push(json!({"role": "assistant", "content": "Which tests?"}));
    agent.messages.push(json!({"role": "user", "content": "Only the parser's."}));
    agent.step(&client, &proxy.url).await;
    let last = mock.messages_requests().pop().unwrap();
    assert_eq!(last.body.as_ref(), agent.last_body.as_bytes(), "no stale summary: the short history goes out as it is");
    // And it grows again from there, compacting on its own.
    for _ in 0..14 {
        agent.step(&client, &proxy.url).await;
    }
    mock.assert_all_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conversations_held_are_bounded() {
    let mock = Mock::start(agent_script(1_000)).await;
    let proxy = proxy(ServeConfig { max_sessions: 2, ..config(&mock.url()) }).await;
    let client = client();
    let mut agents: Vec<Agent> = (0..3).map(|index| Agent::new(&format!("lru-{index}"), "tidy up")).collect();
    for _ in 0..10 {
        for agent in &mut agents {
            agent.step(&client, &proxy.url).await;
            assert!(proxy.stats.conversations() <= 2);
        }
    }
    assert_eq!(proxy.stats.conversations(), 2);
    mock.assert_all_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_can_turn_compaction_off_or_compact_on_the_server() {
    let mock = Mock::start(agent_script(1_000)).await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let mut agent = Agent::new("switcher", "rename things");
    for _ in 0..14 {
        agent.step(&client, &proxy.url).await;
    }
    assert!(proxy.stats.compactions() >= 1);
    let body = agent.body(false);
    let off = client
        .post(format!("{}/v1/messages", proxy.url))
        .header("x-api-key", FAKE_API_KEY)
        .header("x-contextfold", "off")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(off.status(), 200);
    let seen = mock.messages_requests().pop().unwrap();
    assert_eq!(seen.body.as_ref(), body.as_bytes(), "x-contextfold: off sends the client's bytes");
    assert_eq!(seen.header("x-contextfold"), None);

    // A history that holds the server's own compaction block is the server's to manage.
    let mut with_block: Value = serde_json::from_str(&body).unwrap();
    with_block["messages"][1]["content"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!({"type": "compaction", "content": "Summary of earlier turns."}));
    let with_block = with_block.to_string();
    let server = client.post(format!("{}/v1/messages", proxy.url)).body(with_block.clone()).send().await.unwrap();
    assert_eq!(server.status(), 200);
    assert_eq!(mock.messages_requests().pop().unwrap().body.as_ref(), with_block.as_bytes());

    let mut asks_server: Value = serde_json::from_str(&body).unwrap();
    asks_server["context_management"] = json!({"edits": [{"type": "compact_20260112"}]});
    let asks_server = asks_server.to_string();
    client.post(format!("{}/v1/messages", proxy.url)).body(asks_server.clone()).send().await.unwrap();
    assert_eq!(mock.messages_requests().pop().unwrap().body.as_ref(), asks_server.as_bytes());
    assert_eq!(proxy.stats.untouched(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_counts_what_will_be_sent() {
    let mock = Mock::start(|request| {
        if request.uri.starts_with("/v1/messages/count_tokens") {
            canned::message(json!([]), "end_turn")
        } else {
            agent_script(1_000)(request)
        }
    })
    .await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let mut agent = Agent::new("counter", "measure it");
    for _ in 0..14 {
        agent.step(&client, &proxy.url).await;
    }
    assert!(proxy.stats.compactions() >= 1);
    let count =
        client.post(format!("{}/v1/messages/count_tokens", proxy.url)).body(agent.body(false)).send().await.unwrap();
    assert_eq!(count.status(), 200);
    let counted = mock.requests().pop().unwrap();
    assert!(counted.uri.starts_with("/v1/messages/count_tokens"));
    let counted_messages = counted.json()["messages"].clone();
    assert!(
        counted_messages.as_array().unwrap().len() < agent.messages.len(),
        "count_tokens sees the compacted messages"
    );
    agent.step(&client, &proxy.url).await;
    let sent = mock.messages_requests().pop().unwrap();
    assert_eq!(sent.json()["messages"], counted_messages, "the next request sends what was counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_token_counts_calibrate_when_to_compact() {
    // The same conversation against an upstream that counts a token per six bytes and one
    // that counts twice as many: the second is nearer its window sooner, and compacts sooner.
    let mut first_compaction = Vec::new();
    for tokens_per_byte in [1.0 / 6.0, 1.0 / 3.0] {
        let mock = Mock::start(crate::common::agent_script_counting(1_000, tokens_per_byte)).await;
        let proxy = proxy(config(&mock.url())).await;
        let client = client();
        let mut agent = Agent::new(&format!("calibrated-{}", first_compaction.len()), "grow");
        agent.output_chars = 3_000;
        let mut calls = 0;
        while proxy.stats.compactions() == 0 {
            agent.step(&client, &proxy.url).await;
            calls += 1;
            assert!(calls < 100, "it compacts at last");
        }
        first_compaction.push(calls);
        mock.assert_all_valid();
    }
    assert!(first_compaction[1] < first_compaction[0], "calls before the first compaction: {first_compaction:?}");
}
