//! Command-line arguments ("low args"): clap structs that only validate what was typed.
//!
//! Each flag's doc comment is its `--help` text.

use clap::{Args, Parser, Subcommand, ValueEnum};
use contextfold::compactor::Strategy;
use contextfold::core::format::Format;
use contextfold::core::tokens::Tokenizer;
use contextfold::core::tools::Preset;
use std::path::PathBuf;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a conversation parses but breaks a provider rule (validate)
  2  usage or input error: unreadable file, an input over --max-input-bytes, malformed
     JSON (with line and column), unknown format, a message with an unknown role, a block
     missing a required field";

/// Keep long LLM-agent conversations inside their context window.
#[derive(Debug, Parser)]
#[command(name = "contextfold", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show messages, turns, tool calls, where the tokens go, the largest tool results and
    /// validation problems.
    #[command(after_help = EXIT_CODES)]
    Stats(StatsArgs),
    /// Check conversations against the provider's rules; optionally repair them.
    #[command(after_help = EXIT_CODES)]
    Validate(ValidateArgs),
    /// Convert a conversation between the Anthropic, OpenAI Chat and OpenAI Responses formats.
    #[command(after_help = EXIT_CODES)]
    Convert(ConvertArgs),
    /// Count the tokens of a conversation, or of raw text with --text.
    #[command(after_help = EXIT_CODES)]
    Count(CountArgs),
    /// Dry run: show where a conversation would be cut into a head to fold and a tail to
    /// keep, and what an eviction pass would free.
    #[command(after_help = EXIT_CODES)]
    Plan(PlanArgs),
    /// Replace stale tool output with pointers that say how to get it back.
    #[command(after_help = EXIT_CODES)]
    Evict(EvictArgs),
    /// Print the conversation as the plain transcript a summarizer reads.
    #[command(after_help = EXIT_CODES)]
    Render(RenderArgs),
    /// Compact conversations to a token budget: evict stale tool output, summarize the
    /// older turns, clip what no budget can hold. Works offline by default.
    #[command(after_help = COMPACT_HELP)]
    Compact(CompactArgs),
    /// Replay recorded sessions call by call under several context strategies; report cost
    /// with prompt caching, peak context, overflows and fact recall.
    #[command(after_help = REPLAY_HELP)]
    Replay(ReplayArgs),
    /// Print a payload that compaction removed, exactly as it was, by its ref.
    #[command(after_help = STORE_HELP)]
    Recall(RecallArgs),
    /// Search the stored history and payloads; prints snippets with where they are.
    #[command(after_help = STORE_HELP)]
    Search(SearchArgs),
    /// List stored sessions; export one's original conversation, or delete it.
    #[command(after_help = STORE_HELP)]
    Sessions(SessionsArgs),
    /// What the proxy saved, per session and in total, from the calls `serve --store`
    /// recorded: calls, compactions, tokens received and sent, estimated input cost.
    #[command(after_help = REPORT_HELP)]
    Report(ReportArgs),
    /// Run a proxy for the Anthropic Messages API that compacts long conversations: point a
    /// client's ANTHROPIC_BASE_URL at it.
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Serve the store to an agent as MCP tools over standard input and output:
    /// context_recall (a removed output by its ref, whole or by lines) and context_search.
    #[command(after_help = MCP_HELP)]
    Mcp(McpArgs),
    /// Run Claude Code or Codex through a proxy started for this run, with the recall tools
    /// registered for this run only; print what the proxy did when the agent exits.
    #[command(after_help = WRAP_HELP, subcommand_value_name = "AGENT", subcommand_help_heading = "Agents")]
    Wrap(WrapArgs),
    /// Serve the dashboard for a store with no proxy running: sessions, each conversation's
    /// tokens per call and compactions, removed payloads by ref, search.
    #[command(after_help = UI_HELP)]
    Ui(UiArgs),
}

/// Where the store is when no path is given: under the working directory.
pub const DEFAULT_STORE: &str = ".contextfold/store.db";

