//! The middleware: runs before each LLM call and decides what to send.
//!
//! [`CompactionMiddleware::prepare`] never touches the caller's history (invariant 4): it
//! keeps its own working copy, which it extends with the messages appended since the last
//! call. Its decisions are stable across calls, the way a real agent's context is: what was
//! evicted stays evicted and a summary stays until the next compaction, so the request
//! prefix (and the provider's prompt cache) is unchanged between compactions. Token counts
//! are memoised per message, so a call that does not compact costs the new messages only.
//!
//! One middleware serves one conversation, and it is cheap to create (a proxy makes one per
//! conversation, with that conversation's system prompt and tools). Calls for it are
//! serialized: a `prepare` holds the conversation's state from the moment it reads it until
//! its compaction (if any) is in place, so two concurrent calls never both compact nor
//! interleave their updates; the second sees what the first did. [`snapshot`] and
//! [`restore`] carry the state to another process.
//!
//! With a store on its compactor ([`Compactor::with_store`]), each compaction is stored with
//! the caller's history (not the working copy), and outputs clipped on ingest are stored as
//! they are clipped, so every ref the model is shown can be recalled.
//!
//! [`snapshot`]: CompactionMiddleware::snapshot
//! [`restore`]: CompactionMiddleware::restore

mod config;
mod history;
mod ingest;
mod located;
mod state;

pub use config::{MiddlewareConfig, MiddlewareConfigBuilder, DEFAULT_TARGET};
pub use history::{History, HistoryError, Whole};
pub use state::{MiddlewareState, StateError, STATE_VERSION};

use crate::compactor::{replaced_results, restore_summary, CompactError, Compactor, Target};
use crate::event::{CompactionEvent, Event, FailedCompaction, Trigger};
use crate::policy::{default_policy, Confirm, Decision, Policy, PolicyInput};
use crate::store::StoreError;
use contextfold_core::tokens::{count_message, count_messages, count_system, count_tools, TokenLedger};
use contextfold_core::{Conversation, HistoryChain, Message};
use state::{Calibration, State};
use std::sync::{Arc, Mutex};

/// What to send, and what happened.
#[derive(Debug)]
pub struct Prepared {
    /// The (possibly compacted) history to send, shared with the middleware's working copy
    /// so that a call without compaction copies nothing.
    pub history: Arc<Vec<Message>>,
    /// The pending input, sent after the history (clipped on ingest when configured).
    pub pending: Vec<Message>,
    /// How many of the newest messages of `history` are the caller's own, exactly as it gave
    /// them (those before were made by a compaction or clipped on ingest): a caller that sends
    /// its own text for those need not compare them.
    pub unchanged_tail: usize,
    /// The compaction, if one ran.
    pub event: Option<CompactionEvent>,
    /// Estimated tokens of the request (calibrated by reported usage).
    pub request_tokens: u64,
    /// Why no compaction ran, when the policy was asked and declined.
    pub skipped: Option<String>,
    /// What went wrong, when something did. The request is sendable all the same: after a
    /// failed compaction it is the history as it was, and after a store failure it is the
    /// compaction, whose removed payloads may then not be recallable.
    pub error: Option<PrepareError>,
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

/// What went wrong while preparing a request that is still sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    /// The compaction failed; the history was sent as it was.
    #[error("the compaction failed, so the history was sent as it is: {0}")]
    Compaction(CompactError),
    /// The store could not keep what was removed (a compaction, or outputs clipped on
    /// ingest); the request went out, but the removed payloads may not be recallable.
    #[error("the store could not keep what was removed from the request: {0}")]
    Store(StoreError),
    /// The caller's history could not be read where the middleware needed it: the history
    /// sent is the working copy as it was, and the next call starts afresh.
    #[error("{0}")]
    History(HistoryError),
}

/// An observer of the middleware's events.
pub type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

