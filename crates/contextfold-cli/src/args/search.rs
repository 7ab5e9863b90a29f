//! The arguments of `contextfold search`: searching the store.

use super::{parse_limit, StoreArgs};
use clap::Args;

/// `contextfold search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words that must all occur (any case).
    #[arg(required = true, value_name = "QUERY")]
    pub query: Vec<String>,
    /// Search this session only.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The most hits to show (at least 1).
    #[arg(long, value_name = "N", default_value = "20", value_parser = parse_limit)]
    pub limit: usize,
    /// Print one JSON object per hit (JSON Lines).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}
