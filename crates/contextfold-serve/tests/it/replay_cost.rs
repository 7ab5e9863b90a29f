//! The proxy costs what replay says: corpus sessions are sent through the proxy call by call
//! (call i sends the messages before assistant message i; the mock answers with that message
//! as recorded), and the requests the upstream received are billed by replay's prompt-cache
//! model. The figures must be `contextfold replay`'s for the same session and settings
//! (strategy `contextfold`: the same middleware, window, reserve and target).
//!
//! The bill is computed here from the received bytes, by the model as documented (each
//! request reads from cache the longest block prefix it shares with the previous one, after
//! the system prompt and tools, and writes the rest), not by replay's own code, so a fault in
//! either shows.

use crate::common::{client, config, corpus_dir, notice, proxy};
use crate::mock::{Mock, Recorded, Reply};
use contextfold::compactor::Compactor;
use contextfold::replay::{replay, Price, ReplayConfig, StrategyResult};
use contextfold_core::hash::{canonical_json, hash_bytes};
use contextfold_core::tokens::{count_block, count_system, count_tools, TokenCounter, Tokenizer};
use contextfold_core::{Conversation, Message, Role};
use serde_json::{json, Value};
use std::sync::Arc;

const WINDOW: u64 = 32_000;
const RESERVE: u64 = 4_000;

/// The sessions compared: the first of each agent family (the name before `__`) with at
/// most 120 messages.
fn sessions(dir: &std::path::Path) -> Vec<(String, Conversation)> {
    let files = crate::common::corpus_files(dir);
    let mut families = std::collections::HashSet::new();
    let mut chosen = Vec::new();
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let family = name.split("__").next().unwrap_or_default().to_string();
        if families.contains(&family) {
            continue;
        }
        let Ok(parsed) = contextfold::input::load(&path, None) else { continue };
        if parsed.conversation.messages.len() <= 120 {
            families.insert(family);
            chosen.push((name, parsed.conversation));
        }
    }
    chosen
}

/// The indices of the assistant messages: one call each.
fn calls(conversation: &Conversation) -> Vec<usize> {
    (1..conversation.messages.len()).filter(|&index| conversation.messages[index].role == Role::Assistant).collect()
}

/// What the client sends for the call that produced message `call`.
fn call_body(conversation: &Conversation, call: usize) -> String {
    let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 4096,
        "messages": conversation.messages[..call].iter().map(Message::to_value).collect::<Vec<_>>()});
    let preamble = Conversation { messages: vec![], ..conversation.clone() }.to_value();
    for key in ["system", "tools"] {
        if let Some(value) = preamble.get(key) {
            body[key] = value.clone();
        }
    }
    body.to_string()
}

/// The bill of requests as the upstream received them, by the prompt-cache model.
struct Bill {
    counter: &'static dyn TokenCounter,
    previous: Vec<(u64, u64)>,
    result: StrategyResult,
}

impl Bill {
    fn blocks(&self, message: &Message) -> Vec<(u64, u64)> {
        let role = message.role.as_str();
        message
            .content
            .iter()
            .map(|block| {
                let hash = hash_bytes(format!("{role}:{}", canonical_json(&block.to_value())).as_bytes());
                (hash, count_block(self.counter, block))
            })
            .collect()
    }

    /// Adds one request (its body as received) and its answer.
    fn add(&mut self, body: &[u8], answer: &Message, price: Price) {
        let request = Conversation::from_value(serde_json::from_slice(body).expect("JSON")).expect("a conversation");
        let fixed = request.system.as_ref().map_or(0, |system| count_system(self.counter, system))
            + request.tools.as_deref().map_or(0, |tools| count_tools(self.counter, tools));
        let blocks: Vec<(u64, u64)> = request.messages.iter().flat_map(|message| self.blocks(message)).collect();
        let tokens = fixed + blocks.iter().map(|(_, tokens)| tokens).sum::<u64>();
        let shared: u64 =
            blocks.iter().zip(&self.previous).take_while(|(mine, theirs)| mine.0 == theirs.0).map(|(m, _)| m.1).sum();
        let read = if self.result.steps > 0 { (fixed + shared).min(tokens) } else { 0 };
        let write = tokens - read;
        let output: u64 = self.blocks(answer).iter().map(|(_, tokens)| tokens).sum();
        let result = &mut self.result;
        result.steps += 1;
        result.input_tokens += tokens;
        result.cache_read_tokens += read;
        result.cache_write_tokens += write;
        result.output_tokens += output;
        result.peak_request_tokens = result.peak_request_tokens.max(tokens);
        result.cost_usd +=
            ((read as f64 * 0.1 + write as f64 * 1.25) * price.input + output as f64 * price.output) / 1e6;
        self.previous = blocks;
    }
}

