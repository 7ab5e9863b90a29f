//! The compactor: gate → evict → plan → render → summarize → assemble → clip → validate.
//!
//! Masking first, summarizing rarely: with [`Strategy::Auto`] stale tool output is evicted
//! first, and the head is summarized only when eviction cannot reach the target. No step is
//! a hard failure while a later one can still help: an LLM summary falls back to the
//! extractive one, a failed plan to eviction alone, and whatever is still over the target
//! has its largest tool outputs clipped, the newest included. Every fallback is recorded in
//! the report with its reason. The result is validated; an invalid result is a bug and is
//! returned as an error, never as a conversation.
//!
//! With a store ([`Compactor::with_store`]) every compaction is kept in the cold layer: the
//! history it saw, each payload it removed, its summary and its report, in one transaction.
//! With a redactor ([`Compactor::with_redactor`]) secrets are masked before anything leaves
//! for a summarizer or the store, and the summary is checked to hold none.

use crate::cache::{cache_key, LruCache, SummaryCache};
use crate::redact::Redactor;
use crate::store::{redact_stored, Payload, SessionId, SessionStore, StoreError, Summary};
use crate::summarize::{Extractive, Summarizer, SummaryRequest, Usage};
use contextfold_core::check::{missing_facts, preserve, required_facts};
use contextfold_core::clip::{clip, ClipConfig, Clipped, CLIP_PREFIX, MIN_CLIP_TOKENS};
use contextfold_core::evict::{evict_with_ledger, is_evicted, EvictConfig, Offload};
use contextfold_core::extract::extract;
use contextfold_core::plan::{plan_with_counts, PinFirst, Plan, PlanConfig};
use contextfold_core::prompt::Instructions;
use contextfold_core::render::render_chunks_at_most;
use contextfold_core::summary::{assemble, split_summary, summary_block, with_recall_note};
use contextfold_core::tokens::{Thousands, TokenCounter, TokenLedger, Tokenizer};
use contextfold_core::{repair, validate, Block, Conversation, Message, Problem, Role, ToolResult};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// How many tokens the compacted conversation may hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// An absolute budget.
    Budget(u64),
    /// A fraction of a model window less an output reserve.
    Window {
        /// The model's context window.
        window: u64,
        /// Tokens kept free for the answer.
        reserve: u64,
        /// The share of the usable window to aim for.
        fraction: f64,
    },
    /// A fraction of the conversation's own size (manual compaction without a budget).
    Shrink(f64),
}

impl Target {
    /// The target in tokens for a conversation of `current` tokens.
    pub fn tokens(&self, current: u64) -> u64 {
        match *self {
            Target::Budget(budget) => budget,
            Target::Window { window, reserve, fraction } => (window.saturating_sub(reserve) as f64 * fraction) as u64,
            Target::Shrink(fraction) => (current as f64 * fraction) as u64,
        }
    }
}

/// What the compactor may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Evict first; summarize only if eviction cannot reach the target.
    #[default]
    Auto,
    /// Evict only.
    Evict,
    /// Summarize the head (after the plan), without evicting first.
    Summarize,
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(name: &str) -> Result<Strategy, String> {
        match name {
            "auto" => Ok(Strategy::Auto),
            "evict" => Ok(Strategy::Evict),
            "summarize" => Ok(Strategy::Summarize),
            other => Err(format!("unknown strategy `{other}` (expected auto, evict or summarize)")),
        }
    }
}

/// The limit above which a single tool output is clipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClipLimit {
    /// 10% of the target (at least [`MIN_CLIP_TOKENS`]).
    #[default]
    Auto,
    /// This many tokens.
    Tokens(u64),
    /// Never clip.
    Off,
}

impl ClipLimit {
    /// The limit in tokens for a target of `target` tokens; `None` when off.
    pub fn tokens(&self, target: u64) -> Option<u64> {
        match *self {
            ClipLimit::Auto => Some((target / 10).max(MIN_CLIP_TOKENS)),
            ClipLimit::Tokens(tokens) => Some(tokens.max(MIN_CLIP_TOKENS)),
            ClipLimit::Off => None,
        }
    }
}

