//! `contextfold convert`: read one format, write another.

use crate::args::ConvertArgs;
use contextfold::input;
use std::process::ExitCode;

pub fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    let parsed = super::load(&args.file, args.input.format)?;
    input::save(&args.output, &parsed.conversation, args.to.format(), parsed.layout)?;
    Ok(ExitCode::SUCCESS)
}
