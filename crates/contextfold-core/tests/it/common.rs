//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// The shared corpus (`../shared/corpus` beside the repository), or `None` after a visible
/// notice when it is absent. With `CI` set, a missing corpus fails the test instead.
pub fn corpus_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(std::env::var_os("CI").is_none(), "CI is set but the shared corpus is missing at {}", dir.display());
    notice(&format!("skipped: the shared corpus is absent at {}", dir.display()));
    None
}

/// Writes `text` to standard error past the test harness's capture, so a skip is seen.
pub fn notice(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "notice: {text}");
}
