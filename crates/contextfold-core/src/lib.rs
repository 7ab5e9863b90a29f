//! contextfold-core: the pure part of contextfold.
//!
//! No I/O, no async, no network, no clock: every function here maps values to values, so
//! the same input and configuration always give the same output, byte for byte.
//!
//! # Brief overview
//!
//! - [`Conversation`], [`Message`], [`Block`]: a lossless model of an Anthropic Messages
//!   request ([`conversation`]).
//! - [`format`]: read and write Anthropic, OpenAI Chat Completions and OpenAI Responses
//!   requests and Claude Code session logs, with autodetection.
//! - [`validate()`] and [`repair()`]: the provider's rules, with exact locations.
//! - [`tokens`]: token counting, exact (BPE) or estimated, and memoised.
//!
//! ```
//! use contextfold_core::{format, validate};
//!
//! let text = r#"{"messages": [{"role": "user", "content": "hello"}]}"#;
//! let parsed = format::parse(text, None).unwrap();
//! assert!(validate(&parsed.conversation).is_empty());
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod boundary;
pub mod chain;
pub mod check;
pub mod clip;
pub mod conversation;
pub mod evict;
pub mod extract;
pub mod format;
pub mod handoff;
pub mod harness;
pub mod hash;
pub mod plan;
pub mod preflight;
pub mod probe;
pub mod prompt;
pub mod render;
pub mod repair;
pub mod runners;
pub mod stats;
pub mod summary;
pub mod text;
pub mod thinking;
pub mod tokens;
pub mod tools;
pub mod validate;

pub use chain::HistoryChain;
pub use conversation::{
    Block, ContentShape, Conversation, Extra, Location, Media, Message, ModelError, Role, System, ToolResult,
    ToolResultContent, ToolUse,
};
pub use repair::{repair, Fix};
pub use tokens::{count_conversation, count_message, TokenCounter, TokenLedger, Tokenizer};
pub use validate::{validate, Problem, Rule};
