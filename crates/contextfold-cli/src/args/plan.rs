//! The arguments of `contextfold plan`: the dry run of a compaction.

use super::{parse_fraction, parse_tokens, CountingArgs, CutArgs, InputArgs, TargetArgs};
use clap::Args;
use std::path::PathBuf;

/// `contextfold plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The conversation file (`-` for standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub cut: CutArgs,
    /// Keep a tail of at least K tokens verbatim.
    #[arg(long, value_name = "K", value_parser = parse_tokens)]
    pub min_tail_tokens: Option<u64>,
    /// Fold the first user request too, instead of keeping it verbatim.
    #[arg(long)]
    pub no_pin_first: bool,
    /// Show no cut unless the head to fold holds at least this fraction of the messages'
    /// tokens (compact folds whatever it can once over its budget: 0).
    #[arg(long, value_name = "F", default_value = "0.1", value_parser = parse_fraction)]
    pub min_progress: f64,
    /// Print the plan as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}
