//! The arguments of `contextfold stats`: statistics of a conversation.

use super::{CountingArgs, InputArgs};
use clap::Args;
use std::path::PathBuf;

/// `contextfold stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Conversation files (`-` for standard input; `.gz` read transparently).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file (JSON Lines) instead of a report.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}
