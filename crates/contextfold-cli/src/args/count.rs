//! The arguments of `contextfold count`: counting tokens.

use super::{CountingArgs, InputArgs};
use clap::Args;
use std::path::PathBuf;

/// `contextfold count`.
#[derive(Debug, Args)]
pub struct CountArgs {
    /// The conversation file, or `-` for standard input.
    #[arg(value_name = "FILE", default_value = "-")]
    pub file: PathBuf,
    /// Count the input as raw text rather than as a conversation.
    #[arg(long)]
    pub text: bool,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}
