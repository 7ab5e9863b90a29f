//! contextfold: the runtime around the pure core.
//!
//! The core ([`contextfold_core`]) maps values to values. This crate adds what needs the
//! outside world: reading and writing files (plain, gzip, stdin).
//!
//! # Brief overview
//!
//! - [`input::load`] reads a conversation from a path or `-`, detecting its format.
//! - [`input::save`] writes it back in a chosen format.
//! - [`compactor::Compactor`] compacts a conversation to a target: evict, summarize, clip.
//! - [`middleware::CompactionMiddleware`] runs before each LLM call under a [`policy`],
//!   on its own working copy, and reports each compaction as an [`event::CompactionEvent`].
//! - [`replay::replay`] replays a recorded session under several strategies and measures
//!   cost with prompt caching, overflows and fact recall.
//! - [`summarize::Summarizer`]: the offline [`summarize::Extractive`] summarizer and LLMs over HTTP.
//! - [`store::SessionStore`] keeps what compaction removes ([`compactor::Compactor::with_store`]);
//!   the model gets it back with the `context_recall` tool ([`store::handle_recall`]).
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod cache;
pub mod compactor;
pub mod event;
pub mod input;
pub mod middleware;
pub mod policy;
pub mod redact;
pub mod replay;
pub mod store;
pub mod summarize;

pub use contextfold_core as core;