/// Sends `conversation` through a proxy call by call and bills what the upstream received.
async fn through_the_proxy(name: &str, conversation: &Conversation, price: Price) -> (StrategyResult, u64) {
    let answers: Arc<Vec<Value>> =
        Arc::new(calls(conversation).iter().map(|&call| conversation.messages[call].to_value()).collect());
    let mock = Mock::start({
        let answers = answers.clone();
        move |request: &Recorded| {
            let call: usize = request.header("x-test-call").expect("a call").parse().unwrap();
            // No usage: the proxy's estimate is not calibrated, as in replay.
            Reply::json(json!({"id": format!("msg_{call}"), "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "content": answers[call]["content"], "stop_reason": "end_turn"}))
        }
    })
    .await;
    let mut settings = config(&mock.url());
    settings.window = Some(WINDOW);
    settings.reserve = RESERVE;
    settings.compactor = Compactor::default();
    // The counter of `Compactor::default()`.
    let counter = Tokenizer::Estimate.counter();
    let proxy = proxy(settings).await;
    let client = client();
    let mut bill = Bill { counter, previous: Vec::new(), result: StrategyResult::default() };
    for (index, &call) in calls(conversation).iter().enumerate() {
        let response = client
            .post(format!("{}/v1/messages", proxy.url))
            .header("x-contextfold-session", name)
            .header("x-test-call", index.to_string())
            .body(call_body(conversation, call))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{name} call {index}");
        response.bytes().await.unwrap();
        let received = mock.messages_requests();
        bill.add(&received.last().expect("received").body, &conversation.messages[call], price);
    }
    assert_eq!(mock.assert_all_valid(), bill.result.steps, "{name}: every request valid");
    assert_eq!(proxy.stats.untouched(), 0, "{name}: {}", crate::common::logs());
    (bill.result, proxy.stats.compactions())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_through_the_proxy_costs_what_replay_says() {
    let Some(dir) = corpus_dir() else { return };
    let sessions = sessions(&dir);
    assert!(sessions.len() >= 4, "the corpus has sessions of several agent families");
    let price = Price::parse("sonnet").unwrap();
    let mut compacted = 0;
    for (name, conversation) in &sessions {
        let compactor = Compactor::default();
        let config = ReplayConfig {
            window: WINDOW,
            reserve: RESERVE,
            strategies: vec!["contextfold".into()],
            price,
            cache: true,
            counter: Tokenizer::Estimate.shared(),
            compactor,
            trigger: 0.8,
            target: contextfold::middleware::DEFAULT_TARGET,
            progress: None,
        };
        let replayed = replay(conversation, &config).await.expect("replays").remove(0);
        let (proxied, compactions) = through_the_proxy(name, conversation, price).await;
        let figures = |result: &StrategyResult| {
            (
                result.steps,
                result.input_tokens,
                result.cache_read_tokens,
                result.cache_write_tokens,
                result.output_tokens,
                result.peak_request_tokens,
            )
        };
        assert_eq!(
            figures(&proxied),
            figures(&replayed),
            "{name}: (steps, input, cache read, cache write, output, peak)"
        );
        assert_eq!(compactions as usize, replayed.compactions, "{name}: compactions");
        assert!(
            (proxied.cost_usd - replayed.cost_usd).abs() < 1e-9,
            "{name}: {} vs {}",
            proxied.cost_usd,
            replayed.cost_usd
        );
        compacted += usize::from(compactions > 0);
        notice(&format!(
            "{name}: {} calls, {compactions} compactions; input {} tokens ({} read from cache, {} written), output {}, ${:.4} — through the proxy and in replay alike",
            proxied.steps, proxied.input_tokens, proxied.cache_read_tokens, proxied.cache_write_tokens, proxied.output_tokens, proxied.cost_usd
        ));
    }
    assert!(compacted >= 2, "at least two sessions compact in a {WINDOW}-token window");
}
