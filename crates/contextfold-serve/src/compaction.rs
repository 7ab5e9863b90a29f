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

use crate::body::join_messages;
use crate::secrets::{self, Secrets};
use crate::state::Record;
use crate::store::ProxyStore;
use crate::usage::Dialect;
use crate::window::model_window;
use contextfold::compactor::{Compactor, Strategy, Target};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig};
use contextfold::store::{Put, SessionId, StoreError, StoredState};
use contextfold_core::hash::message_fingerprint;
use contextfold_core::tokens::{count_system, count_tools};
use contextfold_core::{validate, Conversation, Message, Problem, System, TokenLedger};
use serde_json::Value;
use std::borrow::Cow;

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

/// The Messages API's `messages`: one entry a message; the rewritten ones lose their cache
/// breakpoints.
pub struct MessagesWire<'r> {
    /// The client's messages as it wrote them.
    pub raw: &'r [&'r str],
}

impl Wire for MessagesWire<'_> {
    fn join(&self, rewritten: &[&Message], from: usize) -> String {
        let rewritten = rewritten.iter().map(|message| {
            let mut value = message.to_value();
            strip_cache_control(&mut value);
            Cow::Owned(value.to_string())
        });
        let verbatim = self.raw[from.min(self.raw.len())..].iter().map(|raw| Cow::Borrowed(*raw));
        join_messages(rewritten.chain(verbatim))
    }

    fn dialect(&self) -> Dialect {
        Dialect::Anthropic
    }
}

/// One request of a conversation, as the compaction needs it.
#[derive(Clone, Copy)]
pub struct Request<'r> {
    /// The client's messages.
    pub messages: &'r [Message],
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

impl<'r> Request<'r> {
    /// The parts a stored record's secrets are found in and taken from.
    fn secrets(&self) -> secrets::Request<'r> {
        secrets::Request { messages: self.messages, system: self.system, tools: self.tools }
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
}