/// How to compact. The [`Default`] halves the conversation with [`Strategy::Auto`], a summary
/// of at most 4,000 tokens (and half the target) and at most 8 summarizer calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactConfig {
    /// How big the result may be.
    pub target: Target,
    /// What the compactor may do.
    pub strategy: Strategy,
    /// Where to cut; its `max_tail_tokens` is lowered to what the target leaves for the tail.
    pub plan: PlanConfig,
    /// What to evict; its `target_tokens` is set from the target.
    pub evict: EvictConfig,
    /// The most tokens the summary may hold.
    pub summary_tokens: u64,
    /// Language and focus for LLM summaries.
    #[serde(skip)]
    pub instructions: Instructions,
    /// The most summarizer calls for one compaction (a head too big for one request is
    /// summarized in at most this many chunks).
    pub max_chunks: usize,
    /// When to clip a single tool output.
    pub max_tool_output: ClipLimit,
    /// A hard cap on the result (the usable window), unlike the target, which is an aim: when
    /// the tail that cannot be cut leaves less room than the summary's budget, the summary
    /// shrinks so the result stays under this cap.
    pub limit: Option<u64>,
}

impl Default for CompactConfig {
    fn default() -> Self {
        CompactConfig {
            target: Target::Shrink(0.5),
            strategy: Strategy::Auto,
            plan: PlanConfig::default(),
            evict: EvictConfig { keep_recent: Some(3), ..EvictConfig::default() },
            summary_tokens: 4_000,
            instructions: Instructions::default(),
            max_chunks: 8,
            max_tool_output: ClipLimit::Auto,
            limit: None,
        }
    }
}

/// A step that did not happen as asked, and what was done instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fallback {
    /// What failed or could not help (e.g. `anthropic:claude-haiku-4-5/prompt-v1`, `plan`).
    pub from: String,
    /// What was done instead (e.g. `extractive`, `evict`, `clip`).
    pub to: String,
    /// Why, as a sentence.
    pub reason: String,
}

/// What a compaction did. Serialized, it is the `--json` report of `contextfold compact`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CompactionReport {
    /// Tokens before.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// The target.
    pub target_tokens: u64,
    /// What was done: `none`, or steps joined by `+` (`evict`, `summarize`, `clip`).
    pub strategy_used: String,
    /// Tokens of the summary (0 without one).
    pub summary_tokens: u64,
    /// Payloads evicted.
    pub offloaded: usize,
    /// Each evicted payload.
    pub items: Vec<Offload>,
    /// Each clipped payload.
    pub clipped: Vec<Clipped>,
    /// Steps that fell back, in order.
    pub fallbacks: Vec<Fallback>,
    /// The summarizer used (after fallbacks).
    pub summarizer: Option<String>,
    /// Summarizer calls made.
    pub summarizer_calls: usize,
    /// Tokens the summarizer calls used.
    pub summarizer_usage: Usage,
    /// Whether the summary came from the cache.
    pub cache_hit: bool,
    /// User turns folded into the summary.
    pub turns_folded: usize,
    /// Messages folded into the summary.
    pub messages_folded: usize,
    /// Facts an LLM summary left out and that were appended to it.
    pub missing_facts: usize,
    /// Secrets masked in what the summarizer saw (head and previous summary) and in its
    /// summary, with [`Compactor::with_redactor`]; absent from the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub secrets_redacted: usize,
    /// Repairs made to the input before compacting.
    pub fixes: Vec<String>,
    /// Other things worth knowing, one sentence each.
    pub notes: Vec<String>,
    /// Whether the result passes validation (always true for a returned result).
    pub valid: bool,
    /// Wall time in milliseconds.
    pub duration_ms: f64,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// A compacted conversation and its report.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    /// The new conversation.
    pub conversation: Conversation,
    /// What was done.
    pub report: CompactionReport,
    /// The summary written for the head (without the recall note), when one was.
    pub summary: Option<Summary>,
    /// When the summary at the start of the result was shortened to fit the limit: its full
    /// text, for a caller to put back before the next compaction so that no fact is lost
    /// for good (see [`restore_summary`]).
    pub full_summary: Option<String>,
}

