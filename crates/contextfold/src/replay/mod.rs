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
//!
//! Each strategy is replayed as if it ran alone: it gets its own copy of the compactor with
//! an empty summary cache, so no strategy is served summaries another one paid for. A call
//! costs what changed: a strategy's step says how many messages of its previous request it
//! kept and what follows them, and the request is updated in place (module `request`).

mod extract_probes;
pub mod held_back;
mod probe_set;
mod probes;
mod request;
pub mod strategies;

use crate::cache::LruCache;
use crate::compactor::Compactor;
use crate::summarize::Usage;
use contextfold_core::boundary::last_cuts;
use contextfold_core::harness::session_family;
use contextfold_core::probe::ProbeKind;
use contextfold_core::tokens::{count_system, count_tools, TokenCounter};
use contextfold_core::{Conversation, Message, Role};
use probes::{Folding, History, Tally};
use request::{paths_read, BlockCounts, Request};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
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
    pub fn parse(text: &str) -> Result<Price, InvalidPrice> {
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
                    _ => Err(InvalidPrice(custom.to_owned())),
                }
            }
        }
    }
}

impl Price {
    /// The list price of `model`'s family (`claude-sonnet-4-5` is sonnet's), with the
    /// family's name; `None` for a model of no known family.
    pub fn of_model(model: &str) -> Option<(&'static str, Price)> {
        let model = model.to_ascii_lowercase();
        ["opus", "sonnet", "haiku"]
            .into_iter()
            .find(|family| model.contains(family))
            .and_then(|family| Some((family, Price::parse(family).ok()?)))
    }

    /// The cost in US dollars of `read` input tokens read from the prompt cache and `write`
    /// written to it (or, with `cache` off, of `read + write` plain input tokens): the
    /// prompt-cache model's `reads × 0.1 + writes × 1.25` of the input price.
    pub fn input_cost(&self, read: u64, write: u64, cache: bool) -> f64 {
        let tokens = if cache { read as f64 * 0.1 + write as f64 * 1.25 } else { (read + write) as f64 };
        tokens * self.input / 1e6
    }
}

/// A price that is neither a preset nor two non-negative numbers `IN,OUT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a price: use sonnet, haiku, opus or IN,OUT (dollars per million tokens)")]
pub struct InvalidPrice(pub String);

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A strategy name that [`strategies::STRATEGIES`] does not list.
    #[error("unknown strategy `{0}` (expected one of {list})", list = strategies::STRATEGIES.join(", "))]
    UnknownStrategy(String),
    /// The caller's `on_call` of [`replay_with`] failed on this call.
    #[error("call {call} of strategy `{strategy}` could not be handed on")]
    Call {
        /// The strategy.
        strategy: String,
        /// The index of the assistant message the call produced.
        call: usize,
        /// What `on_call` returned.
        #[source]
        source: CallError,
    },
}

/// What the `on_call` of [`replay_with`] may fail with.
pub type CallError = Box<dyn std::error::Error + Send + Sync>;

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
    /// The token counter (a built-in one, or any of the caller's).
    pub counter: Arc<dyn TokenCounter>,
    /// The compactor for contextfold's strategies.
    pub compactor: Compactor,
    /// contextfold compacts when the next request reaches this share of the usable window.
    pub trigger: f64,
    /// contextfold compacts to this share of the usable window.
    pub target: f64,
    /// Told after every call replayed (of any strategy), e.g. to move a progress bar.
    pub progress: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// One call as a strategy sent it, for `replay --dump-requests`.
