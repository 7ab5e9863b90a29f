//! The middleware: runs before each LLM call and decides what to send.
//!
//! [`CompactionMiddleware::prepare`] never touches the caller's history (invariant 4): it
//! keeps its own working copy, which it extends with the messages appended since the last
//! call. Its decisions are stable across calls, the way a real agent's context is: what was
//! evicted stays evicted and a summary stays until the next compaction, so the request
//! prefix (and the provider's prompt cache) is unchanged between compactions. Token counts
//! are memoised per message, so a call that does not compact costs the new messages only.
//!
//! With a store on its compactor ([`Compactor::with_store`]), each compaction is stored with
//! the caller's history (not the working copy), and outputs clipped on ingest are stored as
//! they are clipped, so every ref the model is shown can be recalled.

use crate::compactor::{restore_summary, CompactConfig, CompactError, Compactor, Target};
use crate::event::{CompactionEvent, Trigger};
use crate::policy::{default_policy, Decision, Policy, PolicyInput};
use crate::store::Payload;
use contextfold_core::clip::{clip, ClipConfig, Clipped};
use contextfold_core::evict::EvictConfig;
use contextfold_core::hash::message_fingerprint;
use contextfold_core::tokens::{count_message, count_messages, count_system, count_tools, TokenLedger};
use contextfold_core::{Conversation, Message, Role, System};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// The share of the usable window the middleware compacts to by default.
pub const DEFAULT_TARGET: f64 = 0.3;

/// Where the middleware works.
#[derive(Debug, Clone, PartialEq)]
pub struct MiddlewareConfig {
    /// The model's context window.
    pub window: u64,
    /// Tokens kept free for the answer.
    pub output_reserve: u64,
    /// How to compact when the policy says so (its target defaults to half the usable window).
    pub compact: CompactConfig,
    /// The system prompt sent with every request (counted, never changed).
    pub system: Option<System>,
    /// The tool definitions sent with every request (counted, never changed).
    pub tools: Option<Vec<Value>>,
    /// Clip tool outputs over this many tokens as they enter the history, so a huge output
    /// never enters it whole. Off by default.
    pub clip_on_ingest: Option<u64>,
}

impl MiddlewareConfig {
    /// A window of `window` tokens with `output_reserve` kept free; compaction aims at 30%
    /// of the usable window (tuned by replay over our corpus: a smaller context after a
    /// compaction is cheaper to re-read on every later call).
    pub fn new(window: u64, output_reserve: u64) -> MiddlewareConfig {
        let defaults = CompactConfig::default();
        let usable = window.saturating_sub(output_reserve);
        MiddlewareConfig {
            window,
            output_reserve,
            compact: CompactConfig {
                target: Target::Window { window, reserve: output_reserve, fraction: DEFAULT_TARGET },
                // Each cache rewrite an eviction causes must free a tenth of the window.
                evict: EvictConfig { clear_at_least: Some(usable / 10), ..defaults.evict.clone() },
                ..defaults
            },
            system: None,
            tools: None,
            clip_on_ingest: None,
        }
    }
}

/// What to send, and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The (possibly compacted) history to send, shared with the middleware's working copy
    /// so that a call without compaction copies nothing.
    pub history: Arc<Vec<Message>>,
    /// The pending input, sent after the history (clipped on ingest when configured).
    pub pending: Vec<Message>,
    /// The compaction, if one ran.
    pub event: Option<CompactionEvent>,
    /// Estimated tokens of the request (calibrated by reported usage).
    pub request_tokens: u64,
    /// Why no compaction ran, when the policy was asked and declined.
    pub skipped: Option<String>,
    /// Why the store could not keep an output clipped on ingest or the compaction, when it
    /// could not (the compaction's error is also in its event).
    pub store_error: Option<String>,
}

impl Prepared {
    /// The messages to send: the history, then the pending input.
    pub fn messages(&self) -> Vec<Message> {
        let mut messages = Vec::with_capacity(self.history.len() + self.pending.len());
        messages.extend(self.history.iter().cloned());
        messages.extend(self.pending.iter().cloned());
        messages
    }

    /// The messages to send, without copying them.
    pub fn iter(&self) -> impl Iterator<Item = &Message> {
        self.history.iter().chain(&self.pending)
    }
}

/// An observer of compaction events.
pub type Observer = Arc<dyn Fn(&CompactionEvent) + Send + Sync>;

/// The working state kept between calls.
struct State {
    /// How many messages of the caller's history the working copy covers.
    source_len: usize,
    /// The fingerprint of the last covered message, to see the history only grew.
    source_last: u64,
    /// The working copy: the history as it is sent (compacted, evicted, clipped).
    working: Arc<Vec<Message>>,
    ledger: TokenLedger<'static>,
    turns_since: usize,
    tokens_at_compaction: u64,
    consecutive: usize,
    calls: usize,
    /// Provider-reported input tokens over our estimate, smoothed.
    calibration: f64,
    /// The full text of the summary the working copy holds shortened, to fold from next time.
    full_summary: Option<String>,
    last_estimate: u64,
}