/// A compaction that could not produce a valid conversation.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// The input has no messages.
    #[error("the conversation has no messages")]
    Empty,
    /// The result broke a provider rule: a bug in contextfold, reported instead of written.
    #[error("compaction produced an invalid conversation (a bug; please report it): {}", .0.first().map(ToString::to_string).unwrap_or_default())]
    Invalid(Vec<Problem>),
    /// The compaction succeeded but the store could not keep it, so its pointers may name
    /// payloads that cannot be recalled. The result is here for a caller that sends it anyway.
    #[error("the compaction could not be stored: {source}")]
    Store {
        /// Why.
        source: StoreError,
        /// The compaction, complete but not stored.
        compacted: Box<Compacted>,
    },
}

/// Where a compactor keeps what it removes.
#[derive(Clone)]
struct Persistence {
    store: Arc<dyn SessionStore>,
    session: SessionId,
}

/// Compacts conversations with one summarizer, a summary cache and a token counter.
#[derive(Clone)]
pub struct Compactor {
    summarizer: Arc<dyn Summarizer>,
    fallback: Extractive,
    cache: Arc<dyn SummaryCache>,
    counter: &'static dyn TokenCounter,
    persistence: Option<Persistence>,
    redactor: Option<Redactor>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("summarizer", &self.summarizer.id())
            .field("counter", &self.counter.name())
            .field("session", &self.persistence.as_ref().map(|persistence| &persistence.session))
            .field("redacts", &self.redactor.is_some())
            .finish()
    }
}

impl Default for Compactor {
    /// The extractive summarizer, an in-memory cache, and the calibrated estimator.
    fn default() -> Self {
        Compactor::new(Arc::new(Extractive::default()))
    }
}

impl Compactor {
    /// A compactor summarizing with `summarizer`.
    pub fn new(summarizer: Arc<dyn Summarizer>) -> Compactor {
        Compactor {
            summarizer,
            fallback: Extractive::default(),
            cache: Arc::new(LruCache::default()),
            counter: Tokenizer::Estimate.counter(),
            persistence: None,
            redactor: None,
        }
    }

    /// Masks secrets with `redactor` (default: none) before they leave: in the head and
    /// previous summary a summarizer is given (so an LLM provider never sees them), and, with
    /// a store, in everything stored. The summary is checked too, and whatever it still holds
    /// is masked; [`CompactionReport::secrets_redacted`] counts them. The verbatim tail is sent
    /// as it was: it goes to the model the caller talks to anyway.
    ///
    /// Costs a pattern scan of the head per summary (and of the history per stored compaction).
    pub fn with_redactor(mut self, redactor: Redactor) -> Compactor {
        self.redactor = Some(redactor);
        self
    }

    /// Keeps every compaction in `session` of `store` (default: none): the history it saw,
    /// each payload it removed (so the recall tool can restore it), its summary and its
    /// report, all in one transaction. A store that fails makes [`Compactor::compact`]
    /// return [`CompactError::Store`], which carries the compaction.
    ///
    /// The model learns of the recall tool from the pointers only when
    /// [`EvictConfig::recall_tool`] is set; offer it
    /// [`recall_tool_definition`](crate::store::recall_tool_definition) then, and answer its
    /// calls with [`handle_recall`](crate::store::handle_recall).
    pub fn with_store(mut self, store: Arc<dyn SessionStore>, session: impl Into<SessionId>) -> Compactor {
        self.persistence = Some(Persistence { store, session: session.into() });
        self
    }

    /// The store and session compactions are kept in, when set.
    pub(crate) fn store(&self) -> Option<(&dyn SessionStore, &str)> {
        self.persistence.as_ref().map(|persistence| (persistence.store.as_ref(), persistence.session.as_str()))
    }

    /// Uses `cache` for summaries (default: an in-memory LRU of 64).
    pub fn with_cache(mut self, cache: Arc<dyn SummaryCache>) -> Compactor {
        self.cache = cache;
        self
    }

    /// Counts tokens with `counter` (default: the calibrated estimator).
    pub fn with_counter(mut self, counter: &'static dyn TokenCounter) -> Compactor {
        self.counter = counter;
        self.fallback = self.fallback.counter(counter);
        self
    }

