//! `contextfold render`: the transcript a summarizer reads.

use crate::args::RenderArgs;
use crate::output;
use contextfold::core::render::render;
use std::process::ExitCode;

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let parsed = super::load(&args.file, &args.input)?;
    let text = render(&parsed.conversation.messages, args.budget, args.counting.tokenizer.counter());
    output::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