/// The variable naming the store (a path or a `postgres://` URL) when `--store` names none.
pub const STORE_VARIABLE: &str = "CONTEXTFOLD_STORE_URL";

const STORE_HELP: &str = "\
The store is a SQLite file or a PostgreSQL database (--store postgres://user@host/db),
written by compact --store and evict --store; without --store it is the one
CONTEXTFOLD_STORE_URL names, else .contextfold/store.db. These commands only read it,
read-only and never migrating it (sessions rm deletes, sessions upgrade brings an older
store up to date); they never create one. Messages show a URL without its password.

Exit codes:
  0  success
  2  usage or input error: no store at the path or in the database, a directory or a file
     that is not a contextfold store, a damaged store, a store that needs an upgrade, an
     unknown ref or session, a store locked by another process past the timeout, a
     PostgreSQL server that cannot be reached or refuses the login";

const MCP_HELP: &str = "\
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

const UI_HELP: &str = "\
Open the address it prints (http://127.0.0.1:8788/ui by default) in a browser. The store is
opened read-only, as recall and search open it (--store, else CONTEXTFOLD_STORE_URL, else
.contextfold/store.db); a proxy may keep writing to it meanwhile, and the page shows what is
there when it asks. The page is compiled into the binary and fetches nothing from
elsewhere. It answers loopback addresses only: --listen takes a loopback address, and a
request must name 127.0.0.1, localhost or [::1] as its host. contextfold serve --store
serves the same dashboard at /ui.

Exit codes:
  0  stopped by Ctrl-C or SIGTERM
  2  usage error, an address that is not loopback or cannot be bound, or a store that
     cannot be opened (as for recall)";

const WRAP_HELP: &str = "\
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

const REPLAY_HELP: &str = "\
A session is a sequence of LLM calls, one per assistant message: call i sends the system
prompt and the messages before assistant message i, as the strategy transforms them, and
its output is assistant message i as recorded. Strategies keep their state across calls.

Prompt-cache model (Anthropic's): each request caches its whole prefix; the next request
reads from cache the longest prefix it shares with the previous one (block by block) and
writes the rest. Billed input = cache reads x 0.1 + cache writes x 1.25 of the input price
(every input token x 1.0 with --no-cache); output at the output price; summarizer calls
billed too, their input uncached. Prices (dollars per million input/output tokens):
sonnet 3/15, haiku 1/5, opus 5/25, or --price IN,OUT.

Strategies: none; contextfold (the default cost-aware policy), contextfold-threshold,
contextfold-evict, contextfold-summarize (the threshold policy at --trigger); and
emulations of others' documented behaviour: anthropic-clear (over 80% of the usable window,
clear all but the 3 newest tool results), mask-10 (outputs older than the last 10 assistant
steps become a placeholder), codex (at 90%: the user's own messages up to 20k tokens plus
one summary), langchain (at 80%: summarize all but the last 20 messages, cut moved back to
keep tool pairs), truncate (on overflow, drop the oldest turns down to half the window).

