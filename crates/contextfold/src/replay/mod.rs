//! Replay: run a recorded session call by call as if a strategy had managed its context,
//! and measure cost (with prompt caching), peak context, overflows and fact recall.
//!
//! A session is a sequence of LLM calls, one per assistant message: call *i* sends the
//! system prompt plus the messages before assistant message *i*, as the strategy under test
//! transforms them, and its output is assistant message *i* as recorded.
//!
//! The prompt-cache model is Anthropic's: each request caches its whole prefix; the next
//! request reads from cache the longest prefix it shares with the previous request (compared
//! block by block: system, tools, then each message's blocks) and writes the rest. Billed
//! input is `cache reads × 0.1 + cache writes × 1.25` of the input price, or every input
//! token at `1.0` with caching off; output is billed at the output price. Summarizer calls
//! are billed too, their input uncached.

pub mod strategies;

use crate::compactor::Compactor;
use crate::summarize::Usage;
use contextfold_core::boundary::boundaries;
use contextfold_core::check::normalize;
use contextfold_core::extract::extract;
use contextfold_core::hash::{canonical_json, hash_bytes, message_fingerprint};
use contextfold_core::probe::{is_recalled, join_texts, message_text, probes, ProbeKind};
use contextfold_core::tokens::{count_block, count_system, count_tools, TokenCounter};
use contextfold_core::tools::Preset;
use contextfold_core::{Conversation, Message, Role};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use strategies::{strategy, Setting};

/// Model prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
}

impl Price {
    /// A preset (`sonnet`, `haiku`, `opus`: current Claude list prices) or `IN,OUT`.
    pub fn parse(text: &str) -> Result<Price, String> {
        match text {
            "sonnet" => Ok(Price { input: 3.0, output: 15.0 }),
            "haiku" => Ok(Price { input: 1.0, output: 5.0 }),
            "opus" => Ok(Price { input: 5.0, output: 25.0 }),
            custom => {
                let parsed = custom.split_once(',').and_then(|(input, output)| {
                    Some((input.trim().parse::<f64>().ok()?, output.trim().parse::<f64>().ok()?))
                });
                match parsed {
                    Some((input, output)) if input >= 0.0 && output >= 0.0 => Ok(Price { input, output }),
                    _ => Err(format!(
                        "`{custom}` is not a price: use sonnet, haiku, opus or IN,OUT (dollars per million tokens)"
                    )),
                }
            }
        }
    }
}

/// How to replay.
#[derive(Clone)]
pub struct ReplayConfig {
    /// The model's window.
    pub window: u64,
    /// Tokens kept free for the answer.
    pub reserve: u64,
    /// Strategy names (see [`strategies::STRATEGIES`]).
    pub strategies: Vec<String>,
    /// Prices.
    pub price: Price,
    /// Whether the prompt cache is used.
    pub cache: bool,
    /// The token counter.
    pub counter: &'static dyn TokenCounter,
    /// The compactor for contextfold's strategies.
    pub compactor: Compactor,
    /// contextfold compacts when the next request reaches this share of the usable window.
    pub trigger: f64,
    /// contextfold compacts to this share of the usable window.
    pub target: f64,
}

/// The measurements of one strategy (over one session, or summed over several).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct StrategyResult {
    /// The strategy.
    pub strategy: String,
    /// Calls replayed.
    pub steps: usize,
    /// Calls whose request did not fit the window less the reserve.
    pub overflow_steps: usize,
    /// Of those, calls where even the newest turn alone, as recorded (system prompt, tools
    /// and the messages after the last safe cut), does not fit: no cut could have avoided
    /// them, only clearing or clipping output inside that turn.
    pub unavoidable_overflow_steps: usize,
    /// The largest request.
    pub peak_request_tokens: u64,
    /// Input tokens over all calls.
    pub input_tokens: u64,
    /// Of which read from the cache.
    pub cache_read_tokens: u64,
    /// Of which written to the cache.
    pub cache_write_tokens: u64,
    /// Output tokens over all calls.
    pub output_tokens: u64,
    /// Summarizer calls.
    pub summarizer_calls: usize,
    /// Summarizer input tokens.
    pub summarizer_input_tokens: u64,
    /// Summarizer output tokens.
    pub summarizer_output_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Cost relative to `none` (1.0 = the same).
    pub cost_vs_none: f64,
    /// Share of probes recalled (1.0 when there were none).
    pub probe_recall: f64,
    /// Probes checked.
    pub probes: usize,
    /// Probes recalled.
    pub probes_recalled: usize,
    /// (checked, recalled) by probe kind.
    pub recall_by_kind: BTreeMap<String, (usize, usize)>,
    /// Compactions.
    pub compactions: usize,
    /// Request tokens per call, for plots.
    #[serde(skip)]
    pub request_tokens: Vec<u64>,
    /// Calls at which the strategy compacted, for plots.
    #[serde(skip)]
    pub compaction_steps: Vec<usize>,
}