/// One conversation's state.
pub struct ConversationState {
    middleware: CompactionMiddleware,
    /// The client's history, counted incrementally (for the log's tokens before).
    client: TokenLedger<'static>,
    /// Tokens of the system prompt and tools.
    fixed_tokens: u64,
    /// Requests prepared, so that a count reported late is not taken for a later request's.
    calls: u64,
    /// Whether the last request prepared compacted.
    compacted: bool,
    /// What configured the middleware, for the store's record.
    window: u64,
    frame: Value,
    /// The store session its compactions go to.
    session: Option<SessionId>,
    /// The version of the stored state this one is (0: none stored).
    version: u64,
    /// Where the secrets of its record are in the client's requests.
    secrets: Secrets,
}

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
            compactor = compactor.with_store(store.sessions(), session.clone());
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
            client: TokenLedger::shared(settings.compactor.shared_counter()),
            fixed_tokens,
            calls: 0,
            compacted: false,
            window,
            frame,
            session,
            version: 0,
            secrets: Secrets::default(),
        })
    }

    /// The state of a conversation that starts with `request`; with a `store`, its
    /// compactions are kept there in a new session called `name`.
    async fn new(place: Place<'_>, request: &Request<'_>) -> ConversationState {
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
        request: &Request<'_>,
    ) -> Result<ConversationState, String> {
        let mut secrets = Secrets::default();
        let record = Record::from_bytes(&stored.bytes, &mut secrets, request.secrets())?;
        let (system, tools) = record.system_and_tools()?;
        let restore = |compactor, config| {
            CompactionMiddleware::restore(compactor, config, record.middleware).map_err(|err| err.to_string())
        };
        let mut state =
            ConversationState::build(settings, Some(store), record.session, (record.window, system, tools), restore)?;
        state.version = stored.version;
        state.secrets = secrets;
        Ok(state)
    }

    /// The record of this state, for the store, sealed with the secrets of `request`.
    async fn record(&mut self, request: Option<secrets::Request<'_>>) -> Result<Vec<u8>, String> {
        let record = Record {
            session: self.session.clone(),
            window: self.window,
            frame: self.frame.clone(),
            middleware: self.middleware.snapshot().await,
        };
        record.to_bytes(&mut self.secrets, request)
    }

    /// Writes this state over the version it came from; `Moved` when another replica wrote
    /// first. The secrets of its messages are taken out ([`crate::secrets`]): `request` is the
    /// one just prepared, if any, where they are found. A failure is logged (by the store, when
    /// it is the store's).
    pub async fn save(
        &mut self,
        store: &ProxyStore,
        key: &str,
        request: Option<secrets::Request<'_>>,
    ) -> Result<Put, StoreError> {
        let bytes = self.record(request).await.map_err(|why| {
            tracing::warn!(error = %why, "contextfold serve: the conversation's state could not be written down");
            StoreError::Invalid(why)
        })?;
        let put = store.save(key, self.version, bytes).await?;
        if let Put::Written(version) = put {
            self.version = version;
        }
        Ok(put)
    }

    /// The number of the request last prepared.
    pub fn calls(&self) -> u64 {
        self.calls
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

/// Brings `slot` up to the store's version of the conversation: kept when it is that
/// version, read from the store when another process wrote a newer one (its secrets taken
/// from `request`).
async fn refresh(slot: &mut Option<ConversationState>, place: Place<'_>, store: &ProxyStore, request: &Request<'_>) {
    // On failure (logged by the store) it goes on from memory.
    let Ok(version) = store.version(place.key).await else { return };
    let held = slot.as_ref().map_or(0, |state| state.version);
    if version == 0 || version == held {
        return;
    }
    let Ok(Some(stored)) = store.load(place.key).await else { return };
    let restored = ConversationState::restore(place.settings, store, &stored, request);
    match restored {
        Ok(state) => *slot = Some(state),
        Err(why) => tracing::warn!(error = %why, "contextfold serve: the stored conversation state is not usable"),
    }
}

/// How often a request is prepared again when another replica wrote the conversation's state
/// first (only where the store cannot lock, replicas on one SQLite file).
const ATTEMPTS: usize = 3;

/// Decides what to send for `request`, with the conversation's state in `slot` (created
/// on its first request, or read from the store when another process went on with it).
pub async fn prepare(slot: &mut Option<ConversationState>, place: Place<'_>, request: &Request<'_>) -> Outcome {
    let Some(store) = place.store else { return prepare_once(slot, place, request).await };
    // Without the lock (the store failed, and said so) the compare-and-swap still guards.
    let _lock = store.lock(place.key).await.ok();
    let mut attempt = 1;
    loop {
        refresh(slot, place, store, request).await;
        let fresh = slot.is_none();
        let outcome = prepare_once(slot, place, request).await;
        let Some(state) = slot.as_mut() else { return outcome };
        match state.save(store, place.key, Some(request.secrets())).await {
            Ok(Put::Written(_)) => return outcome,
            Ok(Put::Moved(_)) if attempt < ATTEMPTS => {
                if let (true, Some(session)) = (fresh, state.session.clone()) {
                    let _ = store.delete_session(session).await;
                }
                *slot = None;
                attempt += 1;
            }
            Ok(Put::Moved(_)) => {
                // Sent as prepared; the next request reads the store's state again.
                state.version = 0;
                return outcome;
            }
            Err(_) => return outcome,
        }
    }
}

/// Decides what to send for `request` with the state in `slot`.
async fn prepare_once(slot: &mut Option<ConversationState>, place: Place<'_>, request: &Request<'_>) -> Outcome {
    let state = match slot.take() {
        Some(state) => state,
        None => ConversationState::new(place, request).await,
    };
    let state = slot.insert(state);
    state.calls += 1;
    let prepared = state.middleware.prepare(request.messages, &[]).await;
    let compaction = prepared.event.as_ref().map(|event| match &event.store_error {
        Some(error) => format!("{}; not stored: {error}", event.strategy),
        None => event.strategy.to_string(),
    });
    state.compacted = compaction.is_some();
    let sent: Vec<&Message> = prepared.iter().collect();
    let client = request.messages;
    // The newest messages the middleware holds as the client gave them need no comparing.
    let same = if prepared.pending.is_empty() { prepared.unchanged_tail.min(sent.len()).min(client.len()) } else { 0 };
    let kept = same + kept_tail(&sent[..sent.len() - same], &client[..client.len() - same]);
    if kept == sent.len() && kept == client.len() {
        return Outcome::Unchanged { tokens: prepared.request_tokens, skipped: prepared.skipped };
    }
    let conversation = Conversation { messages: prepared.messages(), ..Default::default() };
    if let Some(problem) = request.wire.problems(&conversation).into_iter().next() {
        return Outcome::Refused { why: problem.to_string() };
    }
    Outcome::Rewritten {
        messages: request.wire.join(&sent[..sent.len() - kept], request.messages.len() - kept),
        tokens_before: state.fixed_tokens + state.client.sync(request.messages),
        tokens_after: prepared.request_tokens,
        compaction,
    }
}

/// How many of the newest messages `sent` and `client` share, by content (cache
/// breakpoints aside). Most are equal as they are, which is cheaper to see than their
/// fingerprints (which leave the breakpoints out).
fn kept_tail(sent: &[&Message], client: &[Message]) -> usize {
    sent.iter()
        .rev()
        .zip(client.iter().rev())
        .take_while(|(sent, client)| **sent == *client || message_fingerprint(sent) == message_fingerprint(client))
        .count()
}

/// Removes `cache_control` from a message's blocks, and from the blocks of its tool results.
fn strip_cache_control(message: &mut Value) {
    fn strip_blocks(blocks: &mut Value) {
        let Some(blocks) = blocks.as_array_mut() else { return };
        for block in blocks.iter_mut().filter_map(Value::as_object_mut) {
            block.remove("cache_control");
            if let Some(inner) = block.get_mut("content") {
                strip_blocks(inner);
            }
        }
    }
    if let Some(content) = message.get_mut("content") {
        strip_blocks(content);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn breakpoints_go_from_every_block() {
        let mut message = json!({"role": "user", "content": [
            {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_result", "tool_use_id": "t", "cache_control": {"type": "ephemeral"},
             "content": [{"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]}
        ]});
        strip_cache_control(&mut message);
        assert!(!message.to_string().contains("cache_control"), "{message}");
        let mut plain = json!({"role": "user", "content": "hi"});
        strip_cache_control(&mut plain);
        assert_eq!(plain, json!({"role": "user", "content": "hi"}));
    }
}