Probes: at each compaction, facts of the history messages the request no longer carries
unchanged must occur in the normalized text of the request (lowercase, whitespace folded,
double quotes, backticks and asterisks dropped). recall (JSON: probe_recall, recall_by_kind)
uses probes read from the raw blocks, not by the summarizer's extractor: the first request
(its first 120 characters); the first 60 characters of every later user-authored text
(harness and meta text is not the user's: Claude Code's <system-reminder>,
<task-notification>, <command-name>... sections, \"[Request interrupted by user\",
mini-swe-agent's \"Please always provide EXACTLY ONE action...\", SWE-agent's and OpenHands'
fixed replies, contextfold's own \"[contextfold: \" texts); every path a tool call created or
modified (editor tools, patches, and in shell commands after &&, ;, | or a line end:
> and >> redirections, tee, sed -i, touch, cp/mv targets, here-documents, Python
open(..., 'w') and write_text); the first telling line of every failed tool output (error
flag or a non-zero exit code; for a traceback its exception line; else the first line
naming an error; 80 characters); and the first 60 characters of the last assistant text.
extract (JSON: extract_recall, extract_recall_by_kind) uses the facts the extractive summary
is built from (first request, later asks, files changed, unresolved errors, last next step;
cut to 120 characters). rereads counts recorded reads of a file whose earlier read the
request showed only as a pointer or placeholder (JSON: rereads_after_evict, and by agent
family rereads_after_evict_by_family); nested_summary_steps counts compactions whose request
holds more than one summary header.

Each strategy is replayed as if it ran alone, with its own summary cache.
--dump-requests DIR writes DIR/<window>/<strategy>/<file stem>.jsonl: one line per call,
{\"i\", \"messages\" (in the input's format, as sent), \"compacted\", \"summarizer_calls\",
\"summarizer_input_tokens\", \"summarizer_output_tokens\"}.

Overflow steps are requests over the window less --reserve; the unavoidable ones are those
where the newest turn alone (system prompt, tools and the messages after the last safe cut,
as recorded) is over it (JSON: unavoidable_overflow_steps). Windows take 16000, 16k or 1m.

Exit codes:
  0  success
  2  usage or input error";

const COMPACT_HELP: &str = "\
Output: the compacted conversation in the input's format, validated before it is written
(-o FILE, --out-dir DIR for several files, or standard output when it is not a terminal).
On a terminal without -o, a report and the shape of the result are shown instead.

Summarizers: extractive (default; offline, deterministic), anthropic[:MODEL] (needs
ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL overrides the endpoint), openai[:MODEL] (any
OpenAI-compatible server; OPENAI_API_KEY if it needs one, OPENAI_BASE_URL or --base-url).
With --strategy auto a failing LLM summarizer falls back to the extractive one, reported.

Redaction: secrets (cloud keys, API tokens, private keys, bearer headers, secret-named
assignments) are masked as [REDACTED:<kind>] in what an LLM summarizer is sent and in
everything --store keeps; a summary is checked and masked too. --no-redact turns it off.

Exit codes:
  0  success
  2  usage or input error, or a summarizer failure with --strategy summarize";

const SERVE_HELP: &str = "\
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

/// Which summarizer, and how to reach an LLM one.
#[derive(Debug, Args)]
pub struct LlmArgs {
    /// extractive, anthropic[:MODEL] or openai[:MODEL].
    #[arg(long, default_value = "extractive", value_name = "NAME")]
    pub summarizer: String,
    /// The LLM server's base URL (overrides ANTHROPIC_BASE_URL / OPENAI_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Retries of a failed LLM request (429, 5xx, 529, timeouts, unreachable) [default: 4].
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// Seconds one LLM request may take [default: 120].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
}

/// How to count tokens.
#[derive(Debug, Args)]
pub struct CountingArgs {
    /// Token counter: o200k or cl100k (exact BPE), estimate (fast, calibrated), chars4.
    #[arg(long, default_value = "o200k", value_parser = parse_tokenizer)]
    pub tokenizer: Tokenizer,
}

/// How to read input files.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// Read input as this format instead of detecting it.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<Format>,
    /// Refuse an input (file, gzip once decompressed, or standard input) of more than this
    /// many bytes; takes 1000000, 500k, 256m or 2g.
    #[arg(long, value_name = "BYTES", default_value = "256m", value_parser = parse_bytes)]
    pub max_input_bytes: u64,
}

fn parse_format(name: &str) -> Result<Format, String> {
    name.parse().map_err(|err| format!("{err}"))
}

fn parse_preset(name: &str) -> Result<Preset, String> {
    name.parse().map_err(|err| format!("{err}"))
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("`{text}` is not a fraction between 0 and 1")),
    }
}

/// A token count: digits, optionally with a `k` (thousand) or `m` (million) suffix, e.g.
/// `16k`, `200k`, `1m`.
fn parse_tokens(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, scale) = match lower.strip_suffix('k') {
        Some(digits) => (digits, 1_000),
        None => lower.strip_suffix('m').map_or((lower.as_str(), 1), |digits| (digits, 1_000_000)),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|count| count.checked_mul(scale))
        .ok_or_else(|| format!("`{text}` is not a token count (e.g. 16000, 16k, 1m)"))
}

