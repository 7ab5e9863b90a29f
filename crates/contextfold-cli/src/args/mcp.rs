//! The arguments of `contextfold mcp`: the MCP server over standard input and output.

use super::StoreArgs;
use clap::Args;

pub(super) const MCP_HELP: &str = "\
An agent starts it as an MCP server (a stdio command), for example Claude Code with
  claude --mcp-config '{\"mcpServers\":{\"contextfold\":{\"command\":\"contextfold\",\"args\":[\"mcp\"]}}}'
or Codex with
  codex -c 'mcp_servers.contextfold.command=\"contextfold\"' -c 'mcp_servers.contextfold.args=[\"mcp\"]'
(contextfold wrap does this for one run). The model then sees the tools as
mcp__contextfold__context_recall and mcp__contextfold__context_search, and the proxy's
pointers, clip markers and summaries name the recall tool so.

context_recall {ref, offset?, limit?} returns the output a pointer names exactly as it was
stored; a long one comes in parts of whole lines (at most 32,000 characters an answer),
each headed with the lines shown, the total line count and the offset to pass next.
context_search {query, session?, limit?} returns snippets with their refs and where they
are, newest first (at most 50). A bad argument, an unknown ref or a store that cannot be
read is a tool error with its reason; the server goes on.

The store is opened read-only at the first call, as recall and search open it (--store,
else CONTEXTFOLD_STORE_URL, else .contextfold/store.db), so the server can start before the
proxy has written anything. The proxy (contextfold serve) offers the same tools over MCP's
streamable HTTP transport at /mcp.";

/// `contextfold mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub store: StoreArgs,
}