/// Compacts the history of one conversation before each LLM call, under a policy.
pub struct CompactionMiddleware {
    compactor: Compactor,
    config: MiddlewareConfig,
    policy: Arc<dyn Policy>,
    confirm: Option<Confirm>,
    observer: Option<Observer>,
    fixed_tokens: u64,
    /// Held by a call from reading the state to putting its compaction in place.
    state: tokio::sync::Mutex<State>,
    /// Apart from `state`, so that usage can be reported while a compaction runs.
    calibration: Mutex<Calibration>,
    /// The recall tool the pointers written from now on name (at first the config's).
    recall_tool: Mutex<Option<String>>,
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
    /// ([`CostAware`](crate::policy::CostAware), rate-limited). Cheap: it counts the system
    /// prompt and tools once, nothing else.
    pub fn new(compactor: Compactor, config: MiddlewareConfig) -> CompactionMiddleware {
        let ledger = TokenLedger::shared(compactor.shared_counter());
        let state = State {
            source_len: 0,
            source_chain: HistoryChain::default().last(),
            working: Arc::new(Vec::new()),
            compacted: 0,
            compacted_source: 0,
            ledger,
            turns_since: 0,
            tokens_at_compaction: 0,
            consecutive: 0,
            calls: 0,
            full_summary: None,
            logged: 0,
            made: state::next_made(),
        };
        CompactionMiddleware::with_state(compactor, config, state, Calibration::default())
    }

    /// A middleware that goes on from `state`, a [`snapshot`](CompactionMiddleware::snapshot)
    /// of one built with the same compactor and config (and then given the same policy):
    /// given the next request, it sends what that one would have sent.
    pub fn restore(
        compactor: Compactor,
        config: MiddlewareConfig,
        state: MiddlewareState,
    ) -> Result<CompactionMiddleware, StateError> {
        let (state, calibration) = state.into_state(TokenLedger::shared(compactor.shared_counter()))?;
        Ok(CompactionMiddleware::with_state(compactor, config, state, calibration))
    }

    fn with_state(
        compactor: Compactor,
        config: MiddlewareConfig,
        state: State,
        calibration: Calibration,
    ) -> CompactionMiddleware {
        let counter = compactor.counter();
        let fixed_tokens = config.system.as_ref().map_or(0, |system| count_system(counter, system))
            + config.tools.as_deref().map_or(0, |tools| count_tools(counter, tools));
        CompactionMiddleware {
            compactor,
            recall_tool: Mutex::new(config.compact.evict.recall_tool.clone()),
            config,
            policy: Arc::new(default_policy()),
            confirm: None,
            observer: None,
            fixed_tokens,
            state: tokio::sync::Mutex::new(state),
            calibration: Mutex::new(calibration),
        }
    }

    /// Decides with `policy` instead.
    pub fn with_policy(mut self, policy: Arc<dyn Policy>) -> CompactionMiddleware {
        self.policy = policy;
        self
    }

    /// Asks `confirm` before each compaction the policy decides on (default: nobody is
    /// asked). A declined compaction is skipped, unless the request would overflow.
    pub fn with_confirmation(mut self, confirm: Confirm) -> CompactionMiddleware {
        self.confirm = Some(confirm);
        self
    }

    /// Delivers every event to `observer` (events also go to `tracing`).
    pub fn with_observer(mut self, observer: Observer) -> CompactionMiddleware {
        self.observer = Some(observer);
        self
    }

    /// The state, once the calls in flight are done: restore it with
    /// [`CompactionMiddleware::restore`]. It holds the messages compactions made, not the
    /// caller's messages since: the restored middleware takes those from the next history.
    pub async fn snapshot(&self) -> MiddlewareState {
        let state = self.state.lock().await;
        MiddlewareState::of(&state, *self.calibration(), true)
    }

    /// A snapshot, and the number naming its messages that compactions made (new whenever
    /// they change, unique in the process). When that number is `known`, the snapshot leaves
    /// those messages out ([`MiddlewareState::working`] is empty): a caller that writes
    /// snapshots down often keeps the messages it wrote under that number, and writes only
    /// the counters again. Restore only a snapshot with its messages put back.
    pub async fn snapshot_since(&self, known: Option<u64>) -> (MiddlewareState, u64) {
        let state = self.state.lock().await;
        (MiddlewareState::of(&state, *self.calibration(), known != Some(state.made)), state.made)
    }

