//! `contextfold count`: the tokens of a conversation or of raw text.

use crate::args::CountArgs;
use crate::output;
use contextfold::core::tokens::count_conversation;
use contextfold::input;
use std::process::ExitCode;

pub fn run(args: CountArgs) -> anyhow::Result<ExitCode> {
    let counter = args.counting.tokenizer.counter();
    let tokens = if args.text {
        counter.count_text(&input::read_text(&args.file)?)
    } else {
        count_conversation(counter, &super::load(&args.file, args.input.format)?.conversation)
    };
    output::print(&format!("{tokens}\n"))?;
    Ok(ExitCode::SUCCESS)
}
