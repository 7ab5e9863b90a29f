//! The arguments of `contextfold wrap`: running an agent through a proxy of its own.

use super::ServeArgs;
use clap::{Args, Subcommand};
use std::path::PathBuf;

pub(super) const WRAP_HELP: &str = "\
  contextfold wrap claude
  contextfold wrap --window 100k claude -p 'fix the failing test'
  contextfold wrap --store postgres://me@db/agents codex exec 'add a changelog entry'

The proxy's flags (those of contextfold serve) come before the agent's name; everything
after it goes to the agent as it is. The proxy listens on a free loopback port for this run
(--listen, --allow-remote and --auth-token are not used); its log lines go to --log, or
nowhere, since the agent has the terminal.

Claude Code gets ANTHROPIC_BASE_URL and --mcp-config with `contextfold mcp` (this same
executable) on the proxy's store, and --allowedTools for the two read-only tools; Codex gets
-c openai_base_url=... and -c mcp_servers.contextfold.* overrides. Nothing is written to
the agent's own configuration files. With --no-store no tool is registered: there is
nothing to recall.

When the agent exits, the proxy stops (after the requests in flight) and one line says
what it did: calls, compactions, tokens received and sent, and the estimated input cost
with and without contextfold (prompt caching counted, at the list price of the model
family; a model of no known family is counted in tokens only). The exit status is the
agent's (128 + the signal's number when a signal ended it).";

/// `contextfold wrap`.
#[derive(Debug, Args)]
pub struct WrapArgs {
    /// The agent, and the arguments it gets.
    #[command(subcommand)]
    pub agent: Agent,
    /// The agent's executable [default: claude or codex, found on PATH].
    #[arg(long, value_name = "PATH")]
    pub program: Option<PathBuf>,
    /// Append the proxy's log lines (in --log-format) to this file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The agents `contextfold wrap` runs.
#[derive(Debug, Subcommand)]
pub enum Agent {
    /// Claude Code.
    Claude(AgentArgs),
    /// Codex CLI.
    Codex(AgentArgs),
}

/// What an agent is given.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Arguments for the agent, passed as they are.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<std::ffi::OsString>,
}