    /// Corrects the estimate with the provider's count of the last request's input tokens.
    pub fn observe_usage(&self, input_tokens: u64) {
        let mut calibration = self.calibration();
        if calibration.last_estimate > 0 && input_tokens > 0 {
            let ratio = (input_tokens as f64 / calibration.last_estimate as f64).clamp(0.5, 2.0);
            calibration.ratio = 0.5 * calibration.ratio + 0.5 * ratio;
        }
    }

    /// Names the recall tool the model has now (`None`: it has none) in the pointers, clip
    /// markers and summary written from now on, in place of
    /// [`EvictConfig::recall_tool`](contextfold_core::evict::EvictConfig::recall_tool): a
    /// client whose tools change between calls (an MCP server that connects late) gets
    /// pointers that name the tool once it has it. What was written before stays as it was,
    /// so the prefix does not change between compactions.
    pub fn set_recall_tool(&self, name: Option<String>) {
        *self.recall_tool.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = name;
    }

    fn recall_tool(&self) -> Option<String> {
        self.recall_tool.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn calibration(&self) -> std::sync::MutexGuard<'_, Calibration> {
        self.calibration.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Prepares the request for the next call: `history` (the caller's, untouched) plus
    /// `pending` (the new input), compacted first when the policy says so (and the
    /// confirmation agrees) or the request would overflow the window.
    ///
    /// A history continues the last one only when each message the middleware covers is the
    /// one it was given; anything else (another conversation, an edited or rewound history)
    /// starts afresh. To see it, every message is fingerprinted on every call: a caller that
    /// keeps its history's [`HistoryChain`] as it grows calls
    /// [`prepare_with_chain`](CompactionMiddleware::prepare_with_chain) and pays for the
    /// new messages only.
    pub async fn prepare(&self, history: &[Message], pending: &[Message]) -> Prepared {
        self.prepare_with_chain(history, &HistoryChain::of(history), pending).await
    }

    /// [`prepare`](CompactionMiddleware::prepare) with `chain`, the chain of `history` (one
    /// that does not cover exactly `history` is made again from it).
    pub async fn prepare_with_chain(&self, history: &[Message], chain: &HistoryChain, pending: &[Message]) -> Prepared {
        let made;
        let chain = if chain.len() == history.len() {
            chain
        } else {
            made = HistoryChain::of(history);
            &made
        };
        self.prepare_history(&Whole::new(history, chain), pending).await
    }

    /// [`prepare`](CompactionMiddleware::prepare) of a [`History`] read only from where it is
    /// needed: a call that continues the last reads the new messages alone (a compaction may
    /// read further back, to fold payloads an earlier pass replaced). When the history
    /// cannot give a message it is asked for, the working copy goes out as it was, with the
    /// error, and the next call starts afresh.
    pub async fn prepare_history(&self, history: &dyn History, pending: &[Message]) -> Prepared {
        let counter = self.compactor.counter();
        let mut state = self.state.lock().await;
        let synced = match self.sync(&mut state, history).await {
            Ok(synced) => synced,
            Err(error) => return self.unread(&mut state, pending, error),
        };
        // Pending input is ingested too: a huge output never enters the request whole.
        let (pending, clipped) = self.clip_ingested(pending.to_vec(), history.len()).await;
        let store_error = synced.or(clipped).map(PrepareError::Store);
        let pending_tokens = count_messages(counter, &pending);
        let estimate = self.fixed_tokens + state.ledger.total() + pending_tokens;
        state.calls += 1;
        let ratio = {
            let mut calibration = self.calibration();
            calibration.last_estimate = estimate;
            calibration.ratio
        };
        let input = PolicyInput {
            request_tokens: (estimate as f64 * ratio) as u64,
            usable_window: self.config.usable_window(),
            turns_since: state.turns_since,
            tokens_since: state.ledger.total().saturating_sub(state.tokens_at_compaction),
            consecutive: state.consecutive,
            calls: state.calls,
            fixed_tokens: self.fixed_tokens,
            target_tokens: self.config.compact.target.tokens_after(estimate, self.fixed_tokens),
        };
        let overflow = input.request_tokens > input.usable_window;
        // Why not to compact, and whether an overflow overrides it.
        let declined = match self.policy.decide(&input) {
            Decision::Never(reason) => Some((reason, false)),
            Decision::Skip(reason) => Some((reason, true)),
            Decision::Compact => match &self.confirm {
                Some(confirm) if !confirm.ask(input).await => Some(("the confirmation callback declined".into(), true)),
                _ => None,
            },
        };
        let trigger = match declined {
            None => Trigger::Auto,
            Some((_, true)) if overflow => Trigger::Overflow,
            Some((reason, _)) => {
                state.consecutive = 0;
                return Prepared {
                    history: state.working.clone(),
                    unchanged_tail: self.unchanged_tail(&state),
                    pending,
                    event: None,
                    request_tokens: input.request_tokens,
                    skipped: Some(reason),
                    error: store_error,
                };
            }
        };
        let (event, error) = self.compact_working(&mut state, trigger, pending_tokens, history).await;
        let request_tokens = self.fixed_tokens + state.ledger.total() + pending_tokens;
        let skipped = (event.is_none() && error.is_none()).then(|| {
            if overflow {
                format!(
                    "nothing can be cut: the request stays at about {} tokens, over the usable window of {}",
                    input.request_tokens, input.usable_window
                )
            } else {
                "the compaction found nothing to do: the history is within its target".to_string()
            }
        });
        Prepared {
            history: state.working.clone(),
            unchanged_tail: self.unchanged_tail(&state),
            pending,
            event,
            request_tokens,
            skipped,
            error: error.or(store_error),
        }
    }

    /// Compacts now, whatever the policy says (a user's `/compact`); the history is sent as
    /// the result holds it from now on.
    pub async fn compact_now(&self, history: &[Message]) -> Prepared {
        let mut state = self.state.lock().await;
        let chain = HistoryChain::of(history);
        let history = Whole::new(history, &chain);
        let synced = match self.sync(&mut state, &history).await {
            Ok(synced) => synced.map(PrepareError::Store),
            Err(error) => return self.unread(&mut state, &[], error),
        };
        let (event, error) = self.compact_working(&mut state, Trigger::Manual, 0, &history).await;
        Prepared {
            history: state.working.clone(),
            unchanged_tail: self.unchanged_tail(&state),
            pending: Vec::new(),
            event,
            request_tokens: self.fixed_tokens + state.ledger.total(),
            skipped: None,
            error: error.or(synced),
        }
    }

    /// Compacts the working copy and stores the compaction with the caller's `history`; the
    /// event of a compaction that changed something (an automatic one that would change
    /// nothing leaves the working copy as it is and has none), and what went wrong.
    async fn compact_working(
        &self,
        state: &mut State,
        trigger: Trigger,
        pending_tokens: u64,
        history: &dyn History,
    ) -> (Option<CompactionEvent>, Option<PrepareError>) {
        let mut conversation = Conversation {
            system: self.config.system.clone(),
            messages: state.working.as_ref().clone(),
            tools: self.config.tools.clone(),
            extra: Default::default(),
        };
        // A summary shortened to fit last time is folded from its full text.
        let full_summary = state.full_summary.take();
        if let Some(full) = &full_summary {
            restore_summary(&mut conversation.messages, full);
        }
        let mut config = self.config.compact.clone();
        config.evict.recall_tool = self.recall_tool();
        // The request must fit with the pending input, whatever the target.
        let cap = self.config.usable_window().saturating_sub(pending_tokens).max(1);
        config.limit = Some(config.limit.map_or(cap, |limit| limit.min(cap)));
        if trigger == Trigger::Overflow || config.target.fixed_tokens().is_some_and(|target| target > cap) {
            // Aim below the usable window.
            config.target = Target::Budget(config.target.tokens(0).min(cap).max(1));
        }
        // The caller's messages are read back only when a fold may need them: all of them to
        // be stored with the compaction, else those that hold the payloads an earlier pass
        // replaced.
        let replaced = replaced_results(&conversation.messages);
        let originals = match self.compactor.stores_history_with_compactions() {
            true => history.messages_from(0),
            false if replaced.is_empty() => Ok(std::borrow::Cow::Borrowed(&[][..])),
            false => history::originals_of(history, replaced).map(std::borrow::Cow::Owned),
        };
        let originals = match originals {
            Ok(originals) => originals,
            Err(error) => {
                state.full_summary = full_summary;
                return (None, Some(PrepareError::History(error)));
            }
        };
        let result = match self.compactor.compact_unstored(&conversation, &config, &originals).await {
            Ok(compacted) if trigger != Trigger::Manual && compacted.report.strategy_used.0.is_empty() => {
                // Nothing to do by the compactor's count (the policy saw the calibrated
                // one): the working copy stays as it is sent, shortened summary and all, so
                // the prefix and the provider's cache are kept. (A compaction asked for by
                // hand is kept and reported all the same.)
                state.full_summary = full_summary;
                return (None, None);
            }
            Ok(mut compacted) => {
                let (input, output) = (&conversation.messages, &compacted.conversation.messages);
                if let Err(error) = located::locate_removed(state, input, output, &mut compacted.report, history) {
                    tracing::warn!(error = %error, "contextfold could not place the removed payloads in the caller's history");
                }
                self.compactor.persist(&originals, compacted).await
            }
            Err(err) => Err(err),
        };
        // A compaction the store could not keep is still sent: the caller's history has every
        // payload, and the event says what was not stored.
        let (compacted, store_error) = match result {
            Ok(compacted) => (compacted, None),
            Err(CompactError::Store { source, compacted }) => (*compacted, Some(source)),
            Err(err) => {
                // The working copy still holds the shortened summary: keep its full text.
                state.full_summary = full_summary;
                let request_tokens = self.fixed_tokens + state.ledger.total() + pending_tokens;
                self.emit(Event::Failed(FailedCompaction { trigger, request_tokens, error: err.to_string() }));
                return (None, Some(PrepareError::Compaction(err)));
            }
        };
        let mut event = CompactionEvent::new(trigger, &compacted.report);
        event.store_error = store_error.as_ref().map(ToString::to_string);
        self.emit(Event::Compacted(event.clone()));
        state.working = Arc::new(compacted.conversation.messages);
        state.compacted = state.working.len();
        state.made = state::next_made();
        state.compacted_source = state.source_len;
        state.full_summary = compacted.full_summary;
        state.ledger.resync(&state.working);
        state.tokens_at_compaction = state.ledger.total();
        state.turns_since = 0;
        state.consecutive += 1;
        (Some(event), store_error.map(PrepareError::Store))
    }

    /// What is sent when the caller's history could not be read: the working copy as it
    /// was, and the error. The state forgets what it covered, so the next call starts afresh.
    fn unread(&self, state: &mut State, pending: &[Message], error: HistoryError) -> Prepared {
        tracing::warn!(error = %error, "contextfold could not read the caller's history");
        state.source_len = 0;
        let request_tokens =
            self.fixed_tokens + state.ledger.total() + count_messages(self.compactor.counter(), pending);
        Prepared {
            history: state.working.clone(),
            unchanged_tail: 0,
            pending: pending.to_vec(),
            event: None,
            request_tokens,
            skipped: None,
            error: Some(PrepareError::History(error)),
        }
    }

    /// How many of the working copy's newest messages are the caller's, as it gave them.
    fn unchanged_tail(&self, state: &State) -> usize {
        match self.config.clip_on_ingest {
            Some(_) => 0,
            None => state.working.len().saturating_sub(state.compacted),
        }
    }

    /// Traces `event` and hands it to the observer.
    fn emit(&self, event: Event) {
        event.trace();
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }

    /// Tokens of one message by this middleware's counter.
    pub fn count(&self, message: &Message) -> u64 {
        count_message(self.compactor.counter(), message)
    }
}
