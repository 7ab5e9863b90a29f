//! The arguments of `contextfold sessions`: listing, exporting and deleting stored sessions.

use super::{parse_duration, StoreArgs};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `contextfold sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// What to do; without one, list the sessions.
    #[command(subcommand)]
    pub action: Option<SessionsAction>,
    /// Print one JSON object per session (JSON Lines).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `contextfold sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// Print a session's original, un-compacted conversation in the format it came in.
    Export {
        /// The session's id.
        #[arg(value_name = "ID")]
        id: String,
        /// Where to write it (default standard output; a `.gz` path is compressed).
        #[arg(short = 'o', long = "output", value_name = "FILE", default_value = "-")]
        output: PathBuf,
    },
    /// Delete a session with everything stored of it.
    Rm {
        /// The session's id.
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Delete the sessions not written for a while, with their payloads, summaries and
    /// reports, and the proxy's conversation state not written since; prints what it deleted.
    Prune {
        /// How long a session must have gone unwritten to be deleted (`30d`, `12h`, `90m`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        older_than: std::time::Duration,
    },
    /// Bring a store written by an older contextfold up to this build's schema (the
    /// reading commands never change a store, so they ask for this).
    Upgrade,
}
