//! What the integration tests of every contextfold crate share: finding the shared test data
//! (`../shared` beside the repository, or `CONTEXTFOLD_TEST_SHARED`) and its corpus, and
//! telling when a test skips for want of it.
//!
//! A test that reads the shared folder names itself in the file
//! `CONTEXTFOLD_TEST_SHARED_READERS` names, so CI can run those tests again without the
//! folder, as on a fresh clone (see `.ci/run`). A dev-dependency only; never published.

use std::path::{Path, PathBuf};

/// A fresh directory of one test's own under the system's temporary directory, removed when
/// dropped; kept when the test is failing, to look into.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// An empty directory named `contextfold-NAME-PID-N`: its test's name, the process and a
    /// counter, so that tests running in parallel, or one helper called by several, never
    /// share one.
    pub fn new(name: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("contextfold-{name}-{}-{number}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        Scratch(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The folder of shared test data: `CONTEXTFOLD_TEST_SHARED`, or `../shared` beside the
/// repository. CI points the variable at a missing folder to run the tests that read it as
/// on a fresh clone.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("CONTEXTFOLD_TEST_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// `relative` in the [shared folder](shared_dir), or `None` after a visible notice when it is
/// absent. With `CI` set, a missing one fails the test instead. The test that asks is added
/// to the file `CONTEXTFOLD_TEST_SHARED_READERS` names, so CI knows which tests to run again
/// without the folder.
pub fn shared(relative: &str) -> Option<PathBuf> {
    if let Some(readers) = std::env::var_os("CONTEXTFOLD_TEST_SHARED_READERS") {
        use std::io::Write;
        // The harness names each test's thread after the test.
        let line = format!("{}\n", std::thread::current().name().unwrap_or("unnamed"));
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(readers).expect("the readers file");
        file.write_all(line.as_bytes()).expect("the readers file takes a line");
    }
    let path = shared_dir().join(relative);
    if path.exists() {
        return Some(path);
    }
    assert!(std::env::var_os("CI").is_none(), "CI is set but {} is missing", path.display());
    notice(&format!("skipped: {} is absent", path.display()));
    None
}

/// The shared corpus of real sessions, or `None` after a visible notice (see [`shared`]).
pub fn corpus_dir() -> Option<PathBuf> {
    shared("corpus")
}

/// The session files of the corpus in `dir`, sorted by name (its manifest left out).
pub fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the corpus lists")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json") && !path.ends_with("manifest.json"))
        .collect();
    files.sort();
    files
}

/// Writes `text` to standard error past the test harness's capture, so a skip is seen.
pub fn notice(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "notice: {text}");
}

/// Checks that each payload the compaction `reports` removed (their `items`, evicted, and
/// `clipped`) names the block of the session's `log` (its messages' JSON) it came from: the
/// block at its `message` and `block` holds the content whose ref (`ref_of`, the payload
/// hash) it carries. Returns how many were checked.
pub fn removed_blocks_are_in_the_log(
    reports: &[serde_json::Value],
    log: &[serde_json::Value],
    ref_of: impl Fn(&serde_json::Value) -> String,
) -> usize {
    let mut checked = 0;
    for report in reports {
        let removed = ["items", "clipped"].into_iter().filter_map(|list| report[list].as_array()).flatten();
        for item in removed {
            let index = |field: &str| item[field].as_u64().and_then(|index| usize::try_from(index).ok());
            let block = index("message")
                .zip(index("block"))
                .and_then(|(message, block)| log.get(message)?["content"].get(block));
            let content =
                block.map(|block| if block["type"] == "tool_use" { &block["input"] } else { &block["content"] });
            assert_eq!(
                content.map(&ref_of).as_deref(),
                item["ref"].as_str(),
                "the removed payload {item} is the log's block at its place"
            );
            checked += 1;
        }
    }
    checked
}
