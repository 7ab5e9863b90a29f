//! The arguments of `contextfold convert`: converting between formats.

use super::InputArgs;
use clap::{Args, ValueEnum};
use contextfold::core::format::Format;
use std::path::PathBuf;

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
