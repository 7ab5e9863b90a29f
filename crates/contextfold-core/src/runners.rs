//! What test runners and command-line tools print when something failed, defined in one
//! place: the line naming a failing test, and the closing tally or error line that says how
//! the run ended. A failed output's first telling line is often not these (a collection
//! error, a warning, a usage text comes first), and a summary that keeps only that line
//! loses what failed.

/// A line naming a failing test, with its reason when the runner gives one.
fn names_a_failing_test(line: &str) -> bool {
    // pytest's short summary (`FAILED tests/a.py::test_b - AssertionError`), its collection
    // errors (`ERROR tests/a.py`), go's `--- FAIL: TestB`, jest's `● Suite › test`.
    (line.starts_with("FAILED ") && line.contains("::"))
        || (line.starts_with("ERROR ") && line.contains(".py"))
        || line.starts_with("--- FAIL:")
        || line.starts_with("● ")
}

/// A runner's closing line for a run that failed.
fn is_failed_tally(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let failed = lower.contains("failed") || lower.contains(" error");
    // pytest: `=== 1 failed, 50 passed, 1 warning in 2.20s ===`.
    (line.starts_with("==") && line.ends_with("==") && failed && lower.contains(" in "))
        // sympy: `tests finished: 47 passed, 4 failed, 1 skipped`; unittest: `FAILED (failures=2)`.
        || (lower.starts_with("tests finished:") && failed)
        || line.starts_with("FAILED (")
        // cargo test: `test result: FAILED. 3 passed; 1 failed`; go: `FAIL\tpkg 0.01s`.
        || line.starts_with("test result: FAILED")
        || line.starts_with("FAIL\t")
        // jest and vitest: `Tests:       1 failed, 12 passed, 13 total`, `Test Files  1 failed (3)`.
        || ((line.starts_with("Tests:") || line.starts_with("Test Files")) && failed)
}

/// A command-line tool's own error line (`Error: No such command 'x'.`, `error: …`,
/// `fatal: …`), as it prints after its usage text.
fn is_cli_error(line: &str) -> bool {
    ["Error: ", "error: ", "fatal: ", "ERROR: "].iter().any(|prefix| line.starts_with(prefix))
}

/// The lines of a failed output that say what failed, beyond its first telling line: the
/// first line naming a failing test, then the last closing tally or command-line error line;
/// each at most once, in that order.
pub fn verdict_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    let mut out = Vec::new();
    if let Some(test) = lines.iter().find(|line| names_a_failing_test(line)) {
        out.push(*test);
    }
    if let Some(end) = lines.iter().rev().find(|line| is_failed_tally(line) || is_cli_error(line)) {
        if !out.contains(end) {
            out.push(*end);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_test_and_the_closing_tally_of_each_runner() {
        let pytest = "ERROR: some warning about error handling\ncollected 51 items\n\
                      FAILED tests/lint/unittest_lint.py::test_pylint_home - AssertionError: x\n\
                      ===== 1 failed, 50 passed, 1 warning in 2.20s =====";
        assert_eq!(
            verdict_lines(pytest),
            [
                "FAILED tests/lint/unittest_lint.py::test_pylint_home - AssertionError: x",
                "===== 1 failed, 50 passed, 1 warning in 2.20s ====="
            ]
        );
        let sympy = "test_a ok\nerror in test_b\ntests finished: 47 passed, 4 failed, 1 skipped, in 3.1 seconds";
        assert_eq!(verdict_lines(sympy), ["tests finished: 47 passed, 4 failed, 1 skipped, in 3.1 seconds"]);
        let cargo = "test a ... ok\ntest b ... FAILED\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored";
        assert_eq!(verdict_lines(cargo), ["test result: FAILED. 1 passed; 1 failed; 0 ignored"]);
        let go = "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: got 1\nFAIL\nFAIL\texample.com/p\t0.01s";
        assert_eq!(verdict_lines(go), ["--- FAIL: TestParse (0.00s)", "FAIL\texample.com/p\t0.01s"]);
        let jest = "● Suite › adds\n  expect(received).toBe(expected)\nTests:       1 failed, 12 passed, 13 total";
        assert_eq!(verdict_lines(jest), ["● Suite › adds", "Tests:       1 failed, 12 passed, 13 total"]);
        let cli = "Usage: tool [OPTIONS] COMMAND\nTry 'tool --help' for help.\n\nError: No such command 'verify-pin'.";
        assert_eq!(verdict_lines(cli), ["Error: No such command 'verify-pin'."]);
        assert!(verdict_lines("all 12 tests passed\n=== 12 passed in 0.5s ===").is_empty());
        assert!(verdict_lines("").is_empty());
    }
}