#[derive(Debug, Clone, Copy)]
pub struct CallRecord<'a> {
    /// The strategy.
    pub strategy: &'a str,
    /// The index of the assistant message this call produced.
    pub i: usize,
    /// The request's messages, exactly as sent.
    pub messages: &'a [Message],
    /// Whether the strategy compacted before this call.
    pub compacted: bool,
    /// Summarizer calls made for it.
    pub summarizer_calls: usize,
    /// Their input tokens.
    pub summarizer_input_tokens: u64,
    /// Their output tokens.
    pub summarizer_output_tokens: u64,
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
    /// Share of the independent probes recalled (1.0 when there were none).
    pub probe_recall: f64,
    /// Independent probes checked.
    pub probes: usize,
    /// Independent probes recalled.
    pub probes_recalled: usize,
    /// (checked, recalled) of the independent probes by kind.
    pub recall_by_kind: BTreeMap<String, (usize, usize)>,
    /// Share of the probes from `extract` facts recalled (1.0 when there were none).
    pub extract_recall: f64,
    /// Probes from `extract` facts checked.
    pub extract_probes: usize,
    /// Probes from `extract` facts recalled.
    pub extract_probes_recalled: usize,
    /// (checked, recalled) of the probes from `extract` facts by kind.
    pub extract_recall_by_kind: BTreeMap<String, (usize, usize)>,
    /// Compactions whose request holds more than one summary header.
    pub nested_summary_steps: usize,
    /// Recorded reads of a file whose earlier read the request showed only as a pointer or
    /// placeholder, none whole: the re-reads eviction caused.
    pub rereads_after_evict: usize,
    /// The same, by agent family (`claude-code`, `mini-swe-agent`, …, `other`).
    pub rereads_after_evict_by_family: BTreeMap<String, usize>,
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
        add_kinds(&mut self.recall_by_kind, &other.recall_by_kind);
        self.extract_probes += other.extract_probes;
        self.extract_probes_recalled += other.extract_probes_recalled;
        add_kinds(&mut self.extract_recall_by_kind, &other.extract_recall_by_kind);
        self.nested_summary_steps += other.nested_summary_steps;
        self.rereads_after_evict += other.rereads_after_evict;
        for (family, rereads) in &other.rereads_after_evict_by_family {
            *self.rereads_after_evict_by_family.entry(family.clone()).or_default() += rereads;
        }
        self.compactions += other.compactions;
        self.probe_recall = recall(self.probes, self.probes_recalled);
        self.extract_recall = recall(self.extract_probes, self.extract_probes_recalled);
    }

    fn set_tallies(&mut self, independent: Tally, extracted: Tally) {
        (self.probes, self.probes_recalled, self.recall_by_kind) =
            (independent.checked, independent.recalled, independent.by_kind);
        (self.extract_probes, self.extract_probes_recalled, self.extract_recall_by_kind) =
            (extracted.checked, extracted.recalled, extracted.by_kind);
        self.probe_recall = recall(self.probes, self.probes_recalled);
        self.extract_recall = recall(self.extract_probes, self.extract_probes_recalled);
    }
}

