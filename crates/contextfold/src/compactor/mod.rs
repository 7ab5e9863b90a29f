//! The compactor: evict → plan → summarize → assemble → clip → validate.
//!
//! Masking first, summarizing rarely: with [`Strategy::Auto`] stale tool output is evicted
//! first, and the head is summarized only when eviction cannot reach the target. No step is
//! a hard failure while a later one can still help: a model summary falls back to the
//! extractive one, a failed plan to eviction alone, and whatever is still over the target
//! has its largest tool outputs clipped, the newest included. Every fallback is recorded in
//! the report with its reason ([`Fallback`]). The result is validated; an invalid result is a
//! bug and is returned as an error, never as a conversation.
//!
//! With a store ([`Compactor::with_store`]) every compaction is kept in the cold layer: the
//! history it saw, each payload it removed, its summary and its report, in one transaction.
//! With a redactor ([`Compactor::with_redactor`]) secrets are masked before anything leaves
//! for a summarizer or the store, and the summary is checked to hold none.
//!
//! The module's parts: [`config`](CompactConfig) (what to do), the report types, the pass
//! (one compaction's state and its steps), summarizing and persisting.

mod config;
mod pass;
mod persisting;
mod report;
mod sizing;
mod summarizing;

pub use config::{
    ClipLimit, CompactConfig, CompactConfigBuilder, ConfigError, Strategy, Target, Undersized, UnknownStrategy,
};
pub use report::{Compacted, CompactionReport, Fallback, Step, Steps};
pub use sizing::MIN_WORKABLE_SUMMARY_TOKENS;
pub use summarizing::restore_summary;

use pass::Pass;
pub(crate) use pass::{replaced, replaced_results};
use persisting::Persistence;

use crate::cache::{LruCache, SummaryCache};
use crate::redact::Redactor;
use crate::store::{Origin, SessionId, SessionStore, StoreError};
use crate::summarize::{Extractive, Summarizer};
use contextfold_core::tokens::{TokenCounter, Tokenizer};
use contextfold_core::{Conversation, Message, Problem, Rule};
use std::sync::Arc;

/// A compaction that could not produce a valid conversation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// The input has no messages.
    #[error("the conversation has no messages")]
    Empty,
    /// The configuration cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The target is too small for any summary of this conversation (with
    /// [`Undersized::Fail`]): below the system prompt, the tools, a minimal summary and the
    /// newest turn, which cannot be cut.
    #[error(
        "a target of {target} tokens is too small to fold this conversation into a summary; the smallest workable target is {smallest} tokens (the system prompt and tools take {preamble}, a minimal summary {summary}, the newest turn, which cannot be cut, {tail} at its smallest)"
    )]
    TooSmall {
        /// The target asked for.
        target: u64,
        /// The smallest target that works.
        smallest: u64,
        /// Tokens of the system prompt and tools.
        preamble: u64,
        /// Tokens of a minimal summary message.
        summary: u64,
        /// Tokens of the newest turn that cannot be cut.
        tail: u64,
    },
    /// The input breaks provider rules that repair cannot fix without inventing content (every
    /// message empty, a tool call whose input is not an object): an input error, not a bug.
    #[error("{}", input_problems(.0))]
    Input(Vec<Problem>),
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

/// One sentence for an input that repair cannot make valid.
fn input_problems(problems: &[Problem]) -> String {
    match problems.first() {
        Some(problem) if problem.rule == Rule::NoMessages => {
            "the conversation has nothing to compact: every message is empty (repair removes messages with no \
             content); give at least one message with content"
                .into()
        }
        Some(problem) => format!(
            "the conversation breaks a rule repair cannot fix without inventing content ({problem}{}); fix the input",
            match problems.len() {
                1 => String::new(),
                more => format!(", and {} more", more - 1),
            }
        ),
        None => "the conversation cannot be compacted".into(),
    }
}

/// Compacts conversations with a summarizer, a summary cache and a token counter.
///
/// Cheap to clone: everything it holds is shared.
#[derive(Clone)]
pub struct Compactor {
    /// The model summarizer, when summaries come from one; `None` for the extractive summary.
    summarizer: Option<Arc<dyn Summarizer>>,
    /// The offline summarizer: the default, and the fallback of a model summarizer.
    extractive: Extractive,
    cache: Arc<dyn SummaryCache>,
    counter: Arc<dyn TokenCounter>,
    persistence: Option<Persistence>,
    redactor: Option<Redactor>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("summarizer", &self.summarizer.as_ref().map_or_else(|| self.extractive.id(), |model| model.id()))
            .field("counter", &self.counter.name())
            .field("session", &self.persistence.as_ref().map(|persistence| &persistence.session))
            .field("redacts", &self.redactor.is_some())
            .finish()
    }
}