    /// The token counter in use.
    pub fn counter(&self) -> &'static dyn TokenCounter {
        self.counter
    }

    /// The summarizer in use.
    pub fn summarizer(&self) -> &Arc<dyn Summarizer> {
        &self.summarizer
    }

    /// Compacts `conversation` (which is not changed) as `config` asks, and stores the
    /// compaction with `conversation`'s messages as its history when a store is set.
    pub async fn compact(
        &self,
        conversation: &Conversation,
        config: &CompactConfig,
    ) -> Result<Compacted, CompactError> {
        let compacted = self.compact_unstored(conversation, config, &conversation.messages).await?;
        self.persist(&conversation.messages, compacted)
    }

    /// Stores `compacted` with `history`, the messages as the caller has them (which may differ
    /// from the compactor's input, e.g. the middleware's working copy), when a store is set.
    pub(crate) fn persist(&self, history: &[Message], compacted: Compacted) -> Result<Compacted, CompactError> {
        let Some(persistence) = &self.persistence else { return Ok(compacted) };
        let session = persistence.session.as_str();
        let stored = serde_json::to_value(&compacted.report)
            .map_err(|err| StoreError::Invalid(format!("the report does not serialize: {err}")))
            .and_then(|mut report| {
                let mut payloads = Payload::from_report(session, &compacted.report);
                let mut summary = compacted.summary.clone();
                let history = match &self.redactor {
                    Some(redactor) => {
                        let mut redacted = history.to_vec();
                        redact_stored(redactor, &mut redacted, &mut payloads, summary.as_mut(), &mut report);
                        Cow::Owned(redacted)
                    }
                    None => Cow::Borrowed(history),
                };
                persistence.store.persist_compaction(session, &history, &payloads, summary.as_ref(), &report)
            });
        match stored {
            Ok(_) => Ok(compacted),
            Err(source) => Err(CompactError::Store { source, compacted: Box::new(compacted) }),
        }
    }

    /// [`Compactor::compact`] without storing. `originals` are the messages as the caller has
    /// them: payloads an earlier pass evicted or clipped in `conversation` are summarized
    /// from there, so a summary never loses what a pointer stood for.
    pub(crate) async fn compact_unstored(
        &self,
        conversation: &Conversation,
        config: &CompactConfig,
        originals: &[Message],
    ) -> Result<Compacted, CompactError> {
        let started = Instant::now();
        if conversation.messages.is_empty() {
            return Err(CompactError::Empty);
        }
        let mut work = conversation.clone();
        let mut report = CompactionReport {
            fixes: repair(&mut work).iter().map(ToString::to_string).collect(),
            ..CompactionReport::default()
        };
        let counter = self.counter;
        // One ledger for every count below: after an edit only the changed messages are
        // counted again.
        let mut ledger = TokenLedger::new(counter);
        report.tokens_before = ledger.resync_conversation(&work);
        let target = config.target.tokens(report.tokens_before);
        report.target_tokens = target;
        let mut steps: Vec<&str> = Vec::new();
        let mut stored_summary = None;
        let mut full_summary = None;

        if report.tokens_before > target {
            // The head is summarized from the messages as they were, not from pointers.
            let original = work.clone();
            if config.strategy != Strategy::Summarize {
                self.evict_to(&mut work, config, target, &mut ledger, &mut report, &mut steps);
            }
            if config.strategy != Strategy::Evict && ledger.resync_conversation(&work) > target {
                match self.plan_for(&work, config, target, &ledger) {
                    Ok(plan) => {
                        report.notes.extend(plan.notes.iter().cloned());
                        if plan.pinned.is_empty()
                            && config.plan.pin_first == PinFirst::Pinned
                            && plan.previous_summary.is_none()
                        {
                            report.notes.push(
                                "the first request is too big to keep verbatim; it is folded into the summary".into(),
                            );
                        }
                        let mut head = original_head(&original, &work, &plan);
                        restore_payloads(&mut head, originals);
                        let mut previous = plan.previous_summary.clone();
                        if let Some(redactor) = &self.redactor {
                            report.secrets_redacted +=
                                head.iter_mut().map(|m| redactor.redact_message(m)).sum::<usize>()
                                    + previous.as_mut().map_or(0, |text| redactor.redact_string(text));
                        }
                        let budget = self.summary_room(&ledger, &plan, config, target);
                        let (head_hash, mut text) =
                            self.summarize(&head, previous.as_deref(), &plan, config, budget, &mut report).await;
                        self.check_summary(&mut text, &mut report);
                        let summary = if config.evict.recall_tool { with_recall_note(&text) } else { text.clone() };
                        report.summary_tokens = counter.count_text(&summary);
                        stored_summary = Some(Summary {
                            head_hash,
                            summarizer: report.summarizer.clone().unwrap_or_default(),
                            text,
                            usage: report.summarizer_usage,
                        });
                        report.turns_folded =
                            head.iter().filter(|message| message.role == Role::User && message.is_authored()).count();
                        report.messages_folded = head.len();
                        work = assemble(&work, Some(&summary), &plan.pinned, plan.tail(&work));
                        steps.push("summarize");
                    }
                    Err(reason) => {
                        report.notes.push(format!("no summary: {reason}"));
                        if config.strategy == Strategy::Summarize {
                            report.fallbacks.push(Fallback {
                                from: "summarize".into(),
                                to: "evict".into(),
                                reason: reason.to_string(),
                            });
                            self.evict_to(&mut work, config, target, &mut ledger, &mut report, &mut steps);
                        }
                    }
                }
            }
            let mut tokens = ledger.resync_conversation(&work);
            if tokens > target {
                tokens = self.clip_to(&mut work, config, target, &mut ledger, &mut report, &mut steps);
            }
            if let Some(limit) = config.limit.filter(|&limit| tokens > limit) {
                full_summary = self.shrink_summary(&mut work, tokens - limit, config);
                if full_summary.is_some() {
                    steps.push("shrink-summary");
                    tokens = ledger.resync_conversation(&work);
                }
            }
            report.tokens_after = tokens;
        } else {
            report.tokens_after = report.tokens_before;
        }
        report.strategy_used = if steps.is_empty() { "none".into() } else { steps.join("+") };
        if report.tokens_after > target && report.tokens_before > target {
            report.notes.push(format!(
                "the result holds {} tokens, over the target of {}: no safe cut leaves less (the system prompt, tools and the newest messages are kept whole)",
                Thousands(report.tokens_after),
                Thousands(target)
            ));
        }
        let problems = validate(&work);
        if !problems.is_empty() {
            return Err(CompactError::Invalid(problems));
        }
        report.valid = true;
        report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(Compacted { conversation: work, report, summary: stored_summary, full_summary })
    }

    fn evict_to(
        &self,
        work: &mut Conversation,
        config: &CompactConfig,
        target: u64,
        ledger: &mut TokenLedger,
        report: &mut CompactionReport,
        steps: &mut Vec<&str>,
    ) {
        // The ledger was synced to `work` by the caller.
        let evict_config = EvictConfig { target_tokens: Some(target), ..config.evict.clone() };
        let evicted = evict_with_ledger(work, &evict_config, ledger);
        if let Some(skipped) = evicted.skipped {
            report.notes.push(format!("no eviction: {skipped}"));
        }
        if evicted.offloaded > 0 {
            report.offloaded += evicted.offloaded;
            report.items.extend(evicted.items);
            steps.push("evict");
        }
    }

    /// Plans a cut whose tail leaves room for the system prompt, tools and the summary.
    fn plan_for(
        &self,
        work: &Conversation,
        config: &CompactConfig,
        target: u64,
        ledger: &TokenLedger,
    ) -> Result<Plan, contextfold_core::plan::NoCut> {
        // The ledger was synced to `work` by the caller.
        let counts: Vec<u64> =
            (0..work.messages.len()).map(|index| ledger.message_tokens(index).unwrap_or_default()).collect();
        let plan_config = tail_plan(config, target, ledger.preamble_tokens(), work, &counts);
        plan_with_counts(work, &plan_config, self.counter, &counts)
    }

    /// The summary's budget: [`summary_budget`], shrunk to what `plan` leaves under the
    /// configured limit when the tail it could not cut is bigger than planned (a long loop led
    /// by signed thinking), so that the summary does not push the request over the window.
    fn summary_room(&self, ledger: &TokenLedger, plan: &Plan, config: &CompactConfig, target: u64) -> u64 {
        let budget = summary_budget(config, target);
        let Some(limit) = config.limit else { return budget };
        let left = limit.saturating_sub(ledger.preamble_tokens() + plan.pinned_tokens + plan.tail_tokens);
        // The summary message's framing, and the summarizer counting with its own counter.
        let margin = SUMMARY_FRAMING + left / 32;
        budget.min(left.saturating_sub(margin).max(MIN_SUMMARY_TOKENS))
    }

    /// Shortens the summary at the start of `work` by about `over` tokens, for when nothing
    /// can be cut and the request would not fit otherwise; not when even a minimal summary
    /// would leave it too big. The full summary, when it was shortened.
    fn shrink_summary(&self, work: &mut Conversation, over: u64, config: &CompactConfig) -> Option<String> {
        let first = work.messages.first_mut()?;
        let split = split_summary(first)?;
        let tokens = self.counter.count_text(&split.summary);
        let budget = tokens.saturating_sub(over + SUMMARY_FRAMING + tokens / 32);
        // When even the smallest summary would not fit, shrinking loses facts for nothing.
        if budget < MIN_SUMMARY_TOKENS {
            return None;
        }
        // A handoff is trimmed section by section; other text is cut.
        let request = SummaryRequest {
            previous: Some(split.summary.clone()),
            max_summary_tokens: budget,
            first_request_pinned: !split.pinned.is_empty(),
            ..SummaryRequest::default()
        };
        let text = self.fallback.summarize_now(&request).text;
        let text = if config.evict.recall_tool { with_recall_note(&text) } else { text };
        first.content[split.pinned.len()] = summary_block(&text);
        Some(split.summary)
    }

    /// The summary of `head`, from the cache, the summarizer, or the extractive fallback, with
    /// the cache key it is kept under.
    async fn summarize(
        &self,
        head: &[Message],
        previous: Option<&str>,
        plan: &Plan,
        config: &CompactConfig,
        budget: u64,
        report: &mut CompactionReport,
    ) -> (String, String) {
        let id = self.summarizer.id();
        let key = cache_key(head, previous, &config.instructions, budget, &id);
        if let Some(text) = self.cache.get(&key) {
            report.cache_hit = true;
            report.summarizer = Some(id);
            return (key, text);
        }
        let mut request = SummaryRequest {
            head: head.to_vec(),
            transcript: String::new(),
            previous: previous.map(str::to_string),
            instructions: config.instructions.clone(),
            max_summary_tokens: budget,
            first_request_pinned: !plan.pinned.is_empty(),
        };
        let text = if self.summarizer.is_llm() {
            match self.summarize_llm(&mut request, config, report).await {
                Ok(text) => {
                    report.summarizer = Some(id);
                    text
                }
                Err(reason) => {
                    report.fallbacks.push(Fallback { from: id, to: self.fallback.id(), reason });
                    report.summarizer = Some(self.fallback.id());
                    request.previous = previous.map(str::to_string);
                    let text = self.fallback.summarize_now(&request).text;
                    // The fallback's summary is cached under its own id, not the LLM's.
                    let key = cache_key(head, previous, &config.instructions, budget, &self.fallback.id());
                    self.cache.put(&key, &text);
                    return (key, text);
                }
            }
        } else {
            report.summarizer = Some(id);
            report.summarizer_calls += 1;
            let summary = self.summarizer.summarize(&request).await;
            match summary {
                Ok(summary) => summary.text,
                Err(err) => {
                    report.fallbacks.push(Fallback {
                        from: self.summarizer.id(),
                        to: self.fallback.id(),
                        reason: err.to_string(),
                    });
                    self.fallback.summarize_now(&request).text
                }
            }
        };
        self.cache.put(&key, &text);
        (key, text)
    }

    /// Masks what the redactor still finds in a summary: secrets an LLM pieced together, or
    /// a cached summary written without redaction. A note says so, as it should not happen.
    fn check_summary(&self, text: &mut String, report: &mut CompactionReport) {
        let Some(redactor) = &self.redactor else { return };
        let found = redactor.redact_string(text);
        if found > 0 {
            report.secrets_redacted += found;
            report.notes.push(format!("the summary held {found} secret(s) after redaction; they were masked"));
        }
    }

    /// Summarizes with the LLM in at most `max_chunks` calls, then checks the artifacts.
    async fn summarize_llm(
        &self,
        request: &mut SummaryRequest,
        config: &CompactConfig,
        report: &mut CompactionReport,
    ) -> Result<String, String> {
        let chunks =
            render_chunks_at_most(&request.head, self.summarizer.input_budget(), config.max_chunks, self.counter);
        if chunks.len() > 1 {
            report.notes.push(format!("the head was summarized in {} chunks", chunks.len()));
        }
        let mut text = request.previous.clone();
        for chunk in chunks {
            request.transcript = chunk;
            request.previous = text.clone();
            report.summarizer_calls += 1;
            let summary = self.summarizer.summarize(request).await.map_err(|err| err.to_string())?;
            report.summarizer_usage += summary.usage;
            if summary.text.trim().is_empty() {
                return Err("the summarizer returned an empty summary".into());
            }
            text = Some(summary.text);
        }
        let text = text.unwrap_or_default();
        let required = required_facts(&extract(&request.head, config.evict.preset));
        let missing = missing_facts(&text, &required);
        report.missing_facts = missing.len();
        Ok(preserve(&text, &missing))
    }

    /// Clips tool outputs, harder each round, until the conversation fits or clipping can do
    /// no more; a bounded number of rounds. Returns the conversation's tokens; the ledger
    /// must be synced to `work`.
    fn clip_to(
        &self,
        work: &mut Conversation,
        config: &CompactConfig,
        target: u64,
        ledger: &mut TokenLedger,
        report: &mut CompactionReport,
        steps: &mut Vec<&str>,
    ) -> u64 {
        let mut tokens = ledger.preamble_tokens() + ledger.total();
        let Some(mut limit) = config.max_tool_output.tokens(target) else {
            return tokens;
        };
        let mut clipped_any = false;
        loop {
            let clip_config = ClipConfig {
                preset: config.evict.preset,
                recall_tool: config.evict.recall_tool,
                ..ClipConfig::new(limit)
            };
            let clipped = clip(work, &clip_config, self.counter);
            clipped_any |= !clipped.is_empty();
            for item in clipped {
                // A payload clipped twice is reported once, with its first size and full
                // payload, under the ref its marker now names.
                match report.clipped.iter_mut().find(|old| (old.message, old.block) == (item.message, item.block)) {
                    Some(old) => {
                        old.tokens_after = item.tokens_after;
                        old.reference = item.reference;
                    }
                    None => report.clipped.push(item),
                }
            }
            tokens = ledger.resync_conversation(work);
            if tokens <= target || limit <= MIN_CLIP_TOKENS {
                break;
            }
            limit = (limit / 2).max(MIN_CLIP_TOKENS);
        }
        if clipped_any {
            report.fallbacks.push(Fallback {
                from: steps.last().copied().unwrap_or("none").to_string(),
                to: "clip".into(),
                reason: "still over the target; the largest tool outputs were clipped from the middle".into(),
            });
            steps.push("clip");
        }
        tokens
    }
}