fn add_kinds(into: &mut BTreeMap<String, (usize, usize)>, from: &BTreeMap<String, (usize, usize)>) {
    for (kind, (checked, recalled)) in from {
        let entry = into.entry(kind.clone()).or_default();
        entry.0 += checked;
        entry.1 += recalled;
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

/// Replays `conversation` with every strategy of `config`.
pub async fn replay(conversation: &Conversation, config: &ReplayConfig) -> Result<Vec<StrategyResult>, ReplayError> {
    replay_with(conversation, config, &mut |_| Ok(())).await
}

/// [`replay`], handing every call to `on_call` as it is sent; an error from it stops the
/// replay.
pub async fn replay_with(
    conversation: &Conversation,
    config: &ReplayConfig,
    on_call: &mut (dyn FnMut(&CallRecord) -> Result<(), CallError> + Send),
) -> Result<Vec<StrategyResult>, ReplayError> {
    let fixed = conversation.system.as_ref().map_or(0, |system| count_system(&*config.counter, system))
        + conversation.tools.as_deref().map_or(0, |tools| count_tools(&*config.counter, tools));
    let usable = config.window.saturating_sub(config.reserve);
    let calls: Vec<usize> = (1..conversation.messages.len())
        .filter(|&index| conversation.messages[index].role == Role::Assistant)
        .collect();
    let mut counts = BlockCounts::new(&*config.counter);
    let mut history = History::new(conversation);
    let floors = newest_turn_tokens(conversation, &calls, fixed, &mut counts);
    let family = session_family(&conversation.messages).map_or("other", |family| family.name());
    let mut results = Vec::new();
    for name in &config.strategies {
        // Each strategy as if it ran alone: its own summary cache.
        let setting = Setting {
            window: config.window,
            reserve: config.reserve,
            system: conversation.system.clone(),
            tools: conversation.tools.clone(),
            counter: Arc::clone(&config.counter),
            compactor: config.compactor.clone().with_cache(Arc::new(LruCache::default())),
            trigger: config.trigger,
            target: config.target,
        };
        let mut strategy = strategy(name, &setting).ok_or_else(|| ReplayError::UnknownStrategy(name.clone()))?;
        let mut result = StrategyResult { strategy: name.clone(), ..StrategyResult::default() };
        let (mut independent, mut extracted) = (Tally::default(), Tally::default());
        let mut request = Request::default();
        let mut folding = Folding::default();
        for (step_index, &call) in calls.iter().enumerate() {
            let step = strategy.step(&conversation.messages[..call]).await;
            let shared = request.apply(step.kept, step.appended, &mut counts);
            let request_tokens = fixed + request.tokens();
            let read = if config.cache && step_index > 0 { fixed + shared } else { 0 };
            let read = read.min(request_tokens);
            let write = request_tokens - read;
            let output = counts.tokens(&conversation.messages[call]);
            result.steps += 1;
            result.request_tokens.push(request_tokens);
            result.peak_request_tokens = result.peak_request_tokens.max(request_tokens);
            result.overflow_steps += usize::from(request_tokens > usable);
            result.unavoidable_overflow_steps += usize::from(request_tokens > usable && floors[step_index] > usable);
            result.input_tokens += request_tokens;
            result.output_tokens += output;
            result.cache_read_tokens += read;
            result.cache_write_tokens += if config.cache { write } else { 0 };
            result.cost_usd +=
                config.price.input_cost(read, write, config.cache) + output as f64 * config.price.output / 1e6;
            let rereads =
                paths_read(&conversation.messages[call]).iter().filter(|path| request.rereads_evicted(path)).count();
            result.rereads_after_evict += rereads;
            if step.compacted {
                result.compactions += 1;
                result.compaction_steps.push(step_index);
                result.summarizer_calls += step.summarizer_calls;
                add_summarizer(&mut result, step.summarizer_usage, config.price);
                let checked = history.check(&mut folding, call, &request, &mut independent, &mut extracted);
                result.nested_summary_steps += usize::from(checked.nested_summary);
            }
            on_call(&CallRecord {
                strategy: name,
                i: call,
                messages: &request.messages,
                compacted: step.compacted,
                summarizer_calls: step.summarizer_calls,
                summarizer_input_tokens: step.summarizer_usage.input_tokens,
                summarizer_output_tokens: step.summarizer_usage.output_tokens,
            })
            .map_err(|source| ReplayError::Call { strategy: name.clone(), call, source })?;
            if let Some(progress) = &config.progress {
                progress();
            }
        }
        result.set_tallies(independent, extracted);
        if result.rereads_after_evict > 0 {
            result.rereads_after_evict_by_family.insert(family.to_string(), result.rereads_after_evict);
        }
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
        prefix.push(prefix[prefix.len() - 1] + counts.tokens(message));
    }
    let cuts = last_cuts(&conversation.messages);
    calls.iter().map(|&call| fixed + prefix[call] - prefix[cuts[call].unwrap_or(0)]).collect()
}

fn add_summarizer(result: &mut StrategyResult, usage: Usage, price: Price) {
    result.summarizer_input_tokens += usage.input_tokens;
    result.summarizer_output_tokens += usage.output_tokens;
    result.cost_usd += (usage.input_tokens as f64 * price.input + usage.output_tokens as f64 * price.output) / 1e6;
}

/// The independent probe kinds, for report columns.
pub fn probe_kinds() -> impl Iterator<Item = &'static str> {
    ProbeKind::INDEPENDENT.iter().map(|kind| kind.name())
}
