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

use crate::args::{Cli, Command, InputArgs};
use crate::progress::Progress;
use contextfold::core::format::Parsed;
use contextfold::core::tokens::{count_message, TokenCounter};
use contextfold::core::Conversation;
use contextfold::input::{self, ReadOptions};
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
fn load(path: &Path, input: &InputArgs) -> Result<Parsed, input::LoadError> {
    load_showing(path, input, None)
}

/// [`load`], showing `progress` while it reads and parses.
fn load_showing(path: &Path, args: &InputArgs, progress: Option<&Progress>) -> Result<Parsed, input::LoadError> {
    let report = |read| {
        if let Some(progress) = progress {
            progress.read(read);
        }
    };
    let options = ReadOptions { max_bytes: args.max_input_bytes, progress: Some(&report) };
    let text = input::read_text_with(path, &options)?;
    if let Some(progress) = progress {
        progress.phase("parsing");
    }
    let parsed = contextfold::core::format::parse(&text, args.format)
        .map_err(|source| input::LoadError::Format { path: input::Shown(path.to_path_buf()), source })?;
    for note in &parsed.notes {
        eprintln!("{}: note: {note}", input::Shown(path.to_path_buf()));
    }
    Ok(parsed)
}

/// Counts every message of `conversation` once, on two threads, so that a [`Memoized`]
/// `counter` then answers the command's own counting (on one thread, in the order its
/// steps need) from memory: an exact count of a large session is mostly encoding, and the
/// second core is otherwise idle once the vocabulary has loaded.
///
/// [`Memoized`]: contextfold::core::tokens::Memoized
fn count_ahead(counter: &dyn TokenCounter, conversation: &Conversation) {
    // Every other message, so that both threads get a share of each part of the session.
    let count_every_other = |first: usize| -> u64 {
        conversation.messages.iter().skip(first).step_by(2).map(|m| count_message(counter, m)).sum()
    };
    std::thread::scope(|scope| {
        // Without a second thread, the command's own counting does all the work.
        let other = std::thread::Builder::new().spawn_scoped(scope, || count_every_other(1));
        count_every_other(0);
        if let Ok(other) = other {
            let _ = other.join();
        }
    });
}

/// The read options of `args`, without progress.
fn read_options(args: &InputArgs) -> ReadOptions<'static> {
    ReadOptions { max_bytes: args.max_input_bytes, progress: None }
}

/// Exit code 2 when any file failed, else `code`.
fn exit(failed: bool, code: ExitCode) -> ExitCode {
    if failed {
        ExitCode::from(2)
    } else {
        code
    }
}
