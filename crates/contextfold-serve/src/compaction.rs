//! The one place the proxy uses the runtime's [`CompactionMiddleware`]: one per conversation,
//! configured with that conversation's system prompt, tools and window.
//!
//! The middleware decides what to send; this module turns its answer into the list (the
//! `messages`, or the Responses API's `input`) to splice into the client's body, written by
//! the client's API's [`Wire`]. When the answer is the client's own history, the
//! client's bytes go out unchanged. Otherwise the newest messages the compaction left as
//! they are go out as the client wrote them (with the cache breakpoints the client put on
//! them now), and the rest, as the middleware keeps them, without breakpoints: a client moves
//! its breakpoints on every call, and stale ones would pile up past the API's four. What the
//! middleware keeps changes only at a compaction, so that rest is the same text on every
//! call until the next one, which keeps the provider's prompt cache warm.

use crate::branches::{Branch, Branches};
use crate::secrets::{self, Secrets};
use crate::state::{Record, Writer};
use crate::store::ProxyStore;
use crate::usage::Dialect;
use crate::window::model_window;
use contextfold::compactor::{Compactor, Strategy, Target};
use contextfold::middleware::{CompactionMiddleware, History, MiddlewareConfig, PrepareError};
use contextfold::store::{Put, SessionId, StoreError, StoredState};
use contextfold_core::hash::message_fingerprint;
use contextfold_core::tokens::{count_messages, count_system, count_tools, TokenCounter};
use contextfold_core::{validate, Conversation, HistoryChain, Message, Problem, System};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How conversations are compacted, shared by all of them.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The compactor each conversation's middleware gets a copy of.
    pub compactor: Compactor,
    /// The window, or `None` to look it up by model.
    pub window: Option<u64>,
    /// Tokens kept free for the answer.
    pub reserve: u64,
    /// The share of the usable window to compact to.
    pub target: f64,
    /// What a compaction may do.
    pub strategy: Strategy,
}

/// How an API's list of messages is written around what the compaction keeps of the client's.
pub trait Wire: Sync {
    /// The list to send: `rewritten` (what the compaction made of the older messages) in the
    /// API's shape, then the client's own text of its messages from `from` on.
    fn join(&self, rewritten: &[&Message], from: usize) -> String;

    /// The API, which says how its answers are read.
    fn dialect(&self) -> Dialect;

    /// What breaks the API's rules in a compacted conversation (checked before it is sent).
    fn problems(&self, conversation: &Conversation) -> Vec<Problem> {
        validate(conversation)
    }
}

/// One request of a conversation, as the compaction needs it.
#[derive(Clone, Copy)]
pub struct Incoming<'r> {
    /// The client's messages, read where they are needed, and their chain (which says which
    /// branch of the conversation they continue).
    pub history: &'r dyn History,
    /// How the API writes them.
    pub wire: &'r dyn Wire,
    /// The system prompt (read when the conversation starts).
    pub system: Option<&'r System>,
    /// The tool definitions (read when the conversation starts).
    pub tools: Option<&'r [Value]>,
    /// The model, for the window.
    pub model: Option<&'r str>,
    /// The `anthropic-beta` header values, for the window.
    pub betas: &'r str,
}

impl<'r> Incoming<'r> {
    /// The parts a stored record's secrets are found in and taken from.
    fn secrets(&self) -> secrets::Sources<'r> {
        secrets::Sources { messages: self.history, system: self.system, tools: self.tools }
    }
}

/// What to send for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The client's body, unchanged.
    Unchanged {
        /// Estimated tokens of the request.
        tokens: u64,
        /// Why the middleware did not compact, when it was asked.
        skipped: Option<String>,
    },
    /// `messages` replaced.
    Rewritten {
        /// The `messages` array to splice in.
        messages: String,
        /// Estimated tokens of the client's request.
        tokens_before: u64,
        /// Estimated tokens of what is sent.
        tokens_after: u64,
        /// What a compaction run for this request did (`evict`, `summarize`, …); `None`
        /// when an earlier compaction is being resent.
        compaction: Option<String>,
    },
    /// The compaction's result broke a rule of the API: the client's body is sent instead.
    Refused {
        /// The first problem.
        why: String,
    },
    /// The client's history could not be read where the compaction needed it: the client's
    /// body is sent instead.
    Unread {
        /// Which message, and why.
        why: String,
    },
}