/// A byte count: digits, optionally with `k`, `m` or `g` (thousand, million, billion), at
/// least 1.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, scale) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1_000),
        Some('m') => (&lower[..lower.len() - 1], 1_000_000),
        Some('g') => (&lower[..lower.len() - 1], 1_000_000_000),
        _ => (lower.as_str(), 1),
    };
    match digits.parse::<u64>().ok().and_then(|count| count.checked_mul(scale)) {
        Some(0) => Err("the input limit must be at least 1 byte".into()),
        Some(bytes) => Ok(bytes),
        None => Err(format!("`{text}` is not a byte count (e.g. 1000000, 500k, 256m, 2g)")),
    }
}

fn parse_limit(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the limit must be at least 1 (0 would show nothing)".into()),
        Ok(limit) => Ok(limit),
        Err(_) => Err(format!("`{text}` is not a number of hits")),
    }
}

fn parse_tokenizer(name: &str) -> Result<Tokenizer, String> {
    name.parse().map_err(|err| format!("{err}"))
}

/// The budget a compaction aims for (`compact`, and `plan` to show where it would cut).
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Token budget for the result: an aim and a ceiling; folding whole turns often lands
    /// under it [default: half of the input's tokens].
    #[arg(long, value_name = "T", conflicts_with_all = ["window", "target_fraction"], value_parser = parse_tokens)]
    pub budget: Option<u64>,
    /// The model's context window; the budget is --target-fraction of the window less --reserve.
    #[arg(long, value_name = "W", value_parser = parse_tokens)]
    pub window: Option<u64>,
    /// Tokens of the window kept free for the answer.
    #[arg(long, value_name = "R", default_value = "16000", requires = "window", value_parser = parse_tokens)]
    pub reserve: u64,
    /// The share of the usable window (--window less --reserve) to aim for.
    #[arg(long = "target-fraction", alias = "target", value_name = "F", default_value = "0.5",
          value_parser = parse_fraction, requires = "window")]
    pub target_fraction: f64,
}

/// What a compaction keeps verbatim and how big its summary may be (`compact`, `plan`).
#[derive(Debug, Args)]
pub struct CutArgs {
    /// Keep at least the last N user turns verbatim.
    #[arg(long, value_name = "N")]
    pub keep_turns: Option<usize>,
    /// Keep a verbatim tail of at most K tokens [default: what the budget leaves after the
    /// system prompt, tools, summary and first request].
    #[arg(long = "max-tail-tokens", alias = "keep-tokens", value_name = "K", value_parser = parse_tokens)]
    pub max_tail_tokens: Option<u64>,
    /// The most tokens the summary may hold (and at most half the budget).
    #[arg(long, value_name = "N", default_value = "4000", value_parser = parse_tokens)]
    pub summary_tokens: u64,
}

/// Keeping what a command removes in a store.
#[derive(Debug, Args)]
pub struct PersistArgs {
    /// Keep the original history and every removed payload, summary and report in this store
    /// (a SQLite file, or a PostgreSQL database as postgres://user@host/db), so they can be
    /// recalled, searched and exported [default: $CONTEXTFOLD_STORE_URL, else
    /// .contextfold/store.db].
    #[arg(long, value_name = "PATH|URL", num_args = 0..=1)]
    pub store: Option<Option<PathBuf>>,
    /// Append to this stored session instead of creating one (one input file).
    #[arg(long, value_name = "ID", requires = "store")]
    pub session: Option<String>,
    /// Send and store secrets as they are. By default keys, tokens and passwords are masked
    /// in the store and in what an LLM summarizer (anthropic, openai) is sent, and any left in
    /// a summary are masked; the rest of the written conversation is never changed.
    #[arg(long)]
    pub no_redact: bool,
    /// Tell the model it can get removed content back: pointers, clip markers and the summary
    /// name the `context_recall` tool (answer its calls from the store).
    #[arg(long, requires = "store")]
    pub recall_tool: bool,
}