/// Puts `full` back as the summary of `messages`' first message (see
/// [`Compacted::full_summary`]). Whether there was a summary to replace.
pub fn restore_summary(messages: &mut [Message], full: &str) -> bool {
    let Some(first) = messages.first_mut() else { return false };
    let Some(split) = split_summary(first) else { return false };
    first.content[split.pinned.len()] = summary_block(full);
    true
}

/// The smallest summary written when the tail leaves no room under the limit: a request
/// over the window fails outright, so the summary gives way almost entirely.
const MIN_SUMMARY_TOKENS: u64 = 64;

/// Tokens of the summary message beyond the summary itself (marker, headings, overhead).
const SUMMARY_FRAMING: u64 = 48;

/// The most tokens the summary may take: the configured size, but no more than half the
/// target so that the verbatim tail keeps room, except that under a hard limit it may always
/// take a quarter of the limit: in a small window, facts are worth more than a longer tail.
/// (Replay over the corpus chose these: summaries of a quarter of the target, or of 2,000
/// tokens, lost a quarter of the probes at a 16k window and cost more, because a summary too
/// small to hold the facts is redone sooner.)
impl CompactConfig {
    /// The plan a compaction makes of `conversation` as it is (before any eviction): the
    /// tail gets what the target leaves after the system prompt, tools, the summary's budget
    /// and the pinned first request. With the target in tokens, for reports.
    pub fn plan_config(&self, conversation: &Conversation, counter: &dyn TokenCounter) -> (u64, PlanConfig) {
        let mut ledger = TokenLedger::new(counter);
        let target = self.target.tokens(ledger.resync_conversation(conversation));
        let counts: Vec<u64> =
            (0..conversation.messages.len()).map(|index| ledger.message_tokens(index).unwrap_or_default()).collect();
        (target, tail_plan(self, target, ledger.preamble_tokens(), conversation, &counts))
    }
}

