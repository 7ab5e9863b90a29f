//! The arguments of `contextfold validate`: checking a conversation against the provider's rules.

use super::InputArgs;
use clap::Args;
use std::path::PathBuf;

/// `contextfold validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Conversation files (`-` for standard input).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file (JSON Lines).
    #[arg(long)]
    pub json: bool,
    /// Repair what can be repaired without inventing content, and write the result to -o.
    #[arg(long, requires = "output")]
    pub repair: bool,
    /// Where to write the repaired conversation (`-` for standard output); one input file only.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub input: InputArgs,
}
