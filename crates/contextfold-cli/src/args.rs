//! Command-line arguments ("low args"): clap structs that only validate what was typed.
//!
//! Each flag's doc comment is its `--help` text.

use clap::{Args, Parser, Subcommand, ValueEnum};
use contextfold::core::format::Format;
use contextfold::core::tokens::Tokenizer;
use std::path::PathBuf;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a conversation parses but breaks a provider rule (validate)
  2  usage or input error: unreadable file, malformed JSON (with line and column),
     unknown format, a message with an unknown role, a block missing a required field";

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
    /// Convert a conversation between the Anthropic and OpenAI formats.
    #[command(after_help = EXIT_CODES)]
    Convert(ConvertArgs),
    /// Count the tokens of a conversation, or of raw text with --text.
    #[command(after_help = EXIT_CODES)]
    Count(CountArgs),
}

/// How to read input files.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// Read input as this format instead of detecting it.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<Format>,
}

fn parse_format(name: &str) -> Result<Format, String> {
    name.parse()
}

fn parse_tokenizer(name: &str) -> Result<Tokenizer, String> {
    name.parse().map_err(|err| format!("{err}"))
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
    /// Token counter: o200k or cl100k (exact BPE), estimate (fast, calibrated), chars4.
    #[arg(long, default_value = "o200k", value_parser = parse_tokenizer)]
    pub tokenizer: Tokenizer,
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
}

impl Target {
    /// The library format.
    pub fn format(self) -> Format {
        match self {
            Target::Anthropic => Format::Anthropic,
            Target::Openai => Format::OpenAi,
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
    /// Token counter: o200k or cl100k (exact BPE), estimate (fast, calibrated), chars4.
    #[arg(long, default_value = "o200k", value_parser = parse_tokenizer)]
    pub tokenizer: Tokenizer,
    #[command(flatten)]
    pub input: InputArgs,
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
    fn repair_needs_an_output() {
        let err = Cli::try_parse_from(["contextfold", "validate", "a.json", "--repair"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn unknown_tokenizers_and_formats_are_rejected() {
        assert!(Cli::try_parse_from(["contextfold", "count", "--tokenizer", "gpt2"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "stats", "a", "--format", "xml"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "convert", "a", "--to", "claude-code"]).is_err());
    }
}
