//! The arguments of `contextfold render`: the transcript a summarizer reads.

use super::{CountingArgs, InputArgs};
use clap::Args;
use std::path::PathBuf;

/// `contextfold render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The conversation file (`-` for standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The most tokens the transcript may hold.
    #[arg(long, value_name = "T", default_value = "20000")]
    pub budget: u64,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}