/// Compacts the history before each LLM call, under a policy.
pub struct CompactionMiddleware {
    compactor: Compactor,
    config: MiddlewareConfig,
    policy: Arc<dyn Policy>,
    observer: Option<Observer>,
    fixed_tokens: u64,
    state: Mutex<State>,
}

impl std::fmt::Debug for CompactionMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionMiddleware")
            .field("compactor", &self.compactor)
            .field("config", &self.config)
            .finish()
    }
}

impl CompactionMiddleware {
    /// A middleware compacting with `compactor` under the default policy
    /// ([`CostAware`](crate::policy::CostAware), rate-limited).
    pub fn new(compactor: Compactor, config: MiddlewareConfig) -> CompactionMiddleware {
        let counter = compactor.counter();
        let fixed_tokens = config.system.as_ref().map_or(0, |system| count_system(counter, system))
            + config.tools.as_deref().map_or(0, |tools| count_tools(counter, tools));
        CompactionMiddleware {
            compactor,
            config,
            policy: Arc::new(default_policy()),
            observer: None,
            fixed_tokens,
            state: Mutex::new(State {
                source_len: 0,
                source_last: 0,
                working: Arc::new(Vec::new()),
                ledger: TokenLedger::new(counter),
                turns_since: 0,
                tokens_at_compaction: 0,
                consecutive: 0,
                calls: 0,
                calibration: 1.0,
                full_summary: None,
                last_estimate: 0,
            }),
        }
    }

    /// Decides with `policy` instead.
    pub fn with_policy(mut self, policy: Arc<dyn Policy>) -> CompactionMiddleware {
        self.policy = policy;
        self
    }

    /// Delivers every compaction event to `observer` (events also go to `tracing`).
    pub fn with_observer(mut self, observer: Observer) -> CompactionMiddleware {
        self.observer = Some(observer);
        self
    }

