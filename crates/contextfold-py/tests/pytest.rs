//! The Python package's pytest suite (this crate's `tests/*.py`), run against this build:
//! the extension cargo built for this test (this crate's cdylib), loaded by the python that
//! `.ci/setup.d/50-python-package.sh` prepares (`CONTEXTFOLD_PY_PYTHON`, with the agent
//! frameworks), and the `contextfold` binary of the same build for the comparisons with the
//! CLI. Skips with a notice when one is missing; fails instead when `CI` is set.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate's directory.
fn package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The build's output directory (`target/debug`), where the extension and binary are.
fn build_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.to_path_buf())
}

/// Writes `text` to standard error past the test harness's capture, so it is seen.
fn notice(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "notice: {text}");
}

/// Skips with a notice, or fails under CI.
fn missing(what: &str) {
    assert!(std::env::var_os("CI").is_none(), "CI is set but {what}");
    notice(&format!("skipped: {what}"));
}

#[test]
fn the_python_package_passes_its_pytest_suite() {
    let Some(python) = std::env::var_os("CONTEXTFOLD_PY_PYTHON") else {
        return missing("CONTEXTFOLD_PY_PYTHON is not set (source .ci/setup.d/50-python-package.sh)");
    };
    let Some(dir) = build_dir() else { return missing("the build directory cannot be found") };
    let name = format!("{}contextfold_py{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let built = dir.join(name);
    if !built.is_file() {
        return missing(&format!("the extension is not built at {}", built.display()));
    }
    let binary = dir.join(format!("contextfold{}", std::env::consts::EXE_SUFFIX));
    if !binary.is_file() {
        return missing(&format!(
            "the contextfold binary is not built at {} (run `cargo test --workspace`)",
            binary.display()
        ));
    }
    // Python loads the extension from the package's sources, where `maturin develop` puts it.
    let sources = package().join("python");
    let staged = sources.join(format!("contextfold/.native-{}.tmp", std::process::id()));
    std::fs::copy(&built, &staged).expect("copies the extension");
    std::fs::rename(&staged, sources.join("contextfold/_native.abi3.so")).expect("puts the extension in place");
    let output = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(package())
        .env("CONTEXTFOLD_BIN", &binary)
        .env("PYTHONPATH", &sources)
        .output()
        .expect("the python of CONTEXTFOLD_PY_PYTHON runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "pytest failed:\n{stdout}\n{stderr}");
    let summary = stdout.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("");
    notice(&format!("pytest (contextfold-py): {}", summary.trim_matches('=').trim()));
}
