//! One module per subcommand; each turns its arguments into library calls and prints.

mod compact;
mod convert;
mod count;
mod evict;
mod mcp;
mod plan;
mod recall;
mod render;
mod replay;
mod report;
mod search;
mod serve;
mod sessions;
mod stats;
mod store;
mod ui;
mod validate;
mod wrap;

use crate::args::{Cli, Command, InputArgs};
use crate::progress::Progress;
use contextfold::core::format::Parsed;
use contextfold::core::tokens::{count_message, Chars4, TokenCounter};
use contextfold::core::{Conversation, Message};
use contextfold::input::{self, ReadOptions};
use std::path::Path;
use std::process::ExitCode;

/// Runs the command and decides the exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
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
        Command::Report(args) => report::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Wrap(args) => wrap::run(args),
        Command::Ui(args) => ui::run(args),
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
    let parsed = input::parse(path, &text, args.format)?;
    for note in &parsed.notes {
        eprintln!("{}: note: {note}", input::Shown(path.to_path_buf()));
    }
    Ok(parsed)
}

/// Counts every message of `conversation` once, on two threads, so that a [`Memoized`]
/// `counter` then answers the command's own counting (on one thread, in the order its
/// steps need) from memory: an exact count of a large session is mostly encoding, and the
/// second core is otherwise idle. Only for exact tokenizers:
/// the others count faster than the memo hashes.
///
/// [`Memoized`]: contextfold::core::tokens::Memoized
fn count_ahead(counter: &dyn TokenCounter, conversation: &Conversation) {
    let messages = &conversation.messages;
    // Halves of about the same text: tool results make some messages far larger than others.
    let sizes: Vec<u64> = messages.iter().map(|message| count_message(&Chars4, message)).collect();
    let half = sizes.iter().sum::<u64>() / 2;
    let mut so_far = 0;
    let middle = sizes
        .iter()
        .position(|size| {
            so_far += size;
            so_far >= half
        })
        .map_or(messages.len(), |last| last + 1);
    let (first, second) = messages.split_at(middle);
    let count_all =
        |messages: &[Message]| -> u64 { messages.iter().map(|message| count_message(counter, message)).sum() };
    std::thread::scope(|scope| {
        // Without a second thread, the command's own counting does all the work.
        let other = std::thread::Builder::new().spawn_scoped(scope, || count_all(second));
        count_all(first);
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