impl StrategyResult {
    /// Adds `other` (another session's result of the same strategy) to this one.
    pub fn add(&mut self, other: &StrategyResult) {
        self.steps += other.steps;
        self.overflow_steps += other.overflow_steps;
        self.unavoidable_overflow_steps += other.unavoidable_overflow_steps;
        self.peak_request_tokens = self.peak_request_tokens.max(other.peak_request_tokens);
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.output_tokens += other.output_tokens;
        self.summarizer_calls += other.summarizer_calls;
        self.summarizer_input_tokens += other.summarizer_input_tokens;
        self.summarizer_output_tokens += other.summarizer_output_tokens;
        self.cost_usd += other.cost_usd;
        self.probes += other.probes;
        self.probes_recalled += other.probes_recalled;
        for (kind, (checked, recalled)) in &other.recall_by_kind {
            let entry = self.recall_by_kind.entry(kind.clone()).or_default();
            entry.0 += checked;
            entry.1 += recalled;
        }
        self.compactions += other.compactions;
        self.probe_recall = recall(self.probes, self.probes_recalled);
    }
}

fn recall(checked: usize, recalled: usize) -> f64 {
    if checked == 0 {
        1.0
    } else {
        recalled as f64 / checked as f64
    }
}

/// Fills `cost_vs_none` from the `none` entry of `results`.
pub fn relate_to_none(results: &mut [StrategyResult]) {
    let none = results.iter().find(|result| result.strategy == "none").map(|result| result.cost_usd);
    for result in results {
        result.cost_vs_none = match none {
            Some(none) if none > 0.0 => result.cost_usd / none,
            _ => f64::NAN,
        };
    }
}

/// Per-block token counts, memoised by content hash: requests share most blocks.
struct BlockCounts {
    counter: &'static dyn TokenCounter,
    memo: HashMap<u64, u64>,
}

impl BlockCounts {
    /// The (hash, tokens) of every block of `message`, role included in the hash.
    fn message(&mut self, message: &Message) -> Vec<(u64, u64)> {
        message
            .content
            .iter()
            .map(|block| {
                let hash =
                    hash_bytes(format!("{}:{}", message.role.as_str(), canonical_json(&block.to_value())).as_bytes());
                let tokens = *self.memo.entry(hash).or_insert_with(|| count_block(self.counter, block));
                (hash, tokens)
            })
            .collect()
    }
}

/// One request as (hash, tokens) per block, kept per message so an unchanged message is
/// not hashed again; with each message's fingerprint.
#[derive(Default)]
struct Request {
    messages: Vec<Message>,
    blocks: Vec<Vec<(u64, u64)>>,
    prints: Vec<u64>,
}

impl Request {
    /// The request for `messages`, reusing the blocks of `previous` for identical messages.
    fn new(messages: Vec<Message>, previous: &Request, counts: &mut BlockCounts) -> Request {
        let (blocks, prints) = messages
            .iter()
            .enumerate()
            .map(|(index, message)| match previous.messages.get(index) {
                Some(old) if old == message => (previous.blocks[index].clone(), previous.prints[index]),
                _ => (counts.message(message), message_fingerprint(message)),
            })
            .unzip();
        Request { messages, blocks, prints }
    }

    fn tokens(&self) -> u64 {
        self.blocks.iter().flatten().map(|(_, tokens)| tokens).sum()
    }

    /// Tokens of the longest block prefix this request shares with `previous`.
    fn shared_prefix(&self, previous: &Request) -> u64 {
        let mine = self.blocks.iter().flatten();
        let theirs = previous.blocks.iter().flatten();
        mine.zip(theirs).take_while(|(a, b)| a.0 == b.0).map(|(a, _)| a.1).sum()
    }
}

