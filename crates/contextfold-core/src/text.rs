//! Text helpers every module may use: cutting text to a length, a text's first line, how a
//! tool call ended and the most telling line of a failed output, list markers.
//!
//! [`crate::extract`] builds the summary's facts from these. The independent probes of
//! [`crate::probe::raw`] (and so replay's headline recall) read failures with rules of their
//! own on purpose, never through [`outcome`] or [`error_line`]: they judge what the summary
//! kept, and a judge may not share the code it judges.

use crate::conversation::ToolResult;
use serde::Serialize;

/// The first line of `text`, cut to `max` characters.
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
    clip_chars(line, max)
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn clip_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "exit_code")]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It failed, with its exit code when known.
    Failed(Option<i64>),
    /// No result was seen.
    Unknown,
}

/// How a tool call ended, from its error flag and the exit codes agents print.
pub fn outcome(result: &ToolResult) -> Outcome {
    let text = result.text();
    let code = exit_code(&text);
    match (result.is_error(), code) {
        (_, Some(0)) => Outcome::Ok,
        (_, Some(code)) => Outcome::Failed(Some(code)),
        (true, None) => Outcome::Failed(None),
        (false, None) => Outcome::Ok,
    }
}

fn exit_code(text: &str) -> Option<i64> {
    let number_after = |marker: &str| -> Option<i64> {
        let at = text.find(marker)? + marker.len();
        let digits: String = text[at..].trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        digits.parse().ok()
    };
    number_after("<returncode>")
        .or_else(|| number_after("[Command finished with exit code"))
        .or_else(|| text.strip_prefix("Exit code").and_then(|_| number_after("Exit code")))
}

/// The exception line of each Python traceback in `text`, in order: the first line after a
/// traceback's header that is not indented.
fn exception_lines(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut in_traceback = false;
    for line in text.lines() {
        if line.trim_start().starts_with("Traceback (most recent call last)") {
            in_traceback = true;
        } else if in_traceback && !line.trim().is_empty() && !line.starts_with(char::is_whitespace) {
            found.push(line.trim());
            in_traceback = false;
        }
    }
    found
}

/// The most telling line of an error output: for a Python traceback its exception line
/// (of a chained one, the first and the last distinct one, which propagated),
/// else the first line naming an error or failure, else the first line of output (lines an
/// agent wraps output in, such as `<returncode>1</returncode>` or `Exit code 1`, skipped);
/// followed, joined by ` … `, by what a test runner or tool says failed when that line does
/// not ([`crate::runners::verdict_lines`]: the failing test, the closing tally).
pub fn error_line(text: &str) -> String {
    const CUES: [&str; 12] = [
        "error",
        "Error",
        "ERROR",
        "FAILED",
        "failed",
        "fatal",
        "panicked",
        "Exception",
        "No such file",
        "not found",
        "denied",
        "cannot",
    ];
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty() && !is_wrapper(line)).collect();
    // A chained traceback: the first exception, then the last distinct one, which is what
    // propagated (the ones between are collapsed).
    let exceptions = exception_lines(text);
    let exception = exceptions.first().copied();
    let telling = exception.or_else(|| lines.iter().find(|line| CUES.iter().any(|cue| line.contains(cue))).copied());
    let Some(telling) = telling.or(lines.first().copied()) else { return first_line(text, 200) };
    let mut line = clip_chars(telling, 200);
    if let Some(last) = exceptions.last().filter(|last| Some(**last) != exception) {
        line = format!("{line} … then {}", clip_chars(last, 150));
    }
    // What a runner or a tool says failed, when the first telling line is something else.
    for verdict in crate::runners::verdict_lines(text) {
        if !telling.contains(verdict) {
            line = format!("{line} … {}", clip_chars(verdict, 150));
        }
    }
    line
}

/// Whether `line` is one an agent's harness wraps output in (`<returncode>1</returncode>`,
/// `<output>`, `Exit code 1`, `[Command finished with exit code 1]`), not output: a line
/// that only opens with a tag, such as `<tool_use_error>String to replace not found`, is
/// the error itself.
fn is_wrapper(line: &str) -> bool {
    ["<returncode>", "<output", "</output", "[Command finished"].iter().any(|wrapper| line.starts_with(wrapper))
        || (line.starts_with("Exit code") && line.len() <= 16)
}

/// `text` without a leading list marker (`- `, `* `, `1. `), so it never becomes a doubled
/// bullet.
pub fn strip_list_marker(text: &str) -> &str {
    let trimmed = text.trim_start();
    for marker in ["- ", "* ", "+ ", "• "] {
        if let Some(rest) = trimmed.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    match trimmed[digits..].strip_prefix(". ").or_else(|| trimmed[digits..].strip_prefix(") ")) {
        Some(rest) if digits > 0 && digits < 3 => rest.trim_start(),
        _ => trimmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_line_opening_with_a_tag_is_the_error_and_wrappers_are_not() {
        let edit =
            "<tool_use_error>String to replace not found in file.\nString: # pytest\n.hypothesis/</tool_use_error>";
        assert_eq!(error_line(edit), "<tool_use_error>String to replace not found in file.");
        let shell = "<returncode>1</returncode>\n<output>\n<stdin>:1: SyntaxError: invalid syntax\n</output>";
        assert_eq!(error_line(shell), "<stdin>:1: SyntaxError: invalid syntax");
        assert_eq!(error_line("Exit code 2\nmake: *** [all] Error 2"), "make: *** [all] Error 2");
        let pytest = "Exit code 1\nERROR: warning: error handling\nFAILED tests/a.py::test_b - AssertionError\n\
                      === 1 failed, 50 passed in 2.20s ===";
        assert_eq!(
            error_line(pytest),
            "ERROR: warning: error handling … FAILED tests/a.py::test_b - AssertionError … === 1 failed, 50 passed in 2.20s ==="
        );
    }

    #[test]
    fn a_chained_traceback_is_told_by_its_first_exception_and_the_one_that_propagated() {
        let single =
            "Traceback (most recent call last):\n  File \"a.py\", line 1\n    x()\nNameError: name 'x' is not defined";
        assert_eq!(error_line(single), "NameError: name 'x' is not defined");
        let chained = "Traceback (most recent call last):\n  File \"a.py\", line 2, in load\n    open(p)\n\
                       FileNotFoundError: [Errno 2] No such file or directory: 'conf.toml'\n\n\
                       During handling of the above exception, another exception occurred:\n\n\
                       Traceback (most recent call last):\n  File \"a.py\", line 4, in main\n    load()\n\
                       RuntimeError: no configuration\n";
        assert_eq!(
            error_line(chained),
            "FileNotFoundError: [Errno 2] No such file or directory: 'conf.toml' … then RuntimeError: no configuration"
        );
        // The same exception raised again is told once.
        let again = chained.replace(
            "RuntimeError: no configuration",
            "FileNotFoundError: [Errno 2] No such file or directory: 'conf.toml'",
        );
        assert_eq!(error_line(&again), "FileNotFoundError: [Errno 2] No such file or directory: 'conf.toml'");
    }
}