/// The plan configuration for a conversation with `counts` per message and `preamble` tokens
/// of system prompt and tools: the tail's budget is what `target` leaves after them, the
/// summary and a pinned first request; a first request over half that room is folded.
fn tail_plan(config: &CompactConfig, target: u64, preamble: u64, work: &Conversation, counts: &[u64]) -> PlanConfig {
    let room = target.saturating_sub(preamble + summary_budget(config, target));
    let pinned = match (config.plan.pin_first, work.messages.first()) {
        (PinFirst::Pinned, Some(first)) if first.is_authored() && split_summary(first).is_none() => {
            counts.first().copied().unwrap_or_default()
        }
        _ => 0,
    };
    let pin_first = if pinned > room / 2 { PinFirst::Folded } else { config.plan.pin_first };
    let tail_room = room.saturating_sub(if pin_first == PinFirst::Pinned { pinned } else { 0 });
    PlanConfig {
        max_tail_tokens: Some(config.plan.max_tail_tokens.map_or(tail_room, |max| max.min(tail_room))),
        pin_first,
        // Over the target, any progress helps; the policy decides whether it is worth it.
        min_progress: 0.0,
        ..config.plan.clone()
    }
}

fn summary_budget(config: &CompactConfig, target: u64) -> u64 {
    let floor = config.limit.map_or(0, |limit| limit / 4);
    config.summary_tokens.min((target / 2).max(floor)).max(1)
}

