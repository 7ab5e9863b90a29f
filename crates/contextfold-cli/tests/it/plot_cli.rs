//! End-to-end tests of `contextfold replay --plot`: the SVG is written and carries its text
//! (strategy names, the window line's label), and an unwritable path is a usage error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository's example session.
fn session() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/session.json")
}

/// A fresh scratch directory for this test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("contextfold-plot-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn replay(plot: &Path) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_contextfold"))
        .arg("replay")
        .arg(session())
        .args(["--window", "3000,6000", "--tokenizer", "estimate", "--plot"])
        .arg(plot)
        .stdin(Stdio::null())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    output
}

#[test]
fn plot_writes_an_svg_with_every_strategy_and_the_window() {
    let dir = scratch("svg");
    let path = dir.join("out.svg");
    let output = replay(&path);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let svg = std::fs::read_to_string(&path).expect("the plot was written");
    let start = svg.trim_start();
    assert!(start.starts_with("<svg") || start.starts_with("<?xml"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    for strategy in [
        "none",
        "contextfold",
        "contextfold-evict",
        "contextfold-summarize",
        "anthropic-clear",
        "mask-10",
        "codex",
        "langchain",
        "truncate",
    ] {
        assert!(svg.contains(&format!(">\n{strategy}\n<")), "no label `{strategy}`");
    }
    assert!(svg.contains("window"));
    assert!(svg.contains("session.json, window 3,000") && svg.contains("session.json, window 6,000"));
    // The cost bars are labelled relative to `none`.
    assert!(svg.contains("1.00\u{d7}"));
    // The tables still go to standard output.
    assert!(String::from_utf8_lossy(&output.stdout).contains("window 6,000 tokens"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_plot_path_is_a_usage_error() {
    let dir = scratch("unwritable");
    let path = dir.join("no-such-directory").join("out.svg");
    let output = replay(&path);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