/// The store a reading command opens.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The store: a SQLite file, or a PostgreSQL database as postgres://user@host/db
    /// [default: $CONTEXTFOLD_STORE_URL, else .contextfold/store.db].
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub store: Option<PathBuf>,
}

/// `contextfold recall`.
#[derive(Debug, Args)]
pub struct RecallArgs {
    /// The payload's ref (`cf-…`), as the pointer or the report gives it.
    #[arg(value_name = "REF")]
    pub reference: String,
    #[command(flatten)]
    pub store: StoreArgs,
}

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

const REPORT_HELP: &str = "\
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

/// `contextfold stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Conversation files (`-` for standard input; `.gz` read transparently).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file (JSON Lines) instead of a report.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}

/// `contextfold validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Conversation files (`-` for standard input).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file (JSON Lines).
    #[arg(long)]
    pub json: bool,
    /// Repair what can be repaired without inventing content, and write the result to -o.
    #[arg(long, requires = "output")]
    pub repair: bool,
    /// Where to write the repaired conversation (`-` for standard output); one input file only.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub input: InputArgs,
}

/// Output formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Target {
    /// Anthropic Messages request JSON.
    Anthropic,
    /// OpenAI Chat Completions request JSON.
    Openai,
    /// OpenAI Responses request JSON.
    Responses,
}

impl Target {
    /// The library format.
    pub fn format(self) -> Format {
        match self {
            Target::Anthropic => Format::Anthropic,
            Target::Openai => Format::OpenAi,
            Target::Responses => Format::Responses,
        }
    }
}

/// `contextfold convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The conversation file (`-` for standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The format to write.
    #[arg(long, value_enum)]
    pub to: Target,
    /// Where to write (default standard output; a `.gz` path is compressed).
    #[arg(short = 'o', long = "output", value_name = "OUT", default_value = "-")]
    pub output: PathBuf,
    /// Print a report as one JSON object (needs -o FILE): file, from, to, output, lost
    /// (each kind, count, text) and notes.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub input: InputArgs,
}

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

/// `contextfold evict`.
#[derive(Debug, Args)]
pub struct EvictArgs {
    /// The conversation file (`-` for standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Where to write the evicted conversation, in the input's format (`-` for standard
    /// output). Without it, the conversation goes to standard output when that is redirected
    /// and --json is not given; on a terminal, a report and the shape of the result are shown.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Keep the N most recent tool results (the working set).
    #[arg(long = "keep-tool-results", alias = "keep", value_name = "N", default_value = "5")]
    pub keep_tool_results: usize,
    /// Also keep the most recent tool results holding up to K tokens.
    #[arg(long = "keep-tool-tokens", alias = "keep-tokens", value_name = "K", value_parser = parse_tokens)]
    pub keep_tool_tokens: Option<u64>,
    /// Evict nothing unless at least T tokens are freed (a cache rewrite must pay for itself).
    #[arg(long, value_name = "T", value_parser = parse_tokens)]
    pub clear_at_least: Option<u64>,
    /// Stop evicting once the conversation holds at most T tokens.
    #[arg(long = "target-tokens", alias = "target", value_name = "T", value_parser = parse_tokens)]
    pub target_tokens: Option<u64>,
    /// Which agent's tool names to recognise.
    #[arg(long, default_value = "auto", value_parser = parse_preset,
          help = "Which agent's tool names to recognise: auto, claude-code, codex, openhands, swe-agent, generic")]
    pub preset: Preset,
    /// Never evict the latest read of this path (repeatable).
    #[arg(long = "pin", value_name = "PATH")]
    pub pinned_paths: Vec<String>,
    /// Never evict results of this tool (repeatable).
    #[arg(long = "exclude-tool", value_name = "NAME")]
    pub exclude_tools: Vec<String>,
    /// Also clear string arguments of tool calls above T tokens (e.g. the content of a Write).
    #[arg(long, value_name = "T")]
    pub clear_inputs_over: Option<u64>,
    /// Drop thinking blocks of all but the last N user turns (never in the current tool loop).
    #[arg(long, value_name = "N")]
    pub keep_thinking_turns: Option<usize>,
    /// Also clip any tool output still over T tokens (at least 96; the newest included) to its
    /// first and last lines, with a marker naming its ref [default: no clipping].
    #[arg(long, value_name = "T", value_parser = parse_tokens)]
    pub max_tool_output: Option<u64>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub persist: PersistArgs,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}

