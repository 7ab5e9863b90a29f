//! The arguments of `contextfold replay`: replaying recorded sessions under several strategies.

use super::{parse_fraction, parse_tokens, CountingArgs, InputArgs, LlmArgs};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

pub(super) const REPLAY_HELP: &str = "\
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

/// `contextfold replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Session files or directories of them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Replay only this part of the sessions, split by a fixed hash of each file name: about
    /// two thirds to tune changes on, a third to check them on.
    #[arg(long, value_enum)]
    pub part: Option<CorpusPart>,
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
    #[arg(long = "target-fraction", alias = "target", value_name = "F", default_value = "0.2",
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

/// A part of a corpus of sessions (`--part`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CorpusPart {
    /// About two thirds of the sessions, to tune changes on.
    Tuning,
    /// The other third, to check them on.
    Checking,
}
