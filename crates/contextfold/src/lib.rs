//! rt
