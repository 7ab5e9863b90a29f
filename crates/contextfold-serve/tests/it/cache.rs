//! Prompt-cache stability over a long conversation: between two compactions every request
//! the upstream receives starts with the previous one, block for block, and `system` and
//! `tools` are the client's bytes on every call.

use crate::common::{agent_script, client, config, extends, fields, notice, proxy, raw_messages, Agent};
use crate::mock::Mock;

const CALLS: usize = 200;

/// Breakpoints in a body (system, tools and messages).
fn breakpoints(body: &[u8]) -> usize {
    String::from_utf8_lossy(body).matches("\"cache_control\"").count()
}

async fn long_conversation(breakpoints_moving: bool) {
    let mock = Mock::start(agent_script(10_000)).await;
    let proxy = proxy(config(&mock.url())).await;
    let client = client();
    let mut agent = Agent::new(if breakpoints_moving { "moving" } else { "still" }, "refactor the parser");
    agent.breakpoints = breakpoints_moving;
    agent.output_chars = 3_000;
    let mut sent = Vec::new();
    for _ in 0..CALLS {
        agent.step(&client, &proxy.url).await;
        sent.push(agent.last_body.clone());
    }
    let received = mock.messages_requests();
    assert_eq!(received.len(), CALLS);
    let mut rewrites = 0;
    let mut previous: Option<Vec<String>> = None;
    for (call, (request, client_body)) in received.iter().zip(&sent).enumerate() {
        let upstream = fields(&request.body);
        let original = fields(client_body.as_bytes());
        for key in ["system", "tools", "model", "metadata", "thinking", "context_management", "max_tokens"] {
            assert_eq!(upstream[key].get(), original[key].get(), "call {call}: `{key}` is the client's text");
        }
        assert!(breakpoints(&request.body) <= 4, "call {call} has more than four breakpoints");
        let messages = raw_messages(&request.body);
        if let Some(previous) = &previous {
            if !extends(previous, &messages) {
                rewrites += 1;
            }
        }
        previous = Some(messages);
    }
    let compactions = proxy.stats.compactions() as usize;
    assert!(compactions >= 3, "a 200-call conversation in a 24k window compacts (got {compactions})");
    assert!(compactions < CALLS / 4, "compactions are batched (got {compactions})");
    assert_eq!(
        rewrites,
        compactions,
        "the prefix changes at a compaction and at no other call; log:\n{}",
        crate::common::logs()
    );
    assert_eq!(proxy.stats.untouched(), 0, "{}", crate::common::logs());
    assert_eq!(proxy.stats.unchanged() + proxy.stats.resent() + proxy.stats.compactions(), CALLS as u64);
    let last = received.last().unwrap();
    assert!(
        last.body.len() * 3 < sent.last().unwrap().len(),
        "the last request is compacted: {} bytes sent for {} from the client",
        last.body.len(),
        sent.last().unwrap().len()
    );
    assert_eq!(mock.assert_all_valid(), CALLS);
    notice(&format!(
        "{CALLS} calls (breakpoints moving: {breakpoints_moving}): {compactions} compactions, each the only prefix change; last request {} of the client's {} bytes",
        last.body.len(),
        sent.last().unwrap().len()
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prefix_holds_between_compactions() {
    long_conversation(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prefix_holds_while_the_client_moves_its_breakpoints() {
    long_conversation(true).await;
}
