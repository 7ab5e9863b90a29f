//! `contextfold count`: the tokens of a conversation or of raw text.

use crate::args::CountArgs;
use crate::output;
use crate::progress::Progress;
use contextfold::core::tokens::{count_conversation, Memoized};
use contextfold::core::TokenCounter;
use contextfold::input::{self, ReadOptions, Shown};
use std::process::ExitCode;

pub fn run(args: CountArgs) -> anyhow::Result<ExitCode> {
    let progress = Progress::start(&Shown(args.file.clone()).to_string());
    let counter = args.counting.tokenizer.counter();
    let tokens = if args.text {
        let report = |read| progress.read(read);
        let options = ReadOptions { progress: Some(&report), ..super::read_options(&args.input) };
        let text = input::read_text_with(&args.file, &options)?;
        progress.counting(counter).count_text(&text)
    } else {
        let conversation = super::load_showing(&args.file, &args.input, Some(&progress))?.conversation;
        if args.counting.tokenizer.is_exact() {
            let memoized = Memoized::new(counter);
            super::count_ahead(&progress.counting(&memoized), &conversation);
            count_conversation(&memoized, &conversation)
        } else {
            count_conversation(&progress.counting(counter), &conversation)
        }
    };
    drop(progress);
    output::print(&format!("{tokens}\n"))?;
    Ok(ExitCode::SUCCESS)
}
