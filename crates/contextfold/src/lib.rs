//! contextfold: the runtime around the pure core.
//!
//! The core ([`contextfold_core`]) maps values to values. This crate adds what needs the
//! outside world: reading and writing files (plain, gzip, stdin).
//!
//! # Brief overview
//!
//! - [`input::load`] reads a conversation from a path or `-`, detecting its format.
//! - [`input::save`] writes it back in a chosen format.
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod input;

pub use contextfold_core as core;
