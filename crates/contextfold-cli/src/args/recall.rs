//! The arguments of `contextfold recall`: printing a removed payload by its ref.

use super::StoreArgs;
use clap::Args;

/// `contextfold recall`.
#[derive(Debug, Args)]
pub struct RecallArgs {
    /// The payload's ref (`cf-…`), as the pointer or the report gives it.
    #[arg(value_name = "REF")]
    pub reference: String,
    #[command(flatten)]
    pub store: StoreArgs,
}
