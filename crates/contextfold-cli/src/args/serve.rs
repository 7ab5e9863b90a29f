//! The arguments of `contextfold serve`: the proxy.

use super::{parse_duration, parse_fraction, parse_strategy, parse_tokens, CountingArgs, LlmArgs};
use clap::Args;
use contextfold::compactor::Strategy;
use std::path::PathBuf;

pub(super) const SERVE_HELP: &str = "\
Start it, then point any Anthropic or OpenAI client (or Codex CLI) at it:
  contextfold serve
  export ANTHROPIC_BASE_URL=http://127.0.0.1:8787
  export OPENAI_BASE_URL=http://127.0.0.1:8787/v1

Every request goes to its API's upstream (--upstream, or --upstream-openai for Chat
Completions, the Responses API and OpenAI's other paths) with its headers (keys included)
and is answered with the upstream's status, headers and body, streams relayed as they
arrive. On POST /v1/messages and /v1/messages/count_tokens, /v1/chat/completions and
/v1/responses only `messages` (or `input`) may change, and only when the conversation needs
compacting; the same compacted prefix is then resent until the next compaction. A Responses
request that continues a stored response (previous_response_id) is forwarded as it came, and
so is a request with the header `x-contextfold: off`.

The window is --window, else the model's (a table of current Claude and OpenAI models; 1m
for Sonnet 4 and 4.5 with the context-1m-2025-08-07 beta), else 200k.

Each conversation's state and compactions (its history, every removed payload, the summaries
and reports) are kept in the store: --store PATH|URL, else the one CONTEXTFOLD_STORE_URL names,
else .contextfold/store.db; read it with contextfold sessions, recall and search. Replicas
sharing one PostgreSQL store (postgres://user@host/db; pool_max_conns=N bounds its
connections) send the same prefix for a conversation whichever serves it. Secrets are masked
in what is stored unless --no-redact, and never kept in a conversation's state. --no-store
keeps everything in memory.

The proxy answers MCP's streamable HTTP transport at /mcp itself (never forwarded, behind
the token like every request): the tools context_recall and context_search of contextfold
mcp, on its store, so an agent can fetch back what a pointer names. When a request's tools
include context_recall (as mcp__SERVER__context_recall), the pointers, clip markers and
summary written for it name that tool.

One log line per request goes to standard error: session, tokens in → out, what was done,
the upstream's status, the time. Headers, bodies and query strings are never logged.
Ctrl-C or SIGTERM stops accepting, waits for the requests in flight, and exits 0.

Exit codes:
  0  stopped by Ctrl-C or SIGTERM
  2  usage error, an address it may not or cannot listen on, an unusable upstream, a store
     that cannot be opened";

/// `contextfold serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A TOML file of these flags (`window = "200k"`, `allow-remote = true`); a flag on the
    /// command line, or the environment variable a flag reads, wins over the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The address to listen on. Any address but loopback needs --allow-remote and a token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    pub listen: std::net::SocketAddr,
    /// The Anthropic API requests are forwarded to (requests cannot name another host).
    #[arg(long, value_name = "URL", default_value = "https://api.anthropic.com")]
    pub upstream: String,
    /// The OpenAI API (or an OpenAI-compatible server) Chat Completions, Responses and
    /// OpenAI's other requests are forwarded to: a base URL ending in /v1, as OpenAI
    /// clients' base URLs do.
    #[arg(long, value_name = "URL", default_value = "https://api.openai.com/v1")]
    pub upstream_openai: String,
    /// Accept connections from other machines (with --listen on a non-loopback address).
    #[arg(long)]
    pub allow_remote: bool,
    /// A token every request must carry as `x-contextfold-token: TOKEN` or
    /// `Proxy-Authorization: Bearer TOKEN` [default: CONTEXTFOLD_AUTH_TOKEN], but for
    /// /health and /ready; required with --allow-remote.
    #[arg(long, value_name = "TOKEN")]
    pub auth_token: Option<String>,
    /// The model's context window [default: by the request's model, else 200k].
    #[arg(long, value_name = "W", value_parser = parse_tokens)]
    pub window: Option<u64>,
    /// Tokens of the window kept free for the answer.
    #[arg(long, value_name = "R", default_value = "16000", value_parser = parse_tokens)]
    pub reserve: u64,
    /// The share of the usable window a compaction aims for.
    #[arg(long, value_name = "F", default_value = "0.2", value_parser = parse_fraction)]
    pub target: f64,
    /// auto (evict first, summarize only if needed), evict, or summarize.
    #[arg(long, default_value = "auto", value_parser = parse_strategy)]
    pub strategy: Strategy,
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Send and store secrets as they are. By default keys, tokens and passwords are masked
    /// in the store and in what an LLM summarizer is sent.
    #[arg(long)]
    pub no_redact: bool,
    /// Keep each conversation's history, removed payloads, summaries and reports in this
    /// store: a SQLite file, or a PostgreSQL database as postgres://user@host/db [default:
    /// $CONTEXTFOLD_STORE_URL, else .contextfold/store.db].
    #[arg(long, value_name = "PATH|URL", num_args = 0..=1, conflicts_with = "no_store")]
    pub store: Option<Option<PathBuf>>,
    /// Keep conversation state in memory only: nothing is stored.
    #[arg(long)]
    pub no_store: bool,
    /// The largest request body accepted, in bytes (larger ones get a 413). A body is held in
    /// memory once while it is prepared, so this is about the most one request costs.
    #[arg(long, value_name = "BYTES", default_value = "536870912", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_body: u64,
    /// Delete the store's sessions not written for this long (`30d`, `12h`), with their
    /// payloads, summaries, reports and conversation state: checked at start-up and then
    /// every tenth of it (at most hourly) [default: keep everything].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub retain: Option<std::time::Duration>,
    /// Seconds a streaming upstream may stay silent before the stream is cut.
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Seconds the upstream may take to start answering (then a 504).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = clap::value_parser!(u64).range(1..))]
    pub upstream_timeout: u64,
    /// Conversations whose state is held at once; the least recently used goes first.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_sessions: u64,
    /// Seconds a client may take to send a request's headers, counted from when its connection
    /// is ready for one (opened, or its last answer sent): so also how long an idle keep-alive
    /// connection stays open.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// The most client connections open at once; more wait to be accepted [default: half the
    /// open-file limit (`ulimit -n`), at most 4096].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
    /// The per-request log lines: text or json.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = parse_log_format)]
    pub log_format: contextfold_serve::LogFormat,
    #[command(flatten)]
    pub counting: CountingArgs,
}

fn parse_log_format(name: &str) -> Result<contextfold_serve::LogFormat, String> {
    name.parse().map_err(|err| format!("{err}"))
}
