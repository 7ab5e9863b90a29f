//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub use contextfold_test_support::{corpus_dir, shared};
