//! `contextfold mcp`: the recall tools over standard input and output, from the store
//! `recall` and `search` read. Standard output carries the protocol alone.

use crate::args::McpArgs;
use contextfold_serve::mcp::RecallServer;
use std::process::ExitCode;

pub fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let location = super::store::location(args.store.store.as_deref())?;
    // One thread: the client waits for each answer, and the store runs on the blocking pool.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(RecallServer::at(location).serve_stdio())?;
    Ok(ExitCode::SUCCESS)
}
