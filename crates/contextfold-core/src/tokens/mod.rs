//! Token counting.
