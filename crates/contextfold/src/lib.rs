//! contextfold keeps long LLM-agent conversations inside their context window: it evicts
//! stale tool output behind pointers, folds older turns into a structured summary, clips
//! what no budget can hold, and keeps what it removed in a store the model can recall from.
//!
//! This crate is the runtime around the pure core ([`contextfold_core`], re-exported as
//! [`core`]): summarizers (offline and over HTTP), the compactor, policies, the middleware,
//! events, the session store and replay.
//!
//! # Brief overview
//!
//! - [`Compactor`] compacts one [`Conversation`] as a [`CompactConfig`] asks (built with
//!   [`CompactConfig::builder`], which refuses settings that contradict each other with a
//!   [`ConfigError`]) and returns it [`Compacted`], with a [`CompactionReport`] of its
//!   [`Step`]s and [`Fallback`]s, or a [`CompactError`].
//! - [`CompactionMiddleware`] runs before each LLM call of one conversation under a
//!   [`Policy`], on its own working copy, and reports each compaction as an [`Event`].
//! - Summarizers: the offline [`Extractive`] one (the default), and LLMs over HTTP
//!   ([`summarize::http::Anthropic`], [`summarize::http::OpenAiCompatible`]), all
//!   [`Summarizer`]s.
//! - The cold layer: a [`SessionStore`] ([`MemoryStore`], [`SqliteStore`]) keeps what
//!   compaction removes ([`Compactor::with_store`]); the model gets it back with the
//!   `context_recall` tool ([`store::handle_recall`]).
//! - [`input::load`] and [`input::save`] read and write conversation files (plain, gzip,
//!   stdin); [`replay::replay`] replays a recorded session under several strategies.
//!
//! # Compact one conversation
//!
//! ```
//! use contextfold::{CompactConfig, Compactor, Conversation, Step};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let conversation = Conversation::from_value(serde_json::json!({
//!     "system": "You are a coding agent.",
//!     "messages": [
//!         {"role": "user", "content": "Fix the failing test in src/parse.rs."},
//!         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "src/parse.rs"}}]},
//!         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "fn parse() {}\n".repeat(400)}]},
//!         {"role": "assistant", "content": "The parser is empty; I will implement it."},
//!         {"role": "user", "content": "Go ahead, and keep the public API."},
//!         {"role": "assistant", "content": "Done: parse() now reads the input."}
//!     ]
//! }))?;
//! let config = CompactConfig::builder().budget(1_000).build()?;
//! let compacted = Compactor::default().compact(&conversation, &config).await?;
//! assert!(compacted.report.tokens_after <= 1_000);
//! // Older turns are folded into a summary; the report names each step taken.
//! assert!(compacted.report.strategy_used.contains(Step::Summarize));
//! assert!(compacted.report.messages_folded > 0);
//! # Ok(())
//! # }
//! ```
//!
//! # Wrap an agent loop's LLM call
//!
//! ```
//! use contextfold::{CompactionMiddleware, Compactor, Message, MiddlewareConfig, Role};
//!
//! /// The agent's own LLM call (here a stand-in that answers at once).
//! async fn call_llm(messages: &[Message]) -> (Message, u64) {
//!     let reply = Message::text(Role::Assistant, format!("Noted {} messages.", messages.len()));
//!     (reply, 40 * messages.len() as u64)
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = MiddlewareConfig::builder(16_000, 2_000).target(0.3).build()?;
//! let middleware = CompactionMiddleware::new(Compactor::default(), config);
//! let mut history: Vec<Message> = Vec::new();
//! for turn in 0..20 {
//!     let pending = [Message::text(Role::User, format!("Step {turn}: {}", "run the tests. ".repeat(200)))];
//!     // The caller's history is never changed; the middleware sends its own working copy,
//!     // stable between compactions, so the provider's prompt cache keeps working.
//!     let prepared = middleware.prepare(&history, &pending).await;
//!     if let Some(error) = &prepared.error {
//!         eprintln!("compaction: {error}"); // the request is sendable all the same
//!     }
//!     let (reply, input_tokens) = call_llm(&prepared.messages()).await;
//!     middleware.observe_usage(input_tokens); // calibrates the estimate
//!     history.extend(pending);
//!     history.push(reply);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # For a proxy: one middleware per conversation
//!
//! A [`CompactionMiddleware`] holds one conversation's state and is cheap to create: make one
//! per conversation with that conversation's `system` and `tools` in its [`MiddlewareConfig`]
//! (they are counted, never changed). Concurrent [`prepare`](CompactionMiddleware::prepare)
//! calls for it are serialized, so two never both compact nor interleave their updates.
//! [`CompactionMiddleware::snapshot`] gives its state as a [`MiddlewareState`]
//! (serde-serializable; what compactions made, not the caller's messages since, which the next
//! history brings again); [`CompactionMiddleware::restore`] with the same compactor and config
//! goes on from it, sending for the next request byte for byte what the original would have,
//! so a restarted proxy or another replica sends the same prefix. A failed compaction comes
//! back in [`Prepared::error`] (the request is still sendable, uncompacted) and as an
//! [`Event::Failed`]; a compaction's event carries its typed [`Steps`]. Store calls from the
//! compactor and the middleware run on the runtime's blocking pool.
//!
//! # Errors
//!
//! Every fallible function returns a typed error ([`CompactError`], [`ConfigError`],
//! [`StoreError`], [`SummarizeError`], [`middleware::StateError`], [`input::LoadError`],
//! [`replay::ReplayError`]; a name that parses into a value has its own, such as
//! [`replay::InvalidPrice`] or [`core::format::UnknownFormat`]);
//! each message is one sentence naming what failed and what to do.
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod cache;
pub mod compactor;
pub mod event;
pub mod eviction;
pub mod input;
pub mod middleware;
pub mod policy;
pub mod redact;
pub mod replay;
pub mod store;
pub mod summarize;

pub use contextfold_core as core;

pub use compactor::{
    CompactConfig, CompactError, Compacted, CompactionReport, Compactor, ConfigError, Fallback, Step, Steps, Strategy,
    Target,
};
pub use contextfold_core::tokens::{TokenCounter, Tokenizer};
pub use contextfold_core::{Block, Conversation, Message, Role, System};
pub use event::{CompactionEvent, Event, Trigger};
pub use middleware::{CompactionMiddleware, MiddlewareConfig, MiddlewareState, PrepareError, Prepared};
pub use policy::{CostAware, Decision, Policy};
pub use redact::Redactor;
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::{MemoryStore, SessionStore, StoreError};
pub use summarize::{Extractive, SummarizeError, Summarizer};

/// The README's Rust example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The user guide's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/library.md")]
pub struct GuideLibraryDoctests;
