//! The command reference, `docs/reference.md`, rendered from the CLI's own help with
//! `clap-markdown`: the test fails when the committed file differs from what the arguments
//! say today, and `CONTEXTFOLD_BLESS=1` rewrites it. Hidden arguments and aliases stay out.

use crate::args::Cli;
use std::path::Path;

/// How to bring the reference up to date, as the file and a failing test say.
const REGENERATE: &str = "CONTEXTFOLD_BLESS=1 cargo test -p contextfold-cli reference";

/// The reference as the arguments give it today.
fn render() -> String {
    let options = clap_markdown::MarkdownOptions::new()
        .title("Command reference".to_string())
        .show_footer(false)
        .show_table_of_contents(true);
    let body = clap_markdown::help_markdown_custom::<Cli>(&options);
    format!(
        "<!-- Generated from the command line's own help; do not edit. To regenerate: {REGENERATE} -->\n\n{}\n",
        body.trim_end()
    )
}

#[test]
fn the_committed_reference_is_the_clis_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference.md");
    let rendered = render();
    if std::env::var_os("CONTEXTFOLD_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("docs/reference.md is writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "docs/reference.md differs from the command line's help; regenerate it with `{REGENERATE}`"
    );
}
