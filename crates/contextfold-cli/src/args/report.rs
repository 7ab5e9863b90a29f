//! The arguments of `contextfold report`: what the proxy saved.

use super::{parse_duration, StoreArgs};
use clap::Args;

/// `contextfold report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Count only the calls made in this last while (`24h`, `7d`, `90m`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub since: Option<std::time::Duration>,
    /// Print one JSON object: `sessions` (one object each) and `total`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub(super) const REPORT_HELP: &str = "\
The store is the one `contextfold serve --store` wrote (resolved as for recall). Each call
the proxy answered for a conversation is recorded there; the report adds them up per
session, with the estimated input cost the proxy's shutdown line states: the list price of
the request's model family, with prompt caching counted (each request reads from the cache
what it shares with the one before; a compacted request is counted as written whole).
Sessions with no recorded call (written by compact --store, or before the proxy recorded
calls) are counted, not listed. Only successful calls count.

Exit codes:
  0  success
  2  usage or input error: no store at the path or in the database, a store that is not
     contextfold's, damaged, or needs an upgrade";