/// One conversation's state.
pub struct ConversationState {
    middleware: CompactionMiddleware,
    /// How many of the client's messages are counted, and their tokens (for the log's tokens
    /// before): the new ones are counted on each request.
    client: (usize, u64),
    /// Counts them.
    counter: Arc<dyn TokenCounter>,
    /// The recall tool a deferred namespace of its first messages names, once they are all
    /// there ([`crate::mcp::deferred_recall_tool`]).
    deferred: Option<Option<String>>,
    /// How many messages before the middleware's unchanged tail are the client's own, by the
    /// lengths of what was sent and of the client's history before that tail; known until the
    /// next compaction.
    verbatim: Option<((usize, usize), usize)>,
    /// Tokens of the system prompt and tools.
    fixed_tokens: u64,
    /// Requests prepared, so that a count reported late is not taken for a later request's.
    calls: u64,
    /// Whether the last request prepared compacted.
    compacted: bool,
    /// What configured the middleware, for the store's record.
    window: u64,
    /// The store session its compactions go to.
    session: Option<SessionId>,
    /// The history it covers: how many messages, and their chain link.
    covers: (usize, u64),
    /// Tells it from the conversation's other branches.
    id: u64,
    /// Writes its record, and knows where the record's secrets are in the client's requests.
    writer: Writer,
}

/// Which request of which branch an answer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallId {
    /// The branch ([`ConversationState::id`]).
    pub branch: u64,
    /// The number of the request in that branch.
    pub call: u64,
}

/// Numbers the branches of every conversation.
static BRANCHES: AtomicU64 = AtomicU64::new(1);

