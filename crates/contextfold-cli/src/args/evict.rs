//! The arguments of `contextfold evict`: evicting stale tool output.

use super::{parse_preset, parse_tokens, CountingArgs, InputArgs, PersistArgs};
use clap::Args;
use contextfold::core::tools::Preset;
use std::path::PathBuf;

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