impl Default for Compactor {
    /// The extractive summarizer, an in-memory cache, and the calibrated estimator.
    fn default() -> Self {
        Compactor {
            summarizer: None,
            extractive: Extractive::default(),
            cache: Arc::new(LruCache::default()),
            counter: Tokenizer::Estimate.shared(),
            persistence: None,
            redactor: None,
        }
    }
}

impl Compactor {
    /// A compactor summarizing with `summarizer`, a model (an LLM over HTTP, or your own): the
    /// head is rendered as a transcript in chunks that fit its input budget, and its summary
    /// is checked for the facts it must keep. When it fails, the extractive summary stands in
    /// ([`Fallback::Summarizer`]). For the extractive summary alone, use
    /// [`Compactor::default`].
    pub fn new(summarizer: Arc<dyn Summarizer>) -> Compactor {
        Compactor { summarizer: Some(summarizer), ..Compactor::default() }
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
    /// [`EvictConfig::recall_tool`](contextfold_core::evict::EvictConfig::recall_tool) is set;
    /// offer it [`recall_tool_definition`](crate::store::recall_tool_definition) then, and
    /// answer its calls with [`handle_recall`](crate::store::handle_recall).
    pub fn with_store(mut self, store: Arc<dyn SessionStore>, session: impl Into<SessionId>) -> Compactor {
        self.persistence = Some(Persistence { store, session: session.into(), origin: None, log: false });
        self
    }

    /// With a store, keeps the caller's history as the session's log, written as it grows
    /// ([`CompactionMiddleware`](crate::middleware::CompactionMiddleware) writes each call's
    /// new messages), so a compaction stores only what it made (payloads, summary, report)
    /// and not the history again. Without a store it does nothing.
    pub fn with_session_log(mut self) -> Compactor {
        if let Some(persistence) = &mut self.persistence {
            persistence.log = true;
        }
        self
    }

    /// With a store, also keeps where the conversation came from (its format, layout, system
    /// prompt, tools and other top-level fields) as the session's metadata, so the stored
    /// history can be given back as the conversation it was
    /// ([`Origin::conversation`](crate::store::Origin::conversation)). Without a store it
    /// does nothing.
    pub fn with_origin(mut self, origin: Origin) -> Compactor {
        if let Some(persistence) = &mut self.persistence {
            persistence.origin = Some(origin);
        }
        self
    }

    /// The store and session compactions are kept in, when set.
    pub(crate) fn store(&self) -> Option<(Arc<dyn SessionStore>, &str)> {
        self.persistence.as_ref().map(|persistence| (persistence.store.clone(), persistence.session.as_str()))
    }

    /// Uses `cache` for summaries (default: an in-memory LRU of 64).
    pub fn with_cache(mut self, cache: Arc<dyn SummaryCache>) -> Compactor {
        self.cache = cache;
        self
    }

    /// Counts tokens with `counter` (default: the calibrated estimator,
    /// [`Tokenizer::Estimate`]); a named tokenizer is [`Tokenizer::shared`].
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Compactor {
        self.extractive = self.extractive.counter(counter.clone());
        self.counter = counter;
        self
    }

    /// The token counter in use.
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// A share of the token counter in use, for an owner that keeps counting beyond a borrow
    /// (a [`TokenLedger::shared`](contextfold_core::tokens::TokenLedger::shared)).
    pub fn shared_counter(&self) -> Arc<dyn TokenCounter> {
        self.counter.clone()
    }

    /// The model summarizer, when summaries come from one (`None`: the extractive summary).
    pub fn summarizer(&self) -> Option<&Arc<dyn Summarizer>> {
        self.summarizer.as_ref()
    }

    /// Compacts `conversation` (which is not changed) as `config` asks, and stores the
    /// compaction with `conversation`'s messages as its history when a store is set.
    pub async fn compact(
        &self,
        conversation: &Conversation,
        config: &CompactConfig,
    ) -> Result<Compacted, CompactError> {
        let compacted = self.compact_unstored(conversation, config, &conversation.messages).await?;
        self.persist(&conversation.messages, compacted).await
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
        config.check()?;
        if conversation.messages.is_empty() {
            return Err(CompactError::Empty);
        }
        Pass::new(self, conversation, config).run(originals).await
    }
}