/// `contextfold render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The conversation file (`-` for standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The most tokens the transcript may hold.
    #[arg(long, value_name = "T", default_value = "20000")]
    pub budget: u64,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}

/// `contextfold compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Conversation files or directories of them (`-` for standard input).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Where to write the compacted conversation (one input file).
    #[arg(short = 'o', long = "output", value_name = "OUT", conflicts_with = "out_dir")]
    pub output: Option<PathBuf>,
    /// Write each compacted conversation into DIR under its own file name.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// auto (evict first, summarize only if needed), evict, or summarize.
    #[arg(long, default_value = "auto", value_parser = parse_strategy)]
    pub strategy: Strategy,
    #[command(flatten)]
    pub cut: CutArgs,
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Clip a single tool output over T tokens (at least 96) [default: 10% of the budget].
    #[arg(long, value_name = "T", value_parser = parse_tokens)]
    pub max_tool_output: Option<u64>,
    /// Never clip tool outputs, even when the result stays over the budget.
    #[arg(long, conflicts_with = "max_tool_output")]
    pub no_clip: bool,
    /// Write LLM summaries in this language.
    #[arg(long, value_name = "LANGUAGE")]
    pub language: Option<String>,
    /// Tell the LLM summarizer what to pay attention to.
    #[arg(long, value_name = "TEXT")]
    pub focus: Option<String>,
    /// Report what would be done; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (one object per file, JSON Lines).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub persist: PersistArgs,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}

/// `contextfold replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Session files or directories of them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The model's context window; several, comma-separated, for one table each.
    #[arg(long, value_name = "W", value_delimiter = ',', required = true, value_parser = parse_tokens)]
    pub window: Vec<u64>,
    /// Tokens of the window kept free for the answer.
    #[arg(long, value_name = "R", default_value = "4000", value_parser = parse_tokens)]
    pub reserve: u64,
    /// Strategies to compare, comma-separated [default: all of them].
    #[arg(long, value_delimiter = ',')]
    pub strategies: Option<Vec<String>>,
    /// Prices: sonnet, haiku, opus, or IN,OUT in dollars per million tokens.
    #[arg(long, default_value = "sonnet")]
    pub price: String,
    /// Bill every input token at the full price (no prompt cache).
    #[arg(long)]
    pub no_cache: bool,
    /// Send an LLM summarizer secrets as they are; by default keys, tokens and passwords in
    /// what it is sent are masked.
    #[arg(long)]
    pub no_redact: bool,
    /// contextfold compacts when the next request reaches this share of the usable window.
    #[arg(long, value_name = "F", default_value = "0.8", value_parser = parse_fraction)]
    pub trigger: f64,
    /// contextfold compacts to this share of the usable window.
    #[arg(long = "target-fraction", alias = "target", value_name = "F", default_value = "0.3",
          value_parser = parse_fraction)]
    pub target_fraction: f64,
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Print the results as JSON: one object per window and strategy, summed over files.
    #[arg(long)]
    pub json: bool,
    /// Also write one CSV row per file, window and strategy.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write an SVG chart: request tokens per call of the first file and total cost, per window.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Also write every request as sent: DIR/<window>/<strategy>/<file stem>.jsonl, one JSON
    /// line per call (i, messages, compacted, summarizer_calls, summarizer_input_tokens,
    /// summarizer_output_tokens).
    #[arg(long, value_name = "DIR")]
    pub dump_requests: Option<PathBuf>,
    #[command(flatten)]
    pub counting: CountingArgs,
    #[command(flatten)]
    pub input: InputArgs,
}

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
    #[arg(long, value_name = "F", default_value = "0.3", value_parser = parse_fraction)]
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

