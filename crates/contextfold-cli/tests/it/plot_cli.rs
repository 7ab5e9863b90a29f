//! End-to-end tests of `contextfold replay --plot`: the SVG is written and carries its text
//! (strategy names, the window line's label), and an unwritable path is a usage error.

use crate::common::scratch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository's example session.
fn session() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/session.json")
}

fn replay(plot: &Path) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_contextfold"))
        .arg("replay")
        .arg(session())
        .args(["--window", "3000,6000", "--reserve", "500", "--tokenizer", "estimate", "--plot"])
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
    let dir = scratch("plot", "svg");
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
    let dir = scratch("plot", "unwritable");
    let path = dir.join("no-such-directory").join("out.svg");
    let output = replay(&path);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `x` attribute of every `<text>` element whose content is `content`.
fn text_xs(svg: &str, content: &str) -> Vec<f64> {
    let needle = format!(">\n{content}\n<");
    svg.match_indices(&needle)
        .filter_map(|(at, _)| {
            let open = svg[..at].rfind("<text")?;
            let x = svg[open..at].split("x=\"").nth(1)?.split('"').next()?;
            x.parse().ok()
        })
        .collect()
}

/// The point lists of every polyline drawn in `stroke`.
fn polylines<'a>(svg: &'a str, stroke: &str) -> Vec<&'a str> {
    svg.split("<polyline")
        .skip(1)
        .filter(|element| element.contains(&format!("stroke=\"{stroke}\"")))
        .filter_map(|element| element.split("points=\"").nth(1)?.split('"').next())
        .collect()
}

/// Regression (`replay --plot`: the legend hid the window lines, identical curves hid each
/// other, titles were absolute paths, the dollar axis read "1.000").
#[test]
fn plot_legend_curves_titles_and_dollars_read_well() {
    let dir = scratch("plot", "legible");
    let path = dir.join("out.svg");
    let output = replay(&path);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let svg = std::fs::read_to_string(&path).expect("the plot was written");
    // The legend sits beside the chart: no strategy's name is drawn where the window lines
    // (gray, #969696) run.
    let window_end = polylines(&svg, "#969696")
        .iter()
        .flat_map(|points| points.split(' '))
        .filter_map(|point| point.split(',').next()?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    assert!(window_end > 0.0, "the window line is drawn");
    for strategy in ["none", "contextfold", "contextfold-threshold", "contextfold-summarize", "truncate"] {
        let xs = text_xs(&svg, strategy);
        assert!(!xs.is_empty(), "{strategy} is labelled");
        assert!(xs.iter().all(|x| *x > window_end), "{strategy} at {xs:?}, the window line ends at {window_end}");
    }
    // contextfold-threshold and contextfold-summarize replay the same requests here: their
    // curves are drawn with different dashes, so both show.
    let threshold = polylines(&svg, "#2CA02C");
    let summarize = polylines(&svg, "#9467BD");
    assert!(!threshold.is_empty() && !summarize.is_empty());
    assert_ne!(threshold, summarize, "identical curves drawn identically hide each other");
    // Titles name the file, not its path; dollars have two decimals.
    let session = session();
    assert!(!svg.contains(&session.display().to_string()), "an absolute path in a title");
    assert!(svg.contains("session.json, window 3,000"));
    assert!(svg.contains(">\n$0.00\n<"), "a dollar axis label");
    let three_decimals = svg.split(">\n").filter_map(|text| text.split('\n').next()).any(|text| {
        let digits: Vec<&str> = text.trim_start_matches('$').split('.').collect();
        digits.len() == 2 && digits[1].len() == 3 && digits.iter().all(|part| part.chars().all(|c| c.is_ascii_digit()))
    });
    assert!(!three_decimals, "an axis label with three decimals");
    let _ = std::fs::remove_dir_all(&dir);
}