    /// Corrects the estimate with the provider's count of the last request's input tokens.
    pub fn observe_usage(&self, input_tokens: u64) {
        let mut state = self.lock();
        if state.last_estimate > 0 && input_tokens > 0 {
            let ratio = (input_tokens as f64 / state.last_estimate as f64).clamp(0.5, 2.0);
            state.calibration = 0.5 * state.calibration + 0.5 * ratio;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Brings the working copy up to date with `history`: appends what is new, or starts
    /// over when the history was rewritten. Returns why the store failed, if it did.
    fn sync(&self, state: &mut State, history: &[Message]) -> Option<String> {
        let extends = state.source_len > 0
            && history.len() >= state.source_len
            && message_fingerprint(&history[state.source_len - 1]) == state.source_last;
        let new = if extends {
            &history[state.source_len..]
        } else {
            state.working = Arc::new(Vec::new());
            state.full_summary = None;
            state.turns_since = 0;
            history
        };
        let (added, store_error) = self.clip_ingested(new.to_vec(), state.working.len());
        state.turns_since += added.iter().filter(|message| message.role == Role::User && message.is_authored()).count();
        if !added.is_empty() {
            Arc::make_mut(&mut state.working).extend(added);
        }
        state.source_len = history.len();
        state.source_last = history.last().map_or(0, message_fingerprint);
        if extends {
            state.ledger.sync(&state.working);
        } else {
            state.ledger.resync(&state.working);
        }
        store_error
    }

    /// `messages`, to follow `offset` messages of the working copy, with tool outputs over
    /// `clip_on_ingest` clipped (unchanged when it is off), and why the store failed to keep
    /// the full outputs, if it did.
    fn clip_ingested(&self, messages: Vec<Message>, offset: usize) -> (Vec<Message>, Option<String>) {
        let Some(limit) = self.config.clip_on_ingest else { return (messages, None) };
        let mut incoming = Conversation { messages, ..Conversation::default() };
        let evict = &self.config.compact.evict;
        let config = ClipConfig { preset: evict.preset, recall_tool: evict.recall_tool, ..ClipConfig::new(limit) };
        let mut clipped = clip(&mut incoming, &config, self.compactor.counter());
        clipped.iter_mut().for_each(|item| item.message += offset);
        (incoming.messages, self.store_clipped(&clipped))
    }

    /// Stores the full outputs of `clipped`, when a store is set; returns why it failed.
    fn store_clipped(&self, clipped: &[Clipped]) -> Option<String> {
        let (store, session) = self.compactor.store()?;
        let error = clipped
            .iter()
            .map(|item| store.put_payload(&Payload::from_clipped(session, item)))
            .find_map(Result::err)?;
        tracing::warn!(error = %error, "contextfold could not store a clipped output");
        Some(error.to_string())
    }

    /// Prepares the request for the next call: `history` (the caller's, untouched) plus
    /// `pending` (the new input), compacted first when the policy says so or the request
    /// would overflow the window.
    pub async fn prepare(&self, history: &[Message], pending: &[Message]) -> Prepared {
        let counter = self.compactor.counter();
        let (input, working, pending, pending_tokens, store_error) = {
            let mut state = self.lock();
            let synced = self.sync(&mut state, history);
            // Pending input is ingested too: a huge output never enters the request whole.
            let (pending, clipped) = self.clip_ingested(pending.to_vec(), state.working.len());
            let pending_tokens = count_messages(counter, &pending);
            let estimate = self.fixed_tokens + state.ledger.total() + pending_tokens;
            state.last_estimate = estimate;
            state.calls += 1;
            let input = PolicyInput {
                request_tokens: (estimate as f64 * state.calibration) as u64,
                usable_window: self.config.window.saturating_sub(self.config.output_reserve),
                turns_since: state.turns_since,
                tokens_since: state.ledger.total().saturating_sub(state.tokens_at_compaction),
                consecutive: state.consecutive,
                calls: state.calls,
                target_tokens: self.config.compact.target.tokens(estimate),
            };
            (input, state.working.clone(), pending, pending_tokens, synced.or(clipped))
        };
        let overflow = input.request_tokens > input.usable_window;
        let trigger = match self.policy.decide(&input).await {
            Decision::Compact => Trigger::Auto,
            Decision::Skip(_) if overflow && !self.policy.is_off() => Trigger::Overflow,
            Decision::Skip(reason) => {
                self.lock().consecutive = 0;
                return Prepared {
                    history: working,
                    pending,
                    event: None,
                    request_tokens: input.request_tokens,
                    skipped: Some(reason),
                    store_error,
                };
            }
        };
        let (sent, event) = self.compact_working(&working, trigger, pending_tokens, history).await;
        let request_tokens = self.fixed_tokens + count_messages(counter, &sent) + pending_tokens;
        let store_error = store_error.or_else(|| event.as_ref().and_then(|event| event.store_error.clone()));
        Prepared { history: sent, pending, event, request_tokens, skipped: None, store_error }
    }

    /// Compacts now, whatever the policy says (a user's `/compact`), and returns the
    /// messages that will be sent from now on. A store failure is in the event.
    pub async fn compact_now(&self, history: &[Message]) -> (Vec<Message>, Option<CompactionEvent>) {
        let (working, synced) = {
            let mut state = self.lock();
            let synced = self.sync(&mut state, history);
            (state.working.clone(), synced)
        };
        let (messages, mut event) = self.compact_working(&working, Trigger::Manual, 0, history).await;
        if let (Some(event), Some(error)) = (&mut event, synced) {
            event.store_error.get_or_insert(error);
        }
        (messages.as_ref().clone(), event)
    }

    /// Compacts the working copy and stores the compaction with the caller's `history`.
    async fn compact_working(
        &self,
        working: &Arc<Vec<Message>>,
        trigger: Trigger,
        pending_tokens: u64,
        history: &[Message],
    ) -> (Arc<Vec<Message>>, Option<CompactionEvent>) {
        let mut conversation = Conversation {
            system: self.config.system.clone(),
            messages: working.as_ref().clone(),
            tools: self.config.tools.clone(),
            extra: Default::default(),
        };
        // A summary shortened to fit last time is folded from its full text.
        let full_summary = self.lock().full_summary.take();
        if let Some(full) = &full_summary {
            restore_summary(&mut conversation.messages, full);
        }
        let mut config = self.config.compact.clone();
        // The request must fit with the pending input, whatever the target.
        let usable = self.config.window.saturating_sub(self.config.output_reserve);
        let cap = usable.saturating_sub(pending_tokens);
        config.limit = Some(config.limit.map_or(cap, |limit| limit.min(cap)));
        if trigger == Trigger::Overflow {
            // Aim below the usable window.
            config.target = Target::Budget(config.target.tokens(0).min(cap).max(1));
        }
        let result = match self.compactor.compact_unstored(&conversation, &config, history).await {
            Ok(compacted) => self.compactor.persist(history, compacted),
            Err(err) => Err(err),
        };
        // A compaction the store could not keep is still sent: the caller's history has every
        // payload, and the event says what was not stored.
        let (result, store_error) = match result {
            Err(CompactError::Store { source, compacted }) => (Ok(*compacted), Some(source.to_string())),
            other => (other, None),
        };
        match result {
            Ok(compacted) => {
                let mut event = CompactionEvent::new(trigger, &compacted.report);
                event.store_error = store_error;
                event.trace();
                if let Some(observer) = &self.observer {
                    observer(&event);
                }
                let mut guard = self.lock();
                let state = &mut *guard;
                state.working = Arc::new(compacted.conversation.messages);
                state.full_summary = compacted.full_summary;
                state.ledger.resync(&state.working);
                state.tokens_at_compaction = state.ledger.total();
                state.turns_since = 0;
                state.consecutive += 1;
                (state.working.clone(), Some(event))
            }
            Err(err) => {
                tracing::warn!(error = %err, "contextfold compaction failed; sending the history as it is");
                // The working copy still holds the shortened summary: keep its full text.
                self.lock().full_summary = full_summary;
                (working.clone(), None)
            }
        }
    }

    /// Tokens of one message by this middleware's counter.
    pub fn count(&self, message: &Message) -> u64 {
        count_message(self.compactor.counter(), message)
    }
}