impl ConversationState {
    /// A state with `window`, `system` and `tools`: its middleware made by `middleware` from
    /// the compactor (keeping compactions in `session`) and the configuration.
    fn build<E>(
        settings: &Settings,
        store: Option<&ProxyStore>,
        session: Option<SessionId>,
        (window, system, tools): (u64, Option<System>, Option<Vec<Value>>),
        middleware: impl FnOnce(Compactor, MiddlewareConfig) -> Result<CompactionMiddleware, E>,
    ) -> Result<ConversationState, E> {
        let mut compactor = settings.compactor.clone();
        if let (Some(store), Some(session)) = (store, &session) {
            compactor = compactor.with_store(store.sessions(), session.clone()).with_session_log();
        }
        let counter = settings.compactor.counter();
        let fixed_tokens = system.as_ref().map_or(0, |system| count_system(counter, system))
            + tools.as_deref().map_or(0, |tools| count_tools(counter, tools));
        let frame = Record::frame(system.as_ref(), tools.as_deref());
        let mut config = MiddlewareConfig::new(window, settings.reserve);
        config.system = system;
        config.tools = tools;
        config.compact.target = Target::Window { window, reserve: settings.reserve, fraction: settings.target };
        config.compact.strategy = settings.strategy;
        Ok(ConversationState {
            middleware: middleware(compactor, config)?,
            client: (0, 0),
            counter: settings.compactor.shared_counter(),
            deferred: None,
            verbatim: None,
            fixed_tokens,
            calls: 0,
            compacted: false,
            window,
            writer: Writer::new(frame, Secrets::default()),
            session,
            covers: (0, HistoryChain::default().last()),
            id: BRANCHES.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// The state of a conversation that starts with `request`; with a `store`, its
    /// compactions are kept there in a new session called `name`.
    async fn new(place: Place<'_>, request: &Incoming<'_>) -> ConversationState {
        let mut session = None;
        if let Some(store) = place.store {
            // On failure (logged by the store) its compactions go unstored.
            session = store.create_session(place.name.to_string()).await.ok();
        }
        let window = place.settings.window.unwrap_or_else(|| model_window(request.model, request.betas));
        let shape = (window, request.system.cloned(), request.tools.map(<[Value]>::to_vec));
        let fresh = |compactor, config| Ok::<_, std::convert::Infallible>(CompactionMiddleware::new(compactor, config));
        match ConversationState::build(place.settings, place.store, session, shape, fresh) {
            Ok(state) => state,
            Err(never) => match never {},
        }
    }

    /// The state the store holds as `stored`, its secrets taken from `request`.
    fn restore(
        settings: &Settings,
        store: &ProxyStore,
        stored: &StoredState,
        request: &Incoming<'_>,
    ) -> Result<ConversationState, String> {
        let mut secrets = Secrets::default();
        let mut record = Record::from_bytes(&stored.bytes, &mut secrets, request.secrets())?;
        let (system, tools) = record.system_and_tools()?;
        let frame = std::mem::take(&mut record.frame);
        let covers = (record.middleware.source_len(), record.middleware.source_chain());
        let restore = |compactor, config| {
            CompactionMiddleware::restore(compactor, config, record.middleware).map_err(|err| err.to_string())
        };
        let mut state =
            ConversationState::build(settings, Some(store), record.session, (record.window, system, tools), restore)?;
        state.covers = covers;
        state.writer = Writer::new(frame, secrets);
        Ok(state)
    }

    /// The record of this state, for the store, sealed with the secrets of `request`.
    async fn record(&mut self, request: Option<secrets::Sources<'_>>) -> Result<Vec<u8>, String> {
        let (middleware, made) = self.middleware.snapshot_since(self.writer.made()).await;
        self.writer.write(self.session.clone(), self.window, middleware, made, request)
    }

    /// Writes this state over version `expected` of the conversation's record; `Moved` when
    /// another replica wrote first. The secrets of its messages are taken out
    /// ([`crate::secrets`]): `request` is the one just prepared, if any, where they are found. A
    /// failure is logged (by the store, when it is the store's).
    pub async fn save(
        &mut self,
        store: &ProxyStore,
        key: &str,
        expected: u64,
        request: Option<secrets::Sources<'_>>,
    ) -> Result<Put, StoreError> {
        let bytes = self.record(request).await.map_err(|why| {
            tracing::warn!(error = %why, "contextfold serve: the conversation's state could not be written down");
            StoreError::Invalid(why)
        })?;
        store.save(key, expected, bytes).await
    }

    /// The tokens of the client's `history`, which continues this branch: only the messages
    /// not counted before are read and counted.
    fn count_client(&mut self, history: &dyn History) -> u64 {
        let (counted, tokens) = self.client;
        let (from, tokens) = if counted <= history.len() { (counted, tokens) } else { (0, 0) };
        if let Ok(new) = history.messages_from(from) {
            self.client = (history.len(), tokens + count_messages(self.counter.as_ref(), &new));
        }
        self.client.1
    }

    /// The recall tool a deferred namespace in the first messages of `history` names; read
    /// again only until those messages are all there.
    fn deferred_recall_tool(&mut self, history: &dyn History) -> Option<String> {
        if let Some(known) = &self.deferred {
            return known.clone();
        }
        let named = crate::mcp::deferred_recall_tool(history);
        if history.len() >= crate::mcp::DEFERRED_MESSAGES {
            self.deferred = Some(named.clone());
        }
        named
    }

    /// Its window, in tokens.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The tokens of its system prompt and tools.
    pub fn fixed_tokens(&self) -> u64 {
        self.fixed_tokens
    }

    /// Calibrates the estimate with the provider's count of the input tokens of request
    /// `call`, when it is still the last one prepared and it did not compact (the
    /// middleware compares the count with the estimate it made before compacting); returns
    /// whether it did.
    pub fn observe_usage(&self, call: u64, input_tokens: u64) -> bool {
        let applies = call == self.calls && !self.compacted && input_tokens > 0;
        if applies {
            self.middleware.observe_usage(input_tokens);
        }
        applies
    }
}

/// Where a conversation is, for its state.
#[derive(Clone, Copy)]
pub struct Place<'a> {
    /// How conversations are compacted.
    pub settings: &'a Settings,
    /// The store, when there is one.
    pub store: Option<&'a ProxyStore>,
    /// The name of the conversation's session in the store.
    pub name: &'a str,
    /// The key of its state in the store.
    pub key: &'a str,
}

impl Branch for ConversationState {
    fn id(&self) -> u64 {
        self.id
    }

    /// A history with `chain` continues this branch when it holds every message the branch
    /// covers, each as it was.
    fn continued_by(&self, chain: &HistoryChain) -> bool {
        chain.prefix(self.covers.0) == Some(self.covers.1)
    }

    fn covered(&self) -> usize {
        self.covers.0
    }

    fn session(&self) -> Option<&SessionId> {
        self.session.as_ref()
    }
}

/// Brings `branches` up to the store's version of the conversation: when another process
/// wrote a newer record and it is the branch `request` continues, it is held in place of this
/// process's (its secrets taken from `request`); a record of another branch is only noted.
async fn refresh(
    branches: &mut Branches<ConversationState>,
    place: Place<'_>,
    store: &ProxyStore,
    request: &Incoming<'_>,
) {
    // On failure (logged by the store) it goes on from memory.
    let Ok(version) = store.version(place.key).await else { return };
    if version == 0 || version == branches.version {
        return;
    }
    let stored = match store.load(place.key).await {
        Ok(Some(stored)) => stored,
        Ok(None) => {
            // Deleted since: written afresh.
            branches.version = 0;
            return;
        }
        Err(_) => {
            // Unreadable (a damaged record, logged by the store): it goes on from memory, and
            // its state is written over that version rather than never written again.
            branches.version = version;
            return;
        }
    };
    branches.version = stored.version;
    match ConversationState::restore(place.settings, store, &stored, request) {
        Ok(state) if state.continued_by(request.history.chain()) => branches.adopt(state),
        Ok(_) => {}
        Err(why) => tracing::warn!(error = %why, "contextfold serve: the stored conversation state is not usable"),
    }
}

/// How often a request is prepared again when another replica wrote the conversation's state
/// first (only where the store cannot lock, replicas on one SQLite file).
const ATTEMPTS: usize = 3;

/// Decides what to send for `request`, with the branch of the conversation it continues
/// (created when it continues none, or read from the store when another process went on
/// with it).
pub async fn prepare(
    branches: &mut Branches<ConversationState>,
    place: Place<'_>,
    request: &Incoming<'_>,
) -> (Outcome, CallId) {
    let Some(store) = place.store else {
        let (outcome, call, _) = prepare_once(branches, place, request).await;
        return (outcome, call);
    };
    // Without the lock (the store failed, and said so) the compare-and-swap still guards.
    let _lock = store.lock(place.key).await.ok();
    let mut attempt = 1;
    loop {
        refresh(branches, place, store, request).await;
        let (outcome, call, fresh) = prepare_once(branches, place, request).await;
        let expected = branches.version;
        let Some(state) = branches.get_mut(call.branch) else { return (outcome, call) };
        match state.save(store, place.key, expected, Some(request.secrets())).await {
            Ok(Put::Written(version)) => {
                branches.version = version;
                return (outcome, call);
            }
            Ok(Put::Moved(_)) if attempt < ATTEMPTS => {
                if let (true, Some(session)) = (fresh, state.session.clone()) {
                    let _ = store.delete_session(session).await;
                }
                branches.clear();
                attempt += 1;
            }
            Ok(Put::Moved(_)) => {
                // Sent as prepared; the next request reads the store's state again.
                branches.version = 0;
                return (outcome, call);
            }
            Err(err) => return (not_stored(outcome, &crate::store::named(store.location(), &err)), call),
        }
    }
}

/// `outcome`, whose conversation state the store could not keep: a compaction's note says so
/// (the store logs the failure itself, at most once a minute).
fn not_stored(outcome: Outcome, why: &str) -> Outcome {
    match outcome {
        Outcome::Rewritten { messages, tokens_before, tokens_after, compaction: Some(note) }
            if !note.contains("not stored") =>
        {
            let compaction = Some(format!("{note}; not stored: {why}"));
            Outcome::Rewritten { messages, tokens_before, tokens_after, compaction }
        }
        outcome => outcome,
    }
}

/// Decides what to send for `request` with the branch it continues, or a new one; and
/// whether the branch is new.
async fn prepare_once(
    branches: &mut Branches<ConversationState>,
    place: Place<'_>,
    request: &Incoming<'_>,
) -> (Outcome, CallId, bool) {
    let history = request.history;
    let (state, fresh) = match branches.take_continued(history.chain()) {
        Some(state) => (state, false),
        None => (ConversationState::new(place, request).await, true),
    };
    let state = branches.put(state);
    state.calls += 1;
    let call = CallId { branch: state.id, call: state.calls };
    // The tools a request carries name the recall tool when an MCP client has connected it.
    let recall_tool = request.tools.and_then(crate::mcp::recall_tool_name);
    let recall_tool = recall_tool.or_else(|| state.deferred_recall_tool(history));
    state.middleware.set_recall_tool(recall_tool);
    let prepared = state.middleware.prepare_history(history, &[]).await;
    if let Some(PrepareError::History(error)) = &prepared.error {
        state.covers = (0, HistoryChain::default().last());
        state.client = (0, 0);
        return (Outcome::Unread { why: error.to_string() }, call, fresh);
    }
    state.covers = (history.len(), history.chain().last());
    let tokens_before = state.count_client(history);
    let compaction = prepared.event.as_ref().map(|event| match &event.store_error {
        Some(error) => format!("{}; not stored: {error}", event.strategy),
        None => event.strategy.to_string(),
    });
    state.compacted = compaction.is_some();
    if state.compacted {
        state.verbatim = None;
    }
    let sent: Vec<&Message> = prepared.iter().collect();
    // The newest messages the middleware holds as the client gave them need no comparing.
    let same = if prepared.pending.is_empty() { prepared.unchanged_tail.min(sent.len()).min(history.len()) } else { 0 };
    let before = (sent.len() - same, history.len() - same);
    let verbatim = match state.verbatim {
        Some((lengths, verbatim)) if lengths == before => verbatim,
        _ => kept_tail(&sent[..before.0], history, before.1),
    };
    state.verbatim = Some((before, verbatim));
    let kept = same + verbatim;
    if kept == sent.len() && kept == history.len() {
        let outcome = Outcome::Unchanged { tokens: prepared.request_tokens, skipped: prepared.skipped };
        return (outcome, call, fresh);
    }
    let conversation = Conversation { messages: prepared.messages(), ..Default::default() };
    if let Some(problem) = request.wire.problems(&conversation).into_iter().next() {
        return (Outcome::Refused { why: problem.to_string() }, call, fresh);
    }
    let outcome = Outcome::Rewritten {
        messages: request.wire.join(&sent[..sent.len() - kept], history.len() - kept),
        tokens_before: state.fixed_tokens + tokens_before,
        tokens_after: prepared.request_tokens,
        compaction,
    };
    (outcome, call, fresh)
}

/// How many of the newest messages `sent` and the client's first `end` messages share, by
/// content (cache breakpoints aside). Most are equal as they are, which is cheaper to see
/// than their fingerprints (which leave the breakpoints out). A client message is read only
/// when it is compared.
fn kept_tail(sent: &[&Message], client: &dyn History, end: usize) -> usize {
    sent.iter()
        .rev()
        .zip((0..end).rev())
        .take_while(|(&sent, index)| {
            client
                .message(*index)
                .is_ok_and(|client| *sent == *client || message_fingerprint(sent) == message_fingerprint(&client))
        })
        .count()
}