/// Puts back, from `originals`, the payloads of tool results that an earlier pass replaced
/// with a pointer or clipped, matching results by their tool_use id.
fn restore_payloads(head: &mut [Message], originals: &[Message]) {
    let replaced = |result: &ToolResult| is_evicted(result) || result.text().contains(CLIP_PREFIX);
    let mut results = head.iter_mut().flat_map(|message| message.content.iter_mut()).filter_map(|block| match block {
        Block::ToolResult(result) if replaced(result) => Some(result),
        _ => None,
    });
    let Some(first) = results.next() else { return };
    let by_id: HashMap<&str, &ToolResult> = originals
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolResult(result) if !replaced(result) => Some((result.tool_use_id.as_str(), result)),
            _ => None,
        })
        .collect();
    for result in std::iter::once(first).chain(results) {
        if let Some(original) = by_id.get(result.tool_use_id.as_str()) {
            *result = (*original).clone();
        }
    }
}

/// The head of `plan` with the original (un-evicted) payloads: eviction keeps every block in
/// place, so the same indices name the same messages.
fn original_head(original: &Conversation, work: &Conversation, plan: &Plan) -> Vec<Message> {
    let cut = plan.cut.index;
    let from_original = |range: std::ops::Range<usize>| original.messages.get(range).unwrap_or(&[]).to_vec();
    if original.messages.len() != work.messages.len() {
        return plan.head.clone();
    }
    match cut.checked_sub(plan.head.len()) {
        Some(0) => from_original(0..cut),
        Some(1) => from_original(1..cut),
        // The rest of an old summary message comes first, then messages 1.. of the head.
        _ => {
            let mut head = vec![plan.head[0].clone()];
            head.extend(from_original(1..cut));
            head
        }
    }
}