/// `contextfold ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// The address to serve the dashboard on: a loopback address (the dashboard has no
    /// token of its own).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8788")]
    pub listen: std::net::SocketAddr,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `contextfold mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub store: StoreArgs,
}

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

fn parse_log_format(name: &str) -> Result<contextfold_serve::LogFormat, String> {
    name.parse().map_err(|err| format!("{err}"))
}

/// A duration as people write one (`30d`, `12h`, `1h 30m`): at least a second.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|err| format!("{err} (write it like 30d, 12h or 90m)"))?;
    if duration.as_secs() == 0 {
        return Err("it must be at least a second".into());
    }
    Ok(duration)
}

fn parse_strategy(name: &str) -> Result<Strategy, String> {
    name.parse().map_err(|err| format!("{err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn arguments_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn token_counts_take_k_and_m() {
        assert_eq!(parse_tokens("16000"), Ok(16_000));
        assert_eq!(parse_tokens("16k"), Ok(16_000));
        assert_eq!(parse_tokens("200K"), Ok(200_000));
        assert_eq!(parse_tokens("1m"), Ok(1_000_000));
        for bad in ["", "k", "16kb", "-1", "1.5k", "99999999999999999999m"] {
            assert!(parse_tokens(bad).is_err(), "{bad}");
        }
        let windows = match Cli::try_parse_from(["contextfold", "replay", "a.json", "--window", "16k,32000"]) {
            Ok(Cli { command: Command::Replay(replay), .. }) => replay.window,
            other => panic!("{other:?}"),
        };
        assert_eq!(windows, [16_000, 32_000]);
    }

    #[test]
    fn byte_counts_take_k_m_and_g() {
        assert_eq!(parse_bytes("1000"), Ok(1_000));
        assert_eq!(parse_bytes("500k"), Ok(500_000));
        assert_eq!(parse_bytes("256M"), Ok(256_000_000));
        assert_eq!(parse_bytes("2g"), Ok(2_000_000_000));
        for bad in ["", "0", "0k", "m", "1.5m", "-1", "5 mb", "99999999999999999999g"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wrap_takes_the_proxy_flags_before_the_agent_and_passes_the_rest() {
        let parsed = |args: &[&str]| match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(Command::Wrap(wrap)) => wrap,
            other => panic!("{other:?}"),
        };
        let wrap =
            parsed(&["contextfold", "wrap", "--window", "100k", "--no-store", "claude", "-p", "hi", "--window", "x"]);
        assert_eq!((wrap.serve.window, wrap.serve.no_store), (Some(100_000), true));
        let Agent::Claude(agent) = wrap.agent else { panic!("claude") };
        assert_eq!(agent.args, ["-p", "hi", "--window", "x"]);
        let wrap = parsed(&["contextfold", "wrap", "--store", "s.db", "codex", "exec", "--json", "go"]);
        assert_eq!(wrap.serve.store, Some(Some(PathBuf::from("s.db"))));
        assert!(matches!(wrap.agent, Agent::Codex(agent) if agent.args == ["exec", "--json", "go"]));
        assert!(
            matches!(parsed(&["contextfold", "wrap", "claude"]).agent, Agent::Claude(agent) if agent.args.is_empty())
        );
        assert!(Cli::try_parse_from(["contextfold", "wrap"]).is_err(), "an agent is required");
        assert!(Cli::try_parse_from(["contextfold", "wrap", "vim"]).is_err(), "only the known agents");
    }

    #[test]
    fn repair_needs_an_output() {
        let err = Cli::try_parse_from(["contextfold", "validate", "a.json", "--repair"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn store_defaults_when_given_without_a_path() {
        let parsed = |args: &[&str]| match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(Command::Compact(compact)) => compact.persist,
            other => panic!("{other:?}"),
        };
        let bare = parsed(&["contextfold", "compact", "a.json", "--store"]);
        assert_eq!(bare.store, Some(None), "the default store");
        assert!(!bare.no_redact);
        let given = parsed(&["contextfold", "compact", "a.json", "--store", "s.db", "--no-redact"]);
        assert_eq!(given.store, Some(Some(PathBuf::from("s.db"))));
        let url = parsed(&["contextfold", "compact", "a.json", "--store=postgres://ada@db/agents"]);
        assert_eq!(url.store, Some(Some(PathBuf::from("postgres://ada@db/agents"))));
        assert!(given.no_redact);
        assert_eq!(parsed(&["contextfold", "compact", "a.json"]).store, None);
        // Without a store there is nothing to append to or recall from; --no-redact also
        // concerns LLM summarizers.
        assert!(Cli::try_parse_from(["contextfold", "evict", "a.json", "--session", "s1"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "compact", "a.json", "--recall-tool"]).is_err());
        assert!(parsed(&["contextfold", "compact", "a.json", "--no-redact"]).no_redact);
        assert!(parsed(&["contextfold", "compact", "a.json", "--store", "--recall-tool"]).recall_tool);
    }

    #[test]
    fn sessions_takes_the_store_before_or_after_its_action() {
        for args in [
            ["contextfold", "sessions", "--store", "s.db", "rm", "x"],
            ["contextfold", "sessions", "rm", "x", "--store", "s.db"],
        ] {
            match Cli::try_parse_from(args).map(|cli| cli.command) {
                Ok(Command::Sessions(sessions)) => assert_eq!(sessions.store.store, Some(PathBuf::from("s.db"))),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn serve_has_the_documented_defaults() {
        let serve = match Cli::try_parse_from(["contextfold", "serve"]).map(|cli| cli.command) {
            Ok(Command::Serve(serve)) => serve,
            other => panic!("{other:?}"),
        };
        assert_eq!(serve.listen, "127.0.0.1:8787".parse().unwrap());
        assert_eq!(serve.upstream, "https://api.anthropic.com");
        assert_eq!(serve.upstream_openai, "https://api.openai.com/v1");
        assert_eq!((serve.window, serve.reserve, serve.target), (None, 16_000, 0.3));
        assert_eq!(serve.max_body, 512 * 1024 * 1024);
        assert_eq!((serve.idle_timeout, serve.upstream_timeout, serve.max_sessions), (300, 600, 1_000));
        assert_eq!(serve.log_format, contextfold_serve::LogFormat::Text);
        assert!(serve.store.is_none() && !serve.no_store && !serve.allow_remote);
        let given = Cli::try_parse_from(["contextfold", "serve", "--window", "1m", "--log-format", "json", "--store"]);
        match given.map(|cli| cli.command) {
            Ok(Command::Serve(serve)) => {
                assert_eq!(serve.window, Some(1_000_000));
                assert_eq!(serve.log_format, contextfold_serve::LogFormat::Json);
                assert_eq!(serve.store, Some(None), "the default store");
            }
            other => panic!("{other:?}"),
        }
        let url = Cli::try_parse_from(["contextfold", "serve", "--store=postgres://ada@db/agents"]);
        match url.map(|cli| cli.command) {
            Ok(Command::Serve(serve)) => {
                assert_eq!(serve.store, Some(Some(std::path::PathBuf::from("postgres://ada@db/agents"))));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            &["contextfold", "serve", "--log-format", "xml"][..],
            &["contextfold", "serve", "--store", "--no-store"],
            &["contextfold", "serve", "--max-sessions", "0"],
            &["contextfold", "serve", "--listen", "localhost"],
            &["contextfold", "serve", "--target", "2"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_tokenizers_and_formats_are_rejected() {
        assert!(Cli::try_parse_from(["contextfold", "count", "--tokenizer", "gpt2"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "stats", "a", "--format", "xml"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "convert", "a", "--to", "claude-code"]).is_err());
    }
}