/// Replays `conversation` with every strategy of `config`.
pub async fn replay(conversation: &Conversation, config: &ReplayConfig) -> Result<Vec<StrategyResult>, String> {
    let setting = Setting {
        window: config.window,
        reserve: config.reserve,
        system: conversation.system.clone(),
        tools: conversation.tools.clone(),
        counter: config.counter,
        compactor: config.compactor.clone(),
        trigger: config.trigger,
        target: config.target,
    };
    let fixed = conversation.system.as_ref().map_or(0, |system| count_system(config.counter, system))
        + conversation.tools.as_deref().map_or(0, |tools| count_tools(config.counter, tools));
    let system_text = conversation.system.as_ref().map(|system| system.text());
    let usable = config.window.saturating_sub(config.reserve);
    let calls: Vec<usize> = (1..conversation.messages.len())
        .filter(|&index| conversation.messages[index].role == Role::Assistant)
        .collect();
    let mut counts = BlockCounts { counter: config.counter, memo: HashMap::new() };
    let mut probe_texts = ProbeTexts {
        history_prints: conversation.messages.iter().map(message_fingerprint).collect(),
        system: system_text.as_deref().map(normalize),
        messages: HashMap::new(),
    };
    let floors = newest_turn_tokens(conversation, &calls, fixed, &mut counts);
    let mut results = Vec::new();
    for name in &config.strategies {
        let mut strategy = strategy(name, &setting).ok_or_else(|| {
            format!("unknown strategy `{name}` (expected one of {})", strategies::STRATEGIES.join(", "))
        })?;
        let mut result = StrategyResult { strategy: name.clone(), ..StrategyResult::default() };
        let mut previous = Request::default();
        for (step_index, &call) in calls.iter().enumerate() {
            let history = &conversation.messages[..call];
            let step = strategy.step(history).await;
            let request = Request::new(step.messages, &previous, &mut counts);
            let request_tokens = fixed + request.tokens();
            let read = if config.cache && step_index > 0 { fixed + request.shared_prefix(&previous) } else { 0 };
            let read = read.min(request_tokens);
            let write = request_tokens - read;
            let output = counts.message(&conversation.messages[call]).iter().map(|(_, tokens)| tokens).sum::<u64>();
            result.steps += 1;
            result.request_tokens.push(request_tokens);
            result.peak_request_tokens = result.peak_request_tokens.max(request_tokens);
            result.overflow_steps += usize::from(request_tokens > usable);
            result.unavoidable_overflow_steps += usize::from(request_tokens > usable && floors[step_index] > usable);
            result.input_tokens += request_tokens;
            result.output_tokens += output;
            let input_cost = if config.cache { read as f64 * 0.1 + write as f64 * 1.25 } else { request_tokens as f64 };
            result.cache_read_tokens += read;
            result.cache_write_tokens += if config.cache { write } else { 0 };
            result.cost_usd += (input_cost * config.price.input + output as f64 * config.price.output) / 1e6;
            if step.compacted {
                result.compactions += 1;
                result.compaction_steps.push(step_index);
                result.summarizer_calls += step.summarizer_calls;
                add_summarizer(&mut result, step.summarizer_usage, config.price);
                check_probes(history, &request, &mut probe_texts, &mut result);
            }
            previous = request;
        }
        result.probe_recall = recall(result.probes, result.probes_recalled);
        results.push(result);
    }
    relate_to_none(&mut results);
    Ok(results)
}

/// For each call, the tokens of its smallest possible request: the system prompt and tools
/// plus the messages after the last safe cut of the history before it.
fn newest_turn_tokens(conversation: &Conversation, calls: &[usize], fixed: u64, counts: &mut BlockCounts) -> Vec<u64> {
    // prefix[i] = tokens of messages[..i].
    let mut prefix = vec![0u64];
    for message in &conversation.messages {
        let tokens: u64 = counts.message(message).iter().map(|(_, tokens)| tokens).sum();
        prefix.push(prefix[prefix.len() - 1] + tokens);
    }
    calls
        .iter()
        .map(|&call| {
            let start = boundaries(&conversation.messages[..call]).last().map_or(0, |boundary| boundary.index);
            fixed + prefix[call] - prefix[start]
        })
        .collect()
}

fn add_summarizer(result: &mut StrategyResult, usage: Usage, price: Price) {
    result.summarizer_input_tokens += usage.input_tokens;
    result.summarizer_output_tokens += usage.output_tokens;
    result.cost_usd += (usage.input_tokens as f64 * price.input + usage.output_tokens as f64 * price.output) / 1e6;
}

/// What probe checks reuse across calls: the history's fingerprints and the normalized text
/// of every message seen, by fingerprint.
struct ProbeTexts {
    history_prints: Vec<u64>,
    system: Option<String>,
    messages: HashMap<u64, String>,
}

impl ProbeTexts {
    /// The normalized text of `request`, as [`contextfold_core::probe::request_text`] gives it.
    fn request(&mut self, request: &Request) -> String {
        for (message, print) in request.messages.iter().zip(&request.prints) {
            self.messages.entry(*print).or_insert_with(|| message_text(message));
        }
        let parts = request.prints.iter().map(|print| self.messages[print].as_str());
        join_texts(self.system.as_deref().into_iter().chain(parts))
    }
}

/// Probes from the history messages the request no longer carries unchanged, checked
/// against the request.
fn check_probes(history: &[Message], request: &Request, texts: &mut ProbeTexts, result: &mut StrategyResult) {
    let kept: HashSet<u64> = request.prints.iter().copied().collect();
    let folded: Vec<Message> = (history.iter().zip(&texts.history_prints))
        .filter(|(_, print)| !kept.contains(print))
        .map(|(message, _)| message.clone())
        .collect();
    if folded.is_empty() {
        return;
    }
    let first_is_start = history.first().is_some_and(|first| folded.first() == Some(first));
    let probes = probes(&extract(&folded, Preset::Auto), first_is_start);
    if probes.is_empty() {
        return;
    }
    let text = texts.request(request);
    for probe in probes {
        let hit = is_recalled(&text, &probe);
        result.probes += 1;
        result.probes_recalled += usize::from(hit);
        let entry = result.recall_by_kind.entry(probe.kind.name().to_string()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(hit);
    }
}

/// The probe kinds, for report columns.
pub fn probe_kinds() -> impl Iterator<Item = &'static str> {
    ProbeKind::ALL.iter().map(|kind| kind.name())
}
