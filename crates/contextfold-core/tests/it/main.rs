//! The integration tests of `contextfold-core`, one binary (one link) for all of them.

// Tests read fixtures and the environment; the library itself stays free of both.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod clip;
mod common;
mod compaction;
mod formats;
mod responses;
mod tokens;
