//! The integration tests of `contextfold-cli`, one binary (one link) for all of them.

mod cli;
mod common;
mod compact_cli;
mod compaction_cli;
mod figures_cli;
mod flags_cli;
mod hardening_cli;
mod inputs_cli;
mod mcp_cli;
mod oversized_cli;
mod plot_cli;
mod responses_cli;
mod serve_cli;
mod serve_faults_cli;
mod serve_state_cli;
mod store_cli;
mod store_postgres_cli;
mod tidy;
mod ui_cli;
mod wrap_cli;
