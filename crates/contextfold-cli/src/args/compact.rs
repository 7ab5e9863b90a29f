//! The arguments of `contextfold compact`: compacting to a token budget.

use super::{parse_strategy, parse_tokens, CountingArgs, CutArgs, InputArgs, LlmArgs, PersistArgs, TargetArgs};
use clap::Args;
use contextfold::compactor::Strategy;
use std::path::PathBuf;

pub(super) const COMPACT_HELP: &str = "\
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
