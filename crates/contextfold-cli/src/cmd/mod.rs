//! One module per subcommand; each turns its arguments into library calls and prints.

mod compact;
mod convert;
mod count;
mod evict;
mod plan;
mod recall;
mod render;
mod replay;
mod search;
mod serve;
mod sessions;
mod stats;
mod store;
mod validate;

use crate::args::{Cli, Command};
use contextfold::core::format::{Format, Parsed};
use contextfold::input;
use std::path::Path;
use std::process::ExitCode;

/// Runs the command and decides the exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // An exact tokenizer's vocabulary loads on the second core while the input is read.
    if let Some(tokenizer) = cli.command.tokenizer() {
        std::thread::spawn(move || tokenizer.warm_up());
    }
    match cli.command {
        Command::Stats(args) => stats::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Count(args) => count::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Evict(args) => evict::run(args),
        Command::Render(args) => render::run(args),
        Command::Compact(args) => compact::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Recall(args) => recall::run(args),
        Command::Search(args) => search::run(args),
        Command::Sessions(args) => sessions::run(args),
        Command::Serve(args) => serve::run(args),
    }
}

/// Loads one conversation, printing the reader's notes (skipped log lines, repairs) to stderr.
fn load(path: &Path, format: Option<Format>) -> Result<Parsed, input::LoadError> {
    let parsed = input::load(path, format)?;
    for note in &parsed.notes {
        eprintln!("{}: note: {note}", input::Shown(path.to_path_buf()));
    }
    Ok(parsed)
}

/// Exit code 2 when any file failed, else `code`.
fn exit(failed: bool, code: ExitCode) -> ExitCode {
    if failed {
        ExitCode::from(2)
    } else {
        code
    }
}
