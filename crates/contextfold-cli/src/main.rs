//! The `contextfold` command-line tool: parses arguments and calls the library.
//!
//! Exit codes: 0 success; 1 a conversation that parses but breaks a provider rule
//! (`validate`); 2 a usage or input error (unreadable file, an input over the size limit,
//! malformed JSON, unknown format, a message with an unknown role, a block missing a
//! required field).

mod args;
mod cmd;
mod config_file;
mod output;
mod plot;
mod progress;
#[cfg(test)]
mod reference;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv = match config_file::with_config(std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(err) => {
            eprintln!("contextfold: {}", output::one_sentence(&err));
            return ExitCode::from(2);
        }
    };
    let cli = args::Cli::parse_from(argv);
    match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("contextfold: {}", output::one_sentence(&err));
            ExitCode::from(2)
        }
    }
}

/// A reader that closed our stdout early (`contextfold stats … | head`) is not an error.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
